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

// Rows of very different sizes (1e-3 to 1, as early and late rows of a causal attention), and each
// element's allowance under the one-sided criterion compare_two_approximations assumes of either side:
// tol * (|t| + rms of t's row).
namespace {
struct Rows {
    uint64_t row = 32, rows = 64;
    std::vector<double> t, allow;
    explicit Rows(double tol) {
        t.resize(row * rows);
        allow.resize(t.size());
        std::vector<float> u(t.size());
        verify::fill_uniform(u.data(), u.size(), 11);
        for (uint64_t r = 0; r < rows; ++r) {
            const double size = std::pow(10.0, -3.0 + 3.0 * double(r % 8) / 7.0);
            double s2 = 0;
            for (uint64_t c = 0; c < row; ++c) {
                t[r * row + c] = size * u[r * row + c];
                s2 += t[r * row + c] * t[r * row + c];
            }
            for (uint64_t c = 0; c < row; ++c)
                allow[r * row + c] = tol * (std::fabs(t[r * row + c]) + std::sqrt(s2 / double(row)));
        }
    }
    double norm(const std::vector<double>& x) const {
        double s = 0;
        for (double v : x) s += v * v;
        return std::sqrt(s);
    }
};
}  // namespace

TEST_CASE("compare_two_approximations: two sides each within its own allowance of the truth pass", "[compare]") {
    for (double tol : {2e-2, 1e-1}) {
        Rows p(tol);
        // The worst case: on the smaller rows a is pushed away from 0 and b towards (and past) it, each
        // by its whole allowance; the larger rows (row % 8 >= 6) carry no error, so that both sides also
        // meet the rel-L2 criterion ||x - t|| <= tol ||t||.
        std::vector<double> a(p.t.size()), b(p.t.size()), ea(p.t.size()), eb(p.t.size());
        for (size_t i = 0; i < p.t.size(); ++i) {
            const double e = (i / p.row) % 8 >= 6 ? 0.0 : p.allow[i] * (p.t[i] < 0 ? -1.0 : 1.0);
            a[i] = p.t[i] + e;
            b[i] = p.t[i] - e;
            ea[i] = a[i] - p.t[i];
            eb[i] = b[i] - p.t[i];
        }
        for (size_t i = 0; i < p.t.size(); ++i) {  // the premise holds
            REQUIRE(std::fabs(ea[i]) <= p.allow[i] * (1 + 1e-12));
            REQUIRE(std::fabs(eb[i]) <= p.allow[i] * (1 + 1e-12));
        }
        REQUIRE(p.norm(ea) <= tol * p.norm(p.t));
        REQUIRE(p.norm(eb) <= tol * p.norm(p.t));
        const lesson::Check c = verify::compare_two_approximations(a.data(), b.data(), a.size(), p.row, tol, "edge");
        CHECK(c.pass);
        CHECK(c.bad_count == 0);
        CHECK(c.tol == Approx(2 * tol / (1 - tol)));
        // The factors 1 / (1 - tol) and 1 / (1 - 2 tol) carry weight: without them, and with each
        // side's own rms, this pair would fail.
        uint64_t naive_bad = 0;
        for (uint64_t r = 0; r < p.rows; ++r) {
            double sa = 0, sb = 0;
            for (uint64_t k = r * p.row; k < (r + 1) * p.row; ++k) {
                sa += a[k] * a[k];
                sb += b[k] * b[k];
            }
            const double s = std::sqrt(std::min(sa, sb) / double(p.row));
            for (uint64_t k = r * p.row; k < (r + 1) * p.row; ++k)
                naive_bad += !(std::fabs(a[k] - b[k]) <= tol * (std::fabs(a[k]) + std::fabs(b[k]) + 2 * s));
        }
        CHECK(naive_bad > 0);
        // compare() holds a - b to one side's allowance against the rms of all of b: the same pair fails.
        CHECK_FALSE(verify::compare(a.data(), b.data(), a.size(), tol, "one-sided").pass);
    }
}

