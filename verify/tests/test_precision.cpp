// Unit tests of verify/precision.h: rounding to FP16, BF16, TF32 and FP8 E4M3,
// the bit encodings, the sampled rows, the A * B^T reference and the emulated sums.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>
#include "catch_shim.hpp"
#include "verify/compare.h"
#include "verify/parallel.h"
#include "verify/precision.h"
#include "verify/random.h"

using verify::decode;
using verify::encode;
using verify::round_to;

static float from_bits(uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

TEST_CASE("FP16: known encodings, overflow to inf, subnormals, ties to even", "[precision]") {
    CHECK(verify::to_fp16_bits(1.0f) == 0x3C00);
    CHECK(verify::to_fp16_bits(-2.0f) == 0xC000);
    CHECK(verify::to_fp16_bits(0.0f) == 0x0000);
    CHECK(verify::to_fp16_bits(-0.0f) == 0x8000);
    CHECK(verify::to_fp16_bits(65504.0f) == 0x7BFF);  // the largest finite FP16
    CHECK(verify::to_fp16_bits(65519.0f) == 0x7BFF);  // below the midpoint: rounds down
    CHECK(verify::to_fp16_bits(65520.0f) == 0x7C00);  // the midpoint ties to even: 65536, i.e. inf
    CHECK(verify::to_fp16_bits(-1e6f) == 0xFC00);
    CHECK(verify::to_fp16_bits(std::ldexp(1.0f, -14)) == 0x0400);  // smallest normal
    CHECK(verify::to_fp16_bits(std::ldexp(1.0f, -24)) == 0x0001);  // smallest subnormal
    CHECK(verify::to_fp16_bits(std::ldexp(1.0f, -25)) == 0x0000);  // half of it ties to even: 0
    CHECK(verify::to_fp16_bits(std::ldexp(1.5f, -25)) == 0x0001);
    CHECK(verify::to_fp16_bits(std::ldexp(3.0f, -25)) == 0x0002);         // 1.5 quanta ties to 2 (even)
    CHECK(verify::to_fp16_bits(1.0f + std::ldexp(1.0f, -11)) == 0x3C00);  // tie: down to the even 1.0
    CHECK(verify::to_fp16_bits(1.0f + std::ldexp(3.0f, -11)) == 0x3C02);  // tie: up to the even mantissa 2
    CHECK(verify::fp16_bits_to_float(0x7BFF) == 65504.0f);
    CHECK(std::isinf(verify::fp16_bits_to_float(0x7C00)));
    CHECK(std::isnan(verify::fp16_bits_to_float(0x7E00)));
    CHECK(verify::fp16_bits_to_float(0x0001) == std::ldexp(1.0f, -24));
}

TEST_CASE("BF16: known encodings, FLT_MAX rounds to inf, ties to even", "[precision]") {
    CHECK(verify::to_bf16_bits(1.0f) == 0x3F80);
    CHECK(verify::to_bf16_bits(-1.0f) == 0xBF80);
    CHECK(verify::to_bf16_bits(1.0f + std::ldexp(1.0f, -8)) == 0x3F80);  // tie: down to even
    CHECK(verify::to_bf16_bits(1.0f + std::ldexp(3.0f, -8)) == 0x3F82);  // tie: up to even
    CHECK(verify::to_bf16_bits(from_bits(0x3F808001u)) == 0x3F81);       // just above the tie: up
    CHECK(verify::to_bf16_bits(std::numeric_limits<float>::max()) == 0x7F80);
    CHECK(verify::to_bf16_bits(70000.0f) == 0x4789);  // 70000 -> 70144 (FP16 would be inf)
    CHECK(verify::bf16_bits_to_float(0x4789) == 70144.0f);
    CHECK(verify::to_bf16_bits(256.0f + 0.99f) == 0x4380);  // 256.99 -> 256: spacing 2 at 256
    // For normal floats BF16 is the top 16 bits of the float, rounded: check against that rule.
    for (uint64_t i = 0; i < 20000; ++i) {
        const float x = verify::hash_uniform(5, i, -1e4f, 1e4f);
        uint32_t u;
        std::memcpy(&u, &x, 4);
        const uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;  // the usual bit trick
        REQUIRE(verify::to_bf16_bits(x) == rounded);
    }
}

TEST_CASE("FP8 E4M3: encodings, saturation at 448, subnormals, NaN", "[precision]") {
    CHECK(verify::to_e4m3_bits(1.0f) == 0x38);
    CHECK(verify::to_e4m3_bits(-1.0f) == 0xB8);
    CHECK(verify::to_e4m3_bits(448.0f) == 0x7E);
    CHECK(verify::to_e4m3_bits(464.0f) == 0x7E);   // tie between 448 and 480 (not a number): even 448
    CHECK(verify::to_e4m3_bits(1000.0f) == 0x7E);  // saturates
    CHECK(verify::to_e4m3_bits(-1e30f) == 0xFE);
    CHECK(verify::to_e4m3_bits(std::ldexp(1.0f, -6)) == 0x08);   // smallest normal
    CHECK(verify::to_e4m3_bits(std::ldexp(1.0f, -9)) == 0x01);   // smallest subnormal
    CHECK(verify::to_e4m3_bits(std::ldexp(1.0f, -10)) == 0x00);  // tie to even: 0
    CHECK(verify::to_e4m3_bits(1.0625f) == 0x38);                // tie between 1 and 1.125: even 1
    CHECK(verify::to_e4m3_bits(1.1875f) == 0x3A);                // tie between 1.125 and 1.25: even 1.25
    CHECK(verify::e4m3_bits_to_float(0x7E) == 448.0f);
    CHECK(std::isnan(verify::e4m3_bits_to_float(0x7F)));
    CHECK(std::isnan(verify::e4m3_bits_to_float(0xFF)));
    CHECK(verify::e4m3_bits_to_float(0x78) == 256.0f);  // exponent field 15 is a normal binade in E4M3
}

TEST_CASE("every FP16, BF16 and E4M3 bit pattern decodes and encodes back to itself", "[precision]") {
    for (uint32_t b = 0; b < 65536; ++b) {
        const double v = decode(b, verify::kFp16);
        if (std::isnan(v)) continue;
        REQUIRE(encode(v, verify::kFp16) == b);
        REQUIRE(round_to(v, verify::kFp16) == v);
    }
    for (uint32_t b = 0; b < 65536; ++b) {
        const double v = decode(b, verify::kBf16);
        if (std::isnan(v)) continue;
        REQUIRE(encode(v, verify::kBf16) == b);
        REQUIRE(round_to(v, verify::kBf16) == v);
    }
    for (uint32_t b = 0; b < 256; ++b) {
        const double v = decode(b, verify::kE4m3);
        if (std::isnan(v)) continue;
        REQUIRE(encode(v, verify::kE4m3) == b);
        REQUIRE(round_to(v, verify::kE4m3) == v);
    }
}

// Rounding to nearest: no representable neighbour is closer; at a tie the even one wins.
static void check_nearest(const verify::FloatFormat& f, float x) {
    const double r = round_to(x, f);
    if (std::isinf(r) || std::fabs(r) == f.max_finite) return;  // the edges are tested above
    const uint32_t b = encode(r, f);
    const uint32_t sign = b & (1u << (f.exp_bits + f.p - 1));
    const uint32_t mag = b & ~sign;
    const double d = std::fabs(double(x) - r);
    for (uint32_t nb : {mag + 1, mag == 0 ? 0u : mag - 1}) {
        const double n = decode(nb | sign, f);
        const double dn = std::fabs(double(x) - n);
        REQUIRE(d <= dn);
        if (d == dn && nb != mag) REQUIRE((mag & 1u) == 0u);
    }
}

TEST_CASE("rounding is to the nearest number, ties to even, over many magnitudes", "[precision]") {
    for (uint64_t i = 0; i < 20000; ++i) {
        const float m = verify::hash_uniform(9, i, -1.0f, 1.0f);
        const int e = int(verify::hash_uniform(10, i, -30.0f, 20.0f));
        const float x = std::ldexp(m, e);
        check_nearest(verify::kFp16, x);
        check_nearest(verify::kBf16, x);
        check_nearest(verify::kE4m3, x);
    }
}

TEST_CASE("TF32 keeps 10 mantissa bits, unit roundoffs", "[precision]") {
    CHECK(verify::to_tf32(1.0f + std::ldexp(1.0f, -11)) == 1.0f);
    CHECK(verify::to_tf32(1.0f + std::ldexp(3.0f, -11)) == 1.0f + std::ldexp(1.0f, -9));
    CHECK(verify::to_tf32(1.0f + std::ldexp(1.0f, -10)) == 1.0f + std::ldexp(1.0f, -10));
    CHECK(verify::unit_roundoff(verify::kFp32) == std::ldexp(1.0, -24));
    CHECK(verify::unit_roundoff(verify::kTf32) == std::ldexp(1.0, -11));
    CHECK(verify::unit_roundoff(verify::kBf16) == std::ldexp(1.0, -8));
    CHECK(verify::unit_roundoff(verify::kFp16) == std::ldexp(1.0, -11));
    CHECK(verify::unit_roundoff(verify::kE4m3) == std::ldexp(1.0, -4));
    CHECK(verify::round_to(3.4015e38, verify::kTf32) == verify::kTf32.max_finite);  // below the midpoint to 2^128
    CHECK(std::isinf(verify::round_to(3.4025e38, verify::kTf32)));                  // above it
}

TEST_CASE("FP8 scales: quantized values stay within 448, dequantized within u", "[precision]") {
    std::vector<float> x(4096);
    verify::fill_uniform(x.data(), x.size(), 3, -3.0f, 2.0f);
    const float amax = verify::amax_of(x.data(), x.size());
    CHECK(amax > 2.9f);
    CHECK(amax <= 3.0f);
    const float q = verify::fp8_quant_scale(amax), s = verify::fp8_dequant_scale(amax);
    for (float v : x) {
        const float code = verify::e4m3_bits_to_float(verify::to_e4m3_bits(v * q));
        REQUIRE(std::fabs(code) <= 448.0f);
        if (std::fabs(v) > 0.05f)  // away from the subnormal range
            REQUIRE(std::fabs(double(code) * s - v) <= (1.0 / 16.0) * std::fabs(v) * 1.0001);
    }
    CHECK(verify::fp8_quant_scale(0.0f) == 1.0f);
    CHECK(verify::fp8_dequant_scale(0.0f) == 1.0f);
}

TEST_CASE("stratified rows: one per band, ascending, distinct, in range", "[precision]") {
    for (int64_t rows : {1, 7, 16, 100, 8192}) {
        for (int64_t count : {1, 3, 16, 64}) {
            const std::vector<int64_t> r = verify::stratified_rows(rows, count, 42);
            REQUIRE(int64_t(r.size()) == std::min(rows, count));
            for (size_t i = 0; i < r.size(); ++i) {
                const int64_t c = int64_t(r.size());
                REQUIRE(r[i] >= int64_t(i) * rows / c);
                REQUIRE(r[i] < (int64_t(i) + 1) * rows / c);
            }
        }
    }
    CHECK(verify::stratified_rows(100, 8, 1) == verify::stratified_rows(100, 8, 1));
}

TEST_CASE("A * B^T rows: a known 2x3 * (2x3)^T, and a scale", "[precision]") {
    const float A[] = {1, 2, 3, 4, 5, 6};
    const float Bt[] = {1, 0, -1,  // row j of Bt is column j of B
                        2, 1, 0};
    double out[4] = {};
    verify::gemm_abt_rows(A, Bt, 2, 3, {0, 1}, out);
    CHECK(out[0] == -2.0);
    CHECK(out[1] == 4.0);
    CHECK(out[2] == -2.0);
    CHECK(out[3] == 13.0);
    double row1[2] = {};
    verify::gemm_abt_rows(A, Bt, 2, 3, {1}, row1, 0.5);
    CHECK(row1[0] == -1.0);
    CHECK(row1[1] == 6.5);
}

TEST_CASE("A * B^T rows match a plain triple loop on random data", "[precision]") {
    const int64_t M = 37, N = 53, K = 300;
    std::vector<float> A(M * K), Bt(N * K);
    verify::fill_uniform(A.data(), A.size(), 1);
    verify::fill_uniform(Bt.data(), Bt.size(), 2);
    const std::vector<int64_t> rows = {0, 5, 36};
    std::vector<double> out(rows.size() * N);
    verify::gemm_abt_rows(A.data(), Bt.data(), N, K, rows, out.data());
    for (size_t r = 0; r < rows.size(); ++r)
        for (int64_t j = 0; j < N; ++j) {
            double s = 0;
            for (int64_t k = 0; k < K; ++k) s += double(A[rows[r] * K + k]) * Bt[j * K + k];
            REQUIRE(out[r * N + j] == s);
        }
}

TEST_CASE("running sums stall where the spacing reaches 2: BF16 at 256, FP16 at 2048", "[precision]") {
    std::vector<float> x(16384);
    verify::fill_uniform(x.data(), x.size(), 11, 0.0f, 1.0f);
    CHECK(verify::emulated_running_sum(x.data(), x.size(), verify::kBf16) == 256.0f);
    CHECK(verify::emulated_running_sum(x.data(), x.size(), verify::kFp16) == 2048.0f);
    CHECK(verify::running_sum_stall(verify::kBf16) == 256.0);
    CHECK(verify::running_sum_stall(verify::kFp16) == 2048.0);
    double exact = 0;
    for (float v : x) exact += v;
    const float f32 = verify::emulated_running_sum(x.data(), x.size(), verify::kFp32);
    CHECK(std::fabs(f32 - exact) <= 16384 * std::ldexp(1.0, -24) * exact);
    float plain = 0.0f;
    for (float v : x) plain += v;
    CHECK(f32 == plain);
}

TEST_CASE("GEMM tolerance: the formula", "[precision]") {
    CHECK(verify::gemm_tolerance(0, 0, 0, 100) == 0.0);
    CHECK(verify::gemm_tolerance(1, 0, 0, 100) == 4.0);
    CHECK(verify::gemm_tolerance(0, 1, 0, 100) == 2.0);
    CHECK(verify::gemm_tolerance(0, 0, 1, 100) == 40.0);
    CHECK(verify::gemm_rounded_tolerance(1, 0, 100, true) == 2.0);
    CHECK(verify::gemm_rounded_tolerance(0, 1, 100, false) == 40.0);
    CHECK(verify::gemm_rounded_tolerance(0, 1, 100, true) == 40.0 + 50.0);  // + 2 u_acc K / 4
    // FP8 in, BF16 out, accumulator budgeted at 2^-14, K = 4096: 2 * 2^-8 + 4 * 2^-14 * 64
    CHECK(verify::gemm_rounded_tolerance(0x1p-8, 0x1p-14, 4096, false) == 0x1p-7 + 0x1p-6);
}

// Lesson 19's FP8 path on the CPU: A and Bt at the lesson's ranges, quantized with scales
// q = 448 / amax (right, or planted wrong), multiplied exactly, multiplied back by the
// dequantization scales and rounded to BF16 (a GPU's accumulation error aside: it is what the
// 2^-14 budget covers). The result is checked as the lesson checks it: against the float
// inputs (tolerance 4 u_in + 2 u_out + 4 u_acc sqrt(K)) and against the rightly rounded inputs
// (2 u_out + 4 u_acc sqrt(K)).
namespace {
struct Fp8Case {
    std::vector<float> A, Bt;  // rows x K, N x K
    float amax_a, amax_bt;
    std::vector<int64_t> rows;
    std::vector<double> ref, ref_rounded;
    int64_t N, K;
};
// x * q rounded to E4M3 (saturating), as the lesson's conversion kernel and round_inputs do it.
std::vector<float> e4m3_codes(const std::vector<float>& x, float q) {
    std::vector<float> c(x.size());
    for (size_t i = 0; i < x.size(); ++i) c[i] = verify::e4m3_bits_to_float(verify::to_e4m3_bits(x[i] * q));
    return c;
}
Fp8Case fp8_case(float range_a, float range_bt, int64_t M, int64_t N, int64_t K) {
    Fp8Case f{std::vector<float>(size_t(M * K)), std::vector<float>(size_t(N * K)), 0, 0, {}, {}, {}, N, K};
    verify::fill_uniform(f.A.data(), f.A.size(), 100, -range_a, range_a);
    verify::fill_uniform(f.Bt.data(), f.Bt.size(), 101, -range_bt, range_bt);
    f.amax_a = verify::amax_of(f.A.data(), f.A.size());
    f.amax_bt = verify::amax_of(f.Bt.data(), f.Bt.size());
    for (int64_t i = 0; i < M; ++i) f.rows.push_back(i);
    f.ref.resize(size_t(M * N));
    verify::gemm_abt_rows(f.A.data(), f.Bt.data(), N, K, f.rows, f.ref.data());
    f.ref_rounded.resize(f.ref.size());
    const std::vector<float> a = e4m3_codes(f.A, verify::fp8_quant_scale(f.amax_a));
    const std::vector<float> b = e4m3_codes(f.Bt, verify::fp8_quant_scale(f.amax_bt));
    verify::gemm_abt_rows(a.data(), b.data(), N, K, f.rows, f.ref_rounded.data(),
                          double(verify::fp8_dequant_scale(f.amax_a)) * verify::fp8_dequant_scale(f.amax_bt));
    return f;
}
// The emulated GPU result from codes quantized with q_a, q_bt and dequantized with s_a, s_bt,
// checked both ways; returns {vs float, vs rounded}.
std::pair<lesson::Check, lesson::Check> fp8_checks(const Fp8Case& f, const char* what, float q_a, float q_bt,
                                                   double s_a, double s_bt,
                                                   const verify::FloatFormat& fmt = verify::kE4m3) {
    auto codes = [&](const std::vector<float>& x, float q) {
        std::vector<float> c(x.size());
        for (size_t i = 0; i < x.size(); ++i) c[i] = float(verify::round_to(double(x[i] * q), fmt));
        return c;
    };
    const std::vector<float> a = codes(f.A, q_a), b = codes(f.Bt, q_bt);
    std::vector<double> d(f.ref.size());
    verify::gemm_abt_rows(a.data(), b.data(), f.N, f.K, f.rows, d.data(), s_a * s_bt);
    std::vector<float> got(d.size());
    for (size_t i = 0; i < d.size(); ++i) got[i] = float(verify::round_to(d[i], verify::kBf16));
    const double tol = verify::gemm_tolerance(0x1p-4, 0x1p-8, 0x1p-14, f.K);
    const double tol_r = verify::gemm_rounded_tolerance(0x1p-8, 0x1p-14, f.K, false);
    const lesson::Check c = verify::compare(got.data(), f.ref.data(), got.size(), tol, "vs float inputs");
    const lesson::Check cr = verify::compare(got.data(), f.ref_rounded.data(), got.size(), tol_r, "vs rounded");
    std::printf("  FP8 %-44s vs float %.3e (tol %.3f) %s, vs rounded %.3e (tol %.4f) %s\n", what, c.rel_l2, tol,
                c.pass ? "pass" : "FAIL", cr.rel_l2, tol_r, cr.pass ? "pass" : "FAIL");
    return {c, cr};
}
}  // namespace

TEST_CASE("FP8 on lesson 19's inputs: a wrong scale fails the check against the rounded inputs", "[precision]") {
    const int64_t M = 16, N = 256, K = 4096;
    const Fp8Case f = fp8_case(verify::kGemmRangeA, verify::kGemmRangeBt, M, N, K);
    std::printf("FP8 E4M3, A in [-%g, %g), Bt in [-%g, %g), %lld x %lld x %lld, amax %g and %g:\n",
                double(verify::kGemmRangeA), double(verify::kGemmRangeA), double(verify::kGemmRangeBt),
                double(verify::kGemmRangeBt), (long long)M, (long long)N, (long long)K, double(f.amax_a),
                double(f.amax_bt));
    const float qa = verify::fp8_quant_scale(f.amax_a), qb = verify::fp8_quant_scale(f.amax_bt);
    const double sa = verify::fp8_dequant_scale(f.amax_a), sb = verify::fp8_dequant_scale(f.amax_bt);
    const double tol_r = verify::gemm_rounded_tolerance(0x1p-8, 0x1p-14, K, false);

    const auto right = fp8_checks(f, "right scales", qa, qb, sa, sb);
    CHECK(right.first.pass);
    CHECK(right.second.pass);
    CHECK(right.second.rel_l2 < tol_r / 5);  // BF16's output rounding alone, about 1.7e-3

    // Every planted wrong scale fails against the rounded inputs, by 4x its tolerance or more.
    const auto hard448 = fp8_checks(f, "q = 448 for both, dequantized by 1/448", 448.0f, 448.0f, 1.0 / 448, 1.0 / 448);
    CHECK_FALSE(hard448.first.pass);
    CHECK_FALSE(hard448.second.pass);
    const auto hard448s = fp8_checks(f, "q = 448 for both, dequantized by amax/448", 448.0f, 448.0f, sa, sb);
    CHECK_FALSE(hard448s.first.pass);
    CHECK_FALSE(hard448s.second.pass);
    const auto shared_a = fp8_checks(f, "A's amax for both tensors", qa, qa, sa, sa);
    CHECK_FALSE(shared_a.second.pass);
    CHECK(shared_a.second.rel_l2 > 4 * tol_r);  // all of Bt below E4M3's normal range: 1e-3 * 448/48 < 2^-6
    const auto shared_bt = fp8_checks(f, "Bt's amax for both tensors", qb, qb, sb, sb);
    CHECK_FALSE(shared_bt.first.pass);
    CHECK_FALSE(shared_bt.second.pass);
    const auto one_dequant = fp8_checks(f, "A's dequantization scale for both", qa, qb, sa, sa);
    CHECK_FALSE(one_dequant.first.pass);
    CHECK_FALSE(one_dequant.second.pass);
    const verify::FloatFormat e5m2{"FP8 E5M2", 3, 5, 15, -14, 57344.0, true};  // one significand bit fewer
    const auto fewer_bits = fp8_checks(f, "E5M2 (one bit fewer) with E4M3's scales", qa, qb, sa, sb, e5m2);
    CHECK_FALSE(fewer_bits.second.pass);
    for (const auto* wrong : {&hard448, &hard448s, &shared_bt, &one_dequant, &fewer_bits})
        CHECK(wrong->second.rel_l2 > 3 * tol_r);

    // The same planted errors on inputs that are both uniform in [-1, 1) (amax of both about 1, so
    // q about 448 for both): they change a few roundings and pass both checks. This is why the
    // lesson draws A and Bt at different scales.
    const Fp8Case same = fp8_case(1.0f, 1.0f, M, N, K);
    std::printf("FP8 E4M3, A and Bt both in [-1, 1) (amax %g and %g):\n", double(same.amax_a), double(same.amax_bt));
    const auto same448 =
        fp8_checks(same, "q = 448 for both, dequantized by 1/448", 448.0f, 448.0f, 1.0 / 448, 1.0 / 448);
    CHECK(same448.first.pass);
    CHECK(same448.second.pass);
    const double sa1 = verify::fp8_dequant_scale(same.amax_a);
    const auto same_dequant =
        fp8_checks(same, "A's dequantization scale for both", verify::fp8_quant_scale(same.amax_a),
                   verify::fp8_quant_scale(same.amax_bt), sa1, sa1);
    CHECK(same_dequant.first.pass);
    CHECK(same_dequant.second.pass);
}

// A tensor core's FP32 accumulation on the CPU: blocks of `block` exact products added into a
// float accumulator rounded toward zero (the shifted-out bits cut off).
static std::vector<float> truncated_sums(const std::vector<float>& A, const std::vector<float>& Bt, int64_t M,
                                         int64_t N, int64_t K, int64_t block) {
    std::vector<float> out(size_t(M * N));
    for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
            float acc = 0.0f;
            for (int64_t k0 = 0; k0 < K; k0 += block) {
                double b = 0.0;  // in double: its error is far below the float accumulator's
                for (int64_t k = k0; k < k0 + block; ++k) b += double(A[size_t(i * K + k)]) * Bt[size_t(j * K + k)];
                const double v = double(acc) + b;
                float r = float(v);                                                    // to nearest
                if (std::fabs(double(r)) > std::fabs(v)) r = std::nextafter(r, 0.0f);  // toward zero
                acc = r;
            }
            out[size_t(i * N + j)] = acc;
        }
    return out;
}

