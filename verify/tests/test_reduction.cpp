// CPU tests of verify/reduction.h: the compensated reference sum against sums
// whose exact value is known, the float error bound against float sums taken in
// the orders the GPU rungs use, the exact integer sum, and the exact float sums
// of integer-valued inputs (every partial sum a float) against planted wrong sums.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>
#include "catch_shim.hpp"
#include "verify/random.h"
#include "verify/reduction.h"

namespace {

// Float sums in three orders, as the GPU rungs take them.
// Left to right, one addition after another: depth n - 1.
float recursive_sum(const float* x, size_t n) {
    float s = 0.0f;
    for (size_t i = 0; i < n; ++i) s += x[i];
    return s;
}

// Halves added pairwise, recursively: depth ceil(log2 n).
float pairwise_sum(const float* x, size_t n) {
    if (n == 1) return x[0];
    const size_t h = n / 2;
    return pairwise_sum(x, h) + pairwise_sum(x + h, n - h);
}

// A grid-stride order: `threads` threads each add every threads-th value in a
// chain, then the thread totals meet in a pairwise tree. Depth: the longest
// chain plus ceil(log2 threads).
float grid_stride_sum(const float* x, size_t n, size_t threads, uint64_t* depth) {
    std::vector<float> partial(threads, 0.0f);
    for (size_t t = 0; t < threads; ++t)
        for (size_t i = t; i < n; i += threads) partial[t] += x[i];
    uint64_t levels = 0;
    while ((size_t(1) << levels) < threads) ++levels;
    *depth = (n + threads - 1) / threads + levels;
    return pairwise_sum(partial.data(), threads);
}

int ceil_log2(size_t n) {
    int d = 0;
    while ((size_t(1) << d) < n) ++d;
    return d;
}

// The lesson's float input: uniform in [-1, 3), as the lesson draws it. Every
// value is a multiple of 2^-22 below 4 in magnitude, so x * 2^22 is an integer
// of at most 24 bits and the exact sum is an int64 sum.
constexpr double kScale = 4194304.0;  // 2^22

double exact_sum(const std::vector<float>& x, bool magnitudes) {
    int64_t k = 0, not_integer = 0;
    for (float v : x) {
        const double scaled = static_cast<double>(v) * kScale;
        not_integer += scaled != std::floor(scaled);
        k += static_cast<int64_t>(magnitudes ? std::fabs(scaled) : scaled);
    }
    REQUIRE(not_integer == 0);               // every x * 2^22 an integer: the premise of the exact sum
    return static_cast<double>(k) / kScale;  // |k| < 2^44: exact in double
}

}  // namespace

TEST_CASE("reduction reference: large + small cancellation", "[reduction]") {
    // A plain double sum loses the 1 against 1e16 (the spacing of doubles there is 2).
    const double a[] = {1e16, 1.0, -1e16};
    CHECK((a[0] + a[1]) + a[2] == 0.0);
    CHECK(verify::sum_reference(a, 3).sum == 1.0);

    // Kahan's original compensation gets this one wrong (0); Neumaier's keeps both ones.
    const double b[] = {1.0, 1e100, 1.0, -1e100};
    CHECK(verify::sum_reference(b, 4).sum == 2.0);
    CHECK(verify::sum_reference(b, 4).sum_abs == 2e100 + 2.0);  // 2e100 in double
}

TEST_CASE("reduction reference: huge values that cancel, interleaved with ones", "[reduction]") {
    // 1000 groups of {1e20, 1, -1e20, 1}: exact sum 2000; a plain double sum keeps only the last 1.
    std::vector<double> x;
    for (int g = 0; g < 1000; ++g) {
        x.push_back(1e20);
        x.push_back(1.0);
        x.push_back(-1e20);
        x.push_back(1.0);
    }
    double plain = 0.0;
    for (double v : x) plain += v;
    CHECK(plain == 1.0);
    CHECK(verify::sum_reference(x.data(), x.size()).sum == 2000.0);
}

TEST_CASE("reduction reference: one value, zeros, and a sum of 0.1f", "[reduction]") {
    const float one[] = {-0.75f};
    CHECK(verify::sum_reference(one, 1).sum == -0.75);
    CHECK(verify::sum_reference(one, 1).sum_abs == 0.75);
    const std::vector<float> zeros(1001, 0.0f);
    CHECK(verify::sum_reference(zeros.data(), zeros.size()).sum == 0.0);
    // 10^6 copies of the float nearest 0.1: the exact sum is 10^6 * double(0.1f) (44 bits, exact).
    const std::vector<float> tenth(1000000, 0.1f);
    const double exact = 1e6 * static_cast<double>(0.1f);
    CHECK(verify::sum_reference(tenth.data(), tenth.size()).sum == exact);
    // The float sum, left to right, is far off: once the sum passes 2^18 each 0.1f is
    // rounded to a multiple of 2^-6 (0.09375 or 0.109375).
    CHECK(std::fabs(recursive_sum(tenth.data(), tenth.size()) - exact) > 100.0);
}

