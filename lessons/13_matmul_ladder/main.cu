// Lesson 13 of the course (00-23): the SGEMM ladder, from shared-memory tiles to cuBLAS.
// Before: lesson 12 (12_transpose). Next: lesson 14 (14_reduction).
// Run: ./build/bin/matmul_ladder [--quick]   (--help lists every flag; README.md is the handout)
//
// The SGEMM ladder: from shared-memory tiles to the rate of cuBLAS.
//
// C = A * B in fp32, row-major (A is M x K, B is K x N, C is M x N), FFMA only (no tensor
// cores). Before: lesson 06 (tiled matmul) and lesson 12 (the transpose ladder). The ten
// rungs live in kernels/N_name.cuh, one file each with its launcher, so that a diff of two
// neighbouring files shows one idea. This file is the host side: flags, the rung table,
// allocation, the checks against a double-precision CPU reference (a square shape and two
// awkward ones) and, at the timed shape, element by element against cuBLAS SGEMM, timing
// and the report. README.md gives the reuse arithmetic of every rung. Next: tensor cores.
//
// Run: ./build/bin/matmul_ladder              every rung at 4096^3
//      ./build/bin/matmul_ladder --rung=10    one rung alone (1..10), still checked
//      ./build/bin/matmul_ladder --sweep      also rung 7 in 13 tile configurations
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <string>
#include <vector>

#include <cublas_v2.h>

#include "common/ceilings.h"
#include "common/check.h"
#include "common/device.h"
#include "common/flags.h"
#include "common/gemm.h"
#include "common/memory.h"
#include "common/report.h"
#include "common/timer.h"
#include "verify/compare.h"
#include "verify/gemm.h"
#include "verify/matmul.h"
#include "verify/parallel.h"
#include "verify/random.h"

#include "kernels/10_spread_copies.cuh"
#include "kernels/1_smem_tiles.cuh"
#include "kernels/2_reg_tile_1d.cuh"
#include "kernels/3_reg_tile_2d.cuh"
#include "kernels/4_vectorized.cuh"
#include "kernels/5_conflict_free.cuh"
#include "kernels/6_double_buffered.cuh"
#include "kernels/7_warp_tiled.cuh"
#include "kernels/8_wide_tile.cuh"
#include "kernels/9_register_double_buffer.cuh"

// cuBLAS is column-major. A row-major M x K matrix read column-major is its transpose, so
// lesson::sgemm_row_major asks for C^T (N x M) = B^T (N x K) * A^T (K x M): B first, M and N
// swapped (common/gemm.h; lesson 08 writes the call out). No copies, no transposes. main()
// sets CUBLAS_DEFAULT_MATH: true fp32, no TF32 tensor cores.
static void launch_cublas(cublasHandle_t handle, const Gemm& g) {
    lesson::sgemm_row_major(handle, g.M, g.N, g.K, g.A, g.B, g.C);
}

// The ladder, one row per rung: its name in the report and its launcher (kernels/N_name.cuh).
struct Rung {
    const char* name;
    void (*launch)(const Gemm&);
    int smem_bytes;  // dynamic shared memory per block; 0: static only, under the 48 KB every GPU gives
};
static const Rung kLadder[] = {
    {"1 shared-memory tiles 32x32", rung1::launch, 0},
    {"2 1D register tile 8x1", rung2::launch, 0},
    {"3 2D register tile 8x8", rung3::launch, 0},
    {"4 float4 loads, A^T in smem", rung4::launch, 0},
    {"5 bank-conflict-free", rung5::launch, 0},
    {"6 double-buffered", rung6::launch, 0},
    {"7 warp tiles + cp.async", rung7::launch<rung7::Default>, rung7::Default::kSmemBytes},
    {"8 128x256 tile, 8x16 per thread", rung8::launch, 0},
    {"9 register double buffering", rung9::launch, 0},
    {"10 k32 tile, copies spread over FFMA", rung10::launch<rung10::Default>, rung10::Default::kSmemBytes},
};
constexpr int kRungs = int(std::size(kLadder));

