// Lesson 21 of the course (flash attention), rung 6: FlashAttention-2 on tensor cores (mma.sync, ldmatrix, cp.async).
//
// Before: rung 5 ran the online softmax with scalar FFMAs from shared memory.
// Here:   the same algorithm with lesson 20's rung-3 and rung-4 building blocks:
//         - a block owns kBM = 64 queries; its 4 warps own 16 query rows each (FlashAttention-2's
//           split: no warp ever needs another warp's scores, so the softmax needs no shared memory
//           and no __syncthreads of its own); with about 245 registers a thread, two such blocks
//           share an SM, and one block's softmax runs while the other's MMAs do;
//         - the Q tile is loaded once and kept in registers as mma.sync A fragments;
//         - K and V tiles of kBN = 64 keys stream through a kStages-deep cp.async ring in shared
//           memory (2 deep at d = 128 on GPUs with 99 KB per block), XOR-swizzled so that
//           ldmatrix is free of bank conflicts;
//         - S = Q K^T: K is stored key-rows, which is exactly the "col" B operand (ldmatrix);
//           O += P V: V is stored key-rows, the transposed B operand (ldmatrix .trans);
//         - P never touches shared memory: the m16n8 accumulator layout of S is, pair for pair,
//           the A-operand layout of the next mma, so the scores are rescaled, exponentiated and
//           packed to bf16 in registers;
//         - the online softmax per row: a thread holds 2 rows x 16 of the tile's 64 scores, the
//           4 threads of a row agree on the maximum with two shuffles; the running sum stays a
//           per-thread partial until the end.
//         Causal: blocks are issued heaviest first (the last query tiles see the most keys), and a
//         block stops at its diagonal; masking is applied only on tiles that cross it or N.
// Lacks:  mma.sync is a warp instruction: on Hopper it tops out near 2/3 of the tensor cores'
//         rate (lesson 20); operands go through registers (ldmatrix), and the softmax's exp2 and
//         max run on the same warps between the MMAs, so the tensor cores wait for them.
// Next:   rung 7, decode: one query row against many keys, memory-bound; then rung 8, this kernel
//         on Hopper's wgmma and TMA (diff kernels/6_fused_mma.cuh kernels/8_fused_wgmma.cuh).
// Run:    ./build/bin/flash_attention --rung=6
#pragma once
#include "attention.cuh"
#include "common/check.h"

