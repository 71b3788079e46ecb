// Lesson 06 of the course (00-24): tiled matrix multiplication in shared memory.
// Before: lesson 05 (05_stream_pipeline). Next: lesson 07 (07_gaussian_blur).
// Run: ./build/bin/tiled_matmul [--quick]   (--help lists every flag; README.md is the handout)
//
// Tiled matrix multiplication in shared memory.
//
// C = A x B for row-major M x K and K x N matrices, four ways side by side and
// timed the same way: the naive kernel (one thread per element of C, every
// operand from global memory), the tiled kernel with 16x16 shared-memory
// tiles, the same with 32x32 tiles, and cuBLAS SGEMM (fp32, no TF32) as the
// yardstick. The tiled kernels load the boundary tiles with zero padding, so
// any shape works (the original text's kernel needs multiples of the tile).
// Then the awkward shapes 1000 x 1023 x 1025 and 1 x 1 x 1. See README.md.
#include <algorithm>
#include <cmath>
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
#include "common/launch.h"
#include "common/memory.h"
#include "common/report.h"
#include "common/timer.h"
#include "verify/compare.h"
#include "verify/gemm.h"
#include "verify/parallel.h"
#include "verify/random.h"

// Naive: one thread per element of C; each thread reads a whole row of A and a
// whole column of B from global memory, K + K loads for K multiply-adds.
__global__ void matMulNaive(const float* A, const float* B, float* C, int M, int N, int K) {
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    const int col = blockIdx.x * blockDim.x + threadIdx.x;  // x runs along a row of C: coalesced
    if (row < M && col < N) {
        const float* a = A + static_cast<size_t>(row) * K;  // row `row` of A
        const float* b = B + col;                           // column `col` of B, stride N
        float sum = 0.0f;
        for (int k = 0; k < K; ++k) sum += a[k] * b[static_cast<size_t>(k) * N];
        C[static_cast<size_t>(row) * N + col] = sum;
    }
}

// Tiled: a TILE x TILE block of threads computes a TILE x TILE tile of C. In
// each phase the block copies one tile of A and one tile of B into shared
// memory (one element per thread), then every thread reads TILE values of each
// from there. Global loads drop by a factor of TILE.
template <int TILE>
__global__ void matMulTiled(const float* A, const float* B, float* C, int M, int N, int K) {
    // EXERCISE 1 BEGIN: C = A x B with TILE x TILE tiles of A and B staged in shared memory, any M, N, K
    // HINT: phase ph: thread (tx, ty) loads A[row][ph*TILE + tx] and B[ph*TILE + ty][col], 0 outside A or B
    // HINT: two barriers per phase; threads outside C still load and reach both (no early return)
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty;
    const int col = blockIdx.x * TILE + tx;
    float sum = 0.0f;
    // Ceil-divide: the last phase covers the remainder of K (the text's K / TILE drops it).
    const int phases = (K + TILE - 1) / TILE;
    for (int ph = 0; ph < phases; ++ph) {
        const int a_col = ph * TILE + tx;  // the element of A this thread loads: A[row][a_col]
        const int b_row = ph * TILE + ty;  // the element of B this thread loads: B[b_row][col]
        // Boundary loads: outside A or B the tile is padded with 0, which adds nothing to the sum.
        // Threads outside C still load and reach both barriers: no early return in this loop.
        As[ty][tx] = (row < M && a_col < K) ? A[static_cast<size_t>(row) * K + a_col] : 0.0f;
        Bs[ty][tx] = (b_row < K && col < N) ? B[static_cast<size_t>(b_row) * N + col] : 0.0f;
        __syncthreads();  // barrier 1: both tiles are complete before anyone reads them
#pragma unroll
        for (int k = 0; k < TILE; ++k) sum += As[ty][k] * Bs[k][tx];
        __syncthreads();  // barrier 2: everyone has finished reading before the next phase overwrites
    }
    if (row < M && col < N) C[static_cast<size_t>(row) * N + col] = sum;
    // EXERCISE 1 END
}

// One product on the device: C = A x B, row-major, A is M x K and B is K x N.
struct Gemm {
    const float* A;
    const float* B;
    float* C;
    int M, N, K;
};

