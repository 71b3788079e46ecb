// CPU tests of verify/fft.h: the FFT and complex GEMM references and lesson 10's checks (lessons 10 and 11).
#include <cmath>
#include <complex>
#include <cstdint>
#include <initializer_list>
#include <vector>
#include "catch_shim.hpp"
#include "verify/fft.h"
#include "verify/random.h"

using verify::cplx;

static std::vector<cplx> random_signal(uint64_t n, uint64_t seed) {
    std::vector<cplx> x(n);
    for (uint64_t i = 0; i < n; ++i)
        x[i] = cplx(verify::hash_uniform(seed, 2 * i), verify::hash_uniform(seed, 2 * i + 1));
    return x;
}

static double max_abs_diff(const std::vector<cplx>& a, const std::vector<cplx>& b) {
    double m = 0;
    for (size_t i = 0; i < a.size(); ++i) m = std::fmax(m, std::abs(a[i] - b[i]));
    return m;
}

TEST_CASE("fft: matches the direct DFT for powers of two and other sizes", "[fft]") {
    // 1..9 covers the trivial sizes, 12/15/17/100 the Bluestein path (17 is prime), 64/128 radix-2.
    for (uint64_t n : {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 15, 17, 64, 100, 128}) {
        for (int sign : {verify::kForward, verify::kInverse}) {
            std::vector<cplx> x = random_signal(n, n), want(n);
            verify::dft_direct(x.data(), want.data(), n, sign);
            verify::Fft1d plan(n);
            plan.run(x.data(), sign);
            INFO("n = " << n << ", sign = " << sign);
            CHECK(max_abs_diff(x, want) < 1e-10 * std::sqrt(double(n)) * 4);
        }
    }
}

TEST_CASE("fft: impulse transforms to a constant, constant to an impulse", "[fft]") {
    for (uint64_t n : {8, 10, 1000, 1024}) {
        verify::Fft1d plan(n);
        std::vector<cplx> x(n, 0.0);
        x[0] = 1.0;
        plan.run(x.data(), verify::kForward);
        for (uint64_t k = 0; k < n; ++k) CHECK(std::abs(x[k] - cplx(1.0)) < 1e-12);
        std::vector<cplx> c(n, cplx(2.0, -1.0));
        plan.run(c.data(), verify::kForward);
        CHECK(std::abs(c[0] - cplx(2.0 * n, -1.0 * n)) < 1e-9 * n);
        for (uint64_t k = 1; k < n; ++k) CHECK(std::abs(c[k]) < 1e-9 * n);
    }
}

TEST_CASE("fft: a single frequency lands in a single bin", "[fft]") {
    for (uint64_t n : {16, 1000}) {
        const uint64_t f = 3;
        std::vector<cplx> x(n);
        for (uint64_t j = 0; j < n; ++j) x[j] = verify::unit_root(verify::kInverse, f * j, n);  // exp(+2*pi*i*f*j/n)
        verify::Fft1d(n).run(x.data(), verify::kForward);
        for (uint64_t k = 0; k < n; ++k) {
            INFO("n = " << n << ", bin " << k);
            CHECK(std::abs(x[k] - cplx(k == f ? double(n) : 0.0)) < 1e-9 * n);
        }
        // A real cosine splits into bins f and n - f, n/2 each.
        std::vector<cplx> c(n);
        for (uint64_t j = 0; j < n; ++j) c[j] = std::cos(2.0 * M_PI * double(f * j) / double(n));
        verify::Fft1d(n).run(c.data(), verify::kForward);
        CHECK(std::abs(c[f] - cplx(n / 2.0)) < 1e-9 * n);
        CHECK(std::abs(c[n - f] - cplx(n / 2.0)) < 1e-9 * n);
        CHECK(std::abs(c[0]) < 1e-9 * n);
    }
}

TEST_CASE("fft: forward then inverse gives n * x", "[fft]") {
    for (uint64_t n : {1, 2, 32, 1000, 1021, 4096}) {
        std::vector<cplx> x = random_signal(n, 7 + n), y = x;
        verify::Fft1d plan(n);
        plan.run(y.data(), verify::kForward);
        plan.run(y.data(), verify::kInverse);
        for (auto& v : y) v /= double(n);
        INFO("n = " << n);
        CHECK(max_abs_diff(x, y) < 1e-12 * std::log2(double(n) + 1) * 8);
    }
}

