// Lesson 15 of the course (scan), rung 5 of 8: reduce-then-scan, 3n of memory traffic.
//
// Before: rung 4 writes the whole array in phase 1, then reads and writes it
// again in phase 3 to add the tile offsets (4n). Here the first pass only
// sums each tile, and the tile is scanned once, when its prefix is known:
//   1. read every tile and write its sum to tileSums (n reads, no writes);
//   2. scan tileSums (exclusive), with this same function;
//   3. read every tile again and scan it, starting from its scanned sum, to out.
// Three passes over the array: read, read, write, 3n, one whole write fewer
// than rung 4 and one read more than the least a scan moves (2n). The tile
// scan is rung 4's, on rung 4's tile (diff the two files).
// Next: rung 6 scans in one pass, with the same tile scan.
// Run: ./build/bin/scan --rung=5   (this rung alone, beside CUB; README.md is the handout)
#pragma once
#include <cuda_runtime.h>
#include <cstddef>
#include <cstdint>
#include "common/check.h"

namespace reduce_then_scan {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kVecs = 4;                  // 16-byte vectors per thread
constexpr int kItems = 4 * kVecs;         // elements per thread
constexpr int kWarpItems = 32 * kItems;   // a warp's contiguous share of the tile
constexpr int kTile = kThreads * kItems;  // 4096 elements
constexpr unsigned kFull = 0xffffffffu;
// At most this many additions lie between any input and any output of one
// tile (float error bound): 3 inside a vector, 5 in the warp scan, 4 in the
// carry across rows, 8 over the warp totals, 2 for the bases, 4 in the last
// pass over the vector: 26.
constexpr uint64_t kTileDepth = 32;

template <class T>
struct Vec;
template <>
struct Vec<unsigned> {
    using type = uint4;
};
template <>
struct Vec<float> {
    using type = float4;
};

// Lane l of warp w holds elements w*kWarpItems + (k*32 + l)*4 + c of the tile
// (k < kVecs, c < 4): each of its kVecs loads is one row of the warp, 512
// contiguous bytes. The last tile may be partial: missing elements read as 0.
template <class T>
__device__ __forceinline__ void loadTile(const T* in, size_t base, size_t n, T (&x)[kItems]) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
    for (int k = 0; k < kVecs; ++k) {
        const size_t i = base + size_t(warp) * kWarpItems + (k * 32 + lane) * 4;
        if (i + 4 <= n) {  // cudaMalloc'd, and i is a multiple of 4: 16-byte aligned
            const typename Vec<T>::type v = *reinterpret_cast<const typename Vec<T>::type*>(in + i);
            x[4 * k] = v.x, x[4 * k + 1] = v.y, x[4 * k + 2] = v.z, x[4 * k + 3] = v.w;
        } else {
#pragma unroll
            for (int c = 0; c < 4; ++c) x[4 * k + c] = i + c < n ? in[i + c] : T(0);
        }
    }
}

template <class T>
__device__ __forceinline__ void storeTile(T* out, size_t base, size_t n, const T (&x)[kItems]) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
    for (int k = 0; k < kVecs; ++k) {
        const size_t i = base + size_t(warp) * kWarpItems + (k * 32 + lane) * 4;
        if (i + 4 <= n) {
            typename Vec<T>::type v;
            v.x = x[4 * k], v.y = x[4 * k + 1], v.z = x[4 * k + 2], v.w = x[4 * k + 3];
            *reinterpret_cast<typename Vec<T>::type*>(out + i) = v;
        } else {
#pragma unroll
            for (int c = 0; c < 4; ++c)
                if (i + c < n) out[i + c] = x[4 * k + c];
        }
    }
}

// The first half of a tile scan: every thread's offset inside the tile, and
// the tile's total. vecBase[k] = the sum of the tile's elements before vector k
// of this thread. One __syncthreads(); warpTotals is kWarps words of shared memory.
template <class T>
__device__ __forceinline__ void tileOffsets(const T (&x)[kItems], T (&vecBase)[kVecs], T& tileTotal, T* warpTotals) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    T carry = T(0);  // the sum of this warp's earlier rows
#pragma unroll
    for (int k = 0; k < kVecs; ++k) {
        const T s = ((x[4 * k] + x[4 * k + 1]) + x[4 * k + 2]) + x[4 * k + 3];
        T incl = s;  // inclusive scan of the row's 32 vector sums, lane by lane
#pragma unroll
        for (int d = 1; d < 32; d *= 2) {
            const T y = __shfl_up_sync(kFull, incl, d);
            if (lane >= d) incl += y;
        }
        T excl = __shfl_up_sync(kFull, incl, 1);  // the sum of the lanes before this one
        if (lane == 0) excl = T(0);
        vecBase[k] = carry + excl;
        carry += __shfl_sync(kFull, incl, 31);  // the row's total
    }
    if (lane == 0) warpTotals[warp] = carry;
    __syncthreads();
    T sum = T(0), warpPrefix = T(0);
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {  // same order in every thread: same bits in every thread
        if (w == warp) warpPrefix = sum;
        sum += warpTotals[w];
    }
    tileTotal = sum;
