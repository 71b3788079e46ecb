// Lesson 13 of the course (the SGEMM ladder): the control for rung 3 -> 4, not a rung.
// Rung 4 changes three things at once against rung 3: 16-byte global loads, A transposed in shared memory, and fewer
// registers, so that 2 blocks of 256 threads share an SM instead of 1. The control is rung 3's kernel asked to fit 2
// blocks per SM (__launch_bounds__(kThreads, 2)), and nothing else of rung 3 changes: against rung 3 it adds the
// second block and whatever ptxas gives up to fit the cap (spills: `-Xptxas -v`), never the second block alone.
// Run: ./build/bin/matmul_ladder [--quick]   (with every rung; occupancy.cuh times it in turns with rungs 3 and 4)
#pragma once
#include "3_reg_tile_2d.cuh"
#include "common.cuh"
#include "common/check.h"

namespace control {

// 2 blocks x 256 threads: at most 65,536 / 512 = 128 registers per thread, the SM's whole register file.
constexpr int kMinBlocks = 2;

inline void launch(const Gemm& g) {
    rung3::sgemmRegTile2D<kMinBlocks>
        <<<dim3(blocks(g.N, rung3::kBN), blocks(g.M, rung3::kBM)), rung3::kThreads>>>(g.M, g.N, g.K, g.A, g.B, g.C);
    CUDA_CHECK_LAUNCH();
}

}  // namespace control
