// Lesson 15 of the course (scan), rung 1 of 8: Hillis-Steele, one block per tile.
//
// The course so far: lesson 14 reduced an array to one sum. A scan keeps every
// partial sum: out[i] = in[0] + ... + in[i] (inclusive) or in[0] + ... + in[i-1]
// (exclusive). Rung 1 is the schedule with the fewest steps: in step d every
// element adds the element 2^d places to its left, so a tile of 2048 is scanned
// in log2(2048) = 11 steps, at the price of about 2048 x 11 additions where a
// sequential loop needs 2047 (README: "Work and steps").
// Next: rung 2 (Blelloch) needs only 2 x 2047 additions, in 22 steps.
//
// One block scans one tile of kTile elements in shared memory; a grid of blocks
// scans every tile on its own (a segmented scan: the sums restart at every tile).
// Rung 4 turns tile scans into a scan of the whole array.
// Run: ./build/bin/scan --rung=1   (this rung alone, beside CUB; README.md is the handout)
#pragma once
#include <cuda_runtime.h>
#include <cstddef>
#include "common/check.h"

namespace hillis_steele {

constexpr int kThreads = 1024;
constexpr int kTile = 2 * kThreads;  // 2 elements per thread

template <class T, bool kExclusive>
__global__ void __launch_bounds__(kThreads) scanTiles(const T* __restrict__ in, T* __restrict__ out, size_t n) {
    // Double buffer: each step reads one half and writes the other, so no
    // thread overwrites a value another thread still has to read in this step.
    __shared__ T buf[2][kTile];
    const size_t base = size_t(blockIdx.x) * kTile;
    // The exclusive scan is the inclusive scan of the input shifted right by one.
    for (int j = threadIdx.x; j < kTile; j += kThreads) {
        const bool valid = kExclusive ? (j > 0 && base + j - 1 < n) : (base + j < n);
        buf[0][j] = valid ? in[base + j - (kExclusive ? 1 : 0)] : T(0);
    }
    int cur = 0;
    for (int offset = 1; offset < kTile; offset *= 2) {  // log2(kTile) steps
        __syncthreads();                                 // the previous step's writes are visible to every thread
        for (int j = threadIdx.x; j < kTile; j += kThreads)
            buf[1 - cur][j] = j >= offset ? buf[cur][j - offset] + buf[cur][j] : buf[cur][j];
        cur = 1 - cur;
    }
    __syncthreads();
    for (int j = threadIdx.x; j < kTile; j += kThreads)
        if (base + j < n) out[base + j] = buf[cur][j];
}

inline size_t workspace_bytes(size_t /*n*/) { return 0; }

// Scans every kTile-element tile of in[0..n) on its own.
template <class T>
void scan(const T* in, T* out, size_t n, bool exclusive, void* /*workspace*/, cudaStream_t stream) {
    const unsigned tiles = static_cast<unsigned>((n + kTile - 1) / kTile);
    if (exclusive) scanTiles<T, true><<<tiles, kThreads, 0, stream>>>(in, out, n);
    else scanTiles<T, false><<<tiles, kThreads, 0, stream>>>(in, out, n);
    CUDA_CHECK_LAUNCH();
}

}  // namespace hillis_steele
