// Lesson 13 of the course (the SGEMM ladder), rung 5 of 18: no bank conflicts.
// Run this rung alone: ./build/bin/matmul_ladder --rung=5   (lesson 13 of the course, 00-23)
//
// Before: rung 4 read B at tx*8 (8 lanes, 16 B each at a 32 B stride: 2-way
//         conflict) and stored the transposed A tile into rows of 128 floats
//         (lanes 2i and 2i+1 in the same bank: 2-way conflict).
// Here:   the thread's 8 x 8 block is 2 x 2 sub-tiles of 4 x 4, at rows ty*4 and
//         ty*4 + 64 and columns tx*4 and tx*4 + 64: eight neighbouring lanes read
//         eight neighbouring float4 (128 contiguous bytes). The transposed A rows
//         are padded to kLDA = 132 floats, so a warp's 32 scalar stores land in 32 banks.
// Lacks:  overlap. Each tile is loaded, then computed, with two barriers per k step;
//         the global-load latency is exposed every time.
// Next:   rung 6 double-buffers shared memory and loads tile t+1 during tile t
//         (diff kernels/5_conflict_free.cuh kernels/6_double_buffered.cuh).
// Run:    ./build/bin/matmul_ladder --rung=5
#pragma once
#include "common.cuh"
#include "common/check.h"

namespace rung5 {

constexpr int kBM = 128, kBN = 128, kBK = 8, kTM = 8, kTN = 8;
constexpr int kThreads = (kBM / kTM) * (kBN / kTN);  // 256
constexpr int kLDA = kBM + 4;                        // padded row of the transposed A tile

// Per k step a thread stages one float4 of A (128 x 8 tile: 128 rows x 2 float4)
// and one float4 of B (8 x 128 tile: 8 rows x 32 float4).
struct Staged {
    float4 a, b;
};

__device__ __forceinline__ Staged loadTiles(const float* A, const float* B, int M, int N, int K, int m0, int n0, int k0,
                                            bool vecA, bool vecB) {
    const int t = threadIdx.x;
    const int ar = m0 + t / 2, ac = k0 + (t % 2) * 4;    // A: row ar, columns ac..ac+3
    const int br = k0 + t / 32, bc = n0 + (t % 32) * 4;  // B: row br, columns bc..bc+3
    Staged s;
    s.a = load4(A + size_t(ar < M ? ar : 0) * K, ac, ar < M ? K : 0, vecA);  // a row outside: all zeros
    s.b = load4(B + size_t(br < K ? br : 0) * N, bc, br < K ? N : 0, vecB);
    return s;
}

// A goes in transposed (As[k][m], rows of kLDA floats); B goes in as it is.
__device__ __forceinline__ void storeTiles(float* As, float* Bs, const Staged& s) {
    const int t = threadIdx.x, m = t / 2, k = (t % 2) * 4;
    As[(k + 0) * kLDA + m] = s.a.x;  // rows k and k+4 are 4 * 132 floats apart: 16 banks
    As[(k + 1) * kLDA + m] = s.a.y;  // apart, so the warp's 32 stores hit 32 banks
    As[(k + 2) * kLDA + m] = s.a.z;
    As[(k + 3) * kLDA + m] = s.a.w;
    *reinterpret_cast<float4*>(&Bs[(t / 32) * kBN + (t % 32) * 4]) = s.b;
}

// The thread's 8 x 8 block as 2 x 2 sub-tiles of 4 x 4: four LDS.128 per k, no conflict.
__device__ __forceinline__ void fmaSplitTile(const float* As, const float* Bs, int ty, int tx, float (&acc)[kTM][kTN]) {
#pragma unroll
    for (int k = 0; k < kBK; ++k) {
        float a[kTM], b[kTN];
        put4(a, lds4(&As[k * kLDA + ty * 4]));
        put4(a + 4, lds4(&As[k * kLDA + ty * 4 + 64]));
        put4(b, lds4(&Bs[k * kBN + tx * 4]));
        put4(b + 4, lds4(&Bs[k * kBN + tx * 4 + 64]));
#pragma unroll
        for (int i = 0; i < kTM; ++i)
#pragma unroll
            for (int j = 0; j < kTN; ++j) acc[i][j] += a[i] * b[j];
    }
}

__device__ __forceinline__ void storeSplitTile(float* C, int M, int N, int m0, int n0, int ty, int tx, bool vecC,
                                               const float (&acc)[kTM][kTN]) {
#pragma unroll
    for (int i = 0; i < kTM; ++i) {
        const int r = m0 + (i / 4) * 64 + ty * 4 + i % 4;
        if (r >= M) continue;
        store4(C + size_t(r) * N, n0 + tx * 4, N, vecC, make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]));
        store4(C + size_t(r) * N, n0 + tx * 4 + 64, N, vecC, make_float4(acc[i][4], acc[i][5], acc[i][6], acc[i][7]));
    }
}

__global__ void __launch_bounds__(kThreads) sgemmConflictFree(int M, int N, int K, const float* __restrict__ A,
                                                              const float* __restrict__ B, float* __restrict__ C) {
    __shared__ __align__(16) float As[kBK * kLDA];
    __shared__ __align__(16) float Bs[kBK * kBN];
    const int t = threadIdx.x, tx = t % 16, ty = t / 16;
    const int m0 = blockIdx.y * kBM, n0 = blockIdx.x * kBN;
    const bool vecA = K % 4 == 0 && aligned16(A), vecB = N % 4 == 0 && aligned16(B), vecC = N % 4 == 0 && aligned16(C);
    float acc[kTM][kTN] = {};
    for (int k0 = 0; k0 < K; k0 += kBK) {
        storeTiles(As, Bs, loadTiles(A, B, M, N, K, m0, n0, k0, vecA, vecB));
        __syncthreads();
        fmaSplitTile(As, Bs, ty, tx, acc);
        __syncthreads();
    }
    storeSplitTile(C, M, N, m0, n0, ty, tx, vecC, acc);
}

inline void launch(const Gemm& g) {
    sgemmConflictFree<<<dim3(blocks(g.N, kBN), blocks(g.M, kBM)), kThreads>>>(g.M, g.N, g.K, g.A, g.B, g.C);
    CUDA_CHECK_LAUNCH();
}

}  // namespace rung5
