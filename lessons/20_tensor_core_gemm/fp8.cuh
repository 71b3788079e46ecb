// Lesson 20 of the course (the tensor-core GEMM ladder), part 3: the FP8 rung. Its own problem
// (A and B^T quantized to E4M3 by the host, one scale per tensor), its checks against a CPU
// reference of the quantized operands, and its yardstick: cuBLASLt's FP8 matmul of the same
// codes and scales, in the call lesson 19 makes, timed in turns with the rung.
// Run: ./build/bin/tensor_core_gemm --rung=12   (README.md is the handout, "Rung 12")
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <cublasLt.h>

#include "common/check.h"
#include "common/report.h"
#include "common/timer.h"
#include "verify/compare.h"
#include "verify/gemm_bf16.h"
#include "verify/matmul.h"
#include "verify/precision.h"

#include "problem.cuh"
#include "timed.cuh"  // Best, kCublasOut

// The operands are exact after quantization, so the CPU reference (double) of the codes times
// sa * sb leaves the kernel's own error: fp32 out, and the accumulator. Hopper's FP8 MMA keeps
// fewer bits than fp32 in it (about 14: u_acc budgeted at 2^-14, as lesson 19 budgets
// cuBLASLt's), and it drops, rather than rounds, what it shifts out: up to one ulp (2 u_acc) a
// wgmma of k = 32, an error that leans one way and grows like K. cuBLASLt (by default) moves
// its partial sums into fp32 registers every few k-steps; rung 12 never does. So: the
// round-to-nearest terms of verify::gemm_tolerance plus 2 u_acc K / 32 (K = 1024: 1.2e-2,
// 4096: 3.1e-2, 8192: 5.3e-2). A wrong or swapped scale, or a wrong layout, misses it by far.
inline double fp8_tol(int K) {
    constexpr double u_acc = 0x1p-14;
    return verify::gemm_tolerance(0.0, verify::unit_roundoff(verify::kFp32), u_acc, K) + 2.0 * u_acc * K / 32.0;
}

constexpr size_t kLtWorkspace = size_t(32) << 20;  // cuBLASLt's scratch, as lesson 19's

// One FP8 problem: A (M x K) and B^T (N x K) as E4M3 codes, on the host and the device, their
// dequantization scales (amax / 448; on the device A's at [0], B^T's at [4]: 16-byte aligned,
// as cuBLASLt wants them), C, and TMA descriptors of 64 x 128-byte boxes.
struct Fp8Problem {
    Shape s;
    std::vector<uint8_t> h_A8, h_Bt8;
    float sa = 1, sb = 1;
    uint8_t *d_A8 = nullptr, *d_Bt8 = nullptr;
    float *d_C = nullptr, *d_scales = nullptr;
    CUtensorMap map_A{}, map_Bt{};
    Fp8Gemm gemm(float* C, int sms) const { return {s.M, s.N, s.K, &map_A, &map_Bt, sa * sb, C, sms}; }
};

// A TMA descriptor of a dense row-major matrix of E4M3 bytes (kernels/common.cuh): boxes of 64
// rows of 128 values; rows must be a multiple of 16 bytes (K % 128 == 0 here).
static CUtensorMap make_fp8_map(PFN_cuTensorMapEncodeTiled_v12000 encode, const uint8_t* ptr, int rows, int cols) {
    return make_swizzled_map(encode, ptr, rows, cols, cols, CU_TENSOR_MAP_DATA_TYPE_UINT8, 1);
}

// x (n floats) -> E4M3 codes of x * 448 / amax (saturating, to nearest even); returns amax / 448.
static float quantize(const std::vector<float>& x, std::vector<uint8_t>& codes) {
    float amax = 0;
    for (float v : x) amax = std::max(amax, std::fabs(v));
    const float q = verify::fp8_quant_scale(amax);
    codes.resize(x.size());
    for (size_t i = 0; i < x.size(); ++i) codes[i] = verify::to_e4m3_bits(x[i] * q);
    return verify::fp8_dequant_scale(amax);
}

