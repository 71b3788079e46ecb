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
// The inputs are converted by the lesson's own kernels (kernels/convert.cuh), timed
// beside the GEMMs. Three measured demonstrations show the formats: FP16 overflow in
// an FP16 accumulator, FP16 underflow and loss scaling, BF16's 8 bits on a long sum.
//
// Lesson 19 of the course: lesson 08 called cuBLAS in FP32 and TF32, lesson 18 came
// before this one; lesson 20 comes next. See README.md.
// Run: ./build/bin/mixed_precision                    (4096^3 and 8192^3, every precision)
//      ./build/bin/mixed_precision --precision=fp8    (one precision)
//      ./build/bin/mixed_precision --m=4096 --n=2048 --k=8192
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/ceilings.h"
#include "common/check.h"
#include "common/device.h"
#include "common/flags.h"
#include "common/memory.h"
#include "common/needs.h"
#include "common/report.h"
#include "common/timer.h"
#include "verify/compare.h"
#include "verify/parallel.h"
#include "verify/precision.h"
#include "verify/random.h"

#include "demonstrations.cuh"
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

// FP8 through cuBLASLt: a descriptor (compute and scale type, transposes, scale
// pointers), three layouts, and an algorithm from the heuristic, made once per shape.
// Elements past the end of each converted matrix, poisoned and checked: a launch of n / 4 threads
// rounded up to whole blocks hangs over the end by fewer than 4 * convert::kThreads elements.
constexpr size_t kGuard = 4 * convert::kThreads;
constexpr int kScaleStride = 4;  // floats between the two FP8 scales: 16 bytes, the alignment cuBLASLt needs

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
// covers the truncation too. FP16 accumulation keeps its sqrt(K) budget: measured on an
// H100 its error grows like sqrt(K) (2.4e-3 at 4096^3, 3.3e-3 at 8192^3), far within it.
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

// ---------------------------------------------------------------- host helpers

// The inputs as a GEMM of format `in` sees them, rounded on the CPU: the values (sampled
// rows of A, all of Bt) and, for the formats our kernels write, the bits they must write.
struct Rounded {
    verify::host_vector<float> a_rows, bt;  // host_vector: filled by the parallel loop below, not zeroed first
    verify::host_vector<uint16_t> a_bits, bt_bits;
    double scale = 1.0;  // FP8: dequantization scale of A times that of Bt
    float scale_a = 1.0f, scale_bt = 1.0f;
};
static Rounded round_inputs(In in, const verify::host_vector<float>& h_A, const verify::host_vector<float>& h_Bt,
                            const std::vector<int64_t>& rows, int64_t K, float amax_a, float amax_bt) {
    Rounded r;
    r.a_rows.resize(rows.size() * K);
    for (size_t i = 0; i < rows.size(); ++i)
        std::copy(h_A.begin() + rows[i] * K, h_A.begin() + (rows[i] + 1) * K, r.a_rows.begin() + i * K);
    r.bt.resize(h_Bt.size());  // rounded from h_Bt below
    const float qa = verify::fp8_quant_scale(amax_a), qb = verify::fp8_quant_scale(amax_bt);
    if (in == In::Fp8) {
        r.scale_a = verify::fp8_dequant_scale(amax_a);
        r.scale_bt = verify::fp8_dequant_scale(amax_bt);
        r.scale = double(r.scale_a) * double(r.scale_bt);
    }
    const bool has_bits = in == In::Bf16 || in == In::Fp16 || in == In::Fp8;
    // v[i] = src[i] rounded (src may be v itself); each element by itself, so blocks run on all cores.
    auto round_all = [&](const float* src, verify::host_vector<float>& v, verify::host_vector<uint16_t>& bits,
                         float q) {
        if (has_bits) bits.resize(v.size());
        verify::parallel_blocks(v.size(), verify::items_per_block(64), [&](uint64_t b, uint64_t e) {
            for (uint64_t i = b; i < e; ++i) {
                float x = src[i];
                if (in == In::Tf32) x = verify::to_tf32(x);
                if (in == In::Bf16) x = verify::bf16_bits_to_float(bits[i] = verify::to_bf16_bits(x));
                if (in == In::Fp16) x = verify::fp16_bits_to_float(bits[i] = verify::to_fp16_bits(x));
                if (in == In::Fp8) x = verify::e4m3_bits_to_float(bits[i] = verify::to_e4m3_bits(x * q));
                v[i] = x;
            }
        });
    };
    round_all(r.a_rows.data(), r.a_rows, r.a_bits, qa);
    round_all(h_Bt.data(), r.bt, r.bt_bits, qb);
    return r;
}

