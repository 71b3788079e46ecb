// Lesson 16 of the course (00-24): histogram, atomics, privatization and contention.
// Before: lesson 15 (15_scan). Next: lesson 17 (17_fusion_roofline).
// Run: ./build/bin/histogram [--quick]   (--help lists every flag; README.md is the handout)
//
// Histogram: atomics, privatization and contention.
//
// A 256-bin histogram of n bytes (uint8 in, uint32 counts) on two inputs made
// from the seed: a skewed synthetic image (half of its pixels in one bin) and
// uniform random bytes. The ladder, one file per rung in kernels/:
//   1 global atomics   one atomicAdd per byte on the 256 counters in global memory
//   2 shared           a private histogram per block in shared memory, merged
//                      with one global atomic per bin per block
//   3 warp-aggregated  rung 2 with one shared atomic per distinct bin per warp
//   4 vector loads     rung 2 with one 16-byte load per 16 bytes
//   5 grid-stride      rung 4 with a grid of one wave of blocks walking the input
//   6 lane copies      rung 5 with a copy of the histogram per lane: no two
//                      lanes of a warp ever hit one counter or one bank
// cub::DeviceHistogram::HistogramEven on the same bytes is the yardstick. Part 2
// (wide.cuh) has more bins than one block's shared memory holds, on keys of its own:
//   7 cluster DSM      a thread-block cluster holds the bins, a slice per block,
//                      and adds to the owner's slice through distributed shared
//                      memory (compute capability 9.0; elsewhere it says why not)
// Every bin of every run is compared exactly with a CPU histogram, and the bins
// must add up to n. The checks: checks.h; the report: summary.cuh. See README.md.
//
// Lesson 16 of the course: lessons 14 and 15 (reduction, scan) combined values
// in a fixed pattern; here each byte's destination depends on its value, so
// threads collide on the same counters. Shared memory and its banks come from
// lessons 06 and 12. Next: lesson 17 (fusion and the roofline, planned).
// Run: ./build/bin/histogram            (all rungs, n = 2^28 bytes per input)
//      ./build/bin/histogram --rung=3   (one rung alone, with CUB beside it)
#include <cub/device/device_histogram.cuh>

#include <cstdint>
#include <string>
#include <vector>

#include "common/ceilings.h"
#include "common/check.h"
#include "common/device.h"
#include "common/flags.h"
#include "common/memory.h"
#include "common/report.h"
#include "common/timer.h"
#include "verify/compare.h"
#include "verify/histogram.h"
#include "verify/parallel.h"

#include "kernels/1_global.cuh"
#include "kernels/2_shared.cuh"
#include "kernels/3_warp_aggregated.cuh"
#include "kernels/4_vector_loads.cuh"
#include "kernels/5_grid_stride.cuh"
#include "kernels/6_lane_copies.cuh"

// The ladder, in order. Every launcher adds the counts of d_in[0..n) to the
// 256 counters at d_hist, which must hold zeros.
using Launcher = void (*)(const uint8_t* d_in, size_t n, unsigned int* d_hist, int sms, cudaStream_t stream);
struct Rung {
    const char* name;
    Launcher launch;
};
static const Rung kRungs[] = {
    {"1 global atomics", rung1::launch},
    {"2 shared, one per block", rung2::launch},
    {"3 warp-aggregated (match_any)", rung3::launch},
    {"4 16 B loads", rung4::launch},
    {"5 grid-stride, one wave", rung5::launch},
    {"6 lane copies [bin][lane]", rung6::launch},
};
constexpr int kRungCount = int(sizeof(kRungs) / sizeof(kRungs[0]));

// The two inputs: the skewed image first (seed), then uniform bytes (seed + 1).
struct Input {
    const char* name;
    void (*fill)(uint8_t* p, size_t n, uint64_t seed);
};
// Exercise 2 of the handout: add a third input, every byte the same value (the worst
// case: one bin holds all n). Predict each rung's time on it before you run it.
static const Input kInputs[] = {{"skewed", verify::fill_skewed_bytes}, {"uniform", verify::fill_uniform_bytes}};
constexpr int kInputCount = 2;

