// Lesson 22 of the course (several GPUs), part 2: peer to peer (2+ GPUs). cudaDeviceCanAccessPeer
// and cudaDeviceEnablePeerAccess, the peer link measured with cudaMemcpyPeerAsync one way and both
// ways at once, and a kernel on GPU 0 that reads GPU 1's memory directly against copying it over
// first. Before: part 1, the split (part_split.cuh). Next: part 3, the all-reduce (part_allreduce.cuh).
// Run: ./build/bin/multi_gpu --part=2   (README.md is the handout)
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/ceilings.h"
#include "common/check.h"
#include "common/memory.h"
#include "common/report.h"
#include "common/timer.h"
#include "verify/compare.h"
#include "verify/multi_gpu.h"

#include "kernels/multi_gpu.cuh"
#include "options.cuh"

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

// The two GPUs of the part and their buffers: d_a_* on GPU a, d_b_* on GPU b, each GPU's stream.
// GPU a is current between the steps below; its stream s_a carries the timers.
struct PeerPair {
    int a = 0, b = 0, sms_a = 0;
    uint64_t bytes = 0, n = 0, seed = 0;
    cudaStream_t s_a{}, s_b{};
    float *d_a_src = nullptr, *d_a_dst = nullptr, *d_out = nullptr, *d_b_src = nullptr, *d_b_dst = nullptr;
};

// Allocates both GPUs' buffers and fills the sources: rank 0's all-reduce input on GPU a, rank 1's
// on GPU b (verify::allreduce_input), so every copy can be checked exactly.
static PeerPair make_peer_pair(int a, int b, uint64_t bytes, uint64_t seed) {
    PeerPair p;
    p.a = a, p.b = b, p.bytes = bytes, p.n = bytes / sizeof(float), p.seed = seed;
    cudaDeviceProp prop_a{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop_a, a));
    p.sms_a = prop_a.multiProcessorCount;
    CUDA_CHECK(cudaSetDevice(b));
    lesson::require_device_memory(2 * bytes, "--p2p-mib on GPU " + std::to_string(b));
    CUDA_CHECK(cudaStreamCreateWithFlags(&p.s_b, cudaStreamNonBlocking));
    CUDA_CHECK(cudaMalloc(&p.d_b_src, bytes));
    CUDA_CHECK(cudaMalloc(&p.d_b_dst, bytes));
    int sms_b = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&sms_b, cudaDevAttrMultiProcessorCount, b));
    multigpu::fillAllreduceInput<<<multigpu::grid_for(p.n, sms_b), multigpu::kThreads, 0, p.s_b>>>(p.d_b_src, p.n, seed,
                                                                                                   1);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaSetDevice(a));  // GPU a is current from here on
    lesson::require_device_memory(3 * bytes, "--p2p-mib on GPU " + std::to_string(a));
    CUDA_CHECK(cudaStreamCreateWithFlags(&p.s_a, cudaStreamNonBlocking));
    CUDA_CHECK(cudaMalloc(&p.d_a_src, bytes));
    CUDA_CHECK(cudaMalloc(&p.d_a_dst, bytes));
    CUDA_CHECK(cudaMalloc(&p.d_out, bytes));
    multigpu::fillAllreduceInput<<<multigpu::grid_for(p.n, p.sms_a), multigpu::kThreads, 0, p.s_a>>>(p.d_a_src, p.n,
                                                                                                     seed, 0);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaStreamSynchronize(p.s_a));
    CUDA_CHECK(cudaStreamSynchronize(p.s_b));
    return p;
}

