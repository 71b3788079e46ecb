// Lesson 22 of the course (00-23): several GPUs - the work split over devices, peer to peer, and
// the all-reduce (NCCL, and a ring written by hand).
// Before: lesson 21 (fused attention, one GPU). Next: lesson 23 (23_full_scale, the full-scale run).
// Run: ./build/bin/multi_gpu [--quick]   (--help lists every flag; README.md is the handout)
//      ./build/bin/multi_gpu --part=3    (one part alone: 1 split, 2 peer, 3 all-reduce, 4 one process per GPU)
//
// 1. The compute split: lesson 09's strided-batched SGEMM, the batch cut into contiguous ranges,
//    one host thread per GPU, each with its own stream, cuBLAS handle and device buffers, all
//    reading and writing one portable pinned host batch; timed on 1, 2, ..., all GPUs.
// 2. Peer to peer (2+ GPUs): cudaDeviceCanAccessPeer, cudaDeviceEnablePeerAccess, the peer link
//    measured with cudaMemcpyPeerAsync one way and both ways at once, and a kernel on GPU 0 that
//    reads GPU 1's memory directly against copying it over first.
// 3. All-reduce in one process (2+ GPUs): NCCL with ncclCommInitAll, 4 KiB to 1 GiB, reported as
//    nccl-tests does (algbw, busbw), and a ring all-reduce written with peer copies and an add
//    kernel, checked bit for bit against NCCL and the CPU.
// 4. One process per GPU (2+ GPUs, NCCL): the lesson starts its own ranks (posix_spawn of itself),
//    rank 0 writes the ncclUniqueId to a file the others read (what mpirun or torchrun hand over
//    between machines), each rank calls ncclCommInitRank and runs the same sweep.
// Without NCCL at build time parts 3 (the ring only) and the rest still run; with one GPU only
// part 1 does, and the report says what was skipped. See README.md.
#include <cublas_v2.h>
#ifndef LESSON_HAVE_NCCL
#define LESSON_HAVE_NCCL 0  // CMake sets 1 when it finds NCCL (lessons/22_multi_gpu/CMakeLists.txt)
#endif
#if LESSON_HAVE_NCCL
#include <nccl.h>
#endif
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/ceilings.h"
#include "common/check.h"
#include "common/device.h"
#include "common/flags.h"
#include "common/gemm.h"
#include "common/memory.h"
#include "common/needs.h"
#include "common/report.h"
#include "common/timer.h"
#include "verify/compare.h"
#include "verify/gemm_checksum.h"
#include "verify/matmul.h"
#include "verify/multi_gpu.h"
#include "verify/parallel.h"
#include "verify/random.h"

#include "kernels/multi_gpu.cuh"

extern char** environ;
using multigpu::grid_for;
using multigpu::kThreads;

