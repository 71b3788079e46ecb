// Lesson 16 of the course (the histogram ladder), rung 5 of 6: one wave of blocks.
// Run this rung alone: ./build/bin/histogram --rung=5   (lesson 16 of the course, 00-23)
//
// Before: rung 4, 16-byte loads, one block per 16 KB tile: a block zeroes and
//         merges 256 counters for every 16 KB of input.
// Here:   rung 4's loads and atomics; only the grid changes. It is one wave
//         of resident blocks (a few per SM, from the occupancy calculator),
//         and a grid-stride loop lets that grid cover any n, so zeroing and
//         merging happen about a thousand times in all, not once per 16 KB.
//         The loop and the grid size are one idea: the loop is what lets a
//         grid smaller than the input cover it.
// Lacks:  same-bin lanes and bank conflicts in the shared atomics remain.
// Next:   rung 6 gives every lane its own copy of the histogram
//         (diff kernels/5_grid_stride.cuh kernels/6_lane_copies.cuh).
// Run:    ./build/bin/histogram --rung=5
#pragma once
#include <cuda_runtime.h>
#include <cstddef>
#include <cstdint>
#include "common/check.h"

namespace rung5 {

constexpr int kBins = 256;
constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads)
    histogramGridStride(const uint8_t* __restrict__ in, size_t n, unsigned int* __restrict__ hist) {
    __shared__ unsigned int s_hist[kBins];
    for (int b = threadIdx.x; b < kBins; b += blockDim.x) s_hist[b] = 0;
    __syncthreads();  // all zeros are written before anyone adds

    // 16 bytes per load: in must be 16-byte aligned (cudaMalloc gives 256).
    // Thread t of the grid reads words t, t + stride, t + 2 stride, ...
    const uint4* in16 = reinterpret_cast<const uint4*>(in);
    const size_t n16 = n / 16;
    const size_t first = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
    const size_t stride = size_t(gridDim.x) * blockDim.x;
    for (size_t i = first; i < n16; i += stride) {
        const uint4 v = in16[i];
        const unsigned int words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int w = 0; w < 4; ++w)
#pragma unroll
            for (int k = 0; k < 4; ++k) atomicAdd(&s_hist[(words[w] >> (8 * k)) & 0xFFu], 1u);
    }
    // The last n % 16 bytes (fewer than 16): one each for the first threads of the grid.
    if (first < n % 16) atomicAdd(&s_hist[in[16 * n16 + first]], 1u);
    __syncthreads();  // every add of the block is done before the merge reads the counts

    // Merge: one global atomic per non-empty bin.
    for (int b = threadIdx.x; b < kBins; b += blockDim.x) {
        const unsigned int count = s_hist[b];
        if (count != 0) atomicAdd(&hist[b], count);
    }
}

// hist must hold zeros (the kernel adds to it).
inline void launch(const uint8_t* d_in, size_t n, unsigned int* d_hist, int sms, cudaStream_t stream) {
    // One wave: as many blocks as fit on the GPU at once, and no more than
    // there are 16-byte words to give them (at least one: the tail). The
    // occupancy query runs once, in the first call (the checked run, before any timed sample),
    // so the timed calls are the memset and the kernel alone.
    static const int per_sm = [] {
        int blocks = 0;
        CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, histogramGridStride, kThreads, 0));
        return blocks;
    }();
    // Exercise 4 of the handout: replace per_sm by 1, 2 and 4 blocks per SM; where does
    // the rate stop growing, and how many bytes are in flight per SM there?
    const size_t wave = size_t(per_sm) * size_t(sms);
    const size_t needed = (n / 16 + kThreads - 1) / kThreads;
    size_t blocks = needed < wave ? needed : wave;
    if (blocks < 1) blocks = 1;
    histogramGridStride<<<unsigned(blocks), kThreads, 0, stream>>>(d_in, n, d_hist);
}

}  // namespace rung5
