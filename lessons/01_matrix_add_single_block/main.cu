// Lesson 01 of the course (00-24): 2D matrix add in one 16x16 block.
// Before: lesson 00 (00_vector_add). Next: lesson 02 (02_matrix_add_multi_block).
// Run: ./build/bin/matrix_add_single_block [--quick]   (--help lists every flag; README.md is the handout)
//
// 2D matrix add in one 16x16 block.
//
// A 16x16 matrix, one block of 16x16 threads: thread (x, y) adds element
// (row = y, col = x). --rows and --cols (1..32 each) pick any shape that fits
// one block of at most 1024 threads. threadIdx.x runs along a row, the contiguous direction
// of a row-major matrix, so neighbouring threads of a warp touch neighbouring
// addresses (coalescing). The original text maps threadIdx.x to the row; that
// kernel is here too, for comparison. Lesson 01 of the course: lesson 00 added
// vectors, lesson 02 covers any N with a grid of blocks.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "common/ceilings.h"
#include "common/check.h"
#include "common/device.h"
#include "common/flags.h"
#include "common/report.h"
#include "common/timer.h"
#include "verify/compare.h"
#include "verify/elementwise.h"
#include "verify/random.h"

constexpr int64_t kMaxSide = 32;  // rows, cols <= 32: at most 32 x 32 = 1024 threads, one block's limit

// threadIdx.x -> column: a warp (32 consecutive threads = two rows of 16)
// reads 32 consecutive floats: 128 bytes, 4 sectors of 32 bytes.
// The block is exactly cols x rows threads: one thread per element, no bounds to check.
__global__ void addMatrices(const float* A, const float* B, float* C, int rows, int cols) {
    // EXERCISE 1 BEGIN: thread (x, y) adds element (row = y, col = x) of the rows x cols row-major matrices
    // HINT: threadIdx.x runs along a row (the contiguous direction), threadIdx.y down the columns
    // HINT: row-major: element (row, col) is at row * (elements per row) + col; test a non-square shape
    int col = threadIdx.x;
    int row = threadIdx.y;
    int idx = row * cols + col;  // row-major: a row holds cols elements
    C[idx] = A[idx] + B[idx];
    // EXERCISE 1 END
}

// The original text's mapping, threadIdx.x -> row: the same warp reads 16
// rows N floats apart, two neighbouring columns (one per half-warp): 16
// sectors per load instead of 4. Correct, but uncoalesced (lesson 02 measures it).
// Launched with a rows x cols block (x runs over the rows).
__global__ void addMatricesRowMapped(const float* A, const float* B, float* C, int cols) {
    int row = threadIdx.x;
    int col = threadIdx.y;
    int idx = row * cols + col;
    C[idx] = A[idx] + B[idx];
}

