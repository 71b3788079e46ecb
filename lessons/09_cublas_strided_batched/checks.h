// Lesson 09 of the course (cuBLAS strided-batched): the size checks before any CUDA call and the
// checks of every run. Each chunk's reference comes from that chunk's inputs alone: the sum of
// every product's elements (verify/gemm_checksum.h) and a few whole products in double.
// Before: main.cu runs the batch resident, staged and just in time. Next: the report (summary.cuh).
// Run: ./build/bin/cublas_strided_batched [--quick]   (README.md is the handout)
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "common/flags.h"
#include "common/launch.h"
#include "common/memory.h"
#include "common/report.h"
#include "verify/compare.h"
#include "verify/gemm_checksum.h"
#include "verify/matmul.h"
#include "verify/parallel.h"

#include "slots.cuh"

// The flags that set the sizes, named where a memory check fails.
constexpr const char* kSizeFlags = "--n/--batch/--chunk/--streams";

// Bad flags and sizes exit 2 before any CUDA call. Returns the device bytes the larger part needs:
// the resident batch, or the slots of the pipeline (workspaces included) and the link test.
inline uint64_t require_sizes(int64_t n, int64_t batch, int64_t chunk, int64_t streams, int64_t samples) {
    if (chunk > batch)
        lesson::bad_input("--chunk=" + std::to_string(chunk) + " exceeds --batch=" + std::to_string(batch) +
                          "; allowed: 1 to --batch");
    if (samples > chunk)
        lesson::bad_input("--samples=" + std::to_string(samples) + " exceeds --chunk=" + std::to_string(chunk) +
                          "; allowed: 1 to --chunk");
    const uint64_t nn = uint64_t(n) * n, mat_bytes = nn * sizeof(float);
    const uint64_t chunks = lesson::plan_chunks(uint64_t(batch), uint64_t(chunk)).count;
    const uint64_t S = uint64_t(streams), chunk_bytes = uint64_t(chunk) * mat_bytes;  // one of A, B, C per chunk
    // Pinned: the staged batch (A, B, C), the slots of the just-in-time run, the link test; plus the sampled references.
    const uint64_t pinned = uint64_t(batch) * 3 * mat_bytes + S * 3 * chunk_bytes + 2 * chunk_bytes;
    lesson::require_host_memory(pinned + chunks * uint64_t(samples) * nn * sizeof(double), "pinned", kSizeFlags);
    return std::max(uint64_t(batch) * 3 * mat_bytes, S * (3 * chunk_bytes + kWorkspaceBytes) + 2 * chunk_bytes);
}

// The CPU's side of the check for one chunk, computed from that chunk's inputs only.
struct ChunkReference {
    std::vector<double> sums;       // sum of every product's elements, O(n^2) each (verify/gemm_checksum.h)
    std::vector<uint64_t> sampled;  // products (index within the chunk) checked element by element
    std::vector<double> products;   // their double-precision products, n*n each
};

static ChunkReference reference_for_chunk(const float* A, const float* B, int64_t n, lesson::Chunk c, int64_t samples,
                                          uint64_t seed) {
    const uint64_t nn = uint64_t(n) * n;
    ChunkReference ref;
    for (uint64_t p = 0; p < c.count; ++p)
        ref.sums.push_back(verify::matmul_sum_reference(A + p * nn, B + p * nn, n, n, n));
    std::vector<uint64_t> pick(c.count);  // `samples` distinct products of this chunk, from the seed
    std::iota(pick.begin(), pick.end(), uint64_t(0));
    std::mt19937_64 rng(seed * 1000003 + c.index);
    const uint64_t s = std::min<uint64_t>(uint64_t(samples), c.count);
    for (uint64_t i = 0; i < s; ++i) std::swap(pick[i], pick[i + rng() % (c.count - i)]);
    ref.sampled.assign(pick.begin(), pick.begin() + s);
    ref.products.resize(s * nn);
    for (uint64_t i = 0; i < s; ++i) {
        const uint64_t p = ref.sampled[i];
        verify::matmul_reference(A + p * nn, B + p * nn, ref.products.data() + i * nn, n, n, n);
    }
    return ref;
}

// The references of every chunk of the staged batch. One chunk per host thread where there are
// at least as many chunks as threads (the helpers inside then run inline, each sum and product
// the same loop as on all cores): a chunk's O(n^2) sums and few products are too little work to
// spread over every core one chunk at a time.
inline std::vector<ChunkReference> references_for_batch(const float* h_A, const float* h_B, int64_t n,
                                                        const lesson::ChunkPlan& plan, int64_t samples, uint64_t seed) {
    const uint64_t nn = uint64_t(n) * n;
    std::vector<ChunkReference> refs(plan.count);
    verify::parallel_for(
        int64_t(plan.count),
        [&](int64_t c) {
            const lesson::Chunk ch = plan.at(uint64_t(c));
            refs[c] = reference_for_chunk(h_A + ch.first * nn, h_B + ch.first * nn, n, ch, samples, seed);
        },
        plan.count >= uint64_t(verify::host_threads()) ? 0 : 1);
    return refs;
}

// One run of the batch, checked chunk by chunk. The scales are the RMS that an
// element of C (sqrt(n)/3) and the sum of C (n*sqrt(n)/3) have for inputs
// uniform in [-1, 1): errors are judged against the size of what is summed.
struct BatchCheck {
    verify::Comparer sums, products;
    uint64_t sampled = 0;
    explicit BatchCheck(int64_t n)
        : sums(1e-4, double(n) * std::sqrt(double(n)) / 3.0), products(1e-4, std::sqrt(double(n)) / 3.0) {}
    // The sums of the GPU's products on `threads` host threads (0: all cores); each sum is the same
    // single loop whichever thread runs it, so the check comes out the same for any count.
    void add(const float* C, int64_t n, const lesson::Chunk& c, const ChunkReference& ref, int threads = 1) {
        const uint64_t nn = uint64_t(n) * n;
        std::vector<double> gpu_sums(c.count);
        verify::parallel_for(
            int64_t(c.count), [&](int64_t p) { gpu_sums[p] = verify::sum_of(C + p * nn, nn); }, threads);
        sums.add(gpu_sums.data(), ref.sums.data(), c.count, c.first);  // bad index = product index
        for (size_t i = 0; i < ref.sampled.size(); ++i) {
            const uint64_t p = ref.sampled[i];
            products.add(C + p * nn, ref.products.data() + i * nn, nn, (c.first + p) * nn);
        }
        sampled += ref.sampled.size();
    }
    void report_to(lesson::Report& report, const std::string& run, uint64_t batch) const {
        report.check(sums.result(
            run + ": sum of each of the " + std::to_string(batch) + " products vs sum_k colsum(A)*rowsum(B)", batch));
        report.check(products.result(run + ": " + std::to_string(sampled) + " sampled products, every element"));
    }
};

// The staged batch's C (h_C of `slots`) against the references of every chunk, on all host cores:
// outside any timed region.
inline void check_staged(lesson::Report& report, const Slots& slots, const std::vector<ChunkReference>& refs,
                         const std::string& run) {
    BatchCheck check(slots.n);
    for (uint64_t c = 0; c < slots.plan.count; ++c)
        check.add(slots.h_C + slots.plan.at(c).first * slots.nn, slots.n, slots.plan.at(c), refs[c], 0);
    check.report_to(report, run, slots.batch);
}
