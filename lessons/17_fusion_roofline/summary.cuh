// Lesson 17 of the course (fusion and the roofline), the summary: the DRAM bounds of three
// read/write mixes, the D2D copy and the FP32 peak, measured now; every rung against the 1:1 DRAM
// bound; every sweep point against the roofline at its intensity, the measured roofs, the ridge
// point and the SVG picture; the targets and the key result.
// Before: main.cu checked and timed every rung and every sweep point, then freed its buffers.
// Run: ./build/bin/fusion_roofline [--quick] [--svg=FILE]   (README.md is the handout)
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "common/ceilings.h"
#include "common/device.h"
#include "common/flags.h"
#include "common/report.h"
#include "common/timer.h"
#include "verify/fusion.h"

#include "roofline_svg.h"

static std::string size_text(int64_t n) {
    for (int e = 0; e < 63; ++e)
        if (n == (int64_t(1) << e)) return "2^" + std::to_string(e);
    return std::to_string(n);
}

// The yardsticks every rate is held against. in_l2 non-empty: the data are under 4x the L2
// (lesson::l2_note), the DRAM probes and the copy did not run (dram.gbps and d2d are NaN) and
// nothing is graded.
struct Bounds {
    std::string in_l2;
    lesson::StreamBound dram;                      // 1 read : 1 write, the mix of every rung and sweep point
    std::vector<lesson::StreamBound> other_mixes;  // 1:0 and 2:1, slopes of the roofline only
    double d2d = NAN;
    double peak = NAN;  // FP32 GFLOP/s from the clock
};

// The DRAM probe of the 1:1 mix, which every kernel here streams, and the D2D copy only where the
// data do not fit in the L2; with the sweep, the 1:0 and 2:1 probes too: they grade nothing here,
// but they are the roofline's slopes for the kernels of other lessons that read more than they
// write (scripts/roofline.py draws one slope per mix). The FP32 peak from the clock always.
static Bounds measure_bounds(lesson::Report& report, const cudaDeviceProp& prop, int device, size_t N, bool sweeping) {
    Bounds b;
    b.in_l2 = lesson::l2_note(verify::sweep_bytes(N), prop);
    b.dram.gbps = NAN;
    if (b.in_l2.empty()) {
        b.dram = lesson::measure_stream_bound(prop, 1, 1);
        lesson::add_bound(report, b.dram, device, lesson::Roof::Memory);
        if (sweeping) {
            const int mixes[2][2] = {{1, 0}, {2, 1}};  // reads, writes
            for (const auto& mix : mixes) {
                const lesson::StreamBound m = lesson::measure_stream_bound(prop, mix[0], mix[1]);
                report.bound(m.name, m.gbps, "GB/s", lesson::Roof::Memory);  // add_bound gave the DRAM peak
                if (m.gbps > lesson::dram_peak_gbps(device))
                    report.warning(m.name + " measured above the DRAM peak from the clock");
                b.other_mixes.push_back(m);
            }
            b.d2d = lesson::measure_d2d_gbps(prop);
            report.yardstick("device-to-device cudaMemcpy, 1 GiB (read + write)", b.d2d, "GB/s");
        }
    } else {
        report.note("DRAM bound not measured (" + b.in_l2 + ")");
    }
    const double clock_ghz = lesson::sm_clock_ghz(device);
    b.peak = lesson::peak_gflops(prop, device, lesson::MathUnit::Fp32Simt);
    char peak_name[128];
    std::snprintf(peak_name, sizeof peak_name, "FP32 peak: %d SMs x 128 lanes x 2 x %.3f GHz (max SM clock)",
                  prop.multiProcessorCount, clock_ghz);
    report.bound(peak_name, b.peak, "GFLOP/s", lesson::Roof::Compute);
    report.timing(std::string(lesson::kTimingMethod) + "; rung 1's call is its three launches");
    return b;
}

// What the ladder's report found: the fastest fused rung (-1: none ran) and rung 1 / rung 2 (NaN
// unless both ran).
struct LadderResult {
    int best = -1;
    double speedup = NAN;
};

