// verify/parallel.h and the verify/ calls that use it: the same bits on one
// host thread as on several, and the same bits as the single-threaded loops
// they replaced. The thread count is set with LESSON_HOST_THREADS, as a person
// timing a lesson would; the sizes below are chosen to span several blocks.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <complex>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>
#include "catch_shim.hpp"
#include "common/report.h"
#include "verify/blur.h"
#include "verify/chunked.h"
#include "verify/compare.h"
#include "verify/elementwise.h"
#include "verify/fft.h"
#include "verify/gemm_checksum.h"
#include "verify/matmul.h"
#include "verify/parallel.h"
#include "verify/random.h"
#include "verify/reduction.h"
#include "verify/transpose.h"

namespace {

// Sets LESSON_HOST_THREADS for its lifetime, then puts back what was there.
class HostThreads {
public:
    explicit HostThreads(int n) {
        if (const char* old = std::getenv(kVar)) {
            had_ = true;
            old_ = old;
        }
        setenv(kVar, std::to_string(n).c_str(), 1);
    }
    ~HostThreads() {
        if (had_) setenv(kVar, old_.c_str(), 1);
        else unsetenv(kVar);
    }
    HostThreads(const HostThreads&) = delete;
    HostThreads& operator=(const HostThreads&) = delete;

private:
    static constexpr const char* kVar = "LESSON_HOST_THREADS";
    bool had_ = false;
    std::string old_;
};

// f() run with LESSON_HOST_THREADS = n.
template <class F>
auto on_threads(int n, const F& f) {
    HostThreads scoped(n);
    return f();
}

// The thread counts compared with one thread: two, a count that does not divide the blocks, more than the cores.
const std::initializer_list<int> kManyThreads = {2, 3, 8};

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
    return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

bool same_check(const lesson::Check& a, const lesson::Check& b) {
    return a.checked == b.checked && a.first_bad == b.first_bad && a.bad_count == b.bad_count && a.pass == b.pass &&
           same_bits(a.rel_l2, b.rel_l2) && same_bits(a.max_abs, b.max_abs);
}

std::vector<float> uniform(uint64_t n, uint64_t seed) {
    std::vector<float> v(n);
    verify::fill_uniform(v.data(), n, seed);
    return v;
}

// Waits (at most 20 s) until `count` reaches `want`: a block that waits here cannot also take the next block,
// so another thread must.
void wait_for(const std::atomic<int>& count, int want) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (count.load() < want && std::chrono::steady_clock::now() < until) std::this_thread::yield();
}

}  // namespace

TEST_CASE("parallel: host_threads follows LESSON_HOST_THREADS, at least 1", "[parallel]") {
    CHECK(on_threads(3, [] { return verify::host_threads(); }) == 3);
    CHECK(on_threads(1, [] { return verify::host_threads(); }) == 1);
    const int cores = on_threads(0, [] { return verify::host_threads(); });  // not >= 1: ignored, every core
    CHECK(cores >= 1);
    {
        HostThreads scoped(1);
        setenv("LESSON_HOST_THREADS", "4x", 1);  // not a number: ignored
        CHECK(verify::host_threads() == cores);
    }
}

TEST_CASE("parallel_blocks: every element once, in blocks of grain", "[parallel]") {
    for (uint64_t n : {0, 1, 7, 1000, 4097}) {
        for (uint64_t grain : {0, 1, 3, 64, 5000}) {
            for (int threads : {1, 2, 5}) {
                std::vector<int> hits(n, 0);
                std::atomic<bool> misaligned{false};
                verify::parallel_blocks(
                    n, grain,
                    [&](uint64_t begin, uint64_t end) {
                        const uint64_t g = std::max<uint64_t>(grain, 1);
                        if (begin % g != 0 || end - begin > g || (end - begin < g && end != n)) misaligned = true;
                        for (uint64_t i = begin; i < end; ++i) hits[i] += 1;
                    },
                    threads);
                INFO("n = " << n << ", grain = " << grain << ", threads = " << threads);
                CHECK_FALSE(misaligned.load());
                CHECK(std::count(hits.begin(), hits.end(), 1) == static_cast<std::ptrdiff_t>(n));
            }
        }
    }
}

