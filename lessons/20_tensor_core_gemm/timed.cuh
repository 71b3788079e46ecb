// Lesson 20 of the course (the tensor-core GEMM ladder), part 2: one timed shape. cuBLAS in its
// two configurations for the same bf16 inputs, every rung checked against cuBLAS's fp32 C, then
// all of them timed in turns. main.cu runs it for every timed shape, after the CPU checks
// (checks.cuh), and ends with the notes of every run (add_notes).
// Run: ./build/bin/tensor_core_gemm [--sizes=4096,8192]   (README.md is the handout)
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "common/ceilings.h"
#include "common/check.h"
#include "common/report.h"
#include "common/timer.h"
#include "verify/compare.h"
#include "verify/gemm_bf16.h"
#include "verify/matmul.h"
#include "verify/precision.h"

#include "problem.cuh"

// The best rung of a timed shape: its rate and name (0 and "" when none ran), its ratio to the
// faster cuBLAS configuration, and that configuration's name.
struct Best {
    double tflops = 0;
    std::string name;
    double fraction = NAN;
    std::string yardstick;
};

// The two cuBLAS configurations, both bf16 A and B with fp32 accumulation: fp32 C, the rungs' own
// output and the reference of their checks; bf16 C, which writes half the bytes of C and is the
// fastest GEMM cuBLAS has for these inputs at some shapes. A rung is compared with the faster of
// the two: the best cuBLAS does with the same inputs, not only the call that matches its output.
const char* const kCublasOut[2] = {"fp32 out", "bf16 out"};

