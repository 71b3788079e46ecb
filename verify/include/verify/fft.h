// verify/fft.h - CPU references for FFT work, in double precision.
//
// Conventions (the same as cuFFT): forward = exp(-2*pi*i*j*k/n), inverse =
// exp(+2*pi*i*j*k/n), neither normalized, so forward then inverse gives n * x.
// 2D arrays are row-major (element (r, c) at r * cols + c). Complex inputs in
// float come interleaved (re, im, re, im, ...), which is how cuComplex,
// cufftComplex and std::complex<float> store them.
//
//   dft_direct      the O(n^2) definition: the reference of the references
//   Fft1d           a plan for one length: radix-2 for powers of two, Bluestein
//                   (a chirp-z convolution done with radix-2) for any other n
//   fft2d           rows, then columns
//   complex_matmul_reference   C = A * B for complex row-major matrices
//   complex_vecmat_reference   one row of such a product, v * B
//   gemm_fft2d_reference       FFT2(T X) for one image X (lesson 10's full check)
//   sample_spectra             two rows and the sum of FFT2(T X_b) for every image of a
//                              batch, each in O(n^2) (lesson 10's checks of every image)
//
// Each runs on all host cores over independent outputs (bins, rows, columns,
// row blocks; verify/parallel.h), every output computed by the same operations
// as on one thread. Called from inside verify::parallel_for (a batch of images
// on the cores), they run inline.
#pragma once
#include <algorithm>
#include <cmath>
#include <complex>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>
#include "verify/parallel.h"
#include "verify/random.h"

namespace verify {

using cplx = std::complex<double>;
constexpr int kForward = -1;  // sign of the exponent
constexpr int kInverse = +1;

inline bool is_pow2(uint64_t n) { return n != 0 && (n & (n - 1)) == 0; }

// exp(sign * 2*pi*i * num / den), with num reduced modulo den first so the
// angle stays small and accurate even for num in the billions.
inline cplx unit_root(int sign, uint64_t num, uint64_t den) {
    const double a = 2.0 * M_PI * static_cast<double>(num % den) / static_cast<double>(den);
    return cplx(std::cos(a), sign * std::sin(a));
}

// out[k] = sum_j in[j] * exp(sign * 2*pi*i * j*k / n). O(n^2); in != out. Blocks of bins k on all cores.
inline void dft_direct(const cplx* in, cplx* out, uint64_t n, int sign) {
    parallel_blocks(n, items_per_block(16 * n), [=](uint64_t k0, uint64_t k1) {  // a root costs a cos and a sin
        for (uint64_t k = k0; k < k1; ++k) {
            cplx s = 0.0;
            for (uint64_t j = 0; j < n; ++j) s += in[j] * unit_root(sign, j * k, n);
            out[k] = s;
        }
    });
}

// A plan for transforms of one length n (any n >= 1). run() is const, so one
// plan serves many threads at once.
class Fft1d {
public:
    explicit Fft1d(uint64_t n) : n_(n) {
        m_ = is_pow2(n) ? n : 1;
        if (!is_pow2(n)) {
            while (m_ < 2 * n - 1) m_ <<= 1;  // Bluestein: a linear convolution of length 2n-1 fits in m
        }
        // Forward twiddles of the radix-2 length m: exp(-2*pi*i*k/m), k < m/2.
        tw_.resize(m_ / 2);
        for (uint64_t k = 0; k < m_ / 2; ++k) tw_[k] = unit_root(kForward, k, m_);
        if (!is_pow2(n)) {
            // Forward chirp c_k = exp(-i*pi*k^2/n) = exp(-2*pi*i * (k^2 mod 2n) / (2n)).
            chirp_.resize(n);
            for (uint64_t k = 0; k < n; ++k) chirp_[k] = unit_root(kForward, (k * k) % (2 * n), 2 * n);
            // The convolution kernel b_j = conj(c_j) for j = -(n-1)..(n-1), wrapped into m, transformed once.
            kernel_.assign(m_, cplx(0.0));
            kernel_[0] = std::conj(chirp_[0]);
            for (uint64_t k = 1; k < n; ++k) kernel_[k] = kernel_[m_ - k] = std::conj(chirp_[k]);
            radix2(kernel_.data(), kForward);
        }
    }

    uint64_t size() const { return n_; }

