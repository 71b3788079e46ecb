// Lesson 20 of the course (the tensor-core GEMM ladder), rung 3 of 11: mma.sync + ldmatrix.
//
// Before: rung 2 used WMMA on padded shared-memory tiles, loaded through registers.
// Here:   the same staging (16-byte loads through registers into padded rows, one tile at a time
//         between two __syncthreads), with WMMA replaced by PTX (common/ptx.cuh) whose register
//         layouts are documented, so the code decides which lane reads which shared-memory word:
//         - ldmatrix.x4 loads four 8 x 8 matrices per instruction straight into the register
//           layout of mma.sync.m16n8k16 (.trans for B, which is stored k-rows);
//         - warp tiling: eight warps of 64 x 32 each hold 4 x 4 m16n8 accumulators (64 floats),
//           on 128 x 128 tiles 64 deep;
//         - rows padded by 16 bytes (144 and 272 bytes), so the eight 16-byte rows one ldmatrix
//           phase reads start in eight different bank groups.
// Lacks:  overlap: every warp waits at __syncthreads while the next tile's loads go through
//         registers, and the tensor cores idle meanwhile. And the padding: Hopper's TMA and
//         wgmma read shared memory in fixed layouts with no room for it.
// Next:   rung 4 swaps the padding for a swizzle and the register copies for a cp.async pipeline
//         (diff kernels/3_mma_sync.cuh kernels/4_swizzle_cp_async.cuh).
// Run:    ./build/bin/tensor_core_gemm --rung=3
// Shapes: M, N multiples of 128 and K a multiple of 64 (no edge code: main.cu rejects others).
#pragma once
#include "common.cuh"
#include "common/check.h"

namespace rung3 {

constexpr int kBM = 128, kBN = 128, kBK = 64, kPad = 8;                  // kPad: bf16 elements per row (16 bytes)
constexpr int kWM = 64, kWN = 32;                                        // warp tile
constexpr int kThreads = 32 * (kBM / kWM) * (kBN / kWN);                 // 8 warps: 2 (M) x 4 (N)
constexpr int kTileA = kBM * (kBK + kPad), kTileB = kBK * (kBN + kPad);  // elements, padded
constexpr int kSmemBytes = (kTileA + kTileB) * 2;                        // 35 KB
constexpr int kMultipleMN = 128, kMultipleK = 64;

// Byte offsets of 16-byte chunk c of row r in the padded tiles. A: rows of 64 elements (128
// bytes, 8 chunks) + 16; B: rows of 128 elements (256 bytes, 16 chunks) + 16. Row r then starts
// 16 r bytes past a multiple of 128, and eight consecutive rows cover all 32 banks.
__device__ __forceinline__ uint32_t pad_a(int r, int c) { return r * (128 + 16) + (c << 4); }
__device__ __forceinline__ uint32_t pad_b(int r, int c) { return r * (256 + 16) + (c << 4); }

__global__ void __launch_bounds__(kThreads) mmaSync(const bf16* A, const bf16* B, float* C, int M, int N, int K) {
#if defined(PTX_SM80)
    extern __shared__ __align__(128) uint8_t smem[];
    const uint32_t sA = uint32_t(__cvta_generic_to_shared(smem));  // the A tile, then the B tile
    const uint32_t sB = sA + kTileA * 2;
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int wm = (warp / (kBN / kWN)) * kWM, wn = (warp % (kBN / kWN)) * kWN;
    const int m0 = blockIdx.y * kBM, n0 = blockIdx.x * kBN;
    const int kTiles = K / kBK;

    // One tile: A 128 x 8 chunks and B 64 x 16 chunks, 4 + 4 16-byte loads per thread, each
    // through a register into shared memory.
    const auto load_tile = [&](int kt) {
        const int k0 = kt * kBK;
#pragma unroll
        for (int i = 0; i < kBM * kBK / 8 / kThreads; ++i) {
            const int id = tid + i * kThreads, r = id / 8, c = id % 8;
            *reinterpret_cast<uint4*>(smem + pad_a(r, c)) =
                *reinterpret_cast<const uint4*>(A + size_t(m0 + r) * K + k0 + c * 8);
        }
#pragma unroll
        for (int i = 0; i < kBK * kBN / 8 / kThreads; ++i) {
            const int id = tid + i * kThreads, r = id / 16, c = id % 16;
            *reinterpret_cast<uint4*>(smem + kTileA * 2 + pad_b(r, c)) =
                *reinterpret_cast<const uint4*>(B + size_t(k0 + r) * N + n0 + c * 8);
        }
    };

    float acc[kWM / 16][kWN / 8][4] = {};  // 4 x 4 tiles of m16n8, 4 floats each
    for (int kt = 0; kt < kTiles; ++kt) {
        load_tile(kt);
        __syncthreads();  // the tile is in shared memory

        const uint32_t a_st = sA, b_st = sB;
#pragma unroll
        for (int kk = 0; kk < kBK / 16; ++kk) {
            // A fragments: matrix q = lane / 8 holds rows +8*(q&1), k-chunk 2*kk + (q>>1).
            uint32_t a[kWM / 16][4];
#pragma unroll
            for (int i = 0; i < kWM / 16; ++i) {
                const int r = wm + 16 * i + (lane % 8) + 8 * ((lane / 8) & 1), c = 2 * kk + lane / 16;
                ldmatrix_x4(a[i], a_st + pad_a(r, c));
            }
            // B fragments, transposed: matrix q holds k-rows +8*(q&1) of n-chunk +(q>>1); one x4
            // gives two n8 tiles (registers 0,1 for the first, 2,3 for the second).
            uint32_t b[kWN / 8][2];
#pragma unroll
            for (int j = 0; j < kWN / 16; ++j) {
                const int r = 16 * kk + (lane % 8) + 8 * ((lane / 8) & 1), c = (wn + 16 * j) / 8 + lane / 16;
                uint32_t t[4];
                ldmatrix_x4_trans(t, b_st + pad_b(r, c));
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
        __syncthreads();  // every warp is done with the tile before the next overwrites it
    }

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

inline void launch(const Gemm& g) {  // 35 KB of dynamic shared memory: within the 48 KB default
    const dim3 grid(g.N / kBN, g.M / kBM);
    mmaSync<<<grid, kThreads, kSmemBytes>>>(g.A, g.B, g.C, g.M, g.N, g.K);
    CUDA_CHECK_LAUNCH();
}

}  // namespace rung3
