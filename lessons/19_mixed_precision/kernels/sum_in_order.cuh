// Lesson 19 - mixed precision: a running sum with the accumulator in FP32, FP16 or BF16.
//
// The demonstration of what an accumulator's significand bits do on a long sum:
// one thread adds n floats in index order, keeping the running sum in the chosen
// format: acc = round(float(acc) + x[i]). Deliberately sequential and tiny (one
// thread): the point is the arithmetic, which verify::emulated_running_sum
// reproduces on the CPU bit for bit. A BF16 sum of values in [0, 1) stops growing
// at 256, an FP16 one at 2048 (README, "The formats, measured").
// Lesson 19 of the course; before: lesson 18 (CUDA graphs), next: lesson 20 (tensor-core GEMM).
// Run: ./build/bin/mixed_precision
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cstddef>
#include "common/check.h"

namespace demo {

enum class Acc { Fp32 = 0, Fp16 = 1, Bf16 = 2 };

__global__ void sumInOrder(const float* __restrict__ x, size_t n, Acc acc, float* __restrict__ out) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    if (acc == Acc::Fp32) {
        float s = 0.0f;
        for (size_t i = 0; i < n; ++i) s = __fadd_rn(s, x[i]);  // _rn: never fused or reordered
        *out = s;
    } else if (acc == Acc::Fp16) {
        __half s = __float2half_rn(0.0f);
        for (size_t i = 0; i < n; ++i) s = __float2half_rn(__fadd_rn(__half2float(s), x[i]));
        *out = __half2float(s);
    } else {
        __nv_bfloat16 s = __float2bfloat16_rn(0.0f);
        for (size_t i = 0; i < n; ++i) s = __float2bfloat16_rn(__fadd_rn(__bfloat162float(s), x[i]));
        *out = __bfloat162float(s);
    }
}

inline void sum_in_order(const float* d_x, size_t n, Acc acc, float* d_out) {
    sumInOrder<<<1, 1>>>(d_x, n, acc, d_out);
    CUDA_CHECK_LAUNCH();
}

}  // namespace demo
