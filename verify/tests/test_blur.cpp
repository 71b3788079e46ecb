// CPU tests of verify/blur.h: the 3x3 Gaussian blur reference (lesson 07).
#include <cstdint>
#include <vector>
#include "catch_shim.hpp"
#include "verify/blur.h"
#include "verify/random.h"

// Pixel (x, y) of a row-major width-wide image.
static double at(const std::vector<double>& img, int64_t width, int64_t x, int64_t y) { return img[y * width + x]; }

TEST_CASE("blur3x3: a constant image stays constant, borders included", "[blur]") {
    const int64_t w = 7, h = 4;
    std::vector<float> in(w * h, 0.75f);
    std::vector<double> out(w * h, -1.0);
    verify::blur3x3_reference(in.data(), out.data(), w, h);
    for (double v : out) CHECK(v == 0.75);
}

TEST_CASE("blur3x3: an interior impulse gives the kernel weights / 16", "[blur]") {
    const int64_t w = 5, h = 5;
    std::vector<float> in(w * h, 0.0f);
    in[2 * w + 2] = 1.0f;
    std::vector<double> out(w * h, -1.0);
    verify::blur3x3_reference(in.data(), out.data(), w, h);
    for (int64_t y = 0; y < h; ++y)
        for (int64_t x = 0; x < w; ++x) {
            const bool inside = x >= 1 && x <= 3 && y >= 1 && y <= 3;
            const double want = inside ? verify::kBlur3x3Weights[y - 1][x - 1] / 16.0 : 0.0;
            CHECK(at(out, w, x, y) == want);
        }
    CHECK(at(out, w, 2, 2) == 0.25);    // the centre weight 4/16
    CHECK(at(out, w, 1, 1) == 0.0625);  // a corner weight 1/16
}

TEST_CASE("blur3x3: border pixels follow clamp-to-edge", "[blur]") {
    SECTION("an impulse in the top-left corner counts four times into the corner") {
        const int64_t w = 4, h = 4;
        std::vector<float> in(w * h, 0.0f);
        in[0] = 16.0f;
        std::vector<double> out(w * h, -1.0);
        verify::blur3x3_reference(in.data(), out.data(), w, h);
        CHECK(at(out, w, 0, 0) == 9.0);  // samples (-1,-1), (0,-1), (-1,0), (0,0) all clamp to (0,0): 1+2+2+4
        CHECK(at(out, w, 1, 0) == 3.0);  // (0,-1) and (0,0) seen from (1,0): 1+2
        CHECK(at(out, w, 0, 1) == 3.0);
        CHECK(at(out, w, 1, 1) == 1.0);
        CHECK(at(out, w, 2, 0) == 0.0);
    }
    SECTION("an impulse on the top edge counts twice into its own pixel") {
        const int64_t w = 5, h = 3;
        std::vector<float> in(w * h, 0.0f);
        in[2] = 16.0f;  // (2, 0)
        std::vector<double> out(w * h, -1.0);
        verify::blur3x3_reference(in.data(), out.data(), w, h);
        CHECK(at(out, w, 2, 0) == 6.0);  // dy = -1 clamps onto row 0: 2 + 4
        CHECK(at(out, w, 1, 0) == 3.0);  // 1 + 2
        CHECK(at(out, w, 2, 1) == 2.0);
        CHECK(at(out, w, 2, 2) == 0.0);
    }
    SECTION("a ramp is kept inside and bent at the clamped borders") {
        // in(x, y) = x on a 4 x 3 image: inside, the blur of a linear function is itself.
        const int64_t w = 4, h = 3;
        std::vector<float> in(w * h);
        for (int64_t y = 0; y < h; ++y)
            for (int64_t x = 0; x < w; ++x) in[y * w + x] = float(x);
        std::vector<double> out(w * h, -1.0);
        verify::blur3x3_reference(in.data(), out.data(), w, h);
        for (int64_t y = 0; y < h; ++y) {
            CHECK(at(out, w, 0, y) == 0.25);  // (0 + 2*0 + 1) / 4
            CHECK(at(out, w, 1, y) == 1.0);
            CHECK(at(out, w, 2, y) == 2.0);
            CHECK(at(out, w, 3, y) == 2.75);  // (2 + 2*3 + 3) / 4
        }
    }
}

