// Lesson 03 of the course (batched 3D grid): every grid a run will launch, checked against the
// hardware limits before any CUDA call (exit 2, naming the flags). Included by main.cu after
// plan_grid, which it calls.
// Before: main.cu parses the flags. Next: main.cu checks memory and picks the GPU.
// Run: ./build/bin/batched_3d_grid [--quick]   (README.md is the handout)
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "common/flags.h"

// Every grid this run launches: x = ceil(cols / 16) (a quarter of the columns for float4),
// y = ceil(rows / 16), z = min(batch, 65535).
inline void require_grids_fit(int64_t n, int64_t batch, int64_t limit_n, int64_t limit_batch) {
    struct Shape {
        int cols, rows;
        uint64_t z;
    };
    std::vector<Shape> shapes = {
        {int(n), int(n), uint64_t(batch)}, {int(n), int(n), 1}, {int(limit_n), int(limit_n), uint64_t(limit_batch)}};
    if (n % 4 == 0) shapes.push_back({int(n / 4), int(n), uint64_t(batch)});
    for (const Shape& sh : shapes)
        if (!plan_grid(sh.cols, sh.rows, sh.z).ok)
            lesson::bad_input("a grid of " + std::to_string(sh.cols) + " x " + std::to_string(sh.rows) + " x " +
                              std::to_string(sh.z) +
                              " elements in 16 x 16 blocks passes the hardware limits "
                              "(x <= 2^31 - 1, y and z <= 65535 blocks); allowed: --n up to 8192, --limit-n up to 256");
}
