// Lesson 20 of the course (the tensor-core GEMM ladder), rung 15 of 15: block scales, promoted under the next k-tile.
//
// Before: rung 14: block-scaled FP8, each k-tile's sum promoted into fp32 registers (acc += sa * sb * d).
//         The promotion reads the k-tile's accumulators d, which the next k-tile's wgmmas
//         overwrite, so each k-tile is waited for to the end (wgmma_wait<0>) and promoted before
//         the next one is issued: a consumer warpgroup's tensor-core work stops from its last
//         wgmma's end, through the wait, the promotion and the next stage's wait, to its next issue.
// Here:   two sets of k-tile accumulators, used in turn: k-tile kt's wgmmas write d0 if kt is
//         even, d1 if odd, and start again from zero in it (scale-d 0 first), as rung 14's. Once
//         they are issued, wgmma_wait<1> waits for k-tile kt - 1 alone (rung 12's one group in
//         flight), whose set is then handed back and promoted while kt's wgmmas run: no wgmma in
//         flight writes the set the promotion reads. A register has no run-time index, so after
//         k-tile 0 the k-loop runs in pairs, k_tile with (d1, d0) then with (d0, d1), each call
//         issuing one k-tile and retiring the one before; the last is retired after a
//         wgmma_wait<0>. ptxas must see on every path that the promotion reads no register a
//         wgmma in flight writes, or it serializes every wgmma (its message C7514): so the wait
//         before each promotion is unconditional and each trip of the loop starts with the same
//         group in flight. Registers: 3 x 64 fp32 a thread (d0, d1, acc) where rung 14 has 2 x 64,
//         within the consumers' 232 (setmaxnreg). The scales of k-tile kt are loaded before its
//         stage's wait, as in rung 14, and used a k-tile later, so their loads have one k-tile's
//         wgmmas more to arrive. The promotion's arithmetic and order are rung 14's, and so are
//         the tile, the stages, the producer, the cluster and the schedule.
// Lacks:  the scales still come from global memory on the consumers' path, and the 128-wide tile
//         moves half again rung 12's bytes per product; README.md, "Rung 15".
// Next:   lesson 21 (attention).
// Run:    ./build/bin/tensor_core_gemm --rung=15
// Shapes: M a multiple of 256, N of 128, K of 128.
#pragma once
#include <algorithm>

#include "common.cuh"
#include "common/check.h"

