#include <cmath>
#include <cstdint>
#include <vector>
#include "catch_shim.hpp"
#include "verify/gemm_bf16.h"

TEST_CASE("bf16: exact values keep their bits", "[gemm_bf16]") {
    CHECK(verify::bf16_bits(1.0f) == 0x3F80);
    CHECK(verify::bf16_bits(-2.0f) == 0xC000);
    CHECK(verify::bf16_bits(0.0f) == 0x0000);
    CHECK(verify::bf16_float(0x3F80) == 1.0f);
    CHECK(verify::bf16_float(0x3FC0) == 1.5f);
    for (uint32_t b = 0; b < 0x7F80; b += 37)  // every finite positive pattern sampled: a round trip
        CHECK(verify::bf16_bits(verify::bf16_float(uint16_t(b))) == b);
}

TEST_CASE("bf16: rounds to nearest, ties to even", "[gemm_bf16]") {
    const float ulp = std::ldexp(1.0f, -7);                  // bf16 spacing in [1, 2)
    CHECK(verify::bf16_bits(1.0f + 0.5f * ulp) == 0x3F80);   // tie: down to the even 1.0
    CHECK(verify::bf16_bits(1.0f + 1.5f * ulp) == 0x3F82);   // tie: up to the even 1 + 2 ulp
    CHECK(verify::bf16_bits(1.0f + 0.75f * ulp) == 0x3F81);  // nearer the odd neighbour
    CHECK(verify::bf16_bits(1.0f + 0.25f * ulp) == 0x3F80);
    CHECK(verify::bf16_bits(-(1.0f + 0.75f * ulp)) == 0xBF81);
}

TEST_CASE("bf16: NaN stays NaN, infinity stays infinity", "[gemm_bf16]") {
    CHECK(std::isnan(verify::bf16_float(verify::bf16_bits(NAN))));
    CHECK(verify::bf16_bits(INFINITY) == 0x7F80);
    CHECK(verify::bf16_bits(-INFINITY) == 0xFF80);
    CHECK(verify::bf16_bits(3.4e38f) == 0x7F80);  // past the largest bf16: rounds to infinity
}

TEST_CASE("bf16: fill gives representable values that match their bits, deterministically", "[gemm_bf16]") {
    const uint64_t n = 200003;  // several blocks of the parallel fill
    std::vector<uint16_t> bits(n), bits2(n);
    std::vector<float> values(n), values2(n);
    verify::fill_bf16(bits.data(), values.data(), n, 7);
    verify::fill_bf16(bits2.data(), values2.data(), n, 7);
    uint64_t mismatched = 0, outside = 0, differ = 0, distinct_low = 0;
    for (uint64_t i = 0; i < n; ++i) {
        mismatched += verify::bf16_float(bits[i]) != values[i];
        outside += !(values[i] >= -1.0f && values[i] <= 1.0f);
        differ += bits[i] != bits2[i];
        distinct_low += i > 0 && bits[i] != bits[i - 1];
    }
    CHECK(mismatched == 0);
    CHECK(outside == 0);
    CHECK(differ == 0);
    CHECK(distinct_low > n / 2);  // random, not constant
    std::vector<uint16_t> other(n);
    verify::fill_bf16(other.data(), values2.data(), n, 8);
    uint64_t same = 0;
    for (uint64_t i = 0; i < n; ++i) same += other[i] == bits[i];
    CHECK(same < n / 10);  // another seed, other numbers
}
