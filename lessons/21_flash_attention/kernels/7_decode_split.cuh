// Lesson 21 of the course (flash attention), rung 7: decode attention, split over the keys (split-K).
//
// Before: rung 6 computed attention for N queries at once: every K and V tile loaded into shared
//         memory serves 128 queries, so the work is bound by the tensor cores.
// Here:   decode, what a language model does for each generated token: ONE query row per head
//         against the N keys and values cached so far. Each key and value is used once, 2 flops
//         per byte: the kernel is bound by memory, and the goal is to stream K and V at the rate
//         of a copy. With few heads (a small batch) one block per head would leave most of the
//         GPU idle, so the keys are split into pieces (split-K, FlashDecoding): block (piece,
//         head) runs the online softmax over its piece and writes a partial result (m, l and the
//         unnormalized o); a second small kernel merges the pieces of each head with the same
//         rescaling: o = sum_s exp(m_s - M) o_s / sum_s exp(m_s - M) l_s, M = max_s m_s.
//         In a block, a group of D / 8 lanes owns one key at a time (one 16-byte chunk of K and of
//         V per lane, 4 keys in flight per lane), so the loads are wide and coalesced.
// Lacks:  nothing much: the K/V bytes are the cost. (Real decoders also read a paged cache and
//         several query heads per K/V head, grouped-query attention; not in this lesson.)
// Next:   rung 8, back to N queries: rung 6 on Hopper's wgmma, fed by TMA.
// Run:    ./build/bin/flash_attention --rung=7
#pragma once
#include "attention.cuh"
#include "common/check.h"

namespace rung7 {

constexpr int kThreads = 128, kWarps = kThreads / 32;
constexpr int kUnroll = 4;  // keys in flight per lane group

// Merges the partial result (m2, l2, o2) into (m, l, o); m in log2 units, -inf for "nothing yet".
__device__ __forceinline__ void merge(float& m, float& l, float (&o)[8], float m2, float l2, const float (&o2)[8]) {
    const float mx = fmaxf(m, m2);
    const float a = m == -INFINITY ? 0.f : exp2f(m - mx), b = m2 == -INFINITY ? 0.f : exp2f(m2 - mx);
    l = l * a + l2 * b;
#pragma unroll
    for (int e = 0; e < 8; ++e) o[e] = o[e] * a + o2[e] * b;
    m = mx;
}

template <int D>
__global__ void __launch_bounds__(kThreads) decodeSplit(Decode a) {
    constexpr int G = D / 8;      // lanes per key: each holds one 16-byte chunk (8 bf16)
    constexpr int kPer = 32 / G;  // keys per warp per step
    __shared__ float sm_m[kWarps], sm_l[kWarps], sm_o[kWarps][D];
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, grp = lane / G, c = lane % G;
    const int64_t head = blockIdx.y;
    const int split = blockIdx.x;
    const int k_begin = split * a.keys_per_split, k_end = min(a.N, k_begin + a.keys_per_split);
    const bf16* K = a.K + size_t(head) * a.N * D + c * 8;
    const bf16* V = a.V + size_t(head) * a.N * D + c * 8;

    float q[8];  // this lane's 8 entries of q, pre-scaled to log2 units
    {
        const uint4 raw = *reinterpret_cast<const uint4*>(a.q + size_t(head) * D + c * 8);
        const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const float2 f = __bfloat1622float2(h[e]);
            q[2 * e] = f.x * a.scale * kLog2e;
            q[2 * e + 1] = f.y * a.scale * kLog2e;
        }
    }
    float m = -INFINITY, l = 0.f, o[8] = {};
    constexpr int kStep = kWarps * kPer;                                       // keys the block covers per step
    for (int k0 = k_begin + warp * kPer; k0 < k_end; k0 += kStep * kUnroll) {  // warp-uniform bound
        uint4 kc[kUnroll], vc[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {  // all loads first: kUnroll keys in flight
            const int key = k0 + grp + u * kStep;
            if (key < k_end) {
                kc[u] = *reinterpret_cast<const uint4*>(K + size_t(key) * D);
                vc[u] = *reinterpret_cast<const uint4*>(V + size_t(key) * D);
            }
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
            const int key = k0 + grp + u * kStep;
            float s = 0.f;
            if (key < k_end) {
                const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&kc[u]);
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const float2 f = __bfloat1622float2(h[e]);
                    s = fmaf(q[2 * e], f.x, fmaf(q[2 * e + 1], f.y, s));
                }
            }
#pragma unroll
            for (int off = G / 2; off > 0; off /= 2) s += __shfl_xor_sync(0xffffffffu, s, off);  // within the group
            if (key < k_end) {  // the online softmax, one key at a time
                const float m_new = fmaxf(m, s);
                const float alpha = exp2f(m - m_new), p = exp2f(s - m_new);
                l = l * alpha + p;
                const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&vc[u]);
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const float2 f = __bfloat1622float2(h[e]);
                    o[2 * e] = fmaf(p, f.x, o[2 * e] * alpha);
                    o[2 * e + 1] = fmaf(p, f.y, o[2 * e + 1] * alpha);
                }
                m = m_new;
            }
        }
    }
    // Merge the kPer groups of the warp (lanes with the same chunk c), then the warps.
