// Lesson 13 - the SGEMM ladder: from shared-memory tiles to within reach of cuBLAS.
//
// C = A * B in fp32, row-major (A is M x K, B is K x N, C is M x N), FFMA only
// (no tensor cores). Seven kernels sit side by side, one rung each; every rung
// runs on the same shapes, is checked against a double-precision CPU reference
// (a square shape and two awkward ones) and, at the timed shape, element by
// element against cuBLAS SGEMM, and is timed the same way as cuBLAS. README.md
// gives the memory-reuse arithmetic of each rung.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <cublas_v2.h>

#include "common/ceilings.h"
#include "common/check.h"
#include "common/device.h"
#include "common/flags.h"
#include "common/launch.h"
#include "common/memory.h"
#include "common/report.h"
#include "common/timer.h"
#include "verify/compare.h"
#include "verify/matmul.h"
#include "verify/random.h"

// ===========================================================================
// Rung 1: shared-memory tiles, one output per thread.
// A 32 x 32 block stages a 32 x 32 tile of A and of B; every element fetched
// from global memory then serves 32 FMAs (instead of 1).
// ===========================================================================
constexpr int kT1 = 32;

__global__ void __launch_bounds__(kT1 * kT1)
sgemmSmemTiles(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C) {
    __shared__ float As[kT1][kT1];
    __shared__ float Bs[kT1][kT1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * kT1 + ty, col = blockIdx.x * kT1 + tx;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += kT1) {
        // Outside the matrices load 0: a partial tile then adds nothing (awkward shapes).
        As[ty][tx] = (row < M && k0 + tx < K) ? A[size_t(row) * K + k0 + tx] : 0.0f;
        Bs[ty][tx] = (k0 + ty < K && col < N) ? B[size_t(k0 + ty) * N + col] : 0.0f;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < kT1; ++k) acc += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    if (row < M && col < N) C[size_t(row) * N + col] = acc;
}

// ===========================================================================
// Rung 2: a 1D register tile. 64 x 64 block tile, k step 8, 512 threads; each
// thread computes 8 outputs of one column, so one B value read from shared
// memory feeds 8 FMAs.
// ===========================================================================
constexpr int kBM2 = 64, kBN2 = 64, kBK2 = 8, kTM2 = 8;

__global__ void __launch_bounds__(kBM2 * kBN2 / kTM2)
sgemmRegTile1D(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C) {
    __shared__ float As[kBM2][kBK2];
    __shared__ float Bs[kBK2][kBN2];
    const int t = threadIdx.x;
    const int m0 = blockIdx.y * kBM2, n0 = blockIdx.x * kBN2;
    const int col = t % kBN2, row = (t / kBN2) * kTM2;  // this thread's outputs: rows row..row+7 of column col
    const int ar = t / kBK2, ac = t % kBK2;            // the element of the A tile this thread stages
    const int br = t / kBN2, bc = t % kBN2;            // the element of the B tile this thread stages
    float acc[kTM2] = {};
    for (int k0 = 0; k0 < K; k0 += kBK2) {
        As[ar][ac] = (m0 + ar < M && k0 + ac < K) ? A[size_t(m0 + ar) * K + k0 + ac] : 0.0f;
        Bs[br][bc] = (k0 + br < K && n0 + bc < N) ? B[size_t(k0 + br) * N + n0 + bc] : 0.0f;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < kBK2; ++k) {
            const float b = Bs[k][col];  // one shared load ...
#pragma unroll
            for (int i = 0; i < kTM2; ++i) acc[i] += As[row + i][k] * b;  // ... 8 FMAs
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < kTM2; ++i)
        if (m0 + row + i < M && n0 + col < N) C[size_t(m0 + row + i) * N + n0 + col] = acc[i];
}

// ===========================================================================
// Rungs 3-6 share one shape: a 128 x 128 block tile, k step 8, 256 threads,
// each thread an 8 x 8 block of C held in registers.
// ===========================================================================
constexpr int kBM = 128, kBN = 128, kBK = 8, kTM = 8, kTN = 8;
constexpr int kThreads = (kBM / kTM) * (kBN / kTN);  // 256
constexpr int kLDA = kBM + 4;                        // padded row of the transposed A tile (rungs 5, 6)

