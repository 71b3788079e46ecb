// Lesson 21 of the course (flash attention), rung 4: the standard attention, cuBLAS + softmax + cuBLAS.
//
// Before: rung 3, a softmax that moves its row once in and once out, like a copy.
// Here:   attention as two GEMMs and a softmax between them: S = scale * Q K^T for every head in
//         one strided-batched cuBLAS call (fp32 scores), rung 3's softmax writes P in bf16, and
//         O = P V in a second strided-batched call. The heads x N x N scores S and P go through
//         device memory (g_S, g_P: checks.cuh and timed.cuh allocate them for each problem).
// Lacks:  the scores: heads x N^2 x (4 + 2) bytes written and read back, far more than Q, K, V
//         and O, and beyond the GPU's memory for long sequences.
// Next:   rung 5 fuses the three steps, the scores never leaving the block
//         (kernels/5_fused_scalar.cuh).
// Run:    ./build/bin/flash_attention --rung=4
#pragma once
#include <cublas_v2.h>

#include "3_softmax_block.cuh"
#include "attention.cuh"
#include "common/check.h"
#include "common/needs.h"

static cublasHandle_t g_cublas;
static bool g_cublas_bf16 = false;  // cuBLAS's bf16 GEMM is used on this GPU (cc 8.0 and up)
static float* g_S = nullptr;        // heads x N x N fp32 scores
static bf16* g_P = nullptr;         // heads x N x N bf16 probabilities

// cuBLAS with bf16 inputs: rung 4 and the GEMM yardstick need it (cc 8.0, bf16 tensor cores).
static lesson::Needs cublas_bf16_needs() {
    lesson::Needs n;
    n.cc = 80;
    n.cc_why = "cuBLAS bf16 GEMM";
    return n;
}

// S = scale * Q K^T for every head in one strided-batched call. cuBLAS is column-major: row-major
// S (N x N) is the column-major S^T = K Q^T, and a row-major N x d matrix is a column-major d x N one,
// so K goes first, transposed (OP_T, lda = d), then Q as it is (ldb = d).
static void scores_gemm(const Attention& a) {
    const float zero = 0.f;
    const long long nd = (long long)a.N * a.d, nn = (long long)a.N * a.N;
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(g_cublas, CUBLAS_OP_T, CUBLAS_OP_N, a.N, a.N, a.d, &a.scale, a.K,
                                            CUDA_R_16BF, a.d, nd, a.Q, CUDA_R_16BF, a.d, nd, &zero, g_S, CUDA_R_32F,
                                            a.N, nn, int(a.heads), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}
// The same S without cuBLAS, one thread per score in fp32: the softmax rungs' input where cuBLAS's
// bf16 GEMM is not used (cc below 8.0, where rung 4 is skipped). Simple and slow; never timed.
__global__ void scoresDirect(Attention a, float* S) {
    const size_t n = size_t(a.N), total = size_t(a.heads) * n * n;
    for (size_t x = size_t(blockIdx.x) * blockDim.x + threadIdx.x; x < total; x += size_t(gridDim.x) * blockDim.x) {
        const size_t h = x / (n * n), i = x / n % n, j = x % n;  // S[h][i][j] = scale * Q[h][i] . K[h][j]
        const bf16 *q = a.Q + (h * n + i) * a.d, *k = a.K + (h * n + j) * a.d;
        float dot = 0.f;
        for (int c = 0; c < a.d; ++c) dot += __bfloat162float(q[c]) * __bfloat162float(k[c]);
        S[x] = dot * a.scale;
    }
}
static void scores(const Attention& a) {
    if (g_cublas_bf16) {
        scores_gemm(a);
    } else {
        scoresDirect<<<1024, 256>>>(a, g_S);
        CUDA_CHECK_LAUNCH();
    }
}
static void standard_attention(const Attention& a) {
    scores_gemm(a);
    rung3::launch(Softmax{g_S, g_P, a.heads * a.N, a.N, a.causal});
    // O = P V: column-major O^T (d x N) = V^T (d x N, ld d) * P^T (N x N, ld N); bf16 out, fp32 accumulate.
    const float one = 1.f, zero = 0.f;
    const long long nd = (long long)a.N * a.d, nn = (long long)a.N * a.N;
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(g_cublas, CUBLAS_OP_N, CUBLAS_OP_N, a.d, a.N, a.N, &one, a.V, CUDA_R_16BF,
                                            a.d, nd, g_P, CUDA_R_16BF, a.N, nn, &zero, a.O, CUDA_R_16BF, a.d, nd,
                                            int(a.heads), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}
