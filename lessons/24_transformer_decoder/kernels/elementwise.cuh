// Lesson 24 of the course (the transformer decoder): the elementwise kernels. The weights drawn on
// the GPU, the embedding lookup, and the SwiGLU gate of the MLP. Each reads the fp32 output of a
// projection as `Parts`: the planes a split-K GEMV leaves (one plane from cuBLAS), added as read.
// Run: ./build/bin/transformer_decoder   (README.md is the handout)
#pragma once
#include <cstdint>

#include <cuda_bf16.h>

#include "../problem.cuh"

using bf16 = __nv_bfloat16;

// The fp32 output of a projection with `cols` outputs per row, as `planes` partial sums that lie
// `plane` floats apart (a GEMV split over K writes one plane per split; cuBLAS writes one).
struct Parts {
    const float* p;
    int planes;
    size_t plane;
    int64_t cols;
    __device__ __forceinline__ float at(int64_t row, int64_t col) const {
        const float* q = p + size_t(row) * cols + col;
        float s = q[0];
        for (int i = 1; i < planes; ++i) s += q[size_t(i) * plane];
        return s;
    }
};

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
