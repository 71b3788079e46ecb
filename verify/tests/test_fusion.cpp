// CPU tests of lesson 17's references (verify/fusion.h), of the index arithmetic of its
// kernels (every element covered exactly once, for awkward n), and of its SVG roofline.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>
#include "../../lessons/17_fusion_roofline/roofline_svg.h"
#include "catch_shim.hpp"
#include "verify/fusion.h"

static size_t count_of(const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
    return n;
}

TEST_CASE("fusion: the chain relu(x * x + 1) in double", "[fusion]") {
    const float x[] = {-2.0f, 0.0f, 0.5f, -0.75f, 3.0f};
    double out[5];
    verify::square_add_relu_reference(x, out, 5);
    CHECK(out[0] == 5.0);
    CHECK(out[1] == 1.0);
    CHECK(out[2] == 1.25);
    CHECK(out[3] == 1.5625);
    CHECK(out[4] == 10.0);
}

TEST_CASE("fusion: bytes of three kernels are 3x the fused kernel's", "[fusion]") {
    CHECK(verify::chain_bytes(1000, true) == 8000.0);    // x read, y written
    CHECK(verify::chain_bytes(1000, false) == 24000.0);  // + t1 and t2, each written and read
    CHECK(verify::chain_flops(1000) == 3000.0);
    CHECK(verify::sweep_bytes(7) == 56.0);
}

TEST_CASE("fusion: the sweep input is on the 65536-value grid, and its index comes back", "[fusion]") {
    for (uint32_t j = 0; j < verify::kSweepValues; ++j) {
        const float v = verify::sweep_value_of(j);
        REQUIRE(v >= -1.0f);
        REQUIRE(v < 1.0f);
        REQUIRE(verify::sweep_index_of(v) == j);
    }
    CHECK(verify::sweep_index_of(0.1f) == verify::kSweepValues);  // not a multiple of 2^-15
    CHECK(verify::sweep_index_of(1.0f) == verify::kSweepValues);
    CHECK(verify::sweep_index_of(-1.5f) == verify::kSweepValues);
    CHECK(verify::sweep_index_of(NAN) == verify::kSweepValues);
    std::vector<float> a(1000), b(1000);
    verify::fill_sweep_input(a.data(), a.size(), 7);
    verify::fill_sweep_input(b.data(), b.size(), 7);
    CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
    int distinct_neighbours = 0;
    for (size_t i = 1; i < a.size(); ++i) distinct_neighbours += a[i] != a[i - 1];
    CHECK(distinct_neighbours > 990);  // random, not constant
}

TEST_CASE("fusion: sweep flops count 2 per FMA, k = 1/every touches ceil(n / every) elements", "[fusion]") {
    CHECK(verify::sweep_flops(16, {1, 8}) == 4.0);  // elements 0 and 8
    CHECK(verify::sweep_flops(17, {1, 8}) == 6.0);  // 0, 8, 16
    CHECK(verify::sweep_flops(1, {1, 4}) == 2.0);
    CHECK(verify::sweep_flops(3, {512, 1}) == 3072.0);
    CHECK(verify::sweep_fmas_at(0, {1, 8}) == 1);
    CHECK(verify::sweep_fmas_at(7, {1, 8}) == 0);
    CHECK(verify::sweep_fmas_at(16, {1, 8}) == 1);
    CHECK(verify::sweep_fmas_at(5, {64, 1}) == 64);
    // intensity = 2k / 8 = k / 4
    CHECK(verify::sweep_flops(1 << 20, {512, 1}) / verify::sweep_bytes(1 << 20) == 128.0);
    CHECK(verify::sweep_flops(1 << 20, {1, 8}) / verify::sweep_bytes(1 << 20) == 1.0 / 32.0);
}

TEST_CASE("fusion: the FMA chain is rounded once per step, like the GPU's FFMA", "[fusion]") {
    const float a = 1.0f - 1.0f / 1024.0f, b = 1.0f / 1024.0f;
    float v = 0.3f;
    for (int i = 0; i < 100; ++i) v = std::fma(v, a, b);
    CHECK(verify::sweep_chain(0.3f, 100, a, b) == v);
    CHECK(verify::sweep_chain(0.3f, 0, a, b) == 0.3f);
    // Moves towards 1 and stays finite over 512 steps from anywhere in [-1, 1).
    for (float x : {-1.0f, -0.5f, 0.0f, 0.999f}) {
        const float y = verify::sweep_chain(x, 512, a, b);
        CHECK(std::isfinite(y));
        CHECK(std::fabs(y - 1.0f) < std::fabs(x - 1.0f));
    }
}

// What the GPU must write, element by element.
static std::vector<float> simulated_gpu(const std::vector<float>& x, verify::SweepPoint p, float a, float b) {
    std::vector<float> y(x.size());
    for (size_t e = 0; e < x.size(); ++e) y[e] = verify::sweep_chain(x[e], verify::sweep_fmas_at(e, p), a, b);
    return y;
}

