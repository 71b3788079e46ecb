// Lesson 24 of the course (the transformer decoder): what main.cu times, and how the report puts
// it. Each decode projection by the GEMV and by cuBLAS (alone, and in whole steps), the GEMV's
// output checked against cuBLAS's whichever the step takes, the prefill against cuBLAS's rate on
// its largest GEMM, the decode loop by graph replays and by stream launches against its memory
// bound, and one stream-launched step kernel by kernel (events around every launch).
// Run: ./build/bin/transformer_decoder   (README.md is the handout)
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <cuda_runtime.h>

#include "common/ceilings.h"
#include "common/check.h"
#include "common/report.h"
#include "common/timer.h"
#include "model.cuh"
#include "verify/compare.h"
#include "verify/precision.h"

// Prefill of the prompt, and cuBLAS alone on prefill's largest GEMM (gate/up: rows x 2 mlp x d,
// the yardstick), timed in turns so that a clock that moves during the run moves both:
// {prefill ms, cuBLAS TFLOP/s}.
static std::pair<double, double> time_prefill_and_blas(Decoder& D, int repeat) {
    const int64_t rows = D.r.batch * D.r.prompt;
    const std::vector<double> ms = lesson::time_interleaved_ms(
        repeat, 2,
        [&](int v) {
            if (v == 0) prefill(D, D.r.prompt, D.r.prompt - 1, false);
            else gemm_cublas(D, D.xn, D.layer[0].gate_up, rows, D.m.d, 2 * D.m.mlp);
        },
        D.s);
    return {ms[0], 2.0 * double(rows) * D.m.d * 2 * D.m.mlp / (ms[1] * 1e9)};
}

// Prefill's flops: 2 per weight per row, attention's QK^T and PV over the causal triangle, the LM
// head on `keep` rows per sequence.
static double prefill_flops(const Dims& m, int64_t batch, int64_t seq, int64_t keep) {
    const double linear = double(m.layers) * double(m.layer_params() - 2 * m.d) * 2.0 * batch * seq;
    const double attention = 4.0 * m.layers * batch * m.heads * m.hd() * (double(seq) * (seq + 1) / 2);
    return linear + attention + 2.0 * batch * keep * m.d * m.vocab;
}

// The decode state prefill leaves: every sequence `prompt` long, step 1 next, its first token.
struct Resume {
    std::vector<int> len, first;
    int step = 1;
};
static void resume(Decoder& D, const Resume& at) {
    CUDA_CHECK(cudaMemcpyAsync(D.st.len, at.len.data(), at.len.size() * 4, cudaMemcpyHostToDevice, D.s));
    CUDA_CHECK(cudaMemcpyAsync(D.st.next, at.first.data(), at.first.size() * 4, cudaMemcpyHostToDevice, D.s));
    CUDA_CHECK(cudaMemcpyAsync(D.st.step, &at.step, 4, cudaMemcpyHostToDevice, D.s));
}

// "qkv 2048x3072": projection p by name and weight shape, K x N, as the report names it.
static std::string proj_shape(const Dims& m, int p) {
    return std::string(proj_name(p)) + " " + std::to_string(proj_k(m, p)) + "x" + std::to_string(proj_n(m, p));
}

