// Lesson 12 of the course (matrix transpose), the yardsticks: two copies of the matrix, the same
// bytes as a transpose without the transpose. copyWide has rung 5's access pattern, copyTile the
// geometry of rungs 1-4. Next: rung 1 (kernels/1_naive.cuh).
// Run: ./build/bin/transpose [--quick]   (README.md is the handout)
#pragma once
#include "common.cuh"

// The yardstick: a copy with the wide rung's access pattern, minus the transpose.
__global__ void copyWide(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
    const int x = blockIdx.x * kWide + 4 * threadIdx.x;  // first of this thread's 4 columns
    const int y0 = blockIdx.y * kWide + threadIdx.y;
    float4 v[kWide / kWideThreads];
    if (cols % 4 == 0) {  // rows start 16-byte aligned: 16-byte loads and stores
        const int xc = clampTo(x, cols - 3);
        for (int j = 0; j < kWide / kWideThreads; ++j)
            v[j] = *reinterpret_cast<const float4*>(
                in + static_cast<size_t>(clampTo(y0 + kWideThreads * j, rows)) * cols + xc);
        for (int j = 0; j < kWide / kWideThreads; ++j) {
            const int y = y0 + kWideThreads * j;
            if (y < rows && x < cols) *reinterpret_cast<float4*>(out + static_cast<size_t>(y) * cols + x) = v[j];
        }
    } else {  // element by element
        for (int j = 0; j < kWide / kWideThreads; ++j) {
            const size_t row = static_cast<size_t>(clampTo(y0 + kWideThreads * j, rows)) * cols;
            v[j] = make_float4(in[row + clampTo(x, cols)], in[row + clampTo(x + 1, cols)],
                               in[row + clampTo(x + 2, cols)], in[row + clampTo(x + 3, cols)]);
        }
        for (int j = 0; j < kWide / kWideThreads; ++j) {
            const int y = y0 + kWideThreads * j;
            if (y >= rows) continue;
            float* dst = out + static_cast<size_t>(y) * cols;
            if (x < cols) dst[x] = v[j].x;
            if (x + 1 < cols) dst[x + 1] = v[j].y;
            if (x + 2 < cols) dst[x + 2] = v[j].z;
            if (x + 3 < cols) dst[x + 3] = v[j].w;
        }
    }
}

// A copy with the geometry of rungs 1-4 (scalar, 4 elements per thread): tells
// how much of what is left is the transpose and how much the geometry.
__global__ void copyTile(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
    const int x = blockIdx.x * kTile + threadIdx.x;
    const int y0 = blockIdx.y * kTile + threadIdx.y;
    float v[kTile / kBlockRows];
    for (int j = 0; j < kTile / kBlockRows; ++j)
        v[j] = in[static_cast<size_t>(clampTo(y0 + kBlockRows * j, rows)) * cols + clampTo(x, cols)];
    for (int j = 0; j < kTile / kBlockRows; ++j) {
        const int y = y0 + kBlockRows * j;
        if (x < cols && y < rows) out[static_cast<size_t>(y) * cols + x] = v[j];
    }
}

static void launch_copy_wide(const float* in, float* out, int rows, int cols) {
    copyWide<<<wide_grid(rows, cols), dim3(kWideThreads, kWideThreads)>>>(in, out, rows, cols);
}
static void launch_copy_tile(const float* in, float* out, int rows, int cols) {
    copyTile<<<tile_grid(rows, cols), dim3(kTile, kBlockRows)>>>(in, out, rows, cols);
}