#if LESSON_HAVE_NCCL
#define NCCL_CHECK(call)                                                                                     \
    do {                                                                                                     \
        ncclResult_t r_ = (call);                                                                            \
        if (r_ != ncclSuccess) lesson::fail_call("NCCL", #call, ncclGetErrorString(r_), __FILE__, __LINE__); \
    } while (0)
#endif

struct Options {
    lesson::CommonOptions common;
    int64_t n = 1024, batch = 96, samples = 1, gpus = 0, p2p_mib = 1024, max_mib = 1024, part = 0;
    int64_t rank = -1, ranks = 0;  // set only in the rank processes that part 4 starts
    std::string id_file;
    // NCCL at run time: built with it, and not under compute-sanitizer (scripts/run_all.sh --sanitize
    // sets LESSON_UNDER_SANITIZER=1): NCCL's start-up probes its kernels with CUDA calls that fail by
    // design, which memcheck counts as errors, and its rank processes take minutes to start there.
    bool use_nccl = LESSON_HAVE_NCCL != 0;
};

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

// ================================================================ 1. the compute split

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
    std::vector<double> sums(B);  // one product per host thread: the same sums as one after another
    verify::parallel_for(
        int64_t(B), [&](int64_t p) { sums[p] = verify::matmul_sum_reference(h_A + p * nn, h_B + p * nn, n, n, n); });
    std::vector<uint64_t> picked;
    std::mt19937_64 rng(uint64_t(o.common.seed) * 7919 + 22);
    for (int g = 0; g < G; ++g) {
        const verify::Range r = verify::split_range(B, uint64_t(G), uint64_t(g));
        std::vector<uint64_t> idx(r.count);
        std::iota(idx.begin(), idx.end(), r.first);
        const uint64_t s = std::min<uint64_t>(uint64_t(o.samples), r.count);
        for (uint64_t i = 0; i < s; ++i) std::swap(idx[i], idx[i + rng() % (r.count - i)]);
        picked.insert(picked.end(), idx.begin(), idx.begin() + int64_t(s));
    }
    std::vector<double> ref(picked.size() * nn);
    for (size_t i = 0; i < picked.size(); ++i)
        verify::matmul_reference(h_A + picked[i] * nn, h_B + picked[i] * nn, ref.data() + i * nn, n, n, n);
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
        if (o.common.inject_fault && k == 1) verify::inject_fault(h_C + picked[0] * nn, nn, o.common.seed);
        const std::string on = std::to_string(k) + (k == 1 ? " GPU" : " GPUs");
        std::vector<double> got(B);  // each product's sum on one host thread, in index order
        verify::parallel_for(int64_t(B), [&](int64_t p) { got[p] = verify::sum_of(h_C + p * nn, nn); });
        report.check(verify::compare(got.data(), sums.data(), B, 1e-4,
                                     "split over " + on + ": sum of each of the " + std::to_string(B) +
                                         " products vs sum_k colsum(A)*rowsum(B)",
                                     double(n) * std::sqrt(double(n)) / 3.0));
        verify::Comparer products(1e-4, std::sqrt(double(n)) / 3.0);
        for (size_t i = 0; i < picked.size(); ++i)
            products.add(h_C + picked[i] * nn, ref.data() + i * nn, nn, picked[i] * nn);
        report.check(products.result("split over " + on + ": " + std::to_string(picked.size()) + " sampled products (" +
                                     std::to_string(o.samples) + " in each GPU's range of the " + std::to_string(G) +
                                     "-GPU split), every element"));

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

// ================================================================ 2. peer to peer

// Turns on peer access wherever the hardware allows it; returns can[i][j]: GPU i may load and
// store GPU j's memory. Access is one way: i -> j is enabled with device i current.
static std::vector<std::vector<int>> enable_peer_access(const std::vector<int>& dev) {
    static std::set<std::pair<int, int>> enabled;  // pairs this process enabled already (parts 2 and 3 both ask)
    const int G = int(dev.size());
    std::vector<std::vector<int>> can(G, std::vector<int>(G, 0));
    for (int i = 0; i < G; ++i) {
        CUDA_CHECK(cudaSetDevice(dev[i]));
        for (int j = 0; j < G; ++j) {
            if (i == j) continue;
            CUDA_CHECK(cudaDeviceCanAccessPeer(&can[i][j], dev[i], dev[j]));
            if (!can[i][j] || !enabled.insert({dev[i], dev[j]}).second) continue;
            // Exercise 3 of the handout: leave peer access off; what still works, and how fast?
            const cudaError_t e = cudaDeviceEnablePeerAccess(dev[j], 0);
            if (e == cudaErrorPeerAccessAlreadyEnabled) (void)cudaGetLastError();  // a second call: fine
            else CUDA_CHECK(e);
        }
    }
    return can;
}

// Copies `n` floats from a device back and checks them exactly against want(i).
template <class Want>
static lesson::Check check_device(const float* d, uint64_t n, const Want& want, const std::string& what, bool inject,
                                  uint64_t seed) {
    std::vector<float> h(n);
    CUDA_CHECK(cudaMemcpy(h.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost));  // any device: unified addresses
    if (inject) verify::inject_fault(h.data(), n, seed);
    return verify::check_exact(h.data(), n, want, what);
}

struct PeerResult {
    double link_gbps = NAN;  // one way, GPU 0 -> GPU 1: the best burst of whole-buffer peer copies
};

static PeerResult part_peer(const Options& o, const std::vector<int>& dev, lesson::Report& report) {
    const int a = dev[0], b = dev[1];
    const uint64_t bytes = uint64_t(o.p2p_mib) << 20, n = bytes / sizeof(float), seed = uint64_t(o.common.seed);
    const std::vector<std::vector<int>> can = enable_peer_access(dev);
    std::printf("part 2: peer to peer between GPU %d and GPU %d, %llu MiB\n", a, b, (unsigned long long)o.p2p_mib);
    for (size_t i = 0; i < dev.size(); ++i)
        for (size_t j = 0; j < dev.size(); ++j)
            if (i != j) std::printf("  cudaDeviceCanAccessPeer(GPU %d -> GPU %d) = %d\n", dev[i], dev[j], can[i][j]);
    report.config("peer_access_0_to_1", int64_t(can[0][1]));
    report.config("peer_access_1_to_0", int64_t(can[1][0]));

    cudaDeviceProp prop_a{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop_a, a));
    float *d_a_src, *d_a_dst, *d_out, *d_b_src, *d_b_dst;  // d_a_*: on GPU a; d_b_*: on GPU b
    cudaStream_t s_a, s_b;
    CUDA_CHECK(cudaSetDevice(b));
    lesson::require_device_memory(2 * bytes, "--p2p-mib on GPU " + std::to_string(b));
    CUDA_CHECK(cudaStreamCreateWithFlags(&s_b, cudaStreamNonBlocking));
    CUDA_CHECK(cudaMalloc(&d_b_src, bytes));
    CUDA_CHECK(cudaMalloc(&d_b_dst, bytes));
    int sms_b = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&sms_b, cudaDevAttrMultiProcessorCount, b));
    multigpu::fillAllreduceInput<<<grid_for(n, sms_b), kThreads, 0, s_b>>>(d_b_src, n, seed, 1);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaSetDevice(a));  // GPU a is current from here on: its stream s_a carries the timers
    lesson::require_device_memory(3 * bytes, "--p2p-mib on GPU " + std::to_string(a));
    CUDA_CHECK(cudaStreamCreateWithFlags(&s_a, cudaStreamNonBlocking));
    CUDA_CHECK(cudaMalloc(&d_a_src, bytes));
    CUDA_CHECK(cudaMalloc(&d_a_dst, bytes));
    CUDA_CHECK(cudaMalloc(&d_out, bytes));
    multigpu::fillAllreduceInput<<<grid_for(n, prop_a.multiProcessorCount), kThreads, 0, s_a>>>(d_a_src, n, seed, 0);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaStreamSynchronize(s_a));
    CUDA_CHECK(cudaStreamSynchronize(s_b));
    auto input_a = [&](uint64_t i) { return verify::allreduce_input(seed, 0, i); };
    auto input_b = [&](uint64_t i) { return verify::allreduce_input(seed, 1, i); };
    bool inject = o.common.inject_fault;  // into the first check only

    // NaN poison of a buffer on GPU `d` (memsets go to that GPU's stream, with that GPU current).
    auto poison = [&](float* p, int d, cudaStream_t s) {
        CUDA_CHECK(cudaSetDevice(d));
        CUDA_CHECK(cudaMemsetAsync(p, 0xFF, bytes, s));
        CUDA_CHECK(cudaStreamSynchronize(s));
        CUDA_CHECK(cudaSetDevice(a));
    };

    // a -> b as one copy of the whole buffer, and as 16 MiB pieces queued back to back (how a
    // pipeline or a chunked ring issues them).
    auto one_way = [&] { CUDA_CHECK(cudaMemcpyPeerAsync(d_b_dst, b, d_a_src, a, bytes, s_a)); };
    const uint64_t piece = std::min<uint64_t>(bytes, uint64_t(16) << 20);
    auto pieces = [&] {
        for (uint64_t off = 0; off < bytes; off += piece)
            CUDA_CHECK(cudaMemcpyPeerAsync(reinterpret_cast<char*>(d_b_dst) + off, b,
                                           reinterpret_cast<const char*>(d_a_src) + off, a,
                                           std::min(piece, bytes - off), s_a));
    };
    // The link: the fastest either shape moved data in this run, as the best of 5 bursts (about
    // 1 GiB a burst) and as the medians timed below (a median can beat 5 bursts by a hair). That
    // measured rate IS the link for this lesson: what the copy engines get through it, one way.
    const int burst = int(std::max<uint64_t>(1, (uint64_t(1) << 30) / bytes));
    const double one_ms = lesson::time_median_ms(int(o.common.repeat), one_way, s_a);
    const double pieces_ms = lesson::time_median_ms(int(o.common.repeat), pieces, s_a);
    PeerResult res;
    res.link_gbps = bytes / (std::min({lesson::best_burst_ms(5, burst, one_way, s_a),
                                       lesson::best_burst_ms(5, burst, pieces, s_a), one_ms, pieces_ms}) *
                             1e6);
    auto back = [&] { CUDA_CHECK(cudaMemcpyPeerAsync(d_a_dst, a, d_b_src, b, bytes, s_b)); };
    CUDA_CHECK(cudaSetDevice(b));  // the timer's events belong to GPU b, like s_b
    const double back_gbps = bytes / (lesson::best_burst_ms(5, burst, back, s_b) * 1e6);
    CUDA_CHECK(cudaSetDevice(a));
    report.bound("peer link GPU " + std::to_string(a) + " -> " + std::to_string(b) +
                     ", one way (fastest cudaMemcpyPeerAsync of this run)",
                 res.link_gbps, "GB/s");
    report.metric("peer link GPU " + std::to_string(b) + " -> " + std::to_string(a) + ", one way (best burst)",
                  back_gbps, "GB/s");
    const std::string link = "peer link";

    poison(d_b_dst, b, s_b);  // then one verified pass of the pieces
    pieces();
    CUDA_CHECK(cudaStreamSynchronize(s_a));
    report.check(check_device(d_b_dst, n, input_a,
                              "peer copy GPU " + std::to_string(a) + " -> " + std::to_string(b) +
                                  " in 16 MiB pieces, every element",
                              inject, seed));
    inject = false;
    report.variant_bound("cudaMemcpyPeerAsync one way, one call", one_ms, bytes / (one_ms * 1e6), "GB/s", res.link_gbps,
                         link);
    report.variant_bound("cudaMemcpyPeerAsync one way, 16 MiB pieces back to back", pieces_ms,
                         bytes / (pieces_ms * 1e6), "GB/s", res.link_gbps, link);

    // Both ways at once: a -> b on s_a, b -> a on s_b; s_b forks from and joins s_a through events,
    // so s_a's event pair spans both copies. An event is recorded only on a stream of its own GPU.
    cudaEvent_t fork, join;
    CUDA_CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));  // on GPU a, recorded on s_a
    CUDA_CHECK(cudaSetDevice(b));
    CUDA_CHECK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));  // on GPU b, recorded on s_b
    CUDA_CHECK(cudaSetDevice(a));
    auto both = [&] {
        CUDA_CHECK(cudaEventRecord(fork, s_a));
        CUDA_CHECK(cudaStreamWaitEvent(s_b, fork, 0));  // waiting on another GPU's event is allowed
        CUDA_CHECK(cudaMemcpyPeerAsync(d_b_dst, b, d_a_src, a, bytes, s_a));
        CUDA_CHECK(cudaMemcpyPeerAsync(d_a_dst, a, d_b_src, b, bytes, s_b));
        CUDA_CHECK(cudaEventRecord(join, s_b));
        CUDA_CHECK(cudaStreamWaitEvent(s_a, join, 0));
    };
    poison(d_b_dst, b, s_b);
    poison(d_a_dst, a, s_a);
    both();
    CUDA_CHECK(cudaStreamSynchronize(s_a));
    report.check(
        check_device(d_b_dst, n, input_a, "both ways at once: GPU " + std::to_string(b) + "'s copy", false, seed));
    report.check(
        check_device(d_a_dst, n, input_b, "both ways at once: GPU " + std::to_string(a) + "'s copy", false, seed));
    const double both_ms = lesson::time_median_ms(int(o.common.repeat), both, s_a);
    report.variant_yardstick("cudaMemcpyPeerAsync both ways at once (sum)", both_ms, 2.0 * bytes / (both_ms * 1e6),
                             "GB/s", 2.0 * res.link_gbps, "2 x one-way link");

    // A kernel on GPU a reading GPU b's memory: directly through peer access, against copying it
    // over first and reading locally. Both write dst = 2 * src on GPU a.
    const uint64_t n4 = n / 4;
    const unsigned grid = grid_for(n4, prop_a.multiProcessorCount);
    auto want2 = [&](uint64_t i) { return 2.0f * verify::allreduce_input(seed, 1, i); };
    auto local_read = [&] {
        multigpu::scaleCopy4<<<grid, kThreads, 0, s_a>>>(reinterpret_cast<float4*>(d_out),
                                                         reinterpret_cast<const float4*>(d_a_dst), n4);
        CUDA_CHECK_LAUNCH();
    };
    auto copy_first = [&] {
        CUDA_CHECK(cudaMemcpyPeerAsync(d_a_dst, a, d_b_src, b, bytes, s_a));
        local_read();
    };
    poison(d_out, a, s_a);
    copy_first();
    CUDA_CHECK(cudaStreamSynchronize(s_a));
    report.check(check_device(d_out, n, want2, "copy first, then a local kernel: dst = 2 * GPU b's data", false, seed));
    const double copy_first_ms = lesson::time_median_ms(int(o.common.repeat), copy_first, s_a);
    const double local_ms = lesson::time_median_ms(int(o.common.repeat), local_read, s_a);
    report.variant_yardstick("copy over, then read locally (bytes of src)", copy_first_ms,
                             bytes / (copy_first_ms * 1e6), "GB/s", res.link_gbps, "one-way link");
    report.variant("the local kernel alone (read + write)", local_ms, 2.0 * bytes / (local_ms * 1e6), "GB/s");
    if (can[0][1]) {
        auto direct = [&] {
            multigpu::scaleCopy4<<<grid, kThreads, 0, s_a>>>(reinterpret_cast<float4*>(d_out),
                                                             reinterpret_cast<const float4*>(d_b_src), n4);
            CUDA_CHECK_LAUNCH();
        };
        poison(d_out, a, s_a);
        direct();
        CUDA_CHECK(cudaStreamSynchronize(s_a));
        report.check(check_device(d_out, n, want2, "kernel on GPU a reading GPU b's memory directly: dst = 2 * src",
                                  false, seed));
        const double direct_ms = lesson::time_median_ms(int(o.common.repeat), direct, s_a);
        report.variant_yardstick("kernel reads the peer's memory directly (bytes of src)", direct_ms,
                                 bytes / (direct_ms * 1e6), "GB/s", res.link_gbps, "one-way link");
        report.metric("direct peer read over copy-then-read", copy_first_ms / direct_ms, "x");
    } else {
        std::printf("  kernel reading GPU %d's memory: no peer access from GPU %d, skipped\n", b, a);
        report.note("direct peer read skipped: cudaDeviceCanAccessPeer says GPU " + std::to_string(a) +
                    " cannot access GPU " + std::to_string(b));
    }
    report.target("cudaMemcpyPeerAsync in 16 MiB pieces, of the one-way link",
                  bytes / (pieces_ms * 1e6) / res.link_gbps, 0.85);

    CUDA_CHECK(cudaEventDestroy(fork));
    CUDA_CHECK(cudaFree(d_a_src));
    CUDA_CHECK(cudaFree(d_a_dst));
    CUDA_CHECK(cudaFree(d_out));
    CUDA_CHECK(cudaStreamDestroy(s_a));
    CUDA_CHECK(cudaSetDevice(b));
    CUDA_CHECK(cudaEventDestroy(join));
    CUDA_CHECK(cudaFree(d_b_src));
    CUDA_CHECK(cudaFree(d_b_dst));
    CUDA_CHECK(cudaStreamDestroy(s_b));
    CUDA_CHECK(cudaSetDevice(a));
    return res;
}