TEST_CASE("parallel_blocks: really runs on more than one thread", "[parallel]") {
    for (bool from_env : {false, true}) {
        HostThreads scoped(4);
        std::mutex m;
        std::set<std::thread::id> ids;
        std::atomic<int> entered{0};
        auto block = [&](uint64_t, uint64_t) {
            {
                std::lock_guard<std::mutex> lock(m);
                ids.insert(std::this_thread::get_id());
            }
            ++entered;
            wait_for(entered, 2);
        };
        verify::parallel_blocks(2, 1, block, from_env ? 0 : 2);  // 0: LESSON_HOST_THREADS decides
        INFO("thread count from " << (from_env ? "LESSON_HOST_THREADS" : "the argument"));
        CHECK(ids.size() == 2);
    }
}

TEST_CASE("parallel_blocks: inside a parallel loop, runs inline on the caller's thread", "[parallel]") {
    std::mutex m;
    std::set<std::thread::id> outer;
    std::atomic<int> entered{0};
    std::atomic<bool> strayed{false};
    verify::parallel_for(
        2,
        [&](int64_t) {
            {
                std::lock_guard<std::mutex> lock(m);
                outer.insert(std::this_thread::get_id());
            }
            ++entered;
            wait_for(entered, 2);  // the two items on two threads
            const std::thread::id me = std::this_thread::get_id();
            auto block = [&](uint64_t, uint64_t) {
                if (std::this_thread::get_id() != me) strayed = true;
            };
            verify::parallel_blocks(64, 1, block, 4);
        },
        2);
    CHECK(outer.size() == 2);
    CHECK_FALSE(strayed.load());
}

TEST_CASE("block_partials: one partial per fixed block, in block order, for any thread count", "[parallel]") {
    const uint64_t n = 1000, grain = 64;
    auto run = [&](int threads) {
        return verify::block_partials<uint64_t>(
            n, grain, [](uint64_t begin, uint64_t end) { return begin * 100000 + end; }, threads);
    };
    const std::vector<uint64_t> one = run(1);
    REQUIRE(one.size() == 16);  // 15 full blocks and one of 40
    for (uint64_t b = 0; b < one.size(); ++b) CHECK(one[b] == b * grain * 100000 + std::min(n, (b + 1) * grain));
    for (int t : kManyThreads) CHECK(run(t) == one);
}

TEST_CASE("parallel: fill_uniform is the same on any thread count and equals hash_uniform", "[parallel]") {
    const uint64_t n = 5 * verify::kBlockWork + 123, first = (uint64_t(1) << 33) + 5;
    auto fill = [&] {
        std::vector<float> v(n);
        verify::fill_uniform(v.data(), n, 17, -2.0f, 3.0f, first);
        return v;
    };
    const std::vector<float> one = on_threads(1, fill);
    for (int t : kManyThreads) CHECK(same_bits(on_threads(t, fill), one));
    bool all = true;
    for (uint64_t i = 0; i < n; ++i) all = all && one[i] == verify::hash_uniform(17, first + i, -2.0f, 3.0f);
    CHECK(all);
}

