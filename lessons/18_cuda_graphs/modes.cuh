// Lesson 18 - CUDA graphs: the six ways of running the workload, one function each.
//
//   a mode_stream      every copy and kernel launched on a stream, one by one
//   b mode_capture     G steps recorded once (cudaStreamBeginCapture ... cudaStreamEndCapture),
//                      instantiated, replayed with cudaGraphLaunch; graphs of 1, G and all steps
//   c mode_explicit    the same G-step graph from cudaGraphAddMemcpyNode1D and cudaGraphAddKernelNode
//   d mode_update      one step's graph replayed on two states, repointed between replays
//                      (cudaGraphExecKernelNodeSetParams, cudaGraphExecUpdate), never instantiated again
//   e mode_fork_join   each step's two halves on two streams (events), captured into one graph
//   f mode_cublas      a cublasSgemv readout after every step, captured with the kernels
// Each returns its measured runs (workload.cuh: measure); main.cu checks them against the CPU.
// Lesson 18 of the course; before: lesson 17 (fusion), next: lesson 19 (mixed precision).
// Run: ./build/bin/cuda_graphs --mode=N   (N = 1 for a ... 6 for f; no --mode: all of them)
#pragma once
#include <cublas_v2.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "common/check.h"
#include "common/launch.h"
#include "common/report.h"
#include "common/timer.h"
#include "verify/compare.h"
#include "verify/graphs.h"
#include "verify/random.h"

#include "kernels/step_kernels.cuh"
#include "workload.cuh"

// ---------------------------------------------------------------- a: stream launches
static std::vector<Run> mode_stream(Ctx& c) {
    return {measure(c, "a stream launches", double(c.steps) * c.K, false, [&] {
        for (int64_t s = 0; s < c.steps; ++s) enqueue_step(c.a, c.K, c.stream);
    })};
}

// ---------------------------------------------------------------- b: stream capture
// Records `steps` steps into a new graph. Between Begin and End nothing runs: every call on
// the stream becomes a node, and the stream's order becomes the edges.
static cudaGraph_t capture_steps(const Ctx& c, const State& s, int64_t steps) {
    cudaGraph_t graph = nullptr;
    CUDA_CHECK(cudaStreamBeginCapture(c.stream, cudaStreamCaptureModeGlobal));
    for (int64_t k = 0; k < steps; ++k) enqueue_step(s, c.K, c.stream);
    CUDA_CHECK(cudaStreamEndCapture(c.stream, &graph));
    return graph;
}

static std::vector<Run> mode_capture(Ctx& c) {
    // The graph's size: one step replayed `steps` times, G steps replayed steps / G times,
    // or all steps in one graph replayed once (README: the trade-off).
    std::vector<int64_t> sizes = {1, c.graph_steps};
    // Exercise 2 of the handout: add a graph of 100 steps (if it divides --steps); predict its instantiate time, break-even
    if (c.steps * (c.K + 1) <= kMaxGraphNodes) sizes.push_back(c.steps);
    std::sort(sizes.begin(), sizes.end());
    sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
    std::vector<Run> runs;
    for (int64_t gs : sizes) {
        lesson::HostTimer t;
        cudaGraph_t graph = capture_steps(c, c.a, gs);
        const double capture_ms = t.ms();
        cudaGraphExec_t exec = nullptr;
        t.reset();
        CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));  // the one-time cost that replays must repay
        const double instantiate_ms = t.ms();
        const int64_t replays = c.steps / gs;
        Run run = measure(c, "b capture, graph of " + std::to_string(gs) + " step(s) x " + std::to_string(replays),
                          double(c.steps) * c.K, false, [&] {
                              for (int64_t r = 0; r < replays; ++r) CUDA_CHECK(cudaGraphLaunch(exec, c.stream));
                          });
        run.graph_steps = gs;
        run.capture_ms = capture_ms;
        run.instantiate_ms = instantiate_ms;
        c.report->note("b: graph of " + std::to_string(gs) + " step(s), as captured: " + graph_shape(graph).text());
        if (gs == 1 && !c.dot.empty())
            CUDA_CHECK(cudaGraphDebugDotPrint(graph, c.dot.c_str(), cudaGraphDebugDotFlagsVerbose));
        CUDA_CHECK(cudaGraphExecDestroy(exec));
        CUDA_CHECK(cudaGraphDestroy(graph));
        runs.push_back(std::move(run));
    }
    return runs;
}

