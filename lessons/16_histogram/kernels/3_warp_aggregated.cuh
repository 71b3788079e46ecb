// Lesson 16 of the course (the histogram ladder), rung 3 of 6: warp-aggregated atomics.
// Run this rung alone: ./build/bin/histogram --rung=3   (lesson 16 of the course, 00-23)
//
// Before: rung 2, one shared atomic per byte.
// Here:   before adding, the 32 lanes of a warp find out which of them hold the
//         same bin (__match_any_sync); the lowest lane of each group adds the
//         group's size, the others add nothing. On the skewed input a warp's
//         32 bytes fall into about a dozen bins: a dozen adds instead of 32,
//         and never two on one counter.
// Lacks:  its cost is not a fixed price per byte: it grows with the number
//         of different bins in a warp (one leader's add per bin, and a match
//         whose cost may depend on how many values differ). Where the lanes
//         rarely agree (uniform bytes) it saves nothing and pays the most.
// Next:   rung 4 goes back to rung 2's plain atomics and widens the loads
//         (diff kernels/2_shared.cuh kernels/4_vector_loads.cuh).
// Run:    ./build/bin/histogram --rung=3
#pragma once
#include <cuda_runtime.h>
#include <cstddef>
#include <cstdint>

namespace rung3 {

constexpr int kBins = 256;
constexpr int kThreads = 256;  // a multiple of 32: every warp is complete
constexpr int kBytesPerThread = 64;
constexpr size_t kTileBytes = size_t(kThreads) * kBytesPerThread;  // 16 KB per block
constexpr unsigned int kNoBin = kBins;                             // what a lane past the end of the tile holds

__global__ void __launch_bounds__(kThreads)
    histogramWarpAggregated(const uint8_t* __restrict__ in, size_t n, unsigned int* __restrict__ hist) {
    __shared__ unsigned int s_hist[kBins];
    for (int b = threadIdx.x; b < kBins; b += blockDim.x) s_hist[b] = 0;
    __syncthreads();  // all zeros are written before anyone adds

    // The block's tile, kThreads neighbouring bytes per step (coalesced); the
    // last tile may be short. The loop count is the same for every thread
    // (base does not depend on threadIdx), so all 32 lanes of a warp reach
    // __match_any_sync together, as its full mask requires; a lane past the
    // end takes part with kNoBin and adds nothing.
    const size_t begin = size_t(blockIdx.x) * kTileBytes;
    const size_t end = begin + kTileBytes < n ? begin + kTileBytes : n;
    const unsigned int lane = threadIdx.x % 32;
    for (size_t base = begin; base < end; base += blockDim.x) {
        const size_t i = base + threadIdx.x;
        const unsigned int bin = i < end ? in[i] : kNoBin;
        const unsigned int peers = __match_any_sync(0xFFFFFFFFu, bin);  // lanes holding the same bin
        const bool leader = lane == unsigned(__ffs(peers) - 1);         // the lowest of them
        if (leader && bin != kNoBin) atomicAdd(&s_hist[bin], unsigned(__popc(peers)));
    }
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
    histogramWarpAggregated<<<blocks, kThreads, 0, stream>>>(d_in, n, d_hist);
}

}  // namespace rung3