    // In-place transform of x[0..n), unnormalized.
    void run(cplx* x, int sign) const {
        if (n_ <= 1) return;
        if (is_pow2(n_)) {
            radix2(x, sign);
            return;
        }
        // Bluestein: j*k = (j^2 + k^2 - (k-j)^2) / 2 turns the DFT into a convolution
        //   X_k = c_k * sum_j (x_j c_j) conj(c_(k-j)),  c_k = exp(sign*i*pi*k^2/n).
        // The inverse chirp is the conjugate of the forward one.
        auto chirp = [&](uint64_t k) { return sign == kForward ? chirp_[k] : std::conj(chirp_[k]); };
        std::vector<cplx> a(m_, cplx(0.0));
        for (uint64_t k = 0; k < n_; ++k) a[k] = x[k] * chirp(k);
        radix2(a.data(), kForward);
        if (sign == kForward) {
            for (uint64_t k = 0; k < m_; ++k) a[k] *= kernel_[k];
        } else {
            // The inverse kernel is conj(b): its transform is conj of the forward transform, index-reversed.
            for (uint64_t k = 0; k < m_; ++k) a[k] *= std::conj(kernel_[(m_ - k) % m_]);
        }
        radix2(a.data(), kInverse);
        const double scale = 1.0 / static_cast<double>(m_);
        for (uint64_t k = 0; k < n_; ++k) x[k] = a[k] * chirp(k) * scale;
    }

private:
    // Iterative radix-2 on length m_: bit-reversal permutation, then log2(m) butterfly passes.
    void radix2(cplx* x, int sign) const {
        const uint64_t m = m_;
        for (uint64_t i = 1, j = 0; i < m; ++i) {
            uint64_t bit = m >> 1;
            for (; j & bit; bit >>= 1) j ^= bit;
            j ^= bit;
            if (i < j) std::swap(x[i], x[j]);
        }
        for (uint64_t len = 2; len <= m; len <<= 1) {
            const uint64_t half = len / 2, step = m / len;
            for (uint64_t start = 0; start < m; start += len) {
                for (uint64_t k = 0; k < half; ++k) {
                    cplx w = tw_[k * step];
                    if (sign == kInverse) w = std::conj(w);
                    const cplx u = x[start + k];
                    const cplx t = w * x[start + k + half];
                    x[start + k] = u + t;
                    x[start + k + half] = u - t;
                }
            }
        }
    }

    uint64_t n_, m_;
    std::vector<cplx> tw_, chirp_, kernel_;
};

// About the work of one transform of length n, for sizing blocks of transforms.
inline uint64_t fft_work(uint64_t n) {
    uint64_t log2n = 1;
    while ((uint64_t(1) << log2n) < n) ++log2n;
    return 8 * n * log2n;
}

// Transforms each column of a rows x cols row-major array in place; blocks of
// columns on all cores, one plan shared (run() is const), a column buffer each.
inline void fft_columns(cplx* x, uint64_t rows, uint64_t cols, int sign) {
    const Fft1d plan(rows);
    parallel_blocks(cols, items_per_block(fft_work(rows)), [&plan, x, rows, cols, sign](uint64_t c0, uint64_t c1) {
        std::vector<cplx> column(rows);
        for (uint64_t c = c0; c < c1; ++c) {
            for (uint64_t r = 0; r < rows; ++r) column[r] = x[r * cols + c];
            plan.run(column.data(), sign);
            for (uint64_t r = 0; r < rows; ++r) x[r * cols + c] = column[r];
        }
    });
}

// Transforms each row of a rows x cols row-major array in place; blocks of rows on all cores.
inline void fft_rows(cplx* x, uint64_t rows, uint64_t cols, int sign) {
    const Fft1d plan(cols);
    parallel_blocks(rows, items_per_block(fft_work(cols)), [&plan, x, cols, sign](uint64_t r0, uint64_t r1) {
        for (uint64_t r = r0; r < r1; ++r) plan.run(x + r * cols, sign);
    });
}

// 2D transform of a rows x cols row-major array in place: every row, then every column.
inline void fft2d(cplx* x, uint64_t rows, uint64_t cols, int sign) {
    fft_rows(x, rows, cols, sign);
    fft_columns(x, rows, cols, sign);
}

// Interleaved float complex (re, im pairs) -> complex double.
inline std::vector<cplx> to_cplx(const float* interleaved, uint64_t count) {
    std::vector<cplx> v(count);
    cplx* out = v.data();
    parallel_blocks(count, items_per_block(1), [=](uint64_t begin, uint64_t end) {
        for (uint64_t i = begin; i < end; ++i) out[i] = cplx(interleaved[2 * i], interleaved[2 * i + 1]);
    });
    return v;
}

// Rows [i_begin, i_end) and columns [j_begin, j_end) of C = A * B, with B split into its real
// (br) and imaginary (bi) parts as doubles: the single-threaded loop (see below).
// A tile of C is kMatmulRowsPerPass rows by kMatmulColsPerPass columns: its sums (128 x 128
// complex doubles, 256 KiB) stay in the L2 while the matching columns of B stream past once,
// so B is read M / kMatmulRowsPerPass times in all.
constexpr int64_t kMatmulRowsPerPass = 128;
constexpr int64_t kMatmulColsPerPass = 128;
inline void complex_matmul_tile(const float* A, const double* br, const double* bi, cplx* C, int64_t N, int64_t K,
                                int64_t i_begin, int64_t i_end, int64_t j_begin, int64_t j_end) {
    const int64_t rows = i_end - i_begin, cols = j_end - j_begin;
    std::vector<double> cr(static_cast<size_t>(rows * cols), 0.0), ci(static_cast<size_t>(rows * cols), 0.0);
    for (int64_t k = 0; k < K; ++k) {
        const double* bkr = br + k * N + j_begin;
        const double* bki = bi + k * N + j_begin;
        for (int64_t r = 0; r < rows; ++r) {
            const int64_t ia = 2 * ((i_begin + r) * K + k);
            const double ar = A[ia], ai = A[ia + 1];
            double* xr = cr.data() + r * cols;
            double* xi = ci.data() + r * cols;
            for (int64_t j = 0; j < cols; ++j) {
                xr[j] += ar * bkr[j] - ai * bki[j];
                xi[j] += ar * bki[j] + ai * bkr[j];
            }
        }
    }
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < cols; ++j)
            C[(i_begin + r) * N + j_begin + j] = cplx(cr[r * cols + j], ci[r * cols + j]);
}

