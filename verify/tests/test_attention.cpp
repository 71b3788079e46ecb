// CPU tests of verify/attention.h, the references of lesson 21 (flash attention).
// Run: ./build/bin/cpu_tests "[attention]"
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>
#include "catch_shim.hpp"
#include "verify/attention.h"
#include "verify/compare.h"
#include "verify/gemm_bf16.h"
#include "verify/parallel.h"

TEST_CASE("attention inputs: exact in bf16, in range, deterministic, varied", "[attention]") {
    int distinct_low = 0;
    double sum = 0;
    for (uint64_t i = 0; i < 100000; ++i) {
        const float x = verify::attention_value(5, i, 4.0f);
        CHECK(x >= -4.0f);
        CHECK(x < 4.0f);
        CHECK(verify::bf16_float(verify::attention_bf16_bits(x)) == x);  // no rounding anywhere
        CHECK(verify::attention_bf16_bits(x) == verify::bf16_bits(x));
        CHECK(x == verify::attention_value(5, i, 4.0f));
        if (x != verify::attention_value(6, i, 4.0f)) ++distinct_low;
        sum += x;
    }
    CHECK(distinct_low > 99000);            // another seed, other values
    CHECK(std::fabs(sum / 100000) < 0.05);  // centred
}

TEST_CASE("softmax reference: sums to 1, shift-invariant, masked tail is 0, no overflow", "[attention]") {
    const std::vector<double> x = {1.0, 3.0, -2.0, 0.5, 1000.0, 999.0};
    std::vector<double> p(6), q(6);
    verify::softmax_reference_row(x.data(), 6, 6, p.data());
    double s = 0;
    for (double v : p) s += v;
    CHECK(std::fabs(s - 1.0) < 1e-12);
    CHECK(std::isfinite(p[4]));  // exp(1000) alone would overflow
    CHECK(std::fabs(p[4] / p[5] - std::exp(1.0)) < 1e-9);
    verify::softmax_reference_row(x.data(), 6, 4, p.data());     // causal-style: first 4 only
    std::vector<double> y = {11.0, 13.0, 8.0, 10.5, -5.0, 7.0};  // x + 10 in the first 4
    verify::softmax_reference_row(y.data(), 6, 4, q.data());
    for (int j = 0; j < 4; ++j) CHECK(std::fabs(p[j] - q[j]) < 1e-12);
    CHECK(p[4] == 0.0);
    CHECK(p[5] == 0.0);
}

TEST_CASE("attention reference row: equal keys average V, one key copies it, causal row 0 is row 0 of V",
          "[attention]") {
    const int d = 4, n = 3;
    const std::vector<double> q = {1, -2, 0.5, 3};
    const std::vector<double> K = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    const std::vector<double> V = {1, 2, 3, 4, 5, 6, 7, 8, -9, 10, 11, 12};
    std::vector<double> o(d);
    verify::attention_reference_row(q.data(), K.data(), V.data(), n, d, 0.5, o.data());
    for (int c = 0; c < d; ++c) CHECK(std::fabs(o[c] - (V[c] + V[d + c] + V[2 * d + c]) / 3.0) < 1e-12);
    verify::attention_reference_row(q.data(), K.data(), V.data(), 1, d, 0.5, o.data());
    for (int c = 0; c < d; ++c) CHECK(o[c] == V[c]);
}

TEST_CASE("attention reference: a dominant key wins, causal rows see only the past", "[attention]") {
    const int d = 2, n = 3;
    // Key 1 matches q strongly: its score is far above the others, so o ~ V[1].
    const std::vector<double> Q = {10, 0, 10, 0, 10, 0};
    const std::vector<double> K = {0, 1, 10, 0, -10, 0};
    const std::vector<double> V = {1, 1, 2, -2, 3, 3};
    std::vector<double> O(n * d);
    verify::attention_reference(Q.data(), K.data(), V.data(), O.data(), 1, n, d, false, 1.0);
    for (int i = 0; i < n; ++i) {
        CHECK(std::fabs(O[i * d] - 2.0) < 1e-12);
        CHECK(std::fabs(O[i * d + 1] + 2.0) < 1e-12);
    }
    verify::attention_reference(Q.data(), K.data(), V.data(), O.data(), 1, n, d, true, 1.0);
    CHECK(O[0] == 1.0);  // row 0 sees key 0 only
    CHECK(O[1] == 1.0);
    CHECK(std::fabs(O[2 * d] - 2.0) < 1e-12);  // row 2 sees key 1 again
}