TEST_CASE("blur3x3: non-square sizes", "[blur]") {
    SECTION("a 2 x 5 image with a vertical ramp") {
        const int64_t w = 2, h = 5;
        std::vector<float> in(w * h);
        for (int64_t y = 0; y < h; ++y)
            for (int64_t x = 0; x < w; ++x) in[y * w + x] = float(y);
        std::vector<double> out(w * h, -1.0);
        verify::blur3x3_reference(in.data(), out.data(), w, h);
        const double want[5] = {0.25, 1.0, 2.0, 3.0, 3.75};
        for (int64_t y = 0; y < h; ++y)
            for (int64_t x = 0; x < w; ++x) CHECK(at(out, w, x, y) == want[y]);
    }
    SECTION("a single column blurs vertically only: (up + 2 centre + down) / 4") {
        const int64_t w = 1, h = 4;
        std::vector<float> in = {8.0f, 0.0f, 4.0f, 12.0f};
        std::vector<double> out(h, -1.0);
        verify::blur3x3_reference(in.data(), out.data(), w, h);
        CHECK(out[0] == 6.0);   // (8 + 2*8 + 0) / 4: the row above clamps onto row 0
        CHECK(out[1] == 3.0);   // (8 + 0 + 4) / 4
        CHECK(out[2] == 5.0);   // (0 + 8 + 12) / 4
        CHECK(out[3] == 10.0);  // (4 + 24 + 12) / 4
    }
    SECTION("a single row blurs horizontally only, and a 1 x 1 image is unchanged") {
        std::vector<float> row = {16.0f, 0.0f, 0.0f};
        std::vector<double> out(3, -1.0);
        verify::blur3x3_reference(row.data(), out.data(), 3, 1);
        CHECK(out[0] == 12.0);  // (16 + 32 + 0) / 4
        CHECK(out[1] == 4.0);
        CHECK(out[2] == 0.0);
        float one = 0.5f;
        double o = -1.0;
        verify::blur3x3_reference(&one, &o, 1, 1);
        CHECK(o == 0.5);
    }
    SECTION("a wide image and its transpose give transposed results") {
        const int64_t w = 6, h = 3;
        std::vector<float> a(w * h), t(w * h);
        for (int64_t i = 0; i < w * h; ++i) a[i] = float((i * 7) % 11);
        for (int64_t y = 0; y < h; ++y)
            for (int64_t x = 0; x < w; ++x) t[x * h + y] = a[y * w + x];
        std::vector<double> oa(w * h), ot(w * h);
        verify::blur3x3_reference(a.data(), oa.data(), w, h);
        verify::blur3x3_reference(t.data(), ot.data(), h, w);  // the kernel is symmetric
        for (int64_t y = 0; y < h; ++y)
            for (int64_t x = 0; x < w; ++x) CHECK(oa[y * w + x] == ot[x * h + y]);
    }
}

TEST_CASE("blur3x3: a batch check passes a correct batch and finds one wrong pixel", "[blur]") {
    // Small images (a group at a time, one image per thread) and large ones (one at a time).
    for (const int64_t side : {int64_t(9), int64_t(300)}) {
        const int64_t count = side < 100 ? 300 : 3, pixels = side * side;
        std::vector<float> in(size_t(count * pixels)), out(in.size());
        verify::fill_uniform(in.data(), in.size(), 7);
        std::vector<double> ref(static_cast<size_t>(pixels));
        for (int64_t k = 0; k < count; ++k) {
            verify::blur3x3_reference(in.data() + k * pixels, ref.data(), side, side);
            for (int64_t i = 0; i < pixels; ++i) out[size_t(k * pixels + i)] = float(ref[size_t(i)]);
        }
        const lesson::Check good = verify::check_blurred_images(in.data(), out.data(), side, side, count, "batch");
        CHECK(good.pass);
        CHECK(good.checked == uint64_t(count * pixels));
        const int64_t wrong = (count - 1) * pixels + 5;  // a pixel of the last image
        out[size_t(wrong)] += 1.0f;
        const lesson::Check bad = verify::check_blurred_images(in.data(), out.data(), side, side, count, "batch");
        CHECK(!bad.pass);
        CHECK(bad.first_bad == wrong);
        CHECK(bad.bad_count == 1);
    }
}
