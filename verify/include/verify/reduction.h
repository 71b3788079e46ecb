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
//  - fill_exact_floats / exact_sum / check_exact_float_sum: integer-valued
//    floats whose every partial sum is a float, so that any order of float
//    additions is exact and the sum must be the int64 sum to the bit: the
//    check that every input was added exactly once.
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

// ---------------------------------------------------------------- exactly summable floats

// Every integer of magnitude at most 2^24 is a float (24-bit significand). If the inputs are
// integers with sum |x_i| <= 2^24, every partial sum any algorithm forms - the sum of some of
// the inputs, in any order and any grouping, one pass or several - is an integer of magnitude
// <= 2^24: each float addition on the way is exact, and the float sum IS the integer sum. So
// a correct kernel gives the exact int64 sum to the bit, and a kernel that drops an input,
// reads one twice or reads the wrong one gives another number (no rounding to hide it in).
constexpr int64_t kFloatExactIntegers = int64_t(1) << 24;

// The inputs of the exact checks are 1 or 2: n * 2 < 2^24 keeps sum |x_i| inside the limit
// above whatever the values are. They are positive, so errors cannot cancel: an input dropped
// or counted twice moves the sum by at least 1, and the sum of any part of the array is
// larger than the sum of any part inside it.
constexpr uint64_t kExactFloatMaxN = (uint64_t(1) << 23) - 1;

// 1 or 2, a pure function of (seed, index) like verify::fill_uniform.
inline int32_t exact_float_value(uint64_t seed, uint64_t i) {
    return 1 + static_cast<int32_t>(splitmix64(seed * 0x9E3779B97F4A7C15ull + splitmix64(i ^ 0xE4AC7ull)) >> 63);
}

// floats[i] = exact_float_value(seed, i) and, where ints is not null, ints[i] the same value
// as an int32 (the input of the integer reference), on all host cores.
inline void fill_exact_floats(float* floats, int32_t* ints, size_t n, uint64_t seed) {
    parallel_blocks(n, items_per_block(1), [=](uint64_t begin, uint64_t end) {
        for (uint64_t i = begin; i < end; ++i) {
            const int32_t v = exact_float_value(seed, i);
            floats[i] = static_cast<float>(v);
            if (ints != nullptr) ints[i] = v;
        }
    });
}

// The exact sum of integer inputs, and the sum of their magnitudes (which decides whether
// float sums of them are exact).
struct ExactSum {
    int64_t sum = 0;
    int64_t sum_abs = 0;
};
inline ExactSum exact_sum(const int32_t* x, size_t n) {
    const std::vector<ExactSum> parts = block_partials<ExactSum>(n, kSumBlock, [&](uint64_t begin, uint64_t end) {
        ExactSum s;
        for (uint64_t i = begin; i < end; ++i) {
            s.sum += x[i];
            s.sum_abs += x[i] < 0 ? -int64_t(x[i]) : int64_t(x[i]);
        }
        return s;
    });
    ExactSum s;
    for (const ExactSum& p : parts) {
        s.sum += p.sum;
        s.sum_abs += p.sum_abs;
    }
    return s;
}

// Whether every float sum of these inputs, in any order, is exact.
inline bool float_sums_exact(const ExactSum& inputs) { return inputs.sum_abs <= kFloatExactIntegers; }

// The check of a float sum of integer inputs: the very bits of the int64 sum as a float
// (tolerance 0; NaN and Inf fail). Where the inputs do not meet the premise (sum |x| > 2^24)
// the check fails and says so: an exact comparison would then be wrong about correct kernels.
inline lesson::Check check_exact_float_sum(float gpu, const ExactSum& inputs, const std::string& what) {
    lesson::Check c = check_same_bits(gpu, static_cast<float>(inputs.sum), what);
    if (!float_sums_exact(inputs)) {
        c.what += " (inputs not exactly summable in float: sum |x| > 2^24)";
        c.pass = false;
        c.bad_count = 1;
        c.first_bad = 0;
    }
    return c;
}

}  // namespace verify
