// Lesson 24 of the course (the transformer decoder): the decode projections, y = x W for a few
// rows x (batch 1-64), W [K][N] bf16 row-major as the prefill GEMM reads it. Each weight is used
// batch times, so the kernel's speed is the rate it streams W from DRAM (lesson 17's roofline,
// left of the ridge): every lane loads 16 bytes (8 columns) of a row of W, a warp 512 contiguous
// bytes, and the grid is split over K as well as N so that enough loads are in flight to cover
// DRAM latency on every SM. Each split writes its own fp32 plane of partial sums; the last block
// of a column tile to finish (a counter per tile) adds the tile's planes in a fixed order and hands
// each finished row to an epilogue (into y, or the Q|K|V projection's RoPE and cache writes):
// one kernel, no atomics on the data, the same bits every run, and the counters left at zero for
// the next launch (or the next replay of the graph). Up to 4 rows of x, each load of W is used by
// every row with fp32 FMAs; from 5 rows on, 16 rows at a time go through tensor cores (lesson 20's
// mma.sync), so that W is streamed once for a batch of up to 16 (planes_mma).
// Run: ./build/bin/transformer_decoder   (README.md is the handout)
#pragma once
#include <algorithm>
#include <cstdint>

#include <cuda_bf16.h>

#include "common/check.h"
#include "common/ptx.cuh"
#include "elementwise.cuh"
#include "pdl.cuh"

constexpr int kGemvWarps = 8, kGemvCols = 32 * 8;  // a block: 8 warps over K, 256 columns

constexpr int kGemvMaxRows = 64;  // the largest batch (problem.cuh)
constexpr int kGemvMmaRows = 16;  // rows of x per pass of W on tensor cores: the MMA's M

// From 5 rows of x on, launch_gemv takes the tensor cores (planes_mma); up to 4, fp32 FMAs.
inline bool gemv_on_tensor_cores(int64_t B) { return B > 4; }

// Where the GEMV's x comes from: rows of bf16 (x[b][k]); the RMSNorm of the fp32 residual stream,
// normalized as it is read (XNormed); or the SwiGLU of the gate/up projection's fp32 output,
// computed as the down projection reads it (silu(gate) * up, rounded to bf16 as the prefill's
// swiglu kernel rounds it): no kernel and no buffer for the normed rows or the MLP's activation.
// prepare() runs once per block before the first read (sh: kGemvMaxRows floats of shared memory).
struct XRows {
    const bf16* x;
    int64_t K;
    __device__ __forceinline__ void prepare(float*, int64_t) {}
    __device__ __forceinline__ float operator()(int64_t b, int64_t k) const {
        return __bfloat162float(x[size_t(b) * K + k]);
    }
};
// Row b of x (K = d floats) times rsqrt(mean of its squares + eps) times the norm's weight w,
// rounded to bf16 as addRmsNorm rounds it. The sum of squares comes in pieces, one per 256-column
// tile of the row (ssq[b][tiles]), left by whatever wrote x last (AddResidual, residualTiles):
// each block adds a row's pieces once, in tile order, into its shared scale.
struct XNormed {
    const float* x;
    const bf16* w;
    const float* ssq;
    int64_t K;
    int tiles;
    const float* scale = nullptr;
    __device__ __forceinline__ void prepare(float* sh, int64_t B) {
        for (int64_t b = threadIdx.x; b < B; b += blockDim.x) {
            float ss = 0.0f;
            for (int t = 0; t < tiles; ++t) ss += ssq[b * tiles + t];
            sh[b] = rsqrtf(ss / float(K) + float(kNormEps));
        }
        scale = sh;
    }
    __device__ __forceinline__ float operator()(int64_t b, int64_t k) const {
        return __bfloat162float(__float2bfloat16_rn(x[size_t(b) * K + k] * scale[b] * __bfloat162float(w[k])));
    }
};
// What the last block does with a finished row of its tile (row[t]: column c = tile * 256 + t of
// sequence b; the whole tile's row is in shared memory, so an epilogue may pair columns of one head):
// store it to y, or (paged_cache.cuh, RopeToCache) rotate it and put it into the cache.
// An epilogue returns the square of what it stored where kSquares is set: the kernel sums them over
// the tile and hands the sum to squares(), the statistics of the next RMSNorm (XNormed).
struct YStore {
    static constexpr bool kSquares = false;
    float* y;
    int64_t N;
    __device__ __forceinline__ float operator()(int64_t b, int64_t c, int t, const float* row) const {
        y[size_t(b) * N + c] = row[t];
        return 0.0f;
    }
};
// The o and down projections: the row is the block's output, added into the residual stream x
// (N = d floats a row), and the tile's sum of squares of the new x goes to ssq[b][tile].
struct AddResidual {
    static constexpr bool kSquares = true;
    float* x;
    float* ssq;
    int64_t N;
    int tiles;
    __device__ __forceinline__ float operator()(int64_t b, int64_t c, int t, const float* row) const {
        const float v = x[size_t(b) * N + c] + row[t];
        x[size_t(b) * N + c] = v;
        return v * v;
    }
    __device__ __forceinline__ void squares(int64_t b, int tile, float s) const { ssq[b * tiles + tile] = s; }
};
struct XSwiglu {
    const float* gate_up;  // [b][2 mlp]: gate in columns 0..mlp-1, up in mlp..2 mlp-1
    int64_t mlp;
    __device__ __forceinline__ void prepare(float*, int64_t) {}
    __device__ __forceinline__ float operator()(int64_t b, int64_t k) const {
        const float g = gate_up[size_t(b) * 2 * mlp + k], u = gate_up[size_t(b) * 2 * mlp + mlp + k];
        return __bfloat162float(__float2bfloat16_rn(g / (1.0f + __expf(-g)) * u));
    }
};