// ---------------------------------------------------------------- c: the graph built by hand
// Kernel j of a step (0: the stencil, 1..K-1: the affine updates) on [first, first + count) of
// state s, as a kernel node takes it: the function, the launch shape, and an array of pointers
// to the argument values. The graph copies the values when the node is added or set, so they
// need to live only as long as this object.
struct KernelNode {
    const float* prev;
    float* x;
    size_t n, first, count;
    float w0 = verify::kStencilW0, w1 = verify::kStencilW1, w2 = verify::kStencilW2, a = 0, b = 0;
    void* args[8] = {};
    cudaKernelNodeParams params = {};
    KernelNode(const State& s, int j, size_t first_, size_t count_)
        : prev(s.prev), x(s.x), n(s.n), first(first_), count(count_) {
        params.gridDim = dim3(unsigned(lesson::ceil_div(count, step::kThreads)));
        params.blockDim = dim3(step::kThreads);
        params.sharedMemBytes = 0;
        if (j == 0) {  // stencil3(prev, x, n, first, count, w0, w1, w2)
            params.func = reinterpret_cast<void*>(step::stencil3);
            void* list[] = {&prev, &x, &n, &first, &count, &w0, &w1, &w2};
            std::copy(std::begin(list), std::end(list), args);
        } else {  // affine(x, first, count, a, b)
            const verify::Affine coef = verify::step_affine(j);
            a = coef.a;
            b = coef.b;
            params.func = reinterpret_cast<void*>(step::affine);
            void* list[] = {&x, &first, &count, &a, &b};
            std::copy(std::begin(list), std::end(list), args);
        }
        params.kernelParams = args;
        params.extra = nullptr;
    }
    KernelNode(const KernelNode&) = delete;  // params points into this object
    KernelNode& operator=(const KernelNode&) = delete;
};

// The nodes of one step, kept to change their parameters later (mode d).
struct StepNodes {
    cudaGraphNode_t copy = nullptr;
    std::vector<cudaGraphNode_t> kernels;
};

// `steps` steps of state s as a chain of nodes, each depending on the one before: the same
// graph that capture_steps() records.
static cudaGraph_t build_steps(const Ctx& c, const State& s, int64_t steps, std::vector<StepNodes>* out) {
    cudaGraph_t graph = nullptr;
    CUDA_CHECK(cudaGraphCreate(&graph, 0));
    cudaGraphNode_t last = nullptr;  // the node the next one depends on (none for the first)
    for (int64_t k = 0; k < steps; ++k) {
        StepNodes nodes;
        CUDA_CHECK(cudaGraphAddMemcpyNode1D(&nodes.copy, graph, last ? &last : nullptr, last ? 1 : 0, s.prev, s.x,
                                            s.bytes(), cudaMemcpyDeviceToDevice));
        last = nodes.copy;
        for (int j = 0; j < c.K; ++j) {
            const KernelNode kn(s, j, 0, s.n);
            cudaGraphNode_t node = nullptr;
            CUDA_CHECK(cudaGraphAddKernelNode(&node, graph, &last, 1, &kn.params));
            nodes.kernels.push_back(node);
            last = node;
        }
        if (out) out->push_back(std::move(nodes));
    }
    return graph;
}

