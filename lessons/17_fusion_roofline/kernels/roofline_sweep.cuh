// Lesson 17 - fusion and the roofline: the roofline sweep, one kernel family whose
// arithmetic intensity is a template parameter.
//
// Every thread loads two float4 (8 floats, two loads a block width apart: coalesced),
// runs k fused multiply-adds v = fma(v, a, b) on each of its 8 values, and writes the
// 8 results: 8 bytes of DRAM traffic per float whatever k is, and 2k flops per float.
// The 8 values are 8 independent chains, interleaved (step j of every chain, then step
// j + 1), so the FMA pipe always has independent work; each result depends on every FMA
// of its chain, so the compiler cannot drop any (fma is rounded exactly once, and the
// compiler does not reassociate it). k = FMAS / EVERY: FMAS = 1, 2, ..., 512 FMAs on every
// element (EVERY = 1), or one FMA on every 2nd, 4th or 8th element (FMAS = 1, EVERY = 2,
// 4, 8: k = 1/2, 1/4, 1/8). Intensity = 2k flops / 8 bytes = k / 4 flop/byte, from 1/32
// (a copy, memory-bound) to 128 (far right of the ridge, compute-bound).
// Before: the fusion ladder (kernels/1_... to 3_...). Next: lesson 18.
// Run: ./build/bin/fusion_roofline --rung=4 [--k=K]
#pragma once
#include <cuda_runtime.h>
#include <algorithm>
#include <cstddef>
#include "common/check.h"
#include "common/launch.h"

namespace sweep {

constexpr int kThreads = 256;
constexpr int kVectors = 2;            // float4 per thread
constexpr int kValues = 4 * kVectors;  // independent FMA chains per thread

template <int FMAS, int EVERY>
__global__ void __launch_bounds__(kThreads)
    roofSweep(const float* __restrict__ x, float* __restrict__ y, size_t n, float a, float b) {
    static_assert(FMAS == 1 || EVERY == 1, "k is FMAS (every element) or 1 / EVERY");
    static_assert(EVERY == 1 || EVERY == 2 || EVERY == 4 || EVERY == 8, "EVERY divides a float4 pair");
    const float4* x4 = reinterpret_cast<const float4*>(x);  // cudaMalloc: 256-byte aligned
    float4* y4 = reinterpret_cast<float4*>(y);
    const size_t n4 = n / 4;  // whole float4s; the last n % 4 floats are the tail below
    const size_t q0 = size_t(blockIdx.x) * (kVectors * blockDim.x) + threadIdx.x;

    float v[kValues];
#pragma unroll
    for (int u = 0; u < kVectors; ++u) {
        const size_t q = q0 + size_t(u) * blockDim.x;
        const float4 t = q < n4 ? x4[q] : make_float4(0.f, 0.f, 0.f, 0.f);
        v[4 * u + 0] = t.x;
        v[4 * u + 1] = t.y;
        v[4 * u + 2] = t.z;
        v[4 * u + 3] = t.w;
    }
    if constexpr (EVERY == 1) {
        // FMAS steps of 8 independent chains; unrolled so that the loop counter costs about
        // 1% of the issue slots at FMAS >= 32 (every instruction takes an issue slot).
#pragma unroll 32
        for (int j = 0; j < FMAS; ++j) {
#pragma unroll
            for (int l = 0; l < kValues; ++l) v[l] = fmaf(v[l], a, b);
        }
    } else {
        // Element 4 q + l gets its one FMA when it is a multiple of EVERY.
#pragma unroll
        for (int u = 0; u < kVectors; ++u) {
            const size_t first = 4 * (q0 + size_t(u) * blockDim.x);
#pragma unroll
            for (int l = 0; l < 4; ++l)
                if ((first + l) % EVERY == 0) v[4 * u + l] = fmaf(v[4 * u + l], a, b);
        }
    }
#pragma unroll
    for (int u = 0; u < kVectors; ++u) {
        const size_t q = q0 + size_t(u) * blockDim.x;
        if (q < n4) y4[q] = make_float4(v[4 * u + 0], v[4 * u + 1], v[4 * u + 2], v[4 * u + 3]);
    }
    // The tail: the last n % 4 (at most 3) floats, one per thread of block 0, scalar.
    const size_t e = 4 * n4 + threadIdx.x;
    if (blockIdx.x == 0 && e < n) {
        float s = x[e];
        if (e % EVERY == 0)
            for (int j = 0; j < FMAS; ++j) s = fmaf(s, a, b);
        y[e] = s;
    }
}

// One launch over n floats: ceil(n4 / (kVectors kThreads)) blocks, at least one (the tail).
template <int FMAS, int EVERY>
void launch(const float* x, float* y, size_t n, float a, float b) {
    const size_t blocks = std::max<size_t>(1, lesson::ceil_div(n / 4, size_t(kVectors) * kThreads));
    roofSweep<FMAS, EVERY><<<unsigned(blocks), kThreads>>>(x, y, n, a, b);
    CUDA_CHECK_LAUNCH();
}

}  // namespace sweep
