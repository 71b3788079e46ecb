// Lesson 24 of the course (the transformer decoder): the prefill GEMMs. Where the GPU runs sm_90a
// code and the shape fits its tiles, lesson 20's last rung (wgmma fed by TMA, a cluster of two,
// one wgmma group in flight); cuBLAS elsewhere: another GPU class, an odd number of rows (a
// batch x prompt that is not a multiple of 256), a width no 256-column tile divides.
// Run: ./build/bin/transformer_decoder   (README.md is the handout)
#pragma once
#include <cstdint>

#include <cuda.h>
#include <cudaTypedefs.h>

#include "20_tensor_core_gemm/kernels/11_wgmma_pipelined.cuh"
#include "common/check.h"
#include "common/needs.h"
#include "common/tensor_map.h"

// What lesson 20's rung 11 needs of the GPU, and of the shape (its tiles: 256 rows, 256 columns, 64 deep).
inline lesson::Needs wgmma_needs() {
    lesson::Needs n;
    n.sm90a = true;
    n.clusters = true;
    n.smem = size_t(rung11::kSmemBytes);
    return n;
}
inline bool wgmma_fits(int64_t rows, int64_t K, int64_t N) { return rows % 256 == 0 && N % 256 == 0 && K % 64 == 0; }

// C (rows x N, fp32) = A (rows x K) W (K x N), both bf16 row-major, by rung 11: the TMA descriptors
// of A and W in the boxes and swizzle its kernel reads (64 x 64 elements, 128-byte swizzle).
inline void gemm_wgmma(PFN_cuTensorMapEncodeTiled_v12000 encode, const bf16* A, const bf16* W, float* C, int64_t rows,
                       int64_t K, int64_t N, int sms) {
    CUtensorMap maps[2];
    const bf16* ptrs[2] = {A, W};
    const int64_t shapes[2][2] = {{rows, K}, {K, N}};  // rows, columns of each
    for (int i = 0; i < 2; ++i) {
        const cuuint64_t extent[2] = {cuuint64_t(shapes[i][1]), cuuint64_t(shapes[i][0])};  // columns first
        const cuuint64_t pitch[1] = {cuuint64_t(shapes[i][1]) * 2};
        const cuuint32_t box[2] = {64, 64}, step[2] = {1, 1};
        const CUresult r = encode(&maps[i], CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<bf16*>(ptrs[i]), extent,
                                  pitch, box, step, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                  CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
        if (r != CUDA_SUCCESS)
            lesson::fail_call("CUDA driver", "cuTensorMapEncodeTiled", std::to_string(int(r)).c_str(), __FILE__,
                              __LINE__);
    }
    rung11::launch(Gemm{int(rows), int(N), int(K), A, W, C, &maps[0], &maps[1], sms});
}
