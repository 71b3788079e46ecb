// CPU tests of verify/graphs.h: the reference of lesson 18 (CUDA graphs). The
// reference applies a step's K kernels element by element; the GPU applies them
// as K sweeps over the array. The tests check that both orders give the same
// bits (against a sweep-by-sweep model written here), the stencil's periodic
// edges, the coefficients, the readout and the exact check.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>
#include "catch_shim.hpp"
#include "verify/graphs.h"
#include "verify/random.h"

namespace {
// The GPU's order: per step, a copy, one sweep of the stencil, then one sweep per affine kernel.
std::vector<float> sweep_model(std::vector<float> x, int64_t steps, int K, std::vector<double>* sum = nullptr) {
    const size_t n = x.size();
    std::vector<float> prev(n);
    for (int64_t s = 0; s < steps; ++s) {
        prev = x;
        for (size_t i = 0; i < n; ++i)
            x[i] = verify::stencil_point(prev[i == 0 ? n - 1 : i - 1], prev[i], prev[i + 1 == n ? 0 : i + 1]);
        for (int j = 1; j < K; ++j)
            for (size_t i = 0; i < n; ++i) x[i] = verify::affine_point(x[i], verify::step_affine(j));
        if (sum)
            for (size_t i = 0; i < n; ++i) (*sum)[i] += double(x[i]);
    }
    return x;
}
std::vector<float> random_state(size_t n, uint64_t seed) {
    std::vector<float> v(n);
    verify::fill_uniform(v.data(), n, seed, 0.0f, 1.0f);
    return v;
}
bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}
}  // namespace

TEST_CASE("graphs: coefficients are exact floats, a slow contraction", "[graphs]") {
    for (int j = 1; j < 100; ++j) {
        const verify::Affine c = verify::step_affine(j);
        CHECK(c.a < 1.0f);
        CHECK(c.a >= 1.0f - 4 * 0x1p-16f);
        CHECK(c.b >= 0.0f);
        CHECK(c.b <= 2 * 0x1p-16f);
        // exact: the values are the decimal formulas, computed in double
        CHECK(double(c.a) == 1.0 - double(1 + j % 4) / 65536.0);
        CHECK(double(c.b) == double(j % 3) / 65536.0);
    }
    CHECK(verify::kStencilW0 + verify::kStencilW1 + verify::kStencilW2 == 1.0f);
}

TEST_CASE("graphs: stencil point, known answers", "[graphs]") {
    CHECK(verify::stencil_point(1.0f, 2.0f, 3.0f) == 2.0f);  // 0.25 + 1 + 0.75
    CHECK(verify::stencil_point(4.0f, 0.0f, 0.0f) == 1.0f);
    CHECK(verify::stencil_point(0.0f, 0.0f, 4.0f) == 1.0f);
    CHECK(verify::stencil_point(0.5f, 0.5f, 0.5f) == 0.5f);  // a constant stays constant
    CHECK(verify::affine_point(2.0f, {0.5f, 1.0f}) == 2.0f);
}

TEST_CASE("graphs: one stencil step wraps around both ends", "[graphs]") {
    std::vector<float> x(8, 0.0f);
    x[0] = 1.0f;  // a spike at the first element spreads to the last one and the second
    verify::steps_reference(x.data(), x.size(), 1, 1);
    CHECK(x[0] == 0.5f);
    CHECK(x[1] == 0.25f);
    CHECK(x[7] == 0.25f);
    for (int i = 2; i < 7; ++i) CHECK(x[size_t(i)] == 0.0f);
    std::vector<float> y(8, 0.0f);
    y[7] = 1.0f;
    verify::steps_reference(y.data(), y.size(), 1, 1);
    CHECK(y[7] == 0.5f);
    CHECK(y[0] == 0.25f);
    CHECK(y[6] == 0.25f);
}

TEST_CASE("graphs: n = 2, the neighbours on both sides are the same element", "[graphs]") {
    std::vector<float> x = {1.0f, 0.0f};
    verify::steps_reference(x.data(), 2, 1, 1);
    CHECK(x[0] == 0.5f);
    CHECK(x[1] == 0.5f);
}

TEST_CASE("graphs: element by element = kernel by kernel, bit for bit", "[graphs]") {
    for (int K : {1, 2, 5, 20}) {
        const std::vector<float> init = random_state(1000, 3 + uint64_t(K));
        std::vector<float> x = init;
        verify::steps_reference(x.data(), x.size(), 37, K);
        CHECK(same_bits(x, sweep_model(init, 37, K)));
    }
}

