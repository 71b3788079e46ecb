// Lesson 12 of the course (matrix transpose), rungs 2 and 3 of 5: a tile through shared memory,
// 32x32 (bank conflicts) and 32x33 (padded). Before: rung 1 (kernels/1_naive.cuh) writes columns.
// Next: rung 4 (kernels/4_diagonal.cuh) visits the padded tiles along diagonals.
// Run: ./build/bin/transpose [--quick]   (README.md is the handout)
#pragma once
#include "common.cuh"

// Rungs 2 and 3: a tile through shared memory. PAD = 0: the 32 elements
// of a tile column sit 32 floats apart, all in one bank (a 32-way conflict
// when a warp reads a column). PAD = 1: a tile row is 33 floats, so element
// [r][t] is in bank (33 r + t) % 32 = (r + t) % 32: a column hits 32 banks.
// rowBlock/colBlock pick the tile; rung 4 passes a reordered pair.
template <int PAD>
__device__ void transposeTile(const float* __restrict__ in, float* __restrict__ out, int rows, int cols, int rowBlock,
                              int colBlock) {
    __shared__ float tile[kTile][kTile + PAD];
    const int r0 = rowBlock * kTile, c0 = colBlock * kTile;
    // EXERCISE 1 BEGIN: move the tile at (r0, c0) of in through shared memory into out: coalesced reads, coalesced writes
    // HINT: load rows of in into tile[row][col] (clamp the loads into the matrix), __syncthreads(), then read tile columns
    // HINT: out is cols x rows: row c of out is column c of in; store only inside out (ox < rows, oy < cols)
    // Read a tile of in, row by row (coalesced), into shared memory.
    const int x = clampTo(c0 + threadIdx.x, cols);
    for (int j = 0; j < kTile; j += kBlockRows)
        tile[threadIdx.y + j][threadIdx.x] = in[static_cast<size_t>(clampTo(r0 + threadIdx.y + j, rows)) * cols + x];
    __syncthreads();  // the whole tile is in shared memory before anyone reads a column of it
    // Write it as a tile of out, row by row (coalesced): row c of out is column c of in.
    float v[kTile / kBlockRows];
    for (int j = 0; j < kTile / kBlockRows; ++j) v[j] = tile[threadIdx.x][threadIdx.y + kBlockRows * j];
    const int ox = r0 + threadIdx.x;  // column of out = row of in
    for (int j = 0; j < kTile / kBlockRows; ++j) {
        const int oy = c0 + threadIdx.y + kBlockRows * j;  // row of out = column of in
        if (ox < rows && oy < cols) out[static_cast<size_t>(oy) * rows + ox] = v[j];
    }
    // EXERCISE 1 END
}

template <int PAD>
__global__ void transposeTiled(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
    transposeTile<PAD>(in, out, rows, cols, blockIdx.y, blockIdx.x);
}

template <int PAD>
static void launch_tiled(const float* in, float* out, int rows, int cols) {
    transposeTiled<PAD><<<tile_grid(rows, cols), dim3(kTile, kBlockRows)>>>(in, out, rows, cols);
}
