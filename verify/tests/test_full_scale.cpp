// CPU tests of verify/full_scale.h (lesson 23): the per-image reference, the bound that ties the
// blur's sum to the raw sum, the every-image check and the sample of a chunk. The GPU kernel's
// float arithmetic is replayed here in the kernel's order (threads of 4 columns x 32 rows), so
// the bound is tested against the very roundings it must cover.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>
#include <vector>
#include "catch_shim.hpp"
#include "verify/full_scale.h"
#include "verify/random.h"

namespace {

constexpr int kStrip = 32, kThreadDepth = 2 + kStrip;

float taps(float l, float c, float r) { return l + 2.0f * c + r; }
int64_t clampi(int64_t i, int64_t n) { return i < 0 ? 0 : (i >= n ? n - 1 : i); }

// The fused kernel's arithmetic for one image: per thread (4 columns, kStrip rows) float sums in
// its order, then every thread's values added in double (the order of the double part does not
// matter at this size). zero_pad = true replaces clamp-to-edge by zeros outside: a wrong border.
void replay_gpu(const std::vector<float>& img, int64_t side, double* s, bool zero_pad = false) {
    auto px = [&](int64_t x, int64_t y) -> float {
        if (zero_pad && (x < 0 || x >= side || y < 0 || y >= side)) return 0.0f;
        return img[clampi(y, side) * side + clampi(x, side)];
    };
    s[verify::kSumRaw] = 0, s[verify::kSumBlur] = 0, s[verify::kMinBlur] = INFINITY, s[verify::kMaxBlur] = -INFINITY;
    for (int64_t y0 = 0; y0 < side; y0 += kStrip)
        for (int64_t x = 0; x < side; x += 4) {
            float sumRaw = 0, sumBlur = 0, lo = INFINITY, hi = -INFINITY;
            auto across = [&](int64_t y, float* sum, float& raw) {
                float c[6];
                for (int j = 0; j < 6; ++j) c[j] = px(x - 1 + j, y);
                if (!zero_pad) c[0] = px(std::max<int64_t>(x - 1, 0), y), c[5] = px(std::min(x + 4, side - 1), y);
                for (int j = 0; j < 4; ++j) sum[j] = taps(c[j], c[j + 1], c[j + 2]);
                raw = (c[1] + c[2]) + (c[3] + c[4]);
            };
            float above[4], here[4], below[4], ra, rh, rb;
            across(y0 - 1, above, ra);
            across(y0, here, rh);
            for (int64_t y = y0; y < std::min(y0 + kStrip, side); ++y) {
                sumRaw += rh;
                across(y + 1, below, rb);
                float o[4];
                for (int j = 0; j < 4; ++j) o[j] = taps(above[j], here[j], below[j]) * (1.0f / 16.0f);
                sumBlur += (o[0] + o[1]) + (o[2] + o[3]);
                for (int j = 0; j < 4; ++j) lo = std::min(lo, o[j]), hi = std::max(hi, o[j]);
                for (int j = 0; j < 4; ++j) above[j] = here[j], here[j] = below[j];
                rh = rb;
            }
            s[verify::kSumRaw] += sumRaw;
            s[verify::kSumBlur] += sumBlur;
            s[verify::kMinBlur] = std::min(s[verify::kMinBlur], double(lo));
            s[verify::kMaxBlur] = std::max(s[verify::kMaxBlur], double(hi));
        }
}

std::vector<float> random_image(int64_t side, uint64_t seed) {
    std::vector<float> img(side * side);
    verify::fill_uniform(img.data(), img.size(), seed, 1.0f / 16777216.0f, 1.0f);  // (0, 1), like cuRAND's (0, 1]
    return img;
}

}  // namespace

TEST_CASE("full_scale: clamp-to-edge blur keeps the sum exactly (in double)", "[full_scale]") {
    for (int64_t side : {4, 12, 64}) {
        const std::vector<float> img = random_image(side, 7 + side);
        double s[verify::kStatFields];
        verify::image_stats_reference(img.data(), side, s);
        CHECK(std::fabs(s[verify::kSumBlur] - s[verify::kSumRaw]) <= 1e-12 * s[verify::kSumRaw]);
        CHECK(s[verify::kMinBlur] > 0.0);
        CHECK(s[verify::kMaxBlur] <= 1.0);
    }
}