static std::vector<Run> mode_explicit(Ctx& c) {
    lesson::HostTimer t;
    cudaGraph_t graph = build_steps(c, c.a, c.graph_steps, nullptr);
    const double build_ms = t.ms();
    // What capture records for the same G steps, node for node.
    cudaGraph_t captured = capture_steps(c, c.a, c.graph_steps);
    const Shape built = graph_shape(graph), rec = graph_shape(captured);
    lesson::Check same;
    same.what = "c: graph built by hand (" + built.text() + ") = graph captured in b";
    same.checked = 4;
    same.bad_count = (built.kernels != rec.kernels) + (built.copies != rec.copies) + (built.other != rec.other) +
                     (built.edges != rec.edges);
    same.first_bad = same.bad_count ? 0 : -1;
    same.rel_l2 = same.max_abs = 0;
    same.pass = built == rec;
    if (!same.pass) same.what += ", captured: " + rec.text();
    c.report->check(same);
    CUDA_CHECK(cudaGraphDestroy(captured));

    cudaGraphExec_t exec = nullptr;
    t.reset();
    CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    const double instantiate_ms = t.ms();
    const int64_t replays = c.steps / c.graph_steps;
    Run run = measure(c, "c built by hand, graph of " + std::to_string(c.graph_steps) + " step(s)",
                      double(c.steps) * c.K, false, [&] {
                          for (int64_t r = 0; r < replays; ++r) CUDA_CHECK(cudaGraphLaunch(exec, c.stream));
                      });
    run.graph_steps = c.graph_steps;
    run.capture_ms = build_ms;
    run.instantiate_ms = instantiate_ms;
    CUDA_CHECK(cudaGraphExecDestroy(exec));
    CUDA_CHECK(cudaGraphDestroy(graph));
    return {std::move(run)};
}

// ---------------------------------------------------------------- d: parameters updated between replays
// One step's graph, instantiated once for state a, replayed for a and b in turn: after a's
// step every node is repointed at b with cudaGraph{Exec}*SetParams, after b's step the whole
// graph is set back to a's parameters with cudaGraphExecUpdate. Neither instantiates again.
static std::vector<Run> mode_update(Ctx& c) {
    std::vector<StepNodes> nodes;
    cudaGraph_t graph_a = build_steps(c, c.a, 1, &nodes);
    cudaGraphExec_t exec = nullptr;
    CUDA_CHECK(cudaGraphInstantiate(&exec, graph_a, 0));
    {  // for comparison: what instantiating b's graph instead would cost
        cudaGraph_t graph_b = build_steps(c, c.b, 1, nullptr);
        cudaGraphExec_t exec_b = nullptr;
        lesson::HostTimer t;
        CUDA_CHECK(cudaGraphInstantiate(&exec_b, graph_b, 0));
        c.report->metric("d: instantiate the one-step graph again (host)", t.ms() * 1e3, "us");
        CUDA_CHECK(cudaGraphExecDestroy(exec_b));
        CUDA_CHECK(cudaGraphDestroy(graph_b));
    }
    std::vector<double> set_us, update_us;
    // Exercise 3 of the handout: switch to b with cudaGraphExecUpdate too, back to a with SetParams; compare the costs
    auto point_at_b = [&] {
        lesson::HostTimer t;
        CUDA_CHECK(cudaGraphExecMemcpyNodeSetParams1D(exec, nodes[0].copy, c.b.prev, c.b.x, c.b.bytes(),
                                                      cudaMemcpyDeviceToDevice));
        for (int j = 0; j < c.K; ++j) {
            const KernelNode kn(c.b, j, 0, c.b.n);
            CUDA_CHECK(cudaGraphExecKernelNodeSetParams(exec, nodes[0].kernels[size_t(j)], &kn.params));
        }
        set_us.push_back(t.ms() * 1e3);
    };
    auto back_to_a = [&] {
        lesson::HostTimer t;
        cudaGraphExecUpdateResultInfo info{};
        CUDA_CHECK(cudaGraphExecUpdate(exec, graph_a, &info));  // graph_a: the same topology, a's parameters
        update_us.push_back(t.ms() * 1e3);
    };
    Run run = measure(c, "d one-step graph, repointed a <-> b each replay", 2.0 * double(c.steps) * c.K, true, [&] {
        for (int64_t s = 0; s < c.steps; ++s) {
            CUDA_CHECK(cudaGraphLaunch(exec, c.stream));  // a step of state a
            point_at_b();
            CUDA_CHECK(cudaGraphLaunch(exec, c.stream));  // the same step of state b (the launch before is unchanged)
            back_to_a();
        }
    });
    run.graph_steps = 1;
    c.report->metric("d: repoint K+1 nodes, cudaGraphExec*SetParams (host, median)", lesson::median(set_us), "us");
    c.report->metric("d: repoint the graph, cudaGraphExecUpdate (host, median)", lesson::median(update_us), "us");
    CUDA_CHECK(cudaGraphExecDestroy(exec));
    CUDA_CHECK(cudaGraphDestroy(graph_a));
    return {std::move(run)};
}

