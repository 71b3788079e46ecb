// Lesson 16 of the course (histogram): the report. GB/s of input bytes read (n per call), against
// the DRAM bound of a pure read stream (1 read : 0 writes) measured now, and against CUB on the
// same input; both are left ungraded where n bytes fit in the L2. Then contention (skewed /
// uniform time), the occupancy of rungs 5 and 6, the key result and the targets.
// Before: main.cu checks and times CUB and every rung on each input.
// Run: ./build/bin/histogram [--quick]   (README.md is the handout)
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "common/ceilings.h"
#include "common/check.h"
#include "common/flags.h"
#include "common/report.h"
#include "common/timer.h"

static std::string size_text(int64_t n) {
    for (int p = 0; p < 63; ++p)
        if (n == (int64_t(1) << p)) return "2^" + std::to_string(p);
    return std::to_string(n);
}

// cub_ms[input] and ms[input][rung] as main() timed them; 0 where not run (--input, --rung).
static void report_histogram(lesson::Report& report, const cudaDeviceProp& prop, const lesson::CommonOptions& opt,
                             const lesson::Cli& cli, int64_t n, const std::string& input_flag,
                             const double (&cub_ms)[kInputCount], const double (&ms)[kInputCount][kRungCount]) {
    const size_t N = static_cast<size_t>(n);
    const std::string in_l2 = lesson::l2_note(double(N), prop);
    const lesson::StreamBound dram =
        in_l2.empty() ? lesson::measure_stream_bound(prop, 1, 0) : lesson::stream_bound_not_measured(1, 0, in_l2);
    lesson::add_bound(report, dram, int(opt.device));
    report.timing(std::string(lesson::kTimingMethod) +
                  "; each rung's call is a cudaMemsetAsync of the 1 KB histogram plus the kernel, each CUB call "
                  "its zeroing kernel plus its histogram kernel; one warm-up call before a long rung's samples");
    auto gbps = [&](double t) { return double(N) / (t * 1e6); };
    double best_vs_cub[kInputCount] = {}, worst_vs_cub = INFINITY;
    std::string best_text;
    for (int which = 0; which < kInputCount; ++which) {
        if (!selected(input_flag, which)) continue;
        const std::string input = kInputs[which].name;
        const double cub_gbps = gbps(cub_ms[which]);
        report.yardstick("CUB HistogramEven, " + input + " input", cub_gbps, "GB/s");
        report.variant_bound(input + ": CUB HistogramEven", cub_ms[which], cub_gbps, "GB/s", dram.gbps, "DRAM bound",
                             in_l2);
        int best = -1;
        for (int k = 0; k < kRungCount; ++k) {
            const double t = ms[which][k];
            if (t <= 0) continue;  // not run (--rung)
            const std::string name = input + ": " + kRungs[k].name;
            report.variant_bound(name, t, gbps(t), "GB/s", dram.gbps, "DRAM bound", in_l2);
            report.variant_yardstick(name + " vs CUB", t, gbps(t), "GB/s", cub_gbps, "CUB", in_l2);
            if (best < 0 || t < ms[which][best]) best = k;
        }
        best_vs_cub[which] = cub_ms[which] / ms[which][best];
        worst_vs_cub = std::min(worst_vs_cub, best_vs_cub[which]);
        best_text += (best_text.empty() ? "" : ", ") + input + " " + std::to_string(int(gbps(ms[which][best]) + 0.5)) +
                     " GB/s (rung " + std::to_string(best + 1) + ")";
    }
    // Contention, measured: how much longer the skewed input takes than the uniform one.
    if (selected(input_flag, 0) && selected(input_flag, 1)) {
        report.metric("CUB: skewed / uniform time", cub_ms[0] / cub_ms[1], "x");
        for (int k = 0; k < kRungCount; ++k)
            if (ms[0][k] > 0)
                report.metric(std::string(kRungs[k].name) + ": skewed / uniform time", ms[0][k] / ms[1][k], "x");
    }
    int per_sm5 = 0, per_sm6 = 0;
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm5, rung5::histogramGridStride, rung5::kThreads, 0));
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm6, rung6::histogramLaneCopies, rung6::kThreads, 0));
    report.metric("resident blocks per SM, rung 5 (1 KB shared)", per_sm5, "blocks");
    report.metric("resident blocks per SM, rung 6 (32 KB shared)", per_sm6, "blocks");

    report.key_result("best rung " + best_text + " at n=" + size_text(n) + " (the input furthest behind CUB)",
                      worst_vs_cub, "CUB", lesson::Against::Yardstick, in_l2);
    report.default_size(cli.at_default_size());
    for (int which = 0; which < kInputCount; ++which)
        if (selected(input_flag, which))
            report.target(std::string("best rung vs CUB, ") + kInputs[which].name + " input", best_vs_cub[which], 0.90,
                          "x");
}