// Rung 3: a 2D register tile. Per k, a thread reads 8 values of A and 8 of B
// from shared memory and does 8 x 8 = 64 FMAs with them.
__global__ void __launch_bounds__(kThreads)
sgemmRegTile2D(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C) {
    __shared__ float As[kBM][kBK];
    __shared__ float Bs[kBK][kBN];
    const int t = threadIdx.x, tx = t % (kBN / kTN), ty = t / (kBN / kTN);
    const int m0 = blockIdx.y * kBM, n0 = blockIdx.x * kBN;
    float acc[kTM][kTN] = {};
    for (int k0 = 0; k0 < K; k0 += kBK) {
#pragma unroll
        for (int i = 0; i < kBM * kBK / kThreads; ++i) {  // 4 elements of each tile per thread
            const int e = t + i * kThreads;
            const int ar = e / kBK, ac = e % kBK, br = e / kBN, bc = e % kBN;
            As[ar][ac] = (m0 + ar < M && k0 + ac < K) ? A[size_t(m0 + ar) * K + k0 + ac] : 0.0f;
            Bs[br][bc] = (k0 + br < K && n0 + bc < N) ? B[size_t(k0 + br) * N + n0 + bc] : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < kBK; ++k) {
            float a[kTM], b[kTN];
#pragma unroll
            for (int i = 0; i < kTM; ++i) a[i] = As[ty * kTM + i][k];
#pragma unroll
            for (int j = 0; j < kTN; ++j) b[j] = Bs[k][tx * kTN + j];
#pragma unroll
            for (int i = 0; i < kTM; ++i)
#pragma unroll
                for (int j = 0; j < kTN; ++j) acc[i][j] += a[i] * b[j];
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < kTM; ++i)
#pragma unroll
        for (int j = 0; j < kTN; ++j) {
            const int r = m0 + ty * kTM + i, c = n0 + tx * kTN + j;
            if (r < M && c < N) C[size_t(r) * N + c] = acc[i][j];
        }
}

// --- 16-byte helpers for rungs 4-7 -----------------------------------------
// A float4 load needs a 16-byte aligned address: row r of a row-major matrix
// with `cols` columns starts 16-byte aligned only when cols % 4 == 0. For other
// shapes (and at the right edge) the same kernels use guarded 4-byte accesses.
__device__ __forceinline__ bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

// p[c..c+3] of a row whose valid columns are [0, cols); zeros past the end.
__device__ __forceinline__ float4 load4(const float* p, int c, int cols, bool vec) {
    if (vec && c + 3 < cols) return *reinterpret_cast<const float4*>(p + c);  // LDG.E.128
    return make_float4(c < cols ? p[c] : 0.0f, c + 1 < cols ? p[c + 1] : 0.0f, c + 2 < cols ? p[c + 2] : 0.0f,
                       c + 3 < cols ? p[c + 3] : 0.0f);
}

__device__ __forceinline__ void store4(float* p, int c, int cols, bool vec, float4 v) {
    if (vec && c + 3 < cols) {
        *reinterpret_cast<float4*>(p + c) = v;  // STG.E.128
        return;
    }
    if (c < cols) p[c] = v.x;
    if (c + 1 < cols) p[c + 1] = v.y;
    if (c + 2 < cols) p[c + 2] = v.z;
    if (c + 3 < cols) p[c + 3] = v.w;
}

__device__ __forceinline__ float4 lds4(const float* p) { return *reinterpret_cast<const float4*>(p); }  // LDS.128

__device__ __forceinline__ void put4(float* dst, float4 v) {
    dst[0] = v.x;
    dst[1] = v.y;
    dst[2] = v.z;
    dst[3] = v.w;
}

// Rungs 4-6 stage one float4 of A (128 x 8 tile: 128 rows x 2 float4) and one
// float4 of B (8 x 128 tile: 8 rows x 32 float4) per thread per k step.
struct Staged {
    float4 a, b;
};

__device__ __forceinline__ Staged loadTiles(const float* A, const float* B, int M, int N, int K, int m0, int n0,
                                            int k0, bool vecA, bool vecB) {
    const int t = threadIdx.x;
    const int ar = m0 + t / 2, ac = k0 + (t % 2) * 4;    // A: row ar, columns ac..ac+3
    const int br = k0 + t / 32, bc = n0 + (t % 32) * 4;  // B: row br, columns bc..bc+3
    Staged s;
    s.a = load4(A + size_t(ar < M ? ar : 0) * K, ac, ar < M ? K : 0, vecA);  // a row outside: all zeros
    s.b = load4(B + size_t(br < K ? br : 0) * N, bc, br < K ? N : 0, vecB);
    return s;
}

// A goes in transposed (As[k][m], row length LDA) so that a thread's 8 values
// of A for one k are contiguous and come in two LDS.128; B goes in as it is.
template <int LDA>
__device__ __forceinline__ void storeTiles(float* As, float* Bs, const Staged& s) {
    const int t = threadIdx.x, m = t / 2, k = (t % 2) * 4;
    As[(k + 0) * LDA + m] = s.a.x;
    As[(k + 1) * LDA + m] = s.a.y;
    As[(k + 2) * LDA + m] = s.a.z;
    As[(k + 3) * LDA + m] = s.a.w;
    *reinterpret_cast<float4*>(&Bs[(t / 32) * kBN + (t % 32) * 4]) = s.b;
}

// ===========================================================================
// Rung 4: 16-byte global loads, A transposed in shared memory, LDS.128 reads.
// The thread's 8 x 8 block is contiguous: rows ty*8.., columns tx*8..
// ===========================================================================
__global__ void __launch_bounds__(kThreads)
sgemmVectorized(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C) {
    __shared__ __align__(16) float As[kBK * kBM];  // no padding: the transposed store conflicts 2-way
    __shared__ __align__(16) float Bs[kBK * kBN];
    const int t = threadIdx.x, tx = t % 16, ty = t / 16;
    const int m0 = blockIdx.y * kBM, n0 = blockIdx.x * kBN;
    const bool vecA = K % 4 == 0 && aligned16(A), vecB = N % 4 == 0 && aligned16(B), vecC = N % 4 == 0 && aligned16(C);
    float acc[kTM][kTN] = {};
    for (int k0 = 0; k0 < K; k0 += kBK) {
        storeTiles<kBM>(As, Bs, loadTiles(A, B, M, N, K, m0, n0, k0, vecA, vecB));
        __syncthreads();
#pragma unroll
        for (int k = 0; k < kBK; ++k) {
            float a[kTM], b[kTN];
            put4(a, lds4(&As[k * kBM + ty * 8]));
            put4(a + 4, lds4(&As[k * kBM + ty * 8 + 4]));
            put4(b, lds4(&Bs[k * kBN + tx * 8]));  // 8 lanes read 16 B at a 32 B stride: 2-way conflict
            put4(b + 4, lds4(&Bs[k * kBN + tx * 8 + 4]));
#pragma unroll
            for (int i = 0; i < kTM; ++i)
#pragma unroll
                for (int j = 0; j < kTN; ++j) acc[i][j] += a[i] * b[j];
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < kTM; ++i) {
        const int r = m0 + ty * 8 + i;
        if (r >= M) continue;
        store4(C + size_t(r) * N, n0 + tx * 8, N, vecC, make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]));
        store4(C + size_t(r) * N, n0 + tx * 8 + 4, N, vecC, make_float4(acc[i][4], acc[i][5], acc[i][6], acc[i][7]));
    }
}

