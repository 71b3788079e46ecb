// Lesson 18 - CUDA graphs: many small kernels, launched one by one and as graphs.
//
// The workload: `steps` steps on a small array, each a snapshot copy, a 3-point
// stencil and K - 1 affine updates (kernels/step_kernels.cuh; CPU reference in
// verify/graphs.h). It runs in six modes, listed in one table (kModes):
//   a stream launches       every copy and kernel launched on a stream, one by one
//   b stream capture        the launches of G steps recorded once (cudaStreamBeginCapture ...
//                           cudaStreamEndCapture), instantiated, replayed with cudaGraphLaunch;
//                           graphs of 1 step, G steps and all steps side by side
//   c graph built by hand   the same G-step graph from cudaGraphAddMemcpyNode1D and
//                           cudaGraphAddKernelNode with explicit dependencies
//   d parameters updated    one step's graph replayed on two states in turn, repointed between
//                           replays (cudaGraphExecKernelNodeSetParams, cudaGraphExecUpdate)
//                           instead of instantiated again
//   e fork/join             each step's two halves on two streams (events), captured into one graph
//   f cuBLAS in the graph   a cublasSgemv readout after every step, captured with the kernels
// Every mode's final state must be the CPU reference's, bit for bit. Beside the modes:
// 1000 empty kernels as stream launches and as one graph (the overhead of a launch; the
// benchmark target), and a sweep of the array size (where that overhead stops mattering).
//
// Lesson 18 of the course: streams and events come from lesson 05, cuBLAS from lesson 08;
// lesson 17 removed launches by fusing kernels, this one makes the launches that remain
// cheap. Next: lesson 19 (mixed precision).
// Run: ./build/bin/cuda_graphs                (n = 4096, 1000 steps of 20 kernels, every mode)
//      ./build/bin/cuda_graphs --mode=2       (one mode alone)
//      ./build/bin/cuda_graphs --dot=step.dot (mode b also writes its one-step graph for Graphviz)
// See README.md.
#include <cublas_v2.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "common/check.h"
#include "common/device.h"
#include "common/flags.h"
#include "common/launch.h"
#include "common/memory.h"
#include "common/report.h"
#include "common/timer.h"
#include "verify/compare.h"
#include "verify/graphs.h"
#include "verify/parallel.h"
#include "verify/random.h"

#include "kernels/step_kernels.cuh"

constexpr int64_t kMaxGraphNodes = 200000;             // --graph-steps x (2K + 1) nodes at most (mode e's graph)
constexpr int kReadouts = 8;                           // rows of mode f's readout matrix
constexpr size_t kCublasWorkspace = size_t(32) << 20;  // what cuBLAS asks for on Hopper (4 MiB before)

// One state of the workload on the GPU: x (updated by the kernels), prev (the snapshot the
// stencil reads) and init (the starting values, copied into x before every run).
struct State {
    float* x = nullptr;
    float* prev = nullptr;
    float* init = nullptr;
    size_t n = 0;
    size_t bytes() const { return n * sizeof(float); }
};

// What every mode needs.
struct Ctx {
    State a, b;                     // b: the second state of mode d
    cudaStream_t stream{}, side{};  // side: the second branch of mode e
    int64_t steps = 0, graph_steps = 0;
    int K = 0, repeat = 0;
    uint64_t seed = 0;
    std::string dot;                                 // --dot: where mode b writes its one-step graph
    const std::vector<double>* state_sum = nullptr;  // CPU: the sum of every step's state (mode f)
    lesson::Report* report = nullptr;
};

// One measured way of running the whole workload.
struct Run {
    std::string name;
    int mode = -1;                   // its place in kModes
    double kernels = 0;              // kernels per run of the workload
    double gpu_ms = 0, host_ms = 0;  // median: CUDA events around the run; host clock around the enqueue
    std::vector<float> h_a, h_b;     // final states of the verified run (h_b: mode d only)
    bool same_after_timing = true;   // the last timed run left the same bits
    int64_t graph_steps = 0;         // steps per graph (0: no graph)
    double capture_ms = NAN, instantiate_ms = NAN;
};

