// Lesson 05 of the course (00-24): stream pipeline, copies overlapping kernels.
// Before: lesson 04 (04_chunked_processing). Next: lesson 06 (06_tiled_matmul).
// Run: ./build/bin/stream_pipeline [--quick]   (--help lists every flag; README.md is the handout)
//
// The chunked matrix add of lesson 04, with the copies of one chunk overlapping the copies and
// kernel of the next: pinned host memory (cudaMallocHost), cudaMemcpyAsync, one stream and one set
// of device buffers per slot, chunks dealt to the slots round-robin, and an event per slot that
// says when the slot may be reused. Timed side by side against the PCIe bound measured in the same
// run: (a) lesson 04's sequential pageable loop, (b) the same loop on pinned memory, (c) the
// pipeline with 1, 2, 3, 4 and 8 streams, (d) the pipeline fed by a loader that copies each chunk
// into its slot's own pinned buffers. Every element of C is checked against a reference computed
// from its global index (lesson 04's). The run's plan and summary: plan.h; --timeline: timeline.cuh.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common/check.h"
#include "common/device.h"
#include "common/flags.h"
#include "common/launch.h"
#include "common/memory.h"
#include "common/report.h"
#include "common/timer.h"
#include "verify/chunked.h"
#include "verify/parallel.h"
#include "verify/random.h"

#include "plan.h"
#include "slots.cuh"
#include "timeline.cuh"

// C = A + B over one chunk of matrices, seen as one flat run of floats. A
// grid-stride loop: one launch of a fixed grid covers a chunk of any size.
// --work=K makes the kernel heavier without changing C (exercises 3 and 4): it
// repeats s = (s - y) + y, which is exact here (s = x + y is exact for these
// inputs, so s - y is x again), and which the compiler may not fold away
// (floating-point additions are not reassociated).
__global__ void addMatrices(const float* a, const float* b, float* c, size_t count, int work) {
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
        const float y = b[i];
        float sum = a[i] + y;
        for (int k = 1; k < work; ++k) sum = (sum - y) + y;
        c[i] = sum;
    }
}

constexpr int kThreads = 256;
static unsigned blocks_for(size_t count) {
    return static_cast<unsigned>(std::min<uint64_t>(lesson::ceil_div(count, kThreads), 4096));
}

