// Lesson 08 of the course (00-24): cuBLAS SGEMM on row-major matrices.
// Before: lesson 07 (07_gaussian_blur). Next: lesson 09 (09_cublas_strided_batched).
// Run: ./build/bin/cublas_sgemm [--quick]   (--help lists every flag; README.md is the handout)
//
// CuBLAS SGEMM on row-major matrices.
//
// cuBLAS is column-major; C and C++ arrays are row-major. Handing row-major
// buffers to cublasSgemm as if they were column-major (the original text's
// call) silently computes the wrong product. This lesson shows what that call
// really returns, the standard fix (ask for C^T = B^T * A^T by swapping the
// operands and the dimensions), alpha/beta, one handle for the whole program,
// and the price and speed of TF32 tensor cores next to plain fp32. The flag
// checks and the text's call against A*B and B*A: checks.h; the report of the
// math modes: summary.cuh. See README.md.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <cublas_v2.h>

#include "common/ceilings.h"
#include "common/check.h"
#include "common/device.h"
#include "common/flags.h"
#include "common/memory.h"
#include "common/needs.h"
#include "common/report.h"
#include "common/timer.h"
#include "verify/compare.h"
#include "verify/gemm.h"
#include "verify/matmul.h"
#include "verify/parallel.h"
#include "verify/random.h"

#include "checks.h"
#include "summary.cuh"

// Row-major C (M x N) = alpha * A (M x K) * B (K x N) + beta * C.
// cuBLAS reads a row-major R x S array as the column-major S x R matrix, i.e.
// as its transpose. So we ask for C^T = B^T * A^T: an N x M column-major
// result, which in memory IS row-major C. Swap the operands (B first) and the
// dimensions (N, M, K); each leading dimension is the row length of the
// row-major array (B: N, A: K, C: N). No data moves, nothing is transposed.
static void sgemm_row_major(cublasHandle_t handle, int M, int N, int K, float alpha, const float* d_A, const float* d_B,
                            float beta, float* d_C) {
    // EXERCISE 1 BEGIN: one cublasSgemm call that leaves row-major C = alpha * A * B + beta * C in d_C
    // HINT: cuBLAS sees each row-major array as the column-major transpose: ask for C^T = B^T * A^T (B first)
    // HINT: the dimensions become (N, M, K); each leading dimension is the row length of its row-major array
    CUBLAS_CHECK(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &alpha, d_B, N, d_A, K, &beta, d_C, N));
    // EXERCISE 1 END
}

// The original text's call: row-major A and B handed over as column-major
// M x K and K x N matrices. cuBLAS sees A^T and B^T and computes A^T * B^T =
// (B * A)^T, which read back row-major is B * A, not A * B (square inputs).
// For non-square inputs it is not even a product of the matrices you meant.
static void sgemm_as_in_the_text(cublasHandle_t handle, int M, int N, int K, const float* d_A, const float* d_B,
                                 float* d_C) {
    const float alpha = 1.0f, beta = 0.0f;
    CUBLAS_CHECK(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, &alpha, d_A, M, d_B, K, &beta, d_C, M));
}

static double tflops(double M, double N, double K, double ms) { return 2.0 * M * N * K / (ms * 1e9); }

// The math modes timed at --bench^3, one row each: the name in the report, the handle's math
// mode, the tolerance of its sampled check (0: tf32_tol), the unit whose peak bounds its rate, and
// the compute capability that unit needs. TF32 tensor cores start at cc 8.0: below it cuBLAS accepts
// CUBLAS_TF32_TENSOR_OP_MATH and computes in fp32, so a "TF32" row there would be fp32 under
// another name (and against a peak the GPU does not have); the Gate skips it.
struct Mode {
    const char* name;
    cublasMath_t math;
    double tol;
    lesson::MathUnit unit;
    const char* peak_name;
    int cc;
};
constexpr Mode kModes[] = {
    {"fp32, CUBLAS_DEFAULT_MATH", CUBLAS_DEFAULT_MATH, 1e-4, lesson::MathUnit::Fp32Simt, "FP32 peak", 0},
    {"fp32, CUBLAS_PEDANTIC_MATH", CUBLAS_PEDANTIC_MATH, 1e-4, lesson::MathUnit::Fp32Simt, "FP32 peak", 0},
    {"TF32, CUBLAS_TF32_TENSOR_OP_MATH", CUBLAS_TF32_TENSOR_OP_MATH, 0, lesson::MathUnit::Tf32Tensor, "TF32 peak", 80},
};

