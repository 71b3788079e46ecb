// Lesson 11 of the course (00-23): hybrid FFT filter, custom kernels and cuFFT on one stream.
// Before: lesson 10 (10_cublas_cufft_pipeline). Next: lesson 12 (12_transpose).
// Run: ./build/bin/hybrid_fft_filter [--quick]   (--help lists every flag; README.md is the handout)
//
// Hybrid FFT filter: custom kernels and cuFFT in one pipeline on
// one stream. threshold (kernel) -> forward FFT (R2C) -> low-pass (kernel,
// with the inverse transform's 1/(n*n) folded in) -> inverse FFT (C2R), on a
// synthetic image whose content is known: a smooth pattern plus white noise.
// The run checks every output pixel against a double-precision CPU pipeline
// and checks that the energy above the cutoff is gone. See README.md.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <cufft.h>

#include "common/ceilings.h"
#include "common/check.h"
#include "common/device.h"
#include "common/flags.h"
#include "common/launch.h"
#include "common/memory.h"
#include "common/report.h"
#include "common/timer.h"
#include "verify/compare.h"
#include "verify/fft.h"
#include "verify/random.h"

using verify::cplx;

// Step 1: a pixel below `level` becomes 0. Real in, real out: cuFFT's R2C reads
// the real image directly, so no real-to-complex conversion pass is needed.
__global__ void thresholdImage(const float* in, float* out, size_t count, float level) {
    const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < count) {
        const float v = in[i];
        out[i] = v < level ? 0.0f : v;
    }
}

// Step 3: low-pass on the R2C half spectrum of image blockIdx.z (n rows of
// half = n/2 + 1 bins). cuFFT puts frequency 0 at index 0, not in the middle:
// row ky holds frequency ky up to n/2 and ky - n above it (the negative ones);
// column kx holds frequency kx >= 0. A bin is kept when its distance from
// frequency 0 is within the cutoff, and scaled by `scale`, which carries the
// 1/(n*n) that cuFFT's unnormalized inverse leaves out (no extra pass).
__global__ void lowPassNormalize(cufftComplex* spec, int n, int half, double keep_r2, float scale) {
    // EXERCISE 1 BEGIN: keep bin (kx, ky) of image blockIdx.z, scaled by `scale`, when its frequency is within the cutoff, else 0
    // HINT: row ky holds frequency ky up to n / 2 and ky - n above it; column kx holds frequency kx
    // HINT: kept when kx^2 + fy^2 <= keep_r2 (the cutoff circle included); the grid hangs over half and n
    const int kx = blockIdx.x * blockDim.x + threadIdx.x;
    const int ky = blockIdx.y * blockDim.y + threadIdx.y;
    if (kx >= half || ky >= n) return;
    const int fy = ky <= n / 2 ? ky : ky - n;
    const double r2 = double(kx) * kx + double(fy) * fy;
    const float gain = r2 <= keep_r2 ? scale : 0.0f;
    cufftComplex* v = spec + (static_cast<size_t>(blockIdx.z) * n + ky) * half + kx;
    v->x *= gain;
    v->y *= gain;
    // EXERCISE 1 END
}

// Only for the comparison variant: the normalization as a pass of its own.
__global__ void normalizeImage(float* img, size_t count, float scale) {
    const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < count) img[i] *= scale;
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

