// CPU tests of verify/scan.h: the references of lesson 15 (int and float
// scans, per-tile scans, compaction), its checks, the float error bound, and
// the CPU models of the Hillis-Steele and Blelloch rungs.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>
#include "catch_shim.hpp"
#include "verify/random.h"
#include "verify/scan.h"

namespace {
// The plain sequential loops the references must agree with.
std::vector<int32_t> sequential_inclusive(const std::vector<int32_t>& in, uint64_t segment = 0) {
    std::vector<int32_t> out(in.size());
    uint32_t s = 0;
    for (size_t i = 0; i < in.size(); ++i) {
        if (segment > 0 && i % segment == 0) s = 0;
        s += static_cast<uint32_t>(in[i]);
        out[i] = static_cast<int32_t>(s);
    }
    return out;
}
std::vector<int32_t> random_ints(uint64_t n, uint64_t seed) {
    std::vector<int32_t> v(n);
    verify::fill_scan_ints(v.data(), n, seed);
    return v;
}
}  // namespace

TEST_CASE("scan inputs: ints from -1000 to 1000, deterministic, both ends reached", "[scan]") {
    const std::vector<int32_t> a = random_ints(200000, 5), b = random_ints(200000, 5), c = random_ints(200000, 6);
    CHECK(a == b);
    CHECK(a != c);
    int32_t lo = 0, hi = 0;
    for (int32_t x : a) {
        lo = std::min(lo, x);
        hi = std::max(hi, x);
    }
    CHECK(lo == -1000);
    CHECK(hi == 1000);
}

TEST_CASE("int scan reference: known answer", "[scan]") {
    const std::vector<int32_t> in = {3, -1, 4, 1, -5, 9, 2, -6};
    std::vector<int32_t> out(in.size());
    verify::inclusive_scan_reference(in.data(), out.data(), in.size());
    CHECK(out == std::vector<int32_t>{3, 2, 6, 7, 2, 11, 13, 7});
    verify::inclusive_scan_reference(in.data(), out.data(), in.size(), 3);  // segments of 3
    CHECK(out == std::vector<int32_t>{3, 2, 6, 1, -4, 5, 2, -4});
}

TEST_CASE("int scan reference: n = 1 and sizes that cross the parallel blocks", "[scan]") {
    const int32_t one = -7;
    int32_t out1 = 0;
    verify::inclusive_scan_reference(&one, &out1, 1);
    CHECK(out1 == -7);
    // 2.5 blocks of the parallel reference: the carries between blocks must be right.
    const uint64_t n = 2 * verify::kScanBlock + verify::kScanBlock / 2 + 3;
    const std::vector<int32_t> in = random_ints(n, 11);
    std::vector<int32_t> out(n);
    verify::inclusive_scan_reference(in.data(), out.data(), n);
    CHECK(out == sequential_inclusive(in));
    // Segments that do not divide the block, and a segment larger than the array.
    for (uint64_t seg : {uint64_t(2048), uint64_t(1000), uint64_t(3), n + 5}) {
        verify::inclusive_scan_reference(in.data(), out.data(), n, seg);
        CHECK(out == sequential_inclusive(in, seg));
    }
}

TEST_CASE("int scan reference: overflow wraps around modulo 2^32", "[scan]") {
    const int32_t big = std::numeric_limits<int32_t>::max();
    const std::vector<int32_t> in = {big, 1, big, 2, std::numeric_limits<int32_t>::min()};
    std::vector<int32_t> out(in.size());
    verify::inclusive_scan_reference(in.data(), out.data(), in.size());
    CHECK(out[0] == big);
    CHECK(out[1] == std::numeric_limits<int32_t>::min());  // 2^31 - 1 + 1 wraps to -2^31
    CHECK(out[2] == -1);                                   // -2^31 + 2^31 - 1
    CHECK(out[3] == 1);
    CHECK(out[4] == std::numeric_limits<int32_t>::min() + 1);
    // The exact check accepts the wrapped values and rejects anything else.
    CHECK(verify::check_int_scan(out.data(), out.data(), out.size(), false, 0, "wrap").pass);
}