// The same random bf16 numbers as the other rungs' problems (B^T drawn in [-1/4, 1/4], so that
// its scale differs from A's and a swapped or missing scale shows), quantized per tensor.
static void setup_fp8(Fp8Problem& p, uint64_t seed, PFN_cuTensorMapEncodeTiled_v12000 encode) {
    const Shape& s = p.s;
    {
        std::vector<uint16_t> bits(std::max(s.a(), s.b()));
        std::vector<float> x(s.a());
        verify::fill_bf16(bits.data(), x.data(), s.a(), seed);
        p.sa = quantize(x, p.h_A8);
        x.resize(s.b());
        verify::fill_bf16(bits.data(), x.data(), s.b(), seed + 1, -0.25f, 0.25f);
        p.sb = quantize(x, p.h_Bt8);
    }
    CUDA_CHECK(cudaMalloc(&p.d_C, s.c() * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&p.d_scales, 8 * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&p.d_Bt8, s.b()));
    CUDA_CHECK(cudaMalloc(&p.d_A8, s.a()));  // A last, as in setup(): a read past it leaves every allocation
    CUDA_CHECK(cudaMemcpy(p.d_A8, p.h_A8.data(), s.a(), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(p.d_Bt8, p.h_Bt8.data(), s.b(), cudaMemcpyHostToDevice));
    const float scales[8] = {p.sa, 0, 0, 0, p.sb, 0, 0, 0};
    CUDA_CHECK(cudaMemcpy(p.d_scales, scales, sizeof scales, cudaMemcpyHostToDevice));
    p.map_A = make_fp8_map(encode, p.d_A8, s.M, s.K);
    p.map_Bt = make_fp8_map(encode, p.d_Bt8, s.N, s.K);
}
static void release(Fp8Problem& p) {
    CUDA_CHECK(cudaFree(p.d_A8));
    CUDA_CHECK(cudaFree(p.d_Bt8));
    CUDA_CHECK(cudaFree(p.d_scales));
    CUDA_CHECK(cudaFree(p.d_C));
}

// The CPU reference of rows `rows` of C: sa * sb * sum(a_q b_q) in double, the codes decoded exactly.
static std::vector<double> fp8_reference(const Fp8Problem& p, const std::vector<int>& rows) {
    const Shape& s = p.s;
    std::vector<float> A(rows.size() * size_t(s.K)), B(s.b());  // B: K x N, the codes of B^T transposed
    for (size_t r = 0; r < rows.size(); ++r)
        for (int k = 0; k < s.K; ++k) A[r * s.K + k] = verify::e4m3_bits_to_float(p.h_A8[size_t(rows[r]) * s.K + k]);
    for (int n = 0; n < s.N; ++n)
        for (int k = 0; k < s.K; ++k) B[size_t(k) * s.N + n] = verify::e4m3_bits_to_float(p.h_Bt8[size_t(n) * s.K + k]);
    std::vector<double> ref(rows.size() * size_t(s.N));
    verify::matmul_reference(A.data(), B.data(), ref.data(), int64_t(rows.size()), s.N, s.K);
    const double scale = double(p.sa) * double(p.sb);
    for (double& v : ref) v *= scale;
    return ref;
}

// cuBLASLt's FP8 matmul, set up as lesson 19's: its "A" is our B^T (transposed), its "B" our A,
// both with leading dimension K (the "TN" form its FP8 kernels need), A's and B^T's scales at
// the two scale pointers, fp32 accumulation; C of type `c_type` (fp32, or bf16: half the bytes).
struct LtPlan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
    bool found = false;  // false: cuBLASLt has no algorithm for this output type here
};
static LtPlan make_lt_plan(cublasLtHandle_t lt, const Fp8Problem& p, cudaDataType c_type) {
    const Shape& s = p.s;
    LtPlan plan;
    const cublasOperation_t trans = CUBLAS_OP_T, no_trans = CUBLAS_OP_N;
    const float* scale_bt = p.d_scales + 4;
    const float* scale_a = p.d_scales;
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans, sizeof trans));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, &no_trans, sizeof no_trans));
    CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &scale_bt, sizeof scale_bt));
    CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &scale_a, sizeof scale_a));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.a, CUDA_R_8F_E4M3, uint64_t(s.K), uint64_t(s.N), int64_t(s.K)));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.b, CUDA_R_8F_E4M3, uint64_t(s.K), uint64_t(s.M), int64_t(s.K)));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.c, c_type, uint64_t(s.N), uint64_t(s.M), int64_t(s.N)));
    cublasLtMatmulPreference_t pref = nullptr;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const size_t workspace = kLtWorkspace;
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                                      sizeof workspace));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t st =
        cublasLtMatmulAlgoGetHeuristic(lt, plan.desc, plan.a, plan.b, plan.c, plan.c, pref, 1, &result, &found);
    CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));
    plan.found = st == CUBLAS_STATUS_SUCCESS && found > 0;
    plan.algo = result.algo;
    return plan;
}
static void destroy(LtPlan& plan) {
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(plan.c));
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(plan.b));
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(plan.a));
    CUBLAS_CHECK(cublasLtMatmulDescDestroy(plan.desc));
}
static void run_lt(cublasLtHandle_t lt, const LtPlan& plan, const Fp8Problem& p, void* C, void* workspace) {
    const float one = 1.0f, zero = 0.0f;  // C is not read (beta = 0); D is C's buffer
    CUBLAS_CHECK(cublasLtMatmul(lt, plan.desc, &one, p.d_Bt8, plan.a, p.d_A8, plan.b, &zero, C, plan.c, C, plan.c,
                                &plan.algo, workspace, kLtWorkspace, 0));
}