TEST_CASE("parallel: compare and Comparer, bit for bit on any thread count", "[parallel][compare]") {
    const uint64_t n = 5 * verify::kReduceBlock + 77;  // six blocks, the last one short
    const std::vector<float> base = uniform(n, 8);
    const std::vector<double> ref(base.begin(), base.end());
    const uint64_t late = n - 3;  // in the last block
    const uint64_t nan_at = 2 * verify::kReduceBlock + 11;

    SECTION("a bad element in a late block, then a NaN before it") {
        std::vector<float> gpu = base;
        for (uint64_t i = 0; i < n; ++i) gpu[i] = static_cast<float>(ref[i] * (1.0 + 1e-7));  // rounding-level
        gpu[late] += 0.5f;
        auto check = [&] { return verify::compare(gpu.data(), ref.data(), n, 1e-5, "late"); };
        const lesson::Check one = on_threads(1, check);
        CHECK_FALSE(one.pass);
        CHECK(one.first_bad == static_cast<int64_t>(late));
        CHECK(one.bad_count == 1);
        CHECK(one.checked == n);
        CHECK(one.max_abs == Approx(0.5).epsilon(1e-3));
        for (int t : kManyThreads) CHECK(same_check(on_threads(t, check), one));

        gpu[nan_at] = std::numeric_limits<float>::quiet_NaN();
        const lesson::Check with_nan = on_threads(1, check);
        CHECK_FALSE(with_nan.pass);
        CHECK(std::isnan(with_nan.max_abs));  // NaN is kept, not lost to a larger finite error in a later block
        CHECK(std::isnan(with_nan.rel_l2));
        CHECK(with_nan.first_bad == static_cast<int64_t>(nan_at));
        CHECK(with_nan.bad_count == 2);
        for (int t : kManyThreads) CHECK(same_check(on_threads(t, check), with_nan));
    }

    SECTION("max_abs and the bad count equal a plain loop; rel-L2 to rounding") {
        std::vector<float> gpu = base;
        for (uint64_t i = 0; i < n; i += 997) gpu[i] += 1e-3f * float(i % 7);
        auto check = [&] { return verify::compare(gpu.data(), ref.data(), n, 1e-5, "spread"); };
        const lesson::Check one = on_threads(1, check);
        const double scale = verify::rms(ref.data(), n);
        double diff2 = 0, ref2 = 0, max_abs = 0;
        uint64_t bad = 0;
        int64_t first_bad = -1;
        for (uint64_t i = 0; i < n; ++i) {
            const double d = double(gpu[i]) - ref[i];
            diff2 += d * d;
            ref2 += ref[i] * ref[i];
            max_abs = std::max(max_abs, std::fabs(d));
            if (!(std::fabs(d) <= 1e-5 * (std::fabs(ref[i]) + scale))) {
                if (first_bad < 0) first_bad = static_cast<int64_t>(i);
                ++bad;
            }
        }
        CHECK(one.max_abs == max_abs);
        CHECK(one.bad_count == bad);
        CHECK(one.first_bad == first_bad);
        CHECK(one.rel_l2 == Approx(std::sqrt(diff2) / std::sqrt(ref2)).epsilon(1e-12));
        for (int t : kManyThreads) CHECK(same_check(on_threads(t, check), one));
    }

    SECTION("chunks with offsets, added out of order: first_bad is the smallest bad index") {
        std::vector<float> gpu = base;
        gpu[late] = 50.0f;
        gpu[nan_at] = std::numeric_limits<float>::quiet_NaN();
        const uint64_t chunk = verify::kReduceBlock + 1000;  // chunks and blocks do not line up
        const uint64_t base_offset = uint64_t(1) << 34;      // global indices past 2^32
        auto check = [&] {
            verify::Comparer acc(1e-5, 1.0);
            std::vector<uint64_t> starts;
            for (uint64_t s = 0; s < n; s += chunk) starts.push_back(s);
            std::reverse(starts.begin(), starts.end());  // the last chunk first
            for (uint64_t s : starts) {
                const uint64_t m = std::min(chunk, n - s);
                acc.add(gpu.data() + s, ref.data() + s, m, base_offset + s);
            }
            return acc.result("chunks");
        };
        const lesson::Check one = on_threads(1, check);
        CHECK(one.checked == n);
        CHECK(one.first_bad == static_cast<int64_t>(base_offset + nan_at));
        CHECK(one.bad_count == 2);
        CHECK(std::isnan(one.max_abs));
        CHECK_FALSE(one.pass);
        for (int t : kManyThreads) CHECK(same_check(on_threads(t, check), one));
    }
}

TEST_CASE("parallel: rms is the same on any thread count, one block equals the plain loop", "[parallel][compare]") {
    const uint64_t n = 7 * verify::kReduceBlock + 5;
    std::vector<double> x(n);
    verify::chunk_add_reference(x.data(), n, 21, 0);
    auto r = [&] { return verify::rms(x.data(), n); };
    const double one = on_threads(1, r);
    for (int t : kManyThreads) CHECK(same_bits(on_threads(t, r), one));
    double s = 0;
    for (double v : x) s += v * v;
    CHECK(one == Approx(std::sqrt(s / double(n))).epsilon(1e-12));
    // Up to one block the sum is the plain loop's, bit for bit.
    const uint64_t m = verify::kReduceBlock;
    double s1 = 0;
    for (uint64_t i = 0; i < m; ++i) s1 += x[i] * x[i];
    CHECK(same_bits(on_threads(4, [&] { return verify::rms(x.data(), m); }), std::sqrt(s1 / double(m))));
}

