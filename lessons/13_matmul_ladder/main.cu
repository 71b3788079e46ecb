// Lesson 13 of the course (00-24): the SGEMM ladder, from shared-memory tiles to the rate of cuBLAS, fp32 FFMA only.
// Before: lesson 12 (12_transpose; lesson 06 tiled the matmul first). Next: lesson 14 (14_reduction).
// Run: ./build/bin/matmul_ladder [--quick]   every rung at 4096^3 (--help lists every flag; README.md is the handout)
//      ./build/bin/matmul_ladder --rung=18   one rung alone (1..18), still checked
//      ./build/bin/matmul_ladder --sweep     also rung 8 in 13 tile configurations
// C = A * B, row-major (A is M x K, B is K x N). The rungs, each with its launcher, are kernels/N_name.cuh; this file
// is the host side: flags, the rung table, the checks (part 1), the timing (part 2) and the report; other_shapes.h is
// part 3, the top rung at other shapes; buffers.h has the arrays of a shape, the cuBLAS call and its checks;
// occupancy.cuh splits rung 3 -> 4 with the control of kernels/control.cuh (rung 3's kernel at 2 blocks per SM).
#include <algorithm>
#include <cmath>
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
#include "common/needs.h"
#include "common/report.h"
#include "common/timer.h"
#include "verify/compare.h"
#include "verify/gemm.h"
#include "verify/matmul.h"
#include "verify/parallel.h"
#include "verify/random.h"

#include "buffers.h"
#include "kernels/10_register_double_buffer.cuh"
#include "kernels/11_k32_tile.cuh"
#include "kernels/12_spread_copies.cuh"
#include "kernels/13_operand_reuse.cuh"
#include "kernels/14_warp_tiles.cuh"
#include "kernels/15_async_copies.cuh"
#include "kernels/16_partial_tile_first.cuh"
#include "kernels/17_xor_stages.cuh"
#include "kernels/18_async_double_buffer.cuh"
#include "kernels/1_smem_tiles.cuh"
#include "kernels/2_reg_tile_1d.cuh"
#include "kernels/3_reg_tile_2d.cuh"
#include "kernels/4_vectorized.cuh"
#include "kernels/5_conflict_free.cuh"
#include "kernels/6_double_buffered.cuh"
#include "kernels/7_warp_tiled.cuh"
#include "kernels/8_cp_async.cuh"
#include "kernels/9_wide_tile.cuh"
#include "kernels/control.cuh"
#include "occupancy.cuh"
#include "other_shapes.h"

// The ladder, one row per rung: its name in the report and its launcher (kernels/N_name.cuh).
struct Rung {
    std::string name;
    void (*launch)(const Gemm&);
    int smem_bytes;                 // dynamic shared memory per block; 0: static only, under the 48 KB every GPU gives
    const Rung* smaller = nullptr;  // the same rung with less shared memory, run where this one does not fit
};
// Rungs 8 and 11-13 with a shorter k tile, for a GPU whose blocks cannot have their defaults' 74,496 and 99,328
// bytes (a Turing GPU gives 65,536). rung8::tiles_text names the others' tiles too: their WarpTiling has its fields.
template <class Cfg>
static Rung smaller(const char* name, void (*launch)(const Gemm&)) {
    return {std::string(name) + " (" + rung8::tiles_text<Cfg>() + ")", launch, Cfg::kSmemBytes};
}
static const Rung kRung8Smaller = smaller<rung8::Smaller>("8 warp tiles + cp.async", rung8::launch<rung8::Smaller>);
static const Rung kRung11Smaller = smaller<rung11::Smaller>("11 k16 tile", rung11::launch<rung11::Smaller>);
static const Rung kRung12Smaller =
    smaller<rung12::Smaller>("12 k16 tile, copies spread over FFMA", rung12::launch<rung12::Smaller>);
static const Rung kRung13Smaller =
    smaller<rung13::Smaller>("13 k16 tile, FFMA order reusing operands", rung13::launch<rung13::Smaller>);
