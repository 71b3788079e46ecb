// Lesson 11 of the course (hybrid FFT filter): the test images, the size checks before any CUDA
// call, and the checks after the GPU is done: the same pipeline on the CPU in double, every pixel
// of every image, and the energy above the cutoff before and after the filter (verify/fft.h).
// Before: main.cu runs and times the pipeline. Next: the report (summary.cuh).
// Run: ./build/bin/hybrid_fft_filter [--quick]   (README.md is the handout)
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "common/flags.h"
#include "common/memory.h"
#include "common/report.h"
#include "common/timer.h"
#include "verify/compare.h"
#include "verify/fft.h"
#include "verify/parallel.h"
#include "verify/random.h"

using verify::cplx;

// Bad sizes exit 2 before any CUDA call.
inline void require_sizes(int64_t n, int64_t batch) {
    const size_t N = static_cast<size_t>(n), px = batch * N * N;
    // Pinned input and output, the unfused variant's output, all references, an n x n double complex array per thread.
    const uint64_t threads_cpu = std::max<uint64_t>(1, std::thread::hardware_concurrency());
    lesson::require_host_memory(px * (3 * sizeof(float) + sizeof(double)) + threads_cpu * N * N * sizeof(cplx),
                                "pinned + pageable", "--batch=" + std::to_string(batch) + " --n=" + std::to_string(n));
    if (px > static_cast<size_t>(INT32_MAX))
        lesson::bad_input("--batch=" + std::to_string(batch) + " x --n=" + std::to_string(n) +
                          "^2 pixels passes 2^31 - 1; cufftPlanMany takes int sizes: allowed batch <= " +
                          std::to_string(INT32_MAX / (n * n)));
}

// The test image: a smooth pattern with whole cycles across the image (its
// energy sits in a few bins within 5 of frequency 0) plus white noise (energy in
// every bin), so the low-pass has something to keep and something to remove.
static float test_pixel(uint64_t seed, int64_t b, int64_t y, int64_t x, int64_t n) {
    const double u = double(x) / n, v = double(y) / n, tau = 2.0 * M_PI;
    const double smooth =
        0.5 + 0.3 * std::cos(tau * 2 * u) * std::cos(tau * 3 * v) + 0.15 * std::cos(tau * (u + 4 * v) + 0.7 * b);
    return static_cast<float>(smooth) +
           verify::hash_uniform(seed, static_cast<uint64_t>((b * n + y) * n + x), -0.3f, 0.3f);
}

// `batch` test images of n x n pixels into h_in.
inline void fill_test_images(float* h_in, int64_t n, int64_t batch, uint64_t seed) {
    verify::parallel_for(batch, [&](int64_t b) {  // each pixel a pure function of (seed, b, y, x): images in parallel
        for (int64_t y = 0; y < n; ++y)
            for (int64_t x = 0; x < n; ++x) h_in[(b * n + y) * n + x] = test_pixel(seed, b, y, x, n);
    });
}

// Squared distance of full-spectrum bin (ky, kx) from frequency 0, as the kernel measures it.
static double freq_r2(int64_t ky, int64_t kx, int64_t n) {
    const int64_t fy = ky <= n / 2 ? ky : ky - n, fx = kx <= n / 2 ? kx : kx - n;
    return double(fx) * fx + double(fy) * fy;
}

