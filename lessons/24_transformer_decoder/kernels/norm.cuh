// Lesson 24 of the course (the transformer decoder): the residual add and RMSNorm, fused. Before
// each attention and each MLP (and before the LM head) the block's output is added into the fp32
// residual stream x, and the sum is normalized to bf16 for the next projection: one read and one
// write of x instead of an add kernel and a norm kernel. README.md, "Exercises", starts here.
// Decode has a row per sequence, too little for a block per row to stream: there the add and the
// sum of squares are the o and down GEMVs' epilogue (AddResidual, kernels/gemv.cuh), the scaling
// is the next GEMV's read of its input (XNormed), and the kernels below, a block per 256 columns
// of a row, serve the embedding and the projections cuBLAS runs.
// Run: ./build/bin/transformer_decoder   (README.md is the handout)
#pragma once
#include <cstdint>

#include <cuda_bf16.h>

#include "elementwise.cuh"
#include "gemv.cuh"

constexpr int kNormThreads = 256;

// One block per row r of x (rows of d floats). add.p == nullptr: nothing to add (after the
// embedding). Row r is sequence b = r / seq_rows at position t = r % seq_rows; its normalized row
// goes to row b * (seq_rows - keep_from) + t - keep_from of out where t >= keep_from (the LM head
// needs only those rows), and nowhere otherwise.
__global__ void __launch_bounds__(kNormThreads)
    addRmsNorm(float* x, Parts add, const bf16* w, bf16* out, int64_t d, int64_t seq_rows, int64_t keep_from) {
    __shared__ float warp_sums[kNormThreads / 32];
    const int64_t r = blockIdx.x;
    float* xr = x + size_t(r) * d;
    // EXERCISE 1 BEGIN: add the block's output into row r of x (where add.p is set), then write its RMSNorm times w to its row of out
    // HINT: x[i] += add.at(r, i) updates the residual stream; then sum of squares, a block reduction, rsqrtf(mean + kNormEps)
    float ss = 0.0f;
    for (int64_t i = threadIdx.x; i < d; i += kNormThreads) {
        float v = xr[i];
        if (add.p) xr[i] = v = v + add.at(r, i);
        ss += v * v;
    }
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = ss;
    __syncthreads();
    ss = 0.0f;
    for (int i = 0; i < kNormThreads / 32; ++i) ss += warp_sums[i];
    const float inv = rsqrtf(ss / float(d) + float(kNormEps));
    const int64_t b = r / seq_rows, t = r % seq_rows;
    if (t < keep_from) return;
    bf16* o = out + size_t(b * (seq_rows - keep_from) + t - keep_from) * d;
    for (int64_t i = threadIdx.x; i < d; i += kNormThreads)
        o[i] = __float2bfloat16_rn(xr[i] * inv * __bfloat162float(w[i]));
    // EXERCISE 1 END
}

// Decode: x[b][c] = the embedding of tokens[b] (tokens set) or x[b][c] + add[b][c] (add.p set),
// and the tile's sum of squares of the new row into ssq[b][tile], as AddResidual leaves them.
// Grid (tiles of 256 columns, rows).
__global__ void __launch_bounds__(kGemvCols)
    residualTiles(const int* tokens, const bf16* table, Parts add, float* x, float* ssq, int64_t d) {
    __shared__ float warp_sq[kGemvCols / 32];
    const int64_t b = blockIdx.y, c = int64_t(blockIdx.x) * kGemvCols + threadIdx.x;
    wait_prior();      // a no-op for a plain launch (decode's embedding, the residual adds around cuBLAS)
    let_next_start();  // the Q|K|V projection after it may start (pdl.cuh)
    float sq = 0.0f;
    if (c < d) {
        const float v = tokens ? __bfloat162float(table[size_t(tokens[b]) * d + c]) : x[b * d + c] + add.at(b, c);
        x[b * d + c] = v;
        sq = v * v;
    }
    const float s = block_sum<kGemvCols>(sq, warp_sq);
    if (threadIdx.x == 0) ssq[b * gridDim.x + blockIdx.x] = s;
}

// Decode, before a projection cuBLAS runs: out[b][c] = the RMSNorm of x's row times w, in bf16,
// from the row's tile sums (XNormed, written out). Grid (tiles of 256 columns, rows).
__global__ void __launch_bounds__(kGemvCols) normTiles(XNormed xn, bf16* out) {
    __shared__ float scale[kGemvMaxRows];
    const int64_t b = blockIdx.y, c = int64_t(blockIdx.x) * kGemvCols + threadIdx.x;
    if (threadIdx.x == 0) {
        float ss = 0.0f;
        for (int t = 0; t < xn.tiles; ++t) ss += xn.ssq[b * xn.tiles + t];
        scale[b] = rsqrtf(ss / float(xn.K) + float(kNormEps));
    }
    __syncthreads();
    xn.scale = scale;
    if (c < xn.K) out[b * xn.K + c] = __float2bfloat16_rn(xn(b, c));
}