TEST_CASE("check_int_scan: inclusive, exclusive, per tile, one wrong element is found", "[scan]") {
    const uint64_t n = 10000, seg = 2048;
    const std::vector<int32_t> in = random_ints(n, 3);
    const std::vector<int32_t> incl = sequential_inclusive(in), tile_incl = sequential_inclusive(in, seg);
    std::vector<int32_t> excl(n), tile_excl(n);
    for (uint64_t i = 0; i < n; ++i) {
        excl[i] = i == 0 ? 0 : incl[i - 1];
        tile_excl[i] = i % seg == 0 ? 0 : tile_incl[i - 1];
    }
    CHECK(verify::check_int_scan(incl.data(), incl.data(), n, false, 0, "incl").pass);
    CHECK(verify::check_int_scan(excl.data(), incl.data(), n, true, 0, "excl").pass);
    CHECK(verify::check_int_scan(tile_incl.data(), tile_incl.data(), n, false, seg, "tile incl").pass);
    CHECK(verify::check_int_scan(tile_excl.data(), tile_incl.data(), n, true, seg, "tile excl").pass);
    // Inclusive passed as exclusive (off by one everywhere) fails from element 0.
    lesson::Check c = verify::check_int_scan(incl.data(), incl.data(), n, true, 0, "shifted");
    CHECK_FALSE(c.pass);
    CHECK(c.first_bad == 0);
    // One element off by one.
    excl[7777] += 1;
    c = verify::check_int_scan(excl.data(), incl.data(), n, true, 0, "one off");
    CHECK_FALSE(c.pass);
    CHECK(c.bad_count == 1);
    CHECK(c.first_bad == 7777);
    CHECK(c.max_abs == 1.0);
    // Poison (0xFF bytes = -1) left in a tile is found unless -1 is the right value there.
    tile_excl[4096 + 5] = tile_excl[4096 + 5] == -1 ? 0 : -1;
    c = verify::check_int_scan(tile_excl.data(), tile_incl.data(), n, true, seg, "poison");
    CHECK_FALSE(c.pass);
    CHECK(c.first_bad == 4096 + 5);
}

TEST_CASE("float scan reference: matches a long double loop, the bound", "[scan]") {
    const uint64_t n = verify::kScanBlock + 12345;
    std::vector<float> in(n);
    verify::fill_uniform(in.data(), n, 9);
    std::vector<double> ref(n);
    verify::inclusive_scan_reference(in.data(), ref.data(), n);
    long double s = 0, worst = 0, abs_sum = 0;
    for (uint64_t i = 0; i < n; ++i) {
        s += in[i];
        abs_sum += std::fabs(in[i]);
        worst = std::max(worst, std::fabs(s - static_cast<long double>(ref[i])) / abs_sum);
    }
    const double gamma_ref = verify::gamma(verify::reference_rounding_depth(n), verify::kDoubleUnitRoundoff);
    CHECK(static_cast<double>(worst) <= gamma_ref);
    // The tolerance: gamma_d of the GPU's depth in float, plus the reference's (tiny) own.
    CHECK(verify::scan_float_tolerance(64, 1000) > verify::gamma(64));
    CHECK(verify::scan_float_tolerance(64, 1000) == Approx(verify::gamma(64)).epsilon(1e-4));
    CHECK(std::isinf(verify::scan_float_tolerance(uint64_t(1) << 24, 1000)));
}