// ================================================================ 3. all-reduce in one process

// One rank of the all-reduce: its GPU, stream, input x, NCCL's result, the ring's result y, the
// ring's receive buffer tmp (one chunk), and two events the ring orders its neighbours with.
struct Rank {
    int device = 0, sms = 0;
    cudaStream_t stream{};
    float *d_x = nullptr, *d_nccl = nullptr, *d_y = nullptr, *d_tmp = nullptr;
    cudaEvent_t sent{}, added{};  // sent: my last copy into my right neighbour landed; added: my last add ran
};

// The ring all-reduce of the first n floats of every rank's x into its y (out of place), with
// cudaMemcpyPeerAsync and addChunk; the schedule is verify/multi_gpu.h's (tested on the CPU).
// Every operation goes on its rank's stream; events order the ranks; the host never waits.
static void ring_allreduce(std::vector<Rank>& rk, uint64_t n) {
    const int P = int(rk.size());
    auto right = [&](int r) -> Rank& { return rk[size_t(verify::ring_mod(r + 1, P))]; };
    auto left = [&](int r) -> Rank& { return rk[size_t(verify::ring_mod(r - 1, P))]; };
    // Reduce-scatter: in step s rank r pushes chunk (r - s) into its right neighbour's tmp; the
    // neighbour adds its own x: y = x + tmp. The chunk it forwards next step is that y.
    for (int s = 0; s + 1 < P; ++s) {
        for (int r = 0; r < P; ++r) {
            Rank& me = rk[size_t(r)];
            const verify::Range c = verify::ring_chunk(n, P, verify::ring_rs_send_chunk(r, s, P));
            CUDA_CHECK(cudaSetDevice(me.device));
            CUDA_CHECK(cudaStreamWaitEvent(me.stream, right(r).added, 0));  // its tmp is read: free to overwrite
            const float* src = (s == 0 ? me.d_x : me.d_y) + c.first;
            CUDA_CHECK(cudaMemcpyPeerAsync(right(r).d_tmp, right(r).device, src, me.device, c.count * sizeof(float),
                                           me.stream));
            CUDA_CHECK(cudaEventRecord(me.sent, me.stream));
        }
        for (int r = 0; r < P; ++r) {  // after every copy of this step is issued (the events above)
            Rank& me = rk[size_t(r)];
            const verify::Range c = verify::ring_chunk(n, P, verify::ring_rs_recv_chunk(r, s, P));
            CUDA_CHECK(cudaSetDevice(me.device));
            CUDA_CHECK(cudaStreamWaitEvent(me.stream, left(r).sent, 0));  // the chunk has landed in my tmp
            // Exercise 2 of the handout: the reduce-scatter's add, y = x + tmp over the chunk c that just arrived
            if (c.count > 0) {
                multigpu::addChunk<<<grid_for(c.count, me.sms), kThreads, 0, me.stream>>>(
                    me.d_y + c.first, me.d_x + c.first, me.d_tmp, c.count);
                CUDA_CHECK_LAUNCH();
            }
            CUDA_CHECK(cudaEventRecord(me.added, me.stream));
        }
    }
    // All-gather: in step s rank r copies chunk (r + 1 - s), a finished sum, straight into its right
    // neighbour's y. Before the first copy, the neighbour's reduce-scatter must be over (its last
    // add, recorded after all its reduce-scatter work); before later ones, the chunk must have
    // arrived from the left (the left's copy of the previous step). All waits of a step are issued
    // before any of its records, so each wait sees the previous step's event.
    for (int s = 0; s + 1 < P; ++s) {
        for (int r = 0; r < P; ++r) {
            Rank& me = rk[size_t(r)];
            CUDA_CHECK(cudaSetDevice(me.device));
            if (s == 0) CUDA_CHECK(cudaStreamWaitEvent(me.stream, right(r).added, 0));
            else CUDA_CHECK(cudaStreamWaitEvent(me.stream, left(r).sent, 0));
        }
        for (int r = 0; r < P; ++r) {
            Rank& me = rk[size_t(r)];
            const verify::Range c = verify::ring_chunk(n, P, verify::ring_ag_send_chunk(r, s, P));
            CUDA_CHECK(cudaSetDevice(me.device));
            CUDA_CHECK(cudaMemcpyPeerAsync(right(r).d_y + c.first, right(r).device, me.d_y + c.first, me.device,
                                           c.count * sizeof(float), me.stream));
            CUDA_CHECK(cudaEventRecord(me.sent, me.stream));
        }
    }
    // My y is complete when the left's last copy has landed: my stream waits for it, so whatever
    // comes next on my stream (the next all-reduce, a copy to the host) sees the whole result.
    for (int r = 0; r < P; ++r) {
        CUDA_CHECK(cudaSetDevice(rk[size_t(r)].device));
        CUDA_CHECK(cudaStreamWaitEvent(rk[size_t(r)].stream, left(r).sent, 0));
    }
}