// Rungs 5 and 6: the thread's 8 x 8 block is 2 x 2 sub-tiles of 4 x 4, at rows
// ty*4 and ty*4 + 64 and columns tx*4 and tx*4 + 64. Eight neighbouring lanes
// then read 8 neighbouring float4 (128 contiguous bytes): no bank conflict.
template <int LDA>
__device__ __forceinline__ void fmaSplitTile(const float* As, const float* Bs, int ty, int tx, float (&acc)[kTM][kTN]) {
#pragma unroll
    for (int k = 0; k < kBK; ++k) {
        float a[kTM], b[kTN];
        put4(a, lds4(&As[k * LDA + ty * 4]));
        put4(a + 4, lds4(&As[k * LDA + ty * 4 + 64]));
        put4(b, lds4(&Bs[k * kBN + tx * 4]));
        put4(b + 4, lds4(&Bs[k * kBN + tx * 4 + 64]));
#pragma unroll
        for (int i = 0; i < kTM; ++i)
#pragma unroll
            for (int j = 0; j < kTN; ++j) acc[i][j] += a[i] * b[j];
    }
}

__device__ __forceinline__ void storeSplitTile(float* C, int M, int N, int m0, int n0, int ty, int tx, bool vecC,
                                               const float (&acc)[kTM][kTN]) {
#pragma unroll
    for (int i = 0; i < kTM; ++i) {
        const int r = m0 + (i / 4) * 64 + ty * 4 + i % 4;
        if (r >= M) continue;
        store4(C + size_t(r) * N, n0 + tx * 4, N, vecC, make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]));
        store4(C + size_t(r) * N, n0 + tx * 4 + 64, N, vecC, make_float4(acc[i][4], acc[i][5], acc[i][6], acc[i][7]));
    }
}

// ===========================================================================
// Rung 5: bank-conflict-free. 4 x 4 sub-tiles for the reads; the transposed A
// tile padded to 132 floats a row, so the 32 scalar stores of a warp land in
// 32 different banks.
// ===========================================================================
__global__ void __launch_bounds__(kThreads)
sgemmConflictFree(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C) {
    __shared__ __align__(16) float As[kBK * kLDA];
    __shared__ __align__(16) float Bs[kBK * kBN];
    const int t = threadIdx.x, tx = t % 16, ty = t / 16;
    const int m0 = blockIdx.y * kBM, n0 = blockIdx.x * kBN;
    const bool vecA = K % 4 == 0 && aligned16(A), vecB = N % 4 == 0 && aligned16(B), vecC = N % 4 == 0 && aligned16(C);
    float acc[kTM][kTN] = {};
    for (int k0 = 0; k0 < K; k0 += kBK) {
        storeTiles<kLDA>(As, Bs, loadTiles(A, B, M, N, K, m0, n0, k0, vecA, vecB));
        __syncthreads();
        fmaSplitTile<kLDA>(As, Bs, ty, tx, acc);
        __syncthreads();
    }
    storeSplitTile(C, M, N, m0, n0, ty, tx, vecC, acc);
}

// ===========================================================================
// Rung 6: double buffering. Two shared buffers; the global loads of tile t+1
// are issued into registers before the FMAs of tile t, and stored into the
// other buffer after them: the load latency hides behind 512 FMAs per thread,
// and one __syncthreads per k step is enough.
// ===========================================================================
__global__ void __launch_bounds__(kThreads)
sgemmDoubleBuffered(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C) {
    __shared__ __align__(16) float As[2][kBK * kLDA];
    __shared__ __align__(16) float Bs[2][kBK * kBN];
    const int t = threadIdx.x, tx = t % 16, ty = t / 16;
    const int m0 = blockIdx.y * kBM, n0 = blockIdx.x * kBN;
    const bool vecA = K % 4 == 0 && aligned16(A), vecB = N % 4 == 0 && aligned16(B), vecC = N % 4 == 0 && aligned16(C);
    const int tiles = (K + kBK - 1) / kBK;
    float acc[kTM][kTN] = {};
    storeTiles<kLDA>(As[0], Bs[0], loadTiles(A, B, M, N, K, m0, n0, 0, vecA, vecB));
    __syncthreads();
    for (int tile = 0; tile < tiles; ++tile) {
        const int cur = tile & 1;
        const bool more = tile + 1 < tiles;
        Staged next;
        if (more) next = loadTiles(A, B, M, N, K, m0, n0, (tile + 1) * kBK, vecA, vecB);  // in flight ...
        fmaSplitTile<kLDA>(As[cur], Bs[cur], ty, tx, acc);                                 // ... during these
        if (more) storeTiles<kLDA>(As[cur ^ 1], Bs[cur ^ 1], next);  // nobody reads buffer cur^1 now
        __syncthreads();
    }
    storeSplitTile(C, M, N, m0, n0, ty, tx, vecC, acc);
}

