// Lesson 13 of the course (the SGEMM ladder), rung 7 of 18: warp tiles.
// Run this rung alone: ./build/bin/matmul_ladder --rung=7   (lesson 13 of the course, 00-23)
//
// Before: rung 6 gave each thread an 8 x 8 tile of a 128 x 128 block tile, spent
//         4 LDS.128 on 64 FFMA, and read each k step's fragments right before
//         their FMAs.
// Here:   a template over its tile sizes. Each warp owns a kWM x kWN piece of the
//         block tile, each lane a kTM x kTN piece of that, made of 4 x 4 sub-tiles:
//         128 x 256 x 16, warp 64 x 64, lane 16 x 8, 6 LDS.128 per 128 FFMA. The
//         next tile still comes through registers as in rung 6 (loaded before the
//         FMAs, stored into the other of two shared stages after them); fragments
//         are double-buffered in registers, and the one barrier of a tile sits
//         before its last k step, so that step's FMAs hide the next tile's first
//         fragment loads.
// Lacks:  the staging registers (24 per thread) live across the FMAs, and a
//         thread's stores wait for its loads.
// Next:   rung 8 moves the next tiles with cp.async, global -> shared without
//         registers, three stages deep (diff kernels/7_warp_tiled.cuh kernels/8_cp_async.cuh).
// Run:    ./build/bin/matmul_ladder --rung=7
#pragma once
#include "common.cuh"
#include "common/check.h"

namespace rung7 {

template <int BM_, int BN_, int BK_, int WM_, int WN_, int TM_, int TN_, int MIN_BLOCKS_>
struct WarpTiling {
    static constexpr int kBM = BM_, kBN = BN_, kBK = BK_;  // block tile and k step
    static constexpr int kWM = WM_, kWN = WN_;             // warp tile
    static constexpr int kTM = TM_, kTN = TN_;             // lane tile
    static constexpr int kStages = 2, kMinBlocks = MIN_BLOCKS_;
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
    float* const a_dst = smem + ka * kLDA + ra;
    float* const b_dst = smem + kBK * kLDA + rb * kLDB + nb;
    const float* a_src = A + size_t(min(m0 + ra, M - 1)) * K + ka;  // advanced by kBK per tile
    const float* b_src = B + size_t(rb) * N + min(n0 + nb, N - 1);  // advanced by kBK rows per tile
    const int a_step = Cfg::kAStep * K, b_step = Cfg::kBStep * N;   // < 2^31: M, N, K <= 16384

    // The next tile, held in registers between its loads (before the FMAs) and its stores (after them).
    float a_next[kBK / 8][Cfg::kARows];
    float4 b_next[Cfg::kBRows];

    // Loads k tile `tile` into a_next and b_next; zeros outside the matrices. 8 lanes take 8
    // consecutive k of one row of A (one 32-byte sector); B moves 16 bytes per load.
    auto load = [&](int tile) {
        const int k0 = tile * kBK;
        if (inside && k0 + kBK <= K) {  // the common case: the whole tile is inside, no checks
#pragma unroll
            for (int c = 0; c < kBK / 8; ++c)
#pragma unroll
                for (int j = 0; j < Cfg::kARows; ++j) a_next[c][j] = a_src[j * a_step + c * 8];
#pragma unroll
            for (int j = 0; j < Cfg::kBRows; ++j) b_next[j] = *reinterpret_cast<const float4*>(b_src + j * b_step);
        } else {
#pragma unroll
            for (int c = 0; c < kBK / 8; ++c)  // a tile on an edge: every load checks its element
#pragma unroll
                for (int j = 0; j < Cfg::kARows; ++j) {
                    const int gm = m0 + ra + j * Cfg::kAStep, gk = k0 + c * 8 + ka;
                    a_next[c][j] = gm < M && gk < K ? A[size_t(gm) * K + gk] : 0.0f;
                }
#pragma unroll
            for (int j = 0; j < Cfg::kBRows; ++j) {
                const int gk = k0 + rb + j * Cfg::kBStep, gn = n0 + nb;
                float v[4];
#pragma unroll
                for (int q = 0; q < 4; ++q) v[q] = gk < K && gn + q < N ? B[size_t(gk) * N + gn + q] : 0.0f;
                b_next[j] = make_float4(v[0], v[1], v[2], v[3]);
            }
        }
        a_src += kBK;
        b_src += size_t(kBK) * N;
    };

    // Stores the loaded tile into the stage at float offset `stage`. A goes in transposed
    // (As[k][m]); the padded row (kBM + 4) puts a warp's 32 stores in 32 banks.
    auto store = [&](int stage) {
#pragma unroll
        for (int c = 0; c < kBK / 8; ++c)
#pragma unroll
            for (int j = 0; j < Cfg::kARows; ++j) a_dst[stage + c * 8 * kLDA + j * Cfg::kAStep] = a_next[c][j];
#pragma unroll
        for (int j = 0; j < Cfg::kBRows; ++j)
            *reinterpret_cast<float4*>(b_dst + stage + j * Cfg::kBStep * kLDB) = b_next[j];
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
    load(0);
    store(0);
    constexpr int kLast = (Cfg::kStages - 1) * Cfg::kStageFloats;
    int read = 0, write = kLast;  // float offsets of the stage computed now and of the stage refilled now
    __syncthreads();
    fragments(read, 0, a[0], b[0]);
    for (int tile = 0; tile < tiles; ++tile) {
        const bool more = tile + 1 < tiles;
        if (more) load(tile + 1);  // in flight during this tile's FMAs
#pragma unroll
        for (int k = 0; k < kBK; ++k) {
            if (k < kBK - 1) {
                fragments(read, k + 1, a[(k + 1) % 2], b[(k + 1) % 2]);
            } else {  // last step: switch stages before its FMAs, so they hide the next tile's first loads
                if (more) store(write);  // every thread is past stage `write` (the barrier of tile-1)
                __syncthreads();         // tile+1 is stored by everyone; and nobody reads stage `read` any more
                read = read == kLast ? 0 : read + Cfg::kStageFloats;
                write = write == kLast ? 0 : write + Cfg::kStageFloats;
                if (more) fragments(read, 0, a[0], b[0]);
            }
#pragma unroll
            for (int i = 0; i < kTM; ++i)
#pragma unroll
                for (int j = 0; j < kTN; ++j) acc[i][j] = fmaf(a[k % 2][i], b[k % 2][j], acc[i][j]);
        }
    }

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

// The default rung 7, the tiles of rung 8's default with two stages:
// kBM, kBN, kBK, kWM, kWN, kTM, kTN, kMinBlocks. 49,664 bytes of shared memory.
using Default = WarpTiling<128, 256, 16, 64, 64, 16, 8, 1>;

}  // namespace rung7
