// Lesson 24 of the course (the transformer decoder): the checks. Against the double-precision CPU
// reference (reference.h): every logit of the prefill and of every decode step, and the greedy
// tokens, where the model is small enough to run whole on the CPU; one sampled layer elsewhere.
// And at every size: decode's logits at step t against a second prefill's at position t.
// Run: ./build/bin/transformer_decoder   (README.md is the handout)
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "common/report.h"
#include "kernels/sample.cuh"
#include "problem.cuh"
#include "reference.h"
#include "verify/compare.h"
#include "verify/precision.h"

// Logits against the CPU: each GPU activation is rounded to bf16 (relative error u = 2^-9) about 6
// times per layer in series (the normed input, q and k, v, the attention output, the second normed
// input, the SwiGLU output) and twice more at the end; independent roundings add as sqrt(n) u, which
// is 0.7% for 2 layers and 1.6% for 16, with the rounding of the products' sums (fp32) far below.
// The contract's 2e-2 for bf16 attention and GEMMs covers both, and nothing looser is needed.
constexpr double kLogitTol = 2e-2;

// What the GPU run left for the checks, copied back.
struct Outputs {
    std::vector<int> prompt;       // [batch][prompt]
    std::vector<int> history;      // [tokens][batch]: step 0 is prefill's token
    std::vector<float> prefill;    // first prefill's logits: [batch][kept positions][vocab]
    std::vector<float> steps;      // every step's logits: [tokens][batch][vocab]
    std::vector<float> again;      // second prefill (prompt + tokens), positions prompt-1..: [batch][tokens][vocab]
    std::vector<float> xin, xout;  // the sampled layer's residual stream, before and after: [batch][prompt][d]
};

// The tokens sequence b saw: its prompt, then every token but the last it sampled.
inline std::vector<int> sequence(const Outputs& o, const RunSize& r, int64_t vocab, int64_t b) {
    std::vector<int> s(o.prompt.begin() + b * r.prompt, o.prompt.begin() + (b + 1) * r.prompt);
    for (int64_t t = 0; t + 1 < r.tokens; ++t) s.push_back(o.history[size_t(t * r.batch + b)]);
    for (int& t : s) t = t >= 0 && t < vocab ? t : 0;  // a wrong run's token must not index past the CPU's table
    return s;
}

// Whether the GPU's token `got` is one the rule allows at this CPU row of logits, with `slack` (the
// logits' tolerance) in its favour: greedy, the largest logit; top-k, fewer than k logits above it;
// top-p, less than p of the probability on the logits above it.
inline bool allowed(const double* row, int64_t vocab, int64_t got, const SampleRule& rule, double slack) {
    if (got < 0 || got >= vocab) return false;
    const double x = row[got] + slack, best = *std::max_element(row, row + vocab);
    if (rule.kind == Sample::Greedy) return x >= best;
    int64_t above = 0;
    double mass = 0, total = 0;
    for (int64_t i = 0; i < vocab; ++i) {
        const double p = std::exp(row[i] - best);
        total += p;
        if (row[i] > x) above += 1, mass += p;
    }
    return rule.kind == Sample::TopK ? above < rule.top_k : mass < double(rule.top_p) * total;
}

