// Lesson 11 of the course (00-24): hybrid FFT filter, custom kernels and cuFFT on one stream.
// Before: lesson 10 (10_cublas_cufft_pipeline). Next: lesson 12 (12_transpose).
// Run: ./build/bin/hybrid_fft_filter [--quick]   (--help lists every flag; README.md is the handout)
//
// Hybrid FFT filter: custom kernels and cuFFT in one pipeline on
// one stream. threshold (kernel) -> forward FFT (R2C) -> low-pass (kernel,
// with the inverse transform's 1/(n*n) folded in) -> inverse FFT (C2R), on a
// synthetic image whose content is known: a smooth pattern plus white noise.
// The run checks every output pixel against a double-precision CPU pipeline
// and checks that the energy above the cutoff is gone. The test images and the
// checks: checks.h; the report: summary.cuh. See README.md.
#include <string>
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

#include "checks.h"
#include "summary.cuh"

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
    require_sizes(n, batch);  // host memory, and int sizes for cufftPlanMany (checks.h)

    const size_t N = static_cast<size_t>(n), half = N / 2 + 1, px = batch * N * N, bins = batch * N * half;
    cudaDeviceProp prop = lesson::pick_device(opt.device);
    // Input, work image, half spectrum, and cuFFT's work area (at most about a spectrum).
    lesson::require_device_memory(2 * px * sizeof(float) + 2 * bins * sizeof(cufftComplex),
                                  "--batch=" + std::to_string(batch) + " --n=" + std::to_string(n));

    lesson::Report report("11_hybrid_fft_filter");
    report.device(prop);
    report.config_from(cli);  // every flag as parsed: n, batch, cutoff (of Nyquist), threshold, repeat, seed, ...

    // ---- Host input (pinned, so the async copies are truly async), generated before any timing.
    float *h_in = nullptr, *h_out = nullptr;
    CUDA_CHECK(cudaMallocHost(&h_in, px * sizeof(float)));
    CUDA_CHECK(cudaMallocHost(&h_out, px * sizeof(float)));
    fill_test_images(h_in, n, batch, opt.seed);

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
    // inembed = onembed = nullptr: cuFFT uses the basic layout (images packed back to back) and
    // ignores the strides and distances; these distances are passed because they equal that default.
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
    // The stages, all on `stream`, each also timed alone below.
    auto threshold = [&] {
        thresholdImage<<<px_blocks, threads, 0, stream>>>(d_in, d_work, px, static_cast<float>(level));
        CUDA_CHECK_LAUNCH();
    };
    auto forward = [&] { CUFFT_CHECK(cufftExecR2C(fwd, d_work, d_spec)); };
    auto low_pass = [&](float scale) {
        lowPassNormalize<<<spec_grid, spec_block, 0, stream>>>(d_spec, (int)n, (int)half, keep_r2, scale);
        CUDA_CHECK_LAUNCH();
    };
    // C2R may overwrite d_spec: fine, it is not needed again.
    auto inverse = [&] { CUFFT_CHECK(cufftExecC2R(inv, d_spec, d_work)); };
    // The device part of the pipeline. fused = the 1/(n*n) rides in the low-pass.
    auto filter_on_device = [&](bool fused) {
        threshold();
        forward();
        low_pass(fused ? inv_scale : 1.0f);
        inverse();
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
    Times t;
    t.thr_ms = lesson::time_median_ms(rep, threshold, stream);
    t.r2c_ms = lesson::time_median_ms(rep, forward, stream);
    t.lp_ms = lesson::time_median_ms(
        rep, [&] { low_pass(inv_scale); }, stream);
    t.c2r_ms = lesson::time_median_ms(rep, inverse, stream);
    t.fused_ms = lesson::time_median_ms(
        rep, [&] { filter_on_device(true); }, stream);
    t.unfused_ms = lesson::time_median_ms(
        rep, [&] { filter_on_device(false); }, stream);
    t.e2e_ms = lesson::time_median_ms(rep, pipeline, stream);  // rewrites h_out with the same values

    // ---- Verify: the same pipeline on the CPU in double, every pixel, and the energy above the cutoff (checks.h).
    check_filter(report, h_in, h_out, h_out_unfused.data(), n, batch, level, keep_r2, bins, opt);
    // ---- Report: each stage and both pipelines against the DRAM bound or the copy (summary.cuh).
    report_filter(report, prop, opt, cli, n, batch, px, bins, t);
    if (!out_path.empty()) check_written(report, out_path, h_in, h_out, n);

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
