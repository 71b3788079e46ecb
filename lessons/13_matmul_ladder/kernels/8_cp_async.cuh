// Lesson 13 of the course (the SGEMM ladder), rung 8 of 18: warp tiles + a cp.async pipeline.
// Run this rung alone: ./build/bin/matmul_ladder --rung=8   (lesson 13 of the course, 00-23)
//
// Before: rung 7 staged the next tile through registers (24 per thread, live
//         during the FMAs) in two shared stages, and each thread's stores waited
//         for its loads.
// Here:   cp.async copies global -> shared without passing through registers, so
//         kStages-1 tiles are in flight while the FMAs run on the current one; the
//         tiles, warp and lane layout, fragment double buffer and barrier placement
//         are rung 7's. A template over its tile sizes (--sweep times 13 of them).
//         The default, 128 x 256 x 16, warp 64 x 64, lane 16 x 8, 3 stages, reaches
//         about 93% of cuBLAS on an H200 (README.md).
// Lacks:  the last 7% to cuBLAS. Nsight Compute (README.md, "Rungs 11 to 13") shows its
//         warps issuing in 77% of the cycles against cuBLAS's 87%: they stall on the
//         burst of copies at the top of each tile, at its barrier and at FFMA dispatch.
// Next:   rung 9 goes back to rung 6 and widens its tile to 128 x 256 with 8 x 16
//         outputs per thread, register-staged loads and no cp.async
//         (diff kernels/6_double_buffered.cuh kernels/9_wide_tile.cuh); rung 11
//         grows this rung (diff kernels/8_cp_async.cuh kernels/11_k32_tile.cuh).
// Run:    ./build/bin/matmul_ladder --rung=8        (--sweep: all 13 configurations)
#pragma once
#include <string>

#include "common.cuh"
#include "common/check.h"

namespace rung8 {

// `dst` is a shared-memory address (__cvta_generic_to_shared), computed once per thread.
// cp.async exists from sm_80 (Ampere) on; older GPUs (Turing) get plain,
// synchronous copies with the same zero-fill, so the file builds for every
// architecture (the __syncthreads after each stage orders them all the same).
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
__device__ __forceinline__ void cp_async_4(unsigned dst, const float* src, bool valid) {  // zero-fills if !valid
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 4 : 0));
}
__device__ __forceinline__ void cp_async_16(unsigned dst, const float* src,
                                            int src_bytes) {  // zero-fills past src_bytes
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int PENDING>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING) : "memory");
}
#else
__device__ __forceinline__ void cp_async_4(unsigned dst, const float* src, bool valid) {
    float v = valid ? *src : 0.0f;
    asm volatile("st.shared.f32 [%0], %1;\n" ::"r"(dst), "f"(v) : "memory");
}
__device__ __forceinline__ void cp_async_16(unsigned dst, const float* src, int src_bytes) {
    float v[4];
    for (int i = 0; i < 4; ++i) v[i] = (4 * i < src_bytes) ? src[i] : 0.0f;
    asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"r"(dst), "f"(v[0]), "f"(v[1]), "f"(v[2]), "f"(v[3])
                 : "memory");
}
__device__ __forceinline__ void cp_async_commit() {}
template <int PENDING>
__device__ __forceinline__ void cp_async_wait() {}
#endif

