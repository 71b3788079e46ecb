// Lesson 21 of the course (flash attention): the Hopper pieces of rungs 8 and 9 (sm_90a).
//
// common/ptx.cuh (included through attention.cuh) already has the mbarrier, 2D TMA, descriptor,
// wgmma and setmaxnreg wrappers. Attention needs three more forms, one PTX instruction each:
//   tma_load_3d          a box of a [heads][N][d] tensor: rows past N of a head are zero-filled
//                        by the copy engine (a 2D map over heads x N rows would read the next head)
//   wgmma_qk_m64n128     S (64 x 128, fp32) = Q (64 x 16, smem, K-major) * K^T (K tile stored
//                        [key][d]: the B operand is K-major too, transpose bit 0)
//   wgmma_pv_m64n{64,128} O (64 x d) += P (64 x 16, REGISTERS, bf16) * V (V tile stored [key][d]:
//                        N = d is the contiguous dimension, MN-major, transpose bit 1)
// and the host side: a tensor map of a [heads][N][d] bf16 tensor, boxes of 64 columns x `rows`
// rows, 128-byte swizzle (cuTensorMapEncodeTiled, fetched by common/tensor_map.h).
// Run: ./build/bin/flash_attention --rung=8 (or 9); README.md, "Walk through the code".
#pragma once
#include <cstdint>
#include <string>

#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled: the driver function, fetched at run time

#include "attention.cuh"
#include "common/check.h"
#include "common/tensor_map.h"

#if defined(PTX_SM90A)
// A box of a 3D tensor map -> shared memory: x = column (d), y = row (sequence), z = head.
// Elements outside the tensor (rows >= N) arrive as zeros and still count in the byte total.
__device__ __forceinline__ void tma_load_3d(void* dst, const CUtensorMap* map, int x, int y, int z, uint64_t* bar) {
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], "
        "[%2];\n" ::"r"(smem_addr(dst)),
        "l"(map), "r"(smem_addr(bar)), "r"(x), "r"(y), "r"(z)
        : "memory");
}

// Descriptor of a K-major operand tile (Q, or K for S = Q K^T): rows of 64 bf16 = 128 bytes in the
// 128-byte swizzle, 8-row atoms 1024 bytes apart (SBO). The k-step kk of a 64-column box starts
// 32 * kk bytes into the row (lesson 20's desc_a; the same layout serves the B operand here).
__device__ __forceinline__ uint64_t desc_kmajor(const bf16* tile) { return make_desc(tile, 16, 1024); }
// Descriptor of the V tile, MN-major B operand: key-rows of 64 bf16 (128 bytes), 8-key atoms
// 1024 bytes apart (SBO); columns 64..127 of d lie in the next box, `box_bytes` on (LBO).
__device__ __forceinline__ uint64_t desc_mnmajor(const bf16* tile, uint32_t box_bytes) {
    return make_desc(tile, box_bytes, 1024);
}

// The register pair lists of the accumulators (d[i] .. d[i + 7]).
#define L21_ACC8(i)                                                                                             \
    "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), \
        "+f"(d[i + 7])
#define L21_ACC32 L21_ACC8(0), L21_ACC8(8), L21_ACC8(16), L21_ACC8(24)
#define L21_ACC64 L21_ACC32, L21_ACC8(32), L21_ACC8(40), L21_ACC8(48), L21_ACC8(56)

// S (64 x 128 fp32: 64 registers a thread) = A (64 x 16, smem, K-major) * B (16 x 128, smem, K-major)
// + (scale_d ? S : 0): the m64n128k16 wrapper of common/ptx.cuh with B K-major (transpose bit 0), since K is stored
// [key][d]: the tile holds 128 rows (keys) of the 16 k-values.
__device__ __forceinline__ void wgmma_qk_m64n128(float (&d)[64], uint64_t desc_a, uint64_t desc_b, int scale_d) {
    wgmma_m64n128k16</*kTransB=*/0>(d, desc_a, desc_b, scale_d);
}

