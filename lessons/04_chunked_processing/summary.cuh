// Lesson 04 of the course (chunked processing): the report. The link's rates (pinned copies
// the PCIe bound, pageable copies the yardstick), the DRAM bound of addChunk alone, and the
// loop's times against them, with the key result and its target. Included by main.cu.
// Before: main.cu runs, times and checks the chunk loop. Next: lesson 05 (05_stream_pipeline).
// Run: ./build/bin/chunked_processing [--quick]   (README.md is the handout)
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>

#include "common/ceilings.h"
#include "common/device.h"
#include "common/flags.h"
#include "common/report.h"
#include "common/timer.h"

// What main.cu measured: the loop's times summed over chunks (host clock for the pageable
// copies and the host work, events for the kernel), the whole loop's wall time, and addChunk
// alone over one full chunk, back to back (add_bytes: its reads and writes).
struct LoopTimes {
    double gen_ms, h2d_ms, kernel_ms, d2h_ms, verify_ms, wall_ms;
    double add_ms, add_bytes;
};

// The link, measured before the loop's buffers exist, in bursts of back-to-back chunk-sized
// copies, each direction alone, best of several trials:
//  - pinned copies: the PCIe link itself, a bound no copy can beat;
//  - pageable copies, as the loop issues them: the driver stages them through a pinned
//    buffer with a CPU memcpy, so their rate depends on the host's caches and memory,
//    and a later copy can run faster. A yardstick, not a bound.
inline void report_link(lesson::Report& report, const lesson::LinkRates& pinned, const lesson::LinkRates& link) {
    report.bound("H2D pinned cudaMemcpyAsync, chunk-sized burst", pinned.h2d, "GB/s");
    report.bound("D2H pinned cudaMemcpyAsync, chunk-sized burst", pinned.d2h, "GB/s");
    report.yardstick("H2D pageable cudaMemcpy, chunk-sized burst", link.h2d, "GB/s");
    report.yardstick("D2H pageable cudaMemcpy, chunk-sized burst", link.d2h, "GB/s");
}

// The DRAM bound of addChunk's mix (2 reads : 1 write), measured now, unless one full
// chunk fits in L2 (then DRAM is not its limit and nothing is graded against it).
inline lesson::StreamBound dram_bound(lesson::Report& report, double add_bytes, const cudaDeviceProp& prop,
                                      int device) {
    const std::string add_in_l2 = lesson::l2_note(add_bytes, prop);
    const lesson::StreamBound dram = add_in_l2.empty() ? lesson::measure_stream_bound(prop, 2, 1)
                                                       : lesson::stream_bound_not_measured(2, 1, add_in_l2);
    lesson::add_bound(report, dram, device);
    return dram;
}

// "End-to-end" is the GPU side of the loop: H2D + kernel + D2H of every chunk. Generating
// and verifying are host work outside it (shown apart).
inline void report_loop(lesson::Report& report, const lesson::Cli& cli, const LoopTimes& t,
                        const lesson::LinkRates& pinned, const lesson::LinkRates& link, double dram_gbps,
                        uint64_t total_elems, int64_t matrices, int64_t chunk, const cudaDeviceProp& prop) {
    const double h2d_bytes = 2.0 * total_elems * sizeof(float), d2h_bytes = 1.0 * total_elems * sizeof(float);
    const double e2e_ms = t.h2d_ms + t.kernel_ms + t.d2h_ms;
    // The loop's blocking cudaMemcpy calls copy one direction after the other, so both times are
    // H2D time + D2H time: at the pinned rates (the PCIe bound for this loop; lesson 05's bound,
    // with the directions overlapped, is one it cannot reach) and at the pageable rates (the
    // yardstick: the same copies in a burst, no kernel, no host work).
    const double bound_ms = h2d_bytes / (pinned.h2d * 1e6) + d2h_bytes / (pinned.d2h * 1e6);
    const double pageable_ms = h2d_bytes / (link.h2d * 1e6) + d2h_bytes / (link.d2h * 1e6);
    const double moved = h2d_bytes + d2h_bytes;
    report.bound("PCIe bound of the loop's copies (pinned rates, H2D then D2H)", moved / (bound_ms * 1e6), "GB/s");
    report.yardstick("pageable copies alone (H2D then D2H)", moved / (pageable_ms * 1e6), "GB/s");
    report.timing(
        "each chunk's copies and kernel timed to completion (host clock for the pageable copies, events "
        "for the kernel), summed over chunks; 'addChunk alone': " +
        std::string(lesson::kTimingMethod));
    report.variant_bound("chunk loop end-to-end: H2D + add + D2H", e2e_ms, moved / (e2e_ms * 1e6), "GB/s",
                         moved / (bound_ms * 1e6), "PCIe bound");
    report.variant_yardstick("chunk loop end-to-end vs pageable copies alone", e2e_ms, moved / (e2e_ms * 1e6), "GB/s",
                             moved / (pageable_ms * 1e6), "pageable copies");
    report.variant_yardstick("H2D: cudaMemcpy of A and B (pageable)", t.h2d_ms, h2d_bytes / (t.h2d_ms * 1e6), "GB/s",
                             link.h2d, "pageable burst");
    report.variant("add: addChunk kernel", t.kernel_ms, 3.0 * total_elems * sizeof(float) / (t.kernel_ms * 1e6),
                   "GB/s");
    report.variant_bound("add: addChunk alone, one full chunk, back to back", t.add_ms, t.add_bytes / (t.add_ms * 1e6),
                         "GB/s", dram_gbps, "DRAM bound", lesson::l2_note(t.add_bytes, prop));
    report.variant_yardstick("D2H: cudaMemcpy of C (pageable)", t.d2h_ms, d2h_bytes / (t.d2h_ms * 1e6), "GB/s",
                             link.d2h, "pageable burst");
    report.metric("host: generate A and B", t.gen_ms, "ms");
    report.metric("host: verify C", t.verify_ms, "ms");
    report.metric("whole loop, host work included", t.wall_ms, "ms");
    report.metric("transfers + kernel share of the whole loop", 100.0 * e2e_ms / t.wall_ms, "%");
    report.note(
        "end-to-end = sum over chunks of H2D + kernel + D2H, each timed to completion; generating and "
        "verifying the chunks happen outside it, on the host");

    char key[128];
    std::snprintf(key, sizeof key, "chunk loop %.1f GB/s end-to-end, %lld matrices in chunks of %lld",
                  moved / (e2e_ms * 1e6), (long long)matrices, (long long)chunk);
    report.key_result(key, pageable_ms / e2e_ms, "pageable copies alone", lesson::Against::Yardstick);
    report.default_size(cli.at_default_size());
    report.target("chunk loop vs the pageable copies alone", pageable_ms / e2e_ms, 0.80, "x");
}
