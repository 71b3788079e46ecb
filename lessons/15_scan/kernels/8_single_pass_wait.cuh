// Lesson 15 of the course (scan), rung 8 of 8: rung 7, waiting before the first look back.
//
// Rung 7's scan, unchanged but for one pause: after a tile publishes its
// aggregate A, warp 0 sleeps kFirstLookNs before it reads its predecessors
// (diff the two files). The expected reason it pays: a tile that looks at once
// finds the nearest predecessors still at A or X, sums aggregates further back
// and polls status words other SMs are writing, where a moment later the
// nearest P may end the walk in one window. The report times whole scans and
// does not show the walks. CUB's sm_90 tuning pauses too (README: "Rung 8: a
// pause before the look").
// Before: rung 7 (kernels/7_single_pass_narrow.cuh). Next: the application,
// stream compaction (kernels/compact.cuh).
// Run: ./build/bin/scan --rung=8   (this rung alone, beside CUB; README.md is the handout)
#pragma once
#include <cuda_runtime.h>
#include <cstddef>
#include <cstdint>
#include <cuda/atomic>
#include "common/check.h"

namespace single_pass_wait {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kVecs = 8;                  // 16-byte vectors per thread
constexpr int kItems = 4 * kVecs;         // elements per thread
constexpr int kWarpItems = 32 * kItems;   // a warp's contiguous share of the tile
constexpr int kTile = kThreads * kItems;  // 4096 elements
constexpr unsigned kFull = 0xffffffffu;
// At most this many additions lie between any input and any output of one
// tile (float error bound): 3 inside a vector, 5 in the warp scan, 8 in the
// carry across rows, 4 over the warp totals, 2 for the bases, 4 in the last
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

// ---- the tile status words: flag in the high 32 bits, the value's bits in the low 32
constexpr unsigned long long kStatusX = 0;           // X: nothing published yet (cudaMemset 0)
constexpr unsigned long long kStatusA = 1ull << 32;  // A: the tile's aggregate
constexpr unsigned long long kStatusP = 2ull << 32;  // P: the tile's inclusive prefix
constexpr unsigned kBackoffNs = 100;                 // pause between two polls of a predecessor still at X
constexpr unsigned kFirstLookNs = 1200;              // pause between publishing A and the first poll

__device__ __forceinline__ unsigned long long pack(unsigned long long flag, unsigned v) { return flag | v; }
__device__ __forceinline__ unsigned long long pack(unsigned long long flag, float v) {
    return flag | __float_as_uint(v);
}
__device__ __forceinline__ unsigned long long flagOf(unsigned long long word) { return word & ~0xffffffffull; }
template <class T>
__device__ __forceinline__ T valueOf(unsigned long long word);
template <>
__device__ __forceinline__ unsigned valueOf<unsigned>(unsigned long long word) {
    return unsigned(word);
}
template <>
__device__ __forceinline__ float valueOf<float>(unsigned long long word) {
    return __uint_as_float(unsigned(word));
}

// One 64-bit word, read and written whole (never torn): the flag and its value
// arrive together, so no fence is needed between writing the value and the flag.
// Device scope: the access goes to L2, where every SM sees it.
__device__ __forceinline__ void publish(unsigned long long* status, size_t tile, unsigned long long word) {
    cuda::atomic_ref<unsigned long long, cuda::thread_scope_device>(status[tile])
        .store(word, cuda::memory_order_relaxed);
}
__device__ __forceinline__ unsigned long long poll(unsigned long long* status, size_t tile) {
    return cuda::atomic_ref<unsigned long long, cuda::thread_scope_device>(status[tile])
        .load(cuda::memory_order_relaxed);
}

// Warp 0 of the block that owns `tile`: publish the aggregate, then look back
// at the predecessors, 32 at a time (lane 31 looks at the nearest), summing
// their aggregates until the nearest P. Returns the tile's exclusive prefix
// and publishes P = prefix + aggregate. Every lane returns the same value.
template <class T>
__device__ T lookBack(unsigned long long* status, size_t tile, T aggregate) {
    const int lane = threadIdx.x % 32;
    if (tile == 0) {  // nothing before it: its aggregate is its inclusive prefix
        if (lane == 0) publish(status, 0, pack(kStatusP, aggregate));
        return T(0);
    }
    if (lane == 0) publish(status, tile, pack(kStatusA, aggregate));  // successors may use it already
    __nanosleep(kFirstLookNs);                                        // give the nearest predecessors time to publish P
    T between = T(0);                              // the aggregates of the tiles between the nearest P and this tile
    long long end = static_cast<long long>(tile);  // this window is tiles [end - 32, end)
    while (true) {
        const long long pred = end - 32 + lane;
        // Before tile 0 there is nothing: an aggregate of 0. (Tile 0 always publishes P,
        // so a window that reaches it always ends the walk.)
        unsigned long long word = pred >= 0 ? poll(status, size_t(pred)) : pack(kStatusA, T(0));
        while (__any_sync(kFull, flagOf(word) == kStatusX)) {  // some predecessor has not published: wait
            __nanosleep(kBackoffNs);
            if (flagOf(word) == kStatusX) word = poll(status, size_t(pred));
        }
        const unsigned pLanes = __ballot_sync(kFull, flagOf(word) == kStatusP);
        const int nearestP = pLanes ? 31 - __clz(pLanes) : -1;
        // Sum the aggregates after the nearest P (a butterfly: every lane gets the same sum).
        T v = lane > nearestP ? valueOf<T>(word) : T(0);
#pragma unroll
        for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(kFull, v, o);
        between = v + between;
        if (pLanes) {
            const T prefix = valueOf<T>(__shfl_sync(kFull, word, nearestP)) + between;
            if (lane == 0) publish(status, tile, pack(kStatusP, prefix + aggregate));
            return prefix;
        }
        end -= 32;  // all 32 were A: the next window back
    }
}

template <class T, bool kExclusive>
__global__ void __launch_bounds__(kThreads) scanSinglePass(const T* __restrict__ in, T* __restrict__ out, size_t n,
                                                           unsigned long long* status, unsigned* tileCounter) {
    __shared__ unsigned tileShared;
    __shared__ T warpTotals[kWarps];
    __shared__ T prefixShared;
    // (Exercise 3 of the handout: use blockIdx.x as the tile, as CUB does, and measure. Why does it
    // work on this GPU, and what would make it deadlock?)
    // Take the next tile in the order the blocks start, not blockIdx.x (README: "The look-back").
    if (threadIdx.x == 0) tileShared = atomicAdd(tileCounter, 1u);
    __syncthreads();
    const size_t tile = tileShared;
    const size_t base = tile * kTile;
    T x[kItems];
    loadTile(in, base, n, x);
    T vecBase[kVecs], tileTotal;
    tileOffsets(x, vecBase, tileTotal, warpTotals);
    if (threadIdx.x < 32) {
        const T prefix = lookBack(status, tile, tileTotal);
        if (threadIdx.x == 0) prefixShared = prefix;
    }
    __syncthreads();
    tileFinish<T, kExclusive>(x, vecBase, prefixShared);
    storeTile(out, base, n, x);
}

inline size_t tiles_for(size_t n) { return (n + kTile - 1) / kTile; }

// Scratch: one status word per tile, then the tile counter.
inline size_t workspace_bytes(size_t n) { return (tiles_for(n) + 1) * sizeof(unsigned long long); }

// The most additions between an input and an output (float error bound): 32
// in the tiles, 5 in a window's sum, one per window walked (at most T / 32),
// and 2 per hop from a tile's P to a later tile's P (at most T hops).
inline uint64_t rounding_depth(size_t n) { return 64 + 3 * uint64_t(tiles_for(n)); }

// Scans in[0..n) into out. workspace: workspace_bytes(n) bytes.
template <class T>
void scan(const T* in, T* out, size_t n, bool exclusive, void* workspace, cudaStream_t stream) {
    static_assert(sizeof(T) == 4, "4-byte elements: a value and its flag share one 64-bit word");
    const size_t tiles = tiles_for(n);
    auto* status = static_cast<unsigned long long*>(workspace);
    auto* tileCounter = reinterpret_cast<unsigned*>(status + tiles);
    // Every scan starts with all tiles at X and the counter at 0.
    CUDA_CHECK(cudaMemsetAsync(workspace, 0, workspace_bytes(n), stream));
    if (exclusive)
        scanSinglePass<T, true><<<static_cast<unsigned>(tiles), kThreads, 0, stream>>>(in, out, n, status, tileCounter);
    else
        scanSinglePass<T, false>
            <<<static_cast<unsigned>(tiles), kThreads, 0, stream>>>(in, out, n, status, tileCounter);
    CUDA_CHECK_LAUNCH();
}

}  // namespace single_pass_wait