// ===========================================================================
// Rung 7: warp tiling + a multi-stage cp.async pipeline, templated over its
// tile sizes (--sweep times several). Each warp owns a WM x WN piece of the
// block tile; each lane a TM x TN piece of that, made of 4 x 4 sub-tiles.
// cp.async copies global -> shared without passing through registers, so
// STAGES-1 tiles are in flight while the FMAs run on the current one.
// ===========================================================================
// `dst` is a shared-memory address (__cvta_generic_to_shared), computed once per thread.
// cp.async exists from sm_80 (Ampere) on; older GPUs (Turing) get plain,
// synchronous copies with the same zero-fill, so the file builds for every
// architecture (the __syncthreads after each stage orders them all the same).
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
__device__ __forceinline__ void cp_async_4(unsigned dst, const float* src, bool valid) {  // zero-fills if !valid
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 4 : 0));
}
__device__ __forceinline__ void cp_async_16(unsigned dst, const float* src, int src_bytes) {  // zero-fills past src_bytes
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int PENDING>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING) : "memory"); }
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
    static constexpr int BM = BM_, BN = BN_, BK = BK_;  // block tile and k step
    static constexpr int WM = WM_, WN = WN_;            // warp tile
    static constexpr int TM = TM_, TN = TN_;            // lane tile
    static constexpr int STAGES = STAGES_, MIN_BLOCKS = MIN_BLOCKS_;
    static constexpr int THREADS = (BM / WM) * (BN / WN) * 32;
    static constexpr int LM = WM / TM, LN = WN / TN;  // lanes of a warp along M and N
    static constexpr int LDA = BM + 4, LDB = BN;      // shared row lengths (A transposed and padded)
    static constexpr int STAGE_FLOATS = BK * (LDA + LDB);
    static constexpr int SMEM_BYTES = STAGES * STAGE_FLOATS * int(sizeof(float));
    static_assert(LM * LN == 32, "a warp's lanes must tile the warp tile");
    static_assert(TM % 4 == 0 && TN % 4 == 0, "lane tiles are made of 4 x 4 sub-tiles");
    static_assert(BM % WM == 0 && BN % WN == 0 && BM % 32 == 0, "warp tiles must tile the block tile");
    // Copy plan: A in runs of 8 consecutive k per row, A_STEP rows apart; B in float4s, B_STEP rows apart.
    static constexpr int A_STEP = THREADS / 8, A_ROWS = BM / A_STEP;
    static constexpr int B_STEP = THREADS / (BN / 4), B_ROWS = BK / B_STEP;
    static_assert(BK % 8 == 0 && BM % A_STEP == 0 && THREADS % (BN / 4) == 0 && BK % B_STEP == 0,
                  "tile copies must split evenly over the threads");
    static_assert(STAGES >= 2, "a pipeline needs two stages");
};

