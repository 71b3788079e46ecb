// Lesson 24 of the course (the transformer decoder): prefill's causal attention by lesson 21's
// rung 6 (FlashAttention-2 on mma.sync, cc 8.0 and up) where it runs: head dimension 64 or 128 and
// the shared memory of its K/V ring. Its tensors are [heads][N][d], one K/V head per query head,
// so ropeToCache also writes Q, K and V head-major, K and V once for every query head of their
// group: grouped-query attention by copying, which costs group x the K/V bytes, but only in
// prefill, where K and V are a few MB beside the GEMMs' weights. Decode maps the heads instead
// (kernels/attention.cuh), since there the KV bytes are the time. Elsewhere: causalAttention.
// Run: ./build/bin/transformer_decoder   (README.md is the handout)
#pragma once
#include <cstdint>

#include "21_flash_attention/kernels/6_fused_mma.cuh"
#include "common/gpu_class.h"
#include "common/needs.h"
#include "kernels/paged_cache.cuh"

// What rung 6 needs here: bf16 mma.sync and cp.async (an sm_80 image), a head dimension it has
// tiles for, and its ring's shared memory at the depth this GPU fits.
inline lesson::Needs fused_attention_needs(int64_t hd) {
    lesson::Needs n;
    n.cc = 80;
    n.cc_why = "bf16 mma.sync, cp.async";
    n.image = 800;
    if (hd != 64 && hd != 128) n.shape = "head dimension " + std::to_string(hd) + " (it has tiles for 64 and 128)";
    else n.smem = size_t(rung6::smem_bytes(int(hd), rung6::stages_that_fit(int(hd), lesson::gpu_limits().smem_optin)));
    return n;
}

// O [batch x heads][seq][hd] (rung 6's layout) -> attn [batch x seq][heads x hd] (the o proj's rows).
__global__ void headsToRows(const bf16* o, bf16* attn, int64_t seq, int heads, int hd, size_t n) {
    for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
        const size_t c = i % hd, t = (i / hd) % seq, bh = i / (size_t(hd) * seq);
        const size_t b = bh / heads, h = bh % heads;
        attn[((b * seq + t) * heads + h) * hd + c] = o[i];
    }
}

inline void fused_attention(const HeadMajor& hm, int64_t batch, int64_t seq, int heads, int hd, bf16* attn,
                            cudaStream_t s) {
    Attention a{batch * heads, int(seq), hd, hm.q, hm.k, hm.v, hm.o, true, 1.0f / std::sqrt(float(hd))};
    rung6::launch(a, rung6::stages_that_fit(hd, lesson::gpu_limits().smem_optin));
    const size_t n = size_t(batch * heads * seq) * hd;
    headsToRows<<<1024, 256, 0, s>>>(hm.o, attn, seq, heads, hd, n);
    CUDA_CHECK_LAUNCH();
}
