// verify/compare.h - the one comparison: GPU output against a CPU reference.
//
// An element is bad when !(|gpu - ref| <= tol * (|ref| + scale)); NaN and Inf
// are always bad (the test is written so that NaN fails it). A check passes
// when no element is bad AND the relative L2 error ||gpu - ref|| / ||ref|| is
// within tol. `scale` is the magnitude below which errors count as absolute
// (by default the RMS of the reference), so sums that cancel to ~0 are judged
// against the size of their terms, not against 0.
//
// Sums and maxima run over fixed blocks of kReduceBlock elements on all host
// cores (verify/parallel.h), combined in block order: the same bits for any
// thread count.
//
// check_exact / check_same_bits: the exact check (tolerance 0), for results that
// must be the very bits of the reference (the same operations in the same order,
// or exact integer sums).
//
// compare_two_approximations: two results that both approximate one exact result
// (a kernel against cuBLAS, a fused attention against the standard one), neither of
// them the truth: each element is allowed the sum of both sides' allowances, scaled
// by its own row.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>
#include "common/report.h"
#include "verify/parallel.h"

namespace verify {

// What a block of compared elements contributes to a Check: sums of squares of the differences
// and of the reference, the largest difference, the first bad index and how many were bad.
struct Tally {
    double diff2 = 0, ref2 = 0, max_abs = 0;
    int64_t first_bad = -1;
    uint64_t bad = 0;

    // Blocks are merged in order, so the sums are the same for any thread count. The first bad
    // index is the smallest one seen, whatever order the pieces (chunks) were added in.
    void merge(const Tally& t) {
        diff2 += t.diff2;
        ref2 += t.ref2;
        if (t.max_abs > max_abs || std::isnan(t.max_abs)) max_abs = t.max_abs;
        if (t.first_bad >= 0 && (first_bad < 0 || t.first_bad < first_bad)) first_bad = t.first_bad;
        bad += t.bad;
    }

    // The Check of n compared elements against the rel-L2 tolerance tol.
    lesson::Check check(const std::string& what, uint64_t n, double tol) const {
        lesson::Check c;
        c.what = what;
        c.checked = n;
        c.rel_l2 = ref2 > 0 ? std::sqrt(diff2) / std::sqrt(ref2) : (diff2 == 0 ? 0.0 : INFINITY);
        if (std::isnan(diff2)) c.rel_l2 = NAN;
        c.max_abs = max_abs;
        c.first_bad = first_bad;
        c.bad_count = bad;
        c.tol = tol;
        c.pass = n > 0 && bad == 0 && c.rel_l2 <= tol;  // nothing compared is not a pass
        return c;
    }
};

// Accumulates a comparison over several pieces (chunks), then reports it.
class Comparer {
public:
    Comparer(double tol, double scale) : tol_(tol), scale_(scale) {}

    // gpu[i] vs ref[i] for i < n; `offset` is the global index of element 0.
    template <class G, class R>
    void add(const G* gpu, const R* ref, uint64_t n, uint64_t offset = 0) {
        add_computed(gpu, n, offset, [ref, offset](uint64_t g) { return static_cast<double>(ref[g - offset]); });
    }

    // gpu[i] vs ref_at(offset + i) for i < n: the reference computed element by element as it
    // is compared (from the global index alone), with no buffer to hold it.
    template <class G, class RefAt>
    void add_computed(const G* gpu, uint64_t n, uint64_t offset, const RefAt& ref_at) {
        const std::vector<Tally> parts = block_partials<Tally>(
            n, kReduceBlock, [&](uint64_t begin, uint64_t end) { return tally(gpu, ref_at, begin, end, offset); });
        for (const Tally& t : parts) total_.merge(t);
        n_ += n;
    }

    // Everything another Comparer has accumulated, as if its pieces had been added here: its sums
    // are added to these as one block's. Where it holds one block (a single add() of at most
    // kReduceBlock elements), that is the very block add() would have merged, so pieces compared
    // on separate threads, each in a Comparer of its own, then added in order give the same bits.
    void add(const Comparer& part) {
        total_.merge(part.total_);
        n_ += part.n_;
    }

