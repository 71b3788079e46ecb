// CPU tests of verify/multi_gpu.h (lesson 22, several GPUs): the split of a batch and its
// references, the all-reduce's integer inputs and their exact sums, the ring schedule replayed on host arrays
// for 1 to 9 ranks (also sizes that P does not divide, and fewer elements than ranks), the
// bandwidth definitions, the sweep, and the line a rank process writes back.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <vector>
#include "catch_shim.hpp"
#include "verify/multi_gpu.h"

TEST_CASE("split_range covers 0 to total in order, sizes differ by at most one", "[multi_gpu]") {
    for (uint64_t total : {1ull, 7ull, 96ull, 1000ull})
        for (uint64_t parts = 1; parts <= 9; ++parts) {
            uint64_t next = 0, lo = UINT64_MAX, hi = 0;
            for (uint64_t p = 0; p < parts; ++p) {
                const verify::Range r = verify::split_range(total, parts, p);
                REQUIRE(r.first == next);
                next += r.count;
                lo = std::min(lo, r.count);
                hi = std::max(hi, r.count);
            }
            REQUIRE(next == total);
            REQUIRE(hi - lo <= 1);
        }
    REQUIRE(verify::split_range(10, 0, 0).count == 0);
    REQUIRE(verify::split_range(10, 2, 2).count == 0);
}

TEST_CASE("sample_per_range draws distinct products from every range of the split", "[multi_gpu]") {
    for (uint64_t total : {1ull, 7ull, 96ull})
        for (uint64_t gpus = 1; gpus <= std::min<uint64_t>(total, 4); ++gpus) {
            const std::vector<uint64_t> picked = verify::sample_per_range(total, gpus, 2, 42);
            REQUIRE(picked == verify::sample_per_range(total, gpus, 2, 42));  // the seed decides
            size_t at = 0;
            for (uint64_t g = 0; g < gpus; ++g) {
                const verify::Range r = verify::split_range(total, gpus, g);
                const uint64_t want = std::min<uint64_t>(2, r.count);
                std::set<uint64_t> seen;
                for (uint64_t i = 0; i < want; ++i, ++at) {
                    REQUIRE(at < picked.size());
                    REQUIRE(picked[at] >= r.first);
                    REQUIRE(picked[at] < r.first + r.count);
                    seen.insert(picked[at]);
                }
                REQUIRE(seen.size() == want);
            }
            REQUIRE(at == picked.size());
        }
}

TEST_CASE("batch_reference and product_sums agree on a batch computed on the host", "[multi_gpu]") {
    const int64_t n = 5;
    const uint64_t batch = 3, nn = uint64_t(n * n);
    std::vector<float> A(batch * nn), B(batch * nn), C(batch * nn);
    for (uint64_t i = 0; i < A.size(); ++i) {
        A[i] = float(int(i % 7) - 3);
        B[i] = float(int(i % 5) - 2);
    }
    for (uint64_t p = 0; p < batch; ++p)  // C_p = A_p * B_p, exact in float (small integers)
        for (int64_t i = 0; i < n; ++i)
            for (int64_t j = 0; j < n; ++j) {
                float c = 0;
                for (int64_t k = 0; k < n; ++k) c += A[p * nn + i * n + k] * B[p * nn + k * n + j];
                C[p * nn + i * n + j] = c;
            }
    const verify::BatchReference ref = verify::batch_reference(A.data(), B.data(), n, batch, {2, 0});
    const std::vector<double> got = verify::product_sums(C.data(), batch, nn);
    REQUIRE(ref.sums.size() == batch);
    REQUIRE(got.size() == batch);
    for (uint64_t p = 0; p < batch; ++p) REQUIRE(got[p] == ref.sums[p]);
    REQUIRE(ref.picked == std::vector<uint64_t>{2, 0});
    REQUIRE(ref.products.size() == 2 * nn);
    for (uint64_t e = 0; e < nn; ++e) {
        REQUIRE(ref.products[e] == double(C[2 * nn + e]));
        REQUIRE(ref.products[nn + e] == double(C[e]));
    }
}

