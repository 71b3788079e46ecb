// Lesson 13 of the course (the SGEMM ladder), rung 1 of 18: shared-memory tiles.
// Run this rung alone: ./build/bin/matmul_ladder --rung=1   (lesson 13 of the course, 00-23)
//
// Before: the naive kernel of lesson 06 reads both operands of every FMA from
//         global memory, 2 loads per FMA.
// Here:   a 32 x 32 block stages a 32 x 32 tile of A and of B in shared memory;
//         every element fetched from global memory then serves 32 FMAs, not 1.
// Lacks:  register reuse. Every FMA still reads 2 values from shared memory.
// Next:   rung 2 gives each thread 8 outputs, so one value read from shared
//         memory feeds 8 FMAs (diff kernels/1_smem_tiles.cuh kernels/2_reg_tile_1d.cuh).
// Run:    ./build/bin/matmul_ladder --rung=1
#pragma once
#include "common.cuh"
#include "common/check.h"

namespace rung1 {

constexpr int kT = 32;

__global__ void __launch_bounds__(kT* kT) sgemmSmemTiles(int M, int N, int K, const float* __restrict__ A,
                                                         const float* __restrict__ B, float* __restrict__ C) {
    __shared__ float As[kT][kT];
    __shared__ float Bs[kT][kT];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * kT + ty, col = blockIdx.x * kT + tx;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += kT) {
        // Outside the matrices load 0: a partial tile then adds nothing (awkward shapes).
        As[ty][tx] = (row < M && k0 + tx < K) ? A[size_t(row) * K + k0 + tx] : 0.0f;
        Bs[ty][tx] = (k0 + ty < K && col < N) ? B[size_t(k0 + ty) * N + col] : 0.0f;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < kT; ++k) acc += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    if (row < M && col < N) C[size_t(row) * N + col] = acc;
}

inline void launch(const Gemm& g) {
    sgemmSmemTiles<<<dim3(blocks(g.N, kT), blocks(g.M, kT)), dim3(kT, kT)>>>(g.M, g.N, g.K, g.A, g.B, g.C);
    CUDA_CHECK_LAUNCH();
}

}  // namespace rung1