TEST_CASE("check_float_scan: a float scan in another order passes, errors, NaN and a shift fail", "[scan]") {
    const uint64_t n = 100000, tile = 4096;
    std::vector<float> in(n);
    verify::fill_uniform(in.data(), n, 21);
    std::vector<double> ref(n);
    verify::inclusive_scan_reference(in.data(), ref.data(), n);
    // A float scan in a tiled order (tile sums chained, like a single-pass scan).
    std::vector<float> incl(n), excl(n);
    float carry = 0.0f;
    for (uint64_t t0 = 0; t0 < n; t0 += tile) {
        float local = 0.0f;
        for (uint64_t i = t0; i < std::min(n, t0 + tile); ++i) {
            excl[i] = carry + local;
            local += in[i];
            incl[i] = carry + local;
        }
        carry += local;
    }
    const uint64_t depth = 2 * tile + 2 * (n / tile + 1);  // generous for this order
    const double tol = verify::scan_float_tolerance(depth, n);
    CHECK(verify::check_float_scan(incl.data(), in.data(), ref.data(), n, false, tol, "incl").pass);
    CHECK(verify::check_float_scan(excl.data(), in.data(), ref.data(), n, true, tol, "excl").pass);
    // Exclusive element 0 must be exactly 0.
    std::vector<float> bad = excl;
    bad[0] = 1e-30f;
    CHECK_FALSE(verify::check_float_scan(bad.data(), in.data(), ref.data(), n, true, tol, "x0").pass);
    // A missing element early on (where the bound is small) is found.
    bad = incl;
    for (uint64_t i = 10; i < n; ++i) bad[i] -= in[10];
    lesson::Check c = verify::check_float_scan(bad.data(), in.data(), ref.data(), n, false, tol, "missing");
    CHECK_FALSE(c.pass);
    CHECK(c.first_bad == 10);
    // NaN (the poison) never passes.
    bad = incl;
    bad[n - 1] = std::numeric_limits<float>::quiet_NaN();
    c = verify::check_float_scan(bad.data(), in.data(), ref.data(), n, false, tol, "nan");
    CHECK_FALSE(c.pass);
    CHECK(c.first_bad == int64_t(n - 1));
}

TEST_CASE("check_float_scan: the |in| sums computed once give the same check, bit for bit", "[scan]") {
    const uint64_t n = 2 * verify::kScanBlock + 12345;  // three blocks
    std::vector<float> in(n), got(n);
    verify::fill_uniform(in.data(), n, 22);
    std::vector<double> ref(n);
    verify::inclusive_scan_reference(in.data(), ref.data(), n);
    float s = 0.0f;
    for (uint64_t i = 0; i < n; ++i) got[i] = (s += in[i]);
    const double tol = verify::scan_float_tolerance(n, n);
    const std::vector<double> abs_before = verify::abs_sums_before_blocks(in.data(), n);
    REQUIRE(abs_before.size() == 3);
    for (bool exclusive : {false, true}) {
        std::vector<float> out = got;
        if (exclusive) {
            out.insert(out.begin(), 0.0f);
            out.pop_back();
        }
        const lesson::Check once =
            verify::check_float_scan(out.data(), in.data(), ref.data(), n, exclusive, tol, abs_before, "once");
        const lesson::Check each =
            verify::check_float_scan(out.data(), in.data(), ref.data(), n, exclusive, tol, "each");
        CHECK(once.pass);
        CHECK(each.pass);
        CHECK(std::memcmp(&once.rel_l2, &each.rel_l2, sizeof(double)) == 0);
        CHECK(std::memcmp(&once.max_abs, &each.max_abs, sizeof(double)) == 0);
    }
}

TEST_CASE("compaction reference and check", "[scan]") {
    const std::vector<int32_t> in = {5, -3, 0, 7, 1, -8, 2};
    std::vector<int32_t> out(in.size(), 99);
    const uint64_t count = verify::compact_reference(in.data(), in.size(), 0, out.data());
    REQUIRE(count == 4);
    CHECK(std::vector<int32_t>(out.begin(), out.begin() + 4) == std::vector<int32_t>{5, 7, 1, 2});
    CHECK(verify::compact_reference(in.data(), in.size(), 1000, out.data()) == 0);
    CHECK(verify::compact_reference(in.data(), in.size(), -1001, out.data()) == in.size());
    // Many blocks: order and count against the sequential loop.
    const uint64_t n = 3 * verify::kScanBlock + 17;
    const std::vector<int32_t> big = random_ints(n, 4);
    std::vector<int32_t> kept(n), want;
    for (int32_t x : big)
        if (x > 250) want.push_back(x);
    const uint64_t k = verify::compact_reference(big.data(), n, 250, kept.data());
    REQUIRE(k == want.size());
    CHECK(std::equal(want.begin(), want.end(), kept.begin()));
    CHECK(verify::check_compaction(kept.data(), k, want.data(), want.size(), "same").pass);
    // A wrong count, or one wrong element, fails.
    lesson::Check c = verify::check_compaction(kept.data(), k - 1, want.data(), want.size(), "short");
    CHECK_FALSE(c.pass);
    CHECK(c.first_bad == int64_t(k - 1));
    kept[1234] += 1;
    c = verify::check_compaction(kept.data(), k, want.data(), want.size(), "one off");
    CHECK_FALSE(c.pass);
    CHECK(c.first_bad == 1234);
    // Nothing kept, nothing returned: a pass (the count was checked).
    CHECK(verify::check_compaction(kept.data(), 0, want.data(), 0, "empty").pass);
}