static const Rung kLadder[] = {
    {"1 shared-memory tiles 32x32", rung1::launch, 0},
    {"2 1D register tile 8x1", rung2::launch, 0},
    {"3 2D register tile 8x8", rung3::launch, 0},
    {"4 float4 loads, A^T in smem", rung4::launch, 0},
    {"5 bank-conflict-free", rung5::launch, 0},
    {"6 double-buffered", rung6::launch, 0},
    {"7 warp tiles, register-staged", rung7::launch<rung7::Default>, rung7::Default::kSmemBytes},
    {"8 warp tiles + cp.async", rung8::launch<rung8::Default>, rung8::Default::kSmemBytes, &kRung8Smaller},
    {"9 128x256 tile, 8x16 per thread", rung9::launch, 0},
    {"10 register double buffering", rung10::launch, 0},
    {"11 k32 tile, 2 stages", rung11::launch<rung11::Default>, rung11::Default::kSmemBytes, &kRung11Smaller},
    {"12 copies spread over FFMA", rung12::launch<rung12::Default>, rung12::Default::kSmemBytes, &kRung12Smaller},
    {"13 FFMA order reusing operands", rung13::launch<rung13::Default>, rung13::Default::kSmemBytes, &kRung13Smaller},
    {"14 rung 10's schedule, warp tiles", rung14::launch, 0},
    {"15 cp.async copies over k steps 0-3", rung15::launch, 0},
    {"16 partial k tile first", rung16::launch, 0},
    {"17 stages flipped by one XOR", rung17::launch, 0},
    {"18 16-byte copies of B", rung18::launch, 0},
};
constexpr int kRungs = int(std::size(kLadder));
// Not a rung: rung 3's kernel at 2 blocks per SM (kernels/control.cuh), checked and timed with every rung, never the
// best one; occupancy.cuh times it in turns with rungs 3 and 4.
static const Rung kControl = {"control: rung 3 at 2 blocks per SM", control::launch, 0};

// --sweep: rung 8 in the 13 tile configurations of rung8::SweepTiles, each named "8: " and its tiles_text
// ("BMxBNxBK wWMxWN tTMxTN sSTAGES", e.g. "8: 128x128x8 w64x32 t8x8 s2").
template <class... Cfg>
static std::vector<Rung> rung8_sweep(rung8::TileList<Cfg...>) {
    return {Rung{"8: " + rung8::tiles_text<Cfg>(), rung8::launch<Cfg>, Cfg::kSmemBytes}...};
}
static const std::vector<Rung> kSweep = rung8_sweep(rung8::SweepTiles{});

using Shape = lesson::GemmShape;  // common/gemm.h: M, N, K and the arrays' sizes
constexpr double kTol = 1e-4;     // rel-L2, fp32 GEMM (docs/lesson-contract.md)

// Part 1, one shape: cuBLAS and the chosen rungs against the double-precision CPU reference, every element.
// Returns the reference's time. --inject-fault (inject) corrupts the last result checked.
static double check_on_cpu(const Shape& s, uint64_t seed, cublasHandle_t handle, const std::vector<const Rung*>& rungs,
                           bool inject, lesson::Report& report) {
    Arrays a(s, seed);
    std::vector<double> ref(s.c());
    lesson::HostTimer cpu;
    verify::matmul_reference(a.h_A.data(), a.h_B.data(), ref.data(), s.M, s.N, s.K);
    const double cpu_ms = cpu.ms();
    for (size_t i = 0; i <= rungs.size(); ++i) {  // i = 0: cuBLAS, then the rungs
        run_once([&] { i == 0 ? launch_cublas(handle, a.g) : rungs[i - 1]->launch(a.g); }, a.g, a.h_C.data());
        if (inject && i == rungs.size()) verify::inject_fault(a.h_C.data(), s.c(), seed);
        const std::string name = i == 0 ? "cuBLAS SGEMM fp32" : rungs[i - 1]->name;
        report.check(
            verify::compare(a.h_C.data(), ref.data(), s.c(), kTol, name + " vs CPU, every element of " + s.text()));
    }
    return cpu_ms;
}

// What a rung needs from the GPU: the shared memory per block it asks for. Rungs 8, 11-13 and 15-18 copy with cp.async
// where the image has it (sm_80 on) and with plain loads and stores below it, so they need nothing more.
static lesson::Needs needs(const Rung& r) {
    lesson::Needs n;
    n.smem = size_t(r.smem_bytes);
    return n;
}

// The ladder to run: every rung, or --rung=N alone. The Gate runs each or prints why not; rungs 8 and 11-13 run their
// smaller configuration where the default's does not fit. A rung that does not run is never launched, so no
// cudaFuncSetAttribute asks for more shared memory than the GPU gives.
static std::vector<const Rung*> choose_ladder(int64_t rung, lesson::Gate& gate, lesson::Report& report) {
    std::vector<const Rung*> ladder;
    for (int i = 0; i < kRungs; ++i) {
        if (rung != 0 && rung != i + 1) continue;
        const Rung* r = &kLadder[i];
        const std::string why = lesson::why_not(needs(*r), lesson::gpu_limits());
        if (!why.empty() && r->smaller && lesson::why_not(needs(*r->smaller), lesson::gpu_limits()).empty()) {
            const std::string line = "rung " + r->name + " runs as '" + r->smaller->name + "' (" +
                                     std::to_string(r->smaller->smem_bytes) +
                                     " bytes of shared memory per block): its default " + why;
            std::printf("%s\n", line.c_str());
            report.note(line);
            r = r->smaller;
        }
        if (gate.run("rung " + r->name, needs(*r))) ladder.push_back(r);
    }
    return ladder;
}