// --sweep: rung 7 over tile configurations ("BMxBNxBK wWMxWN tTMxTN sSTAGES").
template <class Cfg>
constexpr Rung rung7_as(const char* name) {
    return {name, rung7::launch<Cfg>, Cfg::kSmemBytes};
}
using rung7::WarpTiling;  // kBM, kBN, kBK, kWM, kWN, kTM, kTN, kStages, kMinBlocks
static const Rung kSweep[] = {
    rung7_as<WarpTiling<128, 128, 8, 64, 32, 8, 8, 2, 2>>("7: 128x128x8 w64x32 t8x8 s2"),
    rung7_as<WarpTiling<128, 128, 8, 64, 32, 8, 8, 3, 2>>("7: 128x128x8 w64x32 t8x8 s3"),
    rung7_as<WarpTiling<128, 128, 8, 32, 64, 8, 8, 3, 2>>("7: 128x128x8 w32x64 t8x8 s3"),
    rung7_as<WarpTiling<128, 128, 16, 64, 32, 8, 8, 3, 2>>("7: 128x128x16 w64x32 t8x8 s3"),
    rung7_as<WarpTiling<128, 128, 8, 64, 64, 16, 8, 2, 2>>("7: 128x128x8 w64x64 t16x8 s2"),
    rung7_as<WarpTiling<128, 128, 8, 64, 64, 16, 8, 3, 2>>("7: 128x128x8 w64x64 t16x8 s3"),
    rung7_as<WarpTiling<128, 128, 8, 64, 64, 16, 8, 4, 2>>("7: 128x128x8 w64x64 t16x8 s4"),
    rung7_as<WarpTiling<128, 128, 16, 64, 64, 16, 8, 3, 2>>("7: 128x128x16 w64x64 t16x8 s3"),
    rung7_as<WarpTiling<128, 128, 16, 64, 64, 16, 8, 4, 2>>("7: 128x128x16 w64x64 t16x8 s4"),
    rung7_as<WarpTiling<128, 128, 8, 64, 64, 8, 16, 3, 2>>("7: 128x128x8 w64x64 t8x16 s3"),
    rung7_as<WarpTiling<128, 256, 8, 64, 64, 16, 8, 3, 1>>("7: 128x256x8 w64x64 t16x8 s3"),
    rung7_as<WarpTiling<256, 128, 8, 64, 64, 16, 8, 3, 1>>("7: 256x128x8 w64x64 t16x8 s3"),
    rung7_as<WarpTiling<128, 256, 16, 64, 64, 16, 8, 3, 1>>("7: 128x256x16 w64x64 t16x8 s3"),
};

using Shape = lesson::GemmShape;  // common/gemm.h: M, N, K and the arrays' sizes
constexpr double kTol = 1e-4;     // rel-L2, fp32 GEMM (lesson contract)

// Poison C (0xFF bytes are NaN), run once, copy C back: that copy is what gets verified.
template <class Launch>
static void run_once(Launch launch, const Gemm& g, float* h_C) {
    const size_t bytes = size_t(g.M) * g.N * sizeof(float);
    CUDA_CHECK(cudaMemset(g.C, 0xFF, bytes));
    launch();
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(h_C, g.C, bytes, cudaMemcpyDeviceToHost));
}

