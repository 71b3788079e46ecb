// Lesson 14 of the course (reduction), rung 1 of 11: interleaved addressing, a divergent branch.
//
// The classic tree in shared memory: each block loads kThreads values and
// halves them kLevels times down to one. In step s, the threads whose index is
// a multiple of 2s add the value s places to their right. Correct, but the
// threads that work are scattered over every warp: at s = 1 half the lanes of
// every warp take the branch, at s = 2 a quarter... (divergence), and the `%`
// of a runtime value is a slow integer division.
// This is one pass of the multi-pass tree: n values -> ceil(n / kThreads)
// partial sums; main.cu (run_rung) launches passes until one value is left.
// Before: lesson 13. Next: rung 2 (kernels/2_strided_index.cuh), the same tree
// with the working threads packed together.
// Run: ./build/bin/reduction --rung=1   (this rung alone, beside CUB; README.md is the handout)
#pragma once
#include <cuda_runtime.h>
#include <cstddef>
#include "common.cuh"
#include "common/check.h"
#include "common/launch.h"

namespace rung1 {

constexpr int kThreads = 256;  // a power of two: the tree halves it down to 1
constexpr int kLevels = 8;     // log2(kThreads): additions on every path through the tree

// Block b sums in[b * kThreads, (b + 1) * kThreads) into out[b].
__global__ void reduceInterleaved(const float* __restrict__ in, float* __restrict__ out, size_t n) {
    __shared__ float sdata[kThreads];
    const unsigned tid = threadIdx.x;
    const size_t i = size_t(blockIdx.x) * blockDim.x + tid;
    sdata[tid] = i < n ? in[i] : 0.0f;  // past the end: 0, which adds nothing
    __syncthreads();
    for (unsigned s = 1; s < kThreads; s *= 2) {
        if (tid % (2 * s) == 0) sdata[tid] += sdata[tid + s];  // threads 0, 2s, 4s, ...: every warp diverges
        __syncthreads();
    }
    if (tid == 0) out[blockIdx.x] = sdata[0];
}

// One pass: count values -> one partial sum per block.
inline Pass launch(const float* in, size_t count, float* out, const Scratch<float>&) {
    const size_t blocks = lesson::ceil_div(count, kThreads);
    reduceInterleaved<<<unsigned(blocks), kThreads>>>(in, out, count);
    CUDA_CHECK_LAUNCH();
    return {blocks, kLevels};
}

}  // namespace rung1