TEST_CASE("TF32 on lesson 19's inputs: truncated FP32 sums pass the rounded-input tolerance", "[precision]") {
    const int64_t M = 16, N = 64;
    for (int64_t K : {4096, 8192}) {
        std::vector<float> A(size_t(M * K)), Bt(size_t(N * K));
        verify::fill_uniform(A.data(), A.size(), 7, -verify::kGemmRangeA, verify::kGemmRangeA);
        verify::fill_uniform(Bt.data(), Bt.size(), 8, -verify::kGemmRangeBt, verify::kGemmRangeBt);
        std::vector<float> At(A.size()), Btt(Bt.size());
        for (size_t i = 0; i < A.size(); ++i) At[i] = verify::to_tf32(A[i]);
        for (size_t i = 0; i < Bt.size(); ++i) Btt[i] = verify::to_tf32(Bt[i]);
        std::vector<int64_t> rows;
        for (int64_t i = 0; i < M; ++i) rows.push_back(i);
        std::vector<double> ref_rounded(size_t(M * N)), from_floats(size_t(M * N));
        verify::gemm_abt_rows(At.data(), Btt.data(), N, K, rows, ref_rounded.data());
        verify::gemm_abt_rows(A.data(), Bt.data(), N, K, rows, from_floats.data());
        const double u = 0x1p-24;
        const double tol = verify::gemm_rounded_tolerance(u, u, K, true);
        const double tol_nearest = verify::gemm_rounded_tolerance(u, u, K, false);
        for (int64_t block : {4, 8}) {
            const std::vector<float> got = truncated_sums(At, Btt, M, N, K, block);
            const lesson::Check c = verify::compare(got.data(), ref_rounded.data(), got.size(), tol, "truncated");
            std::printf(
                "  TF32 K = %lld, truncated blocks of %lld: vs rounded %.3e (%.3f u K), tolerance %.3e %s "
                "(round-to-nearest terms alone %.3e)\n",
                (long long)K, (long long)block, c.rel_l2, c.rel_l2 / (u * double(K)), tol, c.pass ? "pass" : "FAIL",
                tol_nearest);
            CHECK(c.pass);
            CHECK(c.rel_l2 < tol / 3);
        }
        // A path that skipped the rounding to TF32 is off by the input rounding, about 2.8e-4.
        const lesson::Check unrounded =
            verify::compare(from_floats.data(), ref_rounded.data(), from_floats.size(), tol, "unrounded");
        std::printf("  TF32 K = %lld, inputs not rounded to TF32: vs rounded %.3e, tolerance %.3e %s\n", (long long)K,
                    unrounded.rel_l2, tol, unrounded.pass ? "pass" : "FAIL");
        if (K == 4096) CHECK_FALSE(unrounded.pass);
    }
}