// ---------------------------------------------------------------- e: fork/join over two streams
// Each step: the copy on the main stream; then the first half of the array on the main
// stream and the second half on `side`, which joins the capture by waiting for an event
// recorded on the capturing stream (fork) and leaves it by the main stream waiting for an
// event recorded on `side` (join). The graph gets two parallel chains per step.
static std::vector<Run> mode_fork_join(Ctx& c) {
    cudaEvent_t fork = nullptr, join = nullptr;
    CUDA_CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
    const size_t half = c.a.n / 2;  // n >= 2: both halves hold at least one element
    // Exercise 4 of the handout: four branches on four streams per step; predict the time per step at n = 4096 and 2^20
    cudaGraph_t graph = nullptr;
    CUDA_CHECK(cudaStreamBeginCapture(c.stream, cudaStreamCaptureModeGlobal));
    for (int64_t k = 0; k < c.graph_steps; ++k) {
        CUDA_CHECK(cudaMemcpyAsync(c.a.prev, c.a.x, c.a.bytes(), cudaMemcpyDeviceToDevice, c.stream));
        CUDA_CHECK(cudaEventRecord(fork, c.stream));
        CUDA_CHECK(cudaStreamWaitEvent(c.side, fork, 0));  // fork: side now depends on the copy
        enqueue_chain(c.a, 0, half, c.K, c.stream);
        enqueue_chain(c.a, half, c.a.n - half, c.K, c.side);
        CUDA_CHECK(cudaEventRecord(join, c.side));
        CUDA_CHECK(cudaStreamWaitEvent(c.stream, join, 0));  // join: the next copy waits for both halves
    }
    CUDA_CHECK(cudaStreamEndCapture(c.stream, &graph));  // fails (unjoined) if side did not join back
    c.report->note("e: fork/join graph of " + std::to_string(c.graph_steps) + " step(s): " + graph_shape(graph).text());
    cudaGraphExec_t exec = nullptr;
    lesson::HostTimer t;
    CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    const double instantiate_ms = t.ms();
    const int64_t replays = c.steps / c.graph_steps;
    Run run = measure(c, "e fork/join, two halves in parallel", 2.0 * double(c.steps) * c.K, false, [&] {
        for (int64_t r = 0; r < replays; ++r) CUDA_CHECK(cudaGraphLaunch(exec, c.stream));
    });
    run.graph_steps = c.graph_steps;
    run.instantiate_ms = instantiate_ms;
    CUDA_CHECK(cudaGraphExecDestroy(exec));
    CUDA_CHECK(cudaGraphDestroy(graph));
    CUDA_CHECK(cudaEventDestroy(fork));
    CUDA_CHECK(cudaEventDestroy(join));
    return {std::move(run)};
}

