// Lesson 20 of the course (the tensor-core GEMM ladder), rung 2 of 11: WMMA with shared-memory tiles.
//
// Before: rung 1 loaded every fragment from global memory for one warp's use.
// Here:   a block of eight warps computes a 128 x 128 tile of C. For each 32-wide step of K
//         the block copies a 128 x 32 tile of A and a 32 x 128 tile of B to shared memory
//         (16-byte loads, coalesced), then each warp (a 32 x 64 piece of C: 2 x 4 fragments)
//         loads its fragments from shared memory. Each element fetched from global memory now
//         serves 128 columns (A) or 128 rows (B) of C instead of 16. Rows are padded by 8
//         elements (16 bytes) so that fragment loads do not all hit the same banks.
// Lacks:  overlap and register reuse: loads go through registers and wait at __syncthreads
//         while the tensor cores idle; load_matrix_sync hides which shared-memory words each
//         lane reads, so the layout cannot be tuned for it.
// Next:   rung 3 drops WMMA for PTX mma.sync + ldmatrix, whose layouts the code controls
//         (diff kernels/2_wmma_smem.cuh kernels/3_mma_sync.cuh).
// Run:    ./build/bin/tensor_core_gemm --rung=2
// Shapes: M, N, K multiples of 16: tiles past the edge load zeros, fragments past it are not stored.
#pragma once
#include <mma.h>

#include "common.cuh"
#include "common/check.h"

namespace rung2 {

constexpr int kBM = 128, kBN = 128, kBK = 32;  // block tile
constexpr int kWM = 32, kWN = 64;              // warp tile: 2 x 4 fragments of 16 x 16
constexpr int kWarps = (kBM / kWM) * (kBN / kWN);
constexpr int kThreads = 32 * kWarps;  // 256
// Exercise 2 of the handout: set kPad to 0, rerun with ncu and read l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum
constexpr int kPad = 8;  // bf16 elements of padding per shared-memory row (16 bytes)

__global__ void __launch_bounds__(kThreads) wmmaSmem(const bf16* A, const bf16* B, float* C, int M, int N, int K) {
#if defined(PTX_SM80)
    using namespace nvcuda;
    // WMMA wants 32-byte aligned fragment pointers: rows of 40 and 136 elements (80 and 272
    // bytes) keep every 16-row, 16-column fragment start on a multiple of 32 bytes.
    __shared__ __align__(128) bf16 As[kBM][kBK + kPad];
    __shared__ __align__(128) bf16 Bs[kBK][kBN + kPad];
    const int warp = threadIdx.x / 32;
    const int wm = (warp / (kBN / kWN)) * kWM, wn = (warp % (kBN / kWN)) * kWN;  // warp's corner in the tile
    const int m0 = blockIdx.y * kBM, n0 = blockIdx.x * kBN;

    wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> a[kWM / 16];
    wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major> b[kWN / 16];
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> c[kWM / 16][kWN / 16];
#pragma unroll
    for (int i = 0; i < kWM / 16; ++i)
#pragma unroll
        for (int j = 0; j < kWN / 16; ++j) wmma::fill_fragment(c[i][j], 0.0f);

    const uint4 zero = make_uint4(0, 0, 0, 0);
    for (int k0 = 0; k0 < K; k0 += kBK) {
        // EXERCISE 1 BEGIN: stage the 128 x 32 tile of A at (m0, k0) in As and the 32 x 128 tile of B at (k0, n0) in Bs
        // HINT: 16-byte chunks (uint4, 8 bf16): A has 128 x 4 of them, B 32 x 16; 256 threads take 2 of each
        // HINT: a chunk past the edge of its matrix (rows or columns) is stored as zeros; K % 16 == 0, so a chunk is wholly in or out
        // A tile: 128 rows x 4 chunks of 8 elements (16 bytes) = 512 chunks, 2 per thread.
#pragma unroll
        for (int i = 0; i < kBM * kBK / 8 / kThreads; ++i) {
            const int id = threadIdx.x + i * kThreads, r = id / (kBK / 8), c8 = (id % (kBK / 8)) * 8;
            const bool in = m0 + r < M && k0 + c8 < K;  // K % 16 == 0: a chunk is wholly in or out
            *reinterpret_cast<uint4*>(&As[r][c8]) =
                in ? *reinterpret_cast<const uint4*>(A + size_t(m0 + r) * K + k0 + c8) : zero;
        }
        // B tile: 32 rows x 16 chunks = 512 chunks, 2 per thread.
#pragma unroll
        for (int i = 0; i < kBK * kBN / 8 / kThreads; ++i) {
            const int id = threadIdx.x + i * kThreads, r = id / (kBN / 8), c8 = (id % (kBN / 8)) * 8;
            const bool in = k0 + r < K && n0 + c8 < N;
            *reinterpret_cast<uint4*>(&Bs[r][c8]) =
                in ? *reinterpret_cast<const uint4*>(B + size_t(k0 + r) * N + n0 + c8) : zero;
        }
        // EXERCISE 1 END
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < kBK; kk += 16) {
#pragma unroll
            for (int i = 0; i < kWM / 16; ++i) wmma::load_matrix_sync(a[i], &As[wm + 16 * i][kk], kBK + kPad);
#pragma unroll
            for (int j = 0; j < kWN / 16; ++j) wmma::load_matrix_sync(b[j], &Bs[kk][wn + 16 * j], kBN + kPad);
#pragma unroll
            for (int i = 0; i < kWM / 16; ++i)
#pragma unroll
                for (int j = 0; j < kWN / 16; ++j) wmma::mma_sync(c[i][j], a[i], b[j], c[i][j]);
        }
        __syncthreads();  // the next tile overwrites As, Bs
    }
#pragma unroll
    for (int i = 0; i < kWM / 16; ++i)
#pragma unroll
        for (int j = 0; j < kWN / 16; ++j) {
            const int row = m0 + wm + 16 * i, col = n0 + wn + 16 * j;
            if (row < M && col < N) wmma::store_matrix_sync(C + size_t(row) * N + col, c[i][j], N, wmma::mem_row_major);
        }
#else
    __trap();
#endif
}

inline void launch(const Gemm& g) {
    const dim3 grid((g.N + kBN - 1) / kBN, (g.M + kBM - 1) / kBM);
    wmmaSmem<<<grid, kThreads>>>(g.A, g.B, g.C, g.M, g.N, g.K);
    CUDA_CHECK_LAUNCH();
}

}  // namespace rung2
