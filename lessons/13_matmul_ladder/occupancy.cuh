// Lesson 13 of the course (the SGEMM ladder): rung 3 -> 4 in two steps, through the control of kernels/control.cuh
// (rung 3's kernel at 2 blocks per SM). Part of lesson 13 of the course (00-23), 13_matmul_ladder: main.cu calls it
// after part 2, when every rung runs. Run: ./build/bin/matmul_ladder [--quick]   (README.md is the handout)
#pragma once
#include <string>
#include <vector>

#include "common/check.h"
#include "common/report.h"
#include "common/timer.h"
#include "kernels/3_reg_tile_2d.cuh"
#include "kernels/4_vectorized.cuh"
#include "kernels/common.cuh"
#include "kernels/control.cuh"

// What the compiler made of one kernel, as the loaded image has it: registers and local memory per thread (ptxas's
// stack frame, where its spills go), and how many blocks of `threads` fit on one SM with them.
template <class Kernel>
void report_resources(const std::string& name, Kernel* kernel, int threads, lesson::Report& report) {
    cudaFuncAttributes attr{};
    CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel));
    int per_sm = 0;
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, 0));
    report.metric("registers per thread, " + name, attr.numRegs, "registers");
    report.metric("local memory per thread, " + name, double(attr.localSizeBytes), "bytes");
    report.metric("resident blocks per SM, " + name, per_sm, "blocks");
}

// Rung 3, the control and rung 4 take their samples in turns on the timed shape's arrays, so a drift of the clocks
// falls on all three (g.C is overwritten; every later check poisons it first). rung 3 / control is what a second
// block per SM gives rung 3's code, less what fitting in 128 registers costs it; control / rung 4 is what rung 4's
// float4 loads and transposed A add, plus what rung 4 gets back by fitting without the cap.
inline void split_rung3_to_4(const Gemm& g, int repeat, lesson::Report& report) {
    const std::vector<double> ms = lesson::time_interleaved_ms(repeat, 3, [&](int v) {
        if (v == 0) rung3::launch(g);
        else if (v == 1) control::launch(g);
        else rung4::launch(g);
    });
    report.metric("rung 3 -> 4, 2 blocks per SM: rung 3 / control (time, in turns)", ms[0] / ms[1], "x");
    report.metric("rung 3 -> 4, the rest (float4 loads, A^T): control / rung 4 (time, in turns)", ms[1] / ms[2], "x");
    report_resources("rung 3", rung3::sgemmRegTile2D<0>, rung3::kThreads, report);
    report_resources("control", rung3::sgemmRegTile2D<control::kMinBlocks>, rung3::kThreads, report);
    report_resources("rung 4", rung4::sgemmVectorized, rung4::kThreads, report);
}
