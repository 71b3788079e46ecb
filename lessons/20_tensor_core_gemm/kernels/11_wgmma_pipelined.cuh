// Lesson 20 of the course (the tensor-core GEMM ladder), rung 11 of 11: one wgmma group kept in flight.
//
// Before: rung 10: each consumer warpgroup issued a k-step's four wgmmas, then waited for ALL of
//         them (wgmma_wait<0>) before it released the stage and issued the next k-step's: the
//         tensor cores drained at every k-step and waited for the issue of the next one.
// Here:   wgmma_wait<1>: the warpgroup issues k-step kt, then waits only until k-step kt - 1 is
//         done, releases kt - 1's stage, and goes on to issue kt + 1 while kt runs. Two groups
//         chain on the same accumulators (the hardware orders wgmmas that share them). The stage
//         of the last k-step is released after a final wgmma_wait<0>, before the epilogue.
// Lacks:  the epilogue still stores fp32 from registers while that warpgroup's tensor work
//         stops; README.md, "Exercises".
// Next:   rung 12 feeds this kernel FP8 operands; rung 13 takes it, in bf16, to any M and N
//         (diff kernels/11_wgmma_pipelined.cuh kernels/13_any_shape.cuh).
// Run:    ./build/bin/tensor_core_gemm --rung=11
// Shapes: M a multiple of 256, N of 256, K of 64.
#pragma once
#include <algorithm>

#include "common.cuh"
#include "common/check.h"

namespace rung11 {

constexpr int kBM = 128, kBN = 256, kBK = 64, kStages = 4;
constexpr int kConsumers = 2;
constexpr int kCluster = 2;
constexpr int kThreads = 128 * (1 + kConsumers);
constexpr int kTileA = kBM * kBK, kTileB = kBK * kBN;
constexpr uint32_t kStageBytes = (kTileA + kTileB) * 2;
constexpr int kGroupM = 8;  // rows of pieces per scheduling group
struct Smem {
    alignas(1024) bf16 A[kStages][kTileA];
    alignas(1024) bf16 B[kStages][kTileB];
    uint64_t full[kStages];
    uint64_t empty[kStages];
};
constexpr int kSmemBytes = int(sizeof(Smem)) + 1024;

// Piece p (of pieces_m x pieces_n pieces of 256 x 256) -> its row and column, grouped along M.
__device__ __forceinline__ void piece_coords(int p, int pieces_m, int pieces_n, int& pm, int& pn) {
    const int per_group = kGroupM * pieces_n;
    const int first = (p / per_group) * kGroupM;
    const int rows = min(pieces_m - first, kGroupM);
    pm = first + (p % per_group) % rows;
    pn = (p % per_group) / rows;
}

__global__ void __launch_bounds__(kThreads, 1)
    wgmmaPipelined(const __grid_constant__ CUtensorMap tma_A, const __grid_constant__ CUtensorMap tma_B, float* C,
                   int M, int N, int K) {
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
                        tma_load(s.A[st] + i * 64 * 64, &tma_A, kt * kBK, m0 + 64 * i, &s.full[st]);
                    for (int j = rank * 2; j < rank * 2 + 2; ++j)
                        tma_load_multicast(s.B[st] + j * 64 * 64, &tma_B, n0 + 64 * j, kt * kBK, &s.full[st], 0b11);
                }
            }
        }
    } else {
        setmaxnreg_inc<232>();
        const int c = wg - 1, t = tid % 128;
        int it = 0;  // the same count as the producer's
        float d[kBN / 2];
        for (int p = cluster; p < pieces; p += clusters) {
            int pm, pn;
            piece_coords(p, pieces_m, pieces_n, pm, pn);
            const int m0 = pm * kCluster * kBM + rank * kBM, n0 = pn * kBN;
#pragma unroll
            for (int i = 0; i < kBN / 2; ++i) d[i] = 0.0f;
            for (int kt = 0; kt < kTiles; ++kt, ++it) {
                const int st = it % kStages;
                mbar_wait(&s.full[st], (it / kStages) & 1);
                wgmma_fence();
#pragma unroll
                for (int kk = 0; kk < kBK / 16; ++kk)
                    wgmma_m64n256k16(d, desc_a(s.A[st] + c * 64 * 64 + 16 * kk), desc_b(s.B[st] + 16 * 64 * kk), 1);
                wgmma_commit();
                wgmma_wait<1>();  // k-step kt - 1 is done (kt may still run): release its stage
                if (kt > 0 && t % 32 == 0)
                    for (uint32_t r = 0; r < kCluster; ++r) mbar_arrive_cluster(&s.empty[(it - 1) % kStages], r);
            }
            wgmma_wait<0>();  // the last k-step
            fence_acc(d);
            if (t % 32 == 0)
                for (uint32_t r = 0; r < kCluster; ++r) mbar_arrive_cluster(&s.empty[(it - 1) % kStages], r);
            // Exercise 4 of the handout: stage the accumulators in shared memory and write C with a TMA store
            store_acc(d, C, N, m0 + 64 * c, n0, t);
        }
    }
    cluster_sync();
#else
    __trap();
#endif
}

inline void launch(const Gemm& g) {
    static bool raised = false;
    if (!raised) {
        CUDA_CHECK(cudaFuncSetAttribute(wgmmaPipelined, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
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
        CUDA_CHECK(cudaOccupancyMaxActiveClusters(&max_clusters, wgmmaPipelined, &cfg));
        if (max_clusters < 1) max_clusters = 1;
    }
    const int pieces = (g.M / (kCluster * kBM)) * (g.N / kBN);
    cfg.gridDim = dim3(kCluster * std::min(max_clusters, pieces));
    CUDA_CHECK(cudaLaunchKernelEx(&cfg, wgmmaPipelined, *g.tma_A, *g.tma_B, g.C, g.M, g.N, g.K));
}

}  // namespace rung11
