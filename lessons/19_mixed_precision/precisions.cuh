// Lesson 19 - mixed precision: the table of precisions, their GEMM calls, and how each is checked.
//
// C = A * Bt^T in every precision cuBLAS offers, one row of kPrecisions each: its run function
// (cublasGemmEx with the operand swap, or cublasLtMatmul with two FP8 scales), its input, output
// and accumulator formats, and the math unit whose peak bounds it. check_gemm() runs one precision
// on poisoned C and checks the sampled rows against the double references of the float and of the
// rounded inputs; time_gemms() times the precisions of a shape interleaved. main.cu runs them
// shape by shape; table.cuh reports their rates.
// Lesson 19 of the course; before: lesson 18 (CUDA graphs), next: lesson 20 (tensor-core GEMM).
// Run: ./build/bin/mixed_precision --precision=bf16
#pragma once
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/ceilings.h"
#include "common/check.h"
#include "common/report.h"
#include "common/timer.h"
#include "verify/compare.h"
#include "verify/parallel.h"
#include "verify/precision.h"

#include "kernels/convert.cuh"

// ---------------------------------------------------------------- the GEMM calls

// Row-major C (M x N) = A (M x K) * Bt^T, Bt row-major N x K. cuBLAS is column-major:
// it reads row-major C as C^T (N x M), A as A^T (K x M) and Bt as a K x N matrix, so
// we ask for C^T = op(Bt) * A^T with op = transpose: m = N, n = M, and both inputs
// have leading dimension K (lesson 08 explains the swap). This "TN" form is also the
// one cuBLASLt's FP8 kernels require on Hopper and Ada.
static void gemm_ex(cublasHandle_t h, int M, int N, int K, const void* A, const void* Bt, cudaDataType in_type, void* C,
                    cudaDataType c_type, cublasComputeType_t compute, const void* alpha, const void* beta) {
    CUBLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, alpha, Bt, in_type, K, A, in_type, K, beta, C,
                              c_type, N, compute, CUBLAS_GEMM_DEFAULT));
}

// Elements past the end of each converted matrix, poisoned and checked: a launch of n / 4 threads
// rounded up to whole blocks hangs over the end by fewer than 4 * convert::kThreads elements.
constexpr size_t kGuard = 4 * convert::kThreads;
constexpr size_t kWorkspace = size_t(32) << 20;  // cuBLASLt's scratch
constexpr int kScaleStride = 4;  // floats between the two FP8 scales: 16 bytes, the alignment cuBLASLt needs

// FP8 through cuBLASLt: a descriptor (compute and scale type, transposes, scale
// pointers), three layouts, and an algorithm from the heuristic, made once per shape.
struct Fp8Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
    void* workspace = nullptr;
    size_t workspace_bytes = 0;
};

// cuBLASLt's "A" is our Bt (K x N column-major, transposed: op(A) = N x K) and its "B"
// is our A (K x M column-major, not transposed). Its A/B scale pointers point at the
// dequantization scales amax / 448 that the conversion kernels wrote: D = scale_a *
// scale_b * (A_fp8 B_fp8), accumulated in FP32, rounded to BF16.
static Fp8Plan make_fp8_plan(cublasLtHandle_t lt, int M, int N, int K, const float* d_scale_a, const float* d_scale_bt,
                             void* d_workspace, size_t workspace_bytes) {
    Fp8Plan p;
    p.workspace = d_workspace;
    p.workspace_bytes = workspace_bytes;
    const cublasOperation_t trans = CUBLAS_OP_T, no_trans = CUBLAS_OP_N;
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans, sizeof trans));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &no_trans, sizeof no_trans));
    CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &d_scale_bt, sizeof d_scale_bt));
    CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &d_scale_a, sizeof d_scale_a));
    // Exercise 2 of the handout: set CUBLASLT_MATMUL_DESC_FAST_ACCUM to 1 (an int8_t) and compare rate and error
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_8F_E4M3, uint64_t(K), uint64_t(N), int64_t(K)));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_8F_E4M3, uint64_t(K), uint64_t(M), int64_t(K)));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.c, CUDA_R_16BF, uint64_t(N), uint64_t(M), int64_t(N)));
    cublasLtMatmulPreference_t pref = nullptr;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes,
                                                      sizeof workspace_bytes));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(lt, p.desc, p.a, p.b, p.c, p.c, pref, 1, &result, &found));
    CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));
    if (found == 0)
        lesson::fail_call("cuBLASLt", "cublasLtMatmulAlgoGetHeuristic", "no FP8 algorithm for this shape", __FILE__,
                          __LINE__);
    p.algo = result.algo;
    return p;
}

static void destroy_fp8_plan(Fp8Plan& p) {
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(p.c));
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(p.b));
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(p.a));
    CUBLAS_CHECK(cublasLtMatmulDescDestroy(p.desc));
}