// The TF32 limit, from the format, so that a PASS names the precision. TF32 rounds each input to
// 11 significant bits (u = 2^-11); with random signs the errors and C both grow as sqrt(K), so the
// rel-L2 error is a fraction of u whatever K is. Accumulating K terms in fp32 adds about
// sqrt(K) * 2^-24. 4u plus that leaves room for the largest sampled element (an element near 0 is
// allowed tol x rms of C, several times TF32's error), and is under the rel-L2 of a product with
// bf16 inputs (u = 2^-8, 8 times TF32's), whose elements near 0 then fail in large numbers.
static double tf32_tol(int64_t K) { return 4.0 * std::ldexp(1.0, -11) + std::sqrt(double(K)) * std::ldexp(1.0, -24); }

// Random row-major A (M x K), B (K x N) on host and device, a NaN-poisoned C.
struct Problem {
    int M, N, K;
    std::vector<float> h_A, h_B, h_C;
    float *d_A = nullptr, *d_B = nullptr, *d_C = nullptr;
    Problem(int m, int n, int k, uint64_t seed)
        : M(m), N(n), K(k), h_A(size_t(m) * k), h_B(size_t(k) * n), h_C(size_t(m) * n) {
        verify::fill_uniform(h_A.data(), h_A.size(), seed);
        verify::fill_uniform(h_B.data(), h_B.size(), seed + 1);
        CUDA_CHECK(cudaMalloc(&d_A, h_A.size() * sizeof(float)));
        CUDA_CHECK(cudaMalloc(&d_B, h_B.size() * sizeof(float)));
        CUDA_CHECK(cudaMalloc(&d_C, h_C.size() * sizeof(float)));
        CUDA_CHECK(cudaMemcpy(d_A, h_A.data(), h_A.size() * sizeof(float), cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(d_B, h_B.data(), h_B.size() * sizeof(float), cudaMemcpyHostToDevice));
    }
    void poison_c() { CUDA_CHECK(cudaMemset(d_C, 0xFF, h_C.size() * sizeof(float))); }  // 0xFF bytes = NaN
    void copy_c_back() { CUDA_CHECK(cudaMemcpy(h_C.data(), d_C, h_C.size() * sizeof(float), cudaMemcpyDeviceToHost)); }
    std::string shape() const { return std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K); }
    ~Problem() {
        CUDA_CHECK(cudaFree(d_A));
        CUDA_CHECK(cudaFree(d_B));
        CUDA_CHECK(cudaFree(d_C));
    }
};