// The 2D DFT of a rows x cols array straight from its definition.
static std::vector<cplx> dft2d_direct(const std::vector<cplx>& x, uint64_t rows, uint64_t cols) {
    std::vector<cplx> y(rows * cols);
    for (uint64_t u = 0; u < rows; ++u)
        for (uint64_t v = 0; v < cols; ++v) {
            cplx s = 0.0;
            for (uint64_t r = 0; r < rows; ++r)
                for (uint64_t c = 0; c < cols; ++c)
                    s += x[r * cols + c] * verify::unit_root(verify::kForward, u * r, rows) *
                         verify::unit_root(verify::kForward, v * c, cols);
            y[u * cols + v] = s;
        }
    return y;
}

TEST_CASE("fft2d: equals direct DFTs over rows then columns, and round-trips", "[fft]") {
    const uint64_t rows = 6, cols = 8;  // non-square, one size non-power-of-two
    const std::vector<cplx> x = random_signal(rows * cols, 99), want = dft2d_direct(x, rows, cols);
    std::vector<cplx> y = x;
    verify::fft2d(y.data(), rows, cols, verify::kForward);
    CHECK(max_abs_diff(y, want) < 1e-11);
    verify::fft2d(y.data(), rows, cols, verify::kInverse);
    for (auto& v : y) v /= double(rows * cols);
    CHECK(max_abs_diff(y, x) < 1e-12);

    // A 2D impulse at the origin transforms to all ones.
    std::vector<cplx> d(rows * cols, 0.0);
    d[0] = 1.0;
    verify::fft2d(d.data(), rows, cols, verify::kForward);
    for (auto& v : d) CHECK(std::abs(v - cplx(1.0)) < 1e-12);
}

TEST_CASE("complex matmul: known 2x2 answer and a random check against the definition", "[fft]") {
    // A = [[1+i, 2], [0, -i]], B = [[1, i], [1-i, 3]] -> A*B = [[3-i, 5+i], [-1-i, -3i]]
    const float A[] = {1, 1, 2, 0, 0, 0, 0, -1};
    const float B[] = {1, 0, 0, 1, 1, -1, 3, 0};
    cplx C[4];
    verify::complex_matmul_reference(A, B, C, 2, 2, 2);
    CHECK(C[0] == cplx(3, -1));
    CHECK(C[1] == cplx(5, 1));
    CHECK(C[2] == cplx(-1, -1));
    CHECK(C[3] == cplx(0, -3));

    const int64_t M = 7, N = 5, K = 9;  // M not a multiple of the 4-row blocking
    std::vector<float> a(2 * M * K), b(2 * K * N);
    verify::fill_uniform(a.data(), a.size(), 3);
    verify::fill_uniform(b.data(), b.size(), 4);
    std::vector<cplx> c(M * N);
    verify::complex_matmul_reference(a.data(), b.data(), c.data(), M, N, K);
    for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
            cplx s = 0.0;
            for (int64_t k = 0; k < K; ++k)
                s +=
                    cplx(a[2 * (i * K + k)], a[2 * (i * K + k) + 1]) * cplx(b[2 * (k * N + j)], b[2 * (k * N + j) + 1]);
            CHECK(std::abs(c[i * N + j] - s) < 1e-12);
        }
}

TEST_CASE("complex vecmat: equals one row of the matmul", "[fft]") {
    const int64_t M = 5, N = 6, K = 4;
    std::vector<float> a(2 * M * K), b(2 * K * N);
    verify::fill_uniform(a.data(), a.size(), 5);
    verify::fill_uniform(b.data(), b.size(), 6);
    std::vector<cplx> c(M * N), row(N);
    verify::complex_matmul_reference(a.data(), b.data(), c.data(), M, N, K);
    std::vector<cplx> a3 = verify::to_cplx(a.data() + 2 * 3 * K, K);  // row 3 of A
    verify::complex_vecmat_reference(a3.data(), b.data(), row.data(), N, K);
    for (int64_t j = 0; j < N; ++j) CHECK(std::abs(row[j] - c[3 * N + j]) < 1e-12);
}

