// Lesson 14 of the course (reduction), rung 10 of 11: four 16-byte loads in flight, four accumulators.
//
// Rung 9 has one 16-byte load in flight per thread: its next load waits for
// the add of the last one. Here each thread loads kUnroll float4s before it
// adds any, into kUnroll independent accumulators: 64 bytes in flight per
// thread instead of 16, which is what keeps an HBM3 memory busy (README,
// "Bytes in flight"). The one-wave grid, the finish kernel and its fixed
// order are rung 8's.
// The kernels are templates: T = float, Acc = float for the ladder, and
// T = int, Acc = long long for the integer sum that must match the CPU exactly.
// `in` must be 16-byte aligned (cudaMalloc gives 256).
// Before: rung 9 (kernels/9_float4.cuh). Next: rung 11
// (kernels/11_last_block.cuh), the finish inside the same kernel.
// Run: ./build/bin/reduction --rung=10   (this rung alone, beside CUB; README.md is the handout)
#pragma once
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cuda_runtime.h>
#include <cstddef>
#include <cstdint>
#include "common.cuh"
#include "common/check.h"
#include "common/launch.h"

namespace rung10 {

namespace cg = cooperative_groups;

constexpr int kThreads = 256;  // a power of two, at least 64: the tree halves it down to 64
constexpr int kLevels = 8;     // log2(kThreads): 2 tree steps, the pair, 5 shuffles
constexpr int kUnroll = 4;     // 16-byte loads in flight per thread, one accumulator each

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
    const uint64_t finish = lesson::ceil_div(blocks, kThreads) + kLevels;
    return {1, 2 + chain + 2 + kLevels + finish};
}

}  // namespace rung10
