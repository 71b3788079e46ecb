// verify/full_scale.h - the CPU side of lesson 23 (the full-scale run): per-image
// statistics of a blurred image, and the checks that every image's statistics get.
//
//  - Per image the GPU returns kStatFields doubles: the sum of the raw image, the
//    sum of its 3x3 blur (lesson 07's kernel, clamp-to-edge), and the blur's
//    minimum and maximum. image_stats_reference computes them in double.
//  - sum_relation_bound: with clamp-to-edge, the normalized blur moves every
//    pixel's weight to its neighbours without losing any (each [1 2 1] / 4 pass
//    hands out exactly 1 per input pixel, also at the edges), so in exact
//    arithmetic sum(blur) == sum(raw). The GPU computes both sums in float; the
//    bound says how far apart rounding can put them.
//  - check_every_image: the relation, the raw mean within 7 sigma of 0.5
//    (uniform inputs), 0 < min <= mean <= max <= 1 for the blur; for all images.
//  - sample_images: which images of a chunk are recomputed on the CPU.
// Host-only, no CUDA, no cuRAND (main.cu regenerates the images).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>
#include "common/report.h"
#include "verify/blur.h"
#include "verify/random.h"
#include "verify/reduction.h"

namespace verify {

// The per-image results, kStatFields doubles per image, in this order.
enum StatField { kSumRaw = 0, kSumBlur = 1, kMinBlur = 2, kMaxBlur = 3 };
constexpr int kStatFields = 4;

// stats[0..4) of one side x side image: raw sum and blur sum (compensated double sums),
// blur minimum and maximum, the blur computed in double (verify/blur.h).
inline void image_stats_reference(const float* image, int64_t side, double* stats) {
    const size_t n = static_cast<size_t>(side) * static_cast<size_t>(side);
    std::vector<double> blurred(n);
    blur3x3_reference(image, blurred.data(), side, side);
    NeumaierSum raw, blur;
    double lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < n; ++i) {
        raw.add(static_cast<double>(image[i]));
        blur.add(blurred[i]);
        lo = std::min(lo, blurred[i]);
        hi = std::max(hi, blurred[i]);
    }
    stats[kSumRaw] = raw.value();
    stats[kSumBlur] = blur.value();
    stats[kMinBlur] = lo;
    stats[kMaxBlur] = hi;
}

// How far the GPU's float sum of the blur may be from its float sum of the raw image
// (inputs >= 0, so every error is relative to the sum s):
//  - each blurred pixel is 4 rounded additions of non-negative terms (two across a row,
//    two down the column; the 2x and the 1/16 are exact): within gamma_4 of its value;
//  - each thread adds its pixels in float along a path at most `thread_depth` additions
//    deep: within gamma_thread_depth of the thread's sum, for both sums;
//  - the rest (warps, blocks, the per-image finish) adds in double, at most
//    `double_depth` additions deep.
// So |blur - raw| <= (gamma_4 + 2 gamma_t + gamma_4 gamma_t + 2 gamma_d,double) s, with s the
// exact sum; s is taken as |raw| / (1 - gamma_t) to cover raw's own error.
inline double sum_relation_bound(double sum_raw, uint64_t thread_depth, uint64_t double_depth) {
    const double g4 = gamma(4), gt = gamma(thread_depth), gd = gamma(double_depth, kDoubleUnitRoundoff);
    const double s = std::fabs(sum_raw) / (1.0 - gt);
    return (g4 + 2.0 * gt + g4 * gt + 2.0 * gd) * s;
}

// Why the statistics of one image (pixels uniform in (0, 1]) cannot be right, or "" when they
// pass: finite; |blur sum - raw sum| within sum_relation_bound; the raw mean within 7 standard
// deviations of 0.5 (sd = sqrt(1 / (12 n)); a correct image fails with probability ~1e-12);
// blur minimum > 0, maximum <= 1 (a weighted mean of values in (0, 1]), min <= mean <= max.
inline std::string image_stats_problem(const double* s, int64_t side, uint64_t thread_depth, uint64_t double_depth) {
    const double n = double(side) * double(side);
    for (int f = 0; f < kStatFields; ++f)
        if (!std::isfinite(s[f])) return "a statistic is not finite";
    if (!(std::fabs(s[kSumBlur] - s[kSumRaw]) <= sum_relation_bound(s[kSumRaw], thread_depth, double_depth)))
        return "blur sum differs from raw sum by more than the rounding bound";
    if (!(std::fabs(s[kSumRaw] / n - 0.5) <= 7.0 * std::sqrt(1.0 / (12.0 * n))))
        return "raw mean more than 7 sd from 0.5";
    const double mean_blur = s[kSumBlur] / n;
    if (!(s[kMinBlur] > 0.0 && s[kMaxBlur] <= 1.0 && s[kMinBlur] <= mean_blur && mean_blur <= s[kMaxBlur]))
        return "blur min/max outside (0, 1] or not around the mean";
    return "";
}

// The check of every image: stats[kStatFields * i ...] for i < images. max_abs and rel_l2
// report the largest |blur sum - raw sum| and its size relative to the raw sum; tol is the
// relation bound relative to the sum (the same for every image up to its sum's rounding).
inline lesson::Check check_every_image(const double* stats, uint64_t images, int64_t side, uint64_t thread_depth,
                                       uint64_t double_depth, const std::string& what) {
    lesson::Check c;
    c.checked = images;
    c.max_abs = 0;
    c.rel_l2 = 0;
    std::string first_problem;
    for (uint64_t i = 0; i < images; ++i) {
        const double* s = stats + kStatFields * i;
        const double d = std::fabs(s[kSumBlur] - s[kSumRaw]);
        if (d > c.max_abs || std::isnan(d)) c.max_abs = d;
        const double r = s[kSumRaw] != 0 ? d / std::fabs(s[kSumRaw]) : d;
        if (r > c.rel_l2 || std::isnan(r)) c.rel_l2 = r;
        const std::string p = image_stats_problem(s, side, thread_depth, double_depth);
        if (!p.empty()) {
            if (c.first_bad < 0) {
                c.first_bad = int64_t(i);
                first_problem = p;
            }
            ++c.bad_count;
        }
    }
    const double n = double(side) * double(side);
    c.tol = sum_relation_bound(0.5 * n, thread_depth, double_depth) / (0.5 * n);
    c.pass = images > 0 && c.bad_count == 0;
    c.what = what + (first_problem.empty() ? "" : " [first bad image: " + first_problem + "]");
    return c;
}

// `want` distinct images of the chunk [first, first + count), chosen from (seed, chunk),
// sorted. The same for any GPU count or stream count: it depends on the chunk plan only.
inline std::vector<uint64_t> sample_images(uint64_t first, uint64_t count, uint64_t want, uint64_t seed,
                                           uint64_t chunk) {
    want = std::min(want, count);
    std::vector<char> taken(count, 0);
    std::vector<uint64_t> picked;
    for (uint64_t t = 0; picked.size() < want; ++t) {
        const uint64_t i = splitmix64(seed * 0x9E3779B97F4A7C15ull + splitmix64(chunk * 0x100000001B3ull + t)) % count;
        if (taken[i]) continue;
        taken[i] = 1;
        picked.push_back(first + i);
    }
    std::sort(picked.begin(), picked.end());
    return picked;
}

}  // namespace verify
