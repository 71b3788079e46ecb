// Lesson 14 of the course (00-23): reduction, a ladder of eight kernels against CUB.
// Before: lesson 13 (13_matmul_ladder). Next: lesson 15 (15_scan).
// Run: ./build/bin/reduction [--quick]   (--help lists every flag; README.md is the handout)
//
// Reduction: the sum of n floats, a ladder of eight kernels against CUB.
//
// One file per rung in kernels/ (diff two neighbours to see one idea):
//   1 interleaved      the classic tree in shared memory, tid % (2s): divergent warps
//   2 strided index    the work packed into the first warps: shared-memory bank conflicts
//   3 sequential       the tree folded the other way: no divergence, no conflicts
//   4 coarsened        a pair per load, grid-stride loop: many values per thread first
//   5 warp shuffle     the last 64 values in one warp with __shfl_down_sync
//   6 cg::reduce       the same warp step with cooperative groups
//   7 float4, 2 kernels  16-byte loads, 4 accumulators, one pass + a one-block finish
//   8 last block       the finish inside the kernel: the last block to take a ticket adds the partials
// Rungs 1-6 reduce n values to one per block; run_rung() launches passes until one
// value is left. cub::DeviceReduce::Sum on the same floats is the yardstick.
// Every sum is checked against a compensated double sum on the CPU, within the error
// bound of its own summation order; rungs 7 and 8 also sum int32 values into int64,
// which must match the CPU bit for bit; and every rung and CUB sum integer-valued
// floats whose every partial sum is exact, so that they too must match the int64
// sum bit for bit. See README.md.
//
// Lesson 14 of the course: shared memory and banks come from lessons 06 and 12, the
// ladder from lessons 12 and 13. Next: lesson 15 (scan).
// Run: ./build/bin/reduction            (all rungs, n = 2^28)
//      ./build/bin/reduction --rung=3   (one rung alone, with CUB beside it)
#include <cub/device/device_reduce.cuh>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "common/ceilings.h"
#include "common/check.h"
#include "common/device.h"
#include "common/flags.h"
#include "common/launch.h"
#include "common/memory.h"
#include "common/report.h"
#include "common/timer.h"
#include "verify/compare.h"
#include "verify/parallel.h"
#include "verify/random.h"
#include "verify/reduction.h"

#include "kernels/1_interleaved.cuh"
#include "kernels/2_strided_index.cuh"
#include "kernels/3_sequential.cuh"
#include "kernels/4_coarsened.cuh"
#include "kernels/5_warp_shuffle.cuh"
#include "kernels/6_cooperative_groups.cuh"
#include "kernels/7_float4_two_kernels.cuh"
#include "kernels/8_last_block.cuh"

// The ladder, in order. A launcher reduces `count` floats at `in` to Pass::values
// floats at `out` (kernels/common.cuh); `kernel` is its main kernel, for the
// occupancy query.
using Launcher = Pass (*)(const float* in, size_t count, float* out, const Scratch<float>& s);
struct Rung {
    const char* name;
    Launcher launch;
    const void* kernel;
    int threads;
};
static const Rung kRungs[] = {
    {"1 interleaved, divergent tid % (2s)", rung1::launch, (const void*)rung1::reduceInterleaved, rung1::kThreads},
    {"2 strided index (bank conflicts)", rung2::launch, (const void*)rung2::reduceStrided, rung2::kThreads},
    {"3 sequential addressing", rung3::launch, (const void*)rung3::reduceSequential, rung3::kThreads},
    {"4 first add in load, grid-stride", rung4::launch, (const void*)rung4::reduceCoarsened, rung4::kThreads},
    {"5 last warp: __shfl_down_sync", rung5::launch, (const void*)rung5::reduceWarpShuffle, rung5::kThreads},
    {"6 last warp: cg::reduce", rung6::launch, (const void*)rung6::reduceCg, rung6::kThreads},
    {"7 float4 x4, finish kernel", rung7::launch<float, float>, (const void*)rung7::reduceVec4<float, float>,
     rung7::kThreads},
    {"8 float4 x4, last block finishes", rung8::launch<float, float>, (const void*)rung8::reduceLastBlock<float, float>,
     rung8::kThreads},
};
constexpr int kRungCount = int(sizeof(kRungs) / sizeof(kRungs[0]));
constexpr int kRung7 = 6, kRung8 = 7;  // their places in kRungs
// The multi-pass work buffers are sized for one block width.
static_assert(rung1::kThreads == rung2::kThreads && rung2::kThreads == rung3::kThreads &&
                  rung3::kThreads == rung4::kThreads && rung4::kThreads == rung5::kThreads &&
                  rung5::kThreads == rung6::kThreads,
              "rungs 1-6 share the work buffers");
