// Lesson 21 of the course (flash attention), rung 3: the online softmax, one block per row, row kept in registers.
//
// Before: rung 2, one warp per row, read every element twice (statistics, then normalize).
// Here:   a block of 256 threads owns a row. Each thread loads its share as float4 (16-byte loads)
//         and KEEPS up to kCache of them in registers (8 float4: rows up to 8192 entries), so the
//         normalize pass reads registers, not memory: 1 read + 1 write per element, what a copy
//         moves. The statistics are the online (m, l) of rung 2 per float4, merged across the
//         warp by shuffles and across the 8 warps through shared memory. Longer rows re-read only
//         the part past the cache.
// Lacks:  nothing for a softmax; but the standard attention around it writes and reads the whole
//         heads x N x N score matrix (S in fp32, P in bf16), which rungs 5-7 never materialize.
// Next:   rung 4: the standard attention, cuBLAS + this softmax + cuBLAS (kernels/4_standard.cuh).
// Run:    ./build/bin/flash_attention --rung=3
#pragma once
#include "attention.cuh"
#include "common/check.h"

namespace rung3 {

constexpr int kThreads = 256, kWarps = kThreads / 32;
constexpr int kCache = 8;  // float4 per thread kept in registers: 8 * 4 * 256 = 8192 entries

// Entries j..j+3 of a row, -inf past `valid`; one 16-byte load where the row allows it.
__device__ __forceinline__ float4 load4(const float* s, int j, int valid, bool vec) {
    if (vec && j + 3 < valid) return *reinterpret_cast<const float4*>(s + j);
    return make_float4(j < valid ? s[j] : -INFINITY, j + 1 < valid ? s[j + 1] : -INFINITY,
                       j + 2 < valid ? s[j + 2] : -INFINITY, j + 3 < valid ? s[j + 3] : -INFINITY);
}
// The online update with four entries at once (a float4 of -inf changes nothing).
__device__ __forceinline__ void update(float& m, float& l, float4 v) {
    const float m_new = fmaxf(m, fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)));
    if (m_new == -INFINITY) return;
    l = l * exp2f((m - m_new) * kLog2e) + exp2f((v.x - m_new) * kLog2e) + exp2f((v.y - m_new) * kLog2e) +
        exp2f((v.z - m_new) * kLog2e) + exp2f((v.w - m_new) * kLog2e);
    m = m_new;
}
__device__ __forceinline__ void store4(bf16* p, int j, int cols, bool vec, float4 v, float m, float inv) {
    const float y[4] = {exp2f((v.x - m) * kLog2e) * inv, exp2f((v.y - m) * kLog2e) * inv,
                        exp2f((v.z - m) * kLog2e) * inv, exp2f((v.w - m) * kLog2e) * inv};
    if (vec && j + 3 < cols) {  // one 8-byte store of four bf16
        uint2 w = make_uint2(pack_bf16(y[0], y[1]), pack_bf16(y[2], y[3]));
        *reinterpret_cast<uint2*>(p + j) = w;
    } else {
        for (int e = 0; e < 4 && j + e < cols; ++e) p[j + e] = __float2bfloat16(y[e]);
    }
}

__global__ void __launch_bounds__(kThreads) softmaxBlock(Softmax a) {
    __shared__ float sm_m[kWarps], sm_l[kWarps];
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const int64_t row = blockIdx.x;
    const float* s = a.S + row * a.cols;
    bf16* p = a.P + row * a.cols;
    const int valid = a.causal ? int(row % a.cols) + 1 : a.cols;
    const bool vec = a.cols % 4 == 0;  // rows start 16-byte aligned: float4 loads allowed

    float m = -INFINITY, l = 0.f;
    float4 cache[kCache];
    // EXERCISE 1 BEGIN: pass 1: fold every valid entry of the row into (m, l), keeping the first 8192 in cache[]
    // HINT: thread tid takes the float4s at 4 * (tid + kThreads * i): cache[i] = load4(...) for i < kCache, then update()
    // HINT: rows can be longer than kCache * 4 * kThreads = 8192 entries: the rest is folded in straight from memory
#pragma unroll
    for (int i = 0; i < kCache; ++i) {  // the first 8192 entries: read once, kept in registers
        cache[i] = load4(s, 4 * (tid + kThreads * i), valid, vec);
        update(m, l, cache[i]);
    }
    for (int j = 4 * (tid + kThreads * kCache); j < valid; j += 4 * kThreads) update(m, l, load4(s, j, valid, vec));
    // EXERCISE 1 END

    // Merge the 256 (m, l) pairs: within each warp by shuffles, then the 8 warps through shared memory.
    float m_all = warp_max(m);
    l = warp_sum(m == -INFINITY ? 0.f : l * exp2f((m - m_all) * kLog2e));
    if (lane == 0) {
        sm_m[warp] = m_all;
        sm_l[warp] = l;
    }
    __syncthreads();
    m_all = sm_m[0];
    for (int w = 1; w < kWarps; ++w) m_all = fmaxf(m_all, sm_m[w]);
    float l_all = 0.f;
    for (int w = 0; w < kWarps; ++w) l_all += sm_m[w] == -INFINITY ? 0.f : sm_l[w] * exp2f((sm_m[w] - m_all) * kLog2e);
    const float inv = 1.f / l_all;

#pragma unroll
    for (int i = 0; i < kCache; ++i) {  // normalize from registers (masked entries: exp2f(-inf) = 0)
        const int j = 4 * (tid + kThreads * i);
        if (j < a.cols) store4(p, j, a.cols, vec, cache[i], m_all, inv);
    }
    for (int j = 4 * (tid + kThreads * kCache); j < a.cols; j += 4 * kThreads)
        store4(p, j, a.cols, vec, load4(s, j, valid, vec), m_all, inv);
}

inline void launch(const Softmax& a) {
    softmaxBlock<<<unsigned(a.rows), kThreads>>>(a);
    CUDA_CHECK_LAUNCH();
}

}  // namespace rung3
