// common/ceilings.h - what this GPU can do, measured (or computed from its
// clocks) in the same run, so every rate a lesson prints stands next to it.
//
// Two words, kept apart (docs/lesson-contract.md, section 8):
//  - a BOUND is the rate a correct kernel should not beat: the PCIe link, DRAM
//    streaming for the lesson's read/write mix, the peak FMA or tensor rate from
//    the clock. Only the clock peaks are strict. The link and DRAM bounds are
//    measured the way the timed work runs (bursts of back-to-back queued
//    operations), several trials, the best trial, so they are rarely low; a
//    kernel with a better access pattern than the probes can still beat one.
//  - a YARDSTICK is a reference to compare with (cuBLAS, a copy with another
//    read/write mix); its median is reported.
#pragma once
#include <cuda_runtime.h>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>
#include "common/check.h"
#include "common/gpu_class.h"
#include "common/report.h"
#include "common/timer.h"

namespace lesson {

// ---------------------------------------------------------------- from the clock

// The device's theoretical DRAM bandwidth in GB/s: memory clock x bus width x 2
// (double data rate). No streaming kernel reaches it; it caps every measured bound.
inline double dram_peak_gbps(int device) {
    int khz = 0, bits = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, device));
    CUDA_CHECK(cudaDeviceGetAttribute(&bits, cudaDevAttrGlobalMemoryBusWidth, device));
    return 2.0 * double(khz) * 1e3 * double(bits) / 8.0 / 1e9;
}

// The largest SM clock the device reports, in GHz.
inline double sm_clock_ghz(int device) {
    int khz = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, device));
    return double(khz) / 1e6;
}

enum class MathUnit { Fp32Simt, Tf32Tensor, Bf16Tensor };

// Dense floating-point operations per clock per SM (an FMA counts 2), from the
// architecture whitepapers; Bf16Tensor is 16-bit inputs (BF16, or FP16 where the GPU has
// no BF16) with FP32 accumulation. 0 where this table does not know the architecture.
// GeForce cards of cc 7.5, 8.6, 8.9 and 12.0 run 16-bit and TF32 tensor math with FP32
// accumulation at half the rate of the professional cards of the same cc (RTX 4090: 165
// dense TFLOP/s = 512 per clock per SM; L40S: 1024): `geforce` picks that rate.
inline double flops_per_clock_per_sm(int cc_major, int cc_minor, MathUnit unit, bool geforce = false) {
    const int cc = 10 * cc_major + cc_minor;
    const double consumer = geforce && (cc == 75 || cc == 86 || cc == 89 || cc == 120) ? 0.5 : 1.0;
    switch (unit) {
        case MathUnit::Fp32Simt:  // FP32 lanes x 2
            if (cc == 90 || cc == 89 || cc == 86 || cc == 87 || cc == 100 || cc == 120) return 256;
            if (cc == 80 || cc == 75 || cc == 70) return 128;
            return 0;
        case MathUnit::Tf32Tensor:
            if (cc == 100) return 4096;
            if (cc == 90) return 2048;
            if (cc == 80) return 1024;
            if (cc == 86 || cc == 87 || cc == 89 || cc == 120) return 512 * consumer;
            return 0;
        case MathUnit::Bf16Tensor:
            if (cc == 100) return 8192;
            if (cc == 90) return 4096;
            if (cc == 80) return 2048;
            if (cc == 86 || cc == 87 || cc == 89 || cc == 120) return 1024 * consumer;
            if (cc == 75) return 1024 * consumer;  // FP16 (Turing has no BF16)
            return 0;
    }
    return 0;
}

