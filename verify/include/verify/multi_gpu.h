// verify/multi_gpu.h - the CPU side of lesson 22 (several GPUs): how work is split over GPUs,
// the all-reduce's inputs and their exact sum, the ring all-reduce's schedule (and a CPU
// replay of it), nccl-tests' bandwidth definitions, and the line a rank process writes back.
//
//  - split_range: GPU g of G gets products [total*g/G, total*(g+1)/G): contiguous, sizes
//    differ by at most one.
//  - the split's references: the sum of every product of the batch from its inputs, sampled
//    products in full (sample_per_range, batch_reference), and the GPU's sums (product_sums).
//  - allreduce_input: element i of rank r's buffer, a small integer held in a float. Sums of up
//    to 64 of them are below 2^24, so every order of adding them gives the same bits: NCCL, the
//    hand-written ring and the CPU must agree exactly.
//  - ring schedule: reduce-scatter then all-gather over P ranks, chunk k = [n*k/P, n*(k+1)/P).
//    ring_replay runs the very schedule that lesson 22's GPU code issues, on host arrays.
//  - algbw = bytes / time; busbw = algbw * 2(P-1)/P for an all-reduce (nccl-tests' definition:
//    the rate each link direction carries, comparable with the link's one-way bandwidth).
// Host code; allreduce_input is also a device function when nvcc compiles it.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>
#include "common/report.h"
#include "verify/compare.h"  // check_exact, check_same_bits
#include "verify/gemm_checksum.h"
#include "verify/matmul.h"
#include "verify/parallel.h"

#if defined(__CUDACC__)
#define VERIFY_MULTI_GPU_HD __host__ __device__
#else
#define VERIFY_MULTI_GPU_HD
#endif

