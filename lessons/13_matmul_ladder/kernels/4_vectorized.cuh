// Lesson 13 of the course (the SGEMM ladder), rung 4 of 18: 16-byte loads, A transposed.
// Run this rung alone: ./build/bin/matmul_ladder --rung=4   (lesson 13 of the course, 00-23)
//
// Before: rung 3 moved every value with its own 4-byte load (8 LDG per thread per
//         tile), and read its fragments with 2-way bank conflicts.
// Here:   each thread stages one float4 of A and one of B per k step (LDG.E.128);
//         A goes into shared memory transposed (As[k][m]), so the 8 values of A a
//         thread needs for one k are contiguous and come in two LDS.128, like B's.
//         The thread's 8 x 8 block is contiguous: rows ty*8.., columns tx*8...
// Lacks:  conflict-free shared memory. Reading B at tx*8 and the transposed store
//         of A both conflict 2-way.
// Next:   rung 5 splits the 8 x 8 block into 4 x 4 sub-tiles and pads the A rows
//         (diff kernels/4_vectorized.cuh kernels/5_conflict_free.cuh).
// Run:    ./build/bin/matmul_ladder --rung=4
#pragma once
#include "common.cuh"
#include "common/check.h"

namespace rung4 {

constexpr int kBM = 128, kBN = 128, kBK = 8, kTM = 8, kTN = 8;
constexpr int kThreads = (kBM / kTM) * (kBN / kTN);  // 256

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

// A goes in transposed (As[k][m], rows of kBM floats); B goes in as it is.
__device__ __forceinline__ void storeTiles(float* As, float* Bs, const Staged& s) {
    const int t = threadIdx.x, m = t / 2, k = (t % 2) * 4;
    As[(k + 0) * kBM + m] = s.a.x;  // lanes 2i and 2i+1: rows k and k+4 of column m, 512 floats
    As[(k + 1) * kBM + m] = s.a.y;  // apart, the same bank: a 2-way conflict
    As[(k + 2) * kBM + m] = s.a.z;
    As[(k + 3) * kBM + m] = s.a.w;
    *reinterpret_cast<float4*>(&Bs[(t / 32) * kBN + (t % 32) * 4]) = s.b;
}

__global__ void __launch_bounds__(kThreads) sgemmVectorized(int M, int N, int K, const float* __restrict__ A,
                                                            const float* __restrict__ B, float* __restrict__ C) {
    __shared__ __align__(16) float As[kBK * kBM];
    __shared__ __align__(16) float Bs[kBK * kBN];
    const int t = threadIdx.x, tx = t % 16, ty = t / 16;
    const int m0 = blockIdx.y * kBM, n0 = blockIdx.x * kBN;
    const bool vecA = K % 4 == 0 && aligned16(A), vecB = N % 4 == 0 && aligned16(B), vecC = N % 4 == 0 && aligned16(C);
    float acc[kTM][kTN] = {};
    for (int k0 = 0; k0 < K; k0 += kBK) {
        storeTiles(As, Bs, loadTiles(A, B, M, N, K, m0, n0, k0, vecA, vecB));
        __syncthreads();
#pragma unroll
        for (int k = 0; k < kBK; ++k) {
            float a[kTM], b[kTN];
            put4(a, lds4(&As[k * kBM + ty * 8]));
            put4(a + 4, lds4(&As[k * kBM + ty * 8 + 4]));
            put4(b, lds4(&Bs[k * kBN + tx * 8]));  // 8 lanes read 16 B at a 32 B stride: 2-way conflict
            put4(b + 4, lds4(&Bs[k * kBN + tx * 8 + 4]));
#pragma unroll
            for (int i = 0; i < kTM; ++i)
#pragma unroll
                for (int j = 0; j < kTN; ++j) acc[i][j] += a[i] * b[j];
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < kTM; ++i) {
        const int r = m0 + ty * 8 + i;
        if (r >= M) continue;
        store4(C + size_t(r) * N, n0 + tx * 8, N, vecC, make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]));
        store4(C + size_t(r) * N, n0 + tx * 8 + 4, N, vecC, make_float4(acc[i][4], acc[i][5], acc[i][6], acc[i][7]));
    }
}

inline void launch(const Gemm& g) {
    sgemmVectorized<<<dim3(blocks(g.N, kBN), blocks(g.M, kBM)), kThreads>>>(g.M, g.N, g.K, g.A, g.B, g.C);
    CUDA_CHECK_LAUNCH();
}

}  // namespace rung4
