// Lesson 24 of the course (the transformer decoder): the CPU reference (reference.h) against
// values worked out by hand, on a 1-layer model of d_model 8. No GPU: CTest 24_transformer_decoder.reference.
// Run: ./build/bin/transformer_decoder_reference_test
#include <cmath>
#include <cstdio>
#include <vector>

#include "../reference.h"

static int failures = 0;
static void expect_near(double got, double want, const char* what) {
    if (!(std::fabs(got - want) <= 1e-12 * (1.0 + std::fabs(want)))) {
        std::printf("FAIL %s: got %.17g, want %.17g\n", what, got, want);
        ++failures;
    }
}

int main() {
    // RMSNorm of (3, 4, 0, ..., 0): mean square 25 / 8, so each element times sqrt(8 / 25), times w.
    {
        const double x[8] = {3, 4, 0, 0, 0, 0, 0, 0};
        const float w[8] = {1, 2, 1, 1, 1, 1, 1, 1};
        double y[8];
        ref::rmsnorm(x, w, 8, y);
        const double inv = 1.0 / std::sqrt(25.0 / 8.0 + kNormEps);
        expect_near(y[0], 3 * inv, "rmsnorm y[0]");
        expect_near(y[1], 8 * inv, "rmsnorm y[1] (w = 2)");
        expect_near(y[2], 0, "rmsnorm y[2]");
    }
    // RoPE: position 0 leaves a head as it is; position 1 turns pair (0, hd/2) by 1 radian and
    // pair (1, hd/2 + 1) by 10000^(-1/2) = 0.01 radian (hd = 4).
    {
        double v[4] = {1, 1, 0, 0};
        ref::rope(v, 4, 0);
        expect_near(v[0], 1, "rope pos 0");
        ref::rope(v, 4, 1);
        expect_near(v[0], std::cos(1.0), "rope pos 1, pair 0, x");
        expect_near(v[2], std::sin(1.0), "rope pos 1, pair 0, y");
        expect_near(v[1], std::cos(0.01), "rope pos 1, pair 1, x");
        expect_near(v[3], std::sin(0.01), "rope pos 1, pair 1, y");
    }
    // One layer, d 8, 2 query heads sharing 1 KV head of dimension 4, MLP 8. Norm weights 1, Q, K and
    // V the identity (Q = K = V = the normed input), the output projection the identity, gate and up
    // zero (silu(0) * 0 = 0: the MLP adds nothing). Two equal rows: whatever the scores, attention
    // averages two equal V rows, so each row's update is its own normed input.
    {
        const Dims m{1, 8, 2, 1, 8, 16};
        ref::Layer w;
        w.attn_norm.assign(8, 1.0f);
        w.mlp_norm.assign(8, 1.0f);
        w.qkv.assign(8 * m.qkv(), 0.0f);
        for (int k = 0; k < 8; ++k) w.qkv[k * m.qkv() + k] = 1.0f;             // Q = h
        for (int k = 0; k < 4; ++k) w.qkv[k * m.qkv() + 8 + k] = 1.0f;         // K = h[0..4)
        for (int k = 0; k < 4; ++k) w.qkv[(4 + k) * m.qkv() + 12 + k] = 1.0f;  // V = h[4..8)
        w.wo.assign(64, 0.0f);
        for (int k = 0; k < 8; ++k) w.wo[k * 8 + k] = 1.0f;
        w.gate_up.assign(8 * 16, 0.0f);
        w.down.assign(8 * 8, 0.5f);
        const double row[8] = {1, -2, 3, 0.5, 2, 1, -1, 4};
        std::vector<double> x(row, row + 8), delta(16);
        x.insert(x.end(), row, row + 8);
        ref::layer_forward(m, w, x.data(), {0, 1}, delta.data());
        double h[8];
        ref::rmsnorm(row, w.attn_norm.data(), 8, h);
        // Both query heads read the one KV head: V = h[4..8) for each, side by side.
        for (int r = 0; r < 2; ++r)
            for (int c = 0; c < 8; ++c) expect_near(delta[r * 8 + c], h[4 + c % 4], "layer update, equal rows");
        // Row 0 sees only itself: the same whatever row 1 holds.
        x[8] = 7;
        ref::layer_forward(m, w, x.data(), {0, 1}, delta.data());
        for (int c = 0; c < 8; ++c) expect_near(delta[c], h[4 + c % 4], "layer update, causal row 0");
    }
    std::printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
    return failures ? 1 : 0;
}
