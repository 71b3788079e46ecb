// Lesson 18 - CUDA graphs: where the launch overhead stops mattering.
//
// Stream launches against one captured graph of all --sweep-steps steps, at array sizes
// n = 2^10, 2^12, ... 2^--sweep: where each kernel takes longer than a launch, the graph gains
// nothing. The two final states must be the same bits; the report gives both times per kernel,
// their ratio, and the first size where the graph gains less than 10%. main.cu runs it last.
// Lesson 18 of the course; before: lesson 17 (fusion), next: lesson 19 (mixed precision).
// Run: ./build/bin/cuda_graphs --sweep=24 --sweep-steps=50
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>

#include "common/check.h"
#include "common/report.h"
#include "verify/compare.h"
#include "verify/parallel.h"
#include "verify/random.h"

#include "modes.cuh"
#include "workload.cuh"

static void run_sweep(const Ctx& c, lesson::Report& report, int64_t max_log2, int64_t sweep_steps) {
    Ctx s = c;
    s.steps = sweep_steps;
    s.repeat = std::min(c.repeat, 5);
    int64_t where = -1;
    for (int lg = 10; lg <= max_log2; lg += 2) {
        const size_t m = size_t(1) << lg;
        s.a = alloc_state(m);
        verify::host_vector<float> h_init(m);  // not zeroed: fill_uniform writes every element
        verify::fill_uniform(h_init.data(), m, c.seed + 2, 0.0f, 1.0f);
        CUDA_CHECK(cudaMemcpy(s.a.init, h_init.data(), s.a.bytes(), cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaDeviceSynchronize());  // s.stream is non-blocking (main.cu, step 4)
        const std::string size = "sweep n=2^" + std::to_string(lg);
        const double kernels = double(sweep_steps) * double(s.K);
        Run st = measure(s, size + ": stream launches", kernels, false, [&] {
            for (int64_t k = 0; k < s.steps; ++k) enqueue_step(s.a, s.K, s.stream);
        });
        cudaGraph_t graph = capture_steps(s, s.a, s.steps);
        cudaGraphExec_t exec = nullptr;
        CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
        Run gr = measure(s, size + ": one graph", kernels, false, [&] { CUDA_CHECK(cudaGraphLaunch(exec, s.stream)); });
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