// ---------------------------------------------------------------- enqueueing one step
// The K kernels of a step on [first, first + count): the stencil, then K - 1 affine updates.
static void enqueue_chain(const State& s, size_t first, size_t count, int K, cudaStream_t stream) {
    const unsigned blocks = unsigned(lesson::ceil_div(count, step::kThreads));
    step::stencil3<<<blocks, step::kThreads, 0, stream>>>(s.prev, s.x, s.n, first, count, verify::kStencilW0,
                                                          verify::kStencilW1, verify::kStencilW2);
    CUDA_CHECK_LAUNCH();
    for (int j = 1; j < K; ++j) {
        const verify::Affine c = verify::step_affine(j);
        step::affine<<<blocks, step::kThreads, 0, stream>>>(s.x, first, count, c.a, c.b);
        CUDA_CHECK_LAUNCH();
    }
}

// One step on the whole state: the snapshot copy, then the kernels.
static void enqueue_step(const State& s, int K, cudaStream_t stream) {
    CUDA_CHECK(cudaMemcpyAsync(s.prev, s.x, s.bytes(), cudaMemcpyDeviceToDevice, stream));
    enqueue_chain(s, 0, s.n, K, stream);
}

// ---------------------------------------------------------------- measuring a mode
// The verified run first (it also warms up: a graph's first launch uploads it), then
// `repeat` timed runs. Every run starts from init (copied into x before the start event,
// so not timed); CUDA events time everything enqueue() issues on the stream, the host
// clock times the enqueueing alone. The last timed run must leave the same bits.
// Long runs take fewer samples, going by the first timed run (lesson::capped_samples): at the default
// size mode a (70 ms a run) takes 3, the other modes (20-45 ms a run) 7.
template <class Enqueue>
static Run measure(const Ctx& c, const std::string& name, double kernels, bool both, Enqueue&& enqueue,
                   const std::function<void()>& also_reset = {}) {
    auto reset = [&] {
        CUDA_CHECK(cudaMemcpyAsync(c.a.x, c.a.init, c.a.bytes(), cudaMemcpyDeviceToDevice, c.stream));
        if (both) CUDA_CHECK(cudaMemcpyAsync(c.b.x, c.b.init, c.b.bytes(), cudaMemcpyDeviceToDevice, c.stream));
        if (also_reset) also_reset();
    };
    auto copy_out = [&](const State& s, std::vector<float>& h) {
        h.resize(s.n);
        CUDA_CHECK(cudaStreamSynchronize(c.stream));
        CUDA_CHECK(cudaMemcpy(h.data(), s.x, s.bytes(), cudaMemcpyDeviceToHost));
    };
    Run run;
    run.name = name;
    run.kernels = kernels;
    // Poison the snapshots (0xFF bytes are NaN): a step whose copy did not run before its stencil fails.
    CUDA_CHECK(cudaMemsetAsync(c.a.prev, 0xFF, c.a.bytes(), c.stream));
    if (both) CUDA_CHECK(cudaMemsetAsync(c.b.prev, 0xFF, c.b.bytes(), c.stream));
    reset();
    enqueue();
    copy_out(c.a, run.h_a);
    if (both) copy_out(c.b, run.h_b);

    lesson::EventTimer timer;
    std::vector<double> gpu, host;
    int runs = c.repeat;
    for (int r = 0; r < runs; ++r) {
        reset();
        timer.start(c.stream);
        lesson::HostTimer h;
        enqueue();
        host.push_back(h.ms());
        gpu.push_back(timer.stop(c.stream));
        if (r == 0) runs = int(lesson::capped_samples(c.repeat, gpu[0]));
    }
    run.gpu_ms = lesson::median(gpu);
    run.host_ms = lesson::median(host);
    std::vector<float> last;
    copy_out(c.a, last);
    run.same_after_timing = verify::check_same_bits(last.data(), run.h_a.data(), c.a.n, "").pass;
    return run;
}

