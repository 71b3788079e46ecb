// Lesson 20 of the course (the tensor-core GEMM ladder), rung 14 of 15: FP8 operands with block scales.
//
// Before: rung 12: FP8 E4M3 A and B^T, one scale per tensor applied once, in the epilogue.
// Here:   fine-grained scales: one for every 1 x 128 strip of A (a row, one k-tile) and one for
//         every 128 x 128 block of B (one k-tile by 128 columns of n), quantized on the host
//         (fp8.cuh). A scale that changes along K cannot wait for the epilogue, so the k-tile's
//         wgmmas (the first with scale-d 0) leave sum(a_q b_q) of that k-tile alone in their
//         accumulators, and after them each consumer multiplies it by sa[row][kt] * sb[kt][n-block]
//         and adds it into a second set of fp32 registers: the "promotion" of the DeepSeek-V3
//         report. Two accumulator sets of rung 12's 64 x 256 a warpgroup would be 256 registers a
//         thread, the whole register file of one: the tile's N halves to 128 (m64n128k32, a
//         128 x 128 CTA tile, 256 x 128 a cluster), so both sets take 128, and one B scale covers
//         the tile's N. With the stage at 32 KB instead of 48 the ring holds 6 of them, the same
//         192 KB. The promotion reads the k-tile's accumulators, which the next k-tile's first
//         wgmma overwrites, so each k-tile is waited for to the end (wgmma_wait<0>, as rung 10)
//         instead of rung 12's one group in flight; the two consumer warpgroups, which do not
//         wait for each other, keep the tensor cores busy while one of them promotes.
//         The producer, the cluster of 2 with B multicast and the persistent schedule are rung 12's.
// Scales: read by the consumers from global memory (L2), not staged in shared memory with the
//         tiles: a thread needs three floats a k-tile (its two rows' A scales and the tile's B
//         scale), loaded before it waits for the stage, so that their latency hides behind
//         that wait and the wgmmas; staging them would add bytes and a second layout to every
//         stage for 12 bytes a thread. A's scales lie k-tile-major (sa[kt * M + m]), so a
//         warp's reads of one k-tile fall in one or two 128-byte lines; B's n-block-major
//         (sb[nb * ldk + kt], ldk = K / 128 rounded up to 4): the layouts cuBLASLt's block
//         modes read too.
// Lacks:  the tensor cores wait while a warpgroup promotes and while both store; README.md, "Rung 14".
// Next:   rung 15 promotes each k-tile while the next one runs (diff kernels/14_* kernels/15_*).
// Run:    ./build/bin/tensor_core_gemm --rung=14
// Shapes: M a multiple of 256, N of 128, K of 128.
#pragma once
#include <algorithm>

#include "common.cuh"
#include "common/check.h"

namespace rung14 {

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
    fp8BlockScaled(const __grid_constant__ CUtensorMap tma_A, const __grid_constant__ CUtensorMap tma_Bt, float* C,
                   int M, int N, int K, const float* __restrict__ sa, const float* __restrict__ sb) {
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
        float d[kBN / 2];                      // one k-tile's sum(a_q b_q): the wgmmas' accumulators
        float acc[kBN / 2];                    // the promoted sum over the k-tiles so far
#pragma unroll
        for (int i = 0; i < kBN / 2; ++i) d[i] = 0.0f;  // never read (scale-d 0 first), but defined
        for (int p = cluster; p < pieces; p += clusters) {
            int pm, pn;
            piece_coords(p, pieces_m, pieces_n, pm, pn);
            const int m0 = pm * kCluster * kBM + rank * kBM, n0 = pn * kBN;
            // This thread's rows of C (the accumulator fragment: store_acc) are `row` and row + 8.
            const float* sa_row = sa + m0 + 64 * c + 16 * (t / 32) + (t % 32) / 4;
            const float* sb_block = sb + size_t(pn) * ldk;  // kBN == 128: the tile is one n-block
#pragma unroll
            for (int i = 0; i < kBN / 2; ++i) acc[i] = 0.0f;
            for (int kt = 0; kt < kTiles; ++kt, ++it) {
                const int st = it % kStages;
                const float s_b = sb_block[kt];
                const float s_lo = sa_row[size_t(kt) * M] * s_b, s_hi = sa_row[size_t(kt) * M + 8] * s_b;
                mbar_wait(&s.full[st], (it / kStages) & 1);
                wgmma_fence();  // also orders the last promotion's reads of d before these wgmmas
#pragma unroll
                for (int kk = 0; kk < kBK / 32; ++kk)  // 32 k-values = 32 bytes along both rows
                    wgmma_m64n128k32_e4m3(d, desc_k_major(s.A[st] + c * kBox + 32 * kk),
                                          desc_k_major(s.B[st] + 32 * kk), kk > 0);
                wgmma_commit();
                wgmma_wait<0>();  // this k-tile's sum is complete, and its stage read
                fence_acc(d);
                if (t % 32 == 0) {
                    for (uint32_t r = 0; r < kCluster; ++r) mbar_arrive_cluster(&s.empty[st], r);
                }
                // The promotion: acc += sa[row][kt] * sb[kt][pn] * d, d[4j..4j+1] on `row`, d[4j+2..] 8 below
#pragma unroll
                for (int j = 0; j < kBN / 8; ++j) {
                    acc[4 * j] = fmaf(d[4 * j], s_lo, acc[4 * j]);
                    acc[4 * j + 1] = fmaf(d[4 * j + 1], s_lo, acc[4 * j + 1]);
                    acc[4 * j + 2] = fmaf(d[4 * j + 2], s_hi, acc[4 * j + 2]);
                    acc[4 * j + 3] = fmaf(d[4 * j + 3], s_hi, acc[4 * j + 3]);
                }
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
        CUDA_CHECK(cudaFuncSetAttribute(fp8BlockScaled, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
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
        CUDA_CHECK(cudaOccupancyMaxActiveClusters(&max_clusters, fp8BlockScaled, &cfg));
        if (max_clusters < 1) max_clusters = 1;
    }
    const int pieces = (g.M / (kCluster * kBM)) * (g.N / kBN);
    cfg.gridDim = dim3(kCluster * std::min(max_clusters, pieces));
    CUDA_CHECK(cudaLaunchKernelEx(&cfg, fp8BlockScaled, *g.tma_A, *g.tma_Bt, g.C, g.M, g.N, g.K, g.scale_a, g.scale_b));
}

}  // namespace rung14