// The block's plane from tensor cores, 16 rows of x at a time: mma_m16n8k16 (common/ptx.cuh),
// D (16 x 8, fp32) += A (16 x 16) B (16 x 8), A = 16 rows of x by 16 values of k (zero past the
// batch and past the block's share of K), B = 16 rows of W by 8 columns. Warp w takes 64 of the
// tile's 256 columns (w % 4) and every other step of 16 rows of the share (w / 4). Lane (g, t) =
// (lane / 4, lane % 4) must hold B's pairs (k 2t, 2t + 1) and (k 2t + 8, 2t + 9) of one column n = g.
// An MMA's n is only a label: lane (g, t) loads, 16 bytes each as the FMA kernel does, columns
// 8g..8g + 7 of the warp's 64 from the four rows its pairs need, and MMA j (j = 0..7) takes column
// 8g + j as its n = g: a byte permute joins the two rows of a pair in one register. The transpose
// B wants stays inside the lane, with no trip through shared memory (ldmatrix .trans) for bytes
// that are used once. A load instruction reads 128 contiguous bytes of each of 4 rows. MMA j's
// outputs, rows g and g + 8 at n = 2t and 2t + 1, are columns 16t + j and 16t + 8 + j: over j, 16
// contiguous columns a lane. Warps 4-7 hand their sums to warps 0-3 (xch, 16 KB of shared memory),
// which add them (in that order, every run) and store the 16 rows' plane.
template <class X>
__device__ __forceinline__ void planes_mma(const X& x, const bf16* W, float* plane, float4* xch, int64_t B, int64_t k0,
                                           int64_t k1, int64_t N) {
#if defined(PTX_SM80)
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int64_t col = int64_t(blockIdx.x) * kGemvCols + (warp % 4) * 64;  // the warp's first column
    // Two values of x, k and k + 1, in one register as A wants them: exact, as every X gives bf16 values.
    auto x2 = [&](int64_t b, int64_t k) {
        const float lo = b < B && k < k1 ? x(b, k) : 0.0f, hi = b < B && k + 1 < k1 ? x(b, k + 1) : 0.0f;
        const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
        return *reinterpret_cast<const uint32_t*>(&v);
    };
    for (int64_t b0 = 0; b0 < B; b0 += kGemvMmaRows) {
        float acc[8][4] = {};
#pragma unroll 2
        for (int64_t k = k0 + 16 * (warp / 4); k < k1; k += 32) {
            uint4 w[4];  // rows k + 2t, k + 2t + 1, k + 2t + 8, k + 2t + 9 at columns 8g..8g + 7
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const int64_t r = k + 2 * t + (i & 1) + 8 * (i >> 1);
                w[i] = col + 8 * g < N && r < k1
                           ? __ldg(reinterpret_cast<const uint4*>(W + size_t(r) * N + col + 8 * g))
                           : make_uint4(0, 0, 0, 0);
            }
            const uint32_t a[4] = {x2(b0 + g, k + 2 * t), x2(b0 + g + 8, k + 2 * t), x2(b0 + g, k + 2 * t + 8),
                                   x2(b0 + g + 8, k + 2 * t + 8)};
            const uint32_t* w32 = reinterpret_cast<const uint32_t*>(w);
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                const uint32_t half = j % 2 ? 0x7632 : 0x5410;  // column j: the high or low halves of word j / 2
                mma_m16n8k16(acc[j], a, __byte_perm(w32[j / 2], w32[4 + j / 2], half),
                             __byte_perm(w32[8 + j / 2], w32[12 + j / 2], half));
            }
        }
        float4* mine = xch + (warp % 4) * 8 * 32 + lane;  // [warp % 4][8 float4][lane]: no bank conflicts
        if (warp >= 4) {
#pragma unroll
            for (int j = 0; j < 8; ++j) mine[j * 32] = make_float4(acc[j][0], acc[j][1], acc[j][2], acc[j][3]);
        }
        __syncthreads();
        if (warp < 4) {
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                const float4 o = mine[j * 32];
                acc[j][0] += o.x, acc[j][1] += o.y, acc[j][2] += o.z, acc[j][3] += o.w;
            }
            // acc[j][e]: row g + 8 (e / 2) of the group, column 16t + 8 (e % 2) + j of the warp's.
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int64_t b = b0 + g + 8 * (e / 2), c = col + 16 * t + 8 * (e % 2);
                if (b >= B || c >= N) continue;
                float4* p = reinterpret_cast<float4*>(plane + size_t(b) * N + c);
                p[0] = make_float4(acc[0][e], acc[1][e], acc[2][e], acc[3][e]);
                p[1] = make_float4(acc[4][e], acc[5][e], acc[6][e], acc[7][e]);
            }
        }
        __syncthreads();  // warps 0-3 have read xch before warps 4-7 write the next group's
    }