TEST_CASE("reduction reference: the lesson's input, against the exact integer sum", "[reduction]") {
    for (size_t n : {size_t(1), size_t(3), size_t(1000003), size_t(1) << 20}) {
        std::vector<float> x(n);
        verify::fill_uniform(x.data(), n, 2026, -1.0f, 3.0f);
        const double exact = exact_sum(x, false), exact_abs = exact_sum(x, true);
        const verify::SumReference ref = verify::sum_reference(x.data(), n);
        INFO("n = " << n);
        CHECK(std::fabs(ref.sum - exact) <= 4.0 * verify::kDoubleUnitRoundoff * std::fabs(exact));
        CHECK(std::fabs(ref.sum_abs - exact_abs) <= 4.0 * verify::kDoubleUnitRoundoff * exact_abs);
    }
}

TEST_CASE("float sum bound: gamma_d", "[reduction]") {
    const double u = verify::kFloatUnitRoundoff;
    CHECK(verify::gamma(0) == 0.0);
    CHECK(verify::gamma(1) == Approx(u / (1.0 - u)));
    CHECK(verify::gamma(100) == Approx(100.0 * u).epsilon(1e-5));
    CHECK(verify::gamma(100) < verify::gamma(101));
    CHECK(std::isinf(verify::gamma(uint64_t(1) << 24)));  // d u = 1: no bound left
    CHECK(verify::float_sum_bound(0, 5.0) > 0.0);         // the reference's own error, tiny
    CHECK(verify::float_sum_bound(0, 5.0) < 1e-14);
}

TEST_CASE("float sum bound: every summation order of the rungs stays inside it", "[reduction]") {
    const size_t n = 1000003;  // odd: partial chains and a partial last block
    std::vector<float> x(n);
    verify::fill_uniform(x.data(), n, 7, -1.0f, 3.0f);
    const double exact = exact_sum(x, false), abs_sum = exact_sum(x, true);

    const float rec = recursive_sum(x.data(), n);
    const float pair = pairwise_sum(x.data(), n);
    uint64_t depth_grid = 0;
    const float grid = grid_stride_sum(x.data(), n, 2048, &depth_grid);
    uint64_t depth_grid2 = 0;
    const float grid2 = grid_stride_sum(x.data(), n, 4096, &depth_grid2);

    CHECK(std::fabs(rec - exact) <= verify::float_sum_bound(n - 1, abs_sum));
    CHECK(std::fabs(pair - exact) <= verify::float_sum_bound(ceil_log2(n), abs_sum));
    CHECK(std::fabs(grid - exact) <= verify::float_sum_bound(depth_grid, abs_sum));
    CHECK(std::fabs(grid2 - exact) <= verify::float_sum_bound(depth_grid2, abs_sum));
    // The orders round differently: the same numbers, different float sums (the
    // lesson shows it on the GPU with several grid sizes). Two accurate orders, such
    // as the two grid-stride ones, may still round to the same float.
    CHECK(rec != pair);
    CHECK(rec != grid);
    // A shallow tree is the accurate one: left to right loses far more.
    CHECK(std::fabs(pair - exact) < std::fabs(rec - exact));
}

TEST_CASE("float sum bound: it is reached (1 followed by many half-ulps)", "[reduction]") {
    // 1 + 2^-24 is a tie between 1 and 1 + 2^-23 and rounds to even, 1: left to right,
    // every one of the k small terms is lost, an error of k u, against a bound of gamma_k (1 + k u).
    const size_t k = 4096;
    std::vector<float> x(k + 1, static_cast<float>(verify::kFloatUnitRoundoff));
    x[0] = 1.0f;
    const float rec = recursive_sum(x.data(), x.size());
    CHECK(rec == 1.0f);
    const double exact = 1.0 + double(k) * verify::kFloatUnitRoundoff;
    const double bound = verify::float_sum_bound(k, exact);
    CHECK(exact - rec <= bound);
    CHECK(exact - rec >= 0.99 * bound);
    // The pairwise order adds the small terms to each other first: exact here.
    CHECK(pairwise_sum(x.data(), x.size()) == static_cast<float>(exact));
}

