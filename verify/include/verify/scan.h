// verify/scan.h - CPU references for lesson 15 (prefix sums and stream
// compaction), the error bound of a float scan, and CPU models of the two
// single-block scan algorithms (their work, steps and shared-memory bank
// conflicts). Host-only, no CUDA.
//
// Integer scans are exact. int32 inputs are summed in uint32 arithmetic, so a
// sum that overflows wraps around modulo 2^32, as a GPU's 32-bit adds do.
// (Signed overflow is undefined in C++, unsigned wrap-around is defined; the
// bits are the same.) Float scans are compared with a double-precision
// reference under a bound derived from how many roundings the GPU's order of
// additions puts on each input (scan_float_tolerance).
//
// The float check within a bound cannot see an error smaller than the bound,
// and the bound grows along the array. check_exact_float_scan is the exact
// test of the float code: integer-valued inputs whose every partial sum is a
// float (verify/reduction.h, fill_exact_floats), so every scan order is exact
// and every element must be the very bits of the integer scan.
//
// The references run on all host cores in fixed blocks (verify/parallel.h): a
// block's sums, then the blocks' running totals, then each block again. The
// block size is fixed, so the double reference has the same bits on any
// thread count.
#pragma once
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>
#include "common/report.h"
#include "verify/compare.h"
#include "verify/parallel.h"
#include "verify/random.h"
#include "verify/reduction.h"

