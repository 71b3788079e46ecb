// Lesson 20 of the course (the tensor-core GEMM ladder), rung 4 of 11: a swizzle and a cp.async pipeline.
//
// Before: rung 3 fed mma.sync from padded shared memory, the tiles copied through registers, one
//         at a time: every warp waited at __syncthreads for the next tile's loads.
// Here:   the same warps, fragments and ldmatrix, with the tiles moved differently:
//         - cp.async copies 16-byte chunks global -> shared without registers, kStages - 1
//           tiles ahead (a multi-stage pipeline: kStages = 3 buffers of 128 x 64 + 64 x 128),
//           so the loads of later tiles run while the tensor cores work on this one;
//         - an XOR swizzle replaces the padding: chunk c of row r is stored at chunk c ^ (r % 8),
//           so the eight rows one ldmatrix reads land in eight different 16-byte bank groups
//           (no bank conflicts, README.md shows the ncu metric) in rows of exactly 128 and 256
//           bytes: the layout TMA and wgmma use on Hopper (rungs 5-6), where padding is not an option.
// Lacks:  mma.sync is a warp instruction with small tiles: on Hopper it tops out near 2/3 of the
//         tensor cores' rate (only wgmma reaches the full rate; this rung reaches about half), and every operand goes through
//         registers (ldmatrix), costing issue slots and register-file bandwidth.
// Next:   rung 5: Hopper's wgmma reads both operands from shared memory, the same threads writing it
//         (diff kernels/4_swizzle_cp_async.cuh kernels/5_wgmma_cp_async.cuh).
// Run:    ./build/bin/tensor_core_gemm --rung=4
// Shapes: M, N multiples of 128 and K a multiple of 64 (no edge code: main.cu rejects others).
#pragma once
#include "common.cuh"
#include "common/check.h"