TEST_CASE("exponent_of and pow2 agree with frexp and ldexp, normal and subnormal doubles", "[precision]") {
    for (int e = -1074; e <= 1023; ++e) {
        INFO("e = " << e);
        REQUIRE(verify::pow2(e) == std::ldexp(1.0, e));
        for (double m : {1.0, 1.5, 1.9999999999999998}) {
            const double a = std::ldexp(m, e);
            if (a == 0.0 || std::isinf(a)) continue;
            int e2 = 0;
            std::frexp(a, &e2);
            REQUIRE(verify::exponent_of(a) == e2 - 1);
        }
    }
    CHECK(verify::pow2(-1080) == 0.0);
    CHECK(std::isinf(verify::pow2(1024)));
}

// The bit-level conversions against round_to, encode and decode (the *_generic functions).
// Decoding: every FP16, BF16 and E4M3 pattern, bit for bit.
TEST_CASE("bit-level decoding = decode, every FP16, BF16 and E4M3 pattern, bit for bit", "[precision]") {
    auto bits = [](float x) {
        uint32_t u;
        std::memcpy(&u, &x, 4);
        return u;
    };
    for (uint32_t b = 0; b < 65536; ++b) {
        INFO("bits " << b);
        REQUIRE(bits(verify::fp16_bits_to_float(uint16_t(b))) == bits(verify::fp16_bits_to_float_generic(uint16_t(b))));
        REQUIRE(bits(verify::bf16_bits_to_float(uint16_t(b))) == bits(verify::bf16_bits_to_float_generic(uint16_t(b))));
    }
    for (uint32_t b = 0; b < 256; ++b)
        REQUIRE(bits(verify::e4m3_bits_to_float(uint8_t(b))) == bits(verify::e4m3_bits_to_float_generic(uint8_t(b))));
}

