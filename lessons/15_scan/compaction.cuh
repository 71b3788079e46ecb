// Lesson 15 of the course (scan), part 2: stream compaction of part 1's int32 input, built on
// rung 6 (kernels/compact.cuh: flags, exclusive scan, scatter), against cub::DeviceSelect::If.
// Before: part 1, the int32 ladder (main.cu). Next: part 3, the float scans (floats.cuh).
// Run: ./build/bin/scan --rung=6 --threshold=500   (README.md is the handout)
#pragma once
#include <cub/cub.cuh>

#include <algorithm>
#include <string>
#include <vector>

#include "common/check.h"
#include "common/report.h"
#include "common/timer.h"
#include "verify/scan.h"

#include "kernels/compact.cuh"

// Compacts d_in (n int32) with ours and with CUB, checks the count and every kept element
// against the CPU (h_kept_ref: room for n), and adds both times to `timed`. d_out holds the
// flags' scan; h_got (pinned) takes the kept elements back. Returns the CPU reference's time.
static double run_compaction(lesson::Report& report, int* d_in, unsigned* d_out, int32_t* h_got, const int32_t* h_in,
                             int32_t* h_kept_ref, size_t N, const compact::Above& keep, void* d_work, size_t work_bytes,
                             int repeat, std::vector<Timed>& timed) {
    const size_t bytes = N * 4;
    unsigned* d_flags = nullptr;
    int* d_kept = nullptr;
    unsigned long long* d_count = nullptr;
    CUDA_CHECK(cudaMalloc(&d_flags, bytes));
    CUDA_CHECK(cudaMalloc(&d_kept, bytes));
    CUDA_CHECK(cudaMalloc(&d_count, sizeof(unsigned long long)));
    lesson::HostTimer cpu;
    const uint64_t ref_count = verify::compact_reference(h_in, N, keep.threshold, h_kept_ref);
    const double cpu_ms = cpu.ms();
    // Kept elements are inputs, in [-1000, 1000], whose only byte patterns are 0x00 (0) and 0xFF (-1):
    // the search returns 0x7F.
    const int poison = verify::absent_fill_byte({{h_kept_ref, ref_count}});
    double ms[2];
    for (int k = 0; k < 2; ++k) {  // 0: ours, 1: CUB
        const char* who = k == 0 ? "flags + scan + scatter" : "cub::DeviceSelect::If";
        auto launch = [&] {
            if (k == 0) compact::compact(d_in, N, keep, d_flags, d_out, d_kept, d_count, d_work, 0);
            else CUDA_CHECK(cub::DeviceSelect::If(d_work, work_bytes, d_in, d_kept, d_count, int64_t(N), keep));
        };
        CUDA_CHECK(cudaMemset(d_count, 0xFF, sizeof(unsigned long long)));  // never written: clamped to N + 1, wrong
        ms[k] = run_and_time(launch, d_kept, h_got, N, repeat, poison);
        unsigned long long count = 0;
        CUDA_CHECK(cudaMemcpy(&count, d_count, sizeof count, cudaMemcpyDeviceToHost));
        report.check(
            verify::check_compaction(h_got, std::min<unsigned long long>(count, N + 1), h_kept_ref, ref_count,
                                     std::string("compaction, ") + who + ": count and every kept element, exact"));
    }
    const double moved = 4.0 * N + 4.0 * ref_count;  // read n, write the kept ones
    timed.push_back({"compaction: cub::DeviceSelect::If", ms[1], moved / (ms[1] * 1e6), 0});
    timed.push_back({"compaction: flags + scan + scatter", ms[0], moved / (ms[0] * 1e6), moved / (ms[1] * 1e6)});
    report.metric("compaction: fraction kept", double(ref_count) / double(N), "");
    CUDA_CHECK(cudaFree(d_flags));
    CUDA_CHECK(cudaFree(d_kept));
    CUDA_CHECK(cudaFree(d_count));
    return cpu_ms;
}
