// Lesson 19 - mixed precision: the report of the run, and the trade-off table.
//
// report_notes() says how the run checked (the CPU reference, the tolerances, the input ranges);
// report_rates() puts every precision's TFLOP/s against the peak of its unit (a bound) and against
// the best 16-bit rate of its shape (a yardstick); report_conversions() puts the conversions'
// GB/s against the DRAM bound; print_table() shows speed, accuracy and bytes side by side;
// report_key_result() gives the key result and the targets. main.cu calls them after the shapes.
// Lesson 19 of the course; before: lesson 18 (CUDA graphs), next: lesson 20 (tensor-core GEMM).
// Run: ./build/bin/mixed_precision
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "common/ceilings.h"
#include "common/report.h"
#include "verify/precision.h"

#include "conversions.cuh"
#include "precisions.cuh"

static void report_notes(lesson::Report& report, int64_t check_rows) {
    report.note("CPU reference: " + std::to_string(check_rows) +
                " rows of C per shape (one random row in each band "
                "of M/" +
                std::to_string(check_rows) +
                " rows), in double, from the float inputs and from each "
                "precision's rounded inputs");
    report.note(
        "tolerance on rel-L2 = 4 u_in + 2 u_out + 4 u_acc sqrt(K) (u = unit roundoff 2^-p of the inputs', "
        "output's and accumulator's formats; FP8's accumulator budgeted at 2^-14); against the rounded inputs "
        "2 u_out + 4 u_acc sqrt(K), plus 2 u_acc K / 4 where tensor cores truncate their FP32 sums");
    char ranges[160];
    std::snprintf(ranges, sizeof ranges,
                  "inputs: A uniform in [-%g, %g), Bt in [-%g, %g), so FP8's two scales 448 / amax differ by %.0fx",
                  double(verify::kGemmRangeA), double(verify::kGemmRangeA), double(verify::kGemmRangeBt),
                  double(verify::kGemmRangeBt), double(verify::kGemmRangeA) / double(verify::kGemmRangeBt));
    report.note(ranges);
}

// Rates: each against the peak of its unit from the clock (a bound; where no rate is known for
// this compute capability, not graded, and the row says why) and against the best 16-bit rate
// of the same shape in this run (a yardstick).
static void report_rates(lesson::Report& report, const std::vector<Shape>& shapes,
                         const std::vector<std::vector<Timed>>& timed, const cudaDeviceProp& prop, int device) {
    bool acc16_ran = false;
    for (size_t si = 0; si < shapes.size(); ++si) {
        const std::string shape = shape_text(shapes[si].M, shapes[si].N, shapes[si].K);
        const std::string small = lesson::small_gemm_note(shapes[si].M, shapes[si].N, prop);
        double best16 = 0;
        for (const Timed& t : timed[si])
            if (in_best16(kPrecisions[t.p])) best16 = std::max(best16, t.tflops);
        if (best16 > 0) report.yardstick("best 16-bit GEMM rate, " + shape, best16, "TFLOP/s");
        for (const Timed& t : timed[si]) {
            const Precision& pr = kPrecisions[t.p];
            acc16_ran = acc16_ran || double_rate(pr);
            const double peak = peak_tflops(pr, prop, device);
            const std::string name = std::string(pr.name) + ", " + shape;
            const std::string peak_name = pr.in == In::Fp8                          ? "FP8 tensor peak"
                                          : pr.unit == lesson::MathUnit::Fp32Simt   ? "FP32 FMA peak"
                                          : pr.unit == lesson::MathUnit::Tf32Tensor ? "TF32 tensor peak"
                                          : double_rate(pr)                         ? "FP16-accumulate tensor peak"
                                                                                    : "16-bit tensor peak";
            const std::string ungraded =
                !small.empty() || std::isfinite(peak)
                    ? small
                    : "no " + peak_name + " known for cc " + lesson::cc_text(prop.major * 10 + prop.minor);
            report.variant_bound(name, t.ms, t.tflops, "TFLOP/s", peak, peak_name, ungraded);
            if (best16 > 0)
                report.variant_yardstick(name + " vs best 16-bit", t.ms, t.tflops, "TFLOP/s", best16, "best 16-bit",
                                         small);
        }
    }
    if (acc16_ran)
        report.note(
            "GeForce: FP16 with FP16 accumulation runs at twice the rate of 16-bit math with FP32 accumulation, so "
            "its peak is twice the 16-bit tensor peak and it is not in the best 16-bit yardstick");
}

