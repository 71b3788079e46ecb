// Lesson 21 of the course (flash attention): the yardsticks, then parts 2 and 3: the timed sizes,
// and a sequence rung 4 cannot hold. Every timed result is checked first: sampled rows against the
// CPU, and the fused rungs every element against rung 4. main.cu runs them after the small-N
// checks (checks.cuh), before decode (decode.cuh).
// Run: ./build/bin/flash_attention [--n=2048,8192] [--long=131072]   (README.md is the handout)
#pragma once
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "common/ceilings.h"
#include "common/check.h"
#include "common/timer.h"
#include "verify/attention.h"
#include "verify/compare.h"

#include "kernels/4_standard.cuh"
#include "problem.cuh"

// The yardsticks: cuBLAS BF16 GEMM at a square gemm_n, with fp32 C and with bf16 C timed in turns
// (the faster named), and a copy. They are not rungs (their own gate: they never make the run a
// SKIP); without the GEMM the TFLOP/s of the attention rungs are printed ungraded.
static void measure_yardsticks(Context& c, int gemm_n) {
    lesson::Gate yardstick_gate(c.report);
    g_cublas_bf16 = yardstick_gate.run("the cuBLAS BF16 GEMM yardstick", cublas_bf16_needs());
    c.no_gemm = g_cublas_bf16 ? "" : "no cuBLAS BF16 GEMM yardstick below cc 8.0";
    if (g_cublas_bf16) {
        GemmYardstick& g = c.gemm;
        g.n = gemm_n;
        const size_t nn = size_t(gemm_n) * gemm_n;
        CUDA_CHECK(cudaMalloc(&g.A, nn * sizeof(bf16)));
        CUDA_CHECK(cudaMalloc(&g.B, nn * sizeof(bf16)));
        CUDA_CHECK(cudaMalloc(&g.C32, nn * sizeof(float)));
        CUDA_CHECK(cudaMalloc(&g.C16, nn * sizeof(bf16)));
        fill(g.A, nn, c.seed + 7, kK);
        fill(g.B, nn, c.seed + 8, kV);
        const std::vector<double> ms = lesson::time_interleaved_ms(c.repeat, 2, [&](int out) { g.run(g_cublas, out); });
        for (int out = 0; out < 2; ++out)
            c.report.yardstick("cuBLAS GemmEx bf16 -> " + std::string(out == 0 ? "fp32" : "bf16") + ", " +
                                   std::to_string(gemm_n) + "^3",
                               g.tflops(ms[out]), "TFLOP/s");
        const int fast = ms[1] < ms[0] ? 1 : 0;
        c.cublas_tflops = g.tflops(ms[fast]);
        c.cublas_name = GemmYardstick::name(fast);
    }
    c.copy_gbps = lesson::measure_d2d_gbps(c.prop, c.repeat);
    c.report.yardstick("device-to-device cudaMemcpy (read + write)", c.copy_gbps, "GB/s");
    c.report.timing(std::string(lesson::kTimingMethod) +
                    "; the GEMM yardstick's two outputs in turns, and the graded ratio from the best fused rung "
                    "and both GEMMs in turns (lesson::time_interleaved_ms)");
}

// The key result: the best fused rung at N = 8192, d = 128, non-causal, else at the last timed size.
struct Key {
    std::string text;
    double fraction = NAN;
    std::string small = "N=8192, d=128 not timed";
    std::string of = "cuBLAS BF16 GEMM";  // the yardstick it is a fraction of
};

