// Lesson 13 of the course (the SGEMM ladder), rung 14 of 18: rung 10's schedule, rung 8's warp tiles.
// Run this rung alone: ./build/bin/matmul_ladder --rung=14   (lesson 13 of the course, 00-23)
//
// Before: rung 10 gave each thread an 8 x 16 piece of C on a 16 x 16 thread grid: a B
//         fragment read by 16 lanes covers 256 bytes, two shared-memory wavefronts.
// Here:   the same schedule, loads and stores, with rung 8's warp and lane layout: 8 warps
//         of 64 x 64, each lane a 16 x 8 piece as 4 x 2 sub-tiles of 4 x 4. A warp's A
//         fragment read covers 64 bytes and its B read 128: 6 wavefronts per k step
//         instead of 10, for the same 6 LDS.128 and 128 FFMA per lane.
// Lacks:  the next tile still passes through 12 registers per thread, and ptxas may move
//         those loads down next to their stores (README.md).
// Next:   rung 15 moves the tiles with cp.async copies spread over the first k steps
//         (diff kernels/14_warp_tiles.cuh kernels/15_async_copies.cuh).
// Run:    ./build/bin/matmul_ladder --rung=14
#pragma once
#include "common.cuh"
#include "common/check.h"

namespace rung14 {

constexpr int kBM = 128, kBN = 256, kBK = 8;              // block tile
constexpr int kWM = 64, kWN = 64, kTM = 16, kTN = 8;      // warp tile, lane tile (rung 8's)
constexpr int kThreads = (kBM / kWM) * (kBN / kWN) * 32;  // 256: 8 warps
constexpr int kLDA = kBM + 4;                             // padded row of the transposed A tile

// Per k step a thread stages one float4 of A (128 x 8 tile: 128 rows x 2 float4)
// and two float4 of B (8 x 256 tile: 8 rows x 64 float4), rows t/64 and t/64 + 4.
struct Staged {
    float4 a, b0, b1;
};

// A tile on an edge of A or B (or rows that are not 16-byte aligned): every load
// is guarded, and zeros stand in for elements outside the matrices.
__device__ __forceinline__ Staged loadTiles(const float* A, const float* B, int M, int N, int K, int m0, int n0, int k0,
                                            bool vecA, bool vecB) {
    const int t = threadIdx.x;
    const int ar = m0 + t / 2, ac = k0 + (t % 2) * 4;    // A: row ar, columns ac..ac+3
    const int br = k0 + t / 64, bc = n0 + (t % 64) * 4;  // B: rows br and br+4, columns bc..bc+3
    Staged s;
    s.a = load4(A + size_t(ar < M ? ar : 0) * K, ac, ar < M ? K : 0, vecA);  // a row outside: all zeros
    s.b0 = load4(B + size_t(br < K ? br : 0) * N, bc, br < K ? N : 0, vecB);
    s.b1 = load4(B + size_t(br + 4 < K ? br + 4 : 0) * N, bc, br + 4 < K ? N : 0, vecB);
    return s;
}

// A tile wholly inside both matrices, rows 16-byte aligned: three LDG.E.128, no checks.
// a points at this thread's float4 of A, b at its first float4 of B (the second is 4 rows down).
__device__ __forceinline__ Staged loadInterior(const float* a, const float* b, int N) {
    return {ldg4(a), ldg4(b), ldg4(b + size_t(4) * N)};
}

// A goes in transposed (As[k][m], rows of kLDA floats); B goes in as it is.
__device__ __forceinline__ void storeTiles(float* As, float* Bs, const Staged& s) {
    const int t = threadIdx.x, m = t / 2, k = (t % 2) * 4;
    As[(k + 0) * kLDA + m] = s.a.x;  // rows k and k+4 are 4 * 132 floats apart: 16 banks
    As[(k + 1) * kLDA + m] = s.a.y;  // apart, so the warp's 32 stores hit 32 banks
    As[(k + 2) * kLDA + m] = s.a.z;
    As[(k + 3) * kLDA + m] = s.a.w;
    *reinterpret_cast<float4*>(&Bs[(t / 64) * kBN + (t % 64) * 4]) = s.b0;
    *reinterpret_cast<float4*>(&Bs[(t / 64 + 4) * kBN + (t % 64) * 4]) = s.b1;
}

// Step k's fragments: the lane's 16 x 8 block is 4 x 2 sub-tiles of 4 x 4, at rows
// am + {0, 16, 32, 48} and columns bn + {0, 32} (am, bn: its warp's corner plus its lane's
// offset). Six LDS.128; a warp's A read covers 64 bytes, its B read 128: one wavefront each.
__device__ __forceinline__ void fragments(const float* As, const float* Bs, int k, int am, int bn, float (&a)[kTM],
                                          float (&b)[kTN]) {
#pragma unroll
    for (int i = 0; i < kTM / 4; ++i) put4(a + 4 * i, lds4(&As[k * kLDA + am + 16 * i]));
#pragma unroll
    for (int j = 0; j < kTN / 4; ++j) put4(b + 4 * j, lds4(&Bs[k * kBN + bn + 32 * j]));
}

__device__ __forceinline__ void outerProduct(const float (&a)[kTM], const float (&b)[kTN], float (&acc)[kTM][kTN]) {
#pragma unroll
    for (int i = 0; i < kTM; ++i)
#pragma unroll
        for (int j = 0; j < kTN; ++j) acc[i][j] += a[i] * b[j];  // 128 FFMA
}

__device__ __forceinline__ void storeSplitTile(float* C, int M, int N, int m0, int n0, int am, int bn, bool vecC,
                                               const float (&acc)[kTM][kTN]) {
#pragma unroll
    for (int i = 0; i < kTM; ++i) {
        const int r = m0 + (i / 4) * 16 + am + i % 4;
        if (r >= M) continue;
#pragma unroll
        for (int j = 0; j < kTN / 4; ++j)
            store4(C + size_t(r) * N, n0 + bn + 32 * j, N, vecC,
                   make_float4(acc[i][4 * j], acc[i][4 * j + 1], acc[i][4 * j + 2], acc[i][4 * j + 3]));
    }
}

__global__ void __launch_bounds__(kThreads) sgemmRegDoubleBuffered(int M, int N, int K, const float* __restrict__ A,
                                                                   const float* __restrict__ B, float* __restrict__ C) {
    __shared__ __align__(16) float As[2][kBK * kLDA];
    __shared__ __align__(16) float Bs[2][kBK * kBN];
    const int t = threadIdx.x, warp = t / 32, lane = t % 32;
    const int am = (warp / (kBN / kWN)) * kWM + (lane / 8) * 4;  // the lane's first row in the block tile
    const int bn = (warp % (kBN / kWN)) * kWN + (lane % 8) * 4;  // and its first column
    const int m0 = blockIdx.y * kBM, n0 = blockIdx.x * kBN;
    const bool vecA = K % 4 == 0 && aligned16(A), vecB = N % 4 == 0 && aligned16(B), vecC = N % 4 == 0 && aligned16(C);
    const bool inside = m0 + kBM <= M && n0 + kBN <= N && vecA && vecB;  // no edge in M or N, 16-byte rows
    // Interior tiles read through two pointers that walk along k: kBK columns of A, kBK rows of B.
    const float* a_next = A + size_t(min(m0 + t / 2, M - 1)) * K + (t % 2) * 4;
    const float* b_next = B + size_t(t / 64) * N + n0 + (t % 64) * 4;
    const auto load = [&](int k0) {  // the branch is the same for every thread of the block
        const Staged s = inside && k0 + kBK <= K ? loadInterior(a_next, b_next, N)
                                                 : loadTiles(A, B, M, N, K, m0, n0, k0, vecA, vecB);
        a_next += kBK;
        b_next += size_t(kBK) * N;
        return s;
    };
    const int tiles = (K + kBK - 1) / kBK;
    float acc[kTM][kTN] = {};
    float a[2][kTM], b[2][kTN];  // step k's fragments feed the FFMA while step k+1's load
    storeTiles(As[0], Bs[0], load(0));
    __syncthreads();
    fragments(As[0], Bs[0], 0, am, bn, a[0], b[0]);
    for (int tile = 0; tile < tiles; ++tile) {
        const int cur = tile & 1;
        const bool more = tile + 1 < tiles;
        Staged next;
        if (more) next = load((tile + 1) * kBK);  // in flight during the 1024 FFMA below
#pragma unroll
        for (int k = 0; k < kBK; ++k) {
            if (k < kBK - 1) {
                fragments(As[cur], Bs[cur], k + 1, am, bn, a[(k + 1) % 2], b[(k + 1) % 2]);
            } else if (more) {  // last step: switch tiles before its FFMA, so they hide the first reads
                storeTiles(As[cur ^ 1], Bs[cur ^ 1], next);  // nobody reads buffer cur^1 now
                __syncthreads();                             // tile+1 is in shared memory for everyone
                fragments(As[cur ^ 1], Bs[cur ^ 1], 0, am, bn, a[0], b[0]);
            }
            outerProduct(a[k % 2], b[k % 2], acc);
        }
    }
    storeSplitTile(C, M, N, m0, n0, am, bn, vecC, acc);
}

inline void launch(const Gemm& g) {
    sgemmRegDoubleBuffered<<<dim3(blocks(g.N, kBN), blocks(g.M, kBM)), kThreads>>>(g.M, g.N, g.K, g.A, g.B, g.C);
    CUDA_CHECK_LAUNCH();
}

}  // namespace rung14
