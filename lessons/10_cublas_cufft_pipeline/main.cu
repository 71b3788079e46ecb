// Lesson 10 of the course (00-24): cuBLAS + cuFFT pipeline.
// Before: lesson 09 (09_cublas_strided_batched). Next: lesson 11 (11_hybrid_fft_filter).
// Run: ./build/bin/cublas_cufft_pipeline [--quick]   (--help lists every flag; README.md is the handout)
//
// A batch of complex images, each multiplied by one fixed complex matrix
// (cublasCgemmStridedBatched, stride 0 for the shared matrix), then 2D-transformed
// (cufftPlanMany, C2C), in chunks spread over streams so that host transfers overlap the
// library calls. The slots the chunks go through: slots.cuh; the checks: checks.h; the report:
// summary.cuh.
//
// Layout: every matrix is n x n, complex, ROW-major (element (r, c) at r*n + c),
// as C code and cuFFT lay them out. cuBLAS is column-major; see the GEMM call
// below for how Y = T * X is asked of it. See README.md.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <cublas_v2.h>
#include <cufft.h>

#include "common/ceilings.h"
#include "common/check.h"
#include "common/device.h"
#include "common/flags.h"
#include "common/launch.h"
#include "common/memory.h"
#include "common/report.h"
#include "common/timer.h"
#include "verify/fft.h"
#include "verify/random.h"

#include "checks.h"
#include "slots.cuh"
#include "summary.cuh"

// Y = T * X for `count` images of one slot, on stream s. cuBLAS reads our row-major X as the
// column-major matrix X^T (and T as T^T), and writes its column-major C into our row-major Y.
// So ask it for C = A * B with A = X, B = T:  C = X^T * T^T = (T * X)^T, i.e. Y in row-major.
// strideB = 0: every image of the batch uses the same T.
// One handle, several streams (cuBLAS documentation, lesson 09): cublasSetStream also resets the
// handle to its default workspace pool, from which cuBLAS picks scratch memory for routines
// running in parallel streams, and results may then differ bit for bit from run to run. Each
// stream gets a workspace of its own, set right after cublasSetStream.
void Slots::transform(int64_t s, int64_t count) {
    const cuComplex one = make_cuComplex(1.f, 0.f), zero = make_cuComplex(0.f, 0.f);
    CUBLAS_CHECK(cublasSetStream(blas, stream[s]));
    CUBLAS_CHECK(cublasSetWorkspace(blas, d_ws[s], ws_bytes));
    CUBLAS_CHECK(cublasCgemmStridedBatched(blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)n, (int)n, (int)n, &one, d_x[s], (int)n,
                                           (long long)img_elems, d_t, (int)n, 0LL, &zero, d_y[s], (int)n,
                                           (long long)img_elems, (int)count));
}

// 2D FFT of every image of one slot, in place, on stream s.
void Slots::transform_fft(int64_t s, int64_t count) {
    cufftHandle p = (count == chunk) ? fft[s] : fft_tail;
    CUFFT_CHECK(cufftSetStream(p, stream[s]));
    CUFFT_CHECK(cufftExecC2C(p, d_y[s], d_y[s], CUFFT_FORWARD));
}

// The pipeline: chunk c goes to stream c % k. Within a stream the work is ordered, so a slot is
// reused only after its previous chunk's D2H finished. Stream 0 forks the others and joins them
// at the end, so events on stream 0 time the whole batch. in_order: chunk c's GEMM waits for
// chunk c-1's FFT, so the chunks take turns on the SMs (first come, first done) instead of the
// next GEMM filling the SMs while this chunk's FFT waits behind it (README).
void Slots::pipeline(int64_t k, bool in_order) {
    CUDA_CHECK(cudaEventRecord(fork, stream[0]));
    for (int64_t s = 1; s < k; ++s) CUDA_CHECK(cudaStreamWaitEvent(stream[s], fork, 0));
    // EXERCISE 1 BEGIN: issue every chunk on stream c % k: copy in, GEMM, FFT, copy out (in_order: wait for chunk c-1)
    // HINT: plan.at(c) gives chunk c's first image and count (the last chunk may be shorter)
    // HINT: record computed[s] after the FFT; with in_order, chunk c > 0 first waits for computed[(c - 1) % k]
    for (uint64_t c = 0; c < plan.count; ++c) {
        const lesson::Chunk ch = plan.at(c);
        const int64_t s = static_cast<int64_t>(c % k);
        CUDA_CHECK(cudaMemcpyAsync(d_x[s], h_in + ch.first * img_elems, ch.count * img_bytes, cudaMemcpyHostToDevice,
                                   stream[s]));
        if (in_order && c > 0) CUDA_CHECK(cudaStreamWaitEvent(stream[s], computed[(c - 1) % k], 0));
        transform(s, ch.count);
        transform_fft(s, ch.count);
        CUDA_CHECK(cudaEventRecord(computed[s], stream[s]));
        CUDA_CHECK(cudaMemcpyAsync(h_out + ch.first * img_elems, d_y[s], ch.count * img_bytes, cudaMemcpyDeviceToHost,
                                   stream[s]));
    }
    // EXERCISE 1 END
    for (int64_t s = 1; s < k; ++s) {
        CUDA_CHECK(cudaEventRecord(done[s], stream[s]));
        CUDA_CHECK(cudaStreamWaitEvent(stream[0], done[s], 0));
    }
}