// The ladder's report: the bytes each rung must move, against the DRAM bound.
static LadderResult report_ladder(lesson::Report& report, const Bounds& b, size_t N,
                                  const std::vector<double>& rung_ms) {
    LadderResult l;
    for (int r = 0; r < int(rung_ms.size()); ++r) {
        if (rung_ms[r] <= 0) continue;
        const double bytes = verify::chain_bytes(N, kRungs[r].rung != 1);
        report.variant_bound(kRungs[r].name, rung_ms[r], bytes / (rung_ms[r] * 1e6), "GB/s", b.dram.gbps, "DRAM bound",
                             b.in_l2);
        report.work(std::string("17 ") + kRungs[r].name, verify::chain_flops(N), bytes, rung_ms[r]);
        if (kRungs[r].rung != 1 && (l.best < 0 || rung_ms[r] < rung_ms[l.best])) l.best = r;
    }
    report.metric("bytes moved by the three kernels (6 n floats)", verify::chain_bytes(N, false), "bytes");
    report.metric("bytes moved by a fused kernel (2 n floats)", verify::chain_bytes(N, true), "bytes");
    l.speedup = (rung_ms[0] > 0 && rung_ms[1] > 0) ? rung_ms[0] / rung_ms[1] : NAN;
    if (std::isfinite(l.speedup)) report.metric("speedup of fusion: rung 1 time / rung 2 time", l.speedup, "x");
    return l;
}

// The roofs the sweep measured (0 where no point ran) and whether each counts.
struct Roofs {
    double mem = 0, fp32 = 0;  // best GB/s at k <= 1, best GFLOP/s
    bool have_mem = false, have_fp32 = false;
};

// The sweep's report: per point intensity, GFLOP/s and GB/s, against the roofline at that
// intensity, min(FP32 peak, I x DRAM bound); then the measured roofs and the ridge; --svg draws them.
static Roofs report_sweep(lesson::Report& report, const Bounds& b, const cudaDeviceProp& prop, size_t N,
                          const std::vector<double>& rung_ms, const std::vector<double>& sweep_ms,
                          const std::string& svg_path) {
    const int sweep_count = int(sweep_ms.size());
    RooflinePlot plot(std::string("Roofline of ") + prop.name + ", measured (lesson 17)");
    Roofs roofs;
    double mem_ms = 0, fp32_ms = 0;
    for (int s = 0; s < sweep_count; ++s) {
        if (sweep_ms[s] <= 0) continue;
        const verify::SweepPoint p = kSweep[s].p;
        const double flops = verify::sweep_flops(N, p), bytes = verify::sweep_bytes(N);
        const double gflops = flops / (sweep_ms[s] * 1e6), gbps = bytes / (sweep_ms[s] * 1e6);
        const double intensity = flops / bytes;
        const double roof_here = std::min(b.peak, intensity * b.dram.gbps);  // NaN where the probe did not run
        const std::string name = "sweep k=" + k_text(p) + " FMA/float";
        report.variant_bound(name, sweep_ms[s], gflops, "GFLOP/s", roof_here, "roofline at its intensity", b.in_l2);
        report.work(name, flops, bytes, sweep_ms[s]);
        char line[160];
        std::snprintf(line, sizeof line, "sweep k=%-4s intensity %8.4f flop/byte: %10.1f GFLOP/s %8.1f GB/s",
                      k_text(p).c_str(), intensity, gflops, gbps);
        report.note(line);
        plot.add_point(intensity, gflops, "#4e79a7", line);
        if (k_of(p) <= 1 && gbps > roofs.mem) roofs.mem = gbps, mem_ms = sweep_ms[s];  // memory-bound: k <= 1
        if (gflops > roofs.fp32) roofs.fp32 = gflops, fp32_ms = sweep_ms[s];
    }
    roofs.have_mem = roofs.mem > 0;
    roofs.have_fp32 = roofs.fp32 > 0 && sweep_ms[sweep_count - 1] > 0;
    const std::string& in_l2 = b.in_l2;
    if (roofs.have_mem) {
        report.metric("memory roof (best GB/s of the sweep at k <= 1)", roofs.mem, "GB/s", lesson::Roof::Memory);
        report.variant_bound("memory roof (sweep, k <= 1)", mem_ms, roofs.mem, "GB/s", b.dram.gbps, "DRAM bound",
                             in_l2);
        report.variant_yardstick("memory roof vs D2D copy", mem_ms, roofs.mem, "GB/s", b.d2d, "D2D copy", in_l2);
        plot.add_slope(roofs.mem, "#e15759", false,
                       in_l2.empty() ? "memory roof (measured)" : "memory roof (data in L2)");
    }
    if (roofs.have_fp32) {
        report.metric("FP32 roof (best GFLOP/s of the sweep)", roofs.fp32, "GFLOP/s", lesson::Roof::Compute);
        report.variant_bound("FP32 roof (best sweep point)", fp32_ms, roofs.fp32, "GFLOP/s", b.peak, "FP32 peak",
                             in_l2);
        plot.add_roof(roofs.fp32, "#e15759", false, in_l2.empty() ? "FP32 roof (measured)" : "FP32 roof (small n)");
    }
    if (roofs.have_mem && roofs.have_fp32)
        report.metric("ridge point: FP32 roof / memory roof", roofs.fp32 / roofs.mem, "flop/byte");
    if (std::isfinite(b.dram.gbps)) {
        report.metric("ridge point from the bounds: FP32 peak / DRAM bound", b.peak / b.dram.gbps, "flop/byte");
        plot.add_slope(b.dram.gbps, "#999999", true, b.dram.name + ": every point here");
        const char* mix_colors[] = {"#8c6d31", "#6b6ecf"};  // 1:0, 2:1: no point here is of their mix
        for (size_t i = 0; i < b.other_mixes.size(); ++i)
            plot.add_slope(b.other_mixes[i].gbps, mix_colors[i], true, b.other_mixes[i].name + ": other lessons");
    }
    if (std::isfinite(b.peak)) plot.add_roof(b.peak, "#999999", true, "FP32 peak from the clock");
    for (int r = 0; r < int(rung_ms.size()); ++r)
        if (rung_ms[r] > 0)
            plot.add_point(verify::chain_flops(N) / verify::chain_bytes(N, kRungs[r].rung != 1),
                           verify::chain_flops(N) / (rung_ms[r] * 1e6), kRungs[r].rung == 1 ? "#f28e2b" : "#59a14f",
                           kRungs[r].name);
    plot.add_legend("#4e79a7", "sweep: k FMAs per float, 1/8 ... 512");
    plot.add_legend("#f28e2b", "three kernels");
    plot.add_legend("#59a14f", "fused (rungs 2-3)");
    if (!svg_path.empty()) {
        std::FILE* f = std::fopen(svg_path.c_str(), "w");
        const bool written = plot.write(f);
        if (f && std::fclose(f) != 0) report.warning("could not close the SVG file " + svg_path);
        if (written) report.note("roofline drawn to " + svg_path);
        else report.warning("could not write the SVG file " + svg_path);
    }
    return roofs;
}