// The whole model on the CPU, each sequence fed the GPU's tokens: prefill's logits at every prompt
// position, every step's logits, and the tokens: each one the rule allows at the CPU's logits (a
// greedy token may differ from the CPU's argmax only where the two are a bf16 tie apart).
inline void check_whole_model(lesson::Report& report, const Dims& m, const RunSize& r, uint64_t seed, const Outputs& o,
                              const SampleRule& rule) {
    const ref::Model M = ref::model(m, seed);
    std::vector<double> want_prefill, want_steps(o.steps.size());
    std::vector<int> want_token(o.history.size());
    for (int64_t b = 0; b < r.batch; ++b) {
        const std::vector<double> lg = ref::logits(M, sequence(o, r, m.vocab, b), 0);
        want_prefill.insert(want_prefill.end(), lg.begin(), lg.begin() + r.prompt * m.vocab);
        const double rms = verify::rms(lg.data(), uint64_t(lg.size()));
        for (int64_t t = 0; t < r.tokens; ++t) {
            const double* row = lg.data() + (r.prompt - 1 + t) * m.vocab;
            std::copy(row, row + m.vocab, want_steps.begin() + (t * r.batch + b) * m.vocab);
            const int64_t best = std::max_element(row, row + m.vocab) - row, got = o.history[size_t(t * r.batch + b)];
            const bool ok = allowed(row, m.vocab, got, rule, kLogitTol * (std::fabs(row[best]) + rms));
            want_token[size_t(t * r.batch + b)] = int(ok ? got : rule.kind == Sample::Greedy ? best : -1);
        }
    }
    report.check(verify::compare(o.prefill.data(), want_prefill.data(), uint64_t(want_prefill.size()), kLogitTol,
                                 "prefill logits, every prompt position, vs CPU (double)"));
    report.check(verify::compare(o.steps.data(), want_steps.data(), uint64_t(want_steps.size()), kLogitTol,
                                 "decode logits, every step, vs CPU (double)"));
    const char* what[] = {"greedy tokens vs CPU argmax (bf16 ties allowed)", "top-k tokens among the CPU's top k",
                          "top-p tokens inside the CPU's nucleus"};
    report.check(verify::check_exact(
        o.history.data(), uint64_t(o.history.size()), [&](uint64_t i) { return want_token[i]; }, what[int(rule.kind)]));
}

// One sampled layer of the first prefill against the CPU: its update to the residual stream
// (x after the layer minus x before, both copied back) at sampled positions of the first and last
// sequence, from the very input the GPU had.
inline void check_one_layer(lesson::Report& report, const Dims& m, const RunSize& r, uint64_t seed, int64_t l,
                            const Outputs& o) {
    const ref::Layer w = ref::layer(m, seed, l);
    std::vector<int64_t> rows = verify::stratified_rows(r.prompt, std::min<int64_t>(r.prompt, 8), seed);
    std::sort(rows.begin(), rows.end());
    std::vector<float> got;
    std::vector<double> want;
    std::vector<int64_t> seqs{0};
    if (r.batch > 1) seqs.push_back(r.batch - 1);
    for (int64_t b : seqs) {
        const size_t base = size_t(b * r.prompt * m.d);
        std::vector<double> x(o.xin.begin() + base, o.xin.begin() + base + r.prompt * m.d), delta(rows.size() * m.d);
        ref::layer_forward(m, w, x.data(), rows, delta.data());
        want.insert(want.end(), delta.begin(), delta.end());
        for (int64_t t : rows)
            for (int64_t c = 0; c < m.d; ++c) got.push_back(o.xout[base + t * m.d + c] - o.xin[base + t * m.d + c]);
    }
    report.check(verify::compare(got.data(), want.data(), uint64_t(want.size()), kLogitTol,
                                 "layer " + std::to_string(l) + "'s update of the residual stream, " +
                                     std::to_string(rows.size()) + " positions, vs CPU (double)"));
}

// Decode's logits at step t against the second prefill's at position prompt - 1 + t: two bf16
// results, each with its own error (verify::compare_two_approximations), from the same tokens.
inline void check_consistency(lesson::Report& report, const Dims& m, const RunSize& r, const Outputs& o) {
    std::vector<float> again(o.steps.size());
    for (int64_t t = 0; t < r.tokens; ++t)
        for (int64_t b = 0; b < r.batch; ++b)
            std::copy_n(o.again.begin() + (b * r.tokens + t) * m.vocab, m.vocab,
                        again.begin() + (t * r.batch + b) * m.vocab);
    report.check(verify::compare_two_approximations(o.steps.data(), again.data(), uint64_t(again.size()),
                                                    uint64_t(m.vocab), kLogitTol,
                                                    "decode logits at step t vs prefill of the same tokens at t"));
}
