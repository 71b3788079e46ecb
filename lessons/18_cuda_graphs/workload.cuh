// Lesson 18 - CUDA graphs: the workload, and the one way every mode of it is measured.
//
// A state on the GPU (State), one step of the workload enqueued on a stream (enqueue_step: the
// snapshot copy, then the stencil and K - 1 affine kernels of kernels/step_kernels.cuh),
// measure() (a verified run, then timed runs, each from the initial state) and graph_shape()
// (a graph's nodes by type and its edges). modes.cuh runs the workload in six ways with them.
// Lesson 18 of the course; before: lesson 17 (fusion), next: lesson 19 (mixed precision).
// Run: ./build/bin/cuda_graphs
#pragma once
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/check.h"
#include "common/launch.h"
#include "common/report.h"
#include "common/timer.h"
#include "verify/compare.h"
#include "verify/graphs.h"

#include "kernels/step_kernels.cuh"

constexpr int64_t kMaxGraphNodes = 200000;             // --graph-steps x (2K + 1) nodes at most (mode e's graph)
constexpr int kReadouts = 8;                           // rows of mode f's readout matrix
constexpr size_t kCublasWorkspace = size_t(32) << 20;  // the workspace cuBLAS asks for on Hopper

// One state of the workload on the GPU: x (updated by the kernels), prev (the snapshot the
// stencil reads) and init (the starting values, copied into x before every run).
struct State {
    float* x = nullptr;
    float* prev = nullptr;
    float* init = nullptr;
    size_t n = 0;
    size_t bytes() const { return n * sizeof(float); }
};

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
// Long runs take fewer samples, going by the first timed run (lesson::capped_samples).
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
