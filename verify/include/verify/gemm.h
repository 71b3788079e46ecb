// verify/gemm.h - checks a GEMM on a sample of its rows: rows of C = A * B (row-major) against
// a double-precision CPU reference of the same rows.
//
// A product too large to recompute on the CPU (O(M N K)) is checked on whole rows: every
// element of each sampled row, so a wrong column, a wrong k range or a missing edge tile shows
// in any row it touches. A fault confined to rows the sample misses escapes; lessons say how
// many rows they checked.
//
//   std::vector<int64_t> rows = verify::sample_rows(M, 16, seed, true);  // 0, M-1 and 14 random
//   verify::GemmRows ref = verify::gemm_reference_rows(h_A, h_B, N, K, rows);
//   report.check(ref.check_in(h_C, 1e-4, "C vs CPU, 16 rows"));    // h_C: the whole M x N C
#pragma once
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "common/report.h"
#include "verify/compare.h"
#include "verify/matmul.h"

namespace verify {

// `count` distinct rows of [0, M), ascending, chosen from the seed; all M rows when count >= M.
// edges = true: rows 0 and M-1 (where tiles are cut short) are always among them, the rest is
// random; false: a uniform random sample (every row equally likely).
inline std::vector<int64_t> sample_rows(int64_t M, int64_t count, uint64_t seed, bool edges = false) {
    std::vector<int64_t> all(size_t(std::max<int64_t>(M, 0)));
    std::iota(all.begin(), all.end(), int64_t(0));
    if (count >= M) return all;
    if (count <= 0) return {};
    int64_t first = 0;  // all[0, first) are taken; shuffle the rest into place
    if (edges && count >= 2) {
        std::swap(all[1], all[size_t(M - 1)]);  // rows 0 and M-1 first
        first = 2;
    }
    std::mt19937_64 rng(seed);
    for (int64_t i = first; i < count; ++i)
        std::swap(all[size_t(i)], all[size_t(i + int64_t(rng() % uint64_t(M - i)))]);
    all.resize(size_t(count));
    std::sort(all.begin(), all.end());
    return all;
}

// Rows `rows` of a row-major result (.. x N), packed one after another.
inline std::vector<float> gather_rows(const float* C, int64_t N, const std::vector<int64_t>& rows) {
    std::vector<float> out(rows.size() * size_t(N));
    for (size_t r = 0; r < rows.size(); ++r)
        std::copy(C + rows[r] * N, C + (rows[r] + 1) * N, out.begin() + int64_t(r) * N);
    return out;
}

// The sampled rows of C = A * B and their double-precision reference.
struct GemmRows {
    int64_t N = 0;
    std::vector<int64_t> rows;  // ascending
    std::vector<double> ref;    // rows.size() x N: row rows[i] of A * B at ref[i * N]

    // got: the sampled rows of the GPU's C, packed in the order of `rows`. Every element is
    // compared (verify::compare: rel-L2 and elementwise, NaN fails).
    lesson::Check check(const float* got, double tol, const std::string& what) const {
        return compare(got, ref.data(), ref.size(), tol, what);
    }
    // C: the whole row-major result (M x N) on the host; only the sampled rows are compared.
    lesson::Check check_in(const float* C, double tol, const std::string& what) const {
        const std::vector<float> got = gather_rows(C, N, rows);
        return check(got.data(), tol, what);
    }
};

// A is .. x K, B is K x N, both row-major: the reference of rows `rows` of A * B, in double,
// each row as a 1 x K by K x N product (verify/matmul.h's loop), all rows in one parallel
// loop over all host cores (for_each_row_strip: rows, or strips of rows when they are few).
inline GemmRows gemm_reference_rows(const float* A, const float* B, int64_t N, int64_t K, std::vector<int64_t> rows) {
    GemmRows g;
    g.N = N;
    g.rows = std::move(rows);
    g.ref.resize(g.rows.size() * size_t(N));
    const int64_t* row = g.rows.data();
    double* ref = g.ref.data();
    for_each_row_strip(int64_t(g.rows.size()), N, K, [=](int64_t r, int64_t j0, int64_t j1) {
        matmul_reference_tile(A + row[r] * K, B, ref + r * N, N, K, 0, 1, j0, j1);
    });
    return g;
}

}  // namespace verify
