// Lesson 24 of the course (the transformer decoder): the checks. Against the double-precision CPU
// reference (reference.h): every logit of the prefill and of every decode step, and the greedy
// tokens, where the model is small enough to run whole on the CPU; one sampled layer elsewhere.
// And at every size: decode's logits at step t against a second prefill's at position t. With
// --gpus=2, the same checks of the 2-GPU run (their names start "2 GPUs: "), and the 2-GPU run
// against the 1-GPU run of the same model (check_two_gpus). Each decode projection's GEMV against
// cuBLAS is checked where both run, in timed.cuh (check_projections).
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

// Logits against the CPU. The GPU rounds its activations to bf16 (unit roundoff u = 2^-8) 6 times
// per layer in series (the normed input, q and k, v, the attention output, the second normed input,
// the SwiGLU output) and twice more at the end: n = 6 L + 2 roundings, whose independent errors add
// as sqrt(n) u = eps, the fp32 sums' rounding far below. Tensor cores' fp32 sums (cuBLAS's, and the
// decode GEMV's from batch 5 on) may truncate, so that their errors share a sign: with 22 bits kept
// per 16-term MMA, the K / 16 MMAs of a dot product move it by at most K / 16 2^-22 of its terms'
// magnitudes, 2^-11 at the largest K (32768), a twentieth of eps at one layer. An error of
// relative size eps in the final normed row h moves logit v = sum_k h_k W[k][v] by at most
// eps sum_k |h_k W[k][v]| (every term's error of one sign): each logit's bound. Over all logits the
// errors are not of one sign: their rel-L2 is held to eps itself.
inline double logit_eps(int64_t layers) {
    return std::sqrt(6.0 * double(layers) + 2.0) * verify::unit_roundoff(verify::kBf16);
}
// One layer's update of the residual stream (check_one_layer): the contract's tolerance for bf16
// GEMMs and attention, rel-L2 and per element against |ref| + its rms.
constexpr double kLayerTol = 2e-2;

// got against want, element i within eps * terms[i] (reference.h, logits), rel-L2 within eps;
// NaN and Inf never pass.
inline lesson::Check compare_logits(const float* got, const std::vector<double>& want, const std::vector<double>& terms,
                                    double eps, const std::string& what) {
    lesson::Check c;
    c.what = what;
    c.checked = want.size();
    c.tol = eps;
    double diff2 = 0, ref2 = 0, max_abs = 0;
    for (size_t i = 0; i < want.size(); ++i) {
        const double d = double(got[i]) - want[i], ad = std::fabs(d);
        diff2 += d * d;
        ref2 += want[i] * want[i];
        if (std::isnan(ad) || ad > max_abs) max_abs = ad;  // once NaN, stays NaN
        if (!(ad <= eps * terms[i]) || !std::isfinite(got[i])) {
            if (c.first_bad < 0) c.first_bad = int64_t(i);
            ++c.bad_count;
        }
    }
    c.rel_l2 = std::sqrt(diff2 / ref2);
    c.max_abs = max_abs;
    c.pass = c.checked > 0 && c.bad_count == 0 && c.rel_l2 <= eps;
    return c;
}

// The whole model goes through the CPU where that takes seconds (weights x positions at most 4e9);
// elsewhere one layer of prefill, chosen by the seed. m: the whole model.
inline bool cpu_runs_whole(const Dims& m, const RunSize& r) {
    return double(m.params()) * double(r.batch * r.ctx()) <= 4e9;
}
inline int64_t sampled_layer(const Dims& m, uint64_t seed) { return int64_t(seed % uint64_t(m.layers)); }

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

// Whether the GPU's token `got` is one the rule allows at this CPU row of logits, given `slack`
// (the most two logits' errors can move one against the other): greedy, the largest logit; top-k,
// fewer than k logits above it; top-p, less than p of the probability on the logits above it.
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
// greedy token may differ from the CPU's argmax only where the two are within the logits' bounds).
// `on`: what ran, at the start of each check's name ("" on one GPU).
inline void check_whole_model(lesson::Report& report, const Dims& m, const RunSize& r, uint64_t seed, const Outputs& o,
                              const SampleRule& rule, const std::string& on) {
    const ref::Model M = ref::model(m, seed);
    const double eps = logit_eps(m.layers);
    std::vector<double> want_prefill, terms_prefill, want_steps(o.steps.size()), terms_steps(o.steps.size());
    std::vector<int> want_token(o.history.size());
    for (int64_t b = 0; b < r.batch; ++b) {
        std::vector<double> terms;
        const std::vector<double> lg = ref::logits(M, sequence(o, r, m.vocab, b), 0, &terms);
        want_prefill.insert(want_prefill.end(), lg.begin(), lg.begin() + r.prompt * m.vocab);
        terms_prefill.insert(terms_prefill.end(), terms.begin(), terms.begin() + r.prompt * m.vocab);
        for (int64_t t = 0; t < r.tokens; ++t) {
            const size_t at = size_t((r.prompt - 1 + t) * m.vocab), to = size_t((t * r.batch + b) * m.vocab);
            const double* row = lg.data() + at;
            std::copy(row, row + m.vocab, want_steps.begin() + to);
            std::copy_n(terms.begin() + at, m.vocab, terms_steps.begin() + to);
            const int64_t best = std::max_element(row, row + m.vocab) - row, got = o.history[size_t(t * r.batch + b)];
            const double widest = *std::max_element(terms.begin() + at, terms.begin() + at + m.vocab);
            const bool ok = allowed(row, m.vocab, got, rule, 2 * eps * widest);
            want_token[size_t(t * r.batch + b)] = int(ok ? got : rule.kind == Sample::Greedy ? best : -1);
        }
    }
    report.check(compare_logits(o.prefill.data(), want_prefill, terms_prefill, eps,
                                on + "prefill logits, every prompt position, vs CPU (double)"));
    report.check(compare_logits(o.steps.data(), want_steps, terms_steps, eps,
                                on + "decode logits, every step, vs CPU (double)"));
    const char* what[] = {"greedy tokens vs CPU argmax (bf16 ties allowed)", "top-k tokens among the CPU's top k",
                          "top-p tokens inside the CPU's nucleus"};
    report.check(verify::check_exact(
        o.history.data(), uint64_t(o.history.size()), [&](uint64_t i) { return want_token[i]; },
        on + what[int(rule.kind)]));
}