// The integers are drawn from [-2^27, 2^27): any sum of 2^36 of them fits in int64.
constexpr int64_t kMaxN = int64_t(1) << 36;

// Runs one rung to the end: each launcher call reduces `count` values to
// p.values (one per block for rungs 1-6, one for rungs 7 and 8); the multi-pass
// rungs go round this loop, ping-ponging between the work buffers, until one
// value is left. Returns where the sum is and the depth of the whole summation
// tree (the depths of the passes add up: a partial of pass 1 is an input of pass 2).
struct RungRun {
    const float* d_sum;
    uint64_t depth;
};
static RungRun run_rung(const Rung& rung, const float* d_in, size_t n, float* d_a, float* d_b,
                        const Scratch<float>& s) {
    const float* src = d_in;
    float* dst = d_a;
    size_t count = n;
    uint64_t depth = 0;
    do {
        const Pass p = rung.launch(src, count, dst, s);
        count = p.values;
        depth += p.depth;
        src = dst;
        dst = (dst == d_a) ? d_b : d_a;
    } while (count > 1);
    return {src, depth};
}

static std::string size_text(int64_t n) {
    for (int p = 0; p < 63; ++p)
        if (n == (int64_t(1) << p)) return "2^" + std::to_string(p);
    return std::to_string(n);
}

template <class T>
static T copy_out(const T* d_value) {
    T h = 0;
    CUDA_CHECK(cudaMemcpy(&h, d_value, sizeof(T), cudaMemcpyDeviceToHost));  // waits for the kernels
    return h;
}