TEST_CASE("online softmax: one pass equals two passes, in any split, with masked entries", "[attention]") {
    std::vector<double> x(1000);
    for (int i = 0; i < 1000; ++i) x[i] = 20.0 * verify::attention_value(3, uint64_t(i), 1.0f) + (i == 700 ? 50 : 0);
    x[10] = -std::numeric_limits<double>::infinity();  // a masked score
    double m = -INFINITY;
    for (double v : x) m = std::max(m, v);
    double l = 0;
    for (double v : x) l += std::exp(v - m);
    verify::OnlineSoftmax one;
    for (double v : x) one.add(v);
    CHECK(one.m == m);
    CHECK(std::fabs(one.l - l) <= 1e-12 * l);
    for (int split : {1, 7, 500, 999}) {  // two pieces merged (split-K), also one empty-ish piece
        verify::OnlineSoftmax a, b;
        for (int i = 0; i < split; ++i) a.add(x[i]);
        for (int i = split; i < 1000; ++i) b.add(x[i]);
        a.merge(b);
        CHECK(a.m == m);
        CHECK(std::fabs(a.l - l) <= 1e-12 * l);
    }
    verify::OnlineSoftmax empty, c = one;
    c.merge(empty);
    CHECK(c.l == one.l);
    empty.merge(one);
    CHECK(empty.l == one.l);
}

TEST_CASE("online softmax: the handout's worked example", "[attention]") {
    // README.md: scores 2, 1, 4, 3 in one pass.
    verify::OnlineSoftmax s;
    s.add(2);
    CHECK(s.m == 2);
    CHECK(s.l == 1);
    s.add(1);
    CHECK(std::fabs(s.l - (1 + std::exp(-1.0))) < 1e-15);  // 1.3679
    s.add(4);                                              // new maximum: the sum so far is rescaled by exp(2 - 4)
    CHECK(s.m == 4);
    CHECK(std::fabs(s.l - ((1 + std::exp(-1.0)) * std::exp(-2.0) + 1)) < 1e-15);  // 1.1851
    s.add(3);
    const double l = std::exp(-2.0) + std::exp(-3.0) + 1 + std::exp(-1.0);  // 1.5530
    CHECK(std::fabs(s.l - l) < 1e-15);
}

// Lesson 21's two bf16 ways to one causal output, row by row as its kernels do them, in float:
// rung 4 normalizes P in fp32 and rounds it to bf16 before P V; the fused rungs walk 64-key tiles
// with a running maximum, round the unnormalized p (<= 1) to bf16 for P V and sum l from the
// unrounded p. Both round O to bf16. Scores are exact (the inputs are multiples of 1/128, d = 64).
namespace {
float bf16_round(float x) { return verify::bf16_float(verify::bf16_bits(x)); }
constexpr float kLog2e = 1.4426950408889634f;

void standard_row(const float* q, const float* K, const float* V, int valid, int d, float* o) {
    const float scale = 1.0f / std::sqrt(float(d));
    std::vector<float> x(valid), acc(d, 0.f);
    float m = -INFINITY, l = 0.f;
    for (int j = 0; j < valid; ++j) {
        float dot = 0.f;
        for (int c = 0; c < d; ++c) dot += q[c] * K[j * d + c];
        x[j] = scale * dot;
        m = std::max(m, x[j]);
    }
    for (int j = 0; j < valid; ++j) l += std::exp2((x[j] - m) * kLog2e);
    for (int j = 0; j < valid; ++j) {
        const float p = bf16_round(std::exp2((x[j] - m) * kLog2e) * (1.f / l));
        for (int c = 0; c < d; ++c) acc[c] += p * V[j * d + c];
    }
    for (int c = 0; c < d; ++c) o[c] = bf16_round(acc[c]);
}

// rescale = false plants the bug of the handout's pitfalls: O is not multiplied by alpha when the
// maximum grows. skip_tile >= 0 plants another: that key tile is left out.
void fused_row(const float* q, const float* K, const float* V, int valid, int d, float* o, bool rescale = true,
               int skip_tile = -1) {
    const float sl = kLog2e / std::sqrt(float(d));
    std::vector<float> acc(d, 0.f);
    float m = -INFINITY, l = 0.f;
    for (int n0 = 0; n0 < valid; n0 += 64) {
        if (n0 / 64 == skip_tile) continue;
        const int n1 = std::min(valid, n0 + 64);
        std::vector<float> s(n1 - n0);
        float mx = m;
        for (int j = n0; j < n1; ++j) {
            float dot = 0.f;
            for (int c = 0; c < d; ++c) dot += q[c] * K[j * d + c];
            s[j - n0] = dot;
            mx = std::max(mx, dot);
        }
        const float alpha = std::exp2(m * sl - mx * sl);  // 0 on the first tile
        m = mx;
        float rs = 0.f;
        if (rescale)
            for (int c = 0; c < d; ++c) acc[c] *= alpha;
        for (int j = n0; j < n1; ++j) {
            const float p = std::exp2(std::fma(s[j - n0], sl, -mx * sl));
            rs += p;
            const float pb = bf16_round(p);
            for (int c = 0; c < d; ++c) acc[c] += pb * V[j * d + c];
        }
        l = l * alpha + rs;
    }
    for (int c = 0; c < d; ++c) o[c] = bf16_round(acc[c] * (1.f / l));
}
}  // namespace