int main(int argc, char** argv) {
    // Flags first: bad input exits 2 before any CUDA call.
    lesson::CommonOptions opt;
    int64_t n = 4096, m = 4096, k = 4096, rung = 0;
    bool sweep = false;
    lesson::Cli cli(
        "matmul_ladder",
        "SGEMM C = A*B (fp32, row-major): eighteen hand-written rungs against cuBLAS on an M x N x K shape.");
    lesson::add_common_flags(cli, opt);
    cli.add_int("n", &n, 1, 16384, "columns of B and C (and M, K unless given)", 256);
    cli.add_int("m", &m, 1, 16384, "rows of A and C (equal to --n unless given)", 256);
    cli.add_int("k", &k, 1, 16384, "columns of A, rows of B (equal to --n unless given)", 256);
    cli.add_int("rung", &rung, 0, kRungs, "run and check this rung alone (0: every rung and rung 3's control)");
    cli.add_switch("sweep", &sweep, "also time rung 8 in every tile configuration of its sweep table");
    cli.parse_or_exit(argc, argv);
    if (!cli.given("m")) m = n;
    if (!cli.given("k")) k = n;
    const Shape timed{int(m), int(n), int(k)};
    // Part 1 shapes: a square one, one whose rows are not 16-byte aligned (K, N odd) and one that is aligned but
    // cuts every tile short. Part 2: the timed shape. Part 3, for the whole ladder at the default or --quick shape
    // only: the same two kinds of shape near the timed one, in its arrays (none needs more elements).
    std::vector<Shape> checks{{1024, 1024, 1024}, {1000, 1023, 1025}, {333, 516, 260}};
    if (opt.quick) checks = {{128, 128, 128}, {201, 123, 77}, {100, 260, 44}};
    std::vector<Shape> others{{4000, 4095, 4097}, {4092, 4000, 4100}};
    if (opt.quick) others = {{250, 255, 257}, {252, 160, 260}};
    if (rung != 0 || cli.given("m") || cli.given("n") || cli.given("k")) others.clear();

    // Host: A, B, the cuBLAS result and one rung's result as floats (part 2), or the same plus a double reference
    // (part 1). Device: A, B, two results.
    uint64_t host_bytes = (timed.a() + timed.b() + 2 * timed.c()) * sizeof(float) + 16 * size_t(timed.N) * 8;
    for (const Shape& s : checks)
        host_bytes = std::max(host_bytes, (s.a() + s.b() + 2 * s.c()) * sizeof(float) + s.c() * sizeof(double));
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
    report.config("repeat", opt.repeat);
    report.config("seed", opt.seed);
    report.config("tolerance_rel_l2", kTol);

    // The rungs to run: the ladder (every rung, or --rung=N alone), then --sweep's rows, each only where it can run.
    lesson::Gate gate(report);
    const std::vector<const Rung*> ladder = choose_ladder(rung, gate, report);
    std::vector<const Rung*> checked = ladder;  // and, with every rung, rung 3's control
    if (rung == 0 && gate.run("rung 3's control", needs(kControl))) checked.push_back(&kControl);
    std::vector<const Rung*> timed_rungs = checked;
    for (const Rung& r : kSweep)
        if (sweep && gate.run("sweep " + r.name, needs(r))) timed_rungs.push_back(&r);
    if (gate.none_ran()) return report.skip(gate.reason(), opt.json);
    const bool small8 = std::find(ladder.begin(), ladder.end(), &kRung8Smaller) != ladder.end();
    report.config("rung8_tiles", small8 ? rung8::tiles_text<rung8::Smaller>() : rung8::tiles_text<rung8::Default>());

    cublasHandle_t handle;
    CUBLAS_CHECK(cublasCreate(&handle));
    CUBLAS_CHECK(cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH));  // true fp32: no TF32 tensor cores

    // Part 1: correctness on the CPU shapes; the report gives the CPU time of the first (square) one, all host cores.
    const uint64_t seed = static_cast<uint64_t>(opt.seed);
    const double cpu_ms = check_on_cpu(checks[0], seed, handle, checked, opt.inject_fault, report);
    for (size_t i = 1; i < checks.size(); ++i) check_on_cpu(checks[i], seed + 10 * i, handle, checked, false, report);
    report.cpu_reference_ms(cpu_ms, verify::host_threads());

    // Part 2: speed at the timed shape. cuBLAS writes its own C (t.ref): the yardstick and the GPU-side reference,
    // itself checked against the CPU on sampled rows (all rows for small shapes).
    Arrays t(timed, seed + 100);
    report.check(cublas_on_rows([&] { launch_cublas(handle, t.ref); }, t, seed + 102, kTol));

    // cuBLAS is timed before the rungs and again after them, and the faster time is the yardstick: a cuBLAS sample
    // that caught the GPU at a lower clock would otherwise flatter every rung. Each rung: launch, copy out, verify
    // against cuBLAS element by element, time.
    const double cublas_first_ms = lesson::time_median_ms(int(opt.repeat), [&] { launch_cublas(handle, t.ref); });
    std::vector<double> rung_ms;
    for (const Rung* r : timed_rungs) {
        report.check(against_cublas([&] { r->launch(t.g); }, t, r->name, kTol));
        rung_ms.push_back(lesson::time_median_ms(int(opt.repeat), [&] { r->launch(t.g); }));
    }
    const double cublas_last_ms = lesson::time_median_ms(int(opt.repeat), [&] { launch_cublas(handle, t.ref); });

    // The report: GFLOP/s at 2*M*N*K flops, cuBLAS against the FP32 peak, each rung against cuBLAS.
    const auto gflops = [&](double ms) { return 2.0 * double(timed.M) * timed.N * timed.K / (ms * 1e6); };
    const double cublas_ms = std::min(cublas_first_ms, cublas_last_ms), cublas_gflops = gflops(cublas_ms);
    const double peak = lesson::peak_gflops(prop, int(opt.device), lesson::MathUnit::Fp32Simt);
    const std::string small = lesson::small_gemm_note(timed.M, timed.N, prop);
    // NaN where common/ceilings.h knows no rate for this compute capability: then no bound and no grade against it.
    const std::string no_peak =
        std::isfinite(peak) ? "" : "no FP32 FMA rate known for cc " + lesson::cc_text(lesson::gpu_limits().cc);
    if (std::isfinite(peak)) report.bound("FP32 FMA peak from the SM clock", peak, "GFLOP/s");
    report.yardstick("cuBLAS SGEMM fp32 (CUBLAS_DEFAULT_MATH), same shape", cublas_gflops, "GFLOP/s");
    report.metric("cuBLAS SGEMM fp32, timed before the rungs", cublas_first_ms, "ms");
    report.metric("cuBLAS SGEMM fp32, timed after the rungs", cublas_last_ms, "ms");
    report.timing(lesson::kTimingMethod);
    report.variant_bound("cuBLAS SGEMM fp32", cublas_ms, cublas_gflops, "GFLOP/s", peak, "FP32 peak", no_peak);
    // The key result is the ladder's best rung: the fastest of the first ladder.size() timed rungs.
    const size_t best = std::min_element(rung_ms.begin(), rung_ms.begin() + ladder.size()) - rung_ms.begin();
    const double best_gflops = ladder.empty() ? 0 : gflops(rung_ms[best]);
    for (size_t i = 0; i < timed_rungs.size(); ++i)
        report.variant_yardstick(timed_rungs[i]->name, rung_ms[i], gflops(rung_ms[i]), "GFLOP/s", cublas_gflops,
                                 "cuBLAS", small);
    if (checked.size() > ladder.size()) split_rung3_to_4(t.g, int(opt.repeat), report);  // rung 3 -> 4 in two steps
    if (!ladder.empty())
        time_other_shapes(others, ladder.back()->name, ladder.back()->launch, t, handle, seed + 103, int(opt.repeat),
                          kTol, prop, report);
    report.note(
        "edges: every rung handles any M, N, K itself (no fallback), loading zeros outside A and B and storing "
        "only inside C; 16-byte accesses only where rows start 16-byte aligned, 4-byte ones elsewhere");
    report.note("timed-shape checks compare each rung with cuBLAS, every element; cuBLAS is checked on sampled rows");
    report.default_size(cli.at_default_size());
    if (ladder.empty()) {  // only --sweep rows ran: no rung of the ladder to grade
        report.key_result("no ladder rung ran at " + timed.text() + " (see the skip lines)");
    } else {
        report.key_result("best rung '" + timed_rungs[best]->name + "' " + std::to_string(std::lround(best_gflops)) +
                              " GFLOP/s at " + timed.text(),
                          best_gflops / cublas_gflops, "cuBLAS fp32", lesson::Against::Yardstick, small);
        report.target("best rung vs cuBLAS fp32", best_gflops / cublas_gflops, 0.98, "x");
    }

    CUBLAS_CHECK(cublasDestroy(handle));
    return report.finish(opt.json);
}
