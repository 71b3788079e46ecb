// Lesson 16 of the course (the histogram ladder), rung 1 of 6: global atomics.
// Run this rung alone: ./build/bin/histogram --rung=1   (lesson 16 of the course, 00-23)
//
// Here:   each thread reads one byte and adds 1 to its bin of the 256 counters
//         in global memory. Every add is an atomic that travels to the L2 slice
//         owning that counter and is executed there, by the slice's atomic
//         unit; adds to the same counter queue up one behind the other.
// Lacks:  the whole GPU funnels into 1 KB of counters (8 lines of 128 bytes),
//         and on the skewed input half of all adds go to one counter.
// Next:   rung 2 counts each block's bytes in shared memory first
//         (diff kernels/1_global.cuh kernels/2_shared.cuh).
// Run:    ./build/bin/histogram --rung=1
#pragma once
#include <cuda_runtime.h>
#include <cstddef>
#include <cstdint>

namespace rung1 {

constexpr int kBins = 256;
constexpr int kThreads = 256;

// One thread per byte; the last block may be partly outside the input.
__global__ void __launch_bounds__(kThreads)
    histogramGlobal(const uint8_t* __restrict__ in, size_t n, unsigned int* __restrict__ hist) {
    const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(&hist[in[i]], 1u);
}

// hist must hold zeros (the kernel adds to it).
inline void launch(const uint8_t* d_in, size_t n, unsigned int* d_hist, int /*sms*/, cudaStream_t stream) {
    const unsigned blocks = unsigned((n + kThreads - 1) / kThreads);  // n < 2^32: at most 2^24 blocks
    histogramGlobal<<<blocks, kThreads, 0, stream>>>(d_in, n, d_hist);
}

}  // namespace rung1