// Part 1: cuBLAS and the chosen rungs against the double-precision CPU reference, every element.
static double check_on_cpu(const Shape& s, uint64_t seed, cublasHandle_t handle, const std::vector<const Rung*>& rungs,
                           bool inject, lesson::Report& report) {
    std::vector<float> h_A(s.a()), h_B(s.b()), h_C(s.c());
    verify::fill_uniform(h_A.data(), h_A.size(), seed);
    verify::fill_uniform(h_B.data(), h_B.size(), seed + 1);
    std::vector<double> ref(s.c());
    lesson::HostTimer cpu;
    verify::matmul_reference(h_A.data(), h_B.data(), ref.data(), s.M, s.N, s.K);
    const double cpu_ms = cpu.ms();

    float *d_A = nullptr, *d_B = nullptr, *d_C = nullptr;
    CUDA_CHECK(cudaMalloc(&d_A, s.a() * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_B, s.b() * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_C, s.c() * sizeof(float)));
    CUDA_CHECK(cudaMemcpy(d_A, h_A.data(), s.a() * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_B, h_B.data(), s.b() * sizeof(float), cudaMemcpyHostToDevice));
    const Gemm g{s.M, s.N, s.K, d_A, d_B, d_C};
    const auto check = [&](const std::string& name, bool inject_here) {  // --inject-fault hits the last one
        if (inject_here) verify::inject_fault(h_C.data(), s.c(), seed);
        report.check(
            verify::compare(h_C.data(), ref.data(), s.c(), kTol, name + " vs CPU, every element of " + s.text()));
    };
    run_once([&] { launch_cublas(handle, g); }, g, h_C.data());
    check("cuBLAS SGEMM fp32", inject && rungs.empty());
    for (const Rung* r : rungs) {
        run_once([&] { r->launch(g); }, g, h_C.data());
        check(r->name, inject && r == rungs.back());
    }
    CUDA_CHECK(cudaFree(d_A));
    CUDA_CHECK(cudaFree(d_B));
    CUDA_CHECK(cudaFree(d_C));
    return cpu_ms;
}