#else
    __trap();
#endif
}

// planes[split][b][n] = sum over k in split's share of K of x[b][k] W[k][n], BT rows of x at a
// time (BT = kGemvMmaRows: on tensor cores, planes_mma); then y[b][n] = the sum of the planes, by
// the tile's last block. done[tile]: zero on entry.
// The first pf_rows rows of the block's share of W are sent to L2 before the kernel waits for the
// one before it (pdl.cuh): W depends on nothing, so its stream starts while that kernel finishes.
// At batch 1, five blocks fit an SM (48 registers a thread): the grid's four and one of the next.
template <int BT, class X, class E>
__global__ void __launch_bounds__(kGemvWarps * 32, BT == 1              ? 5
                                                   : BT == kGemvMmaRows ? 2
                                                                        : 1)
    gemvSplitK(X x, const bf16* W, float* planes, E epilogue, unsigned* done, int64_t B, int64_t K, int64_t N,
               int pf_rows) {
    // At BT = kGemvMmaRows: warps 4-7's sums for warps 0-3 (planes_mma), 16 KB; the merge uses a row a warp.
    __shared__ __align__(16) float red[kGemvWarps][BT == kGemvMmaRows ? 2 : BT][kGemvCols];
    __shared__ float row[kGemvCols], scale[kGemvMaxRows], warp_sq[kGemvWarps];
    __shared__ bool last;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int64_t col = int64_t(blockIdx.x) * kGemvCols + lane * 8;
    const int64_t chunk = (K + gridDim.y - 1) / gridDim.y, k0 = blockIdx.y * chunk, k1 = min(K, k0 + chunk);
    // A row of the tile is 512 bytes, four 128-byte lines: thread i takes line i % 4 of row i / 4.
    const int64_t pf = min(int64_t(pf_rows), k1 - k0) * 4, line0 = int64_t(blockIdx.x) * kGemvCols;
    for (int64_t i = threadIdx.x; i < pf; i += blockDim.x)
        if (line0 + (i % 4) * 64 < N) prefetch_l2(W + size_t(k0 + i / 4) * N + line0 + (i % 4) * 64);
    wait_prior();  // x, the planes and the counters belong to the kernel before until it ends
    let_next_start();
    x.prepare(scale, B);
    __syncthreads();
    float* plane = planes + size_t(blockIdx.y) * B * N;
    if constexpr (BT == kGemvMmaRows) {
        planes_mma(x, W, plane, reinterpret_cast<float4*>(&red[0][0][0]), B, k0, k1, N);
    } else {
        for (int64_t b0 = 0; b0 < B; b0 += BT) {
            float acc[BT][8] = {};
            if (col < N) {
#pragma unroll 4
                for (int64_t k = k0 + warp; k < k1; k += kGemvWarps) {
                    const uint4 raw = __ldg(reinterpret_cast<const uint4*>(W + size_t(k) * N + col));
                    const __nv_bfloat162* w2 = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
                    for (int bi = 0; bi < BT; ++bi) {
                        const float xv = b0 + bi < B ? x(b0 + bi, k) : 0.0f;
#pragma unroll
                        for (int j = 0; j < 4; ++j) {
                            const float2 wf = __bfloat1622float2(w2[j]);
                            acc[bi][2 * j] += xv * wf.x;
                            acc[bi][2 * j + 1] += xv * wf.y;
                        }
                    }
                }
            }
#pragma unroll
            for (int bi = 0; bi < BT; ++bi)
#pragma unroll
                for (int j = 0; j < 8; ++j) red[warp][bi][lane * 8 + j] = acc[bi][j];
            __syncthreads();
            const int64_t c = int64_t(blockIdx.x) * kGemvCols + threadIdx.x;
            for (int bi = 0; bi < BT; ++bi) {
                float s = 0.0f;
                for (int w = 0; w < kGemvWarps; ++w) s += red[w][bi][threadIdx.x];
                if (c < N && b0 + bi < B) plane[size_t(b0 + bi) * N + c] = s;
            }
            __syncthreads();
        }
    }
    // The threadfence reduction: this block's plane is visible before its count is, so the block
    // that counts last sees every plane (read from L2: __ldcg, past this SM's L1).
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
        last = atomicAdd(&done[blockIdx.x], 1u) == gridDim.y - 1;
        if (last) done[blockIdx.x] = 0;
    }
    __syncthreads();
    if (!last) return;
    // The planes are summed by the whole block at once, not a column's splits one after another by
    // its thread: warp w adds splits w, w + 8, ..., each lane 8 columns (two 16-byte loads a split,
    // all of a warp's independent), then the warps' sums meet in shared memory in warp order. A
    // serial sum over 32-64 splits would be as many L2 round trips while the whole GPU waits.
    const int64_t c = int64_t(blockIdx.x) * kGemvCols + threadIdx.x;
    for (int64_t b = 0; b < B; ++b) {
        float acc[8] = {};
        if (col < N) {
#pragma unroll 4
            for (unsigned sp = warp; sp < gridDim.y; sp += kGemvWarps) {
                const float4* p = reinterpret_cast<const float4*>(planes + (size_t(sp) * B + b) * N + col);
                const float4 lo = __ldcg(p), hi = __ldcg(p + 1);
                acc[0] += lo.x, acc[1] += lo.y, acc[2] += lo.z, acc[3] += lo.w;
                acc[4] += hi.x, acc[5] += hi.y, acc[6] += hi.z, acc[7] += hi.w;
            }
        }
#pragma unroll
        for (int j = 0; j < 8; ++j) red[warp][0][lane * 8 + j] = acc[j];
        __syncthreads();
        float sum = 0.0f;
        for (int w = 0; w < kGemvWarps; ++w) sum += red[w][0][threadIdx.x];
        row[threadIdx.x] = sum;
        __syncthreads();
        float sq = c < N ? epilogue(b, c, int(threadIdx.x), row) : 0.0f;
        if constexpr (E::kSquares) {
            const float s = block_sum<kGemvWarps * 32>(sq, warp_sq);
            if (threadIdx.x == 0) epilogue.squares(b, int(blockIdx.x), s);
        }
        __syncthreads();
    }
}