TEST_CASE("attention: two bf16 approximations of one causal output pass against each other, planted bugs fail",
          "[attention]") {
    const int N = 2048, d = 64;
    const double tol = 2e-2;  // lesson 21's kTol
    const size_t n = size_t(N) * d;
    std::vector<float> Q(n), K(n), V(n), A(n), B(n);
    for (size_t i = 0; i < n; ++i) {  // as lesson 21 draws them: Q four times wider than K and V
        Q[i] = verify::attention_value(41, i, 4.0f);
        K[i] = verify::attention_value(42, i, 1.0f);
        V[i] = verify::attention_value(43, i, 1.0f);
    }
    std::vector<double> T(n);
    verify::attention_reference(Q.data(), K.data(), V.data(), T.data(), 1, N, d, true, 1.0 / std::sqrt(double(d)));
    verify::parallel_for(N, [&](int64_t i) {
        standard_row(&Q[i * d], K.data(), V.data(), int(i) + 1, d, &A[i * d]);
        fused_row(&Q[i * d], K.data(), V.data(), int(i) + 1, d, &B[i * d]);
    });
    std::vector<double> s_row(N);  // rms of each row of the truth
    for (int i = 0; i < N; ++i) {
        double s2 = 0;
        for (int c = 0; c < d; ++c) s2 += T[i * d + c] * T[i * d + c];
        s_row[i] = std::sqrt(s2 / d);
    }
    // The case: early rows average few values of V and are several times larger than late ones.
    REQUIRE(s_row[1] > 5 * s_row[N - 1]);
    // The premise: each side within tol (|t| + rms of its row) of the truth, and rel-L2 within tol.
    for (const std::vector<float>* x : {&A, &B}) {
        double e2 = 0, t2 = 0, worst = 0;
        for (size_t k = 0; k < n; ++k) {
            const double e = double((*x)[k]) - T[k];
            e2 += e * e;
            t2 += T[k] * T[k];
            worst = std::max(worst, std::fabs(e) / (tol * (std::fabs(T[k]) + s_row[k / d])));
        }
        REQUIRE(worst <= 1.0);
        REQUIRE(std::sqrt(e2 / t2) <= tol);
    }
    const lesson::Check ok = verify::compare_two_approximations(B.data(), A.data(), n, d, tol, "fused vs standard");
    CHECK(ok.pass);
    CHECK(ok.max_abs > 0);  // they are not the same bits: bf16 rounding of different numbers

    // One element of the last (smallest) row off by a quarter of the row's rms.
    std::vector<float> W = B;
    const size_t k = n - d + 17;
    W[k] = float(double(W[k]) + 0.25 * s_row[N - 1]);
    lesson::Check c = verify::compare_two_approximations(W.data(), A.data(), n, d, tol, "one element");
    CHECK_FALSE(c.pass);
    CHECK(c.first_bad == int64_t(k));
    CHECK(c.bad_count == 1);

    // O not rescaled when the maximum grows, in every row: wrong wherever a later tile raised it.
    verify::parallel_for(N,
                         [&](int64_t i) { fused_row(&Q[i * d], K.data(), V.data(), int(i) + 1, d, &W[i * d], false); });
    CHECK_FALSE(verify::compare_two_approximations(W.data(), A.data(), n, d, tol, "no rescale").pass);

    // One key tile (keys 640..703) left out of the last row.
    W = B;
    fused_row(&Q[n - d], K.data(), V.data(), N, d, &W[n - d], true, 10);
    c = verify::compare_two_approximations(W.data(), A.data(), n, d, tol, "tile left out");
    CHECK_FALSE(c.pass);
    CHECK(c.first_bad >= int64_t(n - d));

    W = B;
    const uint64_t f = verify::inject_fault(W.data(), n, 2026);
    c = verify::compare_two_approximations(W.data(), A.data(), n, d, tol, "inject-fault");
    CHECK_FALSE(c.pass);
    CHECK(c.first_bad == int64_t(f));
}
