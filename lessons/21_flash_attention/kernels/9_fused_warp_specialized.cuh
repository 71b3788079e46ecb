// Lesson 21 of the course (flash attention), rung 9: warp specialization, and the softmax overlapped with wgmma.
//
// Before: rung 8: wgmma + TMA, but every warpgroup ran S = Q K^T, waited, computed the softmax, ran
//         O += P V, waited: its tensor work stopped during exp2, and thread 0 loaded between
//         its own tiles, waiting for the slower warpgroup.
// Here:   FlashAttention-3's three changes:
//         - warp specialization: one warpgroup is the producer. One of its threads issues the
//           TMA loads of Q and of every K/V tile into a kStages-deep ring (3 stages at d = 128,
//           4 at d = 64), waiting on each stage's "empty" mbarrier; the consumer warpgroups, 64
//           query rows each, only compute. setmaxnreg moves registers from the producer to the
//           consumers, which hold S, P and O at once: two consumers of 240 registers at d = 128;
//           three of 160 at d = 64, where O is half as large and a score carries half the matrix
//           work, so a third softmax in flight keeps the tensor cores fed (a 192-query block);
//         - intra-warpgroup overlap: in iteration j a consumer issues S_j = Q K_j^T and then
//           O += P_{j-1} V_{j-1} (two wgmma groups in flight), waits only for the first
//           (wgmma_wait<1>), and computes the softmax of S_j while the tensor cores still run
//           P_{j-1} V_{j-1}. O is rescaled by this tile's alpha after that group is done too;
//         - ping-pong: the consumers take turns to issue their wgmmas (a named barrier each), so
//           their softmaxes run while another's products keep the tensor cores busy.
// Lacks:  the output leaves through 4-byte stores from registers, not a TMA store; a block ends
//         with its query tile (FlashAttention-3 is persistent: the next tile's loads overlap this
//         one's epilogue); kBN = 128 keys for both d.
// Next:   lesson 22 (several GPUs).
// Run:    ./build/bin/flash_attention --rung=9
#pragma once
#include "attention.cuh"
#include "common/check.h"
#include "hopper.cuh"

