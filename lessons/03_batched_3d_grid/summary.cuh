// Lesson 03 of the course (batched 3D grid): the report's bound and verdict. The DRAM bound of
// the add's 2 reads : 1 write, and the key result: the fastest one-launch kernel of the text's
// batch against it. Included by main.cu after run_batch.
// Before: main.cu runs and checks every plan. Next: lesson 04 (04_chunked_processing).
// Run: ./build/bin/batched_3d_grid [--quick]   (README.md is the handout)
#pragma once
#include <algorithm>
#include <cstdio>
#include <string>

#include "common/ceilings.h"
#include "common/device.h"
#include "common/flags.h"
#include "common/report.h"

// The DRAM bound of this read/write mix (2 reads : 1 write), measured now, unless both
// batches fit in L2 (then DRAM is not their limit and nothing is graded against it).
inline lesson::StreamBound dram_bound(lesson::Report& report, double main_elems, double limit_elems,
                                      const cudaDeviceProp& prop, int device) {
    const double largest = 3.0 * sizeof(float) * std::max(main_elems, limit_elems);
    const std::string both_in_l2 = lesson::l2_note(largest, prop);
    const lesson::StreamBound dram = both_in_l2.empty() ? lesson::measure_stream_bound(prop, 2, 1)
                                                        : lesson::stream_bound_not_measured(2, 1, both_in_l2);
    lesson::add_bound(report, dram, device);
    report.timing(lesson::kTimingMethod);
    return dram;
}

// Key result: the fastest one-launch kernel (float4 when n allows it, else the text's), of
// `best_ms` for `nb` matrices of N x N, and its target.
inline void report_verdict(lesson::Report& report, const lesson::Cli& cli, double best_ms, bool vec4, size_t nb, int N,
                           double dram_gbps, const cudaDeviceProp& prop) {
    const size_t per = static_cast<size_t>(N) * N;
    const double gbps = 3.0 * nb * per * sizeof(float) / (best_ms * 1e6);
    char key[128];
    std::snprintf(key, sizeof key, "%s %.0f GB/s, %zu x %d^2 in one launch",
                  vec4 ? "addMatricesBatchedVec4" : "addMatricesBatched", gbps, nb, N);
    const std::string in_l2 = lesson::l2_note(3.0 * nb * per * sizeof(float), prop);
    report.key_result(key, gbps / dram_gbps, "DRAM bound", lesson::Against::Bound, in_l2);
    report.default_size(cli.at_default_size());
    report.target("best one-launch kernel of the DRAM bound", gbps / dram_gbps, 0.90);
}