// O (64 x 128 fp32) = A (64 x 16 bf16 in registers: the m16n8k16 A fragment of each warp's 16
// rows, 4 registers a thread) * B (16 x 128, smem, MN-major) + (scale_d ? O : 0).
__device__ __forceinline__ void wgmma_pv_m64n128(float (&d)[64], const uint32_t (&a)[4], uint64_t desc_b, int scale_d) {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
        "{" PTX_WGMMA_D64  // common/ptx.cuh
        "}, "
        "{%64, %65, %66, %67}, %68, p, 1, 1, 1;\n"  // scale A, B: 1; trans B: 1 (MN-major)
        "}\n"
        : L21_ACC64
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d));
}
// The same for d = 64: O (64 x 64 fp32: 32 registers a thread).
__device__ __forceinline__ void wgmma_pv_m64n64(float (&d)[32], const uint32_t (&a)[4], uint64_t desc_b, int scale_d) {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
        "}, "
        "{%32, %33, %34, %35}, %36, p, 1, 1, 1;\n"
        "}\n"
        : L21_ACC32
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d));
}
template <int D>
__device__ __forceinline__ void wgmma_pv(float (&d)[D / 2], const uint32_t (&a)[4], uint64_t desc_b, int scale_d) {
    if constexpr (D == 64) wgmma_pv_m64n64(d, a, desc_b, scale_d);
    else wgmma_pv_m64n128(d, a, desc_b, scale_d);
}
#undef L21_ACC8
#undef L21_ACC32
#undef L21_ACC64

// 2^x in one MUFU.EX2, results below 2^-126 flushed to zero (exp2f adds a range fix-up around it
// for denormal results, which a softmax does not need: such a probability is 0 next to the maximum's 1).
__device__ __forceinline__ float exp2_ftz(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

// The P fragments are read by the tensor cores after the wgmma is issued: this keeps the compiler
// from reusing their registers before wgmma_wait says the reads are done (fence_acc for uint32_t).
template <int K>
__device__ __forceinline__ void fence_frag(uint32_t (&p)[K][4]) {
#pragma unroll
    for (int k = 0; k < K; ++k)
#pragma unroll
        for (int i = 0; i < 4; ++i) asm volatile("" : "+r"(p[k][i])::"memory");
}
#endif  // PTX_SM90A

// ------------------------------------------------------------------ host: tensor maps

// The three maps of one problem (Q, K, V), and what they were built for.
struct AttentionMaps {
    CUtensorMap q, k, v;
    const void *Q = nullptr, *K = nullptr, *V = nullptr;
    int64_t heads = 0;
    int N = 0, d = 0, rows = 0, q_rows = 0;
    bool built_for(const Attention& a, int box_rows, int q_box_rows) const {
        return Q == a.Q && K == a.K && V == a.V && heads == a.heads && N == a.N && d == a.d && rows == box_rows &&
               q_rows == q_box_rows;
    }
};

// A [heads][N][d] bf16 tensor as a 3D tensor map (innermost first: d, N, heads), boxes of 64
// columns (128 bytes, the widest the 128-byte swizzle allows) x `rows` rows x 1 head, written to
// shared memory in that swizzle. Out-of-range rows are filled with zeros (OOB_FILL_NONE).
inline CUtensorMap make_attention_map(PFN_cuTensorMapEncodeTiled_v12000 encode, const bf16* ptr, int64_t heads, int N,
                                      int d, int rows) {
    CUtensorMap map;
    const cuuint64_t dims[3] = {cuuint64_t(d), cuuint64_t(N), cuuint64_t(heads)};
    const cuuint64_t strides[2] = {cuuint64_t(d) * sizeof(bf16), cuuint64_t(N) * d * sizeof(bf16)};  // bytes
    const cuuint32_t box[3] = {64, cuuint32_t(rows), 1};
    const cuuint32_t elem_strides[3] = {1, 1, 1};
    const CUresult r = encode(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, const_cast<bf16*>(ptr), dims, strides, box,
                              elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                              CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS)
        lesson::fail_call("CUDA driver", "cuTensorMapEncodeTiled", std::to_string(int(r)).c_str(), __FILE__, __LINE__);
    return map;
}
// Q, K and V of `a`: K's and V's boxes of `box_rows` rows (a key tile), Q's of `q_box_rows` (a
// block's query tile, which need not be as tall). cuTensorMapEncodeTiled is a driver function:
// the runtime hands us its address once, so the program needs no -lcuda.
inline AttentionMaps make_attention_maps(const Attention& a, int box_rows, int q_box_rows) {
    static const PFN_cuTensorMapEncodeTiled_v12000 encode = lesson::tensor_map_encoder();  // common/tensor_map.h
    AttentionMaps m;
    m.q = make_attention_map(encode, a.Q, a.heads, a.N, a.d, q_box_rows);
    m.k = make_attention_map(encode, a.K, a.heads, a.N, a.d, box_rows);
    m.v = make_attention_map(encode, a.V, a.heads, a.N, a.d, box_rows);
    m.Q = a.Q;
    m.K = a.K;
    m.V = a.V;
    m.heads = a.heads;
    m.N = a.N;
    m.d = a.d;
    m.rows = box_rows;
    m.q_rows = q_box_rows;
    return m;
}
