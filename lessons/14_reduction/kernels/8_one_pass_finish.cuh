// Lesson 14 of the course (reduction), rung 8 of 11: one pass, a tiny finish kernel.
//
// Rung 7 finishes in several passes, the host launching the kernel again on
// the partial sums until one value is left. Here the grid is one full wave of
// resident blocks whatever n is, each block writes one partial sum, and one
// more launch of a single block adds the partials in a fixed order
// (reduceFinish): two launches in all. The loads are rung 7's, a pair of
// 4-byte values per trip. Rung 7's tree and last warp become blockReduce(),
// because two kernels use it.
// Why not one atomicAdd per block into the result instead of the second kernel?
// Blocks finish in a different order every run, so the float additions happen
// in a different order and round differently: the result would change in its
// last bits from run to run. The finish kernel adds the partials in index
// order: the same bits every run (README, "Floating point").
// The kernels are templates (T the input, Acc the accumulator), as in rungs 9-11.
// Before: rung 7 (kernels/7_cooperative_groups.cuh). Next: rung 9
// (kernels/9_float4.cuh), 16-byte loads.
// Run: ./build/bin/reduction --rung=8   (this rung alone, beside CUB; README.md is the handout)
#pragma once
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cuda_runtime.h>
#include <cstddef>
#include <cstdint>
#include "common.cuh"
#include "common/check.h"
#include "common/launch.h"

namespace rung8 {

namespace cg = cooperative_groups;

constexpr int kThreads = 256;  // a power of two, at least 64: the tree halves it down to 64
constexpr int kLevels = 8;     // log2(kThreads): 2 tree steps, the pair, 5 shuffles

// The block's total, valid in thread 0: rung 7's tree and last warp, as a
// function, because two kernels use it.
template <class Acc>
__device__ Acc blockReduce(Acc v) {
    __shared__ Acc sdata[kThreads];
    const unsigned tid = threadIdx.x;
    sdata[tid] = v;
    __syncthreads();
    for (unsigned s = kThreads / 2; s > 32; s >>= 1) {
        if (tid < s) sdata[tid] += sdata[tid + s];  // threads 0..s-1 work; a warp reads 32 consecutive words
        __syncthreads();
    }
    const cg::thread_block_tile<32> warp = cg::tiled_partition<32>(cg::this_thread_block());
    Acc total = 0;
    if (warp.meta_group_rank() == 0)  // the last 64 values: warp 0 alone, in registers
        total = cg::reduce(warp, Acc(sdata[tid] + sdata[tid + 32]), cg::plus<Acc>());
    return total;
}

// Block b sums every value whose index i has (i / kThreads) % (2 gridDim) in
// {2b, 2b + 1} into partials[b], as rung 7 does into out[b].
template <class T, class Acc>
__global__ void reduceOnePass(const T* __restrict__ in, Acc* __restrict__ partials, size_t n) {
    const size_t stride = size_t(2) * blockDim.x * gridDim.x;
    Acc sum = 0;
    for (size_t i = size_t(blockIdx.x) * 2 * blockDim.x + threadIdx.x; i < n; i += stride) {
        Acc pair = Acc(in[i]);
        if (i + blockDim.x < n) pair += Acc(in[i + blockDim.x]);  // the first add, during the load
        sum += pair;
    }
    sum = blockReduce<Acc>(sum);
    if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

// One block adds the `count` partial sums in index order: thread t adds
// partials t, t + kThreads, ..., then the block's tree adds the threads.
template <class Acc>
__global__ void reduceFinish(const Acc* __restrict__ partials, Acc* __restrict__ out, unsigned count) {
    Acc sum = 0;
    for (unsigned i = threadIdx.x; i < count; i += blockDim.x) sum += partials[i];
    sum = blockReduce<Acc>(sum);
    if (threadIdx.x == 0) *out = sum;
}

// The whole sum of in[0, n) into out[0]: two launches.
template <class T, class Acc>
Pass launch(const T* in, size_t n, Acc* out, const Scratch<Acc>& s) {
    const unsigned blocks = s.grid;  // one full wave, whatever n is (idle blocks add 0)
    reduceOnePass<T, Acc><<<blocks, kThreads>>>(in, s.partials, n);
    CUDA_CHECK_LAUNCH();
    reduceFinish<Acc><<<1, kThreads>>>(s.partials, out, blocks);
    CUDA_CHECK_LAUNCH();
    // Depth: the pair, the chain in `sum` (its loop trips), the block's tree; then in
    // the finish kernel a chain of partials per thread and the tree.
    const uint64_t trips = lesson::ceil_div(n, 2 * uint64_t(blocks) * kThreads);
    const uint64_t finish = lesson::ceil_div(blocks, kThreads) + kLevels;
    return {1, 1 + trips + kLevels + finish};
}

}  // namespace rung8
