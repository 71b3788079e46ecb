// Lesson 22 of the course (several GPUs), part 1: the compute split. Lesson 09's strided-batched
// SGEMM, the batch cut into contiguous ranges, one host thread per GPU, each with its own stream,
// cuBLAS handle and device buffers, all reading and writing one portable pinned host batch; timed
// on 1, 2, ..., all GPUs. Next: part 2, peer to peer (part_peer.cuh).
// Run: ./build/bin/multi_gpu --part=1   (README.md is the handout)
#pragma once
#include <cublas_v2.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "common/check.h"
#include "common/gemm.h"
#include "common/memory.h"
#include "common/report.h"
#include "common/timer.h"
#include "verify/compare.h"
#include "verify/multi_gpu.h"
#include "verify/parallel.h"
#include "verify/random.h"

#include "options.cuh"

// Runs fn(g) for g = 0..k-1, one host thread each, and returns the host-clock time until the last
// one returned. Why one thread per GPU: the current device is per host thread (each thread sets it
// once), and a call that blocks (cudaStreamSynchronize, cudaMalloc, cublasCreate) stalls only its
// own GPU; one thread looping over the GPUs serializes them at every such call.
template <class Fn>
static double on_each_gpu(int k, Fn fn) {
    lesson::HostTimer t;
    std::vector<std::thread> threads;
    for (int g = 0; g < k; ++g) threads.emplace_back(fn, g);
    for (std::thread& th : threads) th.join();
    return t.ms();
}

// What one GPU owns for the split: a stream, a cuBLAS handle (handles belong to the device that
// was current when they were created) and buffers for `capacity` products.
struct SplitGpu {
    int device = 0;
    uint64_t capacity = 0;
    cudaStream_t stream{};
    cublasHandle_t handle{};
    float *d_A = nullptr, *d_B = nullptr, *d_C = nullptr;
};

// lesson::sgemm_strided_batched_row_major (common/gemm.h): `count` row-major n x n products
// C_i = A_i * B_i, stride n*n, B first, as lesson 09 writes it out.

static void setup_split_gpu(SplitGpu& g, int n) {
    CUDA_CHECK(cudaSetDevice(g.device));  // everything below belongs to this GPU
    const size_t bytes = g.capacity * size_t(n) * n * sizeof(float);
    CUDA_CHECK(cudaStreamCreateWithFlags(&g.stream, cudaStreamNonBlocking));
    CUBLAS_CHECK(cublasCreate(&g.handle));
    CUBLAS_CHECK(cublasSetStream(g.handle, g.stream));
    CUDA_CHECK(cudaMalloc(&g.d_A, bytes));
    CUDA_CHECK(cudaMalloc(&g.d_B, bytes));
    CUDA_CHECK(cudaMalloc(&g.d_C, bytes));
    CUDA_CHECK(cudaMemsetAsync(g.d_A, 0, bytes, g.stream));
    CUDA_CHECK(cudaMemsetAsync(g.d_B, 0, bytes, g.stream));
    lesson::sgemm_strided_batched_row_major(g.handle, n, g.d_A, g.d_B, g.d_C,
                                            1);  // warm-up: cuBLAS loads its kernels now
    CUDA_CHECK(cudaStreamSynchronize(g.stream));
}

static void free_split_gpu(SplitGpu& g) {
    CUDA_CHECK(cudaSetDevice(g.device));
    CUBLAS_CHECK(cublasDestroy(g.handle));
    CUDA_CHECK(cudaFree(g.d_A));
    CUDA_CHECK(cudaFree(g.d_B));
    CUDA_CHECK(cudaFree(g.d_C));
    CUDA_CHECK(cudaStreamDestroy(g.stream));
}

