// Lesson 16 of the course (the histogram ladder), rung 2 of 6: privatization.
// Run this rung alone: ./build/bin/histogram --rung=2   (lesson 16 of the course, 00-23)
//
// Before: rung 1 sent every byte's add to the same 1 KB in the L2.
// Here:   each block counts its own 16 KB tile into a private 256-bin histogram
//         in shared memory (atomics executed inside the SM, on 1 KB only this
//         block touches), then merges it into the global histogram with one
//         global atomic per non-empty bin: at most 256 global atomics per
//         16,384 bytes instead of 16,384.
// Lacks:  lanes of a warp that hold the same bin (or bins in the same bank)
//         still take turns in shared memory; one 1-byte load per byte.
// Next:   rung 3 aggregates a warp's equal bins first
//         (diff kernels/2_shared.cuh kernels/3_warp_aggregated.cuh);
//         rung 4 also starts from this file (diff kernels/2_shared.cuh kernels/4_vector_loads.cuh).
// Run:    ./build/bin/histogram --rung=2
#pragma once
#include <cuda_runtime.h>
#include <cstddef>
#include <cstdint>

namespace rung2 {

constexpr int kBins = 256;
constexpr int kThreads = 256;
constexpr int kBytesPerThread = 64;
constexpr size_t kTileBytes = size_t(kThreads) * kBytesPerThread;  // 16 KB per block

__global__ void __launch_bounds__(kThreads)
    histogramShared(const uint8_t* __restrict__ in, size_t n, unsigned int* __restrict__ hist) {
    __shared__ unsigned int s_hist[kBins];
    // EXERCISE 1 BEGIN: count the block's tile of bytes into a shared histogram, then add its non-zero bins to hist
    // HINT: zero s_hist, __syncthreads(), atomicAdd(&s_hist[in[i]], 1u) for each byte of the tile, __syncthreads()
    // HINT: the block's tile is [blockIdx.x * kTileBytes, + kTileBytes); the last tile ends at n
    for (int b = threadIdx.x; b < kBins; b += blockDim.x) s_hist[b] = 0;
    __syncthreads();  // all zeros are written before anyone adds

    // The block's tile, kThreads neighbouring bytes per step (coalesced); the
    // last tile may be short.
    const size_t begin = size_t(blockIdx.x) * kTileBytes;
    const size_t end = begin + kTileBytes < n ? begin + kTileBytes : n;
    for (size_t base = begin; base < end; base += blockDim.x) {
        const size_t i = base + threadIdx.x;
        if (i < end) atomicAdd(&s_hist[in[i]], 1u);
    }
    __syncthreads();  // every add of the block is done before the merge reads the counts

    // Merge: one global atomic per non-empty bin.
    for (int b = threadIdx.x; b < kBins; b += blockDim.x) {
        const unsigned int count = s_hist[b];
        if (count != 0) atomicAdd(&hist[b], count);
    }
    // EXERCISE 1 END
}

// hist must hold zeros (the kernel adds to it).
inline void launch(const uint8_t* d_in, size_t n, unsigned int* d_hist, int /*sms*/, cudaStream_t stream) {
    const unsigned blocks = unsigned((n + kTileBytes - 1) / kTileBytes);  // n < 2^32: at most 2^18 blocks
    histogramShared<<<blocks, kThreads, 0, stream>>>(d_in, n, d_hist);
}

}  // namespace rung2