template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS, Cfg::MIN_BLOCKS)
sgemmWarpTiled(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C) {
    constexpr int BM = Cfg::BM, BN = Cfg::BN, BK = Cfg::BK, TM = Cfg::TM, TN = Cfg::TN;
    constexpr int LM = Cfg::LM, LN = Cfg::LN, LDA = Cfg::LDA, LDB = Cfg::LDB;
    extern __shared__ __align__(16) float smem[];
    const int t = threadIdx.x, warp = t / 32, lane = t % 32;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const int wm = (warp / (BN / Cfg::WN)) * Cfg::WM, wn = (warp % (BN / Cfg::WN)) * Cfg::WN;  // warp tile origin
    const int lm = (lane / LN) * 4, ln = (lane % LN) * 4;  // lane's first sub-tile inside the warp tile
    const bool vecB = N % 4 == 0 && aligned16(B), vecC = N % 4 == 0 && aligned16(C);
    const bool inside = m0 + BM <= M && n0 + BN <= N && vecB;  // no edge in M or N, 16-byte B rows

    // This thread's copy plan, fixed for the whole k loop: A elements (row ra + j * A_STEP,
    // column ka + 8c) and B float4s (row rb + j * B_STEP, columns nb..nb+3) of each tile.
    const int ka = t % 8, ra = t / 8, nb = (t % (BN / 4)) * 4, rb = t / (BN / 4);
    const unsigned a_dst = static_cast<unsigned>(__cvta_generic_to_shared(smem + ka * LDA + ra));
    const unsigned b_dst = static_cast<unsigned>(__cvta_generic_to_shared(smem + BK * LDA + rb * LDB + nb));
    const float* a_src = A + size_t(min(m0 + ra, M - 1)) * K + ka;  // advanced by BK per tile
    const float* b_src = B + size_t(rb) * N + min(n0 + nb, N - 1);  // advanced by BK rows per tile
    const int a_step = Cfg::A_STEP * K, b_step = Cfg::B_STEP * N;    // < 2^31: M, N, K <= 16384

    // Issues the copies of k tile `tile` into the stage at float offset `stage`; zero-filled
    // outside the matrices. A is written transposed (As[k][m]) with 4-byte copies: 8 lanes take 8
    // consecutive k of one row (one 32-byte sector), and the padded row (BM + 4) puts a warp's 32
    // stores in 32 banks. B keeps its layout and moves 16 bytes per copy.
    auto load = [&](int tile, int stage) {
        const unsigned as = a_dst + 4u * stage, bs = b_dst + 4u * stage;
        const int k0 = tile * BK;
        if (inside && k0 + BK <= K) {  // the common case: the whole tile is inside, no checks
#pragma unroll
            for (int c = 0; c < BK / 8; ++c)
#pragma unroll
                for (int j = 0; j < Cfg::A_ROWS; ++j)
                    cp_async_4(as + 4u * (c * 8 * LDA + j * Cfg::A_STEP), a_src + j * a_step + c * 8, true);
#pragma unroll
            for (int j = 0; j < Cfg::B_ROWS; ++j) cp_async_16(bs + 4u * (j * Cfg::B_STEP * LDB), b_src + j * b_step, 16);
        } else {
#pragma unroll
            for (int c = 0; c < BK / 8; ++c)  // a tile on an edge: every copy checks its element
#pragma unroll
                for (int j = 0; j < Cfg::A_ROWS; ++j) {
                    const int gm = m0 + ra + j * Cfg::A_STEP, gk = k0 + c * 8 + ka;
                    const bool in = gm < M && gk < K;
                    cp_async_4(as + 4u * (c * 8 * LDA + j * Cfg::A_STEP), in ? A + size_t(gm) * K + gk : A, in);
                }
#pragma unroll
            for (int j = 0; j < Cfg::B_ROWS; ++j) {
                const int gk = k0 + rb + j * Cfg::B_STEP, gn = n0 + nb;
                const unsigned dst = bs + 4u * (j * Cfg::B_STEP * LDB);
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
        a_src += BK;
        b_src += size_t(BK) * N;
    };

    // Fragments of step k of the stage at float offset `stage`: TM values of A, TN of B (LDS.128 each 4).
    auto fragments = [&](int stage, int k, float (&a)[TM], float (&b)[TN]) {
        const float* As = smem + stage + k * LDA + wm + lm;
        const float* Bs = smem + stage + BK * LDA + k * LDB + wn + ln;
#pragma unroll
        for (int i = 0; i < TM / 4; ++i) put4(&a[4 * i], lds4(As + i * LM * 4));
#pragma unroll
        for (int j = 0; j < TN / 4; ++j) put4(&b[4 * j], lds4(Bs + j * LN * 4));
    };

    float acc[TM][TN] = {};
    float a[2][TM], b[2][TN];  // register double buffer: step k's fragments feed the FMAs while k+1's load
    const int tiles = (K + BK - 1) / BK;
    for (int s = 0; s < Cfg::STAGES - 1; ++s) {  // prologue: fill STAGES-1 stages
        if (s < tiles) load(s, s * Cfg::STAGE_FLOATS);
        cp_async_commit();  // one group per stage, even when empty, so the counting below holds
    }
    constexpr int LAST = (Cfg::STAGES - 1) * Cfg::STAGE_FLOATS;
    int read = 0, write = LAST;  // float offsets of the stage computed now and of the stage refilled now
    cp_async_wait<Cfg::STAGES - 2>();
    __syncthreads();
    fragments(read, 0, a[0], b[0]);
    for (int tile = 0; tile < tiles; ++tile) {
        // Refill the stage of tile-1: every thread is past it (the barrier at the end of tile-1).
        if (tile + Cfg::STAGES - 1 < tiles) load(tile + Cfg::STAGES - 1, write);
        cp_async_commit();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            if (k < BK - 1) {
                fragments(read, k + 1, a[(k + 1) % 2], b[(k + 1) % 2]);
            } else {  // last step: switch stages before its FMAs, so they hide the next tile's first loads
                cp_async_wait<Cfg::STAGES - 2>();  // this thread's copies of tile+1 have landed ...
                __syncthreads();                   // ... and everyone's; and nobody reads stage `read` any more
                read = read == LAST ? 0 : read + Cfg::STAGE_FLOATS;
                write = write == LAST ? 0 : write + Cfg::STAGE_FLOATS;
                if (tile + 1 < tiles) fragments(read, 0, a[0], b[0]);
            }
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[k % 2][i], b[k % 2][j], acc[i][j]);
        }
    }
    cp_async_wait<0>();  // no copy in flight when the block exits

#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int r = m0 + wm + (i / 4) * LM * 4 + lm + i % 4;
        if (r >= M) continue;
#pragma unroll
        for (int j = 0; j < TN / 4; ++j)
            store4(C + size_t(r) * N, n0 + wn + j * LN * 4 + ln, N, vecC,
                   make_float4(acc[i][4 * j], acc[i][4 * j + 1], acc[i][4 * j + 2], acc[i][4 * j + 3]));
    }
}

// ===========================================================================
// Host side: one launcher per rung (the launches stay visible here), then main.
// ===========================================================================
struct Gemm {
    int M, N, K;
    const float* A;
    const float* B;
    float* C;
    cublasHandle_t handle;
};

static unsigned blocks(int n, int tile) { return static_cast<unsigned>(lesson::ceil_div(uint64_t(n), uint64_t(tile))); }

// cuBLAS is column-major. A row-major M x K matrix read column-major is its
// transpose, so ask for C^T (N x M) = B^T (N x K) * A^T (K x M): pass B first,
// swap M and N. No copies, no transposes.
static void launchCublas(const Gemm& g) {
    const float alpha = 1.0f, beta = 0.0f;
    CUBLAS_CHECK(cublasSgemm(g.handle, CUBLAS_OP_N, CUBLAS_OP_N, g.N, g.M, g.K, &alpha, g.B, g.N, g.A, g.K, &beta, g.C, g.N));
}
static void launchSmemTiles(const Gemm& g) {
    sgemmSmemTiles<<<dim3(blocks(g.N, kT1), blocks(g.M, kT1)), dim3(kT1, kT1)>>>(g.M, g.N, g.K, g.A, g.B, g.C);
    CUDA_CHECK_LAUNCH();
}
static void launchRegTile1D(const Gemm& g) {
    sgemmRegTile1D<<<dim3(blocks(g.N, kBN2), blocks(g.M, kBM2)), kBM2 * kBN2 / kTM2>>>(g.M, g.N, g.K, g.A, g.B, g.C);
    CUDA_CHECK_LAUNCH();
}
static void launchRegTile2D(const Gemm& g) {
    sgemmRegTile2D<<<dim3(blocks(g.N, kBN), blocks(g.M, kBM)), kThreads>>>(g.M, g.N, g.K, g.A, g.B, g.C);
    CUDA_CHECK_LAUNCH();
}
static void launchVectorized(const Gemm& g) {
    sgemmVectorized<<<dim3(blocks(g.N, kBN), blocks(g.M, kBM)), kThreads>>>(g.M, g.N, g.K, g.A, g.B, g.C);
    CUDA_CHECK_LAUNCH();
}
static void launchConflictFree(const Gemm& g) {
    sgemmConflictFree<<<dim3(blocks(g.N, kBN), blocks(g.M, kBM)), kThreads>>>(g.M, g.N, g.K, g.A, g.B, g.C);
    CUDA_CHECK_LAUNCH();
}
static void launchDoubleBuffered(const Gemm& g) {
    sgemmDoubleBuffered<<<dim3(blocks(g.N, kBN), blocks(g.M, kBM)), kThreads>>>(g.M, g.N, g.K, g.A, g.B, g.C);
    CUDA_CHECK_LAUNCH();
}
template <class Cfg>
static void launchWarpTiled(const Gemm& g) {
    static const bool opted_in = [] {  // more than 48 KB of dynamic shared memory needs an opt-in
        CUDA_CHECK(cudaFuncSetAttribute(sgemmWarpTiled<Cfg>, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::SMEM_BYTES));
        return true;
    }();
    (void)opted_in;
    sgemmWarpTiled<Cfg><<<dim3(blocks(g.N, Cfg::BN), blocks(g.M, Cfg::BM)), Cfg::THREADS, Cfg::SMEM_BYTES>>>(
        g.M, g.N, g.K, g.A, g.B, g.C);
    CUDA_CHECK_LAUNCH();
}

