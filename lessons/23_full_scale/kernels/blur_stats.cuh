// Lesson 23 - the full-scale run: the two kernels that turn a chunk of images into per-image
// statistics. Lesson 07's best blur rung (blur3x3Rows: a thread walks a float4 column strip
// down the image, three rows of [1 2 1] sums in registers) with lesson 14's reduction fused
// into it: the blurred pixels are summed, and their minimum and maximum taken, in registers,
// so the blurred image never goes to DRAM. Two changes make it read at the DRAM rate: a thread
// loads kBatch rows at once before it uses any of them (more bytes in flight), and the columns
// left and right of its float4 come from the neighbouring lanes by shuffles, not from two more
// loads per row. Per image: each block writes one partial (sum of the raw pixels, sum, min and
// max of the blurred ones); finishImageStats adds a block's partials per image in a fixed order
// (lesson 14's "second tiny kernel" finish).
// Run: ./build/bin/full_scale. See README.md.
#pragma once
#include <cuda_runtime.h>

#include "verify/full_scale.h"  // kStatFields and the field order of a result

namespace fullscale {

using verify::kStatFields;
constexpr int kVec = 4;                 // columns per thread: one float4 (side % 4 == 0)
constexpr int kStrip = 32;              // output rows per thread
constexpr int kBatch = 8;               // rows loaded at once: 8 float4 loads in flight per thread
constexpr int kColsX = 64, kRowsY = 4;  // block: 64 column groups x 4 strips = 256 threads
constexpr int kThreads = kColsX * kRowsY;
constexpr int kWarps = kThreads / 32;
constexpr int kFinishThreads = 32;  // one warp per image finishes it
constexpr unsigned kFullMask = 0xffffffffu;
static_assert(kStrip % kBatch == 0 && kColsX % 32 == 0, "whole batches per strip, whole warps per block row");
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
        v[verify::kSumRaw] += __shfl_down_sync(kFullMask, v[verify::kSumRaw], off);
        v[verify::kSumBlur] += __shfl_down_sync(kFullMask, v[verify::kSumBlur], off);
        v[verify::kMinBlur] = fmin(v[verify::kMinBlur], __shfl_down_sync(kFullMask, v[verify::kMinBlur], off));
        v[verify::kMaxBlur] = fmax(v[verify::kMaxBlur], __shfl_down_sync(kFullMask, v[verify::kMaxBlur], off));
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
    const int lane = threadIdx.x % 32;  // a warp is 32 neighbouring column groups of one strip
    const bool inside = x < side;
    // Columns x - 1 and x + 4 are the neighbouring lanes' (shuffles below), except at the warp's
    // ends: lane 0 loads column x - 1, lane 31 column x + 4, when they are inside the image.
    const bool loadsLeft = inside && lane == 0 && x > 0;
    const bool loadsRight = lane == 31 && x + kVec < side;
    const bool lastGroup = x + kVec >= side;  // column x + 4 is past the edge: clamp to x + 3
    float sumRaw = 0.0f, sumBlur = 0.0f, lo = INFINITY, hi = -INFINITY;
    // Row y (clamped): this thread's float4 and the one column its lane loads for the warp.
    auto load = [&](int y, float4& q, float& edge) {
        const float* row = in + static_cast<size_t>(clampToEdge(y, side)) * side;
        q = inside ? *reinterpret_cast<const float4*>(row + x) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        edge = loadsLeft ? row[x - 1] : (loadsRight ? row[x + kVec] : 0.0f);
    };
    // [1 2 1] across a loaded row for the 4 columns; raw = the 4 pixels' sum. Every lane of the
    // warp calls it (the shuffles need all 32), also lanes past the right edge.
    auto across = [&](const float4& q, float edge, float(&sum)[kVec], float& raw) {
        float l = __shfl_up_sync(kFullMask, q.w, 1), r = __shfl_down_sync(kFullMask, q.x, 1);
        if (lane == 0) l = loadsLeft ? edge : q.x;  // clamp-to-edge at column 0
        if (lastGroup) r = q.w;
        else if (lane == 31) r = edge;
        sum[0] = taps121(l, q.x, q.y), sum[1] = taps121(q.x, q.y, q.z);
        sum[2] = taps121(q.y, q.z, q.w), sum[3] = taps121(q.z, q.w, r);
        raw = (q.x + q.y) + (q.z + q.w);
    };
    // A strip past the bottom adds nothing (the whole warp: y0 is the same for its 32 lanes), but
    // its threads still take part in the block's reduction below (its barrier and shuffles need
    // every thread): no early return.
    if (y0 < side) {
        const int yEnd = min(y0 + kStrip, side);
        float above[kVec], here[kVec], rawHere, rawAbove, edge;
        float4 q;
        load(y0 - 1, q, edge);
        across(q, edge, above, rawAbove);
        load(y0, q, edge);
        across(q, edge, here, rawHere);
        for (int yb = y0; yb < yEnd; yb += kBatch) {
            // The rows below the next kBatch output rows, all loads issued before any is used.
            float4 rows[kBatch];
            float edges[kBatch];
#pragma unroll
            for (int j = 0; j < kBatch; ++j) load(yb + 1 + j, rows[j], edges[j]);
#pragma unroll
            for (int j = 0; j < kBatch; ++j) {
                float below[kVec], rawBelow;
                across(rows[j], edges[j], below, rawBelow);
                if (inside && yb + j < yEnd) {
                    sumRaw += rawHere;  // row y's own pixels: every input pixel counted once, by its owner
                    float o[kVec];
#pragma unroll
                    for (int k = 0; k < kVec; ++k) o[k] = taps121(above[k], here[k], below[k]) * (1.0f / 16.0f);
                    // Exercise 3 of the handout: the unfused version: store o[] (lesson 07) and reduce in a second kernel
                    // Lesson 07 stored o[] here; this kernel only needs their sum, min and max.
                    sumBlur += (o[0] + o[1]) + (o[2] + o[3]);
                    lo = fminf(lo, fminf(fminf(o[0], o[1]), fminf(o[2], o[3])));
                    hi = fmaxf(hi, fmaxf(fmaxf(o[0], o[1]), fmaxf(o[2], o[3])));
                }
#pragma unroll
                for (int k = 0; k < kVec; ++k) above[k] = here[k], here[k] = below[k];
                rawHere = rawBelow;
            }
        }
    }
    // The block's reduction (lesson 14, rung 5): in double from here on, a warp with
    // __shfl_down_sync, then the kWarps warp results through shared memory.
    double v[kStatFields];
    v[verify::kSumRaw] = sumRaw, v[verify::kSumBlur] = sumBlur, v[verify::kMinBlur] = lo, v[verify::kMaxBlur] = hi;
    warpCombine(v, 16);
    __shared__ double warpResult[kWarps][kStatFields];
    const int warp = (threadIdx.y * kColsX + threadIdx.x) / 32;
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
