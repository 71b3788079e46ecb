// Lesson 11 of the course (hybrid FFT filter): the report. The custom kernels (one read, one
// write) against the DRAM bound of a 1 : 1 mix; the cuFFT stages and the pipelines, whose
// read/write sizes differ, against the device-to-device copy as a yardstick.
// Before: main.cu times the stages and checks.h checks every pixel.
// Run: ./build/bin/hybrid_fft_filter [--quick]   (README.md is the handout)
#pragma once
#include <cstdio>
#include <string>

#include <cufft.h>

#include "common/ceilings.h"
#include "common/flags.h"
#include "common/report.h"
#include "common/timer.h"

// What main() timed, in ms: each stage alone, the device pipeline both ways, end to end.
struct Times {
    double thr_ms = 0, r2c_ms = 0, lp_ms = 0, c2r_ms = 0;
    double fused_ms = 0, unfused_ms = 0, e2e_ms = 0;
};

static void report_filter(lesson::Report& report, const cudaDeviceProp& prop, const lesson::CommonOptions& opt,
                          const lesson::Cli& cli, int64_t n, int64_t batch, size_t px, size_t bins, const Times& t) {
    // The bound is measured only where something is graded against it (data out of L2).
    const double img_b = px * sizeof(float), spec_b = bins * sizeof(cufftComplex);
    const std::string img_l2 = lesson::l2_note(2 * img_b, prop), spec_l2 = lesson::l2_note(2 * spec_b, prop);
    const lesson::StreamBound dram = img_l2.empty() || spec_l2.empty()
                                         ? lesson::measure_stream_bound(prop, 1, 1)
                                         : lesson::stream_bound_not_measured(1, 1, img_l2);
    lesson::add_bound(report, dram, int(opt.device));
    const double d2d = lesson::measure_d2d_gbps(prop);
    report.yardstick("device-to-device cudaMemcpy", d2d, "GB/s");
    report.timing(lesson::kTimingMethod);
    report.variant_bound("thresholdImage (read + write image)", t.thr_ms, 2 * img_b / (t.thr_ms * 1e6), "GB/s",
                         dram.gbps, "DRAM bound", img_l2);
    report.variant_yardstick("cufftExecR2C (read image, write spectrum)", t.r2c_ms, (img_b + spec_b) / (t.r2c_ms * 1e6),
                             "GB/s", d2d, "copy", img_l2);
    report.variant_bound("lowPassNormalize (read + write spectrum)", t.lp_ms, 2 * spec_b / (t.lp_ms * 1e6), "GB/s",
                         dram.gbps, "DRAM bound", spec_l2);
    report.variant_yardstick("cufftExecC2R (read spectrum, write image)", t.c2r_ms, (spec_b + img_b) / (t.c2r_ms * 1e6),
                             "GB/s", d2d, "copy", img_l2);
    // One pass per stage, each reading and writing once: the least traffic of this pipeline.
    const double pipe_b = 2 * img_b + 2 * (img_b + spec_b) + 2 * spec_b;
    report.variant_yardstick("device pipeline, normalize fused", t.fused_ms, pipe_b / (t.fused_ms * 1e6), "GB/s", d2d,
                             "copy", img_l2);
    report.variant_yardstick("device pipeline, normalize own pass", t.unfused_ms, pipe_b / (t.unfused_ms * 1e6), "GB/s",
                             d2d, "copy", img_l2);
    report.variant("end to end: H2D, pipeline, D2H, one sync", t.e2e_ms, 2 * img_b / (t.e2e_ms * 1e6), "GB/s");
    report.metric("fusing saved (own pass - fused)", t.unfused_ms - t.fused_ms, "ms");
    report.metric("fusing saved, share of the unfused pipeline", 100.0 * (t.unfused_ms - t.fused_ms) / t.unfused_ms,
                  "%");
    report.note(
        "traffic counted once per stage: image read+write, image->spectrum, spectrum read+write, spectrum->image");
    char key[128];
    std::snprintf(key, sizeof key, "filter %.3f ms for %lld x %lld^2 px (%.0f GB/s)", t.fused_ms, (long long)batch,
                  (long long)n, pipe_b / (t.fused_ms * 1e6));
    report.key_result(key, pipe_b / (t.fused_ms * 1e6) / d2d, "copy", lesson::Against::Yardstick, img_l2);
    report.default_size(cli.at_default_size());
}