int main(int argc, char** argv) {
    // Flags first: bad input exits 2 before any CUDA call.
    lesson::CommonOptions opt;
    int64_t n = int64_t(1) << 28, rung_only = 0;
    lesson::Cli cli("reduction", "Sums n floats with a ladder of eight kernels, against cub::DeviceReduce::Sum.");
    lesson::add_common_flags(cli, opt);
    cli.add_int("n", &n, 1, kMaxN, "values to sum", int64_t(1) << 20);
    cli.add_int("rung", &rung_only, 0, kRungCount, "run and check one rung alone (0 = all rungs)");
    cli.parse_or_exit(argc, argv);
    auto selected = [&](int k) { return rung_only == 0 || rung_only == k + 1; };

    const size_t N = static_cast<size_t>(n);
    const std::string size_flag = "--n=" + std::to_string(n);
    // Host: the floats and the int32s. Device: both, plus the work buffers of the
    // multi-pass rungs (n / 256 and n / 256^2 floats) and a little scratch.
    lesson::require_host_memory(N * (sizeof(float) + sizeof(int32_t)), "pageable", size_flag);
    cudaDeviceProp prop = lesson::pick_device(opt.device);
    const int sms = prop.multiProcessorCount;
    const size_t work_a = lesson::ceil_div(N, rung1::kThreads), work_b = lesson::ceil_div(work_a, rung1::kThreads);
    lesson::require_device_memory(
        N * (sizeof(float) + sizeof(int32_t)) + (work_a + work_b) * sizeof(float) + (size_t(64) << 20), size_flag);

    lesson::Report report("14_reduction");
    report.device(prop.name, prop.major, prop.minor, sms, prop.totalGlobalMem / 1e9);
    report.config("n", n);
    report.config("rung", rung_only);
    report.config("input_mb", 4.0 * N / 1e6);
    report.config("l2_mb", prop.l2CacheSize / 1e6);
    report.config("repeat", opt.repeat);
    report.config("seed", opt.seed);

    // The inputs: floats uniform in [-1, 3) (mean 1: the sum is about n), int32 uniform in [-2^27, 2^27).
    verify::host_vector<float> h_in(N);  // not zeroed: the parallel fills write every element
    verify::host_vector<int32_t> h_ints(N);
    verify::fill_uniform(h_in.data(), N, uint64_t(opt.seed), -1.0f, 3.0f);
    verify::fill_int32(h_ints.data(), N, uint64_t(opt.seed) + 1);

    // The CPU references: a compensated double sum (with sum |x|, which scales the error
    // bound) and the exact int64 sum.
    lesson::HostTimer cpu;
    const verify::SumReference ref = verify::sum_reference(h_in.data(), N);
    const int64_t ref_int = verify::sum_int64(h_ints.data(), N);
    report.cpu_reference_ms(cpu.ms(), verify::host_threads());  // blocks of 2^20 values on all host cores
    report.metric("condition of the float sum: sum |x| / |sum x|", ref.sum_abs / std::fabs(ref.sum), "");

    // 1. Occupancy: how many blocks of each kernel can be resident on one SM at once
    //    (threads, registers and shared memory per block decide). The grid-stride rungs
    //    4-8 launch exactly that many per SM: one full wave, no block waits for an SM.
    std::vector<unsigned> grid(kRungCount);
    for (int k = 0; k < kRungCount; ++k) {
        int per_sm = 0;
        CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kRungs[k].kernel, kRungs[k].threads, 0));
        if (per_sm < 1) lesson::fail_call("CUDA", "occupancy", "a kernel cannot run on this GPU", __FILE__, __LINE__);
        grid[k] = unsigned(per_sm * sms);
        if (selected(k)) report.metric(std::string("resident blocks per SM: ") + kRungs[k].name, per_sm, "blocks");
    }
    int per_sm7i = 0, per_sm8i = 0;  // rungs 7 and 8 with T = int, Acc = long long (the integer sum)
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm7i, rung7::reduceVec4<int, long long>,
                                                             rung7::kThreads, 0));
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm8i, rung8::reduceLastBlock<int, long long>,
                                                             rung8::kThreads, 0));
    const unsigned grid7i = unsigned(std::max(per_sm7i, 1) * sms), grid8i = unsigned(std::max(per_sm8i, 1) * sms);
    const unsigned max_grid = std::max({*std::max_element(grid.begin(), grid.end()), grid7i, grid8i});
    // The block size the occupancy calculator would pick for rung 8 (its kernel is written
    // for 256 threads: the shared array and the tree), and the grid that fills the GPU with it.
    int min_grid = 0, best_block = 0;
    CUDA_CHECK(cudaOccupancyMaxPotentialBlockSize(&min_grid, &best_block, rung8::reduceLastBlock<float, float>, 0, 0));
    report.metric("rung 8: block size of highest occupancy (MaxPotentialBlockSize)", best_block, "threads");
    report.metric("rung 8: grid that fills the GPU at that block size", min_grid, "blocks");

    // 2. Allocate: the inputs, the two work buffers of the multi-pass rungs, the per-block
    //    partials (float and int64) and the ticket counter of rung 8, the results.
    float *d_in = nullptr, *d_a = nullptr, *d_b = nullptr, *d_partials = nullptr, *d_cub_sum = nullptr;
    int* d_ints = nullptr;
    long long *d_partials64 = nullptr, *d_sum64 = nullptr;
    unsigned* d_counter = nullptr;
    CUDA_CHECK(cudaMalloc(&d_in, N * sizeof(float)));  // 256-byte aligned: rungs 7 and 8 read float4s
    CUDA_CHECK(cudaMalloc(&d_ints, N * sizeof(int)));
    CUDA_CHECK(cudaMalloc(&d_a, work_a * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_b, work_b * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_partials, max_grid * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_partials64, max_grid * sizeof(long long)));
    CUDA_CHECK(cudaMalloc(&d_sum64, sizeof(long long)));
    CUDA_CHECK(cudaMalloc(&d_cub_sum, sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_counter, sizeof(unsigned)));
    CUDA_CHECK(cudaMemset(d_counter, 0, sizeof(unsigned)));  // every rung-8 launch leaves it at 0 again

    // 3. Copy the inputs in.
    CUDA_CHECK(cudaMemcpy(d_in, h_in.data(), N * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_ints, h_ints.data(), N * sizeof(int), cudaMemcpyHostToDevice));

    // 4. The ladder. Per rung: poison what it writes (0xFF bytes are NaN), run it, check the
    //    sum against its bound; time it (all its launches in one timed call), and check that
    //    the last timed call left the same bits (every rung adds in a fixed order).
    auto poison = [&] {
        CUDA_CHECK(cudaMemset(d_a, 0xFF, work_a * sizeof(float)));
        CUDA_CHECK(cudaMemset(d_b, 0xFF, work_b * sizeof(float)));
        CUDA_CHECK(cudaMemset(d_partials, 0xFF, max_grid * sizeof(float)));
    };
    std::vector<double> ms(kRungCount, 0.0);
    std::vector<float> sums(kRungCount, NAN);
    for (int k = 0; k < kRungCount; ++k) {
        if (!selected(k)) continue;
        const Rung& rung = kRungs[k];
        const Scratch<float> s{d_partials, d_counter, grid[k]};
        poison();
        const RungRun run = run_rung(rung, d_in, N, d_a, d_b, s);
        sums[k] = copy_out(run.d_sum);
        float checked = sums[k];
        if (opt.inject_fault) verify::inject_fault(&checked, 1, uint64_t(opt.seed));
        lesson::Check c = verify::check_float_sum(checked, ref, run.depth, rung.name);
        poison();
        ms[k] = lesson::time_median_ms(int(opt.repeat), [&] { run_rung(rung, d_in, N, d_a, d_b, s); });
        const lesson::Check last = verify::check_same_bits(copy_out(run.d_sum), sums[k], "");
        c.what += last.pass ? ", last timed call: same bits" : ", last timed call: OTHER BITS";
        c.pass = c.pass && last.pass;
        c.bad_count = c.pass ? 0 : 1;
        c.first_bad = c.pass ? -1 : 0;
        report.check(c);
    }

    // 5. The yardstick: cub::DeviceReduce::Sum. Called with no temporary storage it only says
    //    how much it needs; allocate that, then the same call sums. 32-bit item counts where
    //    they fit (CUB's fastest offsets), 64-bit beyond.
    void* d_temp = nullptr;
    size_t temp_bytes = 0;
    auto cub_sum = [&](void* temp, size_t& bytes) {
        return N <= size_t(INT32_MAX) ? cub::DeviceReduce::Sum(temp, bytes, d_in, d_cub_sum, int(N))
                                      : cub::DeviceReduce::Sum(temp, bytes, d_in, d_cub_sum, int64_t(N));
    };
    CUDA_CHECK(cub_sum(nullptr, temp_bytes));
    CUDA_CHECK(cudaMalloc(&d_temp, temp_bytes));
    report.metric("CUB temporary storage", double(temp_bytes), "bytes");
    CUDA_CHECK(cudaMemset(d_cub_sum, 0xFF, sizeof(float)));
    CUDA_CHECK(cub_sum(d_temp, temp_bytes));
    const float cub_result = copy_out(d_cub_sum);
    report.check(verify::compare(&cub_result, &ref.sum, 1, 1e-4, "cub::DeviceReduce::Sum (order unknown: 1e-4)"));
    const double cub_ms = lesson::time_median_ms(int(opt.repeat), [&] { CUDA_CHECK(cub_sum(d_temp, temp_bytes)); });

    // 6. One rung, several grid sizes: rung 8 with 1, 2, ... blocks per SM sums the same
    //    floats in different orders, which round differently. Every sum is inside its own
    //    bound; they may differ from each other in the last bits. Rung 7 at rung 8's grid
    //    adds in exactly rung 8's order: the same bits.
    if (selected(kRung8)) {
        float lo = INFINITY, hi = -INFINITY;
        for (unsigned per_sm = 1; per_sm * sms <= grid[kRung8]; ++per_sm) {
            const Scratch<float> s{d_partials, d_counter, per_sm * unsigned(sms)};
            CUDA_CHECK(cudaMemset(d_a, 0xFF, sizeof(float)));
            const Pass p = rung8::launch<float, float>(d_in, N, d_a, s);
            const float sum = copy_out(d_a);
            report.check(verify::check_float_sum(sum, ref, p.depth, "8 at " + std::to_string(s.grid) + " blocks"));
            char line[160];
            std::snprintf(line, sizeof line, "rung 8 at %5u blocks (%u per SM): float sum %.1f (ref %+.2f)", s.grid,
                          per_sm, double(sum), double(sum) - ref.sum);
            report.note(line);
            lo = std::min(lo, sum);
            hi = std::max(hi, sum);
        }
        report.metric("rung 8: largest - smallest float sum over the grid sizes", double(hi) - double(lo), "");
        report.metric("rung 8: spacing of floats at the sum (1 ulp)", double(std::nextafter(hi, INFINITY) - hi), "");
        if (rung_only == 0) {
            const Scratch<float> s{d_partials, d_counter, grid[kRung8]};
            CUDA_CHECK(cudaMemset(d_a, 0xFF, sizeof(float)));
            rung7::launch<float, float>(d_in, N, d_a, s);
            report.check(verify::check_same_bits(copy_out(d_a), sums[kRung8],
                                                 "rung 7 at rung 8's grid: the same bits as rung 8"));
        }
    }

    // 7. The integer sum with rungs 7 and 8 (T = int, Acc = long long): exact, so every
    //    order and every grid gives the CPU's bits.
    double int_ms = 0;
    for (int k : {kRung7, kRung8}) {
        if (!selected(k)) continue;
        const Scratch<long long> s{d_partials64, d_counter, k == kRung7 ? grid7i : grid8i};
        auto launch = [&](const Scratch<long long>& sc) {
            return k == kRung7 ? rung7::launch<int, long long>(d_ints, N, d_sum64, sc)
                               : rung8::launch<int, long long>(d_ints, N, d_sum64, sc);
        };
        for (unsigned g : {s.grid, std::max(1u, s.grid / 2)}) {
            CUDA_CHECK(cudaMemset(d_sum64, 0xFF, sizeof(long long)));
            launch(Scratch<long long>{d_partials64, d_counter, g});
            long long sum = copy_out(d_sum64);
            if (opt.inject_fault) verify::inject_fault(&sum, 1, uint64_t(opt.seed));
            report.check(verify::check_same_bits(sum, (long long)ref_int,
                                                 "rung " + std::to_string(k + 1) + ", int32 -> int64 at " +
                                                     std::to_string(g) + " blocks: the CPU's bits"));
        }
        if (k == kRung8) int_ms = lesson::time_median_ms(int(opt.repeat), [&] { launch(s); });
    }

    // 8. Exactly summable floats: every rung run above and CUB once more, on integers 1 and 2
    //    as floats, min(n, 2^23 - 1) of them. Every partial sum that any order of additions
    //    forms is then an integer of at most 2^24, which a float holds exactly (verify/reduction.h),
    //    so every sum must be the int64 sum to the bit. Section 4's bound allows an error of
    //    hundreds at n = 2^28; this check allows none: a rung that skips or repeats one input
    //    fails it. The floats of sections 4-6 are done with: d_in takes the new input.
    {
        verify::host_vector<float>().swap(h_in);  // the host copies are done with too
        verify::host_vector<int32_t>().swap(h_ints);
        const size_t m = std::min<size_t>(N, verify::kExactFloatMaxN);
        verify::host_vector<float> h_exact(m);
        verify::host_vector<int32_t> h_exact_ints(m);
        verify::fill_exact_floats(h_exact.data(), h_exact_ints.data(), m, uint64_t(opt.seed) + 2);
        const verify::ExactSum exact = verify::exact_sum(h_exact_ints.data(), m);
        CUDA_CHECK(cudaMemcpy(d_in, h_exact.data(), m * sizeof(float), cudaMemcpyHostToDevice));
        const std::string of = ", floats 1 and 2, n=" + size_text(int64_t(m)) + ": the int64 sum's bits";
        for (int k = 0; k < kRungCount; ++k) {
            if (!selected(k)) continue;
            poison();
            const RungRun run = run_rung(kRungs[k], d_in, m, d_a, d_b, Scratch<float>{d_partials, d_counter, grid[k]});
            float sum = copy_out(run.d_sum);
            if (opt.inject_fault) verify::inject_fault(&sum, 1, uint64_t(opt.seed));
            report.check(verify::check_exact_float_sum(sum, exact, kRungs[k].name + of));
        }
        size_t exact_temp_bytes = 0;  // CUB's two calls again, for this n
        void* d_exact_temp = nullptr;
        CUDA_CHECK(cub::DeviceReduce::Sum(nullptr, exact_temp_bytes, d_in, d_cub_sum, int(m)));
        CUDA_CHECK(cudaMalloc(&d_exact_temp, exact_temp_bytes));
        CUDA_CHECK(cudaMemset(d_cub_sum, 0xFF, sizeof(float)));
        CUDA_CHECK(cub::DeviceReduce::Sum(d_exact_temp, exact_temp_bytes, d_in, d_cub_sum, int(m)));
        report.check(verify::check_exact_float_sum(copy_out(d_cub_sum), exact, "cub::DeviceReduce::Sum" + of));
        CUDA_CHECK(cudaFree(d_exact_temp));
    }

    // 9. Free device memory.
    CUDA_CHECK(cudaFree(d_temp));
    CUDA_CHECK(cudaFree(d_counter));
    CUDA_CHECK(cudaFree(d_cub_sum));
    CUDA_CHECK(cudaFree(d_sum64));
    CUDA_CHECK(cudaFree(d_partials64));
    CUDA_CHECK(cudaFree(d_partials));
    CUDA_CHECK(cudaFree(d_b));
    CUDA_CHECK(cudaFree(d_a));
    CUDA_CHECK(cudaFree(d_ints));
    CUDA_CHECK(cudaFree(d_in));

    // Report: GB/s of input read (4n bytes per sum), against the DRAM bound of a pure read
    // stream (1 read : 0 writes) measured now, and against CUB on the same floats. Neither
    // is graded where the input fits in the L2.
    const double bytes = 4.0 * double(N);
    const std::string in_l2 = lesson::l2_note(bytes, prop);
    const lesson::StreamBound dram =
        in_l2.empty() ? lesson::measure_stream_bound(prop, 1, 0) : lesson::stream_bound_not_measured(1, 0, in_l2);
    lesson::add_bound(report, dram, int(opt.device));
    auto gbps = [&](double t) { return bytes / (t * 1e6); };
    const double cub_gbps = gbps(cub_ms);
    report.yardstick("cub::DeviceReduce::Sum, same floats", cub_gbps, "GB/s");
    report.timing(std::string(lesson::kTimingMethod) + "; a multi-pass rung's call is all of its launches");
    report.variant_bound("cub::DeviceReduce::Sum", cub_ms, cub_gbps, "GB/s", dram.gbps, "DRAM bound", in_l2);
    int best = -1;
    for (int k = 0; k < kRungCount; ++k) {
        if (ms[k] <= 0) continue;  // not run (--rung)
        report.variant_bound(kRungs[k].name, ms[k], gbps(ms[k]), "GB/s", dram.gbps, "DRAM bound", in_l2);
        report.variant_yardstick(std::string(kRungs[k].name) + " vs CUB", ms[k], gbps(ms[k]), "GB/s", cub_gbps, "CUB",
                                 in_l2);
        if (best < 0 || ms[k] < ms[best]) best = k;
    }
    if (int_ms > 0)
        report.variant_bound("8 on int32 -> int64 (exact)", int_ms, gbps(int_ms), "GB/s", dram.gbps, "DRAM bound",
                             in_l2);
    report.note(
        "float checks: |gpu - ref| <= gamma_d * sum |x_i|, gamma_d = d u / (1 - d u), u = 2^-24, d = additions "
        "on the longest path of the rung's summation tree; ref = Neumaier-compensated double sum");

    const double best_vs_cub = cub_ms / ms[best];
    char key[160];
    std::snprintf(key, sizeof key, "best rung (%s) %.0f GB/s at n=%s", kRungs[best].name, gbps(ms[best]),
                  size_text(n).c_str());
    report.key_result(key, best_vs_cub, "CUB", lesson::Against::Yardstick, in_l2);
    report.default_size(cli.at_default_size());
    report.target("best rung vs cub::DeviceReduce::Sum", best_vs_cub, 1.00, "x");
    return report.finish(opt.json);
}
