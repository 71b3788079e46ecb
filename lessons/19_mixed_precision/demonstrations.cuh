// Lesson 19 - mixed precision: the formats shown by measured demonstrations.
//
//   demo_fp16_overflow             a GEMM whose running sums pass 65504: inf with an FP16
//                                  accumulator, the exact answer with FP32 accumulation
//                                  (FP16 inputs, and BF16 inputs where the GPU has BF16
//                                  tensor cores: cc 8.0 and up)
//   demo_underflow_and_loss_scaling  gradient-sized values lost in FP16, recovered by a
//                                  loss scale of 2^24
//   demo_long_sums                 a running sum in BF16, FP16 and FP32: where each stalls
// Each runs on the GPU (cuBLAS calls or the lesson's kernels) and is checked against
// what the CPU predicts (verify/precision.h), so a demonstration that does not show
// what it claims FAILS the run. The handout's "The formats, measured" explains them.
// Lesson 19 of the course; before: lesson 18 (CUDA graphs), next: lesson 20 (tensor-core GEMM).
// main.cu calls these before the GEMMs.
// Run: ./build/bin/mixed_precision
#pragma once
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "common/check.h"
#include "common/needs.h"
#include "common/report.h"
#include "kernels/convert.cuh"
#include "kernels/sum_in_order.cuh"
#include "verify/compare.h"
#include "verify/precision.h"
#include "verify/random.h"

