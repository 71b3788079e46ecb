// common/ceilings.h - the device's ceilings, measured in the same run, so every
// rate a lesson prints comes with its fraction of what this GPU can do.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cuda_runtime.h>
#include "common/check.h"
#include "common/timer.h"

namespace lesson {

// Device-to-device cudaMemcpy bandwidth in GB/s (bytes read + bytes written),
// over a buffer of 8x the L2 cache (at least 1 GiB, at most a quarter of the
// free memory), so that the cache cannot serve it. A copy reads and writes
// equal amounts; kernels that read more than they write can beat it slightly.
inline double measure_d2d_gbps(const cudaDeviceProp& prop, int repeat = 10) {
    size_t free_b = 0, total_b = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    size_t bytes = std::max<size_t>(size_t(8) * prop.l2CacheSize, size_t(1) << 30);
    bytes = std::min(bytes, free_b / 4) & ~size_t(255);
    void *src = nullptr, *dst = nullptr;
    CUDA_CHECK(cudaMalloc(&src, bytes));
    CUDA_CHECK(cudaMalloc(&dst, bytes));
    CUDA_CHECK(cudaMemset(src, 1, bytes));
    double ms = time_median_ms(repeat, [&] { CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice)); });
    CUDA_CHECK(cudaFree(src));
    CUDA_CHECK(cudaFree(dst));
    return 2.0 * double(bytes) / (ms * 1e6);
}

// Host<->device rates in GB/s for one buffer size: each direction alone, and
// both directions at once (bytes of both counted).
struct LinkRates {
    double h2d = 0, d2h = 0, both = 0;
};

// pinned = true: cudaMallocHost buffers; false: plain pageable malloc'ed ones.
inline LinkRates measure_link_gbps(size_t bytes, bool pinned, int repeat = 5) {
    char *h_a = nullptr, *h_b = nullptr;
    if (pinned) {
        CUDA_CHECK(cudaMallocHost(&h_a, bytes));
        CUDA_CHECK(cudaMallocHost(&h_b, bytes));
    } else {
        h_a = static_cast<char*>(std::malloc(bytes));
        h_b = static_cast<char*>(std::malloc(bytes));
        if (!h_a || !h_b) fail_call("host", "malloc", "out of memory", __FILE__, __LINE__);
    }
    std::fill(h_a, h_a + bytes, char(1));  // touch the pages: first-touch cost is not transfer cost
    std::fill(h_b, h_b + bytes, char(2));
    char *d_a = nullptr, *d_b = nullptr;
    CUDA_CHECK(cudaMalloc(&d_a, bytes));
    CUDA_CHECK(cudaMalloc(&d_b, bytes));
    CUDA_CHECK(cudaMemset(d_a, 0, bytes));
    CUDA_CHECK(cudaMemset(d_b, 0, bytes));
    cudaStream_t s1, s2;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    LinkRates r;
    double ms;
    if (pinned) {
        ms = time_median_ms(repeat, [&] { CUDA_CHECK(cudaMemcpyAsync(d_a, h_a, bytes, cudaMemcpyHostToDevice, s1)); }, s1);
        r.h2d = bytes / (ms * 1e6);
        ms = time_median_ms(repeat, [&] { CUDA_CHECK(cudaMemcpyAsync(h_b, d_b, bytes, cudaMemcpyDeviceToHost, s1)); }, s1);
        r.d2h = bytes / (ms * 1e6);
        // Both at once: s2 joins s1's timeline through events so s1's timer spans both copies.
        cudaEvent_t fork, join;
        CUDA_CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
        CUDA_CHECK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
        ms = time_median_ms(repeat, [&] {
            CUDA_CHECK(cudaEventRecord(fork, s1));
            CUDA_CHECK(cudaStreamWaitEvent(s2, fork, 0));
            CUDA_CHECK(cudaMemcpyAsync(d_a, h_a, bytes, cudaMemcpyHostToDevice, s1));
            CUDA_CHECK(cudaMemcpyAsync(h_b, d_b, bytes, cudaMemcpyDeviceToHost, s2));
            CUDA_CHECK(cudaEventRecord(join, s2));
            CUDA_CHECK(cudaStreamWaitEvent(s1, join, 0));
        }, s1);
        r.both = 2.0 * bytes / (ms * 1e6);
        CUDA_CHECK(cudaEventDestroy(fork));
        CUDA_CHECK(cudaEventDestroy(join));
    } else {
        // Pageable copies go through a staging buffer and block the host; a host
        // clock around copy + synchronize is the honest timer (an H2D copy may
        // return before its last DMA lands, hence the synchronize).
        auto host_median = [&](auto&& copy) {
            copy();
            CUDA_CHECK(cudaDeviceSynchronize());
            std::vector<double> v;
            for (int i = 0; i < repeat; ++i) {
                HostTimer t;
                copy();
                CUDA_CHECK(cudaDeviceSynchronize());
                v.push_back(t.ms());
            }
            return median(v);
        };
        ms = host_median([&] { CUDA_CHECK(cudaMemcpy(d_a, h_a, bytes, cudaMemcpyHostToDevice)); });
        r.h2d = bytes / (ms * 1e6);
        ms = host_median([&] { CUDA_CHECK(cudaMemcpy(h_b, d_b, bytes, cudaMemcpyDeviceToHost)); });
        r.d2h = bytes / (ms * 1e6);
        r.both = 0;  // pageable copies do not overlap
    }
    CUDA_CHECK(cudaStreamDestroy(s1));
    CUDA_CHECK(cudaStreamDestroy(s2));
    CUDA_CHECK(cudaFree(d_a));
    CUDA_CHECK(cudaFree(d_b));
    if (pinned) {
        CUDA_CHECK(cudaFreeHost(h_a));
        CUDA_CHECK(cudaFreeHost(h_b));
    } else {
        std::free(h_a);
        std::free(h_b);
    }
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