// The conversions: GB/s (bytes read + written) against the DRAM bound, measured only where some
// conversion's data do not fit in the L2.
static void report_conversions(lesson::Report& report, const std::vector<ConvTimed>& conversions,
                               const cudaDeviceProp& prop, int device) {
    bool graded = false;
    for (const ConvTimed& ct : conversions) graded = graded || ct.in_l2.empty();
    lesson::StreamBound dram;
    if (graded) {  // a read-heavy kernel: the better of the read-only and the copy mix bounds it
        const lesson::StreamBound rd = lesson::measure_stream_bound(prop, 1, 0);
        const lesson::StreamBound cp = lesson::measure_stream_bound(prop, 1, 1);
        dram = rd.gbps >= cp.gbps ? rd : cp;
        lesson::add_bound(report, dram, device);
    }
    for (const ConvTimed& ct : conversions) {
        report.variant_bound(ct.name, ct.ms, ct.bytes / (ct.ms * 1e6), "GB/s", dram.gbps, "DRAM bound", ct.in_l2);
        if (ct.gemm_ms > 0) report.metric(ct.name + ": time / its GEMM's time", ct.ms / ct.gemm_ms, "");
    }
}

// The trade-off table: speed at every shape, accuracy and bytes at the largest, side by side.
static void print_table(const std::vector<Shape>& shapes, const std::vector<std::vector<Timed>>& timed, int selected) {
    const Shape big = shapes.back();
    const double MK = double(big.M) * big.K, NK = double(big.N) * big.K, MN = double(big.M) * big.N;
    std::printf("\n%-42s", "precision");
    for (const Shape& s : shapes) std::printf(" %10s", (shape_text(s.M, s.N, s.K) + " TF/s").c_str());
    std::printf(" %10s %9s %10s %9s %9s\n", "rel-L2", "tol", "vs rounded", "tol", "MB A+B+C");
    for (int p = 0; p < kPrecisionCount; ++p) {
        if (selected >= 0 && selected != p) continue;
        std::printf("%-42s", kPrecisions[p].name);
        const Timed* last = nullptr;
        for (size_t si = 0; si < shapes.size(); ++si) {
            const Timed* t = nullptr;
            for (const Timed& x : timed[si])
                if (x.p == p) t = &x;
            if (t) std::printf(" %10.1f", t->tflops);
            else std::printf(" %10s", "SKIP");
            if (t) last = t;
        }
        const double mb = (bytes_of(kPrecisions[p].in_fmt) * (MK + NK) + bytes_of(kPrecisions[p].out_fmt) * MN) / 1e6;
        if (last)
            std::printf(" %10.2e %9.1e %10.2e %9.1e %9.0f\n", last->rel_err, last->tol, last->rounded_err,
                        last->rounded_tol, mb);
        else std::printf(" %10s %9s %10s %9s %9.0f\n", "-", "-", "-", "-", mb);
    }
    std::printf("(errors and bytes at %s)\n", shape_text(big.M, big.N, big.K).c_str());
}

// Key result and targets: BF16 and FP16 (FP32 accumulate) at the largest shape, each against the
// best 16-bit rate of that shape (they run on the same tensor cores). A target compares two
// sides: it is registered only where its precision ran and another GEMM of the yardstick did too.
static void report_key_result(lesson::Report& report, const std::vector<Timed>& lastt, const Shape& big,
                              const cudaDeviceProp& prop, int device) {
    double best16 = 0, bf16 = NAN, fp16 = NAN;
    int n16 = 0;  // GEMMs in the best 16-bit yardstick
    const Precision* bf16_pr = nullptr;
    for (const Timed& t : lastt) {
        if (in_best16(kPrecisions[t.p])) best16 = std::max(best16, t.tflops), ++n16;
        if (std::string(kPrecisions[t.p].key) == "bf16") bf16 = t.tflops, bf16_pr = &kPrecisions[t.p];
        if (std::string(kPrecisions[t.p].key) == "fp16") fp16 = t.tflops;
    }
    const std::string big_shape = shape_text(big.M, big.N, big.K);
    const std::string small = lesson::small_gemm_note(big.M, big.N, prop);
    if (std::isfinite(bf16)) {
        const double peak = peak_tflops(*bf16_pr, prop, device);
        char key[160];
        std::snprintf(key, sizeof key, "BF16 GemmEx (FP32 accumulate) %.0f TFLOP/s at %s", bf16, big_shape.c_str());
        const std::string ungraded =
            !small.empty() || std::isfinite(peak)
                ? small
                : "no 16-bit tensor peak known for cc " + lesson::cc_text(prop.major * 10 + prop.minor);
        report.key_result(key, bf16 / peak, "16-bit tensor peak", lesson::Against::Bound, ungraded);
        if (n16 >= 2) report.target("BF16 at " + big_shape + " vs best 16-bit rate", bf16 / best16, 0.90, "x");
    } else if (!lastt.empty()) {
        char key[160];
        std::snprintf(key, sizeof key, "%s %.0f TFLOP/s at %s", kPrecisions[lastt[0].p].name, lastt[0].tflops,
                      big_shape.c_str());
        report.key_result(key);
    }
    if (std::isfinite(fp16) && n16 >= 2)
        report.target("FP16 (FP32 acc) at " + big_shape + " vs best 16-bit rate", fp16 / best16, 0.90, "x");
}
