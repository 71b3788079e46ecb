// Lesson 24 of the course (the transformer decoder): the elementwise kernels. The weights drawn on
// the GPU, the embedding lookup, and the SwiGLU gate of the MLP, which reads the fp32 output of
// the gate/up projection (`Parts`, as every kernel after a projection does).
// Run: ./build/bin/transformer_decoder   (README.md is the handout)
#pragma once
#include <cstdint>

#include <cuda_bf16.h>

#include "../problem.cuh"

using bf16 = __nv_bfloat16;

// The fp32 output of a projection, rows of `cols` (cuBLAS's C, or the GEMV's y), as the kernel
// after it reads it.
struct Parts {
    const float* p;
    int64_t cols;
    __device__ __forceinline__ float at(int64_t row, int64_t col) const { return p[size_t(row) * cols + col]; }
};

// The sum of v over a block of Threads threads, returned to every thread: each warp's by shuffles,
// then the warps' in order, so every run adds in the same order. sh holds Threads / 32 floats; the
// barrier first lets a loop call it again with the same sh.
template <int Threads>
__device__ float block_sum(float v, float* sh) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads();
    if (threadIdx.x % 32 == 0) sh[threadIdx.x / 32] = v;
    __syncthreads();
    float s = 0.0f;
    for (int i = 0; i < Threads / 32; ++i) s += sh[i];
    return s;
}

// Tensor elements from their hash (problem.cuh), rounded to bf16 once, here.
__global__ void initWeights(bf16* w, size_t n, Fill f) {
    for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
        w[i] = __float2bfloat16_rn(weight_value(f, i));
}

// x[r][:] = embedding[token[r]][:] in fp32: the residual stream starts here. One block per row.
__global__ void embedTokens(const int* tokens, const bf16* table, float* x, int64_t d) {
    const int64_t r = blockIdx.x;
    const bf16* row = table + size_t(tokens[r]) * d;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) x[size_t(r) * d + i] = __bfloat162float(row[i]);
}

// act[r][j] = silu(gate) * up, gate = column j and up = column mlp + j of the fused projection.
__global__ void swiglu(Parts gu, bf16* act, int64_t rows, int64_t mlp) {
    const size_t n = size_t(rows) * mlp;
    for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
        const int64_t r = int64_t(i / mlp), j = int64_t(i % mlp);
        const float g = gu.at(r, j), u = gu.at(r, mlp + j);
        act[i] = __float2bfloat16_rn(g / (1.0f + __expf(-g)) * u);
    }
}