namespace verify {

// ---------------------------------------------------------------- inputs

// The integers lesson 15 scans: uniform in [-1000, 1000], a pure function of
// (seed, index). Prefix sums of n of them stay within a few times
// 577 * sqrt(n) (a random walk), far inside int32 for any n the lesson allows.
inline int32_t scan_int_value(uint64_t seed, uint64_t index) {
    const uint64_t h = splitmix64(seed * 0x632BE59BD9B4E019ull + splitmix64(index ^ 0x5CA7ull));
    return static_cast<int32_t>((h >> 32) % 2001u) - 1000;
}

inline void fill_scan_ints(int32_t* p, uint64_t n, uint64_t seed) {
    parallel_blocks(n, items_per_block(1), [=](uint64_t begin, uint64_t end) {
        for (uint64_t i = begin; i < end; ++i) p[i] = scan_int_value(seed, i);
    });
}

// ---------------------------------------------------------------- references

// Elements per block of the parallel references (a fixed number: it decides
// the order of the double additions).
constexpr uint64_t kScanBlock = uint64_t(1) << 20;

// out[i] = in[s] + in[s+1] + ... + in[i] in uint32 arithmetic (wrap-around
// defined), where s is the first element of i's segment. segment = 0: one
// segment, the whole array. segment = L: the sum restarts every L elements
// (the per-tile scans of lesson 15's rungs 1-3).
inline void inclusive_scan_reference(const int32_t* in, int32_t* out, uint64_t n, uint64_t segment = 0) {
    auto scan_range = [=](uint64_t begin, uint64_t end, uint32_t carry) {
        uint32_t s = carry;
        if (segment == 0) {
            for (uint64_t i = begin; i < end; ++i) {
                s += static_cast<uint32_t>(in[i]);
                out[i] = static_cast<int32_t>(s);
            }
            return;
        }
        for (uint64_t seg = begin; seg < end; seg += segment) {  // blocks start on a segment
            s = 0;
            for (uint64_t i = seg; i < std::min(end, seg + segment); ++i) {
                s += static_cast<uint32_t>(in[i]);
                out[i] = static_cast<int32_t>(s);
            }
        }
    };
    if (segment > 0) {  // blocks of whole segments: each block starts from 0
        const uint64_t grain = segment * std::max<uint64_t>(1, kScanBlock / segment);
        parallel_blocks(n, grain, [&](uint64_t begin, uint64_t end) { scan_range(begin, end, 0); });
        return;
    }
    const std::vector<uint32_t> sums = block_partials<uint32_t>(n, kScanBlock, [=](uint64_t begin, uint64_t end) {
        uint32_t s = 0;
        for (uint64_t i = begin; i < end; ++i) s += static_cast<uint32_t>(in[i]);
        return s;
    });
    std::vector<uint32_t> carry(sums.size());
    uint32_t running = 0;
    for (size_t b = 0; b < sums.size(); ++b) {
        carry[b] = running;
        running += sums[b];
    }
    parallel_blocks(n, kScanBlock,
                    [&](uint64_t begin, uint64_t end) { scan_range(begin, end, carry[begin / kScanBlock]); });
}

// The double-precision inclusive scan of float inputs.
inline void inclusive_scan_reference(const float* in, double* out, uint64_t n) {
    const std::vector<double> sums = block_partials<double>(n, kScanBlock, [=](uint64_t begin, uint64_t end) {
        double s = 0;
        for (uint64_t i = begin; i < end; ++i) s += static_cast<double>(in[i]);
        return s;
    });
    std::vector<double> carry(sums.size());
    double running = 0;
    for (size_t b = 0; b < sums.size(); ++b) {
        carry[b] = running;
        running += sums[b];
    }
    parallel_blocks(n, kScanBlock, [&](uint64_t begin, uint64_t end) {
        double s = carry[begin / kScanBlock];
        for (uint64_t i = begin; i < end; ++i) {
            s += static_cast<double>(in[i]);
            out[i] = s;
        }
    });
}

// The most additions any input goes through in inclusive_scan_reference(float):
// its block's running sum, then the running sum of the block totals.
inline uint64_t reference_rounding_depth(uint64_t n) { return kScanBlock + n / kScanBlock + 2; }

// Stream compaction: the elements with in[i] > threshold, in their order.
// Writes them to out (room for n) and returns how many there are.
inline uint64_t compact_reference(const int32_t* in, uint64_t n, int32_t threshold, int32_t* out) {
    const std::vector<uint64_t> counts = block_partials<uint64_t>(n, kScanBlock, [=](uint64_t begin, uint64_t end) {
        uint64_t c = 0;
        for (uint64_t i = begin; i < end; ++i) c += in[i] > threshold;
        return c;
    });
    std::vector<uint64_t> first(counts.size());
    uint64_t total = 0;
    for (size_t b = 0; b < counts.size(); ++b) {
        first[b] = total;
        total += counts[b];
    }
    parallel_blocks(n, kScanBlock, [&](uint64_t begin, uint64_t end) {
        uint64_t o = first[begin / kScanBlock];
        for (uint64_t i = begin; i < end; ++i)
            if (in[i] > threshold) out[o++] = in[i];
    });
    return total;
}

// ---------------------------------------------------------------- checks

namespace detail {
struct ScanTally {
    double diff2 = 0, ref2 = 0, max_abs = 0;
    int64_t first_bad = -1;
    uint64_t bad = 0;
    void element(uint64_t i, double g, double r, bool bad_here) {
        const double d = g - r;
        ref2 += r * r;
        if (d != 0) {  // d == 0 adds +0 to diff2 (never -0) and cannot raise max_abs: the same bits
            diff2 += d * d;
            const double ad = std::fabs(d);
            if (ad > max_abs || std::isnan(ad)) max_abs = ad;
        }
        if (bad_here) {
            if (first_bad < 0) first_bad = static_cast<int64_t>(i);
            ++bad;
        }
    }
};

// Merges block tallies in block order into a Check.
inline lesson::Check scan_check(const std::vector<ScanTally>& parts, uint64_t n, double tol, const std::string& what) {
    ScanTally all;
    for (const ScanTally& t : parts) {
        all.diff2 += t.diff2;
        all.ref2 += t.ref2;
        if (t.max_abs > all.max_abs || std::isnan(t.max_abs)) all.max_abs = t.max_abs;
        if (t.first_bad >= 0 && all.first_bad < 0) all.first_bad = t.first_bad;
        all.bad += t.bad;
    }
    lesson::Check c;
    c.what = what;
    c.checked = n;
    c.rel_l2 = all.ref2 > 0 ? std::sqrt(all.diff2) / std::sqrt(all.ref2) : (all.diff2 == 0 ? 0.0 : INFINITY);
    if (std::isnan(all.diff2)) c.rel_l2 = NAN;
    c.max_abs = all.max_abs;
    c.first_bad = all.first_bad;
    c.bad_count = all.bad;
    c.tol = tol;
    c.pass = n > 0 && all.bad == 0;  // nothing compared is not a pass
    return c;
}
}  // namespace detail

// Exact check of an int32 scan. `incl` is the inclusive reference with the
// same `segment` (inclusive_scan_reference). An exclusive result is checked
// against it shifted by one: gpu[i] == incl[i - 1], and 0 at the first
// element of every segment. Tolerance 0.
inline lesson::Check check_int_scan(const int32_t* gpu, const int32_t* incl, uint64_t n, bool exclusive,
                                    uint64_t segment, const std::string& what) {
    const std::vector<detail::ScanTally> parts =
        block_partials<detail::ScanTally>(n, kScanBlock, [=](uint64_t begin, uint64_t end) {
            detail::ScanTally t;
            uint64_t pos = segment > 0 ? begin % segment : begin;  // i's place in its segment (or the array)
            for (uint64_t i = begin; i < end; ++i) {
                const bool starts = pos == 0;  // i == 0, or i % segment == 0
                const int32_t want = !exclusive ? incl[i] : (starts ? 0 : incl[i - 1]);
                t.element(i, double(gpu[i]), double(want), gpu[i] != want);
                if (++pos == segment) pos = 0;
            }
            return t;
        });
    return detail::scan_check(parts, n, 0.0, what);
}

// The tolerance of check_float_scan: gamma_d (verify/reduction.h: d u / (1 - d u),
// the relative error bound of a sum whose every term goes through at most d
// roundings; Higham, "Accuracy and Stability of Numerical Algorithms", ch. 4)
// for the GPU's depth d in float, plus the double reference's own.
inline double scan_float_tolerance(uint64_t gpu_depth, uint64_t n) {
    return gamma(gpu_depth, kFloatUnitRoundoff) + gamma(reference_rounding_depth(n), kDoubleUnitRoundoff);
}

// Check of a float scan against the double reference `incl` (inclusive):
// element i passes when |gpu[i] - want[i]| <= tol * (|in[0]| + ... + |in[k]|),
// where k = i (inclusive) or i - 1 (exclusive, whose element 0 must be 0
// exactly). The right side is the worst-case error of any order of additions
// with at most d roundings per input (tol from scan_float_tolerance): a
// correct kernel can never fail it. NaN and Inf always fail.
// The sum of |in| before each kScanBlock block of in[0..n), so that every block of
// check_float_scan knows its running |sum| from its start. It depends on the inputs only:
// where several results of the same inputs are checked, compute it once and pass it on.
inline std::vector<double> abs_sums_before_blocks(const float* in, uint64_t n) {
    const std::vector<double> abs_sums = block_partials<double>(n, kScanBlock, [=](uint64_t begin, uint64_t end) {
        double s = 0;
        for (uint64_t i = begin; i < end; ++i) s += std::fabs(static_cast<double>(in[i]));
        return s;
    });
    std::vector<double> abs_before(abs_sums.size());
    double running = 0;
    for (size_t b = 0; b < abs_sums.size(); ++b) {
        abs_before[b] = running;
        running += abs_sums[b];
    }
    return abs_before;
}

// check_float_scan with abs_before = abs_sums_before_blocks(in, n), computed by the caller.
inline lesson::Check check_float_scan(const float* gpu, const float* in, const double* incl, uint64_t n, bool exclusive,
                                      double tol, const std::vector<double>& abs_before, const std::string& what) {
    const std::vector<detail::ScanTally> parts =
        block_partials<detail::ScanTally>(n, kScanBlock, [&](uint64_t begin, uint64_t end) {
            detail::ScanTally t;
            double abs_incl = abs_before[begin / kScanBlock];  // sum |in[0..i]| as i advances
            for (uint64_t i = begin; i < end; ++i) {
                const double abs_excl = abs_incl;
                abs_incl += std::fabs(static_cast<double>(in[i]));
                const double want = !exclusive ? incl[i] : (i == 0 ? 0.0 : incl[i - 1]);
                const double bound = tol * (exclusive ? abs_excl : abs_incl);
                const double g = static_cast<double>(gpu[i]);
                t.element(i, g, want, !(std::fabs(g - want) <= bound) || !std::isfinite(g));
            }
            return t;
        });
    return detail::scan_check(parts, n, tol, what);
}

inline lesson::Check check_float_scan(const float* gpu, const float* in, const double* incl, uint64_t n, bool exclusive,
                                      double tol, const std::string& what) {
    return check_float_scan(gpu, in, incl, n, exclusive, tol, abs_sums_before_blocks(in, n), what);
}

// Exact check of a float scan of integer inputs: `incl` is inclusive_scan_reference of the
// integers, `inputs` their exact_sum (verify/reduction.h). Where sum |x| <= 2^24, every sum
// of inputs that any scan algorithm forms (a tile's total, a look-back window, a prefix plus
// a tile's offsets...) is an integer a float holds exactly, so the float scan must be the
// integer scan as floats, bit for bit, at every element (exclusive: incl[i - 1], and +0 at
// element 0). A prefix dropped, taken twice or packed wrong, a tile left unwritten or
// written as zeros, one element off by one: each shows, at every element it touches. Where
// the premise does not hold the check fails and says so.
inline lesson::Check check_exact_float_scan(const float* gpu, const int32_t* incl, uint64_t n, bool exclusive,
                                            const ExactSum& inputs, const std::string& what) {
    lesson::Check c = check_exact(
        gpu, n, [=](uint64_t i) { return static_cast<float>(!exclusive ? incl[i] : (i == 0 ? 0 : incl[i - 1])); },
        what);
    if (!float_sums_exact(inputs)) {
        c.what += " (inputs not exactly summable in float: sum |x| > 2^24)";
        c.pass = false;
        if (c.first_bad < 0) c.first_bad = 0, c.bad_count = 1;
    }
    return c;
}

// Check of a compaction: the count, and every kept element in order, exactly.
// `checked` counts the elements compared plus the count itself.
inline lesson::Check check_compaction(const int32_t* gpu, uint64_t gpu_count, const int32_t* ref, uint64_t ref_count,
                                      const std::string& what) {
    const uint64_t common = std::min(gpu_count, ref_count);
    const std::vector<detail::ScanTally> parts =
        block_partials<detail::ScanTally>(common, kScanBlock, [=](uint64_t begin, uint64_t end) {
            detail::ScanTally t;
            for (uint64_t i = begin; i < end; ++i) t.element(i, double(gpu[i]), double(ref[i]), gpu[i] != ref[i]);
            return t;
        });
    lesson::Check c = detail::scan_check(parts, common + 1, 0.0, what);
    if (gpu_count != ref_count) {  // every missing or extra element is bad; the first one is at `common`
        c.bad_count += std::max(gpu_count, ref_count) - common;
        if (c.first_bad < 0) c.first_bad = static_cast<int64_t>(common);
        c.pass = false;
    }
    return c;
}

// ---------------------------------------------------------------- poison

// A byte b whose four-byte pattern (b in every byte: what cudaMemset(p, b, ...) leaves in an
// int32) is none of the right answers: no value of arrays[k][0..n[k]), and not 0, the first
// element of every exclusive scan. -1 if every pattern occurs. An output filled with such a
// byte before the kernel runs shows every element the kernel never wrote as wrong, in one run.
// The far-from-zero patterns come first (0x7F, 0x80, 0x7E, 0x81, ...): int32 inputs in
// [-1000, 1000] reach 0x7F7F7F7F only after 2.1 million terms all at +1000.
inline int absent_fill_byte(std::initializer_list<std::pair<const int32_t*, uint64_t>> arrays) {
    using Seen = std::array<uint64_t, 4>;  // bit b: pattern b occurs
    Seen seen{};
    seen[0] = 1;  // 0x00000000
    for (const auto& [p, n] : arrays)
        for (const Seen& part : block_partials<Seen>(n, kScanBlock, [p = p](uint64_t begin, uint64_t end) {
                 Seen s{};
                 for (uint64_t i = begin; i < end; ++i) {
                     const uint32_t u = static_cast<uint32_t>(p[i]);
                     if ((u & 0xFFu) * 0x01010101u == u) s[(u & 0xFFu) >> 6] |= uint64_t(1) << (u & 63u);
                 }
                 return s;
             }))
            for (int w = 0; w < 4; ++w) seen[w] |= part[w];
    for (int k = 0; k < 128; ++k)
        for (const int b : {0x7F - k, 0x80 + k})
            if (!((seen[b >> 6] >> (b & 63)) & 1)) return b;
    return -1;
}

// ---------------------------------------------------------------- CPU models of rungs 1-3

// Parallel steps (each one __syncthreads() apart on the GPU) and additions.
struct ScanWork {
    uint64_t steps = 0, adds = 0;
};

// Hillis-Steele inclusive scan of x[0..n), in place, step by step as rung 1
// runs it: in the step with offset 1, 2, 4, ..., every x[i] with i >= offset
// becomes x[i - offset] + x[i], all read from the previous step (the double
// buffer). log2(n) steps, n log2(n) - (n - 1) additions.
template <class T>
ScanWork hillis_steele_model(T* x, uint64_t n) {
    ScanWork w;
    std::vector<T> next(x, x + n);
    for (uint64_t offset = 1; offset < n; offset *= 2) {
        ++w.steps;
        for (uint64_t i = offset; i < n; ++i) {
            next[i] = x[i - offset] + x[i];
            ++w.adds;
        }
        std::copy(next.begin(), next.end(), x);
    }
    return w;
}

// Blelloch exclusive scan of x[0..n), n a power of two, in place, as rung 2
// runs it. Up-sweep: with stride 1, 2, ..., n/2, x[i] += x[i - stride] for
// i = 2 stride - 1, 4 stride - 1, ... (a reduction tree). Clear the root.
// Down-sweep: with stride n/2, ..., 1, each node gives its value to its left
// child and its value + the left child's old value to its right child.
// 2 log2(n) steps, 2 (n - 1) additions.
template <class T>
ScanWork blelloch_model(T* x, uint64_t n) {
    ScanWork w;
    for (uint64_t stride = 1; stride < n; stride *= 2) {
        ++w.steps;
        for (uint64_t i = 2 * stride - 1; i < n; i += 2 * stride) {
            x[i] = x[i] + x[i - stride];
            ++w.adds;
        }
    }
    if (n > 0) x[n - 1] = T(0);
    for (uint64_t stride = n / 2; stride >= 1; stride /= 2) {
        ++w.steps;
        for (uint64_t i = 2 * stride - 1; i < n; i += 2 * stride) {
            const T left = x[i - stride];
            x[i - stride] = x[i];
            x[i] = x[i] + left;
            ++w.adds;
        }
    }
    return w;
}

// Shared memory has 32 banks of 4 bytes: word w lives in bank w % 32. A warp's
// 32-bit access takes as many passes as the most distinct words any one bank
// must deliver (lanes reading the same word share it: a broadcast).
inline int warp_passes(const std::vector<uint64_t>& words) {
    std::vector<std::vector<uint64_t>> per_bank(32);
    for (uint64_t w : words) {
        std::vector<uint64_t>& b = per_bank[w % 32];
        if (std::find(b.begin(), b.end(), w) == b.end()) b.push_back(w);
    }
    size_t passes = 0;
    for (const auto& b : per_bank) passes = std::max(passes, b.size());
    return static_cast<int>(passes);
}

// Rung 3's padded shared-memory index: one word of padding after every 32.
inline uint64_t conflict_free_index(uint64_t i) { return i + (i >> 5); }

// The Blelloch tree's shared-memory reads for a tile of `tile` elements
// scanned by tile / 2 threads (rungs 2 and 3): at the level with stride s,
// thread t < tile / (2 s) reads word s (2t + 1) - 1 (ai) and s (2t + 2) - 1
// (bi), padded or not. Returns the passes of the worst warp at each level,
// s = 1, 2, ..., tile / 2 (the down-sweep visits the same levels in reverse).
inline std::vector<int> blelloch_level_passes(uint64_t tile, bool padded) {
    std::vector<int> levels;
    for (uint64_t s = 1; s < tile; s *= 2) {
        const uint64_t active = tile / (2 * s);
        int worst = 0;
        for (uint64_t warp0 = 0; warp0 < active; warp0 += 32) {
            std::vector<uint64_t> words;
            for (uint64_t t = warp0; t < std::min(active, warp0 + 32); ++t) {
                const uint64_t ai = s * (2 * t + 1) - 1;
                words.push_back(padded ? conflict_free_index(ai) : ai);
            }
            worst = std::max(worst, warp_passes(words));
        }
        levels.push_back(worst);
    }
    return levels;
}

// Predicted bank conflicts (extra passes: passes - 1 per warp-wide access) of
// the shared-memory loads of one tile of rung 2 or 3: two loads (ai and bi)
// per active warp per level, in the up-sweep and again in the down-sweep. The
// count Nsight Compute's l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum
// reports, per tile, if the compiler emits exactly these loads.
inline uint64_t blelloch_load_conflicts_per_tile(uint64_t tile, bool padded) {
    uint64_t extra = 0;
    for (uint64_t s = 1; s < tile; s *= 2) {
        const uint64_t active = tile / (2 * s);
        for (uint64_t warp0 = 0; warp0 < active; warp0 += 32) {
            std::vector<uint64_t> a, b;
            for (uint64_t t = warp0; t < std::min(active, warp0 + 32); ++t) {
                const uint64_t ai = s * (2 * t + 1) - 1, bi = s * (2 * t + 2) - 1;
                a.push_back(padded ? conflict_free_index(ai) : ai);
                b.push_back(padded ? conflict_free_index(bi) : bi);
            }
            extra += 2 * uint64_t(warp_passes(a) - 1 + warp_passes(b) - 1);  // up-sweep and down-sweep
        }
    }
    return extra;
}

}  // namespace verify