// The compute bound's work: every chunk's GEMM + FFT over the same streams, free to overlap, no
// copies. No pipeline computes its batch faster than this (its slot data is left as it is).
void Slots::compute_only() {
    CUDA_CHECK(cudaEventRecord(fork, stream[0]));
    for (int64_t s = 1; s < streams; ++s) CUDA_CHECK(cudaStreamWaitEvent(stream[s], fork, 0));
    for (uint64_t c = 0; c < plan.count; ++c) {
        const int64_t s = static_cast<int64_t>(c % streams);
        transform(s, plan.at(c).count);
        transform_fft(s, plan.at(c).count);
    }
    for (int64_t s = 1; s < streams; ++s) {
        CUDA_CHECK(cudaEventRecord(done[s], stream[s]));
        CUDA_CHECK(cudaStreamWaitEvent(stream[0], done[s], 0));
    }
}

// A pipeline variant is timed after two warm-up runs (the first one timed, to choose the sample
// count), and long runs take fewer samples (lesson::capped_samples): at the default size the
// 1-stream run takes the median of 3, the 3-stream runs the median of 7.
static double time_pipeline(Slots& slots, int64_t k, bool in_order, int rep) {
    lesson::EventTimer first;
    first.start(slots.stream[0]);
    slots.pipeline(k, in_order);
    const int samples = int(lesson::capped_samples(rep, first.stop(slots.stream[0])));
    return lesson::time_median_ms(
        samples, [&] { slots.pipeline(k, in_order); }, slots.stream[0], 1);
}

