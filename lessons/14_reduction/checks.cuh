// Lesson 14 of the course (reduction), the checks after the ladder: rung 11 at several grid sizes,
// the exact integer sums of rungs 10 and 11, and every rung and CUB on exactly summable floats.
// Before: main.cu runs, checks and times the ladder and CUB. Next: main.cu reports it.
// Run: ./build/bin/reduction [--quick]   (README.md is the handout)
#pragma once
#include <cub/device/device_reduce.cuh>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "common/check.h"
#include "common/flags.h"
#include "common/report.h"
#include "common/timer.h"
#include "verify/compare.h"
#include "verify/parallel.h"
#include "verify/random.h"
#include "verify/reduction.h"

#include "occupancy.cuh"  // Grids

// 6. One rung, several grid sizes: rung 11 with 1, 2, ... blocks per SM sums the same
//    floats in different orders, which round differently. Every sum is inside its own
//    bound; they may differ from each other in the last bits. Rung 10 at rung 11's grid
//    adds in exactly rung 11's order: the same bits (sum11: rung 11's sum in the ladder).
static void check_grid_sizes(lesson::Report& report, const Buffers& buf, size_t N, const verify::SumReference& ref,
                             const Grids& g, int sms, int64_t rung_only, float sum11) {
    float lo = INFINITY, hi = -INFINITY;
    for (unsigned per_sm = 1; per_sm * sms <= g.grid[kRung11]; ++per_sm) {
        const Scratch<float> s{buf.d_partials, buf.d_counter, per_sm * unsigned(sms)};
        CUDA_CHECK(cudaMemset(buf.d_a, 0xFF, sizeof(float)));
        const Pass p = rung11::launch<float, float>(buf.d_in, N, buf.d_a, s);
        const float sum = copy_out(buf.d_a);
        report.check(
            verify::check_float_sum(sum, ref, p.depth, "rung 11 at " + std::to_string(per_sm) + " block(s) per SM"));
        char line[160];
        std::snprintf(line, sizeof line, "rung 11 at %5u blocks (%u per SM): float sum %.1f (ref %+.2f)", s.grid,
                      per_sm, double(sum), double(sum) - ref.sum);
        report.note(line);
        lo = std::min(lo, sum);
        hi = std::max(hi, sum);
    }
    report.metric("rung 11: largest - smallest float sum over the grid sizes", double(hi) - double(lo), "");
    report.metric("rung 11: spacing of floats at the sum (1 ulp)", double(std::nextafter(hi, INFINITY) - hi), "");
    if (rung_only == 0) {
        const Scratch<float> s{buf.d_partials, buf.d_counter, g.grid[kRung11]};
        CUDA_CHECK(cudaMemset(buf.d_a, 0xFF, sizeof(float)));
        rung10::launch<float, float>(buf.d_in, N, buf.d_a, s);
        report.check(
            verify::check_same_bits(copy_out(buf.d_a), sum11, "rung 10 at rung 11's grid: the same bits as rung 11"));
    }
}

// 7. The integer sum with rungs 10 and 11 (T = int, Acc = long long): exact, so every
//    order and every grid gives the CPU's bits. Returns rung 11's time on it (0: not run).
static double check_integer_sums(lesson::Report& report, const Buffers& buf, size_t N, int64_t ref_int, const Grids& g,
                                 const lesson::CommonOptions& opt, int64_t rung_only) {
    double int_ms = 0;
    for (int k : {kRung10, kRung11}) {
        if (!selected(rung_only, k)) continue;
        const Scratch<long long> s{buf.d_partials64, buf.d_counter, k == kRung10 ? g.grid10i : g.grid11i};
        auto launch = [&](const Scratch<long long>& sc) {
            return k == kRung10 ? rung10::launch<int, long long>(buf.d_ints, N, buf.d_sum64, sc)
                                : rung11::launch<int, long long>(buf.d_ints, N, buf.d_sum64, sc);
        };
        for (unsigned grid : {s.grid, std::max(1u, s.grid / 2)}) {
            CUDA_CHECK(cudaMemset(buf.d_sum64, 0xFF, sizeof(long long)));
            launch(Scratch<long long>{buf.d_partials64, buf.d_counter, grid});
            long long sum = copy_out(buf.d_sum64);
            if (opt.inject_fault) verify::inject_fault(&sum, 1, uint64_t(opt.seed));
            report.check(verify::check_same_bits(sum, (long long)ref_int,
                                                 "rung " + std::to_string(k + 1) + ", int32 -> int64 at " +
                                                     std::to_string(grid) + " blocks: the CPU's bits"));
        }
        if (k == kRung11) int_ms = lesson::time_median_ms(int(opt.repeat), [&] { launch(s); });
    }
    return int_ms;
}

// 8. Exactly summable floats: every rung run above and CUB once more, on integers 1 and 2
//    as floats, min(n, 2^23 - 1) of them. Every partial sum that any order of additions
//    forms is then an integer of at most 2^24, which a float holds exactly (verify/reduction.h),
//    so every sum must be the int64 sum to the bit. Section 4's bound allows an error of
//    hundreds at n = 2^28; this check allows none: a rung that skips or repeats one input
//    fails it. The floats of sections 4-6 are done with: d_in takes the new input.
static void check_exact_floats(lesson::Report& report, const Buffers& buf, size_t N, const Grids& g,
                               const lesson::CommonOptions& opt, int64_t rung_only) {
    const size_t m = std::min<size_t>(N, verify::kExactFloatMaxN);
    verify::host_vector<float> h_exact(m);
    verify::host_vector<int32_t> h_exact_ints(m);
    verify::fill_exact_floats(h_exact.data(), h_exact_ints.data(), m, uint64_t(opt.seed) + 2);
    const verify::ExactSum exact = verify::exact_sum(h_exact_ints.data(), m);
    CUDA_CHECK(cudaMemcpy(buf.d_in, h_exact.data(), m * sizeof(float), cudaMemcpyHostToDevice));
    const std::string of = ", floats 1 and 2, n=" + size_text(int64_t(m)) + ": the int64 sum's bits";
    for (int k = 0; k < kRungCount; ++k) {
        if (!selected(rung_only, k)) continue;
        buf.poison();
        const RungRun run = run_rung(kRungs[k], buf.d_in, m, buf.d_a, buf.d_b,
                                     Scratch<float>{buf.d_partials, buf.d_counter, g.grid[k]});
        float sum = copy_out(run.d_sum);
        if (opt.inject_fault) verify::inject_fault(&sum, 1, uint64_t(opt.seed));
        report.check(verify::check_exact_float_sum(sum, exact, kRungs[k].name + of));
    }
    size_t exact_temp_bytes = 0;  // CUB's two calls again, for this n
    void* d_exact_temp = nullptr;
    CUDA_CHECK(cub::DeviceReduce::Sum(nullptr, exact_temp_bytes, buf.d_in, buf.d_cub_sum, int(m)));
    CUDA_CHECK(cudaMalloc(&d_exact_temp, exact_temp_bytes));
    CUDA_CHECK(cudaMemset(buf.d_cub_sum, 0xFF, sizeof(float)));
    CUDA_CHECK(cub::DeviceReduce::Sum(d_exact_temp, exact_temp_bytes, buf.d_in, buf.d_cub_sum, int(m)));
    report.check(verify::check_exact_float_sum(copy_out(buf.d_cub_sum), exact, "cub::DeviceReduce::Sum" + of));
    CUDA_CHECK(cudaFree(d_exact_temp));
}