template <int BM_, int BN_, int BK_, int WM_, int WN_, int TM_, int TN_, int STAGES_, int MIN_BLOCKS_>
struct WarpTiling {
    static constexpr int kBM = BM_, kBN = BN_, kBK = BK_;  // block tile and k step
    static constexpr int kWM = WM_, kWN = WN_;             // warp tile
    static constexpr int kTM = TM_, kTN = TN_;             // lane tile
    static constexpr int kStages = STAGES_, kMinBlocks = MIN_BLOCKS_;
    static constexpr int kThreads = (kBM / kWM) * (kBN / kWN) * 32;
    static constexpr int kLM = kWM / kTM, kLN = kWN / kTN;  // lanes of a warp along M and N
    static constexpr int kLDA = kBM + 4, kLDB = kBN;        // shared row lengths (A transposed and padded)
    static constexpr int kStageFloats = kBK * (kLDA + kLDB);
    static constexpr int kSmemBytes = kStages * kStageFloats * int(sizeof(float));
    static_assert(kLM * kLN == 32, "a warp's lanes must tile the warp tile");
    static_assert(kTM % 4 == 0 && kTN % 4 == 0, "lane tiles are made of 4 x 4 sub-tiles");
    static_assert(kBM % kWM == 0 && kBN % kWN == 0 && kBM % 32 == 0, "warp tiles must tile the block tile");
    // Copy plan: A in runs of 8 consecutive k per row, kAStep rows apart; B in float4s, kBStep rows apart.
    static constexpr int kAStep = kThreads / 8, kARows = kBM / kAStep;
    static constexpr int kBStep = kThreads / (kBN / 4), kBRows = kBK / kBStep;
    static_assert(kBK % 8 == 0 && kBM % kAStep == 0 && kThreads % (kBN / 4) == 0 && kBK % kBStep == 0,
                  "tile copies must split evenly over the threads");
    static_assert(kStages >= 2, "a pipeline needs two stages");
};