// Peak rate of `unit` in GFLOP/s at the largest reported SM clock (a bound:
// the clock never runs faster); NaN where the architecture is not in the table.
// The compute capability is prop's (an emulated class's under LESSON_GPU_LIMITS) and the
// GeForce rule gpu_limits()'s; the report notes which per-clock rate was used.
inline double peak_gflops(const cudaDeviceProp& prop, int device, MathUnit unit) {
    const bool geforce = gpu_limits().geforce;
    const double per = flops_per_clock_per_sm(prop.major, prop.minor, unit, geforce);
    const char* what = unit == MathUnit::Fp32Simt     ? "FP32 FMA"
                       : unit == MathUnit::Tf32Tensor ? "TF32 tensor"
                                                      : "16-bit tensor";
    char buf[224];
    if (per <= 0)
        std::snprintf(buf, sizeof buf, "%s peak: no per-clock rate known for cc %d.%d, so no fraction of it is given",
                      what, prop.major, prop.minor);
    else
        std::snprintf(buf, sizeof buf, "%s peak from %.0f flop/clock/SM (cc %d.%d%s) x %d SMs x %.2f GHz", what, per,
                      prop.major, prop.minor,
                      unit == MathUnit::Fp32Simt ? ""
                      : geforce && flops_per_clock_per_sm(prop.major, prop.minor, unit, false) != per
                          ? ", GeForce: FP32 accumulation at half the professional rate"
                          : "",
                      prop.multiProcessorCount, sm_clock_ghz(device));
    std::vector<std::string>& notes = detail::peak_rate_notes();
    if (std::find(notes.begin(), notes.end(), buf) == notes.end()) notes.push_back(buf);
    if (per <= 0) return NAN;
    return per * prop.multiProcessorCount * sm_clock_ghz(device);
}

// ---------------------------------------------------------------- size notes

// Non-empty when a working set of `bytes` is at most kL2Multiple times the L2: a kernel run again
// and again over it can find part of it still in the L2 (all of it, up to 1x), and a DRAM bound,
// probed over 8x the L2 or more, does not apply. NVIDIA does not document the L2's replacement
// policy: under LRU nothing would survive a sweep past 1x, under random replacement a cyclic sweep
// still hits about 20% of the time at 2x and 2% at 4x. The note compares sizes only: it cannot say
// how much of a run the L2 served (a profiler's L2 hit rate can), nor see reuse inside one kernel.
constexpr double kL2Multiple = 4.0;
inline std::string l2_note(double bytes, const cudaDeviceProp& prop) {
    const double l2 = double(prop.l2CacheSize);
    if (bytes > kL2Multiple * l2) return "";
    char buf[128];
    if (bytes <= l2) std::snprintf(buf, sizeof buf, "data fit in L2 (%.1f MB, L2 %.0f MB)", bytes / 1e6, l2 / 1e6);
    else
        std::snprintf(buf, sizeof buf, "data under %.0fx the L2 (%.1f MB, L2 %.0f MB): reruns may hit in L2",
                      kL2Multiple, bytes / 1e6, l2 / 1e6);
    return buf;
}

// Non-empty when an M x N output cannot fill the GPU (fewer 128 x 128 tiles
// than two per SM): a library yardstick is then not running at its speed either.
inline std::string small_gemm_note(int64_t m, int64_t n, const cudaDeviceProp& prop) {
    const double tiles = std::ceil(double(m) / 128.0) * std::ceil(double(n) / 128.0);
    if (tiles >= 2.0 * prop.multiProcessorCount) return "";
    char buf[96];
    std::snprintf(buf, sizeof buf, "shape too small to fill the GPU (%.0f output tiles, %d SMs)", tiles,
                  prop.multiProcessorCount);
    return buf;
}

// ---------------------------------------------------------------- DRAM

// Best of `trials` bursts of `work` (each a burst of `burst` back-to-back calls
// between one event pair), in milliseconds per call.
template <class Work>
double best_burst_ms(int trials, int burst, Work&& work, cudaStream_t stream = 0) {
    const Phase phase("best_burst_ms, calls", (long long)trials * burst);
    EventTimer t;
    work();
    CUDA_CHECK(cudaStreamSynchronize(stream));
    double best = INFINITY;
    for (int i = 0; i < trials; ++i) {
        t.start(stream);
        for (int b = 0; b < burst; ++b) work();
        best = std::min(best, double(t.stop(stream)) / burst);
    }
    return best;
}

