// Lesson 14 of the course (reduction), rung 5 of 11: grid-stride loop over one wave of blocks.
//
// Rung 4 still launches n / (2 kThreads) blocks per pass, each adding one pair
// per thread. Here the grid is a fixed number of blocks (Scratch::grid, one
// full wave of resident blocks) and each thread keeps going: after its pair it
// steps a whole grid further on and adds the next pair into a register
// (grid-stride loop), until the input ends. The first pass then leaves only
// `grid` partial sums, and the tree in shared memory (rung 3's) runs once per
// block instead of once per 512 values.
// Before: rung 4 (kernels/4_first_add.cuh). Next: rung 6
// (kernels/6_warp_shuffle.cuh), the last warp of the tree with shuffles.
// Run: ./build/bin/reduction --rung=5   (this rung alone, beside CUB; README.md is the handout)
#pragma once
#include <cuda_runtime.h>
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include "common.cuh"
#include "common/check.h"
#include "common/launch.h"

namespace rung5 {

constexpr int kThreads = 256;  // a power of two: the tree halves it down to 1
constexpr int kLevels = 8;     // log2(kThreads): additions on every path through the tree

// Block b sums every value whose index i has (i / kThreads) % (2 gridDim) in
// {2b, 2b + 1} into out[b]: each thread adds in[i] + in[i + kThreads], then
// steps 2 kThreads gridDim further.
__global__ void reduceCoarsened(const float* __restrict__ in, float* __restrict__ out, size_t n) {
    __shared__ float sdata[kThreads];
    const unsigned tid = threadIdx.x;
    const size_t stride = size_t(2) * blockDim.x * gridDim.x;
    float sum = 0.0f;
    for (size_t i = size_t(blockIdx.x) * 2 * blockDim.x + tid; i < n; i += stride) {
        float pair = in[i];
        if (i + blockDim.x < n) pair += in[i + blockDim.x];  // the first add, during the load
        sum += pair;
    }
    sdata[tid] = sum;
    __syncthreads();
    for (unsigned s = kThreads / 2; s > 0; s >>= 1) {
        if (tid < s) sdata[tid] += sdata[tid + s];  // threads 0..s-1 work; a warp reads 32 consecutive words
        __syncthreads();
    }
    if (tid == 0) out[blockIdx.x] = sdata[0];
}

// One pass: count values -> one partial sum per block, at most s.grid blocks.
inline Pass launch(const float* in, size_t count, float* out, const Scratch<float>& s) {
    const size_t blocks = std::min<size_t>(lesson::ceil_div(count, 2 * kThreads), s.grid);
    reduceCoarsened<<<unsigned(blocks), kThreads>>>(in, out, count);
    CUDA_CHECK_LAUNCH();
    const uint64_t trips = lesson::ceil_div(count, 2 * kThreads * blocks);  // loop trips of thread 0
    return {blocks, 1 + trips + kLevels};                                   // the pair, the chain in `sum`, the tree
}

}  // namespace rung5
