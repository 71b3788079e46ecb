// Lesson 22 of the course (several GPUs), part 3: the all-reduce in one process (2+ GPUs). NCCL
// with ncclCommInitAll, 4 KiB to 1 GiB, reported as nccl-tests does (algbw, busbw), and a ring
// all-reduce written with peer copies and an add kernel, checked bit for bit against NCCL and the
// CPU. Before: part 2, peer to peer (part_peer.cuh). Next: part 4, one process per GPU (part_ranks.cuh).
// Run: ./build/bin/multi_gpu --part=3   (README.md is the handout)
#pragma once
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "common/check.h"
#include "common/memory.h"
#include "common/report.h"
#include "common/timer.h"
#include "verify/multi_gpu.h"

#include "kernels/multi_gpu.cuh"
#include "options.cuh"
#include "part_peer.cuh"  // enable_peer_access

// One rank of the all-reduce: its GPU, stream, input x, NCCL's result, the ring's result y, the
// ring's receive buffer tmp (one chunk), and two events the ring orders its neighbours with.
struct Rank {
    int device = 0, sms = 0;
    cudaStream_t stream{};
    float *d_x = nullptr, *d_nccl = nullptr, *d_y = nullptr, *d_tmp = nullptr;
    cudaEvent_t sent{}, added{};  // sent: my last copy into my right neighbour landed; added: my last add ran
};

// One rank per GPU, each with buffers for `max_bytes` and rank r's input in x.
static std::vector<Rank> make_ranks(const std::vector<int>& dev, uint64_t max_bytes, uint64_t seed) {
    const int P = int(dev.size());
    const uint64_t max_n = max_bytes / 4;
    std::vector<Rank> rk(static_cast<size_t>(P));
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
        multigpu::fillAllreduceInput<<<multigpu::grid_for(max_n, me.sms), multigpu::kThreads, 0, me.stream>>>(
            me.d_x, max_n, seed, r);
        CUDA_CHECK_LAUNCH();
    }
    return rk;
}