TEST_CASE("parallel: elementwise and chunked references on any thread count", "[parallel]") {
    const uint64_t n = 3 * verify::kBlockWork + 999, first = (uint64_t(1) << 31) + 7;
    const std::vector<float> a = uniform(n, 1), b = uniform(n, 2);
    auto add = [&] {
        std::vector<double> out(n);
        verify::add_reference(a.data(), b.data(), out.data(), n);
        return out;
    };
    auto chunk = [&] {
        std::vector<double> out(n);
        verify::chunk_add_reference(out.data(), n, 5, first);
        return out;
    };
    const std::vector<double> add1 = on_threads(1, add), chunk1 = on_threads(1, chunk);
    bool all = true;
    for (uint64_t i = 0; i < n; ++i) {
        all = all && add1[i] == double(a[i]) + double(b[i]);
        const double a5 = verify::hash_uniform(5, first + i), b6 = verify::hash_uniform(6, first + i);
        all = all && chunk1[i] == a5 + b6;
    }
    CHECK(all);
    for (int t : kManyThreads) {
        CHECK(same_bits(on_threads(t, add), add1));
        CHECK(same_bits(on_threads(t, chunk), chunk1));
    }
}

// The single-threaded matmul reference as it was: every element's sum in the same order.
static void matmul_plain(const float* A, const float* B, double* C, int64_t N, int64_t K, int64_t r0, int64_t r1) {
    for (int64_t i = r0; i < r1; ++i) {
        double* c = C + i * N;
        for (int64_t j = 0; j < N; ++j) c[j] = 0.0;
        for (int64_t k = 0; k < K; ++k) {
            double a = A[i * K + k];
            const float* b = B + k * N;
            for (int64_t j = 0; j < N; ++j) c[j] += a * static_cast<double>(b[j]);
        }
    }
}

TEST_CASE("parallel: matmul_reference, many rows, few rows and a row subset", "[parallel][reference]") {
    struct Shape {
        int64_t M, N, K, r0, r1;
    };
    // 100 rows: blocks of rows. 3 rows of 700 columns: strips of 256 columns. Rows 5..9 of 80: a subset in strips.
    for (const Shape s : {Shape{100, 33, 50, 0, 100}, Shape{3, 700, 300, 0, 3}, Shape{80, 300, 260, 5, 9}}) {
        const std::vector<float> A = uniform(uint64_t(s.M * s.K), 3), B = uniform(uint64_t(s.K * s.N), 4);
        auto run = [&] {
            std::vector<double> C(static_cast<size_t>(s.M * s.N), -1.0);
            verify::matmul_reference(A.data(), B.data(), C.data(), s.M, s.N, s.K, s.r0, s.r1);
            return C;
        };
        std::vector<double> want(static_cast<size_t>(s.M * s.N), -1.0);
        matmul_plain(A.data(), B.data(), want.data(), s.N, s.K, s.r0, s.r1);
        INFO("M = " << s.M << ", N = " << s.N << ", K = " << s.K << ", rows " << s.r0 << ".." << s.r1);
        CHECK(same_bits(on_threads(1, run), want));
        for (int t : kManyThreads) CHECK(same_bits(on_threads(t, run), want));
    }
}

TEST_CASE("parallel: blur3x3_reference on any thread count equals the plain loop", "[parallel][blur]") {
    const int64_t w = 300, h = 517;
    const std::vector<float> in = uniform(uint64_t(w * h), 9);
    std::vector<double> want(static_cast<size_t>(w * h));
    for (int64_t y = 0; y < h; ++y)
        for (int64_t x = 0; x < w; ++x) {
            double s = 0.0;
            for (int r = 0; r < 3; ++r)
                for (int c = 0; c < 3; ++c) {
                    const int64_t yy = verify::clamp_to_edge(y + r - 1, h), xx = verify::clamp_to_edge(x + c - 1, w);
                    s += verify::kBlur3x3Weights[r][c] * static_cast<double>(in[yy * w + xx]);
                }
            want[y * w + x] = s / 16.0;
        }
    auto run = [&] {
        std::vector<double> out(static_cast<size_t>(w * h), -1.0);
        verify::blur3x3_reference(in.data(), out.data(), w, h);
        return out;
    };
    CHECK(same_bits(on_threads(1, run), want));
    for (int t : kManyThreads) CHECK(same_bits(on_threads(t, run), want));
}

TEST_CASE("parallel: transpose_reference on any thread count", "[parallel][transpose]") {
    const int64_t rows = 1000, cols = 701;  // 32 bands of 32 rows, the last one short
    const std::vector<float> in = uniform(uint64_t(rows * cols), 10);
    std::vector<float> want(in.size());
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) want[c * rows + r] = in[r * cols + c];
    auto run = [&] {
        std::vector<float> out(in.size(), -1.0f);
        verify::transpose_reference(in.data(), out.data(), rows, cols);
        return out;
    };
    for (int t : {1, 2, 3, 8}) CHECK(same_bits(on_threads(t, run), want));
}