#pragma unroll
    for (int k = 0; k < kVecs; ++k) vecBase[k] = warpPrefix + vecBase[k];
}

// The second half: x becomes the inclusive (or exclusive) scan, starting from
// tilePrefix, the sum of everything before the tile.
template <class T, bool kExclusive>
__device__ __forceinline__ void tileFinish(T (&x)[kItems], const T (&vecBase)[kVecs], T tilePrefix) {
#pragma unroll
    for (int k = 0; k < kVecs; ++k) {
        T run = tilePrefix + vecBase[k];
#pragma unroll
        for (int c = 0; c < 4; ++c) {
            const T v = x[4 * k + c];
            if (kExclusive) x[4 * k + c] = run;
            run += v;
            if (!kExclusive) x[4 * k + c] = run;
        }
    }
}

// Pass 1: the sum of each tile to tileSums[tile]; nothing else is written.
// Every input passes through at most 20 additions: 3 in a vector, 4 over the
// thread's vectors, 5 in the warp sum, 8 over the warp totals.
template <class T>
__global__ void __launch_bounds__(kThreads) reduceTiles(const T* in, size_t n, T* tileSums) {
    __shared__ T warpTotals[kWarps];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    T x[kItems];
    loadTile(in, size_t(blockIdx.x) * kTile, n, x);
    T s = T(0);
#pragma unroll
    for (int k = 0; k < kVecs; ++k) s += ((x[4 * k] + x[4 * k + 1]) + x[4 * k + 2]) + x[4 * k + 3];
#pragma unroll
    for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(kFull, s, o);
    if (lane == 0) warpTotals[warp] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        T sum = T(0);
        for (int w = 0; w < kWarps; ++w) sum += warpTotals[w];
        tileSums[blockIdx.x] = sum;
    }
}

// Pass 3: scan each tile, starting from scannedSums[tile], the sum of every
// tile before it (nullptr: one tile, which starts from 0). in and out may be
// the same array (pass 2 scans tileSums in place): every thread reads its
// elements before it writes them, and no block reads another's tile.
template <class T, bool kExclusive>
__global__ void __launch_bounds__(kThreads) scanTilesFrom(const T* in, T* out, size_t n, const T* scannedSums) {
    __shared__ T warpTotals[kWarps];
    const size_t base = size_t(blockIdx.x) * kTile;
    T x[kItems];
    loadTile(in, base, n, x);
    T vecBase[kVecs], tileTotal;
    tileOffsets(x, vecBase, tileTotal, warpTotals);
    tileFinish<T, kExclusive>(x, vecBase, scannedSums != nullptr ? scannedSums[blockIdx.x] : T(0));
    storeTile(out, base, n, x);
}

inline size_t tiles_for(size_t n) { return (n + kTile - 1) / kTile; }
// Tile sums of one level, rounded up to 64 elements: the next level's array stays 256-byte aligned.
inline size_t padded_count(size_t count) { return (count + 63) / 64 * 64; }

// Scratch for the tile sums of every level: n / 4096 + n / 4096^2 + ... elements of 4 bytes.
inline size_t workspace_bytes(size_t n) {
    size_t bytes = 0;
    for (size_t m = n; m > size_t(kTile); m = tiles_for(m)) bytes += padded_count(tiles_for(m)) * 4;
    return bytes;
}

// The most additions between an input and an output (float error bound): one
// tile, then per level of tile sums a tile's sum (20), its scan and the 5 of
// pass 3 from the prefix to the element (25 <= kTileDepth + 1).
inline uint64_t rounding_depth(size_t n) {
    uint64_t d = kTileDepth;
    for (size_t m = n; m > size_t(kTile); m = tiles_for(m)) d += kTileDepth + 1;
    return d;
}

// Scans in[0..n) into out. workspace: workspace_bytes(n) bytes.
template <class T>
void scan(const T* in, T* out, size_t n, bool exclusive, void* workspace, cudaStream_t stream) {
    static_assert(sizeof(T) == 4, "4-byte elements: 16-byte vectors of 4, tile sums of 4 bytes");
    const size_t tiles = tiles_for(n);
    T* tileSums = nullptr;  // one tile: no passes 1 and 2, pass 3 starts it from 0
    if (tiles > 1) {
        tileSums = static_cast<T*>(workspace);
        // Pass 1.
        reduceTiles<T><<<static_cast<unsigned>(tiles), kThreads, 0, stream>>>(in, n, tileSums);
        CUDA_CHECK_LAUNCH();
        // Pass 2: an exclusive scan of the tile sums, in place; the next level's sums follow this level's.
        scan(tileSums, tileSums, tiles, true, tileSums + padded_count(tiles), stream);
    }
    // Pass 3.
    if (exclusive) scanTilesFrom<T, true><<<static_cast<unsigned>(tiles), kThreads, 0, stream>>>(in, out, n, tileSums);
    else scanTilesFrom<T, false><<<static_cast<unsigned>(tiles), kThreads, 0, stream>>>(in, out, n, tileSums);
    CUDA_CHECK_LAUNCH();
}

}  // namespace reduce_then_scan