// One shape's device memory (main.cu allocates it): A and Bt in float, FP16, BF16 and FP8 E4M3,
// each kGuard elements longer than it needs; C, big enough for C in any format; the FP8 amaxes
// and dequantization scales (A's at [0], Bt's at [kScaleStride]); cuBLASLt's workspace.
struct Buffers {
    size_t nA, nB, nC;
    float *d_A, *d_Bt, *d_scales;
    __half *d_A16, *d_Bt16;
    __nv_bfloat16 *d_Abf, *d_Btbf;
    __nv_fp8_storage_t *d_A8, *d_Bt8;
    unsigned* d_amax;
    void *d_C, *d_workspace;
};

// One shape's operands in every format, and the handles.
struct Operands {
    int M, N, K;
    const float *A, *Bt;
    const __half *A16, *Bt16;
    const __nv_bfloat16 *Abf, *Btbf;
    const __nv_fp8_storage_t *A8, *Bt8;
    void* C;
    cublasHandle_t blas;
    cublasLtHandle_t lt;
    const Fp8Plan* fp8;
};

static const float kOne = 1.0f, kZero = 0.0f;

static void run_fp32(const Operands& o) {  // the handle's default math mode: no TF32
    gemm_ex(o.blas, o.M, o.N, o.K, o.A, o.Bt, CUDA_R_32F, o.C, CUDA_R_32F, CUBLAS_COMPUTE_32F, &kOne, &kZero);
}
static void run_tf32(const Operands& o) {  // the same floats; cuBLAS rounds them to TF32 for the tensor cores
    gemm_ex(o.blas, o.M, o.N, o.K, o.A, o.Bt, CUDA_R_32F, o.C, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, &kOne, &kZero);
}
static void run_bf16(const Operands& o) {
    gemm_ex(o.blas, o.M, o.N, o.K, o.Abf, o.Btbf, CUDA_R_16BF, o.C, CUDA_R_16BF, CUBLAS_COMPUTE_32F, &kOne, &kZero);
}
static void run_fp16(const Operands& o) {
    gemm_ex(o.blas, o.M, o.N, o.K, o.A16, o.Bt16, CUDA_R_16F, o.C, CUDA_R_16F, CUBLAS_COMPUTE_32F, &kOne, &kZero);
}
static void run_fp16_acc16(const Operands& o) {  // CUBLAS_COMPUTE_16F: alpha and beta are halves too
    const __half one = __float2half(1.0f), zero = __float2half(0.0f);
    gemm_ex(o.blas, o.M, o.N, o.K, o.A16, o.Bt16, CUDA_R_16F, o.C, CUDA_R_16F, CUBLAS_COMPUTE_16F, &one, &zero);
}
static void run_fp8(const Operands& o) {  // C is not read (beta = 0); D = C's buffer
    CUBLAS_CHECK(cublasLtMatmul(o.lt, o.fp8->desc, &kOne, o.Bt8, o.fp8->a, o.A8, o.fp8->b, &kZero, o.C, o.fp8->c, o.C,
                                o.fp8->c, &o.fp8->algo, o.fp8->workspace, o.fp8->workspace_bytes, 0));
}

