// CPU tests of verify/transpose.h: the transpose reference (lesson 12).
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
