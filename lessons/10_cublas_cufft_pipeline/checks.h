// Lesson 10 of the course (cuBLAS + cuFFT pipeline): the checks of the batch, after the GPU is
// done. The full CPU reference is O(n^3) per image, so:
//  (1) whole images in full: one random image from each of `nfull` chunks spread over the batch;
//  (2) every image: row 0 and one random row of its spectrum, from the identity
//      row u of FFT2(T X) = FFT1( row u of (F T) * X ), F the DFT matrix: O(n^2) per row;
//  (3) every image: the sum of its spectrum = n^2 (T X)[0][0] (NaN poison anywhere fails it).
// The references are verify/fft.h's. Before: main.cu runs and times the pipeline. Next: the report.
// Run: ./build/bin/cublas_cufft_pipeline [--quick]   (README.md is the handout)
#pragma once
#include <cstdint>
#include <cstdio>
#include <vector>

#include "common/flags.h"
#include "common/launch.h"
#include "common/report.h"
#include "common/timer.h"
#include "verify/compare.h"
#include "verify/fft.h"
#include "verify/random.h"

// The random image checked in full for the i-th of nfull sampled chunks.
inline int64_t image_of_chunk(const lesson::ChunkPlan& plan, int64_t nfull, int64_t i, uint64_t seed) {
    const lesson::Chunk ch = plan.at(static_cast<uint64_t>(i * static_cast<int64_t>(plan.count) / nfull));
    return static_cast<int64_t>(ch.first + verify::splitmix64(seed + 77 * i) % ch.count);
}

// T, the inputs X and the GPU's spectra Z: `batch` n x n images, interleaved float complex.
// Reports the three checks and the CPU reference time of one image.
inline void check_batch(lesson::Report& report, const float* T, const float* X, float* Z, int64_t n, int64_t batch,
                        const lesson::ChunkPlan& plan, int64_t nfull, const lesson::CommonOptions& opt) {
    const int64_t img_floats = 2 * n * n;
    const uint64_t seed = static_cast<uint64_t>(opt.seed);
    if (opt.inject_fault)  // into an image that is checked in full, so the check must see it
        verify::inject_fault(Z + image_of_chunk(plan, nfull, 0, seed) * img_floats, img_floats, opt.seed);
    // (1) Each checked image against its reference, in sample order; the first reference's RMS is
    // the error scale for all.
    lesson::HostTimer cpu;
    int64_t img = image_of_chunk(plan, nfull, 0, seed);
    std::vector<verify::cplx> ref = verify::gemm_fft2d_reference(T, X + img * img_floats, n);
    const double cpu_ms = cpu.ms();
    verify::Comparer full(1e-4, verify::rms(reinterpret_cast<const double*>(ref.data()), img_floats));
    for (int64_t i = 0; i < nfull; ++i) {
        if (i > 0) {
            img = image_of_chunk(plan, nfull, i, seed);
            ref = verify::gemm_fft2d_reference(T, X + img * img_floats, n);
        }
        full.add(Z + img * img_floats, reinterpret_cast<const double*>(ref.data()), img_floats, img * img_floats);
    }
    // (2) and (3): two rows and one sum per image, from F T.
    const verify::SpectrumSamples s = verify::sample_spectra(T, X, Z, batch, n, seed);
    char what[200];
    std::snprintf(what, sizeof what,
                  "%lld whole images in full (one random image in each of %lld chunks) vs double CGEMM + 2D FFT",
                  (long long)nfull, (long long)nfull);
    report.check(full.result(what));
    report.check(verify::compare(s.rows_gpu.data(), reinterpret_cast<const double*>(s.rows_ref.data()),
                                 s.rows_gpu.size(), 1e-4,
                                 "every image: spectrum row 0 and one random row, row u = FFT(row u of F*T times X)"));
    report.check(verify::compare(s.sums_gpu.data(), reinterpret_cast<const double*>(s.sums_ref.data()),
                                 s.sums_gpu.size(), 1e-4, "every image: sum of its spectrum = n^2 (T X)[0][0]"));
    report.cpu_reference_ms(cpu_ms, verify::host_threads());
}
