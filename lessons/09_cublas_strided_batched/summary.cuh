// Lesson 09 of the course (cuBLAS strided-batched): the report. The pipeline's bound, the larger
// of the PCIe link's (measured now, at the chunk's copy size) and the GPU's (one strided-batched
// call over the resident batch), and the key result of the staged pipeline against it.
// Before: main.cu times the resident batch and the pipelines; checks.h checks every run.
// Run: ./build/bin/cublas_strided_batched [--quick]   (README.md is the handout)
#pragma once
#include <algorithm>
#include <cstdio>
#include <string>

#include "common/ceilings.h"
#include "common/flags.h"
#include "common/report.h"
#include "common/timer.h"

#include "slots.cuh"

// The copies cannot beat the PCIe link (bursts of chunk-sized copies from A's pages and into C's,
// best of several trials, measured now; the pipeline poisons C before each run), and the GEMMs
// cannot beat one strided-batched call over the whole resident batch (compute_ms). The larger of
// the two wins.
struct PipelineBound {
    double bytes = 0;         // the batch's traffic: A and B up, C down
    double ms = 0, gbps = 0;  // the bound, as a time and as a rate of that traffic
    const char* name = "";    // "PCIe bound" or "GPU compute bound"
};
inline PipelineBound report_bound(lesson::Report& report, const Slots& slots, double compute_ms) {
    const lesson::LinkRates link = lesson::measure_pinned_link_gbps(
        slots.chunk_bytes, {slots.h_A, slots.h_C, slots.batch * slots.mat_bytes, slots.d_A[0], slots.d_C[0]});
    report.bound("pinned H2D, burst of chunk copies", link.h2d, "GB/s");
    report.bound("pinned D2H, burst of chunk copies", link.d2h, "GB/s");
    report.bound("pinned H2D + D2H at once", link.both, "GB/s");
    const double h2d_bytes = 2.0 * slots.batch * slots.mat_bytes, d2h_bytes = 1.0 * slots.batch * slots.mat_bytes;
    const double link_ms = lesson::link_bound_ms(h2d_bytes, d2h_bytes, link);
    PipelineBound b;
    b.bytes = h2d_bytes + d2h_bytes;
    b.ms = std::max(link_ms, compute_ms);
    b.gbps = b.bytes / (b.ms * 1e6);
    b.name = link_ms >= compute_ms ? "PCIe bound" : "GPU compute bound";
    report.bound(std::string("pipeline bound: max(PCIe, GEMMs) = ") + b.name, b.gbps, "GB/s");
    report.metric("PCIe bound of the batch (A, B up; C down)", link_ms, "ms");
    report.metric("GPU compute bound (one strided-batched call, resident)", compute_ms, "ms");
    report.metric("H2D time of one chunk (A and B)", 2.0 * slots.chunk_bytes / (link.h2d * 1e6), "ms");
    return b;
}

// The key result and the target: the staged pipeline over --streams streams (best_ms) against the bound.
inline void report_result(lesson::Report& report, const lesson::Cli& cli, const Slots& slots, const PipelineBound& b,
                          double best_ms) {
    char key[128];
    std::snprintf(key, sizeof key, "%lld x %lld^2 in chunks of %lld, %lld streams: %.1f GB/s", (long long)slots.batch,
                  (long long)slots.n, (long long)slots.chunk, (long long)slots.S, b.bytes / (best_ms * 1e6));
    report.key_result(key, b.ms / best_ms, b.name, lesson::Against::Bound);
    report.timing(lesson::kTimingMethod);
    report.default_size(cli.at_default_size());
    report.target("staged pipeline of max(PCIe, GPU compute) bound", b.ms / best_ms, 0.85);
}
