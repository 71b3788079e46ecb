// Lesson 20 of the course (the tensor-core GEMM ladder): what the rungs share.
//
// Every rung (kernels/N_name.cuh, N = 1..15) is self-contained, so that `diff` of two
// neighbours shows one idea. Only what does not change lives here: the problem a launcher
// gets (Gemm; Fp8Gemm for rungs 12, 14 and 15), the TMA descriptors of its swizzled tiles (make_tensor_map,
// host code; lesson 24 builds its prefill's with it too), the wgmma descriptors of this lesson's
// bf16 tiles and the store of a wgmma accumulator. The thin PTX wrappers the rungs call (ldmatrix, mma.sync,
// cp.async: rungs 3-5; mbarrier, TMA, wgmma, setmaxnreg, clusters: rungs 5-15; the FP8
// wgmmas of rungs 12, 14 and 15 are in their own files) are common/ptx.cuh, shared with
// lesson 21; the sm_90a ones exist only in an sm_90a image (PTX_SM90A), elsewhere the rungs
// that use them compile to a trap and main.cu's gate skips them.
// Run the ladder: ./build/bin/tensor_core_gemm (or --rung=N); README.md explains every line.
#pragma once
#include <cstdint>
#include <string>

#include <cuda.h>          // CUtensorMap, the TMA descriptor type
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled: the driver function, fetched at run time

#include "common/check.h"
#include "common/ptx.cuh"

// One product C = A * B, row-major: A is M x K, B is K x N (bf16), C is M x N (fp32).
struct Gemm {
    int M, N, K;
    const bf16* A;
    const bf16* B;
    float* C;
    const CUtensorMap* tma_A;  // rungs 6-11 and 13: TMA descriptors of A and B (problem.cuh builds
    const CUtensorMap* tma_B;  // them), boxes of 64 x 64 elements, 128-byte swizzle
    int sms;                   // multiprocessors (the persistent rungs size their grid from it)
};

// The FP8 rungs' product: A (M x K) and B^T (N x K), both row-major FP8 E4M3 codes behind TMA
// descriptors of 64 x 128-byte boxes. Rung 12: C (M x N, fp32) = scale * (A B), scale = sa * sb.
// Rungs 14 and 15: block scales on the device instead, scale_a[kt * M + m] for A's 1 x 128 strips and
// scale_b[nb * ldk + kt] for B's 128 x 128 blocks (ldk: K / 128 rounded up to a multiple of 4).
struct Fp8Gemm {
    int M, N, K;
    const CUtensorMap* tma_A;
    const CUtensorMap* tma_Bt;
    float scale;
    float* C;
    int sms;
    const float* scale_a = nullptr;
    const float* scale_b = nullptr;
};

// A TMA descriptor for a row-major matrix (rows x cols, rows `ld` elements apart) of `bytes`-byte
// elements of `type`: boxes of 64 rows of 128 bytes (the widest box row the 128-byte swizzle
// allows), written to shared memory in that swizzle. The elements of a box past `rows` or `cols`
// are not read: they arrive as zeros (rung 13's edges). The row stride, ld * bytes, must be a
// multiple of 16. `encode` is the driver's cuTensorMapEncodeTiled (common/tensor_map.h).
inline CUtensorMap make_swizzled_map(PFN_cuTensorMapEncodeTiled_v12000 encode, const void* ptr, int rows, int cols,
                                     int ld, CUtensorMapDataType type, int bytes) {
    CUtensorMap map;
    const cuuint64_t dims[2] = {cuuint64_t(cols), cuuint64_t(rows)};  // innermost first
    const cuuint64_t strides[1] = {cuuint64_t(ld) * bytes};           // bytes from one row to the next
    const cuuint32_t box[2] = {cuuint32_t(128 / bytes), 64};
    const cuuint32_t elem_strides[2] = {1, 1};
    const CUresult r =
        encode(&map, type, 2, const_cast<void*>(ptr), dims, strides, box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
               CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS)
        lesson::fail_call("CUDA driver", "cuTensorMapEncodeTiled", std::to_string(int(r)).c_str(), __FILE__, __LINE__);
    return map;
}
// bf16: boxes of 64 x 64 elements (64 columns = 128 bytes). Rows `ld` elements apart (problem.cuh's
// B, padded for rung 13's N), or `cols` apart where not given.
inline CUtensorMap make_tensor_map(PFN_cuTensorMapEncodeTiled_v12000 encode, const bf16* ptr, int rows, int cols,
                                   int ld) {
    return make_swizzled_map(encode, ptr, rows, cols, ld, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, sizeof(bf16));
}
inline CUtensorMap make_tensor_map(PFN_cuTensorMapEncodeTiled_v12000 encode, const bf16* ptr, int rows, int cols) {
    return make_tensor_map(encode, ptr, rows, cols, cols);
}

#if defined(PTX_SM90A)
// ------------------------------------------------------------------ sm_90a: rungs 5-15

// Descriptors of the 64 x 64 boxes in the 128-byte swizzle that TMA writes (rung 5's threads write
// the same layout); make_desc in common/ptx.cuh, README.md derives the fields.
// A, K-major: rows of 64 bf16 = 128 bytes, 8-row swizzle atoms 1024 bytes apart (SBO); LBO unused.
__device__ __forceinline__ uint64_t desc_a(const bf16* tile) { return make_desc(tile, 16, 1024); }
// B, N-major (row-major K x N, the "transposed" operand): k-rows of 64 bf16 = 128 bytes; 8-k-row
// atoms 1024 bytes apart (SBO); the next 64 columns of N in the next 64 x 64 box, 8192 bytes on (LBO).
__device__ __forceinline__ uint64_t desc_b(const bf16* tile) { return make_desc(tile, 8192, 1024); }

// Orders this thread's earlier writes to shared memory through the generic proxy (st.shared,
// cp.async) before later accesses through the async proxy (wgmma's operand reads, TMA). Tiles
// that threads write (rung 5) need it from every writer, then a barrier, before a wgmma reads them.
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// The C fragment of one warpgroup's m64nN accumulator (PTX ISA, "wgmma 64xNx16 D"): thread t of
// the warpgroup holds, for each 8-column block j, d[4j..4j+1] at row 16*(t/32) + (t%32)/4 and
// columns 8j + 2*(t%4) + {0,1}, and d[4j+2..4j+3] eight rows below. Written as float2 stores.
template <int R>
__device__ __forceinline__ void store_acc(const float (&d)[R], float* C, int ldc, int row0, int col0, int t) {
    const int row = row0 + 16 * (t / 32) + (t % 32) / 4;
    const int col = col0 + 2 * (t % 4);
#pragma unroll
    for (int j = 0; j < R / 4; ++j) {
        *reinterpret_cast<float2*>(C + size_t(row) * ldc + col + 8 * j) = make_float2(d[4 * j], d[4 * j + 1]);
        *reinterpret_cast<float2*>(C + size_t(row + 8) * ldc + col + 8 * j) = make_float2(d[4 * j + 2], d[4 * j + 3]);
    }
}

#endif  // PTX_SM90A
