// Lesson 20 of the course (the tensor-core GEMM ladder), rung 7 of 11: a 128 x 256 tile, two consumer warpgroups.
//
// Before: rung 6, one warpgroup on a 64 x 128 tile (m64n128k16).
// Here:   a 128 x 256 tile of C for two warpgroups (256 threads); warpgroup w computes rows
//         64w..64w+63 with wgmma.mma_async.m64n256k16 (128 accumulator floats a thread). Per stage
//         TMA brings A as two 64 x 64 boxes and B as four: 48 KB, four stages = 192 KB of shared
//         memory, one block per SM. Each loaded element of A now serves 256 columns and each of B
//         128 rows: twice rung 6's reuse, so half the shared-memory and L2 traffic per flop; and
//         while one warpgroup waits for its wgmmas the other's keep the tensor cores busy.
// Lacks:  the loads are still issued by thread 0 of a computing warpgroup, between its own
//         wgmmas, and every stage waits for a block-wide __syncthreads before it is refilled.
// Next:   rung 8 gives the loads a warpgroup of their own and hands its registers to the others
//         (diff kernels/7_two_warpgroups.cuh kernels/8_warp_specialized.cuh).
// Run:    ./build/bin/tensor_core_gemm --rung=7
// Shapes: M a multiple of 128, N of 256, K of 64 (main.cu asks for multiples of 256, 256, 64).
#pragma once
#include "common.cuh"
#include "common/check.h"

namespace rung7 {

constexpr int kBM = 128, kBN = 256, kBK = 64, kStages = 4;
constexpr int kConsumers = 2;  // warpgroups, 64 rows of C each
constexpr int kThreads = 128 * kConsumers;
constexpr int kTileA = kBM * kBK, kTileB = kBK * kBN;    // elements per stage
constexpr uint32_t kStageBytes = (kTileA + kTileB) * 2;  // 48 KB of TMA per stage
struct Smem {
    alignas(1024) bf16 A[kStages][kTileA];  // 2 boxes of 64 rows x 128 bytes (K-major)
    alignas(1024) bf16 B[kStages][kTileB];  // 4 boxes of 64 k-rows x 128 bytes (N-major)
    uint64_t full[kStages];
};
constexpr int kSmemBytes = int(sizeof(Smem)) + 1024;

__global__ void __launch_bounds__(kThreads, 1)
    wgmmaTwoWarpgroups(const __grid_constant__ CUtensorMap tma_A, const __grid_constant__ CUtensorMap tma_B, float* C,
                       int M, int N, int K) {
#if defined(PTX_SM90A)
    extern __shared__ uint8_t smem_raw[];
    Smem& s = *reinterpret_cast<Smem*>((uintptr_t(smem_raw) + 1023) & ~uintptr_t(1023));
    const int tid = threadIdx.x, wg = tid / 128;
    const int m0 = blockIdx.y * kBM, n0 = blockIdx.x * kBN;
    const int kTiles = K / kBK;

    if (tid == 0) {
        for (int st = 0; st < kStages; ++st) mbar_init(&s.full[st], 1);
        fence_barrier_init();
    }
    __syncthreads();
    const auto load_tile = [&](int kt) {
        const int st = kt % kStages;
        mbar_arrive_expect_tx(&s.full[st], kStageBytes);
        for (int i = 0; i < kBM / 64; ++i) tma_load(s.A[st] + i * 64 * 64, &tma_A, kt * kBK, m0 + 64 * i, &s.full[st]);
        for (int j = 0; j < kBN / 64; ++j) tma_load(s.B[st] + j * 64 * 64, &tma_B, n0 + 64 * j, kt * kBK, &s.full[st]);
    };
    if (tid == 0)
        for (int kt = 0; kt < kStages && kt < kTiles; ++kt) load_tile(kt);

    float d[kBN / 2] = {};  // this warpgroup's 64 x 256 accumulator: 128 floats a thread
    for (int kt = 0; kt < kTiles; ++kt) {
        const int st = kt % kStages;
        mbar_wait(&s.full[st], (kt / kStages) & 1);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < kBK / 16; ++kk)
            wgmma_m64n256k16(d, desc_a(s.A[st] + wg * 64 * 64 + 16 * kk), desc_b(s.B[st] + 16 * 64 * kk), 1);
        wgmma_commit();
        wgmma_wait<0>();
        fence_acc(d);
        __syncthreads();
        if (tid == 0 && kt + kStages < kTiles) load_tile(kt + kStages);
    }
    store_acc(d, C, N, m0 + 64 * wg, n0, tid % 128);
#else
    __trap();
#endif
}

inline void launch(const Gemm& g) {
    static bool raised = false;
    if (!raised) {
        CUDA_CHECK(cudaFuncSetAttribute(wgmmaTwoWarpgroups, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
        raised = true;
    }
    const dim3 grid(g.N / kBN, g.M / kBM);
    wgmmaTwoWarpgroups<<<grid, kThreads, kSmemBytes>>>(*g.tma_A, *g.tma_B, g.C, g.M, g.N, g.K);
    CUDA_CHECK_LAUNCH();
}

}  // namespace rung7