// C = A * Bt^T, 64 x 64 x 256, with integer entries chosen so that every running sum
// overflows FP16 on its way while every answer fits: for k < 128 the products are all
// positive and at least 181^2 = 32761 (two of them already pass 65504); the second half
// repeats them with A negated and Bt lowered by 0 or 1, so C[i][j] = sum_{k<128}
// A[i][k] * d[j][k] with d in {0, 1}: at most 128 * 255 = 32640. Every partial sum is an
// integer below 2^23, so FP32 accumulation is exact in any order; the inputs (integers up
// to 255) are exact in FP16 and in BF16 (8 significand bits).
inline void demo_fp16_overflow(lesson::Report& report, lesson::Gate& gate, cublasHandle_t blas, uint64_t seed) {
    const int M = 64, N = 64, K = 256, H = K / 2;
    std::vector<float> h_a(size_t(M) * K), h_bt(size_t(N) * K);
    for (int i = 0; i < M; ++i)
        for (int k = 0; k < H; ++k) {
            const float v = 181.0f + std::floor(verify::hash_uniform(seed + 20, uint64_t(i) * K + k, 0.0f, 75.0f));
            h_a[size_t(i) * K + k] = v;
            h_a[size_t(i) * K + k + H] = -v;
        }
    for (int j = 0; j < N; ++j)
        for (int k = 0; k < H; ++k) {
            const float v = 181.0f + std::floor(verify::hash_uniform(seed + 21, uint64_t(j) * K + k, 0.0f, 75.0f));
            const float d = verify::hash_uniform(seed + 22, uint64_t(j) * K + k, 0.0f, 1.0f) < 0.5f ? 0.0f : 1.0f;
            h_bt[size_t(j) * K + k] = v;
            h_bt[size_t(j) * K + k + H] = v - d;
        }
    std::vector<double> exact(size_t(M) * N);
    double largest_partial = 0;
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
            double s = 0, first_half = 0;
            for (int k = 0; k < K; ++k) {
                s += double(h_a[size_t(i) * K + k]) * h_bt[size_t(j) * K + k];
                if (k == H - 1) first_half = s;
            }
            exact[size_t(i) * N + j] = s;
            largest_partial = std::max(largest_partial, first_half);
        }

    float *d_a, *d_bt, *d_c32;
    __half *d_a16, *d_bt16, *d_c16;
    __nv_bfloat16 *d_abf, *d_btbf;
    CUDA_CHECK(cudaMalloc(&d_a, h_a.size() * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_bt, h_bt.size() * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_a16, h_a.size() * sizeof(__half)));
    CUDA_CHECK(cudaMalloc(&d_bt16, h_bt.size() * sizeof(__half)));
    CUDA_CHECK(cudaMalloc(&d_abf, h_a.size() * sizeof(__nv_bfloat16)));
    CUDA_CHECK(cudaMalloc(&d_btbf, h_bt.size() * sizeof(__nv_bfloat16)));
    CUDA_CHECK(cudaMalloc(&d_c32, size_t(M) * N * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_c16, size_t(M) * N * sizeof(__half)));
    CUDA_CHECK(cudaMemcpy(d_a, h_a.data(), h_a.size() * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_bt, h_bt.data(), h_bt.size() * sizeof(float), cudaMemcpyHostToDevice));
    convert::to_half(d_a, d_a16, h_a.size());
    convert::to_half(d_bt, d_bt16, h_bt.size());
    convert::to_bf16(d_a, d_abf, h_a.size());
    convert::to_bf16(d_bt, d_btbf, h_bt.size());

    // 1. FP16 inputs, FP16 accumulation (and output): alpha and beta are halves.
    const __half one16 = __float2half(1.0f), zero16 = __float2half(0.0f);
    CUDA_CHECK(cudaMemset(d_c16, 0, size_t(M) * N * sizeof(__half)));  // 0, not NaN: the check counts non-finite
    CUBLAS_CHECK(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &one16, d_bt16, CUDA_R_16F, K, d_a16, CUDA_R_16F,
                              K, &zero16, d_c16, CUDA_R_16F, N, CUBLAS_COMPUTE_16F, CUBLAS_GEMM_DEFAULT));
    std::vector<uint16_t> c16(size_t(M) * N);
    CUDA_CHECK(cudaMemcpy(c16.data(), d_c16, c16.size() * 2, cudaMemcpyDeviceToHost));
    lesson::Check over;
    over.what = "FP16 overflow: FP16 in, FP16 accumulate, 64x64x256 with running sums up to " +
                std::to_string(int64_t(largest_partial)) + " > 65504: every element inf or NaN";
    uint64_t infs = 0, nans = 0;
    for (size_t i = 0; i < c16.size(); ++i) {
        const float v = verify::fp16_bits_to_float(c16[i]);
        infs += std::isinf(v);
        nans += std::isnan(v);
        if (std::isfinite(v)) {
            if (over.first_bad < 0) over.first_bad = int64_t(i);
            ++over.bad_count;
        }
    }
    over.checked = c16.size();
    over.rel_l2 = over.max_abs = 0.0;
    over.pass = over.bad_count == 0;
    report.check(over);
    report.metric("FP16 overflow demo, FP16 accumulate: elements inf", double(infs), "");
    report.metric("FP16 overflow demo, FP16 accumulate: elements NaN (inf - inf)", double(nans), "");

    // 2. and 3. The same products with FP32 accumulation, FP32 output: FP16 and BF16 inputs
    //          (BF16 GEMMs need BF16 tensor cores, cc 8.0: the Gate skips that part below it).
    const float one = 1.0f, zero = 0.0f;
    std::vector<float> c32(size_t(M) * N);
    const struct {
        const char* part;
        const char* what;
        const void *a, *bt;
        cudaDataType type;
        int cc;
    } runs[] = {{"FP16 overflow demo, FP16 in", "FP16 overflow demo: FP16 in, FP32 accumulate: the exact integers",
                 d_a16, d_bt16, CUDA_R_16F, 0},
                {"FP16 overflow demo, BF16 in", "FP16 overflow demo: BF16 in, FP32 accumulate: the exact integers",
                 d_abf, d_btbf, CUDA_R_16BF, 80}};
    for (const auto& run : runs) {
        lesson::Needs needs;
        needs.cc = run.cc;
        needs.cc_why = "BF16 tensor cores";
        if (!gate.run(run.part, needs)) continue;
        CUDA_CHECK(cudaMemset(d_c32, 0xFF, c32.size() * sizeof(float)));
        CUBLAS_CHECK(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &one, run.bt, run.type, K, run.a, run.type,
                                  K, &zero, d_c32, CUDA_R_32F, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        CUDA_CHECK(cudaMemcpy(c32.data(), d_c32, c32.size() * sizeof(float), cudaMemcpyDeviceToHost));
        report.check(verify::compare(c32.data(), exact.data(), c32.size(), 0.0, run.what));
    }
    CUDA_CHECK(cudaFree(d_c16));
    CUDA_CHECK(cudaFree(d_c32));
    CUDA_CHECK(cudaFree(d_btbf));
    CUDA_CHECK(cudaFree(d_abf));
    CUDA_CHECK(cudaFree(d_bt16));
    CUDA_CHECK(cudaFree(d_a16));
    CUDA_CHECK(cudaFree(d_bt));
    CUDA_CHECK(cudaFree(d_a));
}

