// Lesson 14 of the course (reduction), the summary: every timed rung against the DRAM bound of a
// pure read stream and against CUB, the best rung, and the benchmark target.
// Before: main.cu runs, checks and times the ladder and CUB; checks.cuh checks more.
// Run: ./build/bin/reduction [--quick]   (README.md is the handout)
#pragma once
#include <cstdio>
#include <string>
#include <vector>

#include "common/ceilings.h"
#include "common/flags.h"
#include "common/report.h"
#include "common/timer.h"

// The report: GB/s of input read (4n bytes per sum), against the DRAM bound of a pure read
// stream (1 read : 0 writes) measured now, and against CUB on the same floats. Neither
// is graded where the input fits in the L2.
static void report_ladder(lesson::Report& report, const cudaDeviceProp& prop, const lesson::CommonOptions& opt,
                          const lesson::Cli& cli, int64_t n, const std::vector<double>& ms, double cub_ms,
                          double int_ms) {
    const double bytes = 4.0 * double(n);
    const std::string in_l2 = lesson::l2_note(bytes, prop);
    const lesson::StreamBound dram =
        in_l2.empty() ? lesson::measure_stream_bound(prop, 1, 0) : lesson::stream_bound_not_measured(1, 0, in_l2);
    lesson::add_bound(report, dram, int(opt.device));
    auto gbps = [&](double t) { return bytes / (t * 1e6); };
    const double cub_gbps = gbps(cub_ms);
    report.yardstick("cub::DeviceReduce::Sum, same floats", cub_gbps, "GB/s");
    report.timing(std::string(lesson::kTimingMethod) + "; a multi-pass rung's call is all of its launches");
    report.variant_bound("cub::DeviceReduce::Sum", cub_ms, cub_gbps, "GB/s", dram.gbps, "DRAM bound", in_l2);
    int best = -1;
    for (int k = 0; k < kRungCount; ++k) {
        if (ms[k] <= 0) continue;  // not run (--rung)
        report.variant_bound(kRungs[k].name, ms[k], gbps(ms[k]), "GB/s", dram.gbps, "DRAM bound", in_l2);
        report.variant_yardstick(std::string(kRungs[k].name) + " vs CUB", ms[k], gbps(ms[k]), "GB/s", cub_gbps, "CUB",
                                 in_l2);
        // The best rung is a hand-written one: the CUB side variant only where it ran alone (--rung=12).
        if (best < 0 || best == kRungCub || (k != kRungCub && ms[k] < ms[best])) best = k;
    }
    if (int_ms > 0)
        report.variant_bound("11 on int32 -> int64 (exact)", int_ms, gbps(int_ms), "GB/s", dram.gbps, "DRAM bound",
                             in_l2);
    report.note(
        "float checks: |gpu - ref| <= gamma_d * sum |x_i|, gamma_d = d u / (1 - d u), u = 2^-24, d = additions "
        "on the longest path of the rung's summation tree; ref = Neumaier-compensated double sum");

    const double best_vs_cub = cub_ms / ms[best];
    char key[160];
    std::snprintf(key, sizeof key, "best rung (%s) %.0f GB/s at n=%s", kRungs[best].name, gbps(ms[best]),
                  size_text(n).c_str());
    report.key_result(key, best_vs_cub, "CUB", lesson::Against::Yardstick, in_l2);
    report.default_size(cli.at_default_size());
    report.target("best rung vs cub::DeviceReduce::Sum", best_vs_cub, 1.00, "x");
}
