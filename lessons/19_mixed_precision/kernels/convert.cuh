// Lesson 19 - mixed precision: the conversion kernels, float -> FP16, BF16 and FP8 E4M3.
//
// A GEMM in a narrow format needs its operands in that format first. These
// kernels make them from the float matrices: four values per thread (one 16-byte
// load, one 8- or 4-byte store), every value rounded to nearest, ties to even
// (the _rn intrinsics and cvt.rn). FP8 E4M3 reaches only +-448, so its tensor
// is scaled first: an amax pass finds the largest |x| on the GPU, then the
// conversion multiplies by 448 / amax and saturates, and writes amax / 448 for
// the GEMM to multiply back (cuBLASLt's A/B scale pointers).
// main.cu times these kernels next to the GEMMs that need them, and checks their
// output bit for bit against verify/precision.h (the same rounding on the CPU).
// Lesson 19 of the course; before: lesson 18, next: lesson 20.
// Run: ./build/bin/mixed_precision
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <cstddef>
#include <cstdint>
#include "common/check.h"
#include "common/launch.h"

namespace convert {

constexpr int kThreads = 256;

// Blocks for n4 float4s, one per thread (grid-stride loops cover any rest).
inline unsigned blocks_for(size_t n4) {
    const size_t b = lesson::ceil_div(n4, size_t(kThreads));
    return unsigned(b < 1 ? 1 : (b > (size_t(1) << 30) ? (size_t(1) << 30) : b));
}

inline void require_multiple_of_4(size_t n) {
    if (n % 4 != 0) lesson::fail_call("lesson", "convert", "element count is not a multiple of 4", __FILE__, __LINE__);
}

// out[i] = FP16(in[i] * scale). The scale is 1 for the GEMM inputs; the loss-scaling
// demonstration passes 2^24 (a power of two: the multiply itself is exact).
__global__ void floatToHalf(const float4* __restrict__ in, uint2* __restrict__ out, size_t n4, float scale) {
    const size_t stride = size_t(gridDim.x) * blockDim.x;
    for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n4; i += stride) {
        const float4 v = in[i];
        __align__(8) __half2 h[2];
        h[0] = __floats2half2_rn(v.x * scale, v.y * scale);  // .x goes to the lower half: memory order kept
        h[1] = __floats2half2_rn(v.z * scale, v.w * scale);
        out[i] = *reinterpret_cast<const uint2*>(h);  // 4 halves, one 8-byte store
    }
}

// out[i] = BF16(in[i] * scale): the same, with BF16's 8 exponent bits and 8 significand bits.
__global__ void floatToBf16(const float4* __restrict__ in, uint2* __restrict__ out, size_t n4, float scale) {
    // EXERCISE 1 BEGIN: out[i] = the four BF16s of in[i] * scale, rounded to nearest even, for every i < n4
    // HINT: a grid-stride loop covers any n4 with any grid; the last block may hang over the end of the data
    // HINT: __floats2bfloat162_rn(a, b) packs two; .x goes to the lower half (memory order kept); one 8-byte store
    const size_t stride = size_t(gridDim.x) * blockDim.x;
    for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n4; i += stride) {
        const float4 v = in[i];
        __align__(8) __nv_bfloat162 h[2];
        h[0] = __floats2bfloat162_rn(v.x * scale, v.y * scale);
        h[1] = __floats2bfloat162_rn(v.z * scale, v.w * scale);
        out[i] = *reinterpret_cast<const uint2*>(h);
    }
    // EXERCISE 1 END
}

// amax = max |in[i]|: each thread folds its float4s, a warp combines with shuffles,
// one atomicMax per warp on the bits of the float (for floats >= 0 the order of the
// bit patterns as unsigned integers is the order of the values). *amax_bits must be
// 0 before the launch (cudaMemsetAsync).
__global__ void absMax(const float4* __restrict__ in, size_t n4, unsigned* __restrict__ amax_bits) {
    const size_t stride = size_t(gridDim.x) * blockDim.x;
    float m = 0.0f;
    for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n4; i += stride) {
        const float4 v = in[i];
        m = fmaxf(m, fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w))));
    }
    for (int offset = 16; offset > 0; offset /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, offset));
    if ((threadIdx.x & 31) == 0) atomicMax(amax_bits, __float_as_uint(m));
}

