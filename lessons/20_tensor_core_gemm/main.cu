// Lesson 20 of the course (00-24): the tensor-core GEMM ladder, from WMMA to wgmma + TMA on Hopper.
// Before: lesson 13 (the FP32 SGEMM ladder, FFMA only). Next: lesson 21 (attention).
// Run: ./build/bin/tensor_core_gemm [--rung=N[,N]] [--sizes=1024,2048,4096,8192]   (README.md is the handout)
//
// C = A * B, row-major, A (M x K) and B (K x N) in bf16, C (M x N) in fp32, accumulated in fp32 on
// the tensor cores. Fifteen rungs in kernels/N_name.cuh, one file each with its launcher, so that
// a diff of two neighbouring files shows one idea: WMMA (1-2), mma.sync + ldmatrix (3), a swizzle
// and a cp.async pipeline (4), and on Hopper (sm_90a only) wgmma from thread-written shared memory
// (5), fed by TMA (6), two consumer warpgroups (7), a producer warpgroup (8), a cluster with TMA
// multicast (9), a persistent grid (10), one wgmma group kept in flight (11), FP8 E4M3 operands
// with one scale per tensor (12), rung 11 for any M and N (13), FP8 with block scales promoted
// per k-tile (14), and that promotion while the next k-tile's wgmmas run (15). This file is the host side:
// flags, the rung table, and the parts in order: the checks against a double-precision CPU
// reference (checks.cuh: 1024^3 and three more shapes), then at every timed size each rung that
// fits it against cuBLAS's fp32 C element by element, and all of them timed in turns with cuBLAS
// in its two configurations (fp32 C and bf16 C; the faster is the yardstick): timed.cuh. The
// problem on the device, cuBLAS's calls and the shape flags: problem.cuh. The FP8 rungs (12, 14,
// 15) have their own problem, checks and yardsticks (cuBLASLt FP8, and rung 12 for 14-15): fp8.cuh, part 3.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include <cublasLt.h>
#include <cublas_v2.h>

#include "common/ceilings.h"
#include "common/check.h"
#include "common/device.h"
#include "common/flags.h"
#include "common/memory.h"
#include "common/needs.h"
#include "common/report.h"
#include "common/tensor_map.h"
#include "common/timer.h"
#include "verify/compare.h"
#include "verify/matmul.h"

#include "kernels/10_persistent.cuh"
#include "kernels/11_wgmma_pipelined.cuh"
#include "kernels/12_fp8_per_tensor.cuh"
#include "kernels/13_any_shape.cuh"
#include "kernels/14_fp8_block_scaled.cuh"
#include "kernels/15_fp8_overlapped_promotion.cuh"
#include "kernels/1_wmma_naive.cuh"
#include "kernels/2_wmma_smem.cuh"
#include "kernels/3_mma_sync.cuh"
#include "kernels/4_swizzle_cp_async.cuh"
#include "kernels/5_wgmma_cp_async.cuh"
#include "kernels/6_wgmma_tma.cuh"
#include "kernels/7_two_warpgroups.cuh"
#include "kernels/8_warp_specialized.cuh"
#include "kernels/9_cluster_multicast.cuh"

#include "checks.cuh"  // parts 1 and 1b
#include "fp8.cuh"     // part 3
#include "problem.cuh"
#include "timed.cuh"  // part 2

