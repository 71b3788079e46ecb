// Lesson 12 of the course (matrix transpose): the control for rung 5, not a rung. Rung 5 changes four things at
// once against rung 3: a 64x64 tile, float4 loads and stores, 16 floats per thread and a 16x16 block. This is rung
// 5's code on rung 3's 32x32 tile with rung 3's 256 threads and 4 floats per thread (8 x 32 threads, one float4
// each): against rung 3 it adds the float4 accesses alone, and rung 5 adds to it the wider tile with 16 floats per
// thread. `diff kernels/5_wide.cuh kernels/control.cuh` shows the constants and nothing else of the kernel.
// Run: ./build/bin/transpose [--quick]   (main.cu times it in turns with rungs 3 and 5; README.md is the handout)
#pragma once
#include "common.cuh"

// kCtlThreadsX x kCtlThreadsY threads move a kTile x kTile tile: a row of the tile is kCtlThreadsX float4s, and the
// kCtlThreadsY rows of threads cover the tile in kTile / kCtlThreadsY = 1 pass.
constexpr int kCtlThreadsX = kTile / 4;  // 8
constexpr int kCtlThreadsY = kTile;      // 32

// The control: rung 5's kernel with kWide -> kTile and kWideThreads -> kCtlThreadsY (rows of threads; the launch
// gives kCtlThreadsX columns of them). A warp is 4 rows of 8 threads, so each of its scalar shared-memory accesses,
// element [r][4 tx + i] or [4 tx + i][c] of the padded tile, is in bank (r + 4 tx + i) % 32 or (4 tx + i + c) % 32:
// 32 lanes, 32 banks, no conflict on either side of the barrier (rung 5's [64][65] tile keeps a 2-way one).
__global__ void transposeFloat4Tile(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
    __shared__ float tile[kTile][kTile + 1];
    const int r0 = blockIdx.y * kTile, c0 = blockIdx.x * kTile;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int x = c0 + 4 * tx;  // first of this thread's 4 columns of in
    float4 v[kTile / kCtlThreadsY];
    for (int j = 0; j < kTile / kCtlThreadsY; ++j) {
        const size_t row = static_cast<size_t>(clampTo(r0 + ty + kCtlThreadsY * j, rows)) * cols;
        if (cols % 4 == 0) v[j] = *reinterpret_cast<const float4*>(in + row + clampTo(x, cols - 3));
        else
            v[j] = make_float4(in[row + clampTo(x, cols)], in[row + clampTo(x + 1, cols)],
                               in[row + clampTo(x + 2, cols)], in[row + clampTo(x + 3, cols)]);
    }
    for (int j = 0; j < kTile / kCtlThreadsY; ++j) {
        const int r = ty + kCtlThreadsY * j;
        tile[r][4 * tx] = v[j].x;
        tile[r][4 * tx + 1] = v[j].y;
        tile[r][4 * tx + 2] = v[j].z;
        tile[r][4 * tx + 3] = v[j].w;
    }
    __syncthreads();
    // Row c of the out tile holds rows 4tx..4tx+3 of the in tile at column c.
    for (int j = 0; j < kTile / kCtlThreadsY; ++j) {
        const int c = ty + kCtlThreadsY * j;
        v[j] = make_float4(tile[4 * tx][c], tile[4 * tx + 1][c], tile[4 * tx + 2][c], tile[4 * tx + 3][c]);
    }
    const int ox = r0 + 4 * tx;  // first of this thread's 4 columns of out (= rows of in)
    for (int j = 0; j < kTile / kCtlThreadsY; ++j) {
        const int oy = c0 + ty + kCtlThreadsY * j;  // row of out = column of in
        if (oy >= cols || ox >= rows) continue;
        float* dst = out + static_cast<size_t>(oy) * rows + ox;
        if (rows % 4 == 0) {
            *reinterpret_cast<float4*>(dst) = v[j];
        } else {
            dst[0] = v[j].x;
            if (ox + 1 < rows) dst[1] = v[j].y;
            if (ox + 2 < rows) dst[2] = v[j].z;
            if (ox + 3 < rows) dst[3] = v[j].w;
        }
    }
}

static void launch_float4_tile(const float* in, float* out, int rows, int cols) {
    transposeFloat4Tile<<<tile_grid(rows, cols), dim3(kCtlThreadsX, kCtlThreadsY)>>>(in, out, rows, cols);
}
