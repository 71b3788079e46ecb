// Lesson 12 of the course (matrix transpose), rung 5 of 5: wide tiles, 16-byte loads and stores.
// Before: rungs 2-4 (kernels/2_tiled.cuh) move 4 floats per thread. Next: lesson 13 applies the
// ladder to SGEMM.
// Run: ./build/bin/transpose [--quick]   (README.md is the handout)
#pragma once
#include "common.cuh"

// Rung 5: wide. A 64x64 tile, 16x16 threads. Each thread loads 4 float4s
// (16-byte loads of rows ty, ty+16, ty+32, ty+48) and stores 4 float4s, so a
// thread has 64 bytes of loads in flight instead of 16 before the barrier.
// Shapes whose rows are not 16-byte aligned (cols or rows not a multiple of 4)
// go element by element.
__global__ void transposeWide(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
    __shared__ float tile[kWide][kWide + 1];  // padded: a column read is at most 2-way conflicted
    const int r0 = blockIdx.y * kWide, c0 = blockIdx.x * kWide;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int x = c0 + 4 * tx;  // first of this thread's 4 columns of in
    float4 v[kWide / kWideThreads];
    for (int j = 0; j < kWide / kWideThreads; ++j) {
        const size_t row = static_cast<size_t>(clampTo(r0 + ty + kWideThreads * j, rows)) * cols;
        if (cols % 4 == 0) v[j] = *reinterpret_cast<const float4*>(in + row + clampTo(x, cols - 3));
        else
            v[j] = make_float4(in[row + clampTo(x, cols)], in[row + clampTo(x + 1, cols)],
                               in[row + clampTo(x + 2, cols)], in[row + clampTo(x + 3, cols)]);
    }
    for (int j = 0; j < kWide / kWideThreads; ++j) {
        const int r = ty + kWideThreads * j;
        tile[r][4 * tx] = v[j].x;
        tile[r][4 * tx + 1] = v[j].y;
        tile[r][4 * tx + 2] = v[j].z;
        tile[r][4 * tx + 3] = v[j].w;
    }
    __syncthreads();
    // Row c of the out tile holds rows 4tx..4tx+3 of the in tile at column c.
    for (int j = 0; j < kWide / kWideThreads; ++j) {
        const int c = ty + kWideThreads * j;
        v[j] = make_float4(tile[4 * tx][c], tile[4 * tx + 1][c], tile[4 * tx + 2][c], tile[4 * tx + 3][c]);
    }
    const int ox = r0 + 4 * tx;  // first of this thread's 4 columns of out (= rows of in)
    for (int j = 0; j < kWide / kWideThreads; ++j) {
        const int oy = c0 + ty + kWideThreads * j;  // row of out = column of in
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

static void launch_wide(const float* in, float* out, int rows, int cols) {
    transposeWide<<<wide_grid(rows, cols), dim3(kWideThreads, kWideThreads)>>>(in, out, rows, cols);
}