TEST_CASE("absent_fill_byte: the farthest pattern absent from every array, -1 when all occur", "[scan]") {
    auto pattern = [](int b) { return static_cast<int32_t>(uint32_t(b) * 0x01010101u); };
    const std::vector<int32_t> ref = sequential_inclusive(random_ints(1 << 18, 3));
    CHECK(verify::absent_fill_byte({{ref.data(), ref.size()}}) == 0x7F);
    // Plant the first choices in the second array, past the first parallel block.
    std::vector<int32_t> tiles(verify::kScanBlock + 10, 5);
    tiles[verify::kScanBlock + 3] = pattern(0x7F);
    tiles[7] = pattern(0x80);
    CHECK(verify::absent_fill_byte({{ref.data(), ref.size()}, {tiles.data(), tiles.size()}}) == 0x7E);
    // Only n elements count: the 0x7F planted at kScanBlock + 3 lies past n = kScanBlock.
    CHECK(verify::absent_fill_byte({{tiles.data(), verify::kScanBlock}}) == 0x7F);
    // Every pattern but 0x00 (never chosen: 0 is always a right answer) and 0x01: 0x01 is the answer.
    std::vector<int32_t> all;
    for (int b = 0; b < 256; ++b)
        if (b != 0x01) all.push_back(pattern(b));
    CHECK(verify::absent_fill_byte({{all.data(), all.size()}}) == 0x01);
    all.push_back(pattern(0x01));
    CHECK(verify::absent_fill_byte({{all.data(), all.size()}}) == -1);
    CHECK(verify::absent_fill_byte({}) == 0x7F);
}

TEST_CASE("Hillis-Steele and Blelloch models: right answers, the work and the steps", "[scan]") {
    const uint64_t n = 2048;
    const std::vector<int32_t> in = random_ints(n, 8);
    const std::vector<int32_t> incl = sequential_inclusive(in);
    std::vector<uint32_t> hs(in.begin(), in.end()), bl(in.begin(), in.end());
    const verify::ScanWork w_hs = verify::hillis_steele_model(hs.data(), n);
    const verify::ScanWork w_bl = verify::blelloch_model(bl.data(), n);
    for (uint64_t i = 0; i < n; ++i) {
        CHECK(static_cast<int32_t>(hs[i]) == incl[i]);
        CHECK(static_cast<int32_t>(bl[i]) == (i == 0 ? 0 : incl[i - 1]));
    }
    CHECK(w_hs.steps == 11);
    CHECK(w_hs.adds == 11 * n - (n - 1));  // n log2 n - (n - 1) = 20481
    CHECK(w_bl.steps == 22);
    CHECK(w_bl.adds == 2 * (n - 1));  // 4094
}

TEST_CASE("bank-conflict model: the Blelloch tree with and without padding", "[scan]") {
    // A warp reading 32 consecutive words: 1 pass; all in one bank: 32; one word for all: a broadcast.
    std::vector<uint64_t> w(32);
    for (int i = 0; i < 32; ++i) w[i] = i;
    CHECK(verify::warp_passes(w) == 1);
    for (int i = 0; i < 32; ++i) w[i] = 32 * i;
    CHECK(verify::warp_passes(w) == 32);
    for (int i = 0; i < 32; ++i) w[i] = 7;
    CHECK(verify::warp_passes(w) == 1);
    // Unpadded: stride 2s words, so 2s lanes share a bank until the active lanes run out.
    CHECK(verify::blelloch_level_passes(2048, false) == std::vector<int>{2, 4, 8, 16, 32, 32, 16, 8, 4, 2, 1});
    // Padded: at most 2 passes at any level of a 2048 tile.
    const std::vector<int> padded = verify::blelloch_level_passes(2048, true);
    REQUIRE(padded.size() == 11);
    for (int p : padded) CHECK(p <= 2);
    CHECK(verify::blelloch_load_conflicts_per_tile(2048, true) * 10 <
          verify::blelloch_load_conflicts_per_tile(2048, false));
    // The padded index stays inside the padded array and never maps two elements to one word.
    std::vector<bool> used(2048 + 2048 / 32, false);
    for (uint64_t i = 0; i < 2048; ++i) {
        const uint64_t p = verify::conflict_free_index(i);
        REQUIRE(p < used.size());
        CHECK_FALSE(used[p]);
        used[p] = true;
    }
}