// The default rung 7, the fastest of the --sweep table at 4096^3 on an H200 (README.md):
// BM, BN, BK, WM, WN, TM, TN, STAGES, MIN_BLOCKS.
using Rung7 = WarpTiling<128, 256, 16, 64, 64, 16, 8, 3, 1>;

template <class Cfg>
static std::string tilesText() {  // "BMxBNxBK wWMxWN tTMxTN sSTAGES", as in the sweep table
    return std::to_string(Cfg::BM) + "x" + std::to_string(Cfg::BN) + "x" + std::to_string(Cfg::BK) + " w" +
           std::to_string(Cfg::WM) + "x" + std::to_string(Cfg::WN) + " t" + std::to_string(Cfg::TM) + "x" +
           std::to_string(Cfg::TN) + " s" + std::to_string(Cfg::STAGES);
}

struct Rung {
    const char* name;
    void (*launch)(const Gemm&);
};
static const Rung kCublas = {"cuBLAS SGEMM fp32", launchCublas};
static const Rung kLadder[] = {
    {"1 shared-memory tiles 32x32", launchSmemTiles},
    {"2 1D register tile 8x1", launchRegTile1D},
    {"3 2D register tile 8x8", launchRegTile2D},
    {"4 float4 loads, A^T in smem", launchVectorized},
    {"5 bank-conflict-free", launchConflictFree},
    {"6 double-buffered", launchDoubleBuffered},
    {"7 warp tiles + cp.async", launchWarpTiled<Rung7>},
};
// --sweep: rung 7 over tile configurations ("BMxBNxBK wWMxWN tTMxTN sSTAGES").
static const Rung kSweep[] = {
    {"7: 128x128x8 w64x32 t8x8 s2", launchWarpTiled<WarpTiling<128, 128, 8, 64, 32, 8, 8, 2, 2>>},
    {"7: 128x128x8 w64x32 t8x8 s3", launchWarpTiled<WarpTiling<128, 128, 8, 64, 32, 8, 8, 3, 2>>},
    {"7: 128x128x8 w32x64 t8x8 s3", launchWarpTiled<WarpTiling<128, 128, 8, 32, 64, 8, 8, 3, 2>>},
    {"7: 128x128x16 w64x32 t8x8 s3", launchWarpTiled<WarpTiling<128, 128, 16, 64, 32, 8, 8, 3, 2>>},
    {"7: 128x128x8 w64x64 t16x8 s2", launchWarpTiled<WarpTiling<128, 128, 8, 64, 64, 16, 8, 2, 2>>},
    {"7: 128x128x8 w64x64 t16x8 s3", launchWarpTiled<WarpTiling<128, 128, 8, 64, 64, 16, 8, 3, 2>>},
    {"7: 128x128x8 w64x64 t16x8 s4", launchWarpTiled<WarpTiling<128, 128, 8, 64, 64, 16, 8, 4, 2>>},
    {"7: 128x128x16 w64x64 t16x8 s3", launchWarpTiled<WarpTiling<128, 128, 16, 64, 64, 16, 8, 3, 2>>},
    {"7: 128x128x16 w64x64 t16x8 s4", launchWarpTiled<WarpTiling<128, 128, 16, 64, 64, 16, 8, 4, 2>>},
    {"7: 128x128x8 w64x64 t8x16 s3", launchWarpTiled<WarpTiling<128, 128, 8, 64, 64, 8, 16, 3, 2>>},
    {"7: 128x256x8 w64x64 t16x8 s3", launchWarpTiled<WarpTiling<128, 256, 8, 64, 64, 16, 8, 3, 1>>},
    {"7: 256x128x8 w64x64 t16x8 s3", launchWarpTiled<WarpTiling<256, 128, 8, 64, 64, 16, 8, 3, 1>>},
    {"7: 128x256x16 w64x64 t16x8 s3", launchWarpTiled<WarpTiling<128, 256, 16, 64, 64, 16, 8, 3, 1>>},
};

struct Shape {
    int M, N, K;
    std::string text() const { return std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K); }
    size_t a() const { return size_t(M) * K; }
    size_t b() const { return size_t(K) * N; }
    size_t c() const { return size_t(M) * N; }
};
constexpr double kTol = 1e-4;  // rel-L2, fp32 GEMM (lesson contract)

