// Lesson 16 of the course (histogram): which inputs a run counts (--input), the collisions of an
// input measured on the CPU, and the exact check of a rung's or CUB's counters against the CPU
// histogram (verify/histogram.h). Included by main.cu after its tables of rungs and inputs.
// Before: main.cu makes each input. Next: the report (summary.cuh).
// Run: ./build/bin/histogram [--quick]   (README.md is the handout)
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "common/flags.h"
#include "common/report.h"
#include "verify/compare.h"
#include "verify/histogram.h"

// Bad --input exits 2 before any CUDA call.
inline void require_input_flag(const std::string& input_flag) {
    if (input_flag != "both" && input_flag != "skewed" && input_flag != "uniform")
        lesson::bad_input("--input=" + input_flag + " is not an input; allowed: both, skewed, uniform");
}

// Whether --input selects input `which` of kInputs.
inline bool selected(const std::string& input_flag, int which) {
    return input_flag == "both" || input_flag == kInputs[which].name;
}

// How much the input collides: its largest bin, and how many different
// bins a warp reading 32 neighbouring bytes touches (mean over the first MiB).
inline void report_collisions(lesson::Report& report, const std::string& input, const uint8_t* h_in, size_t N,
                              const uint64_t* ref) {
    report.metric(input + ": largest bin's share of the bytes", verify::largest_bin_share(ref, N), "of n");
    const size_t sample = N < (size_t(1) << 20) ? N : (size_t(1) << 20);
    report.metric(input + ": distinct bins among 32 neighbouring bytes",
                  verify::mean_distinct_per_group(h_in, sample, 32), "bins (mean)");
}

// The exact check of a verified run and of the result of the last timed call
// (it went through the timed memset + launch path): one line in the report,
// which names the first of them that failed.
static lesson::Check check_runs(const std::vector<unsigned int>& first, const std::vector<unsigned int>& timed,
                                const uint64_t* ref, size_t n, const std::string& what) {
    lesson::Check c = verify::compare_histogram(first.data(), ref, n, what + ": 256 bins exact, sum = n");
    if (!c.pass) return c;
    lesson::Check t =
        verify::compare_histogram(timed.data(), ref, n, what + " (last timed call): 256 bins exact, sum = n");
    if (!t.pass) return t;
    c.checked += t.checked;  // 2 x 256 bins
    return c;
}
