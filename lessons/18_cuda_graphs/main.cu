// Lesson 18 - CUDA graphs: many small kernels, launched one by one and as graphs.
//
// The workload: `steps` steps on a small array, each a snapshot copy, a 3-point
// stencil and K - 1 affine updates (kernels/step_kernels.cuh, enqueued by workload.cuh;
// CPU reference in verify/graphs.h). It runs in six modes, listed in one table (kModes,
// modes.cuh):
//   a stream launches       every copy and kernel launched on a stream, one by one
//   b stream capture        the launches of G steps recorded once, instantiated, replayed
//                           with cudaGraphLaunch; graphs of 1 step, G steps and all steps
//   c graph built by hand   the same G-step graph from memcpy and kernel nodes
//   d parameters updated    one step's graph replayed on two states in turn, repointed
//                           between replays instead of instantiated again
//   e fork/join             each step's two halves on two streams, captured into one graph
//   f cuBLAS in the graph   a cublasSgemv readout after every step, captured with the kernels
// Every mode's final state must be the CPU reference's, bit for bit. Beside the modes:
// 1000 empty kernels as stream launches and as one graph (probe.cuh: the overhead of a
// launch; the benchmark target), and a sweep of the array size (sweep.cuh: where that
// overhead stops mattering).
//
// Lesson 18 of the course: streams and events come from lesson 05, cuBLAS from lesson 08;
// lesson 17 removed launches by fusing kernels, this one makes the launches that remain
// cheap. Next: lesson 19 (mixed precision). See README.md.
// Run: ./build/bin/cuda_graphs   (--mode=2: one mode alone; --dot=step.dot: mode b's one-step graph)
#include <cublas_v2.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "common/check.h"
#include "common/device.h"
#include "common/flags.h"
#include "common/memory.h"
#include "common/report.h"
#include "common/timer.h"
#include "verify/compare.h"
#include "verify/graphs.h"
#include "verify/random.h"

#include "modes.cuh"
#include "probe.cuh"
#include "sweep.cuh"
#include "workload.cuh"

// Every run's final state against the CPU reference, bit for bit, and every run against the first.
static void check_runs(lesson::Report& report, const std::vector<Run>& runs, const std::vector<float>& ref_a,
                       const std::vector<float>& ref_b, size_t N) {
    for (const Run& run : runs) {
        lesson::Check check = verify::check_same_bits(run.h_a.data(), ref_a.data(), N, run.name + ": the CPU's bits");
        check.what += run.same_after_timing ? ", last timed run: same bits" : ", last timed run: OTHER BITS";
        check.pass = check.pass && run.same_after_timing;
        report.check(check);
        if (!run.h_b.empty())
            report.check(
                verify::check_same_bits(run.h_b.data(), ref_b.data(), N, run.name + ", state b: the CPU's bits"));
    }
    if (runs.size() > 1) {  // implied by the checks above, and stated: every mode agrees with every other
        uint64_t differ = 0;
        for (const Run& run : runs)
            differ += !verify::check_same_bits(run.h_a.data(), runs.front().h_a.data(), N, "").pass;
        lesson::Check same;
        same.what = "all " + std::to_string(runs.size()) + " runs: the same final state, bit for bit";
        same.checked = runs.size();
        same.bad_count = differ;
        same.first_bad = differ ? 0 : -1;
        same.rel_l2 = same.max_abs = 0;
        same.pass = differ == 0;
        report.check(same);
    }
}

// Per run: the time per kernel (run time / kernels launched), the host's enqueue time, and for
// graphs the capture (or build) and instantiate costs and the replays that repay them.
static void report_runs(lesson::Report& report, const std::vector<Run>& runs, int64_t steps, int64_t graph_steps,
                        size_t N) {
    const Run* stream_run = nullptr;
    const Run* graph_run = nullptr;
    for (const Run& run : runs) {
        if (run.mode == kModeStream) stream_run = &run;
        if (run.mode == kModeCapture && run.graph_steps == graph_steps) graph_run = &run;
    }
    for (const Run& run : runs) {
        report.variant(run.name, run.gpu_ms, run.gpu_ms * 1e3 / run.kernels, "us/kernel");
        report.metric(run.name + ": host enqueue per kernel", run.host_ms * 1e3 / run.kernels, "us");
        if (std::isfinite(run.capture_ms)) report.metric(run.name + ": capture or build (host)", run.capture_ms, "ms");
        if (std::isfinite(run.instantiate_ms)) {
            report.metric(run.name + ": instantiate (host)", run.instantiate_ms, "ms");
            // The same work as mode a (modes b, c, e): the time saved repays the instantiation.
            const bool same_work = run.mode == kModeCapture || run.mode == kModeExplicit || run.mode == kModeForkJoin;
            if (stream_run && same_work) {
                // Saved per replay: the stream's time for the graph's steps minus the replay's time.
                const double saved_ms = (stream_run->gpu_ms - run.gpu_ms) * double(run.graph_steps) / double(steps);
                report.metric(run.name + ": replays to repay instantiate",
                              saved_ms > 0 ? run.instantiate_ms / saved_ms : NAN, "replays");
            }
        }
    }
    if (stream_run && graph_run) {
        report.metric("workload: stream per-kernel time / graph (b, G steps) per-kernel time",
                      stream_run->gpu_ms / graph_run->gpu_ms, "x");
        report.work("affine step kernel (n floats, 1 FMA each) replayed in a graph", 2.0 * double(N), 8.0 * double(N),
                    graph_run->gpu_ms / graph_run->kernels);
    }
}