template <class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kMinBlocks)
    sgemmWarpTiled(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B,
                   float* __restrict__ C) {
    constexpr int kBM = Cfg::kBM, kBN = Cfg::kBN, kBK = Cfg::kBK, kTM = Cfg::kTM, kTN = Cfg::kTN;
    constexpr int kLM = Cfg::kLM, kLN = Cfg::kLN, kLDA = Cfg::kLDA, kLDB = Cfg::kLDB;
    extern __shared__ __align__(16) float smem[];
    const int t = threadIdx.x, warp = t / 32, lane = t % 32;
    const int m0 = blockIdx.y * kBM, n0 = blockIdx.x * kBN;
    const int wm = (warp / (kBN / Cfg::kWN)) * Cfg::kWM, wn = (warp % (kBN / Cfg::kWN)) * Cfg::kWN;  // warp tile origin
    const int lm = (lane / kLN) * 4, ln = (lane % kLN) * 4;  // lane's first sub-tile inside the warp tile
    const bool vecB = N % 4 == 0 && aligned16(B), vecC = N % 4 == 0 && aligned16(C);
    const bool inside = m0 + kBM <= M && n0 + kBN <= N && vecB;  // no edge in M or N, 16-byte B rows

    // This thread's copy plan, fixed for the whole k loop: A elements (row ra + j * kAStep,
    // column ka + 8c) and B float4s (row rb + j * kBStep, columns nb..nb+3) of each tile.
    const int ka = t % 8, ra = t / 8, nb = (t % (kBN / 4)) * 4, rb = t / (kBN / 4);
    const unsigned a_dst = static_cast<unsigned>(__cvta_generic_to_shared(smem + ka * kLDA + ra));
    const unsigned b_dst = static_cast<unsigned>(__cvta_generic_to_shared(smem + kBK * kLDA + rb * kLDB + nb));
    const float* a_src = A + size_t(min(m0 + ra, M - 1)) * K + ka;  // advanced by kBK per tile
    const float* b_src = B + size_t(rb) * N + min(n0 + nb, N - 1);  // advanced by kBK rows per tile
    const int a_step = Cfg::kAStep * K, b_step = Cfg::kBStep * N;   // < 2^31: M, N, K <= 16384

    // Issues the copies of k tile `tile` into the stage at float offset `stage`; zero-filled
    // outside the matrices. A is written transposed (As[k][m]) with 4-byte copies: 8 lanes take 8
    // consecutive k of one row (one 32-byte sector), and the padded row (kBM + 4) puts a warp's 32
    // stores in 32 banks. B keeps its layout and moves 16 bytes per copy.
    auto load = [&](int tile, int stage) {
        const unsigned as = a_dst + 4u * stage, bs = b_dst + 4u * stage;
        const int k0 = tile * kBK;
        if (inside && k0 + kBK <= K) {  // the common case: the whole tile is inside, no checks
#pragma unroll
            for (int c = 0; c < kBK / 8; ++c)
#pragma unroll
                for (int j = 0; j < Cfg::kARows; ++j)
                    cp_async_4(as + 4u * (c * 8 * kLDA + j * Cfg::kAStep), a_src + j * a_step + c * 8, true);
#pragma unroll
            for (int j = 0; j < Cfg::kBRows; ++j)
                cp_async_16(bs + 4u * (j * Cfg::kBStep * kLDB), b_src + j * b_step, 16);
        } else {
#pragma unroll
            for (int c = 0; c < kBK / 8; ++c)  // a tile on an edge: every copy checks its element
#pragma unroll
                for (int j = 0; j < Cfg::kARows; ++j) {
                    const int gm = m0 + ra + j * Cfg::kAStep, gk = k0 + c * 8 + ka;
                    const bool in = gm < M && gk < K;
                    cp_async_4(as + 4u * (c * 8 * kLDA + j * Cfg::kAStep), in ? A + size_t(gm) * K + gk : A, in);
                }
#pragma unroll
            for (int j = 0; j < Cfg::kBRows; ++j) {
                const int gk = k0 + rb + j * Cfg::kBStep, gn = n0 + nb;
                const unsigned dst = bs + 4u * (j * Cfg::kBStep * kLDB);
                if (vecB) {
                    const int valid = gk < K ? min(max(N - gn, 0), 4) : 0;  // floats inside the matrix
                    cp_async_16(dst, valid > 0 ? B + size_t(gk) * N + gn : B, valid * 4);
                } else {
#pragma unroll
                    for (int q = 0; q < 4; ++q) {
                        const bool in = gk < K && gn + q < N;
                        cp_async_4(dst + 4u * q, in ? B + size_t(gk) * N + gn + q : B, in);
                    }
                }
            }
        }
        a_src += kBK;
        b_src += size_t(kBK) * N;
    };

    // Fragments of step k of the stage at float offset `stage`: kTM values of A, kTN of B (LDS.128 each 4).
    auto fragments = [&](int stage, int k, float(&a)[kTM], float(&b)[kTN]) {
        const float* As = smem + stage + k * kLDA + wm + lm;
        const float* Bs = smem + stage + kBK * kLDA + k * kLDB + wn + ln;
#pragma unroll
        for (int i = 0; i < kTM / 4; ++i) put4(&a[4 * i], lds4(As + i * kLM * 4));
#pragma unroll
        for (int j = 0; j < kTN / 4; ++j) put4(&b[4 * j], lds4(Bs + j * kLN * 4));
    };

    float acc[kTM][kTN] = {};
    float a[2][kTM], b[2][kTN];  // register double buffer: step k's fragments feed the FMAs while k+1's load
    const int tiles = (K + kBK - 1) / kBK;
    for (int s = 0; s < Cfg::kStages - 1; ++s) {  // prologue: fill kStages-1 stages
        if (s < tiles) load(s, s * Cfg::kStageFloats);
        cp_async_commit();  // one group per stage, even when empty, so the counting below holds
    }
    constexpr int kLast = (Cfg::kStages - 1) * Cfg::kStageFloats;
    int read = 0, write = kLast;  // float offsets of the stage computed now and of the stage refilled now
    cp_async_wait<Cfg::kStages - 2>();
    __syncthreads();
    fragments(read, 0, a[0], b[0]);
    for (int tile = 0; tile < tiles; ++tile) {
        // Refill the stage of tile-1: every thread is past it (the barrier at the end of tile-1).
        if (tile + Cfg::kStages - 1 < tiles) load(tile + Cfg::kStages - 1, write);
        cp_async_commit();
#pragma unroll
        for (int k = 0; k < kBK; ++k) {
            if (k < kBK - 1) {
                fragments(read, k + 1, a[(k + 1) % 2], b[(k + 1) % 2]);
            } else {  // last step: switch stages before its FMAs, so they hide the next tile's first loads
                cp_async_wait<Cfg::kStages - 2>();  // this thread's copies of tile+1 have landed ...
                __syncthreads();                    // ... and everyone's; and nobody reads stage `read` any more
                read = read == kLast ? 0 : read + Cfg::kStageFloats;
                write = write == kLast ? 0 : write + Cfg::kStageFloats;
                if (tile + 1 < tiles) fragments(read, 0, a[0], b[0]);
            }
#pragma unroll
            for (int i = 0; i < kTM; ++i)
#pragma unroll
                for (int j = 0; j < kTN; ++j) acc[i][j] = fmaf(a[k % 2][i], b[k % 2][j], acc[i][j]);
        }
    }
    cp_async_wait<0>();  // no copy in flight when the block exits

#pragma unroll
    for (int i = 0; i < kTM; ++i) {
        const int r = m0 + wm + (i / 4) * kLM * 4 + lm + i % 4;
        if (r >= M) continue;
#pragma unroll
        for (int j = 0; j < kTN / 4; ++j)
            store4(C + size_t(r) * N, n0 + wn + j * kLN * 4 + ln, N, vecC,
                   make_float4(acc[i][4 * j], acc[i][4 * j + 1], acc[i][4 * j + 2], acc[i][4 * j + 3]));
    }
}