static void free_ranks(std::vector<Rank>& rk) {
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
}

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
                multigpu::addChunk<<<multigpu::grid_for(c.count, me.sms), multigpu::kThreads, 0, me.stream>>>(
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
// verify::burst_calls(bytes) calls, each burst ended by `sync_all` (waits until every stream is
// done); median of `samples` bursts. nccl-tests times the same way (host clock around a loop of calls).
template <class Fn, class Sync>
static double burst_ms(uint64_t bytes, int samples, Fn allreduce, Sync sync_all) {
    const int calls = verify::burst_calls(bytes);
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
// The same, each burst ended by synchronizing every stream in `streams`.
template <class Fn>
static double burst_ms(const std::vector<cudaStream_t>& streams, uint64_t bytes, int samples, Fn allreduce) {
    return burst_ms(bytes, samples, allreduce, [&] {
        for (cudaStream_t s : streams) CUDA_CHECK(cudaStreamSynchronize(s));
    });
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

// What the sweep found at each size: every rank's results checked exactly, and the times.
struct Sweep {
    std::vector<uint64_t> sizes;
    std::vector<double> nccl_ms, ring_ms;
    lesson::Check nccl_check, ring_check, ring_vs_nccl;
};

// At each size: poison both results, run NCCL's all-reduce (where `have_nccl`) and the ring once,
// check every element of every rank's results against the CPU's exact sum (and the ring against
// NCCL bit for bit), then time each.
template <class Nccl>
static Sweep sweep(std::vector<Rank>& rk, const std::vector<cudaStream_t>& streams, const Options& o, bool have_nccl,
                   Nccl nccl_allreduce) {
    const int P = int(rk.size());
    const uint64_t max_bytes = uint64_t(o.max_mib) << 20, max_n = max_bytes / 4, seed = uint64_t(o.common.seed);
    Sweep sw;
    sw.sizes = verify::sweep_sizes(max_bytes);
    sw.nccl_ms.assign(sw.sizes.size(), NAN);
    sw.ring_ms.assign(sw.sizes.size(), NAN);
    std::vector<float> h_nccl(max_n), h_ring(max_n);
    bool inject = o.common.inject_fault;
    for (size_t si = 0; si < sw.sizes.size(); ++si) {
        const uint64_t bytes = sw.sizes[si], count = bytes / 4;
        for (Rank& me : rk) {  // poison both results
            CUDA_CHECK(cudaSetDevice(me.device));
            CUDA_CHECK(cudaMemsetAsync(me.d_nccl, 0xFF, bytes, me.stream));
            CUDA_CHECK(cudaMemsetAsync(me.d_y, 0xFF, bytes, me.stream));
        }
        if (have_nccl) nccl_allreduce(count);
        ring_allreduce(rk, count);
        for (int r = 0; r < P; ++r) {  // every rank's results, every element, exactly
            CUDA_CHECK(cudaStreamSynchronize(rk[size_t(r)].stream));
            CUDA_CHECK(cudaMemcpy(h_ring.data(), rk[size_t(r)].d_y, bytes, cudaMemcpyDeviceToHost));
            if (inject) verify::inject_fault(h_ring.data(), count, seed);
            inject = false;
            merge_check(sw.ring_check, verify::check_allreduce(h_ring.data(), count, seed, P, ""));
            if (have_nccl) {
                CUDA_CHECK(cudaMemcpy(h_nccl.data(), rk[size_t(r)].d_nccl, bytes, cudaMemcpyDeviceToHost));
                merge_check(sw.nccl_check, verify::check_allreduce(h_nccl.data(), count, seed, P, ""));
                merge_check(sw.ring_vs_nccl, verify::check_same_bits(h_ring.data(), h_nccl.data(), count, ""));
            }
        }
        const int S = int(o.common.repeat);
        if (have_nccl) sw.nccl_ms[si] = burst_ms(streams, bytes, S, [&] { nccl_allreduce(count); });
        sw.ring_ms[si] = burst_ms(streams, bytes, S, [&] { ring_allreduce(rk, count); });
    }
    return sw;
}

struct AllreduceResult {
    double nccl_ms = NAN, ring_ms = NAN;  // at the largest size
};

// The checks, the nccl-tests tables, and each size's bus bandwidth against the link (or NCCL).
static AllreduceResult report_sweep(Sweep& sw, int P, bool have_nccl, double link_gbps, lesson::Report& report) {
    const std::vector<uint64_t>& sizes = sw.sizes;
    const std::string every = "every element of every rank's result, " + std::to_string(sizes.size()) + " sizes";
    sw.ring_check.what = "hand-written ring all-reduce vs the exact sum (CPU), " + every;
    report.check(sw.ring_check);
    if (have_nccl) {
        sw.nccl_check.what = "NCCL all-reduce (ncclCommInitAll) vs the exact sum (CPU), " + every;
        sw.ring_vs_nccl.what = "hand-written ring vs NCCL, bit for bit, " + every;
        report.check(sw.nccl_check);
        report.check(sw.ring_vs_nccl);
        print_table_head("NCCL all-reduce, one process (ncclCommInitAll), out of place:");
        for (size_t si = 0; si < sizes.size(); ++si) print_table_row(sizes[si], sw.nccl_ms[si], P, 0);
    }
    print_table_head("hand-written ring (cudaMemcpyPeerAsync + addChunk), out of place:");
    for (size_t si = 0; si < sizes.size(); ++si) print_table_row(sizes[si], sw.ring_ms[si], P, 0);
    std::printf("  (#wrong: see the checks below; busbw = algbw * 2(P-1)/P, nccl-tests' definition)\n");

    const double factor = verify::allreduce_busbw_factor(P);
    for (size_t si = 0; si < sizes.size(); ++si) {
        const std::string sz = std::to_string(sizes[si]) + " B";
        const double nccl_ms = sw.nccl_ms[si], ring_ms = sw.ring_ms[si];
        const double nbus = verify::algbw_gbps(double(sizes[si]), nccl_ms) * factor;
        const double rbus = verify::algbw_gbps(double(sizes[si]), ring_ms) * factor;
        if (have_nccl) {
            if (std::isfinite(link_gbps))
                report.variant_yardstick("NCCL all-reduce " + sz + ", busbw", nccl_ms, nbus, "GB/s", link_gbps,
                                         "one-way link");
            else report.variant("NCCL all-reduce " + sz + ", busbw", nccl_ms, nbus, "GB/s");
            report.variant_yardstick("ring all-reduce " + sz + ", busbw", ring_ms, rbus, "GB/s", nbus, "NCCL");
        } else if (std::isfinite(link_gbps)) {
            report.variant_yardstick("ring all-reduce " + sz + ", busbw", ring_ms, rbus, "GB/s", link_gbps,
                                     "one-way link");
        } else {
            report.variant("ring all-reduce " + sz + ", busbw", ring_ms, rbus, "GB/s");
        }
    }
    AllreduceResult res;
    res.nccl_ms = sw.nccl_ms.back();
    res.ring_ms = sw.ring_ms.back();
    if (have_nccl) {
        report.metric("NCCL all-reduce busbw at " + std::to_string(sizes.back() >> 20) + " MiB, " + std::to_string(P) +
                          " GPUs",
                      verify::algbw_gbps(double(sizes.back()), res.nccl_ms) * factor, "GB/s");
        report.target("ring all-reduce within 2x of NCCL (NCCL time / ring time)", res.nccl_ms / res.ring_ms, 0.5, "x");
    }
    return res;
}

static AllreduceResult part_allreduce(const Options& o, const std::vector<int>& dev, double link_gbps,
                                      lesson::Report& report) {
    const int P = int(dev.size());
    const uint64_t max_bytes = uint64_t(o.max_mib) << 20;
    const std::vector<uint64_t> sizes = verify::sweep_sizes(max_bytes);
    enable_peer_access(dev);  // the ring's copies go over the link directly where they can
    std::vector<Rank> rk = make_ranks(dev, max_bytes, uint64_t(o.common.seed));
    std::vector<cudaStream_t> streams;
    for (const Rank& me : rk) streams.push_back(me.stream);
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
#else
    auto nccl_allreduce = [](uint64_t) {};  // never called: without NCCL, o.use_nccl is false
#endif
    const bool have_nccl = o.use_nccl;
    std::printf("part 3: all-reduce of floats over %d GPUs in one process, %llu B to %llu B%s\n", P,
                (unsigned long long)sizes.front(), (unsigned long long)sizes.back(),
                have_nccl ? " (NCCL, ncclCommInitAll; then the hand-written ring)" : " (the hand-written ring)");

    Sweep sw = sweep(rk, streams, o, have_nccl, nccl_allreduce);
    const AllreduceResult res = report_sweep(sw, P, have_nccl, link_gbps, report);
#if LESSON_HAVE_NCCL
    if (have_nccl)
        for (ncclComm_t c : comms) NCCL_CHECK(ncclCommDestroy(c));
#endif
    free_ranks(rk);
    return res;
}
