// Lesson 21 of the course (flash attention), part 4: decode (rung 7), one query row per head
// against N keys, split over the keys: a small exact check, then the timed size against the copy.
// main.cu runs it last (after timed.cuh).
// Run: ./build/bin/flash_attention --rung=7 [--decode-n=65536]   (README.md is the handout)
#pragma once
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/ceilings.h"
#include "common/check.h"
#include "common/timer.h"
#include "verify/attention.h"
#include "verify/parallel.h"

#include "kernels/7_decode_split.cuh"
#include "problem.cuh"

// Rung 7 at N keys and head dimension d for `heads` heads (seeded by N and d): checked on every
// head when few, else on 8 spread out; timed when `timed`.
static void run_decode(Context& c, const Rung& rung7, int64_t heads, int N, int d, bool timed) {
    Decode a{};
    a.heads = heads;
    a.N = N;
    a.d = d;
    a.scale = float(1.0 / std::sqrt(double(d)));
    // Enough blocks to fill the GPU (about 8 per SM), pieces of at least 256 keys.
    // Exercise 3 of the handout: force a.splits = 1 and time --rung=7 --decode-batch=1 --decode-heads=8
    const int64_t want = (8ll * c.prop.multiProcessorCount + a.heads - 1) / a.heads;
    a.splits = int(std::max<int64_t>(1, std::min<int64_t>(want, (N + 255) / 256)));
    a.keys_per_split = (N + a.splits - 1) / a.splits;
    a.splits = (N + a.keys_per_split - 1) / a.keys_per_split;
    const size_t kv = size_t(a.heads) * N * d;
    const uint64_t s = c.seed + 9000 + N + d;
    bf16 *d_q = nullptr, *d_K = nullptr, *d_V = nullptr, *d_o = nullptr;
    float* d_part = nullptr;
    CUDA_CHECK(cudaMalloc(&d_q, a.heads * d * sizeof(bf16)));
    CUDA_CHECK(cudaMalloc(&d_K, kv * sizeof(bf16)));
    CUDA_CHECK(cudaMalloc(&d_V, kv * sizeof(bf16)));
    CUDA_CHECK(cudaMalloc(&d_o, a.heads * d * sizeof(bf16)));
    CUDA_CHECK(cudaMalloc(&d_part, size_t(a.heads) * a.splits * (d + 2) * sizeof(float)));
    fill(d_q, a.heads * d, s, kQ);
    fill(d_K, kv, s, kK);
    fill(d_V, kv, s, kV);
    a.q = d_q;
    a.K = d_K;
    a.V = d_V;
    a.o = d_o;
    a.partial = d_part;
    CUDA_CHECK(cudaMemset(d_o, 0xFF, a.heads * d * sizeof(bf16)));
    rung7::launch(a);
    const verify::host_vector<float> all = copy_out(d_o, a.heads * d);
    std::vector<int64_t> heads_checked;  // every head when small, else 8 spread out
    const int64_t hc = std::min<int64_t>(a.heads, 8);
    for (int64_t k = 0; k < hc; ++k) heads_checked.push_back(hc == 1 ? 0 : k * (a.heads - 1) / (hc - 1));
    std::vector<double> ref(heads_checked.size() * d);
    std::vector<float> got;
    for (int64_t h : heads_checked) got.insert(got.end(), all.begin() + h * d, all.begin() + (h + 1) * d);
    // One checked head per host thread: each regenerates its q, K, V and computes its row.
    verify::parallel_for(int64_t(heads_checked.size()), [&](int64_t k) {
        const int64_t h = heads_checked[size_t(k)];
        const verify::host_vector<float> q = host_values(s, kQ, size_t(h) * d, d),
                                         K = host_values(s, kK, size_t(h) * N * d, size_t(N) * d),
                                         V = host_values(s, kV, size_t(h) * N * d, size_t(N) * d);
        verify::attention_reference_row(q.data(), K.data(), V.data(), N, d, a.scale, ref.data() + k * d);
    });
    const std::string tag = "N=" + std::to_string(N) + ", d=" + std::to_string(d) + ", " + std::to_string(a.heads) +
                            " heads, " + std::to_string(a.splits) + " splits";
    c.check(got, ref.data(),
            std::string(rung7.name) + " vs CPU, " + std::to_string(heads_checked.size()) + " heads, " + tag);
    if (timed) {
        const double ms = lesson::time_median_ms(c.repeat, [&] { rung7::launch(a); });
        const double bytes = 2.0 * kv * sizeof(bf16) + 2.0 * a.heads * d * sizeof(bf16);  // K, V, q, o
        const std::string name = std::string(rung7.name) + " @" + tag;
        const std::string in_l2 = lesson::l2_note(bytes, c.prop);
        c.report.variant_yardstick(name, ms, bytes / (ms * 1e6), "GB/s", c.copy_gbps, "copy", in_l2);
        c.report.work(name, 4.0 * N * d * a.heads, bytes, ms);
        if (N == 65536) c.report.target("decode vs copy, " + tag, bytes / (ms * 1e6) / c.copy_gbps, 0.85, "x");
    }
    for (void* x : {(void*)d_q, (void*)d_K, (void*)d_V, (void*)d_o, (void*)d_part}) CUDA_CHECK(cudaFree(x));
}

// Part 4: at every d where rung 7 runs, N = 257 on 5 heads (a small exact check), then the timed
// --decode-n on --decode-batch x --decode-heads heads.
static void decode_part(Context& c, const Rung& rung7, const std::vector<int>& ds, int64_t decode_n, int64_t dbh) {
    const std::vector<int> decode_ns = {257, int(decode_n)};  // a small exact check, then the timed size
    for (int d : ds)
        for (int N : decode_ns) {
            if (!c.plan.runs(6, d)) continue;
            const bool timed = N == int(decode_n);
            run_decode(c, rung7, timed ? dbh : 5, N, d, timed);
        }
}