TEST_CASE("compare_two_approximations: a planted error fails, in a small row too", "[compare]") {
    const double tol = 2e-2;
    Rows p(tol);
    std::vector<float> a(p.t.size()), b(p.t.size());
    std::vector<float> u(p.t.size());
    verify::fill_uniform(u.data(), u.size(), 12);
    for (size_t i = 0; i < p.t.size(); ++i) {  // both a few bf16 roundings off the truth
        a[i] = float(p.t[i] * (1 + 4e-3 * u[i]));
        b[i] = float(p.t[i] * (1 - 4e-3 * u[i]));
    }
    REQUIRE(verify::compare_two_approximations(a.data(), b.data(), a.size(), p.row, tol, "clean").pass);

    const uint64_t k = 0 * p.row + 5;  // row 0 is the smallest (1e-3): a quarter of its size is a bug
    std::vector<float> wrong = a;
    wrong[k] += 2.5e-4f;
    lesson::Check c = verify::compare_two_approximations(wrong.data(), b.data(), a.size(), p.row, tol, "one off");
    CHECK_FALSE(c.pass);
    CHECK(c.first_bad == int64_t(k));
    CHECK(c.bad_count == 1);
    CHECK(c.rel_l2 <= c.tol);  // within the rel-L2 tolerance: the element test caught it

    wrong = a;  // a wrong side cannot widen its own tolerance: a row 1000 times too large
    for (uint64_t i = 3 * p.row; i < 4 * p.row; ++i) wrong[i] *= 1000.0f;
    c = verify::compare_two_approximations(wrong.data(), b.data(), a.size(), p.row, tol, "row too large");
    CHECK_FALSE(c.pass);
    CHECK(c.first_bad == int64_t(3 * p.row));
    CHECK(c.bad_count == p.row);

    wrong = a;  // nor a row that is zero (or was never written)
    for (uint64_t i = 9 * p.row; i < 10 * p.row; ++i) wrong[i] = 0.0f;
    CHECK(verify::compare_two_approximations(wrong.data(), b.data(), a.size(), p.row, tol, "zero row").bad_count ==
          p.row);
    CHECK(verify::compare_two_approximations(b.data(), wrong.data(), a.size(), p.row, tol, "zero row").bad_count ==
          p.row);

    const uint64_t i = verify::inject_fault(wrong.data(), wrong.size(), 7);
    wrong = a;
    verify::inject_fault(wrong.data(), wrong.size(), 7);
    c = verify::compare_two_approximations(wrong.data(), b.data(), a.size(), p.row, tol, "inject");
    CHECK_FALSE(c.pass);
    CHECK(c.first_bad == int64_t(i));

    // A partial last row (n not a multiple of row) is a row of its own.
    const uint64_t n = a.size() - 7;
    REQUIRE(verify::compare_two_approximations(a.data(), b.data(), n, p.row, tol, "partial").pass);
    wrong = a;
    wrong[n - 1] = -wrong[n - 1] + 0.5f;
    c = verify::compare_two_approximations(wrong.data(), b.data(), n, p.row, tol, "partial");
    CHECK_FALSE(c.pass);
    CHECK(c.first_bad == int64_t(n - 1));
}

TEST_CASE("compare_two_approximations: NaN, Inf and nothing compared never pass, and the rel-L2 test bites",
          "[compare]") {
    std::vector<float> a(256), b(256);
    verify::fill_uniform(b.data(), b.size(), 13);
    for (size_t i = 0; i < a.size(); ++i) a[i] = b[i] * (1 + 1e-3f);
    REQUIRE(verify::compare_two_approximations(a.data(), b.data(), 256, 64, 2e-2, "clean").pass);
    for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
        std::vector<float> x = a, y = b;
        x[100] = bad;
        lesson::Check c = verify::compare_two_approximations(x.data(), b.data(), 256, 64, 2e-2, "bad a");
        CHECK_FALSE(c.pass);
        CHECK(c.first_bad == 100);  // that element alone: its row's other elements keep their scale
        CHECK(c.bad_count == 1);
        y[200] = bad;
        c = verify::compare_two_approximations(a.data(), y.data(), 256, 64, 2e-2, "bad b");
        CHECK_FALSE(c.pass);
        CHECK(c.first_bad == 200);
        CHECK(c.bad_count == 1);
        std::vector<float> both(256, bad);
        CHECK_FALSE(verify::compare_two_approximations(both.data(), both.data(), 256, 64, 2e-2, "both").pass);
    }
    CHECK_FALSE(verify::compare_two_approximations(a.data(), b.data(), 0, 64, 2e-2, "empty").pass);
    // Every element 2.2 tol off: inside each element's allowance (|a| + |b| is about 2 |b|), beyond the
    // rel-L2 tolerance 2 tol / (1 - tol) = 2.04 tol.
    for (size_t i = 0; i < a.size(); ++i) a[i] = b[i] * (1 + 2.2f * 2e-2f);
    const lesson::Check c = verify::compare_two_approximations(a.data(), b.data(), 256, 64, 2e-2, "uniform");
    CHECK(c.bad_count == 0);
    CHECK_FALSE(c.pass);
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

TEST_CASE("compare: a Comparer that did not see every expected element fails", "[compare]") {
    std::vector<float> gpu(1000, 1.0f);
    std::vector<double> ref(1000, 1.0);
    verify::Comparer cmp(1e-5, 1.0);
    cmp.add(gpu.data(), ref.data(), 900, 0);  // the last 100 never compared
    CHECK(cmp.result("part").pass);
    const lesson::Check short_one = cmp.result("all", 1000);
    CHECK_FALSE(short_one.pass);
    CHECK(short_one.what.find("compared 900 of 1000") != std::string::npos);
    cmp.add(gpu.data() + 900, ref.data() + 900, 100, 900);
    CHECK(cmp.result("all", 1000).pass);
}