namespace detail {
// The simplest streaming kernels for a read/write mix: R float4 inputs (a, b), W float4
// outputs (c). One step of a thread: U float4 per input at i, i + stride, ..., i + (U-1) * stride (those below n4), all loaded
// before the first store. With W = 0 the sum is written only when it is an impossible value,
// so the reads cannot be removed.
template <int R, int W, int U>
__device__ __forceinline__ void streamProbeStep(const float4* __restrict__ a, const float4* __restrict__ b,
                                                float4* __restrict__ c, size_t n4, size_t i, size_t stride) {
    float4 s[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
        const size_t j = i + size_t(u) * stride;
        s[u] = make_float4(0.f, 0.f, 0.f, 0.f);
        if (j < n4) {
            s[u] = a[j];
            if (R == 2) {
                const float4 x = b[j];
                s[u].x += x.x;
                s[u].y += x.y;
                s[u].z += x.z;
                s[u].w += x.w;
            }
        }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
        const size_t j = i + size_t(u) * stride;
        if (W == 0) {
            if (s[u].x == 1234.5f && s[u].y == -1234.5f) c[0] = s[u];
        } else if (j < n4) {
            c[j] = s[u];
        }
    }
}
// Grid-stride: each step of a thread takes U float4 a grid width apart.
template <int R, int W, int U>
__global__ void streamProbe(const float4* __restrict__ a, const float4* __restrict__ b, float4* __restrict__ c,
                            size_t n4) {
    const size_t step = size_t(gridDim.x) * blockDim.x;
    for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n4; i += U * step)
        streamProbeStep<R, W, U>(a, b, c, n4, i, step);
}
// The same mix in one pass over tiles: block b owns U * blockDim consecutive float4, each
// thread U of them a block width apart (what a coarsened elementwise kernel does: lesson 17).
template <int R, int W, int U>
__global__ void streamProbeTiles(const float4* __restrict__ a, const float4* __restrict__ b, float4* __restrict__ c,
                                 size_t n4) {
    streamProbeStep<R, W, U>(a, b, c, n4, size_t(blockIdx.x) * U * blockDim.x + threadIdx.x, blockDim.x);
}
// The best of several ways of doing the same work, in ms per call: every way gets 2 bursts of
// 10 calls, then the two fastest get `trials` more. A bound is the fastest way's best burst, and
// a screen finds the fastest ways as surely as timing every way in full, in far less time.
inline double best_of_ways(const std::vector<std::function<void()>>& ways, int trials) {
    std::vector<double> screen(ways.size());
    for (size_t i = 0; i < ways.size(); ++i) screen[i] = best_burst_ms(2, 10, ways[i]);
    std::vector<size_t> order(ways.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t x, size_t y) { return screen[x] < screen[y]; });
    double best = screen[order[0]];
    for (size_t k = 0; k < std::min<size_t>(2, order.size()); ++k)
        best = std::min(best, best_burst_ms(trials, 10, ways[order[k]]));
    return best;
}
// Four launch shapes of the probe for one mix: one float4 per thread; a grid-stride grid of 8
// blocks per SM; the same with 4 float4 per input in flight per thread (what an unrolled
// reduction or copy does); one pass over tiles with 4 float4 per thread (a coarsened
// elementwise kernel).
template <int R, int W>
std::vector<std::function<void()>> probe_ways(const float4* a, const float4* b, float4* c, size_t n4, int sms) {
    const unsigned one_each = unsigned((n4 + 255) / 256), wave = unsigned(8 * sms);
    return {[=] {
                streamProbe<R, W, 1><<<one_each, 256>>>(a, b, c, n4);
                CUDA_CHECK_LAUNCH();
            },
            [=] {
                streamProbe<R, W, 1><<<wave, 256>>>(a, b, c, n4);
                CUDA_CHECK_LAUNCH();
            },
            [=] {
                streamProbe<R, W, 4><<<wave, 256>>>(a, b, c, n4);
                CUDA_CHECK_LAUNCH();
            },
            [=] {
                streamProbeTiles<R, W, 4><<<unsigned((n4 + 1023) / 1024), 256>>>(a, b, c, n4);
                CUDA_CHECK_LAUNCH();
            }};
}
}  // namespace detail

