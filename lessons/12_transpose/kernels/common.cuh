// Lesson 12 of the course (matrix transpose): what the rung files share. The tile shapes, the
// clamped loads, and the grids that cover the input. Each rung is one file, kernels/N_name.cuh
// with its kernel and launcher; the copy yardsticks are kernels/copy.cuh.
// Run: ./build/bin/transpose [--quick]   (README.md is the handout)
#pragma once
#include <cstdint>

#include "common/launch.h"

// Rungs 1-4: a block of kTile x kBlockRows threads moves one kTile x kTile tile,
// each thread kTile / kBlockRows = 4 elements (one per pass of its j loop).
constexpr int kTile = 32;
constexpr int kBlockRows = 8;
// Rung 5 (and the copy yardstick): kWideThreads x kWideThreads threads move a
// kWide x kWide tile, each thread 4 float4s = 16 floats.
constexpr int kWide = 64;
constexpr int kWideThreads = 16;

// Every kernel works in two phases: first all of a thread's loads, then all
// of its stores. The loads are clamped into the matrix (an edge tile re-reads
// the last row or column instead of branching), so they have no branch
// between them and leave together: a load in flight costs nothing until its
// value is used. Only the stores are guarded.
__device__ __forceinline__ int clampTo(int i, int n) { return i < n ? i : n - 1; }

// Grids cover the input: x along its columns, y along its rows (main() checked that both
// tilings fit the grid limits before any CUDA call).
static dim3 tile_grid(int rows, int cols) {
    const lesson::Grid g = lesson::grid_for(uint64_t(cols), uint64_t(rows), 1, kTile, kTile);
    return dim3(g.x, g.y);
}
static dim3 wide_grid(int rows, int cols) {
    const lesson::Grid g = lesson::grid_for(uint64_t(cols), uint64_t(rows), 1, kWide, kWide);
    return dim3(g.x, g.y);
}