// `count` elements of `bytes` (1 or 2) each at d_src + offset, copied to the host and widened.
// The host pages are touched on all cores first: a pageable copy into fresh pages faults them in one by one.
static verify::host_vector<uint16_t> copy_bits(const void* d_src, size_t offset, size_t count, size_t bytes) {
    verify::host_vector<uint16_t> out(count);
    if (bytes == 2) {
        verify::parallel_memset(out.data(), 0, count * 2);
        CUDA_CHECK(
            cudaMemcpy(out.data(), static_cast<const uint16_t*>(d_src) + offset, count * 2, cudaMemcpyDeviceToHost));
    } else {
        verify::host_vector<uint8_t> narrow(count);
        verify::parallel_memset(narrow.data(), 0, count);
        CUDA_CHECK(
            cudaMemcpy(narrow.data(), static_cast<const uint8_t*>(d_src) + offset, count, cudaMemcpyDeviceToHost));
        uint16_t* o = out.data();
        const uint8_t* in = narrow.data();
        verify::parallel_blocks(count, verify::items_per_block(1), [=](uint64_t b, uint64_t e) {
            for (uint64_t i = b; i < e; ++i) o[i] = in[i];
        });
    }
    return out;
}

// An exact check: the GPU's bits against the CPU's, element by element (blocks on all host cores).
static lesson::Check same_bits(const verify::host_vector<uint16_t>& gpu, const uint16_t* cpu, uint64_t offset,
                               lesson::Check c) {
    struct Tally {
        uint64_t bad = 0;
        int64_t first = -1;
    };
    const std::vector<Tally> parts =
        verify::block_partials<Tally>(gpu.size(), verify::items_per_block(1), [&](uint64_t b, uint64_t e) {
            Tally t;
            for (uint64_t i = b; i < e; ++i)
                if (gpu[i] != cpu[i]) {
                    if (t.bad++ == 0) t.first = int64_t(offset + i);
                }
            return t;
        });
    c.checked += gpu.size();
    for (const Tally& t : parts) {  // in block order: the first bad element is the first block's first
        if (t.bad > 0 && c.bad_count == 0 && c.first_bad < 0) c.first_bad = t.first;
        c.bad_count += t.bad;
    }
    c.rel_l2 = c.max_abs = 0.0;
    c.tol = 0.0;
    c.pass = c.checked > 0 && c.bad_count == 0;
    return c;
}

// Sampled rows of C (format `out`) copied back and decoded to float.
static std::vector<float> copy_rows(const void* d_C, const verify::FloatFormat* out, const std::vector<int64_t>& rows,
                                    int64_t N) {
    const size_t es = size_t(bytes_of(out));
    std::vector<float> got(rows.size() * N);
    for (size_t r = 0; r < rows.size(); ++r) {
        if (es == 4) {
            CUDA_CHECK(cudaMemcpy(got.data() + r * N, static_cast<const float*>(d_C) + rows[r] * N, N * 4,
                                  cudaMemcpyDeviceToHost));
        } else {
            const verify::host_vector<uint16_t> bits = copy_bits(d_C, size_t(rows[r] * N), size_t(N), 2);
            for (int64_t j = 0; j < N; ++j)
                got[r * N + j] =
                    out == &verify::kBf16 ? verify::bf16_bits_to_float(bits[j]) : verify::fp16_bits_to_float(bits[j]);
        }
    }
    return got;
}

static std::string shape_text(int64_t M, int64_t N, int64_t K) {
    return M == N && N == K ? std::to_string(M) + "^3"
                            : std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K);
}

// ---------------------------------------------------------------- main