// NaN poison of a buffer on GPU `d` (memsets go to that GPU's stream, with that GPU current).
static void poison(const PeerPair& p, float* buf, int d, cudaStream_t s) {
    CUDA_CHECK(cudaSetDevice(d));
    CUDA_CHECK(cudaMemsetAsync(buf, 0xFF, p.bytes, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
    CUDA_CHECK(cudaSetDevice(p.a));
}

struct OneWay {
    double link_gbps = NAN;  // GPU a -> GPU b: the fastest peer copy of the run
    double pieces_ms = NAN;  // the 16 MiB pieces, median
};

// a -> b as one copy of the whole buffer, and as 16 MiB pieces queued back to back (how a pipeline
// or a chunked ring issues them); the link; b -> a; one verified pass of the pieces.
static OneWay one_way(const PeerPair& p, const Options& o, lesson::Report& report) {
    const int a = p.a, b = p.b;
    const uint64_t bytes = p.bytes;
    auto whole = [&] { CUDA_CHECK(cudaMemcpyPeerAsync(p.d_b_dst, b, p.d_a_src, a, bytes, p.s_a)); };
    const uint64_t piece = std::min<uint64_t>(bytes, uint64_t(16) << 20);
    auto pieces = [&] {
        for (uint64_t off = 0; off < bytes; off += piece)
            CUDA_CHECK(cudaMemcpyPeerAsync(reinterpret_cast<char*>(p.d_b_dst) + off, b,
                                           reinterpret_cast<const char*>(p.d_a_src) + off, a,
                                           std::min(piece, bytes - off), p.s_a));
    };
    // The link: the fastest either shape moved data in this run, as the best of 5 bursts (about
    // 1 GiB a burst) and as the medians timed below (a median can beat 5 bursts by a hair). That
    // measured rate IS the link for this lesson: what the copy engines get through it, one way.
    const int burst = int(std::max<uint64_t>(1, (uint64_t(1) << 30) / bytes));
    const double one_ms = lesson::time_median_ms(int(o.common.repeat), whole, p.s_a);
    OneWay res;
    res.pieces_ms = lesson::time_median_ms(int(o.common.repeat), pieces, p.s_a);
    res.link_gbps = bytes / (std::min({lesson::best_burst_ms(5, burst, whole, p.s_a),
                                       lesson::best_burst_ms(5, burst, pieces, p.s_a), one_ms, res.pieces_ms}) *
                             1e6);
    auto back = [&] { CUDA_CHECK(cudaMemcpyPeerAsync(p.d_a_dst, a, p.d_b_src, b, bytes, p.s_b)); };
    CUDA_CHECK(cudaSetDevice(b));  // the timer's events belong to GPU b, like s_b
    const double back_gbps = bytes / (lesson::best_burst_ms(5, burst, back, p.s_b) * 1e6);
    CUDA_CHECK(cudaSetDevice(a));
    report.bound("peer link GPU " + std::to_string(a) + " -> " + std::to_string(b) +
                     ", one way (fastest cudaMemcpyPeerAsync of this run)",
                 res.link_gbps, "GB/s");
    report.metric("peer link GPU " + std::to_string(b) + " -> " + std::to_string(a) + ", one way (best burst)",
                  back_gbps, "GB/s");

    poison(p, p.d_b_dst, b, p.s_b);  // then one verified pass of the pieces
    pieces();
    CUDA_CHECK(cudaStreamSynchronize(p.s_a));
    report.check(check_device(
        p.d_b_dst, p.n, [&](uint64_t i) { return verify::allreduce_input(p.seed, 0, i); },
        "peer copy GPU " + std::to_string(a) + " -> " + std::to_string(b) + " in 16 MiB pieces, every element",
        o.common.inject_fault, p.seed));
    report.variant_bound("cudaMemcpyPeerAsync one way, one call", one_ms, bytes / (one_ms * 1e6), "GB/s", res.link_gbps,
                         "peer link");
    report.variant_bound("cudaMemcpyPeerAsync one way, 16 MiB pieces back to back", res.pieces_ms,
                         bytes / (res.pieces_ms * 1e6), "GB/s", res.link_gbps, "peer link");
    return res;
}

// Both ways at once: a -> b on s_a, b -> a on s_b; s_b forks from and joins s_a through events,
// so s_a's event pair spans both copies. An event is recorded only on a stream of its own GPU.
static void both_ways(const PeerPair& p, const Options& o, double link_gbps, lesson::Report& report) {
    const int a = p.a, b = p.b;
    const uint64_t bytes = p.bytes;
    cudaEvent_t fork, join;
    CUDA_CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));  // on GPU a, recorded on s_a
    CUDA_CHECK(cudaSetDevice(b));
    CUDA_CHECK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));  // on GPU b, recorded on s_b
    CUDA_CHECK(cudaSetDevice(a));
    auto both = [&] {
        CUDA_CHECK(cudaEventRecord(fork, p.s_a));
        CUDA_CHECK(cudaStreamWaitEvent(p.s_b, fork, 0));  // waiting on another GPU's event is allowed
        CUDA_CHECK(cudaMemcpyPeerAsync(p.d_b_dst, b, p.d_a_src, a, bytes, p.s_a));
        CUDA_CHECK(cudaMemcpyPeerAsync(p.d_a_dst, a, p.d_b_src, b, bytes, p.s_b));
        CUDA_CHECK(cudaEventRecord(join, p.s_b));
        CUDA_CHECK(cudaStreamWaitEvent(p.s_a, join, 0));
    };
    poison(p, p.d_b_dst, b, p.s_b);
    poison(p, p.d_a_dst, a, p.s_a);
    both();
    CUDA_CHECK(cudaStreamSynchronize(p.s_a));
    report.check(check_device(
        p.d_b_dst, p.n, [&](uint64_t i) { return verify::allreduce_input(p.seed, 0, i); },
        "both ways at once: GPU " + std::to_string(b) + "'s copy", false, p.seed));
    report.check(check_device(
        p.d_a_dst, p.n, [&](uint64_t i) { return verify::allreduce_input(p.seed, 1, i); },
        "both ways at once: GPU " + std::to_string(a) + "'s copy", false, p.seed));
    const double both_ms = lesson::time_median_ms(int(o.common.repeat), both, p.s_a);
    report.variant_yardstick("cudaMemcpyPeerAsync both ways at once (sum)", both_ms, 2.0 * bytes / (both_ms * 1e6),
                             "GB/s", 2.0 * link_gbps, "2 x one-way link");
    CUDA_CHECK(cudaEventDestroy(fork));
    CUDA_CHECK(cudaSetDevice(b));
    CUDA_CHECK(cudaEventDestroy(join));
    CUDA_CHECK(cudaSetDevice(a));
}