// Host-clock time of one call of `allreduce`, which issues work on every rank's stream: bursts of
// verify::burst_calls(bytes) calls, each burst ended by synchronizing every stream; median of
// `samples` bursts. nccl-tests times the same way (host clock around a loop of calls).
template <class Fn>
static double burst_ms(const std::vector<cudaStream_t>& streams, uint64_t bytes, int samples, Fn allreduce) {
    const int calls = verify::burst_calls(bytes);
    auto sync_all = [&] {
        for (cudaStream_t s : streams) CUDA_CHECK(cudaStreamSynchronize(s));
    };
    allreduce();  // warm-up
    sync_all();
    std::vector<double> ms;
    for (int i = 0; i < samples; ++i) {
        lesson::HostTimer t;
        for (int c = 0; c < calls; ++c) allreduce();
        sync_all();
        ms.push_back(t.ms() / calls);
    }
    return lesson::median(ms);
}

// Adds a piece's exact check to a running one: counts add up, the first bad index is the first
// piece's, rel-L2 is the worst piece's.
static void merge_check(lesson::Check& all, const lesson::Check& c) {
    if (all.checked == 0 && all.bad_count == 0) all.rel_l2 = 0, all.max_abs = 0, all.pass = true;
    if (c.first_bad >= 0 && all.first_bad < 0) all.first_bad = int64_t(all.checked) + c.first_bad;
    all.checked += c.checked;
    all.bad_count += c.bad_count;
    if (!(c.max_abs <= all.max_abs)) all.max_abs = c.max_abs;
    if (!(c.rel_l2 <= all.rel_l2)) all.rel_l2 = c.rel_l2;
    all.pass = all.pass && c.pass;
}

static void print_table_head(const char* title) {
    std::printf("  %s\n  %12s %12s %6s %6s %11s %11s %11s %8s\n", title, "size(B)", "count", "type", "redop",
                "time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong");
}
static void print_table_row(uint64_t bytes, double ms, int P, uint64_t wrong) {
    const double alg = verify::algbw_gbps(double(bytes), ms);
    std::printf("  %12llu %12llu %6s %6s %11.1f %11.2f %11.2f %8llu\n", (unsigned long long)bytes,
                (unsigned long long)(bytes / 4), "float", "sum", ms * 1e3, alg, alg * verify::allreduce_busbw_factor(P),
                (unsigned long long)wrong);
}

struct AllreduceResult {
    double nccl_ms = NAN, ring_ms = NAN;  // at the largest size
};