    lesson::Check result(const std::string& what) const { return total_.check(what, n_, tol_); }
    // The same, when the pieces added must cover `expected` elements: a piece never compared (a
    // chunk loop that stops one short) fails the check instead of passing unseen.
    lesson::Check result(const std::string& what, uint64_t expected) const {
        if (n_ == expected) return result(what);
        lesson::Check c =
            result(what + " (compared " + std::to_string(n_) + " of " + std::to_string(expected) + " elements)");
        c.pass = false;
        return c;
    }

private:
    // Elements [begin, end) of one add(): the single-threaded comparison loop.
    template <class G, class RefAt>
    Tally tally(const G* gpu, const RefAt& ref_at, uint64_t begin, uint64_t end, uint64_t offset) const {
        Tally t;
        for (uint64_t i = begin; i < end; ++i) {
            double g = static_cast<double>(gpu[i]);
            double r = ref_at(offset + i);
            double d = g - r;
            t.diff2 += d * d;
            t.ref2 += r * r;
            double ad = std::fabs(d);
            if (ad > t.max_abs || std::isnan(ad)) t.max_abs = ad;  // once NaN, stays NaN: NaN never passes
            if (!(ad <= tol_ * (std::fabs(r) + scale_)) || !std::isfinite(g)) {
                if (t.first_bad < 0) t.first_bad = static_cast<int64_t>(offset + i);
                ++t.bad;
            }
        }
        return t;
    }