// A kernel on GPU a reading GPU b's memory: directly through peer access (where a may access b),
// against copying it over first and reading locally. Both write dst = 2 * src on GPU a.
static void peer_read(const PeerPair& p, const Options& o, bool a_can_read_b, double link_gbps,
                      lesson::Report& report) {
    const int a = p.a, b = p.b;
    const uint64_t bytes = p.bytes, n4 = p.n / 4;
    const unsigned grid = multigpu::grid_for(n4, p.sms_a);
    auto want2 = [&](uint64_t i) { return 2.0f * verify::allreduce_input(p.seed, 1, i); };
    auto local_read = [&] {
        multigpu::scaleCopy4<<<grid, multigpu::kThreads, 0, p.s_a>>>(reinterpret_cast<float4*>(p.d_out),
                                                                     reinterpret_cast<const float4*>(p.d_a_dst), n4);
        CUDA_CHECK_LAUNCH();
    };
    auto copy_first = [&] {
        CUDA_CHECK(cudaMemcpyPeerAsync(p.d_a_dst, a, p.d_b_src, b, bytes, p.s_a));
        local_read();
    };
    poison(p, p.d_out, a, p.s_a);
    copy_first();
    CUDA_CHECK(cudaStreamSynchronize(p.s_a));
    report.check(
        check_device(p.d_out, p.n, want2, "copy first, then a local kernel: dst = 2 * GPU b's data", false, p.seed));
    const double copy_first_ms = lesson::time_median_ms(int(o.common.repeat), copy_first, p.s_a);
    const double local_ms = lesson::time_median_ms(int(o.common.repeat), local_read, p.s_a);
    report.variant_yardstick("copy over, then read locally (bytes of src)", copy_first_ms,
                             bytes / (copy_first_ms * 1e6), "GB/s", link_gbps, "one-way link");
    report.variant("the local kernel alone (read + write)", local_ms, 2.0 * bytes / (local_ms * 1e6), "GB/s");
    if (!a_can_read_b) {
        std::printf("  kernel reading GPU %d's memory: no peer access from GPU %d, skipped\n", b, a);
        report.note("direct peer read skipped: cudaDeviceCanAccessPeer says GPU " + std::to_string(a) +
                    " cannot access GPU " + std::to_string(b));
        return;
    }
    auto direct = [&] {
        multigpu::scaleCopy4<<<grid, multigpu::kThreads, 0, p.s_a>>>(reinterpret_cast<float4*>(p.d_out),
                                                                     reinterpret_cast<const float4*>(p.d_b_src), n4);
        CUDA_CHECK_LAUNCH();
    };
    poison(p, p.d_out, a, p.s_a);
    direct();
    CUDA_CHECK(cudaStreamSynchronize(p.s_a));
    report.check(check_device(p.d_out, p.n, want2, "kernel on GPU a reading GPU b's memory directly: dst = 2 * src",
                              false, p.seed));
    const double direct_ms = lesson::time_median_ms(int(o.common.repeat), direct, p.s_a);
    report.variant_yardstick("kernel reads the peer's memory directly (bytes of src)", direct_ms,
                             bytes / (direct_ms * 1e6), "GB/s", link_gbps, "one-way link");
    report.metric("direct peer read over copy-then-read", copy_first_ms / direct_ms, "x");
}