// The same pipeline on the CPU in double, every pixel of every image (images spread over host
// threads; each image's reference is single-threaded), against both GPU variants; then the
// filter's effect, as a check: the energy above the cutoff must drop to rounding level.
inline void check_filter(lesson::Report& report, const float* h_in, float* h_out, const float* h_out_unfused, int64_t n,
                         int64_t batch, double level, double keep_r2, size_t bins, const lesson::CommonOptions& opt) {
    const size_t N = static_cast<size_t>(n), px = batch * N * N;
    if (opt.inject_fault) verify::inject_fault(h_out, px, opt.seed);
    std::vector<double> ref(px), e_before(batch), e_after(batch), ref_ms(batch);
    lesson::HostTimer verify_timer;
    verify::parallel_for(batch, [&](int64_t b) {
        std::vector<cplx> spec(N * N);
        const float* x = h_in + b * N * N;
        lesson::HostTimer cpu;
        for (size_t i = 0; i < N * N; ++i) spec[i] = x[i] < static_cast<float>(level) ? 0.0 : double(x[i]);
        verify::fft2d(spec.data(), N, N, verify::kForward);
        for (size_t i = 0; i < N * N; ++i)
            if (freq_r2(i / N, i % N, n) > keep_r2) {
                e_before[b] += std::norm(spec[i]);  // energy above the cutoff, filter input
                spec[i] = 0.0;
            }
        verify::fft2d(spec.data(), N, N, verify::kInverse);
        for (size_t i = 0; i < N * N; ++i) ref[b * N * N + i] = spec[i].real() / double(N * N);
        ref_ms[b] = cpu.ms();
        // Energy above the cutoff in the GPU's output image (CPU FFT of what came back).
        const float* y = h_out + b * N * N;
        for (size_t i = 0; i < N * N; ++i) spec[i] = double(y[i]);
        verify::fft2d(spec.data(), N, N, verify::kForward);
        for (size_t i = 0; i < N * N; ++i)
            if (freq_r2(i / N, i % N, n) > keep_r2) e_after[b] += std::norm(spec[i]);
    });
    const double verify_ms = verify_timer.ms();
    double cpu_ms = 0, energy_before = 0, energy_after = 0;
    for (int64_t b = 0; b < batch; ++b) cpu_ms += ref_ms[b], energy_before += e_before[b], energy_after += e_after[b];
    report.cpu_reference_ms(cpu_ms);
    report.check(verify::compare(h_out, ref.data(), px, 1e-4, "every pixel, normalize fused into the low-pass"));
    report.check(verify::compare(h_out_unfused, ref.data(), px, 1e-4, "every pixel, normalize as its own pass"));
    lesson::Check drop;
    drop.what = "energy above the cutoff, output / filter input (the value shown as rel-L2)";
    drop.checked = bins;
    drop.rel_l2 = energy_before > 0 ? energy_after / energy_before : NAN;
    drop.max_abs = energy_after;
    // Rounding alone leaves about 6e-14; one unfiltered bin pair in one image of a batch adds
    // about 6e-8, so 1e-10 keeps a wide margin over rounding and still fails that mask bug.
    drop.tol = 1e-10;
    drop.pass = drop.rel_l2 <= drop.tol;
    report.check(drop);
    report.metric("energy above cutoff, filter input", energy_before, "");
    report.metric("energy above cutoff, output", energy_after, "");
    report.metric("host: verify wall time, threads", verify_ms, "ms");
    report.note("single-threaded CPU reference = the sum over images of each image's one-thread time");
}

// Panels side by side in one 8-bit binary PGM, all on one gray scale, 4 white pixels apart.
static bool write_pgm(const std::string& path, const std::vector<const float*>& panels, int64_t n) {
    float lo = panels[0][0], hi = lo;
    for (const float* p : panels)
        for (int64_t i = 0; i < n * n; ++i) lo = std::min(lo, p[i]), hi = std::max(hi, p[i]);
    const int64_t gap = 4, w = static_cast<int64_t>(panels.size()) * (n + gap) - gap;
    std::vector<unsigned char> row(w);
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) return false;
    std::fprintf(f, "P5\n%lld %lld\n255\n", (long long)w, (long long)n);
    for (int64_t y = 0; y < n; ++y) {
        std::fill(row.begin(), row.end(), 255);
        for (size_t k = 0; k < panels.size(); ++k)
            for (int64_t x = 0; x < n; ++x)
                row[k * (n + gap) + x] =
                    static_cast<unsigned char>(std::lround(255.0 * (panels[k][y * n + x] - lo) / (hi - lo)));
        std::fwrite(row.data(), 1, row.size(), f);
    }
    return std::fclose(f) == 0;
}

// --out: image 0, input | output, written as a PGM; writing it is a check of its own.
inline void check_written(lesson::Report& report, const std::string& out_path, const float* h_in, const float* h_out,
                          int64_t n) {
    lesson::Check written;
    written.what = "--out=" + out_path + " written (input | output of image 0)";
    written.pass = write_pgm(out_path, {h_in, h_out}, n);
    written.checked = written.pass ? 2 * static_cast<size_t>(n) * static_cast<size_t>(n) : 0;
    written.rel_l2 = written.max_abs = 0;
    report.check(written);
}
