// Lesson 18 - CUDA graphs: the overhead of a launch alone, the benchmark target.
//
// `count` empty kernels (kernels/step_kernels.cuh: step::empty) launched one by one on a stream,
// then the same loop captured once into a graph and replayed. Per kernel, in microseconds: CUDA
// events around all of them (the GPU's view) and the host clock around the loop that enqueues
// them. main.cu runs it after the modes; report_probe() states the target, stream / graph >= 3x.
// Lesson 18 of the course; before: lesson 17 (fusion), next: lesson 19 (mixed precision).
// Run: ./build/bin/cuda_graphs --empty-kernels=1000
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "common/check.h"
#include "common/launch.h"
#include "common/report.h"
#include "common/timer.h"

#include "kernels/step_kernels.cuh"

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

static std::string us_text(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f us", v);
    return buf;
}

// The probe's lines in the report, its key result and its target; returns stream / graph.
static double report_probe(lesson::Report& report, const Probe& p, int64_t count) {
    const double ratio = p.stream_us / p.graph_us;
    const std::string e = std::to_string(count) + " empty kernels";
    report.variant(e + ", stream launches", p.stream_us * 1e-3 * double(count), p.stream_us, "us/kernel");
    report.variant(e + ", one graph replayed", p.graph_us * 1e-3 * double(count), p.graph_us, "us/kernel");
    report.metric(e + ", stream: host enqueue per kernel", p.stream_host_us, "us");
    report.metric(e + ", graph: host cudaGraphLaunch per kernel", p.graph_host_us, "us");
    report.metric(e + ", graph: instantiate (host)", p.instantiate_ms, "ms");
    report.key_result("empty kernels: " + us_text(p.stream_us) + " per stream launch, " + us_text(p.graph_us) +
                          " per kernel replayed in a graph",
                      ratio, "stream launches", lesson::Against::Yardstick);
    return ratio;
}
