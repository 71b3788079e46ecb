// Lesson 17 - fusion and the roofline, rung 2 of 3: the chain fused into one kernel.
//
// Rung 1's three kernels become one: each thread reads x[i] once, keeps the two
// intermediates in a register, and writes y[i] once. 2 n floats move instead of 6 n,
// and two launches are gone. The arithmetic is the same three operations per element
// (the compiler may contract v * v + 1 into one FMA, rounded once).
// Before: rung 1 (kernels/1_three_kernels.cuh). Next: rung 3 (kernels/3_coarsened.cuh),
// several elements per thread.
// Run: ./build/bin/fusion_roofline --rung=2
#pragma once
#include <cuda_runtime.h>
#include <cstddef>
#include "common.cuh"
#include "common/check.h"
#include "common/launch.h"

namespace rung2 {

constexpr int kThreads = 256;

__global__ void squareAddRelu(const float* __restrict__ x, float* __restrict__ y, size_t n) {
    const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];         // read once
        v = v * v;              // square, in a register
        v = v + 1.0f;           // add one, in a register
        y[i] = fmaxf(v, 0.0f);  // ReLU, written once
    }
}

inline void launch(const Chain& c) {
    const unsigned blocks = unsigned(lesson::ceil_div(c.n, kThreads));
    squareAddRelu<<<blocks, kThreads>>>(c.x, c.y, c.n);
    CUDA_CHECK_LAUNCH();
}

}  // namespace rung2