TEST_CASE("integer sum: exact in int64 where an int32 accumulator overflows", "[reduction]") {
    std::vector<int32_t> x(17, (1 << 27) - 1);  // 17 (2^27 - 1) = 2281701359 > INT32_MAX
    CHECK(verify::sum_int64(x.data(), x.size()) == int64_t(17) * ((1 << 27) - 1));
    const int32_t extremes[] = {std::numeric_limits<int32_t>::max(), std::numeric_limits<int32_t>::max(),
                                std::numeric_limits<int32_t>::min(), -1};
    CHECK(verify::sum_int64(extremes, 4) == int64_t(2147483647) - 2);
    CHECK(verify::sum_int64(extremes, 0) == 0);
}

TEST_CASE("integer input: range, both ends, determinism", "[reduction]") {
    const size_t n = 1 << 20;
    std::vector<int32_t> a(n), b(n), c(n);
    verify::fill_int32(a.data(), n, 11);
    verify::fill_int32(b.data(), n, 11);
    verify::fill_int32(c.data(), n, 12);
    CHECK(a == b);
    CHECK(a != c);
    int32_t lo = a[0], hi = a[0];
    for (int32_t v : a) {
        lo = std::min(lo, v);
        hi = std::max(hi, v);
    }
    CHECK(lo >= -(1 << 27));
    CHECK(hi < (1 << 27));
    CHECK(lo < -(1 << 27) + (1 << 12));  // 2^20 draws reach both ends of the range
    CHECK(hi > (1 << 27) - (1 << 12));
    // The largest sum the lesson allows (n = 2^36 values, each >= -2^27) fits int64.
    CHECK(double(-(int64_t(1) << 27)) * double(int64_t(1) << 36) >= double(std::numeric_limits<int64_t>::min()));
}

TEST_CASE("check_float_sum: inside the bound passes, outside, NaN and Inf fail", "[reduction]") {
    const verify::SumReference ref{1000.0, 1200.0};
    const double bound = verify::float_sum_bound(10, ref.sum_abs);  // about 7.2e-4
    CHECK(verify::check_float_sum(1000.0, ref, 10, "exact").pass);
    const lesson::Check in = verify::check_float_sum(1000.0 + 0.9 * bound, ref, 10, "inside");
    CHECK(in.pass);
    CHECK(in.checked == 1);
    CHECK(in.first_bad == -1);
    CHECK(in.tol == Approx(bound / 1000.0));
    const lesson::Check out = verify::check_float_sum(1000.0 - 1.1 * bound, ref, 10, "outside");
    CHECK_FALSE(out.pass);
    CHECK(out.first_bad == 0);
    CHECK(out.bad_count == 1);
    CHECK_FALSE(verify::check_float_sum(std::nan(""), ref, 10, "NaN").pass);
    CHECK_FALSE(verify::check_float_sum(INFINITY, ref, 10, "Inf").pass);
    // A deeper tree is allowed more: the same error passes at depth 20.
    CHECK(verify::check_float_sum(1000.0 - 1.1 * bound, ref, 20, "deeper").pass);
    // --inject-fault's corruption (2x + 1) fails any sensible bound.
    CHECK_FALSE(verify::check_float_sum(2001.0, ref, 1000, "corrupted").pass);
}

TEST_CASE("check_same_bits: floats and int64", "[reduction]") {
    CHECK(verify::check_same_bits(268432608.0f, 268432608.0f, "same").pass);
    CHECK_FALSE(verify::check_same_bits(268432608.0f, 268432592.0f, "one ulp apart").pass);
    CHECK_FALSE(verify::check_same_bits(std::nanf(""), std::nanf(""), "NaN").pass);
    CHECK(verify::check_same_bits(-123456789012LL, -123456789012LL, "int64").pass);
    const lesson::Check off = verify::check_same_bits(-123456789011LL, -123456789012LL, "int64 off by one");
    CHECK_FALSE(off.pass);
    CHECK(off.max_abs == 1.0);
}