// A softmax rung on S = scale Q K^T (written by the caller): the sampled rows of S and P against
// the CPU's softmax of the same S, then timed in GB/s against the copy.
static void time_softmax(Context& c, const Rung& r, const std::vector<Row>& rows, int64_t bh, int N, bool causal,
                         const std::string& tag) {
    const size_t nn = size_t(bh) * N * N;
    std::vector<float> got;
    std::vector<double> ref_P;
    CUDA_CHECK(cudaMemset(g_P, 0xFF, nn * sizeof(bf16)));
    r.softmax(Softmax{g_S, g_P, bh * N, N, causal});
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> h_row(N);
    std::vector<double> ref_row(N);
    for (const Row& w : rows) {  // the sampled rows of S and P
        const size_t off = (size_t(w.head) * N + w.i) * N;
        CUDA_CHECK(cudaMemcpy(h_row.data(), g_S + off, N * sizeof(float), cudaMemcpyDeviceToHost));
        verify::softmax_reference_row(h_row.data(), N, causal ? w.i + 1 : N, ref_row.data());
        ref_P.insert(ref_P.end(), ref_row.begin(), ref_row.end());
        const verify::host_vector<float> pr = copy_out(g_P + off, N);
        got.insert(got.end(), pr.begin(), pr.end());
    }
    c.check(got, ref_P.data(),
            std::string(r.name) + " vs CPU, " + std::to_string(rows.size()) + " sampled rows, " + tag);
    const double ms = lesson::time_median_ms(c.repeat, [&] { r.softmax(Softmax{g_S, g_P, bh * N, N, causal}); });
    const double bytes =
        double(bh) * N * N * sizeof(bf16) + double(bh) * (causal ? 0.5 * N * (N + 1.0) : double(N) * N) * sizeof(float);
    c.report.variant_yardstick(std::string(r.name) + " @" + tag, ms, bytes / (ms * 1e6), "GB/s", c.copy_gbps, "copy",
                               lesson::l2_note(bytes, c.prop));
}

