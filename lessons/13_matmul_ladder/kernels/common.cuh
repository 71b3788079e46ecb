// Lesson 13 of the course (the SGEMM ladder): the few helpers the rungs share.
// Part of lesson 13 of the course (00-23), 13_matmul_ladder; run: ./build/bin/matmul_ladder
//
// Every rung in this folder (kernels/N_name.cuh, N = 1..18) is self-contained on
// purpose, so that `diff kernels/5_conflict_free.cuh kernels/6_double_buffered.cuh`
// shows exactly one idea. Only what does not change from rung to rung lives here:
// the problem a launcher gets (Gemm), the grid size, and the 16-byte accesses with
// their guarded 4-byte fallback at the matrix edges (rungs 4-18).
// Run the ladder: ./build/bin/matmul_ladder (or --rung=N for one rung); README.md explains it.
#pragma once
#include <cstdint>

#include "common/launch.h"

// One product C = A * B, row-major: A is M x K, B is K x N, C is M x N (device pointers).
struct Gemm {
    int M, N, K;
    const float* A;
    const float* B;
    float* C;
};

// Blocks needed to cover n elements with tiles of `tile` (the last one may be partial).
inline unsigned blocks(int n, int tile) { return static_cast<unsigned>(lesson::ceil_div(uint64_t(n), uint64_t(tile))); }

// A float4 access needs a 16-byte aligned address: row r of a row-major matrix with
// `cols` columns starts 16-byte aligned only when cols % 4 == 0 (and the base pointer
// is aligned). For other shapes, and past the right edge, the rungs use guarded
// 4-byte accesses instead.
__device__ __forceinline__ bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

// p[c..c+3] of a row whose valid columns are [0, cols); zeros past the end.
__device__ __forceinline__ float4 load4(const float* p, int c, int cols, bool vec) {
    if (vec && c + 3 < cols) return *reinterpret_cast<const float4*>(p + c);  // LDG.E.128
    return make_float4(c < cols ? p[c] : 0.0f, c + 1 < cols ? p[c + 1] : 0.0f, c + 2 < cols ? p[c + 2] : 0.0f,
                       c + 3 < cols ? p[c + 3] : 0.0f);
}

// Writes v to p[c..c+3], only the columns inside [0, cols).
__device__ __forceinline__ void store4(float* p, int c, int cols, bool vec, float4 v) {
    if (vec && c + 3 < cols) {
        *reinterpret_cast<float4*>(p + c) = v;  // STG.E.128
        return;
    }
    if (c < cols) p[c] = v.x;
    if (c + 1 < cols) p[c + 1] = v.y;
    if (c + 2 < cols) p[c + 2] = v.z;
    if (c + 3 < cols) p[c + 3] = v.w;
}

// An unchecked 16-byte global load: only for addresses known to be aligned and inside.
__device__ __forceinline__ float4 ldg4(const float* p) { return *reinterpret_cast<const float4*>(p); }  // LDG.E.128

// 16 bytes from shared memory in one instruction (p must be 16-byte aligned).
__device__ __forceinline__ float4 lds4(const float* p) { return *reinterpret_cast<const float4*>(p); }  // LDS.128

__device__ __forceinline__ void put4(float* dst, float4 v) {
    dst[0] = v.x;
    dst[1] = v.y;
    dst[2] = v.z;
    dst[3] = v.w;
}
