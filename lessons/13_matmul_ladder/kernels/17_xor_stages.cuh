// Lesson 13 of the course (the SGEMM ladder), rung 17 of 18: the stages flipped by one XOR.
// Run this rung alone: ./build/bin/matmul_ladder --rung=17   (lesson 13 of the course, 00-23)
//
// Before: rung 16 kept rung 14's two stage arrays per matrix and picked one by the tile's
//         parity: each read and each copy adds that stage's base to its position.
// Here:   one shared array holds A's two stages at float offsets 0 and 2048 and B's at 4096
//         and 6144, so a position in stage 0 and the same place in stage 1 differ in bit 11
//         alone. Each thread keeps its four positions (A and B, read and write) as offsets
//         and flips them with one XOR at each tile switch; the reads and copies add nothing.
//         The copies, the partial k tile first and the arithmetic are rung 16's.
// Lacks:  B moves one float per copy: 8 of the 12 copies per thread per tile are B's,
//         where 16-byte copies would need 2.
// Next:   rung 18 copies B 16 bytes at a time where its rows allow
//         (diff kernels/17_xor_stages.cuh kernels/18_async_double_buffer.cuh).
// Run:    ./build/bin/matmul_ladder --rung=17
#pragma once
#include "common.cuh"
#include "common/check.h"

