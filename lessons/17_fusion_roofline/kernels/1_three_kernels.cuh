// Lesson 17 - fusion and the roofline, rung 1 of 3: the chain as three kernels.
//
// The performance guide's example, one operation per kernel: square, add one, ReLU.
// Each kernel reads its input from global memory and writes its result back, so the
// two intermediates t1 and t2 make a round trip through DRAM: 6 n floats move
// (x read, t1 written, t1 read, t2 written, t2 read, y written) for 2 n floats of
// input and output. Indices are size_t: the guide's `int i` overflows past 2^31.
// Next: rung 2 (kernels/2_fused.cuh), the same chain in one kernel.
// Run: ./build/bin/fusion_roofline --rung=1
#pragma once
#include <cuda_runtime.h>
#include <cstddef>
#include "common.cuh"
#include "common/check.h"
#include "common/launch.h"

namespace rung1 {

constexpr int kThreads = 256;

__global__ void square(const float* __restrict__ x, float* __restrict__ t1, size_t n) {
    const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) t1[i] = x[i] * x[i];
}

__global__ void addOne(const float* __restrict__ t1, float* __restrict__ t2, size_t n) {
    const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) t2[i] = t1[i] + 1.0f;
}

__global__ void relu(const float* __restrict__ t2, float* __restrict__ y, size_t n) {
    const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(t2[i], 0.0f);
}

// Three launches in a row on the default stream: each starts when the one before has finished.
inline void launch(const Chain& c) {
    const unsigned blocks = unsigned(lesson::ceil_div(c.n, kThreads));
    square<<<blocks, kThreads>>>(c.x, c.t1, c.n);
    CUDA_CHECK_LAUNCH();
    addOne<<<blocks, kThreads>>>(c.t1, c.t2, c.n);
    CUDA_CHECK_LAUNCH();
    relu<<<blocks, kThreads>>>(c.t2, c.y, c.n);
    CUDA_CHECK_LAUNCH();
}

}  // namespace rung1
