// Lesson 19 - mixed precision: one GEMM shape in every precision cuBLAS offers, side by side.
//
// C = A * B^T (M x N x K; B stored as Bt, N x K, the layout of a linear layer's
// weights) in:
//   fp32       FP32 inputs, FP32 FMA units (SIMT)               cublasGemmEx, CUBLAS_COMPUTE_32F
//   tf32       FP32 inputs rounded to TF32 on the tensor cores  CUBLAS_COMPUTE_32F_FAST_TF32
//   bf16       BF16 inputs and output, FP32 accumulation        CUDA_R_16BF, CUBLAS_COMPUTE_32F
//   fp16       FP16 inputs and output, FP32 accumulation        CUDA_R_16F, CUBLAS_COMPUTE_32F
//   fp16acc16  FP16 inputs and output, FP16 accumulation        CUDA_R_16F, CUBLAS_COMPUTE_16F
//   fp8        FP8 E4M3 inputs with per-tensor scales, BF16 out cublasLtMatmul (compute capability >= 8.9)
// Per precision: TFLOP/s at 4096^3 and 8192^3, the relative L2 error against a double
// CPU reference of the FLOAT inputs (sampled rows; so the error includes the rounding
// of the inputs) and against the rounded inputs (a tighter check: the output's and the
// accumulator's rounding only), and the bytes of the operands. A and Bt are drawn at very
// different scales, so FP8's two per-tensor scales differ and a wrong one shows.
// The parts: the formats shown by three measured demonstrations (demonstrations.cuh), the
// precisions and their GEMM calls (precisions.cuh), our conversion kernels checked and timed
// beside the GEMMs (conversions.cuh), the rates and the trade-off table (table.cuh).
//
// Lesson 19 of the course: lesson 08 called cuBLAS in FP32 and TF32, lesson 18 came
// before this one; lesson 20 comes next. See README.md.
// Run: ./build/bin/mixed_precision   (--precision=fp8: one precision; --m=4096 --n=2048 --k=8192: one shape)
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/check.h"
#include "common/device.h"
#include "common/flags.h"
#include "common/memory.h"
#include "common/needs.h"
#include "common/report.h"
#include "common/timer.h"
#include "verify/parallel.h"
#include "verify/precision.h"
#include "verify/random.h"

#include "conversions.cuh"
#include "demonstrations.cuh"
#include "precisions.cuh"
#include "table.cuh"

// What every shape of the run shares.
struct Run {
    lesson::Report* report;
    cublasHandle_t blas;
    cublasLtHandle_t lt;
    cudaDeviceProp prop;
    std::vector<bool> runs;  // the precisions that run
    int64_t check_rows;
    uint64_t seed;
    int R;
    bool inject_fault;
    double cpu_ms = 0;  // the CPU references, all shapes
    std::vector<ConvTimed> conversions;
};