// Poison C (0xFF bytes are NaN), run once, copy C back: that copy is what gets verified.
static void runOnce(const Rung& r, const Gemm& g, float* h_C) {
    const size_t bytes = size_t(g.M) * g.N * sizeof(float);
    CUDA_CHECK(cudaMemset(g.C, 0xFF, bytes));
    r.launch(g);
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(h_C, g.C, bytes, cudaMemcpyDeviceToHost));
}

// Part 1: every rung and cuBLAS against the double-precision CPU reference, every element.
static double checkOnCpu(const Shape& s, uint64_t seed, cublasHandle_t handle, bool inject, lesson::Report& report) {
    std::vector<float> h_A(s.a()), h_B(s.b()), h_C(s.c());
    verify::fill_uniform(h_A.data(), h_A.size(), seed);
    verify::fill_uniform(h_B.data(), h_B.size(), seed + 1);
    std::vector<double> ref(s.c());
    lesson::HostTimer cpu;
    verify::matmul_reference(h_A.data(), h_B.data(), ref.data(), s.M, s.N, s.K);
    const double cpu_ms = cpu.ms();

    float *d_A = nullptr, *d_B = nullptr, *d_C = nullptr;
    CUDA_CHECK(cudaMalloc(&d_A, s.a() * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_B, s.b() * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_C, s.c() * sizeof(float)));
    CUDA_CHECK(cudaMemcpy(d_A, h_A.data(), s.a() * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_B, h_B.data(), s.b() * sizeof(float), cudaMemcpyHostToDevice));
    const Gemm g{s.M, s.N, s.K, d_A, d_B, d_C, handle};
    std::vector<Rung> rungs{kCublas};
    rungs.insert(rungs.end(), std::begin(kLadder), std::end(kLadder));
    for (size_t i = 0; i < rungs.size(); ++i) {
        const Rung& r = rungs[i];
        runOnce(r, g, h_C.data());
        if (inject && &r == &rungs.back()) verify::inject_fault(h_C.data(), s.c(), seed);
        report.check(verify::compare(h_C.data(), ref.data(), s.c(), kTol,
                                     std::string(r.name) + " vs CPU, every element of " + s.text()));
    }
    CUDA_CHECK(cudaFree(d_A));
    CUDA_CHECK(cudaFree(d_B));
    CUDA_CHECK(cudaFree(d_C));
    return cpu_ms;
}

