// Lesson NN of the course (00-24): <title>.
// Before: lesson MM (MM_name). Next: lesson PP (PP_name).
// Run: ./build/bin/lesson_template [--quick]   (--help lists every flag; README.md is the handout)
//
// TEMPLATE: <one line on what it teaches>.
//
// TEMPLATE: the starting point of a new lesson (docs/adding-a-lesson.md).
// Copy this folder to lessons/NN_name/ and replace every "TEMPLATE:" part.
// It is a complete lesson already: y[i] = 2 x[i] + 1 on random floats, checked
// against a double-precision CPU reference and timed against the DRAM bound of
// its read/write mix (1 read : 1 write). CTest builds it as `lesson_template`.
//
// TEMPLATE: the header above says where this lesson sits in the course (what
// came before, what comes next) and the command that runs it; sizes to try:
// Run: ./build/bin/lesson_template            (n = 2^26 floats)
//      ./build/bin/lesson_template --quick    (n = 2^20: fits in L2, nothing graded)
// See README.md.
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "common/ceilings.h"
#include "common/check.h"
#include "common/device.h"
#include "common/flags.h"
#include "common/launch.h"
#include "common/memory.h"
#include "common/report.h"
#include "common/timer.h"
#include "verify/compare.h"
#include "verify/parallel.h"
#include "verify/random.h"

// TEMPLATE: the lesson's kernel(s). A ladder keeps one file per rung in
// kernels/N_name.cuh and lists the rungs in one table here (see lesson 16).
// One thread per element; the index is size_t, so n may pass 2^31.
__global__ void scaleShift(const float* x, float* y, size_t n) {
    size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    // EXERCISE 1 BEGIN: make the kernel compute y[i] = a x[i] + b with a and b as kernel arguments
    if (i < n) y[i] = 2.0f * x[i] + 1.0f;  // the bounds check: the last block may be partly outside
    // EXERCISE 1 END
}

// TEMPLATE: the CPU reference, in double precision. A lesson's reference goes
// in verify/include/verify/<topic>.h, with its CPU test in
// verify/tests/test_<topic>.cpp; this one is small enough to stay here.
static void scale_shift_reference(const float* x, double* ref, size_t n) {
    verify::parallel_blocks(n, verify::items_per_block(1), [=](uint64_t begin, uint64_t end) {
        for (uint64_t i = begin; i < end; ++i) ref[i] = 2.0 * double(x[i]) + 1.0;
    });
}

int main(int argc, char** argv) {
    // 1. Flags first: bad input exits 2 before any CUDA call.
    lesson::CommonOptions opt;
    int64_t n = int64_t(1) << 26, threads = 256;
    // TEMPLATE: the executable's name (the folder's without its number) and a one-line summary.
    lesson::Cli cli("lesson_template", "y = 2 x + 1 on n random floats: the skeleton of a lesson.");
    lesson::add_common_flags(cli, opt);
    // TEMPLATE: the lesson's own flags, each with its range (and a --quick value for size flags).
    cli.add_int("n", &n, 1, int64_t(1) << 34, "elements of x and y", int64_t(1) << 20);
    cli.add_int("threads", &threads, 32, 1024, "threads per block (a multiple of 32)");
    cli.parse_or_exit(argc, argv);
    // Checks one range cannot express: one clear line naming the flag, exit 2.
    if (threads % 32 != 0)
        lesson::bad_input("--threads=" + std::to_string(threads) +
                          " is not a multiple of 32; allowed: 32, 64, ..., 1024");

    // 2. Memory checks, then the device. Host: x and y as floats, the reference
    // as doubles (16 bytes per element). Device: x and y (8 bytes per element).
    const size_t N = static_cast<size_t>(n);
    const std::string size_flag = "--n=" + std::to_string(n);
    lesson::require_host_memory(N * (2 * sizeof(float) + sizeof(double)), "pageable", size_flag);
    cudaDeviceProp prop = lesson::pick_device(opt.device);  // exit 77 (SKIP) without a GPU
    lesson::require_device_memory(N * 2 * sizeof(float), size_flag);

    // TEMPLATE: the report's name is the folder's name, "NN_name".
    lesson::Report report("_template");
    report.device(prop);
    report.config_from(cli);  // every flag as parsed: n, threads, repeat, seed, ...

    // 3. Random inputs (never constants: 1 + 2 = 3 everywhere hides wrong indexing).
    std::vector<float> h_x(N), h_y(N);
    verify::fill_uniform(h_x.data(), N, uint64_t(opt.seed));

    // 4. Allocate, copy in, poison the output (0xFF bytes are NaN floats: an
    // element the kernel never writes fails the check).
    float *d_x = nullptr, *d_y = nullptr;
    CUDA_CHECK(cudaMalloc(&d_x, N * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_y, N * sizeof(float)));
    CUDA_CHECK(cudaMemcpy(d_x, h_x.data(), N * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemset(d_y, 0xFF, N * sizeof(float)));

    // 5. Launch (ceil-divide the grid), copy the result back: this copy is what gets verified.
    const unsigned blocks = static_cast<unsigned>(lesson::ceil_div(N, uint64_t(threads)));
    scaleShift<<<blocks, unsigned(threads)>>>(d_x, d_y, N);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaMemcpy(h_y.data(), d_y, N * sizeof(float), cudaMemcpyDeviceToHost));
    if (opt.inject_fault) verify::inject_fault(h_y.data(), uint64_t(N), uint64_t(opt.seed));  // must FAIL

    // 6. Time it: relaunch (it rewrites the same values), median of --repeat.
    const double ms = lesson::time_median_ms(int(opt.repeat), [&] {
        scaleShift<<<blocks, unsigned(threads)>>>(d_x, d_y, N);
        CUDA_CHECK_LAUNCH();
    });

    // 7. Free device memory.
    CUDA_CHECK(cudaFree(d_x));
    CUDA_CHECK(cudaFree(d_y));

    // 8. Verify every element against the CPU reference (fp32 elementwise: rel-L2 <= 1e-5).
    lesson::HostTimer cpu;
    std::vector<double> ref(N);
    scale_shift_reference(h_x.data(), ref.data(), N);
    report.cpu_reference_ms(cpu.ms(), verify::host_threads());
    report.check(verify::compare(h_y.data(), ref.data(), N, 1e-5, "y = 2 x + 1, every element"));

    // 9. Report against the DRAM bound of the kernel's mix (1 read : 1 write),
    // measured now; ungraded where the data fit in L2 (--quick).
    // TEMPLATE: the bound or yardstick that fits the lesson (docs/measuring.md).
    const lesson::StreamBound dram = lesson::measure_stream_bound(prop, 1, 1);
    lesson::add_bound(report, dram, int(opt.device));
    report.timing(lesson::kTimingMethod);
    const double bytes = 2.0 * double(N) * sizeof(float);  // read x once, write y once
    const std::string in_l2 = lesson::l2_note(bytes, prop);
    const double gbps = bytes / (ms * 1e6);
    report.variant_bound("scaleShift kernel", ms, gbps, "GB/s", dram.gbps, "DRAM bound", in_l2);
    char key[96];
    std::snprintf(key, sizeof key, "scaleShift %.0f GB/s at n=%lld", gbps, (long long)n);
    report.key_result(key, gbps / dram.gbps, "DRAM bound", lesson::Against::Bound, in_l2);
    // TEMPLATE: the lesson's benchmark targets, graded at the default size only.
    report.default_size(cli.at_default_size());
    report.target("scaleShift of the DRAM bound", gbps / dram.gbps, 0.90);
    return report.finish(opt.json);
}