// Rounding: every float. Infinities and NaNs take the generic path itself (checked on a sample
// below). The finite floats of one sign, in order of their bits, are in order of magnitude, and so
// are the results' bits; rounding to nearest (with overflow to inf, or saturation) never reverses
// that order, so round_to is monotone. The sweep computes the bit-level function for every finite
// float, checks that it is monotone too, and checks round_to at both ends of every run of inputs
// where it is constant: two monotone functions that agree at both ends of a run agree inside it.
// So the two agree on all 2^32 floats, while round_to itself runs at the 2 x 10^6 run ends only
// (it takes about 10 ns a call: all 2^32 would take minutes).
template <class T, class Fast, class Generic>
static uint64_t disagreements_over_every_float(const Fast& fast, const Generic& generic) {
    constexpr uint32_t kChunk = 4096;
    uint64_t bad = 0;
    for (uint32_t base : {0u, 0x80000000u}) {  // +0 .. largest float, then -0 .. -largest float
        const uint64_t n = 0x7F800000u;
        const std::vector<uint64_t> parts =
            verify::block_partials<uint64_t>(n, uint64_t(1) << 22, [&](uint64_t b, uint64_t e) {
                uint64_t nbad = 0;
                T out[kChunk + 1];
                out[0] = fast(base + uint32_t(b));
                nbad += generic(base + uint32_t(b)) != out[0];
                for (uint64_t c = b; c + 1 < e; c += kChunk) {
                    const uint32_t u0 = base + uint32_t(c), m = uint32_t(std::min<uint64_t>(kChunk, e - 1 - c));
                    for (uint32_t k = 1; k <= m; ++k) out[k] = fast(u0 + k);
                    uint32_t down = 0, changes = 0;
                    for (uint32_t k = 1; k <= m; ++k) {
                        down |= uint32_t(out[k] < out[k - 1]);
                        changes |= uint32_t(out[k] != out[k - 1]);
                    }
                    nbad += down;
                    for (uint32_t k = 1; changes != 0 && k <= m; ++k)
                        if (out[k] != out[k - 1])
                            nbad += uint64_t(generic(u0 + k - 1) != out[k - 1]) + uint64_t(generic(u0 + k) != out[k]);
                    out[0] = out[m];
                }
                nbad += generic(base + uint32_t(e - 1)) != out[0];
                return nbad;
            });
        for (uint64_t p : parts) bad += p;
    }
    // Infinities and NaNs: a sample of each sign's 2^23 + 1 patterns.
    for (uint32_t sign : {0u, 0x80000000u})
        for (uint32_t m = 0; m < (1u << 23); m += 4099)
            for (uint32_t low : {0u, 1u, 0x3FFFFFu, 0x400000u, 0x7FFFFFu})
                bad += generic(sign | 0x7F800000u | ((m | low) & 0x7FFFFFu)) !=
                       fast(sign | 0x7F800000u | ((m | low) & 0x7FFFFFu));
    return bad;
}

