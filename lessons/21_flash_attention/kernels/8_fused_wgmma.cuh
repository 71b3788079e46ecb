// Lesson 21 of the course (flash attention), rung 8: the fused attention on Hopper's wgmma, fed by TMA.
//
// Before: rung 6 (rung 7 is decode): FlashAttention-2 on mma.sync, each warp 16 query rows, every
//         operand through registers (ldmatrix), K/V by cp.async.
// Here:   the same online softmax with lesson 20's Hopper path (sm_90a):
//         - a block owns kBM = 128 queries; its two warpgroups (4 warps each) own 64 rows each,
//           so a softmax row still never leaves one warpgroup (the FA2 split, one level up);
//         - Q (128 x d), and K and V tiles of kBN = 128 keys, arrive by TMA (kernels/hopper.cuh:
//           3D tensor maps of [heads][N][d], boxes of 64 columns x 128 rows, 128-byte swizzle,
//           rows past N zero-filled) into a kStages-deep ring; thread 0 issues the copies, and a
//           stage is refilled once all 8 warps have arrived on its "empty" mbarrier;
//         - S = Q K^T: wgmma m64n128k16, both operands from shared memory through descriptors,
//           K-major (K is stored [key][d], exactly what B wants for Q K^T);
//         - O += P V: wgmma m64n{d}k16 with A = P from REGISTERS: the wgmma accumulator layout
//           of S is, register pair for register pair, the A-fragment layout (as with mma.sync in
//           rung 6), so the scores are exponentiated and packed to bf16 where they are; B = the V
//           tile, MN-major (d is its contiguous dimension): the transpose bit of B is set;
//         - the softmax: a thread holds 2 rows x 32 of the tile's 128 scores; max and sum over
//           the row's 4 threads with two shuffles, as in rung 6.
// Lacks:  overlap inside a warpgroup: each one waits for its S = Q K^T before its softmax and for
//         O += P V before the next tile, so its tensor work stops while it computes exp2; only the
//         other warpgroup (and the scheduler's luck) fills the gap. Thread 0 both loads and computes,
//         and waits for the slower warpgroup before each refill.
// Next:   rung 9: a producer warpgroup (setmaxnreg), S of the next tile issued before the softmax
//         of this one, and the two warpgroups taking turns on the tensor cores
//         (diff kernels/8_fused_wgmma.cuh kernels/9_fused_warp_specialized.cuh).
// Run:    ./build/bin/flash_attention --rung=8
#pragma once
#include "attention.cuh"
#include "common/check.h"
#include "hopper.cuh"

namespace rung8 {

constexpr int kBM = 128, kBN = 128, kStages = 2;  // queries per block, keys per tile, ring depth
constexpr int kThreads = 256;                     // two warpgroups, 64 query rows each
template <int D>
struct Smem {                       // every tile 1024-byte aligned (the swizzle atom)
    alignas(1024) bf16 Q[kBM * D];  // D/64 boxes of 128 rows x 64 columns (128-byte rows)
    alignas(1024) bf16 K[kStages][kBN * D];
    alignas(1024) bf16 V[kStages][kBN * D];
    uint64_t q_full, k_full[kStages], v_full[kStages], empty[kStages];
};
template <int D>
constexpr int smem_bytes() {  // + room to align the base by hand
    return int(sizeof(Smem<D>)) + 1024;
}

template <int D>
__global__ void __launch_bounds__(kThreads, 1)
    flashWgmma(const __grid_constant__ CUtensorMap tm_q, const __grid_constant__ CUtensorMap tm_k,
               const __grid_constant__ CUtensorMap tm_v, Attention a) {
#if defined(PTX_SM90A)
    constexpr uint32_t kTileBytes = kBN * D * 2;  // one K or V tile (and Q: kBM == kBN)
    constexpr uint32_t kBoxBytes = kBN * 128;     // one box of it: 128 rows x 64 columns
    extern __shared__ uint8_t smem_raw[];
    Smem<D>& s = *reinterpret_cast<Smem<D>*>((uintptr_t(smem_raw) + 1023) & ~uintptr_t(1023));
    const int tid = threadIdx.x, wg = tid / 128, warp = (tid % 128) / 32, lane = tid % 32;
    const int N = a.N, head = blockIdx.y;
    const int qtile = a.causal ? int(gridDim.x) - 1 - int(blockIdx.x) : int(blockIdx.x);  // causal: heaviest first
    const int m0 = qtile * kBM;
    const int kv_end = a.causal ? min(N, m0 + kBM) : N;
    const int tiles = (kv_end + kBN - 1) / kBN;

    if (tid == 0) {
        mbar_init(&s.q_full, 1);  // one arrival each: thread 0's expect_tx
        for (int st = 0; st < kStages; ++st) {
            mbar_init(&s.k_full[st], 1);
            mbar_init(&s.v_full[st], 1);
            mbar_init(&s.empty[st], 8);  // one arrival per warp, when its wgmmas have read the stage
        }
        fence_barrier_init();
    }
    __syncthreads();
    // Thread 0: K and V of key tile j -> stage j % kStages, each in D/64 boxes of 64 columns.
    const auto load_kv = [&](int j) {
        const int st = j % kStages;
        mbar_arrive_expect_tx(&s.k_full[st], kTileBytes);
        for (int kb = 0; kb < D / 64; ++kb)
            tma_load_3d(s.K[st] + kb * kBN * 64, &tm_k, 64 * kb, j * kBN, head, &s.k_full[st]);
        mbar_arrive_expect_tx(&s.v_full[st], kTileBytes);
        for (int kb = 0; kb < D / 64; ++kb)
            tma_load_3d(s.V[st] + kb * kBN * 64, &tm_v, 64 * kb, j * kBN, head, &s.v_full[st]);
    };
    if (tid == 0) {
        mbar_arrive_expect_tx(&s.q_full, kBM * D * 2);
        for (int kb = 0; kb < D / 64; ++kb) tma_load_3d(s.Q + kb * kBM * 64, &tm_q, 64 * kb, m0, head, &s.q_full);
        for (int j = 0; j < kStages && j < tiles; ++j) load_kv(j);
    }

    const float sl = a.scale * kLog2e;            // scores in log2 units: exp(x) = exp2(x * log2 e)
    const int r0 = m0 + 64 * wg;                  // the warpgroup's first query row
    const int row_a = r0 + 16 * warp + lane / 4;  // this thread's two rows: row_a and row_a + 8
    float o[D / 2];                               // the warpgroup's 64 x D output: D/8 blocks of 4
#pragma unroll
    for (int i = 0; i < D / 2; ++i) o[i] = 0.f;
    float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f};
    mbar_wait(&s.q_full, 0);

