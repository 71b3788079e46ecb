// Lesson 24 of the course (the transformer decoder): the model's sizes, its presets, the checks
// of the flags, and the random weights, a pure function of (seed, tensor, index) that the GPU
// fills with and the CPU reference (reference.h) regenerates bit for bit.
// Run: ./build/bin/transformer_decoder   (README.md is the handout)
#pragma once
#include <cmath>
#include <cstdint>
#include <string>

#include "common/flags.h"
#include "verify/attention.h"

#if defined(__CUDACC__)
#define MODEL_HD __host__ __device__
#else
#define MODEL_HD
#endif

// A Llama-style decoder: d_model wide, `heads` query heads and `kv_heads` key/value heads of
// head_dim = d_model / heads (grouped-query attention: heads / kv_heads query heads share one).
// Split over `tp` GPUs (tensor parallelism, tensor_parallel.cuh), the Dims of one GPU's share:
// heads, kv_heads and mlp are 1/tp of the model's, d_model and the vocabulary the same.
struct Dims {
    int64_t layers, d, heads, kv_heads, mlp, vocab;
    int64_t tp = 1;
    int64_t hd() const { return d / (heads * tp); }
    int64_t qd() const { return heads * hd(); }         // width of Q and of the attention's output: d / tp
    int64_t kvd() const { return kv_heads * hd(); }     // width of K (and of V)
    int64_t qkv() const { return qd() + 2 * kvd(); }    // the fused Q|K|V projection's outputs
    int64_t group() const { return heads / kv_heads; }  // query heads per KV head
    // Weights of one layer and of the whole model, in elements.
    int64_t layer_params() const { return d * qkv() + qd() * d + d * 2 * mlp + mlp * d + 2 * d; }
    int64_t params() const { return layers * layer_params() + 2 * vocab * d + d; }
    // Weights one decode step reads: every layer, the final norm, the LM head (the embedding: one row).
    int64_t step_params() const { return layers * layer_params() + vocab * d + d; }
    // One GPU's share of n, and the whole model of a share.
    Dims shard(int64_t n) const { return {layers, d, heads / n, kv_heads / n, mlp / n, vocab, n}; }
    Dims whole() const { return {layers, d, heads * tp, kv_heads * tp, mlp * tp, vocab, 1}; }
};

constexpr Dims kTiny{2, 256, 4, 2, 512, 1000};
constexpr Dims kOneB{16, 2048, 32, 8, 8192, 32000};
constexpr double kRopeBase = 10000.0, kNormEps = 1e-5;

// What a run does with the model.
struct RunSize {
    int64_t batch, prompt, tokens, page;
    int64_t ctx() const { return prompt + tokens; }  // the longest sequence the cache holds
    int64_t pages() const { return (ctx() + page - 1) / page; }
};

enum class Sample { Greedy, TopK, TopP };

// Flags a range cannot check: one line naming the flag, exit 2, before any CUDA call.
inline Sample check_sizes(const Dims& m, const RunSize& r, const std::string& sample, int64_t top_k, int64_t gpus) {
    using lesson::bad_input;
    const std::string heads = "--heads=" + std::to_string(m.heads);
    if (m.d % m.heads != 0) bad_input(heads + " does not divide --d-model=" + std::to_string(m.d));
    if (m.hd() != 32 && m.hd() != 64 && m.hd() != 128)
        bad_input("--d-model / --heads = " + std::to_string(m.hd()) + "; allowed head dimensions: 32, 64, 128");
    if (m.heads % m.kv_heads != 0) bad_input("--kv-heads=" + std::to_string(m.kv_heads) + " does not divide " + heads);
    if (m.group() > 32) bad_input(heads + " over --kv-heads: at most 32 query heads per KV head");
    if (m.mlp % 8 != 0) bad_input("--mlp=" + std::to_string(m.mlp) + " is not a multiple of 8");
    if (m.vocab % 8 != 0) bad_input("--vocab=" + std::to_string(m.vocab) + " is not a multiple of 8");
    // Two GPUs take half the query heads and half the KV heads each (--mlp, a multiple of 8, halves too).
    if (gpus == 2 && m.heads % 2 != 0) bad_input(heads + " with --gpus=2: the query heads must split evenly");
    if (gpus == 2 && m.kv_heads % 2 != 0)
        bad_input("--kv-heads=" + std::to_string(m.kv_heads) + " with --gpus=2: the KV heads must split evenly");
    if (r.tokens < 2)
        bad_input("--tokens=" + std::to_string(r.tokens) + ": at least 2 (one from prefill, one decoded)");
    if (r.batch * r.ctx() > 65536)
        bad_input("--batch x (--prompt + --tokens) = " + std::to_string(r.batch * r.ctx()) + "; at most 65536");
    if (top_k > m.vocab)
        bad_input("--top-k=" + std::to_string(top_k) + " is more than --vocab=" + std::to_string(m.vocab));
    if (sample == "greedy") return Sample::Greedy;
    if (sample == "topk") return Sample::TopK;
    if (sample == "topp") return Sample::TopP;
    bad_input("--sample=" + sample + "; allowed: greedy, topk, topp");
}

// ---------------------------------------------------------------- the weights

// Tensors of layer l are numbered 8 l + kind; the model's own after every layer's.
enum Kind { kAttnNorm, kQkv, kWo, kMlpNorm, kGateUp, kDown };
constexpr int64_t kEmbed = 1 << 20, kFinalNorm = kEmbed + 1, kLmHead = kEmbed + 2;
MODEL_HD inline int64_t tensor_id(int64_t layer, Kind k) { return 8 * layer + k; }

// Linear weights are k / 128 * amp (k uniform in [-128, 127], exact in bf16), amp the power of two
// nearest sqrt(3 / fan_in): each output then has about the spread of its inputs. Norm weights are
// 1 + k / 512, rounded to bf16; the embedding is k / 128.
inline float linear_amp(int64_t fan_in) {
    return std::ldexp(1.0f, int(std::lround(std::log2(std::sqrt(3.0 / fan_in)))));
}
struct Fill {
    uint64_t seed;
    float amp, offset;
};
inline Fill fill_of(uint64_t seed, int64_t id, float amp, float offset) {
    return {verify::attention_mix(seed * 0x9E3779B97F4A7C15ull + uint64_t(id)), amp, offset};
}
// Element i of a tensor, before its rounding to bf16 (the GPU rounds with __float2bfloat16_rn, the
// CPU with verify::to_bf16_bits: both to nearest even, so the two hold the same bits).
MODEL_HD inline float weight_value(const Fill& f, uint64_t i) {
    return f.offset + verify::attention_value(f.seed, i, f.amp);
}