TEST_CASE("graphs: many host threads (n past one block) give the same bits", "[graphs]") {
    const size_t n = (size_t(1) << 15) + 77;  // more than one block of the parallel reference
    const std::vector<float> init = random_state(n, 9);
    std::vector<float> x = init;
    std::vector<double> sum(n, 0.0);
    verify::steps_reference(x.data(), n, 5, 4, sum.data());
    std::vector<double> model_sum(n, 0.0);
    CHECK(same_bits(x, sweep_model(init, 5, 4, &model_sum)));
    CHECK(std::memcmp(sum.data(), model_sum.data(), n * sizeof(double)) == 0);
}

TEST_CASE("graphs: the state stays bounded and keeps its detail after 1000 steps", "[graphs]") {
    const std::vector<float> init = random_state(4096, 1);
    std::vector<float> x = init;
    verify::steps_reference(x.data(), x.size(), 1000, 20);
    float lo = 1e30f, hi = -1e30f;
    for (float v : x) {
        CHECK(std::isfinite(v));
        lo = std::min(lo, v);
        hi = std::max(hi, v);
    }
    CHECK(lo > 0.0f);
    CHECK(hi < 1.0f);
    CHECK(hi - lo > 1e-3f);  // not collapsed to the fixed point: a wrong index would show
    // One step more or one kernel less changes the bits.
    std::vector<float> more = init, fewer = init;
    verify::steps_reference(more.data(), more.size(), 1001, 20);
    verify::steps_reference(fewer.data(), fewer.size(), 1000, 19);
    CHECK_FALSE(same_bits(x, more));
    CHECK_FALSE(same_bits(x, fewer));
}

TEST_CASE("graphs: gemv reference, known answer", "[graphs]") {
    // M = [1 2 3; 4 5 6] column-major (m = 2, n = 3): {1, 4, 2, 5, 3, 6}
    const float M[] = {1, 4, 2, 5, 3, 6};
    const double v[] = {1, 0.5, -1};
    double y[2] = {NAN, NAN};
    verify::gemv_reference(M, 2, 3, v, y);
    CHECK(y[0] == 1.0 + 1.0 - 3.0);
    CHECK(y[1] == 4.0 + 2.5 - 6.0);
}

TEST_CASE("graphs: exact check passes only on the same bits", "[graphs]") {
    std::vector<float> ref = random_state(100, 4), gpu = ref;
    lesson::Check c = verify::check_same_bits(gpu.data(), ref.data(), 100, "same");
    CHECK(c.pass);
    CHECK(c.bad_count == 0);
    CHECK(c.first_bad == -1);
    CHECK(c.rel_l2 == 0.0);
    gpu[42] = std::nextafter(gpu[42], 2.0f);  // one ulp
    c = verify::check_same_bits(gpu.data(), ref.data(), 100, "one ulp");
    CHECK_FALSE(c.pass);
    CHECK(c.bad_count == 1);
    CHECK(c.first_bad == 42);
    CHECK(c.max_abs > 0.0);
    gpu = ref;
    gpu[7] = std::numeric_limits<float>::quiet_NaN();
    c = verify::check_same_bits(gpu.data(), ref.data(), 100, "NaN");
    CHECK_FALSE(c.pass);
    CHECK(c.first_bad == 7);
    const float zero = 0.0f, minus_zero = -0.0f;
    CHECK_FALSE(verify::check_same_bits(&minus_zero, &zero, 1, "signed zero").pass);
    CHECK_FALSE(verify::check_same_bits(gpu.data(), ref.data(), 0, "nothing").pass);  // nothing checked: no pass
}

TEST_CASE("graphs: both references at once = each alone, small and large", "[graphs]") {
    for (size_t n : {size_t(1000), (size_t(1) << 15) + 77}) {
        const std::vector<float> init_a = random_state(n, 11), init_b = random_state(n, 12);
        std::vector<float> a = init_a, b = init_b, alone_a = init_a, alone_b = init_b;
        std::vector<double> sum(n, 0.0), alone_sum(n, 0.0);
        const int threads = verify::steps_references(a.data(), b.data(), n, 7, 3, sum.data());
        verify::steps_reference(alone_a.data(), n, 7, 3, alone_sum.data());
        verify::steps_reference(alone_b.data(), n, 7, 3);
        CHECK(same_bits(a, alone_a));
        CHECK(same_bits(b, alone_b));
        CHECK(std::memcmp(sum.data(), alone_sum.data(), n * sizeof(double)) == 0);
        CHECK(threads == (n > (size_t(1) << 14) ? verify::host_threads() : 2));
    }
    std::vector<float> a = random_state(1000, 13), alone = a;  // no state b: one thread
    CHECK(verify::steps_references(a.data(), nullptr, a.size(), 3, 2) == 1);
    verify::steps_reference(alone.data(), alone.size(), 3, 2);
    CHECK(same_bits(a, alone));
}
