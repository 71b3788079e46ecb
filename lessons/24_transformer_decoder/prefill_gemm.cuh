// Lesson 24 of the course (the transformer decoder): the prefill GEMMs. Where the GPU runs sm_90a
// code and the shape fits its tiles, lesson 20's rung 11 (wgmma fed by TMA, a cluster of two,
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

// C (rows x N, fp32) = A (rows x K) W (K x N), both bf16 row-major, by rung 11, with the TMA
// descriptors lesson 20 builds for it (its kernels/common.cuh: 64 x 64 boxes, 128-byte swizzle).
inline void gemm_wgmma(PFN_cuTensorMapEncodeTiled_v12000 encode, const bf16* A, const bf16* W, float* C, int64_t rows,
                       int64_t K, int64_t N, int sms) {
    const CUtensorMap maps[2] = {make_tensor_map(encode, A, int(rows), int(K)),
                                 make_tensor_map(encode, W, int(K), int(N))};
    rung11::launch(Gemm{int(rows), int(N), int(K), A, W, C, &maps[0], &maps[1], sms});
}
