// Lesson 14 of the course (reduction), rung 2 of 11: strided index, no divergence, bank conflicts.
//
// Rung 1's tree with the work given to threads 0, 1, 2, ...: thread t adds the
// pair at index 2 s t. The working threads are packed into the first warps, so
// a warp is either all in or all out of the branch (until fewer than 32 are
// left). The price: in step s a warp reads shared memory with a stride of 2s
// words, and words 32 apart sit in the same bank: a 2-way bank conflict at
// s = 1, 4-way at s = 2, 8-way at s = 4, 8 and 16 (README, "The idea").
// One pass of the multi-pass tree, like rung 1.
// Before: rung 1 (kernels/1_interleaved.cuh). Next: rung 3
// (kernels/3_sequential.cuh), sequential addressing: no divergence, no conflicts.
// Run: ./build/bin/reduction --rung=2   (this rung alone, beside CUB; README.md is the handout)
#pragma once
#include <cuda_runtime.h>
#include <cstddef>
#include "common.cuh"
#include "common/check.h"
#include "common/launch.h"

namespace rung2 {

constexpr int kThreads = 256;  // a power of two: the tree halves it down to 1
constexpr int kLevels = 8;     // log2(kThreads): additions on every path through the tree

// Block b sums in[b * kThreads, (b + 1) * kThreads) into out[b].
__global__ void reduceStrided(const float* __restrict__ in, float* __restrict__ out, size_t n) {
    __shared__ float sdata[kThreads];
    const unsigned tid = threadIdx.x;
    const size_t i = size_t(blockIdx.x) * blockDim.x + tid;
    sdata[tid] = i < n ? in[i] : 0.0f;  // past the end: 0, which adds nothing
    __syncthreads();
    for (unsigned s = 1; s < kThreads; s *= 2) {
        const unsigned index = 2 * s * tid;  // threads 0, 1, 2, ... work; their words are 2s apart
        if (index < kThreads) sdata[index] += sdata[index + s];
        __syncthreads();
    }
    if (tid == 0) out[blockIdx.x] = sdata[0];
}

// One pass: count values -> one partial sum per block.
inline Pass launch(const float* in, size_t count, float* out, const Scratch<float>&) {
    const size_t blocks = lesson::ceil_div(count, kThreads);
    reduceStrided<<<unsigned(blocks), kThreads>>>(in, out, count);
    CUDA_CHECK_LAUNCH();
    return {blocks, kLevels};
}

}  // namespace rung2
