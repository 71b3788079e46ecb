// CPU tests of verify/gemm_checksum.h: the O(n^2) checksum of a GEMM (lesson 09).
#include <cmath>
#include <cstdint>
#include <vector>
#include "catch_shim.hpp"
#include "verify/gemm_checksum.h"
#include "verify/matmul.h"
#include "verify/random.h"

TEST_CASE("gemm checksum: 2x3 * 3x2 known answer", "[gemm_checksum]") {
    // A = [1 2 3; 4 5 6], B = [1 0; 0 1; 1 1]: A*B = [4 5; 10 11], sum 30.
    float A[] = {1, 2, 3, 4, 5, 6};
    float B[] = {1, 0, 0, 1, 1, 1};
    CHECK(verify::matmul_sum_reference(A, B, 2, 2, 3) == 30.0);
    float C[] = {4, 5, 10, 11};
    CHECK(verify::sum_of(C, 4) == 30.0);
}

TEST_CASE("gemm checksum: equals the sum of the full reference product", "[gemm_checksum]") {
    const int64_t M = 37, N = 23, K = 51;  // non-square, odd sizes
    std::vector<float> A(M * K), B(K * N);
    verify::fill_uniform(A.data(), A.size(), 11);
    verify::fill_uniform(B.data(), B.size(), 12);
    std::vector<double> C(M * N);
    verify::matmul_reference(A.data(), B.data(), C.data(), M, N, K);
    double full = 0.0;
    for (double x : C) full += x;
    CHECK(std::fabs(verify::matmul_sum_reference(A.data(), B.data(), M, N, K) - full) <=
          1e-9 * (1.0 + std::fabs(full)));
}

TEST_CASE("gemm checksum: tells A*B from B*A", "[gemm_checksum]") {
    const int64_t n = 16;
    std::vector<float> A(n * n), B(n * n);
    verify::fill_uniform(A.data(), A.size(), 21);
    verify::fill_uniform(B.data(), B.size(), 22);
    double ab = verify::matmul_sum_reference(A.data(), B.data(), n, n, n);
    double ba = verify::matmul_sum_reference(B.data(), A.data(), n, n, n);
    CHECK(std::fabs(ab - ba) > 1e-3 * (std::fabs(ab) + std::fabs(ba)));
}

TEST_CASE("gemm checksum: sum_of accumulates in double", "[gemm_checksum]") {
    std::vector<float> x(1 << 20, 0.1f);  // a float accumulator drifts far from 104857.6
    double want = double(0.1f) * double(x.size());
    CHECK(std::fabs(verify::sum_of(x.data(), x.size()) - want) <= 1e-6 * want);
}
