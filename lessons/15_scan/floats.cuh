// Lesson 15 of the course (scan), part 3: the float scans. Rungs 4-8 (the whole array) and
// CUB on random floats, each element within the rounding bound of its order of additions, then
// on exactly summable floats (1 and 2), each element the int scan's bits.
// Before: parts 1 and 2, int32 (main.cu, compaction.cuh). Next: the summary (summary.cuh).
// Run: ./build/bin/scan --rung=4   (README.md is the handout)
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "common/check.h"
#include "common/flags.h"
#include "common/report.h"
#include "common/timer.h"
#include "verify/random.h"
#include "verify/scan.h"

// h_out: the pinned buffer (n floats) the results come back to. Adds the float ladder's times
// to `timed`. Returns the CPU references' time.
static double run_float_scans(lesson::Report& report, void* d_work, size_t work_bytes, void* h_out, size_t N,
                              const lesson::CommonOptions& opt, int rung, std::vector<Timed>& timed) {
    const size_t bytes = N * 4;
    verify::host_vector<float> h_in(N);  // not zeroed: filled before read
    verify::host_vector<double> h_ref(N);
    verify::fill_uniform(h_in.data(), N, opt.seed + 1);  // uniform in [-1, 1)
    lesson::HostTimer cpu;
    verify::inclusive_scan_reference(h_in.data(), h_ref.data(), N);
    double cpu_ms = cpu.ms();
    // Sum |x| before each block of the input: the checks' bound, the same for every result.
    const std::vector<double> abs_before = verify::abs_sums_before_blocks(h_in.data(), N);
    float *d_in = nullptr, *d_out = nullptr;
    CUDA_CHECK(cudaMalloc(&d_in, bytes));
    CUDA_CHECK(cudaMalloc(&d_out, bytes));
    CUDA_CHECK(cudaMemcpy(d_in, h_in.data(), bytes, cudaMemcpyHostToDevice));
    // CUB: tiles of at least 1024 items (128 threads x 8 or more on sm_70-sm_90), so at most
    // 64 + 3 * n / 1024 roundings per input by the same count as rung 6's.
    const uint64_t cub_depth = 64 + 3 * ((N + 1023) / 1024);
    run_ladder<float>(
        "float", d_in, d_out, static_cast<float*>(h_out), N, d_work, work_bytes, rung, int(opt.repeat), 0xFF,
        timed,  // 0xFF bytes are a NaN, never a right float
        [&](const float* got, bool exclusive, const Rung* r) {
            const uint64_t d = r ? r->rounding_depth(N) : cub_depth;
            const double tol = verify::scan_float_tolerance(d, N);
            const std::string what = std::string("float ") + (exclusive ? "exclusive, " : "inclusive, ") +
                                     (r ? r->name : "cub::DeviceScan") + ": every element, |gpu - ref| <= tol * " +
                                     "sum|x| (d = " + std::to_string(d) + ")";
            report.check(verify::check_float_scan(got, h_in.data(), h_ref.data(), N, exclusive, tol, abs_before, what));
        });

    // The exact float test: integers 1 and 2 as floats, n_exact = min(n, 2^23 - 1) of them.
    // Every sum of inputs that any scan forms (a tile's total, a look-back window, a prefix
    // plus an offset) is then an integer of at most 2^24, which a float holds exactly
    // (verify/scan.h), so every element of every float scan must be the int scan's value,
    // bit for bit. The bound above grows along the array, and a prefix error below it
    // passes there; here nothing does. The new input replaces the old in d_in.
    verify::host_vector<float>().swap(h_in);  // checked: the host buffers are done with
    verify::host_vector<double>().swap(h_ref);
    const size_t m = std::min<size_t>(N, verify::kExactFloatMaxN);
    verify::host_vector<float> h_exact(m);
    verify::host_vector<int32_t> h_exact_ints(m), h_exact_ref(m);
    verify::fill_exact_floats(h_exact.data(), h_exact_ints.data(), m, opt.seed + 2);
    cpu.reset();
    verify::inclusive_scan_reference(h_exact_ints.data(), h_exact_ref.data(), m);
    const verify::ExactSum exact = verify::exact_sum(h_exact_ints.data(), m);
    cpu_ms += cpu.ms();
    float* h_got = static_cast<float*>(h_out);
    CUDA_CHECK(cudaMemcpy(d_in, h_exact.data(), m * sizeof(float), cudaMemcpyHostToDevice));
    bool injected_exact = false;
    for (bool exclusive : {true, false})
        for (int r = -1; r < kRungCount; ++r) {  // -1: CUB, then the float rungs
            const Rung* fr = r < 0 ? nullptr : &kRungs[r];
            if (fr != nullptr && (fr->scan_float == nullptr || (rung != 0 && rung != r + 1))) continue;
            CUDA_CHECK(cudaMemset(d_out, 0xFF, m * sizeof(float)));
            if (fr != nullptr) fr->scan_float(d_in, d_out, m, exclusive, d_work, 0);
            else cub_scan(d_in, d_out, m, exclusive, d_work, work_bytes);
            CUDA_CHECK(cudaMemcpy(h_got, d_out, m * sizeof(float), cudaMemcpyDeviceToHost));  // waits
            if (opt.inject_fault && !injected_exact && fr != nullptr)
                injected_exact = verify::inject_fault(h_got, m, opt.seed) < m;
            const std::string what = std::string("float ") + (exclusive ? "exclusive, " : "inclusive, ") +
                                     (fr ? fr->name : "cub::DeviceScan") + ", floats 1 and 2, n=" + std::to_string(m) +
                                     ": every element, the int scan's bits";
            report.check(verify::check_exact_float_scan(h_got, h_exact_ref.data(), m, exclusive, exact, what));
        }
    CUDA_CHECK(cudaFree(d_in));
    CUDA_CHECK(cudaFree(d_out));
    return cpu_ms;
}
