// Lesson 20 of the course (the tensor-core GEMM ladder), rung 5 of 11: wgmma from thread-written shared memory.
//
// Before: rung 4 moved every operand through registers with ldmatrix and issued one warp-wide
//         mma.sync (m16n8k16) per 16 x 8 piece.
// Here:   Hopper's MMA (sm_90a), fed the Ampere way. One warpgroup (4 warps, 128 threads)
//         computes a 64 x 128 tile of C with wgmma.mma_async.m64n128k16: both operands come
//         straight from shared memory through 64-bit descriptors (desc_a, desc_b; README.md
//         derives their fields), the accumulators (64 floats a thread) stay in registers. The
//         threads still copy the tiles with cp.async as in rung 4, kStages tiles ahead, but
//         now into the layout the descriptors describe: 128-byte rows in the 128-byte swizzle,
//         B as two 64-column boxes. wgmma reads shared memory through the async proxy, which
//         does not see the threads' (generic-proxy) writes in order: each thread fences its
//         copies with fence.proxy.async before the barrier that lets the wgmmas go.
// Lacks:  the copies still take every thread's issue slots, address arithmetic and a
//         __syncthreads per tile; and one warpgroup waits for its own wgmmas before it issues
//         the next tile's, so the tensor cores idle at every step.
// Next:   rung 6: the copy engine (TMA) writes the same layout, counted on mbarriers
//         (diff kernels/5_wgmma_cp_async.cuh kernels/6_wgmma_tma.cuh).
// Run:    ./build/bin/tensor_core_gemm --rung=5
// Shapes: M a multiple of 64, N of 128, K of 64 (main.cu asks for multiples of 256, 256, 64).
#pragma once
#include "common.cuh"
#include "common/check.h"

namespace rung5 {

constexpr int kBM = 64, kBN = 128, kBK = 64, kStages = 4;
constexpr int kThreads = 128;                          // one warpgroup
constexpr int kTileA = kBM * kBK, kTileB = kBK * kBN;  // elements per stage
struct Smem {                                          // every tile 1024-byte aligned (the swizzle atom)
    alignas(1024) bf16 A[kStages][kTileA];             // 64 rows x 128 bytes (K-major)
    alignas(1024) bf16 B[kStages][kTileB];             // 2 boxes of 64 k-rows x 128 bytes (N-major)
};
constexpr int kSmemBytes = int(sizeof(Smem)) + 1024;  // + room to align the base by hand

// Byte offset of 16-byte chunk c of row r in a tile of 128-byte rows, in the 128-byte swizzle that
// TMA writes (CU_TENSOR_MAP_SWIZZLE_128B) and the descriptors name (mode 1): chunk c ^ (r % 8).
// The pattern repeats every 8 rows (1024 bytes, an atom): the tiles are 1024-byte aligned.
__device__ __forceinline__ uint32_t swz128(int r, int c) { return r * 128 + ((c ^ (r & 7)) << 4); }

__global__ void __launch_bounds__(kThreads) wgmmaCpAsync(const bf16* A, const bf16* B, float* C, int M, int N, int K) {
#if defined(PTX_SM90A)
    extern __shared__ uint8_t smem_raw[];
    Smem& s = *reinterpret_cast<Smem*>((uintptr_t(smem_raw) + 1023) & ~uintptr_t(1023));
    const int tid = threadIdx.x;
    const int m0 = blockIdx.y * kBM, n0 = blockIdx.x * kBN;
    const int kTiles = K / kBK;

    // Every thread copies its share of a stage: A's 64 rows x 8 chunks (4 a thread) and B's
    // 64 k-rows x 16 chunks (8 a thread), chunk c of a B row into box c / 8, 8192 bytes apart.
    const auto load_tile = [&](int kt) {
        const int st = kt % kStages, k0 = kt * kBK;
        const uint32_t a = smem_addr(s.A[st]), b = smem_addr(s.B[st]);
#pragma unroll
        for (int i = 0; i < kTileA / 8 / kThreads; ++i) {
            const int id = tid + i * kThreads, r = id / 8, c = id % 8;
            cp_async_16(a + swz128(r, c), A + size_t(m0 + r) * K + k0 + c * 8);
        }
#pragma unroll
        for (int i = 0; i < kTileB / 8 / kThreads; ++i) {
            const int id = tid + i * kThreads, r = id / 16, c = id % 16;
            cp_async_16(b + (c / 8) * 64 * 128 + swz128(r, c % 8), B + size_t(k0 + r) * N + n0 + c * 8);
        }
    };
    for (int kt = 0; kt < kStages; ++kt) {  // one commit group per tile, empty past the last
        if (kt < kTiles) load_tile(kt);
        cp_async_commit();
    }

    float d[kBN / 2] = {};  // the warpgroup's 64 x 128 accumulator: 64 floats a thread
    for (int kt = 0; kt < kTiles; ++kt) {
        const int st = kt % kStages;
        cp_async_wait<kStages - 1>();  // this thread's copies of tile kt have landed ...
        fence_proxy_async();           // ... where the async proxy, which wgmma reads through, sees them
        __syncthreads();               // ... and everyone's
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < kBK / 16; ++kk)  // 4 x m64n128k16: A advances 32 bytes, B 16 k-rows
            wgmma_m64n128k16(d, desc_a(s.A[st] + 16 * kk), desc_b(s.B[st] + 16 * 64 * kk), 1);
        wgmma_commit();
        wgmma_wait<0>();
        fence_acc(d);
        __syncthreads();  // every warp's wgmmas have read stage st: it may be refilled
        if (kt + kStages < kTiles) load_tile(kt + kStages);
        cp_async_commit();
    }
    store_acc(d, C, N, m0, n0, tid);
#else
    __trap();  // not an sm_90a image: main.cu skips this rung
#endif
}

inline void launch(const Gemm& g) {
    static bool raised = false;
    if (!raised) {
        CUDA_CHECK(cudaFuncSetAttribute(wgmmaCpAsync, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
        raised = true;
    }
    const dim3 grid(g.N / kBN, g.M / kBM);
    wgmmaCpAsync<<<grid, kThreads, kSmemBytes>>>(g.A, g.B, g.C, g.M, g.N, g.K);
    CUDA_CHECK_LAUNCH();
}

}  // namespace rung5
