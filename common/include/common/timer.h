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

// How many samples to take of work that takes sample_ms a run: `repeat`, but at most 7 where
// `repeat` runs would take over kLongLoopMs, and at most 3 where one run takes kLongRunMs or
// more. At 10 ms and more a run, a median of 7 is as steady as one of 15; at 50 ms and more, one
// of 3 is; and the default run of the course is seconds shorter.
constexpr double kLongLoopMs = 150.0, kLongRunMs = 50.0;
inline int64_t capped_samples(int64_t repeat, double sample_ms) {
    if (sample_ms >= kLongRunMs) return std::min<int64_t>(repeat, 3);
    return sample_ms * double(repeat) > kLongLoopMs ? std::min<int64_t>(repeat, 7) : repeat;
}

// Calls in one sample of work whose single call took one_ms: 1 from min_sample_ms up; below it
// a burst of back-to-back calls (at most 1000) lasting about min_sample_ms (time_median_ms).
inline int burst_calls(double one_ms, double min_sample_ms = 0.5) {
    if (one_ms >= min_sample_ms) return 1;
    return int(std::min(1000.0, std::ceil(min_sample_ms / std::max(one_ms, 1e-4))));
}

// How time_median_ms takes its samples; a lesson prints it with Report::timing.
inline const char* kTimingMethod =
    "CUDA events after a warm-up; median of --repeat samples (at most 7 where --repeat of them would take "
    "over 0.15 s, 3 where one takes 50 ms or more); work shorter than 0.5 ms is timed as a burst of "
    "back-to-back calls between one event pair (per-call time = burst time / calls), so launch latency "
    "is not inside the number";

// Runs work() `warmup` times untimed (once, where that call takes kLongRunMs or more),
// then takes `repeat` samples with events on `stream` and returns the median per call, in
// milliseconds. A sample is one call when one call takes at least `min_sample_ms`;
// otherwise it is a burst of back-to-back calls (up to 1000) lasting about that long,
// divided by their count: one event pair per call would measure the launch latency of
// microsecond-scale work, not the work. The first timed call, which finds out which, is
// the first sample where a sample is one call, and long work takes fewer samples
// (capped_samples). work() must issue its device work on `stream` (or the legacy
// default stream, which orders with it).
template <class Work>
double time_median_ms(int repeat, Work&& work, cudaStream_t stream = 0, int warmup = 2, double min_sample_ms = 0.5) {
    const Phase phase("time_median_ms, samples", repeat);
    EventTimer t;
    for (int i = 0; i < warmup; ++i) {  // one warm-up call is enough for long work
        const HostTimer h;
        work();
        CUDA_CHECK(cudaStreamSynchronize(stream));
        if (h.ms() >= kLongRunMs) break;
    }
    t.start(stream);
    work();
    const double one = t.stop(stream);
    const int calls = burst_calls(one, min_sample_ms);
    std::vector<double> ms;
    if (calls == 1) {
        ms.push_back(one);
        repeat = int(capped_samples(repeat, one));
    }
    while (int(ms.size()) < repeat) {
        t.start(stream);
        for (int c = 0; c < calls; ++c) work();
        ms.push_back(t.stop(stream) / calls);
    }
    return median(ms);
}

// Times n variants of one job (work(v), v = 0..n-1) so that they meet the same conditions: each
// gets its warm-up and a first timed call (which tells a call from a burst, as in time_median_ms,
// and is not a sample), then round r takes one sample of every variant in turn. A drift over
// the loop (clocks that fall as a GPU at its power limit heats up, a boost that ends) then falls
// on all of them alike, not on whichever ran last: use it where variants are compared with each
// other. Each variant takes capped_samples of its own; returns each one's median per call.
template <class Work>
std::vector<double> time_interleaved_ms(int repeat, int n, Work&& work, cudaStream_t stream = 0, int warmup = 2,
                                        double min_sample_ms = 0.5) {
    const Phase phase("time_interleaved_ms, samples", int64_t(repeat) * n);
    EventTimer t;
    std::vector<int> calls(static_cast<size_t>(n), 1), samples(static_cast<size_t>(n), repeat);
    for (int v = 0; v < n; ++v) {
        for (int i = 0; i < warmup; ++i) {
            const HostTimer h;
            work(v);
            CUDA_CHECK(cudaStreamSynchronize(stream));
            if (h.ms() >= kLongRunMs) break;
        }
        t.start(stream);
        work(v);
        const double one = t.stop(stream);
        calls[v] = burst_calls(one, min_sample_ms);
        if (calls[v] == 1) samples[v] = int(capped_samples(repeat, one));
    }
    std::vector<double> ms(size_t(n) * size_t(repeat));  // variant v's samples at [v * repeat, ...)
    for (int r = 0; r < repeat; ++r)
        for (int v = 0; v < n; ++v) {
            if (r >= samples[v]) continue;
            t.start(stream);
            for (int c = 0; c < calls[v]; ++c) work(v);
            ms[size_t(v) * repeat + r] = t.stop(stream) / calls[v];
        }
    std::vector<double> out(static_cast<size_t>(n));
    for (int v = 0; v < n; ++v)
        out[v] = median(std::vector<double>(ms.begin() + v * repeat, ms.begin() + v * repeat + samples[v]));
    return out;
}

}  // namespace lesson
#endif
