// Lesson 20 of the course (the tensor-core GEMM ladder), rung 8 of 11: a producer warpgroup, register reallocation.
//
// Before: rung 7: two warpgroups that compute, thread 0 of them also loading, a __syncthreads
//         per stage.
// Here:   warp specialization. A third warpgroup (the producer) only issues TMA loads; the two
//         consumer warpgroups only run wgmma. They talk through two mbarriers per stage:
//           full[s]   the producer's expect_tx + TMA bytes: "stage s holds tile k";
//           empty[s]  one arrival per consumer warp (8): "stage s has been read, refill it".
//         Waits use the phase parity: the k-th use of stage s is phase k / kStages; the producer
//         waits on the parity before it (a fresh barrier counts as having completed it), so the
//         first kStages loads go out at once. No __syncthreads in the main loop.
//         setmaxnreg: the producer needs few registers, the consumers many (128 accumulators).
//         The block starts at 168 a thread (65536 / 384, rounded down to a multiple of 8); the
//         producer drops to 40 and each consumer rises to 232 (128*40 + 256*232 <= 65536).
// Lacks:  each CTA loads its own copy of B although the CTA next to it needs the same tile.
// Next:   rung 9 pairs CTAs in a cluster and multicasts B to both
//         (diff kernels/8_warp_specialized.cuh kernels/9_cluster_multicast.cuh).
// Run:    ./build/bin/tensor_core_gemm --rung=8
// Shapes: M a multiple of 128, N of 256, K of 64 (main.cu asks for multiples of 256, 256, 64).
#pragma once
#include "common.cuh"
#include "common/check.h"