// The launchers, one per variant, on the default stream. The kernels ignore the handle. The
// naive kernel uses 16x16 blocks too; grids ceil-divide, so edge blocks hang over C.
static void launch_naive(cublasHandle_t, const Gemm& g) {
    const dim3 block(16, 16);
    const dim3 grid(static_cast<unsigned>(lesson::ceil_div(g.N, 16)), static_cast<unsigned>(lesson::ceil_div(g.M, 16)));
    matMulNaive<<<grid, block>>>(g.A, g.B, g.C, g.M, g.N, g.K);
    CUDA_CHECK_LAUNCH();
}
template <int TILE>
static void launch_tiled(cublasHandle_t, const Gemm& g) {
    const dim3 block(TILE, TILE);
    const dim3 grid(static_cast<unsigned>(lesson::ceil_div(g.N, TILE)),
                    static_cast<unsigned>(lesson::ceil_div(g.M, TILE)));
    matMulTiled<TILE><<<grid, block>>>(g.A, g.B, g.C, g.M, g.N, g.K);
    CUDA_CHECK_LAUNCH();
}
// cuBLAS is column-major: the helper asks for C^T = B^T A^T (B first; common/gemm.h, lesson 08).
static void launch_cublas(cublasHandle_t handle, const Gemm& g) {
    lesson::sgemm_row_major(handle, g.M, g.N, g.K, g.A, g.B, g.C);
}

// The variants, one row each: the name in the report and the launcher.
struct Variant {
    const char* name;
    void (*launch)(cublasHandle_t handle, const Gemm& g);
};
constexpr Variant kVariants[] = {
    {"naive (1 thread per C element)", launch_naive},
    {"tiled 16x16 shared memory", launch_tiled<16>},
    {"tiled 32x32 shared memory", launch_tiled<32>},
    {"cuBLAS SGEMM fp32 (no TF32)", launch_cublas},
};
constexpr int kVariantCount = int(std::size(kVariants));
constexpr int kNaive = 0, kTiled16 = 1, kTiled32 = 2, kCublas = 3;  // their rows in kVariants

struct Shape {
    int64_t M, N, K;
    std::string text() const { return std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K); }
};

// Rows of C to verify: all of them while the double-precision reference costs at most
// ~2^31 multiply-adds; otherwise rows 0 and M-1 (the edges) plus random rows, ~2^30 MACs.
static std::vector<int64_t> rows_to_check(const Shape& s, uint64_t seed) {
    const double macs = double(s.M) * double(s.N) * double(s.K);
    if (macs <= double(1ull << 31) && s.M * s.N <= (int64_t(1) << 26)) return verify::sample_rows(s.M, s.M, seed);
    int64_t want = std::max<int64_t>(16, int64_t(double(1ull << 30) / (double(s.N) * double(s.K))));
    want = std::min<int64_t>({want, s.M, (int64_t(1) << 26) / s.N});
    return verify::sample_rows(s.M, want, seed * 7919, true);
}