// The table of precisions: what each reads, writes and accumulates in (unit roundoffs
// for its tolerances, verify::gemm_tolerance and verify::gemm_rounded_tolerance), the peak
// of the unit it runs on, and the compute capability it needs. TF32 and BF16 tensor cores
// start at cc 8.0 (below it cuBLAS fails or falls back to another path: the row would not
// be what its name says), FP8 at cc 8.9; FP16, with either accumulator, runs on every GPU
// the course supports.
enum class In { Fp32, Tf32, Bf16, Fp16, Fp8 };
struct Precision {
    const char* key;
    const char* name;
    void (*run)(const Operands&);
    In in;
    const verify::FloatFormat* in_fmt;   // the inputs' format (FP32: used as they are)
    const verify::FloatFormat* out_fmt;  // C's format
    double u_acc;                        // unit roundoff of the accumulation
    bool mma_truncates;                  // FP32 sums on tensor cores: not rounded to nearest (gemm_rounded_tolerance)
    lesson::MathUnit unit;
    double peak_factor;  // FP8: twice the 16-bit tensor rate (sm_89, sm_90)
    bool sixteen_bit;    // counts for the "best 16-bit rate" yardstick (see in_best16)
    int cc;              // least compute capability (0: any)
    const char* cc_why;  // what that capability brings
};
// FP8's accumulator: cuBLASLt accumulates in FP32 (CUBLAS_COMPUTE_32F), but inside
// the FP8 MMA fewer bits are kept between promotions to FP32; budgeted as 2^-14, which
// covers the truncation too. FP16 accumulation keeps its sqrt(K) budget: its error grows
// like sqrt(K), far within it.
static const Precision kPrecisions[] = {
    {"fp32", "FP32 (SIMT)", run_fp32, In::Fp32, &verify::kFp32, &verify::kFp32, 0x1p-24, false,
     lesson::MathUnit::Fp32Simt, 1, false, 0, ""},
    {"tf32", "TF32 tensor cores, FP32 accumulate", run_tf32, In::Tf32, &verify::kTf32, &verify::kFp32, 0x1p-24, true,
     lesson::MathUnit::Tf32Tensor, 1, false, 80, "TF32 tensor cores"},
    {"bf16", "BF16 in/out, FP32 accumulate", run_bf16, In::Bf16, &verify::kBf16, &verify::kBf16, 0x1p-24, true,
     lesson::MathUnit::Bf16Tensor, 1, true, 80, "BF16 tensor cores"},
    {"fp16", "FP16 in/out, FP32 accumulate", run_fp16, In::Fp16, &verify::kFp16, &verify::kFp16, 0x1p-24, true,
     lesson::MathUnit::Bf16Tensor, 1, true, 0, ""},
    {"fp16acc16", "FP16 in/out, FP16 accumulate", run_fp16_acc16, In::Fp16, &verify::kFp16, &verify::kFp16, 0x1p-11,
     false, lesson::MathUnit::Bf16Tensor, 1, true, 0, ""},
    {"fp8", "FP8 E4M3 in (scaled), BF16 out (cuBLASLt)", run_fp8, In::Fp8, &verify::kE4m3, &verify::kBf16, 0x1p-14,
     false, lesson::MathUnit::Bf16Tensor, 2, false, 89, "FP8 tensor cores"},
};
constexpr int kPrecisionCount = int(sizeof(kPrecisions) / sizeof(kPrecisions[0]));

// GeForce cards (lesson::gpu_limits().geforce) run FP16 with FP16 accumulation at twice the
// rate of 16-bit math with FP32 accumulation, the professional cards' rate (common/ceilings.h).
// There it is bounded by that rate, and it stays out of the "best 16-bit" yardstick, whose
// point is to compare GEMMs that run at one tensor rate.
static bool double_rate(const Precision& pr) {
    return lesson::gpu_limits().geforce && pr.in == In::Fp16 && pr.u_acc > 0x1p-24;
}
static bool in_best16(const Precision& pr) { return pr.sixteen_bit && !double_rate(pr); }

// The peak of the unit `pr` runs on, from the SM clock, in TFLOP/s; NaN where common/ceilings.h
// knows no rate for this compute capability.
static double peak_tflops(const Precision& pr, const cudaDeviceProp& prop, int device) {
    double f = pr.peak_factor;
    if (double_rate(pr)) {
        const double full = lesson::flops_per_clock_per_sm(prop.major, prop.minor, pr.unit, false);
        const double geforce = lesson::flops_per_clock_per_sm(prop.major, prop.minor, pr.unit, true);
        f *= geforce > 0 ? full / geforce : NAN;
    }
    return f * lesson::peak_gflops(prop, device, pr.unit) / 1e3;
}

static double bytes_of(const verify::FloatFormat* f) {
    return f == &verify::kFp32 || f == &verify::kTf32 ? 4.0 : f == &verify::kE4m3 ? 1.0 : 2.0;
}

// ---------------------------------------------------------------- one shape of the run

struct Shape {
    int64_t M, N, K;
};
static std::string shape_text(int64_t M, int64_t N, int64_t K) {
    return M == N && N == K ? std::to_string(M) + "^3"
                            : std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K);
}

struct Timed {  // one precision at one shape
    int p;
    double ms, tflops, rel_err, rounded_err, tol, rounded_tol;
};

// Sampled rows of C (format `out`) copied back and decoded to float.
static std::vector<float> copy_rows(const void* d_C, const verify::FloatFormat* out, const std::vector<int64_t>& rows,
                                    int64_t N) {
    const size_t es = size_t(bytes_of(out));
    std::vector<float> got(rows.size() * N);
    std::vector<uint16_t> bits(static_cast<size_t>(N));
    for (size_t r = 0; r < rows.size(); ++r) {
        if (es == 4) {
            CUDA_CHECK(cudaMemcpy(got.data() + r * N, static_cast<const float*>(d_C) + rows[r] * N, N * 4,
                                  cudaMemcpyDeviceToHost));
        } else {
            CUDA_CHECK(cudaMemcpy(bits.data(), static_cast<const uint16_t*>(d_C) + rows[r] * N, N * 2,
                                  cudaMemcpyDeviceToHost));
            for (int64_t j = 0; j < N; ++j)
                got[r * N + j] =
                    out == &verify::kBf16 ? verify::bf16_bits_to_float(bits[j]) : verify::fp16_bits_to_float(bits[j]);
        }
    }
    return got;
}

