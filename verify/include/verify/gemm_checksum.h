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
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>
#include "verify/parallel.h"

namespace verify {

// A is M x K, B is K x N, both row-major. Returns the sum of the elements of A * B.
// The column sums of A and the row sums of B are computed in blocks of k on all
// host cores, each sum in the same order as on one thread (i, resp. j, upwards);
// the K products are then added up here, k upwards: the same bits for any thread count.
inline double matmul_sum_reference(const float* A, const float* B, int64_t M, int64_t N, int64_t K) {
    if (M <= 0 || N <= 0 || K <= 0) return 0.0;
    std::vector<double> colsum_a(static_cast<size_t>(K), 0.0), rowsum_b(static_cast<size_t>(K), 0.0);
    // At least 64 columns of A per block: 256 contiguous bytes of each row of A read at a time.
    const uint64_t grain = std::max<uint64_t>(64, items_per_block(uint64_t(M + N)));
    parallel_blocks(uint64_t(K), grain, [&](uint64_t k0, uint64_t k1) {
        for (int64_t i = 0; i < M; ++i)
            for (uint64_t k = k0; k < k1; ++k) colsum_a[k] += A[i * K + int64_t(k)];
        for (uint64_t k = k0; k < k1; ++k)
            for (int64_t j = 0; j < N; ++j) rowsum_b[k] += B[int64_t(k) * N + j];
    });
    double total = 0.0;
    for (int64_t k = 0; k < K; ++k) total += colsum_a[k] * rowsum_b[k];
    return total;
}

// The sum of n floats, accumulated in double (the GPU side of the same check).
// One running sum in index order, on one thread: lessons call it once per
// product (n^2 elements), and a fixed order gives the same bits on every host.
inline double sum_of(const float* x, uint64_t n) {
    double s = 0.0;
    for (uint64_t i = 0; i < n; ++i) s += x[i];
    return s;
}

}  // namespace verify
