// common/timer.h - the one timer: CUDA events for device work (warm-up, then
// the median of repeats), a steady host clock for CPU work.
#pragma once
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <vector>

namespace lesson {

inline double median(std::vector<double> v) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    size_t m = v.size() / 2;
    return (v.size() % 2) ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

// Wall-clock milliseconds on the host.
class HostTimer {
public:
    HostTimer() : t0_(std::chrono::steady_clock::now()) {}
    void reset() { t0_ = std::chrono::steady_clock::now(); }
    double ms() const {
        return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0_).count();
    }

private:
    std::chrono::steady_clock::time_point t0_;
};

}  // namespace lesson

#if defined(__CUDACC__)
#include <cuda_runtime.h>
#include "common/check.h"
#include "common/phases.h"
namespace lesson {

// Times work issued on one stream with a pair of CUDA events.
class EventTimer {
public:
    EventTimer() {
        CUDA_CHECK(cudaEventCreate(&start_));
        CUDA_CHECK(cudaEventCreate(&stop_));
    }
    ~EventTimer() {
        cudaEventDestroy(start_);
        cudaEventDestroy(stop_);
    }
    EventTimer(const EventTimer&) = delete;
    EventTimer& operator=(const EventTimer&) = delete;
    void start(cudaStream_t s = 0) { CUDA_CHECK(cudaEventRecord(start_, s)); }
    float stop(cudaStream_t s = 0) {  // waits for the work, returns milliseconds
        CUDA_CHECK(cudaEventRecord(stop_, s));
        CUDA_CHECK(cudaEventSynchronize(stop_));
        float ms = 0.f;
        CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
        return ms;
    }

private:
    cudaEvent_t start_{}, stop_{};
};

// The samples of a timed loop of long work: `repeat`, or at most 7 where the loop (the lesson says
// what it costs: loop_ms, from a run it has already timed) would take over budget_ms. At tens of
// milliseconds a run, a median of 7 is as steady as one of 15, and the default run is seconds shorter.
inline int64_t capped_samples(int64_t repeat, double loop_ms, double budget_ms = 500.0) {
    return loop_ms > budget_ms ? std::min<int64_t>(repeat, 7) : repeat;
}

// How time_median_ms takes its samples; a lesson prints it with Report::timing.
inline const char* kTimingMethod =
    "CUDA events after a warm-up; median of --repeat samples; work shorter than 0.5 ms is timed as a burst "
    "of back-to-back calls between one event pair (per-call time = burst time / calls), so launch latency "
    "is not inside the number";

// Runs work() `warmup` times untimed, then takes `repeat` samples with events on
// `stream` and returns the median per call, in milliseconds. A sample is one
// call when one call takes at least `min_sample_ms`; otherwise it is a burst of
// back-to-back calls (up to 1000) lasting about that long, divided by their
// count: one event pair per call would measure the launch latency of
// microsecond-scale work, not the work. work() must issue its device work on
// `stream` (or the legacy default stream, which orders with it).
template <class Work>
double time_median_ms(int repeat, Work&& work, cudaStream_t stream = 0, int warmup = 2, double min_sample_ms = 0.5) {
    const Phase phase("time_median_ms, samples", repeat);
    EventTimer t;
    for (int i = 0; i < warmup; ++i) work();
    CUDA_CHECK(cudaStreamSynchronize(stream));
    t.start(stream);
    work();
    const double one = t.stop(stream);
    int calls = 1;
    if (one < min_sample_ms) calls = int(std::min(1000.0, std::ceil(min_sample_ms / std::max(one, 1e-4))));
    std::vector<double> ms;
    for (int i = 0; i < repeat; ++i) {
        t.start(stream);
        for (int c = 0; c < calls; ++c) work();
        ms.push_back(t.stop(stream) / calls);
    }
    return median(ms);
}

}  // namespace lesson
#endif
