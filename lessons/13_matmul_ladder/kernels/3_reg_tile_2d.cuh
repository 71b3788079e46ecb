// Lesson 13 of the course (the SGEMM ladder), rung 3 of 18: a 2D register tile.
// Run this rung alone: ./build/bin/matmul_ladder --rung=3   (lesson 13 of the course, 00-23)
//
// Before: rung 2 reused each value of B 8 times but each value of A only once
//         (9 shared loads per 8 FMAs), and its 64 x 64 tile fetched 1/32 of a
//         global element per FMA.
// Here:   a 128 x 128 block tile, k step 8, 256 threads, each thread an 8 x 8 block
//         of C in registers. Per k a thread reads 8 values of A and 8 of B from
//         shared memory and does 8 x 8 = 64 FMAs with them.
// Lacks:  wide accesses. Global loads are 4 bytes each, and both fragment reads
//         hit 2-way bank conflicts. Its registers leave room for one block per
//         SM, so no other block computes while this one waits for its tiles
//         (kernels/control.cuh is this kernel asked to fit two).
// Next:   rung 4 moves 16 bytes per load and stores A transposed
//         (diff kernels/3_reg_tile_2d.cuh kernels/4_vectorized.cuh).
// Run:    ./build/bin/matmul_ladder --rung=3
#pragma once
#include "common.cuh"
#include "common/check.h"

namespace rung3 {

constexpr int kBM = 128, kBN = 128, kBK = 8, kTM = 8, kTN = 8;
constexpr int kThreads = (kBM / kTM) * (kBN / kTN);  // 256

// kMinBlocks: the blocks per SM that ptxas must leave registers for (__launch_bounds__'s second number). Rung 3
// passes 0, which asks for nothing, as `__launch_bounds__(kThreads)` alone does: an explicit 1 is a request of its own
// and ptxas then allocates differently. kernels/control.cuh passes 2, rung 4's occupancy, and changes nothing else.
template <int kMinBlocks>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    sgemmRegTile2D(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B,
                   float* __restrict__ C) {
    __shared__ float As[kBM][kBK];
    __shared__ float Bs[kBK][kBN];
    const int t = threadIdx.x, tx = t % (kBN / kTN), ty = t / (kBN / kTN);
    const int m0 = blockIdx.y * kBM, n0 = blockIdx.x * kBN;
    float acc[kTM][kTN] = {};
    // EXERCISE 1 BEGIN: accumulate this thread's 8x8 block of C in acc: stage 128x8 of A and 8x128 of B per k step, then 64 FMAs per k
    // HINT: each of the 256 threads loads 4 elements of each tile; outside the matrices (row >= M, column >= K or N) load 0
    // HINT: __syncthreads() after the loads and again after the FMAs; per k read 8 values of A and 8 of B into registers
    for (int k0 = 0; k0 < K; k0 += kBK) {
#pragma unroll
        for (int i = 0; i < kBM * kBK / kThreads; ++i) {  // 4 elements of each tile per thread
            const int e = t + i * kThreads;
            const int ar = e / kBK, ac = e % kBK, br = e / kBN, bc = e % kBN;
            As[ar][ac] = (m0 + ar < M && k0 + ac < K) ? A[size_t(m0 + ar) * K + k0 + ac] : 0.0f;
            Bs[br][bc] = (k0 + br < K && n0 + bc < N) ? B[size_t(k0 + br) * N + n0 + bc] : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < kBK; ++k) {
            float a[kTM], b[kTN];
#pragma unroll
            for (int i = 0; i < kTM; ++i) a[i] = As[ty * kTM + i][k];
#pragma unroll
            for (int j = 0; j < kTN; ++j) b[j] = Bs[k][tx * kTN + j];
#pragma unroll
            for (int i = 0; i < kTM; ++i)
#pragma unroll
                for (int j = 0; j < kTN; ++j) acc[i][j] += a[i] * b[j];
        }
        __syncthreads();
    }
    // EXERCISE 1 END
#pragma unroll
    for (int i = 0; i < kTM; ++i)
#pragma unroll
        for (int j = 0; j < kTN; ++j) {
            const int r = m0 + ty * kTM + i, c = n0 + tx * kTN + j;
            if (r < M && c < N) C[size_t(r) * N + c] = acc[i][j];
        }
}

inline void launch(const Gemm& g) {
    sgemmRegTile2D<0><<<dim3(blocks(g.N, kBN), blocks(g.M, kBM)), kThreads>>>(g.M, g.N, g.K, g.A, g.B, g.C);
    CUDA_CHECK_LAUNCH();
}

}  // namespace rung3
