// common/gemm.h - a row-major SGEMM through column-major cuBLAS (the operand swap, written once).
//
// cuBLAS is column-major; a row-major R x S array read column-major is the S x R matrix, its
// transpose. So row-major C (M x N) = A (M x K) * B (K x N) is asked for as the column-major
// C^T (N x M) = B^T (N x K) * A^T (K x M): B first, M and N swapped, each leading dimension the
// row length of its row-major array (B: N, A: K, C: N). Nothing is copied or transposed.
// Lesson 08 teaches this call and writes it out itself; lessons that use cuBLAS as a yardstick
// or as a building block call these helpers. The math mode (fp32 or TF32) is state of the handle: set it before.
#pragma once
#include <cublas_v2.h>

#include <cstddef>
#include <string>

#include "common/check.h"

namespace lesson {

// One GEMM's shape, C (M x N) = A (M x K) * B (K x N), and its arrays' element counts.
struct GemmShape {
    int M, N, K;
    std::string text() const { return std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K); }
    size_t a() const { return size_t(M) * K; }
    size_t b() const { return size_t(K) * N; }
    size_t c() const { return size_t(M) * N; }
};

// C = alpha * A * B + beta * C, all row-major: A is m x k, B is k x n, C is m x n (device pointers).
inline void sgemm_row_major(cublasHandle_t handle, int m, int n, int k, const float* A, const float* B, float* C,
                            float alpha = 1.0f, float beta = 0.0f) {
    CUBLAS_CHECK(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha, B, n, A, k, &beta, C, n));
}

// `count` row-major n x n products C_i = A_i * B_i, each array i a stride of n*n after the last:
// the same swap, batched. Lesson 09 teaches this call and writes it out itself.
inline void sgemm_strided_batched_row_major(cublasHandle_t handle, int n, const float* A, const float* B, float* C,
                                            int count) {
    const float alpha = 1.0f, beta = 0.0f;
    const long long stride = static_cast<long long>(n) * n;
    CUBLAS_CHECK(cublasSgemmStridedBatched(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, B, n, stride, A, n,
                                           stride, &beta, C, n, stride, count));
}

}  // namespace lesson
