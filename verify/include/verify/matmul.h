// verify/matmul.h - CPU reference for C = A * B, row-major, accumulated in double.
#pragma once
#include <cstdint>

namespace verify {

// A is M x K, B is K x N, C is M x N, all row-major. Computes rows
// [row_begin, row_end) of C only (all rows by default), so large products can
// be checked on a sample of rows.
inline void matmul_reference(const float* A, const float* B, double* C, int64_t M, int64_t N, int64_t K,
                             int64_t row_begin = 0, int64_t row_end = -1) {
    if (row_end < 0) row_end = M;
    for (int64_t i = row_begin; i < row_end; ++i) {
        double* c = C + i * N;
        for (int64_t j = 0; j < N; ++j) c[j] = 0.0;
        for (int64_t k = 0; k < K; ++k) {  // i-k-j order: streams through B and C rows
            double a = A[i * K + k];
            const float* b = B + k * N;
            for (int64_t j = 0; j < N; ++j) c[j] += a * static_cast<double>(b[j]);
        }
    }
}

}  // namespace verify