// (a) and (b): lesson 04's loop. cudaMemcpy blocks the host, so nothing overlaps:
// copy A, copy B, add, copy C back, next chunk. h_a/h_b/h_c pageable or pinned.
static void run_sequential(const Work& w, const float* h_a, const float* h_b, float* h_c, const Slot& s) {
    for (uint64_t i = 0; i < w.plan.count; ++i) {
        const size_t count = w.elems(i), bytes = count * sizeof(float);
        CUDA_CHECK(cudaMemcpy(s.d_a, w.staged(h_a, i), bytes, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(s.d_b, w.staged(h_b, i), bytes, cudaMemcpyHostToDevice));
        addMatrices<<<blocks_for(count), kThreads>>>(s.d_a, s.d_b, s.d_c, count, w.work);
        CUDA_CHECK_LAUNCH();
        CUDA_CHECK(cudaMemcpy(h_c + w.offset(i), s.d_c, bytes, cudaMemcpyDeviceToHost));
    }
}

// (c) and (d): the pipeline. Chunk i goes to slot i % S; everything it needs is
// queued on that slot's stream with cudaMemcpyAsync, so the host races ahead and
// the copy engines and SMs work on several chunks at once. With a `loader` (d),
// the host first copies chunk i's inputs from the staged pool into the slot's own
// pinned buffers, as a program that reads its data just in time would. `marks`
// (optional) gets 4 events per chunk: before H2D, after H2D, after the kernel,
// after D2H.
//
// Fork/join: the slots' streams are non-blocking, so nothing orders them with the
// legacy default stream (0), on which the caller records its timing events. The
// run forks from stream 0 (every slot waits for an event recorded there) and
// joins back into it (stream 0 waits for every slot's last event), so an event
// pair on stream 0 spans the whole run.
static void run_pipelined(const Work& w, const float* h_a, const float* h_b, float* h_c, std::vector<Slot>& slots,
                          int S, cudaEvent_t fork, bool loader, std::vector<cudaEvent_t>* marks = nullptr) {
    CUDA_CHECK(cudaEventRecord(fork, 0));
    for (int k = 0; k < S; ++k) CUDA_CHECK(cudaStreamWaitEvent(slots[k].stream, fork, 0));  // fork
    for (uint64_t i = 0; i < w.plan.count; ++i) {
        Slot& s = slots[i % S];
        const size_t count = w.elems(i), bytes = count * sizeof(float);
        auto mark = [&](int k) {
            if (marks) CUDA_CHECK(cudaEventRecord((*marks)[4 * i + k], s.stream));
        };
        // The slot last carried chunk i - S, whose copies were only queued. Wait for them
        // before reusing the slot: the loader below refills the slot's pinned inputs, which
        // chunk i - S's H2D copies may not have read yet (README, Pitfalls). It also keeps at
        // most S chunks in flight. The device buffers alone would be safe by stream order.
        CUDA_CHECK(cudaEventSynchronize(s.done));
        const float* src_a = w.staged(h_a, i);
        const float* src_b = w.staged(h_b, i);
        if (loader) {  // (d): chunk i's inputs into the slot's pinned buffers; the copies read those
            std::memcpy(s.h_a, src_a, bytes);
            std::memcpy(s.h_b, src_b, bytes);
            src_a = s.h_a;
            src_b = s.h_b;
        }
        // EXERCISE 1 BEGIN: queue chunk i on the slot's stream: copy A and B in, add, copy C out, record s.done
        // HINT: cudaMemcpyAsync(dst, src, bytes, kind, s.stream) from src_a / src_b; C goes to its place in h_c
        // HINT: mark(0) before the copies in, mark(1) after them, mark(2) after the kernel, mark(3) after the copy out
        // STUB: (void)mark;  // the timeline's events: mark(0) .. mark(3) belong around your steps
        mark(0);
        CUDA_CHECK(cudaMemcpyAsync(s.d_a, src_a, bytes, cudaMemcpyHostToDevice, s.stream));
        CUDA_CHECK(cudaMemcpyAsync(s.d_b, src_b, bytes, cudaMemcpyHostToDevice, s.stream));
        mark(1);
        addMatrices<<<blocks_for(count), kThreads, 0, s.stream>>>(s.d_a, s.d_b, s.d_c, count, w.work);
        CUDA_CHECK_LAUNCH();
        mark(2);
        CUDA_CHECK(cudaMemcpyAsync(h_c + w.offset(i), s.d_c, bytes, cudaMemcpyDeviceToHost, s.stream));
        mark(3);
        CUDA_CHECK(cudaEventRecord(s.done, s.stream));
        // EXERCISE 1 END
    }
    for (int k = 0; k < S; ++k) CUDA_CHECK(cudaStreamWaitEvent(0, slots[k].done, 0));  // join
}

int main(int argc, char** argv) {
    // Flags first: bad input exits 2 before any CUDA call.
    lesson::CommonOptions opt;
    opt.repeat = 10;
    int64_t matrices = 2048, chunk = 16, n = 256, streams = 0, work = 1;
    std::string timeline_path;
    lesson::Cli cli(
        "stream_pipeline",
        "C = A + B over --matrices n x n float matrices, --chunk at a time: sequential (pageable, pinned),\n"
        "pipelined over streams, and pipelined behind a memcpy loader, all timed against the PCIe bound\n"
        "measured in the same run.");
    lesson::add_common_flags(cli, opt);
    cli.add_int("matrices", &matrices, 1, 1000000, "matrices in all", 32);
    cli.add_int("chunk", &chunk, 1, 1000000, "matrices per chunk (at most --matrices)", 2);
    cli.add_int("n", &n, 1, 8192, "matrix side (n x n floats)");
    cli.add_int("streams", &streams, 1, 16, "pipeline streams (slots); without it: 1, 2, 3, 4 and 8 side by side");
    cli.add_int("work", &work, 1, 1000000, "adds per element in the kernel: a heavier kernel, same C (exercises 3, 4)");
    cli.add_output("timeline", &timeline_path, "write an SVG Gantt chart of 1 stream vs the fastest stream count");
    cli.parse_or_exit(argc, argv);
    if (chunk > matrices)
        lesson::bad_input("--chunk=" + std::to_string(chunk) + " is larger than --matrices=" +
                          std::to_string(matrices) + "; allowed: --chunk in [1, --matrices]");
    std::vector<int> stream_counts = {1, 2, 3, 4, 8};
    if (cli.given("streams")) stream_counts = {static_cast<int>(streams)};
    const int S_max = *std::max_element(stream_counts.begin(), stream_counts.end());
    std::FILE* timeline_file = open_timeline(timeline_path);

    const Work w = plan_work(matrices, chunk, n, opt.seed, work);
    const size_t chunk_bytes = w.chunk_bytes(), total_elems = w.total_elems(), total_bytes = w.total_bytes();
    const size_t pool_elems = w.pool * w.chunk_elems, pool_bytes = 2 * pool_elems * sizeof(float);  // A and B
    // Host: the input pool pinned and pageable, C pinned and pageable, the double reference of C,
    // the loader's pinned inputs (2 chunks per slot), the link test's buffers. GPU: 3 chunks per slot.
    const std::string sizes = "--matrices=" + std::to_string(matrices) + " --chunk=" + std::to_string(chunk) +
                              " --n=" + std::to_string(n) + " --streams=" + std::to_string(S_max);
    lesson::require_host_memory(2 * pool_bytes + 2 * total_bytes + 2 * total_bytes +
                                    (4 + 2 * uint64_t(S_max)) * chunk_bytes,
                                "pinned + pageable", sizes);
    cudaDeviceProp prop = lesson::pick_device(opt.device);
    lesson::require_device_memory(3 * static_cast<uint64_t>(S_max) * chunk_bytes, sizes);

    lesson::Report report("05_stream_pipeline");
    report.device(prop);
    report.config_from(cli);
    report.config("chunks", static_cast<int64_t>(w.plan.count));
    report.config("chunk_mb", chunk_bytes / 1e6);
    report.config("staged_input_chunks", static_cast<int64_t>(w.pool));

    // The reference of C: A + B in double, from each element's global index (verify/chunked.h).
    lesson::HostTimer cpu;
    verify::host_vector<double> ref(total_elems);  // not zeroed: every element is set
    verify::pooled_add_reference(ref.data(), total_elems, w.seed, w.chunk_elems, w.pool);
    report.cpu_reference_ms(cpu.ms(), verify::host_threads());
    const Link link = measure_link(report, w);  // the PCIe bound, measured now at the chunk's size (plan.h)

    // 1. Allocate. Pinned (page-locked) host memory: the copy engines read and write
    //    it directly, which is what lets cudaMemcpyAsync run while the host goes on.
    float *h_a = nullptr, *h_b = nullptr, *h_c = nullptr;
    CUDA_CHECK(cudaMallocHost(&h_a, pool_elems * sizeof(float)));
    CUDA_CHECK(cudaMallocHost(&h_b, pool_elems * sizeof(float)));
    CUDA_CHECK(cudaMallocHost(&h_c, total_bytes));
    std::vector<Slot> slots = make_slots(S_max, chunk_bytes);
    cudaEvent_t fork = nullptr;  // recorded on stream 0 where a pipelined run starts
    CUDA_CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));

    // 2. Stage the inputs (untimed): A with the seed, B with seed + 1, each element a
    //    function of its global index, as in lesson 04. A pageable copy for (a).
    //    The pool holds the first `pool` chunks, one after another: one fill of each array.
    lesson::HostTimer gen;
    verify::fill_uniform(h_a, pool_elems, opt.seed, -1, 1, 0);
    verify::fill_uniform(h_b, pool_elems, opt.seed + 1, -1, 1, 0);
    verify::host_vector<float> p_a(pool_elems), p_b(pool_elems), p_c(total_elems);  // not zeroed: written first
    verify::parallel_copy(p_a.data(), h_a, pool_elems);
    verify::parallel_copy(p_b.data(), h_b, pool_elems);
    report.metric("host: stage inputs (untimed)", gen.ms(), "ms");

    // The prediction, printed before anything is timed.
    const double kernels_ms = lesson::time_median_ms(static_cast<int>(opt.repeat), [&] {
        for (uint64_t i = 0; i < w.plan.count; ++i) {
            addMatrices<<<blocks_for(w.elems(i)), kThreads>>>(slots[0].d_a, slots[0].d_b, slots[0].d_c, w.elems(i),
                                                              w.work);
            CUDA_CHECK_LAUNCH();
        }
    });
    print_prediction(w, link, kernels_ms);

    // 3-5. Each variant: poison C, time it (copy in, launch, copy out per chunk), verify every element.
    // (a) and (d), fed from pageable memory, take 4-10x longer a run: min(--repeat, 3) samples and no
    // warm-up (the link probes warmed the pageable path; a median of 3 outvotes one slow first run).
    const int repeat = static_cast<int>(opt.repeat), slow_repeat = std::min(repeat, 3);
    Variants variants{w, slots, ref, opt, report};
    const double seq_pageable_ms = variants.run(
        "(a) sequential, pageable", p_c.data(),
        [&] { run_sequential(w, p_a.data(), p_b.data(), p_c.data(), slots[0]); }, slow_repeat, 0);
    report.variant_bound("(a) sequential, pageable", seq_pageable_ms, link.gbps(seq_pageable_ms), "GB/s",
                         link.gbps(link.bound_ms), "PCIe bound");
    report.variant_yardstick("(a) against pageable copies alone", seq_pageable_ms, link.gbps(seq_pageable_ms), "GB/s",
                             link.gbps(link.pageable_bound_ms), "pageable copies");
    const double seq_pinned_ms = variants.run(
        "(b) sequential, pinned", h_c, [&] { run_sequential(w, h_a, h_b, h_c, slots[0]); }, repeat);
    report.variant_bound("(b) sequential, pinned", seq_pinned_ms, link.gbps(seq_pinned_ms), "GB/s",
                         link.gbps(link.bound_ms), "PCIe bound");
    double best_ms = 1e300;  // the fastest stream count of (c), best_S
    int best_S = 0;
    for (int S : stream_counts) {
        const std::string streams_text = std::to_string(S) + (S == 1 ? " stream" : " streams");
        const double ms = variants.run(
            "(c) pipelined, " + streams_text, h_c, [&] { run_pipelined(w, h_a, h_b, h_c, slots, S, fork, false); },
            repeat);
        report.variant_bound("(c) pipelined, " + streams_text, ms, link.gbps(ms), "GB/s", link.gbps(link.bound_ms),
                             "PCIe bound");
        report.metric("H2D link busy, " + streams_text, link.up_ms / ms, "of the time");
        if (ms < best_ms) best_ms = ms, best_S = S;
    }
    // (d) The pipeline behind a loader that memcpys chunk i's A and B from the staged (pageable) pool into
    // the pinned slots, timed, on (c)'s fastest count (kept out of the name: two GPUs' rows line up).
    const std::string loader_name = "(d) pipelined at the best stream count of (c), memcpy loader";
    const double loader_ms = variants.run(
        loader_name, h_c, [&] { run_pipelined(w, p_a.data(), p_b.data(), h_c, slots, best_S, fork, true); },
        slow_repeat, 0);
    report.variant_bound(loader_name, loader_ms, link.gbps(loader_ms), "GB/s", link.gbps(link.bound_ms), "PCIe bound");
    report.variant("kernels alone, no copies", kernels_ms, 3.0 * total_bytes / (kernels_ms * 1e6), "GB/s");
    report.metric("host: verify outputs, all variants (untimed)", variants.verify_ms, "ms");

    // The picture: the same run with events around every copy and kernel (timeline.cuh).
    if (timeline_file)
        draw_timeline(timeline_file, timeline_path, prop.name, chunk, n, w.plan.count, best_S, S_max, report,
                      [&](int S, cudaEvent_t t0, std::vector<cudaEvent_t>* marks) {
                          verify::parallel_memset(h_c, 0xFF, total_bytes);
                          CUDA_CHECK(cudaEventRecord(t0, 0));
                          run_pipelined(w, h_a, h_b, h_c, slots, S, fork, false, marks);
                          CUDA_CHECK(cudaDeviceSynchronize());
                          report.check(verify_output(
                              w, ref, h_c, "timeline run, " + std::to_string(S) + " stream(s): every element of C"));
                      });

    // Report: every variant against the bound, and why more streams stop helping (plan.h).
    report_summary(report, w, link, seq_pinned_ms, best_ms, best_S, loader_ms);
    report.timing(lesson::kTimingMethod);
    report.default_size(cli.at_default_size());
    report.target("best pipeline of the PCIe bound", link.bound_ms / best_ms, 0.85);
    report.target("best pipeline over sequential pinned", seq_pinned_ms / best_ms, 1.30, "x");

    // 6. Free everything.
    free_slots(slots);
    CUDA_CHECK(cudaEventDestroy(fork));
    CUDA_CHECK(cudaFreeHost(h_a));
    CUDA_CHECK(cudaFreeHost(h_b));
    CUDA_CHECK(cudaFreeHost(h_c));
    return report.finish(opt.json);
}
