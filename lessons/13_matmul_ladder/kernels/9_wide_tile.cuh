// Lesson 13 of the course (the SGEMM ladder), rung 9 of 18: a 128 x 256 tile, 8 x 16 per thread.
// Run this rung alone: ./build/bin/matmul_ladder --rung=9   (lesson 13 of the course, 00-23)
//
// Before: rung 6 (this rung's parent; rung 8 took another road) gave each thread
//         an 8 x 8 tile: 4 LDS.128 for 64 FFMA, and its 128 x 128 block tile
//         fetched 1/64 of a global element per FMA.
// Here:   the same double-buffered kernel with a 128 x 256 block tile and 8 x 16
//         outputs per thread (2 x 4 sub-tiles of 4 x 4): 6 LDS.128 feed 128 FFMA,
//         and the block fetches 3/256 of an element per FMA. Per k step a thread
//         stages three float4 (one of A, two of B); a tile that lies wholly inside
//         the matrices, with 16-byte rows, loads them without any check.
// Lacks:  overlap inside the tile. Each k step's fragments are read right before
//         their FMAs, and at the barrier that ends a tile every warp waits with
//         no FMA to issue; the next tile's first reads then start cold.
// Next:   rung 10 double-buffers the fragments in registers and moves the barrier
//         before the last k step (diff kernels/9_wide_tile.cuh kernels/10_register_double_buffer.cuh).
// Run:    ./build/bin/matmul_ladder --rung=9
#pragma once
#include "common.cuh"
#include "common/check.h"

namespace rung9 {

constexpr int kBM = 128, kBN = 256, kBK = 8, kTM = 8, kTN = 16;
constexpr int kThreads = (kBM / kTM) * (kBN / kTN);  // 256
constexpr int kLDA = kBM + 4;                        // padded row of the transposed A tile

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

// Step k's fragments: the thread's 8 x 16 block is 2 x 4 sub-tiles of 4 x 4, at rows
// ty*4 + {0, 64} and columns tx*4 + {0, 64, 128, 192}. Six LDS.128; sixteen neighbouring
// lanes read sixteen neighbouring float4 of Bs[k] (256 contiguous bytes): no conflict.
__device__ __forceinline__ void fragments(const float* As, const float* Bs, int k, int ty, int tx, float (&a)[kTM],
                                          float (&b)[kTN]) {
#pragma unroll
    for (int i = 0; i < kTM / 4; ++i) put4(a + 4 * i, lds4(&As[k * kLDA + ty * 4 + 64 * i]));
#pragma unroll
    for (int j = 0; j < kTN / 4; ++j) put4(b + 4 * j, lds4(&Bs[k * kBN + tx * 4 + 64 * j]));
}

__device__ __forceinline__ void outerProduct(const float (&a)[kTM], const float (&b)[kTN], float (&acc)[kTM][kTN]) {
#pragma unroll
    for (int i = 0; i < kTM; ++i)
#pragma unroll
        for (int j = 0; j < kTN; ++j) acc[i][j] += a[i] * b[j];  // 128 FFMA
}

__device__ __forceinline__ void storeSplitTile(float* C, int M, int N, int m0, int n0, int ty, int tx, bool vecC,
                                               const float (&acc)[kTM][kTN]) {
#pragma unroll
    for (int i = 0; i < kTM; ++i) {
        const int r = m0 + (i / 4) * 64 + ty * 4 + i % 4;
        if (r >= M) continue;
#pragma unroll
        for (int j = 0; j < kTN / 4; ++j)
            store4(C + size_t(r) * N, n0 + tx * 4 + 64 * j, N, vecC,
                   make_float4(acc[i][4 * j], acc[i][4 * j + 1], acc[i][4 * j + 2], acc[i][4 * j + 3]));
    }
}

__global__ void __launch_bounds__(kThreads) sgemmWideTile(int M, int N, int K, const float* __restrict__ A,
                                                          const float* __restrict__ B, float* __restrict__ C) {
    __shared__ __align__(16) float As[2][kBK * kLDA];
    __shared__ __align__(16) float Bs[2][kBK * kBN];
    const int t = threadIdx.x, tx = t % 16, ty = t / 16;
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
    storeTiles(As[0], Bs[0], load(0));
    __syncthreads();
    for (int tile = 0; tile < tiles; ++tile) {
        const int cur = tile & 1;
        const bool more = tile + 1 < tiles;
        Staged next;
        if (more) next = load((tile + 1) * kBK);  // in flight during the 1024 FFMA below
#pragma unroll
        for (int k = 0; k < kBK; ++k) {
            float a[kTM], b[kTN];
            fragments(As[cur], Bs[cur], k, ty, tx, a, b);
            outerProduct(a, b, acc);
        }
        if (more) storeTiles(As[cur ^ 1], Bs[cur ^ 1], next);  // nobody reads buffer cur^1 now
        __syncthreads();
    }
    storeSplitTile(C, M, N, m0, n0, ty, tx, vecC, acc);
}

inline void launch(const Gemm& g) {
    sgemmWideTile<<<dim3(blocks(g.N, kBN), blocks(g.M, kBM)), kThreads>>>(g.M, g.N, g.K, g.A, g.B, g.C);
    CUDA_CHECK_LAUNCH();
}

}  // namespace rung9
