// Lesson 07 of the course (Gaussian blur), rung 2 of 4: one block per tile, the tile and its
// one-pixel halo (corners too) in shared memory. Before: rung 1 (kernels/1_naive.cuh) reads every
// neighbour from global memory. Next: rung 3 (kernels/3_tiled.cuh) loops over tiles.
// Run: ./build/bin/gaussian_blur [--quick]   (README.md is the handout)
#pragma once
#include "common.cuh"

// One 2D block per kHaloW x kHaloH tile of outputs, one thread per output pixel. The block
// copies the (kHaloH+2) x (kHaloW+2) input cells its tile needs - the tile and a one-pixel halo,
// corners included - into shared memory, its threads striding over the cells numbered row by row
// (so no edge or corner can be forgotten), waits once, and blurs from shared memory. Every thread
// loads and reaches the barrier, also in blocks that hang over the image edge; only the final
// store is guarded.
__global__ void blur3x3Halo(const float* __restrict__ in, float* __restrict__ out, int width, int height) {
    // EXERCISE 1 BEGIN: stage the block's tile and its one-pixel halo (corners too) in shared memory, then blur from it
    // HINT: number the (kHaloH + 2) x (kHaloW + 2) cells row by row; the 256 threads stride over them, clampToEdge
    // HINT: every thread loads and reaches the barrier, also in blocks past the image edge; guard only the store
    constexpr int kSide = kHaloW + 2, kCells = kSide * (kHaloH + 2), kThreads = kHaloW * kHaloH;
    __shared__ float tile[kHaloH + 2][kSide];
    const int x0 = blockIdx.x * kHaloW, y0 = blockIdx.y * kHaloH;  // the tile's top-left output pixel
    // Cell (r, c) holds input pixel (x0 + c - 1, y0 + r - 1), clamped to the image.
    for (int i = threadIdx.y * kHaloW + threadIdx.x; i < kCells; i += kThreads) {
        const int r = i / kSide, c = i % kSide;
        tile[r][c] = in[static_cast<size_t>(clampToEdge(y0 + r - 1, height)) * width + clampToEdge(x0 + c - 1, width)];
    }
    __syncthreads();  // every cell is written before any thread reads its neighbours
    const int x = x0 + threadIdx.x, y = y0 + threadIdx.y;
    const int c = threadIdx.x + 1, r = threadIdx.y + 1;  // this thread's pixel in the shared tile
    if (x < width && y < height) {
        const float s = taps121(tile[r - 1][c - 1], tile[r - 1][c], tile[r - 1][c + 1]) +
                        2.0f * taps121(tile[r][c - 1], tile[r][c], tile[r][c + 1]) +
                        taps121(tile[r + 1][c - 1], tile[r + 1][c], tile[r + 1][c + 1]);
        out[static_cast<size_t>(y) * width + x] = s * (1.0f / 16.0f);
    }
    // EXERCISE 1 END
}

inline void launch_halo(const Image& im) {  // one block per kHaloW x kHaloH tile
    const lesson::Grid g = lesson::grid_for(uint64_t(im.width), uint64_t(im.height), 1, kHaloW, kHaloH);
    blur3x3Halo<<<dim3(g.x, g.y), dim3(kHaloW, kHaloH)>>>(im.in, im.out, im.width, im.height);
    CUDA_CHECK_LAUNCH();
}
