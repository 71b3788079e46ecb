// Lesson 24 of the course (the transformer decoder): causal grouped-query attention over the paged
// KV cache. A warp walks keys through the block table 32 at a time with lesson 21's online
// softmax, for one query row or for several that share a KV head (attend, below). Query head h
// reads KV head h / (heads / kv_heads): the cache holds each KV head once, as grouped-query
// attention intends.
//   causalAttention   prefill, the portable path: one warp per (row, head), keys 0..pos.
//   decodeSplit       decode: one block per (sequence, KV head, split of the keys), its warps
//                     taking turns over the split's chunks, each warp scoring every query head of
//                     the group, so each K/V row is loaded once; each split leaves (max, sum,
//                     output), and the last split to finish merges them (lesson 21's
//                     kernels/7_decode_split.cuh, one kernel).
// Run: ./build/bin/transformer_decoder   (README.md is the handout)
#pragma once
#include <cstdint>

#include <cuda_bf16.h>

#include "paged_cache.cuh"
#include "pdl.cuh"

constexpr int kAttnWarps = 8;    // causalAttention: warps per block
constexpr int kDecodeWarps = 4;  // decodeSplit: warps per block, taking turns over the split's chunks of keys
constexpr int kDecodeHeads = 4;  // decodeSplit: query heads a block scores; a larger group takes more blocks
static_assert(kDecodeHeads <= kDecodeWarps, "decodeSplit merges one query head per warp");
// decodeSplit's blocks along y for each KV head: its group's query heads, kDecodeHeads at a time.
__host__ __device__ constexpr int decode_slices(int group) { return (group + kDecodeHeads - 1) / kDecodeHeads; }

// The running state of one query row over the keys seen so far: max m of the scores (the same in
// every lane), their sum l (inside attend each lane's share, the warp's total when it returns), and
// this lane's hd / 32 dimensions of the unnormalized output.
template <int HD>
struct Partial {
    float m = -INFINITY, l = 0.0f, o[HD / 32] = {};
};

// A query's scale, log2(e) / sqrt(hd): scaled queries let exp2 give the softmax's exponentials.
template <int HD>
__device__ __forceinline__ float q_scale() {
    return 1.4426950408889634f * rsqrtf(float(HD));
}

// This lane's hd / 32 elements of the query, times q_scale, into the warp's row of shared memory
// (every lane then reads all of it).
template <int HD>
__device__ __forceinline__ void load_q(const bf16* q, float* sq) {
    const float c = q_scale<HD>();
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int i = 0; i < HD / 32; ++i) sq[lane * (HD / 32) + i] = __bfloat162float(q[lane * (HD / 32) + i]) * c;
    __syncwarp();
}