TEST_CASE("exact floats: 1 or 2, equal to the ints, deterministic, exactly summable at the largest n", "[reduction]") {
    static_assert(2 * verify::kExactFloatMaxN < uint64_t(verify::kFloatExactIntegers), "n * max |x| < 2^24");
    // 2^24 is the last integer before floats skip one: 2^24 + 1 is not a float.
    CHECK(static_cast<float>(verify::kFloatExactIntegers) == 16777216.0f);
    CHECK(static_cast<double>(static_cast<float>(verify::kFloatExactIntegers + 1)) != 16777217.0);
    const size_t n = verify::kExactFloatMaxN;
    std::vector<float> f(n), g(n);
    std::vector<int32_t> ints(n);
    verify::fill_exact_floats(f.data(), ints.data(), n, 2027);
    verify::fill_exact_floats(g.data(), nullptr, n, 2027);
    CHECK(f == g);
    size_t ones = 0, other = 0;
    for (size_t i = 0; i < n; ++i) {
        ones += ints[i] == 1;
        other += !(ints[i] == 1 || ints[i] == 2) || f[i] != static_cast<float>(ints[i]);
    }
    CHECK(other == 0);
    CHECK(ones > n / 2 - n / 100);  // both values, about half each
    CHECK(ones < n / 2 + n / 100);
    verify::fill_exact_floats(g.data(), nullptr, 1000, 2028);
    CHECK(!std::equal(g.begin(), g.begin() + 1000, f.begin()));  // another seed, other values
    const verify::ExactSum s = verify::exact_sum(ints.data(), n);
    CHECK(s.sum == s.sum_abs);
    CHECK(s.sum == static_cast<int64_t>(n + (n - ones)));
    CHECK(verify::float_sums_exact(s));
    // The orders of the rungs (left to right is the longest chain there is), all exact.
    const float want = static_cast<float>(s.sum);
    uint64_t depth = 0;
    CHECK(verify::check_exact_float_sum(recursive_sum(f.data(), n), s, "left to right").pass);
    CHECK(verify::check_exact_float_sum(pairwise_sum(f.data(), n), s, "pairwise").pass);
    CHECK(verify::check_exact_float_sum(grid_stride_sum(f.data(), n, 1056 * 256, &depth), s, "grid stride").pass);
    CHECK(recursive_sum(f.data(), n) == want);
}

TEST_CASE("check_exact_float_sum: planted wrong sums fail, the premise is checked", "[reduction]") {
    const size_t n = 1000003;  // n % 4 = 3: the ragged end of rungs 7 and 8
    std::vector<float> f(n);
    std::vector<int32_t> ints(n);
    verify::fill_exact_floats(f.data(), ints.data(), n, 5);
    const verify::ExactSum s = verify::exact_sum(ints.data(), n);
    uint64_t depth = 0;
    const float right = grid_stride_sum(f.data(), n, 2048, &depth);
    const lesson::Check ok = verify::check_exact_float_sum(right, s, "right");
    CHECK(ok.pass);
    CHECK(ok.max_abs == 0.0);
    // One input dropped, one counted twice, the sum off by one, the ragged end dropped,
    // one block of 256 dropped: every one is a different integer, so it fails.
    CHECK_FALSE(verify::check_exact_float_sum(right - f[12345], s, "one dropped").pass);
    CHECK_FALSE(verify::check_exact_float_sum(right + f[n - 1], s, "one twice").pass);
    const lesson::Check off = verify::check_exact_float_sum(right + 1.0f, s, "off by one");
    CHECK_FALSE(off.pass);
    CHECK(off.max_abs == 1.0);
    CHECK(off.first_bad == 0);
    CHECK_FALSE(verify::check_exact_float_sum(recursive_sum(f.data(), n - n % 4), s, "ragged end dropped").pass);
    CHECK_FALSE(
        verify::check_exact_float_sum(right - recursive_sum(f.data() + 256 * 100, 256), s, "a block dropped").pass);
    CHECK_FALSE(verify::check_exact_float_sum(std::nanf(""), s, "NaN").pass);
    CHECK_FALSE(verify::check_exact_float_sum(INFINITY, s, "Inf").pass);
    CHECK_FALSE(verify::check_exact_float_sum(2.0f * right + 1.0f, s, "--inject-fault").pass);
    // Inputs whose float sums need not be exact: the check refuses to pass even the right bits.
    const verify::ExactSum too_big{s.sum, verify::kFloatExactIntegers + 1};
    const lesson::Check premise = verify::check_exact_float_sum(right, too_big, "premise");
    CHECK_FALSE(premise.pass);
    CHECK(premise.what.find("not exactly summable") != std::string::npos);
}

TEST_CASE("exact floats catch what the float bound cannot: 600 inputs dropped at n = 2^28", "[reduction]") {
    // The lesson's float input at n = 2^28 (mean 1, sum |x| about 1.25 n) and rung 3's depth 32:
    // the bound is about 640, so a sum that lost 600 inputs of value about 1 passes it.
    const double n = 268435456.0;
    const verify::SumReference ref{n, 1.25 * n};
    CHECK(verify::float_sum_bound(32, ref.sum_abs) > 600.0);
    CHECK(verify::check_float_sum(ref.sum - 600.0, ref, 32, "600 inputs dropped").pass);
    // The exact input: losing even one input is a different integer.
    std::vector<float> f(1 << 20);
    std::vector<int32_t> ints(f.size());
    verify::fill_exact_floats(f.data(), ints.data(), f.size(), 2027);
    const verify::ExactSum s = verify::exact_sum(ints.data(), ints.size());
    CHECK(verify::check_exact_float_sum(pairwise_sum(f.data(), f.size()), s, "all").pass);
    CHECK_FALSE(verify::check_exact_float_sum(pairwise_sum(f.data(), f.size() - 1), s, "one dropped").pass);
}