    double tol_, scale_;
    Tally total_;
    uint64_t n_ = 0;
};

// Root mean square of ref[0..n): block sums of squares, added in block order.
template <class R>
double rms(const R* ref, uint64_t n) {
    const std::vector<double> parts = block_partials<double>(n, kReduceBlock, [&](uint64_t begin, uint64_t end) {
        double s = 0;
        for (uint64_t i = begin; i < end; ++i) s += static_cast<double>(ref[i]) * static_cast<double>(ref[i]);
        return s;
    });
    double s = 0;
    for (double p : parts) s += p;
    return n ? std::sqrt(s / double(n)) : 0.0;
}

// One-shot comparison of n elements; scale < 0 means "the RMS of ref".
template <class G, class R>
lesson::Check compare(const G* gpu, const R* ref, uint64_t n, double tol, const std::string& what,
                      double scale = -1.0) {
    Comparer c(tol, scale >= 0 ? scale : rms(ref, n));
    c.add(gpu, ref, n);
    return c.result(what);
}

// Two approximations a and b of one exact result t, stored as rows of `row` elements (the last row
// may be shorter), neither of them exact: a rung against cuBLAS, the fused attention against the
// standard one. compare() would hold a - b to ONE side's allowance, tol * (|b| + rms of all of b):
// too little twice over. Both sides carry their own error (bf16 rounding of P and of the output on
// each side), and a global rms is the wrong scale where rows differ in size: row i of a causal
// attention averages i + 1 values of V, so its elements are about 1/sqrt(i + 1) of |V|, while its
// rounding error is a fraction 2^-8 of the terms it sums. Early rows are far above the rms of all
// rows, late rows below it.
//
// Each side x is held to the per-element criterion of compare() with the scale taken per row:
//     |x - t| <= tol * (|t| + s),  s = the rms of t's row,  and  ||x - t|| <= tol * ||t||.
// Where a and b both meet it:
//     |a - b| <= |a - t| + |t - b| <= 2 tol (|t| + s);
//     |t| <= (|a| + |b|) / 2 + tol (|t| + s), so |t| + s <= ((|a| + |b|) / 2 + s) / (1 - tol);
//     a row's rms moves by at most the rms of its error, at most 2 tol s: s <= min(s_a, s_b) / (1 - 2 tol);
// so every element passes
//     |a - b| <= tol / (1 - tol) * (|a| + |b| + 2 min(s_a, s_b) / (1 - 2 tol))
// (the two sides' allowances added, written with what the comparison holds), and
//     ||a - b|| <= 2 tol ||t|| <= 2 tol / (1 - tol) * ||b||,
// the rel-L2 tolerance of the result (Check::tol). The smaller of the two rows' rms is taken: a wrong
// side cannot widen its own tolerance by being large. NaN and Inf on either side never pass; nothing
// compared is no pass. rel_l2 and max_abs are ||a - b|| / ||b|| and max |a - b|. Rows are compared
// in blocks of whole rows on all host cores, the sums added in block order: the same bits for any
// thread count.
template <class A, class B>
lesson::Check compare_two_approximations(const A* a, const B* b, uint64_t n, uint64_t row, double tol,
                                         const std::string& what) {
    row = row == 0 ? std::max<uint64_t>(n, 1) : row;
    const double k = tol / (1.0 - tol), k_row = 2.0 / (1.0 - 2.0 * tol);
    const uint64_t grain = std::max<uint64_t>(1, kReduceBlock / row) * row;  // whole rows per block
    const std::vector<Tally> parts = block_partials<Tally>(n, grain, [&](uint64_t begin, uint64_t end) {
        Tally t;
        for (uint64_t r0 = begin; r0 < end; r0 += row) {
            const uint64_t r1 = std::min(end, r0 + row);
            double sa = 0, sb = 0;  // over the finite elements: a NaN fails alone, not its whole row
            for (uint64_t i = r0; i < r1; ++i) {
                const double x = static_cast<double>(a[i]), y = static_cast<double>(b[i]);
                if (std::isfinite(x)) sa += x * x;
                if (std::isfinite(y)) sb += y * y;
            }
            const double row_term = k_row * std::sqrt(std::min(sa, sb) / static_cast<double>(r1 - r0));
            for (uint64_t i = r0; i < r1; ++i) {
                const double x = static_cast<double>(a[i]), y = static_cast<double>(b[i]), d = x - y;
                t.diff2 += d * d;
                t.ref2 += y * y;
                const double ad = std::fabs(d);
                if (ad > t.max_abs || std::isnan(ad)) t.max_abs = ad;  // once NaN, stays NaN
                if (!(ad <= k * (std::fabs(x) + std::fabs(y) + row_term)) || !std::isfinite(x) || !std::isfinite(y)) {
                    if (t.first_bad < 0) t.first_bad = static_cast<int64_t>(i);
                    ++t.bad;
                }
            }
        }
        return t;
    });
    Tally total;
    for (const Tally& t : parts) total.merge(t);
    return total.check(what, n, 2.0 * tol / (1.0 - tol));
}

// --inject-fault: corrupts one element (chosen from the seed) by far more than
// any tolerance, so a correct check must report FAIL. Returns the index.
template <class T>
uint64_t inject_fault(T* data, uint64_t n, uint64_t seed) {
    if (n == 0) return 0;
    uint64_t i = (seed * 2654435761ull + n / 3) % n;
    data[i] = static_cast<T>(static_cast<double>(data[i]) * 2.0 + 1.0);
    std::printf("inject-fault: corrupted output element %llu before verification\n", (unsigned long long)i);
    return i;
}

// An exact check: got[i] must be the very bits of expect(i) for every i < n (tolerance 0; -0 is
// not +0), and finite: a NaN or Inf never passes, not even against the same bits. rel_l2 and
// max_abs (a NaN sticks) say how far apart the values are where they differ. Nothing checked
// (n = 0) is no pass.
template <class T, class Expect>
lesson::Check check_exact(const T* got, uint64_t n, const Expect& expect, const std::string& what) {
    struct Tally {
        uint64_t bad = 0;
        int64_t first = -1;
        double max_abs = 0, diff2 = 0, ref2 = 0;
    };
    // Element i passes when it is the very bits it should be, and finite.
    auto bad = [&](uint64_t i, const T& want) {
        return std::memcmp(&got[i], &want, sizeof(T)) != 0 || !std::isfinite(double(got[i]));
    };
    // First the common case, cheaply: every element passes. Only where one does not are the
    // error sums computed (with none, rel_l2 and max_abs are 0).
    const std::vector<uint64_t> mismatches = block_partials<uint64_t>(n, kReduceBlock, [&](uint64_t b, uint64_t e) {
        uint64_t m = 0;
        for (uint64_t i = b; i < e; ++i) m += bad(i, expect(i));
        return m;
    });
    uint64_t total = 0;
    for (uint64_t m : mismatches) total += m;
    const std::vector<Tally> parts =
        total == 0 ? std::vector<Tally>() : block_partials<Tally>(n, kReduceBlock, [&](uint64_t b, uint64_t e) {
            Tally t;
            for (uint64_t i = b; i < e; ++i) {
                const T want = expect(i);
                const double d = double(got[i]) - double(want);
                t.ref2 += double(want) * double(want);
                if (!bad(i, want)) continue;
                t.diff2 += d * d;
                if (!std::isnan(t.max_abs) && !(std::fabs(d) <= t.max_abs)) t.max_abs = std::fabs(d);  // NaN sticks
                if (t.first < 0) t.first = int64_t(i);
                ++t.bad;
            }
            return t;
        });
    lesson::Check c;
    c.what = what;
    c.checked = n;
    double diff2 = 0, ref2 = 0;
    c.max_abs = 0;
    for (const Tally& t : parts) {
        c.bad_count += t.bad;
        diff2 += t.diff2;
        ref2 += t.ref2;
        if (!std::isnan(c.max_abs) && !(t.max_abs <= c.max_abs)) c.max_abs = t.max_abs;
        if (t.first >= 0 && c.first_bad < 0) c.first_bad = t.first;  // blocks come in index order
    }
    c.rel_l2 = ref2 > 0 ? std::sqrt(diff2 / ref2) : (diff2 == 0 ? 0.0 : INFINITY);
    if (std::isnan(c.max_abs)) c.rel_l2 = NAN;
    c.tol = 0;
    c.pass = n > 0 && c.bad_count == 0;
    return c;
}

// got[0..n) and want[0..n) the very same bits (e.g. two ways of computing one result).
template <class T>
lesson::Check check_same_bits(const T* got, const T* want, uint64_t n, const std::string& what) {
    return check_exact(
        got, n, [&](uint64_t i) { return want[i]; }, what);
}

}  // namespace verify
