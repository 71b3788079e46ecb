// Lesson 16 of the course (the histogram ladder), rung 4 of 6: 16-byte loads.
// Run this rung alone: ./build/bin/histogram --rung=4   (lesson 16 of the course, 00-23)
//
// Before: rung 2, one 1-byte load per byte.
// Here:   rung 2 with one change: a thread loads 16 bytes at a time (one
//         uint4) and adds its 16 bytes one after another. The block, its
//         16 KB tile, the grid of one block per tile and the merge are rung
//         2's. Rung 3's aggregation is left out (see the handout).
// Lacks:  a block still zeroes and merges 256 counters for every 16 KB, and
//         same-bin lanes and bank conflicts in the shared atomics remain.
// Next:   rung 5 keeps these loads and makes the grid one wave of blocks
//         that walk the input (diff kernels/4_vector_loads.cuh kernels/5_grid_stride.cuh).
// Run:    ./build/bin/histogram --rung=4
#pragma once
#include <cuda_runtime.h>
#include <cstddef>
#include <cstdint>

namespace rung4 {

constexpr int kBins = 256;
constexpr int kThreads = 256;
constexpr int kBytesPerThread = 64;
constexpr size_t kTileBytes = size_t(kThreads) * kBytesPerThread;  // 16 KB per block

__global__ void __launch_bounds__(kThreads)
    histogramVectorLoads(const uint8_t* __restrict__ in, size_t n, unsigned int* __restrict__ hist) {
    __shared__ unsigned int s_hist[kBins];
    for (int b = threadIdx.x; b < kBins; b += blockDim.x) s_hist[b] = 0;
    __syncthreads();  // all zeros are written before anyone adds

    // The block's tile, kThreads neighbouring 16-byte words per step
    // (coalesced); the last tile may be short. 16 bytes per load: in must be
    // 16-byte aligned (cudaMalloc gives 256), and a tile starts at a multiple
    // of 16 KB, so only the last tile can end inside a word.
    const uint4* in16 = reinterpret_cast<const uint4*>(in);
    const size_t begin = size_t(blockIdx.x) * kTileBytes;
    const size_t end = begin + kTileBytes < n ? begin + kTileBytes : n;
    const size_t end16 = end / 16;  // the tile's whole words end here
    for (size_t i = begin / 16 + threadIdx.x; i < end16; i += blockDim.x) {
        const uint4 v = in16[i];
        const unsigned int words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int w = 0; w < 4; ++w)
#pragma unroll
            for (int k = 0; k < 4; ++k) atomicAdd(&s_hist[(words[w] >> (8 * k)) & 0xFFu], 1u);
    }
    // The last n % 16 bytes (fewer than 16, last tile only): one each for its first threads.
    if (threadIdx.x < end % 16) atomicAdd(&s_hist[in[16 * end16 + threadIdx.x]], 1u);
    __syncthreads();  // every add of the block is done before the merge reads the counts

    // Merge: one global atomic per non-empty bin.
    for (int b = threadIdx.x; b < kBins; b += blockDim.x) {
        const unsigned int count = s_hist[b];
        if (count != 0) atomicAdd(&hist[b], count);
    }
}

// hist must hold zeros (the kernel adds to it).
inline void launch(const uint8_t* d_in, size_t n, unsigned int* d_hist, int /*sms*/, cudaStream_t stream) {
    const unsigned blocks = unsigned((n + kTileBytes - 1) / kTileBytes);  // n < 2^32: at most 2^18 blocks
    histogramVectorLoads<<<blocks, kThreads, 0, stream>>>(d_in, n, d_hist);
}

}  // namespace rung4
