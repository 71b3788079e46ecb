// Lesson 14 of the course (reduction), rung 4 of 11: first add during the load.
//
// Rungs 1-3 give each thread one value, so half of them idle from the first
// step of the tree. Here each thread loads two values a block width apart and
// adds them in a register before the tree (the first add, during the load):
// every thread has work at the first step, and a pass over n values launches
// n / (2 kThreads) blocks, half as many as rung 3. Still the multi-pass tree:
// each pass writes one partial sum per block for the next pass to read back.
// Before: rung 3 (kernels/3_sequential.cuh). Next: rung 5
// (kernels/5_grid_stride.cuh), a grid-stride loop over one wave of blocks.
// Run: ./build/bin/reduction --rung=4   (this rung alone, beside CUB; README.md is the handout)
#pragma once
#include <cuda_runtime.h>
#include <cstddef>
#include "common.cuh"
#include "common/check.h"
#include "common/launch.h"

namespace rung4 {

constexpr int kThreads = 256;  // a power of two: the tree halves it down to 1
constexpr int kLevels = 8;     // log2(kThreads): additions on every path through the tree

// Block b sums in[2b kThreads, (2b + 2) kThreads) into out[b]: each thread adds
// in[i] + in[i + kThreads] before the tree.
__global__ void reduceFirstAdd(const float* __restrict__ in, float* __restrict__ out, size_t n) {
    __shared__ float sdata[kThreads];
    const unsigned tid = threadIdx.x;
    const size_t i = size_t(blockIdx.x) * 2 * blockDim.x + tid;
    float pair = i < n ? in[i] : 0.0f;                   // past the end: 0, which adds nothing
    if (i + blockDim.x < n) pair += in[i + blockDim.x];  // the first add, during the load
    sdata[tid] = pair;
    __syncthreads();
    for (unsigned s = kThreads / 2; s > 0; s >>= 1) {
        if (tid < s) sdata[tid] += sdata[tid + s];  // threads 0..s-1 work; a warp reads 32 consecutive words
        __syncthreads();
    }
    if (tid == 0) out[blockIdx.x] = sdata[0];
}

// One pass: count values -> one partial sum per block, two values per thread.
inline Pass launch(const float* in, size_t count, float* out, const Scratch<float>&) {
    const size_t blocks = lesson::ceil_div(count, 2 * kThreads);
    reduceFirstAdd<<<unsigned(blocks), kThreads>>>(in, out, count);
    CUDA_CHECK_LAUNCH();
    return {blocks, 1 + kLevels};  // the pair, the tree
}

}  // namespace rung4
