// CPU tests of verify/attention.h, the references of lesson 21 (flash attention).
// Run: ./build/bin/cpu_tests "[attention]"
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>
#include "catch_shim.hpp"
#include "verify/attention.h"
#include "verify/gemm_bf16.h"

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
