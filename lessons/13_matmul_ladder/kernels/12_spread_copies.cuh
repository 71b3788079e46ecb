// Lesson 13 of the course (the SGEMM ladder), rung 12 of 18: copies spread over the FMAs.
// Run this rung alone: ./build/bin/matmul_ladder --rung=12   (lesson 13 of the course, 00-23)
//
// Before: rung 11 issued all cp.async copies of the next tile (24 per thread) in one burst
//         at the top of every 32-wide k tile. A burst can fill the load/store unit's queue,
//         and the pointer updates after it wait for the copies to read their addresses.
// Here:   the copies of an interior tile leave two at a time after each of the first 12
//         k steps, between the FFMA, and the pointers advance after the last one. Edge
//         tiles and the partial last one still go through the guarded load(), all at once.
//         Still one commit group per tile, so the wait at the last k step keeps its meaning.
// Lacks:  each k step's 128 FFMA still run row by row, so consecutive FFMA share no
//         register operand for the register reuse cache.
// Next:   rung 13 changes the FFMA order (diff kernels/12_spread_copies.cuh kernels/13_operand_reuse.cuh).
// Run:    ./build/bin/matmul_ladder --rung=12
#pragma once
#include "common.cuh"
#include "common/check.h"

namespace rung12 {

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
    // Spread copies: the kCopies copies a thread issues per tile (A's first, then B's), kPerStep
    // of them after each of the first k steps, all within the first half of the tile.
    static constexpr int kCopies = (kBK / 8) * kARows + kBRows;
    static constexpr int kPerStep = (kCopies + kBK / 2 - 1) / (kBK / 2);
};

template <class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kMinBlocks)
    sgemmSpreadCopies(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B,
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

    // Copy q (0 .. kCopies-1) of the next tile on the interior path, the same copies as load()'s
    // first branch, one at a time: q < kACopies is A's (k run c, row j), the rest are B's rows.
    constexpr int kACopies = (kBK / 8) * Cfg::kARows;
    auto copy = [&](int q, int stage) {
        if (q < kACopies) {
            const int c = q / Cfg::kARows, j = q % Cfg::kARows;
            cp_async_4(a_dst + 4u * (stage + c * 8 * kLDA + j * Cfg::kAStep), a_src + j * a_step + c * 8, true);
        } else {
            const int j = q - kACopies;
            cp_async_16(b_dst + 4u * (stage + j * Cfg::kBStep * kLDB), b_src + j * b_step, 16);
        }
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
        // The stage of tile-1 is free (every thread passed the barrier at the end of tile-1). An
        // interior tile is copied into it a few copies per k step below; any other tile (an edge,
        // the partial last one) is loaded here, all at once, by the guarded load().
        const int next = tile + Cfg::kStages - 1;
        const bool spread = next < tiles && inside && (next + 1) * kBK <= K;  // the same for the whole block
        if (!spread) {
            if (next < tiles) load(next, write);
            cp_async_commit();
        }
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
            if (k * Cfg::kPerStep < Cfg::kCopies && spread) {  // this step's share of the next tile
#pragma unroll
                for (int q = k * Cfg::kPerStep; q < (k + 1) * Cfg::kPerStep && q < Cfg::kCopies; ++q) copy(q, write);
                if ((k + 1) * Cfg::kPerStep >= Cfg::kCopies) {  // the last one: one group per tile, as always
                    a_src += kBK;
                    b_src += size_t(kBK) * N;
                    cp_async_commit();
                }
            }
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
            cudaFuncSetAttribute(sgemmSpreadCopies<Cfg>, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kSmemBytes));
        return true;
    }();
    (void)opted_in;
    sgemmSpreadCopies<Cfg><<<dim3(blocks(g.N, Cfg::kBN), blocks(g.M, Cfg::kBM)), Cfg::kThreads, Cfg::kSmemBytes>>>(
        g.M, g.N, g.K, g.A, g.B, g.C);
    CUDA_CHECK_LAUNCH();
}

// Rung 12: rung 11's tiles, a k tile of 32 in 2 stages (99,328 bytes of shared memory):
// kBM, kBN, kBK, kWM, kWN, kTM, kTN, kStages, kMinBlocks.
using Default = WarpTiling<128, 256, 32, 64, 64, 16, 8, 2, 1>;

// Rung 12 where a block cannot have Default's 99,328 bytes of shared memory (a Turing GPU gives
// 65,536): a k tile of 16 in 2 stages, 49,664 bytes, its 12 copies spread over the first 6 k steps.
using Smaller = WarpTiling<128, 256, 16, 64, 64, 16, 8, 2, 1>;

}  // namespace rung12
