// Lesson 14 of the course (reduction), rung 3 of 11: sequential addressing.
//
// The tree folded the other way: in step s the first s threads add the value s
// places away (s = kThreads / 2, ..., 1). The working threads are contiguous
// (whole warps drop out, none diverges while s >= 32) and a warp reads 32
// consecutive words: 32 different banks, no conflict. s runs on the constant
// kThreads, not blockDim.x, so the compiler can unroll the whole tree.
// One pass of the multi-pass tree, like rungs 1 and 2: half the threads of
// every block still idle from the first step on, and each pass writes its
// partial sums to memory for the next pass to read back.
// Before: rung 2 (kernels/2_strided_index.cuh). Next: rung 4
// (kernels/4_first_add.cuh), two values per thread before the tree.
// Run: ./build/bin/reduction --rung=3   (this rung alone, beside CUB; README.md is the handout)
#pragma once
#include <cuda_runtime.h>
#include <cstddef>
#include "common.cuh"
#include "common/check.h"
#include "common/launch.h"

namespace rung3 {

constexpr int kThreads = 256;  // a power of two: the tree halves it down to 1
constexpr int kLevels = 8;     // log2(kThreads): additions on every path through the tree

// Block b sums in[b * kThreads, (b + 1) * kThreads) into out[b].
__global__ void reduceSequential(const float* __restrict__ in, float* __restrict__ out, size_t n) {
    __shared__ float sdata[kThreads];
    const unsigned tid = threadIdx.x;
    // EXERCISE 1 BEGIN: load value i of this block into sdata[tid] (0 past n), then add the block's values into sdata[0]
    // HINT: i counts up to n, which may pass 2^31: compute it in size_t
    // HINT: halve s from kThreads / 2 to 1; threads tid < s add sdata[tid + s]; __syncthreads() between the levels
    // STUB: sdata[tid] = 0.0f;  // replace: the block's sum must end in sdata[0]
    const size_t i = size_t(blockIdx.x) * blockDim.x + tid;
    sdata[tid] = i < n ? in[i] : 0.0f;  // past the end: 0, which adds nothing
    __syncthreads();
    for (unsigned s = kThreads / 2; s > 0; s >>= 1) {
        if (tid < s) sdata[tid] += sdata[tid + s];  // threads 0..s-1 work; a warp reads 32 consecutive words
        __syncthreads();
    }
    // EXERCISE 1 END
    if (tid == 0) out[blockIdx.x] = sdata[0];
}

// One pass: count values -> one partial sum per block.
inline Pass launch(const float* in, size_t count, float* out, const Scratch<float>&) {
    const size_t blocks = lesson::ceil_div(count, kThreads);
    reduceSequential<<<unsigned(blocks), kThreads>>>(in, out, count);
    CUDA_CHECK_LAUNCH();
    return {blocks, kLevels};
}

}  // namespace rung3