static AllreduceResult part_allreduce(const Options& o, const std::vector<int>& dev, double link_gbps,
                                      lesson::Report& report) {
    const int P = int(dev.size());
    const uint64_t max_bytes = uint64_t(o.max_mib) << 20, max_n = max_bytes / 4, seed = uint64_t(o.common.seed);
    const std::vector<uint64_t> sizes = verify::sweep_sizes(max_bytes);
    enable_peer_access(dev);  // the ring's copies go over the link directly where they can
    std::vector<Rank> rk(static_cast<size_t>(P));
    std::vector<cudaStream_t> streams(static_cast<size_t>(P));
    for (int r = 0; r < P; ++r) {
        Rank& me = rk[size_t(r)];
        me.device = dev[size_t(r)];
        CUDA_CHECK(cudaSetDevice(me.device));
        CUDA_CHECK(cudaDeviceGetAttribute(&me.sms, cudaDevAttrMultiProcessorCount, me.device));
        lesson::require_device_memory(3 * max_bytes + (max_n / P + 1) * 4,
                                      "--max-mib on GPU " + std::to_string(me.device));
        CUDA_CHECK(cudaStreamCreateWithFlags(&me.stream, cudaStreamNonBlocking));
        CUDA_CHECK(cudaEventCreateWithFlags(&me.sent, cudaEventDisableTiming));
        CUDA_CHECK(cudaEventCreateWithFlags(&me.added, cudaEventDisableTiming));
        CUDA_CHECK(cudaMalloc(&me.d_x, max_bytes));
        CUDA_CHECK(cudaMalloc(&me.d_nccl, max_bytes));
        CUDA_CHECK(cudaMalloc(&me.d_y, max_bytes));
        CUDA_CHECK(cudaMalloc(&me.d_tmp, (max_n / P + 1) * sizeof(float)));  // the largest chunk: ceil(n / P)
        multigpu::fillAllreduceInput<<<grid_for(max_n, me.sms), kThreads, 0, me.stream>>>(me.d_x, max_n, seed, r);
        CUDA_CHECK_LAUNCH();
        streams[size_t(r)] = me.stream;
    }
#if LESSON_HAVE_NCCL
    // One communicator per GPU, all created by this one thread. Every collective call then goes in a
    // group: alone, ncclAllReduce on comm 0 would wait for the other ranks' calls, which this thread
    // has not made yet.
    std::vector<ncclComm_t> comms(static_cast<size_t>(P));
    if (o.use_nccl) NCCL_CHECK(ncclCommInitAll(comms.data(), P, dev.data()));
    auto nccl_allreduce = [&](uint64_t count) {
        NCCL_CHECK(ncclGroupStart());
        for (int r = 0; r < P; ++r)
            NCCL_CHECK(ncclAllReduce(rk[size_t(r)].d_x, rk[size_t(r)].d_nccl, count, ncclFloat, ncclSum,
                                     comms[size_t(r)], rk[size_t(r)].stream));
        NCCL_CHECK(ncclGroupEnd());
    };
    int version = 0;
    NCCL_CHECK(ncclGetVersion(&version));
    report.config("nccl_version", int64_t(version));
#endif
    const bool have_nccl = o.use_nccl;
    std::printf("part 3: all-reduce of floats over %d GPUs in one process, %llu B to %llu B%s\n", P,
                (unsigned long long)sizes.front(), (unsigned long long)sizes.back(),
                have_nccl ? " (NCCL, ncclCommInitAll; then the hand-written ring)" : " (the hand-written ring)");

    lesson::Check nccl_check, ring_check, ring_vs_nccl;
    std::vector<double> nccl_ms(sizes.size(), NAN), ring_ms(sizes.size(), NAN);
    std::vector<float> h_nccl(max_n), h_ring(max_n);
    bool inject = o.common.inject_fault;
    for (size_t si = 0; si < sizes.size(); ++si) {
        const uint64_t bytes = sizes[si], count = bytes / 4;
        for (Rank& me : rk) {  // poison both results
            CUDA_CHECK(cudaSetDevice(me.device));
            CUDA_CHECK(cudaMemsetAsync(me.d_nccl, 0xFF, bytes, me.stream));
            CUDA_CHECK(cudaMemsetAsync(me.d_y, 0xFF, bytes, me.stream));
        }
#if LESSON_HAVE_NCCL
        if (have_nccl) nccl_allreduce(count);
#endif
        ring_allreduce(rk, count);
        for (int r = 0; r < P; ++r) {  // every rank's results, every element, exactly
            CUDA_CHECK(cudaStreamSynchronize(rk[size_t(r)].stream));
            CUDA_CHECK(cudaMemcpy(h_ring.data(), rk[size_t(r)].d_y, bytes, cudaMemcpyDeviceToHost));
            if (inject) verify::inject_fault(h_ring.data(), count, seed);
            inject = false;
            merge_check(ring_check, verify::check_allreduce(h_ring.data(), count, seed, P, ""));
            if (have_nccl) {
                CUDA_CHECK(cudaMemcpy(h_nccl.data(), rk[size_t(r)].d_nccl, bytes, cudaMemcpyDeviceToHost));
                merge_check(nccl_check, verify::check_allreduce(h_nccl.data(), count, seed, P, ""));
                merge_check(ring_vs_nccl, verify::check_same_bits(h_ring.data(), h_nccl.data(), count, ""));
            }
        }
        const int S = int(o.common.repeat);
#if LESSON_HAVE_NCCL
        if (have_nccl) nccl_ms[si] = burst_ms(streams, bytes, S, [&] { nccl_allreduce(count); });
#endif
        ring_ms[si] = burst_ms(streams, bytes, S, [&] { ring_allreduce(rk, count); });
    }
    const std::string every = "every element of every rank's result, " + std::to_string(sizes.size()) + " sizes";
    ring_check.what = "hand-written ring all-reduce vs the exact sum (CPU), " + every;
    report.check(ring_check);
    if (have_nccl) {
        nccl_check.what = "NCCL all-reduce (ncclCommInitAll) vs the exact sum (CPU), " + every;
        ring_vs_nccl.what = "hand-written ring vs NCCL, bit for bit, " + every;
        report.check(nccl_check);
        report.check(ring_vs_nccl);
        print_table_head("NCCL all-reduce, one process (ncclCommInitAll), out of place:");
        for (size_t si = 0; si < sizes.size(); ++si) print_table_row(sizes[si], nccl_ms[si], P, 0);
    }
    print_table_head("hand-written ring (cudaMemcpyPeerAsync + addChunk), out of place:");
    for (size_t si = 0; si < sizes.size(); ++si) print_table_row(sizes[si], ring_ms[si], P, 0);
    std::printf("  (#wrong: see the checks below; busbw = algbw * 2(P-1)/P, nccl-tests' definition)\n");

    const double factor = verify::allreduce_busbw_factor(P);
    for (size_t si = 0; si < sizes.size(); ++si) {
        const uint64_t bytes = sizes[si];
        char sz[32];
        std::snprintf(sz, sizeof sz, "%llu B", (unsigned long long)bytes);
        const double nbus = verify::algbw_gbps(double(bytes), nccl_ms[si]) * factor;
        const double rbus = verify::algbw_gbps(double(bytes), ring_ms[si]) * factor;
        if (have_nccl) {
            if (std::isfinite(link_gbps))
                report.variant_yardstick("NCCL all-reduce " + std::string(sz) + ", busbw", nccl_ms[si], nbus, "GB/s",
                                         link_gbps, "one-way link");
            else report.variant("NCCL all-reduce " + std::string(sz) + ", busbw", nccl_ms[si], nbus, "GB/s");
            report.variant_yardstick("ring all-reduce " + std::string(sz) + ", busbw", ring_ms[si], rbus, "GB/s", nbus,
                                     "NCCL");
        } else if (std::isfinite(link_gbps)) {
            report.variant_yardstick("ring all-reduce " + std::string(sz) + ", busbw", ring_ms[si], rbus, "GB/s",
                                     link_gbps, "one-way link");
        } else {
            report.variant("ring all-reduce " + std::string(sz) + ", busbw", ring_ms[si], rbus, "GB/s");
        }
    }
    AllreduceResult res;
    res.nccl_ms = nccl_ms.back();
    res.ring_ms = ring_ms.back();
    const double top = double(sizes.back());
    if (have_nccl) {
        report.metric("NCCL all-reduce busbw at " + std::to_string(sizes.back() >> 20) + " MiB, " + std::to_string(P) +
                          " GPUs",
                      verify::algbw_gbps(top, res.nccl_ms) * factor, "GB/s");
        report.target("ring all-reduce within 2x of NCCL (NCCL time / ring time)", res.nccl_ms / res.ring_ms, 0.5, "x");
    }
#if LESSON_HAVE_NCCL
    if (have_nccl)
        for (ncclComm_t c : comms) NCCL_CHECK(ncclCommDestroy(c));
#endif
    for (Rank& me : rk) {
        CUDA_CHECK(cudaSetDevice(me.device));
        CUDA_CHECK(cudaStreamSynchronize(me.stream));
        CUDA_CHECK(cudaFree(me.d_x));
        CUDA_CHECK(cudaFree(me.d_nccl));
        CUDA_CHECK(cudaFree(me.d_y));
        CUDA_CHECK(cudaFree(me.d_tmp));
        CUDA_CHECK(cudaEventDestroy(me.sent));
        CUDA_CHECK(cudaEventDestroy(me.added));
        CUDA_CHECK(cudaStreamDestroy(me.stream));
    }
    return res;
}

