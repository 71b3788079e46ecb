// Lesson 15 of the course (scan), rung 3 of 8: Blelloch's scan with a conflict-free shared-memory index.
//
// Before: rung 2. Its tree reads words s(2t+1)-1 for thread t at stride s:
// 2s words apart, so 2s lanes of a warp share a bank, up to all 32 (a 32-way
// bank conflict: the warp's access takes 32 passes). This rung changes only the
// index: element i lives at word i + i/32, one word of padding after every 32,
// which spreads those lanes over the banks (README: "Bank conflicts").
// diff kernels/2_blelloch.cuh kernels/3_blelloch_padded.cuh shows exactly that.
// Next: rung 4 joins tile scans into a scan of the whole array.
//
// One block scans one tile of kTile elements; a grid scans every tile on its
// own (a segmented scan).
// Run: ./build/bin/scan --rung=3   (this rung alone, beside CUB; README.md is the handout)
#pragma once
#include <cuda_runtime.h>
#include <cstddef>
#include "common/check.h"

namespace blelloch_padded {

constexpr int kThreads = 1024;
constexpr int kTile = 2 * kThreads;  // 2 elements per thread
constexpr int kLogBanks = 5;         // 32 banks of 4-byte words

// (Exercise 2 of the handout: count the bank conflicts of rungs 2 and 3 with Nsight Compute, then
// try a second level of padding, i + (i >> 5) + (i >> 10), and compare with the model in verify/scan.h.)
// Element i's word in shared memory: one word of padding after every 32 words.
__device__ __forceinline__ int pad(int i) { return i + (i >> kLogBanks); }

template <class T, bool kExclusive>
__global__ void __launch_bounds__(kThreads) scanTiles(const T* __restrict__ in, T* __restrict__ out, size_t n) {
    static_assert(sizeof(T) == 4, "the padding assumes 4-byte elements (one per bank)");
    __shared__ T temp[kTile + (kTile >> kLogBanks)];
    const int t = threadIdx.x;
    const size_t base = size_t(blockIdx.x) * kTile;
    // Two elements per thread, kThreads apart (both loads coalesced); kept for the inclusive result.
    const int a = t, b = t + kThreads;
    const T xa = base + a < n ? in[base + a] : T(0);
    const T xb = base + b < n ? in[base + b] : T(0);
    temp[pad(a)] = xa;
    temp[pad(b)] = xb;
    // Up-sweep: after the level with stride s, temp[2s k + 2s - 1] holds the sum of its 2s elements.
    int stride = 1;
    for (int active = kTile / 2; active > 0; active /= 2) {
        __syncthreads();
        if (t < active) {
            const int ai = stride * (2 * t + 1) - 1, bi = stride * (2 * t + 2) - 1;
            temp[pad(bi)] += temp[pad(ai)];
        }
        stride *= 2;
    }
    // The root held the tile's total; as the exclusive prefix of the whole tile it becomes 0.
    // (Thread 0 did the last up-sweep step itself: no barrier needed before this.)
    if (t == 0) temp[pad(kTile - 1)] = T(0);
    // Down-sweep: each node gives its prefix to its left child, and prefix + left sum to its right child.
    for (int active = 1; active < kTile; active *= 2) {
        stride /= 2;
        __syncthreads();
        if (t < active) {
            const int ai = stride * (2 * t + 1) - 1, bi = stride * (2 * t + 2) - 1;
            const T left = temp[pad(ai)];
            temp[pad(ai)] = temp[pad(bi)];
            temp[pad(bi)] += left;
        }
    }
    __syncthreads();
    // temp holds the exclusive scan; the inclusive one adds each element to its own prefix.
    if (base + a < n) out[base + a] = kExclusive ? temp[pad(a)] : temp[pad(a)] + xa;
    if (base + b < n) out[base + b] = kExclusive ? temp[pad(b)] : temp[pad(b)] + xb;
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

}  // namespace blelloch_padded