// The DRAM bound of a kernel that reads `reads` arrays and writes `writes`
// arrays of equal size, in GB/s (bytes read + written): the best burst of 10
// launches of the simplest streaming kernel for that mix in four launch shapes
// (and, for 1:1, of cudaMemcpy); the two fastest shapes get `trials` bursts.
// Each array is its own allocation, as a lesson's are, of at least 1 GiB and 8x
// the L2 over all arrays (at most a quarter of the free memory in all), so that
// the cache cannot serve it and the gap between two launches of a burst (a
// microsecond or two) is as small a share of a launch as in the lessons' own
// 1 GiB runs (docs/measuring.md, "Bounds and yardsticks").
struct StreamBound {
    double gbps = NAN;
    std::string name;     // e.g. "DRAM bound, 2 reads : 1 write (best burst)"
    std::string not_run;  // why it was not measured (then gbps is NaN); empty when it was
};
inline std::string stream_bound_name(int reads, int writes) {
    return "DRAM bound, " + std::to_string(reads) + " read" + (reads == 1 ? "" : "s") + " : " + std::to_string(writes) +
           " write" + (writes == 1 ? "" : "s") + " (best burst)";
}
// The bound of a run that grades nothing against DRAM (its data within reach of the L2: l2_note). The probe
// moves gigabytes, seconds of work and minutes under compute-sanitizer, for a number nobody reads.
inline StreamBound stream_bound_not_measured(int reads, int writes, const std::string& why) {
    StreamBound bound;
    bound.name = stream_bound_name(reads, writes);
    bound.not_run = why;
    return bound;
}
inline StreamBound measure_stream_bound(const cudaDeviceProp& prop, int reads, int writes, int trials = 6) {
    const Phase phase("measure_stream_bound, reads x 10 + writes", reads * 10 + writes);
    if (reads < 0 || reads > 2 || writes < 0 || writes > 1 || reads + writes == 0)
        fail_call("measure_stream_bound", "mix", "supported mixes: 1:0, 0:1, 1:1, 2:1 reads:writes", __FILE__,
                  __LINE__);
    size_t free_b = 0, total_b = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    const int arrays = reads + writes;
    size_t per = std::max<size_t>(size_t(8) * prop.l2CacheSize / arrays, size_t(1) << 30);
    per = std::min(per, free_b / 4 / 3);
    const size_t n4 = per / 16 & ~size_t(63);
    float4 *a = nullptr, *b = nullptr, *c = nullptr;
    CUDA_CHECK(cudaMalloc(&a, n4 * 16));
    CUDA_CHECK(cudaMalloc(&b, n4 * 16));
    CUDA_CHECK(cudaMalloc(&c, n4 * 16));
    CUDA_CHECK(cudaMemset(a, 0, n4 * 16));
    CUDA_CHECK(cudaMemset(b, 0, n4 * 16));
    CUDA_CHECK(cudaMemset(c, 0, n4 * 16));
    const int sms = prop.multiProcessorCount;
    std::vector<std::function<void()>> ways;
    if (reads == 1 && writes == 0) ways = detail::probe_ways<1, 0>(a, b, c, n4, sms);
    if (reads == 0 && writes == 1) ways = {[&] { CUDA_CHECK(cudaMemsetAsync(c, 0, n4 * 16)); }};
    if (reads == 1 && writes == 1) {
        ways = detail::probe_ways<1, 1>(a, b, c, n4, sms);
        ways.push_back([&] { CUDA_CHECK(cudaMemcpyAsync(c, a, n4 * 16, cudaMemcpyDeviceToDevice)); });
    }
    if (reads == 2 && writes == 1) ways = detail::probe_ways<2, 1>(a, b, c, n4, sms);
    const double ms = detail::best_of_ways(ways, trials);
    CUDA_CHECK(cudaFree(a));
    CUDA_CHECK(cudaFree(b));
    CUDA_CHECK(cudaFree(c));
    StreamBound bound;
    bound.gbps = double(reads + writes) * double(n4) * 16.0 / (ms * 1e6);
    bound.name = stream_bound_name(reads, writes);
    return bound;
}

