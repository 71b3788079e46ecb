// CPU tests of verify/gemm.h: sampled GEMM rows against a double reference (lessons 06, 08, 13).
#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <vector>
#include "catch_shim.hpp"
#include "verify/gemm.h"
#include "verify/matmul.h"
#include "verify/random.h"

TEST_CASE("gemm rows: sample_rows gives distinct ascending rows, deterministic", "[gemm]") {
    for (bool edges : {false, true}) {
        const std::vector<int64_t> r = verify::sample_rows(1000, 64, 7, edges);
        REQUIRE(r.size() == 64);
        for (size_t i = 1; i < r.size(); ++i) CHECK(r[i - 1] < r[i]);
        CHECK(r.front() >= 0);
        CHECK(r.back() < 1000);
        CHECK(verify::sample_rows(1000, 64, 7, edges) == r);
        CHECK(verify::sample_rows(1000, 64, 8, edges) != r);
    }
}

TEST_CASE("gemm rows: edges puts rows 0 and M-1 in the sample", "[gemm]") {
    for (uint64_t seed = 0; seed < 20; ++seed) {
        const std::vector<int64_t> r = verify::sample_rows(4096, 16, seed, true);
        REQUIRE(r.size() == 16);
        CHECK(r.front() == 0);
        CHECK(r.back() == 4095);
    }
    CHECK(verify::sample_rows(5, 2, 3, true) == std::vector<int64_t>{0, 4});
}

TEST_CASE("gemm rows: all rows when the count reaches M, none for 0", "[gemm]") {
    CHECK(verify::sample_rows(5, 5, 1) == std::vector<int64_t>{0, 1, 2, 3, 4});
    CHECK(verify::sample_rows(3, 100, 1, true) == std::vector<int64_t>{0, 1, 2});
    CHECK(verify::sample_rows(10, 0, 1).empty());
    CHECK(verify::sample_rows(1, 1, 1, true) == std::vector<int64_t>{0});
}

TEST_CASE("gemm rows: the reference rows are those of the full product", "[gemm]") {
    const int64_t M = 37, N = 23, K = 51;  // non-square, odd sizes
    std::vector<float> A(M * K), B(K * N);
    verify::fill_uniform(A.data(), A.size(), 31);
    verify::fill_uniform(B.data(), B.size(), 32);
    std::vector<double> full(M * N);
    verify::matmul_reference(A.data(), B.data(), full.data(), M, N, K);
    const verify::GemmRows g = verify::gemm_reference_rows(A.data(), B.data(), N, K, {0, 5, 36});
    REQUIRE(g.ref.size() == size_t(3 * N));
    for (size_t r = 0; r < g.rows.size(); ++r)
        for (int64_t j = 0; j < N; ++j) CHECK(g.ref[r * N + j] == full[g.rows[r] * N + j]);
}

TEST_CASE("gemm rows: check passes a correct C and fails a wrong element or NaN", "[gemm]") {
    const int64_t M = 40, N = 17, K = 29;
    std::vector<float> A(M * K), B(K * N);
    verify::fill_uniform(A.data(), A.size(), 41);
    verify::fill_uniform(B.data(), B.size(), 42);
    std::vector<double> full(M * N);
    verify::matmul_reference(A.data(), B.data(), full.data(), M, N, K);
    std::vector<float> C(full.begin(), full.end());  // what a correct fp32 GEMM returns, rounded
    const verify::GemmRows g =
        verify::gemm_reference_rows(A.data(), B.data(), N, K, verify::sample_rows(M, 8, 5, true));
    const lesson::Check ok = g.check_in(C.data(), 1e-4, "C");
    CHECK(ok.pass);
    CHECK(ok.checked == uint64_t(8 * N));

    std::vector<float> bad = C;
    bad[(M - 1) * N + 3] += 1.0f;  // row M-1 is always sampled
    const lesson::Check wrong = g.check_in(bad.data(), 1e-4, "C");
    CHECK_FALSE(wrong.pass);
    CHECK(wrong.first_bad == int64_t(7 * N + 3));  // index into the packed rows: the last one

    bad = C;
    bad[0] = std::numeric_limits<float>::quiet_NaN();
    CHECK_FALSE(g.check_in(bad.data(), 1e-4, "C").pass);

    const std::vector<float> packed = verify::gather_rows(C.data(), N, g.rows);
    CHECK(g.check(packed.data(), 1e-4, "C").pass);
}

TEST_CASE("gemm rows: many rows and few rows of wide products, bit for bit the full product's", "[gemm]") {
    const int64_t M = 90, N = 600, K = 33;  // 600 columns: three strips of 256 when fewer than 64 rows
    std::vector<float> A(M * K), B(K * N);
    verify::fill_uniform(A.data(), A.size(), 51);
    verify::fill_uniform(B.data(), B.size(), 52);
    std::vector<double> full(M * N);
    verify::matmul_reference(A.data(), B.data(), full.data(), M, N, K);
    for (int64_t want : {int64_t(10), int64_t(70), M}) {
        INFO("rows = " << want);
        const verify::GemmRows g =
            verify::gemm_reference_rows(A.data(), B.data(), N, K, verify::sample_rows(M, want, 9));
        REQUIRE(g.ref.size() == g.rows.size() * size_t(N));
        uint64_t differ = 0;
        for (size_t r = 0; r < g.rows.size(); ++r)
            for (int64_t j = 0; j < N; ++j) differ += g.ref[r * N + j] != full[g.rows[r] * N + j];
        CHECK(differ == 0);
    }
    CHECK(verify::gemm_reference_rows(A.data(), B.data(), N, K, {}).ref.empty());
}
