// Lesson 17 - fusion and the roofline, rung 3 of 3: the fused chain, coarsened.
//
// Rung 2 with C elements per thread (C = 1, 2, 4, 8; --coarsen picks one): a block of
// kThreads threads covers C x kThreads consecutive elements, and thread t takes
// elements t, t + kThreads, t + 2 kThreads, ... of that tile, so that every load and
// store instruction of a warp still touches 32 consecutive floats (coalesced). The C
// loads are issued before any arithmetic: C independent loads in flight per thread,
// and 1/C as many blocks (and index computations) for the same n.
// Before: rung 2 (kernels/2_fused.cuh). Next: the roofline sweep
// (kernels/roofline_sweep.cuh), which moves along the other axis: flops per byte.
// Run: ./build/bin/fusion_roofline --rung=3 [--coarsen=C]
#pragma once
#include <cuda_runtime.h>
#include <cstddef>
#include "common.cuh"
#include "common/check.h"
#include "common/launch.h"

namespace rung3 {

constexpr int kThreads = 256;

template <int C>
__global__ void squareAddReluCoarsened(const float* __restrict__ x, float* __restrict__ y, size_t n) {
    const size_t base = size_t(blockIdx.x) * (size_t(C) * blockDim.x) + threadIdx.x;
    // EXERCISE 1 BEGIN: y[i] = max(x[i]^2 + 1, 0) for the C elements i = base + j * blockDim.x (j < C) of this thread
    // HINT: first all C loads (into registers), then all C computations and stores: the loads are then in flight together
    // HINT: the last block may run past n: load 0 there and store nothing
    float v[C];
#pragma unroll
    for (int j = 0; j < C; ++j) {
        const size_t i = base + size_t(j) * blockDim.x;
        v[j] = i < n ? x[i] : 0.0f;  // all C loads first: they are in flight together
    }
#pragma unroll
    for (int j = 0; j < C; ++j) {
        const size_t i = base + size_t(j) * blockDim.x;
        float t = v[j] * v[j];
        t = t + 1.0f;
        if (i < n) y[i] = fmaxf(t, 0.0f);
    }
    // EXERCISE 1 END
}

template <int C>
void launch(const Chain& c) {
    const unsigned blocks = unsigned(lesson::ceil_div(c.n, size_t(C) * kThreads));
    squareAddReluCoarsened<C><<<blocks, kThreads>>>(c.x, c.y, c.n);
    CUDA_CHECK_LAUNCH();
}

}  // namespace rung3