// One GPU's share, on its own host thread: its products in (pinned, so the copies are DMA),
// multiplied, and out again into the same pinned batch, at the range's offset.
static void run_share(SplitGpu& g, int n, verify::Range r, const float* h_A, const float* h_B, float* h_C) {
    // EXERCISE 1 BEGIN: on GPU g.device: copy products [r.first, r.first + r.count) of A and B in, multiply, copy C out
    // HINT: the device is per host thread: cudaSetDevice first; everything then goes on g.stream (g.handle's stream)
    // HINT: product p starts at p * n * n floats; a share of a large batch passes 2^31 bytes (size_t, not int)
    // HINT: poison g.d_C before the GEMM, and wait for the stream before returning (the caller reads h_C)
    CUDA_CHECK(cudaSetDevice(g.device));
    const size_t nn = size_t(n) * n, bytes = r.count * nn * sizeof(float);
    CUDA_CHECK(cudaMemcpyAsync(g.d_A, h_A + r.first * nn, bytes, cudaMemcpyHostToDevice, g.stream));
    CUDA_CHECK(cudaMemcpyAsync(g.d_B, h_B + r.first * nn, bytes, cudaMemcpyHostToDevice, g.stream));
    CUDA_CHECK(cudaMemsetAsync(g.d_C, 0xFF, bytes, g.stream));  // NaN poison: a product never computed fails
    lesson::sgemm_strided_batched_row_major(g.handle, n, g.d_A, g.d_B, g.d_C, int(r.count));
    CUDA_CHECK(cudaMemcpyAsync(h_C + r.first * nn, g.d_C, bytes, cudaMemcpyDeviceToHost, g.stream));
    CUDA_CHECK(cudaStreamSynchronize(g.stream));
    // EXERCISE 1 END
}

// The GEMMs alone (inputs resident), `passes` times back to back: the compute-heavy part whose
// scaling the lesson grades.
static void gemm_passes(SplitGpu& g, int n, verify::Range r, int passes) {
    CUDA_CHECK(cudaSetDevice(g.device));
    for (int p = 0; p < passes; ++p)
        lesson::sgemm_strided_batched_row_major(g.handle, n, g.d_A, g.d_B, g.d_C, int(r.count));
    CUDA_CHECK(cudaStreamSynchronize(g.stream));
}

// The batch computed on `on` GPUs, in h_C, against the references: the sum of every product, and
// the sampled products element by element.
static void check_split(lesson::Report& report, const float* h_C, const verify::BatchReference& ref, int n, uint64_t B,
                        const std::string& on, int G, int64_t samples) {
    const uint64_t nn = uint64_t(n) * n;
    const std::vector<double> got = verify::product_sums(h_C, B, nn);
    report.check(verify::compare(got.data(), ref.sums.data(), B, 1e-4,
                                 "split over " + on + ": sum of each of the " + std::to_string(B) +
                                     " products vs sum_k colsum(A)*rowsum(B)",
                                 double(n) * std::sqrt(double(n)) / 3.0));
    verify::Comparer products(1e-4, std::sqrt(double(n)) / 3.0);
    for (size_t i = 0; i < ref.picked.size(); ++i)
        products.add(h_C + ref.picked[i] * nn, ref.products.data() + i * nn, nn, ref.picked[i] * nn);
    report.check(products.result("split over " + on + ": " + std::to_string(ref.picked.size()) + " sampled products (" +
                                 std::to_string(samples) + " in each GPU's range of the " + std::to_string(G) +
                                 "-GPU split), every element"));
}

struct SplitResult {
    std::vector<double> gemm_ms;  // [k-1]: one pass of the whole batch's GEMMs on k GPUs
};

