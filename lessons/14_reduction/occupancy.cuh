// Lesson 14 of the course (reduction), step 1 of main(): occupancy. How many blocks of each
// rung's kernel fit on one SM at once, and from that the grids of the grid-stride rungs.
// Before: main() parses flags and makes the CPU references. Next: main() allocates and runs the ladder.
// Run: ./build/bin/reduction [--quick]   (README.md is the handout)
#pragma once
#include <algorithm>
#include <string>
#include <vector>

#include "common/check.h"
#include "common/report.h"

// The grids of the grid-stride rungs 5-11: one full wave of resident blocks per SM.
struct Grids {
    std::vector<unsigned> grid;         // per rung of kRungs
    unsigned grid10i = 0, grid11i = 0;  // rungs 10 and 11 with T = int, Acc = long long (the integer sum)
    unsigned max_grid = 0;
};

// 1. Occupancy: how many blocks of each kernel can be resident on one SM at once
//    (threads, registers and shared memory per block decide). The grid-stride rungs
//    4-8 launch exactly that many per SM: one full wave, no block waits for an SM.
static Grids occupancy(lesson::Report& report, int sms, int64_t rung_only) {
    Grids g;
    g.grid.resize(kRungCount);
    std::vector<unsigned>& grid = g.grid;
    for (int k = 0; k < kRungCount; ++k) {
        int per_sm = 0;
        CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kRungs[k].kernel, kRungs[k].threads, 0));
        if (per_sm < 1) lesson::fail_call("CUDA", "occupancy", "a kernel cannot run on this GPU", __FILE__, __LINE__);
        grid[k] = unsigned(per_sm * sms);
        if (selected(rung_only, k))
            report.metric(std::string("resident blocks per SM: ") + kRungs[k].name, per_sm, "blocks");
    }
    int per_sm10i = 0, per_sm11i = 0;
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm10i, rung10::reduceVec4<int, long long>,
                                                             rung10::kThreads, 0));
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm11i, rung11::reduceLastBlock<int, long long>,
                                                             rung11::kThreads, 0));
    g.grid10i = unsigned(std::max(per_sm10i, 1) * sms), g.grid11i = unsigned(std::max(per_sm11i, 1) * sms);
    g.max_grid = std::max({*std::max_element(grid.begin(), grid.end()), g.grid10i, g.grid11i});
    // The block size the occupancy calculator would pick for rung 11 (its kernel is written
    // for 256 threads: the shared array and the tree), and the grid that fills the GPU with it.
    int min_grid = 0, best_block = 0;
    CUDA_CHECK(cudaOccupancyMaxPotentialBlockSize(&min_grid, &best_block, rung11::reduceLastBlock<float, float>, 0, 0));
    report.metric("rung 11: block size of highest occupancy (MaxPotentialBlockSize)", best_block, "threads");
    report.metric("rung 11: grid that fills the GPU at that block size", min_grid, "blocks");
    return g;
}
