// verify/gemm_checksum.h - an O(n^2) check for products too many to recompute
// at O(n^3): the sum of all elements of C = A * B, from the inputs alone.
//
//   sum_ij C[i][j] = sum_ij sum_k A[i][k] B[k][j] = sum_k (sum_i A[i][k]) * (sum_j B[k][j])
//
// i.e. the column sums of A dotted with the row sums of B, in double. It catches
// a missing, NaN, garbage or swapped (B * A) product, not a small error in one
// element, and not a transposed C (same sum): pair it with a sample of products
// compared element by element (verify/matmul.h).
#pragma once
#include <cstdint>
#include <vector>

namespace verify {

// A is M x K, B is K x N, both row-major. Returns the sum of the elements of A * B.
inline double matmul_sum_reference(const float* A, const float* B, int64_t M, int64_t N, int64_t K) {
    std::vector<double> colsum_a(static_cast<size_t>(K), 0.0);
    for (int64_t i = 0; i < M; ++i)
        for (int64_t k = 0; k < K; ++k) colsum_a[k] += A[i * K + k];
    double total = 0.0;
    for (int64_t k = 0; k < K; ++k) {
        double rowsum_b = 0.0;
        for (int64_t j = 0; j < N; ++j) rowsum_b += B[k * N + j];
        total += colsum_a[k] * rowsum_b;
    }
    return total;
}

// The sum of n floats, accumulated in double (the GPU side of the same check).
inline double sum_of(const float* x, uint64_t n) {
    double s = 0.0;
    for (uint64_t i = 0; i < n; ++i) s += x[i];
    return s;
}

}  // namespace verify
