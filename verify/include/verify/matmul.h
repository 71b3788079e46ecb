// verify/matmul.h - CPU reference for C = A * B, row-major, accumulated in double.
#pragma once
#include <algorithm>
#include <cstdint>
#include "verify/parallel.h"

namespace verify {

// Columns [j0, j1) of rows [i0, i1) of C: the single-threaded loop. Every C[i][j]
// starts at 0 and adds A[i][k] * B[k][j] for k = 0, 1, ..., K-1 in that order,
// whatever the tile, so tiles on many threads give the same bits as one pass.
inline void matmul_reference_tile(const float* A, const float* B, double* C, int64_t N, int64_t K, int64_t i0,
                                  int64_t i1, int64_t j0, int64_t j1) {
    for (int64_t i = i0; i < i1; ++i) {
        double* c = C + i * N;
        for (int64_t j = j0; j < j1; ++j) c[j] = 0.0;
        for (int64_t k = 0; k < K; ++k) {  // i-k-j order: streams through B and C rows
            double a = A[i * K + k];
            const float* b = B + k * N;
            for (int64_t j = j0; j < j1; ++j) c[j] += a * static_cast<double>(b[j]);
        }
    }
}

// Calls tile(r, j0, j1) for columns [j0, j1) of every row r in [0, rows) of a C with N
// columns and inner dimension K, on all host cores. A unit of work is a row of C; with few
// rows (lessons check sampled rows), a strip of 256 columns of a row, so that one row still
// spreads over the cores. 256 floats of a row of B are 1 KiB, long enough to stream.
template <class Tile>
void for_each_row_strip(int64_t rows, int64_t N, int64_t K, const Tile& tile) {
    if (rows <= 0 || N <= 0) return;
    const int64_t strip = rows >= 64 ? N : std::min<int64_t>(N, 256);
    const int64_t strips = (N + strip - 1) / strip;
    parallel_blocks(uint64_t(rows * strips), items_per_block(uint64_t(strip) * uint64_t(K)),
                    [=](uint64_t begin, uint64_t end) {
                        for (int64_t u = int64_t(begin); u < int64_t(end); ++u) {
                            const int64_t r = u / strips, j0 = (u % strips) * strip;
                            tile(r, j0, std::min(N, j0 + strip));
                        }
                    });
}

// A is M x K, B is K x N, C is M x N, all row-major. Computes rows
// [row_begin, row_end) of C only (all rows by default), so large products can
// be checked on a sample of rows. Runs on all host cores.
inline void matmul_reference(const float* A, const float* B, double* C, int64_t M, int64_t N, int64_t K,
                             int64_t row_begin = 0, int64_t row_end = -1) {
    if (row_end < 0) row_end = M;
    for_each_row_strip(row_end - row_begin, N, K, [=](int64_t r, int64_t j0, int64_t j1) {
        matmul_reference_tile(A, B, C, N, K, row_begin + r, row_begin + r + 1, j0, j1);
    });
}

}  // namespace verify
