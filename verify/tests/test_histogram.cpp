// CPU tests of verify/histogram.h: the inputs and reference of lesson 16.
#include <cmath>
#include <cstdint>
#include <vector>
#include "catch_shim.hpp"
#include "verify/compare.h"
#include "verify/histogram.h"

namespace {

// The plainest possible count, to check the reference against.
std::vector<uint64_t> naive_count(const std::vector<uint8_t>& p) {
    std::vector<uint64_t> bins(verify::kHistogramBins, 0);
    for (uint8_t v : p) ++bins[v];
    return bins;
}

uint64_t total(const uint64_t* bins) {
    uint64_t s = 0;
    for (int b = 0; b < verify::kHistogramBins; ++b) s += bins[b];
    return s;
}

}  // namespace

TEST_CASE("histogram reference: 7 bytes, known answer", "[histogram]") {
    const std::vector<uint8_t> p = {3, 0, 255, 3, 3, 200, 0};
    uint64_t bins[256];
    verify::histogram_reference(p.data(), p.size(), bins);
    CHECK(bins[0] == 2);
    CHECK(bins[3] == 3);
    CHECK(bins[200] == 1);
    CHECK(bins[255] == 1);
    CHECK(total(bins) == 7);
    CHECK(bins[1] == 0);
    CHECK(bins[254] == 0);
}

TEST_CASE("histogram reference: n = 1 and n = 0", "[histogram]") {
    const uint8_t one[] = {77};
    uint64_t bins[256];
    verify::histogram_reference(one, 1, bins);
    CHECK(bins[77] == 1);
    CHECK(total(bins) == 1);
    verify::histogram_reference(one, 0, bins);
    CHECK(total(bins) == 0);
}

TEST_CASE("histogram reference: equals a plain count at odd sizes, both inputs", "[histogram]") {
    // Sizes that are not multiples of 4 (the reference's unroll), 16 (the GPU's
    // 16-byte loads) or 256 (a block).
    for (size_t n : {size_t(1), size_t(2), size_t(3), size_t(5), size_t(15), size_t(17), size_t(255), size_t(257),
                     size_t(4099), size_t(100003), (size_t(1) << 23) + 5}) {  // the last: several 4 MiB blocks
        for (int input = 0; input < 2; ++input) {
            std::vector<uint8_t> p(n);
            if (input == 0) verify::fill_skewed_bytes(p.data(), n, 42);
            else verify::fill_uniform_bytes(p.data(), n, 42);
            uint64_t bins[256];
            verify::histogram_reference(p.data(), n, bins);
            const std::vector<uint64_t> want = naive_count(p);
            int bad = 0;
            for (int b = 0; b < 256; ++b) bad += bins[b] != want[b];
            CHECK(bad == 0);
            CHECK(total(bins) == n);
        }
    }
}

TEST_CASE("histogram inputs: every byte a pure function of (seed, index)", "[histogram]") {
    const size_t n = 1003;  // not a multiple of 8: the fill's last word is partial
    std::vector<uint8_t> s(n), u(n), s2(n), u2(n);
    verify::fill_skewed_bytes(s.data(), n, 9);
    verify::fill_uniform_bytes(u.data(), n, 9);
    for (size_t i = 0; i < n; ++i) {
        CHECK(s[i] == verify::skewed_byte(9, i));
        CHECK(u[i] == verify::uniform_byte(9, i));
    }
    // A prefix of a longer fill is the shorter fill.
    std::vector<uint8_t> longer(5000);
    verify::fill_skewed_bytes(longer.data(), longer.size(), 9);
    CHECK(std::vector<uint8_t>(longer.begin(), longer.begin() + n) == s);
    // Same seed, same bytes; another seed, other bytes.
    verify::fill_skewed_bytes(s2.data(), n, 9);
    CHECK(s2 == s);
    verify::fill_uniform_bytes(u2.data(), n, 10);
    CHECK(u2 != u);
}

TEST_CASE("skewed input: half of the bytes in the background bin, the rest near the gradient", "[histogram]") {
    const size_t n = size_t(1) << 20;
    std::vector<uint8_t> p(n);
    verify::fill_skewed_bytes(p.data(), n, 2026);
    uint64_t bins[256];
    verify::histogram_reference(p.data(), n, bins);
    // The background holds half of the pixels, plus the gradient's share of value 200.
    const double share = double(bins[verify::kBackground]) / double(n);
    CHECK(share > 0.49);
    CHECK(share < 0.52);
    CHECK(verify::largest_bin_share(bins, n) == Approx(share));
    // Every other bin holds the gradient's ~1/256 of the other half, give or take:
    // all 256 values occur (noise reaches 0 and 255), none comes near the background.
    int empty = 0;
    uint64_t second = 0;
    for (int b = 0; b < 256; ++b) {
        empty += bins[b] == 0;
        if (b != verify::kBackground && bins[b] > second) second = bins[b];
    }
    CHECK(empty == 0);
    CHECK(double(second) / double(n) < 0.01);
    // Every non-background pixel is within the noise of its column's gradient.
    int off = 0;
    for (size_t i = 0; i < n; ++i) {
        const int g = int((i % verify::kImageWidth) * 256 / verify::kImageWidth);
        const int v = p[i];
        if (v != verify::kBackground && (v < g - 8 || v > g + 7)) ++off;
    }
    CHECK(off == 0);
    // Contention: 32 neighbouring pixels fall into about a dozen bins (1 for the
    // background, ~10 of the ~17 values near the gradient).
    const double distinct = verify::mean_distinct_per_group(p.data(), n, 32);
    CHECK(distinct > 8.0);
    CHECK(distinct < 16.0);
}