// A lane's hd / 32 consecutive floats of a row, as one load (4, 8 or 16 bytes), past this SM's L1.
template <int W>
__device__ __forceinline__ void load_floats_l2(const float* p, float* out) {
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

// The two bf16 halves of a 32-bit word as floats, exactly: a bf16 is the top half of a float.
__device__ __forceinline__ float bf16_lo(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf16_hi(uint32_t w) { return __uint_as_float(w & 0xffff0000u); }

// A lane's W = hd / 32 consecutive elements of a V row as raw bits, one load (2, 4 or 8 bytes):
// element i is the low half of word i / 2 for even i, the high half for odd.
template <int W>
__device__ __forceinline__ void load_bits(const bf16* p, uint32_t* w) {
    if constexpr (W == 1) {
        w[0] = *reinterpret_cast<const unsigned short*>(p);
    } else if constexpr (W == 2) {
        w[0] = *reinterpret_cast<const uint32_t*>(p);
    } else {
        const uint2 u = *reinterpret_cast<const uint2*>(p);
        w[0] = u.x, w[1] = u.y;
    }
}

// Keys k0..k1-1 of sequence b, KV head g, for G query rows at once (the rows sq[h * HD ..], h < G,
// heads that share KV head g), folded into st[h]: lesson 21's online softmax, a chunk of 32 keys a
// step, the chunks starting at k0, k0 + step, ... (a block's warps take turns). Lane j loads key
// c0 + j's K row whole, in 16-byte loads, and its hd / 32 elements of all 32 V rows, each V row one
// coalesced load for the warp; every load of the chunk is issued before the first is used, so a
// chunk is one trip to memory, and it serves all G rows. The block table is read once a lane a
// chunk: lane j finds key j's V row and the others take it from lane j by a shuffle. The warp
// agrees on each row's maximum with shuffles, passes the weights p through shared memory (sp, this
// warp's [32][G]), and each lane adds its elements of the 32 V rows. A lane keeps its own share of
// each sum l until the end, when the warp adds them up.
template <int HD, int G>
__device__ void attend(const float* sq, float* sp, const PagedKv& kv, int b, int g, int k0, int k1, int step,
                       Partial<HD> (&st)[G]) {
    constexpr int W = HD / 32, VW = (W + 1) / 2;  // this lane's elements of a V row, and its 32-bit words
    const int lane = threadIdx.x % 32;
    for (int c0 = k0; c0 < k1; c0 += step) {
        // Past k1 a lane reads the chunk's last key (a real one), scored -inf and weighted 0.
        const int last = min(32, k1 - c0) - 1, pos = c0 + min(lane, last);
        const uint4* k = reinterpret_cast<const uint4*>(kv.at(b, 0, g, pos));
        const int vrow = int((kv.at(b, 1, g, pos) - kv.pool) / HD);  // key pos's V row, as a row of the pool
        uint4 kr[HD / 8];
#pragma unroll
        for (int c = 0; c < HD / 8; ++c) kr[c] = k[c];
        uint32_t vr[32][VW];
#pragma unroll
        for (int j = 0; j < 32; ++j)
            load_bits<W>(kv.pool + size_t(__shfl_sync(0xffffffffu, vrow, j)) * HD + lane * W, vr[j]);
        float s[G] = {};
#pragma unroll
        for (int c = 0; c < HD / 8; ++c) {
            const uint32_t w[4] = {kr[c].x, kr[c].y, kr[c].z, kr[c].w};
#pragma unroll
            for (int e = 0; e < 4; ++e)
#pragma unroll
                for (int h = 0; h < G; ++h) {
                    s[h] = fmaf(sq[h * HD + 8 * c + 2 * e], bf16_lo(w[e]), s[h]);
                    s[h] = fmaf(sq[h * HD + 8 * c + 2 * e + 1], bf16_hi(w[e]), s[h]);
                }
        }
#pragma unroll
        for (int h = 0; h < G; ++h) {
            if (lane > last) s[h] = -INFINITY;
            float mc = s[h];
#pragma unroll
            for (int off = 16; off > 0; off >>= 1) mc = fmaxf(mc, __shfl_xor_sync(0xffffffffu, mc, off));
            const float m_new = fmaxf(st[h].m, mc);                               // finite: the chunk holds a key
            const float p = exp2f(s[h] - m_new), scale = exp2f(st[h].m - m_new);  // p = 0 past k1; scale 0 at first
            st[h].l = st[h].l * scale + p;
#pragma unroll
            for (int i = 0; i < W; ++i) st[h].o[i] *= scale;
            st[h].m = m_new;
            sp[lane * G + h] = p;
        }
        __syncwarp();
#pragma unroll
        for (int j = 0; j < 32; ++j) {
            float v[W];
#pragma unroll
            for (int i = 0; i < W; ++i) v[i] = i % 2 ? bf16_hi(vr[j][i / 2]) : bf16_lo(vr[j][i / 2]);
#pragma unroll
            for (int h = 0; h < G; ++h) {
                const float pj = sp[j * G + h];
#pragma unroll
                for (int i = 0; i < W; ++i) st[h].o[i] += pj * v[i];
            }
        }
        __syncwarp();  // every lane has read sp before the next chunk writes it
    }
#pragma unroll
    for (int h = 0; h < G; ++h)
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) st[h].l += __shfl_xor_sync(0xffffffffu, st[h].l, off);
}

// out[r][h * hd .. ] = softmax over keys 0..pos of (q . k / sqrt(hd)) times V, pos = start[b] + t.
template <int HD>
__global__ void __launch_bounds__(kAttnWarps * 32)
    causalAttention(const bf16* q, PagedKv kv, const int* start, int64_t seq_rows, int64_t rows, int heads, bf16* out) {
    __shared__ __align__(16) float sq[kAttnWarps][HD];
    __shared__ float sp[kAttnWarps][32];
    const int64_t w = int64_t(blockIdx.x) * kAttnWarps + threadIdx.x / 32;
    if (w >= rows * heads) return;
    const int64_t r = w / heads;
    const int h = int(w % heads), b = int(r / seq_rows), pos = start[b] + int(r % seq_rows);
    float* qs = sq[threadIdx.x / 32];
    load_q<HD>(q + size_t(w) * HD, qs);
    Partial<HD> st[1];
    attend<HD, 1>(qs, sp[threadIdx.x / 32], kv, b, h / (heads / kv.kv_heads), 0, pos + 1, 32, st);
    bf16* o = out + size_t(w) * HD + (threadIdx.x % 32) * (HD / 32);
#pragma unroll
    for (int i = 0; i < HD / 32; ++i) o[i] = __float2bfloat16_rn(st[0].o[i] / st[0].l);
}

// Decode: sequence b has len[b] + 1 keys (this step's key is already in the cache). Split s of
// `gridDim.x` takes an equal share of them, its warps taking turns over its chunks of 32; block
// row y is KV head y / decode_slices(group) and up to kDecodeHeads of its query heads. Each warp
// scores all of the block's query heads against its chunks, so each K/V row is loaded once, by
// one warp; the warps' states are then merged in shared memory. A split with no keys leaves
// m = -inf, l = 0, o = 0. Partial results: m and l [batch][heads][splits], o
// [batch][heads][splits][hd], fp32. The last block of a block row to finish (done[b][y], a counter
// it sets back to zero) merges the splits of its heads into out [batch][heads][hd]: o = sum_s o_s
// 2^(m_s - M) / sum_s l_s 2^(m_s - M), M = max m_s (lesson 21's combine, without a kernel of its own).
template <int HD>
__global__ void __launch_bounds__(kDecodeWarps * 32)
    decodeSplit(const bf16* q, PagedKv kv, const int* len, int heads, float* part_ml, float* part_o, unsigned* done,
                bf16* out) {
    constexpr int G = kDecodeHeads, W = HD / 32;
    __shared__ __align__(16) float sq[G][HD];                 // the block's query rows
    __shared__ __align__(16) float sp[kDecodeWarps][32 * G];  // each warp's weights of its chunk's keys, every row
    __shared__ float sm[kDecodeWarps][G][HD + 2];             // each warp's (o, m, l) of every row
    __shared__ bool last;
    const int s = blockIdx.x, splits = gridDim.x, b = blockIdx.z, group = heads / kv.kv_heads;
    const int g = blockIdx.y / decode_slices(group), h0 = g * group + blockIdx.y % decode_slices(group) * G;
    const int rows = min(G, (g + 1) * group - h0);  // this block's query heads h0.., fewer in a group's last slice
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
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
    // The rows' queries, times q_scale; a row past `rows` is zero, scored and never written.
    const float qc = q_scale<HD>();
    for (int i = threadIdx.x; i < G * HD; i += blockDim.x)
        sq[i / HD][i % HD] = i / HD < rows ? __bfloat162float(q[(size_t(b) * heads + h0) * HD + i]) * qc : 0.0f;
    __syncthreads();
    Partial<HD> st[G];
    attend<HD, G>(&sq[0][0], sp[warp], kv, b, g, k0 + 32 * warp, k1, 32 * kDecodeWarps, st);
#pragma unroll
    for (int r = 0; r < G; ++r) {
#pragma unroll
        for (int i = 0; i < W; ++i) sm[warp][r][lane * W + i] = st[r].o[i];
        if (lane == 0) sm[warp][r][HD] = st[r].m, sm[warp][r][HD + 1] = st[r].l;
    }
    __syncthreads();
    // Warp r merges row r over the block's warps, in warp order; a warp that had no keys adds 0.
    const size_t row = size_t(b) * heads + h0 + warp, idx = row * splits + s;
    if (warp < rows) {
        float M = -INFINITY, L = 0.0f, o[W] = {};
#pragma unroll
        for (int u = 0; u < kDecodeWarps; ++u) M = fmaxf(M, sm[u][warp][HD]);
#pragma unroll
        for (int u = 0; u < kDecodeWarps; ++u) {
            const float f = M == -INFINITY ? 0.0f : exp2f(sm[u][warp][HD] - M);  // M = -inf: the split has no keys
            L += sm[u][warp][HD + 1] * f;
#pragma unroll
            for (int i = 0; i < W; ++i) o[i] += sm[u][warp][lane * W + i] * f;
        }
        if (lane == 0) {
            part_ml[2 * idx] = M;
            part_ml[2 * idx + 1] = L;
        }
#pragma unroll
        for (int i = 0; i < W; ++i) part_o[idx * HD + lane * W + i] = o[i];
    }
    __threadfence();  // this split's partials are visible before its count is
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned* count = done + size_t(b) * gridDim.y + blockIdx.y;
        last = atomicAdd(count, 1u) == unsigned(splits - 1);
        if (last) *count = 0;
    }
    __syncthreads();
    if (!last || warp >= rows) return;
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