// One sampled layer of the first prefill against the CPU: its update to the residual stream
// (x after the layer minus x before, both copied back) at sampled positions of the first and last
// sequence, from the very input the GPU had.
inline void check_one_layer(lesson::Report& report, const Dims& m, const RunSize& r, uint64_t seed, int64_t l,
                            const Outputs& o, const std::string& on) {
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
    report.check(verify::compare(got.data(), want.data(), uint64_t(want.size()), kLayerTol,
                                 on + "layer " + std::to_string(l) + "'s update of the residual stream, " +
                                     std::to_string(rows.size()) + " positions, vs CPU (double)"));
}

// Decode's logits at step t against the second prefill's at position prompt - 1 + t: two bf16
// results, each with its own error (verify::compare_two_approximations), from the same tokens.
inline void check_consistency(lesson::Report& report, const Dims& m, const RunSize& r, const Outputs& o,
                              const std::string& on) {
    std::vector<float> again(o.steps.size());
    for (int64_t t = 0; t < r.tokens; ++t)
        for (int64_t b = 0; b < r.batch; ++b)
            std::copy_n(o.again.begin() + (b * r.tokens + t) * m.vocab, m.vocab,
                        again.begin() + (t * r.batch + b) * m.vocab);
    report.check(verify::compare_two_approximations(o.steps.data(), again.data(), uint64_t(again.size()),
                                                    uint64_t(m.vocab), logit_eps(m.layers),
                                                    on + "decode logits at step t vs prefill of the same tokens at t"));
}

// The 2-GPU run (two) against the 1-GPU run (one) of the same model, seed and prompt. The two GPUs
// are replicas past their all-reduces, so GPU 1's tokens (second) are GPU 0's, bit for bit. The
// runs sum in different orders, so their logits are two approximations of one result, compared
// at every step while a sequence's tokens agree (its context is then the same in both). A token
// may differ where the 1-GPU logits make it a tie: the rule allows it there, within twice the two
// runs' largest difference on that row; past that step the sequence goes on with other text, and
// nothing more of it is compared.
inline void check_two_gpus(lesson::Report& report, const Dims& m, const RunSize& r, const Outputs& one,
                           const Outputs& two, const std::vector<int>& second, const SampleRule& rule) {
    report.check(verify::check_same_bits(second.data(), two.history.data(), uint64_t(second.size()),
                                         "2 GPUs: GPU 1's tokens vs GPU 0's, bit for bit"));
    std::vector<float> got, want;
    std::vector<int> got_token, want_token;
    int64_t parted = 0;
    for (int64_t b = 0; b < r.batch; ++b)
        for (int64_t t = 0; t < r.tokens; ++t) {
            const size_t i = size_t(t * r.batch + b), at = i * size_t(m.vocab);
            got.insert(got.end(), two.steps.begin() + at, two.steps.begin() + at + m.vocab);
            want.insert(want.end(), one.steps.begin() + at, one.steps.begin() + at + m.vocab);
            got_token.push_back(two.history[i]);
            want_token.push_back(one.history[i]);
            if (two.history[i] == one.history[i]) continue;
            double diff = 0;
            std::vector<double> row(size_t(m.vocab));
            for (int64_t v = 0; v < m.vocab; ++v) {
                row[size_t(v)] = one.steps[at + v];
                diff = std::max(diff, std::fabs(double(two.steps[at + v]) - row[size_t(v)]));
            }
            if (allowed(row.data(), m.vocab, two.history[i], rule, 2 * diff)) {  // a tie: the sequence parts here
                want_token.back() = two.history[i];
                ++parted;
            }
            break;
        }
    report.check(verify::compare_two_approximations(got.data(), want.data(), uint64_t(got.size()), uint64_t(m.vocab),
                                                    logit_eps(m.layers),
                                                    "2 GPUs: logits of every step vs 1 GPU's, while the tokens agree"));
    report.check(verify::check_same_bits(got_token.data(), want_token.data(), uint64_t(got_token.size()),
                                         "2 GPUs: tokens vs 1 GPU's while they agree (where they part, a tie of the "
                                         "1-GPU logits)"));
    if (parted > 0)
        report.note(std::to_string(parted) + " of " + std::to_string(r.batch) +
                    " sequences parted from the 1-GPU run's at a tie; their later tokens are not compared");
}