// Squared distance of full-spectrum bin (ky, kx) from frequency 0, as the kernel measures it.
static double freq_r2(int64_t ky, int64_t kx, int64_t n) {
    const int64_t fy = ky <= n / 2 ? ky : ky - n, fx = kx <= n / 2 ? kx : kx - n;
    return double(fx) * fx + double(fy) * fy;
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

int main(int argc, char** argv) {
    // ---- Flags: bad input exits 2 before any CUDA call.
    lesson::CommonOptions opt;
    int64_t n = 1024, batch = 32;
    double cutoff = 0.1, level = 0.2;
    std::string out_path;
    lesson::Cli cli("hybrid_fft_filter",
                    "threshold -> FFT -> low-pass -> inverse FFT on a synthetic image, one stream.");
    lesson::add_common_flags(cli, opt);
    cli.add_int("n", &n, 8, 8192, "image side (n x n floats; cuFFT takes any size, fastest for 2^a 3^b 5^c 7^d)", 256);
    cli.add_int("batch", &batch, 1, 65535, "images, transformed together by one batched plan", 2);
    cli.add_double("cutoff", &cutoff, 0.01, 1.0, "low-pass radius as a fraction of the Nyquist frequency n/2");
    cli.add_double("threshold", &level, -10.0, 10.0, "pixels below this become 0 before the transform");
    cli.add_output("out", &out_path, "write the first image, input | output side by side, as this PGM file");
    cli.parse_or_exit(argc, argv);

    const size_t N = static_cast<size_t>(n), half = N / 2 + 1, px = batch * N * N, bins = batch * N * half;
    // Pinned input and output, the unfused variant's output, all references, an n x n double complex array per thread.
    const uint64_t threads_cpu = std::max<uint64_t>(1, std::thread::hardware_concurrency());
    lesson::require_host_memory(px * (3 * sizeof(float) + sizeof(double)) + threads_cpu * N * N * sizeof(cplx),
                                "pinned + pageable", "--batch=" + std::to_string(batch) + " --n=" + std::to_string(n));
    if (px > static_cast<size_t>(INT32_MAX))
        lesson::bad_input("--batch=" + std::to_string(batch) + " x --n=" + std::to_string(n) +
                          "^2 pixels passes 2^31 - 1; cufftPlanMany takes int sizes: allowed batch <= " +
                          std::to_string(INT32_MAX / (n * n)));
    cudaDeviceProp prop = lesson::pick_device(opt.device);
    // Input, work image, half spectrum, and cuFFT's work area (at most about a spectrum).
    lesson::require_device_memory(2 * px * sizeof(float) + 2 * bins * sizeof(cufftComplex),
                                  "--batch=" + std::to_string(batch) + " --n=" + std::to_string(n));

    lesson::Report report("11_hybrid_fft_filter");
    report.device(prop.name, prop.major, prop.minor, prop.multiProcessorCount, prop.totalGlobalMem / 1e9);
    report.config("n", n);
    report.config("batch", batch);
    report.config("cutoff_of_nyquist", cutoff);
    report.config("threshold", level);
    report.config("repeat", opt.repeat);
    report.config("seed", opt.seed);

    // ---- Host input (pinned, so the async copies are truly async), generated before any timing.
    float *h_in = nullptr, *h_out = nullptr;
    CUDA_CHECK(cudaMallocHost(&h_in, px * sizeof(float)));
    CUDA_CHECK(cudaMallocHost(&h_out, px * sizeof(float)));
    verify::parallel_for(batch, [&](int64_t b) {  // each pixel a pure function of (seed, b, y, x): images in parallel
        for (int64_t y = 0; y < n; ++y)
            for (int64_t x = 0; x < n; ++x) h_in[(b * n + y) * n + x] = test_pixel(opt.seed, b, y, x, n);
    });

    // ---- Allocate; one stream for everything; plans bound to it once.
    float *d_in = nullptr, *d_work = nullptr;
    cufftComplex* d_spec = nullptr;
    CUDA_CHECK(cudaMalloc(&d_in, px * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_work, px * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_spec, bins * sizeof(cufftComplex)));
    cudaStream_t stream;
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));  // never implicitly ordered with stream 0
    int dims[2] = {static_cast<int>(n), static_cast<int>(n)};
    const int real_dist = static_cast<int>(N * N), spec_dist = static_cast<int>(N * half);
    cufftHandle fwd, inv;
    CUFFT_CHECK(cufftPlanMany(&fwd, 2, dims, nullptr, 1, real_dist, nullptr, 1, spec_dist, CUFFT_R2C, (int)batch));
    CUFFT_CHECK(cufftPlanMany(&inv, 2, dims, nullptr, 1, spec_dist, nullptr, 1, real_dist, CUFFT_C2R, (int)batch));
    CUFFT_CHECK(cufftSetStream(fwd, stream));
    CUFFT_CHECK(cufftSetStream(inv, stream));

    const int threads = 256;
    const unsigned px_blocks = static_cast<unsigned>(lesson::ceil_div(px, threads));
    const dim3 spec_block(32, 8),
        spec_grid(static_cast<unsigned>(lesson::ceil_div(half, 32)), static_cast<unsigned>(lesson::ceil_div(N, 8)),
                  static_cast<unsigned>(batch));
    const double keep_radius = cutoff * (n / 2.0), keep_r2 = keep_radius * keep_radius;
    const float inv_scale = 1.0f / static_cast<float>(N * N);
    // The device part of the pipeline, all on `stream`. fused = the 1/(n*n) rides in the low-pass.
    auto filter_on_device = [&](bool fused) {
        thresholdImage<<<px_blocks, threads, 0, stream>>>(d_in, d_work, px, static_cast<float>(level));
        CUDA_CHECK_LAUNCH();
        CUFFT_CHECK(cufftExecR2C(fwd, d_work, d_spec));
        lowPassNormalize<<<spec_grid, spec_block, 0, stream>>>(d_spec, (int)n, (int)half, keep_r2,
                                                               fused ? inv_scale : 1.0f);
        CUDA_CHECK_LAUNCH();
        CUFFT_CHECK(cufftExecC2R(inv, d_spec, d_work));  // C2R may overwrite d_spec: fine, it is not needed again
        if (!fused) {
            normalizeImage<<<px_blocks, threads, 0, stream>>>(d_work, px, inv_scale);
            CUDA_CHECK_LAUNCH();
        }
    };

    // ---- The pipeline: copy in, filter, copy out, all queued on one stream; one synchronization at the end.
    CUDA_CHECK(cudaMemsetAsync(d_work, 0xFF, px * sizeof(float), stream));  // poison: NaN
    CUDA_CHECK(cudaMemsetAsync(d_spec, 0xFF, bins * sizeof(cufftComplex), stream));
    auto pipeline = [&] {
        CUDA_CHECK(cudaMemcpyAsync(d_in, h_in, px * sizeof(float), cudaMemcpyHostToDevice, stream));
        filter_on_device(true);
        CUDA_CHECK(cudaMemcpyAsync(h_out, d_work, px * sizeof(float), cudaMemcpyDeviceToHost, stream));
    };
    pipeline();
    CUDA_CHECK(cudaStreamSynchronize(stream));  // the one synchronization: h_out is ready after it

    // The comparison variant (normalize as its own pass), once, for its own check.
    std::vector<float> h_out_unfused(px);
    CUDA_CHECK(cudaMemsetAsync(d_work, 0xFF, px * sizeof(float), stream));
    filter_on_device(false);
    CUDA_CHECK(cudaMemcpyAsync(h_out_unfused.data(), d_work, px * sizeof(float), cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));

    // ---- Timing: each stage alone, then the device pipeline both ways (d_in is never written, so reruns are alike).
    const int rep = static_cast<int>(opt.repeat);
    const double thr_ms = lesson::time_median_ms(
        rep,
        [&] {
            thresholdImage<<<px_blocks, threads, 0, stream>>>(d_in, d_work, px, static_cast<float>(level));
            CUDA_CHECK_LAUNCH();
        },
        stream);
    const double r2c_ms = lesson::time_median_ms(
        rep, [&] { CUFFT_CHECK(cufftExecR2C(fwd, d_work, d_spec)); }, stream);
    const double lp_ms = lesson::time_median_ms(
        rep,
        [&] {
            lowPassNormalize<<<spec_grid, spec_block, 0, stream>>>(d_spec, (int)n, (int)half, keep_r2, inv_scale);
            CUDA_CHECK_LAUNCH();
        },
        stream);
    const double c2r_ms = lesson::time_median_ms(
        rep, [&] { CUFFT_CHECK(cufftExecC2R(inv, d_spec, d_work)); }, stream);
    const double fused_ms = lesson::time_median_ms(
        rep, [&] { filter_on_device(true); }, stream);
    const double unfused_ms = lesson::time_median_ms(
        rep, [&] { filter_on_device(false); }, stream);
    const double e2e_ms = lesson::time_median_ms(rep, pipeline, stream);  // rewrites h_out with the same values

    // ---- Verify: the same pipeline on the CPU in double, every pixel of every image
    // (images spread over host threads; each image's reference is single-threaded).
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
    report.check(verify::compare(h_out_unfused.data(), ref.data(), px, 1e-4, "every pixel, normalize as its own pass"));
    // The filter's effect, as a check: the energy above the cutoff must drop to rounding level.
    lesson::Check drop;
    drop.what = "energy above the cutoff, output / filter input (the value shown as rel-L2)";
    drop.checked = bins;
    drop.rel_l2 = energy_before > 0 ? energy_after / energy_before : NAN;
    drop.max_abs = energy_after;
    drop.tol = 1e-6;
    drop.pass = drop.rel_l2 <= drop.tol;
    report.check(drop);
    report.metric("energy above cutoff, filter input", energy_before, "");
    report.metric("energy above cutoff, output", energy_after, "");
    report.metric("host: verify wall time, threads", verify_ms, "ms");
    report.note("single-threaded CPU reference = the sum over images of each image's one-thread time");

    // ---- Report: the custom kernels (one read, one write) against the DRAM bound of a 1 : 1 mix;
    // the cuFFT stages and the pipelines, whose read/write sizes differ, against the copy as a yardstick.
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
    report.variant_bound("thresholdImage (read + write image)", thr_ms, 2 * img_b / (thr_ms * 1e6), "GB/s", dram.gbps,
                         "DRAM bound", img_l2);
    report.variant_yardstick("cufftExecR2C (read image, write spectrum)", r2c_ms, (img_b + spec_b) / (r2c_ms * 1e6),
                             "GB/s", d2d, "copy", img_l2);
    report.variant_bound("lowPassNormalize (read + write spectrum)", lp_ms, 2 * spec_b / (lp_ms * 1e6), "GB/s",
                         dram.gbps, "DRAM bound", spec_l2);
    report.variant_yardstick("cufftExecC2R (read spectrum, write image)", c2r_ms, (spec_b + img_b) / (c2r_ms * 1e6),
                             "GB/s", d2d, "copy", img_l2);
    // One pass per stage, each reading and writing once: the least traffic of this pipeline.
    const double pipe_b = 2 * img_b + 2 * (img_b + spec_b) + 2 * spec_b;
    report.variant_yardstick("device pipeline, normalize fused", fused_ms, pipe_b / (fused_ms * 1e6), "GB/s", d2d,
                             "copy", img_l2);
    report.variant_yardstick("device pipeline, normalize own pass", unfused_ms, pipe_b / (unfused_ms * 1e6), "GB/s",
                             d2d, "copy", img_l2);
    report.variant("end to end: H2D, pipeline, D2H, one sync", e2e_ms, 2 * img_b / (e2e_ms * 1e6), "GB/s");
    report.metric("fusing saved (own pass - fused)", unfused_ms - fused_ms, "ms");
    report.metric("fusing saved, share of the unfused pipeline", 100.0 * (unfused_ms - fused_ms) / unfused_ms, "%");
    report.note(
        "traffic counted once per stage: image read+write, image->spectrum, spectrum read+write, spectrum->image");
    char key[128];
    std::snprintf(key, sizeof key, "filter %.3f ms for %lld x %lld^2 px (%.0f GB/s)", fused_ms, (long long)batch,
                  (long long)n, pipe_b / (fused_ms * 1e6));
    report.key_result(key, pipe_b / (fused_ms * 1e6) / d2d, "copy", lesson::Against::Yardstick, img_l2);
    report.default_size(cli.at_default_size());

    if (!out_path.empty()) {
        lesson::Check written;
        written.what = "--out=" + out_path + " written (input | output of image 0)";
        written.pass = write_pgm(out_path, {h_in, h_out}, n);
        written.checked = written.pass ? 2 * N * N : 0;
        written.rel_l2 = written.max_abs = 0;
        report.check(written);
    }

    // ---- Free everything.
    CUFFT_CHECK(cufftDestroy(fwd));
    CUFFT_CHECK(cufftDestroy(inv));
    CUDA_CHECK(cudaStreamDestroy(stream));
    CUDA_CHECK(cudaFree(d_in));
    CUDA_CHECK(cudaFree(d_work));
    CUDA_CHECK(cudaFree(d_spec));
    CUDA_CHECK(cudaFreeHost(h_in));
    CUDA_CHECK(cudaFreeHost(h_out));
    return report.finish(opt.json);
}
