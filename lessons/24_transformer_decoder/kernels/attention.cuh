// Lesson 24 of the course (the transformer decoder): causal grouped-query attention over the paged
// KV cache. One warp holds one query row and walks its keys through the block table 32 at a time
// with lesson 21's online softmax (attend, below). Query head h reads KV head
// h / (heads / kv_heads): the cache holds each KV head once, as grouped-query attention intends.
//   causalAttention   prefill, the portable path: one warp per (row, head), keys 0..pos.
//   decodeSplit       decode: one block per (sequence, KV head, split of the keys), one warp per
//                     query head of the group, so the group's heads read the split's K/V once
//                     from DRAM; each split leaves (max, sum, output), and the last split to
//                     finish merges them (lesson 21's kernels/7_decode_split.cuh, one kernel).
// Run: ./build/bin/transformer_decoder   (README.md is the handout)
#pragma once
#include <cstdint>

#include <cuda_bf16.h>

#include "paged_cache.cuh"
#include "pdl.cuh"

constexpr int kAttnWarps = 8;  // causalAttention: warps per block

// The running state of one query row over the keys seen so far: max m and sum l of the scores
// (the same in every lane), and this lane's hd / 32 dimensions of the unnormalized output.
template <int HD>
struct Partial {
    float m = -INFINITY, l = 0.0f, o[HD / 32] = {};
};

// This lane's hd / 32 elements of the query, pre-scaled by log2(e) / sqrt(hd) so that exp2 gives
// the softmax's exponentials, into the warp's row of shared memory (every lane then reads all of it).
template <int HD>
__device__ __forceinline__ void load_q(const bf16* q, float* sq) {
    const float c = 1.4426950408889634f * rsqrtf(float(HD));
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int i = 0; i < HD / 32; ++i) sq[lane * (HD / 32) + i] = __bfloat162float(q[lane * (HD / 32) + i]) * c;
    __syncwarp();
}

// A lane's hd / 32 consecutive elements of a row, as one load: bf16 (2, 4 or 8 bytes) or fp32
// (4, 8 or 16 bytes). Widths 1, 2 and 4 elements (hd 32, 64, 128).
template <int W>
__device__ __forceinline__ void load_bf16s(const bf16* p, float* out) {
    if constexpr (W == 1) {
        out[0] = __bfloat162float(*p);
    } else if constexpr (W == 2) {
        const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(p));
        out[0] = f.x, out[1] = f.y;
    } else {
        const uint2 raw = *reinterpret_cast<const uint2*>(p);
        const float2 a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.x));
        const float2 b = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.y));
        out[0] = a.x, out[1] = a.y, out[2] = b.x, out[3] = b.y;
    }
}
template <int W>
__device__ __forceinline__ void load_floats_l2(const float* p, float* out) {  // __ldcg: past this SM's L1
    if constexpr (W == 1) {
        out[0] = __ldcg(p);
    } else if constexpr (W == 2) {
        const float2 f = __ldcg(reinterpret_cast<const float2*>(p));
        out[0] = f.x, out[1] = f.y;
    } else {
        const float4 f = __ldcg(reinterpret_cast<const float4*>(p));
        out[0] = f.x, out[1] = f.y, out[2] = f.z, out[3] = f.w;
    }
}