static void free_peer_pair(PeerPair& p) {
    CUDA_CHECK(cudaFree(p.d_a_src));
    CUDA_CHECK(cudaFree(p.d_a_dst));
    CUDA_CHECK(cudaFree(p.d_out));
    CUDA_CHECK(cudaStreamDestroy(p.s_a));
    CUDA_CHECK(cudaSetDevice(p.b));
    CUDA_CHECK(cudaFree(p.d_b_src));
    CUDA_CHECK(cudaFree(p.d_b_dst));
    CUDA_CHECK(cudaStreamDestroy(p.s_b));
    CUDA_CHECK(cudaSetDevice(p.a));
}

struct PeerResult {
    double link_gbps = NAN;  // one way, GPU 0 -> GPU 1: the fastest peer copy of the run
};

static PeerResult part_peer(const Options& o, const std::vector<int>& dev, lesson::Report& report) {
    const int a = dev[0], b = dev[1];
    const std::vector<std::vector<int>> can = enable_peer_access(dev);
    std::printf("part 2: peer to peer between GPU %d and GPU %d, %llu MiB\n", a, b, (unsigned long long)o.p2p_mib);
    for (size_t i = 0; i < dev.size(); ++i)
        for (size_t j = 0; j < dev.size(); ++j)
            if (i != j) std::printf("  cudaDeviceCanAccessPeer(GPU %d -> GPU %d) = %d\n", dev[i], dev[j], can[i][j]);
    report.config("peer_access_0_to_1", int64_t(can[0][1]));
    report.config("peer_access_1_to_0", int64_t(can[1][0]));

    PeerPair p = make_peer_pair(a, b, uint64_t(o.p2p_mib) << 20, uint64_t(o.common.seed));
    const OneWay link = one_way(p, o, report);
    both_ways(p, o, link.link_gbps, report);
    peer_read(p, o, can[0][1] != 0, link.link_gbps, report);
    report.target("cudaMemcpyPeerAsync in 16 MiB pieces, of the one-way link",
                  p.bytes / (link.pieces_ms * 1e6) / link.link_gbps, 0.85);
    free_peer_pair(p);
    PeerResult res;
    res.link_gbps = link.link_gbps;
    return res;
}
