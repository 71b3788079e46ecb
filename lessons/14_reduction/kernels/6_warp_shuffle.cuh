// Lesson 14 of the course (reduction), rung 6 of 11: the last warp with __shfl_down_sync.
//
// Rung 5's tree ends with five steps in which fewer than 32 threads work, each
// step a round trip through shared memory plus a __syncthreads() for the whole
// block. Once 64 values are left, one warp finishes alone: each lane adds a
// pair, then five shuffles (lane i adds the register of lane i + offset,
// offset = 16, 8, 4, 2, 1) leave the block's total in lane 0. No lockstep is
// assumed: __shfl_down_sync names the lanes taking part (all 32) and waits for
// each of them, so no barrier is needed between those steps.
// Before: rung 5 (kernels/5_grid_stride.cuh). Next: rung 7
// (kernels/7_cooperative_groups.cuh), the same warp step with cg::reduce.
// Run: ./build/bin/reduction --rung=6   (this rung alone, beside CUB; README.md is the handout)
#pragma once
#include <cuda_runtime.h>
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include "common.cuh"
#include "common/check.h"
#include "common/launch.h"

namespace rung6 {

constexpr int kThreads = 256;  // a power of two, at least 64: the tree halves it down to 64
constexpr int kLevels = 8;     // log2(kThreads): 2 tree steps, the pair, 5 shuffles

// Block b sums every value whose index i has (i / kThreads) % (2 gridDim) in
// {2b, 2b + 1} into out[b]: each thread adds in[i] + in[i + kThreads], then
// steps 2 kThreads gridDim further.
__global__ void reduceWarpShuffle(const float* __restrict__ in, float* __restrict__ out, size_t n) {
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
    for (unsigned s = kThreads / 2; s > 32; s >>= 1) {
        if (tid < s) sdata[tid] += sdata[tid + s];  // threads 0..s-1 work; a warp reads 32 consecutive words
        __syncthreads();
    }
    if (tid < 32) {  // the last 64 values: warp 0 alone, in registers
        float v = sdata[tid] + sdata[tid + 32];
        for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
        if (tid == 0) out[blockIdx.x] = v;
    }
}

// One pass: count values -> one partial sum per block, at most s.grid blocks.
inline Pass launch(const float* in, size_t count, float* out, const Scratch<float>& s) {
    const size_t blocks = std::min<size_t>(lesson::ceil_div(count, 2 * kThreads), s.grid);
    reduceWarpShuffle<<<unsigned(blocks), kThreads>>>(in, out, count);
    CUDA_CHECK_LAUNCH();
    const uint64_t trips = lesson::ceil_div(count, 2 * kThreads * blocks);  // loop trips of thread 0
    return {blocks, 1 + trips + kLevels};                                   // the pair, the chain in `sum`, the tree
}

}  // namespace rung6
