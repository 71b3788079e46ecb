// Lesson 10 of the course (00-23): cuBLAS + cuFFT pipeline.
// Before: lesson 09 (09_cublas_strided_batched). Next: lesson 11 (11_hybrid_fft_filter).
// Run: ./build/bin/cublas_cufft_pipeline [--quick]   (--help lists every flag; README.md is the handout)
//
// CuBLAS + cuFFT pipeline: a batch of complex images, each
// multiplied by one fixed complex matrix (cublasCgemmStridedBatched, stride 0
// for the shared matrix), then 2D-transformed (cufftPlanMany, C2C), in chunks
// spread over streams so that host transfers overlap the library calls.
//
// Layout: every matrix is n x n, complex, ROW-major (element (r, c) at r*n + c),
// as C code and cuFFT lay them out. cuBLAS is column-major; see the GEMM call
// below for how Y = T * X is asked of it. See README.md.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <thread>
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
#include "verify/compare.h"
#include "verify/fft.h"
#include "verify/parallel.h"
#include "verify/random.h"

using verify::cplx;

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

    const size_t N = static_cast<size_t>(n), img_elems = N * N, img_bytes = img_elems * sizeof(cuComplex);
    const lesson::ChunkPlan plan = lesson::plan_chunks(batch, chunk);
    const int64_t nfull = std::min<int64_t>(full_checks, plan.count);
    // The references of the first `early` fully checked images are made ahead and kept until the GPU's
    // output is there: all of them, or one per host core where there are more.
    const int64_t early = std::max<int64_t>(1, std::min<int64_t>(nfull, std::thread::hardware_concurrency()));
    // Pinned input and output batches, T and F*T, and per kept reference an input image and two n x n double
    // complex matrices (the reference, and the CGEMM's split operand while it is made: an upper bound).
    lesson::require_host_memory(2 * batch * img_bytes + 3 * img_bytes +
                                    early * (img_bytes + 2 * img_elems * sizeof(cplx)),
                                "pinned", "--batch=" + std::to_string(batch) + " --n=" + std::to_string(n));

    // ---- T, and the CPU references of the images checked in full (see "Verify" below). They need no
    // GPU and take about 2 s at the default size: they run on a host thread of their own while the
    // CUDA context starts and the GPU is set up, and are joined before anything is timed. Each checked
    // image is made again from its global index (the same floats as its place in h_in), so the host
    // thread shares no buffer with the GPU's copies.
    lesson::HostTimer gen_timer;
    std::vector<cuComplex> h_t(img_elems);
    const size_t img_floats = 2 * img_elems;  // every value a pure function of (seed, index): images fill in parallel
    verify::fill_uniform(reinterpret_cast<float*>(h_t.data()), 2 * img_elems, opt.seed + 1);
    const float t_scale = 1.0f / std::sqrt(static_cast<float>(n));  // keeps |T x| about |x|
    for (auto& v : h_t) v = make_cuComplex(v.x * t_scale, v.y * t_scale);
    double generate_ms = gen_timer.ms();
    const float* t_f = reinterpret_cast<const float*>(h_t.data());
    auto image_of_chunk = [&](int64_t i) {  // the random image checked in full for the i-th sampled chunk
        const lesson::Chunk ch = plan.at(static_cast<uint64_t>(i * static_cast<int64_t>(plan.count) / nfull));
        return static_cast<int64_t>(ch.first + verify::splitmix64(opt.seed + 77 * i) % ch.count);
    };
    auto full_reference = [&](int64_t img) {       // double: Y = T X, then the 2D FFT of Y
        verify::host_vector<float> x(img_floats);  // image img, as generated into h_in below
        verify::fill_uniform(x.data(), img_floats, opt.seed, -1.f, 1.f, img * img_floats);
        std::vector<cplx> ref(img_elems);
        verify::complex_matmul_reference(t_f, x.data(), ref.data(), n, n, n);
        verify::fft2d(ref.data(), N, N, verify::kForward);
        return ref;
    };
    // The first `early` checked images, one after another, each on all host cores (the first one's time
    // is the reference time). On the H100's host all 16 took 3.0 s so (2.4 s on the H200's); with the
    // first one alone, then one image per host thread, they had taken 2.1-5.1 s. FT = F * T (every
    // column of T transformed) serves the row checks.
    std::vector<std::vector<cplx>> full_refs(early);
    std::vector<cplx> ft;
    double cpu_ms = 0, early_ms = 0;
    std::thread reference_thread([&] {
        lesson::HostTimer t;
        full_refs[0] = full_reference(image_of_chunk(0));
        cpu_ms = t.ms();
        for (int64_t i = 1; i < early; ++i) full_refs[i] = full_reference(image_of_chunk(i));
        ft = verify::to_cplx(t_f, img_elems);
        verify::fft_columns(ft.data(), N, N, verify::kForward);
        early_ms = t.ms();
    });

    cudaDeviceProp prop = lesson::pick_device(opt.device);
    // Per slot: input chunk, output chunk, (at most) a chunk-sized FFT work area, a cuBLAS workspace; plus T and a tail plan.
    lesson::require_device_memory((streams + 1) * (3 * chunk * img_bytes + (size_t(32) << 20)) + img_bytes,
                                  "--chunk=" + std::to_string(chunk) + " --streams=" + std::to_string(streams) +
                                      " --n=" + std::to_string(n));

    lesson::Report report("10_cublas_cufft_pipeline");
    report.device(prop.name, prop.major, prop.minor, prop.multiProcessorCount, prop.totalGlobalMem / 1e9);
    report.config("n", n);
    report.config("batch", batch);
    report.config("chunk", chunk);
    report.config("streams", streams);
    report.config("layout", "row-major; Y = T*X asked of column-major cuBLAS as Y^T = X^T * T^T");
    report.config("repeat", opt.repeat);
    report.config("seed", opt.seed);

    // ---- Host data, generated and staged in pinned memory BEFORE anything is timed.
    gen_timer.reset();
    cuComplex *h_in = nullptr, *h_out = nullptr;
    CUDA_CHECK(cudaMallocHost(&h_in, batch * img_bytes));
    CUDA_CHECK(cudaMallocHost(&h_out, batch * img_bytes));
    verify::parallel_for(batch, [&](int64_t b) {
        verify::fill_uniform(reinterpret_cast<float*>(h_in + b * img_elems), img_floats, opt.seed, -1.f, 1.f,
                             b * img_floats);
    });
    generate_ms += gen_timer.ms();

    // ---- Device buffers: T once, and one slot (input chunk, output chunk) per stream.
    cuComplex* d_t = nullptr;
    CUDA_CHECK(cudaMalloc(&d_t, img_bytes));
    CUDA_CHECK(cudaMemcpy(d_t, h_t.data(), img_bytes, cudaMemcpyHostToDevice));
    std::vector<cuComplex*> d_x(streams), d_y(streams);
    std::vector<void*> d_ws(streams);  // a cuBLAS workspace per stream (32 MiB, the size cuBLAS suggests for Hopper)
    const size_t ws_bytes = size_t(32) << 20;
    std::vector<cudaStream_t> stream(streams);
    std::vector<cudaEvent_t> done(streams);
    std::vector<cufftHandle> fft(
        streams);  // one plan per stream: a plan's work area must not be shared by two streams at once
    const int dims[2] = {static_cast<int>(n), static_cast<int>(n)};
    const int dist = static_cast<int>(img_elems);
    for (int64_t s = 0; s < streams; ++s) {
        CUDA_CHECK(cudaMalloc(&d_x[s], chunk * img_bytes));
        CUDA_CHECK(cudaMalloc(&d_y[s], chunk * img_bytes));
        CUDA_CHECK(cudaMalloc(&d_ws[s], ws_bytes));
        CUDA_CHECK(cudaMemset(d_ws[s], 0, ws_bytes));
        CUDA_CHECK(cudaMemset(d_y[s], 0xFF, chunk * img_bytes));  // poison: NaN
        CUDA_CHECK(cudaStreamCreateWithFlags(&stream[s], cudaStreamNonBlocking));
        CUDA_CHECK(cudaEventCreateWithFlags(&done[s], cudaEventDisableTiming));
        // rank 2, n x n, contiguous images `dist` elements apart, `chunk` of them per call.
        CUFFT_CHECK(cufftPlanMany(&fft[s], 2, const_cast<int*>(dims), nullptr, 1, dist, nullptr, 1, dist, CUFFT_C2C,
                                  static_cast<int>(chunk)));
    }
    const int64_t tail = batch % chunk;  // the last chunk may be shorter: it gets a plan of its own
    cufftHandle fft_tail = 0;
    if (tail)
        CUFFT_CHECK(cufftPlanMany(&fft_tail, 2, const_cast<int*>(dims), nullptr, 1, dist, nullptr, 1, dist, CUFFT_C2C,
                                  static_cast<int>(tail)));
    cublasHandle_t blas;
    CUBLAS_CHECK(cublasCreate(&blas));
    std::vector<cudaEvent_t> computed(streams);  // "this stream's last GEMM + FFT are done"
    for (auto& e : computed) CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    cudaEvent_t fork;
    CUDA_CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));

    // Y = T * X for `count` images of one slot, on stream s. cuBLAS reads our row-major X as the
    // column-major matrix X^T (and T as T^T), and writes its column-major C into our row-major Y.
    // So ask it for C = A * B with A = X, B = T:  C = X^T * T^T = (T * X)^T, i.e. Y in row-major.
    // strideB = 0: every image of the batch uses the same T.
    const cuComplex one = make_cuComplex(1.f, 0.f), zero = make_cuComplex(0.f, 0.f);
    // One handle, several streams (cuBLAS documentation, lesson 09): cublasSetStream also resets the
    // handle to its default workspace pool, from which cuBLAS picks scratch memory for routines
    // running in parallel streams, and results may then differ bit for bit from run to run. Each
    // stream gets a workspace of its own, set right after cublasSetStream.
    auto transform = [&](int64_t s, int64_t count) {
        CUBLAS_CHECK(cublasSetStream(blas, stream[s]));
        CUBLAS_CHECK(cublasSetWorkspace(blas, d_ws[s], ws_bytes));
        CUBLAS_CHECK(cublasCgemmStridedBatched(blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)n, (int)n, (int)n, &one, d_x[s],
                                               (int)n, (long long)img_elems, d_t, (int)n, 0LL, &zero, d_y[s], (int)n,
                                               (long long)img_elems, (int)count));
    };
    // 2D FFT of every image of one slot, in place, on stream s.
    auto transform_fft = [&](int64_t s, int64_t count) {
        cufftHandle p = (count == chunk) ? fft[s] : fft_tail;
        CUFFT_CHECK(cufftSetStream(p, stream[s]));
        CUFFT_CHECK(cufftExecC2C(p, d_y[s], d_y[s], CUFFT_FORWARD));
    };

    // ---- The pipeline: chunk c goes to stream c % k. Within a stream the work is ordered, so a
    // slot is reused only after its previous chunk's D2H finished. Stream 0 forks the others and
    // joins them at the end, so events on stream 0 time the whole batch. in_order: chunk c's GEMM
    // waits for chunk c-1's FFT, so the chunks take turns on the SMs (first come, first done)
    // instead of the next GEMM filling the SMs while this chunk's FFT waits behind it (README).
    auto pipeline = [&](int64_t k, bool in_order) {
        CUDA_CHECK(cudaEventRecord(fork, stream[0]));
        for (int64_t s = 1; s < k; ++s) CUDA_CHECK(cudaStreamWaitEvent(stream[s], fork, 0));
        // EXERCISE 1 BEGIN: issue every chunk on stream c % k: copy in, GEMM, FFT, copy out (in_order: wait for chunk c-1)
        // HINT: plan.at(c) gives chunk c's first image and count (the last chunk may be shorter)
        // HINT: record computed[s] after the FFT; with in_order, chunk c > 0 first waits for computed[(c - 1) % k]
        for (uint64_t c = 0; c < plan.count; ++c) {
            const lesson::Chunk ch = plan.at(c);
            const int64_t s = static_cast<int64_t>(c % k);
            CUDA_CHECK(cudaMemcpyAsync(d_x[s], h_in + ch.first * img_elems, ch.count * img_bytes,
                                       cudaMemcpyHostToDevice, stream[s]));
            if (in_order && c > 0) CUDA_CHECK(cudaStreamWaitEvent(stream[s], computed[(c - 1) % k], 0));
            transform(s, ch.count);
            transform_fft(s, ch.count);
            CUDA_CHECK(cudaEventRecord(computed[s], stream[s]));
            CUDA_CHECK(cudaMemcpyAsync(h_out + ch.first * img_elems, d_y[s], ch.count * img_bytes,
                                       cudaMemcpyDeviceToHost, stream[s]));
        }
        // EXERCISE 1 END
        for (int64_t s = 1; s < k; ++s) {
            CUDA_CHECK(cudaEventRecord(done[s], stream[s]));
            CUDA_CHECK(cudaStreamWaitEvent(stream[0], done[s], 0));
        }
    };

    // Sequential first (one stream: copy, compute, copy, no overlap), then k streams with the
    // library calls free to overlap, then the real pipeline, whose output (after poisoning the
    // host copy) is what gets verified. The host is quiet while anything is timed: the reference
    // thread is done first.
    reference_thread.join();
    const int rep = static_cast<int>(opt.repeat);
    // A pipeline variant is timed after two warm-up runs (the first one timed, to choose the sample
    // count), and long runs take fewer samples (lesson::capped_samples): at the default size the
    // 1-stream run (64 ms a run) takes the median of 3, the 3-stream runs (25-30 ms) the median of 7.
    auto time_pipeline = [&](int64_t k, bool in_order) {
        lesson::EventTimer first;
        first.start(stream[0]);
        pipeline(k, in_order);
        const int samples = int(lesson::capped_samples(rep, first.stop(stream[0])));
        return lesson::time_median_ms(
            samples, [&] { pipeline(k, in_order); }, stream[0], 1);
    };
    const double seq_ms = time_pipeline(1, false);
    const double free_ms = time_pipeline(streams, false);
    std::memset(h_out, 0xFF, batch * img_bytes);
    const double pipe_ms = time_pipeline(streams, true);
    CUDA_CHECK(cudaDeviceSynchronize());

    // ---- Per-stage GPU time, one full chunk on slot 0 (its buffers were written by the runs above).
    const double gemm_ms = lesson::time_median_ms(
        rep, [&] { transform(0, chunk); }, stream[0]);
    const double fft_ms = lesson::time_median_ms(
        rep, [&] { transform_fft(0, chunk); }, stream[0]);
    // ---- The compute bound: every chunk's GEMM + FFT over the same streams, free to overlap, no
    // copies. No pipeline computes its batch faster than this (its slot data is left as it is).
    const double compute_ms = lesson::time_median_ms(
        rep,
        [&] {
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
        },
        stream[0]);

    // ---- Verify (host side; the GPU is done). The full CPU reference is O(n^3) per image, so:
    //  (1) whole images in full: one random image from each of `nfull` chunks spread over the batch;
    //  (2) every image: row 0 and one random row of its spectrum, from the identity
    //      row u of FFT2(T X) = FFT1( row u of (F T) * X ), F the DFT matrix: O(n^2) per row;
    //  (3) every image: the sum of its spectrum = n^2 * (T X)[0][0] (NaN poison anywhere fails it).
    //  The references of (1) and F*T were made on the reference thread before the GPU ran.
    if (opt.inject_fault)  // into an image that is checked in full, so the check must see it
        verify::inject_fault(reinterpret_cast<float*>(h_out + image_of_chunk(0) * img_elems), img_floats, opt.seed);
    auto gpu_image = [&](int64_t img) { return reinterpret_cast<const float*>(h_out + img * img_elems); };
    lesson::HostTimer verify_timer;
    // (1) Each checked image against its reference, in sample order; the first reference's RMS is the
    // error scale for all. Samples past the first `early` (more than host cores) get theirs now,
    // `early` at a time, one after another.
    verify::Comparer full(1e-4, verify::rms(reinterpret_cast<const double*>(full_refs[0].data()), img_floats));
    for (int64_t first = 0; first < nfull; first += early) {
        const int64_t count = std::min(early, nfull - first);
        if (first > 0)
            for (int64_t i = 0; i < count; ++i) full_refs[i] = full_reference(image_of_chunk(first + i));
        for (int64_t i = 0; i < count; ++i) {
            const int64_t img = image_of_chunk(first + i);
            full.add(gpu_image(img), reinterpret_cast<const double*>(full_refs[i].data()), img_floats,
                     img * img_floats);
        }
    }
    // (2) and (3): two rows and one sum per image, from FT = F * T.
    const verify::Fft1d row_fft(N);
    std::vector<cplx> row_ref(2 * batch * N), sum_ref(batch);
    std::vector<cuComplex> row_gpu(2 * batch * N), sum_gpu(batch);
    verify::parallel_for(batch, [&](int64_t b) {
        const float* x = reinterpret_cast<const float*>(h_in + b * img_elems);
        const cuComplex* z = h_out + b * img_elems;
        const int64_t rows[2] = {0, 1 + static_cast<int64_t>(verify::splitmix64(opt.seed * 31 + b) % (n - 1))};
        for (int r = 0; r < 2; ++r) {
            cplx* ref = row_ref.data() + (2 * b + r) * N;
            verify::complex_vecmat_reference(ft.data() + rows[r] * N, x, ref, n, n);
            row_fft.run(ref, verify::kForward);
            std::copy(z + rows[r] * N, z + (rows[r] + 1) * N, row_gpu.begin() + (2 * b + r) * N);
        }
        cplx y00 = 0.0, zsum = 0.0;
        for (size_t k = 0; k < N; ++k) y00 += cplx(t_f[2 * k], t_f[2 * k + 1]) * cplx(x[2 * k * N], x[2 * k * N + 1]);
        for (size_t i = 0; i < img_elems; ++i) zsum += cplx(z[i].x, z[i].y);
        sum_ref[b] = y00 * static_cast<double>(img_elems);
        sum_gpu[b] = make_cuComplex(static_cast<float>(zsum.real()), static_cast<float>(zsum.imag()));
    });
    const double verify_ms = early_ms + verify_timer.ms();  // the reference thread's time included
    char what[200];
    std::snprintf(what, sizeof what,
                  "%lld whole images in full (one random image in each of %lld chunks) vs double CGEMM + 2D FFT",
                  (long long)nfull, (long long)nfull);
    report.check(full.result(what));
    report.check(verify::compare(reinterpret_cast<const float*>(row_gpu.data()),
                                 reinterpret_cast<const double*>(row_ref.data()), row_gpu.size() * 2, 1e-4,
                                 "every image: spectrum row 0 and one random row, row u = FFT(row u of F*T times X)"));
    report.check(verify::compare(reinterpret_cast<const float*>(sum_gpu.data()),
                                 reinterpret_cast<const double*>(sum_ref.data()), sum_gpu.size() * 2, 1e-4,
                                 "every image: sum of its spectrum = n^2 (T X)[0][0]"));
    report.cpu_reference_ms(cpu_ms, verify::host_threads());

    // ---- Report: the stages, then the pipeline against the PCIe bound measured now.
    const double batch_bytes = static_cast<double>(batch * img_bytes),
                 chunk_bytes = static_cast<double>(chunk * img_bytes);
    // The PCIe bound: bursts of chunk-sized copies, best of several trials, measured now.
    const lesson::LinkRates link = lesson::measure_link_gbps(static_cast<size_t>(chunk_bytes), true);
    const double link_ms = lesson::link_bound_ms(batch_bytes, batch_bytes, link);
    // The pipeline's bound: the copies cannot beat the link, the compute cannot beat compute_ms.
    const double bound_ms = std::max(link_ms, compute_ms);
    const double bound_gbps = 2.0 * batch_bytes / (bound_ms * 1e6);
    const char* bound_name = link_ms >= compute_ms ? "PCIe bound" : "GPU compute bound";
    const double d2d = lesson::measure_d2d_gbps(prop);
    report.bound("H2D pinned, burst of chunk copies", link.h2d, "GB/s");
    report.bound("D2H pinned, burst of chunk copies", link.d2h, "GB/s");
    report.bound("H2D + D2H at once, pinned", link.both, "GB/s");
    report.bound(std::string("pipeline bound: max(PCIe, GPU compute) = ") + bound_name, bound_gbps, "GB/s");
    report.yardstick("device-to-device cudaMemcpy", d2d, "GB/s");
    report.timing(std::string(lesson::kTimingMethod) + "; two warm-up runs before a pipeline's samples");
    const double flops = 8.0 * n * n * n * chunk;  // a complex multiply-add is 8 real flops
    report.variant("CgemmStridedBatched, one chunk", gemm_ms, flops / (gemm_ms * 1e9), "TFLOP/s");
    report.variant_yardstick("cufftExecC2C 2D, one chunk (read + write)", fft_ms, 2.0 * chunk_bytes / (fft_ms * 1e6),
                             "GB/s", d2d, "copy", lesson::l2_note(2.0 * chunk_bytes, prop));
    auto gbps = [&](double ms) { return 2.0 * batch_bytes / (ms * 1e6); };
    const std::string k = std::to_string(streams) + " streams";
    report.variant_bound("pipeline, 1 stream (no overlap)", seq_ms, gbps(seq_ms), "GB/s", bound_gbps, bound_name);
    report.variant_bound("pipeline, " + k + ", calls free to overlap", free_ms, gbps(free_ms), "GB/s", bound_gbps,
                         bound_name);
    report.variant_bound("pipeline, " + k + ", compute in chunk order", pipe_ms, gbps(pipe_ms), "GB/s", bound_gbps,
                         bound_name);
    report.metric("PCIe bound of the batch", link_ms, "ms");
    report.metric("GPU compute bound: all chunks over the streams, no copies", compute_ms, "ms");
    report.metric("pipeline / max(PCIe bound, GPU compute)", bound_ms / pipe_ms, "");
    report.metric("GPU compute per chunk (GEMM + FFT)", gemm_ms + fft_ms, "ms");
    report.metric("transfer per chunk at the both-ways rate", 2.0 * chunk_bytes / (link.both * 1e6), "ms");
    report.metric("speedup over 1 stream", seq_ms / pipe_ms, "x");
    report.metric("host: generate inputs, threads (not timed)", generate_ms, "ms");
    report.metric("host: verify, all checks, threads", verify_ms, "ms");
    report.metric("host: threads", static_cast<double>(verify::host_threads()), "");
    report.note("GEMM flops counted as 8*n^3 per image (a complex multiply-add is 8 real flops)");
    report.note("the CPU reference time is for ONE image (double CGEMM + 2D FFT)");
    char key[128];
    std::snprintf(key, sizeof key, "pipeline, %s %.1f GB/s, n=%lld batch=%lld", k.c_str(), gbps(pipe_ms), (long long)n,
                  (long long)batch);
    report.key_result(key, bound_ms / pipe_ms, bound_name, lesson::Against::Bound);
    report.default_size(cli.at_default_size());
    report.target("pipeline of max(PCIe, GPU compute) bound", bound_ms / pipe_ms, 0.85);

    // ---- Free everything.
    CUBLAS_CHECK(cublasDestroy(blas));
    if (tail) CUFFT_CHECK(cufftDestroy(fft_tail));
    for (int64_t s = 0; s < streams; ++s) {
        CUFFT_CHECK(cufftDestroy(fft[s]));
        CUDA_CHECK(cudaEventDestroy(done[s]));
        CUDA_CHECK(cudaStreamDestroy(stream[s]));
        CUDA_CHECK(cudaFree(d_x[s]));
        CUDA_CHECK(cudaFree(d_y[s]));
        CUDA_CHECK(cudaFree(d_ws[s]));
    }
    for (auto& e : computed) CUDA_CHECK(cudaEventDestroy(e));
    CUDA_CHECK(cudaEventDestroy(fork));
    CUDA_CHECK(cudaFree(d_t));
    CUDA_CHECK(cudaFreeHost(h_in));
    CUDA_CHECK(cudaFreeHost(h_out));
    return report.finish(opt.json);
}
