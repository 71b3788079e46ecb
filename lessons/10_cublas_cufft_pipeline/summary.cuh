// Lesson 10 of the course (cuBLAS + cuFFT pipeline): the report. The stages of one chunk, then
// the three pipelines against max(PCIe bound, GPU compute bound), both measured in this run.
// Before: main.cu times the pipelines and checks.h checks the batch.
// Run: ./build/bin/cublas_cufft_pipeline [--quick]   (README.md is the handout)
#pragma once
#include <algorithm>
#include <cstdio>
#include <string>

#include "common/ceilings.h"
#include "common/flags.h"
#include "common/report.h"
#include "common/timer.h"
#include "verify/parallel.h"

// What main() timed, in ms.
struct Times {
    double seq_ms = 0, free_ms = 0, pipe_ms = 0;  // the pipeline: 1 stream, k free to overlap, k in chunk order
    double gemm_ms = 0, fft_ms = 0;               // one full chunk's GEMM, its FFT
    double compute_ms = 0;                        // every chunk's GEMM + FFT over the streams, no copies
    double generate_ms = 0, verify_ms = 0;        // host: the inputs, the checks (not timed on the GPU)
    lesson::LinkRates link;                       // the PCIe link at the chunk's copy size
};

static void report_pipeline(lesson::Report& report, const cudaDeviceProp& prop, const lesson::Cli& cli, int64_t n,
                            int64_t batch, int64_t chunk, int64_t streams, size_t img_bytes, const Times& t) {
    const double batch_bytes = static_cast<double>(batch * img_bytes),
                 chunk_bytes = static_cast<double>(chunk * img_bytes);
    const lesson::LinkRates& link = t.link;
    const double link_ms = lesson::link_bound_ms(batch_bytes, batch_bytes, link);
    // The pipeline's bound: the copies cannot beat the link, the compute cannot beat compute_ms.
    const double bound_ms = std::max(link_ms, t.compute_ms);
    const double bound_gbps = 2.0 * batch_bytes / (bound_ms * 1e6);
    const char* bound_name = link_ms >= t.compute_ms ? "PCIe bound" : "GPU compute bound";
    const double d2d = lesson::measure_d2d_gbps(prop);
    report.bound("H2D pinned, burst of chunk copies", link.h2d, "GB/s");
    report.bound("D2H pinned, burst of chunk copies", link.d2h, "GB/s");
    report.bound("H2D + D2H at once, pinned", link.both, "GB/s");
    report.bound(std::string("pipeline bound: max(PCIe, GPU compute) = ") + bound_name, bound_gbps, "GB/s");
    report.yardstick("device-to-device cudaMemcpy", d2d, "GB/s");
    report.timing(std::string(lesson::kTimingMethod) + "; two warm-up runs before a pipeline's samples");
    const double flops = 8.0 * n * n * n * chunk;  // a complex multiply-add is 8 real flops
    report.variant("CgemmStridedBatched, one chunk", t.gemm_ms, flops / (t.gemm_ms * 1e9), "TFLOP/s");
    report.variant_yardstick("cufftExecC2C 2D, one chunk (read + write)", t.fft_ms,
                             2.0 * chunk_bytes / (t.fft_ms * 1e6), "GB/s", d2d, "copy",
                             lesson::l2_note(2.0 * chunk_bytes, prop));
    auto gbps = [&](double ms) { return 2.0 * batch_bytes / (ms * 1e6); };
    const std::string k = std::to_string(streams) + " streams";
    report.variant_bound("pipeline, 1 stream (no overlap)", t.seq_ms, gbps(t.seq_ms), "GB/s", bound_gbps, bound_name);
    report.variant_bound("pipeline, " + k + ", calls free to overlap", t.free_ms, gbps(t.free_ms), "GB/s", bound_gbps,
                         bound_name);
    report.variant_bound("pipeline, " + k + ", compute in chunk order", t.pipe_ms, gbps(t.pipe_ms), "GB/s", bound_gbps,
                         bound_name);
    report.metric("PCIe bound of the batch", link_ms, "ms");
    report.metric("GPU compute bound: all chunks over the streams, no copies", t.compute_ms, "ms");
    report.metric("pipeline / max(PCIe bound, GPU compute)", bound_ms / t.pipe_ms, "");
    report.metric("GPU compute per chunk (GEMM + FFT)", t.gemm_ms + t.fft_ms, "ms");
    report.metric("transfer per chunk at the both-ways rate", 2.0 * chunk_bytes / (link.both * 1e6), "ms");
    report.metric("speedup over 1 stream", t.seq_ms / t.pipe_ms, "x");
    report.metric("host: generate inputs, threads (not timed)", t.generate_ms, "ms");
    report.metric("host: verify, all checks, threads", t.verify_ms, "ms");
    report.metric("host: threads", static_cast<double>(verify::host_threads()), "");
    report.note("GEMM flops counted as 8*n^3 per image (a complex multiply-add is 8 real flops)");
    report.note("the CPU reference time is for ONE image (double CGEMM + 2D FFT)");
    char key[128];
    std::snprintf(key, sizeof key, "pipeline, %s %.1f GB/s, n=%lld batch=%lld", k.c_str(), gbps(t.pipe_ms),
                  (long long)n, (long long)batch);
    report.key_result(key, bound_ms / t.pipe_ms, bound_name, lesson::Against::Bound);
    report.default_size(cli.at_default_size());
    report.target("pipeline of max(PCIe, GPU compute) bound", bound_ms / t.pipe_ms, 0.85);
}