struct Shape {
    int64_t M, N, K;
};
struct Timed {  // one precision at one shape
    int p;
    double ms, tflops, rel_err, rounded_err, tol, rounded_tol;
};
struct ConvTimed {
    std::string name;
    double ms, bytes, gemm_ms;
    std::string in_l2;
};

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
    const Shape big = shapes.back();
    const double MK = double(big.M) * big.K, NK = double(big.N) * big.K, MN = double(big.M) * big.N;
    const std::string size_flags = "--m/--n/--k";
    // Host: A, Bt, a rounded copy of Bt with its bits and the GPU's bits. Device: A and Bt in
    // float, FP16, BF16 and FP8, C in float, cuBLASLt's workspace.
    lesson::require_host_memory(uint64_t(4 * MK + 14 * NK), "pageable", size_flags);
    cudaDeviceProp prop = lesson::pick_device(opt.device);
    const size_t kWorkspace = size_t(32) << 20;  // cuBLASLt's scratch
    lesson::require_device_memory(uint64_t(9 * (MK + NK) + 4 * MN) + kWorkspace, size_flags);
    auto wanted = [&](int p) { return selected < 0 || selected == p; };

    lesson::Report report("19_mixed_precision");
    report.device(prop.name, prop.major, prop.minor, prop.multiProcessorCount, prop.totalGlobalMem / 1e9);
    report.config("shapes", one_shape ? shape_text(m, n, k) : std::string("4096^3, 8192^3"));
    report.config("precision", only.empty() ? std::string("all") : only);
    report.config("check_rows", check_rows);
    report.config("repeat", opt.repeat);
    report.config("seed", opt.seed);

    // The precisions to run: the wanted ones this GPU has (the Gate prints one line for each other).
    lesson::Gate gate(report);
    std::vector<bool> runs(kPrecisionCount, false);
    for (int p = 0; p < kPrecisionCount; ++p) {
        if (!wanted(p)) continue;
        lesson::Needs needs;
        needs.cc = kPrecisions[p].cc;
        needs.cc_why = kPrecisions[p].cc_why;
        runs[p] = gate.run(std::string(kPrecisions[p].key) + " (" + kPrecisions[p].name + ")", needs);
    }
    if (gate.none_ran()) return report.skip(gate.reason(), opt.json);

    // One cuBLAS handle and one cuBLASLt handle for the whole run.
    cublasHandle_t blas;
    cublasLtHandle_t lt;
    CUBLAS_CHECK(cublasCreate(&blas));
    CUBLAS_CHECK(cublasLtCreate(&lt));
    int version = 0;
    CUBLAS_CHECK(cublasGetVersion(blas, &version));
    report.config("cublas_version", int64_t(version));
    report.timing(std::string(lesson::kTimingMethod) +
                  "; the GEMMs of one shape interleaved, one sample of each precision in turn "
                  "(lesson::time_interleaved_ms)");
    if (const char* env = std::getenv("NVIDIA_TF32_OVERRIDE"))
        report.note(std::string("NVIDIA_TF32_OVERRIDE=") + env + " is set: it overrides the TF32 choice below");
    const int R = int(opt.repeat);

    // 2. The formats, measured (demonstrations.cuh): overflow, underflow and loss scaling, long sums.
    demo_fp16_overflow(report, gate, blas, uint64_t(opt.seed));
    demo_underflow_and_loss_scaling(report, uint64_t(opt.seed));
    demo_long_sums(report, uint64_t(opt.seed));

    // 3. The GEMMs, shape by shape.
    std::vector<std::vector<Timed>> timed(shapes.size());
    std::vector<ConvTimed> conversions;
    double cpu_ms = 0;
    bool fault_injected = false;
    for (size_t si = 0; si < shapes.size(); ++si) {
        const int M = int(shapes[si].M), N = int(shapes[si].N), K = int(shapes[si].K);
        const size_t nA = size_t(M) * K, nB = size_t(N) * K, nC = size_t(M) * N;
        const std::string shape = shape_text(M, N, K);

        // 3a. The same random floats for every precision, on the host and the device: A in
        //     [-48, 48), Bt in [-1e-3, 1e-3) (verify/precision.h says why these ranges).
        verify::host_vector<float> h_A(nA), h_Bt(nB);  // not zeroed first: the parallel fills write every element
        verify::fill_uniform(h_A.data(), nA, uint64_t(opt.seed) + 100 * si, -verify::kGemmRangeA, verify::kGemmRangeA);
        verify::fill_uniform(h_Bt.data(), nB, uint64_t(opt.seed) + 100 * si + 1, -verify::kGemmRangeBt,
                             verify::kGemmRangeBt);
        const std::vector<int64_t> rows = verify::stratified_rows(M, check_rows, uint64_t(opt.seed) + 100 * si + 2);
        float *d_A, *d_Bt, *d_scales;
        __half *d_A16, *d_Bt16;
        __nv_bfloat16 *d_Abf, *d_Btbf;
        __nv_fp8_storage_t *d_A8, *d_Bt8;
        unsigned* d_amax;
        void *d_C, *d_workspace;
        // Every input and converted matrix has kGuard elements more than it needs: a conversion that
        // writes past the end lands there, and the check below finds the guard no longer poisoned.
        CUDA_CHECK(cudaMalloc(&d_A, (nA + kGuard) * sizeof(float)));
        CUDA_CHECK(cudaMalloc(&d_Bt, (nB + kGuard) * sizeof(float)));
        CUDA_CHECK(cudaMalloc(&d_A16, (nA + kGuard) * sizeof(__half)));
        CUDA_CHECK(cudaMalloc(&d_Bt16, (nB + kGuard) * sizeof(__half)));
        CUDA_CHECK(cudaMalloc(&d_Abf, (nA + kGuard) * sizeof(__nv_bfloat16)));
        CUDA_CHECK(cudaMalloc(&d_Btbf, (nB + kGuard) * sizeof(__nv_bfloat16)));
        CUDA_CHECK(cudaMalloc(&d_A8, nA + kGuard));
        CUDA_CHECK(cudaMalloc(&d_Bt8, nB + kGuard));
        CUDA_CHECK(cudaMalloc(&d_C, nC * sizeof(float)));  // big enough for C in any format
        CUDA_CHECK(cudaMalloc(&d_amax, 2 * sizeof(unsigned)));
        // Dequantization scales: A's at [0], Bt's at [kScaleStride]. cuBLASLt's scale pointers must
        // be 16-byte aligned: one 4 bytes in finds an algorithm, then cublasLtMatmul returns
        // CUBLAS_STATUS_NOT_SUPPORTED (measured on an H100, cuBLASLt 13.1).
        CUDA_CHECK(cudaMalloc(&d_scales, 2 * kScaleStride * sizeof(float)));
        CUDA_CHECK(cudaMemset(d_scales, 0, 2 * kScaleStride * sizeof(float)));  // the gaps too: they are copied back
        CUDA_CHECK(cudaMalloc(&d_workspace, kWorkspace));
        CUDA_CHECK(cudaMemcpy(d_A, h_A.data(), nA * sizeof(float), cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(d_Bt, h_Bt.data(), nB * sizeof(float), cudaMemcpyHostToDevice));

        // 3b. Per input format a wanted precision reads: the CPU's rounding of the inputs and
        //     the double reference of the sampled rows from them (to separate input rounding
        //     from the rest of the error); then our conversion kernels (cuBLAS rounds TF32
        //     itself): run, check bit for bit against the CPU's rounding, time (both matrices
        //     in one timed call).
        struct Conversion {
            In in;
            const char* name;
            double out_bytes;
            void* d_a;
            void* d_bt;
        };
        const Conversion convs[] = {{In::Tf32, "", 4, nullptr, nullptr},
                                    {In::Bf16, "float -> BF16", 2, d_Abf, d_Btbf},
                                    {In::Fp16, "float -> FP16", 2, d_A16, d_Bt16},
                                    {In::Fp8, "float -> FP8 E4M3 (amax pass + scaled conversion)", 1, d_A8, d_Bt8}};
        auto convert_both = [&](In in) {
            if (in == In::Bf16) {
                convert::to_bf16(d_A, d_Abf, nA);
                convert::to_bf16(d_Bt, d_Btbf, nB);
            } else if (in == In::Fp16) {
                convert::to_half(d_A, d_A16, nA);
                convert::to_half(d_Bt, d_Bt16, nB);
            } else {
                convert::to_e4m3(d_A, d_A8, nA, d_amax, d_scales, prop.multiProcessorCount);
                convert::to_e4m3(d_Bt, d_Bt8, nB, d_amax + 1, d_scales + kScaleStride, prop.multiProcessorCount);
            }
        };
        lesson::HostTimer cpu;
        std::vector<double> ref(rows.size() * N);
        verify::gemm_abt_rows(h_A.data(), h_Bt.data(), N, K, rows, ref.data());
        std::vector<int64_t> packed(rows.size());  // the rounded rows of A are packed one after another
        for (size_t i = 0; i < rows.size(); ++i) packed[i] = int64_t(i);
        const float amax_a = verify::amax_of(h_A.data(), nA), amax_bt = verify::amax_of(h_Bt.data(), nB);
        cpu_ms += cpu.ms();
        std::vector<std::vector<double>> ref_rounded(5);  // indexed by In
        std::vector<size_t> conv_index(5, SIZE_MAX);      // where each format's conversion is in `conversions`
        for (const Conversion& cv : convs) {
            bool needed = false;
            for (int p = 0; p < kPrecisionCount; ++p) needed = needed || (runs[p] && kPrecisions[p].in == cv.in);
            if (!needed) continue;
            cpu.reset();
            const Rounded r = round_inputs(cv.in, h_A, h_Bt, rows, K, amax_a, amax_bt);
            ref_rounded[int(cv.in)].resize(rows.size() * N);
            verify::gemm_abt_rows(r.a_rows.data(), r.bt.data(), N, K, packed, ref_rounded[int(cv.in)].data(), r.scale);
            cpu_ms += cpu.ms();
            if (cv.in == In::Tf32) continue;
            const size_t es = size_t(cv.out_bytes);
            CUDA_CHECK(cudaMemset(cv.d_a, 0xFF, (nA + kGuard) * es));  // 0xFF bytes: NaN in FP16, BF16 and E4M3
            CUDA_CHECK(cudaMemset(cv.d_bt, 0xFF, (nB + kGuard) * es));
            convert_both(cv.in);
            lesson::Check c;
            c.what = std::string("conversion ") + cv.name + ", " + shape +
                     ": all of Bt and the sampled rows of A, bit for bit against the CPU's round-to-nearest-even; "
                     "nothing written past the end of either";
            c = same_bits(copy_bits(cv.d_bt, 0, nB, es), r.bt_bits.data(), 0, c);
            for (size_t i = 0; i < rows.size(); ++i)
                c = same_bits(copy_bits(cv.d_a, size_t(rows[i]) * K, size_t(K), es), r.a_bits.data() + i * K,
                              nB + i * size_t(K), c);
            const std::vector<uint16_t> poison(kGuard, es == 2 ? 0xFFFF : 0xFF);  // the guards: still poisoned
            c = same_bits(copy_bits(cv.d_a, nA, kGuard, es), poison.data(), nB + rows.size() * size_t(K), c);
            c = same_bits(copy_bits(cv.d_bt, nB, kGuard, es), poison.data(), nB + rows.size() * size_t(K) + kGuard, c);
            if (cv.in == In::Fp8) {  // the scales the GEMM will use, bit for bit too
                float h_scales[2 * kScaleStride];
                CUDA_CHECK(cudaMemcpy(h_scales, d_scales, sizeof h_scales, cudaMemcpyDeviceToHost));
                const bool same = h_scales[0] == r.scale_a && h_scales[kScaleStride] == r.scale_bt;
                c.checked += 2;
                c.bad_count += same ? 0 : 1;
                c.pass = c.pass && same;
                report.metric("FP8: amax of A, " + shape, amax_a, "");
                report.metric("FP8: amax of Bt, " + shape, amax_bt, "");
            }
            report.check(c);
            const double ms = lesson::time_median_ms(R, [&] { convert_both(cv.in); });
            // Bytes: read the floats, write the narrow values; FP8 reads the floats twice (amax, then convert).
            const double bytes = double(nA + nB) * (4.0 + cv.out_bytes + (cv.in == In::Fp8 ? 4.0 : 0.0));
            conv_index[int(cv.in)] = conversions.size();
            conversions.push_back({std::string("convert ") + cv.name + ", A and Bt, " + shape, ms, bytes, 0.0,
                                   lesson::l2_note(bytes, prop)});
        }

        // 3d. Every precision that runs: poison C, run, check the sampled rows. Then 3e times them.
        Fp8Plan plan;
        if (runs[kPrecisionCount - 1])
            plan = make_fp8_plan(lt, M, N, K, d_scales, d_scales + kScaleStride, d_workspace, kWorkspace);
        const Operands ops{M, N, K, d_A, d_Bt, d_A16, d_Bt16, d_Abf, d_Btbf, d_A8, d_Bt8, d_C, blas, lt, &plan};
        for (int p = 0; p < kPrecisionCount; ++p) {
            const Precision& pr = kPrecisions[p];
            if (!runs[p]) continue;
            CUDA_CHECK(cudaMemset(d_C, 0xFF, nC * sizeof(float)));  // NaN in every format
            pr.run(ops);
            std::vector<float> got = copy_rows(d_C, pr.out_fmt, rows, N);
            if (opt.inject_fault && !fault_injected) {
                verify::inject_fault(got.data(), got.size(), uint64_t(opt.seed));
                fault_injected = true;
            }
            const double u_in = pr.in == In::Fp32 ? 0.0 : verify::unit_roundoff(*pr.in_fmt);
            const double tol = verify::gemm_tolerance(u_in, verify::unit_roundoff(*pr.out_fmt), pr.u_acc, K);
            const lesson::Check c =
                verify::compare(got.data(), ref.data(), ref.size(), tol,
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
            const double fp32_tol = verify::gemm_tolerance(0.0, verify::unit_roundoff(verify::kFp32), 0x1p-24, K);
            if (pr.in == In::Tf32 && c.rel_l2 <= fp32_tol) {
                report.check(verify::compare(got.data(), ref.data(), ref.size(), fp32_tol,
                                             std::string(pr.name) + ", " + shape +
                                                 ": cuBLAS took an FP32 path (no TF32 rounding): FP32's tolerance"));
                rounded_tol = fp32_tol;
            } else if (pr.in != In::Fp32) {
                rounded_tol =
                    verify::gemm_rounded_tolerance(verify::unit_roundoff(*pr.out_fmt), pr.u_acc, K, pr.mma_truncates);
                const lesson::Check cr =
                    verify::compare(got.data(), ref_rounded[int(pr.in)].data(), ref.size(), rounded_tol,
                                    std::string(pr.name) + ", " + shape + ", " + std::to_string(rows.size()) +
                                        " sampled rows vs double reference of the rounded inputs" +
                                        (pr.in == In::Fp8 ? " times both dequantization scales" : ""));
                report.check(cr);
                rounded_err = cr.rel_l2;
            }
            report.metric(std::string(pr.name) + ", " + shape + ": rel-L2 vs the rounded inputs", rounded_err, "");
            timed[si].push_back({p, 0.0, 0.0, c.rel_l2, rounded_err, tol, rounded_tol});
        }

        // 3e. Time them interleaved: round r takes one sample of every precision in turn. At this
        //     size the 16-bit GEMMs run at the GPU's power limit, where the clock depends on what
        //     ran just before. Timed one after another, which 16-bit precision came out fastest
        //     changed from run to run, by up to 10%. Interleaved, every precision meets the same
        //     conditions, and their ratios compare precisions, not moments.
        std::vector<void (*)(const Operands&)> runs;
        for (const Timed& t : timed[si]) runs.push_back(kPrecisions[t.p].run);
        const std::vector<double> ms =
            lesson::time_interleaved_ms(R, int(runs.size()), [&](int i) { runs[size_t(i)](ops); });
        for (size_t i = 0; i < timed[si].size(); ++i) {
            Timed& t = timed[si][i];
            const Precision& pr = kPrecisions[t.p];
            t.ms = ms[i];
            t.tflops = 2.0 * M * N * double(K) / (t.ms * 1e9);
            const double bytes = bytes_of(pr.in_fmt) * double(nA + nB) + bytes_of(pr.out_fmt) * double(nC);
            report.work(std::string(pr.name) + ", " + shape, 2.0 * M * N * double(K), bytes, t.ms);
            const size_t ci = conv_index[int(pr.in)];  // the conversion's cost beside (the first) GEMM reading it
            if (ci != SIZE_MAX && conversions[ci].gemm_ms == 0) conversions[ci].gemm_ms = t.ms;
        }
        if (plan.desc) destroy_fp8_plan(plan);

        // 3f. Free this shape's buffers.
        CUDA_CHECK(cudaFree(d_workspace));
        CUDA_CHECK(cudaFree(d_scales));
        CUDA_CHECK(cudaFree(d_amax));
        CUDA_CHECK(cudaFree(d_C));
        CUDA_CHECK(cudaFree(d_Bt8));
        CUDA_CHECK(cudaFree(d_A8));
        CUDA_CHECK(cudaFree(d_Btbf));
        CUDA_CHECK(cudaFree(d_Abf));
        CUDA_CHECK(cudaFree(d_Bt16));
        CUDA_CHECK(cudaFree(d_A16));
        CUDA_CHECK(cudaFree(d_Bt));
        CUDA_CHECK(cudaFree(d_A));
    }
    report.cpu_reference_ms(cpu_ms, verify::host_threads());
    report.note("CPU reference: " + std::to_string(check_rows) +
                " rows of C per shape (one random row in each band "
                "of M/" +
                std::to_string(check_rows) +
                " rows), in double, from the float inputs and from each "
                "precision's rounded inputs");
    report.note(
        "tolerance on rel-L2 = 4 u_in + 2 u_out + 4 u_acc sqrt(K) (u = unit roundoff 2^-p of the inputs', "
        "output's and accumulator's formats; FP8's accumulator budgeted at 2^-14); against the rounded inputs "
        "2 u_out + 4 u_acc sqrt(K), plus 2 u_acc K / 4 where tensor cores truncate their FP32 sums");
    char ranges[160];
    std::snprintf(ranges, sizeof ranges,
                  "inputs: A uniform in [-%g, %g), Bt in [-%g, %g), so FP8's two scales 448 / amax differ by %.0fx",
                  double(verify::kGemmRangeA), double(verify::kGemmRangeA), double(verify::kGemmRangeBt),
                  double(verify::kGemmRangeBt), double(verify::kGemmRangeA) / double(verify::kGemmRangeBt));
    report.note(ranges);
    CUBLAS_CHECK(cublasLtDestroy(lt));
    CUBLAS_CHECK(cublasDestroy(blas));

    // 4. Rates: each against the peak of its unit from the clock (a bound; where no rate is known
    //    for this compute capability, not graded, and the row says why) and against the best
    //    16-bit rate of the same shape in this run (a yardstick).
    bool acc16_ran = false;
    for (size_t si = 0; si < shapes.size(); ++si) {
        const std::string shape = shape_text(shapes[si].M, shapes[si].N, shapes[si].K);
        const std::string small = lesson::small_gemm_note(shapes[si].M, shapes[si].N, prop);
        double best16 = 0;
        for (const Timed& t : timed[si])
            if (in_best16(kPrecisions[t.p])) best16 = std::max(best16, t.tflops);
        if (best16 > 0) report.yardstick("best 16-bit GEMM rate, " + shape, best16, "TFLOP/s");
        for (const Timed& t : timed[si]) {
            const Precision& pr = kPrecisions[t.p];
            acc16_ran = acc16_ran || double_rate(pr);
            const double peak = peak_tflops(pr, prop, int(opt.device));
            const std::string name = std::string(pr.name) + ", " + shape;
            const std::string peak_name = pr.in == In::Fp8                          ? "FP8 tensor peak"
                                          : pr.unit == lesson::MathUnit::Fp32Simt   ? "FP32 FMA peak"
                                          : pr.unit == lesson::MathUnit::Tf32Tensor ? "TF32 tensor peak"
                                          : double_rate(pr)                         ? "FP16-accumulate tensor peak"
                                                                                    : "16-bit tensor peak";
            const std::string ungraded =
                !small.empty() || std::isfinite(peak)
                    ? small
                    : "no " + peak_name + " known for cc " + lesson::cc_text(prop.major * 10 + prop.minor);
            report.variant_bound(name, t.ms, t.tflops, "TFLOP/s", peak, peak_name, ungraded);
            if (best16 > 0)
                report.variant_yardstick(name + " vs best 16-bit", t.ms, t.tflops, "TFLOP/s", best16, "best 16-bit",
                                         small);
        }
    }
    if (acc16_ran)
        report.note(
            "GeForce: FP16 with FP16 accumulation runs at twice the rate of 16-bit math with FP32 accumulation, so "
            "its peak is twice the 16-bit tensor peak and it is not in the best 16-bit yardstick");
    // The conversions: GB/s (bytes read + written) against the DRAM bound, measured only
    // where some conversion's data do not fit in the L2.
    bool graded = false;
    for (const ConvTimed& ct : conversions) graded = graded || ct.in_l2.empty();
    lesson::StreamBound dram;
    if (graded) {  // a read-heavy kernel: the better of the read-only and the copy mix bounds it
        const lesson::StreamBound rd = lesson::measure_stream_bound(prop, 1, 0);
        const lesson::StreamBound cp = lesson::measure_stream_bound(prop, 1, 1);
        dram = rd.gbps >= cp.gbps ? rd : cp;
        lesson::add_bound(report, dram, int(opt.device));
    }
    for (const ConvTimed& ct : conversions) {
        report.variant_bound(ct.name, ct.ms, ct.bytes / (ct.ms * 1e6), "GB/s", dram.gbps, "DRAM bound", ct.in_l2);
        if (ct.gemm_ms > 0) report.metric(ct.name + ": time / its GEMM's time", ct.ms / ct.gemm_ms, "");
    }

    // 5. The trade-off table: speed, accuracy and bytes side by side.
    std::printf("\n%-42s", "precision");
    for (const Shape& s : shapes) std::printf(" %10s", (shape_text(s.M, s.N, s.K) + " TF/s").c_str());
    std::printf(" %10s %9s %10s %9s %9s\n", "rel-L2", "tol", "vs rounded", "tol", "MB A+B+C");
    for (int p = 0; p < kPrecisionCount; ++p) {
        if (!wanted(p)) continue;
        std::printf("%-42s", kPrecisions[p].name);
        const Timed* last = nullptr;
        for (size_t si = 0; si < shapes.size(); ++si) {
            const Timed* t = nullptr;
            for (const Timed& x : timed[si])
                if (x.p == p) t = &x;
            if (t) std::printf(" %10.1f", t->tflops);
            else std::printf(" %10s", "SKIP");
            if (t) last = t;
        }
        const double mb = (bytes_of(kPrecisions[p].in_fmt) * (MK + NK) + bytes_of(kPrecisions[p].out_fmt) * MN) / 1e6;
        if (last)
            std::printf(" %10.2e %9.1e %10.2e %9.1e %9.0f\n", last->rel_err, last->tol, last->rounded_err,
                        last->rounded_tol, mb);
        else std::printf(" %10s %9s %10s %9s %9.0f\n", "-", "-", "-", "-", mb);
    }
    std::printf("(errors and bytes at %s)\n", shape_text(big.M, big.N, big.K).c_str());

    // 6. Key result and targets: BF16 and FP16 (FP32 accumulate) at the largest shape, each
    //    against the best 16-bit rate of that shape (they run on the same tensor cores). A target
    //    compares two sides: it is registered only where its precision ran and another GEMM of the
    //    yardstick did too.
    const std::vector<Timed>& lastt = timed.back();
    double best16 = 0, bf16 = NAN, fp16 = NAN;
    int n16 = 0;  // GEMMs in the best 16-bit yardstick
    const Precision* bf16_pr = nullptr;
    for (const Timed& t : lastt) {
        if (in_best16(kPrecisions[t.p])) best16 = std::max(best16, t.tflops), ++n16;
        if (std::string(kPrecisions[t.p].key) == "bf16") bf16 = t.tflops, bf16_pr = &kPrecisions[t.p];
        if (std::string(kPrecisions[t.p].key) == "fp16") fp16 = t.tflops;
    }
    const std::string big_shape = shape_text(big.M, big.N, big.K);
    const std::string small = lesson::small_gemm_note(big.M, big.N, prop);
    report.default_size(cli.at_default_size());
    if (std::isfinite(bf16)) {
        const double peak = peak_tflops(*bf16_pr, prop, int(opt.device));
        char key[160];
        std::snprintf(key, sizeof key, "BF16 GemmEx (FP32 accumulate) %.0f TFLOP/s at %s", bf16, big_shape.c_str());
        const std::string ungraded =
            !small.empty() || std::isfinite(peak)
                ? small
                : "no 16-bit tensor peak known for cc " + lesson::cc_text(prop.major * 10 + prop.minor);
        report.key_result(key, bf16 / peak, "16-bit tensor peak", lesson::Against::Bound, ungraded);
        if (n16 >= 2) report.target("BF16 at " + big_shape + " vs best 16-bit rate", bf16 / best16, 0.90, "x");
    } else if (!lastt.empty()) {
        char key[160];
        std::snprintf(key, sizeof key, "%s %.0f TFLOP/s at %s", kPrecisions[lastt[0].p].name, lastt[0].tflops,
                      big_shape.c_str());
        report.key_result(key);
    }
    if (std::isfinite(fp16) && n16 >= 2)
        report.target("FP16 (FP32 acc) at " + big_shape + " vs best 16-bit rate", fp16 / best16, 0.90, "x");
    return report.finish(opt.json);
}