TEST_CASE("bit-level rounding = round_to and encode for every float: TF32, BF16, FP16, E4M3", "[precision]") {
    auto f = [](uint32_t u) {
        float x;
        std::memcpy(&x, &u, 4);
        return x;
    };
    auto bits = [](float x) {
        uint32_t u;
        std::memcpy(&u, &x, 4);
        return u;
    };
    CHECK(disagreements_over_every_float<uint32_t>([&](uint32_t u) { return bits(verify::to_tf32(f(u))); },
                                                   [&](uint32_t u) { return bits(verify::to_tf32_generic(f(u))); }) ==
          0);
    CHECK(disagreements_over_every_float<uint16_t>([&](uint32_t u) { return verify::to_bf16_bits(f(u)); },
                                                   [&](uint32_t u) { return verify::to_bf16_bits_generic(f(u)); }) ==
          0);
    CHECK(disagreements_over_every_float<uint16_t>([&](uint32_t u) { return verify::to_fp16_bits(f(u)); },
                                                   [&](uint32_t u) { return verify::to_fp16_bits_generic(f(u)); }) ==
          0);
    CHECK(disagreements_over_every_float<uint8_t>([&](uint32_t u) { return verify::to_e4m3_bits(f(u)); },
                                                  [&](uint32_t u) { return verify::to_e4m3_bits_generic(f(u)); }) == 0);
}

