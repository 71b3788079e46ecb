// Lesson 07 of the course (Gaussian blur), rung 1 of 4: one thread per pixel, 9 reads from
// global memory. Before: lesson 06 tiled a matrix product in shared memory. Next: rung 2
// (kernels/2_halo.cuh) stages a tile and its halo in shared memory.
// Run: ./build/bin/gaussian_blur [--quick]   (README.md is the handout)
#pragma once
#include "common.cuh"

// One thread per pixel, 9 reads from global memory (neighbours mostly hit the L1/L2 caches).
__global__ void blur3x3Naive(const float* __restrict__ in, float* __restrict__ out, int width, int height) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= width || y >= height) return;
    const int xl = clampToEdge(x - 1, width), xr = clampToEdge(x + 1, width);
    const float* up = in + static_cast<size_t>(clampToEdge(y - 1, height)) * width;
    const float* mid = in + static_cast<size_t>(y) * width;
    const float* down = in + static_cast<size_t>(clampToEdge(y + 1, height)) * width;
    const float s = taps121(up[xl], up[x], up[xr]) + 2.0f * taps121(mid[xl], mid[x], mid[xr]) +
                    taps121(down[xl], down[x], down[xr]);
    out[static_cast<size_t>(y) * width + x] = s * (1.0f / 16.0f);
}

inline void launch_naive(const Image& im) {  // one pixel per thread
    const lesson::Grid g = lesson::grid_for(uint64_t(im.width), uint64_t(im.height), 1, kTileW, kRows);
    blur3x3Naive<<<dim3(g.x, g.y), dim3(kTileW, kRows)>>>(im.in, im.out, im.width, im.height);
    CUDA_CHECK_LAUNCH();
}