// The ladder, one row per rung: name, launcher, the multiples M, N and K must be, and what it
// needs from the GPU (common/needs.h): rungs 1-4 bf16 tensor cores (cc 8.0) in an sm_80 or newer
// image, rungs 5-15 an sm_90a image on a Hopper GPU (9-15 also clusters); each its dynamic shared
// memory per block. Rungs 12, 14 and 15 take FP8 operands: their launcher is the row's last field.
// Rung 13 takes any M and N (multiples of 1) and K a multiple of 8.
static lesson::Needs sm80(size_t smem) { return {80, "bf16 WMMA and mma.sync", 800, false, false, smem, ""}; }
static lesson::Needs sm90a(size_t smem, bool clusters) { return {0, "", 0, true, clusters, smem, ""}; }
static const Rung kLadder[] = {
    {"1 WMMA from global memory", rung1::launch, 16, 16, 16, sm80(0)},
    {"2 WMMA, shared-memory tiles", rung2::launch, 16, 16, 16, sm80(0)},
    {"3 mma.sync, ldmatrix, padded tiles", rung3::launch, 128, 128, 64, sm80(rung3::kSmemBytes)},
    {"4 mma.sync, ldmatrix, swizzle, cp.async", rung4::launch, 128, 128, 64, sm80(rung4::kSmemBytes)},
    {"5 wgmma, cp.async + proxy fence, 64x128", rung5::launch, 64, 128, 64, sm90a(rung5::kSmemBytes, false)},
    {"6 wgmma + TMA, 64x128", rung6::launch, 64, 128, 64, sm90a(rung6::kSmemBytes, false)},
    {"7 128x256, two consumer warpgroups", rung7::launch, 128, 256, 64, sm90a(rung7::kSmemBytes, false)},
    {"8 producer warpgroup, setmaxnreg", rung8::launch, 128, 256, 64, sm90a(rung8::kSmemBytes, false)},
    {"9 cluster of 2, B multicast", rung9::launch, 256, 256, 64, sm90a(rung9::kSmemBytes, true)},
    {"10 persistent, tile scheduler", rung10::launch, 256, 256, 64, sm90a(rung10::kSmemBytes, true)},
    {"11 one wgmma group in flight", rung11::launch, 256, 256, 64, sm90a(rung11::kSmemBytes, true)},
    {"12 FP8 E4M3, one scale per tensor", nullptr, 256, 256, 128, sm90a(rung12::kSmemBytes, true), rung12::launch},
    {"13 any M and N", rung13::launch, 1, 1, 8, sm90a(rung13::kSmemBytes, true)},
    {"14 FP8 E4M3, block scales", nullptr, 256, 128, 128, sm90a(rung14::kSmemBytes, true), rung14::launch},
    {"15 block scales, promotion overlapped", nullptr, 256, 128, 128, sm90a(rung15::kSmemBytes, true), rung15::launch},
};
constexpr int kRungs = int(std::size(kLadder));

// The rungs of --rung: "0" every rung, else one number or a comma-separated list. Bad input exits 2.
static std::vector<const Rung*> chosen_rungs(const std::string& list) {
    std::vector<const Rung*> chosen;
    std::stringstream in(list);
    for (std::string item; std::getline(in, item, ',');) {
        char* end = nullptr;
        const long v = std::strtol(item.c_str(), &end, 10);
        if (item.empty() || *end != '\0' || v < 0 || v > kRungs || (v == 0 && list != "0"))
            lesson::bad_input("--rung=" + list + ": 0 (every rung), or rungs in [1, " + std::to_string(kRungs) +
                              "], e.g. 6 or 2,6");
        if (v > 0 && std::find(chosen.begin(), chosen.end(), &kLadder[v - 1]) == chosen.end())
            chosen.push_back(&kLadder[v - 1]);
    }
    if (list == "0")
        for (const Rung& r : kLadder) chosen.push_back(&r);
    if (chosen.empty()) lesson::bad_input("--rung=" + list + ": no rung");
    return chosen;
}

// Every chosen rung must handle every timed shape; exit 2 otherwise.
static void require_fits(const std::vector<Shape>& timed, const std::vector<const Rung*>& chosen) {
    for (const Shape& s : timed)
        for (const Rung* r : chosen)
            if (!fits(*r, s))
                lesson::bad_input(
                    "shape " + s.text() + ": rung '" + r->name + "' needs M % " + std::to_string(r->mult_m) +
                    " == 0, N % " + std::to_string(r->mult_n) + " == 0, K % " + std::to_string(r->mult_k) +
                    " == 0 (all rungs: multiples of 256, 256, 128; rungs 1-2 alone: of 16; rung 13 alone: "
                    "any M and N, K of 8)");
}