int main(int argc, char** argv) {
    // Flags first: bad input exits 2 before any CUDA call.
    lesson::CommonOptions opt;
    int64_t n = 4096, m = 4096, k = 4096;
    bool sweep = false;
    lesson::Cli cli("matmul_ladder",
                    "SGEMM C = A*B (fp32, row-major): seven hand-written rungs against cuBLAS on an M x N x K shape.");
    lesson::add_common_flags(cli, opt);
    cli.add_int("n", &n, 1, 16384, "columns of B and C (and M, K unless given)", 256);
    cli.add_int("m", &m, 1, 16384, "rows of A and C (equal to --n unless given)", 256);
    cli.add_int("k", &k, 1, 16384, "columns of A, rows of B (equal to --n unless given)", 256);
    cli.add_switch("sweep", &sweep, "also time rung 7 in every tile configuration of its sweep table");
    cli.parse_or_exit(argc, argv);
    if (!cli.given("m")) m = n;
    if (!cli.given("k")) k = n;
    const Shape timed{int(m), int(n), int(k)};
    // Part 1 shapes: a square one, one whose rows are not 16-byte aligned (K, N odd) and one that
    // is aligned but cuts every tile short. Part 2: the timed shape.
    const std::vector<Shape> checks = opt.quick ? std::vector<Shape>{{128, 128, 128}, {201, 123, 77}, {100, 260, 44}}
                                                : std::vector<Shape>{{1024, 1024, 1024}, {1000, 1023, 1025}, {333, 516, 260}};

    // Host: A, B, the cuBLAS result and one rung's result as floats (part 2), or the same plus a
    // double reference (part 1). Device: A, B, two results.
    uint64_t host_bytes = (timed.a() + timed.b() + 2 * timed.c()) * sizeof(float) + 16 * size_t(timed.N) * 8;
    for (const Shape& s : checks)
        host_bytes = std::max<uint64_t>(host_bytes, (s.a() + s.b() + s.c()) * sizeof(float) + s.c() * sizeof(double));
    const std::string what = "--m=" + std::to_string(m) + " --n=" + std::to_string(n) + " --k=" + std::to_string(k);
    lesson::require_host_memory(host_bytes, "pageable", what);
    cudaDeviceProp prop = lesson::pick_device(opt.device);
    lesson::require_device_memory((timed.a() + timed.b() + 2 * timed.c()) * sizeof(float), what);

    lesson::Report report("13_matmul_ladder");
    report.device(prop.name, prop.major, prop.minor, prop.multiProcessorCount, prop.totalGlobalMem / 1e9);
    report.config("M", m);
    report.config("N", n);
    report.config("K", k);
    report.config("check_shapes", checks[0].text() + ", " + checks[1].text() + ", " + checks[2].text());
    report.config("rung7_tiles", tilesText<Rung7>());
    report.config("repeat", opt.repeat);
    report.config("seed", opt.seed);
    report.config("tolerance_rel_l2", kTol);

    cublasHandle_t handle;
    CUBLAS_CHECK(cublasCreate(&handle));
    CUBLAS_CHECK(cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH));  // true fp32: no TF32 tensor cores

    // Part 1: correctness on the CPU shapes.
    const uint64_t seed = static_cast<uint64_t>(opt.seed);
    double cpu_ms = 0;
    for (size_t i = 0; i < checks.size(); ++i) {
        const double ms = checkOnCpu(checks[i], seed + 10 * i, handle, opt.inject_fault && i == 0, report);
        if (i == 0) cpu_ms = ms;
    }
    report.cpu_reference_ms(cpu_ms);  // for the first (square) shape

    // Part 2: speed at the timed shape. Allocate, copy in.
    std::vector<float> h_A(timed.a()), h_B(timed.b()), h_ref(timed.c()), h_C(timed.c());
    verify::fill_uniform(h_A.data(), h_A.size(), seed + 100);
    verify::fill_uniform(h_B.data(), h_B.size(), seed + 101);
    float *d_A = nullptr, *d_B = nullptr, *d_C = nullptr, *d_ref = nullptr;
    CUDA_CHECK(cudaMalloc(&d_A, timed.a() * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_B, timed.b() * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_C, timed.c() * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_ref, timed.c() * sizeof(float)));
    CUDA_CHECK(cudaMemcpy(d_A, h_A.data(), timed.a() * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_B, h_B.data(), timed.b() * sizeof(float), cudaMemcpyHostToDevice));
    const double flop = 2.0 * double(timed.M) * timed.N * timed.K;
    const auto gflops = [&](double ms) { return flop / (ms * 1e6); };

    // cuBLAS: the ceiling and the GPU-side reference; itself checked against the CPU on
    // sampled rows (all rows for small shapes).
    const Gemm gref{timed.M, timed.N, timed.K, d_A, d_B, d_ref, handle};
    runOnce(kCublas, gref, h_ref.data());
    {
        std::vector<int> rows;
        const int samples = double(timed.M) * timed.N * timed.K <= double(1 << 27) ? timed.M : std::min(timed.M, 16);
        for (int i = 0; i < samples; ++i) rows.push_back(samples == 1 ? 0 : int(int64_t(i) * (timed.M - 1) / (samples - 1)));
        std::vector<double> ref(size_t(samples) * timed.N);
        std::vector<float> got(size_t(samples) * timed.N);
        for (int i = 0; i < samples; ++i) {
            verify::matmul_reference(h_A.data() + size_t(rows[i]) * timed.K, h_B.data(), ref.data() + size_t(i) * timed.N,
                                     1, timed.N, timed.K);  // row rows[i] of C, as a 1-row product
            std::copy_n(h_ref.begin() + size_t(rows[i]) * timed.N, timed.N, got.begin() + size_t(i) * timed.N);
        }
        report.check(verify::compare(got.data(), ref.data(), got.size(), kTol,
                                     "cuBLAS vs CPU, " + std::to_string(samples) + " rows of " + timed.text()));
    }
    const double cublas_ms = lesson::time_median_ms(int(opt.repeat), [&] { launchCublas(gref); });
    const double cublas_gflops = gflops(cublas_ms);
    const double peak = lesson::peak_gflops(prop, int(opt.device), lesson::MathUnit::Fp32Simt);
    const std::string small = lesson::small_gemm_note(timed.M, timed.N, prop);
    report.bound("FP32 FMA peak from the SM clock", peak, "GFLOP/s");
    report.yardstick("cuBLAS SGEMM fp32 (CUBLAS_DEFAULT_MATH), same shape", cublas_gflops, "GFLOP/s");
    report.timing(lesson::kTimingMethod);
    report.variant_bound(kCublas.name, cublas_ms, cublas_gflops, "GFLOP/s", peak, "FP32 peak");

    // Each rung: launch, copy out, verify against cuBLAS element by element, time.
    std::vector<Rung> rungs(std::begin(kLadder), std::end(kLadder));
    if (sweep) rungs.insert(rungs.end(), std::begin(kSweep), std::end(kSweep));
    const Gemm g{timed.M, timed.N, timed.K, d_A, d_B, d_C, handle};
    std::string best;
    double best_gflops = 0;
    for (size_t i = 0; i < rungs.size(); ++i) {
        const Rung& r = rungs[i];
        runOnce(r, g, h_C.data());
        report.check(verify::compare(h_C.data(), h_ref.data(), timed.c(), kTol,
                                     std::string(r.name) + " vs cuBLAS, every element of " + timed.text()));
        const double ms = lesson::time_median_ms(int(opt.repeat), [&] { r.launch(g); });
        report.variant_yardstick(r.name, ms, gflops(ms), "GFLOP/s", cublas_gflops, "cuBLAS", small);
        if (i < std::size(kLadder) && gflops(ms) > best_gflops) {  // the key result is the ladder's best rung
            best_gflops = gflops(ms);
            best = r.name;
        }
    }

    report.note("edges: every rung handles any M, N, K itself (no fallback): tiles that cross the matrix edge load "
                "zeros and store only inside C; rungs 4-7 use 16-byte accesses only where a row starts 16-byte "
                "aligned (K % 4 == 0 for A, N % 4 == 0 for B and C) and guarded 4-byte ones elsewhere");
    report.note("timed-shape checks compare each rung with cuBLAS's output, every element; cuBLAS is checked "
                "against the CPU on sampled rows");
    char key[128];
    std::snprintf(key, sizeof key, "best rung '%s' %.0f GFLOP/s at %s", best.c_str(), best_gflops, timed.text().c_str());
    report.key_result(key, best_gflops / cublas_gflops, "cuBLAS fp32", lesson::Against::Yardstick, small);
    report.default_size(cli.at_default_size());
    report.target("best rung vs cuBLAS fp32", best_gflops / cublas_gflops, 0.98, "x");

    CUBLAS_CHECK(cublasDestroy(handle));
    CUDA_CHECK(cudaFree(d_A));
    CUDA_CHECK(cudaFree(d_B));
    CUDA_CHECK(cudaFree(d_C));
    CUDA_CHECK(cudaFree(d_ref));
    return report.finish(opt.json);
}