// 3. fp32 against TF32 at --bench^3, each math mode checked on a random sample of rows.
static void compare_math_modes(cublasHandle_t handle, const cudaDeviceProp& prop, const lesson::CommonOptions& opt,
                               int64_t bench, int64_t check_rows, lesson::Report& report) {
    const double B = double(bench);
    const int R = static_cast<int>(opt.repeat);
    Problem p(int(bench), int(bench), int(bench), opt.seed + 4);
    const verify::GemmRows ref = verify::gemm_reference_rows(p.h_A.data(), p.h_B.data(), p.N, p.K,
                                                             verify::sample_rows(p.M, check_rows, opt.seed + 9));
    lesson::Gate gate(report);
    std::vector<const Mode*> modes;  // the math modes this GPU has
    for (const Mode& mode : kModes) {
        lesson::Needs needs;
        needs.cc = mode.cc;
        needs.cc_why = "TF32 tensor cores; below it cuBLAS computes in fp32";
        if (gate.run(mode.name, needs)) modes.push_back(&mode);
    }
    const bool tf32_runs = modes.back()->math == CUBLAS_TF32_TENSOR_OP_MATH;
    const Peaks peaks = report_peaks(report, prop, int(opt.device), tf32_runs);
    const std::string small = lesson::small_gemm_note(bench, bench, prop);
    ModeResults r;
    for (const Mode* m : modes) {
        const Mode& mode = *m;
        // The math mode is state of the handle: every later call on it uses it.
        CUBLAS_CHECK(cublasSetMathMode(handle, mode.math));
        p.poison_c();
        sgemm_row_major(handle, p.M, p.N, p.K, 1.0f, p.d_A, p.d_B, 0.0f, p.d_C);
        p.copy_c_back();
        double ms =
            lesson::time_median_ms(R, [&] { sgemm_row_major(handle, p.M, p.N, p.K, 1.0f, p.d_A, p.d_B, 0.0f, p.d_C); });
        double rate = tflops(B, B, B, ms);
        if (mode.math == CUBLAS_DEFAULT_MATH) r.fp32_rate = rate;
        const double peak = mode.unit == lesson::MathUnit::Tf32Tensor ? peaks.tf32 : peaks.fp32;
        report.variant_bound(std::string(mode.name) + ", " + p.shape(), ms, rate, "TFLOP/s", peak, mode.peak_name,
                             ungraded_why(small, peak, mode.peak_name));

        lesson::Check c = ref.check_in(p.h_C.data(), mode.tol > 0 ? mode.tol : tf32_tol(p.K),
                                       std::string(mode.name) + ", " + p.shape() + ", " + std::to_string(check_rows) +
                                           " random rows");
        report.check(c);
        if (mode.math == CUBLAS_TF32_TENSOR_OP_MATH) r.tf32_rate = rate, r.tf32_err = c.rel_l2;
        if (mode.math == CUBLAS_DEFAULT_MATH) r.fp32_err = c.rel_l2;
    }
    CUBLAS_CHECK(cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH));  // put the handle back to plain fp32
    report_math_modes(report, p.shape(), tf32_runs, r, check_rows, p.M);
}