TEST_CASE("parallel: matmul_sum_reference on any thread count equals the plain loop", "[parallel][gemm_checksum]") {
    const int64_t M = 300, N = 250, K = 333;  // blocks of 119 columns of A: three, the last one short
    const std::vector<float> A = uniform(uint64_t(M * K), 11), B = uniform(uint64_t(K * N), 12);
    std::vector<double> colsum_a(K, 0.0);
    for (int64_t i = 0; i < M; ++i)
        for (int64_t k = 0; k < K; ++k) colsum_a[k] += A[i * K + k];
    double want = 0.0;
    for (int64_t k = 0; k < K; ++k) {
        double rowsum_b = 0.0;
        for (int64_t j = 0; j < N; ++j) rowsum_b += B[k * N + j];
        want += colsum_a[k] * rowsum_b;
    }
    auto run = [&] { return verify::matmul_sum_reference(A.data(), B.data(), M, N, K); };
    CHECK(same_bits(on_threads(1, run), want));
    for (int t : kManyThreads) CHECK(same_bits(on_threads(t, run), want));
}

TEST_CASE("parallel: sum_reference and sum_int64 on any thread count, against the one-loop sums",
          "[parallel][reduction]") {
    const uint64_t n = 3 * verify::kSumBlock + 12345;  // four blocks, the last one short
    std::vector<float> x(n);
    std::vector<int32_t> ints(n);
    verify::fill_uniform(x.data(), n, 21, -1.0f, 3.0f);
    verify::fill_int32(ints.data(), n, 22);
    const verify::SumReference serial = verify::sum_reference_serial(x.data(), n);
    const verify::SumReference one = on_threads(1, [&] { return verify::sum_reference(x.data(), n); });
    // Blocks then a sum of the blocks: not the one loop's bits, but as close as two compensated sums get.
    CHECK(std::fabs(one.sum - serial.sum) <= 4 * verify::kDoubleUnitRoundoff * serial.sum_abs);
    CHECK(std::fabs(one.sum_abs - serial.sum_abs) <= 4 * verify::kDoubleUnitRoundoff * serial.sum_abs);
    int64_t want = 0;
    for (uint64_t i = 0; i < n; ++i) want += ints[i];
    CHECK(on_threads(1, [&] { return verify::sum_int64(ints.data(), n); }) == want);
    for (int t : kManyThreads) {
        const verify::SumReference r = on_threads(t, [&] { return verify::sum_reference(x.data(), n); });
        CHECK(same_bits(r.sum, one.sum));
        CHECK(same_bits(r.sum_abs, one.sum_abs));
        CHECK(on_threads(t, [&] { return verify::sum_int64(ints.data(), n); }) == want);
    }
}

TEST_CASE("parallel: FFT references on any thread count", "[parallel][fft]") {
    using verify::cplx;
    const std::vector<float> raw = uniform(2 * 96 * 80, 13);
    const std::vector<cplx> x = verify::to_cplx(raw.data(), 96 * 80);
    for (uint64_t i = 0; i < x.size(); ++i) REQUIRE(x[i] == cplx(raw[2 * i], raw[2 * i + 1]));

    SECTION("dft_direct") {
        auto run = [&] {
            std::vector<cplx> out(300);
            verify::dft_direct(x.data(), out.data(), 300, verify::kForward);
            return out;
        };
        const std::vector<cplx> one = on_threads(1, run);
        for (int t : kManyThreads) CHECK(same_bits(on_threads(t, run), one));
    }
    SECTION("fft2d (rows, then columns) equals one plan run row by row, then column by column") {
        const uint64_t rows = 96, cols = 80;  // 80 = 16 * 5: the Bluestein path for the rows
        std::vector<cplx> want = x;
        const verify::Fft1d row_plan(cols), col_plan(rows);
        for (uint64_t r = 0; r < rows; ++r) row_plan.run(want.data() + r * cols, verify::kInverse);
        std::vector<cplx> column(rows);
        for (uint64_t c = 0; c < cols; ++c) {
            for (uint64_t r = 0; r < rows; ++r) column[r] = want[r * cols + c];
            col_plan.run(column.data(), verify::kInverse);
            for (uint64_t r = 0; r < rows; ++r) want[r * cols + c] = column[r];
        }
        auto run = [&] {
            std::vector<cplx> y = x;
            verify::fft2d(y.data(), rows, cols, verify::kInverse);
            return y;
        };
        CHECK(same_bits(on_threads(1, run), want));
        for (int t : kManyThreads) CHECK(same_bits(on_threads(t, run), want));
    }
    SECTION("complex_matmul_reference and complex_vecmat_reference") {
        const int64_t M = 300, N = 600, K = 40;  // tiles of 128 x 128: 3 x 5, the last row and column short
        const std::vector<float> A = uniform(uint64_t(2 * M * K), 14), B = uniform(uint64_t(2 * K * N), 15);
        auto matmul = [&] {
            std::vector<cplx> C(static_cast<size_t>(M * N));
            verify::complex_matmul_reference(A.data(), B.data(), C.data(), M, N, K);
            return C;
        };
        const std::vector<cplx> v = verify::to_cplx(A.data() + 2 * 5 * K, uint64_t(K));  // row 5 of A
        auto vecmat = [&] {
            std::vector<cplx> row(static_cast<size_t>(N));
            verify::complex_vecmat_reference(v.data(), B.data(), row.data(), N, K);
            return row;
        };
        const std::vector<cplx> c1 = on_threads(1, matmul), r1 = on_threads(1, vecmat);
        for (int t : kManyThreads) {
            CHECK(same_bits(on_threads(t, matmul), c1));
            CHECK(same_bits(on_threads(t, vecmat), r1));
        }
        for (int64_t j = 0; j < N; ++j) CHECK(std::abs(r1[j] - c1[5 * N + j]) < 1e-12);
    }
}