namespace rung17 {

constexpr int kBM = 128, kBN = 256, kBK = 8;              // block tile
constexpr int kWM = 64, kWN = 64, kTM = 16, kTN = 8;      // warp tile, lane tile (rung 8's)
constexpr int kThreads = (kBM / kWM) * (kBN / kWN) * 32;  // 256: 8 warps
constexpr int kLDA = kBM + 4;                             // padded row of the transposed A tile
// Shared memory as float offsets: A's two stages at 0 and 2048, B's at 4096 and 6144 (32 KB in
// all). Every offset inside a stage has bit 11 clear in stage 0 and set in stage 1, so one XOR
// with kFlip moves a read or write position to the same place in the other stage.
constexpr int kFlip = 2048, kB0 = 4096, kSmemFloats = 8192;
static_assert(kBK * kLDA <= kFlip && kBK * kBN <= kFlip, "a stage must fit in its 8 KB");

// `dst` is a shared-memory address (__cvta_generic_to_shared). cp.async exists from sm_80
// (Ampere) on; older GPUs get plain, synchronous copies with the same zero fill, so the file
// builds for every architecture (the barrier after each tile orders them the same).
// L2::128B asks L2 to fetch the whole 128-byte line: A's row holds the next three tiles there.
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
__device__ __forceinline__ void cp_async_4(unsigned dst, const float* src, unsigned bytes) {  // bytes 0: zero fill
    asm volatile("cp.async.ca.shared.global.L2::128B [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }
#else
__device__ __forceinline__ void cp_async_4(unsigned dst, const float* src, unsigned bytes) {
    const float v = bytes ? *src : 0.0f;
    asm volatile("st.shared.f32 [%0], %1;\n" ::"r"(dst), "f"(v) : "memory");
}
__device__ __forceinline__ void cp_async_wait_all() {}
#endif

// Step k's fragments: rows lm + {0, 16, 32, 48} of the warp's A columns and columns
// ln + {0, 32} of its B rows, six LDS.128 (rung 8's lane layout).
__device__ __forceinline__ void fragments(const float* smem, int a_read, int b_read, int k, float (&a)[kTM],
                                          float (&b)[kTN]) {
#pragma unroll
    for (int i = 0; i < kTM / 4; ++i) put4(a + 4 * i, lds4(smem + a_read + k * kLDA + 16 * i));
#pragma unroll
    for (int j = 0; j < kTN / 4; ++j) put4(b + 4 * j, lds4(smem + b_read + k * kBN + 32 * j));
}

__device__ __forceinline__ void outerProduct(const float (&a)[kTM], const float (&b)[kTN], float (&acc)[kTM][kTN]) {
#pragma unroll
    for (int i = 0; i < kTM; ++i)
#pragma unroll
        for (int j = 0; j < kTN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);  // 128 FFMA
}

// B moves in 4-byte copies, 8 per thread per tile, whatever N.
__global__ void __launch_bounds__(kThreads, 1) sgemmAsyncXorStages(int M, int N, int K, const float* __restrict__ A,
                                                                   const float* __restrict__ B, float* __restrict__ C) {
    __shared__ __align__(16) float smem[kSmemFloats];
    const unsigned sbase = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    const int t = threadIdx.x, warp = t / 32, lane = t % 32;
    const int m0 = blockIdx.y * kBM, n0 = blockIdx.x * kBN;
    const int wm = (warp / (kBN / kWN)) * kWM, wn = (warp % (kBN / kWN)) * kWN;  // warp tile origin
    const int lm = (lane / 8) * 4, ln = (lane % 8) * 4;  // lane's first 4 x 4 sub-tile in the warp tile
    int a_read = wm + lm, b_read = kB0 + wn + ln;        // fragment positions in stage 0

    // Copy plan, fixed for the whole loop. A: elements (row ra + 32 i, column ka) of the tile, i < 4,
    // to As[ka][ra + 32 i]: 8 lanes read 8 consecutive k of a row (one 32-byte sector) and the padded
    // row puts a warp's 32 stores in 32 banks. A row below M is clamped to a real one and copies 0 bytes.
    const int ka = t % 8, ra = t / 8;
    int a_write = ka * kLDA + ra;
    const int ra0 = min(m0 + ra, M - 1);
    const float* a_src = A + size_t(ra0) * K + ka;  // advanced along k, one tile at a time
    int a_off[4];                                   // row i's offset from a_src (clamped rows: 0)
    unsigned a_bytes[4];                            // 4, or 0 below the last row
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int r = m0 + ra + 32 * i;
        a_off[i] = (min(r, M - 1) - ra0) * K;
        a_bytes[i] = r < M ? 4u : 0u;
    }
    // B: kW floats per copy, rows rb + kRowStep * j of the tile, columns nb .. nb + kW - 1.
    constexpr int kW = 1, kPerRow = kBN / kW, kRowStep = kThreads / kPerRow, kBCopies = kBK / kRowStep;
    const int rb = t / kPerRow, nb = (t % kPerRow) * kW;
    int b_write = kB0 + rb * kBN + nb;
    const float* b_src = B + size_t(rb) * N + min(n0 + nb, N - kW);        // a column past N: clamped, 0 bytes
    const unsigned b_bytes = 4u * unsigned(min(max(N - n0 - nb, 0), kW));  // kW floats, or 0 past the last column
    const int b_step = kRowStep * N;

    constexpr int kCopies = 4 + kBCopies, kPerStep = (kCopies + 3) / 4;  // spread over k steps 0..3
    const auto copy = [&](int q) {  // copy q of a whole tile into the stage being written
        if (q < 4) cp_async_4(sbase + 4u * (a_write + 32 * q), a_src + a_off[q], a_bytes[q]);
        else cp_async_4(sbase + 4u * (b_write + (q - 4) * kRowStep * kBN), b_src + (q - 4) * b_step, b_bytes);
    };

    // Tile 0 is the partial one: its first `first` columns of k are real, the rest zeros. Every later tile is whole.
    // These guarded copies are written out rather than shared with copy(), so that the loop's copies check no k.
    const int tiles = (K + kBK - 1) / kBK, first = K - (tiles - 1) * kBK;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const bool in = a_bytes[i] != 0 && ka < first;
        cp_async_4(sbase + 4u * (a_write + 32 * i), in ? a_src + a_off[i] : A, in ? 4u : 0u);
    }
#pragma unroll
    for (int j = 0; j < kBCopies; ++j) {
        const bool in = b_bytes != 0 && rb + kRowStep * j < first;
        const unsigned dst = sbase + 4u * (b_write + j * kRowStep * kBN);
        cp_async_4(dst, in ? b_src + j * b_step : B, in ? b_bytes : 0u);
    }
    a_src += first;
    b_src += size_t(first) * N;
    cp_async_wait_all();
    __syncthreads();
    a_write ^= kFlip;  // the next tile goes to stage 1
    b_write ^= kFlip;

    float acc[kTM][kTN] = {};
    float a[2][kTM], b[2][kTN];  // step k's fragments feed the FFMA while step k+1's load
    fragments(smem, a_read, b_read, 0, a[0], b[0]);
    for (int tile = 1; tile < tiles; ++tile) {  // computes tile-1 from one stage while `tile` lands in the other
#pragma unroll
        for (int k = 0; k < kBK; ++k) {
            if (k == kBK - 1) {       // last step: switch stages before its FFMA, so they hide the first reads
                cp_async_wait_all();  // this thread's copies of `tile` have landed ...
                __syncthreads();      // ... and everyone's; nobody reads the stage of tile-1 any more
                a_read ^= kFlip;
                b_read ^= kFlip;
                a_write ^= kFlip;
                b_write ^= kFlip;
                a_src += kBK;
                b_src += size_t(kBK) * N;
            }
            fragments(smem, a_read, b_read, (k + 1) % kBK, a[(k + 1) % 2], b[(k + 1) % 2]);
            if (k < 4) {  // this step's share of the copies of `tile`: 3 in each of steps 0-3
#pragma unroll
                for (int q = k * kPerStep; q < (k + 1) * kPerStep && q < kCopies; ++q) copy(q);
            }
            outerProduct(a[k % 2], b[k % 2], acc);
        }
    }
#pragma unroll
    for (int k = 0; k < kBK; ++k) {  // the last tile: nothing left to copy
        if (k + 1 < kBK) fragments(smem, a_read, b_read, k + 1, a[(k + 1) % 2], b[(k + 1) % 2]);
        outerProduct(a[k % 2], b[k % 2], acc);
    }

    const bool vecC = N % 4 == 0 && aligned16(C);
#pragma unroll
    for (int i = 0; i < kTM; ++i) {
        const int r = m0 + wm + 16 * (i / 4) + lm + i % 4;
        if (r >= M) continue;
#pragma unroll
        for (int j = 0; j < kTN / 4; ++j)
            store4(C + size_t(r) * N, n0 + wn + 32 * j + ln, N, vecC,
                   make_float4(acc[i][4 * j], acc[i][4 * j + 1], acc[i][4 * j + 2], acc[i][4 * j + 3]));
    }
}

inline void launch(const Gemm& g) {
    const dim3 grid(blocks(g.N, kBN), blocks(g.M, kBM));
    sgemmAsyncXorStages<<<grid, kThreads>>>(g.M, g.N, g.K, g.A, g.B, g.C);
    CUDA_CHECK_LAUNCH();
}

}  // namespace rung17
