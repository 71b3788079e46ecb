// Lesson 14 of the course (reduction), rung 9 of 11: 16-byte loads.
//
// Rung 8 has two 4-byte loads in flight per thread (its pair). Here each
// thread loads a float4 (four values, 16 bytes) per trip of a grid-stride loop
// over vectors, into one accumulator: 16 bytes in flight instead of 8, and a
// quarter of the load instructions per value. The one-wave grid and the
// finish kernel are rung 8's.
// The kernels are templates: T = float, Acc = float for the ladder (Vec4<int>
// is int4, for rungs 10 and 11's integer sum). `in` must be 16-byte aligned
// (cudaMalloc gives 256).
// Before: rung 8 (kernels/8_one_pass_finish.cuh). Next: rung 10
// (kernels/10_float4_unrolled.cuh), four 16-byte loads in flight per thread.
// Run: ./build/bin/reduction --rung=9   (this rung alone, beside CUB; README.md is the handout)
#pragma once
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cuda_runtime.h>
#include <cstddef>
#include <cstdint>
#include "common.cuh"
#include "common/check.h"
#include "common/launch.h"

namespace rung9 {

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

// Block b sums vectors b kThreads + t, stepping gridDim kThreads vectors, into
// partials[b]; thread g < n % 4 of the grid adds the scalar in[4 (n / 4) + g] of
// the ragged end.
template <class T, class Acc>
__global__ void reduceVec4(const T* __restrict__ in, Acc* __restrict__ partials, size_t n) {
    using V = typename Vec4<T>::type;
    const V* in4 = reinterpret_cast<const V*>(in);
    const size_t n4 = n / 4;
    const size_t stride = size_t(blockDim.x) * gridDim.x;
    const size_t first = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
    Acc sum = 0;
#pragma unroll 1  // kept rolled: one load in flight per thread (rung 10 has four)
    for (size_t i = first; i < n4; i += stride) sum += sum4<Acc>(in4[i]);  // one 16-byte load per trip
    if (first < n - 4 * n4) sum += Acc(in[4 * n4 + first]);                // the last n % 4 values
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
    reduceVec4<T, Acc><<<blocks, kThreads>>>(in, s.partials, n);
    CUDA_CHECK_LAUNCH();
    reduceFinish<Acc><<<1, kThreads>>>(s.partials, out, blocks);
    CUDA_CHECK_LAUNCH();
    // Depth: 2 inside a vector, then the chain in `sum` (its loop trips, the ragged
    // end), the block's tree; then in the finish kernel a chain of partials per
    // thread and the tree.
    const uint64_t chain = lesson::ceil_div(n / 4, uint64_t(blocks) * kThreads) + 1;
    const uint64_t finish = lesson::ceil_div(blocks, kThreads) + kLevels;
    return {1, 2 + chain + kLevels + finish};
}

}  // namespace rung9