constexpr int kBins = verify::kHistogramBins;
constexpr size_t kHistBytes = kBins * sizeof(unsigned int);  // 1 KB
constexpr int64_t kMaxN = (int64_t(1) << 32) - 1;            // one bin may have to hold all n: uint32
// CUB's levels: 257 boundaries 0, 1, ..., 256 make 256 bins of width 1.
constexpr int kLevels = kBins + 1, kLower = 0, kUpper = kBins;

#include "checks.h"
#include "summary.cuh"
#include "wide.cuh"

int main(int argc, char** argv) {
    // Flags first: bad input exits 2 before any CUDA call.
    lesson::CommonOptions opt;
    int64_t n = int64_t(1) << 28, rung = 0, bins = int64_t(1) << 17;
    std::string input_flag = "both";
    lesson::Cli cli("histogram",
                    "256-bin histogram of n bytes, skewed and uniform inputs: a ladder of atomics, against CUB.");
    lesson::add_common_flags(cli, opt);
    cli.add_int("n", &n, 1, kMaxN, "bytes per input (a bin is a uint32 and may have to hold all n)", int64_t(1) << 20);
    cli.add_int("rung", &rung, 0, kRungCount + 1, "run and check one rung alone (0 = all rungs; 7: part 2 alone)");
    cli.add_int("bins", &bins, 1, int64_t(1) << 19, "part 2 (rung 7): bins of its 4-byte keys, past one block's");
    cli.add_string("input", &input_flag, "which input: both, skewed or uniform (one alone is handy under a profiler)");
    cli.parse_or_exit(argc, argv);
    require_input_flag(input_flag);

    const size_t N = static_cast<size_t>(n);
    const std::string size_flag = "--n=" + std::to_string(n);
    lesson::require_host_memory(N, "pageable", size_flag);  // one input at a time
    cudaDeviceProp prop = lesson::pick_device(opt.device);
    const int sms = prop.multiProcessorCount;
    lesson::require_device_memory(N + kHistBytes, size_flag);

    const bool bytes_part = rung <= kRungCount, wide_part = rung == 0 || rung == kRungCount + 1;
    lesson::Report report("16_histogram");
    report.device(prop);
    report.config_from(cli);  // every flag as parsed: n, rung, input, repeat, seed, ...
    report.config("input_mb", N / 1e6);
    report.config("l2_mb", prop.l2CacheSize / 1e6);

    // 1. Allocate: the input bytes (left unzeroed: the fill writes every byte) and the 256 counters.
    verify::host_vector<uint8_t> h_in(N);
    std::vector<unsigned int> h_hist(kBins), h_timed(kBins);
    uint8_t* d_in = nullptr;
    unsigned int* d_hist = nullptr;
    CUDA_CHECK(cudaMalloc(&d_in, N));  // 256-byte aligned: rungs 4 to 6 read it 16 bytes at a time
    CUDA_CHECK(cudaMalloc(&d_hist, kHistBytes));

    // CUB: ask how much temporary storage it needs (d_temp == nullptr does no
    // work), then allocate it. An int64_t sample count: n may pass 2^31.
    const int64_t num_samples = n;
    void* d_temp = nullptr;
    size_t temp_bytes = 0;
    CUDA_CHECK(
        cub::DeviceHistogram::HistogramEven(d_temp, temp_bytes, d_in, d_hist, kLevels, kLower, kUpper, num_samples));
    lesson::require_device_memory(temp_bytes, "CUB's temporary storage for " + size_flag);
    CUDA_CHECK(cudaMalloc(&d_temp, temp_bytes));
    report.metric("CUB temporary storage", double(temp_bytes), "bytes");
    // The same call with the storage: zeroes d_hist, then counts d_in into it.
    auto cub_histogram = [&] {
        CUDA_CHECK(cub::DeviceHistogram::HistogramEven(d_temp, temp_bytes, d_in, d_hist, kLevels, kLower, kUpper,
                                                       num_samples));
    };

    double cpu_ms = 0, cub_ms[kInputCount] = {}, ms[kInputCount][kRungCount] = {};
    bool injected = false;
    for (int which = 0; which < kInputCount; ++which) {
        if (!bytes_part || !selected(input_flag, which)) continue;
        const std::string input = kInputs[which].name;
        // 2. Make the input, count it on the CPU, copy it to the GPU.
        kInputs[which].fill(h_in.data(), N, uint64_t(opt.seed) + uint64_t(which));
        uint64_t ref[kBins];
        lesson::HostTimer cpu;
        verify::histogram_reference(h_in.data(), N, ref);
        cpu_ms += cpu.ms();
        report_collisions(report, input, h_in.data(), N, ref);  // its largest bin, bins per warp (checks.h)
        CUDA_CHECK(cudaMemcpy(d_in, h_in.data(), N, cudaMemcpyHostToDevice));

        // 3. CUB zeroes the output itself (a small kernel before its sweep), so
        // poison the counters first: a bin it never wrote shows as 0xFFFFFFFF.
        CUDA_CHECK(cudaMemset(d_hist, 0xFF, kHistBytes));
        cub_histogram();
        CUDA_CHECK(cudaDeviceSynchronize());
        CUDA_CHECK(cudaMemcpy(h_hist.data(), d_hist, kHistBytes, cudaMemcpyDeviceToHost));
        cub_ms[which] = lesson::time_median_ms(int(opt.repeat), cub_histogram);
        CUDA_CHECK(cudaMemcpy(h_timed.data(), d_hist, kHistBytes, cudaMemcpyDeviceToHost));
        report.check(check_runs(h_hist, h_timed, ref, N, input + ", CUB HistogramEven"));

        // 4. The rungs. A histogram adds to its counters, so every run starts
        // from zeros; a lost add, a double add or a missing merge shows as a
        // wrong count (and a wrong sum).
        for (int k = 0; k < kRungCount; ++k) {
            if (rung != 0 && rung != k + 1) continue;
            const Rung& r = kRungs[k];
            CUDA_CHECK(cudaMemset(d_hist, 0, kHistBytes));
            lesson::EventTimer first;
            first.start();
            r.launch(d_in, N, d_hist, sms, 0);
            CUDA_CHECK_LAUNCH();
            const double first_ms = first.stop();
            CUDA_CHECK(cudaDeviceSynchronize());
            CUDA_CHECK(cudaMemcpy(h_hist.data(), d_hist, kHistBytes, cudaMemcpyDeviceToHost));
            if (opt.inject_fault && !injected && (rung == k + 1 || k + 1 == kRungCount)) {
                verify::inject_fault(h_hist.data(), uint64_t(kBins), uint64_t(opt.seed));  // the run must FAIL
                injected = true;
            }
            // Timed: each call zeroes the 1 KB of counters (cudaMemsetAsync) and
            // launches the rung; the time includes both, as CUB's includes its zeroing.
            // Long rungs take fewer samples (lesson::capped_samples; rung 1 at the default size,
            // 70-120 ms a call, takes 3) after one warm-up call: the verified run above was the first.
            const int samples = int(lesson::capped_samples(opt.repeat, first_ms));
            const bool long_rung = samples < opt.repeat;
            ms[which][k] = lesson::time_median_ms(
                samples,
                [&] {
                    CUDA_CHECK(cudaMemsetAsync(d_hist, 0, kHistBytes));
                    r.launch(d_in, N, d_hist, sms, 0);
                    CUDA_CHECK_LAUNCH();
                },
                0, long_rung ? 1 : 2);
            CUDA_CHECK(cudaMemcpy(h_timed.data(), d_hist, kHistBytes, cudaMemcpyDeviceToHost));
            report.check(check_runs(h_hist, h_timed, ref, N, input + ", rung " + r.name));
        }
    }
    // 5. Free device memory.
    CUDA_CHECK(cudaFree(d_temp));
    CUDA_CHECK(cudaFree(d_hist));
    CUDA_CHECK(cudaFree(d_in));

    // 6. Part 2, rung 7, where this GPU has clusters (wide.cuh).
    lesson::Gate gate(report);
    if (wide_part) cpu_ms += run_wide(report, gate, prop, opt, N, unsigned(bins), !bytes_part);
    if (!bytes_part && gate.none_ran()) return report.skip(gate.reason(), opt.json);
    report.cpu_reference_ms(cpu_ms, verify::host_threads());

    // Report: GB/s against the DRAM bound and against CUB, contention, occupancy (summary.cuh).
    if (bytes_part) report_histogram(report, prop, opt, cli, n, input_flag, cub_ms, ms);
    return report.finish(opt.json);
}
