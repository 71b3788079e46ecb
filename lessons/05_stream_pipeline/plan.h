// Lesson 05 (stream pipeline), the host side of main.cu: the run's plan (chunks and the staging
// pool), the PCIe bound measured in this run, the prediction printed before anything is timed,
// the summary that closes the report, and the check of C. No stream, copy or kernel here.
// Run: ./build/bin/stream_pipeline [--quick]   (README.md is the handout)
#pragma once
#include <algorithm>
#include <cstdio>
#include <string>

#include "common/ceilings.h"
#include "common/launch.h"
#include "common/report.h"
#include "verify/chunked.h"
#include "verify/compare.h"
#include "verify/parallel.h"

// What every variant reads and writes on the host. The inputs are staged before
// any timing: `pool` chunks of A and B (all of them when they fit in 1 GiB;
// otherwise chunk i reads pool entry i % pool). The output C is full size.
struct Work {
    lesson::ChunkPlan plan;  // chunks of `chunk` matrices; the last may be shorter
    size_t nn = 0;           // elements per matrix (n * n)
    size_t chunk_elems = 0;  // elements per full chunk
    uint64_t pool = 0;       // staged input chunks
    uint64_t seed = 0;       // A[g] = hash_uniform(seed, g), B[g] = hash_uniform(seed + 1, g) (verify/chunked.h)
    int work = 1;            // --work: adds per element in the kernel
    const float* staged(const float* base, uint64_t i) const { return base + (i % pool) * chunk_elems; }
    size_t elems(uint64_t i) const { return plan.at(i).count * nn; }
    size_t offset(uint64_t i) const { return plan.at(i).first * nn; }
    size_t chunk_bytes() const { return chunk_elems * sizeof(float); }
    size_t total_elems() const { return plan.total * nn; }  // every matrix of C
    size_t total_bytes() const { return total_elems() * sizeof(float); }
};

inline Work plan_work(int64_t matrices, int64_t chunk, int64_t n, int64_t seed, int64_t work) {
    Work w;
    w.nn = static_cast<size_t>(n) * static_cast<size_t>(n);
    w.plan = lesson::plan_chunks(static_cast<uint64_t>(matrices), static_cast<uint64_t>(chunk));
    w.chunk_elems = static_cast<size_t>(chunk) * w.nn;
    w.pool = std::min<uint64_t>(w.plan.count, std::max<uint64_t>(1, (size_t(1) << 30) / (2 * w.chunk_bytes())));
    w.seed = static_cast<uint64_t>(seed);
    w.work = static_cast<int>(work);
    return w;
}

// The link, measured now at the chunk's size as the pipeline issues its copies (bursts of
// back-to-back chunk copies, best of several trials): each direction alone and both at once.
struct Link {
    lesson::LinkRates pinned, pageable;
    double h2d_bytes = 0, d2h_bytes = 0, bytes = 0;  // a run moves A and B up, C down
    double up_ms = 0, down_ms = 0;                   // each direction alone at the pinned rates
    double bound_ms = 0, pageable_bound_ms = 0;      // the PCIe bound of a run, pinned and pageable
    double gbps(double ms) const { return bytes / (ms * 1e6); }
};

inline Link measure_link(lesson::Report& report, const Work& w) {
    Link l;
    l.pinned = lesson::measure_link_gbps(w.chunk_bytes(), true);
    l.pageable = lesson::measure_link_gbps(w.chunk_bytes(), false);
    report.bound("H2D pinned, burst of chunk copies", l.pinned.h2d, "GB/s");
    report.bound("D2H pinned, burst of chunk copies", l.pinned.d2h, "GB/s");
    report.bound("H2D + D2H pinned at once", l.pinned.both, "GB/s");
    // Pageable copies are staged by a CPU memcpy: their rate is a yardstick, not a bound.
    report.yardstick("H2D pageable, burst of chunk copies", l.pageable.h2d, "GB/s");
    report.yardstick("D2H pageable, burst of chunk copies", l.pageable.d2h, "GB/s");
    const size_t total_bytes = w.total_bytes();
    l.h2d_bytes = 2.0 * total_bytes, l.d2h_bytes = 1.0 * total_bytes, l.bytes = l.h2d_bytes + l.d2h_bytes;
    l.up_ms = l.h2d_bytes / (l.pinned.h2d * 1e6), l.down_ms = l.d2h_bytes / (l.pinned.d2h * 1e6);
    l.bound_ms = lesson::link_bound_ms(l.h2d_bytes, l.d2h_bytes, l.pinned);
    l.pageable_bound_ms = lesson::link_bound_ms(l.h2d_bytes, l.d2h_bytes, l.pageable);
    return l;
}