int main(int argc, char** argv) {
    // ---- Flags: bad input exits 2 before any CUDA call.
    lesson::CommonOptions opt;
    int64_t n = 1024, batch = 128, chunk = 4, streams = 3, full_checks = 16;
    lesson::Cli cli(
        "cublas_cufft_pipeline",
        "Y = T * X for every image X (one shared complex matrix T), then a 2D FFT of Y, over chunks and streams.");
    lesson::add_common_flags(cli, opt);
    cli.add_int("n", &n, 2, 4096, "image side: images and T are n x n complex (any size; cuFFT takes all)", 128);
    cli.add_int("batch", &batch, 1, int64_t(1) << 20, "images in the batch", 14);
    cli.add_int("chunk", &chunk, 1, int64_t(1) << 20, "images per chunk (one GEMM call and one FFT call each)", 4);
    cli.add_int("streams", &streams, 1, 16, "streams; each owns one slot of device buffers and one FFT plan");
    cli.add_int("full-checks", &full_checks, 1, 1024,
                "chunks whose random image is verified in full (O(n^3) on the CPU each)");
    cli.parse_or_exit(argc, argv);
    if (chunk > batch)
        lesson::bad_input("--chunk=" + std::to_string(chunk) + " is larger than --batch=" + std::to_string(batch) +
                          "; allowed: 1 <= chunk <= batch");
    if (chunk * n * n > INT32_MAX)
        lesson::bad_input("--chunk=" + std::to_string(chunk) + " x --n=" + std::to_string(n) +
                          "^2 elements passes 2^31 - 1; "
                          "cufftPlanMany takes int sizes: allowed chunk <= " +
                          std::to_string(INT32_MAX / (n * n)));

    Slots slots;
    slots.n = n, slots.batch = batch, slots.chunk = chunk, slots.streams = streams;
    const size_t N = static_cast<size_t>(n), img_elems = N * N, img_bytes = img_elems * sizeof(cuComplex);
    slots.img_elems = img_elems, slots.img_bytes = img_bytes;
    slots.plan = lesson::plan_chunks(batch, chunk);
    const int64_t nfull = std::min<int64_t>(full_checks, slots.plan.count);
    // Pinned input and output batches, T and F*T, and while an image is checked in full its
    // reference and the CGEMM's split operand (two n x n double complex matrices: an upper bound).
    lesson::require_host_memory(2 * batch * img_bytes + 3 * img_bytes + 2 * img_elems * sizeof(verify::cplx), "pinned",
                                "--batch=" + std::to_string(batch) + " --n=" + std::to_string(n));

    // ---- T, with a 1/sqrt(n) scale that keeps |T x| about |x|.
    lesson::HostTimer gen_timer;
    std::vector<cuComplex> h_t(img_elems);
    const size_t img_floats = 2 * img_elems;  // every value a pure function of (seed, index)
    verify::fill_uniform(reinterpret_cast<float*>(h_t.data()), 2 * img_elems, opt.seed + 1);
    const float t_scale = 1.0f / std::sqrt(static_cast<float>(n));
    for (auto& v : h_t) v = make_cuComplex(v.x * t_scale, v.y * t_scale);
    double generate_ms = gen_timer.ms();

    cudaDeviceProp prop = lesson::pick_device(opt.device);
    // Per slot: input chunk, output chunk, (at most) a chunk-sized FFT work area, a cuBLAS workspace; plus T and a tail plan.
    lesson::require_device_memory((streams + 1) * (3 * chunk * img_bytes + (size_t(32) << 20)) + img_bytes,
                                  "--chunk=" + std::to_string(chunk) + " --streams=" + std::to_string(streams) +
                                      " --n=" + std::to_string(n));

    lesson::Report report("10_cublas_cufft_pipeline");
    report.device(prop);
    report.config_from(cli);
    report.config("layout", "row-major; Y = T*X asked of column-major cuBLAS as Y^T = X^T * T^T");

    // ---- Host data, generated and staged in pinned memory BEFORE anything is timed. The batch is
    // one random stream: image b is its values [b * img_floats, (b + 1) * img_floats).
    gen_timer.reset();
    CUDA_CHECK(cudaMallocHost(&slots.h_in, batch * img_bytes));
    CUDA_CHECK(cudaMallocHost(&slots.h_out, batch * img_bytes));
    verify::fill_uniform(reinterpret_cast<float*>(slots.h_in), batch * img_floats, opt.seed);
    generate_ms += gen_timer.ms();

    // ---- Device buffers, streams, plans and the cuBLAS handle: T once, one slot per stream (slots.cuh).
    slots.create(h_t.data());

    // Sequential first (one stream: copy, compute, copy, no overlap), then k streams with the
    // library calls free to overlap, then the real pipeline, whose output (after poisoning the
    // host copy) is what gets verified.
    const int rep = static_cast<int>(opt.repeat);
    Times t;
    // The PCIe bound: bursts of chunk-sized copies, best of several trials, measured now from and
    // to the batch's own pinned pages (h_out is poisoned before the pipeline that is verified).
    t.link = lesson::measure_pinned_link_gbps(chunk * img_bytes,
                                              {slots.h_in, slots.h_out, batch * img_bytes, slots.d_x[0], slots.d_y[0]});
    t.seq_ms = time_pipeline(slots, 1, false, rep);
    t.free_ms = time_pipeline(slots, streams, false, rep);
    std::memset(slots.h_out, 0xFF, batch * img_bytes);
    t.pipe_ms = time_pipeline(slots, streams, true, rep);
    CUDA_CHECK(cudaDeviceSynchronize());

    // ---- Per-stage GPU time, one full chunk on slot 0 (its buffers were written by the runs above),
    // and the compute bound.
    t.gemm_ms = lesson::time_median_ms(
        rep, [&] { slots.transform(0, chunk); }, slots.stream[0]);
    t.fft_ms = lesson::time_median_ms(
        rep, [&] { slots.transform_fft(0, chunk); }, slots.stream[0]);
    t.compute_ms = lesson::time_median_ms(
        rep, [&] { slots.compute_only(); }, slots.stream[0]);

    // ---- Verify (host side; the GPU is done): checks.h.
    lesson::HostTimer verify_timer;
    check_batch(report, reinterpret_cast<const float*>(h_t.data()), reinterpret_cast<const float*>(slots.h_in),
                reinterpret_cast<float*>(slots.h_out), n, batch, slots.plan, nfull, opt);
    t.generate_ms = generate_ms;
    t.verify_ms = verify_timer.ms();

    // ---- Report: the stages, then the pipeline against the bounds measured above (summary.cuh).
    report_pipeline(report, prop, cli, n, batch, chunk, streams, img_bytes, t);

    // ---- Free everything.
    slots.destroy();
    CUDA_CHECK(cudaFreeHost(slots.h_in));
    CUDA_CHECK(cudaFreeHost(slots.h_out));
    return report.finish(opt.json);
}