    for (int j = 0; j < tiles; ++j) {
        const int st = j % kStages;
        const uint32_t phase = (j / kStages) & 1;  // how many times stage st was filled before, mod 2
        mbar_wait(&s.k_full[st], phase);

        // S = Q K^T (64 x 128 per warpgroup): D/16 k-steps; within a 64-column box a k-step is 32
        // bytes further along the swizzled 128-byte rows, the next box is the next 64 columns.
        float sc[kBN / 2];
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
            const int box = kk / 4, col = 16 * (kk % 4);
            wgmma_qk_m64n128(sc, desc_kmajor(s.Q + box * kBM * 64 + wg * 64 * 64 + col),
                             desc_kmajor(s.K[st] + box * kBN * 64 + col), kk > 0);
        }
        wgmma_commit();
        wgmma_wait<0>();
        fence_acc(sc);

        // Mask keys past N and, causal, keys after the query (only on tiles that reach them).
        // sc[4 jn + e]: row row_a + 8 (e / 2), key n0 + 8 jn + 2 (lane % 4) + (e % 2).
        const int n0 = j * kBN;
        if (n0 + kBN > N || (a.causal && n0 + kBN - 1 > r0)) {
#pragma unroll
            for (int jn = 0; jn < kBN / 8; ++jn)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int key = n0 + 8 * jn + 2 * (lane % 4) + (e & 1), row = row_a + 8 * (e / 2);
                    if (key >= N || (a.causal && key > row)) sc[4 * jn + e] = -INFINITY;
                }
        }
        // The online softmax, row by row (h = 0: row_a, h = 1: row_a + 8), as in rung 6.
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            float mx = m_run[h];
#pragma unroll
            for (int jn = 0; jn < kBN / 8; ++jn) mx = fmaxf(mx, fmaxf(sc[4 * jn + 2 * h], sc[4 * jn + 2 * h + 1]));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));  // the row's 4 threads: lanes 4g..4g+3
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            // EXERCISE 5 BEGIN: row h's online softmax: new max mx, p = exp of the scores, l and o rescaled to it
            // HINT: in log2 units: p = exp2(s * sl - mx * sl), alpha = exp2(m_run * sl - mx * sl) = e^(m_old - m_new)
            // HINT: mx == -INFINITY (every key so far masked): subtract 0 instead, or -inf - -inf gives NaN
            // HINT: row h's entries are sc[4 jn + 2h] and sc[4 jn + 2h + 1]; its output columns o[4 dn + 2h], +1
            // HINT: l = l * alpha + (this thread's sum of the new p); o holds e^(s - m_old) weights: times alpha too
            // STUB: m_run[h] = mx;
            // STUB: (void)sl;
            const float ref = mx == -INFINITY ? 0.f : mx * sl;  // a row with no key yet: nothing to scale
            const float alpha = exp2_ftz(m_run[h] * sl - ref);  // exp2(-inf) = 0 on the first tile
            m_run[h] = mx;
            float rs = 0.f;