// Records a DRAM bound in the report next to the theoretical peak, and warns if
// the measured bound exceeds the peak (the measurement is then wrong).
// `roof`: Roof::Memory where the bound is a line of the roofline (lesson 17), drawn by scripts/roofline.py.
inline void add_bound(Report& report, const StreamBound& b, int device, Roof roof = Roof::None) {
    const double peak = dram_peak_gbps(device);
    if (!b.not_run.empty()) report.note(b.name + " not measured: " + b.not_run + ", so nothing is graded against it");
    else report.bound(b.name, b.gbps, "GB/s", roof);
    report.bound("DRAM peak from the memory clock (never reached)", peak, "GB/s");
    if (b.gbps > peak) report.warning(b.name + " measured above the DRAM peak from the clock");
}

// Device-to-device cudaMemcpy in GB/s (bytes read + written), median of
// `repeat` bursts over a buffer of 8x the L2 (at least 1 GiB): a yardstick for
// kernels whose read/write mix is not 1:1 (measure_stream_bound is the bound).
inline double measure_d2d_gbps(const cudaDeviceProp& prop, int repeat = 10) {
    const Phase phase("measure_d2d_gbps");
    size_t free_b = 0, total_b = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    size_t bytes = std::max<size_t>(size_t(8) * prop.l2CacheSize, size_t(1) << 30);
    bytes = std::min(bytes, free_b / 4) & ~size_t(255);
    void *src = nullptr, *dst = nullptr;
    CUDA_CHECK(cudaMalloc(&src, bytes));
    CUDA_CHECK(cudaMalloc(&dst, bytes));
    CUDA_CHECK(cudaMemset(src, 1, bytes));
    double ms = time_median_ms(repeat, [&] { CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice)); });
    CUDA_CHECK(cudaFree(src));
    CUDA_CHECK(cudaFree(dst));
    return 2.0 * double(bytes) / (ms * 1e6);
}

// ---------------------------------------------------------------- PCIe

// Host<->device rates in GB/s for one copy size: each direction alone, and both
// directions at once (bytes of both counted).
struct LinkRates {
    double h2d = 0, d2h = 0, both = 0;
};

// Where a pinned link probe copies: pinned host pages (`host_bytes` each way) and two
// device buffers of one copy each. Copy k of a burst uses the host pages at k copies in,
// wrapping at host_bytes, so a pipeline that passes its own batch buffers has its bound
// measured on the pages it copies: large pinned allocations can copy slower than a
// small fresh one (more pages for the host's address translation to map).
struct LinkBuffers {
    const void* host_up;  // the H2D copies' source, host_bytes
    void* host_down;      // the D2H copies' destination, host_bytes
    size_t host_bytes;
    void* dev_up;    // the H2D copies' destination, one copy
    void* dev_down;  // the D2H copies' source, one copy: zeroed first (initcheck flags a copy of
                     // memory never written)
};

// Copies of `bytes` in one burst of a link probe: about 256 MB in all, 2 to 64 copies.
inline int link_burst_copies(size_t bytes) {
    return int(std::min<size_t>(64, std::max<size_t>(2, (size_t(256) << 20) / std::max<size_t>(bytes, 1))));
}