// How many splits of K: enough blocks for about `per_sm` of them on every SM, each split at least
// 64 rows of W, and the planes (splits x B x N floats) at most an eighth of W's bytes.
inline int gemv_splits(int64_t B, int64_t K, int64_t N, int sms, int per_sm = 4) {
    const int64_t tiles = (N + kGemvCols - 1) / kGemvCols;
    int64_t s = (int64_t(sms) * per_sm + tiles - 1) / tiles;
    s = std::min(s, K / 64);
    s = std::min(s, K / (16 * B));
    return int(std::max<int64_t>(s, 1));
}

// What the kernels of one launch send to L2 ahead, at most (overlap: pdl.cuh): enough to keep DRAM
// busy through the previous kernel's tail and this one's start, a third of an H100's L2, so that
// the lines are still there when the blocks read them. The Q|K|V and o projections fit whole.
constexpr int64_t kPrefetchBytes = 16 << 20;

// done: ceil(N / 256) counters, zero (each launch leaves them so).
template <class X, class E>
void launch_gemv(X x, const bf16* W, float* planes, E epilogue, unsigned* done, int64_t B, int64_t K, int64_t N,
                 int splits, bool overlap, cudaStream_t s) {
    const dim3 grid(unsigned((N + kGemvCols - 1) / kGemvCols), unsigned(splits));
    const int pf = overlap ? int(kPrefetchBytes / (int64_t(grid.x) * grid.y * kGemvCols * 2)) : 0;
    const unsigned t = kGemvWarps * 32;
    if (B == 1) launch(overlap, gemvSplitK<1, X, E>, grid, t, s, x, W, planes, epilogue, done, B, K, N, pf);
    else if (B == 2) launch(overlap, gemvSplitK<2, X, E>, grid, t, s, x, W, planes, epilogue, done, B, K, N, pf);
    else if (!gemv_on_tensor_cores(B))
        launch(overlap, gemvSplitK<4, X, E>, grid, t, s, x, W, planes, epilogue, done, B, K, N, pf);
    else launch(overlap, gemvSplitK<kGemvMmaRows, X, E>, grid, t, s, x, W, planes, epilogue, done, B, K, N, pf);
}
