// Lesson 14 of the course (reduction), rung 7 of 11: cooperative groups, cg::reduce.
//
// Rung 6's last warp, written with cooperative groups: the block is split into
// tiles of 32 threads (thread_block_tile<32>, one warp each), and
// cg::reduce(warp, value, cg::plus<float>()) sums the 32 lanes' values and
// gives the total to every lane. It compiles to the same five shuffle steps
// (a butterfly: shfl_xor with 16, 8, 4, 2, 1); for 32-bit integers on sm_80
// and newer it becomes a single redux.sync instruction. The group says which
// threads take part, so there is no lane mask to get wrong.
// Before: rung 6 (kernels/6_warp_shuffle.cuh). Next: rung 8
// (kernels/8_one_pass_finish.cuh), one pass and a finish kernel.
// Run: ./build/bin/reduction --rung=7   (this rung alone, beside CUB; README.md is the handout)
#pragma once
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include "common.cuh"
#include "common/check.h"
#include "common/launch.h"

namespace rung7 {

namespace cg = cooperative_groups;

constexpr int kThreads = 256;  // a power of two, at least 64: the tree halves it down to 64
constexpr int kLevels = 8;     // log2(kThreads): 2 tree steps, the pair, 5 shuffles

// Block b sums every value whose index i has (i / kThreads) % (2 gridDim) in
// {2b, 2b + 1} into out[b]: each thread adds in[i] + in[i + kThreads], then
// steps 2 kThreads gridDim further.
__global__ void reduceCg(const float* __restrict__ in, float* __restrict__ out, size_t n) {
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
    const cg::thread_block_tile<32> warp = cg::tiled_partition<32>(cg::this_thread_block());
    if (warp.meta_group_rank() == 0) {  // the last 64 values: warp 0 alone, in registers
        const float v = cg::reduce(warp, sdata[tid] + sdata[tid + 32], cg::plus<float>());
        if (warp.thread_rank() == 0) out[blockIdx.x] = v;
    }
}

// One pass: count values -> one partial sum per block, at most s.grid blocks.
inline Pass launch(const float* in, size_t count, float* out, const Scratch<float>& s) {
    const size_t blocks = std::min<size_t>(lesson::ceil_div(count, 2 * kThreads), s.grid);
    reduceCg<<<unsigned(blocks), kThreads>>>(in, out, count);
    CUDA_CHECK_LAUNCH();
    const uint64_t trips = lesson::ceil_div(count, 2 * kThreads * blocks);  // loop trips of thread 0
    return {blocks, 1 + trips + kLevels};                                   // the pair, the chain in `sum`, the tree
}

}  // namespace rung7
