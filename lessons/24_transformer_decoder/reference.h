// Lesson 24 of the course (the transformer decoder): the CPU reference, in double precision. The
// same model written plainly: weights regenerated from their hash and rounded to bf16 as the GPU
// holds them, activations never rounded, RoPE, grouped-query attention and the softmax of every
// row in full, one position after another. Host only (no CUDA): tests/reference_test.cpp checks
// it against values worked out by hand.
// Run: ./build/bin/transformer_decoder   (README.md is the handout)
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "problem.cuh"
#include "verify/parallel.h"
#include "verify/precision.h"

namespace ref {

// One tensor as the GPU holds it: the hash's value rounded to bf16 (kept in float, exactly).
inline std::vector<float> tensor(uint64_t seed, int64_t id, int64_t n, float amp, float offset) {
    std::vector<float> t(static_cast<size_t>(n));
    const Fill f = fill_of(seed, id, amp, offset);
    verify::parallel_blocks(uint64_t(n), uint64_t(1) << 16, [&](uint64_t b, uint64_t e) {
        for (uint64_t i = b; i < e; ++i) t[i] = verify::bf16_bits_to_float(verify::to_bf16_bits(weight_value(f, i)));
    });
    return t;
}

struct Layer {
    std::vector<float> attn_norm, qkv, wo, mlp_norm, gate_up, down;
};
inline Layer layer(const Dims& m, uint64_t seed, int64_t l) {
    return {tensor(seed, tensor_id(l, kAttnNorm), m.d, 0.25f, 1.0f),
            tensor(seed, tensor_id(l, kQkv), m.d * m.qkv(), linear_amp(m.d), 0.0f),
            tensor(seed, tensor_id(l, kWo), m.d * m.d, linear_amp(m.d), 0.0f),
            tensor(seed, tensor_id(l, kMlpNorm), m.d, 0.25f, 1.0f),
            tensor(seed, tensor_id(l, kGateUp), m.d * 2 * m.mlp, linear_amp(m.d), 0.0f),
            tensor(seed, tensor_id(l, kDown), m.mlp * m.d, linear_amp(m.mlp), 0.0f)};
}

// y[n] = sum_k x[k] W[k][n], W row-major K x N.
inline void matvec(const double* x, const float* W, int64_t K, int64_t N, double* y) {
    std::fill(y, y + N, 0.0);
    for (int64_t k = 0; k < K; ++k) {
        const float* w = W + size_t(k) * N;
        for (int64_t n = 0; n < N; ++n) y[n] += x[k] * double(w[n]);
    }
}

inline void rmsnorm(const double* x, const float* w, int64_t d, double* y) {
    double ss = 0;
    for (int64_t i = 0; i < d; ++i) ss += x[i] * x[i];
    const double inv = 1.0 / std::sqrt(ss / double(d) + kNormEps);
    for (int64_t i = 0; i < d; ++i) y[i] = x[i] * inv * double(w[i]);
}

// Rotates pairs (i, i + hd/2) of one head by position pos.
inline void rope(double* v, int64_t hd, int64_t pos) {
    for (int64_t i = 0; i < hd / 2; ++i) {
        const double a = double(pos) * std::pow(kRopeBase, -double(2 * i) / double(hd));
        const double x0 = v[i], x1 = v[i + hd / 2];
        v[i] = x0 * std::cos(a) - x1 * std::sin(a);
        v[i + hd / 2] = x0 * std::sin(a) + x1 * std::cos(a);
    }
}

// One layer over the positions 0..T-1 of one sequence (x: T rows of d, the residual stream as the
// layer gets it). Writes, for each row t in `rows` (increasing), the layer's update to the
// residual stream (attention plus MLP) to delta[i * d ..]; K and V are computed up to the last.
inline void layer_forward(const Dims& m, const Layer& w, const double* x, const std::vector<int64_t>& rows,
                          double* delta) {
    const int64_t d = m.d, hd = m.hd(), kvd = m.kvd(), T = rows.empty() ? 0 : rows.back() + 1;
    std::vector<double> K(static_cast<size_t>(T * kvd)), V(static_cast<size_t>(T * kvd));
    verify::parallel_blocks(uint64_t(T), 1, [&](uint64_t b, uint64_t e) {
        std::vector<double> h(static_cast<size_t>(d)), out(static_cast<size_t>(m.qkv()));
        for (uint64_t t = b; t < e; ++t) {
            rmsnorm(x + t * d, w.attn_norm.data(), d, h.data());
            matvec(h.data(), w.qkv.data(), d, m.qkv(), out.data());
            for (int64_t g = 0; g < m.kv_heads; ++g) rope(out.data() + d + g * hd, hd, int64_t(t));
            std::copy(out.begin() + d, out.begin() + d + kvd, K.begin() + t * kvd);
            std::copy(out.begin() + d + kvd, out.end(), V.begin() + t * kvd);
        }
    });
    verify::parallel_blocks(uint64_t(rows.size()), 1, [&](uint64_t b, uint64_t e) {
        std::vector<double> h(static_cast<size_t>(d)), qkv(static_cast<size_t>(m.qkv())), att(static_cast<size_t>(d)),
            o(static_cast<size_t>(d)), xr(static_cast<size_t>(d)), gu(static_cast<size_t>(2 * m.mlp)),
            act(static_cast<size_t>(m.mlp)), p(static_cast<size_t>(T));
        for (uint64_t i = b; i < e; ++i) {
            const int64_t t = rows[i];
            rmsnorm(x + t * d, w.attn_norm.data(), d, h.data());
            matvec(h.data(), w.qkv.data(), d, m.qkv(), qkv.data());
            for (int64_t hh = 0; hh < m.heads; ++hh) {
                double* q = qkv.data() + hh * hd;
                rope(q, hd, t);
                const int64_t g = hh / m.group();
                double mx = -INFINITY, sum = 0;
                for (int64_t j = 0; j <= t; ++j) {
                    double s = 0;
                    for (int64_t c = 0; c < hd; ++c) s += q[c] * K[j * kvd + g * hd + c];
                    p[j] = s / std::sqrt(double(hd));
                    mx = std::max(mx, p[j]);
                }
                for (int64_t j = 0; j <= t; ++j) sum += (p[j] = std::exp(p[j] - mx));
                for (int64_t c = 0; c < hd; ++c) {
                    double a = 0;
                    for (int64_t j = 0; j <= t; ++j) a += p[j] * V[j * kvd + g * hd + c];
                    att[hh * hd + c] = a / sum;
                }
            }
            matvec(att.data(), w.wo.data(), d, d, o.data());
            for (int64_t c = 0; c < d; ++c) xr[c] = x[t * d + c] + o[c];
            rmsnorm(xr.data(), w.mlp_norm.data(), d, h.data());
            matvec(h.data(), w.gate_up.data(), d, 2 * m.mlp, gu.data());
            for (int64_t j = 0; j < m.mlp; ++j) act[j] = gu[j] / (1.0 + std::exp(-gu[j])) * gu[m.mlp + j];
            matvec(act.data(), w.down.data(), m.mlp, d, h.data());
            for (int64_t c = 0; c < d; ++c) delta[i * d + c] = o[c] + h[c];
        }
    });
}

// The whole model on one sequence of tokens: the logits of positions from..n-1 ([n - from][vocab]).
struct Model {
    Dims m;
    std::vector<Layer> layers;
    std::vector<float> embed, final_norm, lm_head;
};
inline Model model(const Dims& m, uint64_t seed) {
    Model M{m,
            {},
            tensor(seed, kEmbed, m.vocab * m.d, 1.0f, 0.0f),
            tensor(seed, kFinalNorm, m.d, 0.25f, 1.0f),
            tensor(seed, kLmHead, m.d * m.vocab, linear_amp(m.d), 0.0f)};
    for (int64_t l = 0; l < m.layers; ++l) M.layers.push_back(layer(m, seed, l));
    return M;
}
// terms, if given: the same shape, sum_k |h_k W[k][v]| of each logit's dot product (h the final
// normed row), the scale of its error (checks.cuh, logit_eps).
inline std::vector<double> logits(const Model& M, const std::vector<int>& tokens, int64_t from,
                                  std::vector<double>* terms = nullptr) {
    const Dims& m = M.m;
    const int64_t n = int64_t(tokens.size()), d = m.d;
    std::vector<double> x(static_cast<size_t>(n * d)), delta(static_cast<size_t>(n * d)),
        out(static_cast<size_t>((n - from) * m.vocab));
    if (terms) terms->assign(out.size(), 0.0);
    for (int64_t t = 0; t < n; ++t)
        for (int64_t c = 0; c < d; ++c) x[t * d + c] = M.embed[size_t(tokens[t]) * d + c];
    std::vector<int64_t> all(static_cast<size_t>(n));
    for (int64_t t = 0; t < n; ++t) all[t] = t;
    for (const Layer& w : M.layers) {
        layer_forward(m, w, x.data(), all, delta.data());
        for (size_t i = 0; i < x.size(); ++i) x[i] += delta[i];
    }
    verify::parallel_blocks(uint64_t(n - from), 1, [&](uint64_t b, uint64_t e) {
        std::vector<double> h(static_cast<size_t>(d));
        for (uint64_t i = b; i < e; ++i) {
            rmsnorm(x.data() + (from + i) * d, M.final_norm.data(), d, h.data());
            matvec(h.data(), M.lm_head.data(), d, m.vocab, out.data() + i * m.vocab);
            if (!terms) continue;
            double* t = terms->data() + i * m.vocab;
            for (int64_t k = 0; k < d; ++k) {
                const float* w = M.lm_head.data() + size_t(k) * m.vocab;
                for (int64_t v = 0; v < m.vocab; ++v) t[v] += std::fabs(h[k] * double(w[v]));
            }
        }
    });
    return out;
}

}  // namespace ref
