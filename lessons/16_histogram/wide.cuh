// Lesson 16 of the course (histogram), part 2: more bins than one block's shared memory holds.
// Rung 7 (kernels/7_cluster_dsm.cuh, a thread-block cluster sharing its blocks' shared memory)
// against cub::DeviceHistogram::HistogramEven, on ceil(n / 4) 4-byte keys uniform in [0, --bins),
// so that it reads about as many bytes as part 1. Every bin of every run is compared exactly with
// a CPU histogram of the same keys, and the bins must add up to the key count. Gated: clusters
// need compute capability 9.0; elsewhere the part prints one line saying why and does not run.
// Before: part 1, the 256-bin ladder (main.cu). Next: the report (summary.cuh).
// Run: ./build/bin/histogram --rung=7 --bins=131072   (README.md is the handout)
#pragma once
#include <cub/device/device_histogram.cuh>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "common/check.h"
#include "common/device.h"
#include "common/memory.h"
#include "common/needs.h"
#include "common/report.h"
#include "common/timer.h"
#include "verify/histogram.h"
#include "verify/parallel.h"
#include "verify/random.h"

#include "kernels/7_cluster_dsm.cuh"

// Key i of the stream `seed`: uniform in [0, bins), a pure function of (seed, i).
inline uint32_t wide_key(uint64_t seed, uint64_t i, uint32_t bins) {
    return uint32_t(verify::splitmix64(seed * 0x9E3779B97F4A7C15ull + i) % bins);
}

// The exact check of one GPU histogram of `keys` keys: every bin equals the
// CPU's, and the bins add up to keys (a wrong sum counts once more, at index bins).
static lesson::Check check_wide(const std::vector<unsigned int>& gpu, const std::vector<uint64_t>& ref, uint64_t keys,
                                const std::string& what) {
    lesson::Check c;
    c.what = what + ": " + std::to_string(ref.size()) + " bins exact, sum = keys";
    c.checked = ref.size();
    c.tol = 0.0;
    double diff2 = 0, ref2 = 0, max_abs = 0;
    uint64_t sum = 0;
    for (size_t b = 0; b < ref.size(); ++b) {
        sum += gpu[b];
        const double d = double(gpu[b]) - double(ref[b]);
        diff2 += d * d, ref2 += double(ref[b]) * double(ref[b]);
        max_abs = std::fabs(d) > max_abs ? std::fabs(d) : max_abs;
        if (uint64_t(gpu[b]) != ref[b]) {
            if (c.first_bad < 0) c.first_bad = int64_t(b);
            ++c.bad_count;
        }
    }
    if (sum != keys) {
        if (c.first_bad < 0) c.first_bad = int64_t(ref.size());
        ++c.bad_count;
    }
    c.rel_l2 = ref2 > 0 ? std::sqrt(diff2) / std::sqrt(ref2) : (diff2 == 0 ? 0.0 : INFINITY);
    c.max_abs = max_abs;
    c.pass = c.bad_count == 0;
    return c;
}