// ================================================================ 4. one process per GPU

#if LESSON_HAVE_NCCL
// What one rank process does (this same program, started by part 4 with --rank/--ranks/--nccl-id-file):
// get the unique id (rank 0 makes it and writes it to the file; the others wait for the file), join
// the communicator with ncclCommInitRank, run the sweep on its own GPU, write one line per size.
static int run_rank(const Options& o) {
    const int rank = int(o.rank), P = int(o.ranks), device = int(o.common.device) + rank;
    const uint64_t max_bytes = uint64_t(o.max_mib) << 20, max_n = max_bytes / 4, seed = uint64_t(o.common.seed);
    CUDA_CHECK(cudaSetDevice(device));  // a rank's communicator belongs to the device current at init
    lesson::require_device_memory(2 * max_bytes, "--max-mib on GPU " + std::to_string(device));
    ncclUniqueId id;
    if (rank == 0) {
        NCCL_CHECK(ncclGetUniqueId(&id));  // rank 0's address and a random key: what the others connect to
        const std::string tmp = o.id_file + ".tmp";
        std::ofstream f(tmp, std::ios::binary);
        f.write(reinterpret_cast<const char*>(&id), sizeof id);
        f.close();
        if (!f || std::rename(tmp.c_str(), o.id_file.c_str()) != 0)  // rename: the others never see half a file
            lesson::fail_call("host", "write the NCCL id file", std::strerror(errno), __FILE__, __LINE__);
    } else {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        std::ifstream f;
        while (!(f.open(o.id_file, std::ios::binary), f.is_open())) {
            if (std::chrono::steady_clock::now() > deadline)
                lesson::fail_call("host", "wait for the NCCL id file", "no id from rank 0 in 60 s", __FILE__, __LINE__);
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        f.read(reinterpret_cast<char*>(&id), sizeof id);
        if (f.gcount() != std::streamsize(sizeof id))
            lesson::fail_call("host", "read the NCCL id file", "short file", __FILE__, __LINE__);
    }
    ncclComm_t comm;
    NCCL_CHECK(ncclCommInitRank(&comm, P, id, rank));  // returns once all P ranks have joined

    cudaStream_t stream;
    int sms = 0;
    float *d_x, *d_out;
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    CUDA_CHECK(cudaMalloc(&d_x, max_bytes));
    CUDA_CHECK(cudaMalloc(&d_out, max_bytes));
    multigpu::fillAllreduceInput<<<grid_for(max_n, sms), kThreads, 0, stream>>>(d_x, max_n, seed, rank);
    CUDA_CHECK_LAUNCH();
    std::vector<float> h(max_n);
    std::string lines;
    bool pass = true;
    for (uint64_t bytes : verify::sweep_sizes(max_bytes)) {
        const uint64_t count = bytes / 4;
        CUDA_CHECK(cudaMemsetAsync(d_out, 0xFF, bytes, stream));
        NCCL_CHECK(ncclAllReduce(d_x, d_out, count, ncclFloat, ncclSum, comm, stream));  // no group: one rank here
        CUDA_CHECK(cudaMemcpyAsync(h.data(), d_out, bytes, cudaMemcpyDeviceToHost, stream));
        CUDA_CHECK(cudaStreamSynchronize(stream));
        if (o.common.inject_fault && rank == 0 && bytes == max_bytes) verify::inject_fault(h.data(), count, seed);
        const lesson::Check c = verify::check_allreduce(h.data(), count, seed, P, "");
        pass = pass && c.pass;
        verify::RankLine l;
        l.bytes = bytes;
        l.ms = burst_ms({stream}, bytes, int(o.common.repeat),
                        [&] { NCCL_CHECK(ncclAllReduce(d_x, d_out, count, ncclFloat, ncclSum, comm, stream)); });
        l.checked = c.checked;
        l.bad = c.bad_count;
        l.first_bad = c.first_bad;
        lines += verify::format_rank_line(l);
    }
    const std::string out = o.id_file + ".rank" + std::to_string(rank);
    std::ofstream f(out + ".tmp");
    f << lines;
    f.close();
    if (!f || std::rename((out + ".tmp").c_str(), out.c_str()) != 0)
        lesson::fail_call("host", "write the rank's results", std::strerror(errno), __FILE__, __LINE__);
    NCCL_CHECK(ncclCommDestroy(comm));
    CUDA_CHECK(cudaFree(d_x));
    CUDA_CHECK(cudaFree(d_out));
    CUDA_CHECK(cudaStreamDestroy(stream));
    return pass ? 0 : 1;
}

// The launcher's side: start P copies of this program (posix_spawn: a fresh process image, so it
// does not matter that this process has initialized CUDA), hand them a file for the id, wait for
// them, and collect their lines. Across machines, mpirun or torchrun play this part.
static void part_ranks(const Options& o, int P, lesson::Report& report) {
    char dir_buf[] = "/tmp/multi_gpu_ranks.XXXXXX";
    if (!mkdtemp(dir_buf)) lesson::fail_call("host", "mkdtemp", std::strerror(errno), __FILE__, __LINE__);
    const std::string dir = dir_buf, id_file = dir + "/nccl_id";
    char exe[4096];
    const ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0) lesson::fail_call("host", "readlink /proc/self/exe", std::strerror(errno), __FILE__, __LINE__);
    exe[len] = '\0';
    std::printf("part 4: %d processes, one per GPU (ncclCommInitRank; the id handed over in %s)\n", P, id_file.c_str());
    std::fflush(stdout);

    std::vector<pid_t> pids(size_t(P), -1);
    for (int r = 0; r < P; ++r) {
        std::vector<std::string> args = {exe,
                                         "--rank=" + std::to_string(r),
                                         "--ranks=" + std::to_string(P),
                                         "--nccl-id-file=" + id_file,
                                         "--device=" + std::to_string(o.common.device),
                                         "--max-mib=" + std::to_string(o.max_mib),
                                         "--repeat=" + std::to_string(o.common.repeat),
                                         "--seed=" + std::to_string(o.common.seed)};
        if (o.common.inject_fault) args.push_back("--inject-fault");
        std::vector<char*> argv;
        for (std::string& a : args) argv.push_back(&a[0]);
        argv.push_back(nullptr);
        const std::string log = dir + "/rank" + std::to_string(r) + ".log";
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        posix_spawn_file_actions_adddup2(&fa, 1, 2);
        const int e = posix_spawn(&pids[size_t(r)], exe, &fa, nullptr, argv.data(), environ);
        posix_spawn_file_actions_destroy(&fa);
        if (e != 0) lesson::fail_call("host", "posix_spawn of a rank", std::strerror(e), __FILE__, __LINE__);
    }
    // Wait for every rank, at most 300 s; a rank still running then is stopped (by its pid).
    std::vector<int> status(size_t(P), -1);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(300);
    for (int left = P; left > 0;) {
        for (int r = 0; r < P; ++r) {
            if (pids[size_t(r)] < 0) continue;
            int st = 0;
            if (waitpid(pids[size_t(r)], &st, WNOHANG) == pids[size_t(r)]) {
                status[size_t(r)] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
                pids[size_t(r)] = -1;
                --left;
            }
        }
        if (left > 0 && std::chrono::steady_clock::now() > deadline) {
            for (int r = 0; r < P; ++r)
                if (pids[size_t(r)] > 0) {
                    kill(pids[size_t(r)], SIGKILL);
                    waitpid(pids[size_t(r)], nullptr, 0);
                    pids[size_t(r)] = -1;
                    status[size_t(r)] = 124;
                }
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    // Collect: per size, the slowest rank's time (the collective ends when its last rank does).
    std::vector<verify::RankLine> rows;
    lesson::Check all;
    bool complete = true;
    for (int r = 0; r < P; ++r) {
        const std::string log = dir + "/rank" + std::to_string(r) + ".log";
        if (status[size_t(r)] != 0) {
            std::printf("  rank %d exited with %d; its output:\n", r, status[size_t(r)]);
            std::ifstream lf(log);
            for (std::string line; std::getline(lf, line);) std::printf("    rank %d: %s\n", r, line.c_str());
        }
        std::ifstream f(id_file + ".rank" + std::to_string(r));
        size_t i = 0;
        for (std::string line; std::getline(f, line); ++i) {
            verify::RankLine l;
            if (!verify::parse_rank_line(line + "\n", &l)) break;
            if (rows.size() <= i) rows.push_back(l);
            else rows[i].ms = std::max(rows[i].ms, l.ms);
            lesson::Check c;
            c.checked = l.checked;
            c.bad_count = l.bad;
            c.first_bad = l.first_bad;
            c.rel_l2 = l.bad ? NAN : 0.0;
            c.max_abs = l.bad ? NAN : 0.0;
            c.pass = l.bad == 0 && l.checked > 0;
            merge_check(all, c);
        }
        complete = complete && i == verify::sweep_sizes(uint64_t(o.max_mib) << 20).size();
        std::remove((id_file + ".rank" + std::to_string(r)).c_str());
        std::remove(log.c_str());
    }
    std::remove(id_file.c_str());
    rmdir(dir.c_str());
    all.what = "one process per GPU (" + std::to_string(P) +
               " ranks, ncclCommInitRank): every rank's result vs the "
               "exact sum, every element, every size; every rank exited 0 with all its lines";
    all.pass = all.pass && complete && std::all_of(status.begin(), status.end(), [](int s) { return s == 0; });
    report.check(all);
    if (rows.empty()) return;
    print_table_head("NCCL all-reduce, one process per GPU (ncclCommInitRank), slowest rank:");
    for (const verify::RankLine& l : rows) print_table_row(l.bytes, l.ms, P, l.bad);
    const verify::RankLine& top = rows.back();
    report.variant("NCCL all-reduce " + std::to_string(top.bytes) + " B, one process per GPU, busbw", top.ms,
                   verify::algbw_gbps(double(top.bytes), top.ms) * verify::allreduce_busbw_factor(P), "GB/s");
}
#endif

// ================================================================ main

int main(int argc, char** argv) {
    // NVLink SHARP (multicast) stays off unless the caller turns it on: 0 = do not overwrite.
    setenv("NCCL_NVLS_ENABLE", "0", 0);

    Options o;
    lesson::Cli cli("multi_gpu",
                    "Lesson 09's batched SGEMM split over every GPU (one host thread each), peer-to-peer copies and\n"
                    "direct peer reads, and the all-reduce: NCCL in one process and one process per GPU, and a ring\n"
                    "written by hand.");
    lesson::add_common_flags(cli, o.common);
    cli.add_int("n", &o.n, 1, 4096, "side of every matrix of the split", 128);
    cli.add_int("batch", &o.batch, 1, 100000, "products in the split's batch", 8);
    cli.add_int("samples", &o.samples, 1, 100, "products per GPU range checked element by element");
    cli.add_int("gpus", &o.gpus, 0, 64, "GPUs to use from --device on (0 = all)");
    cli.add_int("p2p-mib", &o.p2p_mib, 1, 16384, "MiB moved by the peer-to-peer part", 16);
    cli.add_int("max-mib", &o.max_mib, 1, 4096, "largest all-reduce, in MiB (the sweep starts at 4 KiB)", 1);
    cli.add_int("part", &o.part, 0, 4, "run one part alone: 1 split, 2 peer, 3 all-reduce, 4 one process per GPU");
    cli.add_int("rank", &o.rank, -1, 63, "(set by the lesson for the processes it starts) this process's rank");
    cli.add_int("ranks", &o.ranks, 0, 64, "(set by the lesson) number of rank processes");
    cli.add_string("nccl-id-file", &o.id_file, "(set by the lesson) where rank 0 leaves the NCCL unique id");
    cli.parse_or_exit(argc, argv);
    const char* under_sanitizer = std::getenv("LESSON_UNDER_SANITIZER");
    if (under_sanitizer && std::string(under_sanitizer) == "1") o.use_nccl = false;
    const bool rank_mode = o.rank >= 0;
    if (rank_mode != (o.ranks > 0) || rank_mode != !o.id_file.empty() || (rank_mode && o.rank >= o.ranks))
        lesson::bad_input(
            "--rank, --ranks and --nccl-id-file go together (0 <= rank < ranks); the lesson sets them "
            "for the processes it starts");
    if (o.samples > o.batch)
        lesson::bad_input("--samples=" + std::to_string(o.samples) + " exceeds --batch=" + std::to_string(o.batch) +
                          "; allowed: 1 to --batch");
    if (rank_mode) {
#if LESSON_HAVE_NCCL
        return run_rank(o);
#else
        lesson::bad_input("--rank needs NCCL, which this build does not have");
#endif
    }
    const uint64_t nn = uint64_t(o.n) * uint64_t(o.n);
    lesson::require_host_memory(3 * uint64_t(o.batch) * nn * 4 + (uint64_t(o.p2p_mib) << 20) * 4 +
                                    2 * (uint64_t(o.max_mib) << 20),
                                "pinned + pageable", "--n/--batch/--p2p-mib/--max-mib");

    cudaDeviceProp prop = lesson::pick_device(o.common.device);
    int count = 0;
    CUDA_CHECK(cudaGetDeviceCount(&count));
    const int G = o.gpus == 0 ? count - int(o.common.device) : int(o.gpus);
    if (o.common.device + G > count)
        lesson::bad_input("--gpus=" + std::to_string(o.gpus) + " from --device=" + std::to_string(o.common.device) +
                          " needs " + std::to_string(G) + " GPUs; this machine has " + std::to_string(count) +
                          "; allowed: 0 <= gpus <= " + std::to_string(count - o.common.device));
    if (o.batch < G)
        lesson::bad_input("--batch=" + std::to_string(o.batch) + " is smaller than the " + std::to_string(G) +
                          " GPUs; allowed: batch >= GPUs (use --gpus to use fewer)");
    const std::string have = "this run uses " + std::to_string(G) + (count == G ? "" : " of " + std::to_string(count));
    if (o.part >= 2 && G < 2) lesson::bad_input("--part=" + std::to_string(o.part) + " needs 2 GPUs; " + have);
    if (o.part == 4 && !LESSON_HAVE_NCCL)
        lesson::bad_input(
            "--part=4 needs NCCL; NCCL not found at build time: install libnccl-dev (or set NCCL_ROOT) "
            "and rebuild to run the all-reduce part");
    std::vector<int> dev(static_cast<size_t>(G));
    std::iota(dev.begin(), dev.end(), int(o.common.device));

    lesson::Report report("22_multi_gpu");
    report.device(prop.name, prop.major, prop.minor, prop.multiProcessorCount, prop.totalGlobalMem / 1e9);
    report.config("gpus", int64_t(G));
    report.config("n", o.n);
    report.config("batch", o.batch);
    report.config("samples_per_gpu", o.samples);
    report.config("p2p_mib", o.p2p_mib);
    report.config("max_mib", o.max_mib);
    report.config("part", o.part);
    report.config("seed", o.common.seed);
    report.config("NCCL_NVLS_ENABLE", std::string(std::getenv("NCCL_NVLS_ENABLE")));
    report.config("nccl", std::string(LESSON_HAVE_NCCL ? "built with NCCL" : "not found at build time"));
    std::printf("%d GPU(s) in this run (of %d on the machine), NCCL_NVLS_ENABLE=%s\n", G, count,
                std::getenv("NCCL_NVLS_ENABLE"));
    for (int g = 0; g < G; ++g) {
        cudaDeviceProp p{};
        CUDA_CHECK(cudaGetDeviceProperties(&p, dev[g]));
        std::printf("  GPU %d: %s, %d SMs, %.1f GB, PCI %04x:%02x:%02x\n", dev[g], p.name, p.multiProcessorCount,
                    p.totalGlobalMem / 1e9, p.pciDomainID, p.pciBusID, p.pciDeviceID);
    }
    lesson::Gate gate(report);  // common/needs.h: one line per part skipped, and whether any part ran
    auto skipped = [&](const std::string& what, const std::string& why) { gate.skip(what, why); };
    const std::string two = "needs 2 GPUs, " + have;
    const std::string under_san =
        "LESSON_UNDER_SANITIZER=1 (scripts/run_all.sh --sanitize): NCCL's start-up makes CUDA calls that fail by "
        "design, which the sanitizer counts as errors";
    const std::string no_nccl =
        "NCCL not found at build time: install libnccl-dev (or set NCCL_ROOT) and rebuild to run the all-reduce part";

    SplitResult split;
    PeerResult peer;
    AllreduceResult ar;
    if ((o.part == 0 || o.part == 1) && gate.run("compute split", {})) split = part_split(o, dev, report);
    if (o.part == 0 || o.part == 2) {
        if (G < 2) skipped("peer access", two);
        else if (gate.run("peer access", {})) peer = part_peer(o, dev, report);
    }
    if (o.part == 0 || o.part == 3) {
        if (G >= 2 && gate.run("all-reduce", {})) {
            if (!LESSON_HAVE_NCCL) skipped("NCCL all-reduce (one process)", no_nccl);
            else if (!o.use_nccl) skipped("NCCL all-reduce (one process)", under_san);
            ar = part_allreduce(o, dev, peer.link_gbps, report);
        } else {
            skipped("all-reduce (NCCL and the hand-written ring)", two);
        }
    }
    if (o.part == 0 || o.part == 4) {
        if (G < 2) skipped("NCCL all-reduce, one process per GPU", two);
        else if (!LESSON_HAVE_NCCL) skipped("NCCL all-reduce, one process per GPU", no_nccl);
        else if (!o.use_nccl) skipped("NCCL all-reduce, one process per GPU", under_san);
#if LESSON_HAVE_NCCL
        else if (gate.run("NCCL all-reduce, one process per GPU", {})) part_ranks(o, G, report);
#endif
    }
    CUDA_CHECK(cudaSetDevice(int(o.common.device)));

    // Key result and targets.
    report.timing("GEMMs: host clock around one thread per GPU, " + std::to_string(3) +
                  " passes each, median of --repeat; peer copies and kernels: " + lesson::kTimingMethod +
                  "; all-reduce: host clock around bursts of calls ended by synchronizing every stream, median of "
                  "--repeat bursts");
    report.default_size(cli.at_default_size());
    if (!split.gemm_ms.empty()) {
        const double flops = 2.0 * double(o.n) * o.n * o.n * double(o.batch);
        char key[200];
        if (G >= 2) {
            const double x2 = split.gemm_ms[0] / split.gemm_ms[1];
            std::snprintf(key, sizeof key, "batched SGEMM %lld x %lld^2: %.1f TFLOP/s on 1 GPU, %.2fx on 2",
                          (long long)o.batch, (long long)o.n, flops / (split.gemm_ms[0] * 1e9), x2);
            report.key_result(key, x2 / 2.0, "perfect scaling", lesson::Against::Yardstick);
            report.target("compute split, 2 GPUs over 1", x2, 1.9, "x");
        } else {
            std::snprintf(key, sizeof key, "batched SGEMM %lld x %lld^2: %.1f TFLOP/s on 1 GPU (no second GPU)",
                          (long long)o.batch, (long long)o.n, flops / (split.gemm_ms[0] * 1e9));
            report.key_result(key);
        }
    } else if (std::isfinite(ar.ring_ms)) {
        report.key_result("ring all-reduce at the largest size: " + std::to_string(ar.ring_ms) + " ms");
    }
    if (gate.none_ran()) return report.skip(gate.reason(), o.common.json);
    return report.finish(o.common.json);
}
