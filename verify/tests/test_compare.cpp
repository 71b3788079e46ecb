// CPU tests of verify/compare.h: the one comparison (tolerances, NaN, first bad index).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>
#include "catch_shim.hpp"
#include "verify/compare.h"
#include "verify/random.h"

TEST_CASE("compare: identical arrays pass with zero error", "[compare]") {
    std::vector<float> a(1000);
    verify::fill_uniform(a.data(), a.size(), 1);
    std::vector<double> ref(a.begin(), a.end());
    auto c = verify::compare(a.data(), ref.data(), a.size(), 1e-5, "same");
    CHECK(c.pass);
    CHECK(c.rel_l2 == 0.0);
    CHECK(c.max_abs == 0.0);
    CHECK(c.first_bad == -1);
    CHECK(c.checked == 1000);
}

TEST_CASE("compare: one element off fails and is located", "[compare]") {
    std::vector<float> a(100000);
    verify::fill_uniform(a.data(), a.size(), 2);
    std::vector<double> ref(a.begin(), a.end());
    a[4321] += 0.01f;  // far too small to move rel-L2 past 1e-5 on its own...
    auto c = verify::compare(a.data(), ref.data(), a.size(), 1e-5, "one off");
    CHECK(c.rel_l2 < 1e-4);
    CHECK_FALSE(c.pass);  // ...but the element check catches it
    CHECK(c.first_bad == 4321);
    CHECK(c.bad_count == 1);
    CHECK(c.max_abs == Approx(0.01).epsilon(1e-3));
}

TEST_CASE("compare: NaN and Inf never pass", "[compare]") {
    std::vector<float> a(64, 1.0f);
    std::vector<double> ref(64, 1.0);
    a[7] = std::numeric_limits<float>::quiet_NaN();
    auto c = verify::compare(a.data(), ref.data(), a.size(), 1e-5, "nan");
    CHECK_FALSE(c.pass);
    CHECK(c.first_bad == 7);
    a[7] = std::numeric_limits<float>::infinity();
    auto d = verify::compare(a.data(), ref.data(), a.size(), 1e-5, "inf");
    CHECK_FALSE(d.pass);
    CHECK(d.first_bad == 7);
    std::vector<float> all_nan(64, std::numeric_limits<float>::quiet_NaN());  // a poisoned, never-written output
    CHECK_FALSE(verify::compare(all_nan.data(), ref.data(), 64, 1e-5, "poison").pass);
}

TEST_CASE("compare: empty input is not a pass", "[compare]") {
    std::vector<float> a;
    std::vector<double> ref;
    auto c = verify::compare(a.data(), ref.data(), 0, 1e-5, "empty");
    CHECK(c.checked == 0);
    CHECK_FALSE(c.pass);
}

TEST_CASE("compare: rounding-level differences pass", "[compare]") {
    std::vector<float> a(4096);
    verify::fill_uniform(a.data(), a.size(), 3);
    std::vector<double> ref(a.size());
    for (size_t i = 0; i < a.size(); ++i) ref[i] = double(a[i]) * (1.0 + 3e-7);
    CHECK(verify::compare(a.data(), ref.data(), a.size(), 1e-5, "rounding").pass);
}

TEST_CASE("compare: chunked accumulation equals one-shot", "[compare]") {
    std::vector<float> a(3000);
    verify::fill_uniform(a.data(), a.size(), 4);
    std::vector<double> ref(a.begin(), a.end());
    a[2500] = 100.0f;
    verify::Comparer acc(1e-5, 1.0);
    for (size_t off = 0; off < a.size(); off += 1000) acc.add(a.data() + off, ref.data() + off, 1000, off);
    auto c = acc.result("chunks");
    CHECK(c.checked == 3000);
    CHECK(c.first_bad == 2500);
    CHECK_FALSE(c.pass);
}