TEST_CASE("lesson 19's rounded inputs: each element rounded alone, rows of A packed", "[precision]") {
    const int64_t M = 40, N = 24, K = 3000;  // K x N past one block of the parallel loop
    std::vector<float> A(size_t(M * K)), Bt(size_t(N * K));
    verify::fill_uniform(A.data(), A.size(), 21, -verify::kGemmRangeA, verify::kGemmRangeA);
    verify::fill_uniform(Bt.data(), Bt.size(), 22, -verify::kGemmRangeBt, verify::kGemmRangeBt);
    const std::vector<int64_t> rows = {3, 17, 39};
    const float amax_a = verify::amax_of(A.data(), A.size()), amax_bt = verify::amax_of(Bt.data(), Bt.size());
    const float qa = verify::fp8_quant_scale(amax_a), qb = verify::fp8_quant_scale(amax_bt);
    for (const verify::FloatFormat* f : {&verify::kTf32, &verify::kBf16, &verify::kFp16, &verify::kE4m3}) {
        const verify::RoundedInputs r =
            verify::round_gemm_inputs(*f, A.data(), Bt.data(), Bt.size(), rows, K, amax_a, amax_bt);
        const bool e4m3 = f == &verify::kE4m3, tf32 = f == &verify::kTf32;
        REQUIRE(r.a_rows.size() == rows.size() * size_t(K));
        REQUIRE(r.bt.size() == Bt.size());
        CHECK(r.a_bits.size() == (tf32 ? 0 : r.a_rows.size()));
        CHECK(r.bt_bits.size() == (tf32 ? 0 : r.bt.size()));
        auto one = [&](float x, float q, float v, const uint16_t* bits) {
            if (tf32) return v == verify::to_tf32(x);
            const double want = verify::round_to(double(e4m3 ? x * q : x), *f);
            return double(v) == want && *bits == uint16_t(verify::encode(want, *f));
        };
        bool all = true;
        for (size_t i = 0; i < rows.size(); ++i)
            for (int64_t k = 0; k < K; ++k) {
                const size_t at = i * size_t(K) + size_t(k);
                all = all && one(A[size_t(rows[i] * K + k)], qa, r.a_rows[at], tf32 ? nullptr : &r.a_bits[at]);
            }
        for (size_t i = 0; i < Bt.size(); ++i) all = all && one(Bt[i], qb, r.bt[i], tf32 ? nullptr : &r.bt_bits[i]);
        CHECK(all);
        CHECK(r.scale_a == (e4m3 ? verify::fp8_dequant_scale(amax_a) : 1.0f));
        CHECK(r.scale_bt == (e4m3 ? verify::fp8_dequant_scale(amax_bt) : 1.0f));
        CHECK(r.scale == double(r.scale_a) * double(r.scale_bt));
    }
}

