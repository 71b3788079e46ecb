// Lesson 12 of the course (matrix transpose), rung 1 of 5: naive. Before: the copy yardsticks
// (kernels/copy.cuh) move the same bytes without transposing. Next: rungs 2 and 3
// (kernels/2_tiled.cuh) stage a tile in shared memory so that the writes are coalesced too.
// Run: ./build/bin/transpose [--quick]   (README.md is the handout)
#pragma once
#include "common.cuh"

// Rung 1: naive. Reads are coalesced (a warp reads 32 neighbours of one
// row); writes are not (a warp writes one element in each of 32 output rows).
__global__ void transposeNaive(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
    const int x = blockIdx.x * kTile + threadIdx.x;  // column of in = row of out
    const int y0 = blockIdx.y * kTile + threadIdx.y;
    float v[kTile / kBlockRows];
    for (int j = 0; j < kTile / kBlockRows; ++j)
        v[j] = in[static_cast<size_t>(clampTo(y0 + kBlockRows * j, rows)) * cols + clampTo(x, cols)];
    for (int j = 0; j < kTile / kBlockRows; ++j) {
        const int y = y0 + kBlockRows * j;  // row of in = column of out
        if (x < cols && y < rows) out[static_cast<size_t>(x) * rows + y] = v[j];
    }
}

static void launch_naive(const float* in, float* out, int rows, int cols) {
    transposeNaive<<<tile_grid(rows, cols), dim3(kTile, kBlockRows)>>>(in, out, rows, cols);
}