TEST_CASE("fusion: check_sweep passes the right output and catches one wrong bit, NaN, a skipped FMA", "[fusion]") {
    const float a = 1.0f - 1.0f / 1024.0f, b = 1.0f / 1024.0f;
    for (verify::SweepPoint p :
         {verify::SweepPoint{1, 8}, verify::SweepPoint{1, 2}, verify::SweepPoint{1, 1}, verify::SweepPoint{64, 1}}) {
        std::vector<float> x(100003);
        verify::fill_sweep_input(x.data(), x.size(), 11);
        x[5] = 0.1f;  // off the grid: computed directly
        std::vector<float> y = simulated_gpu(x, p, a, b);
        lesson::Check ok = verify::check_sweep(y.data(), x.data(), x.size(), p, a, b, "ok");
        CHECK(ok.pass);
        CHECK(ok.checked == x.size());
        CHECK(ok.bad_count == 0);
        CHECK(ok.first_bad == -1);
        CHECK(ok.rel_l2 == 0.0);

        std::vector<float> bad = y;
        uint32_t bits;
        std::memcpy(&bits, &bad[70001], 4);
        bits ^= 1u;  // one ulp
        std::memcpy(&bad[70001], &bits, 4);
        lesson::Check c = verify::check_sweep(bad.data(), x.data(), x.size(), p, a, b, "one bit");
        CHECK_FALSE(c.pass);
        CHECK(c.bad_count == 1);
        CHECK(c.first_bad == 70001);

        bad = y;
        bad[99999] = NAN;
        CHECK_FALSE(verify::check_sweep(bad.data(), x.data(), x.size(), p, a, b, "nan").pass);
    }
    // k = 1/8 with the FMA on the wrong elements (1, 9, ... instead of 0, 8, ...) fails.
    std::vector<float> x(64);
    verify::fill_sweep_input(x.data(), x.size(), 3);
    std::vector<float> shifted(x);
    for (size_t e = 1; e < x.size(); e += 8) shifted[e] = std::fma(x[e], a, b);
    CHECK_FALSE(verify::check_sweep(shifted.data(), x.data(), x.size(), {1, 8}, a, b, "shifted").pass);
    // 63 FMAs where 64 were due fails.
    std::vector<float> short_chain(x.size());
    for (size_t e = 0; e < x.size(); ++e) short_chain[e] = verify::sweep_chain(x[e], 63, a, b);
    CHECK_FALSE(verify::check_sweep(short_chain.data(), x.data(), x.size(), {64, 1}, a, b, "63").pass);
}

// The index arithmetic of kernels/roofline_sweep.cuh and kernels/3_coarsened.cuh, replayed on the
// CPU for every thread of the launch: every element of [0, n) written exactly once.
TEST_CASE("fusion: the sweep kernel's grid covers every element once, tails included", "[fusion]") {
    const size_t T = 256, V = 2;
    for (size_t n : {size_t(1), size_t(3), size_t(4), size_t(5), size_t(2047), size_t(2048), size_t(2049),
                     size_t(100003), size_t(1) << 16}) {
        std::vector<int> writes(n, 0);
        const size_t n4 = n / 4;
        const size_t blocks = std::max<size_t>(1, (n4 + V * T - 1) / (V * T));
        for (size_t bx = 0; bx < blocks; ++bx)
            for (size_t t = 0; t < T; ++t) {
                const size_t q0 = bx * (V * T) + t;
                for (size_t u = 0; u < V; ++u) {
                    const size_t q = q0 + u * T;
                    if (q < n4)
                        for (size_t l = 0; l < 4; ++l) ++writes[4 * q + l];
                }
                const size_t e = 4 * n4 + t;
                if (bx == 0 && e < n) ++writes[e];
            }
        size_t wrong = 0;
        for (int w : writes) wrong += w != 1;
        INFO("n = " << n);
        CHECK(wrong == 0);
    }
}

TEST_CASE("fusion: the coarsened kernel's grid covers every element once, for C = 1, 2, 4, 8", "[fusion]") {
    const size_t T = 256;
    for (size_t C : {size_t(1), size_t(2), size_t(4), size_t(8)})
        for (size_t n : {size_t(1), size_t(255), size_t(256), size_t(257), size_t(2049), size_t(100003)}) {
            std::vector<int> writes(n, 0);
            const size_t blocks = (n + C * T - 1) / (C * T);
            for (size_t bx = 0; bx < blocks; ++bx)
                for (size_t t = 0; t < T; ++t) {
                    const size_t base = bx * (C * T) + t;
                    for (size_t j = 0; j < C; ++j)
                        if (base + j * T < n) ++writes[base + j * T];
                }
            size_t wrong = 0;
            for (int w : writes) wrong += w != 1;
            INFO("C = " << C << ", n = " << n);
            CHECK(wrong == 0);
        }
}

TEST_CASE("fusion: the roofline SVG has one circle per drawable point and clipped roofs", "[fusion]") {
    RooflinePlot plot("roofline <of> & test");
    plot.add_slope(3000, "#e15759", false, "memory roof");
    plot.add_roof(60000, "#e15759", false, "FP32 roof");
    plot.add_slope(3100, "#999", true, "DRAM bound");
    plot.add_roof(66900, "#999", true, "FP32 peak");
    plot.add_roof(NAN, "#999", true, "not measured");  // ignored
    for (int e = -5; e <= 7; ++e) {
        const double intensity = std::pow(2.0, e);
        plot.add_point(intensity, std::min(60000.0, intensity * 3000.0), "#4e79a7", "sweep");
    }
    plot.add_point(0, 10, "red", "no intensity");  // not drawable on log axes
    plot.add_point(1, -1, "red", "negative");
    plot.add_legend("#4e79a7", "sweep");
    CHECK(plot.points() == 13);
    CHECK(plot.lines() == 4);
    const std::string svg = plot.svg();
    CHECK(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0) == 0);
    CHECK(svg.substr(svg.size() - 7) == "</svg>\n");
    CHECK(count_of(svg, "class=\"point\"") == 13);
    CHECK(count_of(svg, "class=\"roof\"") == 4);
    CHECK(count_of(svg, "stroke-dasharray") == 2 + 2);  // two dashed roofs and their legend samples
    CHECK(svg.find("roofline &lt;of&gt; &amp; test") != std::string::npos);
    CHECK(svg.find("nan") == std::string::npos);
    CHECK(svg.find("inf") == std::string::npos);
}