namespace rung8 {

constexpr int kBM = 128, kBN = 256, kBK = 64, kStages = 4;
constexpr int kConsumers = 2;
constexpr int kThreads = 128 * (1 + kConsumers);  // producer warpgroup + 2 consumers
constexpr int kTileA = kBM * kBK, kTileB = kBK * kBN;
constexpr uint32_t kStageBytes = (kTileA + kTileB) * 2;
struct Smem {
    alignas(1024) bf16 A[kStages][kTileA];
    alignas(1024) bf16 B[kStages][kTileB];
    uint64_t full[kStages];
    uint64_t empty[kStages];
};
constexpr int kSmemBytes = int(sizeof(Smem)) + 1024;

#if defined(PTX_SM90A)
// The wgmma descriptor of one k16 slice of B (common.cuh's desc_b, written out field by field).
// B's stage holds four 64 x 64 boxes (columns n0 + 64j of a 64-row k-tile), each as TMA wrote it:
// 64 k-rows of 128 bytes, 128-byte swizzle, 1024-byte aligned.
__device__ __forceinline__ uint64_t b_descriptor(const bf16* slice) {
    // EXERCISE 5 BEGIN: B's descriptor at `slice`: start address, LBO, SBO (each bytes >> 4), swizzle mode
    // HINT: B is N-major: a core matrix is 8 k-rows of 8 contiguous n; a swizzled 128-byte row holds 64 n
    // HINT: LBO (bits 16-29): the step along N to the next 64 columns; SBO (bits 32-45): to the next 8 k-rows
    // HINT: start address (bits 0-13): smem_addr(slice) >> 4; the 128-byte swizzle is 1 in bits 62-63
    // STUB: return 0;
    const uint64_t start = (smem_addr(slice) & 0x3FFFF) >> 4;
    const uint64_t lbo = 8192 >> 4;  // next 64 columns of N: the next 64 x 64 box, 64 * 128 bytes on
    const uint64_t sbo = 1024 >> 4;  // next 8 k-rows: 8 * 128 bytes on, one swizzle atom
    return start | (lbo << 16) | (sbo << 32) | (uint64_t(1) << 62);
    // EXERCISE 5 END
}
#endif

__global__ void __launch_bounds__(kThreads, 1)
    wgmmaWarpSpecialized(const __grid_constant__ CUtensorMap tma_A, const __grid_constant__ CUtensorMap tma_B, float* C,
                         int M, int N, int K) {
#if defined(PTX_SM90A)
    extern __shared__ uint8_t smem_raw[];
    Smem& s = *reinterpret_cast<Smem*>((uintptr_t(smem_raw) + 1023) & ~uintptr_t(1023));
    const int tid = threadIdx.x, wg = tid / 128;
    const int m0 = blockIdx.y * kBM, n0 = blockIdx.x * kBN;
    const int kTiles = K / kBK;

    if (tid == 0) {
        for (int st = 0; st < kStages; ++st) {
            mbar_init(&s.full[st], 1);                // the producer's arrive.expect_tx
            mbar_init(&s.empty[st], 4 * kConsumers);  // lane 0 of every consumer warp
        }
        fence_barrier_init();
    }
    __syncthreads();

    if (wg == 0) {  // ---------------- producer
        setmaxnreg_dec<40>();
        if (tid == 0) {
            for (int kt = 0; kt < kTiles; ++kt) {
                const int st = kt % kStages;
                // EXERCISE 6 BEGIN: the parity of empty[st]'s phase the producer waits for in round kt / kStages
                // HINT: phase p of empty[st] completes when its 8 arrivals of round p do; the phase bit then flips
                // HINT: mbar_wait(bar, parity) returns once the last phase of that parity has completed
                // HINT: round r refills what round r - 1 emptied; a fresh barrier counts as having completed phase -1
                // TIMEOUT: 90 an mbarrier phase that never completes: the parity the producer waits on (empty barrier)
                // STUB: const uint32_t empty_parity = 0;
                const uint32_t empty_parity = ((kt / kStages) & 1) ^ 1;
                // EXERCISE 6 END
                mbar_wait(&s.empty[st], empty_parity);  // stage free (first round: at once)
                mbar_arrive_expect_tx(&s.full[st], kStageBytes);
                for (int i = 0; i < kBM / 64; ++i)
                    tma_load(s.A[st] + i * 64 * 64, &tma_A, kt * kBK, m0 + 64 * i, &s.full[st]);
                for (int j = 0; j < kBN / 64; ++j)
                    tma_load(s.B[st] + j * 64 * 64, &tma_B, n0 + 64 * j, kt * kBK, &s.full[st]);
            }
        }
    } else {  // ---------------- consumers: warpgroup 1 takes rows 0-63, warpgroup 2 rows 64-127
        setmaxnreg_inc<232>();
        const int c = wg - 1, t = tid % 128;
        float d[kBN / 2] = {};
        for (int kt = 0; kt < kTiles; ++kt) {
            const int st = kt % kStages;
            mbar_wait(&s.full[st], (kt / kStages) & 1);
            wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < kBK / 16; ++kk)
                wgmma_m64n256k16(d, desc_a(s.A[st] + c * 64 * 64 + 16 * kk), b_descriptor(s.B[st] + 16 * 64 * kk), 1);
            wgmma_commit();
            wgmma_wait<0>();
            fence_acc(d);
            if (t % 32 == 0) mbar_arrive(&s.empty[st]);  // this warp is done reading stage st
        }
        store_acc(d, C, N, m0 + 64 * c, n0, t);
    }
#else
    __trap();
#endif
}

inline void launch(const Gemm& g) {
    static bool raised = false;
    if (!raised) {
        CUDA_CHECK(cudaFuncSetAttribute(wgmmaWarpSpecialized, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
        raised = true;
    }
    const dim3 grid(g.N / kBN, g.M / kBM);
    wgmmaWarpSpecialized<<<grid, kThreads, kSmemBytes>>>(*g.tma_A, *g.tma_B, g.C, g.M, g.N, g.K);
    CUDA_CHECK_LAUNCH();
}

}  // namespace rung8