// out[i] = E4M3(in[i] * 448 / amax), saturating at +-448; thread 0 also writes the
// dequantization scale amax / 448 that the GEMM multiplies back. Same float
// arithmetic as verify::fp8_quant_scale / fp8_dequant_scale.
__global__ void floatToE4m3(const float4* __restrict__ in, uint32_t* __restrict__ out, size_t n4,
                            const unsigned* __restrict__ amax_bits, float* __restrict__ dequant_scale) {
    const float amax = __uint_as_float(*amax_bits);
    // Exercise 3 of the handout: use q = 1 and a dequantization scale of 1 (no scaling) and measure the FP8 error
    const float q = amax > 0.0f ? 448.0f / amax : 1.0f;  // IEEE division (nvcc's default -prec-div=true)
    if (blockIdx.x == 0 && threadIdx.x == 0) *dequant_scale = amax > 0.0f ? amax / 448.0f : 1.0f;
    const size_t stride = size_t(gridDim.x) * blockDim.x;
    for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n4; i += stride) {
        const float4 v = in[i];
        const __nv_fp8x2_storage_t lo =
            __nv_cvt_float2_to_fp8x2(make_float2(v.x * q, v.y * q), __NV_SATFINITE, __NV_E4M3);
        const __nv_fp8x2_storage_t hi =
            __nv_cvt_float2_to_fp8x2(make_float2(v.z * q, v.w * q), __NV_SATFINITE, __NV_E4M3);
        out[i] = uint32_t(lo) | uint32_t(hi) << 16;  // .x in the lowest byte: memory order kept
    }
}

// ---------------------------------------------------------------- launchers (n % 4 == 0)

inline void to_half(const float* in, __half* out, size_t n, float scale = 1.0f, cudaStream_t s = 0) {
    require_multiple_of_4(n);
    floatToHalf<<<blocks_for(n / 4), kThreads, 0, s>>>(reinterpret_cast<const float4*>(in),
                                                       reinterpret_cast<uint2*>(out), n / 4, scale);
    CUDA_CHECK_LAUNCH();
}

inline void to_bf16(const float* in, __nv_bfloat16* out, size_t n, float scale = 1.0f, cudaStream_t s = 0) {
    require_multiple_of_4(n);
    floatToBf16<<<blocks_for(n / 4), kThreads, 0, s>>>(reinterpret_cast<const float4*>(in),
                                                       reinterpret_cast<uint2*>(out), n / 4, scale);
    CUDA_CHECK_LAUNCH();
}

// Two passes over the input: amax, then the scaled conversion. `amax_bits` is one
// unsigned of scratch; `dequant_scale` receives amax / 448 (device memory).
inline void to_e4m3(const float* in, __nv_fp8_storage_t* out, size_t n, unsigned* amax_bits, float* dequant_scale,
                    int sms, cudaStream_t s = 0) {
    require_multiple_of_4(n);
    const size_t n4 = n / 4;
    CUDA_CHECK(cudaMemsetAsync(amax_bits, 0, sizeof(unsigned), s));
    const unsigned max_blocks = unsigned(8 * sms);  // a few waves; each block then folds many float4s
    const unsigned blocks = blocks_for(n4) < max_blocks ? blocks_for(n4) : max_blocks;
    absMax<<<blocks, kThreads, 0, s>>>(reinterpret_cast<const float4*>(in), n4, amax_bits);
    CUDA_CHECK_LAUNCH();
    floatToE4m3<<<blocks_for(n4), kThreads, 0, s>>>(reinterpret_cast<const float4*>(in),
                                                    reinterpret_cast<uint32_t*>(out), n4, amax_bits, dequant_scale);
    CUDA_CHECK_LAUNCH();
}

}  // namespace convert