namespace rung9 {

constexpr int kBN = 128;  // keys per tile
template <int D>
constexpr int consumers() {  // consumer warpgroups, 64 query rows each
    return D == 64 ? 3 : 2;
}
template <int D>
constexpr int block_m() {  // queries per block
    return 64 * consumers<D>();
}
template <int D>
constexpr int threads() {  // + the producer warpgroup
    return 128 * (1 + consumers<D>());
}
// Exercise 4 of the handout: set kPingPong = false and time --rung=9 --n=8192 at d = 64 and 128
constexpr bool kPingPong = true;  // the consumers take turns to issue their wgmmas
template <int D>
constexpr int stages() {  // as deep as the 227 KB of shared memory allow
    return D == 64 ? 4 : 3;
}
template <int D>
struct Smem {  // every tile 1024-byte aligned (the swizzle atom)
    static constexpr int kStages = stages<D>();
    alignas(1024) bf16 Q[block_m<D>() * D];  // D/64 boxes of block_m rows x 64 columns (128-byte rows)
    alignas(1024) bf16 K[kStages][kBN * D];
    alignas(1024) bf16 V[kStages][kBN * D];
    uint64_t q_full, k_full[kStages], v_full[kStages], empty[kStages];
};
template <int D>
constexpr int smem_bytes() {  // + room to align the base by hand
    return int(sizeof(Smem<D>)) + 1024;
}

#if defined(PTX_SM90A)
// S = Q K^T for this warpgroup's 64 rows and the K tile `k` (issued, not waited for).
template <int D>
__device__ __forceinline__ void issue_qk(float (&sc)[kBN / 2], const bf16* q, const bf16* k) {
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
        const int box = kk / 4, col = 16 * (kk % 4);
        wgmma_qk_m64n128(sc, desc_kmajor(q + box * block_m<D>() * 64 + col), desc_kmajor(k + box * kBN * 64 + col),
                         kk > 0);
    }
}
// O += P V for the V tile `v` (issued, not waited for).
template <int D>
__device__ __forceinline__ void issue_pv(float (&o)[D / 2], const uint32_t (&p)[kBN / 16][4], const bf16* v) {
#pragma unroll
    for (int kk = 0; kk < kBN / 16; ++kk) wgmma_pv<D>(o, p[kk], desc_mnmajor(v + kk * 16 * 64, kBN * 128), 1);
}
// Mask and online softmax of one tile of scores, in place: sc becomes exp2(s * sl - m), m_run and
// l_run are updated, alpha[h] is the factor that O of row h must be rescaled by (rung 8's loop body).
__device__ __forceinline__ void softmax_tile(float (&sc)[kBN / 2], float (&m_run)[2], float (&l_run)[2],
                                             float (&alpha)[2], const Attention& a, int n0, int r0, int row_a, int lane,
                                             float sl) {
    if (n0 + kBN > a.N || (a.causal && n0 + kBN - 1 > r0)) {
#pragma unroll
        for (int jn = 0; jn < kBN / 8; ++jn)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int key = n0 + 8 * jn + 2 * (lane % 4) + (e & 1), row = row_a + 8 * (e / 2);
                if (key >= a.N || (a.causal && key > row)) sc[4 * jn + e] = -INFINITY;
            }
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        float mx = m_run[h];
#pragma unroll
        for (int jn = 0; jn < kBN / 8; ++jn) mx = fmaxf(mx, fmaxf(sc[4 * jn + 2 * h], sc[4 * jn + 2 * h + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float ref = mx == -INFINITY ? 0.f : mx * sl;
        alpha[h] = exp2_ftz(m_run[h] * sl - ref);
        m_run[h] = mx;
        float rs = 0.f;
#pragma unroll
        for (int jn = 0; jn < kBN / 8; ++jn)
#pragma unroll
            for (int e = 2 * h; e < 2 * h + 2; ++e) {
                sc[4 * jn + e] = exp2_ftz(fmaf(sc[4 * jn + e], sl, -ref));
                rs += sc[4 * jn + e];
            }
        l_run[h] = l_run[h] * alpha[h] + rs;
    }
}
// The scores, exponentiated, as the A fragments of P V (rung 8).
__device__ __forceinline__ void pack_p(uint32_t (&p)[kBN / 16][4], const float (&sc)[kBN / 2]) {
#pragma unroll
    for (int kk = 0; kk < kBN / 16; ++kk) {
        p[kk][0] = pack_bf16(sc[8 * kk + 0], sc[8 * kk + 1]);
        p[kk][1] = pack_bf16(sc[8 * kk + 2], sc[8 * kk + 3]);
        p[kk][2] = pack_bf16(sc[8 * kk + 4], sc[8 * kk + 5]);
        p[kk][3] = pack_bf16(sc[8 * kk + 6], sc[8 * kk + 7]);
    }
}
#endif  // PTX_SM90A

template <int D>
__global__ void __launch_bounds__(threads<D>(), 1)
    flashWarpSpecialized(const __grid_constant__ CUtensorMap tm_q, const __grid_constant__ CUtensorMap tm_k,
                         const __grid_constant__ CUtensorMap tm_v, Attention a) {
#if defined(PTX_SM90A)
    constexpr int kStages = Smem<D>::kStages, kConsumers = consumers<D>(), kBM = block_m<D>();
    constexpr uint32_t kTileBytes = kBN * D * 2;  // one K or V tile
    extern __shared__ uint8_t smem_raw[];
    Smem<D>& s = *reinterpret_cast<Smem<D>*>((uintptr_t(smem_raw) + 1023) & ~uintptr_t(1023));
    const int tid = threadIdx.x, wg = tid / 128, warp = (tid % 128) / 32, lane = tid % 32;
    const int N = a.N, head = blockIdx.y;
    const int qtile = a.causal ? int(gridDim.x) - 1 - int(blockIdx.x) : int(blockIdx.x);  // causal: heaviest first
    const int m0 = qtile * kBM;
    const int kv_end = a.causal ? min(N, m0 + kBM) : N;
    const int tiles = (kv_end + kBN - 1) / kBN;

    if (tid == 0) {
        mbar_init(&s.q_full, 1);  // one arrival each: the producer's expect_tx
        for (int st = 0; st < kStages; ++st) {
            mbar_init(&s.k_full[st], 1);
            mbar_init(&s.v_full[st], 1);
            mbar_init(&s.empty[st], 4 * kConsumers);  // one arrival per consumer warp
        }
        fence_barrier_init();
    }
    __syncthreads();

    if (wg == 0) {                                    // ---------------- producer: one thread issues every load
        setmaxnreg_dec<kConsumers == 2 ? 24 : 32>();  // 128 x (24 + 2 x 240) or (32 + 3 x 160) <= 64K
        if (tid == 0) {
            mbar_arrive_expect_tx(&s.q_full, kBM * D * 2);
            for (int kb = 0; kb < D / 64; ++kb) tma_load_3d(s.Q + kb * kBM * 64, &tm_q, 64 * kb, m0, head, &s.q_full);
            for (int j = 0; j < tiles; ++j) {
                const int st = j % kStages;
                mbar_wait(&s.empty[st], ((j / kStages) & 1) ^ 1);  // the first pass finds every stage free
                mbar_arrive_expect_tx(&s.k_full[st], kTileBytes);
                for (int kb = 0; kb < D / 64; ++kb)
                    tma_load_3d(s.K[st] + kb * kBN * 64, &tm_k, 64 * kb, j * kBN, head, &s.k_full[st]);
                mbar_arrive_expect_tx(&s.v_full[st], kTileBytes);
                for (int kb = 0; kb < D / 64; ++kb)
                    tma_load_3d(s.V[st] + kb * kBN * 64, &tm_v, 64 * kb, j * kBN, head, &s.v_full[st]);
            }
        }
    } else {  // ---------------- consumers: 64 query rows each
        setmaxnreg_inc<kConsumers == 2 ? 240 : 160>();
        const int c = wg - 1;
        const float sl = a.scale * kLog2e;
        const int r0 = m0 + 64 * c;                   // the warpgroup's first query row
        const int row_a = r0 + 16 * warp + lane / 4;  // this thread's two rows: row_a and row_a + 8
        const bf16* q = s.Q + c * 64 * 64;            // its 64 rows of each Q box
        // Causal: a warpgroup's last key is its last row, so the key tiles past it are all masked
        // and it skips them (only taking its turns and freeing their stages). At d = 64 the block's
        // 192 rows end up to 128 keys after the first warpgroup's.
        const int my_tiles = a.causal ? (min(N, r0 + 64) + kBN - 1) / kBN : tiles;
        float o[D / 2];
#pragma unroll
        for (int i = 0; i < D / 2; ++i) o[i] = 0.f;
        float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f}, alpha[2];
        float sc[kBN / 2];
        uint32_t p[kBN / 16][4];
        // Ping-pong: the consumers take turns to issue their wgmmas (named barriers 1, 2 and 3, 256
        // threads: the 128 of the waiting warpgroup and the 128 of the previous one's bar.arrive), so
        // that the others' softmaxes run while one's products keep the tensor cores busy. Consumer 0
        // starts; consumer c waits on barrier 1 + c and arrives on the next one's, the last on 1.
        // Every consumer takes tiles + 1 turns. The ids are immediates, one branch per consumer:
        // with an id in a register, ptxas would reserve all 16 of the block's barriers.
        const auto my_turn = [&] {
            if (!kPingPong) return;
            if (c == 0) asm volatile("bar.sync 1, 256;\n" ::: "memory");
            else if (c == 1) asm volatile("bar.sync 2, 256;\n" ::: "memory");
            else asm volatile("bar.sync 3, 256;\n" ::: "memory");
        };
        const auto pass_turn = [&](bool last) {  // the last consumer's last turn is passed to no one
            if (!kPingPong) return;
            if (c == 0) asm volatile("bar.arrive 2, 256;\n" ::: "memory");
            else if (c == 1 && kConsumers == 3) asm volatile("bar.arrive 3, 256;\n" ::: "memory");
            else if (!last) asm volatile("bar.arrive 1, 256;\n" ::: "memory");
        };
        if (kPingPong && c == kConsumers - 1) asm volatile("bar.arrive 1, 256;\n" ::: "memory");
        mbar_wait(&s.q_full, 0);

        // Tile 0: S_0 alone, its softmax, P_0.
        mbar_wait(&s.k_full[0], 0);
        my_turn();
        wgmma_fence();
        issue_qk<D>(sc, q, s.K[0]);
        wgmma_commit();
        pass_turn(false);
        wgmma_wait<0>();
        fence_acc(sc);
        softmax_tile(sc, m_run, l_run, alpha, a, 0, r0, row_a, lane, sl);  // alpha = 0, O is still 0
        pack_p(p, sc);

        for (int j = 1; j < my_tiles; ++j) {
            const int st = j % kStages, pst = (j - 1) % kStages;
            mbar_wait(&s.k_full[st], (j / kStages) & 1);
            mbar_wait(&s.v_full[pst], ((j - 1) / kStages) & 1);  // (landed long ago, as a rule)
            my_turn();
            wgmma_fence();                // p and the rescaled o are written: visible to the wgmmas
            issue_qk<D>(sc, q, s.K[st]);  // group 1: S_j = Q K_j^T
            wgmma_commit();
            issue_pv<D>(o, p, s.V[pst]);  // group 2: O += P_{j-1} V_{j-1}
            wgmma_commit();
            pass_turn(false);
            wgmma_wait<1>();  // group 1 is done, group 2 may still run ...
            fence_acc(sc);
            softmax_tile(sc, m_run, l_run, alpha, a, j * kBN, r0, row_a, lane, sl);  // ... during this
            wgmma_wait<0>();  // group 2 is done: O, P and stage pst are free
            fence_acc(o);
            fence_frag(p);
            if (lane == 0) mbar_arrive(&s.empty[pst]);
#pragma unroll
            for (int dn = 0; dn < D / 8; ++dn) {
                o[4 * dn] *= alpha[0];
                o[4 * dn + 1] *= alpha[0];
                o[4 * dn + 2] *= alpha[1];
                o[4 * dn + 3] *= alpha[1];
            }
            pack_p(p, sc);
        }
        // The last tile's O += P V.
        const int pst = (my_tiles - 1) % kStages;
        mbar_wait(&s.v_full[pst], ((my_tiles - 1) / kStages) & 1);
        my_turn();
        wgmma_fence();
        issue_pv<D>(o, p, s.V[pst]);
        wgmma_commit();
        pass_turn(my_tiles == tiles);
        wgmma_wait<0>();
        fence_acc(o);
        fence_frag(p);
        // Causal: the tiles this warpgroup skips. It frees each stage once the tile has landed
        // (arriving earlier could complete the stage's next phase with this tile still in use).
        for (int j = my_tiles; j < tiles; ++j) {
            const int st = j % kStages, prev = (j - 1) % kStages;
            if (lane == 0) mbar_arrive(&s.empty[prev]);
            mbar_wait(&s.k_full[st], (j / kStages) & 1);
            mbar_wait(&s.v_full[st], (j / kStages) & 1);
            my_turn();
            pass_turn(j == tiles - 1);
        }

        // O / l, row by row, as in rung 8.
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
    }
#else
    __trap();  // not an sm_90a image: main.cu skips this rung
#endif
}

// The tensor maps are built on the host once per problem, as in rung 8.
template <int D>
void launch_d(const Attention& a) {
    static bool raised = false;
    if (!raised) {
        CUDA_CHECK(cudaFuncSetAttribute(flashWarpSpecialized<D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        smem_bytes<D>()));
        raised = true;
    }
    constexpr int kBM = block_m<D>();
    static AttentionMaps maps;
    if (!maps.built_for(a, kBN, kBM)) maps = make_attention_maps(a, kBN, kBM);
    const dim3 grid((a.N + kBM - 1) / kBM, unsigned(a.heads));
    flashWarpSpecialized<D><<<grid, threads<D>(), smem_bytes<D>()>>>(maps.q, maps.k, maps.v, a);
    CUDA_CHECK_LAUNCH();
}
inline void launch(const Attention& a) {
    if (a.d == 64) launch_d<64>(a);
    else launch_d<128>(a);
}

}  // namespace rung9