// What part 3 needs besides the Context: cuBLASLt, its workspace, and the FP8 rungs that run.
struct Fp8Context {
    cublasLtHandle_t lt;
    void* workspace;
    const std::vector<const Rung*>& rungs;
};

// Rows checked against the CPU: every row of a shape up to 2^27 multiply-adds; else at a timed
// shape 16 rows spread over M (every element is compared with cuBLASLt), at a checked one 2 in
// every 64 (every warpgroup's band of every piece), at offsets that move from band to band.
static std::vector<int> fp8_rows(const Shape& s, bool timed) {
    std::vector<int> rows;
    if (double(s.M) * s.N * s.K <= double(1 << 27)) {
        for (int i = 0; i < s.M; ++i) rows.push_back(i);
        return rows;
    }
    if (timed) {
        for (int i = 0; i < 16; ++i) rows.push_back(int(int64_t(i) * (s.M - 1) / 15));
        return rows;
    }
    for (int b = 0; b < s.M / 64; ++b)
        for (int h : {0, 32}) rows.push_back(64 * b + h + (7 + 13 * b) % 32);
    return rows;
}
static std::vector<float> gather_rows(const std::vector<float>& C, const std::vector<int>& rows, int N) {
    std::vector<float> got(rows.size() * size_t(N));
    for (size_t k = 0; k < rows.size(); ++k) std::copy_n(C.begin() + size_t(rows[k]) * N, N, got.begin() + k * N);
    return got;
}