// Part 2. `alone`: --rung=7, so its result is the run's key result. Returns the CPU reference's ms
// (0 when the gate stops it: then gate says why).
static double run_wide(lesson::Report& report, lesson::Gate& gate, const cudaDeviceProp& prop,
                       const lesson::CommonOptions& opt, size_t N, unsigned bins, bool alone) {
    const size_t keys = (N + 3) / 4, key_bytes = keys * sizeof(uint32_t), hist_bytes = size_t(bins) * 4;
    rung7::Plan plan = rung7::choose(bins, lesson::gpu_limits().smem_optin);
    const std::string what = "rung 7 (" + std::to_string(bins) + " bins, a cluster of " + std::to_string(plan.cluster) +
                             " blocks of " + std::to_string(plan.slice) + ")";
    lesson::Needs needs;
    needs.cc = 90;
    needs.cc_why = "thread-block clusters";
    needs.image = 900;
    needs.clusters = true;
    needs.smem = plan.smem_bytes;
    if (!gate.run(what, needs)) return 0;
    const int resident = rung7::size_grid(plan, keys);
    if (resident == 0) {
        gate.skip(what, "a cluster of " + std::to_string(plan.cluster) + " blocks with " +
                            std::to_string(plan.smem_bytes) + " bytes of shared memory each is not resident here");
        return 0;
    }
    const std::string size_flag = "--n=" + std::to_string(N) + " --bins=" + std::to_string(bins);
    lesson::require_host_memory(key_bytes + bins * 16, "pageable", size_flag);
    lesson::require_device_memory(key_bytes + hist_bytes, size_flag);

    // The keys and their CPU histogram.
    verify::host_vector<uint32_t> h_keys(keys);
    const uint64_t seed = uint64_t(opt.seed) + 2;  // part 1's inputs use seed and seed + 1
    verify::parallel_blocks(keys, verify::items_per_block(8), [&](uint64_t i0, uint64_t i1) {
        for (uint64_t i = i0; i < i1; ++i) h_keys[i] = wide_key(seed, i, bins);
    });
    lesson::HostTimer cpu;
    std::vector<uint64_t> ref(bins, 0);
    for (size_t i = 0; i < keys; ++i) ++ref[h_keys[i]];
    const double cpu_ms = cpu.ms();

    uint32_t* d_keys = nullptr;
    unsigned int* d_hist = nullptr;
    CUDA_CHECK(cudaMalloc(&d_keys, key_bytes));  // 256-byte aligned: rung 7 reads it 16 bytes at a time
    CUDA_CHECK(cudaMalloc(&d_hist, hist_bytes));
    CUDA_CHECK(cudaMemcpy(d_keys, h_keys.data(), key_bytes, cudaMemcpyHostToDevice));
    std::vector<unsigned int> h_hist(bins), h_timed(bins);

    // CUB: bins + 1 levels 0, 1, ..., bins, each bin one key wide.
    const int levels = int(bins) + 1;
    const unsigned lower = 0, upper = bins;
    size_t temp_bytes = 0;
    CUDA_CHECK(
        cub::DeviceHistogram::HistogramEven(nullptr, temp_bytes, d_keys, d_hist, levels, lower, upper, int64_t(keys)));
    lesson::require_device_memory(temp_bytes, "CUB's temporary storage for " + size_flag);
    void* d_temp = nullptr;
    CUDA_CHECK(cudaMalloc(&d_temp, temp_bytes));
    auto cub_histogram = [&] {
        CUDA_CHECK(cub::DeviceHistogram::HistogramEven(d_temp, temp_bytes, d_keys, d_hist, levels, lower, upper,
                                                       int64_t(keys)));
    };
    CUDA_CHECK(cudaMemset(d_hist, 0xFF, hist_bytes));  // CUB zeroes it: a bin never written shows
    cub_histogram();
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(h_hist.data(), d_hist, hist_bytes, cudaMemcpyDeviceToHost));
    const double cub_ms = lesson::time_median_ms(int(opt.repeat), cub_histogram);
    CUDA_CHECK(cudaMemcpy(h_timed.data(), d_hist, hist_bytes, cudaMemcpyDeviceToHost));
    report.check(check_wide(h_hist, ref, keys, "wide keys, CUB HistogramEven"));
    report.check(check_wide(h_timed, ref, keys, "wide keys, CUB HistogramEven (last timed call)"));

    // Rung 7: from zeros, checked, then timed as part 1's rungs are (zeroing included).
    CUDA_CHECK(cudaMemset(d_hist, 0, hist_bytes));
    lesson::EventTimer first;
    first.start();
    rung7::launch(plan, d_keys, keys, d_hist, bins, 0);
    const double first_ms = first.stop();
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(h_hist.data(), d_hist, hist_bytes, cudaMemcpyDeviceToHost));
    if (opt.inject_fault && alone) verify::inject_fault(h_hist.data(), uint64_t(bins), uint64_t(opt.seed));
    const int samples = int(lesson::capped_samples(opt.repeat, first_ms));
    const double ms = lesson::time_median_ms(
        samples,
        [&] {
            CUDA_CHECK(cudaMemsetAsync(d_hist, 0, hist_bytes));
            rung7::launch(plan, d_keys, keys, d_hist, bins, 0);
        },
        0, samples < opt.repeat ? 1 : 2);
    CUDA_CHECK(cudaMemcpy(h_timed.data(), d_hist, hist_bytes, cudaMemcpyDeviceToHost));
    report.check(check_wide(h_hist, ref, keys, "wide keys, rung 7 cluster DSM"));
    report.check(check_wide(h_timed, ref, keys, "wide keys, rung 7 cluster DSM (last timed call)"));
    CUDA_CHECK(cudaFree(d_temp));
    CUDA_CHECK(cudaFree(d_hist));
    CUDA_CHECK(cudaFree(d_keys));

    // GB/s of key bytes read; not graded against DRAM where the keys fit in the L2.
    const std::string in_l2 = lesson::l2_note(double(key_bytes), prop);
    auto gbps = [&](double t) { return double(key_bytes) / (t * 1e6); };
    report.metric("wide keys: bins one block's shared memory holds",
                  double(lesson::gpu_limits().smem_optin / sizeof(unsigned int)), "bins");
    report.metric("wide keys: rung 7 blocks per cluster", plan.cluster, "blocks");
    report.metric("wide keys: rung 7 bins per block", plan.slice, "bins");
    report.metric("wide keys: rung 7 clusters resident at once", resident, "clusters");
    report.yardstick("CUB HistogramEven, wide keys", gbps(cub_ms), "GB/s");
    report.variant("wide keys: CUB HistogramEven", cub_ms, gbps(cub_ms), "GB/s");
    report.variant_yardstick("wide keys: 7 cluster DSM vs CUB", ms, gbps(ms), "GB/s", gbps(cub_ms), "CUB", in_l2);
    if (alone)
        report.key_result("rung 7 cluster DSM " + std::to_string(int(gbps(ms) + 0.5)) + " GB/s, " +
                              std::to_string(bins) + " bins",
                          cub_ms / ms, "CUB", lesson::Against::Yardstick, in_l2);
    return cpu_ms;
}
