// verify/attention.h - inputs and CPU references for scaled dot-product attention (lesson 21).
//
//   attention_value        the random bf16 inputs, a pure function of (seed, index): the GPU fills
//                          Q, K, V with it (it is __host__ __device__ under nvcc) and the host
//                          regenerates exactly the same numbers for any head it wants to check
//   softmax_reference_row  softmax of one row in double, the first `valid` entries (causal mask)
//   attention_reference_row / attention_reference
//                          O = softmax(Q K^T * scale) V in double, one row or every row of every head
//   OnlineSoftmax          the one-pass running max and sum (the "online softmax"), and the merge
//                          of two partial results, as the kernels do it, in double for the tests
//
// The values are k / 128 * amp for an integer k in [-128, 127]: exactly representable in bf16
// (8 significant bits), so the host and the GPU hold the very same numbers without any rounding,
// and the reference measures the kernel, not the rounding of the inputs.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "verify/parallel.h"

#if defined(__CUDACC__)
#define VERIFY_HD __host__ __device__
#else
#define VERIFY_HD
#endif

namespace verify {

// The mixer of verify/random.h (splitmix64), here callable from device code too.
VERIFY_HD inline uint64_t attention_mix(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

// Element `index` of a tensor drawn with `seed`: k / 128 * amp, k uniform in [-128, 127]. With amp a
// power of two the result is exact in bf16 (and in float).
VERIFY_HD inline float attention_value(uint64_t seed, uint64_t index, float amp) {
    const uint64_t h = attention_mix(seed * 0x632BE59BD9B4E019ull + attention_mix(index));
    const int k = int(h >> 56) - 128;
    return float(k) * (amp / 128.0f);
}

// The bf16 bits of a float that is exactly representable in bf16 (the top half of its bits).
VERIFY_HD inline uint16_t attention_bf16_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return uint16_t(u >> 16);
}

// out[j] = softmax(x[0..valid))[j] for j < valid, 0 for valid <= j < n; in double, max subtracted.
template <class T>
void softmax_reference_row(const T* x, int64_t n, int64_t valid, double* out) {
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < valid; ++j) m = std::max(m, double(x[j]));
    double sum = 0;
    for (int64_t j = 0; j < valid; ++j) sum += std::exp(double(x[j]) - m);
    for (int64_t j = 0; j < n; ++j) out[j] = j < valid ? std::exp(double(x[j]) - m) / sum : 0.0;
}

// One output row: o[c] = sum_j p_j V[j][c], p = softmax over j < valid of scale * (q . K[j]).
// q has d entries, K and V are row-major (rows of d). Scores in double, max subtracted.
template <class T>
void attention_reference_row(const T* q, const T* K, const T* V, int64_t valid, int64_t d, double scale, double* o) {
    double m = -std::numeric_limits<double>::infinity();
    double* s = new double[size_t(std::max<int64_t>(valid, 1))];
    for (int64_t j = 0; j < valid; ++j) {
        double dot = 0;
        for (int64_t c = 0; c < d; ++c) dot += double(q[c]) * double(K[j * d + c]);
        s[j] = dot * scale;
        m = std::max(m, s[j]);
    }
    double sum = 0;
    for (int64_t c = 0; c < d; ++c) o[c] = 0;
    for (int64_t j = 0; j < valid; ++j) {
        const double p = std::exp(s[j] - m);
        sum += p;
        for (int64_t c = 0; c < d; ++c) o[c] += p * double(V[j * d + c]);
    }
    for (int64_t c = 0; c < d; ++c) o[c] = valid > 0 ? o[c] / sum : 0.0;
    delete[] s;
}

// Every row of every head: Q, K, V, O are [heads][N][d] row-major; with `causal`, query i sees keys 0..i.
// On all host cores, one head at a time split by rows.
template <class T>
void attention_reference(const T* Q, const T* K, const T* V, double* O, int64_t heads, int64_t N, int64_t d,
                         bool causal, double scale) {
    parallel_for(heads * N, [&](int64_t r) {
        const int64_t h = r / N, i = r % N;
        const size_t base = size_t(h) * N * d;
        attention_reference_row(Q + base + size_t(i) * d, K + base, V + base, causal ? i + 1 : N, d, scale,
                                O + base + size_t(i) * d);
    });
}

// The online softmax in double: one pass over the scores keeps the running maximum m and the sum
// l of exp(x - m); when a larger x arrives the sum so far is rescaled by exp(m_old - m_new).
// merge() combines two partial results over disjoint pieces of a row (what split-K does).
struct OnlineSoftmax {
    double m = -std::numeric_limits<double>::infinity();
    double l = 0;
    void add(double x) {
        if (x == -std::numeric_limits<double>::infinity()) return;  // a masked entry adds nothing
        const double m_new = std::max(m, x);
        l = l * std::exp(m - m_new) + std::exp(x - m_new);
        m = m_new;
    }
    void merge(const OnlineSoftmax& o) {
        if (o.l == 0) return;
        if (l == 0) {
            *this = o;
            return;
        }
        const double m_new = std::max(m, o.m);
        l = l * std::exp(m - m_new) + o.l * std::exp(o.m - m_new);
        m = m_new;
    }
};

}  // namespace verify