int main(int argc, char** argv) {
    // Flags first: bad input exits 2 before any CUDA call.
    lesson::CommonOptions opt;
    int64_t n = 4096, m = 4096, k = 4096;
    std::string sizes, rungs = "0";
    lesson::Cli cli("tensor_core_gemm",
                    "bf16 GEMM C = A*B (fp32 accumulate and output, row-major): twelve hand-written tensor-core rungs "
                    "against cublasGemmEx, and three FP8 E4M3 rungs against cuBLASLt.");
    lesson::add_common_flags(cli, opt);
    cli.add_int("n", &n, 1, 16384, "columns of B and C (and M, K unless given)", 512);
    cli.add_int("m", &m, 1, 16384, "rows of A and C (equal to --n unless given)", 512);
    cli.add_int("k", &k, 8, 16384, "columns of A, rows of B (equal to --n unless given)", 512);
    cli.add_string("sizes", &sizes,
                   "comma-separated square sizes to time, e.g. 1024,2048,4096,8192 (replaces --m/--n/--k)");
    cli.add_string("rung", &rungs, "run and check these rungs alone: 8, or a list such as 2,8 (0: every rung)");
    cli.parse_or_exit(argc, argv);
    if (!cli.given("m")) m = n;
    if (!cli.given("k")) k = n;
    std::vector<Shape> timed = timed_shapes(sizes, m, n, k);
    const std::vector<const Rung*> chosen = chosen_rungs(rungs);
    require_fits(timed, chosen);
    // CPU-checked shapes: 1024^3 (every element), a non-square one, one for rungs 1-2 whose sizes
    // are multiples of 16 but not of their tiles, and one for rung 13: N odd, K not a multiple of
    // 64, and M past a multiple of 256 by less than 128 (the last pieces' rank-1 tiles lie past M);
    // without --quick it has more pieces than an H100 or H200 has clusters.
    const std::vector<Shape> checks =
        opt.quick ? std::vector<Shape>{{256, 256, 256}, {512, 256, 192}, {208, 80, 48}, {300, 1001, 72}}
                  : std::vector<Shape>{{1024, 1024, 1024}, {768, 512, 320}, {208, 80, 48}, {2100, 2001, 72}};
    uint64_t host_bytes = 0, dev_bytes = 0;
    for (const Shape& s : timed) {  // floats + bits of A and B, cuBLAS's two results and one rung's
        host_bytes = std::max<uint64_t>(host_bytes, (s.a() + s.b()) * 6 + 2 * s.c() * sizeof(float) + s.c() * 2);
        dev_bytes = std::max<uint64_t>(dev_bytes, (s.a() + s.b()) * 2 + 16 * s.c() +
                                                      kLtWorkspace);  // part 3's most: 4 FP8 code arrays, 4 Cs
    }
    for (const Shape& s : checks) host_bytes = std::max<uint64_t>(host_bytes, (s.a() + s.b()) * 6 + s.c() * 12);
    const std::string what =
        sizes.empty() ? "--m=" + std::to_string(m) + " --n=" + std::to_string(n) + " --k=" + std::to_string(k)
                      : "--sizes=" + sizes;
    lesson::require_host_memory(host_bytes, "pageable", what);
    cudaDeviceProp prop = lesson::pick_device(opt.device);  // also learns which image the driver loaded
    lesson::Report report("20_tensor_core_gemm");
    report.device(prop);
    // cuBLAS's bf16 GemmEx is the reference of every check and the yardstick: without it
    // (cc 7.5, a T4) nothing of this lesson can run.
    const std::string no_cublas = lesson::why_not({80, "bf16 tensor cores"}, lesson::gpu_limits());
    if (!no_cublas.empty())
        return report.skip("cuBLAS BF16 GemmEx, the reference of every check, " + no_cublas, opt.json);
    lesson::require_device_memory(dev_bytes, what);

    // At the default size rung 13 (where it runs) is also timed, beside cuBLAS, at an awkward shape
    // of 4096^3's work and memory.
    const Rung& rung13 = kLadder[12];
    if (cli.at_default_size() && std::find(chosen.begin(), chosen.end(), &rung13) != chosen.end() &&
        lesson::why_not(rung13.needs, lesson::gpu_limits()).empty())
        timed.push_back({4095, 4097, 4096});
    report.config_from(cli);  // every flag as parsed: n, m, k, sizes, rung, repeat, seed, ...
    report.config("timed_shapes", shapes_text(timed));
    report.config("check_shapes", shapes_text(checks));
    report.config("output", std::string("fp32 C (bf16 A, B; fp32 accumulation)"));
    report.config("tolerance_rel_l2", kTol);

    // One gate decides for every chosen rung (common/needs.h); a rung it skips is never launched
    // (nor its cudaFuncSetAttribute called). Nothing chosen can run here: the run is a SKIP.
    lesson::Gate gate(report);
    std::vector<const Rung*> ladder, fp8;  // the chosen rungs this GPU and this build can run: bf16, FP8
    for (const Rung* r : chosen)
        if (gate.run(std::string("rung ") + r->name, r->needs)) (r->launch8 ? fp8 : ladder).push_back(r);
    // Rungs named by --rung must all run: a list with one this GPU cannot run is a SKIP too.
    if (gate.none_ran() || (rungs != "0" && ladder.size() + fp8.size() < chosen.size()))
        return report.skip(gate.reason(), opt.json);
    const bool any_sm90a = std::any_of(ladder.begin(), ladder.end(), [](const Rung* r) { return r->needs.sm90a; });
    PFN_cuTensorMapEncodeTiled_v12000 encode = nullptr;
    if (any_sm90a || !fp8.empty())
        encode = lesson::tensor_map_encoder();  // the driver's TMA encoder, through the runtime

    cublasHandle_t handle;
    CUBLAS_CHECK(cublasCreate(&handle));
    Context c{report, handle, prop, ladder, encode, static_cast<uint64_t>(opt.seed), int(opt.repeat)};

    // Part 1: every rung against the CPU (checks.cuh); 1b: the persistent rungs, many pieces per cluster.
    // With FP8 rungs alone, parts 1 and 2 have no rung and are left out.
    if (!ladder.empty()) check_against_cpu(c, checks, opt.inject_fault);
    check_persistent(c, timed, kLadder[8]);

    // Part 2: each timed shape, every rung against cuBLAS, then all timed in turns (timed.cuh).
    const double peak = lesson::peak_gflops(prop, int(opt.device), lesson::MathUnit::Bf16Tensor) / 1e3;
    report.bound("BF16 tensor-core peak from the SM clock", peak, "TFLOP/s", lesson::Roof::Compute);
    report.timing(std::string(lesson::kTimingMethod) +
                  "; at each shape cuBLAS (fp32 C, bf16 C) and every bf16 rung interleaved, one sample of each in "
                  "turn (lesson::time_interleaved_ms); the FP8 rungs likewise with cuBLASLt FP8 (fp32 C, bf16 C) "
                  "of their scaling, and with each other");
    std::string best, best_yardstick = "cuBLAS BF16";
    double best_fraction = NAN;
    std::string best_small;
    for (size_t t = 0; t < timed.size() && !ladder.empty(); ++t) {
        const Shape& s = timed[t];
        std::string small;
        const Best b = time_shape(c, s, t, peak, small);
        // The 0.90x target is for the wgmma rungs (5-11 and 13, sm_90a): rung 4's mma.sync, the best
        // elsewhere, is not meant to reach it.
        if (any_sm90a && 2.0 * double(s.M) * s.N * s.K >= 2.0 * 4096.0 * 4096.0 * 4096.0)
            report.target("best rung vs cuBLAS BF16 at " + s.text(), b.fraction, 0.90, "x");
        if (t == 0 || s.M == 4096) {  // the key result: the default 4096^3, or the first timed shape
            best =
                b.name.empty() ? "" : b.name + "' " + std::to_string(int(b.tflops + 0.5)) + " TFLOP/s at " + s.text();
            best_fraction = b.fraction;
            best_yardstick = b.yardstick;
            best_small = small;
        }
    }

    // Part 3: the FP8 rungs against the CPU and cuBLASLt, timed in turns with it (fp8.cuh). Rungs 14
    // and 15 bring rung 12 along (the same needs, so the gate passed it too): its rate is their yardstick.
    if (std::any_of(fp8.begin(), fp8.end(), block_scaled) &&
        std::find(fp8.begin(), fp8.end(), &kLadder[11]) == fp8.end())
        fp8.push_back(&kLadder[11]);
    if (!fp8.empty()) {
        cublasLtHandle_t lt;
        CUBLAS_CHECK(cublasLtCreate(&lt));
        void* workspace = nullptr;
        CUDA_CHECK(cudaMalloc(&workspace, kLtWorkspace));
        Fp8Context f{lt, workspace, fp8};
        std::string text, small;
        const Best b = fp8_part(c, f, checks[0], checks[1], timed, opt.inject_fault && ladder.empty(), text, small);
        if (ladder.empty()) {  // the FP8 rung alone: its result is the key one
            best = text;
            best_fraction = b.fraction;
            best_yardstick = b.yardstick;
            best_small = small;
        }
        CUDA_CHECK(cudaFree(workspace));
        CUBLAS_CHECK(cublasLtDestroy(lt));
        fp8_notes(report, fp8);
    }

    add_notes(report, any_sm90a);
    if (best.empty())
        report.key_result("no ladder rung ran (see the notes)", NAN, "cuBLAS BF16", lesson::Against::Yardstick,
                          "no rung ran");
    else report.key_result("best rung '" + best, best_fraction, best_yardstick, lesson::Against::Yardstick, best_small);
    report.default_size(cli.at_default_size());

    CUBLAS_CHECK(cublasDestroy(handle));
    return report.finish(opt.json);
}
