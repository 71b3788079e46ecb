// Lesson 16 of the course (histogram): which inputs a run counts (--input), the collisions of an
// input measured on the CPU, and the exact check of a rung's or CUB's counters against the CPU
// histogram (verify/histogram.h). Included by main.cu after its tables of rungs and inputs.
// Before: main.cu makes each input. Next: the report (summary.cuh).
// Run: ./build/bin/histogram [--quick]   (README.md is the handout)
#pragma once
#include <cstdint>
#include <cstdio>
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

// The handout's model of one warp-wide shared atomic on a single s_hist[256]:
// means over every warp-wide access of the sample, from the bins of the 32
// lanes and bank bin % 32 of each. spacing 1: lane l holds byte base + l (rungs
// 2, 3). spacing 16: lane l holds byte k of its own 16-byte word, base + 16 l + k,
// one access per k (rungs 4, 5).
struct BankModel {
    double bins = 0;   // different bins among the 32 lanes
    double lanes = 0;  // lanes in the busiest bank, if same-word lanes take turns
    double words = 0;  // different words in the busiest bank, if same-word lanes merge
};
inline BankModel busiest_bank_model(const uint8_t* p, size_t n, size_t spacing) {
    BankModel m;
    const size_t chunk = 32 * spacing;  // the bytes of `spacing` warp-wide accesses
    uint64_t accesses = 0;
    for (size_t base = 0; base + chunk <= n; base += chunk)
        for (size_t k = 0; k < spacing; ++k) {
            bool seen[verify::kHistogramBins] = {};
            int lanes[32] = {}, words[32] = {}, bins = 0;
            for (size_t l = 0; l < 32; ++l) {
                const int b = p[base + spacing * l + k];
                ++lanes[b % 32];
                if (!seen[b]) ++bins, ++words[b % 32];
                seen[b] = true;
            }
            int top_lanes = 0, top_words = 0;
            for (int bank = 0; bank < 32; ++bank) {
                top_lanes = lanes[bank] > top_lanes ? lanes[bank] : top_lanes;
                top_words = words[bank] > top_words ? words[bank] : top_words;
            }
            m.bins += bins, m.lanes += top_lanes, m.words += top_words, ++accesses;
        }
    if (accesses) m.bins /= double(accesses), m.lanes /= double(accesses), m.words /= double(accesses);
    return m;
}

// How much the input collides: its largest bin, how many different bins a
// warp reading 32 neighbouring bytes touches (mean over the first MiB), and
// the handout's model table over the first 4 MiB (a note per input).
inline void report_collisions(lesson::Report& report, const std::string& input, const uint8_t* h_in, size_t N,
                              const uint64_t* ref) {
    report.metric(input + ": largest bin's share of the bytes", verify::largest_bin_share(ref, N), "of n");
    const size_t sample = N < (size_t(1) << 20) ? N : (size_t(1) << 20);
    report.metric(input + ": distinct bins among 32 neighbouring bytes",
                  verify::mean_distinct_per_group(h_in, sample, 32), "bins (mean)");
    const size_t model_sample = N < (size_t(1) << 22) ? N : (size_t(1) << 22);
    const BankModel near = busiest_bank_model(h_in, model_sample, 1),
                    apart = busiest_bank_model(h_in, model_sample, 16);
    char text[320];
    std::snprintf(text, sizeof text,
                  "%s, model of one warp-wide shared atomic (first %zu bytes), 32 neighbours (rungs 2, 3) / 16 apart "
                  "(rungs 4, 5): different bins %.1f / %.1f; lanes in the busiest bank %.1f / %.1f; different words "
                  "in the busiest bank %.1f / %.1f; rung 6: 1",
                  input.c_str(), model_sample, near.bins, apart.bins, near.lanes, apart.lanes, near.words, apart.words);
    report.note(text);
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
