// Lesson 05 (stream pipeline): the slots of the pipeline, made and freed, and how each variant
// of main.cu is run: C and the slots' outputs poisoned, the variant timed, every element checked.
// Run: ./build/bin/stream_pipeline [--quick]   (README.md is the handout)
#pragma once
#include <string>
#include <vector>

#include "common/check.h"
#include "common/flags.h"
#include "common/report.h"
#include "common/timer.h"
#include "verify/compare.h"
#include "verify/parallel.h"

#include "plan.h"

// One slot of the pipeline: its own stream, device buffers and "done" event,
// and (for the loader of variant (d)) pinned host input buffers of one chunk.
struct Slot {
    cudaStream_t stream = nullptr;
    float *d_a = nullptr, *d_b = nullptr, *d_c = nullptr;
    float *h_a = nullptr, *h_b = nullptr;
    cudaEvent_t done = nullptr;
};

// The slots. Non-blocking streams: the slots do not wait for the legacy default stream, nor it
// for them; run_pipelined forks from and joins into stream 0 with events instead.
inline std::vector<Slot> make_slots(int S, size_t chunk_bytes) {
    std::vector<Slot> slots(S);
    for (Slot& s : slots) {
        CUDA_CHECK(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
        CUDA_CHECK(cudaMalloc(&s.d_a, chunk_bytes));
        CUDA_CHECK(cudaMalloc(&s.d_b, chunk_bytes));
        CUDA_CHECK(cudaMalloc(&s.d_c, chunk_bytes));
        CUDA_CHECK(cudaMemset(s.d_a, 0, chunk_bytes));
        CUDA_CHECK(cudaMemset(s.d_b, 0, chunk_bytes));
        CUDA_CHECK(cudaMallocHost(&s.h_a, chunk_bytes));  // the loader's pinned inputs, variant (d)
        CUDA_CHECK(cudaMallocHost(&s.h_b, chunk_bytes));
        CUDA_CHECK(cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming));
    }
    return slots;
}

inline void free_slots(std::vector<Slot>& slots) {
    for (Slot& s : slots) {
        CUDA_CHECK(cudaFree(s.d_a));
        CUDA_CHECK(cudaFree(s.d_b));
        CUDA_CHECK(cudaFree(s.d_c));
        CUDA_CHECK(cudaFreeHost(s.h_a));
        CUDA_CHECK(cudaFreeHost(s.h_b));
        CUDA_CHECK(cudaEventDestroy(s.done));
        CUDA_CHECK(cudaStreamDestroy(s.stream));
    }
}

// One variant: poison C and every slot's d_c (0xFF bytes are NaN: an element never written
// fails), time `variant` (lesson::time_median_ms, events on stream 0), then check every element.
struct Variants {
    const Work& w;
    std::vector<Slot>& slots;
    const verify::host_vector<double>& ref;
    const lesson::CommonOptions& opt;
    lesson::Report& report;
    double verify_ms = 0;  // host time of the checks (untimed)
    template <class Run>
    double run(const std::string& name, float* out, Run&& variant, int repeat, int warmup = 1) {
        verify::parallel_memset(out, 0xFF, w.total_bytes());
        for (Slot& s : slots) CUDA_CHECK(cudaMemset(s.d_c, 0xFF, w.chunk_bytes()));
        const double ms = lesson::time_median_ms(repeat, variant, 0, warmup);
        if (opt.inject_fault) verify::inject_fault(out, w.total_elems(), opt.seed);
        const lesson::HostTimer verify_time;
        report.check(verify_output(w, ref, out, name + ": every element of C"));
        verify_ms += verify_time.ms();
        return ms;
    }
};