// Every decode projection's GEMV (layer 0's weights, the LM head's) against cuBLAS at the run's
// batch, every element of y, whatever the step runs: so the GEMV's path for this batch (fp32 FMAs
// on 1, 2 or 4 rows a pass, tensor cores on 16 from 5 rows: launch_gemv) is checked in every run.
// Both sides get the same x and W, each from scratch: the timed runs' inputs drift (the o and down
// projections add into x; down reads whichever gate/up ran last, over which cuBLAS's down writes).
// x: the embeddings of the first prompt tokens, as a step starts. The GEMV reads x as the step
// does (XNormed, XRows, XSwiglu: the very bf16 values normTiles and swiglu write for cuBLAS) and
// stores y plainly (YStore): RoPE into the cache and the residual adds come after y is complete,
// and are checked with the logits. The o projection reads the normed x for the attention's
// output; the down projection, SwiGLU of cuBLAS's gate/up output.
// Tolerance: a product of two bf16 values is exact in fp32, so both sides sum the same K exact
// terms, in different orders: fp32 FMAs round to nearest, errors that add like a random walk; an
// MMA (cuBLAS; the GEMV from 5 rows) drops bits at each step, errors that lean one way and add
// like the steps. Per side verify::gemm_rounded_tolerance(u, u, K, true), u = 2^-24: 2 u (the
// stored y) + 4 u sqrt(K) + 2 u K / 4, 2.7e-4 at K = 8192; compare_two_approximations adds both
// sides' allowances. x or W wrong in a sum (a fragment's registers swapped, a tail of k lost)
// moves an element by about its own size.
static void check_projections(Decoder& D, lesson::Report& report) {
    const Dims& m = D.m;
    const int64_t B = D.r.batch;
    const LayerWeights& w = D.layer[0];
    const bf16* Ws[kProjs] = {w.qkv, w.wo, w.gate_up, w.down, D.lm_head};
    const bf16* norm[kProjs] = {w.attn_norm, nullptr, w.mlp_norm, nullptr, D.final_norm};
    const dim3 tiles(unsigned(D.tiles()), unsigned(B));
    residualTiles<<<tiles, kGemvCols, 0, D.s>>>(D.d_tokens, D.embed, Parts{nullptr, m.d}, D.x, D.ssq, m.d);
    CUDA_CHECK_LAUNCH();
    const char* path = gemv_on_tensor_cores(B) ? "tensor cores" : "fp32 FMAs";
    for (int p = 0; p < kProjs; ++p) {
        const int64_t K = proj_k(m, p), N = proj_n(m, p);
        float *own = D.gemv_y[0], *blas = p == kPGateUp ? D.gemv_y[1] : D.proj;  // gate/up's: down's input
        auto gemv = [&](auto x) {
            launch_gemv(x, Ws[p], D.planes, YStore{own, N}, D.gemv_done, B, K, N, gemv_splits(B, K, N, D.sms), D.pdl,
                        D.s);
        };
        if (norm[p]) {
            const XNormed xn{D.x, norm[p], D.ssq, m.d, D.tiles()};
            gemv(xn);
            normTiles<<<tiles, kGemvCols, 0, D.s>>>(xn, D.xn);
            gemm_cublas(D, D.xn, Ws[p], B, K, N, blas);
        } else if (p == kPWo) {
            gemv(XRows{D.xn, K});  // the Q|K|V's normed x (K = qd = d on one GPU)
            gemm_cublas(D, D.xn, Ws[p], B, K, N, blas);
        } else {
            gemv(XSwiglu{D.gemv_y[1], m.mlp});
            swiglu<<<unsigned(std::min<int64_t>(1024, (B * m.mlp + 255) / 256)), 256, 0, D.s>>>(
                Parts{D.gemv_y[1], 2 * m.mlp}, D.act, B, m.mlp);
            gemm_cublas(D, D.act, Ws[p], B, K, N, blas);
        }
        CUDA_CHECK_LAUNCH();
        CUDA_CHECK(cudaStreamSynchronize(D.s));
        const std::vector<float> got = to_host(own, size_t(B * N)), want = to_host(blas, size_t(B * N));
        const double u = verify::unit_roundoff(verify::kFp32), tol = verify::gemm_rounded_tolerance(u, u, K, true);
        report.check(verify::compare_two_approximations(got.data(), want.data(), uint64_t(got.size()), uint64_t(N), tol,
                                                        "decode " + proj_shape(m, p) + ", own GEMV (" + path +
                                                            ") vs cuBLAS, same x and W, every element (two-sided)"));
    }
}

// Times every decode projection both ways at the run's batch, each as the step runs it (project:
// the GEMV with its norm, SwiGLU and residual add folded in, or cuBLAS with the kernels around
// it), alone, for the report; GB/s are the weights' bytes over the time (the rows of x are a few
// KB). The step then runs each projection the way that makes a whole step faster: a few steps from
// `at`, both ways in turns, starting from the choice the kernels alone suggest. A kernel's speed
// alone is not its cost in the step, where it starts behind another's tail, among its neighbours'
// traffic (README.md, What to observe). Without `at` (one GPU of two, whose step cannot run
// without the other's all-reduces) the kernels alone decide. The report gets the rates where one
// is given, and then every projection's GEMV checked against cuBLAS (check_projections) before
// the choice: a wrong GEMV fails whichever way the step goes. Returns which way each projection
// runs, for a note.
static std::string choose_projections(Decoder& D, int repeat, lesson::Report* report, const Resume* at) {
    const Dims& m = D.m;
    const int64_t steps = at ? std::min<int64_t>(4, D.r.tokens - 1) : 0;
    hold_positions(D, D.r.prompt + steps);  // the blocks the decode loop takes for these positions anyway
    for (int p = 0; p < kProjs; ++p) {
        int64_t runs = 0;  // each run a layer on: one layer's weights may fit in L2, the step's never do
        const std::vector<double> ms = lesson::time_interleaved_ms(
            repeat, 2,
            [&](int v) {
                D.blas_for[p] = v == 1;
                project(D, Proj(p), runs++ % m.layers, true);
            },
            D.s);
        const int64_t K = proj_k(m, p), N = proj_n(m, p);
        const double gb = double(K) * N * 2 / 1e9;
        const std::string shape = proj_shape(m, p);
        if (report) report->variant("decode " + shape + ", own GEMV", ms[0], gb / (ms[0] / 1e3), "GB/s");
        if (report) report->variant("decode " + shape + ", cuBLAS", ms[1], gb / (ms[1] / 1e3), "GB/s");
        D.blas_for[p] = ms[1] < ms[0];  // timing p sets only blas_for[p]
    }
    if (report) check_projections(D, *report);
    for (int p = 0; p < kProjs && at; ++p) {
        const std::vector<double> step_ms = lesson::time_interleaved_ms(
            repeat, 2,
            [&](int v) {
                D.blas_for[p] = v == 1;
                resume(D, *at);
                for (int64_t t = 0; t < steps; ++t) decode_step(D);
            },
            D.s);
        D.blas_for[p] = step_ms[1] < step_ms[0];
    }
    std::string won;
    for (int p = 0; p < kProjs; ++p)
        won += std::string(won.empty() ? "" : ", ") + proj_name(p) + ": " + (D.blas_for[p] ? "cuBLAS" : "own GEMV");
    return won;
}

