// CPU tests of verify/chunked.h and common/launch.h's chunk plan: the data set of lessons 04 and 05.
#include <cmath>
#include <cstdint>
#include <vector>
#include "catch_shim.hpp"
#include "common/launch.h"
#include "verify/chunked.h"
#include "verify/compare.h"
#include "verify/elementwise.h"
#include "verify/random.h"

TEST_CASE("chunked: the reference equals A + B generated at the same global offset", "[chunked]") {
    const uint64_t first = (uint64_t(1) << 31) + 12345;  // past 2^31, where an int offset wraps
    const uint64_t count = 5000, seed = 77;
    std::vector<float> a(count), b(count);
    verify::fill_uniform(a.data(), count, seed, -1.0f, 1.0f, first);
    verify::fill_uniform(b.data(), count, seed + 1, -1.0f, 1.0f, first);
    std::vector<double> from_buffers(count), from_index(count);
    verify::add_reference(a.data(), b.data(), from_buffers.data(), count);
    verify::chunk_add_reference(from_index.data(), count, seed, first);
    for (uint64_t i = 0; i < count; ++i) REQUIRE(from_index[i] == from_buffers[i]);
}

TEST_CASE("chunked: chunk by chunk equals one shot, remainder chunk included", "[chunked]") {
    const uint64_t per_matrix = 16 * 16, matrices = 105, seed = 5;
    std::vector<double> whole(matrices * per_matrix);
    verify::chunk_add_reference(whole.data(), whole.size(), seed, 0);
    auto plan = lesson::plan_chunks(matrices, 10);  // 10 chunks of 10, one of 5
    REQUIRE(plan.count == 11);
    verify::Comparer cmp(1e-5, verify::uniform_sum_rms());
    for (uint64_t k = 0; k < plan.count; ++k) {
        const auto c = plan.at(k);
        const uint64_t first = c.first * per_matrix, count = c.count * per_matrix;
        std::vector<float> a(count), b(count), out(count);
        verify::fill_uniform(a.data(), count, seed, -1.0f, 1.0f, first);
        verify::fill_uniform(b.data(), count, seed + 1, -1.0f, 1.0f, first);
        for (uint64_t i = 0; i < count; ++i) out[i] = a[i] + b[i];  // what the GPU computes
        cmp.add(out.data(), whole.data() + first, count, first);
    }
    auto r = cmp.result("all chunks");
    CHECK(r.pass);
    CHECK(r.checked == whole.size());
}

TEST_CASE("chunked: a chunk produced at a wrapped 32-bit offset fails the check", "[chunked]") {
    // The original text's int offset at chunk 33 of 1000 matrices of 256 x 256.
    const uint64_t first = uint64_t(33) * 1000 * 65536, count = 4096, seed = 9;
    const int32_t as_int = static_cast<int32_t>(static_cast<uint32_t>(first));  // what an int offset holds
    REQUIRE(as_int < 0);
    const uint64_t wrapped = static_cast<uint64_t>(static_cast<int64_t>(as_int));  // used as an index
    std::vector<float> a(count), b(count), out(count);
    verify::fill_uniform(a.data(), count, seed, -1.0f, 1.0f, wrapped);
    verify::fill_uniform(b.data(), count, seed + 1, -1.0f, 1.0f, wrapped);
    for (uint64_t i = 0; i < count; ++i) out[i] = a[i] + b[i];
    std::vector<double> ref(count);
    verify::chunk_add_reference(ref.data(), count, seed, first);
    verify::Comparer cmp(1e-5, verify::uniform_sum_rms());
    cmp.add(out.data(), ref.data(), count, first);
    auto r = cmp.result("wrapped offset");
    CHECK_FALSE(r.pass);
    CHECK(r.first_bad == static_cast<int64_t>(first));
}

TEST_CASE("chunked: uniform_sum_rms matches the data", "[chunked]") {
    std::vector<double> ref(1 << 18);
    verify::chunk_add_reference(ref.data(), ref.size(), 3, 0);
    CHECK(verify::rms(ref.data(), ref.size()) == Approx(verify::uniform_sum_rms()).epsilon(0.01));
}

TEST_CASE("chunked: add_computed (reference from the global index, no buffer) gives add()'s result", "[chunked]") {
    // Two chunks past 2^31, the second larger than one reduce block, one element wrong in it.
    const uint64_t seed = 11, first0 = (uint64_t(1) << 31) + 7, n0 = 1000, n1 = verify::kReduceBlock * 3 + 5;
    const uint64_t first1 = first0 + n0;
    std::vector<float> out(n0 + n1);
    for (uint64_t i = 0; i < out.size(); ++i) out[i] = float(verify::chunk_add_value(seed, first0 + i));
    out[n0 + 4321] += 0.5f;
    std::vector<double> ref(out.size());
    verify::chunk_add_reference(ref.data(), ref.size(), seed, first0);
    verify::Comparer buffered(1e-5, verify::uniform_sum_rms()), computed(1e-5, verify::uniform_sum_rms());
    buffered.add(out.data(), ref.data(), n0, first0);
    buffered.add(out.data() + n0, ref.data() + n0, n1, first1);
    auto at = [&](uint64_t g) { return verify::chunk_add_value(seed, g); };
    computed.add_computed(out.data(), n0, first0, at);
    computed.add_computed(out.data() + n0, n1, first1, at);
    const auto b = buffered.result("buffered"), c = computed.result("computed");
    CHECK_FALSE(c.pass);
    CHECK(c.first_bad == static_cast<int64_t>(first1 + 4321));
    CHECK(c.bad_count == 1);
    CHECK(c.checked == b.checked);
    CHECK(c.rel_l2 == b.rel_l2);
    CHECK(c.max_abs == b.max_abs);
}

TEST_CASE("chunked: the pooled reference equals chunk i read from staged chunk i % pool", "[chunked]") {
    const uint64_t per_matrix = 7 * 7, matrices = 37, chunk = 5, seed = 11;
    const auto plan = lesson::plan_chunks(matrices, chunk);  // 7 chunks of 5, one of 2
    const uint64_t count = matrices * per_matrix, chunk_elems = chunk * per_matrix;
    for (uint64_t pool : {uint64_t(1), uint64_t(3), plan.count}) {
        std::vector<double> pooled(count), by_chunk(count);
        verify::pooled_add_reference(pooled.data(), count, seed, chunk_elems, pool);
        for (uint64_t i = 0; i < plan.count; ++i)  // chunk i at its own offset, inputs of staged chunk i % pool
            verify::chunk_add_reference(by_chunk.data() + plan.at(i).first * per_matrix, plan.at(i).count * per_matrix,
                                        seed, plan.at(i % pool).first * per_matrix);
        for (uint64_t g = 0; g < count; ++g) REQUIRE(pooled[g] == by_chunk[g]);
    }
}
