// CPU tests of common/launch.h: ceil-divided grids, hardware limits, chunk plans.
#include <cstdint>
#include "catch_shim.hpp"
#include "common/launch.h"

using lesson::ceil_div;

TEST_CASE("launch: ceil_div covers every item", "[launch]") {
    CHECK(ceil_div(1, 256) == 1);
    CHECK(ceil_div(256, 256) == 1);
    CHECK(ceil_div(257, 256) == 2);
    CHECK(ceil_div(1000, 16) == 63);
    CHECK(ceil_div(0, 16) == 0);
    const uint64_t big = (uint64_t(1) << 31) + 5;  // past 2^31 elements
    CHECK(ceil_div(big, 256) == (uint64_t(1) << 23) + 1);
}

TEST_CASE("launch: 2D/3D grids for shapes not divisible by the block", "[launch]") {
    auto g = lesson::grid_for(1000, 1000, 1, 16, 16);
    CHECK(g.ok);
    CHECK(g.x == 63);
    CHECK(g.y == 63);
    CHECK(g.z == 1);
    auto one = lesson::grid_for(1, 1, 1, 16, 16);
    CHECK(one.ok);
    CHECK((one.x == 1 && one.y == 1 && one.z == 1));
    auto batch = lesson::grid_for(256, 256, 1000, 16, 16);
    CHECK(batch.ok);
    CHECK(batch.z == 1000);
}

TEST_CASE("launch: grid limits are reported, not wrapped", "[launch]") {
    CHECK(lesson::grid_for(256, 256, 65535, 16, 16).ok);
    CHECK_FALSE(lesson::grid_for(256, 256, 65536, 16, 16).ok);        // gridDim.z <= 65535
    CHECK_FALSE(lesson::grid_for(16, 65536 * 16 + 1, 1, 16, 16).ok);  // gridDim.y <= 65535
    CHECK(lesson::grid_for(uint64_t(1) << 36, 1, 1, 256).ok);         // 2^28 blocks in x is fine
    CHECK_FALSE(lesson::grid_for(uint64_t(1) << 40, 1, 1, 256).ok);   // 2^32 blocks is not
}

TEST_CASE("launch: chunk plans with a remainder chunk", "[chunks]") {
    auto p = lesson::plan_chunks(10500, 1000);
    REQUIRE(p.count == 11);
    CHECK(p.at(0).first == 0);
    CHECK(p.at(0).count == 1000);
    CHECK(p.at(9).count == 1000);
    CHECK(p.at(10).first == 10000);
    CHECK(p.at(10).count == 500);
    uint64_t sum = 0;
    for (uint64_t i = 0; i < p.count; ++i) sum += p.at(i).count;
    CHECK(sum == 10500);

    auto exact = lesson::plan_chunks(3000, 1000);
    CHECK(exact.count == 3);
    CHECK(exact.at(2).count == 1000);
    auto single = lesson::plan_chunks(1, 1);
    CHECK(single.count == 1);
    CHECK(single.at(0).count == 1);
    CHECK(lesson::plan_chunks(5, 0).count == 0);
}

TEST_CASE("launch: chunk offsets past 2^31 elements do not overflow", "[chunks]") {
    // The original text's int offset: chunk * 1000 matrices * 65536 elements
    // passes 2^31 at chunk 33. In 64 bits it is exact.
    const uint64_t per_matrix = 256 * 256;
    auto p = lesson::plan_chunks(100000, 1000);
    REQUIRE(p.count == 100);
    uint64_t offset33 = p.at(33).first * per_matrix;
    CHECK(offset33 == uint64_t(33) * 1000 * 65536);
    CHECK(offset33 > (uint64_t(1) << 31));
    int32_t as_int = static_cast<int32_t>(static_cast<uint32_t>(offset33));  // what an int would hold
    CHECK(static_cast<int64_t>(as_int) != static_cast<int64_t>(offset33));
    CHECK(p.at(99).first * per_matrix + p.at(99).count * per_matrix == uint64_t(100000) * per_matrix);
}