TEST_CASE("uniform input: every bin near n / 256", "[histogram]") {
    const size_t n = size_t(1) << 20;
    std::vector<uint8_t> p(n);
    verify::fill_uniform_bytes(p.data(), n, 2027);
    uint64_t bins[256];
    verify::histogram_reference(p.data(), n, bins);
    const double mean = double(n) / 256.0, sigma = std::sqrt(mean * 255.0 / 256.0);  // binomial
    int far = 0;
    for (int b = 0; b < 256; ++b) far += std::fabs(double(bins[b]) - mean) > 6.0 * sigma;
    CHECK(far == 0);
    CHECK(verify::largest_bin_share(bins, n) < 0.0045);
    // Little contention: 32 random bytes fall into about 30 bins (256 (1 - (255/256)^32) = 30.2).
    const double distinct = verify::mean_distinct_per_group(p.data(), n, 32);
    CHECK(distinct > 29.5);
    CHECK(distinct < 31.0);
}

TEST_CASE("mean_distinct_per_group: known answers", "[histogram]") {
    std::vector<uint8_t> same(64, 5), ramp(64);
    for (int i = 0; i < 64; ++i) ramp[i] = uint8_t(i);
    CHECK(verify::mean_distinct_per_group(same.data(), 64, 32) == 1.0);
    CHECK(verify::mean_distinct_per_group(ramp.data(), 64, 32) == 32.0);
    // 40 bytes in groups of 32: one full group (32 values) and a short one (8).
    CHECK(verify::mean_distinct_per_group(ramp.data(), 40, 32) == 20.0);
    CHECK(verify::mean_distinct_per_group(ramp.data(), 0, 32) == 0.0);
}

TEST_CASE("compare_histogram: exact bins and the sum", "[histogram]") {
    const size_t n = 100003;
    std::vector<uint8_t> p(n);
    verify::fill_skewed_bytes(p.data(), n, 3);
    uint64_t ref[256];
    verify::histogram_reference(p.data(), n, ref);
    std::vector<uint32_t> gpu(256);
    for (int b = 0; b < 256; ++b) gpu[b] = uint32_t(ref[b]);

    lesson::Check ok = verify::compare_histogram(gpu.data(), ref, n, "equal");
    CHECK(ok.pass);
    CHECK(ok.checked == 256);
    CHECK(ok.bad_count == 0);
    CHECK(ok.first_bad == -1);
    CHECK(ok.rel_l2 == 0.0);

    // One count off by one: bin and sum both wrong.
    gpu[17] += 1;
    lesson::Check one = verify::compare_histogram(gpu.data(), ref, n, "one off");
    CHECK_FALSE(one.pass);
    CHECK(one.first_bad == 17);
    CHECK(one.bad_count == 2);
    CHECK(one.max_abs == 1.0);
    gpu[17] -= 1;

    // A lost merge (one block's counts missing) shows as low counts everywhere it had any.
    std::vector<uint32_t> lost(gpu);
    lost[verify::kBackground] -= 100;
    CHECK_FALSE(verify::compare_histogram(lost.data(), ref, n, "lost").pass);

    // Counts moved between bins keep the sum but not the bins.
    std::vector<uint32_t> moved(gpu);
    moved[0] += 5;
    moved[1] -= 5;
    lesson::Check mv = verify::compare_histogram(moved.data(), ref, n, "moved");
    CHECK_FALSE(mv.pass);
    CHECK(mv.bad_count == 2);
    CHECK(mv.first_bad == 0);

    // Every bin right but the wrong n: only the sum fails, reported as index 256.
    lesson::Check sum = verify::compare_histogram(gpu.data(), ref, n + 1, "sum");
    CHECK_FALSE(sum.pass);
    CHECK(sum.bad_count == 1);
    CHECK(sum.first_bad == 256);

    // A poisoned histogram (0xFFFFFFFF everywhere) fails, and so does --inject-fault.
    std::vector<uint32_t> poison(256, 0xFFFFFFFFu);
    CHECK_FALSE(verify::compare_histogram(poison.data(), ref, n, "poison").pass);
    std::vector<uint32_t> faulty(gpu);
    verify::inject_fault(faulty.data(), 256, 2026);
    CHECK_FALSE(verify::compare_histogram(faulty.data(), ref, n, "fault").pass);
}