#pragma unroll
    for (int off = G; off < 32; off *= 2) {
        float o2[8];
#pragma unroll
        for (int e = 0; e < 8; ++e) o2[e] = __shfl_xor_sync(0xffffffffu, o[e], off);
        const float m2 = __shfl_xor_sync(0xffffffffu, m, off), l2 = __shfl_xor_sync(0xffffffffu, l, off);
        merge(m, l, o, m2, l2, o2);
    }
    if (grp == 0) {
        if (c == 0) {
            sm_m[warp] = m;
            sm_l[warp] = l;
        }
#pragma unroll
        for (int e = 0; e < 8; ++e) sm_o[warp][c * 8 + e] = o[e];
    }
    __syncthreads();
    if (warp == 0 && grp == 0) {
        for (int w = 1; w < kWarps; ++w) {
            float o2[8];
#pragma unroll
            for (int e = 0; e < 8; ++e) o2[e] = sm_o[w][c * 8 + e];
            merge(m, l, o, sm_m[w], sm_l[w], o2);
        }
        float* part = a.partial + (size_t(head) * a.splits + split) * (D + 2);  // [o (D), m, l]
#pragma unroll
        for (int e = 0; e < 8; ++e) part[c * 8 + e] = o[e];
        if (c == 0) {
            part[D] = m;
            part[D + 1] = l;
        }
    }
}

// One block per head, one thread per output column: merge the head's `splits` partial results.
template <int D>
__global__ void __launch_bounds__(D) decodeCombine(Decode a) {
    const int64_t head = blockIdx.x;
    const int col = threadIdx.x;
    const float* part = a.partial + size_t(head) * a.splits * (D + 2);
    float mx = -INFINITY;
    for (int s = 0; s < a.splits; ++s) mx = fmaxf(mx, part[s * (D + 2) + D]);
    float l = 0.f, o = 0.f;
    for (int s = 0; s < a.splits; ++s) {
        const float ms = part[s * (D + 2) + D];
        const float w = ms == -INFINITY ? 0.f : exp2f(ms - mx);
        l += w * part[s * (D + 2) + D + 1];
        o += w * part[s * (D + 2) + col];
    }
    a.o[size_t(head) * D + col] = __float2bfloat16(o / l);
}

template <int D>
void launch_d(const Decode& a) {
    decodeSplit<D><<<dim3(unsigned(a.splits), unsigned(a.heads)), kThreads>>>(a);
    CUDA_CHECK_LAUNCH();
    decodeCombine<D><<<unsigned(a.heads), D>>>(a);
    CUDA_CHECK_LAUNCH();
}
inline void launch(const Decode& a) {
    if (a.d == 64) launch_d<64>(a);
    else launch_d<128>(a);
}

}  // namespace rung7