TEST_CASE("exact check of stored bits: 1- and 2-byte values, parts, first bad element", "[precision]") {
    const uint64_t n = 200000;  // past one block
    std::vector<uint16_t> cpu(n), g16(n);
    std::vector<uint8_t> g8(n);
    for (uint64_t i = 0; i < n; ++i) {
        cpu[i] = uint16_t(i % 251);
        g16[i] = cpu[i];
        g8[i] = uint8_t(cpu[i]);
    }
    lesson::Check c;
    c = verify::add_same_bits(c, g16.data(), 2, cpu.data(), n, 0);
    c = verify::add_same_bits(c, g8.data(), 1, cpu.data(), n, n);
    CHECK(c.pass);
    CHECK(c.checked == 2 * n);
    CHECK(c.first_bad == -1);
    g8[150000] ^= 1;
    g8[7] ^= 1;
    g16[199999] ^= 0x100;  // a high byte: a 2-byte compare must see it
    lesson::Check bad;
    bad = verify::add_same_bits(bad, g16.data(), 2, cpu.data(), n, 0);
    bad = verify::add_same_bits(bad, g8.data(), 1, cpu.data(), n, n);
    CHECK_FALSE(bad.pass);
    CHECK(bad.bad_count == 3);
    CHECK(bad.first_bad == 199999);  // the first part's first bad element
    lesson::Check none;
    none = verify::add_same_bits(none, g8.data(), 1, cpu.data(), 0, 0);
    CHECK_FALSE(none.pass);  // nothing checked is no pass
}