// C = A * B with A M x K, B K x N, C M x N, all complex and row-major; A and B
// interleaved float complex, C accumulated in double. Loop order i-k-j over
// tiles of C (see complex_matmul_tile), with real and imaginary parts in separate
// arrays so the inner loop vectorizes. Tiles run on all cores; every element of C
// is the same sum, k upwards, whatever tile it falls in.
inline void complex_matmul_reference(const float* A, const float* B, cplx* C, int64_t M, int64_t N, int64_t K) {
    if (M <= 0 || N <= 0) return;
    std::vector<double> br(static_cast<size_t>(K * N)), bi(static_cast<size_t>(K * N));
    double *pr = br.data(), *pi = bi.data();
    parallel_blocks(uint64_t(K * N), items_per_block(1), [=](uint64_t begin, uint64_t end) {
        for (uint64_t i = begin; i < end; ++i) {
            pr[i] = B[2 * i];
            pi[i] = B[2 * i + 1];
        }
    });
    constexpr int64_t R = kMatmulRowsPerPass, W = kMatmulColsPerPass;
    const uint64_t row_tiles = uint64_t((M + R - 1) / R), col_tiles = uint64_t((N + W - 1) / W);
    parallel_blocks(row_tiles * col_tiles, items_per_block(uint64_t(4 * R * W * K)), [=](uint64_t t0, uint64_t t1) {
        for (uint64_t t = t0; t < t1; ++t) {
            const int64_t i0 = int64_t(t / col_tiles) * R, j0 = int64_t(t % col_tiles) * W;
            complex_matmul_tile(A, pr, pi, C, N, K, i0, std::min(M, i0 + R), j0, std::min(N, j0 + W));
        }
    });
}

// Columns [j0, j1) of out = v * B: the single-threaded loop.
inline void complex_vecmat_columns(const cplx* v, const float* B, cplx* out, int64_t N, int64_t K, int64_t j0,
                                   int64_t j1) {
    std::vector<double> re(static_cast<size_t>(j1 - j0), 0.0), im(static_cast<size_t>(j1 - j0), 0.0);
    for (int64_t k = 0; k < K; ++k) {
        const double vr = v[k].real(), vi = v[k].imag();
        const float* b = B + 2 * k * N;
        for (int64_t j = j0; j < j1; ++j) {
            re[j - j0] += vr * b[2 * j] - vi * b[2 * j + 1];
            im[j - j0] += vr * b[2 * j + 1] + vi * b[2 * j];
        }
    }
    for (int64_t j = j0; j < j1; ++j) out[j] = cplx(re[j - j0], im[j - j0]);
}