int main(int argc, char** argv) {
    lesson::CommonOptions opt;
    int64_t rows = 16, cols = 16;
    lesson::Cli cli("matrix_add_single_block",
                    "Adds two rows x cols matrices (default 16x16) with one block of cols x rows threads\n"
                    "(2D thread indices): any shape up to 32 x 32, the 1024 threads one block can hold.");
    lesson::add_common_flags(cli, opt);
    cli.add_int("rows", &rows, 1, kMaxSide, "rows of the matrices (threadIdx.y; rows * cols <= 1024 threads)");
    cli.add_int("cols", &cols, 1, kMaxSide, "columns of the matrices (threadIdx.x; rows * cols <= 1024 threads)");
    cli.parse_or_exit(argc, argv);

    cudaDeviceProp prop = lesson::pick_device(opt.device);
    lesson::Report report("01_matrix_add_single_block");
    report.device(prop.name, prop.major, prop.minor, prop.multiProcessorCount, prop.totalGlobalMem / 1e9);
    const std::string shape = std::to_string(rows) + "x" + std::to_string(cols);
    report.config("rows", rows);
    report.config("cols", cols);
    report.config("block", std::to_string(cols) + "x" + std::to_string(rows) + " threads (x by y)");
    report.config("seed", opt.seed);

    // Host matrices with random values: 1 + 2 = 3 everywhere would hide a wrong index.
    const size_t count = size_t(rows) * cols, bytes = count * sizeof(float);
    std::vector<float> h_A(count), h_B(count), h_C(count), h_C_rowmapped(count);
    verify::fill_uniform(h_A.data(), count, opt.seed);
    verify::fill_uniform(h_B.data(), count, opt.seed + 1);

    float *d_A, *d_B, *d_C;
    CUDA_CHECK(cudaMalloc(&d_A, bytes));
    CUDA_CHECK(cudaMalloc(&d_B, bytes));
    CUDA_CHECK(cudaMalloc(&d_C, bytes));
    CUDA_CHECK(cudaMemcpy(d_A, h_A.data(), bytes, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_B, h_B.data(), bytes, cudaMemcpyHostToDevice));

    // One block of cols x rows threads (x along a row): dim3 carries the 2D shape.
    const int nrows = static_cast<int>(rows), ncols = static_cast<int>(cols);
    dim3 threads(ncols, nrows);
    dim3 threadsRowMapped(nrows, ncols);  // the text's mapping: x runs over the rows
    dim3 blocks(1, 1);

    CUDA_CHECK(cudaMemset(d_C, 0xFF, bytes));  // NaN poison: unwritten elements fail
    addMatrices<<<blocks, threads>>>(d_A, d_B, d_C, nrows, ncols);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaMemcpy(h_C.data(), d_C, bytes, cudaMemcpyDeviceToHost));

    CUDA_CHECK(cudaMemset(d_C, 0xFF, bytes));
    addMatricesRowMapped<<<blocks, threadsRowMapped>>>(d_A, d_B, d_C, ncols);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaMemcpy(h_C_rowmapped.data(), d_C, bytes, cudaMemcpyDeviceToHost));

    // A single block is all launch overhead: time it to see that floor, two ways.
    // Back to back (a burst of launches between one event pair): what one launch costs the GPU
    // when launches queue up. One launch per event pair (min_sample_ms = 0): what a lone launch
    // costs, launch latency included.
    auto launch = [&] {
        addMatrices<<<blocks, threads>>>(d_A, d_B, d_C, nrows, ncols);
        CUDA_CHECK_LAUNCH();
    };
    const int repeat = static_cast<int>(opt.repeat);
    double ms = lesson::time_median_ms(repeat, launch);
    double ms_alone = lesson::time_median_ms(repeat, launch, 0, 2, /*min_sample_ms=*/0.0);
    double ms_rowmapped = lesson::time_median_ms(repeat, [&] {
        addMatricesRowMapped<<<blocks, threadsRowMapped>>>(d_A, d_B, d_C, ncols);
        CUDA_CHECK_LAUNCH();
    });

    CUDA_CHECK(cudaFree(d_A));
    CUDA_CHECK(cudaFree(d_B));
    CUDA_CHECK(cudaFree(d_C));

    if (opt.inject_fault) verify::inject_fault(h_C.data(), count, opt.seed);

    lesson::HostTimer cpu;
    std::vector<double> ref(count);
    verify::add_reference(h_A.data(), h_B.data(), ref.data(), count);
    report.cpu_reference_ms(cpu.ms());
    report.check(verify::compare(h_C.data(), ref.data(), count, 1e-5, "addMatrices (x -> column), every element"));
    report.check(verify::compare(h_C_rowmapped.data(), ref.data(), count, 1e-5,
                                 "addMatricesRowMapped (x -> row), every element"));

    // Print a corner so the learner sees real numbers, not just a verdict.
    std::printf("C[0][0..%d] =", int(std::min<size_t>(count, 4)) - 1);
    for (size_t i = 0; i < std::min<size_t>(count, 4); ++i) std::printf(" %.6f", h_C[i]);
    std::printf(" (A[0][0] + B[0][0] = %.6f)\n", double(h_A[0]) + double(h_B[0]));

    // 3 KB (at 16x16) on 1 of the GPU's SMs: no bandwidth bound applies, the time is the launch itself.
    report.timing(lesson::kTimingMethod);
    const double moved = 3.0 * bytes;
    report.variant("addMatrices, 1 block, back to back", ms, moved / (ms * 1e6), "GB/s");
    report.variant("addMatrices, 1 block, one launch per event pair", ms_alone, moved / (ms_alone * 1e6), "GB/s");
    report.variant("addMatricesRowMapped, 1 block, back to back", ms_rowmapped, moved / (ms_rowmapped * 1e6), "GB/s");
    report.note("one " + shape +
                " block uses 1 of the GPU's SMs for a few microseconds: the time is launch cost, "
                "not memory bandwidth, so no bound is graded (lesson 02 fills the GPU)");
    char key[96];
    std::snprintf(key, sizeof key, "%s add in one block: %.1f us per launch back to back, %.1f us alone", shape.c_str(),
                  ms * 1e3, ms_alone * 1e3);
    report.key_result(key);
    report.default_size(cli.at_default_size());
    return report.finish(opt.json);
}
