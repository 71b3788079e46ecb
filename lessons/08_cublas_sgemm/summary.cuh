// Lesson 08 of the course (cuBLAS SGEMM): the report of the math modes. The peaks they are graded
// against, why a row is not graded, and the key result: fp32 against TF32, rate and error.
// Before: main.cu times each math mode and checks.h says what its sampled check can miss.
// Run: ./build/bin/cublas_sgemm [--quick]   (README.md is the handout)
#pragma once
#include <cmath>
#include <cstdio>
#include <string>

#include "common/ceilings.h"
#include "common/device.h"
#include "common/report.h"

#include "checks.h"

// Each mode against the peak of the unit it runs on, from the SM clock (a bound). The peak is NaN
// where common/ceilings.h knows no rate for this compute capability: then no bound, and the row
// is not graded.
struct Peaks {
    double fp32 = NAN, tf32 = NAN;  // TFLOP/s
};
inline Peaks report_peaks(lesson::Report& report, const cudaDeviceProp& prop, int device, bool tf32_runs) {
    Peaks p;
    p.fp32 = lesson::peak_gflops(prop, device, lesson::MathUnit::Fp32Simt) / 1e3;
    p.tf32 = tf32_runs ? lesson::peak_gflops(prop, device, lesson::MathUnit::Tf32Tensor) / 1e3 : NAN;
    if (std::isfinite(p.fp32)) report.bound("FP32 FMA peak from the SM clock", p.fp32, "TFLOP/s");
    if (std::isfinite(p.tf32))
        report.bound("TF32 tensor-core peak from the SM clock (dense)", p.tf32, "TFLOP/s", lesson::Roof::Compute);
    return p;
}

// Why a mode's row is not graded ("" where it is): the product is too small for the GPU
// (`small`, from lesson::small_gemm_note), or no peak is known for this compute capability.
inline std::string ungraded_why(const std::string& small, double peak, const char* peak_name) {
    return !small.empty() || std::isfinite(peak)
               ? small
               : std::string("no ") + peak_name + " known for cc " + lesson::cc_text(lesson::gpu_limits().cc);
}

// What the math modes gave at --bench^3: the rates (TFLOP/s) and the rel-L2 errors of their checks.
struct ModeResults {
    double fp32_rate = 0, tf32_rate = 0, fp32_err = 0, tf32_err = 0;
};
inline void report_math_modes(lesson::Report& report, const std::string& shape, bool tf32_runs, const ModeResults& r,
                              int64_t check_rows, int rows) {
    char key[160];
    if (tf32_runs) {
        report.metric("TF32 speedup over fp32", r.tf32_rate / r.fp32_rate, "x");
        report.metric("TF32 error / fp32 error (rel-L2)", r.tf32_err / r.fp32_err, "x");
        std::snprintf(key, sizeof key, "%s: fp32 %.1f, TF32 %.1f TFLOP/s (TF32 rel-L2 %.1e vs fp32 %.1e)",
                      shape.c_str(), r.fp32_rate, r.tf32_rate, r.tf32_err, r.fp32_err);
    } else {
        std::snprintf(key, sizeof key, "%s: fp32 %.1f TFLOP/s (rel-L2 %.1e); TF32 skipped (tensor cores from cc 8.0)",
                      shape.c_str(), r.fp32_rate, r.fp32_err);
    }
    report.key_result(key);
    char miss[200];
    std::snprintf(miss, sizeof miss,
                  "sampled check: %lld of %d rows; a fault confined to one 128-row band escapes it with "
                  "probability %.0f%% (README)",
                  (long long)check_rows, rows, 100.0 * miss_probability(rows, check_rows, 128));
    report.note(miss);
}
