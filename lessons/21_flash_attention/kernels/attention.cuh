// Lesson 21 of the course (flash attention): what the rungs share.
//
// Every rung (kernels/N_name.cuh) is self-contained, so that `diff` of two neighbours shows one
// idea. Here only the problems a launcher gets (Softmax, Attention, Decode), two warp reductions
// and a bf16 pair packer. The tensor-core instructions (ldmatrix, mma.sync, cp.async, and on
// Hopper mbarrier, TMA, wgmma) are the thin PTX wrappers of common/ptx.cuh, shared with lesson
// 20; the few Hopper forms that rungs 8 and 9 add (3D TMA, wgmma with K-major B or A in
// registers) are in hopper.cuh.
// Layout everywhere: Q, K, V, O are [heads][N][d] row-major bf16 (heads = batch x heads).
// Run the ladder: ./build/bin/flash_attention (or --rung=N); README.md explains every line.
#pragma once
#include <cstdint>

#include <cuda_bf16.h>

#include "common/ptx.cuh"  // bf16, ldmatrix, mma.sync, cp.async, mbarrier, TMA, wgmma

// Row-wise softmax of the standard attention: P = softmax(S) row by row (S fp32, P bf16), rows of
// `cols` entries; with `causal`, row r (query r % cols of its head) keeps only entries 0..r % cols.
struct Softmax {
    const float* S;
    bf16* P;
    int64_t rows;
    int cols;
    bool causal;
};

// O = softmax(Q K^T * scale) V for every head; with `causal`, query i sees keys 0..i.
struct Attention {
    int64_t heads;
    int N, d;
    const bf16 *Q, *K, *V;
    bf16* O;
    bool causal;
    float scale;  // 1 / sqrt(d)
};

// Decode: one query row per head against N keys: q [heads][d], K, V [heads][N][d], o [heads][d].
// The keys are split into `splits` pieces of `keys_per_split`; each piece leaves a partial result
// (running max m, sum l, unnormalized o) in `partial` for the combine kernel.
struct Decode {
    int64_t heads;
    int N, d;
    const bf16 *q, *K, *V;
    bf16* o;
    float scale;
    int splits, keys_per_split;
    float* partial;  // heads x splits x (d + 2) floats
};

constexpr float kLog2e = 1.4426950408889634f;  // exp(x) = exp2(x * log2(e)): exp2 is one instruction (MUFU.EX2)

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int off = 16; off > 0; off /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
    return v;
}
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}
// Two floats -> one 32-bit register of two bf16 (lo in the low half): an mma.sync A-operand pair.
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
}
