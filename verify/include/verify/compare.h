// verify/compare.h - the one comparison: GPU output against a CPU reference.
//
// An element is bad when !(|gpu - ref| <= tol * (|ref| + scale)); NaN and Inf
// are always bad (the test is written so that NaN fails it). A check passes
// when no element is bad AND the relative L2 error ||gpu - ref|| / ||ref|| is
// within tol. `scale` is the magnitude below which errors count as absolute
// (by default the RMS of the reference), so sums that cancel to ~0 are judged
// against the size of their terms, not against 0.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include "common/report.h"

namespace verify {

// Accumulates a comparison over several pieces (chunks), then reports it.
class Comparer {
public:
    Comparer(double tol, double scale) : tol_(tol), scale_(scale) {}

    // gpu[i] vs ref[i] for i < n; `offset` is the global index of element 0.
    template <class G, class R>
    void add(const G* gpu, const R* ref, uint64_t n, uint64_t offset = 0) {
        for (uint64_t i = 0; i < n; ++i) {
            double g = static_cast<double>(gpu[i]);
            double r = static_cast<double>(ref[i]);
            double d = g - r;
            diff2_ += d * d;
            ref2_ += r * r;
            double ad = std::fabs(d);
            if (ad > max_abs_ || std::isnan(ad)) max_abs_ = ad;
            if (!(ad <= tol_ * (std::fabs(r) + scale_)) || !std::isfinite(g)) {
                if (first_bad_ < 0) first_bad_ = static_cast<int64_t>(offset + i);
                ++bad_;
            }
        }
        n_ += n;
    }

    lesson::Check result(const std::string& what) const {
        lesson::Check c;
        c.what = what;
        c.checked = n_;
        c.rel_l2 = ref2_ > 0 ? std::sqrt(diff2_) / std::sqrt(ref2_) : (diff2_ == 0 ? 0.0 : INFINITY);
        if (std::isnan(diff2_)) c.rel_l2 = NAN;
        c.max_abs = max_abs_;
        c.first_bad = first_bad_;
        c.bad_count = bad_;
        c.tol = tol_;
        c.pass = n_ > 0 && bad_ == 0 && c.rel_l2 <= tol_;  // nothing compared is not a pass
        return c;
    }

private:
    double tol_, scale_;
    double diff2_ = 0, ref2_ = 0, max_abs_ = 0;
    int64_t first_bad_ = -1;
    uint64_t bad_ = 0, n_ = 0;
};

template <class R>
double rms(const R* ref, uint64_t n) {
    double s = 0;
    for (uint64_t i = 0; i < n; ++i) s += static_cast<double>(ref[i]) * static_cast<double>(ref[i]);
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

}  // namespace verify