// 2^16 gradient-sized values, |g| log-uniform in [2^-32, 2^-12], random signs. FP16's
// smallest subnormal is 2^-24 and its smallest normal 2^-14: converted as they are, about
// a third become 0 and half lose bits as subnormals. Multiplied by a loss scale S = 2^24
// first (training multiplies the loss, so every gradient comes out S times larger), they
// land in [2^-8, 2^12], all normal; dividing by S afterwards in FP32 gives them back to
// within FP16's unit roundoff. Our conversion kernel does both (its scale argument).
inline void demo_underflow_and_loss_scaling(lesson::Report& report, uint64_t seed) {
    const size_t n = size_t(1) << 16;
    const float S = 16777216.0f;  // 2^24: scaled values stay below 2^12, far from 65504
    std::vector<float> h_g(n);
    for (size_t i = 0; i < n; ++i) {
        const float e = verify::hash_uniform(seed + 30, i, -32.0f, -12.0f);
        const float sign = verify::hash_uniform(seed + 31, i) < 0.0f ? -1.0f : 1.0f;
        h_g[i] = sign * std::ldexp(std::exp2(e - std::floor(e)), int(std::floor(e)));  // 2^e, in [2^-32, 2^-12)
    }
    float* d_g;
    __half* d_h;
    CUDA_CHECK(cudaMalloc(&d_g, n * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_h, n * sizeof(__half)));
    CUDA_CHECK(cudaMemcpy(d_g, h_g.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    const double u = verify::unit_roundoff(verify::kFp16);
    for (const float scale : {1.0f, S}) {
        CUDA_CHECK(cudaMemset(d_h, 0xFF, n * sizeof(__half)));
        convert::to_half(d_g, d_h, n, scale);
        std::vector<uint16_t> bits(n);
        CUDA_CHECK(cudaMemcpy(bits.data(), d_h, n * 2, cudaMemcpyDeviceToHost));
        lesson::Check same;
        same.what = std::string("underflow demo: float -> FP16 with scale ") + (scale == 1.0f ? "1" : "2^24") +
                    ", bit for bit against the CPU's rounding";
        std::vector<float> back(n);  // what FP32 code gets back: FP16 value / scale
        uint64_t zeros = 0, subnormal = 0;
        for (size_t i = 0; i < n; ++i) {
            if (bits[i] != verify::to_fp16_bits(h_g[i] * scale)) {
                if (same.first_bad < 0) same.first_bad = int64_t(i);
                ++same.bad_count;
            }
            const float h = verify::fp16_bits_to_float(bits[i]);
            back[i] = h / scale;
            zeros += h == 0.0f;
            subnormal += h != 0.0f && std::fabs(h) < 6.103515625e-05f;  // 2^-14
        }
        same.checked = n;
        same.rel_l2 = same.max_abs = 0.0;
        same.pass = same.bad_count == 0;
        report.check(same);
        // Element by element, relative: |back - g| <= u |g| (compare's scale 0: no absolute floor).
        const lesson::Check rel = verify::compare(
            back.data(), h_g.data(), n, u, "loss scale 2^24: every value back within FP16's unit roundoff 2^-11", 0.0);
        const std::string tag = scale == 1.0f ? "no loss scale" : "loss scale 2^24";
        report.metric("underflow demo, " + tag + ": values flushed to 0", double(zeros) / double(n), "fraction");
        report.metric("underflow demo, " + tag + ": values left subnormal", double(subnormal) / double(n), "fraction");
        report.metric("underflow demo, " + tag + ": values off by more than u = 2^-11", double(rel.bad_count) / n,
                      "fraction");
        if (scale != 1.0f) report.check(rel);
    }
    CUDA_CHECK(cudaFree(d_h));
    CUDA_CHECK(cudaFree(d_g));
}

// 16384 values uniform in [0, 1) (sum about 8192) added in order with the running sum in
// FP32, FP16 and BF16 (kernels/sum_in_order.cuh). Each GPU result must equal the CPU's
// emulation bit for bit; FP32's must lie within the classic bound n u sum|x|. BF16 stalls
// at 256 = 2^8 and FP16 at 2048 = 2^11 (verify::running_sum_stall): the reason GEMMs on
// 16-bit inputs accumulate in FP32.
inline void demo_long_sums(lesson::Report& report, uint64_t seed) {
    const size_t n = 16384;
    std::vector<float> h_x(n);
    verify::fill_uniform(h_x.data(), n, seed + 40, 0.0f, 1.0f);
    double exact = 0;
    for (float v : h_x) exact += v;
    float *d_x, *d_sum;
    CUDA_CHECK(cudaMalloc(&d_x, n * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_sum, sizeof(float)));
    CUDA_CHECK(cudaMemcpy(d_x, h_x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    const struct {
        demo::Acc acc;
        const verify::FloatFormat* fmt;
    } accs[] = {
        {demo::Acc::Fp32, &verify::kFp32}, {demo::Acc::Fp16, &verify::kFp16}, {demo::Acc::Bf16, &verify::kBf16}};
    for (const auto& a : accs) {
        CUDA_CHECK(cudaMemset(d_sum, 0xFF, sizeof(float)));
        demo::sum_in_order(d_x, n, a.acc, d_sum);
        float got = NAN;
        CUDA_CHECK(cudaMemcpy(&got, d_sum, sizeof(float), cudaMemcpyDeviceToHost));
        const float want = verify::emulated_running_sum(h_x.data(), n, *a.fmt);
        report.check(verify::compare(&got, &want, 1, 0.0,
                                     std::string("long-sum demo: ") + a.fmt->name +
                                         " accumulator, 16384 values in [0, 1), the CPU's emulated bits"));
        report.metric(std::string("long-sum demo: ") + a.fmt->name + " accumulator (exact sum " +
                          std::to_string(exact) + ")",
                      got, "");
        if (a.acc == demo::Acc::Fp32)
            report.check(verify::compare(&got, &exact, 1, double(n) * verify::unit_roundoff(verify::kFp32),
                                         "long-sum demo: FP32 accumulator within n u of the exact sum", 0.0));
    }
    CUDA_CHECK(cudaFree(d_sum));
    CUDA_CHECK(cudaFree(d_x));
}
