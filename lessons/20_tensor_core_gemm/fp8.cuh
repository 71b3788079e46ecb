// Lesson 20 of the course (the tensor-core GEMM ladder), part 3: the FP8 rungs. Their own problem
// (A and B^T quantized to E4M3 by the host twice: one scale per tensor for rung 12, block scales
// for rungs 14 and 15), their checks against a CPU reference of the quantized operands, and their
// yardsticks: cuBLASLt's FP8 matmul of the same codes and scales (per tensor, in the call lesson
// 19 makes, and block-scaled), timed in turns with the rungs; rungs 14-15 also against rung 12.
// Run: ./build/bin/tensor_core_gemm --rung=12,14,15   (README.md is the handout, "Rung 12", "Rung 14", "Rung 15")
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <cublasLt.h>

#include "common/check.h"
#include "common/report.h"
#include "common/timer.h"
#include "verify/compare.h"
#include "verify/gemm_bf16.h"
#include "verify/matmul.h"
#include "verify/parallel.h"
#include "verify/precision.h"

#include "kernels/14_fp8_block_scaled.cuh"
#include "kernels/15_fp8_overlapped_promotion.cuh"
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

// Rungs 14 and 15 promote each k-tile's sum into fp32 registers (kernels/14_fp8_block_scaled.cuh), so
// the MMA's short accumulator holds only 128 products at a time. Against a reference of the
// same codes and block scales in double, what is left: within a k-tile, the round-to-nearest
// terms of verify::gemm_tolerance at K = 128 (fp32 out; u_acc 2^-14 over 128 products) and the
// truncation, one ulp (2 u_acc) for each of its four wgmmas, relative to that k-tile's sum; over
// the K / 128 k-tiles, whose sums have random signs, these truncations may all lean one way
// while the sum grows like their square root: 8 u_acc sqrt(K / 128). The promotion's own fp32
// roundings (the product of two scales, one FMA a k-tile) are 2^-24 each, below both. So
// 2.8e-3 + 8 u_acc sqrt(K / 128): K = 1024: 4.1e-3, 4096: 5.5e-3, 8192: 6.7e-3, where rung 12's
// fp8_tol is 1.2e-2 to 5.3e-2. A scale of the wrong block (the blocks' magnitudes differ by up
// to 64x: setup_fp8) or a k-tile's sum added onto the last one (scale-d left at 1) misses it by far.
inline double fp8_block_tol(int K) {
    constexpr double u_acc = 0x1p-14;
    return verify::gemm_tolerance(0.0, verify::unit_roundoff(verify::kFp32), u_acc, 128) +
           2.0 * u_acc * (128 / 32) * std::sqrt(K / 128.0);
}

constexpr size_t kLtWorkspace = size_t(32) << 20;  // cuBLASLt's scratch, as lesson 19's