// One shape: its inputs, its device memory, the CPU references, the conversions, then every
// precision checked and all of them timed. Returns the precisions' errors and rates.
static std::vector<Timed> run_shape(Run& run, const Shape& s, size_t si) {
    lesson::Report& report = *run.report;
    const int M = int(s.M), N = int(s.N), K = int(s.K);
    const std::string shape = shape_text(M, N, K);
    Buffers b{size_t(M) * K, size_t(N) * K, size_t(M) * N};

    // a. The same random floats for every precision, on the host and the device: A in
    //    [-48, 48), Bt in [-1e-3, 1e-3) (verify/precision.h says why these ranges). Every input
    //    and converted matrix has kGuard elements more than it needs: a conversion that writes
    //    past the end lands there, and its check finds the guard no longer poisoned.
    verify::host_vector<float> h_A(b.nA), h_Bt(b.nB);  // not zeroed first: the parallel fills write every element
    verify::fill_uniform(h_A.data(), b.nA, run.seed + 100 * si, -verify::kGemmRangeA, verify::kGemmRangeA);
    verify::fill_uniform(h_Bt.data(), b.nB, run.seed + 100 * si + 1, -verify::kGemmRangeBt, verify::kGemmRangeBt);
    const std::vector<int64_t> rows = verify::stratified_rows(M, run.check_rows, run.seed + 100 * si + 2);
    CUDA_CHECK(cudaMalloc(&b.d_A, (b.nA + kGuard) * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&b.d_Bt, (b.nB + kGuard) * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&b.d_A16, (b.nA + kGuard) * sizeof(__half)));
    CUDA_CHECK(cudaMalloc(&b.d_Bt16, (b.nB + kGuard) * sizeof(__half)));
    CUDA_CHECK(cudaMalloc(&b.d_Abf, (b.nA + kGuard) * sizeof(__nv_bfloat16)));
    CUDA_CHECK(cudaMalloc(&b.d_Btbf, (b.nB + kGuard) * sizeof(__nv_bfloat16)));
    CUDA_CHECK(cudaMalloc(&b.d_A8, b.nA + kGuard));
    CUDA_CHECK(cudaMalloc(&b.d_Bt8, b.nB + kGuard));
    CUDA_CHECK(cudaMalloc(&b.d_C, b.nC * sizeof(float)));  // big enough for C in any format
    CUDA_CHECK(cudaMalloc(&b.d_amax, 2 * sizeof(unsigned)));
    // cuBLASLt's scale pointers must be 16-byte aligned: with one 4 bytes in it finds an
    // algorithm, then cublasLtMatmul returns CUBLAS_STATUS_NOT_SUPPORTED.
    CUDA_CHECK(cudaMalloc(&b.d_scales, 2 * kScaleStride * sizeof(float)));
    CUDA_CHECK(cudaMemset(b.d_scales, 0, 2 * kScaleStride * sizeof(float)));  // the gaps too: they are copied back
    CUDA_CHECK(cudaMalloc(&b.d_workspace, kWorkspace));
    CUDA_CHECK(cudaMemcpy(b.d_A, h_A.data(), b.nA * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(b.d_Bt, h_Bt.data(), b.nB * sizeof(float), cudaMemcpyHostToDevice));

    // b. The double reference of the sampled rows from the float inputs; then per input format a
    //    running precision reads: the CPU's rounding of the inputs and the reference from them
    //    (to separate input rounding from the rest of the error), and our conversion kernels
    //    checked against that rounding and timed (conversions.cuh).
    lesson::HostTimer cpu;
    std::vector<double> ref(rows.size() * N);
    verify::gemm_abt_rows(h_A.data(), h_Bt.data(), N, K, rows, ref.data());
    std::vector<int64_t> packed(rows.size());  // the rounded rows of A are packed one after another
    for (size_t i = 0; i < rows.size(); ++i) packed[i] = int64_t(i);
    const float amax_a = verify::amax_of(h_A.data(), b.nA), amax_bt = verify::amax_of(h_Bt.data(), b.nB);
    run.cpu_ms += cpu.ms();
    std::vector<std::vector<double>> ref_rounded(5);  // indexed by In
    std::vector<size_t> conv_index(5, SIZE_MAX);      // where each format's conversion is in run.conversions
    for (const Conversion& cv : kConversions) {
        bool needed = false;
        for (int p = 0; p < kPrecisionCount; ++p) needed = needed || (run.runs[p] && kPrecisions[p].in == cv.in);
        if (!needed) continue;
        cpu.reset();
        const verify::RoundedInputs r =
            verify::round_gemm_inputs(*cv.fmt, h_A.data(), h_Bt.data(), b.nB, rows, K, amax_a, amax_bt);
        ref_rounded[int(cv.in)].resize(rows.size() * N);
        verify::gemm_abt_rows(r.a_rows.data(), r.bt.data(), N, K, packed, ref_rounded[int(cv.in)].data(), r.scale);
        run.cpu_ms += cpu.ms();
        if (cv.in == In::Tf32) continue;
        conv_index[int(cv.in)] = run.conversions.size();
        run.conversions.push_back(check_conversion(report, b, cv, r, rows, K, shape, amax_a, amax_bt, run.R, run.prop));
    }

    // c. Every precision that runs: poison C, run, check the sampled rows; then time them all.
    Fp8Plan plan;
    if (run.runs[kPrecisionCount - 1])
        plan = make_fp8_plan(run.lt, M, N, K, b.d_scales, b.d_scales + kScaleStride, b.d_workspace, kWorkspace);
    const Operands ops{M,       N,        K,                  // the shape
                       b.d_A,   b.d_Bt,   b.d_A16, b.d_Bt16,  // float, FP16
                       b.d_Abf, b.d_Btbf, b.d_A8,  b.d_Bt8,   // BF16, FP8
                       b.d_C,   run.blas, run.lt,  &plan};
    std::vector<Timed> timed;
    for (int p = 0; p < kPrecisionCount; ++p) {
        if (!run.runs[p]) continue;
        const Precision& pr = kPrecisions[p];
        timed.push_back(
            check_gemm(report, ops, p, rows, ref, ref_rounded[int(pr.in)], shape, run.inject_fault, run.seed));
        run.inject_fault = false;  // --inject-fault corrupts the first GEMM's output only
    }
    time_gemms(report, ops, timed, run.R, shape);
    for (const Timed& t : timed) {  // the conversion's cost beside (the first) GEMM reading it
        const size_t ci = conv_index[int(kPrecisions[t.p].in)];
        if (ci != SIZE_MAX && run.conversions[ci].gemm_ms == 0) run.conversions[ci].gemm_ms = t.ms;
    }
    if (plan.desc) destroy_fp8_plan(plan);

    // d. Free this shape's buffers.
    CUDA_CHECK(cudaFree(b.d_workspace));
    CUDA_CHECK(cudaFree(b.d_scales));
    CUDA_CHECK(cudaFree(b.d_amax));
    CUDA_CHECK(cudaFree(b.d_C));
    CUDA_CHECK(cudaFree(b.d_Bt8));
    CUDA_CHECK(cudaFree(b.d_A8));
    CUDA_CHECK(cudaFree(b.d_Btbf));
    CUDA_CHECK(cudaFree(b.d_Abf));
    CUDA_CHECK(cudaFree(b.d_Bt16));
    CUDA_CHECK(cudaFree(b.d_A16));
    CUDA_CHECK(cudaFree(b.d_Bt));
    CUDA_CHECK(cudaFree(b.d_A));
    return timed;
}

int main(int argc, char** argv) {
    // 1. Flags first: bad input exits 2 before any CUDA call.
    lesson::CommonOptions opt;
    int64_t m = 4096, n = 4096, k = 4096, check_rows = 16;
    std::string only;
    lesson::Cli cli("mixed_precision",
                    "One GEMM shape in every precision cuBLAS offers (FP32, TF32, BF16, FP16, FP16 accumulate, FP8):\n"
                    "TFLOP/s, error against a double reference, operand bytes; conversion kernels; the formats shown.");
    lesson::add_common_flags(cli, opt);
    cli.add_int("m", &m, 16, 32768, "rows of A and C; any of --m/--n/--k: one shape M x N x K, else 4096^3 and 8192^3",
                512);
    cli.add_int("n", &n, 16, 32768, "columns of C, rows of Bt", 512);
    cli.add_int("k", &k, 16, 32768, "the summed dimension: columns of A and Bt", 512);
    cli.add_int("check-rows", &check_rows, 1, 1024,
                "rows of C checked against the double CPU reference (one per band)");
    cli.add_string("precision", &only,
                   "run only this precision: fp32, tf32, bf16, fp16, fp16acc16 or fp8 (none: all of them)");
    cli.parse_or_exit(argc, argv);
    const std::pair<const char*, int64_t> dims[] = {{"m", m}, {"n", n}, {"k", k}};
    for (const auto& [flag, v] : dims)
        if (v % 16 != 0)
            lesson::bad_input(std::string("--") + flag + "=" + std::to_string(v) +
                              " is not a multiple of 16; allowed: multiples of 16 in [16, 32768] (cuBLASLt's FP8 "
                              "GEMM needs 16-byte aligned rows, the conversion kernels 4 values per thread)");
    int selected = -1;
    for (int p = 0; p < kPrecisionCount; ++p)
        if (only == kPrecisions[p].key) selected = p;
    if (!only.empty() && selected < 0)
        lesson::bad_input("--precision=" + only + " is unknown; allowed: fp32, tf32, bf16, fp16, fp16acc16, fp8");
    const bool one_shape = opt.quick || cli.given("m") || cli.given("n") || cli.given("k");
    const std::vector<Shape> shapes =
        one_shape ? std::vector<Shape>{{m, n, k}} : std::vector<Shape>{{4096, 4096, 4096}, {8192, 8192, 8192}};
    for (const Shape& s : shapes)
        if (check_rows > s.M)
            lesson::bad_input("--check-rows=" + std::to_string(check_rows) + " exceeds the " + std::to_string(s.M) +
                              " rows of C; allowed: 1 to --m");

    // 2. Memory checks, the device, the report. Host: A, Bt, a rounded copy of Bt with its bits
    //    and the GPU's bits. Device: A and Bt in float, FP16, BF16 and FP8, C in float, cuBLASLt's
    //    workspace.
    const Shape big = shapes.back();
    const double MK = double(big.M) * big.K, NK = double(big.N) * big.K, MN = double(big.M) * big.N;
    lesson::require_host_memory(uint64_t(4 * MK + 14 * NK), "pageable", "--m/--n/--k");
    cudaDeviceProp prop = lesson::pick_device(opt.device);
    lesson::require_device_memory(uint64_t(9 * (MK + NK) + 4 * MN) + kWorkspace, "--m/--n/--k");
    lesson::Report report("19_mixed_precision");
    report.device(prop);
    report.config_from(cli);
    report.config("shapes", one_shape ? shape_text(m, n, k) : std::string("4096^3, 8192^3"));
    report.config("precision", only.empty() ? std::string("all") : only);

    // The precisions to run: the wanted ones this GPU has (the Gate prints one line for each other).
    lesson::Gate gate(report);
    Run run{&report,
            nullptr,
            nullptr,
            prop,
            std::vector<bool>(kPrecisionCount, false),
            check_rows,
            uint64_t(opt.seed),
            int(opt.repeat),
            opt.inject_fault};
    for (int p = 0; p < kPrecisionCount; ++p) {
        if (selected >= 0 && selected != p) continue;
        lesson::Needs needs;
        needs.cc = kPrecisions[p].cc;
        needs.cc_why = kPrecisions[p].cc_why;
        run.runs[p] = gate.run(std::string(kPrecisions[p].key) + " (" + kPrecisions[p].name + ")", needs);
    }
    if (gate.none_ran()) return report.skip(gate.reason(), opt.json);

    // One cuBLAS handle and one cuBLASLt handle for the whole run.
    CUBLAS_CHECK(cublasCreate(&run.blas));
    CUBLAS_CHECK(cublasLtCreate(&run.lt));
    int version = 0;
    CUBLAS_CHECK(cublasGetVersion(run.blas, &version));
    report.config("cublas_version", int64_t(version));
    report.timing(std::string(lesson::kTimingMethod) +
                  "; the GEMMs of one shape interleaved, one sample of each precision in turn "
                  "(lesson::time_interleaved_ms)");
    if (const char* env = std::getenv("NVIDIA_TF32_OVERRIDE"))
        report.note(std::string("NVIDIA_TF32_OVERRIDE=") + env + " is set: it overrides the TF32 choice below");

    // 3. The formats, measured (demonstrations.cuh): overflow, underflow and loss scaling, long sums.
    demo_fp16_overflow(report, gate, run.blas, uint64_t(opt.seed));
    demo_underflow_and_loss_scaling(report, uint64_t(opt.seed));
    demo_long_sums(report, uint64_t(opt.seed));

    // 4. The GEMMs, shape by shape (run_shape).
    std::vector<std::vector<Timed>> timed;
    for (size_t si = 0; si < shapes.size(); ++si) timed.push_back(run_shape(run, shapes[si], si));
    report.cpu_reference_ms(run.cpu_ms, verify::host_threads());
    report_notes(report, check_rows);
    CUBLAS_CHECK(cublasLtDestroy(run.lt));
    CUBLAS_CHECK(cublasDestroy(run.blas));

    // 5. Rates against the peaks and the best 16-bit rate; the conversions against DRAM (table.cuh).
    report_rates(report, shapes, timed, prop, int(opt.device));
    report_conversions(report, run.conversions, prop, int(opt.device));

    // 6. The trade-off table: speed, accuracy and bytes side by side.
    print_table(shapes, timed, selected);

    // 7. Key result and targets: BF16 and FP16 (FP32 accumulate) against the best 16-bit rate.
    report.default_size(cli.at_default_size());
    report_key_result(report, timed.back(), big, prop, int(opt.device));
    return report.finish(opt.json);
}