// Targets (graded at the default size only) and the key result.
static void report_verdict(lesson::Report& report, const lesson::Cli& cli, const Bounds& b, int64_t n, bool ladder,
                           const LadderResult& l, const Roofs& roofs, const std::vector<double>& rung_ms) {
    const size_t N = size_t(n);
    report.default_size(cli.at_default_size());
    if (b.in_l2.empty()) {
        if (std::isfinite(l.speedup)) report.target("fused (rung 2) vs three kernels (rung 1)", l.speedup, 2.7, "x");
        if (l.best >= 0 && kRungs[l.best].rung != 1)  // the fastest fused kernel (rung 2 or a coarsening of rung 3)
            report.target("best fused rung vs DRAM bound",
                          verify::chain_bytes(N, true) / (rung_ms[l.best] * 1e6) / b.dram.gbps, 0.90, "%");
        if (roofs.have_mem) report.target("sweep memory-bound end vs D2D copy", roofs.mem / b.d2d, 0.90, "%");
        if (roofs.have_fp32)
            report.target("sweep compute-bound end vs FP32 peak from the clock", roofs.fp32 / b.peak, 0.90, "%");
    }
    char key[200];
    if (ladder && l.best >= 0) {
        const double gbps = verify::chain_bytes(N, true) / (rung_ms[l.best] * 1e6);
        char vs[48] = "";
        if (std::isfinite(l.speedup)) std::snprintf(vs, sizeof vs, ", rung 2 %.2fx the 3 kernels", l.speedup);
        std::snprintf(key, sizeof key, "fused chain %.0f GB/s (%s)%s at n=%s", gbps, kRungs[l.best].name, vs,
                      size_text(n).c_str());
        report.key_result(key, gbps / b.dram.gbps, "DRAM bound", lesson::Against::Bound, b.in_l2);
    } else if (roofs.have_fp32 || roofs.have_mem) {
        std::snprintf(key, sizeof key, "roofs: memory %.0f GB/s, FP32 %.0f GFLOP/s at n=%s", roofs.mem, roofs.fp32,
                      size_text(n).c_str());
        report.key_result(key, roofs.have_fp32 ? roofs.fp32 / b.peak : NAN, "FP32 peak", lesson::Against::Bound,
                          b.in_l2);
    } else {
        report.key_result("rung 1 alone: the three kernels at n=" + size_text(n));
    }
}