namespace verify {

// ---------------------------------------------------------------- splitting the batch

struct Range {
    uint64_t first = 0, count = 0;
};

// Part `part` of `parts` of [0, total): contiguous, in order, sizes differ by at most one.
inline Range split_range(uint64_t total, uint64_t parts, uint64_t part) {
    Range r;
    if (parts == 0 || part >= parts) return r;
    r.first = total * part / parts;
    r.count = total * (part + 1) / parts - r.first;
    return r;
}

// ---------------------------------------------------------------- the split's references

// `per_range` distinct products of each GPU's range of the `gpus`-way split of [0, total) (all of
// a smaller range), drawn from the seed: the products checked element by element, whatever
// number of GPUs then computes them.
inline std::vector<uint64_t> sample_per_range(uint64_t total, uint64_t gpus, uint64_t per_range, uint64_t seed) {
    std::vector<uint64_t> picked;
    std::mt19937_64 rng(seed * 7919 + 22);
    for (uint64_t g = 0; g < gpus; ++g) {
        const Range r = split_range(total, gpus, g);
        std::vector<uint64_t> idx(r.count);
        std::iota(idx.begin(), idx.end(), r.first);
        const uint64_t s = std::min<uint64_t>(per_range, r.count);
        for (uint64_t i = 0; i < s; ++i) std::swap(idx[i], idx[i + rng() % (r.count - i)]);
        picked.insert(picked.end(), idx.begin(), idx.begin() + int64_t(s));
    }
    return picked;
}

// The references of `batch` row-major n x n products C_p = A_p * B_p (A_p at A + p*n*n): the sum
// of every product from its inputs, O(n^2) each (verify/gemm_checksum.h), one product per host
// thread; and the products `picked` in full, in double.
struct BatchReference {
    std::vector<double> sums;      // [batch]
    std::vector<uint64_t> picked;  // the products held in full
    std::vector<double> products;  // [picked.size() * n * n]
};

inline BatchReference batch_reference(const float* A, const float* B, int64_t n, uint64_t batch,
                                      std::vector<uint64_t> picked) {
    const uint64_t nn = uint64_t(n) * uint64_t(n);
    BatchReference ref;
    ref.sums.resize(batch);
    parallel_for(int64_t(batch),
                 [&](int64_t p) { ref.sums[p] = matmul_sum_reference(A + p * nn, B + p * nn, n, n, n); });
    ref.picked = std::move(picked);
    ref.products.resize(ref.picked.size() * nn);
    for (size_t i = 0; i < ref.picked.size(); ++i)
        matmul_reference(A + ref.picked[i] * nn, B + ref.picked[i] * nn, ref.products.data() + i * nn, n, n, n);
    return ref;
}

// The GPU's side of the sum check: the sum of each of `batch` products of nn floats, each in index
// order (sum_of), one product per host thread.
inline std::vector<double> product_sums(const float* C, uint64_t batch, uint64_t nn) {
    std::vector<double> sums(batch);
    parallel_for(int64_t(batch), [&](int64_t p) { sums[p] = sum_of(C + p * nn, nn); });
    return sums;
}

// ---------------------------------------------------------------- all-reduce inputs

// Element i of rank `rank`'s send buffer: an integer in [0, 1023] from a hash of (seed, rank, i).
VERIFY_MULTI_GPU_HD inline float allreduce_input(uint64_t seed, int rank, uint64_t i) {
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + uint64_t(rank) * 0xD1B54A32D192ED03ull + i;
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBull;
    x ^= x >> 31;
    return float(x & 1023u);
}

// The sum over ranks 0..ranks-1 of element i: exact (an integer below 2^24 for ranks <= 64).
inline float allreduce_expected(uint64_t seed, int ranks, uint64_t i) {
    uint32_t s = 0;
    for (int r = 0; r < ranks; ++r) s += uint32_t(allreduce_input(seed, r, i));
    return float(s);
}

// An all-reduce result (the first n elements of one rank's receive buffer) against the exact sum.
inline lesson::Check check_allreduce(const float* got, uint64_t n, uint64_t seed, int ranks, const std::string& what) {
    return check_exact(
        got, n, [&](uint64_t i) { return allreduce_expected(seed, ranks, i); }, what);
}

// ---------------------------------------------------------------- the ring schedule

// Chunk k of n elements cut in P pieces: [n*k/P, n*(k+1)/P). Some are empty when n < P.
inline Range ring_chunk(uint64_t n, int P, int k) { return split_range(n, uint64_t(P), uint64_t(k)); }

inline int ring_mod(int a, int P) { return ((a % P) + P) % P; }

// Reduce-scatter, step s = 0..P-2: rank r sends chunk (r - s) to rank r+1, which adds its own
// input to it: every rank receives chunk (r - 1 - s). After P-1 steps rank r holds the full
// sum of chunk (r + 1).
inline int ring_rs_send_chunk(int rank, int step, int P) { return ring_mod(rank - step, P); }
inline int ring_rs_recv_chunk(int rank, int step, int P) { return ring_mod(rank - 1 - step, P); }
// All-gather, step s = 0..P-2: rank r forwards chunk (r + 1 - s), whole sums, to rank r+1,
// which stores it: every rank receives chunk (r - s).
inline int ring_ag_send_chunk(int rank, int step, int P) { return ring_mod(rank + 1 - step, P); }
inline int ring_ag_recv_chunk(int rank, int step, int P) { return ring_mod(rank - step, P); }
// The chunk rank r owns (holds summed) between the two phases.
inline int ring_owned_chunk(int rank, int P) { return ring_mod(rank + 1, P); }

// The schedule replayed on the host, in the GPU code's order: x[r] are the inputs, the result
// is y[r] for every rank (out of place). Each reduce-scatter step first copies every rank's
// send chunk into its neighbour's receive buffer tmp (from x at step 0, from y later), then
// every rank computes y[c] = x[c] + tmp: the same two operations as cudaMemcpyPeerAsync and
// the add kernel. All-gather copies chunks from y[r] into y[r+1] directly.
inline std::vector<std::vector<float>> ring_replay(const std::vector<std::vector<float>>& x) {
    const int P = int(x.size());
    const uint64_t n = P ? x[0].size() : 0;
    std::vector<std::vector<float>> y(static_cast<size_t>(P), std::vector<float>(n, NAN));  // NaN: never written
    if (P == 1) y[0] = x[0];
    std::vector<std::vector<float>> tmp(static_cast<size_t>(P), std::vector<float>(n / std::max(P, 1) + 1, NAN));
    for (int s = 0; s + 1 < P; ++s) {
        for (int r = 0; r < P; ++r) {  // the copies: rank r -> rank r+1's tmp
            const Range c = ring_chunk(n, P, ring_rs_send_chunk(r, s, P));
            const std::vector<float>& src = s == 0 ? x[size_t(r)] : y[size_t(r)];
            std::copy(src.begin() + int64_t(c.first), src.begin() + int64_t(c.first + c.count),
                      tmp[size_t(ring_mod(r + 1, P))].begin());
        }
        for (int r = 0; r < P; ++r) {  // the adds, on every receiver
            const Range c = ring_chunk(n, P, ring_rs_recv_chunk(r, s, P));
            for (uint64_t i = 0; i < c.count; ++i)
                y[size_t(r)][c.first + i] = x[size_t(r)][c.first + i] + tmp[size_t(r)][i];
        }
    }
    for (int s = 0; s + 1 < P; ++s) {
        std::vector<std::vector<float>> before = y;  // all copies of a step run at once: read the old state
        for (int r = 0; r < P; ++r) {
            const int k = ring_ag_send_chunk(r, s, P);
            const Range c = ring_chunk(n, P, k);
            std::copy(before[size_t(r)].begin() + int64_t(c.first),
                      before[size_t(r)].begin() + int64_t(c.first + c.count),
                      y[size_t(ring_mod(r + 1, P))].begin() + int64_t(c.first));
        }
    }
    return y;
}

// ---------------------------------------------------------------- bandwidth, as nccl-tests reports it

inline double algbw_gbps(double bytes, double ms) { return bytes / (ms * 1e6); }
// All-reduce: each rank sends and receives 2(P-1)/P of the buffer, so algbw * 2(P-1)/P is what
// every link direction carries (nccl-tests, doc/PERFORMANCE.md).
inline double allreduce_busbw_factor(int P) { return P > 0 ? 2.0 * double(P - 1) / double(P) : 0.0; }

// The sweep's sizes: 4 KiB, 16 KiB, ... (powers of 4) up to max_bytes, and max_bytes itself
// when it is not one of them. Every size is a multiple of 4 bytes (whole floats).
inline std::vector<uint64_t> sweep_sizes(uint64_t max_bytes) {
    std::vector<uint64_t> s;
    max_bytes &= ~uint64_t(3);
    for (uint64_t b = 4096; b <= max_bytes; b *= 4) s.push_back(b);
    if (max_bytes > 0 && (s.empty() || s.back() != max_bytes)) s.push_back(max_bytes);
    return s;
}

// Collectives per timed burst for a size: about 256 MiB of data per burst, 1 to 200 calls.
// A function of the size alone, because every rank must issue the same number of collectives
// (a rank that issues one more waits for partners that never come).
inline int burst_calls(uint64_t bytes) {
    const uint64_t want = (uint64_t(256) << 20) / std::max<uint64_t>(bytes, 1);
    return int(std::min<uint64_t>(200, std::max<uint64_t>(1, want)));
}

// ---------------------------------------------------------------- what a rank process reports

// One line per size: "<bytes> <ms> <checked> <bad> <first_bad>", the median time of one
// all-reduce and the rank's exact check of its receive buffer.
struct RankLine {
    uint64_t bytes = 0;
    double ms = NAN;
    uint64_t checked = 0, bad = 0;
    int64_t first_bad = -1;
};

inline std::string format_rank_line(const RankLine& l) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "%llu %.9g %llu %llu %lld\n", (unsigned long long)l.bytes, l.ms,
                  (unsigned long long)l.checked, (unsigned long long)l.bad, (long long)l.first_bad);
    return buf;
}

// False when the line is not one format_rank_line wrote.
inline bool parse_rank_line(const std::string& s, RankLine* l) {
    unsigned long long bytes = 0, checked = 0, bad = 0;
    long long first = 0;
    double ms = 0;
    int used = 0;
    if (std::sscanf(s.c_str(), "%llu %lg %llu %llu %lld%n", &bytes, &ms, &checked, &bad, &first, &used) != 5)
        return false;
    for (size_t i = size_t(used); i < s.size(); ++i)
        if (s[i] != '\n' && s[i] != ' ') return false;
    l->bytes = bytes;
    l->ms = ms;
    l->checked = checked;
    l->bad = bad;
    l->first_bad = first;
    return true;
}

}  // namespace verify
