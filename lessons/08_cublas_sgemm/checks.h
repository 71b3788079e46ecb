// Lesson 08 of the course (cuBLAS SGEMM): the flag and size checks before any CUDA call, what the
// original text's call returns (sampled rows against A*B and B*A), and what a sampled-row check
// can miss. Before: main.cu runs the products. Next: the report (summary.cuh).
// Run: ./build/bin/cublas_sgemm [--quick]   (README.md is the handout)
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "common/flags.h"
#include "common/memory.h"
#include "common/report.h"
#include "verify/gemm.h"

// The flags that set the sizes, named where a memory check fails.
constexpr const char* kSizeFlags = "--square/--m/--n/--k/--bench";

// Bad flags and sizes exit 2 before any CUDA call. Returns the device bytes the largest part needs.
inline uint64_t require_sizes(int64_t square, int64_t m, int64_t n, int64_t k, int64_t bench, int64_t check_rows,
                              double alpha) {
    if (alpha == 0.0) lesson::bad_input("--alpha=0 makes C zero, which checks nothing; allowed: -100 to 100, not 0");
    if (check_rows > std::min(square, bench))
        lesson::bad_input("--check-rows=" + std::to_string(check_rows) +
                          " exceeds the rows of --square=" + std::to_string(square) +
                          " or --bench=" + std::to_string(bench) + "; allowed: 1 to min(--square, --bench)");
    const double S = double(square), B = double(bench), f = sizeof(float), d = sizeof(double);
    const double host_bytes = std::max(
        {S * S * (4 * f + d), (m * k + k * n + m * n) * f + m * n * d, B * B * 3 * f + check_rows * B * (f + d)});
    lesson::require_host_memory(uint64_t(host_bytes), "pageable", kSizeFlags);
    return uint64_t(std::max({3 * S * S, double(m * k + k * n + m * n), 3 * B * B}) * f);
}

// What the original text's call returned for the square product (h_text), against A*B and against
// B*A on `check_rows` random rows: information, not a check.
inline void report_text_call(lesson::Report& report, const float* h_A, const float* h_B, const float* h_text, int M,
                             int N, int K, const std::string& shape, int64_t check_rows, uint64_t seed) {
    const std::vector<int64_t> rows = verify::sample_rows(M, check_rows, seed);
    const verify::GemmRows ab = verify::gemm_reference_rows(h_A, h_B, N, K, rows);
    const verify::GemmRows ba = verify::gemm_reference_rows(h_B, h_A, N, K, rows);
    const double vs_ab = ab.check_in(h_text, 1e-4, "").rel_l2;
    const double vs_ba = ba.check_in(h_text, 1e-4, "").rel_l2;
    report.metric("text's call " + shape + ": rel-L2 vs A*B", vs_ab, "");
    report.metric("text's call " + shape + ": rel-L2 vs B*A", vs_ba, "");
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "the original text's call on %s returns B*A (rel-L2 %.1e), not A*B (rel-L2 %.2f); %lld rows compared",
                  shape.c_str(), vs_ba, vs_ab, (long long)check_rows);
    report.note(buf);
}

// The chance that a random sample of `sampled` distinct rows of `rows` misses every
// row of a band of `band` consecutive rows (a fault confined to one tile band):
// C(rows - band, sampled) / C(rows, sampled).
static double miss_probability(int64_t rows, int64_t sampled, int64_t band) {
    if (band >= rows) return 0.0;
    double p = 1.0;
    for (int64_t i = 0; i < sampled && p > 0; ++i)
        p *= double(std::max<int64_t>(rows - band - i, 0)) / double(rows - i);
    return p;
}
