// Lesson 24 of the course (the transformer decoder): the paged KV cache, and the rotary position
// embedding applied on the way in. The cache is a pool of fixed-size blocks, each holding `page`
// positions of K and of V for every KV head of one layer; sequence b's position p lives in block
// table[b][p / page] at offset p % page. A sequence grows by taking one more block from the pool,
// never by moving what it holds (README.md, "The paged KV cache").
// Run: ./build/bin/transformer_decoder   (README.md is the handout)
#pragma once
#include <cstdint>

#include <cuda_bf16.h>

#include "../problem.cuh"
#include "elementwise.cuh"

// One layer's view of the pool: block `blk` holds K then V, each [kv_heads][page][hd] bf16.
struct PagedKv {
    bf16* pool;        // this layer's blocks
    const int* table;  // [batch][max_blocks] block numbers
    int max_blocks, page, kv_heads, hd;
    __device__ __forceinline__ bf16* at(int b, int kv, int head, int pos) const {
        const size_t blk = size_t(table[b * max_blocks + pos / page]);
        return pool + ((blk * 2 + kv) * kv_heads + head) * size_t(page) * hd + size_t(pos % page) * hd;
    }
};

// The rotation of pair (i, i + hd/2) at position pos: angle pos * base^(-2i/hd). sincosf reduces
// large angles exactly (no --use_fast_math).
__device__ __forceinline__ void rope_angle(int pos, int i, int hd, float& s, float& c) {
    const float inv_freq = exp2f(-float(2 * i) / float(hd) * float(log2(kRopeBase)));
    sincosf(float(pos) * inv_freq, &s, &c);
}

// Prefill by lesson 21's rung 6 (prefill_attention.cuh): Q, K, V again, head-major
// ([batch x heads][seq][hd]), K and V repeated for every query head of their group, and rung 6's output.
struct HeadMajor {
    bf16 *q = nullptr, *k = nullptr, *v = nullptr, *o = nullptr;  // q null: not written (decode, portable prefill)
    int group = 1;
};

// Row r of the fused Q|K|V projection is sequence b = r / seq_rows at position start[b] + r % seq_rows
// (prefill: start 0, every position of the prompt; decode: one row, at the sequence's length).
// Q and K are rotated by that position (pairs i and i + hd/2, the Llama "rotate half" form), Q goes
// to q (bf16, [rows][heads][hd]), K and V into the cache; with hm.q, each also head-major. One block per row.
__global__ void ropeToCache(Parts qkv, const int* start, int64_t seq_rows, bf16* q, PagedKv kv, int heads,
                            HeadMajor hm) {
    const int64_t r = blockIdx.x;
    const int b = int(r / seq_rows), pos = start[b] + int(r % seq_rows);
    const int half = kv.hd / 2, slots = heads + 2 * kv.kv_heads;
    for (int idx = threadIdx.x; idx < slots * half; idx += blockDim.x) {
        const int slot = idx / half, i = idx % half;
        const int64_t col = int64_t(slot) * kv.hd + i;  // Q heads, then K heads, then V heads
        const float x0 = qkv.at(r, col), x1 = qkv.at(r, col + half);
        const int64_t t = r % seq_rows;
        // Where head-major copies go: query head h's row t; a KV head's, once per query head of its group.
        const auto head_major = [&](bf16* base, int h, bf16 y0, bf16 y1) {
            bf16* p = base + ((size_t(b) * heads + h) * seq_rows + t) * kv.hd;
            p[i] = y0;
            p[i + half] = y1;
        };
        if (slot >= heads + kv.kv_heads) {  // V: copied as it is
            const int g = slot - heads - kv.kv_heads;
            bf16* v = kv.at(b, 1, g, pos);
            v[i] = __float2bfloat16_rn(x0);
            v[i + half] = __float2bfloat16_rn(x1);
            if (hm.q)
                for (int h = g * hm.group; h < (g + 1) * hm.group; ++h) head_major(hm.v, h, v[i], v[i + half]);
            continue;
        }
        float s, c;
        rope_angle(pos, i, kv.hd, s, c);
        const bf16 y0 = __float2bfloat16_rn(x0 * c - x1 * s), y1 = __float2bfloat16_rn(x0 * s + x1 * c);
        bf16* dst = slot < heads ? q + (size_t(r) * heads + slot) * kv.hd : kv.at(b, 0, slot - heads, pos);
        dst[i] = y0;
        dst[i + half] = y1;
        if (!hm.q) continue;
        if (slot < heads) head_major(hm.q, slot, y0, y1);
        else
            for (int h = (slot - heads) * hm.group; h < (slot - heads + 1) * hm.group; ++h) head_major(hm.k, h, y0, y1);
    }
}

// Decode's Q|K|V GEMV epilogue (kernels/gemv.cuh): ropeToCache's work on the finished row, done by
// the GEMV's last block instead of a kernel of its own (a tile of 256 columns holds whole heads).
struct RopeToCache {
    static constexpr bool kSquares = false;
    bf16* q;  // [batch][heads][hd]
    PagedKv kv;
    const int* len;  // the position of each sequence's new token
    int heads;
    __device__ __forceinline__ float operator()(int64_t b, int64_t c, int t, const float* row) const {
        const int hd = kv.hd, half = hd / 2, slot = int(c / hd), i = int(c % hd), pos = len[b];
        if (slot >= heads + kv.kv_heads) {  // V: as it is
            kv.at(int(b), 1, slot - heads - kv.kv_heads, pos)[i] = __float2bfloat16_rn(row[t]);
            return 0.0f;
        }
        float s, co;
        rope_angle(pos, i % half, hd, s, co);
        const float x0 = i < half ? row[t] : row[t - half], x1 = i < half ? row[t + half] : row[t];
        const float y = i < half ? x0 * co - x1 * s : x0 * s + x1 * co;
        bf16* dst = slot < heads ? q + (size_t(b) * heads + slot) * hd : kv.at(int(b), 0, slot - heads, pos);
        dst[i] = __float2bfloat16_rn(y);
        return 0.0f;
    }
};
