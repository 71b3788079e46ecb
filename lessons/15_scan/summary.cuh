// Lesson 15 of the course (scan), the summary: every scan against the DRAM bound of 1 read :
// 1 write, measured now; the whole-array rungs also against CUB on the same data; the work
// models of one tile; the key result and the benchmark target.
// Before: parts 1-3 (main.cu, compaction.cuh, floats.cuh) checked and timed every scan.
// Run: ./build/bin/scan [--quick]   (README.md is the handout)
#pragma once
#include <cstdio>
#include <string>
#include <vector>

#include "common/ceilings.h"
#include "common/flags.h"
#include "common/report.h"
#include "common/timer.h"
#include "verify/parallel.h"
#include "verify/scan.h"

static void report_scans(lesson::Report& report, const cudaDeviceProp& prop, const lesson::CommonOptions& opt,
                         const lesson::Cli& cli, int64_t n, int rung, bool compaction, double cpu_ms,
                         const std::vector<Timed>& timed) {
    const std::string in_l2 = lesson::l2_note(2.0 * double(n) * 4, prop);
    const lesson::StreamBound dram =
        in_l2.empty() ? lesson::measure_stream_bound(prop, 1, 1) : lesson::stream_bound_not_measured(1, 1, in_l2);
    lesson::add_bound(report, dram, int(opt.device));
    report.timing(lesson::kTimingMethod);
    report.cpu_reference_ms(cpu_ms, verify::host_threads());
    for (const Timed& t : timed)
        if (t.name.rfind("compaction", 0) != 0)
            report.variant_bound(t.name, t.ms, t.gbps, "GB/s", dram.gbps, "DRAM bound", in_l2);
        else if (t.cub_gbps == 0) report.variant(t.name, t.ms, t.gbps, "GB/s");
    for (const Timed& t : timed)
        if (t.cub_gbps > 0)
            report.variant_yardstick(t.name + " vs CUB", t.ms, t.gbps, "GB/s", t.cub_gbps, "CUB", in_l2);
    // The work and the steps of one 2048-element tile, and the bank conflicts of rungs 2 and 3 (CPU models).
    std::vector<unsigned> tile(hillis_steele::kTile, 1u);
    const verify::ScanWork hs = verify::hillis_steele_model(tile.data(), tile.size());
    const verify::ScanWork bl = verify::blelloch_model(tile.data(), tile.size());
    report.metric("one 2048-tile, Hillis-Steele: steps", double(hs.steps), "steps");
    report.metric("one 2048-tile, Hillis-Steele: additions", double(hs.adds), "adds");
    report.metric("one 2048-tile, Blelloch: steps", double(bl.steps), "steps");
    report.metric("one 2048-tile, Blelloch: additions", double(bl.adds), "adds");
    report.metric("bank conflicts per tile, rung 2 loads (model)",
                  double(verify::blelloch_load_conflicts_per_tile(blelloch::kTile, false)), "");
    report.metric("bank conflicts per tile, rung 3 loads (model)",
                  double(verify::blelloch_load_conflicts_per_tile(blelloch::kTile, true)), "");
    report.note(
        "int32 inputs are uniform in [-1000, 1000] and scanned as uint32 (wrap-around defined); float inputs "
        "uniform in [-1, 1). Float bound: gamma_d = d u / (1 - d u), u = 2^-24, d = the most additions any "
        "input passes through in the rung's order (README), plus the double reference's own bound. Exact float "
        "scans: integers 1 and 2 as floats, min(n, 2^23 - 1) of them, so that every partial sum is an integer "
        "below 2^24 and exact in any order: each element must be the int scan's value, bit for bit");
    if (compaction)
        report.note("compaction GB/s count n elements read and the kept ones written, the least it can move");

    // Key result and target: the fastest single-pass scan (rung 6 and every rung after it)
    // against cub::DeviceScan::ExclusiveSum on int32.
    const Timed* cub = nullptr;
    const Timed* ours = nullptr;
    for (const Timed& t : timed) {
        if (t.name == "int32 exclusive: cub ExclusiveSum") cub = &t;
        for (int k = 5; k < kRungCount; ++k)
            if (t.name == std::string("int32 exclusive: ") + kRungs[k].name && (!ours || t.gbps > ours->gbps))
                ours = &t;
    }
    report.default_size(cli.at_default_size());
    if (ours && cub) {
        char key[128];
        std::snprintf(key, sizeof key, "single-pass scan %.0f GB/s at n=%lld (int32, exclusive)", ours->gbps,
                      (long long)n);
        report.key_result(key, ours->gbps / cub->gbps, "CUB ExclusiveSum", lesson::Against::Yardstick, in_l2);
        report.target("single-pass exclusive int32 scan vs cub::DeviceScan::ExclusiveSum", ours->gbps / cub->gbps, 1.00,
                      "x");
    } else {
        for (const Timed& t : timed)  // the rung run alone: its int32 exclusive scan
            if (t.name == std::string("int32 exclusive: ") + kRungs[rung - 1].name) {
                char key[128];
                std::snprintf(key, sizeof key, "%s %.0f GB/s at n=%lld", t.name.c_str(), t.gbps, (long long)n);
                report.key_result(key, t.gbps / dram.gbps, "DRAM bound", lesson::Against::Bound, in_l2);
            }
    }
}