#pragma unroll
            for (int jn = 0; jn < kBN / 8; ++jn)
#pragma unroll
                for (int e = 2 * h; e < 2 * h + 2; ++e) {
                    sc[4 * jn + e] = exp2_ftz(fmaf(sc[4 * jn + e], sl, -ref));
                    rs += sc[4 * jn + e];
                }
            l_run[h] = l_run[h] * alpha + rs;  // this thread's part of the row sum
#pragma unroll
            for (int dn = 0; dn < D / 8; ++dn) {
                o[4 * dn + 2 * h] *= alpha;
                o[4 * dn + 2 * h + 1] *= alpha;
            }
            // EXERCISE 5 END
        }
        // P as the A operand of P V: the accumulator blocks 2kk and 2kk+1 (keys 16kk..16kk+15) are
        // the four A registers of k-step kk: (row g, keys 2t..), (g + 8, 2t..), (g, 8+2t..), (g + 8, 8+2t..).
        uint32_t p[kBN / 16][4];
#pragma unroll
        for (int kk = 0; kk < kBN / 16; ++kk) {
            p[kk][0] = pack_bf16(sc[8 * kk + 0], sc[8 * kk + 1]);  // row g,     keys 16kk + 2t, +1
            p[kk][1] = pack_bf16(sc[8 * kk + 2], sc[8 * kk + 3]);  // row g + 8, same keys
            p[kk][2] = pack_bf16(sc[8 * kk + 4], sc[8 * kk + 5]);  // row g,     keys 16kk + 8 + 2t, +1
            p[kk][3] = pack_bf16(sc[8 * kk + 6], sc[8 * kk + 7]);  // row g + 8
        }

        // O += P V: kBN/16 k-steps of 16 keys, each 16 key-rows (2 atoms, 2048 bytes) further on.
        mbar_wait(&s.v_full[st], phase);
        wgmma_fence();  // the rescaled o and the new p are written: visible to the wgmmas
#pragma unroll
        for (int kk = 0; kk < kBN / 16; ++kk) wgmma_pv<D>(o, p[kk], desc_mnmajor(s.V[st] + kk * 16 * 64, kBoxBytes), 1);
        wgmma_commit();
        wgmma_wait<0>();
        fence_acc(o);
        fence_frag(p);

        // Stage st is read by this warp: release it. Thread 0 refills it with tile j + kStages once
        // all 8 warps have (it waits for the slower warpgroup here).
        if (lane == 0) mbar_arrive(&s.empty[st]);
        if (tid == 0 && j + kStages < tiles) {
            mbar_wait(&s.empty[st], phase);
            load_kv(j + kStages);
        }
        __syncwarp();
    }

    // O / l, row by row: the 4 threads of a row add their partial sums; bf16 pairs stored.
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        float l = l_run[h];
        l += __shfl_xor_sync(0xffffffffu, l, 1);
        l += __shfl_xor_sync(0xffffffffu, l, 2);
        const int row = row_a + 8 * h;
        if (row < N) {
            const float inv = 1.f / l;
            bf16* out = a.O + (size_t(head) * N + row) * D + 2 * (lane % 4);
#pragma unroll
            for (int dn = 0; dn < D / 8; ++dn)
                *reinterpret_cast<__nv_bfloat162*>(out + 8 * dn) =
                    __floats2bfloat162_rn(o[4 * dn + 2 * h] * inv, o[4 * dn + 2 * h + 1] * inv);
        }
    }
#else
    __trap();  // not an sm_90a image: main.cu skips this rung
#endif
}

// The tensor maps are built on the host once per problem (pointers, N, d, heads) and passed by value.
template <int D>
void launch_d(const Attention& a) {
    static bool raised = false;
    if (!raised) {
        CUDA_CHECK(cudaFuncSetAttribute(flashWgmma<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes<D>()));
        raised = true;
    }
    static AttentionMaps maps;
    if (!maps.built_for(a, kBN, kBM)) maps = make_attention_maps(a, kBN, kBM);
    const dim3 grid((a.N + kBM - 1) / kBM, unsigned(a.heads));
    flashWgmma<D><<<grid, kThreads, smem_bytes<D>()>>>(maps.q, maps.k, maps.v, a);
    CUDA_CHECK_LAUNCH();
}
inline void launch(const Attention& a) {
    if (a.d == 64) launch_d<64>(a);
    else launch_d<128>(a);
}

}  // namespace rung8
