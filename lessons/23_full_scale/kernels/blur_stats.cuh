// Lesson 23 - the full-scale run: the two kernels that turn a chunk of images into per-image
// statistics. Lesson 07's best blur rung (blur3x3Rows: a thread walks a float4 column strip
// down the image, three rows of [1 2 1] sums in registers) with lesson 14's reduction fused
// into it: the blurred pixels are summed, and their minimum and maximum taken, in registers,
// so the blurred image never goes to DRAM. Per image: each block writes one partial (sum of
// the raw pixels, sum, min and max of the blurred ones); finishImageStats adds a block's
// partials per image in a fixed order (lesson 14's "second tiny kernel" finish).
// Run: ./build/bin/full_scale. See README.md.
#pragma once
#include <cuda_runtime.h>

#include "verify/full_scale.h"  // kStatFields and the field order of a result

namespace fullscale {

using verify::kStatFields;
constexpr int kVec = 4;                 // columns per thread: one float4 (side % 4 == 0)
constexpr int kStrip = 16;              // output rows per thread
constexpr int kColsX = 64, kRowsY = 4;  // block: 64 column groups x 4 strips = 256 threads
constexpr int kThreads = kColsX * kRowsY;
constexpr int kWarps = kThreads / 32;
constexpr int kFinishThreads = 32;  // one warp per image finishes it
// Float additions on the longest path inside one thread (verify::sum_relation_bound): a row's
// four values in a tree of depth 2, then one addition per row of the strip.
constexpr int kThreadDepth = 2 + kStrip;

// Blocks per image: across (column groups of kColsX float4s), down (kRowsY strips of kStrip rows).
inline dim3 blocks_per_image(int side) {
    const int groups = side / kVec;
    return dim3(unsigned((groups + kColsX - 1) / kColsX), unsigned((side + kStrip * kRowsY - 1) / (kStrip * kRowsY)));
}

// Additions in double on the longest path after the threads: 5 shuffle steps in a warp,
// log2(kWarps) = 3 in the block, then per image: a lane adds every 32nd partial, 5 shuffles.
inline unsigned long long double_depth(int side) {
    const dim3 b = blocks_per_image(side);
    return 5 + 3 + (b.x * b.y + kFinishThreads - 1) / kFinishThreads + 5;
}

__device__ __forceinline__ float taps121(float l, float c, float r) { return l + 2.0f * c + r; }
__device__ __forceinline__ int clampToEdge(int i, int n) { return min(max(i, 0), n - 1); }

// The empty statistics: adding them changes nothing (0 for the sums, +-inf for min and max).
__device__ __forceinline__ void setEmpty(double (&v)[kStatFields]) {
    v[verify::kSumRaw] = 0.0, v[verify::kSumBlur] = 0.0, v[verify::kMinBlur] = INFINITY,
    v[verify::kMaxBlur] = -INFINITY;
}
// v of lane i combined with v of lane i + off, for off = first, first / 2, ..., 1 (lane 0 ends
// with the combination of lanes 0 .. 2 * first - 1).
__device__ __forceinline__ void warpCombine(double (&v)[kStatFields], int first) {
    for (int off = first; off > 0; off /= 2) {
        v[verify::kSumRaw] += __shfl_down_sync(0xffffffffu, v[verify::kSumRaw], off);
        v[verify::kSumBlur] += __shfl_down_sync(0xffffffffu, v[verify::kSumBlur], off);
        v[verify::kMinBlur] = fmin(v[verify::kMinBlur], __shfl_down_sync(0xffffffffu, v[verify::kMinBlur], off));
        v[verify::kMaxBlur] = fmax(v[verify::kMaxBlur], __shfl_down_sync(0xffffffffu, v[verify::kMaxBlur], off));
    }
}

// images: gridDim.z images of side x side floats, back to back (side % 4 == 0).
// partials: kStatFields doubles per block, blocks numbered per image (blockIdx.y * gridDim.x +
// blockIdx.x), images one after the other.
__global__ void __launch_bounds__(kThreads)
    blur3x3Stats(const float* __restrict__ images, double* __restrict__ partials, int side) {
    const float* in = images + static_cast<size_t>(blockIdx.z) * side * side;
    const int x = kVec * (blockIdx.x * kColsX + threadIdx.x);  // first of this thread's 4 columns
    const int y0 = (blockIdx.y * kRowsY + threadIdx.y) * kStrip;
    float sumRaw = 0.0f, sumBlur = 0.0f, lo = INFINITY, hi = -INFINITY;
    // A thread past the right or bottom edge adds nothing, but it still takes part in the block's
    // reduction below (its barrier and shuffles need every thread): no early return.
    if (x < side && y0 < side) {
        const int xl = max(x - 1, 0), xr = min(x + kVec, side - 1);  // clamp-to-edge across
        // [1 2 1] across row y (clamped) for the 4 columns; raw = the 4 pixels' sum.
        auto across = [&](int y, float(&sum)[kVec], float& raw) {
            const float* row = in + static_cast<size_t>(clampToEdge(y, side)) * side;
            const float4 q = *reinterpret_cast<const float4*>(row + x);
            const float c[kVec + 2] = {row[xl], q.x, q.y, q.z, q.w, row[xr]};
#pragma unroll
            for (int j = 0; j < kVec; ++j) sum[j] = taps121(c[j], c[j + 1], c[j + 2]);
            raw = (q.x + q.y) + (q.z + q.w);
        };
        float above[kVec], here[kVec], below[kVec], rawAbove, rawHere, rawBelow;
        across(y0 - 1, above, rawAbove);
        across(y0, here, rawHere);
        const int yEnd = min(y0 + kStrip, side);
#pragma unroll 4
        for (int y = y0; y < yEnd; ++y) {
            sumRaw += rawHere;  // row y's own pixels: every input pixel counted once, by its owner
            across(y + 1, below, rawBelow);
            float o[kVec];
#pragma unroll
            for (int j = 0; j < kVec; ++j) o[j] = taps121(above[j], here[j], below[j]) * (1.0f / 16.0f);
            // Exercise 3 of the handout: the unfused version: store o[] (lesson 07) and reduce in a second kernel
            // Lesson 07 stored o[] here; this kernel only needs their sum, min and max.
            sumBlur += (o[0] + o[1]) + (o[2] + o[3]);
            lo = fminf(lo, fminf(fminf(o[0], o[1]), fminf(o[2], o[3])));
            hi = fmaxf(hi, fmaxf(fmaxf(o[0], o[1]), fmaxf(o[2], o[3])));
#pragma unroll
            for (int j = 0; j < kVec; ++j) above[j] = here[j], here[j] = below[j];
            rawHere = rawBelow;
        }
    }
    // The block's reduction (lesson 14, rung 5): in double from here on, a warp with
    // __shfl_down_sync, then the kWarps warp results through shared memory.
    double v[kStatFields];
    v[verify::kSumRaw] = sumRaw, v[verify::kSumBlur] = sumBlur, v[verify::kMinBlur] = lo, v[verify::kMaxBlur] = hi;
    warpCombine(v, 16);
    __shared__ double warpResult[kWarps][kStatFields];
    const int t = threadIdx.y * kColsX + threadIdx.x, lane = t % 32, warp = t / 32;
    if (lane == 0) {
#pragma unroll
        for (int f = 0; f < kStatFields; ++f) warpResult[warp][f] = v[f];
    }
    __syncthreads();  // every warp's result is in shared memory before warp 0 reads them
    if (warp == 0) {
        setEmpty(v);
        if (lane < kWarps) {
#pragma unroll
            for (int f = 0; f < kStatFields; ++f) v[f] = warpResult[lane][f];
        }
        warpCombine(v, kWarps / 2);
        if (lane == 0) {
            const size_t block = (static_cast<size_t>(blockIdx.z) * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
#pragma unroll
            for (int f = 0; f < kStatFields; ++f) partials[block * kStatFields + f] = v[f];
        }
    }
}

// One warp per image (blockIdx.x = image of the chunk): lane i adds partials i, i + 32, ...
// of its image in order, then the warp combines the lanes; the same order every run.
__global__ void __launch_bounds__(kFinishThreads)
    finishImageStats(const double* __restrict__ partials, double* __restrict__ stats, int perImage) {
    // EXERCISE 1 BEGIN: combine the perImage partials of image blockIdx.x into its kStatFields stats (sums, min, max)
    // HINT: lane i folds partials i, i + 32, ... in that order, starting from setEmpty; then warpCombine(v, 16)
    // HINT: perImage can be below 32 or not a multiple of 32; lane 0 writes the image's result
    const double* p = partials + static_cast<size_t>(blockIdx.x) * perImage * kStatFields;
    const int lane = threadIdx.x;
    double v[kStatFields];
    setEmpty(v);
    for (int b = lane; b < perImage; b += kFinishThreads) {
        v[verify::kSumRaw] += p[b * kStatFields + verify::kSumRaw];
        v[verify::kSumBlur] += p[b * kStatFields + verify::kSumBlur];
        v[verify::kMinBlur] = fmin(v[verify::kMinBlur], p[b * kStatFields + verify::kMinBlur]);
        v[verify::kMaxBlur] = fmax(v[verify::kMaxBlur], p[b * kStatFields + verify::kMaxBlur]);
    }
    warpCombine(v, 16);
    if (lane == 0) {
#pragma unroll
        for (int f = 0; f < kStatFields; ++f) stats[static_cast<size_t>(blockIdx.x) * kStatFields + f] = v[f];
    }
    // EXERCISE 1 END
}

}  // namespace fullscale
