// Lesson 14 of the course (reduction), side variant 12 (of rung 10): CUB's block primitive.
//
// Rung 10 with its hand-written blockReduce() (a tree in shared memory, then
// the last warp in registers) replaced by cub::BlockReduce, CUB's block-level
// sum, inside the same kernels, grid and fixed order. A side variant, not a
// step up the ladder: it shows the piece a kernel of your own would take from
// CUB, timed in the same loop as the rungs. The main report's best rung is
// chosen among the hand-written rungs 1-11 only.
// CUB's default algorithm (BLOCK_REDUCE_WARP_REDUCTIONS) reduces each warp
// with shuffles (5 levels for 32 lanes), then thread 0 adds the warp totals
// one after another: the same order every run, and a tree kBlockDepth deep.
// The kernels are templates: T = float, Acc = float for the ladder.
// Before: rung 10 (diff kernels/10_float4_unrolled.cuh kernels/12_cub_block_reduce.cuh).
// Run: ./build/bin/reduction --rung=12   (this variant alone, beside CUB; README.md is the handout)
#pragma once
#include <cuda_runtime.h>
#include <cstddef>
#include <cstdint>
#include <cub/block/block_reduce.cuh>
#include "common.cuh"
#include "common/check.h"
#include "common/launch.h"

namespace rung12 {

constexpr int kThreads = 256;                       // a power of two, at least 64: the tree halves it down to 64
constexpr int kBlockDepth = 5 + kThreads / 32 - 1;  // 5 shuffle levels, then thread 0's chain of warp totals
constexpr int kUnroll = 4;                          // 16-byte loads in flight per thread, one accumulator each

// The block's total, valid in thread 0: CUB's block reduction, with its
// shared memory (TempStorage) declared here, once per kernel.
template <class Acc>
__device__ Acc blockReduce(Acc v) {
    using BlockReduce = cub::BlockReduce<Acc, kThreads>;
    __shared__ typename BlockReduce::TempStorage temp;
    return BlockReduce(temp).Sum(v);
}

// Block b sums its share of in[0, n) into partials[b]: the tiles b, b + G, ... of
// kUnroll x kThreads vectors (G blocks), kUnroll loads in flight per thread, and
// thread g < n % 4 of the grid adds the scalar in[4 (n / 4) + g] of the ragged end.
template <class T, class Acc>
__global__ void reduceVec4(const T* __restrict__ in, Acc* __restrict__ partials, size_t n) {
    using V = typename Vec4<T>::type;
    const V* in4 = reinterpret_cast<const V*>(in);
    const size_t n4 = n / 4;
    // Block b reads tiles b, b + G, b + 2G, ... (G blocks) of kUnroll x kThreads vectors; in a
    // tile, thread t reads vectors t, t + kThreads, ...: a warp's kUnroll loads are 512-byte
    // pieces 4 KB apart, inside the block's one contiguous 16 KB tile. Only this arrangement is
    // measured; why it would beat kUnroll stretches a grid apart is not tested here.
    const size_t tile = size_t(kUnroll) * blockDim.x;
    Acc acc[kUnroll] = {};
    for (size_t base = size_t(blockIdx.x) * tile; base < n4; base += size_t(gridDim.x) * tile) {
        if (base + tile <= n4) {
            V v[kUnroll];
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) v[u] = in4[base + u * blockDim.x + threadIdx.x];  // all loads leave first
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) acc[u] += sum4<Acc>(v[u]);
        } else {  // the last, partial tile
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) {
                const size_t i = base + u * blockDim.x + threadIdx.x;
                if (i < n4) acc[u] += sum4<Acc>(in4[i]);
            }
        }
    }
    const size_t first = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (first < n - 4 * n4) acc[0] += Acc(in[4 * n4 + first]);  // the last n % 4 values
    static_assert(kUnroll == 4, "the line below adds four accumulators");
    const Acc sum = blockReduce<Acc>((acc[0] + acc[1]) + (acc[2] + acc[3]));
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
    reduceVec4<T, Acc><<<blocks, kThreads>>>(in, s.partials, n);
    CUDA_CHECK_LAUNCH();
    reduceFinish<Acc><<<1, kThreads>>>(s.partials, out, blocks);
    CUDA_CHECK_LAUNCH();
    // Depth: 2 inside a vector, then the chain of acc[0] (its loop trips, the
    // leftover vectors, the ragged end), 2 for the four accumulators, the block's
    // tree; then in the finish kernel a chain of partials per thread and the tree.
    const uint64_t stride = uint64_t(blocks) * kThreads;
    const uint64_t chain = lesson::ceil_div(n / 4, kUnroll * stride) + kUnroll;
    const uint64_t finish = lesson::ceil_div(blocks, kThreads) + kBlockDepth;
    return {1, 2 + chain + 2 + kBlockDepth + finish};
}

}  // namespace rung12
