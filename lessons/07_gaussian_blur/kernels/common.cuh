// Lesson 07 of the course (Gaussian blur): what the four rungs share. The tile shapes, the
// [1 2 1] taps, the clamp-to-edge rule, and the image a launcher gets. Each rung is one file,
// kernels/N_name.cuh with its kernel and launcher, so `diff` of two rungs shows one idea.
// Run: ./build/bin/gaussian_blur [--quick]   (README.md is the handout)
#pragma once
#include <cstdint>

#include "common/check.h"
#include "common/launch.h"

constexpr int kTileW = 128;      // a tile is kTileW x kTileH output pixels, one block of kTileW x kRows threads
constexpr int kRows = 4;         // thread rows per block
constexpr int kPer = 8;          // output pixels per thread, one column of kPer consecutive rows
constexpr int kBlocksPerSm = 3;  // tiled blocks that must fit on one SM: caps registers per thread
constexpr int kTileH = kRows * kPer;
constexpr int kHaloW = 32, kHaloH = 8;  // the one-tile kernel: a 32 x 8 block writes a 32 x 8 tile

// [1 2 1] along a row; the 3x3 kernel is [1 2 1]^T [1 2 1] / 16.
__device__ __forceinline__ float taps121(float l, float c, float r) { return l + 2.0f * c + r; }

// Clamp-to-edge: a neighbour outside the image reads the nearest pixel inside it.
__device__ __forceinline__ int clampToEdge(int i, int n) { return min(max(i, 0), n - 1); }

// One image on the device and the launch shape of the tiled kernel (blocks the GPU holds at once).
struct Image {
    const float* in;
    float* out;
    int width, height;
    unsigned tiled_blocks;
};