TEST_CASE("parallel_copy and parallel_memset: every byte, on any thread count", "[parallel]") {
    // Sizes around the 1 MiB blocks: none, one short block, several blocks and a short last one.
    for (uint64_t n : {uint64_t(0), uint64_t(1), uint64_t(1000), uint64_t(3) << 18, (uint64_t(3) << 18) + 17}) {
        std::vector<float> src(n);
        verify::fill_uniform(src.data(), n, 21);
        for (int threads : {1, 3, 8}) {
            INFO("n = " << n << ", threads = " << threads);
            std::vector<float> dst(n + 1, 7.0f);  // one element past the end: must stay untouched
            verify::parallel_copy(dst.data(), src.data(), n, threads);
            CHECK(std::equal(src.begin(), src.end(), dst.begin()));
            CHECK(dst[n] == 7.0f);
            std::vector<unsigned char> bytes(4 * n + 1, 0);
            verify::parallel_memset(bytes.data(), 0xFF, 4 * n, threads);
            CHECK(std::count(bytes.begin(), bytes.end(), 0xFF) == static_cast<std::ptrdiff_t>(4 * n));
            CHECK(bytes[4 * n] == 0);
        }
    }
}

TEST_CASE("host_vector: a std::vector whose elements start unset", "[parallel]") {
    verify::host_vector<double> v(1000);  // no value promised: filled before it is read
    CHECK(v.size() == 1000);
    for (size_t i = 0; i < v.size(); ++i) v[i] = double(i);
    v.resize(1500);
    CHECK(v[999] == 999.0);  // what was written survives a reallocation
    v.push_back(2.5);
    CHECK(v.size() == 1501);
    CHECK(v.back() == 2.5);
    verify::host_vector<float> w(3, 1.5f);  // with a value: that value, as std::vector
    CHECK((w[0] == 1.5f && w[1] == 1.5f && w[2] == 1.5f));
    const verify::host_vector<float> copy = w;
    CHECK(copy == w);
}

TEST_CASE("host_vector: a large buffer (huge pages asked for) holds and keeps its data", "[parallel]") {
    const size_t n = verify::kHugeFrom / sizeof(float) + 777;  // just over the size that asks for 2 MB pages
    verify::host_vector<float> v(n);
#if defined(__linux__)
    CHECK(reinterpret_cast<uintptr_t>(v.data()) % verify::kHugePage == 0);
#endif
    verify::parallel_blocks(n, uint64_t(1) << 16, [&](uint64_t b, uint64_t e) {
        for (uint64_t i = b; i < e; ++i) v[i] = float(i % 1000);
    });
    v.resize(n + 10, 3.0f);  // reallocates: the old buffer's data move over
    v.shrink_to_fit();
    bool same = true;
    for (size_t i = 0; i < n; ++i) same = same && v[i] == float(i % 1000);
    CHECK(same);
    CHECK(v[n + 9] == 3.0f);
    verify::host_vector<float> small(100, 1.0f);  // below the size: the usual allocation
    CHECK(small[99] == 1.0f);
}