// What a graph holds: its nodes by type and its edges (dependencies).
struct Shape {
    size_t kernels = 0, copies = 0, other = 0, edges = 0;
    bool operator==(const Shape& o) const {
        return kernels == o.kernels && copies == o.copies && other == o.other && edges == o.edges;
    }
    std::string text() const {
        return std::to_string(kernels) + " kernel nodes, " + std::to_string(copies) + " memcpy nodes, " +
               std::to_string(other) + " other nodes, " + std::to_string(edges) + " edges";
    }
};
static Shape graph_shape(cudaGraph_t graph) {
    size_t count = 0;
    CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &count));
    std::vector<cudaGraphNode_t> nodes(count);
    CUDA_CHECK(cudaGraphGetNodes(graph, nodes.data(), &count));
    Shape s;
    for (cudaGraphNode_t node : nodes) {
        cudaGraphNodeType type{};
        CUDA_CHECK(cudaGraphNodeGetType(node, &type));
        if (type == cudaGraphNodeTypeKernel) ++s.kernels;
        else if (type == cudaGraphNodeTypeMemcpy) ++s.copies;
        else ++s.other;
    }
    CUDA_CHECK(cudaGraphGetEdges(graph, nullptr, nullptr, nullptr, &s.edges));  // null arrays: just the count
    return s;
}

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
    CUDA_CHECK(cudaDeviceSynchronize());  // c.stream is non-blocking: see "3." in main()

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

// ---------------------------------------------------------------- the overhead of a launch
// `count` empty kernels: launched one by one on the stream, then captured once into a graph
// and replayed. Per kernel, in microseconds: events around all of them (the GPU's view) and
// the host clock around the loop that enqueues them.
struct Probe {
    double stream_us = 0, stream_host_us = 0, graph_us = 0, graph_host_us = 0, instantiate_ms = 0;
};
static Probe probe_empty(cudaStream_t stream, int64_t count, int repeat) {
    auto launch_all = [&] {
        for (int64_t i = 0; i < count; ++i) {
            step::empty<<<1, 1, 0, stream>>>();
            CUDA_CHECK_LAUNCH();
        }
    };
    auto time_us = [&](auto&& enqueue, double* host_us) {
        lesson::EventTimer timer;
        enqueue();  // warm-up
        CUDA_CHECK(cudaStreamSynchronize(stream));
        std::vector<double> gpu, host;
        for (int r = 0; r < repeat; ++r) {
            timer.start(stream);
            lesson::HostTimer h;
            enqueue();
            host.push_back(h.ms() * 1e3 / double(count));
            gpu.push_back(timer.stop(stream) * 1e3 / double(count));
        }
        *host_us = lesson::median(host);
        return lesson::median(gpu);
    };
    Probe p;
    p.stream_us = time_us(launch_all, &p.stream_host_us);
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    launch_all();
    CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    lesson::HostTimer t;
    CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    p.instantiate_ms = t.ms();
    p.graph_us = time_us([&] { CUDA_CHECK(cudaGraphLaunch(exec, stream)); }, &p.graph_host_us);
    CUDA_CHECK(cudaGraphExecDestroy(exec));
    CUDA_CHECK(cudaGraphDestroy(graph));
    return p;
}