namespace rung15 {

constexpr int kBM = 128, kBN = 128, kBK = 128, kStages = 6;  // kBK: FP8 values, 128 bytes; kBN: B's scale block
constexpr int kConsumers = 2;
constexpr int kCluster = 2;
constexpr int kThreads = 128 * (1 + kConsumers);
constexpr int kTileA = kBM * kBK, kTileB = kBN * kBK;  // bytes
constexpr uint32_t kStageBytes = kTileA + kTileB;
constexpr int kBox = 64 * 128;  // one TMA box: 64 rows of 128 bytes
constexpr int kGroupM = 8;      // rows of pieces per scheduling group
struct Smem {
    alignas(1024) uint8_t A[kStages][kTileA];  // E4M3 codes, K-major: 128 rows of 128 k-values
    alignas(1024) uint8_t B[kStages][kTileB];  // E4M3 codes, K-major: 128 rows (n) of 128 k-values
    uint64_t full[kStages];
    uint64_t empty[kStages];
};
constexpr int kSmemBytes = int(sizeof(Smem)) + 1024;

#if defined(PTX_SM90A)
// K-major operand in the 128-byte swizzle, A's tile or B^T's: rows of 128 bytes, 8-row atoms
// 1024 bytes apart (SBO); LBO unused (a k-step of 32 bytes stays inside one swizzled row).
__device__ __forceinline__ uint64_t desc_k_major(const uint8_t* tile) { return make_desc(tile, 16, 1024); }

// D (64 x 128 fp32) = A (64 x 32 E4M3, K-major) * B (32 x 128 E4M3, from B^T K-major) + (scale_d ? D : 0).
// 8-bit wgmma has no transpose operands: both tiles must be K-major.
__device__ __forceinline__ void wgmma_m64n128k32_e4m3(float (&d)[64], uint64_t desc_a, uint64_t desc_b, int scale_d) {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 "
        "{" PTX_WGMMA_D64
        "}, "
        "%64, %65, p, 1, 1;\n"  // scale A, B: 1 (the block scales come in the promotion)
        "}\n"
        : PTX_WGMMA_ACC64(0)
        : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

// A thread's scales of one k-tile, as loaded: the A scales of its two rows (the accumulator
// fragment's `row` and row + 8) and the tile's B scale.
struct Scales {
    float a_lo, a_hi, b;
};

// A k-tile whose wgmmas are done (waited for): its sum in d, its stage st read. The stage goes
// back to both CTAs, then the promotion: acc += sa[row][kt] * sb[kt][pn] * d, d[4j..4j+1] on
// `row`, d[4j+2..] 8 below (rung 14's, the same roundings in the same order).
__device__ __forceinline__ void retire(Smem& s, int st, float (&d)[kBN / 2], float (&acc)[kBN / 2], const Scales& sc,
                                       int t) {
    fence_acc(d);
    if (t % 32 == 0) {
        for (uint32_t r = 0; r < kCluster; ++r) mbar_arrive_cluster(&s.empty[st], r);
    }
    const float s_lo = sc.a_lo * sc.b, s_hi = sc.a_hi * sc.b;
#pragma unroll
    for (int j = 0; j < kBN / 8; ++j) {
        acc[4 * j] = fmaf(d[4 * j], s_lo, acc[4 * j]);
        acc[4 * j + 1] = fmaf(d[4 * j + 1], s_lo, acc[4 * j + 1]);
        acc[4 * j + 2] = fmaf(d[4 * j + 2], s_hi, acc[4 * j + 2]);
        acc[4 * j + 3] = fmaf(d[4 * j + 3], s_hi, acc[4 * j + 3]);
    }
}

// K-tile kt of a piece, this consumer's it-th over all pieces (stage it % kStages): its wgmmas
// issued into d, the first with scale-d 0. Returns its scales, loaded before the stage's wait
// and used when the k-tile is retired, a k-tile later.
__device__ __forceinline__ Scales issue(Smem& s, int it, int kt, int c, const float* sa_row, const float* sb_block,
                                        int M, float (&d)[kBN / 2]) {
    const int st = it % kStages;
    const Scales sc = {sa_row[size_t(kt) * M], sa_row[size_t(kt) * M + 8], sb_block[kt]};
    mbar_wait(&s.full[st], (it / kStages) & 1);
    wgmma_fence();  // also orders the promotion that last read d (k-tile kt - 2) before these wgmmas
#pragma unroll
    for (int kk = 0; kk < kBK / 32; ++kk)  // 32 k-values = 32 bytes along both rows
        wgmma_m64n128k32_e4m3(d, desc_k_major(s.A[st] + c * kBox + 32 * kk), desc_k_major(s.B[st] + 32 * kk), kk > 0);
    wgmma_commit();
    return sc;
}

// K-tile kt into `cur` (its scales into `now`); while its wgmmas run, k-tile kt - 1, whose sum is
// in `prev` and whose scales are `last`, is waited for and retired.
__device__ __forceinline__ void k_tile(Smem& s, int it, int kt, int c, int t, const float* sa_row,
                                       const float* sb_block, int M, float (&cur)[kBN / 2], float (&prev)[kBN / 2],
                                       float (&acc)[kBN / 2], Scales& now, const Scales& last) {
    now = issue(s, it, kt, c, sa_row, sb_block, M, cur);
    wgmma_wait<1>();  // k-tile kt - 1 is done (kt may still run): its sum complete, its stage read
    retire(s, (it - 1) % kStages, prev, acc, last, t);
}
#endif

// Piece p (of pieces_m x pieces_n pieces of 256 x 128) -> its row and column, grouped along M.
__device__ __forceinline__ void piece_coords(int p, int pieces_m, int pieces_n, int& pm, int& pn) {
    const int per_group = kGroupM * pieces_n;
    const int first = (p / per_group) * kGroupM;
    const int rows = min(pieces_m - first, kGroupM);
    pm = first + (p % per_group) % rows;
    pn = (p % per_group) / rows;
}

__global__ void __launch_bounds__(kThreads, 1)
    fp8BlockScaledOverlap(const __grid_constant__ CUtensorMap tma_A, const __grid_constant__ CUtensorMap tma_Bt,
                          float* C, int M, int N, int K, const float* __restrict__ sa, const float* __restrict__ sb) {
#if defined(PTX_SM90A)
    extern __shared__ uint8_t smem_raw[];
    Smem& s = *reinterpret_cast<Smem*>((uintptr_t(smem_raw) + 1023) & ~uintptr_t(1023));
    const int tid = threadIdx.x, wg = tid / 128;
    const uint32_t rank = cluster_rank();
    const int cluster = blockIdx.x / kCluster, clusters = gridDim.x / kCluster;
    const int pieces_m = M / (kCluster * kBM), pieces_n = N / kBN, pieces = pieces_m * pieces_n;
    const int kTiles = K / kBK;

    if (tid == 0) {
        for (int st = 0; st < kStages; ++st) {
            mbar_init(&s.full[st], 1);
            mbar_init(&s.empty[st], 4 * kConsumers * kCluster);
        }
        fence_barrier_init();
    }
    cluster_sync();

    if (wg == 0) {
        setmaxnreg_dec<40>();
        if (tid == 0) {
            int it = 0;  // k-tiles loaded so far, over all pieces: stage it % kStages, phase it / kStages
            for (int p = cluster; p < pieces; p += clusters) {
                int pm, pn;
                piece_coords(p, pieces_m, pieces_n, pm, pn);
                const int m0 = pm * kCluster * kBM + rank * kBM, n0 = pn * kBN;
                for (int kt = 0; kt < kTiles; ++kt, ++it) {
                    const int st = it % kStages;
                    mbar_wait(&s.empty[st], ((it / kStages) & 1) ^ 1);
                    mbar_arrive_expect_tx(&s.full[st], kStageBytes);
                    for (int i = 0; i < kBM / 64; ++i)
                        tma_load(s.A[st] + i * kBox, &tma_A, kt * kBK, m0 + 64 * i, &s.full[st]);
                    // B^T's rows are n: each CTA loads one of the tile's two boxes, n0 + 64 * rank
                    tma_load_multicast(s.B[st] + rank * kBox, &tma_Bt, kt * kBK, n0 + 64 * rank, &s.full[st], 0b11);
                }
            }
        }
    } else {
        setmaxnreg_inc<232>();
        const int c = wg - 1, t = tid % 128;
        const int ldk = (kTiles + 3) / 4 * 4;  // B's scales: one row of ldk per n-block
        int it = 0;                            // the same count as the producer's
        float d0[kBN / 2], d1[kBN / 2];        // two k-tiles' sum(a_q b_q): kt's in d0 if kt is even, d1 if odd
        float acc[kBN / 2];                    // the promoted sum over the k-tiles so far
#pragma unroll
        for (int i = 0; i < kBN / 2; ++i) d0[i] = d1[i] = 0.0f;  // never read (scale-d 0 first), but defined
        for (int p = cluster; p < pieces; p += clusters) {
            int pm, pn;
            piece_coords(p, pieces_m, pieces_n, pm, pn);
            const int m0 = pm * kCluster * kBM + rank * kBM, n0 = pn * kBN;
            // This thread's rows of C (the accumulator fragment: store_acc) are `row` and row + 8.
            const float* sa_row = sa + m0 + 64 * c + 16 * (t / 32) + (t % 32) / 4;
            const float* sb_block = sb + size_t(pn) * ldk;  // kBN == 128: the tile is one n-block
#pragma unroll
            for (int i = 0; i < kBN / 2; ++i) acc[i] = 0.0f;
            Scales sc0 = issue(s, it++, 0, c, sa_row, sb_block, M, d0), sc1;  // k-tile 0 into d0
            int kt = 1;
            for (; kt + 1 < kTiles; kt += 2) {  // in pairs: kt into d1 while d0 is promoted, kt + 1 into d0
                k_tile(s, it++, kt, c, t, sa_row, sb_block, M, d1, d0, acc, sc1, sc0);
                k_tile(s, it++, kt + 1, c, t, sa_row, sb_block, M, d0, d1, acc, sc0, sc1);
            }
            if (kt < kTiles) {  // an even number of k-tiles: the last one into d1
                k_tile(s, it++, kt, c, t, sa_row, sb_block, M, d1, d0, acc, sc1, sc0);
                wgmma_wait<0>();  // the last k-tile, kt, in d1
                retire(s, (it - 1) % kStages, d1, acc, sc1, t);
            } else {
                wgmma_wait<0>();  // the last k-tile, in d0
                retire(s, (it - 1) % kStages, d0, acc, sc0, t);
            }
            store_acc(acc, C, N, m0 + 64 * c, n0, t);
        }
    }
    cluster_sync();
#else
    __trap();
#endif
}

inline void launch(const Fp8Gemm& g) {
    static bool raised = false;
    if (!raised) {
        CUDA_CHECK(
            cudaFuncSetAttribute(fp8BlockScaledOverlap, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
        raised = true;
    }
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = kCluster;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.blockDim = dim3(kThreads);
    cfg.dynamicSmemBytes = kSmemBytes;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    // How many clusters of this kernel fit on the GPU at once (not always sms / 2: a cluster's
    // CTAs must sit in one GPC); the grid is that many, or the number of pieces if smaller.
    static int max_clusters = 0;
    if (max_clusters == 0) {
        cfg.gridDim = dim3(kCluster * g.sms);
        CUDA_CHECK(cudaOccupancyMaxActiveClusters(&max_clusters, fp8BlockScaledOverlap, &cfg));
        if (max_clusters < 1) max_clusters = 1;
    }
    const int pieces = (g.M / (kCluster * kBM)) * (g.N / kBN);
    cfg.gridDim = dim3(kCluster * std::min(max_clusters, pieces));
    CUDA_CHECK(
        cudaLaunchKernelEx(&cfg, fp8BlockScaledOverlap, *g.tma_A, *g.tma_Bt, g.C, g.M, g.N, g.K, g.scale_a, g.scale_b));
}

}  // namespace rung15