// out = v * B for a row vector v (length K, double) and B (K x N, interleaved
// float complex, row-major): one row of a product in O(K * N). Strips of at
// least 256 columns (2 KiB of each row of B, long enough to stream) on all cores.
inline void complex_vecmat_reference(const cplx* v, const float* B, cplx* out, int64_t N, int64_t K) {
    if (N <= 0) return;
    const uint64_t grain = std::max<uint64_t>(256, items_per_block(uint64_t(4 * std::max<int64_t>(K, 1))));
    parallel_blocks(uint64_t(N), grain, [=](uint64_t j0, uint64_t j1) {
        complex_vecmat_columns(v, B, out, N, K, int64_t(j0), int64_t(j1));
    });
}

// FFT2(T X) in double for one n x n image X: Y = T X (complex_matmul_reference), then the 2D
// transform of Y. T and X interleaved float complex, row-major. O(n^3): lesson 10 checks a
// sample of whole images with it.
inline std::vector<cplx> gemm_fft2d_reference(const float* T, const float* X, int64_t n) {
    std::vector<cplx> z(static_cast<size_t>(n * n));
    complex_matmul_reference(T, X, z.data(), n, n, n);
    fft2d(z.data(), uint64_t(n), uint64_t(n), kForward);
    return z;
}

// Two cheap checks of every spectrum Z_b = FFT2(T X_b) of a batch, each O(n^2) per image:
//   rows: row u of Z_b = FFT1((row u of F T) X_b), F the DFT matrix: F T (every column of T
//         transformed) is made once, then a row is one vector-matrix product and one 1D FFT;
//   sums: the sum of Z_b's elements = n^2 (T X_b)[0][0] (the inverse DFT at the origin), which
//         one NaN anywhere in the image fails.
// Image b is checked at row 0 and at row 1 + splitmix64(seed * 31 + b) % (n - 1). T, the images
// X (batch of them, one after another) and the GPU's spectra Z: interleaved float complex,
// row-major. Images on all host cores, each image's work on one.
struct SpectrumSamples {
    std::vector<float> rows_gpu, sums_gpu;  // interleaved complex: 2 rows of n per image; 1 sum per image
    std::vector<cplx> rows_ref, sums_ref;   // the same places, from T and X
};
inline SpectrumSamples sample_spectra(const float* T, const float* X, const float* Z, int64_t batch, int64_t n,
                                      uint64_t seed) {
    const uint64_t N = uint64_t(n), elems = N * N;
    std::vector<cplx> ft = to_cplx(T, elems);  // F T: every column of T transformed
    fft_columns(ft.data(), N, N, kForward);
    const Fft1d row_fft(N);
    SpectrumSamples s;
    s.rows_gpu.resize(2 * 2 * batch * N);
    s.sums_gpu.resize(2 * batch);
    s.rows_ref.resize(2 * batch * N);
    s.sums_ref.resize(batch);
    parallel_for(batch, [&](int64_t b) {
        const float* x = X + 2 * b * elems;
        const float* z = Z + 2 * b * elems;
        const int64_t rows[2] = {0, 1 + static_cast<int64_t>(splitmix64(seed * 31 + b) % (n - 1))};
        for (int r = 0; r < 2; ++r) {
            cplx* ref = s.rows_ref.data() + (2 * b + r) * N;
            complex_vecmat_reference(ft.data() + rows[r] * N, x, ref, n, n);
            row_fft.run(ref, kForward);
            std::copy(z + 2 * rows[r] * N, z + 2 * (rows[r] + 1) * N, s.rows_gpu.begin() + 2 * (2 * b + r) * N);
        }
        cplx y00 = 0.0, zsum = 0.0;
        for (uint64_t k = 0; k < N; ++k) y00 += cplx(T[2 * k], T[2 * k + 1]) * cplx(x[2 * k * N], x[2 * k * N + 1]);
        for (uint64_t i = 0; i < elems; ++i) zsum += cplx(z[2 * i], z[2 * i + 1]);
        s.sums_ref[b] = y00 * static_cast<double>(elems);
        s.sums_gpu[2 * b] = static_cast<float>(zsum.real());
        s.sums_gpu[2 * b + 1] = static_cast<float>(zsum.imag());
    });
    return s;
}

}  // namespace verify