// ---------------------------------------------------------------- f: cuBLAS inside the graph
// After every step, y += M x (cublasSgemv, M: kReadouts x n): a readout summed over the steps.
static std::vector<Run> mode_cublas(Ctx& c) {
    const int m = kReadouts, n = int(c.a.n);
    std::vector<float> h_M(size_t(m) * c.a.n);
    verify::fill_uniform(h_M.data(), h_M.size(), c.seed + 7);
    float *d_M = nullptr, *d_y = nullptr, *d_scalars = nullptr;
    void* d_work = nullptr;
    CUDA_CHECK(cudaMalloc(&d_M, h_M.size() * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_y, m * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_scalars, 2 * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_work, kCublasWorkspace));
    CUDA_CHECK(cudaMemcpy(d_M, h_M.data(), h_M.size() * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemset(d_y, 0, m * sizeof(float)));
    const float h_scalars[2] = {1.0f, 1.0f};  // alpha = 1, beta = 1: y = M x + y
    CUDA_CHECK(cudaMemcpy(d_scalars, h_scalars, sizeof h_scalars, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaDeviceSynchronize());  // c.stream is non-blocking (main.cu, step 4)

    // Everything cuBLAS needs is set up before the capture: a capture records work on the
    // stream; it must not create a handle or allocate memory.
    cublasHandle_t handle = nullptr;
    CUBLAS_CHECK(cublasCreate(&handle));
    CUBLAS_CHECK(cublasSetStream(handle, c.stream));                     // first: cublasSetStream resets the workspace
    CUBLAS_CHECK(cublasSetWorkspace(handle, d_work, kCublasWorkspace));  // no allocation inside the graph
    CUBLAS_CHECK(cublasSetPointerMode(handle, CUBLAS_POINTER_MODE_DEVICE));  // alpha, beta read at replay time

    // One eager call first: cuBLAS's first call on a handle (kernel loading, heuristics) stays out of the capture.
    CUBLAS_CHECK(cublasSgemv(handle, CUBLAS_OP_N, m, n, d_scalars, d_M, m, c.a.x, 1, d_scalars + 1, d_y, 1));
    CUDA_CHECK(cudaStreamSynchronize(c.stream));

    cudaGraph_t graph = nullptr;
    CUDA_CHECK(cudaStreamBeginCapture(c.stream, cudaStreamCaptureModeGlobal));
    for (int64_t k = 0; k < c.graph_steps; ++k) {
        enqueue_step(c.a, c.K, c.stream);
        CUBLAS_CHECK(cublasSgemv(handle, CUBLAS_OP_N, m, n, d_scalars, d_M, m, c.a.x, 1, d_scalars + 1, d_y, 1));
    }
    CUDA_CHECK(cudaStreamEndCapture(c.stream, &graph));
    c.report->note("f: graph of " + std::to_string(c.graph_steps) +
                   " step(s) with cublasSgemv: " + graph_shape(graph).text());
    cudaGraphExec_t exec = nullptr;
    CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    const int64_t replays = c.steps / c.graph_steps;
    Run run = measure(
        c, "f with cublasSgemv after every step", double(c.steps) * c.K, false,
        [&] {
            for (int64_t r = 0; r < replays; ++r) CUDA_CHECK(cudaGraphLaunch(exec, c.stream));
        },
        [&] { CUDA_CHECK(cudaMemsetAsync(d_y, 0, m * sizeof(float), c.stream)); });
    run.graph_steps = c.graph_steps;

    // The readout of the last run against M (sum of the CPU's states), in double.
    std::vector<float> h_y(m);
    CUDA_CHECK(cudaStreamSynchronize(c.stream));
    CUDA_CHECK(cudaMemcpy(h_y.data(), d_y, m * sizeof(float), cudaMemcpyDeviceToHost));
    std::vector<double> y_ref(m);
    verify::gemv_reference(h_M.data(), m, c.a.n, c.state_sum->data(), y_ref.data());
    c.report->check(verify::compare(h_y.data(), y_ref.data(), m, 1e-4,
                                    "f: cuBLAS readout y = sum over steps of M x (8 rows, sums of n products)"));

    CUDA_CHECK(cudaGraphExecDestroy(exec));
    CUDA_CHECK(cudaGraphDestroy(graph));
    CUBLAS_CHECK(cublasDestroy(handle));
    CUDA_CHECK(cudaFree(d_work));
    CUDA_CHECK(cudaFree(d_scalars));
    CUDA_CHECK(cudaFree(d_y));
    CUDA_CHECK(cudaFree(d_M));
    return {std::move(run)};
}

// The modes, in order (--mode=N runs the N-th alone).
struct Mode {
    const char* name;
    std::vector<Run> (*run)(Ctx&);
    bool two_states;  // also runs state b (mode d)
};
static const Mode kModes[] = {
    {"a stream launches", mode_stream, false},
    {"b stream capture + cudaGraphLaunch", mode_capture, false},
    {"c graph built by hand", mode_explicit, false},
    {"d parameters updated between replays", mode_update, true},
    {"e fork/join over two streams", mode_fork_join, false},
    {"f cuBLAS inside the graph", mode_cublas, false},
};
constexpr int kModeCount = int(sizeof(kModes) / sizeof(kModes[0]));
// Places in kModes.
constexpr int kModeStream = 0, kModeCapture = 1, kModeExplicit = 2, kModeForkJoin = 4, kModeCublas = 5;
