// Lesson 20 of the course (the tensor-core GEMM ladder), rung 1 of 11: WMMA straight from global memory.
//
// Before: lesson 13 ended its FP32 ladder near cuBLAS SGEMM with FFMA only.
// Here:   the tensor cores through the portable C++ API (nvcuda::wmma). One warp owns one
//         16 x 16 tile of C; for every 16-wide step of K it loads a 16 x 16 fragment of A and
//         one of B straight from global memory and issues one 16 x 16 x 16 matrix multiply-
//         accumulate (several HMMA instructions in SASS). Four warps per block, 32 x 32.
// Lacks:  reuse. Every fragment is fetched from L2/DRAM by the one warp that uses it: each
//         element of A is read N/16 times, each of B M/16 times. The tensor cores wait on loads.
// Next:   rung 2 stages 128 x 32 and 32 x 128 tiles in shared memory for eight warps
//         (diff kernels/1_wmma_naive.cuh kernels/2_wmma_smem.cuh).
// Run:    ./build/bin/tensor_core_gemm --rung=1
// Shapes: M, N, K multiples of 16 (a fragment never crosses the matrix edge).
#pragma once
#include <mma.h>

#include "common.cuh"
#include "common/check.h"

namespace rung1 {

constexpr int kWarpsM = 2, kWarpsN = 2;  // warps per block: a 32 x 32 block of C

__global__ void __launch_bounds__(32 * kWarpsM * kWarpsN)
    wmmaNaive(const bf16* A, const bf16* B, float* C, int M, int N, int K) {
#if defined(PTX_SM80)
    using namespace nvcuda;
    const int warp = threadIdx.x / 32;
    const int row = (blockIdx.y * kWarpsM + warp / kWarpsN) * 16;  // this warp's 16 x 16 tile of C
    const int col = (blockIdx.x * kWarpsN + warp % kWarpsN) * 16;
    if (row >= M || col >= N) return;  // whole warps only: WMMA calls are warp-collective

    wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major> b;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;
    wmma::fill_fragment(c, 0.0f);
    for (int k = 0; k < K; k += 16) {
        wmma::load_matrix_sync(a, A + size_t(row) * K + k, K);  // 16 x 16 of A, leading dimension K
        wmma::load_matrix_sync(b, B + size_t(k) * N + col, N);  // 16 x 16 of B, leading dimension N
        wmma::mma_sync(c, a, b, c);
    }
    wmma::store_matrix_sync(C + size_t(row) * N + col, c, N, wmma::mem_row_major);
#else
    __trap();  // built for a GPU without bf16 tensor cores: main.cu skips this rung there
#endif
}

inline void launch(const Gemm& g) {
    const dim3 block(32 * kWarpsM * kWarpsN);
    const dim3 grid((g.N + 16 * kWarpsN - 1) / (16 * kWarpsN), (g.M + 16 * kWarpsM - 1) / (16 * kWarpsM));
    wmmaNaive<<<grid, block>>>(g.A, g.B, g.C, g.M, g.N, g.K);
    CUDA_CHECK_LAUNCH();
}

}  // namespace rung1