static SplitResult part_split(const Options& o, const std::vector<int>& dev, lesson::Report& report) {
    const int G = int(dev.size()), n = int(o.n);
    const uint64_t B = uint64_t(o.batch), nn = uint64_t(n) * n, batch_bytes = B * nn * sizeof(float);
    const double flops = 2.0 * double(n) * n * n * double(B);
    std::printf("part 1: %llu products of %d x %d (cublasSgemmStridedBatched) split over 1 to %d GPU(s)\n",
                (unsigned long long)B, n, n, G);

    // The batch, once, in pinned host memory. cudaHostAllocPortable: pinned for every GPU, not only
    // for the one current now (implied with unified addressing; written out because it is the point).
    float *h_A, *h_B, *h_C;
    CUDA_CHECK(cudaHostAlloc(&h_A, batch_bytes, cudaHostAllocPortable));
    CUDA_CHECK(cudaHostAlloc(&h_B, batch_bytes, cudaHostAllocPortable));
    CUDA_CHECK(cudaHostAlloc(&h_C, batch_bytes, cudaHostAllocPortable));
    verify::fill_uniform(h_A, B * nn, o.common.seed);
    verify::fill_uniform(h_B, B * nn, o.common.seed + 1);

    // References: the sum of every product (O(n^2) each), and --samples whole products in each GPU's
    // range of the all-GPU split, in double; every k checks all of them.
    lesson::HostTimer cpu;
    const verify::BatchReference ref = verify::batch_reference(
        h_A, h_B, n, B, verify::sample_per_range(B, uint64_t(G), uint64_t(o.samples), uint64_t(o.common.seed)));
    report.cpu_reference_ms(cpu.ms(), verify::host_threads());

    // GPU g's buffers hold the largest range it gets for any k = g+1 .. G.
    std::vector<SplitGpu> gpu(G);
    for (int g = 0; g < G; ++g) {
        gpu[g].device = dev[g];
        for (int k = g + 1; k <= G; ++k)
            gpu[g].capacity = std::max(gpu[g].capacity, verify::split_range(B, uint64_t(k), uint64_t(g)).count);
        CUDA_CHECK(cudaSetDevice(dev[g]));
        lesson::require_device_memory(3 * gpu[g].capacity * nn * sizeof(float) + (size_t(64) << 20),
                                      "--n/--batch on GPU " + std::to_string(dev[g]));
    }
    on_each_gpu(G, [&](int g) { setup_split_gpu(gpu[g], n); });

    SplitResult res;
    const int R = int(o.common.repeat), kPasses = 3;
    for (int k = 1; k <= G; ++k) {
        // One pass, verified: copies in, GEMMs, copies out, one thread per GPU.
        const double e2e_ms = on_each_gpu(
            k, [&](int g) { run_share(gpu[g], n, verify::split_range(B, uint64_t(k), uint64_t(g)), h_A, h_B, h_C); });
        if (o.common.inject_fault && k == 1) verify::inject_fault(h_C + ref.picked[0] * nn, nn, o.common.seed);
        const std::string on = std::to_string(k) + (k == 1 ? " GPU" : " GPUs");
        check_split(report, h_C, ref, n, B, on, G, o.samples);

        // Timed: the GEMMs alone, kPasses back to back per thread start; median of --repeat samples.
        std::vector<double> ms;
        for (int s = 0; s < R; ++s)
            ms.push_back(on_each_gpu(k,
                                     [&](int g) {
                                         gemm_passes(gpu[g], n, verify::split_range(B, uint64_t(k), uint64_t(g)),
                                                     kPasses);
                                     }) /
                         kPasses);
        res.gemm_ms.push_back(lesson::median(ms));
        const double t = res.gemm_ms.back(), rate = flops / (t * 1e9);
        if (k == 1) report.variant("GEMMs of the batch, 1 GPU", t, rate, "TFLOP/s");
        else
            report.variant_yardstick("GEMMs of the batch, " + on, t, rate, "TFLOP/s",
                                     k * flops / (res.gemm_ms[0] * 1e9), std::to_string(k) + " x the 1-GPU rate");
        report.metric("copy in + GEMMs + copy out, " + on + " (one pass, host clock)", e2e_ms, "ms");
        std::printf("  %d GPU(s): GEMMs %.3f ms (%.1f TFLOP/s), with the copies %.3f ms\n", k, t, rate, e2e_ms);
    }
    report.work("cublasSgemmStridedBatched, whole batch, 1 GPU", flops, 3.0 * double(batch_bytes), res.gemm_ms[0]);
    for (int k = 2; k <= G; ++k)
        report.metric("GEMM scaling, " + std::to_string(k) + " GPUs over 1", res.gemm_ms[0] / res.gemm_ms[k - 1], "x");

    for (SplitGpu& g : gpu) free_split_gpu(g);
    CUDA_CHECK(cudaFreeHost(h_A));
    CUDA_CHECK(cudaFreeHost(h_B));
    CUDA_CHECK(cudaFreeHost(h_C));
    return res;
}
