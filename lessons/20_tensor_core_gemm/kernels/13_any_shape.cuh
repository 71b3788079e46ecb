// Lesson 20 of the course (the tensor-core GEMM ladder), rung 13 of 15: rung 11 for any M and N.
//
// Before: rung 11 (rung 12 is its FP8 variant): M and N multiples of 256, K of 64, no edge code.
// Here:   any M >= 1 and N >= 1, K a multiple of 8. Three changes, none inside the k loop:
//         - the loads need no masks: TMA's tensor maps carry the real M, N and K, and the
//           elements of a box that lie past them arrive as zeros (counted in the barrier's
//           bytes like any others), so an edge tile and the partial last k-tile multiply zeros;
//         - the counts are ceil-divisions: ceil(M / 128) x ceil(N / 256) tiles, in pieces of
//           two tiles along M, and ceil(K / 64) k-tiles;
//         - the epilogue stores only the rows and columns inside C (store_acc_inside below).
//         The pair of CTAs along M is rung 11's. When ceil(M / 128) is odd, the last row of
//         pieces gives rank 1 a tile wholly past M: it still runs the piece like any other, its
//         A boxes all zeros, its half of B multicast to rank 0, which needs it, its arrivals on
//         both CTAs' empty barriers, and it stores nothing. Skipping its work would save no time
//         (the pair advances in lockstep through the shared stages) and would need a second
//         barrier protocol for that edge.
// Lacks:  TMA reads global rows that start on 16-byte boundaries only: A's row stride (K) must be a
//         multiple of 8 bf16, and so must B's, which problem.cuh gives B by padding its rows
//         (a leading dimension of N rounded up to 8; cuBLAS reads the same storage).
// Next:   rung 14 goes back to rung 12 (FP8) and gives it block scales
//         (diff kernels/12_fp8_per_tensor.cuh kernels/14_fp8_block_scaled.cuh).
// Run:    ./build/bin/tensor_core_gemm --rung=13 --m=4095 --n=4097 --k=4096
// Shapes: any M and N; K a multiple of 8.
#pragma once
#include <algorithm>

#include "common.cuh"
#include "common/check.h"

namespace rung13 {

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

// store_acc (common.cuh) for a tile that may cross C's edges: only rows < M and columns < N are
// written. A float2 needs an 8-byte address, which every row has only when N is even; with N odd
// the two halves of a pair are stored apart.
template <int R>
__device__ __forceinline__ void store_acc_inside(const float (&d)[R], float* C, int M, int N, int row0, int col0,
                                                 int t) {
    const int row = row0 + 16 * (t / 32) + (t % 32) / 4;
    const int col = col0 + 2 * (t % 4);
    const bool pairs = N % 2 == 0;
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // d[4j..4j+1] at `row`, d[4j+2..4j+3] eight rows below
        const int r = row + 8 * h;
        if (r >= M) continue;
        float* out = C + size_t(r) * N;
#pragma unroll
        for (int j = 0; j < R / 4; ++j) {
            const int cj = col + 8 * j;
            if (pairs && cj + 1 < N) {
                *reinterpret_cast<float2*>(out + cj) = make_float2(d[4 * j + 2 * h], d[4 * j + 2 * h + 1]);
            } else {
                if (cj < N) out[cj] = d[4 * j + 2 * h];
                if (cj + 1 < N) out[cj + 1] = d[4 * j + 2 * h + 1];
            }
        }
    }
}

__global__ void __launch_bounds__(kThreads, 1)
    wgmmaAnyShape(const __grid_constant__ CUtensorMap tma_A, const __grid_constant__ CUtensorMap tma_B, float* C, int M,
                  int N, int K) {
#if defined(PTX_SM90A)
    extern __shared__ uint8_t smem_raw[];
    Smem& s = *reinterpret_cast<Smem*>((uintptr_t(smem_raw) + 1023) & ~uintptr_t(1023));
    const int tid = threadIdx.x, wg = tid / 128;
    const uint32_t rank = cluster_rank();
    const int cluster = blockIdx.x / kCluster, clusters = gridDim.x / kCluster;
    const int pieces_m = (M + kCluster * kBM - 1) / (kCluster * kBM), pieces_n = (N + kBN - 1) / kBN;
    const int pieces = pieces_m * pieces_n;
    const int kTiles = (K + kBK - 1) / kBK;  // the last one may be partial: zeros past K in A and B

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
            store_acc_inside(d, C, M, N, m0 + 64 * c, n0, t);
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
        CUDA_CHECK(cudaFuncSetAttribute(wgmmaAnyShape, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
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
        CUDA_CHECK(cudaOccupancyMaxActiveClusters(&max_clusters, wgmmaAnyShape, &cfg));
        if (max_clusters < 1) max_clusters = 1;
    }
    const int pieces = ((g.M + kCluster * kBM - 1) / (kCluster * kBM)) * ((g.N + kBN - 1) / kBN);
    cfg.gridDim = dim3(kCluster * std::min(max_clusters, pieces));
    CUDA_CHECK(cudaLaunchKernelEx(&cfg, wgmmaAnyShape, *g.tma_A, *g.tma_B, g.C, g.M, g.N, g.K));
}

}  // namespace rung13
