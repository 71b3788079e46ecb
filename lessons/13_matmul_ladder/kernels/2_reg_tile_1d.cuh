// Lesson 13 of the course (the SGEMM ladder), rung 2 of 18: a 1D register tile.
// Run this rung alone: ./build/bin/matmul_ladder --rung=2   (lesson 13 of the course, 00-23)
//
// Before: rung 1 read 2 values from shared memory for every FMA; shared memory,
//         not the FMA units, set its speed.
// Here:   a 64 x 64 block tile, k step 8, 512 threads; each thread computes 8
//         outputs of one column, so one B value read from shared memory feeds 8 FMAs.
// Lacks:  reuse of A: each FMA still reads its own value of A from shared memory.
// Next:   rung 3 makes the register tile 2D, 8 x 8 outputs per thread
//         (diff kernels/2_reg_tile_1d.cuh kernels/3_reg_tile_2d.cuh).
// Run:    ./build/bin/matmul_ladder --rung=2
#pragma once
#include "common.cuh"
#include "common/check.h"

namespace rung2 {

constexpr int kBM = 64, kBN = 64, kBK = 8, kTM = 8;
constexpr int kThreads = kBM * kBN / kTM;  // 512

__global__ void __launch_bounds__(kThreads) sgemmRegTile1D(int M, int N, int K, const float* __restrict__ A,
                                                           const float* __restrict__ B, float* __restrict__ C) {
    __shared__ float As[kBM][kBK];
    __shared__ float Bs[kBK][kBN];
    const int t = threadIdx.x;
    const int m0 = blockIdx.y * kBM, n0 = blockIdx.x * kBN;
    const int col = t % kBN, row = (t / kBN) * kTM;  // this thread's outputs: rows row..row+7 of column col
    const int ar = t / kBK, ac = t % kBK;            // the element of the A tile this thread stages
    const int br = t / kBN, bc = t % kBN;            // the element of the B tile this thread stages
    float acc[kTM] = {};
    for (int k0 = 0; k0 < K; k0 += kBK) {
        As[ar][ac] = (m0 + ar < M && k0 + ac < K) ? A[size_t(m0 + ar) * K + k0 + ac] : 0.0f;
        Bs[br][bc] = (k0 + br < K && n0 + bc < N) ? B[size_t(k0 + br) * N + n0 + bc] : 0.0f;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < kBK; ++k) {
            const float b = Bs[k][col];  // one shared load ...
#pragma unroll
            for (int i = 0; i < kTM; ++i) acc[i] += As[row + i][k] * b;  // ... 8 FMAs
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < kTM; ++i)
        if (m0 + row + i < M && n0 + col < N) C[size_t(m0 + row + i) * N + n0 + col] = acc[i];
}

inline void launch(const Gemm& g) {
    sgemmRegTile1D<<<dim3(blocks(g.N, kBN), blocks(g.M, kBM)), kThreads>>>(g.M, g.N, g.K, g.A, g.B, g.C);
    CUDA_CHECK_LAUNCH();
}

}  // namespace rung2
