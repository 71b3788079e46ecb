// Lesson 16 of the course (the histogram ladder), rung 6 of 6: a copy per lane.
// Run this rung alone: ./build/bin/histogram --rung=6   (lesson 16 of the course, 00-23)
//
// Before: rung 5, one shared histogram per block: lanes with the same bin hit
//         one word, lanes with bins 32 apart hit one bank.
// Here:   the block's histogram is held 32 times, [bin][lane]: lane l adds to
//         word bin * 32 + l, which sits in bank l whatever the bin. No two lanes
//         of a warp ever touch the same word (skewed input) or the same bank
//         (uniform input): one warp-wide atomic is one pass through shared
//         memory on any input.
// Lacks:  32 KB of shared memory per block (fewer resident blocks), a merge
//         that adds 32 copies per bin, and the block's 8 warps still share
//         each lane's copy (warps adding to one word may wait for each other).
// Next:   cub::DeviceHistogram::HistogramEven in main.cu, the yardstick.
// Run:    ./build/bin/histogram --rung=6
#pragma once
#include <cuda_runtime.h>
#include <cstddef>
#include <cstdint>
#include "common/check.h"

namespace rung6 {

constexpr int kBins = 256;
constexpr int kThreads = 256;
constexpr int kCopies = 32;  // one per lane of a warp

__global__ void __launch_bounds__(kThreads)
    histogramLaneCopies(const uint8_t* __restrict__ in, size_t n, unsigned int* __restrict__ hist) {
    // Exercise 3 of the handout: one copy per warp instead of one per lane
    // (s_hist[warp * kBins + bin], 8 KB); measure both inputs and explain.
    __shared__ unsigned int s_hist[kBins * kCopies];  // [bin][copy]: 32 KB
    for (int b = threadIdx.x; b < kBins * kCopies; b += blockDim.x) s_hist[b] = 0;
    __syncthreads();  // all zeros are written before anyone adds

    // 16 bytes per load: in must be 16-byte aligned (cudaMalloc gives 256).
    // Thread t of the grid reads words t, t + stride, t + 2 stride, ...
    const uint4* in16 = reinterpret_cast<const uint4*>(in);
    const size_t n16 = n / 16;
    const size_t first = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
    const size_t stride = size_t(gridDim.x) * blockDim.x;
    const unsigned int lane = threadIdx.x % 32;  // this thread's copy
    for (size_t i = first; i < n16; i += stride) {
        const uint4 v = in16[i];
        const unsigned int words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int w = 0; w < 4; ++w)
#pragma unroll
            for (int k = 0; k < 4; ++k) atomicAdd(&s_hist[((words[w] >> (8 * k)) & 0xFFu) * kCopies + lane], 1u);
    }
    // The last n % 16 bytes (fewer than 16): one each for the first threads of the grid.
    if (first < n % 16) atomicAdd(&s_hist[in[16 * n16 + first] * kCopies + lane], 1u);
    __syncthreads();  // every add of the block is done before the merge reads the counts

    // Merge: thread b adds the 32 copies of bin b, starting at copy b % 32, so
    // that at each step the 32 lanes of a warp read 32 different banks
    // (starting every thread at copy 0 would read one bank 32 times), then
    // one global atomic per non-empty bin.
    for (int b = threadIdx.x; b < kBins; b += blockDim.x) {
        unsigned int count = 0;
        for (int k = 0; k < kCopies; ++k) count += s_hist[b * kCopies + (b + k) % kCopies];
        if (count != 0) atomicAdd(&hist[b], count);
    }
}

// hist must hold zeros (the kernel adds to it).
inline void launch(const uint8_t* d_in, size_t n, unsigned int* d_hist, int sms, cudaStream_t stream) {
    // One wave: as many blocks as fit on the GPU at once (32 KB of shared
    // memory each limits them), and no more than there are 16-byte words to
    // give them (at least one: the tail). The occupancy query runs once, in
    // the first call (the checked run, before any timed sample).
    static const int per_sm = [] {
        int blocks = 0;
        CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, histogramLaneCopies, kThreads, 0));
        return blocks;
    }();
    const size_t wave = size_t(per_sm) * size_t(sms);
    const size_t needed = (n / 16 + kThreads - 1) / kThreads;
    size_t blocks = needed < wave ? needed : wave;
    if (blocks < 1) blocks = 1;
    histogramLaneCopies<<<unsigned(blocks), kThreads, 0, stream>>>(d_in, n, d_hist);
}

}  // namespace rung6
