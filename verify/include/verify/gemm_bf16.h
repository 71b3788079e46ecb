// verify/gemm_bf16.h - bf16 inputs for the tensor-core GEMM (lesson 20).
//
// The GPU multiplies bf16 numbers (8 bits of mantissa); the CPU reference must multiply
// exactly the same numbers, or it measures the rounding of the inputs instead of the
// kernel. So the inputs are drawn as floats, rounded to bf16 once (round to nearest, ties
// to even, as __float2bfloat16 does), and kept twice: as the 16-bit patterns the GPU gets,
// and as the floats they stand for (exactly representable), which verify/matmul.h turns into
// the double-precision reference.
#pragma once
#include <cstdint>
#include <cstring>

#include "verify/parallel.h"
#include "verify/random.h"

namespace verify {

// The bf16 nearest to x (ties to even), as its 16 bits: the top half of the float's bits.
inline uint16_t bf16_bits(float x) {
    uint32_t u;
    std::memcpy(&u, &x, sizeof u);
    if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x007FFFFFu) != 0)
        return static_cast<uint16_t>((u >> 16) | 0x0040u);  // NaN stays a (quiet) NaN
    const uint32_t lsb = (u >> 16) & 1u;                    // round half to even
    u += 0x7FFFu + lsb;
    return static_cast<uint16_t>(u >> 16);
}

// The float a bf16 bit pattern stands for (exact).
inline float bf16_float(uint16_t b) {
    const uint32_t u = uint32_t(b) << 16;
    float x;
    std::memcpy(&x, &u, sizeof x);
    return x;
}

// n random bf16 values in [lo, hi]: bits[i] for the GPU, values[i] == bf16_float(bits[i]) for
// the reference. Deterministic for a seed, whatever the thread count.
inline void fill_bf16(uint16_t* bits, float* values, uint64_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
    parallel_blocks(n, uint64_t(1) << 16, [=](uint64_t begin, uint64_t end) {
        for (uint64_t i = begin; i < end; ++i) {
            bits[i] = bf16_bits(hash_uniform(seed, i, lo, hi));
            values[i] = bf16_float(bits[i]);
        }
    });
}

}  // namespace verify