// Part 2, one timed shape: cuBLAS with fp32 C (checked on sampled rows against the CPU) and with
// bf16 C (checked against the fp32 C, every element, at bf16's rounding), every rung that fits the
// shape (all of them, but at shapes only rung 13 takes) checked element by element against the
// fp32 C; then cuBLAS's two configurations and those rungs timed interleaved
// (lesson::time_interleaved_ms: round r takes one sample of each in turn, so a clock that drifts
// at the power limit falls on all of them alike), each ratio from the medians.
// Returns the best rung and sets the note of a shape too small to fill the GPU.
static Best time_shape(Context& c, const Shape& shape, size_t t, double peak, std::string& small) {
    Problem p{shape};
    setup(p, c.seed + 100 + 10 * t, c.encode);
    const Shape& s = p.s;
    const int sms = c.prop.multiProcessorCount;
    float* d_ref = nullptr;
    bf16* d_ref16 = nullptr;
    CUDA_CHECK(cudaMalloc(&d_ref, s.c() * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_ref16, s.c() * sizeof(bf16)));
    std::vector<float> h_ref(s.c()), h_C(s.c());
    const Gemm gref = p.gemm(d_ref, sms);
    run_once([&] { launch_cublas(c.handle, gref); }, d_ref, h_ref.data(), s.c());
    {
        const int samples = double(s.M) * s.N * s.K <= double(1 << 27) ? s.M : std::min(s.M, 16);
        std::vector<double> ref(size_t(samples) * s.N);
        std::vector<float> got(size_t(samples) * s.N);
        for (int i = 0; i < samples; ++i) {
            const int row = samples == 1 ? 0 : int(int64_t(i) * (s.M - 1) / (samples - 1));
            verify::matmul_reference(p.h_A.data() + size_t(row) * s.K, p.h_B.data(), ref.data() + size_t(i) * s.N, 1,
                                     s.N, s.K);  // row `row` of C, as a 1-row product
            std::copy_n(h_ref.begin() + size_t(row) * s.N, s.N, got.begin() + size_t(i) * s.N);
        }
        c.report.check(verify::compare(got.data(), ref.data(), got.size(), kTol,
                                       "cuBLAS vs CPU, " + std::to_string(samples) + " rows of " + s.text()));
    }
    {  // bf16 C: the same product rounded once more, to bf16 (relative error up to 2^-8 an element)
        CUDA_CHECK(cudaMemset(d_ref16, 0xFF, s.c() * sizeof(bf16)));
        launch_cublas(c.handle, gref, d_ref16, CUDA_R_16BF);
        CUDA_CHECK(cudaDeviceSynchronize());
        std::vector<uint16_t> bits(s.c());
        CUDA_CHECK(cudaMemcpy(bits.data(), d_ref16, s.c() * sizeof(bf16), cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < s.c(); ++i) h_C[i] = verify::bf16_float(bits[i]);
        c.report.check(verify::compare(h_C.data(), h_ref.data(), s.c(), verify::unit_roundoff(verify::kBf16) + 2 * kTol,
                                       "cuBLAS bf16 out vs cuBLAS fp32 out, every element of " + s.text()));
    }
    const Gemm g = p.gemm(p.d_C, sms);
    std::vector<const Rung*> here;
    for (const Rung* r : c.ladder)
        if (fits(*r, s)) here.push_back(r);
    for (const Rung* r : here) {
        run_once([&] { r->launch(g); }, p.d_C, h_C.data(), s.c());
        c.report.check(verify::compare_two_approximations(  // two fp32 results: verify/compare.h
            h_C.data(), h_ref.data(), s.c(), size_t(s.N), kTol,
            std::string(r->name) + " vs cuBLAS, every element (two-sided) of " + s.text()));
    }

    // Variants 0 and 1: cuBLAS with fp32 C and with bf16 C; 2 onwards: the rungs, in ladder order.
    const std::vector<double> ms = lesson::time_interleaved_ms(c.repeat, 2 + int(here.size()), [&](int v) {
        if (v == 0) launch_cublas(c.handle, gref);
        else if (v == 1) launch_cublas(c.handle, gref, d_ref16, CUDA_R_16BF);
        else here[size_t(v - 2)]->launch(g);
    });
    const double flop = 2.0 * double(s.M) * s.N * s.K;
    const double ab_bytes = double(s.a() + s.b()) * sizeof(bf16);
    const auto tflops = [&](double t_ms) { return flop / (t_ms * 1e9); };
    small = lesson::small_gemm_note(s.M, s.N, c.prop);
    for (int v = 0; v < 2; ++v) {  // "cuBLAS @shape" is fp32 C, as in every run before bf16 C was timed
        const std::string row = std::string(v == 0 ? "cuBLAS" : "cuBLAS bf16 out") + " @" + s.text();
        c.report.yardstick(std::string("cuBLAS GemmEx bf16 -> ") + (v == 0 ? "fp32" : "bf16") +
                               " (CUBLAS_COMPUTE_32F), " + s.text(),
                           tflops(ms[v]), "TFLOP/s");
        c.report.variant_bound(row, ms[v], tflops(ms[v]), "TFLOP/s", peak, "BF16 peak");
        c.report.work(row, flop, ab_bytes + double(s.c()) * (v == 0 ? sizeof(float) : sizeof(bf16)), ms[v]);
    }
    const int fast = ms[1] < ms[0] ? 1 : 0;
    const double yard = tflops(ms[fast]);
    Best best;
    best.yardstick = std::string("cuBLAS BF16 (") + kCublasOut[fast] + ")";
    for (size_t i = 0; i < here.size(); ++i) {
        const Rung* r = here[i];
        const double r_ms = ms[2 + i];
        const std::string name = std::string(r->name) + " @" + s.text();
        c.report.variant_yardstick(name, r_ms, tflops(r_ms), "TFLOP/s", yard, best.yardstick, small);
        c.report.work(name, flop, ab_bytes + double(s.c()) * sizeof(float), r_ms);
        if (tflops(r_ms) > best.tflops) {
            best.tflops = tflops(r_ms);
            best.name = r->name;
        }
    }
    best.fraction = best.tflops / yard;
    CUDA_CHECK(cudaFree(d_ref16));
    CUDA_CHECK(cudaFree(d_ref));
    release(p);
    return best;
}

// The notes of every run: the output and cuBLAS's two calls, the shapes the rungs take, the checks.
static void add_notes(lesson::Report& report, bool any_sm90a) {
    if (!any_sm90a)
        report.note("no target: the 0.90x-of-cuBLAS target is for the wgmma rungs 5-11 and 13 (sm_90a), and none ran");
    report.note(
        "output C is fp32. cuBLAS runs with CUDA_R_16BF inputs and CUBLAS_COMPUTE_32F twice: CUDA_R_32F C (the "
        "reference of every check) and CUDA_R_16BF C (a rate yardstick only: the rungs write fp32 C, twice its "
        "bytes); each ratio is against the faster of the two at its shape, the one the against column names");
    report.note(
        "shapes: rungs 1-2 take M, N, K multiples of 16 (edge tiles load zeros, edge fragments are not "
        "stored); rungs 3-12, 14 and 15 have no edge code and need the multiples in the rung table (all rungs "
        "together: M, N multiples of 256, K of 128); rung 13 takes any M and N and K a multiple of 8 (TMA fills "
        "the edges with zeros, the epilogue stores only inside C; B's rows lie N rounded up to 8 elements apart "
        "on the device, for cuBLAS too); other shapes are rejected with exit 2");
    report.note(
        "timed shapes compare each rung that fits them with cuBLAS's fp32 output, every element; cuBLAS is "
        "checked against the CPU on sampled rows (all rows for small shapes)");
}
