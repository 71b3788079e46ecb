// Unit tests of verify/precision.h: rounding to FP16, BF16, TF32 and FP8 E4M3,
// the bit encodings, the sampled rows, the A * B^T reference and the emulated sums.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>
#include "catch_shim.hpp"
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