// One FP8 problem: A (M x K) and B^T (N x K) as E4M3 codes, on the host and the device, their
// dequantization scales (amax / 448; on the device A's at [0], B^T's at [4]: 16-byte aligned,
// as cuBLASLt wants them), C, and TMA descriptors of 64 x 128-byte boxes. Beside them the block-
// scaled problem of rungs 14 and 15 (suffix b): its own codes, A's scales sa_b[kt * M + m] (one per row
// and k-tile) and B^T's sb_b[nb * ldk + kt] (one per 128 x 128 block; ldk = K / 128 rounded up to
// 4), in the layouts of cuBLASLt's VEC128 and BLK128x128 modes.
struct Fp8Problem {
    Shape s;
    std::vector<uint8_t> h_A8, h_Bt8;
    float sa = 1, sb = 1;
    uint8_t *d_A8 = nullptr, *d_Bt8 = nullptr;
    float *d_C = nullptr, *d_scales = nullptr;
    CUtensorMap map_A{}, map_Bt{};
    std::vector<uint8_t> h_A8b, h_Bt8b;
    std::vector<float> h_sa_b, h_sb_b;
    int ldk = 0;
    uint8_t *d_A8b = nullptr, *d_Bt8b = nullptr;
    float *d_sa_b = nullptr, *d_sb_b = nullptr;
    CUtensorMap map_Ab{}, map_Btb{};
    Fp8Gemm gemm(float* C, int sms) const { return {s.M, s.N, s.K, &map_A, &map_Bt, sa * sb, C, sms}; }
    Fp8Gemm gemm_blocks(float* C, int sms) const {
        return {s.M, s.N, s.K, &map_Ab, &map_Btb, 1.0f, C, sms, d_sa_b, d_sb_b};
    }
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

// The block's magnitude, 2^-3 .. 2^3, a function of its indices: blocks of different sizes, as
// activations and weights have, which one scale per tensor would leave few of E4M3's bits.
static float block_magnitude(int i, int kt) { return std::ldexp(1.0f, (5 * i + 3 * kt) % 7 - 3); }

// x (rows x K, row-major) -> E4M3 codes, one scale per `rows_per_block` rows and 128 of K
// (amax / 448 of the block): scales[kt * rows + r] for 1-row blocks (A), else
// scales[(r / rows_per_block) * ldk + kt] (B^T's 128 x 128).
static void quantize_blocks(const std::vector<float>& x, int rows, int K, int rows_per_block, int ldk,
                            std::vector<uint8_t>& codes, std::vector<float>& scales) {
    const int kts = K / 128, row_blocks = rows / rows_per_block;
    codes.resize(x.size());
    scales.assign(rows_per_block == 1 ? size_t(kts) * rows : size_t(row_blocks) * ldk, 0.0f);
    verify::parallel_for(int64_t(row_blocks) * kts, [&](int64_t b) {
        const int rb = int(b / kts), kt = int(b % kts);
        float amax = 0;
        for (int r = rb * rows_per_block; r < (rb + 1) * rows_per_block; ++r)
            for (int k = kt * 128; k < kt * 128 + 128; ++k) amax = std::max(amax, std::fabs(x[size_t(r) * K + k]));
        const float q = verify::fp8_quant_scale(amax);
        for (int r = rb * rows_per_block; r < (rb + 1) * rows_per_block; ++r)
            for (int k = kt * 128; k < kt * 128 + 128; ++k)
                codes[size_t(r) * K + k] = verify::to_e4m3_bits(x[size_t(r) * K + k] * q);
        scales[rows_per_block == 1 ? size_t(kt) * rows + rb : size_t(rb) * ldk + kt] = verify::fp8_dequant_scale(amax);
    });
}

// The same random bf16 numbers as the other rungs' problems (B^T drawn in [-1/4, 1/4], so that
// its scale differs from A's and a swapped or missing scale shows), quantized per tensor; and
// for rung 14 numbers of the same kind times block_magnitude of their block (A's 1 x 128 strip,
// B^T's 128 x 128 block), quantized per block. With `blocks` false that second problem is left out.
static void setup_fp8(Fp8Problem& p, uint64_t seed, PFN_cuTensorMapEncodeTiled_v12000 encode, bool blocks) {
    const Shape& s = p.s;
    {
        std::vector<uint16_t> bits(std::max(s.a(), s.b()));
        std::vector<float> x(s.a());
        verify::fill_bf16(bits.data(), x.data(), s.a(), seed);
        p.sa = quantize(x, p.h_A8);
        if (blocks) {
            for (size_t i = 0; i < s.a(); ++i) x[i] *= block_magnitude(int(i / s.K), int(i % s.K) / 128);
            p.ldk = (s.K / 128 + 3) / 4 * 4;
            quantize_blocks(x, s.M, s.K, 1, p.ldk, p.h_A8b, p.h_sa_b);
        }
        x.resize(s.b());
        verify::fill_bf16(bits.data(), x.data(), s.b(), seed + 1, -0.25f, 0.25f);
        p.sb = quantize(x, p.h_Bt8);
        if (blocks) {
            for (size_t i = 0; i < s.b(); ++i) x[i] *= block_magnitude(int(i / s.K) / 128, int(i % s.K) / 128 + 1);
            quantize_blocks(x, s.N, s.K, 128, p.ldk, p.h_Bt8b, p.h_sb_b);
        }
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
    if (!blocks) return;
    CUDA_CHECK(cudaMalloc(&p.d_sa_b, p.h_sa_b.size() * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&p.d_sb_b, p.h_sb_b.size() * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&p.d_Bt8b, s.b()));
    CUDA_CHECK(cudaMalloc(&p.d_A8b, s.a()));
    CUDA_CHECK(cudaMemcpy(p.d_A8b, p.h_A8b.data(), s.a(), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(p.d_Bt8b, p.h_Bt8b.data(), s.b(), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(p.d_sa_b, p.h_sa_b.data(), p.h_sa_b.size() * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(p.d_sb_b, p.h_sb_b.data(), p.h_sb_b.size() * sizeof(float), cudaMemcpyHostToDevice));
    p.map_Ab = make_fp8_map(encode, p.d_A8b, s.M, s.K);
    p.map_Btb = make_fp8_map(encode, p.d_Bt8b, s.N, s.K);
}
static void release(Fp8Problem& p) {
    for (uint8_t* d : {p.d_A8b, p.d_Bt8b}) CUDA_CHECK(cudaFree(d));  // cudaFree(nullptr) is a no-op
    for (float* d : {p.d_sa_b, p.d_sb_b}) CUDA_CHECK(cudaFree(d));
    CUDA_CHECK(cudaFree(p.d_A8));
    CUDA_CHECK(cudaFree(p.d_Bt8));
    CUDA_CHECK(cudaFree(p.d_scales));
    CUDA_CHECK(cudaFree(p.d_C));
}

// The CPU reference of rows `rows` of C, the codes decoded exactly, in double. Per tensor:
// sa * sb * sum(a_q b_q). With `blocks`, the block-scaled problem: the sum over k-tiles kt of
// sa[row][kt] * sb[kt][n / 128] * (that k-tile's sum(a_q b_q)), each k-tile's sum exact in
// double; these are the dequantized operands' product, code * scale for every value.
static std::vector<double> fp8_reference(const Fp8Problem& p, const std::vector<int>& rows, bool blocks) {
    const Shape& s = p.s;
    const std::vector<uint8_t>& A8 = blocks ? p.h_A8b : p.h_A8;
    const std::vector<uint8_t>& Bt8 = blocks ? p.h_Bt8b : p.h_Bt8;
    const int depth = blocks ? 128 : s.K;  // one product per k-tile, or one for all of K
    std::vector<float> A(rows.size() * size_t(depth)), B(size_t(depth) * s.N);  // B: the codes of B^T transposed
    std::vector<double> ref(rows.size() * size_t(s.N), 0.0), part(ref.size());
    for (int k0 = 0; k0 < s.K; k0 += depth) {
        for (size_t r = 0; r < rows.size(); ++r)
            for (int k = 0; k < depth; ++k)
                A[r * depth + k] = verify::e4m3_bits_to_float(A8[size_t(rows[r]) * s.K + k0 + k]);
        for (int n = 0; n < s.N; ++n)
            for (int k = 0; k < depth; ++k)
                B[size_t(k) * s.N + n] = verify::e4m3_bits_to_float(Bt8[size_t(n) * s.K + k0 + k]);
        verify::matmul_reference(A.data(), B.data(), part.data(), int64_t(rows.size()), s.N, depth);
        const int kt = k0 / 128;
        for (size_t r = 0; r < rows.size(); ++r)
            for (int n = 0; n < s.N; ++n) {
                const double scale = blocks ? double(p.h_sa_b[size_t(kt) * s.M + rows[r]]) *
                                                  double(p.h_sb_b[size_t(n / 128) * p.ldk + kt])
                                            : double(p.sa) * double(p.sb);
                ref[r * s.N + n] += scale * part[r * s.N + n];
            }
    }
    return ref;
}

// cuBLASLt's FP8 matmul, set up as lesson 19's: its "A" is our B^T (transposed), its "B" our A,
// both with leading dimension K (the "TN" form its FP8 kernels need), A's and B^T's scales at
// the two scale pointers, fp32 accumulation; C of type `c_type` (fp32, or bf16: half the bytes).
// With `blocks`, rung 14's codes and block scales: CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F for
// its "A" (our B^T, one scale per 128 x 128 block) and VEC128_32F for its "B" (our A, one per row
// and 128 of K), the two layouts Fp8Problem keeps; cuBLAS 12.9 and later offer them on sm_90.
struct LtPlan {
    const void *codes_a = nullptr, *codes_b = nullptr;  // its A and B: our B^T and our A
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
    bool found = false;  // false: cuBLASLt has no algorithm for this output type here
};
static LtPlan make_lt_plan(cublasLtHandle_t lt, const Fp8Problem& p, cudaDataType c_type, bool blocks = false) {
    const Shape& s = p.s;
    LtPlan plan;
    plan.codes_a = blocks ? p.d_Bt8b : p.d_Bt8;
    plan.codes_b = blocks ? p.d_A8b : p.d_A8;
    const cublasOperation_t trans = CUBLAS_OP_T, no_trans = CUBLAS_OP_N;
    const float* scale_bt = blocks ? p.d_sb_b : p.d_scales + 4;
    const float* scale_a = blocks ? p.d_sa_b : p.d_scales;
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    if (blocks) {
        const int32_t mode_bt = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F,
                      mode_a = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
        CUBLAS_CHECK(
            cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode_bt, sizeof mode_bt));
        CUBLAS_CHECK(
            cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode_a, sizeof mode_a));
    }
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
static void run_lt(cublasLtHandle_t lt, const LtPlan& plan, void* C, void* workspace) {
    const float one = 1.0f, zero = 0.0f;  // C is not read (beta = 0); D is C's buffer
    CUBLAS_CHECK(cublasLtMatmul(lt, plan.desc, &one, plan.codes_a, plan.a, plan.codes_b, plan.b, &zero, C, plan.c, C,
                                plan.c, &plan.algo, workspace, kLtWorkspace, 0));
}

// What part 3 needs besides the Context: cuBLASLt, its workspace, and the FP8 rungs that run
// (rung 12 among them wherever rung 14 or 15 is: its per-tensor rate is their yardstick).
struct Fp8Context {
    cublasLtHandle_t lt;
    void* workspace;
    const std::vector<const Rung*>& rungs;
};
static bool block_scaled(const Rung* r) { return r->launch8 == rung14::launch || r->launch8 == rung15::launch; }

// Rows checked against the CPU: every row of a timed shape up to 2^27 multiply-adds, of a
// checked one up to 2^30 (1024^3); else at a timed shape 16 rows spread over M (every element is
// compared with cuBLASLt), at a checked one 2 in every 64 (every warpgroup's band of every
// piece), at offsets that move from band to band.
static std::vector<int> fp8_rows(const Shape& s, bool timed) {
    std::vector<int> rows;
    if (double(s.M) * s.N * s.K <= double(timed ? 1 << 27 : 1 << 30)) {
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

// Part 3 at one shape, for each scaling (per tensor: rung 12; block scales: rungs 14, 15) whose
// rungs fit it: cuBLASLt (fp32 C) and those rungs against the CPU (the rows of fp8_rows), each
// rung against cuBLASLt every element (two fp32 results); if `timed`, cuBLASLt with fp32 C and
// with bf16 C and the rungs of both scalings timed interleaved, each rung against the faster
// cuBLASLt of its scaling, and rung 14 against rung 12 (the target, from 4096^3 up). cuBLASLt
// with block scales is left out where this cuBLAS has no algorithm for it (a note says so);
// the rows of rungs 14 and 15 are then against rung 12. Returns the best rung of the first
// chosen rung's scaling, as time_shape does; `inject` corrupts the last result checked. Without
// `lt` cuBLASLt is left out (racecheck reports hazards inside its larger kernels: checks.cuh).
static Best fp8_shape(Context& c, Fp8Context& f, const Shape& shape, uint64_t seed, bool lt, bool timed, bool inject) {
    std::vector<const Rung*> here[2];  // the rungs that fit the shape: [0] per-tensor scales, [1] block scales
    for (const Rung* r : f.rungs)
        if (fits(*r, shape)) here[block_scaled(r) ? 1 : 0].push_back(r);
    if (here[0].empty() && here[1].empty()) return {};
    Fp8Problem p{shape};
    setup_fp8(p, seed, c.encode, !here[1].empty());
    const Shape& s = p.s;
    const int sms = c.prop.multiProcessorCount;
    const std::vector<int> rows = fp8_rows(s, timed);
    const std::string where =
        (rows.size() == size_t(s.M) ? std::string("every element") : std::to_string(rows.size()) + " rows") + " of " +
        s.text();
    const char* const scaling[2] = {"per-tensor scales", "block scales"};
    const Rung* last = here[1].empty() ? here[0].back() : here[1].back();
    LtPlan plans[2][2];
    int lts[2] = {0, 0};  // cuBLASLt's outputs timed per scaling: fp32 C, and bf16 C where it has it
    float* d_ref[2] = {nullptr, nullptr};
    void* d_ref16[2] = {nullptr, nullptr};
    std::vector<float> h_ref(s.c()), h_C(s.c());
    for (int kind = 0; kind < 2; ++kind) {
        if (here[kind].empty()) continue;
        const bool blocks = kind == 1;
        const double tol = blocks ? fp8_block_tol(s.K) : fp8_tol(s.K);
        const std::vector<double> ref = fp8_reference(p, rows, blocks);
        plans[kind][0] = make_lt_plan(f.lt, p, CUDA_R_32F, blocks);
        plans[kind][1] = make_lt_plan(f.lt, p, CUDA_R_16BF, blocks);
        if (!blocks && !plans[kind][0].found)
            lesson::fail_call("cuBLASLt", "cublasLtMatmulAlgoGetHeuristic", "no FP8 algorithm with fp32 C", __FILE__,
                              __LINE__);
        if (blocks && !plans[kind][0].found)
            c.report.note("cuBLASLt has no block-scaled FP8 algorithm (VEC128 A, BLK128x128 B) with fp32 C at " +
                          s.text() + " here: rungs 14-15 are checked against the CPU alone and timed against rung 12");
        const bool lt_here = lt && plans[kind][0].found;
        lts[kind] = lt_here ? (plans[kind][1].found ? 2 : 1) : 0;
        const std::string lt_name = std::string("cuBLASLt FP8") + (blocks ? " block-scaled" : "");
        CUDA_CHECK(cudaMalloc(&d_ref[kind], s.c() * sizeof(float)));
        CUDA_CHECK(cudaMalloc(&d_ref16[kind], s.c() * 2));
        if (lt_here) {
            run_once([&] { run_lt(f.lt, plans[kind][0], d_ref[kind], f.workspace); }, d_ref[kind], h_ref.data(), s.c());
            c.report.check(verify::compare(gather_rows(h_ref, rows, s.N).data(), ref.data(), ref.size(), tol,
                                           lt_name + " vs CPU, " + where));
        }
        if (lts[kind] == 2) {  // bf16 C: the same sums rounded once more, to bf16
            CUDA_CHECK(cudaMemset(d_ref16[kind], 0xFF, s.c() * 2));
            run_lt(f.lt, plans[kind][1], d_ref16[kind], f.workspace);
            CUDA_CHECK(cudaDeviceSynchronize());
            std::vector<uint16_t> bits(s.c());
            CUDA_CHECK(cudaMemcpy(bits.data(), d_ref16[kind], s.c() * 2, cudaMemcpyDeviceToHost));
            for (size_t i = 0; i < s.c(); ++i) h_C[i] = verify::bf16_bits_to_float(bits[i]);
            c.report.check(verify::compare(h_C.data(), h_ref.data(), s.c(),
                                           verify::unit_roundoff(verify::kBf16) + 2 * tol,
                                           lt_name + " bf16 out vs fp32 out, every element of " + s.text()));
        }
        const Fp8Gemm g = blocks ? p.gemm_blocks(p.d_C, sms) : p.gemm(p.d_C, sms);
        for (const Rung* r : here[kind]) {
            run_once([&] { r->launch8(g); }, p.d_C, h_C.data(), s.c());
            if (inject && r == last) verify::inject_fault(h_C.data(), s.c(), c.seed);
            c.report.check(verify::compare(gather_rows(h_C, rows, s.N).data(), ref.data(), ref.size(), tol,
                                           std::string(r->name) + " vs CPU, " + where));
            if (lt_here)
                c.report.check(verify::compare_two_approximations(h_C.data(), h_ref.data(), s.c(), size_t(s.N), tol,
                                                                  std::string(r->name) + " vs " + lt_name +
                                                                      ", every element (two-sided) of " + s.text()));
        }
    }
    Best best;
    if (timed) {
        // Variants in turns: per scaling, its cuBLASLt outputs, then its rungs.
        std::vector<std::function<void()>> runs;
        const Fp8Gemm g[2] = {p.gemm(p.d_C, sms), p.gemm_blocks(p.d_C, sms)};
        int first[2];  // each scaling's first variant
        for (int kind = 0; kind < 2; ++kind) {
            first[kind] = int(runs.size());
            for (int v = 0; v < lts[kind]; ++v) {
                void* out = v == 0 ? static_cast<void*>(d_ref[kind]) : d_ref16[kind];
                runs.push_back([&, kind, v, out] { run_lt(f.lt, plans[kind][v], out, f.workspace); });
            }
            for (const Rung* r : here[kind]) runs.push_back([&, kind, r] { r->launch8(g[kind]); });
        }
        const std::vector<double> ms =
            lesson::time_interleaved_ms(c.repeat, int(runs.size()), [&](int v) { runs[size_t(v)](); });
        const double flop = 2.0 * double(s.M) * s.N * s.K, ab_bytes = double(s.a() + s.b());
        const auto tflops = [&](double t_ms) { return flop / (t_ms * 1e9); };
        const std::string small = lesson::small_gemm_note(s.M, s.N, c.prop);
        double rate12 = 0;  // the fastest per-tensor rung: the block-scaled rungs' yardstick
        for (size_t i = 0; i < here[0].size(); ++i)
            rate12 = std::max(rate12, tflops(ms[size_t(first[0] + lts[0]) + i]));
        const int key_kind = block_scaled(f.rungs.front()) ? 1 : 0;
        for (int kind = 0; kind < 2; ++kind) {
            if (here[kind].empty()) continue;  // no rung of this scaling here: no rows, no target
            for (int v = 0; v < lts[kind]; ++v) {
                const double t_ms = ms[size_t(first[kind] + v)];
                c.report.yardstick(std::string("cuBLASLt FP8 E4M3 -> ") + (v == 0 ? "fp32" : "bf16") + " (" +
                                       scaling[kind] + "), " + s.text(),
                                   tflops(t_ms), "TFLOP/s");
                const std::string row =
                    std::string("cuBLASLt FP8 ") + (kind ? "block-scaled " : "") + kCublasOut[v] + " @" + s.text();
                c.report.variant(row, t_ms, tflops(t_ms), "TFLOP/s");
                c.report.work(row, flop, ab_bytes + double(s.c()) * (v == 0 ? 4 : 2), t_ms);
            }
            const int fast = lts[kind] == 2 && ms[size_t(first[kind] + 1)] < ms[size_t(first[kind])] ? 1 : 0;
            const bool against_lt = lts[kind] > 0;
            if (!against_lt && rate12 == 0) {  // block scales with neither yardstick here
                for (size_t i = 0; i < here[kind].size(); ++i) {
                    const double r_ms = ms[size_t(first[kind]) + i];
                    const std::string name = std::string(here[kind][i]->name) + " @" + s.text();
                    c.report.variant(name, r_ms, tflops(r_ms), "TFLOP/s");
                    c.report.work(name, flop, ab_bytes + double(s.c()) * sizeof(float), r_ms);
                }
                continue;
            }
            const double yard = against_lt ? tflops(ms[size_t(first[kind] + fast)]) : rate12;
            const std::string yard_name =
                against_lt ? std::string("cuBLASLt FP8") + (kind ? " block-scaled (" : " (") + kCublasOut[fast] + ")"
                           : std::string("rung 12 (per-tensor scales)");
            Best b;
            b.yardstick = yard_name;
            for (size_t i = 0; i < here[kind].size(); ++i) {
                const double r_ms = ms[size_t(first[kind] + lts[kind]) + i];
                const std::string name = std::string(here[kind][i]->name) + " @" + s.text();
                c.report.variant_yardstick(name, r_ms, tflops(r_ms), "TFLOP/s", yard, yard_name, small);
                c.report.work(name, flop, ab_bytes + double(s.c()) * sizeof(float), r_ms);
                if (tflops(r_ms) > b.tflops) {
                    b.tflops = tflops(r_ms);
                    b.name = here[kind][i]->name;
                }
                // Floors under what rungs 14 and 15 reach against the per-tensor rate, timed in the same
                // turns (README.md, "The floor").
                if (rate12 > 0 && flop >= 2.0 * 4096.0 * 4096.0 * 4096.0) {
                    if (here[kind][i]->launch8 == rung14::launch)
                        c.report.target("rung 14 (block scales) vs rung 12 (per-tensor scales) at " + s.text(),
                                        tflops(r_ms) / rate12, 0.55, "x");
                    if (here[kind][i]->launch8 == rung15::launch)
                        c.report.target("rung 15 (promotion overlapped) vs rung 12 (per-tensor scales) at " + s.text(),
                                        tflops(r_ms) / rate12, 0.65, "x");
                }
            }
            b.fraction = b.tflops / yard;
            if (kind == key_kind) best = b;
        }
    }
    for (int kind = 0; kind < 2; ++kind) {
        if (here[kind].empty()) continue;
        for (LtPlan& plan : plans[kind]) destroy(plan);
        CUDA_CHECK(cudaFree(d_ref16[kind]));
        CUDA_CHECK(cudaFree(d_ref[kind]));
    }
    release(p);
    return best;
}

// Part 3: the FP8 rungs against the CPU at three shapes (the first of the CPU-checked ones, a
// non-square one with K = 384, three k-tiles, and one with more pieces of 256 x 256 (rungs 14,
// 15: 256 x 128) than the grid has clusters, as part 1b for rungs 10 and 11), then at every timed shape against
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

// The notes of part 3, for the FP8 rungs that ran.
static void fp8_notes(lesson::Report& report, const std::vector<const Rung*>& rungs) {
    report.note(
        "rung 12: FP8 E4M3 A and B^T (N x K), quantized on the host with one scale per tensor (amax / "
        "448); checked against a double CPU reference of the quantized operands times both scales, "
        "tolerance for the fp32 output and the FP8 MMA's truncating accumulator (2^-14) only; cuBLASLt's FP8 "
        "matmul of the same codes and scales is its yardstick (fp32 C and bf16 C, the faster)");
    if (std::any_of(rungs.begin(), rungs.end(), block_scaled))
        report.note(
            "rung 14: FP8 E4M3 A and B^T quantized on the host with one scale per 1 x 128 strip of A and per "
            "128 x 128 block of B (amax / 448 of each; the blocks' magnitudes differ by up to 64x), each k-tile's "
            "sum promoted into fp32 registers with its two scales; checked against a double CPU reference of "
            "the codes and block scales, tolerance for the fp32 output and one k-tile of the FP8 MMA's "
            "accumulator at a time (fp8_block_tol); yardsticks: cuBLASLt's block-scaled FP8 matmul of the same "
            "codes and scales (VEC128 and BLK128x128 modes), where this cuBLAS has it, and rung 12's per-tensor "
            "rate, timed in turns (target: 0.55x of it from 4096^3 up)");
    const auto overlapped = [](const Rung* r) { return r->launch8 == rung15::launch; };
    if (std::any_of(rungs.begin(), rungs.end(), overlapped))
        report.note(
            "rung 15: rung 14 with two sets of k-tile accumulators used in turn, so that each k-tile's sum is "
            "promoted while the next k-tile's wgmmas run (wgmma_wait<1> instead of <0>); the same problem, "
            "checks, tolerance and yardsticks as rung 14, and its promotion, the same roundings in the same order "
            "(target: 0.65x of rung 12's rate from 4096^3 up)");
}