namespace rung6 {

// Exercise 2 of the handout: time --rung=6 --n=8192 with kBM = 128 (8 warps, one block per SM), and with kStages = 2
constexpr int kBM = 64, kBN = 64, kStages = 3;
constexpr int kWarps = kBM / 16, kThreads = 32 * kWarps;  // 4 warps, 16 query rows each
// Q tile + `stages` x (K tile + V tile), bf16: at d = 128, 114688 bytes with 3 stages, 81920 with 2.
constexpr int smem_bytes(int d, int stages) { return (kBM * d + stages * 2 * kBN * d) * 2; }
// The ring depth this rung runs at head dimension d with `smem_optin` bytes of shared memory per
// block: kStages, or 2 where kStages do not fit (a GPU with 99 KB per block at d = 128). Where 2 do
// not fit either, main.cu's gate skips the rung (Needs::smem = smem_bytes(d, 2)).
inline int stages_that_fit(int d, size_t smem_optin) {
    return size_t(smem_bytes(d, kStages)) <= smem_optin ? kStages : 2;
}

// Byte offset of 16-byte chunk c of row r in a tile of rows of D bf16 (2D bytes): the chunk index is
// XORed with r % 8, so the 8 rows one ldmatrix reads hit 8 different bank groups.
template <int D>
__device__ __forceinline__ uint32_t swz(int r, int c) {
    return uint32_t(r * D * 2 + ((c ^ (r & 7)) << 4));
}

template <int D, int Stages>
__global__ void __launch_bounds__(kThreads, 1) flashMma(Attention a) {
#if defined(PTX_SM80)
    constexpr int kChunks = D / 8;  // 16-byte chunks per row
    constexpr int kTileBytes = kBN * D * 2;
    extern __shared__ __align__(128) uint8_t smem[];
    const uint32_t sQ = uint32_t(__cvta_generic_to_shared(smem));
    const uint32_t sK = sQ + kBM * D * 2, sV = sK + Stages * kTileBytes;
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int N = a.N;
    const int qtile = a.causal ? int(gridDim.x) - 1 - int(blockIdx.x) : int(blockIdx.x);  // causal: heaviest first
    const int m0 = qtile * kBM;
    const size_t base = size_t(blockIdx.y) * N * D;
    const bf16 *Q = a.Q + base, *K = a.K + base, *V = a.V + base;
    const int kv_end = a.causal ? min(N, m0 + kBM) : N;
    const int tiles = (kv_end + kBN - 1) / kBN;

    // rows [row0, row0 + rows) of a [N][D] tensor -> swizzled shared memory; rows past N repeat
    // row N - 1 (their scores are masked, their queries not stored), so no read leaves the tensor.
    const auto load_rows = [&](uint32_t dst, const bf16* src, int row0, int rows) {
        for (int i = tid; i < rows * kChunks; i += kThreads) {
            const int r = i / kChunks, c = i % kChunks;
            cp_async_16(dst + swz<D>(r, c), src + size_t(min(row0 + r, N - 1)) * D + c * 8);
        }
    };
    load_rows(sQ, Q, m0, kBM);  // Q joins the first group
#pragma unroll
    for (int st = 0; st < Stages - 1; ++st) {  // prologue: Stages - 1 K/V tiles in flight
        if (st < tiles) {
            load_rows(sK + st * kTileBytes, K, st * kBN, kBN);
            load_rows(sV + st * kTileBytes, V, st * kBN, kBN);
        }
        cp_async_commit();
    }

    const float sl = a.scale * kLog2e;            // scores in log2 units: exp(x) = exp2(x * log2 e)
    const int row_a = m0 + warp * 16 + lane / 4;  // this thread's two rows: row_a and row_a + 8
    uint32_t q[D / 16][4];                        // the warp's 16 x D slice of Q as A fragments
    float o[D / 8][4] = {};                       // the warp's 16 x D output: D/8 m16n8 tiles
    float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f};

    for (int j = 0; j < tiles; ++j) {
        cp_async_wait<Stages - 2>();  // tile j (and Q) landed for this thread's copies ...
        __syncthreads();              // ... and everyone's; everyone is done with tile j - 1
        if (j + Stages - 1 < tiles) {
            const int st = (j + Stages - 1) % Stages;
            load_rows(sK + st * kTileBytes, K, (j + Stages - 1) * kBN, kBN);
            load_rows(sV + st * kTileBytes, V, (j + Stages - 1) * kBN, kBN);
        }
        cp_async_commit();  // an empty group at the end keeps the wait count right
        if (j == 0) {
#pragma unroll
            for (int kk = 0; kk < D / 16; ++kk) {  // Q fragments, once: rows +8*(q&1), k-chunk +(q>>1)
                const int r = warp * 16 + (lane % 8) + 8 * ((lane / 8) & 1), c = 2 * kk + lane / 16;
                ldmatrix_x4(q[kk], sQ + swz<D>(r, c));
            }
        }
        const uint32_t kt = sK + (j % Stages) * kTileBytes, vt = sV + (j % Stages) * kTileBytes;

        // S = Q K^T: 16 x 64 per warp, 8 m16n8 tiles. One ldmatrix.x4 gives the B fragments of two
        // n8 tiles: matrix q holds keys +8*(q>>1), k-chunk +(q&1).
        float s[kBN / 8][4] = {};
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
#pragma unroll
            for (int jn = 0; jn < kBN / 16; ++jn) {
                const int r = 16 * jn + (lane % 8) + 8 * (lane / 16), c = 2 * kk + ((lane / 8) & 1);
                uint32_t t[4];
                ldmatrix_x4(t, kt + swz<D>(r, c));
                mma_m16n8k16(s[2 * jn], q[kk], t[0], t[1]);
                mma_m16n8k16(s[2 * jn + 1], q[kk], t[2], t[3]);
            }
        }
        // Mask keys past N and, causal, keys after the query (only on tiles that reach them).
        const int n0 = j * kBN;
        if (n0 + kBN > N || (a.causal && n0 + kBN - 1 > m0 + warp * 16)) {
#pragma unroll
            for (int jn = 0; jn < kBN / 8; ++jn)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int key = n0 + 8 * jn + 2 * (lane % 4) + (e & 1), row = row_a + 8 * (e / 2);
                    if (key >= N || (a.causal && key > row)) s[jn][e] = -INFINITY;
                }
        }
        // The online softmax, row by row (h = 0: row_a, h = 1: row_a + 8).
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            float mx = m_run[h];
#pragma unroll
            for (int jn = 0; jn < kBN / 8; ++jn) mx = fmaxf(mx, fmaxf(s[jn][2 * h], s[jn][2 * h + 1]));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));  // the row's 4 threads: lanes 4g..4g+3
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            const float ref = mx == -INFINITY ? 0.f : mx * sl;  // a row with no key yet: nothing to scale
            const float alpha = exp2f(m_run[h] * sl - ref);     // exp2f(-inf) = 0 on the first tile
            m_run[h] = mx;
            float rs = 0.f;