TEST_CASE("all-reduce inputs are integers below 1024 that differ between ranks", "[multi_gpu]") {
    std::set<float> seen;
    uint64_t same = 0;
    for (uint64_t i = 0; i < 4096; ++i) {
        const float a = verify::allreduce_input(7, 0, i), b = verify::allreduce_input(7, 1, i);
        REQUIRE(a == std::floor(a));
        REQUIRE(a >= 0.0f);
        REQUIRE(a < 1024.0f);
        same += a == b;
        seen.insert(a);
    }
    REQUIRE(same < 40);          // ranks do not share inputs (about 4 of 4096 by chance)
    REQUIRE(seen.size() > 900);  // the values spread over [0, 1024)
    REQUIRE(verify::allreduce_input(7, 0, 5) != verify::allreduce_input(8, 0, 5));
    // The sum of 64 ranks stays an exact integer in float.
    REQUIRE(double(verify::allreduce_expected(3, 64, 11)) < 16777216.0);
}

TEST_CASE("check_allreduce passes the exact sum and fails one wrong, NaN or missing element", "[multi_gpu]") {
    const uint64_t n = 200000, seed = 5;
    const int P = 3;
    std::vector<float> y(n);
    for (uint64_t i = 0; i < n; ++i) {  // summed in another order than the reference: same bits
        float s = 0;
        for (int r = P - 1; r >= 0; --r) s += verify::allreduce_input(seed, r, i);
        y[i] = s;
    }
    lesson::Check c = verify::check_allreduce(y.data(), n, seed, P, "sum");
    REQUIRE(c.pass);
    REQUIRE(c.checked == n);
    REQUIRE(c.max_abs == 0.0);
    REQUIRE(!verify::check_allreduce(y.data(), n, seed, P - 1, "two ranks' sum").pass);

    std::vector<float> bad = y;
    bad[123456] += 1.0f;
    c = verify::check_allreduce(bad.data(), n, seed, P, "one off");
    REQUIRE(!c.pass);
    REQUIRE(c.bad_count == 1);
    REQUIRE(c.first_bad == 123456);
    bad = y;
    bad[70000] = NAN;
    bad[190000] += 5.0f;
    c = verify::check_allreduce(bad.data(), n, seed, P, "NaN");
    REQUIRE(!c.pass);
    REQUIRE(c.bad_count == 2);
    REQUIRE(c.first_bad == 70000);
    REQUIRE(std::isnan(c.max_abs));
    REQUIRE(!verify::check_allreduce(y.data(), 0, seed, P, "nothing").pass);

    REQUIRE(verify::check_same_bits(y.data(), y.data(), n, "same").pass);
    bad = y;
    bad[5] = std::nextafter(bad[5], 4096.0f);  // one unit in the last place
    REQUIRE(!verify::check_same_bits(bad.data(), y.data(), n, "differs").pass);
}

TEST_CASE("ring schedule: each rank receives every chunk but one, once per phase", "[multi_gpu]") {
    for (int P = 2; P <= 9; ++P)
        for (int r = 0; r < P; ++r) {
            std::set<int> rs, ag;
            for (int s = 0; s + 1 < P; ++s) {
                rs.insert(verify::ring_rs_recv_chunk(r, s, P));
                ag.insert(verify::ring_ag_recv_chunk(r, s, P));
                // what r+1 receives is what r sends
                const int next = verify::ring_mod(r + 1, P);
                REQUIRE(verify::ring_rs_recv_chunk(next, s, P) == verify::ring_rs_send_chunk(r, s, P));
                REQUIRE(verify::ring_ag_recv_chunk(next, s, P) == verify::ring_ag_send_chunk(r, s, P));
                // a rank forwards in step s the chunk it received in step s-1
                if (s > 0) {
                    REQUIRE(verify::ring_rs_send_chunk(r, s, P) == verify::ring_rs_recv_chunk(r, s - 1, P));
                    REQUIRE(verify::ring_ag_send_chunk(r, s, P) == verify::ring_ag_recv_chunk(r, s - 1, P));
                }
            }
            REQUIRE(int(rs.size()) == P - 1);
            REQUIRE(rs.count(r) == 0);  // its own chunk r: written in the all-gather
            REQUIRE(int(ag.size()) == P - 1);
            REQUIRE(ag.count(verify::ring_owned_chunk(r, P)) == 0);  // the one it summed
            REQUIRE(verify::ring_ag_send_chunk(r, 0, P) == verify::ring_owned_chunk(r, P));
            REQUIRE(verify::ring_rs_recv_chunk(r, P - 2, P) == verify::ring_owned_chunk(r, P));
        }
}