int main(int argc, char** argv) {
    // Flags first: bad input exits 2 before any CUDA call.
    lesson::CommonOptions opt;
    int64_t n = 4096, m = 4096, k = 4096, rung = 0;
    bool sweep = false;
    lesson::Cli cli("matmul_ladder",
                    "SGEMM C = A*B (fp32, row-major): ten hand-written rungs against cuBLAS on an M x N x K shape.");
    lesson::add_common_flags(cli, opt);
    cli.add_int("n", &n, 1, 16384, "columns of B and C (and M, K unless given)", 256);
    cli.add_int("m", &m, 1, 16384, "rows of A and C (equal to --n unless given)", 256);
    cli.add_int("k", &k, 1, 16384, "columns of A, rows of B (equal to --n unless given)", 256);
    cli.add_int("rung", &rung, 0, kRungs, "run and check this rung alone (0: every rung)");
    cli.add_switch("sweep", &sweep, "also time rung 7 in every tile configuration of its sweep table");
    cli.parse_or_exit(argc, argv);
    if (!cli.given("m")) m = n;
    if (!cli.given("k")) k = n;
    const Shape timed{int(m), int(n), int(k)};
    // Part 1 shapes: a square one, one whose rows are not 16-byte aligned (K, N odd) and one that
    // is aligned but cuts every tile short. Part 2: the timed shape.
    const std::vector<Shape> checks = opt.quick
                                          ? std::vector<Shape>{{128, 128, 128}, {201, 123, 77}, {100, 260, 44}}
                                          : std::vector<Shape>{{1024, 1024, 1024}, {1000, 1023, 1025}, {333, 516, 260}};

    // Host: A, B, the cuBLAS result and one rung's result as floats (part 2), or the same plus a
    // double reference (part 1). Device: A, B, two results.
    uint64_t host_bytes = (timed.a() + timed.b() + 2 * timed.c()) * sizeof(float) + 16 * size_t(timed.N) * 8;
    for (const Shape& s : checks)
        host_bytes = std::max<uint64_t>(host_bytes, (s.a() + s.b() + s.c()) * sizeof(float) + s.c() * sizeof(double));
    const std::string what = "--m=" + std::to_string(m) + " --n=" + std::to_string(n) + " --k=" + std::to_string(k);
    lesson::require_host_memory(host_bytes, "pageable", what);
    cudaDeviceProp prop = lesson::pick_device(opt.device);
    lesson::require_device_memory((timed.a() + timed.b() + 2 * timed.c()) * sizeof(float), what);

    lesson::Report report("13_matmul_ladder");
    report.device(prop.name, prop.major, prop.minor, prop.multiProcessorCount, prop.totalGlobalMem / 1e9);
    report.config("M", m);
    report.config("N", n);
    report.config("K", k);
    report.config("rung", rung);
    report.config("check_shapes", checks[0].text() + ", " + checks[1].text() + ", " + checks[2].text());
    report.config("rung7_tiles", rung7::tiles_text<rung7::Default>());
    report.config("repeat", opt.repeat);
    report.config("seed", opt.seed);
    report.config("tolerance_rel_l2", kTol);

    // The rungs to run: every one, or --rung=N alone. A rung that asks for more shared memory per
    // block than this GPU can give (rung 7's 74 KB on a 64 KB Turing) is skipped, with a note.
    const auto runnable = [&](const Rung& r) {
        if (size_t(r.smem_bytes) <= prop.sharedMemPerBlockOptin) return true;
        report.note(std::string("skipped '") + r.name + "': it needs " + std::to_string(r.smem_bytes) +
                    " bytes of shared memory per block, this GPU gives at most " +
                    std::to_string(prop.sharedMemPerBlockOptin) + " (sharedMemPerBlockOptin)");
        return false;
    };
    std::vector<const Rung*> ladder, timed_rungs;
    for (int i = 0; i < kRungs; ++i)
        if ((rung == 0 || rung == i + 1) && runnable(kLadder[i])) ladder.push_back(&kLadder[i]);
    timed_rungs = ladder;
    if (sweep)
        for (const Rung& r : kSweep)
            if (runnable(r)) timed_rungs.push_back(&r);

    cublasHandle_t handle;
    CUBLAS_CHECK(cublasCreate(&handle));
    CUBLAS_CHECK(cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH));  // true fp32: no TF32 tensor cores

    // Part 1: correctness on the CPU shapes.
    const uint64_t seed = static_cast<uint64_t>(opt.seed);
    double cpu_ms = 0;
    for (size_t i = 0; i < checks.size(); ++i) {
        const double ms = check_on_cpu(checks[i], seed + 10 * i, handle, ladder, opt.inject_fault && i == 0, report);
        if (i == 0) cpu_ms = ms;
    }
    report.cpu_reference_ms(cpu_ms, verify::host_threads());  // for the first (square) shape, all host cores

    // Part 2: speed at the timed shape. Allocate, copy in.
    std::vector<float> h_A(timed.a()), h_B(timed.b()), h_ref(timed.c()), h_C(timed.c());
    verify::fill_uniform(h_A.data(), h_A.size(), seed + 100);
    verify::fill_uniform(h_B.data(), h_B.size(), seed + 101);
    float *d_A = nullptr, *d_B = nullptr, *d_C = nullptr, *d_ref = nullptr;
    CUDA_CHECK(cudaMalloc(&d_A, timed.a() * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_B, timed.b() * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_C, timed.c() * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_ref, timed.c() * sizeof(float)));
    CUDA_CHECK(cudaMemcpy(d_A, h_A.data(), timed.a() * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_B, h_B.data(), timed.b() * sizeof(float), cudaMemcpyHostToDevice));
    const double flop = 2.0 * double(timed.M) * timed.N * timed.K;
    const auto gflops = [&](double ms) { return flop / (ms * 1e6); };

    // cuBLAS: the yardstick and the GPU-side reference; itself checked against the CPU on
    // sampled rows (all rows for small shapes).
    const Gemm gref{timed.M, timed.N, timed.K, d_A, d_B, d_ref};
    run_once([&] { launch_cublas(handle, gref); }, gref, h_ref.data());
    {
        const int64_t samples =
            double(timed.M) * timed.N * timed.K <= double(1 << 27) ? timed.M : std::min(timed.M, 16);
        const verify::GemmRows ref = verify::gemm_reference_rows(
            h_A.data(), h_B.data(), timed.N, timed.K, verify::sample_rows(timed.M, samples, seed + 102, true));
        report.check(
            ref.check_in(h_ref.data(), kTol, "cuBLAS vs CPU, " + std::to_string(samples) + " rows of " + timed.text()));
    }
    // cuBLAS is timed before the rungs and again after them, and the faster time is the yardstick:
    // a cuBLAS sample that caught the GPU at a lower clock would otherwise flatter every rung.
    const double cublas_first_ms = lesson::time_median_ms(int(opt.repeat), [&] { launch_cublas(handle, gref); });

    // Each rung: launch, copy out, verify against cuBLAS element by element, time.
    const Gemm g{timed.M, timed.N, timed.K, d_A, d_B, d_C};
    std::vector<double> rung_ms;
    for (const Rung* r : timed_rungs) {
        run_once([&] { r->launch(g); }, g, h_C.data());
        report.check(verify::compare(h_C.data(), h_ref.data(), timed.c(), kTol,
                                     std::string(r->name) + " vs cuBLAS, every element of " + timed.text()));
        rung_ms.push_back(lesson::time_median_ms(int(opt.repeat), [&] { r->launch(g); }));
    }
    const double cublas_last_ms = lesson::time_median_ms(int(opt.repeat), [&] { launch_cublas(handle, gref); });
    const double cublas_ms = std::min(cublas_first_ms, cublas_last_ms);
    const double cublas_gflops = gflops(cublas_ms);
    const double peak = lesson::peak_gflops(prop, int(opt.device), lesson::MathUnit::Fp32Simt);
    const std::string small = lesson::small_gemm_note(timed.M, timed.N, prop);
    report.bound("FP32 FMA peak from the SM clock", peak, "GFLOP/s");
    report.yardstick("cuBLAS SGEMM fp32 (CUBLAS_DEFAULT_MATH), same shape", cublas_gflops, "GFLOP/s");
    report.metric("cuBLAS SGEMM fp32, timed before the rungs", cublas_first_ms, "ms");
    report.metric("cuBLAS SGEMM fp32, timed after the rungs", cublas_last_ms, "ms");
    report.timing(lesson::kTimingMethod);
    report.variant_bound("cuBLAS SGEMM fp32", cublas_ms, cublas_gflops, "GFLOP/s", peak, "FP32 peak");
    std::string best;
    double best_gflops = 0;
    for (size_t i = 0; i < timed_rungs.size(); ++i) {
        const double ms = rung_ms[i];
        report.variant_yardstick(timed_rungs[i]->name, ms, gflops(ms), "GFLOP/s", cublas_gflops, "cuBLAS", small);
        if (i < ladder.size() && gflops(ms) > best_gflops) {  // the key result is the ladder's best rung
            best_gflops = gflops(ms);
            best = timed_rungs[i]->name;
        }
    }

    report.note(
        "edges: every rung handles any M, N, K itself (no fallback): tiles that cross the matrix edge load "
        "zeros and store only inside C; rungs 4-10 use 16-byte accesses only where a row starts 16-byte "
        "aligned (K % 4 == 0 for A, N % 4 == 0 for B and C) and guarded 4-byte ones elsewhere; rungs 7-10 "
        "load tiles that lie wholly inside the matrices without checks");
    report.note(
        "timed-shape checks compare each rung with cuBLAS's output, every element; cuBLAS is checked "
        "against the CPU on sampled rows");
    char key[160];
    if (best.empty()) std::snprintf(key, sizeof key, "no ladder rung ran at %s (see the notes)", timed.text().c_str());
    else
        std::snprintf(key, sizeof key, "best rung '%s' %.0f GFLOP/s at %s", best.c_str(), best_gflops,
                      timed.text().c_str());
    report.key_result(key, best_gflops / cublas_gflops, "cuBLAS fp32", lesson::Against::Yardstick, small);
    report.default_size(cli.at_default_size());
    report.target("best rung vs cuBLAS fp32", best_gflops / cublas_gflops, 0.98, "x");

    CUBLAS_CHECK(cublasDestroy(handle));
    CUDA_CHECK(cudaFree(d_A));
    CUDA_CHECK(cudaFree(d_B));
    CUDA_CHECK(cudaFree(d_C));
    CUDA_CHECK(cudaFree(d_ref));
    return report.finish(opt.json);
}