TEST_CASE("compare: one-block Comparers added in order equal adding their pieces", "[compare]") {
    std::vector<float> a(30000);
    verify::fill_uniform(a.data(), a.size(), 6);
    std::vector<double> ref(a.size());
    for (size_t i = 0; i < a.size(); ++i) ref[i] = double(a[i]) * (1.0 + 1e-7 * double(i % 7));
    a[12345] = 9.0f;
    a[22222] = std::numeric_limits<float>::quiet_NaN();
    const uint64_t piece = 7500;  // one block each (<= kReduceBlock)
    verify::Comparer direct(1e-5, 0.5), merged(1e-5, 0.5);
    std::vector<verify::Comparer> parts(a.size() / piece, verify::Comparer(1e-5, 0.5));
    for (uint64_t k = 0; k < parts.size(); ++k) {
        direct.add(a.data() + k * piece, ref.data() + k * piece, piece, k * piece);
        parts[k].add(a.data() + k * piece, ref.data() + k * piece, piece, k * piece);
    }
    for (const verify::Comparer& p : parts) merged.add(p);
    const lesson::Check d = direct.result("direct"), m = merged.result("merged");
    CHECK(m.checked == d.checked);
    CHECK(m.first_bad == 12345);
    CHECK(m.first_bad == d.first_bad);
    CHECK(m.bad_count == d.bad_count);
    CHECK(std::isnan(m.max_abs));
    CHECK(std::memcmp(&m.rel_l2, &d.rel_l2, sizeof(double)) == 0);
    CHECK_FALSE(m.pass);

    a[22222] = 0.5f;  // finite now: the sums must match bit for bit
    verify::Comparer direct2(1e-5, 0.5), merged2(1e-5, 0.5);
    for (uint64_t k = 0; k < parts.size(); ++k) {
        direct2.add(a.data() + k * piece, ref.data() + k * piece, piece, k * piece);
        verify::Comparer p(1e-5, 0.5);
        p.add(a.data() + k * piece, ref.data() + k * piece, piece, k * piece);
        merged2.add(p);
    }
    const lesson::Check d2 = direct2.result("direct"), m2 = merged2.result("merged");
    CHECK(std::memcmp(&m2.rel_l2, &d2.rel_l2, sizeof(double)) == 0);
    CHECK(std::memcmp(&m2.max_abs, &d2.max_abs, sizeof(double)) == 0);
    CHECK(m2.bad_count == d2.bad_count);
}

TEST_CASE("compare: inject_fault makes a passing output fail", "[compare]") {
    std::vector<float> a(1 << 16);
    verify::fill_uniform(a.data(), a.size(), 5);
    std::vector<double> ref(a.begin(), a.end());
    REQUIRE(verify::compare(a.data(), ref.data(), a.size(), 1e-5, "before").pass);
    uint64_t i = verify::inject_fault(a.data(), a.size(), 5);
    auto c = verify::compare(a.data(), ref.data(), a.size(), 1e-5, "after");
    CHECK_FALSE(c.pass);
    CHECK(c.first_bad == static_cast<int64_t>(i));
}

TEST_CASE("random: deterministic, seeded, in range, chunk-consistent", "[random]") {
    std::vector<float> x(1000), y(1000), z(500);
    verify::fill_uniform(x.data(), x.size(), 42);
    verify::fill_uniform(y.data(), y.size(), 42);
    verify::fill_uniform(z.data(), z.size(), 42, -1.0f, 1.0f, 500);
    CHECK(x == y);
    for (size_t i = 0; i < 500; ++i) CHECK(z[i] == x[500 + i]);
    std::vector<float> w(1000);
    verify::fill_uniform(w.data(), w.size(), 43);
    CHECK(w != x);
    double mean = 0;
    for (float v : x) {
        CHECK(v >= -1.0f);
        CHECK(v < 1.0f);
        mean += v;
    }
    CHECK(std::fabs(mean / 1000) < 0.1);
    // not a constant input: many distinct values
    std::sort(x.begin(), x.end());
    CHECK(std::unique(x.begin(), x.end()) - x.begin() > 990);
}
