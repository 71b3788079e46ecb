// Lesson 12 of the course (matrix transpose), rung 4 of 5: rung 3's padded tile, blocks taken
// along diagonals. Before: rung 3 (kernels/2_tiled.cuh, PAD = 1) takes tiles in row-major order.
// Next: rung 5 (kernels/5_wide.cuh) puts four times the bytes in flight per thread.
// Run: ./build/bin/transpose [--quick]   (README.md is the handout)
#pragma once
#include "2_tiled.cuh"

// Rung 4: padded tile, blocks taken along diagonals. Blocks start roughly
// in the order of their linear id; here consecutive ids get tiles on a
// diagonal, so they read and write different rows AND columns at once (on
// GPUs with few, coarsely interleaved memory partitions, the row-major order
// sent every write of a wave to one partition: "partition camping").
// bid -> (colBlock, rowBlock) is a bijection on the gridDim.x x gridDim.y grid.
__global__ void transposeDiagonal(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
    const unsigned bid = blockIdx.x + gridDim.x * blockIdx.y;
    const unsigned rowBlock = bid % gridDim.y;
    const unsigned colBlock = (bid / gridDim.y + rowBlock) % gridDim.x;
    transposeTile<1>(in, out, rows, cols, static_cast<int>(rowBlock), static_cast<int>(colBlock));
}

static void launch_diagonal(const float* in, float* out, int rows, int cols) {
    transposeDiagonal<<<tile_grid(rows, cols), dim3(kTile, kBlockRows)>>>(in, out, rows, cols);
}