// The whole story for one shape: allocate, copy in, then for each variant poison C,
// launch, copy out, verify (and time when repeat > 0); free. Returns the median ms per variant.
static std::vector<double> run_shape(const Shape& s, uint64_t seed, int repeat, bool inject_fault,
                                     cublasHandle_t handle, lesson::Report& report, double* cpu_ms) {
    const size_t a_n = size_t(s.M) * s.K, b_n = size_t(s.K) * s.N, c_n = size_t(s.M) * s.N;
    std::vector<float> h_A(a_n), h_B(b_n);
    verify::fill_uniform(h_A.data(), a_n, seed);
    verify::fill_uniform(h_B.data(), b_n, seed + 1);

    // The double-precision CPU reference of the rows to check, computed once for all variants.
    lesson::HostTimer cpu;
    const verify::GemmRows ref = verify::gemm_reference_rows(h_A.data(), h_B.data(), s.N, s.K, rows_to_check(s, seed));
    if (cpu_ms) *cpu_ms = cpu.ms();
    const std::vector<int64_t>& rows = ref.rows;
    const bool all_rows = int64_t(rows.size()) == s.M;
    const double tol = 1e-4 * std::max(1.0, std::sqrt(double(s.K) / 4096.0));  // fp32 sums: error grows ~sqrt(K)
    const std::string what = all_rows
                                 ? "every element"
                                 : "every element of " + std::to_string(rows.size()) + " rows (0, M-1 and random ones)";

    // 1. Allocate device memory. 2. Copy the inputs in.
    float *d_A = nullptr, *d_B = nullptr, *d_C = nullptr;
    CUDA_CHECK(cudaMalloc(&d_A, a_n * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_B, b_n * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_C, c_n * sizeof(float)));
    CUDA_CHECK(cudaMemcpy(d_A, h_A.data(), a_n * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_B, h_B.data(), b_n * sizeof(float), cudaMemcpyHostToDevice));

    std::vector<float> h_C(rows.size() * s.N);
    const Gemm g{d_A, d_B, d_C, static_cast<int>(s.M), static_cast<int>(s.N), static_cast<int>(s.K)};
    std::vector<double> ms(kVariantCount, NAN);
    for (int v = 0; v < kVariantCount; ++v) {
        const Variant& variant = kVariants[v];
        // Poison C (0xFF bytes are NaN): an element that no thread writes fails the check.
        CUDA_CHECK(cudaMemset(d_C, 0xFF, c_n * sizeof(float)));
        // 3. Launch.
        variant.launch(handle, g);
        CUDA_CHECK(cudaDeviceSynchronize());
        // 4. Copy out what is checked: all of C, or the sampled rows one by one.
        if (all_rows) {
            CUDA_CHECK(cudaMemcpy(h_C.data(), d_C, c_n * sizeof(float), cudaMemcpyDeviceToHost));
        } else {
            for (size_t i = 0; i < rows.size(); ++i)
                CUDA_CHECK(cudaMemcpy(h_C.data() + i * s.N, d_C + size_t(rows[i]) * s.N, s.N * sizeof(float),
                                      cudaMemcpyDeviceToHost));
        }
        // 5. Verify against the shared reference.
        if (inject_fault) verify::inject_fault(h_C.data(), h_C.size(), seed);
        report.check(ref.check(h_C.data(), tol, std::string(variant.name) + ", " + s.text() + ", " + what));
        // Timing: relaunch the same product (it rewrites the same C) and take the median.
        if (repeat > 0) ms[v] = lesson::time_median_ms(repeat, [&] { variant.launch(handle, g); });
    }

    // 6. Free device memory.
    CUDA_CHECK(cudaFree(d_A));
    CUDA_CHECK(cudaFree(d_B));
    CUDA_CHECK(cudaFree(d_C));
    return ms;
}