// Precision p on C poisoned first (0xFF bytes: NaN in every format), its sampled rows checked
// against the double reference of the float inputs (ref) and of the inputs as this precision
// rounds them (ref_rounded; for FP8 times both dequantization scales). Returns its errors.
static Timed check_gemm(lesson::Report& report, const Operands& o, int p, const std::vector<int64_t>& rows,
                        const std::vector<double>& ref, const std::vector<double>& ref_rounded,
                        const std::string& shape, bool inject_fault, uint64_t seed) {
    const Precision& pr = kPrecisions[p];
    CUDA_CHECK(cudaMemset(o.C, 0xFF, size_t(o.M) * o.N * sizeof(float)));  // NaN in every format
    pr.run(o);
    std::vector<float> got = copy_rows(o.C, pr.out_fmt, rows, o.N);
    if (inject_fault) verify::inject_fault(got.data(), got.size(), seed);
    const double u_in = pr.in == In::Fp32 ? 0.0 : verify::unit_roundoff(*pr.in_fmt);
    const double tol = verify::gemm_tolerance(u_in, verify::unit_roundoff(*pr.out_fmt), pr.u_acc, o.K);
    const lesson::Check c = verify::compare(got.data(), ref.data(), ref.size(), tol,
                                            std::string(pr.name) + ", " + shape + ", " + std::to_string(rows.size()) +
                                                " sampled rows vs double "
                                                "reference of the float inputs");
    report.check(c);
    // Against the rounded inputs: the output's and the accumulator's rounding only. For FP32
    // inputs the check above is that check already (u_in = 0).
    double rounded_err = c.rel_l2, rounded_tol = tol;
    // CUBLAS_COMPUTE_32F_FAST_TF32 allows TF32, it does not demand it: for some shapes (K = 48,
    // say) cuBLAS picks an FP32 kernel. A result within FP32's own tolerance of the float
    // inputs is that path, and checked as FP32 is; anything else must match the TF32 inputs.
    const double fp32_tol = verify::gemm_tolerance(0.0, verify::unit_roundoff(verify::kFp32), 0x1p-24, o.K);
    if (pr.in == In::Tf32 && c.rel_l2 <= fp32_tol) {
        report.check(verify::compare(got.data(), ref.data(), ref.size(), fp32_tol,
                                     std::string(pr.name) + ", " + shape +
                                         ": cuBLAS took an FP32 path (no TF32 rounding): FP32's tolerance"));
        rounded_tol = fp32_tol;
    } else if (pr.in != In::Fp32) {
        rounded_tol =
            verify::gemm_rounded_tolerance(verify::unit_roundoff(*pr.out_fmt), pr.u_acc, o.K, pr.mma_truncates);
        const lesson::Check cr =
            verify::compare(got.data(), ref_rounded.data(), ref.size(), rounded_tol,
                            std::string(pr.name) + ", " + shape + ", " + std::to_string(rows.size()) +
                                " sampled rows vs double reference of the rounded inputs" +
                                (pr.in == In::Fp8 ? " times both dequantization scales" : ""));
        report.check(cr);
        rounded_err = cr.rel_l2;
    }
    report.metric(std::string(pr.name) + ", " + shape + ": rel-L2 vs the rounded inputs", rounded_err, "");
    return {p, 0.0, 0.0, c.rel_l2, rounded_err, tol, rounded_tol};
}

// The GEMMs of one shape timed interleaved: round r takes one sample of every precision in turn.
// At large sizes the 16-bit GEMMs run at the GPU's power limit, where the clock depends on what
// ran just before: timed one after another, the order would decide which came out fastest.
// Interleaved, every precision meets the same conditions, and their ratios compare precisions,
// not moments.
static void time_gemms(lesson::Report& report, const Operands& o, std::vector<Timed>& timed, int R,
                       const std::string& shape) {
    std::vector<void (*)(const Operands&)> runs;
    for (const Timed& t : timed) runs.push_back(kPrecisions[t.p].run);
    const std::vector<double> ms = lesson::time_interleaved_ms(R, int(runs.size()), [&](int i) { runs[size_t(i)](o); });
    const double nA = double(o.M) * o.K, nB = double(o.N) * o.K, nC = double(o.M) * o.N;
    for (size_t i = 0; i < timed.size(); ++i) {
        Timed& t = timed[i];
        const Precision& pr = kPrecisions[t.p];
        t.ms = ms[i];
        t.tflops = 2.0 * o.M * o.N * double(o.K) / (t.ms * 1e9);
        const double bytes = bytes_of(pr.in_fmt) * (nA + nB) + bytes_of(pr.out_fmt) * nC;
        report.work(std::string(pr.name) + ", " + shape, 2.0 * o.M * o.N * double(o.K), bytes, t.ms);
    }
}
