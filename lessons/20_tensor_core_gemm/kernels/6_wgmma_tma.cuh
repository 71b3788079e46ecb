// Lesson 20 of the course (the tensor-core GEMM ladder), rung 6 of 11: wgmma fed by TMA and mbarriers.
//
// Before: rung 5: every thread copied its share of each tile with cp.async into the swizzled
//         layout, fenced its writes for the async proxy (fence.proxy.async), and a __syncthreads
//         per tile let the wgmmas read them.
// Here:   the same wgmma, tiles and layout; the copy engine writes them. One warpgroup (4 warps,
//         128 threads) computes a 64 x 128 tile of C with wgmma.mma_async.m64n128k16. The tiles
//         arrive by TMA: thread 0 hands the copy engine a tensor map (built once on the host) and
//         a box coordinate; the engine writes the box into shared memory already in the 128-byte
//         swizzle that wgmma reads, and counts the bytes down on an mbarrier, which the threads
//         wait on. TMA writes through the async proxy, as wgmma reads, so no proxy fence is
//         needed. kStages = 4 buffers: the loads for kStages - 1 tiles ahead run while the
//         tensor cores work. A stage is refilled only after every thread has waited for its wgmmas.
// Lacks:  size and overlap. A 64 x 128 tile uses each loaded element of A 128 times and of B
//         64 times (a 128 x 256 tile: 256 and 128); one warpgroup waits for its own wgmmas before
//         it issues the next tile's, so the tensor cores idle at every step; thread 0 both loads
//         and computes.
// Next:   rung 7: a 128 x 256 tile for two consumer warpgroups
//         (diff kernels/6_wgmma_tma.cuh kernels/7_two_warpgroups.cuh).
// Run:    ./build/bin/tensor_core_gemm --rung=6
// Shapes: M a multiple of 64, N of 128, K of 64 (main.cu asks for multiples of 256, 256, 64).
#pragma once
#include "common.cuh"
#include "common/check.h"

namespace rung6 {

constexpr int kBM = 64, kBN = 128, kBK = 64, kStages = 4;
constexpr int kThreads = 128;                            // one warpgroup
constexpr int kTileA = kBM * kBK, kTileB = kBK * kBN;    // elements per stage
constexpr uint32_t kStageBytes = (kTileA + kTileB) * 2;  // 24 KB of TMA per stage
struct Smem {                                            // every tile 1024-byte aligned (the swizzle atom)
    alignas(1024) bf16 A[kStages][kTileA];               // 64 rows x 128 bytes (K-major)
    alignas(1024) bf16 B[kStages][kTileB];               // 2 boxes of 64 k-rows x 128 bytes (N-major)
    uint64_t full[kStages];                              // "tile landed" barriers
};
constexpr int kSmemBytes = int(sizeof(Smem)) + 1024;  // + room to align the base by hand

__global__ void __launch_bounds__(kThreads)
    wgmmaTma(const __grid_constant__ CUtensorMap tma_A, const __grid_constant__ CUtensorMap tma_B, float* C, int M,
             int N, int K) {
#if defined(PTX_SM90A)
    extern __shared__ uint8_t smem_raw[];
    Smem& s = *reinterpret_cast<Smem*>((uintptr_t(smem_raw) + 1023) & ~uintptr_t(1023));
    const int tid = threadIdx.x;
    const int m0 = blockIdx.y * kBM, n0 = blockIdx.x * kBN;
    const int kTiles = K / kBK;

    if (tid == 0) {
        for (int st = 0; st < kStages; ++st) mbar_init(&s.full[st], 1);  // one arrival: thread 0's expect_tx
        fence_barrier_init();
    }
    __syncthreads();
    // Thread 0 announces the bytes, then asks for A's box (64 x 64) and B's two boxes (64 x 64 each).
    const auto load_tile = [&](int kt) {
        const int st = kt % kStages;
        mbar_arrive_expect_tx(&s.full[st], kStageBytes);
        tma_load(s.A[st], &tma_A, kt * kBK, m0, &s.full[st]);
        tma_load(s.B[st], &tma_B, n0, kt * kBK, &s.full[st]);
        tma_load(s.B[st] + 64 * 64, &tma_B, n0 + 64, kt * kBK, &s.full[st]);
    };
    if (tid == 0)
        for (int kt = 0; kt < kStages && kt < kTiles; ++kt) load_tile(kt);

    float d[kBN / 2] = {};  // the warpgroup's 64 x 128 accumulator: 64 floats a thread
    for (int kt = 0; kt < kTiles; ++kt) {
        const int st = kt % kStages;
        mbar_wait(&s.full[st], (kt / kStages) & 1);  // phase kt / kStages of this stage's barrier
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < kBK / 16; ++kk)  // 4 x m64n128k16: A advances 32 bytes, B 16 k-rows
            wgmma_m64n128k16(d, desc_a(s.A[st] + 16 * kk), desc_b(s.B[st] + 16 * 64 * kk), 1);
        wgmma_commit();
        wgmma_wait<0>();
        fence_acc(d);
        __syncthreads();  // every warp's wgmmas have read stage st: it may be refilled
        if (tid == 0 && kt + kStages < kTiles) load_tile(kt + kStages);
    }
    store_acc(d, C, N, m0, n0, tid);
#else
    __trap();  // not an sm_90a image: main.cu skips this rung
#endif
}

inline void launch(const Gemm& g) {
    static bool raised = false;
    if (!raised) {
        CUDA_CHECK(cudaFuncSetAttribute(wgmmaTma, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
        raised = true;
    }
    const dim3 grid(g.N / kBN, g.M / kBM);
    wgmmaTma<<<grid, kThreads, kSmemBytes>>>(*g.tma_A, *g.tma_B, g.C, g.M, g.N, g.K);
    CUDA_CHECK_LAUNCH();
}

}  // namespace rung6