// Part 3 at one shape: cuBLASLt (fp32 C) and every FP8 rung against the CPU (the rows of
// fp8_rows), each rung against cuBLASLt every element (two fp32 results); if `timed`, cuBLASLt
// with fp32 C and with bf16 C and the rungs timed interleaved, each rung against the faster.
// Returns the best rung, as time_shape does; `inject` corrupts the last result checked. Without
// `lt` cuBLASLt is left out (racecheck reports hazards inside its larger kernels: checks.cuh).
static Best fp8_shape(Context& c, Fp8Context& f, const Shape& shape, uint64_t seed, bool lt, bool timed, bool inject) {
    Fp8Problem p{shape};
    setup_fp8(p, seed, c.encode);
    const Shape& s = p.s;
    const int sms = c.prop.multiProcessorCount;
    const double tol = fp8_tol(s.K);
    const std::vector<int> rows = fp8_rows(s, timed);
    const std::vector<double> ref = fp8_reference(p, rows);
    const std::string where =
        (rows.size() == size_t(s.M) ? std::string("every element") : std::to_string(rows.size()) + " rows") + " of " +
        s.text();
    LtPlan plans[2] = {make_lt_plan(f.lt, p, CUDA_R_32F), make_lt_plan(f.lt, p, CUDA_R_16BF)};
    if (!plans[0].found)
        lesson::fail_call("cuBLASLt", "cublasLtMatmulAlgoGetHeuristic", "no FP8 algorithm with fp32 C", __FILE__,
                          __LINE__);
    float* d_ref = nullptr;
    void* d_ref16 = nullptr;
    CUDA_CHECK(cudaMalloc(&d_ref, s.c() * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_ref16, s.c() * 2));
    std::vector<float> h_ref(s.c()), h_C(s.c());
    if (lt) {
        run_once([&] { run_lt(f.lt, plans[0], p, d_ref, f.workspace); }, d_ref, h_ref.data(), s.c());
        c.report.check(verify::compare(gather_rows(h_ref, rows, s.N).data(), ref.data(), ref.size(), tol,
                                       "cuBLASLt FP8 vs CPU, " + where));
    }
    if (lt && plans[1].found) {  // bf16 C: the same sums rounded once more, to bf16
        CUDA_CHECK(cudaMemset(d_ref16, 0xFF, s.c() * 2));
        run_lt(f.lt, plans[1], p, d_ref16, f.workspace);
        CUDA_CHECK(cudaDeviceSynchronize());
        std::vector<uint16_t> bits(s.c());
        CUDA_CHECK(cudaMemcpy(bits.data(), d_ref16, s.c() * 2, cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < s.c(); ++i) h_C[i] = verify::bf16_bits_to_float(bits[i]);
        c.report.check(verify::compare(h_C.data(), h_ref.data(), s.c(), verify::unit_roundoff(verify::kBf16) + 2 * tol,
                                       "cuBLASLt FP8 bf16 out vs fp32 out, every element of " + s.text()));
    }
    const Fp8Gemm g = p.gemm(p.d_C, sms);
    for (const Rung* r : f.rungs) {
        run_once([&] { r->launch8(g); }, p.d_C, h_C.data(), s.c());
        if (inject && r == f.rungs.back()) verify::inject_fault(h_C.data(), s.c(), c.seed);
        c.report.check(verify::compare(gather_rows(h_C, rows, s.N).data(), ref.data(), ref.size(), tol,
                                       std::string(r->name) + " vs CPU, " + where));
        if (lt)
            c.report.check(verify::compare_two_approximations(
                h_C.data(), h_ref.data(), s.c(), size_t(s.N), tol,
                std::string(r->name) + " vs cuBLASLt FP8, every element (two-sided) of " + s.text()));
    }
    Best best;
    if (lt && timed) {
        const int lts = plans[1].found ? 2 : 1;  // bf16 C timed where cuBLASLt has it
        const std::vector<double> ms = lesson::time_interleaved_ms(c.repeat, lts + int(f.rungs.size()), [&](int v) {
            if (v < lts) run_lt(f.lt, plans[v], p, v == 0 ? static_cast<void*>(d_ref) : d_ref16, f.workspace);
            else f.rungs[size_t(v - lts)]->launch8(g);
        });
        const double flop = 2.0 * double(s.M) * s.N * s.K, ab_bytes = double(s.a() + s.b());
        const auto tflops = [&](double t_ms) { return flop / (t_ms * 1e9); };
        const std::string small = lesson::small_gemm_note(s.M, s.N, c.prop);
        for (int v = 0; v < lts; ++v) {
            c.report.yardstick(std::string("cuBLASLt FP8 E4M3 -> ") + (v == 0 ? "fp32" : "bf16") +
                                   " (per-tensor scales), " + s.text(),
                               tflops(ms[v]), "TFLOP/s");
            const std::string row = std::string("cuBLASLt FP8 ") + kCublasOut[v] + " @" + s.text();
            c.report.variant(row, ms[v], tflops(ms[v]), "TFLOP/s");
            c.report.work(row, flop, ab_bytes + double(s.c()) * (v == 0 ? 4 : 2), ms[v]);
        }
        const int fast = lts == 2 && ms[1] < ms[0] ? 1 : 0;
        best.yardstick = std::string("cuBLASLt FP8 (") + kCublasOut[fast] + ")";
        for (size_t i = 0; i < f.rungs.size(); ++i) {
            const double r_ms = ms[size_t(lts) + i];
            const std::string name = std::string(f.rungs[i]->name) + " @" + s.text();
            c.report.variant_yardstick(name, r_ms, tflops(r_ms), "TFLOP/s", tflops(ms[fast]), best.yardstick, small);
            c.report.work(name, flop, ab_bytes + double(s.c()) * sizeof(float), r_ms);
            if (tflops(r_ms) > best.tflops) {
                best.tflops = tflops(r_ms);
                best.name = f.rungs[i]->name;
            }
        }
        best.fraction = best.tflops / tflops(ms[fast]);
    }
    for (LtPlan& plan : plans) destroy(plan);
    CUDA_CHECK(cudaFree(d_ref16));
    CUDA_CHECK(cudaFree(d_ref));
    release(p);
    return best;
}

// Part 3: the FP8 rungs against the CPU at three shapes (the first of the CPU-checked ones, a
// non-square one with K = 384, three k-tiles, and one with more pieces of 256 x 256 than the
// grid has clusters, as part 1b for rungs 10 and 11), then at every timed shape against
// cuBLASLt and timed (those an FP8 rung fits). Returns the best at the key shape (the first timed one, or 4096^3) and
// sets its text ("name' rate at shape", as main.cu's key result quotes it) and small-shape note.
static Best fp8_part(Context& c, Fp8Context& f, const Shape& first_check, const Shape& second_check,
                     const std::vector<Shape>& timed, bool inject_fault, std::string& key_text,
                     std::string& small_key) {
    const int side = 256 * (1 + int(std::sqrt(double(c.prop.multiProcessorCount))));
    const Shape checks[3] = {first_check, {second_check.M, second_check.N, 384}, {side, side, 512}};
    for (int i = 0; i < 3; ++i) fp8_shape(c, f, checks[i], c.seed + 70 + 10 * i, i < 2, false, inject_fault && i == 0);
    Best key;
    for (size_t t = 0; t < timed.size(); ++t) {
        const Shape& s = timed[t];
        // Rung 13's awkward shape is timed for the bf16 rungs only: no FP8 rung takes it.
        if (std::none_of(f.rungs.begin(), f.rungs.end(), [&](const Rung* r) { return fits(*r, s); })) continue;
        const Best b = fp8_shape(c, f, s, c.seed + 200 + 10 * t, true, true, false);
        if (t == 0 || s.M == 4096) {
            key = b;
            key_text =
                b.name.empty() ? "" : b.name + "' " + std::to_string(int(b.tflops + 0.5)) + " TFLOP/s at " + s.text();
            small_key = lesson::small_gemm_note(s.M, s.N, c.prop);
        }
    }
    return key;
}