TEST_CASE("full_scale: the replayed GPU arithmetic passes every check", "[full_scale]") {
    for (int64_t side : {4, 8, 36, 128}) {
        const std::vector<float> img = random_image(side, 100 + side);
        double gpu[verify::kStatFields], ref[verify::kStatFields];
        replay_gpu(img, side, gpu);
        verify::image_stats_reference(img.data(), side, ref);
        for (int f = 0; f < verify::kStatFields; ++f) CHECK(std::fabs(gpu[f] - ref[f]) <= 1e-5 * std::fabs(ref[f]));
        CHECK(std::fabs(gpu[verify::kSumBlur] - gpu[verify::kSumRaw]) <=
              verify::sum_relation_bound(gpu[verify::kSumRaw], kThreadDepth, 20));
        CHECK(verify::image_stats_problem(gpu, side, kThreadDepth, 20) == "");
    }
}

TEST_CASE("full_scale: a wrong border (zero padding) breaks the sum relation", "[full_scale]") {
    const int64_t side = 128;
    const std::vector<float> img = random_image(side, 5);
    double gpu[verify::kStatFields];
    replay_gpu(img, side, gpu, /*zero_pad=*/true);
    CHECK(std::fabs(gpu[verify::kSumBlur] - gpu[verify::kSumRaw]) >
          verify::sum_relation_bound(gpu[verify::kSumRaw], kThreadDepth, 20));
    CHECK(verify::image_stats_problem(gpu, side, kThreadDepth, 20) != "");
}

TEST_CASE("full_scale: check_every_image finds each kind of wrong result", "[full_scale]") {
    const int64_t side = 32;
    const int images = 5;
    std::vector<double> stats(images * verify::kStatFields);
    for (int i = 0; i < images; ++i) {
        const std::vector<float> img = random_image(side, 40 + i);
        replay_gpu(img, side, stats.data() + i * verify::kStatFields);
    }
    CHECK(verify::check_every_image(stats.data(), images, side, kThreadDepth, 20, "ok").pass);
    for (int f = 0; f < verify::kStatFields; ++f) {  // what --inject-fault does to any one number
        std::vector<double> bad = stats;
        double& v = bad[3 * verify::kStatFields + f];
        v = v * 2.0 + 1.0;
        const lesson::Check c = verify::check_every_image(bad.data(), images, side, kThreadDepth, 20, "bad");
        CHECK(!c.pass);
        CHECK(c.first_bad == 3);
        CHECK(c.bad_count == 1);
    }
    std::vector<double> nan = stats;
    nan[2 * verify::kStatFields + verify::kMaxBlur] = NAN;
    CHECK(!verify::check_every_image(nan.data(), images, side, kThreadDepth, 20, "nan").pass);
    std::vector<double> shifted = stats;  // every pixel + 0.1: the mean test
    for (int i = 0; i < images; ++i) {
        shifted[i * verify::kStatFields + verify::kSumRaw] += 0.1 * side * side;
        shifted[i * verify::kStatFields + verify::kSumBlur] += 0.1 * side * side;
    }
    CHECK(!verify::check_every_image(shifted.data(), images, side, kThreadDepth, 20, "shifted").pass);
}

TEST_CASE("full_scale: sample_images picks distinct images of the chunk, deterministically", "[full_scale]") {
    for (uint64_t count : {1ull, 2ull, 7ull, 64ull}) {
        for (uint64_t want : {1ull, 3ull, 64ull}) {
            const std::vector<uint64_t> a = verify::sample_images(1000, count, want, 2026, 5);
            CHECK(a == verify::sample_images(1000, count, want, 2026, 5));
            CHECK(a.size() == std::min(want, count));
            CHECK(std::set<uint64_t>(a.begin(), a.end()).size() == a.size());
            for (size_t i = 0; i < a.size(); ++i) {
                CHECK(a[i] >= 1000);
                CHECK(a[i] < 1000 + count);
                if (i) CHECK(a[i - 1] < a[i]);
            }
        }
    }
    // Other chunks (or seeds) pick other images.
    CHECK(verify::sample_images(0, 1000, 4, 2026, 1) != verify::sample_images(0, 1000, 4, 2026, 2));
}

TEST_CASE("full_scale: the sampled reference equals one image at a time, made on many threads", "[full_scale]") {
    const int64_t side = 12;
    const std::vector<uint64_t> images = {3, 9, 10, 41, 42, 43, 57, 60, 61, 62, 70, 71, 72, 80, 81, 82, 90, 99};
    auto make = [&](uint64_t i, float* pixels) {  // image i: a function of its index alone
        const std::vector<float> img = random_image(side, 1000 + i);
        std::copy(img.begin(), img.end(), pixels);
    };
    const std::vector<double> stats = verify::sampled_stats_reference(images, side, make);
    REQUIRE(stats.size() == images.size() * verify::kStatFields);
    for (size_t k = 0; k < images.size(); ++k) {
        double one[verify::kStatFields];
        verify::image_stats_reference(random_image(side, 1000 + images[k]).data(), side, one);
        for (int f = 0; f < verify::kStatFields; ++f) CHECK(stats[k * verify::kStatFields + f] == one[f]);
    }
}