// The PCIe bound at the pipeline's copy size, measured as a pipeline issues copies: a
// burst of back-to-back pinned copies of `bytes` each (link_burst_copies), `trials`
// trials, the best one. Each direction alone goes on one stream between
// an event pair; both at once go on two streams, fork/join.
inline LinkRates measure_pinned_link_gbps(size_t bytes, const LinkBuffers& on, int trials = 5) {
    const Phase phase("measure_pinned_link_gbps, bytes", (long long)bytes);
    if (on.host_bytes < bytes)
        fail_call("host", "measure_pinned_link_gbps", "host buffers shorter than one copy", __FILE__, __LINE__);
    LinkRates r;
    const int burst = link_burst_copies(bytes);
    const size_t slots = std::max<size_t>(1, on.host_bytes / std::max<size_t>(bytes, 1));
    size_t next_up = 0, next_down = 0;  // the host pages of the next copy each way, in copies
    const auto host_up = [&] { return static_cast<const char*>(on.host_up) + (next_up++ % slots) * bytes; };
    const auto host_down = [&] { return static_cast<char*>(on.host_down) + (next_down++ % slots) * bytes; };
    CUDA_CHECK(cudaMemset(on.dev_down, 0, bytes));
    CUDA_CHECK(cudaDeviceSynchronize());  // the copies below go on non-blocking streams, which do not wait for
                                          // the legacy default stream's memset
    cudaStream_t s1, s2;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    // Warm-up: an idle link and GPU leave their power-saving states only under load, and a bound
    // measured before that is too low. 50 ms of copies both ways first.
    for (HostTimer warm; warm.ms() < 50.0;) {
        CUDA_CHECK(cudaMemcpyAsync(on.dev_up, host_up(), bytes, cudaMemcpyHostToDevice, s1));
        CUDA_CHECK(cudaMemcpyAsync(host_down(), on.dev_down, bytes, cudaMemcpyDeviceToHost, s2));
        CUDA_CHECK(cudaStreamSynchronize(s1));
        CUDA_CHECK(cudaStreamSynchronize(s2));
    }
    // Both at once: s2 joins s1's timeline through events, so s1's event pair spans both bursts.
    cudaEvent_t fork, join;
    CUDA_CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
    const auto up = [&] { CUDA_CHECK(cudaMemcpyAsync(on.dev_up, host_up(), bytes, cudaMemcpyHostToDevice, s1)); };
    const auto down = [&] { CUDA_CHECK(cudaMemcpyAsync(host_down(), on.dev_down, bytes, cudaMemcpyDeviceToHost, s1)); };
    const auto both = [&] {
        CUDA_CHECK(cudaEventRecord(fork, s1));
        CUDA_CHECK(cudaStreamWaitEvent(s2, fork, 0));
        for (int b = 0; b < burst; ++b) {
            CUDA_CHECK(cudaMemcpyAsync(on.dev_up, host_up(), bytes, cudaMemcpyHostToDevice, s1));
            CUDA_CHECK(cudaMemcpyAsync(host_down(), on.dev_down, bytes, cudaMemcpyDeviceToHost, s2));
        }
        CUDA_CHECK(cudaEventRecord(join, s2));
        CUDA_CHECK(cudaStreamWaitEvent(s1, join, 0));
    };
    // The trials take turns (up, down, both; up, down, both; ...), so that each kind's samples
    // are spread over the whole probe: a host that is busy for a few milliseconds (another
    // process, the last lesson's threads) then spoils a few samples, not every sample of one
    // kind, and the bound stays a bound.
    // Small copies make short bursts (64 copies of 64 KB: about 0.1 ms), and 2 x trials rounds of
    // them last a few milliseconds: one slow stretch of the host can cover all of them. So the
    // rounds go on until they have lasted kMinProbeMs too (at most 20 x trials rounds).
    constexpr double kMinProbeMs = 40.0;
    double ms_up = INFINITY, ms_down = INFINITY, ms_both = INFINITY;
    const HostTimer probe;
    for (int t = 0; t < 20 * trials && (t < 2 * trials || probe.ms() < kMinProbeMs); ++t) {
        ms_up = std::min(ms_up, best_burst_ms(1, burst, up, s1));
        ms_down = std::min(ms_down, best_burst_ms(1, burst, down, s1));
        ms_both = std::min(ms_both, best_burst_ms(1, 1, both, s1));
    }
    r.h2d = bytes / (ms_up * 1e6);
    r.d2h = bytes / (ms_down * 1e6);
    r.both = 2.0 * double(bytes) * burst / (ms_both * 1e6);
    CUDA_CHECK(cudaEventDestroy(fork));
    CUDA_CHECK(cudaEventDestroy(join));
    CUDA_CHECK(cudaStreamDestroy(s1));
    CUDA_CHECK(cudaStreamDestroy(s2));
    return r;
}

