// Lesson 24 of the course (the transformer decoder): causal grouped-query attention over the paged
// KV cache. One warp holds one query row (hd / 32 of its dimensions per lane) and walks keys in
// order through the block table with lesson 21's online softmax: a dot product reduced across
// the warp, then the running max, sum and output rescaled. Query head h reads KV head
// h / (heads / kv_heads): the cache holds each KV head once, as grouped-query attention intends.
//   causalAttention   prefill, the portable path: one warp per (row, head), keys 0..pos.
//   decodeSplit       decode: one block per (sequence, KV head, split of the keys), one warp per
//                     query head of the group, so the group's heads read the split's K/V once
//                     from DRAM; each split leaves (max, sum, output) for...
//   combineSplits     ...the merge of the splits (lesson 21's kernels/7_decode_split.cuh).
// Run: ./build/bin/transformer_decoder   (README.md is the handout)
#pragma once
#include <cstdint>

#include <cuda_bf16.h>

#include "paged_cache.cuh"

constexpr int kAttnWarps = 8;  // causalAttention: warps per block

// The running state of one query row over the keys it has seen (lane-local part of o).
template <int HD>
struct Online {
    static constexpr int kPer = HD / 32;
    float m = -INFINITY, l = 0.0f, o[kPer] = {};
    // Folds in key `pos` of sequence b, KV head `head`; q holds this lane's dimensions, pre-scaled
    // by log2(e) / sqrt(hd) so that exp2 gives the softmax's exponentials.
    __device__ __forceinline__ void add(const float (&q)[kPer], const PagedKv& kv, int b, int head, int pos) {
        const int lane = threadIdx.x % 32;
        const bf16* k = kv.at(b, 0, head, pos) + lane * kPer;
        const bf16* v = kv.at(b, 1, head, pos) + lane * kPer;
        float s = 0.0f;
#pragma unroll
        for (int i = 0; i < kPer; ++i) s += q[i] * __bfloat162float(k[i]);
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
        const float m_new = fmaxf(m, s), scale = exp2f(m - m_new), p = exp2f(s - m_new);
        l = l * scale + p;
#pragma unroll
        for (int i = 0; i < kPer; ++i) o[i] = o[i] * scale + p * __bfloat162float(v[i]);
        m = m_new;
    }
};

template <int HD>
__device__ __forceinline__ void load_q(const bf16* q, float (&qr)[HD / 32]) {
    const float c = 1.4426950408889634f * rsqrtf(float(HD));
#pragma unroll
    for (int i = 0; i < HD / 32; ++i) qr[i] = __bfloat162float(q[(threadIdx.x % 32) * (HD / 32) + i]) * c;
}

// out[r][h * hd .. ] = softmax over keys 0..pos of (q . k / sqrt(hd)) times V, pos = start[b] + t.
template <int HD>
__global__ void __launch_bounds__(kAttnWarps * 32)
    causalAttention(const bf16* q, PagedKv kv, const int* start, int64_t seq_rows, int64_t rows, int heads,
                    bf16* out) {
    const int64_t w = int64_t(blockIdx.x) * kAttnWarps + threadIdx.x / 32;
    if (w >= rows * heads) return;
    const int64_t r = w / heads;
    const int h = int(w % heads), b = int(r / seq_rows), pos = start[b] + int(r % seq_rows);
    const int head = h / (heads / kv.kv_heads);
    float qr[HD / 32];
    load_q<HD>(q + size_t(w) * HD, qr);
    Online<HD> st;
    for (int j = 0; j <= pos; ++j) st.add(qr, kv, b, head, j);
    bf16* o = out + size_t(w) * HD + (threadIdx.x % 32) * (HD / 32);
#pragma unroll
    for (int i = 0; i < HD / 32; ++i) o[i] = __float2bfloat16_rn(st.o[i] / st.l);
}

// Decode: sequence b has len[b] + 1 keys (this step's key is already in the cache). Split s of
// `gridDim.x` takes an equal share of them; a split with none leaves m = -inf, l = 0, o = 0.
// Partial results: m and l [batch][heads][splits], o [batch][heads][splits][hd], fp32.
template <int HD>
__global__ void decodeSplit(const bf16* q, PagedKv kv, const int* len, int heads, float* part_ml, float* part_o) {
    const int s = blockIdx.x, splits = gridDim.x, head = blockIdx.y, b = blockIdx.z;
    const int group = heads / kv.kv_heads, h = head * group + threadIdx.x / 32, lane = threadIdx.x % 32;
    const int n = len[b] + 1, chunk = (n + splits - 1) / splits;
    const int k0 = s * chunk, k1 = min(n, k0 + chunk);
    float qr[HD / 32];
    load_q<HD>(q + (size_t(b) * heads + h) * HD, qr);
    Online<HD> st;
    for (int j = k0; j < k1; ++j) st.add(qr, kv, b, head, j);
    const size_t idx = (size_t(b) * heads + h) * splits + s;
    if (lane == 0) {
        part_ml[2 * idx] = st.m;
        part_ml[2 * idx + 1] = st.l;
    }
#pragma unroll
    for (int i = 0; i < HD / 32; ++i) part_o[idx * HD + lane * (HD / 32) + i] = st.o[i];
}

// One warp per (sequence, query head): o = sum_s o_s 2^(m_s - M) / sum_s l_s 2^(m_s - M), M = max m_s.
template <int HD>
__global__ void combineSplits(const float* part_ml, const float* part_o, int rows_heads, int splits, bf16* out) {
    const int w = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (w >= rows_heads) return;
    const float* ml = part_ml + size_t(w) * splits * 2;
    float M = -INFINITY;
    for (int s = 0; s < splits; ++s) M = fmaxf(M, ml[2 * s]);
    float L = 0.0f, o[HD / 32] = {};
    for (int s = 0; s < splits; ++s) {
        const float f = exp2f(ml[2 * s] - M);  // 0 for an empty split (m = -inf)
        L += ml[2 * s + 1] * f;
#pragma unroll
        for (int i = 0; i < HD / 32; ++i) o[i] += part_o[(size_t(w) * splits + s) * HD + lane * (HD / 32) + i] * f;
    }
#pragma unroll
    for (int i = 0; i < HD / 32; ++i) out[size_t(w) * HD + lane * (HD / 32) + i] = __float2bfloat16_rn(o[i] / L);
}