TEST_CASE("gemm_fft2d_reference: FFT2(T X) from the definitions", "[fft]") {
    for (int64_t n : {1, 2, 6, 8}) {
        std::vector<float> t(2 * n * n), x(2 * n * n);
        verify::fill_uniform(t.data(), t.size(), 7);
        verify::fill_uniform(x.data(), x.size(), 8);
        std::vector<cplx> y(n * n, 0.0);  // T X by the definition
        for (int64_t i = 0; i < n; ++i)
            for (int64_t j = 0; j < n; ++j)
                for (int64_t k = 0; k < n; ++k)
                    y[i * n + j] += cplx(t[2 * (i * n + k)], t[2 * (i * n + k) + 1]) *
                                    cplx(x[2 * (k * n + j)], x[2 * (k * n + j) + 1]);
        INFO("n = " << n);
        CHECK(max_abs_diff(verify::gemm_fft2d_reference(t.data(), x.data(), n), dft2d_direct(y, n, n)) < 1e-11);
    }
}

TEST_CASE("sample_spectra: the rows and sums of correct spectra match, a wrong element does not", "[fft]") {
    const int64_t n = 12, batch = 3, elems = n * n;  // 12: the Bluestein path
    std::vector<float> t(2 * elems), x(2 * batch * elems), z(2 * batch * elems);
    verify::fill_uniform(t.data(), t.size(), 9);
    verify::fill_uniform(x.data(), x.size(), 10);
    for (int64_t b = 0; b < batch; ++b) {  // the right spectra, rounded to float as a GPU's would be
        const std::vector<cplx> ref = verify::gemm_fft2d_reference(t.data(), x.data() + 2 * b * elems, n);
        for (int64_t i = 0; i < elems; ++i) {
            z[2 * (b * elems + i)] = float(ref[i].real());
            z[2 * (b * elems + i) + 1] = float(ref[i].imag());
        }
    }
    const verify::SpectrumSamples s = verify::sample_spectra(t.data(), x.data(), z.data(), batch, n, 5);
    REQUIRE(s.rows_gpu.size() == size_t(4 * batch * n));
    REQUIRE(s.sums_gpu.size() == size_t(2 * batch));
    double rows_err = 0, sums_err = 0;
    for (size_t i = 0; i < s.rows_ref.size(); ++i)
        rows_err = std::fmax(rows_err, std::abs(cplx(s.rows_gpu[2 * i], s.rows_gpu[2 * i + 1]) - s.rows_ref[i]));
    for (size_t b = 0; b < s.sums_ref.size(); ++b)
        sums_err = std::fmax(sums_err, std::abs(cplx(s.sums_gpu[2 * b], s.sums_gpu[2 * b + 1]) - s.sums_ref[b]));
    CHECK(rows_err < 1e-4);
    CHECK(sums_err < 1e-3);
    z[2 * (2 * elems + 5)] += 1.0f;  // one element of image 2's row 0 off by 1: its sum and row 0 move
    const verify::SpectrumSamples w = verify::sample_spectra(t.data(), x.data(), z.data(), batch, n, 5);
    CHECK(std::abs(cplx(w.sums_gpu[4], w.sums_gpu[5]) - w.sums_ref[2]) > 0.5);
    CHECK(std::abs(cplx(w.rows_gpu[2 * (4 * n + 5)], w.rows_gpu[2 * (4 * n + 5) + 1]) - w.rows_ref[4 * n + 5]) > 0.5);
}

TEST_CASE("parallel_for: every index exactly once, any thread count", "[fft]") {
    for (int64_t threads : {0, 1, 3, 64}) {
        std::vector<int> hits(1000, 0);
        verify::parallel_for(
            1000, [&](int64_t i) { hits[i] += 1; }, threads);
        for (int h : hits) CHECK(h == 1);
    }
    int calls = 0;
    verify::parallel_for(0, [&](int64_t) { ++calls; });
    CHECK(calls == 0);
}