// The link at one copy size on buffers of its own: pinned (measure_pinned_link_gbps) or
// pageable. Pageable copies block the host, so their burst is timed with the host clock,
// and they do not overlap (both = 0).
inline LinkRates measure_link_gbps(size_t bytes, bool pinned, int trials = 5) {
    const Phase phase(pinned ? "measure_link_gbps pinned, bytes" : "measure_link_gbps pageable, bytes",
                      (long long)bytes);
    char *d_a = nullptr, *d_b = nullptr;
    CUDA_CHECK(cudaMalloc(&d_a, bytes));  // the H2D copies' destination
    CUDA_CHECK(cudaMalloc(&d_b, bytes));  // the D2H copies' source
    LinkRates r;
    if (pinned) {
        char *h_a = nullptr, *h_b = nullptr;
        CUDA_CHECK(cudaMallocHost(&h_a, bytes));
        CUDA_CHECK(cudaMallocHost(&h_b, bytes));
        r = measure_pinned_link_gbps(bytes, LinkBuffers{h_a, h_b, bytes, d_a, d_b}, trials);
        CUDA_CHECK(cudaFreeHost(h_a));
        CUDA_CHECK(cudaFreeHost(h_b));
    } else {
        char* h_a = static_cast<char*>(std::malloc(bytes));
        char* h_b = static_cast<char*>(std::malloc(bytes));
        if (!h_a || !h_b) fail_call("host", "malloc", "out of memory", __FILE__, __LINE__);
        std::memset(h_a, 1, bytes);  // touch the pages: first-touch cost is not transfer cost
        std::memset(h_b, 2, bytes);
        CUDA_CHECK(cudaMemset(d_b, 0, bytes));  // initcheck flags a copy of memory never written
        const int burst = link_burst_copies(bytes);
        auto best_host = [&](auto&& copy) {
            copy();
            CUDA_CHECK(cudaDeviceSynchronize());
            double best = INFINITY;
            for (int i = 0; i < trials; ++i) {
                HostTimer t;
                for (int b = 0; b < burst; ++b) copy();
                CUDA_CHECK(cudaDeviceSynchronize());  // an H2D copy may return before its last DMA lands
                best = std::min(best, t.ms());
            }
            return best;
        };
        const double burst_bytes = double(bytes) * burst;
        r.h2d =
            burst_bytes / (best_host([&] { CUDA_CHECK(cudaMemcpy(d_a, h_a, bytes, cudaMemcpyHostToDevice)); }) * 1e6);
        r.d2h =
            burst_bytes / (best_host([&] { CUDA_CHECK(cudaMemcpy(h_b, d_b, bytes, cudaMemcpyDeviceToHost)); }) * 1e6);
        r.both = 0;
        std::free(h_a);
        std::free(h_b);
    }
    CUDA_CHECK(cudaFree(d_a));
    CUDA_CHECK(cudaFree(d_b));
    return r;
}

// The PCIe bound of a pipeline: the fewest milliseconds in which h2d_bytes can
// go up and d2h_bytes come down, given rates measured in the same run:
// max(up alone, down alone, everything at the both-directions rate).
inline double link_bound_ms(double h2d_bytes, double d2h_bytes, const LinkRates& r) {
    double up = h2d_bytes / (r.h2d * 1e6), down = d2h_bytes / (r.d2h * 1e6);
    double both = r.both > 0 ? (h2d_bytes + d2h_bytes) / (r.both * 1e6) : up + down;
    return std::max(std::max(up, down), both);
}

}  // namespace lesson
