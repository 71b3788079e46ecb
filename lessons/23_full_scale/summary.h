// Lesson 23 of the course (the full-scale run): the yardsticks, measured before the lesson's
// buffers exist, and the report's numbers: the passes' wall times against the DRAM bound and
// the D2D copy, the stages alone, the scaling over GPUs, and what the GB/s count.
// Run: ./build/bin/full_scale [--quick]   (README.md is the handout)
#pragma once
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "common/ceilings.h"
#include "common/check.h"
#include "common/report.h"
#include "common/timer.h"

#include "gpus.cuh"

// What the copies and DRAM allow, measured before the lesson's buffers exist.
struct Yardsticks {
    std::vector<double> d2d;  // D2D cudaMemcpy per GPU, GB/s (read + write)
    lesson::StreamBound dram;
    std::string in_l2;  // why DRAM is not the limit (chunks in flight fit in L2), or ""
};

// Bytes each stage must move per image: the generator writes 4 side^2, the fused kernel reads
// them once (its writes are 4 doubles per block). A D2D copy moves the same 1 read : 1 write.
inline Yardsticks measure_yardsticks(const std::vector<Gpu>& gpu, const cudaDeviceProp& prop, double in_flight,
                                     int device) {
    Yardsticks y;
    for (const Gpu& g : gpu) {
        CUDA_CHECK(cudaSetDevice(g.device));
        y.d2d.push_back(lesson::measure_d2d_gbps(g.prop));
    }
    CUDA_CHECK(cudaSetDevice(device));
    y.in_l2 = lesson::l2_note(in_flight, prop);  // chunks that fit in L2 skip DRAM
    y.dram =
        y.in_l2.empty() ? lesson::measure_stream_bound(prop, 1, 1) : lesson::stream_bound_not_measured(1, 1, y.in_l2);
    return y;
}

// The timed passes: all GPUs (uses[0]) and the first alone (uses.back()), `count` passes each.
struct Passes {
    int count = 0;
    std::vector<size_t> uses;
    std::vector<std::vector<double>> ms, gpu_ms;  // ms[u]: each pass; gpu_ms[g]: GPU g's end, all-GPU passes
    double first_ms = 0, all_ms = 0, one_ms = 0;  // the verified pass; medians of the timed ones
};

// Each stage alone on one chunk of `images` images.
struct Stages {
    uint64_t images = 0;
    double gen_ms = 0, proc_ms = 0;
};

inline void report_results(lesson::Report& report, const std::vector<Gpu>& gpu, int device, uint64_t N, int64_t side,
                           const Yardsticks& y, const Passes& p, const Stages& st) {
    const int G = int(gpu.size());
    const double px = double(side) * double(side);
    const double bytes = 8.0 * double(N) * px;  // generate writes 4 B a pixel, the kernel reads them
    const double chunk_bytes = 4.0 * double(st.images) * px;
    auto gbps = [](double b, double ms) { return b / (ms * 1e6); };
    double d2d_all = 0;
    for (double r : y.d2d) d2d_all += r;
    lesson::add_bound(report, y.dram, device);
    report.yardstick("D2D cudaMemcpy, GPU " + std::to_string(device) + " (read + write)", y.d2d[0], "GB/s");
    if (G > 1) report.yardstick("D2D cudaMemcpy, sum over " + std::to_string(G) + " GPUs", d2d_all, "GB/s");
    report.timing("passes: host clock from every GPU's thread ready to the last cudaDeviceSynchronize, median of " +
                  std::to_string(p.count) + " after a verified pass; stages: " + lesson::kTimingMethod);
    report.variant_yardstick("stage: curandGenerateUniform, " + std::to_string(st.images) + " images", st.gen_ms,
                             gbps(chunk_bytes, st.gen_ms), "GB/s", y.d2d[0], "D2D copy", y.in_l2);
    report.variant_yardstick("stage: blur3x3Stats + finishImageStats, " + std::to_string(st.images) + " images",
                             st.proc_ms, gbps(chunk_bytes, st.proc_ms), "GB/s", y.d2d[0], "D2D copy", y.in_l2);
    const std::string what = std::to_string(N) + " images of " + std::to_string(side) + "^2";
    report.variant_bound("pipeline, 1 GPU, " + what, p.one_ms, gbps(bytes, p.one_ms), "GB/s", y.dram.gbps, "DRAM bound",
                         y.in_l2);
    report.variant_yardstick("pipeline, 1 GPU vs D2D copy", p.one_ms, gbps(bytes, p.one_ms), "GB/s", y.d2d[0],
                             "D2D copy", y.in_l2);
    if (G > 1)
        report.variant_yardstick("pipeline, " + std::to_string(G) + " GPUs vs their D2D copies", p.all_ms,
                                 gbps(bytes, p.all_ms), "GB/s", d2d_all, "D2D copies", y.in_l2);
    report.metric("wall time of the verified first pass (" + std::to_string(G) + " GPUs, warm-up included)", p.first_ms,
                  "ms");
    report.metric("wall time of a pass, 1 GPU", p.one_ms, "ms");
    for (size_t u = 0; u < p.uses.size(); ++u)
        report.metric(
            "slowest / fastest timed pass, " + std::to_string(p.uses[u]) + " GPU(s)",
            *std::max_element(p.ms[u].begin(), p.ms[u].end()) / *std::min_element(p.ms[u].begin(), p.ms[u].end()), "x");
    report.metric("images per second, 1 GPU", 1e3 * double(N) / p.one_ms, "images/s");
    if (G > 1) {
        report.metric("wall time of a pass, " + std::to_string(G) + " GPUs", p.all_ms, "ms");
        report.metric("images per second, " + std::to_string(G) + " GPUs", 1e3 * double(N) / p.all_ms, "images/s");
        for (int g = 0; g < G; ++g)
            report.metric("  GPU " + std::to_string(gpu[g].device) + " in the " + std::to_string(G) + "-GPU pass",
                          1e3 * double(N * (g + 1) / G - N * g / G) / lesson::median(p.gpu_ms[g]), "images/s");
        report.metric("scaling: " + std::to_string(G) + " GPUs over 1", p.one_ms / p.all_ms, "x");
    }
    report.metric("stages back to back (generate + process), per image", (st.gen_ms + st.proc_ms) / double(st.images),
                  "ms");
    report.metric("PCIe: bytes back per image", double(kStatFields * sizeof(double)), "bytes");
    // The fused kernel: the 3x3 blur as 9 multiply-adds (18 flops) and 2 additions per pixel for
    // the sums; it must read each pixel once (its few partial writes are left out).
    report.work("blur3x3Stats + finishImageStats (fused)", 20.0 * double(st.images) * px, chunk_bytes, st.proc_ms);
    report.note(
        "GB/s count the bytes each stage must move: the generator writes 4 B a pixel, the fused kernel "
        "reads them once; 32 bytes per image come back over PCIe");
    report.note(
        "sum relation: clamp-to-edge [1 2 1]/4 passes hand out exactly 1 per pixel, so sum(blur) = sum(raw) "
        "exactly; the check allows the float rounding bound (verify/full_scale.h)");
    char key[160];
    std::snprintf(key, sizeof key, "%s: %.2f s on 1 GPU, %.0f images/s, %.0f GB/s", what.c_str(), p.one_ms / 1e3,
                  1e3 * double(N) / p.one_ms, gbps(bytes, p.one_ms));
    report.key_result(key, gbps(bytes, p.one_ms) / y.d2d[0], "D2D copy", lesson::Against::Yardstick, y.in_l2);
}