int main(int argc, char** argv) {
    // 1. Flags first: bad input exits 2 before any CUDA call.
    lesson::CommonOptions opt;
    int64_t n = 4096, steps = 1000, K = 20, graph_steps = 10, mode = 0, empties = 1000, sweep = 24, sweep_steps = 50;
    std::string dot;
    lesson::Cli cli("cuda_graphs",
                    "Many small kernels: stream launches against CUDA graphs (capture, by hand, "
                    "updated, fork/join, with cuBLAS).");
    lesson::add_common_flags(cli, opt);
    cli.add_int("n", &n, 2, int64_t(1) << 24, "floats in the state array");
    cli.add_int("steps", &steps, 1, 1000000, "steps of the workload", 10);
    cli.add_int("kernels-per-step", &K, 1, 1000, "kernels per step (the stencil and K - 1 affine updates)");
    cli.add_int("graph-steps", &graph_steps, 1, 1000000, "steps per graph in modes b, c, e, f (must divide --steps)");
    cli.add_int("mode", &mode, 0, kModeCount, "run and check one mode alone (0 = all, the probe and the sweep)");
    cli.add_int("empty-kernels", &empties, 1, 100000, "empty kernels of the launch-overhead probe", 50);
    cli.add_int("sweep", &sweep, 0, 26, "largest log2 array size of the stream-vs-graph sweep (0 = none; else 10-26)",
                12);
    cli.add_int("sweep-steps", &sweep_steps, 1, 100000, "steps per run in the sweep", 2);
    cli.add_output("dot", &dot, "mode b writes its one-step graph here (Graphviz dot)");
    cli.parse_or_exit(argc, argv);
    if (steps % graph_steps != 0)
        lesson::bad_input("--graph-steps=" + std::to_string(graph_steps) +
                          " does not divide --steps=" + std::to_string(steps) + "; allowed: a divisor of --steps");
    if (graph_steps * (2 * K + 1) > kMaxGraphNodes)
        lesson::bad_input(
            "--graph-steps=" + std::to_string(graph_steps) + " with --kernels-per-step=" + std::to_string(K) +
            " makes graphs of more than " + std::to_string(kMaxGraphNodes) +
            " nodes; allowed: graph-steps x (2 x kernels-per-step + 1) <= " + std::to_string(kMaxGraphNodes));
    if (sweep > 0 && sweep < 10) lesson::bad_input("--sweep=" + std::to_string(sweep) + "; allowed: 0 or 10-26");

    // 2. Memory checks, the device, the report.
    const size_t N = size_t(n);
    const bool all = mode == 0;
    const bool use_cublas = all || mode == kModeCublas + 1;
    const bool two_states = all || kModes[mode - 1].two_states;
    const size_t sweep_n = sweep > 0 && all ? size_t(1) << sweep : 0;
    // Host: initial states, references and results of two states (about 12 floats per element),
    // the readout matrix and the CPU's state sums; the sweep's array a few times over.
    lesson::require_host_memory(N * (12 * sizeof(float) + (kReadouts + 2) * sizeof(double)) +
                                    4 * sweep_n * sizeof(float),
                                "pageable", "--n=" + std::to_string(n) + " --sweep=" + std::to_string(sweep));
    cudaDeviceProp prop = lesson::pick_device(opt.device);
    // Device: two states (x, prev, init), the readout matrix and cuBLAS's workspace, and the sweep's state.
    lesson::require_device_memory(N * (6 + kReadouts) * sizeof(float) + kCublasWorkspace + 3 * sweep_n * sizeof(float),
                                  "--n=" + std::to_string(n) + " --sweep=" + std::to_string(sweep));
    lesson::Report report("18_cuda_graphs");
    report.device(prop);
    report.config_from(cli);

    // 3. The initial states (uniform in [0, 1)) and the CPU references: the same float
    //    operations in the same order, so the GPU must match them bit for bit.
    std::vector<float> h_init_a(N), h_init_b(N);
    verify::fill_uniform(h_init_a.data(), N, uint64_t(opt.seed), 0.0f, 1.0f);
    verify::fill_uniform(h_init_b.data(), N, uint64_t(opt.seed) + 1, 0.0f, 1.0f);
    std::vector<float> ref_a = h_init_a, ref_b = two_states ? h_init_b : std::vector<float>(N);
    std::vector<double> state_sum(use_cublas ? N : 0, 0.0);
    lesson::HostTimer cpu;
    const int cpu_threads = verify::steps_references(ref_a.data(), two_states ? ref_b.data() : nullptr, N, steps,
                                                     int(K), use_cublas ? state_sum.data() : nullptr);
    report.cpu_reference_ms(cpu.ms(), cpu_threads);

    // 4. Device memory, the initial states, two non-blocking streams.
    Ctx c;
    c.a = alloc_state(N);
    c.b = alloc_state(N);
    CUDA_CHECK(cudaMemcpy(c.a.init, h_init_a.data(), c.a.bytes(), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(c.b.init, h_init_b.data(), c.b.bytes(), cudaMemcpyHostToDevice));
    // The work goes on non-blocking streams, which do not wait for the legacy default stream, and
    // a cudaMemcpy from pageable memory may return before its last bytes land: wait once, so that
    // nothing reads `init` early.
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&c.side, cudaStreamNonBlocking));
    c.steps = steps;
    c.graph_steps = graph_steps;
    c.K = int(K);
    c.repeat = int(opt.repeat);
    c.seed = uint64_t(opt.seed);
    c.dot = dot;
    c.state_sum = &state_sum;
    c.report = &report;
    // Warm-up: one step, eagerly, before any capture. The first launch of a kernel may load its
    // module (lazy loading) and set things up; that belongs outside a capture, not in a graph.
    CUDA_CHECK(cudaMemcpyAsync(c.a.x, c.a.init, c.a.bytes(), cudaMemcpyDeviceToDevice, c.stream));
    enqueue_step(c.a, c.K, c.stream);
    CUDA_CHECK(cudaStreamSynchronize(c.stream));

    // 5. The modes (modes.cuh). Each final state against the CPU reference, bit for bit.
    std::vector<Run> runs;
    for (int k = 0; k < kModeCount; ++k) {
        if (!all && mode != k + 1) continue;
        for (Run& run : kModes[k].run(c)) {
            run.mode = k;
            runs.push_back(std::move(run));
        }
    }
    if (opt.inject_fault) verify::inject_fault(runs.front().h_a.data(), N, uint64_t(opt.seed));
    check_runs(report, runs, ref_a, ref_b, N);

    // 6. The report: per-kernel time of each run, the host's enqueue time, the cost of graphs.
    report.timing(
        "whole workload, CUDA events around it (median of --repeat runs, at most 7 where they would take "
        "over 0.15 s, 3 where one takes 50 ms or more; each from the initial state after a verified warm-up "
        "run); 'host' = host clock around the enqueue loop alone");
    report_runs(report, runs, steps, graph_steps, N);

    // 7. The overhead of a launch alone: empty kernels (probe.cuh; the benchmark target).
    if (all) {
        const double ratio = report_probe(report, probe_empty(c.stream, empties, int(opt.repeat)), empties);
        report.default_size(cli.at_default_size());
        report.target("empty kernels: per-kernel time, stream launches / graph replay", ratio, 3.0, "x");
    } else if (!runs.empty()) {
        report.key_result(runs.front().name + ": " + us_text(runs.front().gpu_ms * 1e3 / runs.front().kernels) +
                          " per kernel");
    }

    // 8. The sweep (sweep.cuh): stream launches against one graph, at growing array sizes.
    if (sweep_n > 0) run_sweep(c, report, sweep, sweep_steps);

    // 9. Clean up.
    CUDA_CHECK(cudaStreamDestroy(c.side));
    CUDA_CHECK(cudaStreamDestroy(c.stream));
    free_state(c.b);
    free_state(c.a);
    return report.finish(opt.json);
}