// The prediction, printed before anything is timed.
inline void print_prediction(const Work& w, const Link& l, double kernels_ms) {
    std::printf("prediction from the link rates measured now (chunk of %.2f MB, %llu chunks):\n", w.chunk_bytes() / 1e6,
                (unsigned long long)w.plan.count);
    std::printf("  sequential, pinned : >= %.2f ms = H2D %.2f + kernels %.2f + D2H %.2f, one after another\n",
                l.up_ms + kernels_ms + l.down_ms, l.up_ms, kernels_ms, l.down_ms);
    std::printf("  pipelined          : >= %.2f ms = PCIe bound max(H2D %.2f, D2H %.2f, both at once %.2f)\n",
                l.bound_ms, l.up_ms, l.down_ms, l.bytes / (l.pinned.both * 1e6));
    std::printf(
        "  => overlap can gain at most %.2fx over sequential pinned: the copies, not the kernel, are the work\n",
        (l.up_ms + kernels_ms + l.down_ms) / l.bound_ms);
}

// The summary: every variant against the bound, and why more streams stop helping.
inline void report_summary(lesson::Report& report, const Work& w, const Link& l, double seq_pinned_ms, double best_ms,
                           int best_S, double loader_ms) {
    report.metric("PCIe bound (pinned rates of this run)", l.bound_ms, "ms");
    report.metric("pipelined best / PCIe bound", l.bound_ms / best_ms, "");
    report.metric("bound speedup over (b) sequential pinned", seq_pinned_ms / l.bound_ms, "x");
    report.metric("achieved speedup over (b), best pipelined", seq_pinned_ms / best_ms, "x");
    report.metric("a loader must deliver A and B at", l.h2d_bytes / (best_ms * 1e6), "GB/s");
    report.metric("(d) A and B delivered through the memcpy loader at", l.h2d_bytes / (loader_ms * 1e6), "GB/s");
    report.metric("(d) streams (the best count of (c))", best_S, "");
    report.note(
        "(a)-(c) timed: transfers and kernels only, inputs staged in pinned memory before, outputs verified "
        "after; (d) also times the loader's memcpy of every chunk, on 1 host thread");
    if (w.pool < w.plan.count)
        report.note("inputs: " + std::to_string(w.pool) + " chunks staged (1 GiB), chunk i reads staged chunk i % " +
                    std::to_string(w.pool));
    report.note("once the H2D link is busy all the time, more streams only queue more chunks on the same link");
    char key[128];
    std::snprintf(key, sizeof key, "pipelined %d streams %.2f ms, %.2fx over sequential pinned (bound %.2fx)", best_S,
                  best_ms, seq_pinned_ms / best_ms, seq_pinned_ms / l.bound_ms);
    report.key_result(key, l.bound_ms / best_ms, "PCIe bound", lesson::Against::Bound);
}

// Every element of C against the reference (lesson 04's, from each element's global index: a
// chunk copied from the wrong pool entry or the wrong slot, or overwritten before its copy,
// fails). The chunks lie one after another, so C is compared in one pass.
inline lesson::Check verify_output(const Work& w, const verify::host_vector<double>& ref, const float* h_c,
                                   const std::string& what) {
    verify::Comparer cmp(1e-5, verify::uniform_sum_rms());
    cmp.add(h_c, ref.data(), w.total_elems(), 0);
    return cmp.result(what);
}
