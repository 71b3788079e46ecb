// Lesson 15 of the course (scan), the application: stream compaction on top of rung 6.
//
// Keep the elements that pass a test, in order, with no gaps: where does kept
// element i go? To the number of kept elements before it, which is an
// exclusive scan of the 0/1 flags. Three kernels:
//   1. flags[i] = 1 if in[i] > threshold, else 0
//   2. pos = exclusive scan of flags (rung 6, single_pass::scan)
//   3. every kept element writes itself to kept[pos[i]]; the count is
//      pos[n-1] + flags[n-1]
// This moves read n + write n (flags), read n + write n (scan), read 2n + write
// k (scatter), where one pass that reads n and writes the k kept elements would
// do: cub::DeviceSelect::If is that one pass (README: "Compaction").
// Before: rung 6. Next: lesson 16 (histograms: atomics and contention).
// Run: ./build/bin/scan --rung=6 --threshold=500   (README.md is the handout)
#pragma once
#include <cuda_runtime.h>
#include <cstddef>
#include "6_single_pass.cuh"
#include "common/check.h"

namespace compact {

constexpr int kThreads = 256;  // 4 elements per thread, 16-byte loads

// The test, shared with cub::DeviceSelect::If (compaction.cuh).
struct Above {
    int threshold;
    __host__ __device__ bool operator()(const int& x) const { return x > threshold; }
};

__global__ void __launch_bounds__(kThreads)
    flagKept(const int* __restrict__ in, unsigned* __restrict__ flags, size_t n, Above keep) {
    const size_t i = (size_t(blockIdx.x) * kThreads + threadIdx.x) * 4;
    if (i + 4 <= n) {
        const int4 v = *reinterpret_cast<const int4*>(in + i);
        *reinterpret_cast<uint4*>(flags + i) = make_uint4(keep(v.x), keep(v.y), keep(v.z), keep(v.w));
    } else {
        for (size_t j = i; j < n; ++j) flags[j] = keep(in[j]);
    }
}

__global__ void __launch_bounds__(kThreads)
    scatterKept(const int* __restrict__ in, const unsigned* __restrict__ pos, size_t n, Above keep,
                int* __restrict__ kept, unsigned long long* __restrict__ count) {
    const size_t i = (size_t(blockIdx.x) * kThreads + threadIdx.x) * 4;
    int x[4] = {0, 0, 0, 0};
    unsigned p[4] = {0, 0, 0, 0};
    if (i + 4 <= n) {
        const int4 v = *reinterpret_cast<const int4*>(in + i);
        const uint4 q = *reinterpret_cast<const uint4*>(pos + i);
        x[0] = v.x, x[1] = v.y, x[2] = v.z, x[3] = v.w;
        p[0] = q.x, p[1] = q.y, p[2] = q.z, p[3] = q.w;
    } else {
        for (int c = 0; c < 4; ++c)
            if (i + c < n) x[c] = in[i + c], p[c] = pos[i + c];
    }
    for (int c = 0; c < 4; ++c)
        if (i + c < n && keep(x[c])) kept[p[c]] = x[c];
    // The thread holding the last element knows the total.
    if (i < n && n - 1 < i + 4) *count = p[n - 1 - i] + (keep(x[n - 1 - i]) ? 1u : 0u);
}

// (Exercise 4 of the handout: fuse the three kernels into one single-pass kernel, rung 6's with the
// test applied on load and the scatter on store, that reads n and writes only the kept elements.)
// Compacts in[0..n): kept[0..count) = the elements > threshold, in order; *count on the device.
// flags and pos: n elements each; workspace: single_pass::workspace_bytes(n) bytes.
inline void compact(const int* in, size_t n, Above keep, unsigned* flags, unsigned* pos, int* kept,
                    unsigned long long* count, void* workspace, cudaStream_t stream) {
    const unsigned blocks = static_cast<unsigned>((n + 4 * size_t(kThreads) - 1) / (4 * size_t(kThreads)));
    flagKept<<<blocks, kThreads, 0, stream>>>(in, flags, n, keep);
    CUDA_CHECK_LAUNCH();
    single_pass::scan<unsigned>(flags, pos, n, /*exclusive=*/true, workspace, stream);
    scatterKept<<<blocks, kThreads, 0, stream>>>(in, pos, n, keep, kept, count);
    CUDA_CHECK_LAUNCH();
}

}  // namespace compact