// Part 2, one timed size: every rung that runs at d, checked, then timed; the targets of what
// ran; the key result when this size is the graded one (or the last one and none was).
static void time_size(Context& c, int64_t bh, int N, int d, bool causal, bool last, Key& key) {
    const Plan& plan = c.plan;
    Problem p{bh, N, d, causal, c.seed + 1000 + N + d};
    setup(p);
    const Attention a = p.args();
    const std::string tag = "N=" + std::to_string(N) + ", d=" + std::to_string(d) + (causal ? ", causal" : "");
    const double flop = 4.0 * double(N) * N * d * bh * (causal ? 0.5 : 1.0);
    const double io_bytes = 4.0 * double(p.elems()) * sizeof(bf16);  // Q, K, V read once, O written once
    const auto tflops = [&](double ms) { return flop / (ms * 1e9); };
    const double tiles = double(bh) * ((N + 127) / 128);
    const std::string small = tiles < 2.0 * c.prop.multiProcessorCount ? "too small to fill the GPU" : "";
    const std::vector<Row> rows = sample_rows(p, 16);
    const std::vector<double> ref = reference_rows(p, rows);
    const size_t nn = size_t(bh) * N * N;
    const double score_bytes = double(nn) * (sizeof(float) + sizeof(bf16));
    size_t free_b = 0, total_b = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    const bool standard_fits = score_bytes < 0.8 * double(free_b);
    c.report.metric("rung 4 scores S (fp32) + P (bf16), " + tag, score_bytes / 1e9, "GB");
    c.report.metric("Q, K, V, O (all rungs), " + tag, io_bytes / 1e9, "GB");
    verify::host_vector<float> h_std;  // rung 4's O: the reference of the fused rungs, every element
    double std_ms = NAN, best_fused = 0, mma_ms = NAN;
    int best_i = -1;           // the fastest fused rung
    bool wgmma_timed = false;  // rung 8 or 9 ran: the target below is theirs
    if (standard_fits) {
        CUDA_CHECK(cudaMalloc(&g_S, nn * sizeof(float)));
        CUDA_CHECK(cudaMalloc(&g_P, nn * sizeof(bf16)));
        CUDA_CHECK(cudaMemset(g_S, 0xFF, nn * sizeof(float)));  // poisoned, as in part 1
        const bool softmax_here = std::any_of(plan.ladder.begin(), plan.ladder.end(), [&](int i) {
            return plan.rungs[i].kind == Kind::Softmax && plan.runs(i, d);
        });
        if (softmax_here) scores(a);  // the softmax rungs' S, once (rung 4 writes the same S again)
    } else {
        c.report.note("rung 4 and the softmax rungs skipped at " + tag + ": the scores need " +
                      lesson::gb_text(score_bytes) + ", the GPU has " + lesson::gb_text(double(free_b)) + " free");
    }
    for (int i : plan.ladder) {
        const Rung& r = plan.rungs[i];
        const std::string name = std::string(r.name) + " @" + tag;
        if (!plan.runs(i, d) || r.kind == Kind::Decode ||
            (!standard_fits && (r.kind == Kind::Softmax || i == kStandard)))
            continue;
        if (r.kind == Kind::Softmax) {  // on S = scale Q K^T, written above
            time_softmax(c, r, rows, bh, N, causal, tag);
            continue;
        }
        CUDA_CHECK(cudaMemset(p.d_O, 0xFF, p.elems() * sizeof(bf16)));
        r.attention(a);
        verify::host_vector<float> got = copy_out(p.d_O, p.elems());
        std::vector<float> sampled = pick_rows(got, p, rows);
        c.check(sampled, ref.data(),
                std::string(r.name) + " vs CPU, " + std::to_string(rows.size()) + " sampled rows, " + tag);
        if (i == kStandard) h_std = std::move(got);  // not read again here
        else if (!h_std.empty())                     // two bf16 results, each allowed its error: verify/compare.h
            c.report.check(verify::compare_two_approximations(got.data(), h_std.data(), got.size(), size_t(d), kTol,
                                                              std::string(r.name) +
                                                                  " vs rung 4, every element (two-sided), " + tag));
        const int reps = i == 4 ? std::min<int>(c.repeat, 3) : c.repeat;  // the scalar rung is slow
        const double ms = lesson::time_median_ms(reps, [&] { r.attention(a); });
        c.report.variant_yardstick(name, ms, tflops(ms), "TFLOP/s", c.cublas_tflops, c.cublas_name,
                                   c.not_graded(small));
        c.report.work(name, flop, io_bytes, ms);
        if (i == kStandard) std_ms = ms;
        else if (tflops(ms) > best_fused) {
            best_fused = tflops(ms);
            best_i = i;
        }
        if (i == 5) mma_ms = ms;
        if (i >= 7) wgmma_timed = true;
    }
    // Targets only for what ran: rung 6 against rung 4; the best fused rung against the GEMM
    // where the wgmma rungs ran (mma.sync alone is not meant to reach it, README "Results"), that
    // ratio from the rung and both GEMMs timed again in turns: at the power limit, timed one after
    // the other, the order would move it.
    if (N >= 2048 && std::isfinite(std_ms) && std::isfinite(mma_ms))
        c.report.target("rung 6 vs rung 4 (standard), " + tag, std_ms / mma_ms, 1.0, "x");
    if (N == 8192 && d == 128 && !causal && best_fused > 0) {
        double fraction = best_fused / c.cublas_tflops;
        key.of = c.cublas_name;
        if (g_cublas_bf16) {  // the graded ratio: the best fused rung and both GEMMs timed in turns
            const Rung& b = plan.rungs[best_i];
            const std::vector<double> ms = lesson::time_interleaved_ms(c.repeat, 3, [&](int v) {
                if (v == 0) b.attention(a);
                else c.gemm.run(g_cublas, v - 1);
            });
            const int fast = ms[2] < ms[1] ? 1 : 0;
            best_fused = tflops(ms[0]);
            fraction = best_fused / c.gemm.tflops(ms[1 + fast]);
            key.of = GemmYardstick::name(fast);
            const std::string turns = ", in turns with " + std::string(b.name) + " @" + tag;
            c.report.metric(std::string(b.name) + " @" + tag + ", in turns with cuBLAS", best_fused, "TFLOP/s");
            for (int out = 0; out < 2; ++out)
                c.report.metric(GemmYardstick::name(out) + " " + std::to_string(c.gemm.n) + "^3" + turns,
                                c.gemm.tflops(ms[1 + out]), "TFLOP/s");
        }
        if (wgmma_timed && g_cublas_bf16)
            c.report.target("best fused rung vs cuBLAS BF16 GEMM, " + tag, fraction, 0.5, "x");
        key.text = "best fused rung " + std::to_string(int(best_fused + 0.5)) + " TFLOP/s at " + tag;
        key.fraction = fraction;
        key.small = c.not_graded(small);
    } else if (key.text.empty() && best_fused > 0 && last) {
        key.text = "best fused rung " + std::to_string(int(best_fused + 0.5)) + " TFLOP/s at " + tag;
        key.fraction = best_fused / c.cublas_tflops;
        key.of = c.cublas_name;
        key.small = c.not_graded(small.empty() ? "not the graded size (N=8192, d=128, non-causal)" : small);
    }
    if (standard_fits) {
        CUDA_CHECK(cudaFree(g_S));
        CUDA_CHECK(cudaFree(g_P));
    }
    release(p);
}