namespace {
// A float scan in the order of a single-pass look-back scan (rung 5's shape): each tile of
// `tile` elements scanned on its own, then its prefix = the previous tile's prefix plus the
// previous tile's total. `prefix_of` says what a tile's prefix becomes after it went through
// the status word (the right code: itself).
template <class PrefixOf>
std::vector<float> tiled_scan(const std::vector<float>& in, bool exclusive, uint64_t tile, PrefixOf prefix_of) {
    const uint64_t n = in.size();
    std::vector<float> out(n);
    float prefix = 0.0f;
    for (uint64_t t0 = 0; t0 < n; t0 += tile) {
        const float p = prefix_of(prefix);
        float local = 0.0f;
        for (uint64_t i = t0; i < std::min(n, t0 + tile); ++i) {
            if (exclusive) out[i] = p + local;
            local += in[i];
            if (!exclusive) out[i] = p + local;
        }
        prefix = prefix + local;
    }
    return out;
}
// The exact input: integer-valued floats (1 or 2), their integers, the int scan, the exact sum.
struct ExactInput {
    std::vector<float> f;
    std::vector<int32_t> ints, incl;
    verify::ExactSum sum;
};
ExactInput exact_input(uint64_t n, uint64_t seed) {
    ExactInput e;
    e.f.resize(n);
    e.ints.resize(n);
    e.incl.resize(n);
    verify::fill_exact_floats(e.f.data(), e.ints.data(), n, seed);
    verify::inclusive_scan_reference(e.ints.data(), e.incl.data(), n);
    e.sum = verify::exact_sum(e.ints.data(), n);
    return e;
}
}  // namespace

TEST_CASE("check_exact_float_scan: every order of a scan is exact, at the largest n too", "[scan]") {
    const uint64_t tile = 4096;  // rung 5's tile
    for (uint64_t n : {uint64_t(1), uint64_t(1000003), verify::kExactFloatMaxN}) {
        const ExactInput e = exact_input(n, 2028);
        INFO("n = " << n);
        REQUIRE(verify::float_sums_exact(e.sum));
        for (bool exclusive : {false, true}) {
            const std::vector<float> tiled = tiled_scan(e.f, exclusive, tile, [](float p) { return p; });
            std::vector<float> seq(n);  // left to right: the longest chains
            float s = 0.0f;
            for (uint64_t i = 0; i < n; ++i) {
                if (exclusive) seq[i] = s;
                s += e.f[i];
                if (!exclusive) seq[i] = s;
            }
            const lesson::Check c =
                verify::check_exact_float_scan(tiled.data(), e.incl.data(), n, exclusive, e.sum, "t");
            CHECK(c.pass);
            CHECK(c.checked == n);
            CHECK(verify::check_exact_float_scan(seq.data(), e.incl.data(), n, exclusive, e.sum, "seq").pass);
        }
    }
}

