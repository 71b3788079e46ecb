// verify/reduction.h - CPU references for a sum, and the error bound of a float sum.
//
//  - sum_reference: the sum of n values in double with Neumaier's compensated
//    summation, and the sum of their magnitudes. Its error is at most about
//    2^-52 |sum| (plus n^2-order terms far below that), so next to any float
//    sum it is the truth.
//  - sum_int64: the exact sum of int32 values (the integer variant: any order
//    of additions gives the same bits).
//  - gamma / float_sum_bound: the worst-case error of a float sum whose
//    summation tree is `depth` additions deep (Higham, "Accuracy and Stability
//    of Numerical Algorithms", ch. 4): |computed - exact| <= gamma_d * sum |x_i|,
//    gamma_d = d u / (1 - d u), u = 2^-24 for float rounding to nearest.
//  - check_float_sum / check_same_bits: a GPU sum as a lesson::Check (one
//    value: checked = 1, first bad index 0 when it fails).
// Host-only, no CUDA.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>
#include "common/report.h"
#include "verify/parallel.h"
#include "verify/random.h"

namespace verify {

// Unit roundoff of float (round to nearest): half the distance from 1 to the next float.
constexpr double kFloatUnitRoundoff = 1.0 / 16777216.0;  // 2^-24
// Unit roundoff of double.
constexpr double kDoubleUnitRoundoff = 1.0 / 9007199254740992.0;  // 2^-53

// A running sum with Neumaier's compensation: `sum` is the plain double sum,
// `comp` collects the low-order bits that each addition rounded away (Kahan's
// algorithm, improved so that a term larger than the running sum also keeps its
// low bits). value() = sum + comp.
struct NeumaierSum {
    double sum = 0.0, comp = 0.0;
    void add(double x) {
        const double t = sum + x;
        if (std::fabs(sum) >= std::fabs(x)) comp += (sum - t) + x;  // x's low bits were lost
        else comp += (x - t) + sum;                                 // sum's low bits were lost
        sum = t;
    }
    double value() const { return sum + comp; }
};

// What the float checks of the reduction lesson need to know about the input.
struct SumReference {
    double sum = 0.0;      // sum x_i (compensated, in double)
    double sum_abs = 0.0;  // sum |x_i| (compensated): scales the error bound
};

// Sum of x[0..n) and of |x[0..n)|, both with Neumaier compensation in double, on all host
// cores: blocks of 2^20 values are summed on their own (each compensated), then the blocks'
// results (sum and compensation) are added in block order, compensated again. The blocks do not
// depend on the thread count, so neither do the bits of the result; next to a float sum its
// error (a few units of 2^-52 |sum|) is still nothing.
constexpr uint64_t kSumBlock = uint64_t(1) << 20;
template <class T>
SumReference sum_reference(const T* x, size_t n) {
    struct Part {
        NeumaierSum s, a;
    };
    const std::vector<Part> parts = block_partials<Part>(n, kSumBlock, [&](uint64_t begin, uint64_t end) {
        Part p;
        for (uint64_t i = begin; i < end; ++i) {
            const double v = static_cast<double>(x[i]);
            p.s.add(v);
            p.a.add(std::fabs(v));
        }
        return p;
    });
    NeumaierSum s, a;
    for (const Part& p : parts) {
        s.add(p.s.sum);
        s.add(p.s.comp);
        a.add(p.a.sum);
        a.add(p.a.comp);
    }
    return {s.value(), a.value()};
}

// The same sums in one loop on one thread: the plain algorithm, which the test compares
// sum_reference against.
template <class T>
SumReference sum_reference_serial(const T* x, size_t n) {
    NeumaierSum s, a;
    for (size_t i = 0; i < n; ++i) {
        const double v = static_cast<double>(x[i]);
        s.add(v);
        a.add(std::fabs(v));
    }
    return {s.value(), a.value()};
}

// The exact sum of int32 values in int64, in blocks on all host cores (integer addition is
// exact, so any order gives the same result). Exact as long as it does not overflow:
// n * 2^31 < 2^63, i.e. n < 2^32 for any int32 values, and n <= 2^36 for the lesson's values
// in [-2^27, 2^27).
inline int64_t sum_int64(const int32_t* x, size_t n) {
    const std::vector<int64_t> parts = block_partials<int64_t>(n, kSumBlock, [&](uint64_t begin, uint64_t end) {
        int64_t s = 0;
        for (uint64_t i = begin; i < end; ++i) s += x[i];
        return s;
    });
    int64_t s = 0;
    for (int64_t p : parts) s += p;
    return s;
}

// gamma_d = d u / (1 - d u): the relative error bound of d rounded operations in
// a row. Infinite when d u >= 1 (the bound says nothing any more).
inline double gamma(uint64_t depth, double u = kFloatUnitRoundoff) {
    const double du = static_cast<double>(depth) * u;
    return du < 1.0 ? du / (1.0 - du) : INFINITY;
}

// How far a float sum may be from the exact sum when its summation tree is
// `depth` additions deep (every input passes through at most `depth` rounded
// additions on its way to the result): gamma_depth * sum |x_i|, plus the
// reference's own error (2^-50 sum |x_i|, a billion times smaller at depth 100).
inline double float_sum_bound(uint64_t depth, double sum_abs) {
    return gamma(depth) * sum_abs + 8.0 * kDoubleUnitRoundoff * sum_abs;
}

// The check of one float sum: passes when |gpu - ref.sum| <= float_sum_bound(depth,
// ref.sum_abs) (NaN and Inf never do). Reported as rel-L2 = |gpu - ref| / |ref|
// against the tolerance bound / |ref|.
inline lesson::Check check_float_sum(double gpu, const SumReference& ref, uint64_t depth, const std::string& what) {
    const double bound = float_sum_bound(depth, ref.sum_abs);
    char text[64];
    std::snprintf(text, sizeof text, ": within the depth-%llu bound %.3g", (unsigned long long)depth, bound);
    lesson::Check c;
    c.what = what + text;
    c.checked = 1;
    c.max_abs = std::fabs(gpu - ref.sum);
    c.rel_l2 = ref.sum != 0 ? c.max_abs / std::fabs(ref.sum) : (c.max_abs == 0 ? 0.0 : INFINITY);
    c.tol = ref.sum != 0 ? bound / std::fabs(ref.sum) : bound;
    c.pass = c.max_abs <= bound;  // false for NaN
    c.bad_count = c.pass ? 0 : 1;
    c.first_bad = c.pass ? -1 : 0;
    return c;
}

// The check of a result that must be the very bits of `want` (the same summation
// order, or an exact integer sum); tolerance 0.
template <class A>
lesson::Check check_same_bits(A got, A want, const std::string& what) {
    lesson::Check c;
    c.what = what;
    c.checked = 1;
    c.max_abs = std::fabs(static_cast<double>(got) - static_cast<double>(want));
    c.rel_l2 = want != 0 ? c.max_abs / std::fabs(static_cast<double>(want)) : c.max_abs;
    c.tol = 0;
    c.pass = std::memcmp(&got, &want, sizeof(A)) == 0 && std::isfinite(static_cast<double>(got));
    c.bad_count = c.pass ? 0 : 1;
    c.first_bad = c.pass ? -1 : 0;
    return c;
}

// The integer input of the lesson: n int32 values uniform in
// [-2^(bits-1), 2^(bits-1)), each a pure function of (seed, index) like
// verify::fill_uniform. bits = 28 keeps any sum of up to 2^36 of them inside int64.
// Each value depends on its index alone, so blocks of them fill on all host cores.
inline void fill_int32(int32_t* p, size_t n, uint64_t seed, int bits = 28) {
    const int64_t half = int64_t(1) << (bits - 1);
    parallel_blocks(n, items_per_block(1), [=](uint64_t begin, uint64_t end) {
        for (uint64_t i = begin; i < end; ++i) {
            const uint64_t h = splitmix64(seed * 0xD1B54A32D192ED03ull + splitmix64(i));
            p[i] = static_cast<int32_t>(static_cast<int64_t>(h >> (64 - bits)) - half);
        }
    });
}

}  // namespace verify