// Keys k0..k1-1 of sequence b, KV head g, folded into st, 32 at a time: lane j scores key c0 + j
// against the whole query (its K row read as 16-byte loads), the warp agrees on the chunk's max
// and sum with shuffles, then every lane adds its dimensions of the 32 V rows. Lesson 21's online
// softmax, a chunk of keys per step instead of one. The chunk's K row and its V slices are all
// loaded before any score is computed: one trip to memory a chunk, not one for K and one for V.
template <int HD>
__device__ void attend(const float* sq, const PagedKv& kv, int b, int g, int k0, int k1, Partial<HD>& st) {
    constexpr int W = HD / 32;  // this lane's dimensions of a V row (and of the output)
    const int lane = threadIdx.x % 32;
    for (int c0 = k0; c0 < k1; c0 += 32) {
        // Past k1 a lane reads the chunk's last key (a real one), scored -inf and weighted 0.
        const int last = min(32, k1 - c0) - 1;
        uint4 kr[HD / 8];
        const uint4* k = reinterpret_cast<const uint4*>(kv.at(b, 0, g, c0 + min(lane, last)));
#pragma unroll
        for (int c = 0; c < HD / 8; ++c) kr[c] = k[c];
        float v[32][W];
#pragma unroll
        for (int j = 0; j < 32; ++j) load_bf16s<W>(kv.at(b, 1, g, c0 + min(j, last)) + lane * W, v[j]);
        float s = 0.0f;
#pragma unroll
        for (int c = 0; c < HD / 8; ++c) {
            const __nv_bfloat162* k2 = reinterpret_cast<const __nv_bfloat162*>(&kr[c]);
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const float2 f = __bfloat1622float2(k2[e]);
                s += sq[8 * c + 2 * e] * f.x + sq[8 * c + 2 * e + 1] * f.y;
            }
        }
        if (lane > last) s = -INFINITY;
        float mc = s;
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) mc = fmaxf(mc, __shfl_xor_sync(0xffffffffu, mc, off));
        const float m_new = fmaxf(st.m, mc);                            // finite: the chunk holds at least one key
        const float p = exp2f(s - m_new), scale = exp2f(st.m - m_new);  // p = 0 past k1; scale 0 at first
        float ps = p;
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) ps += __shfl_xor_sync(0xffffffffu, ps, off);
        st.l = st.l * scale + ps;
#pragma unroll
        for (int i = 0; i < W; ++i) st.o[i] *= scale;
#pragma unroll
        for (int j = 0; j < 32; ++j) {
            const float pj = __shfl_sync(0xffffffffu, p, j);
#pragma unroll
            for (int i = 0; i < W; ++i) st.o[i] += pj * v[j][i];
        }
        st.m = m_new;
    }
}

// out[r][h * hd .. ] = softmax over keys 0..pos of (q . k / sqrt(hd)) times V, pos = start[b] + t.
template <int HD>
__global__ void __launch_bounds__(kAttnWarps * 32)
    causalAttention(const bf16* q, PagedKv kv, const int* start, int64_t seq_rows, int64_t rows, int heads, bf16* out) {
    __shared__ float sq[kAttnWarps][HD];
    const int64_t w = int64_t(blockIdx.x) * kAttnWarps + threadIdx.x / 32;
    if (w >= rows * heads) return;
    const int64_t r = w / heads;
    const int h = int(w % heads), b = int(r / seq_rows), pos = start[b] + int(r % seq_rows);
    float* qs = sq[threadIdx.x / 32];
    load_q<HD>(q + size_t(w) * HD, qs);
    Partial<HD> st;
    attend<HD>(qs, kv, b, h / (heads / kv.kv_heads), 0, pos + 1, st);
    bf16* o = out + size_t(w) * HD + (threadIdx.x % 32) * (HD / 32);
#pragma unroll
    for (int i = 0; i < HD / 32; ++i) o[i] = __float2bfloat16_rn(st.o[i] / st.l);
}

