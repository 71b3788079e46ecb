// Lesson 20 of the course (the tensor-core GEMM ladder): the checks against the CPU. Part 1:
// cuBLAS and every rung that fits each small shape, every element against the double-precision
// reference. Part 1b: the persistent rungs 10, 11 and 13 with several pieces per cluster. main.cu
// runs them before the timed shapes (which it checks against cuBLAS).
// Run: ./build/bin/tensor_core_gemm --quick   (README.md is the handout)
#pragma once
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/check.h"
#include "common/needs.h"
#include "common/report.h"
#include "common/timer.h"
#include "verify/compare.h"
#include "verify/matmul.h"
#include "verify/parallel.h"

#include "kernels/10_persistent.cuh"
#include "kernels/11_wgmma_pipelined.cuh"
#include "kernels/13_any_shape.cuh"
#include "kernels/9_cluster_multicast.cuh"
#include "problem.cuh"

// Part 1: cuBLAS and every rung that fits the shape against the double-precision CPU reference.
// --inject-fault corrupts the last result checked at the first shape.
static void check_against_cpu(Context& c, const std::vector<Shape>& checks, bool inject_fault) {
    double cpu_ms = 0;
    for (size_t i = 0; i < checks.size(); ++i) {
        Problem p{checks[i]};
        setup(p, c.seed + 10 * i, c.encode);
        const Shape& s = p.s;
        std::vector<double> ref(s.c());
        lesson::HostTimer cpu;
        verify::matmul_reference(p.h_A.data(), p.h_B.data(), ref.data(), s.M, s.N, s.K);
        if (i == 0) cpu_ms = cpu.ms();
        std::vector<float> h_C(s.c());
        const Gemm g = p.gemm(p.d_C, c.prop.multiProcessorCount);
        std::vector<const Rung*> here;
        for (const Rung* r : c.ladder)
            if (fits(*r, s)) here.push_back(r);
        const bool inject = inject_fault && i == 0;
        run_once([&] { launch_cublas(c.handle, g); }, p.d_C, h_C.data(), s.c());
        if (inject && here.empty()) verify::inject_fault(h_C.data(), s.c(), c.seed);
        c.report.check(
            verify::compare(h_C.data(), ref.data(), s.c(), kTol, "cuBLAS vs CPU, every element of " + s.text()));
        for (const Rung* r : here) {
            run_once([&] { r->launch(g); }, p.d_C, h_C.data(), s.c());
            if (inject && r == here.back()) verify::inject_fault(h_C.data(), s.c(), c.seed);
            c.report.check(verify::compare(h_C.data(), ref.data(), s.c(), kTol,
                                           std::string(r->name) + " vs CPU, every element of " + s.text()));
        }
        release(p);
    }
    c.report.cpu_reference_ms(cpu_ms, verify::host_threads());  // the first (1024^3) shape, all host cores
}

// Part 1b: rungs 10, 11 and 13 with several pieces per cluster, unless a timed shape gives them that.
// Their grid is at most one cluster of 2 CTAs (one per SM) per 2 SMs, so (1 + floor(sqrt(SMs)))^2
// pieces of 256 x 256, more than the SMs, give every cluster two or more: 144 pieces (3072 x 3072)
// on a 132-SM H100 or H200, for at most 66 clusters. K = 256 is 4 k-tiles a piece: the 4-stage
// ring is refilled across pieces, and every barrier changes phase. Checked: 2 rows in every 64
// (every piece, CTA and consumer warpgroup) against the CPU, every element against rung 9 (one
// cluster per piece; two fp32 results). Not against cuBLAS: racecheck reports hazards inside the
// kernels cuBLAS picks for larger GEMMs (lesson 21's handout, at 1024^3), and --quick runs under
// compute-sanitizer. `rung9` is the ladder's row of rung 9.
static void check_persistent(Context& c, const std::vector<Shape>& timed, const Rung& rung9) {
    std::vector<const Rung*> persistent;  // the chosen rungs that loop over pieces
    for (const Rung* r : c.ladder)
        if (r->launch == rung10::launch || r->launch == rung11::launch || r->launch == rung13::launch)
            persistent.push_back(r);
    const int sms = c.prop.multiProcessorCount;
    const bool timed_has_pieces = std::any_of(
        timed.begin(), timed.end(), [&](const Shape& s) { return (s.M / 256) * (s.N / 256) > sms && s.K >= 256; });
    if (persistent.empty() || timed_has_pieces) return;
    const int side = 256 * (1 + int(std::sqrt(double(sms))));
    Problem p{{side, side, 256}};
    setup(p, c.seed + 50, c.encode);
    const Shape& s = p.s;
    std::vector<int> rows;  // 2 in every 64, at offsets that move from band to band
    for (int b = 0; b < s.M / 64; ++b)
        for (int h : {0, 32}) rows.push_back(64 * b + h + (7 + 13 * b) % 32);
    std::vector<float> A_rows(rows.size() * size_t(s.K));
    for (size_t k = 0; k < rows.size(); ++k)
        std::copy_n(p.h_A.begin() + size_t(rows[k]) * s.K, s.K, A_rows.begin() + k * s.K);
    std::vector<double> ref(rows.size() * size_t(s.N));
    verify::matmul_reference(A_rows.data(), p.h_B.data(), ref.data(), int64_t(rows.size()), s.N, s.K);
    const std::string where = std::to_string(rows.size()) + " rows (2 in every 64) of " + s.text();
    const auto check_rows = [&](const std::vector<float>& C, const std::string& name) {
        std::vector<float> got(rows.size() * size_t(s.N));
        for (size_t k = 0; k < rows.size(); ++k)
            std::copy_n(C.begin() + size_t(rows[k]) * s.N, s.N, got.begin() + k * s.N);
        c.report.check(verify::compare(got.data(), ref.data(), got.size(), kTol, name + " vs CPU, " + where));
    };
    float* d_ref = nullptr;
    CUDA_CHECK(cudaMalloc(&d_ref, s.c() * sizeof(float)));
    std::vector<float> h_ref(s.c()), h_C(s.c());
    const Gemm g = p.gemm(p.d_C, sms);
    const Gemm g9 = p.gemm(d_ref, sms);
    const bool rung9_runs = lesson::why_not(rung9.needs, lesson::gpu_limits()).empty();
    if (rung9_runs) {
        run_once([&] { rung9::launch(g9); }, d_ref, h_ref.data(), s.c());
        check_rows(h_ref, rung9.name);
    }
    for (const Rung* r : persistent) {
        run_once([&] { r->launch(g); }, p.d_C, h_C.data(), s.c());
        check_rows(h_C, r->name);
        if (rung9_runs)
            c.report.check(verify::compare_two_approximations(
                h_C.data(), h_ref.data(), s.c(), size_t(s.N), kTol,
                std::string(r->name) + " vs rung 9, every element (two-sided) of " + s.text()));
    }
    c.report.note("rungs 10, 11 and 13 checked at " + s.text() + ": " + std::to_string((s.M / 256) * (s.N / 256)) +
                  " pieces of 256 x 256 for at most " + std::to_string(sms / 2) +
                  " clusters of 2 CTAs: two or more pieces per cluster");
    CUDA_CHECK(cudaFree(d_ref));
    release(p);
}