// One stream-launched step, an event pair around each launch: milliseconds by kernel, summed over layers.
static std::map<std::string, double> step_breakdown(Decoder& D, const Resume& at) {
    Breakdown bd;
    resume(D, at);
    D.bd = &bd;
    decode_step(D);
    D.bd = nullptr;
    CUDA_CHECK(cudaStreamSynchronize(D.s));
    std::map<std::string, double> ms;
    for (size_t i = 0; i < bd.names.size(); ++i) {
        float t = 0;
        CUDA_CHECK(cudaEventElapsedTime(&t, bd.ev[2 * i], bd.ev[2 * i + 1]));
        ms[bd.names[i]] += t;
    }
    for (cudaEvent_t e : bd.ev) CUDA_CHECK(cudaEventDestroy(e));
    return ms;
}

// Decode's memory bound: every weight and the cache read once per step, at the DRAM read bound
// (measured now); prefill against the cuBLAS GEMM rate; the graph against stream launches.
struct Timings {
    double prefill_ms, blas_tflops, graph_ms, stream_ms, plain_graph_ms;  // plain: no overlap (0: not timed)
    std::map<std::string, double> kernel_ms;
};
static void report_speed(lesson::Report& report, const Decoder& D, const cudaDeviceProp& prop, const Timings& t,
                         int device) {
    const Dims& m = D.m;
    const RunSize& r = D.r;
    const double step_bytes =
        double(m.step_params()) * 2 + 4.0 * m.layers * r.batch * m.kvd() * (double(r.prompt) + double(r.tokens) / 2);
    const std::string in_l2 = lesson::l2_note(step_bytes, prop);
    const lesson::StreamBound dram =
        in_l2.empty() ? lesson::measure_stream_bound(prop, 1, 0) : lesson::stream_bound_not_measured(1, 0, in_l2);
    lesson::add_bound(report, dram, device, lesson::Roof::Memory);
    report.yardstick("cuBLAS bf16 GEMM, prefill's gate/up shape", t.blas_tflops, "TFLOP/s");
    report.timing(lesson::kTimingMethod);
    const double flops = prefill_flops(m, r.batch, r.prompt, 1), tflops = flops / (t.prefill_ms * 1e9);
    report.variant_yardstick("prefill " + std::to_string(r.batch) + "x" + std::to_string(r.prompt) + " tokens",
                             t.prefill_ms, tflops, "TFLOP/s", t.blas_tflops, "cuBLAS GEMM",
                             lesson::small_gemm_note(r.batch * r.prompt, 2 * m.mlp, prop));
    report.metric("prefill tokens/s", double(r.batch * r.prompt) / (t.prefill_ms / 1e3), "tokens/s");
    const double bound_tps = double(r.batch) / (step_bytes / (dram.gbps * 1e9));  // GB/s: 1e9 bytes a second
    const double tps = double(r.batch) / (t.graph_ms / 1e3);
    report.variant_bound("decode step, CUDA graph", t.graph_ms, tps, "tokens/s", bound_tps, "memory bound", in_l2);
    report.variant_bound("decode step, stream launches", t.stream_ms, double(r.batch) / (t.stream_ms / 1e3), "tokens/s",
                         bound_tps, "memory bound", in_l2);
    if (t.plain_graph_ms > 0.0) {
        report.variant_bound("decode step, CUDA graph, no overlap", t.plain_graph_ms,
                             double(r.batch) / (t.plain_graph_ms / 1e3), "tokens/s", bound_tps, "memory bound", in_l2);
        report.metric("overlap (programmatic dependent launch) speed-up", t.plain_graph_ms / t.graph_ms, "x");
    }
    report.metric("graph speed-up over stream launches", t.stream_ms / t.graph_ms, "x");
    for (const auto& [name, ms] : t.kernel_ms) report.metric("decode step, " + name, ms, "ms");
    report.work("prefill", flops, double(m.params()) * 2, t.prefill_ms);
    report.work("decode step", 2.0 * double(m.step_params()) * r.batch, step_bytes, t.graph_ms);
    char key[128];
    std::snprintf(key, sizeof key, "decode %.0f tokens/s at batch %lld (graph)", tps, (long long)r.batch);
    report.key_result(key, tps / bound_tps, "memory bound", lesson::Against::Bound, in_l2);
    // A floor under what a step of separate kernels reaches (README.md, "Prefill against decode").
    if (r.batch == 1) report.target("batch-1 decode of its memory bound", tps / bound_tps, 0.38);
    report.target("graph over stream launches", t.stream_ms / t.graph_ms, 1.0, "x");
}