TEST_CASE("check_exact_float_scan: planted look-back and indexing bugs fail", "[scan]") {
    // 400 tiles of 4096: the look-back crosses many 32-tile windows; the last tile is partial.
    const uint64_t tile = 4096, n = 400 * tile - 1;
    const ExactInput e = exact_input(n, 2027);
    const auto right = [](float p) { return p; };
    for (bool exclusive : {false, true}) {
        INFO("exclusive = " << exclusive);
        std::vector<float> got = tiled_scan(e.f, exclusive, tile, right);
        REQUIRE(verify::check_exact_float_scan(got.data(), e.incl.data(), n, exclusive, e.sum, "right").pass);
        // One element off by one.
        got[300000] += 1.0f;
        lesson::Check c = verify::check_exact_float_scan(got.data(), e.incl.data(), n, exclusive, e.sum, "one off");
        CHECK_FALSE(c.pass);
        CHECK(c.bad_count == 1);
        CHECK(c.first_bad == 300000);
        CHECK(c.max_abs == 1.0);
        // The tile prefix dropped (a segmented scan): wrong from the second tile on.
        got = tiled_scan(e.f, exclusive, tile, [](float) { return 0.0f; });
        c = verify::check_exact_float_scan(got.data(), e.incl.data(), n, exclusive, e.sum, "prefix dropped");
        CHECK_FALSE(c.pass);
        CHECK(c.first_bad == int64_t(tile));
        CHECK(c.bad_count == n - tile);
        // The prefix packed into the status word by value conversion (flag | unsigned(v)) and
        // read back as float bits: a denormal instead of the prefix.
        got = tiled_scan(e.f, exclusive, tile, [](float p) {
            const uint32_t bits = static_cast<uint32_t>(p);
            float v;
            std::memcpy(&v, &bits, sizeof v);
            return v;
        });
        c = verify::check_exact_float_scan(got.data(), e.incl.data(), n, exclusive, e.sum, "packed by value");
        CHECK_FALSE(c.pass);
        CHECK(c.first_bad == int64_t(tile));
        // The prefix added twice past tile 40 (a look-back that walks a window twice).
        got = tiled_scan(e.f, exclusive, tile, [](float p) { return p > 40 * 4096 * 2 ? 2 * p : p; });
        CHECK_FALSE(verify::check_exact_float_scan(got.data(), e.incl.data(), n, exclusive, e.sum, "twice").pass);
        // Zeros from element 16384 on (tiles never written, or written as 0).
        got = tiled_scan(e.f, exclusive, tile, right);
        std::fill(got.begin() + 16384, got.end(), 0.0f);
        c = verify::check_exact_float_scan(got.data(), e.incl.data(), n, exclusive, e.sum, "zeros");
        CHECK_FALSE(c.pass);
        CHECK(c.first_bad == 16384);
        // The poison (NaN) left in the last element.
        got = tiled_scan(e.f, exclusive, tile, right);
        got[n - 1] = std::numeric_limits<float>::quiet_NaN();
        c = verify::check_exact_float_scan(got.data(), e.incl.data(), n, exclusive, e.sum, "poison");
        CHECK_FALSE(c.pass);
        CHECK(c.first_bad == int64_t(n - 1));
    }
    // Inclusive passed as exclusive: off by one place everywhere.
    const std::vector<float> incl = tiled_scan(e.f, false, tile, right);
    CHECK_FALSE(verify::check_exact_float_scan(incl.data(), e.incl.data(), n, true, e.sum, "shifted").pass);
    // Inputs whose float sums need not be exact: even the right bits do not pass.
    const verify::ExactSum too_big{e.sum.sum, verify::kFloatExactIntegers + 1};
    const lesson::Check c = verify::check_exact_float_scan(incl.data(), e.incl.data(), n, false, too_big, "premise");
    CHECK_FALSE(c.pass);
    CHECK(c.what.find("not exactly summable") != std::string::npos);
}

TEST_CASE("check_float_scan's bound cannot see zeros after element 16384, the exact check can", "[scan]") {
    // The lesson's float input (uniform in [-1, 1), mean 0) and CUB's tolerance at n = 2^28:
    // |prefix| grows like sqrt(i), the bound like i, so all zeros from 16384 on pass the bound.
    const uint64_t n = 1 << 17, big = uint64_t(1) << 28;
    std::vector<float> in(n);
    verify::fill_uniform(in.data(), n, 2028);
    std::vector<double> ref(n);
    verify::inclusive_scan_reference(in.data(), ref.data(), n);
    std::vector<float> got(n, 0.0f);
    float s = 0.0f;
    for (uint64_t i = 0; i < 16384; ++i) got[i] = (s += in[i]);
    const double tol = verify::scan_float_tolerance(64 + 3 * ((big + 1023) / 1024), big);
    CHECK(verify::check_float_scan(got.data(), in.data(), ref.data(), n, false, tol, "zeros, bound").pass);
    const ExactInput e = exact_input(n, 2028);
    got = tiled_scan(e.f, false, 4096, [](float p) { return p; });
    std::fill(got.begin() + 16384, got.end(), 0.0f);
    CHECK_FALSE(verify::check_exact_float_scan(got.data(), e.incl.data(), n, false, e.sum, "zeros, exact").pass);
}