template <class Cfg>
inline void launch(const Gemm& g) {
    static const bool opted_in = [] {  // more than 48 KB of dynamic shared memory needs an opt-in
        CUDA_CHECK(
            cudaFuncSetAttribute(sgemmWarpTiled<Cfg>, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kSmemBytes));
        return true;
    }();
    (void)opted_in;
    sgemmWarpTiled<Cfg><<<dim3(blocks(g.N, Cfg::kBN), blocks(g.M, Cfg::kBM)), Cfg::kThreads, Cfg::kSmemBytes>>>(
        g.M, g.N, g.K, g.A, g.B, g.C);
    CUDA_CHECK_LAUNCH();
}

// The default rung 8, the fastest of the --sweep table at 4096^3 on an H200 (README.md):
// kBM, kBN, kBK, kWM, kWN, kTM, kTN, kStages, kMinBlocks.
using Default = WarpTiling<128, 256, 16, 64, 64, 16, 8, 3, 1>;

// Rung 8 where a block cannot have Default's 74,496 bytes of shared memory (a Turing GPU gives
// 65,536): the same warp and lane tiles with a k step of 8, 37,248 bytes (one of the sweep's).
using Smaller = WarpTiling<128, 256, 8, 64, 64, 16, 8, 3, 1>;

// --sweep (main.cu) times rung 8 in these 13 tile configurations as well.
template <class... Cfg>
struct TileList {};
using SweepTiles = TileList<WarpTiling<128, 128, 8, 64, 32, 8, 8, 2, 2>, WarpTiling<128, 128, 8, 64, 32, 8, 8, 3, 2>,
                            WarpTiling<128, 128, 8, 32, 64, 8, 8, 3, 2>, WarpTiling<128, 128, 16, 64, 32, 8, 8, 3, 2>,
                            WarpTiling<128, 128, 8, 64, 64, 16, 8, 2, 2>, WarpTiling<128, 128, 8, 64, 64, 16, 8, 3, 2>,
                            WarpTiling<128, 128, 8, 64, 64, 16, 8, 4, 2>, WarpTiling<128, 128, 16, 64, 64, 16, 8, 3, 2>,
                            WarpTiling<128, 128, 16, 64, 64, 16, 8, 4, 2>, WarpTiling<128, 128, 8, 64, 64, 8, 16, 3, 2>,
                            WarpTiling<128, 256, 8, 64, 64, 16, 8, 3, 1>, WarpTiling<256, 128, 8, 64, 64, 16, 8, 3, 1>,
                            WarpTiling<128, 256, 16, 64, 64, 16, 8, 3, 1>>;

template <class Cfg>
std::string tiles_text() {  // "BMxBNxBK wWMxWN tTMxTN sSTAGES", as in the sweep table
    return std::to_string(Cfg::kBM) + "x" + std::to_string(Cfg::kBN) + "x" + std::to_string(Cfg::kBK) + " w" +
           std::to_string(Cfg::kWM) + "x" + std::to_string(Cfg::kWN) + " t" + std::to_string(Cfg::kTM) + "x" +
           std::to_string(Cfg::kTN) + " s" + std::to_string(Cfg::kStages);
}

}  // namespace rung8