// Decode: sequence b has len[b] + 1 keys (this step's key is already in the cache). Split s of
// `gridDim.x` takes an equal share of them; a split with none leaves m = -inf, l = 0, o = 0.
// Partial results: m and l [batch][heads][splits], o [batch][heads][splits][hd], fp32. The last
// block of a (sequence, KV head) to finish (done[b][g], a counter it sets back to zero) merges the
// splits of the group's heads into out [batch][heads][hd]: o = sum_s o_s 2^(m_s - M) /
// sum_s l_s 2^(m_s - M), M = max m_s (lesson 21's combine, without a kernel of its own).
template <int HD>
__global__ void decodeSplit(const bf16* q, PagedKv kv, const int* len, int heads, float* part_ml, float* part_o,
                            unsigned* done, bf16* out) {
    __shared__ float sq[32][HD];  // one query row per warp, at most 32 query heads per KV head
    __shared__ bool last;
    const int s = blockIdx.x, splits = gridDim.x, g = blockIdx.y, b = blockIdx.z;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, h = g * (heads / kv.kv_heads) + warp;
    const int n = len[b] + 1, chunk = (n + splits - 1) / splits;
    const int k0 = s * chunk, k1 = min(n, k0 + chunk);
    // The split's K and V rows start into L2 before the wait (pdl.cuh): the cache and len were
    // written before the Q|K|V projection began (the key it adds is one line, fetched as it is read).
    constexpr int kLines = HD * 2 / 128 > 0 ? HD * 2 / 128 : 1;  // 128-byte lines a row
    for (int i = threadIdx.x; i < (k1 - k0) * 2 * kLines; i += blockDim.x) {
        const int pos = k0 + i / (2 * kLines), kvi = i / kLines % 2;
        prefetch_l2(kv.at(b, kvi, g, pos) + i % kLines * 64);
    }
    wait_prior();  // q, the new key and value, the partials and counters: the kernel before's until it ends
    let_next_start();
    load_q<HD>(q + (size_t(b) * heads + h) * HD, sq[warp]);
    Partial<HD> st;
    attend<HD>(sq[warp], kv, b, g, k0, k1, st);
    const size_t row = size_t(b) * heads + h, idx = row * splits + s;
    if (lane == 0) {
        part_ml[2 * idx] = st.m;
        part_ml[2 * idx + 1] = st.l;
    }
#pragma unroll
    for (int i = 0; i < HD / 32; ++i) part_o[idx * HD + lane * (HD / 32) + i] = st.o[i];
    __threadfence();  // this split's partials are visible before its count is
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned* count = done + size_t(b) * gridDim.y + g;
        last = atomicAdd(count, 1u) == unsigned(splits - 1);
        if (last) *count = 0;
    }
    __syncthreads();
    if (!last) return;
    // Lane j holds splits j and j + 32 (at most 64): their (m, l) read at once, M and L by shuffles.
    const float* ml = part_ml + row * splits * 2;
    float ms[2], ls[2], M = -INFINITY;
#pragma unroll
    for (int u = 0; u < 2; ++u) {
        const int t = lane + 32 * u;
        ms[u] = t < splits ? __ldcg(ml + 2 * t) : -INFINITY;
        ls[u] = t < splits ? __ldcg(ml + 2 * t + 1) : 0.0f;
        M = fmaxf(M, ms[u]);
    }
    for (int off = 16; off > 0; off >>= 1) M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, off));
    float f[2], L = 0.0f, o[HD / 32] = {};
#pragma unroll
    for (int u = 0; u < 2; ++u) L += ls[u] * (f[u] = exp2f(ms[u] - M));  // f = 0 for an empty split (m = -inf)
    for (int off = 16; off > 0; off >>= 1) L += __shfl_xor_sync(0xffffffffu, L, off);
    // The splits' outputs 16 at a time, all 16 loads in flight before the first is added: one
    // round trip to L2 for every 16 splits, where a load and its add in turn would be one a split.
    for (int t0 = 0; t0 < splits; t0 += 16) {
        float part[16][HD / 32];
#pragma unroll
        for (int u = 0; u < 16; ++u)
            if (t0 + u < splits)
                load_floats_l2<HD / 32>(part_o + (row * splits + t0 + u) * HD + lane * (HD / 32), part[u]);
#pragma unroll
        for (int u = 0; u < 16; ++u) {
            const int t = t0 + u;
            const float f0 = __shfl_sync(0xffffffffu, f[0], t % 32), f1 = __shfl_sync(0xffffffffu, f[1], t % 32);
            const float ft = t < 32 ? f0 : f1;
            if (t < splits)
#pragma unroll
                for (int i = 0; i < HD / 32; ++i) o[i] += part[u][i] * ft;
        }
    }
#pragma unroll
    for (int i = 0; i < HD / 32; ++i) out[row * HD + lane * (HD / 32) + i] = __float2bfloat16_rn(o[i] / L);
}