int main(int argc, char** argv) {
    lesson::CommonOptions opt;
    int64_t square = 1024, m = 1000, n = 700, k = 1300, bench = 4096, check_rows = 64;
    double alpha = 1.0;
    lesson::Cli cli("cublas_sgemm",
                    "cublasSgemm on row-major matrices: the original text's call, the C^T = B^T A^T fix on a square\n"
                    "and a non-square shape, alpha/beta, and fp32 against TF32 tensor cores at --bench^3.");
    lesson::add_common_flags(cli, opt);
    cli.add_int("square", &square, 1, 16384, "side of the square product (the text's call and the fix)", 128);
    cli.add_int("m", &m, 1, 32768, "rows of A and C in the non-square product", 100);
    cli.add_int("n", &n, 1, 32768, "columns of B and C in the non-square product", 70);
    cli.add_int("k", &k, 1, 32768, "columns of A, rows of B in the non-square product", 130);
    cli.add_double("alpha", &alpha, -100.0, 100.0,
                   "alpha of the non-square product: C = alpha*A*B (beta = 0), then alpha*A*B + C (beta = 1)");
    cli.add_int("bench", &bench, 1, 16384, "side of the square product timed in fp32 and TF32", 256);
    cli.add_int("check-rows", &check_rows, 1, 16384,
                "rows of the --bench product checked (and of --square for the text's call)", 16);
    cli.parse_or_exit(argc, argv);
    const uint64_t dev_bytes = require_sizes(square, m, n, k, bench, check_rows, alpha);
    cudaDeviceProp prop = lesson::pick_device(opt.device);
    lesson::require_device_memory(dev_bytes, kSizeFlags);

    // One handle for the whole program: creating one costs milliseconds and
    // allocates device memory, so never create it per call.
    cublasHandle_t handle;
    CUBLAS_CHECK(cublasCreate(&handle));
    int version = 0;
    CUBLAS_CHECK(cublasGetVersion(handle, &version));

    lesson::Report report("08_cublas_sgemm");
    report.device(prop);
    report.config_from(cli);
    report.config("cublas_version", int64_t(version));
    const char* tf32_env = std::getenv("NVIDIA_TF32_OVERRIDE");
    if (tf32_env)
        report.note(std::string("NVIDIA_TF32_OVERRIDE=") + tf32_env + " is set: it overrides the math modes below");
    const int R = static_cast<int>(opt.repeat);

    // 1. Square: the text's call against the fix.
    {
        Problem p(int(square), int(square), int(square), opt.seed);
        p.poison_c();
        sgemm_as_in_the_text(handle, p.M, p.N, p.K, p.d_A, p.d_B, p.d_C);
        p.copy_c_back();
        std::vector<float> h_text = p.h_C;

        p.poison_c();
        sgemm_row_major(handle, p.M, p.N, p.K, 1.0f, p.d_A, p.d_B, 0.0f, p.d_C);
        p.copy_c_back();
        double ms =
            lesson::time_median_ms(R, [&] { sgemm_row_major(handle, p.M, p.N, p.K, 1.0f, p.d_A, p.d_B, 0.0f, p.d_C); });
        report.variant("fix, fp32, " + p.shape(), ms, tflops(square, square, square, ms), "TFLOP/s");

        lesson::HostTimer cpu;
        std::vector<double> ref(p.h_C.size());
        verify::matmul_reference(p.h_A.data(), p.h_B.data(), ref.data(), p.M, p.N, p.K);
        report.cpu_reference_ms(cpu.ms(), verify::host_threads());
        report.note("CPU reference time is the full " + p.shape() + " product in double");
        report.check(verify::compare(p.h_C.data(), ref.data(), ref.size(), 1e-4,
                                     "fix C^T = B^T A^T, " + p.shape() + ", every element"));

        // What the text's call returns, on a sample of rows (information, not a check).
        report_text_call(report, p.h_A.data(), p.h_B.data(), h_text.data(), p.M, p.N, p.K, p.shape(), check_rows,
                         opt.seed + 7);
    }

    // 2. Non-square, every element: the fix, the text's call, then alpha/beta.
    {
        Problem p(int(m), int(n), int(k), opt.seed + 2);
        std::vector<double> ref(p.h_C.size());
        verify::matmul_reference(p.h_A.data(), p.h_B.data(), ref.data(), p.M, p.N, p.K);

        p.poison_c();
        sgemm_as_in_the_text(handle, p.M, p.N, p.K, p.d_A, p.d_B, p.d_C);
        p.copy_c_back();
        report.metric("text's call " + p.shape() + ": rel-L2 vs A*B",
                      verify::compare(p.h_C.data(), ref.data(), ref.size(), 1e-4, "").rel_l2, "");

        // beta = 0: C is not read at all, so the NaN poison in it does no harm.
        const float a = static_cast<float>(alpha);
        char alpha_text[48];
        std::snprintf(alpha_text, sizeof alpha_text, "alpha=%g, ", alpha);
        const std::string times = alpha == 1.0 ? "" : alpha_text;
        for (double& x : ref) x *= double(a);
        p.poison_c();
        sgemm_row_major(handle, p.M, p.N, p.K, a, p.d_A, p.d_B, 0.0f, p.d_C);
        p.copy_c_back();
        if (opt.inject_fault) verify::inject_fault(p.h_C.data(), p.h_C.size(), opt.seed);
        report.check(
            verify::compare(p.h_C.data(), ref.data(), ref.size(), 1e-4,
                            "fix, " + p.shape() + ", " + times + "beta=0 over a NaN-poisoned C, every element"));

        // beta = 1: the same call again accumulates, C = alpha*A*B + C_old = 2*alpha*A*B.
        sgemm_row_major(handle, p.M, p.N, p.K, a, p.d_A, p.d_B, 1.0f, p.d_C);
        p.copy_c_back();
        for (double& x : ref) x *= 2.0;
        report.check(verify::compare(p.h_C.data(), ref.data(), ref.size(), 1e-4,
                                     "fix, " + p.shape() + ", " + times +
                                         "then beta=1 into the same C: 2*alpha*A*B, every element"));

        double ms =
            lesson::time_median_ms(R, [&] { sgemm_row_major(handle, p.M, p.N, p.K, 1.0f, p.d_A, p.d_B, 0.0f, p.d_C); });
        report.variant("fix, fp32, " + p.shape(), ms, tflops(m, n, k, ms), "TFLOP/s");
    }

    compare_math_modes(handle, prop, opt, bench, check_rows, report);
    report.timing(lesson::kTimingMethod);
    report.default_size(cli.at_default_size());

    CUBLAS_CHECK(cublasDestroy(handle));
    return report.finish(opt.json);
}