int main(int argc, char** argv) {
    // Flags first: bad input exits 2 before any CUDA call.
    lesson::CommonOptions opt;
    int64_t m = 1024, n = 1024, k = 1024;
    bool extra = true;
    lesson::Cli cli("tiled_matmul",
                    "C = A x B (row-major M x K times K x N): naive, tiled 16x16, tiled 32x32 and cuBLAS SGEMM.\n"
                    "C is verified against a double-precision CPU reference: every element while that costs\n"
                    "<= 2^31 multiply-adds, else a random sample of whole rows (the report says which).");
    lesson::add_common_flags(cli, opt);
    const int64_t kMaxDim = int64_t(1) << 18;  // 262144: ceil(M / 16) stays far below gridDim.y's 65535
    cli.add_int("m", &m, 1, kMaxDim, "rows of A and C", 128);
    cli.add_int("n", &n, 1, kMaxDim, "columns of B and C", 128);
    cli.add_int("k", &k, 1, kMaxDim, "columns of A = rows of B", 128);
    cli.add_switch(
        "extra", &extra,
        "also check the awkward shapes 1000x1023x1025 (--quick: 100x123x125) and 1x1x1 (--extra=false: skip)");
    cli.parse_or_exit(argc, argv);

    const Shape main_shape{m, n, k};
    const Shape awkward = opt.quick ? Shape{100, 123, 125} : Shape{1000, 1023, 1025};
    const Shape single{1, 1, 1};
    const double a_b = double(m) * k + double(k) * n, c = double(m) * n;
    // Host: A and B, plus C and its double reference for the checked rows (at most all of C).
    const double checked = std::min(c, double(int64_t(1) << 26));
    lesson::require_host_memory(uint64_t(4 * a_b + 12 * checked) + (64ull << 20), "pageable",
                                "--m=" + std::to_string(m) + " --n=" + std::to_string(n) + " --k=" + std::to_string(k));
    cudaDeviceProp prop = lesson::pick_device(opt.device);
    lesson::require_device_memory(uint64_t(4 * (a_b + c)) + (64ull << 20),  // + cuBLAS workspace
                                  "--m=" + std::to_string(m) + " --n=" + std::to_string(n) +
                                      " --k=" + std::to_string(k));

    lesson::Report report("06_tiled_matmul");
    report.device(prop.name, prop.major, prop.minor, prop.multiProcessorCount, prop.totalGlobalMem / 1e9);
    report.config("m", m);
    report.config("n", n);
    report.config("k", k);
    report.config("repeat", opt.repeat);
    report.config("seed", opt.seed);

    cublasHandle_t handle;
    CUBLAS_CHECK(cublasCreate(&handle));
    CUBLAS_CHECK(cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH));  // plain fp32 FMA: no TF32 tensor cores

    // The measured shape: every variant verified, then timed.
    double cpu_ms = 0;
    std::vector<double> ms =
        run_shape(main_shape, opt.seed, int(opt.repeat), opt.inject_fault, handle, report, &cpu_ms);
    report.cpu_reference_ms(cpu_ms, verify::host_threads());
    // The shapes that break kernels without boundary handling: verified, not timed.
    if (extra) {
        run_shape(awkward, opt.seed + 10, 0, false, handle, report, nullptr);
        run_shape(single, opt.seed + 20, 0, false, handle, report, nullptr);
    }
    CUBLAS_CHECK(cublasDestroy(handle));

    // Report: GFLOP/s (2*M*N*K flops) against cuBLAS on the same shape.
    const double flops = 2.0 * double(m) * double(n) * double(k);
    auto gflops = [&](double t) { return flops / (t * 1e6); };
    const double cublas = gflops(ms[kCublas]);
    const double peak = lesson::peak_gflops(prop, int(opt.device), lesson::MathUnit::Fp32Simt);
    const std::string small = lesson::small_gemm_note(m, n, prop);
    report.bound("FP32 FMA peak from the SM clock", peak, "GFLOP/s");
    report.yardstick("cuBLAS SGEMM fp32 (no TF32), same shape", cublas, "GFLOP/s");
    report.timing(lesson::kTimingMethod);
    for (int v = 0; v < kVariantCount; ++v)
        report.variant_yardstick(kVariants[v].name, ms[v], gflops(ms[v]), "GFLOP/s", cublas, "cuBLAS", small);
    report.variant_bound(std::string(kVariants[kCublas].name) + " against the FP32 peak", ms[kCublas], cublas,
                         "GFLOP/s", peak, "FP32 peak");
    report.metric("speedup tiled 16x16 over naive", ms[kNaive] / ms[kTiled16], "x");
    report.metric("speedup tiled 32x32 over naive", ms[kNaive] / ms[kTiled32], "x");
    // Global loads the kernels issue (the text's count): naive 2*M*N*K; tiled: each element of
    // A is loaded once per column of tiles, each element of B once per row of tiles = ~2*M*N*K/TILE.
    auto tiled_loads = [&](double t) {
        return double(k) * (double(m) * std::ceil(double(n) / t) + double(n) * std::ceil(double(m) / t));
    };
    report.metric("global loads, naive (2*M*N*K)", 2.0 * double(m) * n * k / 1e9, "G floats");
    report.metric("global loads, tiled 16x16 (~2*M*N*K/16)", tiled_loads(16) / 1e9, "G floats");
    report.metric("global loads, tiled 32x32 (~2*M*N*K/32)", tiled_loads(32) / 1e9, "G floats");
    if (!extra) report.note("--extra=false: the awkward shapes were not checked");

    char key[128];
    std::snprintf(key, sizeof key, "tiled16 %.0f GFLOP/s, %.2fx naive, at %s", gflops(ms[kTiled16]),
                  ms[kNaive] / ms[kTiled16], main_shape.text().c_str());
    report.key_result(key, gflops(ms[kTiled16]) / cublas, "cuBLAS", lesson::Against::Yardstick, small);
    report.default_size(cli.at_default_size());
    report.target("tiled 16x16 over naive", ms[kNaive] / ms[kTiled16], 1.0, "x");
    return report.finish(opt.json);
}
