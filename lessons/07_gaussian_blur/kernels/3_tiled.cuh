// Lesson 07 of the course (Gaussian blur), rung 3 of 4: blocks that loop over tiles, the next
// tile loading while this one is blurred. Before: rung 2 (kernels/2_halo.cuh) loads one tile per
// block and waits for it. Next: rung 4 (kernels/4_rows.cuh) uses no shared memory at all.
// Run: ./build/bin/gaussian_blur [--quick]   (README.md is the handout)
#pragma once
#include "common.cuh"

// The image blockIdx.z (images stored back to back) is cut into kTileW x kTileH tiles, numbered
// row by row; block b blurs tiles b, b + gridDim.x, ... (a grid-stride loop over tiles). Per tile:
// 1. store the (kTileW+2) x (kTileH+2) input tile, halo and its four corners included, from
//    registers into shared memory; 2. __syncthreads(); 3. issue the loads of the block's next tile
//    into registers; 4. blur this tile from shared memory while those loads are in flight.
// Two shared buffers take turns, so one barrier per tile is enough.
__global__ void __launch_bounds__(kTileW* kRows, kBlocksPerSm)
    blur3x3Tiled(const float* __restrict__ in, float* __restrict__ out, int width, int height) {
    __shared__ float tile[2][kTileH + 2][kTileW + 2];
    const size_t image = static_cast<size_t>(blockIdx.z) * width * height;
    in += image;
    out += image;
    const int tilesAcross = (width + kTileW - 1) / kTileW;
    const int tiles = tilesAcross * ((height + kTileH - 1) / kTileH);
    // Number the shared cells row by row; the block's threads stride over all of them, so the
    // halo and its four corners are loaded like any other cell. Cell i = (r, c) of tile k holds
    // input pixel (x0 + c - 1, y0 + r - 1), clamped to the image, (x0, y0) = tile k's top left.
    constexpr int kSide = kTileW + 2, kCells = kSide * (kTileH + 2), kThreads = kTileW * kRows;
    constexpr int kPasses = (kCells + kThreads - 1) / kThreads;  // cells per thread, rounded up
    const int t = threadIdx.y * kTileW + threadIdx.x;
    float v[kPasses];  // this thread's cells of the tile in flight
    // All kPasses loads are issued back to back, so they wait for memory together (README, "What
    // to observe"). In the last pass, a cell number past the tile's last cell still gives a valid
    // (clamped) address, so it loads without a branch; only its store is skipped.
    auto load = [&](int k) {
        const int left = (k % tilesAcross) * kTileW - 1, top = (k / tilesAcross) * kTileH - 1;  // cell (0, 0)
        int r = t / kSide, c = t % kSide;  // cell t + p * kThreads, stepped pass by pass
#pragma unroll
        for (int p = 0; p < kPasses; ++p) {
            v[p] = in[static_cast<size_t>(clampToEdge(top + r, height)) * width + clampToEdge(left + c, width)];
            r += kThreads / kSide;
            c += kThreads % kSide;
            if (c >= kSide) c -= kSide, ++r;
        }
    };
    const int first = blockIdx.x, step = gridDim.x;
    if (first < tiles) load(first);
    int b = 0;                                           // the shared buffer of this tile
    for (int k = first; k < tiles; k += step, b ^= 1) {  // the same trip count in every thread
#pragma unroll
        for (int p = 0; p < kPasses; ++p) {
            if (t + p * kThreads < kCells) (&tile[b][0][0])[t + p * kThreads] = v[p];
        }
        // Threads of a partial tile load and store too (clamped): no thread may skip the barrier.
        __syncthreads();  // without it a thread may read a cell that its neighbour has not written yet
        // Buffer b ^ 1 is free: every thread passed this barrier after blurring from it.
        if (k + step < tiles) load(k + step);  // in flight while this tile is blurred

        // The kernel is separable: [1 2 1] across each shared row, then [1 2 1] down the column.
        // A thread's kPer output rows need kPer + 2 shared rows, each summed across once (registers).
        const int c = threadIdx.x + 1, r0 = threadIdx.y * kPer;  // shared rows r0 .. r0 + kPer + 1
        float across[kPer + 2];
#pragma unroll
        for (int i = 0; i < kPer + 2; ++i)
            across[i] = taps121(tile[b][r0 + i][c - 1], tile[b][r0 + i][c], tile[b][r0 + i][c + 1]);
        const int x = (k % tilesAcross) * kTileW + threadIdx.x, y0 = (k / tilesAcross) * kTileH + r0;
#pragma unroll
        for (int i = 0; i < kPer; ++i) {
            const int y = y0 + i;
            if (x < width && y < height)
                out[static_cast<size_t>(y) * width + x] =
                    taps121(across[i], across[i + 1], across[i + 2]) * (1.0f / 16.0f);
        }
    }
}

inline void launch_tiled(const Image& im) {  // each block loops over every gridDim.x-th tile
    blur3x3Tiled<<<dim3(im.tiled_blocks, 1, 1), dim3(kTileW, kRows)>>>(im.in, im.out, im.width, im.height);
    CUDA_CHECK_LAUNCH();
}