static State alloc_state(size_t n) {
    State s;
    s.n = n;
    CUDA_CHECK(cudaMalloc(&s.x, s.bytes()));
    CUDA_CHECK(cudaMalloc(&s.prev, s.bytes()));
    CUDA_CHECK(cudaMalloc(&s.init, s.bytes()));
    return s;
}
static void free_state(State& s) {
    CUDA_CHECK(cudaFree(s.init));
    CUDA_CHECK(cudaFree(s.prev));
    CUDA_CHECK(cudaFree(s.x));
    s = State{};
}
static std::string us_text(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f us", v);
    return buf;
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

    const size_t N = size_t(n);
    const bool all = mode == 0;
    const bool use_cublas = all || mode == kModeCublas + 1;
    const size_t sweep_n = sweep > 0 && all ? size_t(1) << sweep : 0;
    // Host: initial states, references and results of two states (about 12 floats per element),
    // the readout matrix and the CPU's state sums; the sweep's array a few times over.
    lesson::require_host_memory(N * (12 * sizeof(float) + (kReadouts + 2) * sizeof(double)) +
                                    4 * sweep_n * sizeof(float),
                                "pageable", "--n=" + std::to_string(n) + " --sweep=" + std::to_string(sweep));
    // 2. The initial states (uniform in [0, 1)) and the CPU references: the same float
    //    operations in the same order, so the GPU must match them bit for bit. The references
    //    need no GPU and take 0.3-0.4 s at the default size: they run on a host thread of their
    //    own while the CUDA context starts, and are joined before the first mode runs.
    std::vector<float> h_init_a(N), h_init_b(N), ref_a(N), ref_b(N);
    verify::fill_uniform(h_init_a.data(), N, uint64_t(opt.seed), 0.0f, 1.0f);
    verify::fill_uniform(h_init_b.data(), N, uint64_t(opt.seed) + 1, 0.0f, 1.0f);
    std::vector<double> state_sum(use_cublas ? N : 0, 0.0);
    const bool two_states = all || kModes[mode - 1].two_states;
    auto reference = [&](int64_t which) {  // 0: state a (and the state sums of mode f), 1: state b
        std::vector<float>& ref = which == 0 ? ref_a : ref_b;
        ref = which == 0 ? h_init_a : h_init_b;
        verify::steps_reference(ref.data(), N, steps, int(K), which == 0 && use_cublas ? state_sum.data() : nullptr);
    };
    // A state of up to 2^14 floats is one block of steps_reference, on one thread: then the two
    // states' references run side by side, one thread each. Larger ones use every core in turn.
    const bool side_by_side = two_states && N <= (size_t(1) << 14);
    double cpu_ms = 0;
    std::thread cpu_thread([&] {
        lesson::HostTimer cpu;
        if (side_by_side) {
            verify::parallel_for(2, reference);
        } else {
            reference(0);
            if (two_states) reference(1);
        }
        cpu_ms = cpu.ms();
    });

    cudaDeviceProp prop = lesson::pick_device(opt.device);
    // Device: two states (x, prev, init), the readout matrix and cuBLAS's workspace, and the sweep's state.
    lesson::require_device_memory(N * (6 + kReadouts) * sizeof(float) + kCublasWorkspace + 3 * sweep_n * sizeof(float),
                                  "--n=" + std::to_string(n) + " --sweep=" + std::to_string(sweep));

    lesson::Report report("18_cuda_graphs");
    report.device(prop.name, prop.major, prop.minor, prop.multiProcessorCount, prop.totalGlobalMem / 1e9);
    report.config("n", n);
    report.config("steps", steps);
    report.config("kernels_per_step", K);
    report.config("graph_steps", graph_steps);
    report.config("mode", mode);
    report.config("repeat", opt.repeat);
    report.config("seed", opt.seed);

    // 3. Device memory, the initial states, two non-blocking streams.
    Ctx c;
    c.a = alloc_state(N);
    c.b = alloc_state(N);
    CUDA_CHECK(cudaMemcpy(c.a.init, h_init_a.data(), c.a.bytes(), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(c.b.init, h_init_b.data(), c.b.bytes(), cudaMemcpyHostToDevice));
    // The work goes on non-blocking streams, which do not wait for the legacy default stream, and
    // a cudaMemcpy from pageable memory may return before its last bytes land: wait once, so that
    // nothing reads `init` early (a sweep size once started from a half-copied state under load).
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
    cpu_thread.join();
    report.cpu_reference_ms(cpu_ms, N > (size_t(1) << 14) ? verify::host_threads() : side_by_side ? 2 : 1);

    // 4. The modes. Each final state against the CPU reference, bit for bit.
    std::vector<Run> runs;
    for (int k = 0; k < kModeCount; ++k) {
        if (!all && mode != k + 1) continue;
        for (Run& run : kModes[k].run(c)) {
            run.mode = k;
            runs.push_back(std::move(run));
        }
    }
    if (opt.inject_fault) verify::inject_fault(runs.front().h_a.data(), N, uint64_t(opt.seed));
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

    // 5. The report: per-kernel time of each run (run time / kernels launched), the host's
    //    enqueue time, and for graphs the instantiate cost and the replays that repay it.
    report.timing(
        "whole workload, CUDA events around it (median of --repeat runs, at most 7 where they would take "
        "over 0.15 s, 3 where one takes 50 ms or more; each from the initial state after a verified warm-up "
        "run); 'host' = host clock around the enqueue loop alone");
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

    // 6. The overhead of a launch alone: empty kernels (the benchmark target).
    double ratio = NAN;
    if (all) {
        const Probe p = probe_empty(c.stream, empties, int(opt.repeat));
        ratio = p.stream_us / p.graph_us;
        const std::string e = std::to_string(empties) + " empty kernels";
        report.variant(e + ", stream launches", p.stream_us * 1e-3 * double(empties), p.stream_us, "us/kernel");
        report.variant(e + ", one graph replayed", p.graph_us * 1e-3 * double(empties), p.graph_us, "us/kernel");
        report.metric(e + ", stream: host enqueue per kernel", p.stream_host_us, "us");
        report.metric(e + ", graph: host cudaGraphLaunch per kernel", p.graph_host_us, "us");
        report.metric(e + ", graph: instantiate (host)", p.instantiate_ms, "ms");
        report.key_result("empty kernels: " + us_text(p.stream_us) + " per stream launch, " + us_text(p.graph_us) +
                              " per kernel replayed in a graph",
                          ratio, "stream launches", lesson::Against::Yardstick);
        report.default_size(cli.at_default_size());
        report.target("empty kernels: per-kernel time, stream launches / graph replay", ratio, 3.0, "x");
    } else if (!runs.empty()) {
        report.key_result(runs.front().name + ": " + us_text(runs.front().gpu_ms * 1e3 / runs.front().kernels) +
                          " per kernel");
    }

    // 7. The sweep: stream launches against one graph of all sweep steps, at growing array
    //    sizes. Where the kernels take longer than a launch, the graph stops mattering.
    if (sweep_n > 0) {
        Ctx s = c;
        s.steps = sweep_steps;
        s.repeat = std::min(c.repeat, 5);
        int64_t where = -1;
        for (int lg = 10; lg <= sweep; lg += 2) {
            const size_t m = size_t(1) << lg;
            s.a = alloc_state(m);
            verify::host_vector<float> h_init(m);  // not zeroed: fill_uniform writes every element
            verify::fill_uniform(h_init.data(), m, uint64_t(opt.seed) + 2, 0.0f, 1.0f);
            CUDA_CHECK(cudaMemcpy(s.a.init, h_init.data(), s.a.bytes(), cudaMemcpyHostToDevice));
            CUDA_CHECK(cudaDeviceSynchronize());  // s.stream is non-blocking (see 3.)
            const std::string size = "sweep n=2^" + std::to_string(lg);
            const double kernels = double(sweep_steps) * double(K);
            Run st = measure(s, size + ": stream launches", kernels, false, [&] {
                for (int64_t k = 0; k < s.steps; ++k) enqueue_step(s.a, s.K, s.stream);
            });
            cudaGraph_t graph = capture_steps(s, s.a, s.steps);
            cudaGraphExec_t exec = nullptr;
            CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
            Run gr =
                measure(s, size + ": one graph", kernels, false, [&] { CUDA_CHECK(cudaGraphLaunch(exec, s.stream)); });
            CUDA_CHECK(cudaGraphExecDestroy(exec));
            CUDA_CHECK(cudaGraphDestroy(graph));
            report.check(verify::check_same_bits(gr.h_a.data(), st.h_a.data(), m,
                                                 size + ": graph replay, the same bits as stream launches"));
            report.variant(st.name, st.gpu_ms, st.gpu_ms * 1e3 / kernels, "us/kernel");
            report.variant(gr.name, gr.gpu_ms, gr.gpu_ms * 1e3 / kernels, "us/kernel");
            const double gain = st.gpu_ms / gr.gpu_ms;
            report.metric(size + ": stream / graph time", gain, "x");
            if (where < 0 && gain < 1.10) where = lg;
            free_state(s.a);
        }
        report.metric("sweep: first size where the graph gains less than 10% (log2 n; -1: none)", double(where), "");
    }

    // 8. Clean up.
    CUDA_CHECK(cudaStreamDestroy(c.side));
    CUDA_CHECK(cudaStreamDestroy(c.stream));
    free_state(c.b);
    free_state(c.a);
    return report.finish(opt.json);
}