// Part 3: rung 6 at a sequence length whose scores rung 4 cannot allocate (sampled rows checked).
static void long_run(Context& c, const Rung& rung6, int64_t long_n, int64_t long_heads, int d, bool causal) {
    Problem p{long_heads, int(long_n), d, causal, c.seed + 5000};
    const std::string tag = "N=" + std::to_string(long_n) + ", d=" + std::to_string(p.d) + ", " +
                            std::to_string(long_heads) + " heads" + (causal ? ", causal" : "");
    const double score_bytes = double(long_heads) * long_n * long_n * (sizeof(float) + sizeof(bf16));
    size_t free_b = 0, total_b = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    float* d_S = nullptr;  // rung 4 would need this first
    const cudaError_t e = cudaMalloc(&d_S, size_t(long_heads) * long_n * long_n * sizeof(float));
    if (e == cudaSuccess) {
        CUDA_CHECK(cudaFree(d_S));
        c.report.note("long run " + tag + ": cudaMalloc of rung 4's S succeeded on this GPU");
    } else {
        (void)cudaGetLastError();  // an allocation failure is not sticky: clear it and go on
        c.report.note("long run " + tag + ": rung 4 would need " + lesson::gb_text(score_bytes) +
                      " for S and P; cudaMalloc of S alone failed (" + cudaGetErrorString(e) + "), the GPU has " +
                      lesson::gb_text(double(free_b)) + " free of " + lesson::gb_text(double(total_b)));
    }
    setup(p);
    c.report.metric("long run: Q, K, V, O (rung 6's whole footprint), " + tag, 4.0 * p.elems() * 2 / 1e9, "GB");
    c.report.metric("long run: rung 4's S + P would be, " + tag, score_bytes / 1e9, "GB");
    const std::vector<Row> rows = sample_rows(p, 8);
    const std::vector<double> ref = reference_rows(p, rows);
    CUDA_CHECK(cudaMemset(p.d_O, 0xFF, p.elems() * sizeof(bf16)));
    rung6.attention(p.args());
    std::vector<float> got = copy_rows(p, rows);  // the sampled rows only: O is 4 x 2^17 x 128 values
    c.check(got, ref.data(),
            std::string(rung6.name) + " vs CPU, " + std::to_string(rows.size()) + " sampled rows, long run " + tag);
    const double ms = lesson::time_median_ms(std::min<int>(c.repeat, 3), [&] { rung6.attention(p.args()); });
    const double flop = 4.0 * double(long_n) * long_n * p.d * long_heads * (causal ? 0.5 : 1.0);
    const std::string name = std::string(rung6.name) + " @" + tag;
    c.report.variant_yardstick(name, ms, flop / (ms * 1e9), "TFLOP/s", c.cublas_tflops, c.cublas_name,
                               c.not_graded(""));
    c.report.work(name, flop, 4.0 * p.elems() * 2, ms);
    release(p);
}
