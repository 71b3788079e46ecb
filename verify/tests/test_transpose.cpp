// CPU tests of verify/transpose.h: the transpose reference and the exact check (lesson 12).
#include <cmath>
#include <cstdint>
#include <vector>
#include "catch_shim.hpp"
#include "verify/random.h"
#include "verify/transpose.h"

TEST_CASE("transpose reference: 2x3 known answer", "[transpose]") {
    const float in[] = {1, 2, 3, 4, 5, 6};
    float out[6] = {};
    verify::transpose_reference(in, out, 2, 3);
    const float want[] = {1, 4, 2, 5, 3, 6};
    for (int i = 0; i < 6; ++i) CHECK(out[i] == want[i]);
}

TEST_CASE("transpose reference: 1x1", "[transpose]") {
    const float in[] = {-7.25f};
    float out[] = {0.0f};
    verify::transpose_reference(in, out, 1, 1);
    CHECK(out[0] == -7.25f);
}

TEST_CASE("transpose reference: 1xN row becomes an Nx1 column, and back", "[transpose]") {
    const int64_t n = 1000;
    std::vector<float> row(n), col(n, -1.0f), back(n, -1.0f);
    verify::fill_uniform(row.data(), n, 7);
    verify::transpose_reference(row.data(), col.data(), 1, n);  // same memory order
    for (int64_t i = 0; i < n; ++i) CHECK(col[i] == row[i]);
    verify::transpose_reference(col.data(), back.data(), n, 1);
    for (int64_t i = 0; i < n; ++i) CHECK(back[i] == row[i]);
}

TEST_CASE("transpose reference: non-square, non-multiple of the block, every element", "[transpose]") {
    // 70 x 133 crosses the 32-element blocks of the reference with partial blocks on both edges.
    const int64_t rows = 70, cols = 133;
    std::vector<float> in(rows * cols), out(rows * cols, -1.0f), back(rows * cols, -1.0f);
    verify::fill_uniform(in.data(), in.size(), 11);
    verify::transpose_reference(in.data(), out.data(), rows, cols);
    int64_t bad = 0;
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c)
            if (!(out[c * rows + r] == in[r * cols + c])) ++bad;
    CHECK(bad == 0);
    // Transposing twice is the identity.
    verify::transpose_reference(out.data(), back.data(), cols, rows);
    CHECK(back == in);
}

TEST_CASE("transpose reference: integer types are moved exactly", "[transpose]") {
    const int64_t rows = 3, cols = 2;
    const uint64_t in[] = {1ull << 60, 2, 3, 4, 5, (1ull << 63) + 1};
    uint64_t out[6] = {};
    verify::transpose_reference(in, out, rows, cols);
    const uint64_t want[] = {1ull << 60, 3, 5, 2, 4, (1ull << 63) + 1};
    for (int i = 0; i < 6; ++i) CHECK(out[i] == want[i]);
}

TEST_CASE("check_moved: identical bytes pass with zero error, one moved value fails at its index", "[transpose]") {
    const uint64_t n = (uint64_t(1) << 19) + 5;  // more than one 1 MiB block, the last one partial
    std::vector<float> ref(n), got;
    verify::fill_uniform(ref.data(), n, 3);
    got = ref;
    const lesson::Check same = verify::check_moved(got.data(), ref.data(), n, "same");
    CHECK(same.pass);
    CHECK(same.checked == n);
    CHECK(same.rel_l2 == 0.0);
    CHECK(same.max_abs == 0.0);
    got[n - 3] = ref[n - 4];  // a value in the wrong place
    const lesson::Check moved = verify::check_moved(got.data(), ref.data(), n, "moved");
    CHECK(!moved.pass);
    CHECK(moved.first_bad == int64_t(n - 3));
    CHECK(moved.bad_count == 1);
    got[n - 3] = NAN;  // a NaN (an element never written) fails too
    CHECK(!verify::check_moved(got.data(), ref.data(), n, "nan").pass);
    CHECK(!verify::check_moved(got.data(), ref.data(), 0, "empty").pass);  // nothing checked is no pass
}