namespace rung4 {

constexpr int kBM = 128, kBN = 128, kBK = 64, kStages = 3;
constexpr int kWM = 64, kWN = 32;                            // warp tile
constexpr int kThreads = 32 * (kBM / kWM) * (kBN / kWN);     // 8 warps: 2 (M) x 4 (N)
constexpr int kTileA = kBM * kBK, kTileB = kBK * kBN;        // elements per stage
constexpr int kSmemBytes = kStages * (kTileA + kTileB) * 2;  // 96 KB
constexpr int kMultipleMN = 128, kMultipleK = 64;

// Byte offsets of 16-byte chunk c of row r in the swizzled tiles. A: rows of 64 elements
// (128 bytes, 8 chunks); B: rows of 128 elements (256 bytes, 16 chunks; the XOR touches the
// low 3 bits of the chunk index, i.e. stays inside each 128-byte half).
__device__ __forceinline__ uint32_t swz_a(int r, int c) { return r * 128 + ((c ^ (r & 7)) << 4); }
__device__ __forceinline__ uint32_t swz_b(int r, int c) { return r * 256 + ((c ^ (r & 7)) << 4); }

__global__ void __launch_bounds__(kThreads)
    mmaSyncPipelined(const bf16* A, const bf16* B, float* C, int M, int N, int K) {
#if defined(PTX_SM80)
    extern __shared__ __align__(128) uint8_t smem[];
    const uint32_t sA = uint32_t(__cvta_generic_to_shared(smem));  // kStages A tiles, then kStages B tiles
    const uint32_t sB = sA + kStages * kTileA * 2;
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int wm = (warp / (kBN / kWN)) * kWM, wn = (warp % (kBN / kWN)) * kWN;
    const int m0 = blockIdx.y * kBM, n0 = blockIdx.x * kBN;
    const int kTiles = K / kBK;

    // One stage: A tile 128 x 8 chunks and B tile 64 x 16 chunks, 4 + 4 cp.async per thread.
    const auto load_tile = [&](int kt, int stage) {
        const int k0 = kt * kBK;
#pragma unroll
        for (int i = 0; i < kTileA / 8 / kThreads; ++i) {
            const int id = tid + i * kThreads, r = id / 8, c = id % 8;
            cp_async_16(sA + stage * kTileA * 2 + swz_a(r, c), A + size_t(m0 + r) * K + k0 + c * 8);
        }
#pragma unroll
        for (int i = 0; i < kTileB / 8 / kThreads; ++i) {
            const int id = tid + i * kThreads, r = id / 16, c = id % 16;
            cp_async_16(sB + stage * kTileB * 2 + swz_b(r, c), B + size_t(k0 + r) * N + n0 + c * 8);
        }
    };

    float acc[kWM / 16][kWN / 8][4] = {};  // 4 x 4 tiles of m16n8, 4 floats each
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {  // prologue: the first kStages - 1 tiles in flight
        if (s < kTiles) load_tile(s, s);
        cp_async_commit();
    }
    for (int kt = 0; kt < kTiles; ++kt) {
        cp_async_wait<kStages - 2>();  // tile kt has landed (this thread's copies) ...
        __syncthreads();               // ... and everyone's; everyone is also done with tile kt - 1
        if (kt + kStages - 1 < kTiles) load_tile(kt + kStages - 1, (kt + kStages - 1) % kStages);
        cp_async_commit();  // an empty group at the end keeps the wait count right

        const uint32_t a_st = sA + (kt % kStages) * kTileA * 2, b_st = sB + (kt % kStages) * kTileB * 2;
#pragma unroll
        for (int kk = 0; kk < kBK / 16; ++kk) {
            // A fragments: matrix q = lane / 8 holds rows +8*(q&1), k-chunk 2*kk + (q>>1).
            uint32_t a[kWM / 16][4];
#pragma unroll
            for (int i = 0; i < kWM / 16; ++i) {
                const int r = wm + 16 * i + (lane % 8) + 8 * ((lane / 8) & 1), c = 2 * kk + lane / 16;
                ldmatrix_x4(a[i], a_st + swz_a(r, c));
            }
            // B fragments, transposed: matrix q holds k-rows +8*(q&1) of n-chunk +(q>>1); one x4
            // gives two n8 tiles (registers 0,1 for the first, 2,3 for the second).
            uint32_t b[kWN / 8][2];
#pragma unroll
            for (int j = 0; j < kWN / 16; ++j) {
                const int r = 16 * kk + (lane % 8) + 8 * ((lane / 8) & 1), c = (wn + 16 * j) / 8 + lane / 16;
                uint32_t t[4];
                ldmatrix_x4_trans(t, b_st + swz_b(r, c));
                b[2 * j][0] = t[0];
                b[2 * j][1] = t[1];
                b[2 * j + 1][0] = t[2];
                b[2 * j + 1][1] = t[3];
            }
#pragma unroll
            for (int i = 0; i < kWM / 16; ++i)
#pragma unroll
                for (int j = 0; j < kWN / 8; ++j) mma_m16n8k16(acc[i][j], a[i], b[j][0], b[j][1]);
        }
    }
    cp_async_wait<0>();

    // C fragment of m16n8: lane holds (row lane/4, cols 2*(lane%4) + {0,1}) and the same 8 rows below.
#pragma unroll
    for (int i = 0; i < kWM / 16; ++i)
#pragma unroll
        for (int j = 0; j < kWN / 8; ++j) {
            const int row = m0 + wm + 16 * i + lane / 4, col = n0 + wn + 8 * j + 2 * (lane % 4);
            *reinterpret_cast<float2*>(C + size_t(row) * N + col) = make_float2(acc[i][j][0], acc[i][j][1]);
            *reinterpret_cast<float2*>(C + size_t(row + 8) * N + col) = make_float2(acc[i][j][2], acc[i][j][3]);
        }
#else
    __trap();
#endif
}

inline void launch(const Gemm& g) {
    static bool raised = false;  // above 48 KB of dynamic shared memory only after opting in
    if (!raised) {
        CUDA_CHECK(cudaFuncSetAttribute(mmaSyncPipelined, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
        raised = true;
    }
    const dim3 grid(g.N / kBN, g.M / kBM);
    mmaSyncPipelined<<<grid, kThreads, kSmemBytes>>>(g.A, g.B, g.C, g.M, g.N, g.K);
    CUDA_CHECK_LAUNCH();
}

}  // namespace rung4
