// Lesson 20 of the course (the tensor-core GEMM ladder), rung 9 of 11: a cluster of two CTAs, B multicast.
//
// Before: rung 8: a producer warpgroup, two consumers, each CTA loading all of its A and B.
// Here:   thread-block clusters (Hopper): two CTAs that run at the same time on neighbouring
//         SMs and can touch each other's shared memory. The pair takes two 128 x 256 tiles of C
//         one above the other, so both need the same 64 x 256 slice of B at every step: each CTA
//         loads half of it (two 64 x 64 boxes) with TMA *multicast*, which writes the boxes into
//         both CTAs' shared memory and counts the bytes on both CTAs' full barriers. B's L2 reads
//         halve. The price is cross-CTA bookkeeping: a stage may be refilled only when the
//         consumers of BOTH CTAs are done with it, so every consumer warp arrives on the empty
//         barrier of each CTA (mapa + mbarrier.arrive.shared::cluster: 16 arrivals per phase), and
//         both CTAs sync the whole cluster after initialising their barriers and before exiting
//         (no CTA may leave while the other can still write into its shared memory).
// Lacks:  one CTA per tile: the grid's last wave leaves SMs idle, and every CTA pays its
//         prologue (barrier set-up, the first loads) and epilogue without overlap.
// Next:   rung 10: a persistent grid with a tile scheduler
//         (diff kernels/9_cluster_multicast.cuh kernels/10_persistent.cuh).
// Run:    ./build/bin/tensor_core_gemm --rung=9
// Shapes: M a multiple of 256 (two CTAs of 128 rows), N of 256, K of 64.
#pragma once
#include "common.cuh"
#include "common/check.h"

namespace rung9 {

constexpr int kBM = 128, kBN = 256, kBK = 64, kStages = 4;
constexpr int kConsumers = 2;
constexpr int kCluster = 2;  // CTAs per cluster, along M
constexpr int kThreads = 128 * (1 + kConsumers);
constexpr int kTileA = kBM * kBK, kTileB = kBK * kBN;
constexpr uint32_t kStageBytes = (kTileA + kTileB) * 2;  // what lands in EACH CTA per stage
struct Smem {
    alignas(1024) bf16 A[kStages][kTileA];
    alignas(1024) bf16 B[kStages][kTileB];
    uint64_t full[kStages];
    uint64_t empty[kStages];
};
constexpr int kSmemBytes = int(sizeof(Smem)) + 1024;

__global__ void __launch_bounds__(kThreads, 1)
    wgmmaCluster(const __grid_constant__ CUtensorMap tma_A, const __grid_constant__ CUtensorMap tma_B, float* C, int M,
                 int N, int K) {
#if defined(PTX_SM90A)
    extern __shared__ uint8_t smem_raw[];
    Smem& s = *reinterpret_cast<Smem*>((uintptr_t(smem_raw) + 1023) & ~uintptr_t(1023));
    const int tid = threadIdx.x, wg = tid / 128;
    const uint32_t rank = cluster_rank();                    // 0 or 1 = blockIdx.x % 2
    const int m0 = blockIdx.x * kBM, n0 = blockIdx.y * kBN;  // x runs along M: the pair shares n0
    const int kTiles = K / kBK;

    if (tid == 0) {
        for (int st = 0; st < kStages; ++st) {
            mbar_init(&s.full[st], 1);
            mbar_init(&s.empty[st], 4 * kConsumers * kCluster);  // every consumer warp of both CTAs
        }
        fence_barrier_init();
    }
    cluster_sync();  // both CTAs' barriers exist before anyone multicasts or arrives remotely

    if (wg == 0) {
        setmaxnreg_dec<40>();
        if (tid == 0) {
            for (int kt = 0; kt < kTiles; ++kt) {
                const int st = kt % kStages;
                mbar_wait(&s.empty[st], ((kt / kStages) & 1) ^ 1);  // free in BOTH CTAs
                mbar_arrive_expect_tx(&s.full[st], kStageBytes);    // own A + all of B (half from the peer)
                for (int i = 0; i < kBM / 64; ++i)
                    tma_load(s.A[st] + i * 64 * 64, &tma_A, kt * kBK, m0 + 64 * i, &s.full[st]);
                for (int j = rank * 2; j < rank * 2 + 2; ++j)  // this CTA's half of B, to both CTAs
                    tma_load_multicast(s.B[st] + j * 64 * 64, &tma_B, n0 + 64 * j, kt * kBK, &s.full[st], 0b11);
            }
        }
    } else {
        setmaxnreg_inc<232>();
        const int c = wg - 1, t = tid % 128;
        float d[kBN / 2] = {};
        for (int kt = 0; kt < kTiles; ++kt) {
            const int st = kt % kStages;
            mbar_wait(&s.full[st], (kt / kStages) & 1);
            wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < kBK / 16; ++kk)
                wgmma_m64n256k16(d, desc_a(s.A[st] + c * 64 * 64 + 16 * kk), desc_b(s.B[st] + 16 * 64 * kk), 1);
            wgmma_commit();
            wgmma_wait<0>();
            fence_acc(d);
            if (t % 32 == 0)
                for (uint32_t r = 0; r < kCluster; ++r) mbar_arrive_cluster(&s.empty[st], r);  // tell both producers
        }
        store_acc(d, C, N, m0 + 64 * c, n0, t);
    }
    cluster_sync();  // the peer may still arrive on our barriers: stay until it is done
#else
    __trap();
#endif
}

inline void launch(const Gemm& g) {
    static bool raised = false;
    if (!raised) {
        CUDA_CHECK(cudaFuncSetAttribute(wgmmaCluster, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
        raised = true;
    }
    // A cluster launch: the grid's x extent must be a multiple of the cluster's.
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = kCluster;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(g.M / kBM, g.N / kBN);
    cfg.blockDim = dim3(kThreads);
    cfg.dynamicSmemBytes = kSmemBytes;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    CUDA_CHECK(cudaLaunchKernelEx(&cfg, wgmmaCluster, *g.tma_A, *g.tma_B, g.C, g.M, g.N, g.K));
}

}  // namespace rung9
