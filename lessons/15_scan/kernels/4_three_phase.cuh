// Lesson 15 of the course (scan), rung 4 of 8: a three-phase scan of the whole array.
//
// Before: rungs 1-3 scan tiles that fit one block. Here one block scans a tile
// of 4096 elements (256 threads x 16, in 16-byte loads, with warp shuffles),
// and three phases join the tiles into one scan of any length:
//   1. scan every tile on its own and write each tile's total to tileSums;
//   2. scan tileSums (exclusive), with this same function: one block when they
//      fit one tile, the three phases again when they do not;
//   3. add tile t's scanned sum to every element of tile t.
// Phases 1 and 3 each read and write the whole array: 4n elements of memory
// traffic for a scan that needs 2n (read n, write n).
// Next: rung 5 writes the array once, not twice, with the same tile scan (diff the two files).
// Run: ./build/bin/scan --rung=4   (this rung alone, beside CUB; README.md is the handout)
#pragma once
#include <cuda_runtime.h>
#include <cstddef>
#include <cstdint>
#include "common/check.h"

namespace three_phase {

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

// Phase 1: scan each tile on its own; its total goes to tileSums[tile] (when
// there is more than one tile). in and out may be the same array (phase 2 scans
// tileSums in place): every thread reads its elements before it writes them.
template <class T, bool kExclusive>
__global__ void __launch_bounds__(kThreads) scanTiles(const T* in, T* out, size_t n, T* tileSums) {
    __shared__ T warpTotals[kWarps];
    const size_t base = size_t(blockIdx.x) * kTile;
    T x[kItems];
    loadTile(in, base, n, x);
    T vecBase[kVecs], tileTotal;
    tileOffsets(x, vecBase, tileTotal, warpTotals);
    if (tileSums != nullptr && threadIdx.x == 0) tileSums[blockIdx.x] = tileTotal;
    tileFinish<T, kExclusive>(x, vecBase, T(0));
    storeTile(out, base, n, x);
}

// Phase 3: add the sum of all earlier tiles to every element of tiles 1, 2, ...
// (tile 0 adds 0 and is skipped).
template <class T>
__global__ void __launch_bounds__(kThreads) addTileOffsets(T* out, size_t n, const T* scannedSums) {
    const size_t tile = size_t(blockIdx.x) + 1;
    const T offset = scannedSums[tile];
    T x[kItems];
    loadTile(out, tile * kTile, n, x);
#pragma unroll
    for (int i = 0; i < kItems; ++i) x[i] = offset + x[i];
    storeTile(out, tile * kTile, n, x);
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
// tile, then per level of tile sums a tile's total, its scan and the add.
inline uint64_t rounding_depth(size_t n) {
    uint64_t d = kTileDepth;
    for (size_t m = n; m > size_t(kTile); m = tiles_for(m)) d += kTileDepth + 1;
    return d;
}

// Scans in[0..n) into out. workspace: workspace_bytes(n) bytes.
template <class T>
void scan(const T* in, T* out, size_t n, bool exclusive, void* workspace, cudaStream_t stream) {
    static_assert(sizeof(T) == 4, "4-byte elements: 16-byte vectors of 4, tile sums of 4 bytes");
    // EXERCISE 1 BEGIN: the three phases: scan every tile (totals to the workspace), scan the totals, add them to the tiles
    // HINT: tiles_for(n) tiles, the last one may be partial; one tile needs no workspace and no phases 2 and 3
    // HINT: phase 2 is this function again, exclusive and in place, its own workspace after padded_count(tiles) sums
    const size_t tiles = tiles_for(n);
    T* tileSums = tiles > 1 ? static_cast<T*>(workspace) : nullptr;
    // Phase 1.
    if (exclusive) scanTiles<T, true><<<static_cast<unsigned>(tiles), kThreads, 0, stream>>>(in, out, n, tileSums);
    else scanTiles<T, false><<<static_cast<unsigned>(tiles), kThreads, 0, stream>>>(in, out, n, tileSums);
    CUDA_CHECK_LAUNCH();
    if (tiles == 1) return;
    // Phase 2: an exclusive scan of the tile sums, in place; the next level's sums follow this level's.
    scan(tileSums, tileSums, tiles, true, tileSums + padded_count(tiles), stream);
    // Phase 3.
    addTileOffsets<T><<<static_cast<unsigned>(tiles - 1), kThreads, 0, stream>>>(out, n, tileSums);
    CUDA_CHECK_LAUNCH();
    // EXERCISE 1 END
}

}  // namespace three_phase