#pragma unroll
            for (int jn = 0; jn < kBN / 8; ++jn)
#pragma unroll
                for (int e = 2 * h; e < 2 * h + 2; ++e) {
                    s[jn][e] = exp2f(fmaf(s[jn][e], sl, -ref));
                    rs += s[jn][e];
                }
            l_run[h] = l_run[h] * alpha + rs;  // this thread's part of the row sum
#pragma unroll
            for (int dn = 0; dn < D / 8; ++dn) {
                o[dn][2 * h] *= alpha;
                o[dn][2 * h + 1] *= alpha;
            }
        }
        // O += P V. The S tiles 2kk and 2kk+1 are, as they stand, the A fragment of keys 16kk..16kk+15.
#pragma unroll
        for (int kk = 0; kk < kBN / 16; ++kk) {
            const uint32_t p[4] = {pack_bf16(s[2 * kk][0], s[2 * kk][1]), pack_bf16(s[2 * kk][2], s[2 * kk][3]),
                                   pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                   pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
            for (int dn = 0; dn < D / 16; ++dn) {  // V transposed: matrix q holds keys +8*(q&1), d-chunk +(q>>1)
                const int r = 16 * kk + (lane % 8) + 8 * ((lane / 8) & 1), c = 2 * dn + lane / 16;
                uint32_t t[4];
                ldmatrix_x4_trans(t, vt + swz<D>(r, c));
                mma_m16n8k16(o[2 * dn], p, t[0], t[1]);
                mma_m16n8k16(o[2 * dn + 1], p, t[2], t[3]);
            }
        }
    }
    cp_async_wait<0>();

    // O / l, row by row: the 4 threads of a row add their partial sums; bf16 pairs stored.
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        float l = l_run[h];
        l += __shfl_xor_sync(0xffffffffu, l, 1);
        l += __shfl_xor_sync(0xffffffffu, l, 2);
        const int row = row_a + 8 * h;
        if (row < N) {
            const float inv = 1.f / l;
            bf16* out = a.O + base + size_t(row) * D + 2 * (lane % 4);
#pragma unroll
            for (int dn = 0; dn < D / 8; ++dn)
                *reinterpret_cast<__nv_bfloat162*>(out + 8 * dn) =
                    __floats2bfloat162_rn(o[dn][2 * h] * inv, o[dn][2 * h + 1] * inv);
        }
    }
#else
    __trap();  // not an sm_80+ image: main.cu skips this rung
#endif
}

template <int D, int Stages>
void launch_d(const Attention& a) {
    constexpr int smem = smem_bytes(D, Stages);
    static bool raised = false;  // main.cu runs this configuration only where `smem` fits the GPU
    if (!raised) {
        CUDA_CHECK(cudaFuncSetAttribute(flashMma<D, Stages>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        raised = true;
    }
    const dim3 grid((a.N + kBM - 1) / kBM, unsigned(a.heads));
    flashMma<D, Stages><<<grid, kThreads, smem>>>(a);
    CUDA_CHECK_LAUNCH();
}
// `stages`: kStages or 2 (stages_that_fit).
inline void launch(const Attention& a, int stages) {
    if (a.d == 64) {
        if (stages == kStages) launch_d<64, kStages>(a);
        else launch_d<64, 2>(a);
    } else {
        if (stages == kStages) launch_d<128, kStages>(a);
        else launch_d<128, 2>(a);
    }
}

}  // namespace rung6