TEST_CASE("ring replay: every rank ends with the exact sum, for 1 to 9 ranks and any n", "[multi_gpu]") {
    for (int P = 1; P <= 9; ++P)
        for (uint64_t n : {1ull, 5ull, 64ull, 1000ull, 4099ull}) {
            std::vector<std::vector<float>> x(static_cast<size_t>(P), std::vector<float>(n));
            for (int r = 0; r < P; ++r)
                for (uint64_t i = 0; i < n; ++i) x[size_t(r)][i] = verify::allreduce_input(9, r, i);
            const std::vector<std::vector<float>> y = verify::ring_replay(x);
            for (int r = 0; r < P; ++r) {
                const lesson::Check c = verify::check_allreduce(y[size_t(r)].data(), n, 9, P, "rank");
                INFO("P=" << P << " n=" << n << " rank " << r);
                REQUIRE(c.pass);
            }
        }
}

TEST_CASE("bus bandwidth, the sweep and the burst length", "[multi_gpu]") {
    REQUIRE(verify::algbw_gbps(1e9, 1.0) == Approx(1000.0));
    REQUIRE(verify::allreduce_busbw_factor(1) == 0.0);
    REQUIRE(verify::allreduce_busbw_factor(2) == Approx(1.0));
    REQUIRE(verify::allreduce_busbw_factor(8) == Approx(1.75));
    // The measurement: 1 GiB over 2 GPUs in 3.24 ms is 331 GB/s of bus bandwidth.
    REQUIRE(verify::algbw_gbps(double(1ull << 30), 3.24) * verify::allreduce_busbw_factor(2) ==
            Approx(331.4).epsilon(0.01));

    const std::vector<uint64_t> s = verify::sweep_sizes(uint64_t(1) << 30);
    REQUIRE(s.size() == 10);
    REQUIRE(s.front() == 4096);
    REQUIRE(s.back() == (uint64_t(1) << 30));
    for (size_t i = 1; i < s.size(); ++i) REQUIRE(s[i] == 4 * s[i - 1]);
    const std::vector<uint64_t> t = verify::sweep_sizes(3 << 20);  // 3 MiB: not a power of 4
    REQUIRE(t.back() == uint64_t(3) << 20);
    REQUIRE(t[t.size() - 2] == uint64_t(1) << 20);
    REQUIRE(verify::sweep_sizes(1000).size() == 1);  // below 4 KiB: that size alone
    REQUIRE(verify::sweep_sizes(1000).front() == 1000);
    for (uint64_t b : s) {
        REQUIRE(verify::burst_calls(b) >= 1);
        REQUIRE(verify::burst_calls(b) <= 200);
    }
    REQUIRE(verify::burst_calls(4096) == 200);
    REQUIRE(verify::burst_calls(uint64_t(1) << 30) == 1);
}

TEST_CASE("rank lines round-trip and reject garbage", "[multi_gpu]") {
    verify::RankLine a;
    a.bytes = uint64_t(1) << 30;
    a.ms = 3.2411;
    a.checked = 268435456;
    a.bad = 2;
    a.first_bad = 17;
    verify::RankLine b;
    REQUIRE(verify::parse_rank_line(verify::format_rank_line(a), &b));
    REQUIRE(b.bytes == a.bytes);
    REQUIRE(b.ms == Approx(a.ms));
    REQUIRE(b.checked == a.checked);
    REQUIRE(b.bad == 2);
    REQUIRE(b.first_bad == 17);
    REQUIRE(!verify::parse_rank_line("", &b));
    REQUIRE(!verify::parse_rank_line("4096 0.1 1024 0", &b));
    REQUIRE(!verify::parse_rank_line("4096 0.1 1024 0 -1 extra", &b));
    REQUIRE(verify::parse_rank_line("4096 0.1 1024 0 -1", &b));
}
