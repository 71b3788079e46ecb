// Lesson 20 of the course (the tensor-core GEMM ladder), rung 12 of 15: FP8 operands, one scale per tensor.
//
// Before: rung 11: bf16 A (M x K) and B (K x N), wgmma k = 16, B read N-major.
// Here:   A and B in FP8 E4M3, one byte an element, each tensor quantized by the host with one
//         scale (its amax / 448): A stays M x K, B is stored K-major as B^T (N x K), because
//         wgmma reads 8-bit operands K-major only. A 128-byte row of the swizzle now holds 128
//         values of K, so a k-tile is 128 deep (kBK) with the same bytes per stage as rung 11,
//         and each wgmma (m64n256k32) takes 32 of them: four per k-tile, as before. B's
//         descriptor becomes A's (K-major rows, 8-row atoms 1024 bytes apart). The fp32
//         accumulators hold sum(a_q b_q) of the quantized codes; the epilogue multiplies them by
//         sa * sb before the store. Everything else (the producer, the cluster of 2 with B
//         multicast, the persistent schedule, one wgmma group in flight) is rung 11's.
// Lacks:  one scale for a whole tensor: an outlier anywhere shrinks every other value's share
//         of E4M3's range; README.md, "Rung 12".
// Next:   rung 13 goes back to rung 11 (bf16) and takes it to any M and N
//         (diff kernels/11_wgmma_pipelined.cuh kernels/13_any_shape.cuh).
// Run:    ./build/bin/tensor_core_gemm --rung=12
// Shapes: M a multiple of 256, N of 256, K of 128.
#pragma once
#include <algorithm>

#include "common.cuh"
#include "common/check.h"

namespace rung12 {

constexpr int kBM = 128, kBN = 256, kBK = 128, kStages = 4;  // kBK: FP8 values, 128 bytes
constexpr int kConsumers = 2;
constexpr int kCluster = 2;
constexpr int kThreads = 128 * (1 + kConsumers);
constexpr int kTileA = kBM * kBK, kTileB = kBN * kBK;  // bytes
constexpr uint32_t kStageBytes = kTileA + kTileB;
constexpr int kBox = 64 * 128;  // one TMA box: 64 rows of 128 bytes
constexpr int kGroupM = 8;      // rows of pieces per scheduling group
struct Smem {
    alignas(1024) uint8_t A[kStages][kTileA];  // E4M3 codes, K-major: 128 rows of 128 k-values
    alignas(1024) uint8_t B[kStages][kTileB];  // E4M3 codes, K-major: 256 rows (n) of 128 k-values
    uint64_t full[kStages];
    uint64_t empty[kStages];
};
constexpr int kSmemBytes = int(sizeof(Smem)) + 1024;

#if defined(PTX_SM90A)
// K-major operand in the 128-byte swizzle, A's tile or B^T's: rows of 128 bytes, 8-row atoms
// 1024 bytes apart (SBO); LBO unused (a k-step of 32 bytes stays inside one swizzled row).
__device__ __forceinline__ uint64_t desc_k_major(const uint8_t* tile) { return make_desc(tile, 16, 1024); }

// D (64 x 256 fp32) = A (64 x 32 E4M3, K-major) * B (32 x 256 E4M3, from B^T K-major) + (scale_d ? D : 0).
// 8-bit wgmma has no transpose operands: both tiles must be K-major.
__device__ __forceinline__ void wgmma_m64n256k32_e4m3(float (&d)[128], uint64_t desc_a, uint64_t desc_b, int scale_d) {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3 "
        "{" PTX_WGMMA_D64 ", " PTX_WGMMA_D64_HI
        "}, "
        "%128, %129, p, 1, 1;\n"  // scale A, B: 1 (the per-tensor scales come in the epilogue)
        "}\n"
        : PTX_WGMMA_ACC64(0), PTX_WGMMA_ACC64(64)
        : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}
#endif

// Piece p (of pieces_m x pieces_n pieces of 256 x 256) -> its row and column, grouped along M.
__device__ __forceinline__ void piece_coords(int p, int pieces_m, int pieces_n, int& pm, int& pn) {
    const int per_group = kGroupM * pieces_n;
    const int first = (p / per_group) * kGroupM;
    const int rows = min(pieces_m - first, kGroupM);
    pm = first + (p % per_group) % rows;
    pn = (p % per_group) / rows;
}

__global__ void __launch_bounds__(kThreads, 1)
    fp8PerTensor(const __grid_constant__ CUtensorMap tma_A, const __grid_constant__ CUtensorMap tma_Bt, float* C, int M,
                 int N, int K, float scale) {
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
                    // B^T's rows are n: box j is rows n0 + 64j .. + 63, at column (k) kt * kBK
                    for (int j = rank * 2; j < rank * 2 + 2; ++j)
                        tma_load_multicast(s.B[st] + j * kBox, &tma_Bt, kt * kBK, n0 + 64 * j, &s.full[st], 0b11);
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
                for (int kk = 0; kk < kBK / 32; ++kk)  // 32 k-values = 32 bytes along both rows
                    wgmma_m64n256k32_e4m3(d, desc_k_major(s.A[st] + c * kBox + 32 * kk),
                                          desc_k_major(s.B[st] + 32 * kk), 1);
                wgmma_commit();
                wgmma_wait<1>();  // k-step kt - 1 is done (kt may still run): release its stage
                if (kt > 0 && t % 32 == 0)
                    for (uint32_t r = 0; r < kCluster; ++r) mbar_arrive_cluster(&s.empty[(it - 1) % kStages], r);
            }
            wgmma_wait<0>();  // the last k-step
            fence_acc(d);
            if (t % 32 == 0)
                for (uint32_t r = 0; r < kCluster; ++r) mbar_arrive_cluster(&s.empty[(it - 1) % kStages], r);
                    // The two per-tensor scales, once per element: C = sa * sb * sum(a_q b_q)
#pragma unroll
            for (int i = 0; i < kBN / 2; ++i) d[i] *= scale;
            store_acc(d, C, N, m0 + 64 * c, n0, t);
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
        CUDA_CHECK(cudaFuncSetAttribute(fp8PerTensor, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
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
        CUDA_CHECK(cudaOccupancyMaxActiveClusters(&max_clusters, fp8PerTensor, &cfg));
        if (max_clusters < 1) max_clusters = 1;
    }
    const int pieces = (g.M / (kCluster * kBM)) * (g.N / kBN);
    cfg.gridDim = dim3(kCluster * std::min(max_clusters, pieces));
    CUDA_CHECK(cudaLaunchKernelEx(&cfg, fp8PerTensor, *g.tma_A, *g.tma_Bt, g.C, g.M, g.N, g.K, g.scale));
}

}  // namespace rung12
