// Lesson 15 of the course (scan), rung 2 of 8: Blelloch's work-efficient scan, one block per tile.
//
// Before: rung 1 (Hillis-Steele) scans a 2048 tile in 11 steps but 20481
// additions. Blelloch's scan walks a balanced tree twice: the up-sweep builds
// partial sums (a reduction, 2047 additions), the down-sweep hands every node
// its prefix (2047 more). 2 x 11 steps, 2 x 2047 additions: the work of the
// sequential loop, times two, whatever the tile size.
// Next: rung 3 changes only the shared-memory index: this tree's accesses hit
// the same bank up to 32 times (README: "Bank conflicts").
//
// One block scans one tile of kTile elements; a grid scans every tile on its
// own (a segmented scan).
// Run: ./build/bin/scan --rung=2   (this rung alone, beside CUB; README.md is the handout)
#pragma once
#include <cuda_runtime.h>
#include <cstddef>
#include "common/check.h"

namespace blelloch {

constexpr int kThreads = 1024;
constexpr int kTile = 2 * kThreads;  // 2 elements per thread

template <class T, bool kExclusive>
__global__ void __launch_bounds__(kThreads) scanTiles(const T* __restrict__ in, T* __restrict__ out, size_t n) {
    __shared__ T temp[kTile];
    const int t = threadIdx.x;
    const size_t base = size_t(blockIdx.x) * kTile;
    // Two elements per thread, kThreads apart (both loads coalesced); kept for the inclusive result.
    const int a = t, b = t + kThreads;
    const T xa = base + a < n ? in[base + a] : T(0);
    const T xb = base + b < n ? in[base + b] : T(0);
    temp[a] = xa;
    temp[b] = xb;
    // Up-sweep: after the level with stride s, temp[2s k + 2s - 1] holds the sum of its 2s elements.
    int stride = 1;
    for (int active = kTile / 2; active > 0; active /= 2) {
        __syncthreads();
        if (t < active) {
            const int ai = stride * (2 * t + 1) - 1, bi = stride * (2 * t + 2) - 1;
            temp[bi] += temp[ai];
        }
        stride *= 2;
    }
    // The root held the tile's total; as the exclusive prefix of the whole tile it becomes 0.
    // (Thread 0 did the last up-sweep step itself: no barrier needed before this.)
    if (t == 0) temp[kTile - 1] = T(0);
    // Down-sweep: each node gives its prefix to its left child, and prefix + left sum to its right child.
    for (int active = 1; active < kTile; active *= 2) {
        stride /= 2;
        __syncthreads();
        if (t < active) {
            const int ai = stride * (2 * t + 1) - 1, bi = stride * (2 * t + 2) - 1;
            const T left = temp[ai];
            temp[ai] = temp[bi];
            temp[bi] += left;
        }
    }
    __syncthreads();
    // temp holds the exclusive scan; the inclusive one adds each element to its own prefix.
    if (base + a < n) out[base + a] = kExclusive ? temp[a] : temp[a] + xa;
    if (base + b < n) out[base + b] = kExclusive ? temp[b] : temp[b] + xb;
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

}  // namespace blelloch
