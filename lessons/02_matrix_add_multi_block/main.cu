// Lesson 02 of the course (00-24): 2D matrix add over many 16x16 blocks.
// Before: lesson 01 (01_matrix_add_single_block). Next: lesson 03 (03_batched_3d_grid).
// Run: ./build/bin/matrix_add_multi_block [--quick]   (--help lists every flag; README.md is the handout)
//
// 2D matrix add over many 16x16 blocks.
//
// First the original text's 256x256 matrix over a 16x16 grid of 16x16 blocks,
// then sizes that are not multiples of 16 (the grid is ceil-divided and the
// kernel checks bounds), then a rows x cols matrix large enough to measure
// bandwidth, where the text's thread mapping (threadIdx.x -> row) is timed
// against ours (threadIdx.x -> column). Lesson 02 of the course: lesson 01 used
// one block, lesson 03 adds a third grid dimension for a batch.
// Run: ./build/bin/matrix_add_multi_block [--n=12000 | --rows=R --cols=C]. See README.md.
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
#include "verify/elementwise.h"
#include "verify/parallel.h"
#include "verify/random.h"

constexpr int kTile = 16;  // 16x16 threads per block

// x runs along columns (contiguous in row-major memory): coalesced.
__global__ void addMatrices(const float* A, const float* B, float* C, int rows, int cols) {
    // EXERCISE 1 BEGIN: thread (x, y) of the grid adds element (row = y, col = x) of the rows x cols matrices
    // HINT: x runs along a row (the contiguous direction); edge blocks hang over the matrix on both sides
    // HINT: compute the flat index row * cols + col in size_t
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < rows && col < cols) {                          // the edge blocks hang over the matrix
        size_t idx = static_cast<size_t>(row) * cols + col;  // row * cols passes 2^31 for large matrices
        C[idx] = A[idx] + B[idx];
    }
    // EXERCISE 1 END
}

// The original text's mapping: x runs down the rows. A half-warp's 16 loads are
// `cols` floats apart (16 rows), and the two half-warps read neighbouring
// columns, so a warp-wide load touches 16 sectors of 32 bytes instead of 4.
// L1 keeps those sectors for the neighbouring threads that use the rest of them
// (README: L2 and DRAM see the same bytes as for addMatrices).
__global__ void addMatricesRowMapped(const float* A, const float* B, float* C, int rows, int cols) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    int col = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < rows && col < cols) {
        size_t idx = static_cast<size_t>(row) * cols + col;
        C[idx] = A[idx] + B[idx];
    }
}

// x -> column again, but each thread adds 4 neighbouring columns with 16-byte
// loads: 4x the bytes in flight per thread, which HBM needs to come close to
// its DRAM bound (Little's law, README). Rows start 16-byte aligned only when
// cols % 4 == 0; other widths take the scalar path (still correct, just slower).
__global__ void addMatricesVec4(const float* A, const float* B, float* C, int rows, int cols) {
    int col = 4 * (blockIdx.x * blockDim.x + threadIdx.x);
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= rows || col >= cols) return;
    size_t idx = static_cast<size_t>(row) * cols + col;
    if (cols % 4 == 0) {
        float4 a = *reinterpret_cast<const float4*>(A + idx);
        float4 b = *reinterpret_cast<const float4*>(B + idx);
        *reinterpret_cast<float4*>(C + idx) = make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
    } else {
        for (int c = 0; c < 4 && col + c < cols; ++c) C[idx + c] = A[idx + c] + B[idx + c];
    }
}

// The three thread mappings, one launcher each: the same 2D grid of 16x16 blocks, shaped by
// grid_of() for the mapping.
using Launcher = void (*)(dim3 blocks, dim3 threads, const float* A, const float* B, float* C, int rows, int cols);
static void launch_add_matrices(dim3 blocks, dim3 threads, const float* A, const float* B, float* C, int rows,
                                int cols) {
    addMatrices<<<blocks, threads>>>(A, B, C, rows, cols);
}
static void launch_add_matrices_row_mapped(dim3 blocks, dim3 threads, const float* A, const float* B, float* C,
                                           int rows, int cols) {
    addMatricesRowMapped<<<blocks, threads>>>(A, B, C, rows, cols);
}
static void launch_add_matrices_vec4(dim3 blocks, dim3 threads, const float* A, const float* B, float* C, int rows,
                                     int cols) {
    addMatricesVec4<<<blocks, threads>>>(A, B, C, rows, cols);
}

// One row per mapping: its name in the report, how its grid covers the matrix, its launcher.
struct Mapping {
    const char* name;
    bool x_is_row;        // x covers the rows (the text's mapping), else the columns
    int cols_per_thread;  // columns a thread adds (4 for float4 loads)
    Launcher launch;
};
constexpr Mapping kMappings[] = {
    {"addMatrices", false, 1, launch_add_matrices},
    {"addMatricesRowMapped", true, 1, launch_add_matrices_row_mapped},
    {"addMatricesVec4", false, 4, launch_add_matrices_vec4},
};
constexpr const Mapping& kXIsColumn = kMappings[0];
constexpr const Mapping& kXIsRow = kMappings[1];
constexpr const Mapping& kVec4 = kMappings[2];

constexpr int64_t kMaxSide = int64_t(lesson::kMaxGridYZ) * kTile;  // 65535 blocks of 16: 1,048,560

// The grid of 16x16 blocks for one mapping. x -> column: x covers the columns
// (a quarter of them for Vec4, 4 per thread), y the rows, so gridDim.y limits
// the rows to 1,048,560. x -> row: x covers the rows, y the columns.
// lesson::grid_for says ok = false instead of wrapping a dimension past its limit.
static lesson::Grid grid_of(const Mapping& mapping, int64_t rows, int64_t cols) {
    if (mapping.x_is_row) return lesson::grid_for(uint64_t(rows), uint64_t(cols), 1, kTile, kTile);
    return lesson::grid_for(uint64_t(cols), uint64_t(rows), 1, uint32_t(mapping.cols_per_thread * kTile), kTile);
}

struct Result {
    lesson::Check check;
    double ms = 0;  // median kernel time (0 when not timed)
};

// One rows x cols add: random A and B on the host and on the device, C on the device, and the
// double reference, made once and shared by every thread mapping that runs on it; h_C receives
// each mapping's C in turn.
struct Problem {
    int rows = 0, cols = 0;
    verify::host_vector<float> h_A, h_B, h_C;  // not zeroed on one core: filled, or touched in parallel, first
    verify::host_vector<double> ref;
    float *d_A = nullptr, *d_B = nullptr, *d_C = nullptr;
    double cpu_ms = 0;  // time of the reference
};

static Problem make_problem(int rows, int cols, uint64_t seed) {
    Problem p;
    p.rows = rows;
    p.cols = cols;
    const size_t count = size_t(rows) * cols, bytes = count * sizeof(float);
    p.h_A.resize(count);
    p.h_B.resize(count);
    p.h_C.resize(count);
    verify::touch_pages(p.h_C.data(), bytes);
    verify::fill_uniform(p.h_A.data(), count, seed + rows + 7 * cols);
    verify::fill_uniform(p.h_B.data(), count, seed + rows + 7 * cols + 1);
    CUDA_CHECK(cudaMalloc(&p.d_A, bytes));
    CUDA_CHECK(cudaMalloc(&p.d_B, bytes));
    CUDA_CHECK(cudaMalloc(&p.d_C, bytes));
    CUDA_CHECK(cudaMemcpy(p.d_A, p.h_A.data(), bytes, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(p.d_B, p.h_B.data(), bytes, cudaMemcpyHostToDevice));
    lesson::HostTimer cpu;
    p.ref.resize(count);
    verify::add_reference(p.h_A.data(), p.h_B.data(), p.ref.data(), count);
    p.cpu_ms = cpu.ms();
    return p;
}

static void free_problem(Problem& p) {
    CUDA_CHECK(cudaFree(p.d_A));
    CUDA_CHECK(cudaFree(p.d_B));
    CUDA_CHECK(cudaFree(p.d_C));
}

// Launch one mapping over a 2D grid, copy C out, verify it; then time it (repeat > 0).
static Result add_matrix(Problem& p, const Mapping& mapping, int repeat, bool inject, uint64_t seed) {
    const int rows = p.rows, cols = p.cols;
    const size_t count = size_t(rows) * cols, bytes = count * sizeof(float);
    const float *d_A = p.d_A, *d_B = p.d_B;
    float* d_C = p.d_C;
    CUDA_CHECK(cudaMemset(d_C, 0xFF, bytes));  // NaN poison: a C left by the previous mapping cannot pass

    // ceil(cols / 16) x ceil(rows / 16) blocks (x and y swapped for x -> row, a quarter of
    // the x blocks for Vec4). main() checked every grid's `ok` before any CUDA call.
    const dim3 threads(kTile, kTile);
    const lesson::Grid g = grid_of(mapping, rows, cols);
    const dim3 blocks(g.x, g.y);
    auto launch = [&] {
        mapping.launch(blocks, threads, d_A, d_B, d_C, rows, cols);
        CUDA_CHECK_LAUNCH();
    };
    launch();
    float* h_C = p.h_C.data();
    CUDA_CHECK(cudaMemcpy(h_C, d_C, bytes, cudaMemcpyDeviceToHost));

    Result r;
    if (repeat > 0) r.ms = lesson::time_median_ms(repeat, launch);
    if (inject) verify::inject_fault(h_C, count, seed);
    std::string what = std::to_string(rows) + "x" + std::to_string(cols) + " " + mapping.name + ", every element";
    r.check = verify::compare(h_C, p.ref.data(), count, 1e-5, what);
    return r;
}

// The small shapes: one problem, one mapping, verified and freed.
static lesson::Check add_small(int rows, int cols, const Mapping& mapping, uint64_t seed) {
    Problem p = make_problem(rows, cols, seed);
    Result r = add_matrix(p, mapping, 0, false, seed);
    free_problem(p);
    return r.check;
}

int main(int argc, char** argv) {
    lesson::CommonOptions opt;
    int64_t n = 12000, rows = 12000, cols = 12000;
    lesson::Cli cli("matrix_add_multi_block",
                    "Adds matrices over a 2D grid of 16x16 blocks: 256, 1000, 8191 squares, then a --rows x --cols\n"
                    "matrix (--n for a square one) for bandwidth, with both thread mappings and float4 loads.");
    lesson::add_common_flags(cli, opt);
    // gridDim.y <= 65535 blocks of 16 rows caps the rows at 1,048,560 (and the columns, for the
    // text's mapping, whose grid y covers the columns).
    cli.add_int("n", &n, 1, kMaxSide, "side of a square bandwidth run: sets --rows and --cols", 1024);
    cli.add_int("rows", &rows, 1, kMaxSide, "rows of the bandwidth run (gridDim.y <= 65535 blocks of 16 rows)", 1024);
    cli.add_int("cols", &cols, 1, kMaxSide, "columns of the bandwidth run", 1024);
    cli.parse_or_exit(argc, argv);
    if (cli.given("n")) {
        if (!cli.given("rows")) rows = n;
        if (!cli.given("cols")) cols = n;
    }
    const std::string shape = "--rows=" + std::to_string(rows) + " --cols=" + std::to_string(cols);
    for (const Mapping& m : kMappings)
        if (!grid_of(m, rows, cols).ok)
            lesson::bad_input(shape + " needs more than 65535 blocks in y for " + m.name +
                              "; allowed: rows and cols up to 1048560");

    const size_t big = size_t(rows) * size_t(cols);
    // Host, one run at a time: A, B, C as floats and the double reference (20 bytes per element).
    lesson::require_host_memory(big * (3 * sizeof(float) + sizeof(double)), "pageable", shape);
    cudaDeviceProp prop = lesson::pick_device(opt.device);
    lesson::require_device_memory(big * 3 * sizeof(float), shape);

    lesson::Report report("02_matrix_add_multi_block");
    report.device(prop.name, prop.major, prop.minor, prop.multiProcessorCount, prop.totalGlobalMem / 1e9);
    report.config("rows", rows);
    report.config("cols", cols);
    report.config("block", std::string("16x16"));
    report.config("repeat", opt.repeat);
    report.config("seed", opt.seed);

    // 1. The text's 256x256 (a 16x16 grid), then sizes that are not multiples of 16.
    for (int side : {256, 1000, 8191}) {
        if (opt.quick && side == 8191) continue;
        report.check(add_small(side, side, kXIsColumn, opt.seed));
    }
    report.check(add_small(1001, 1001, kVec4, opt.seed));  // the scalar path

    // 2. The bandwidth run: all three kernels, each verified. --inject-fault corrupts the first.
    // One problem (inputs, reference) serves all three; C is poisoned before each.
    Problem p = make_problem(static_cast<int>(rows), static_cast<int>(cols), opt.seed);
    const int repeat = static_cast<int>(opt.repeat);
    Result col = add_matrix(p, kXIsColumn, repeat, opt.inject_fault, opt.seed);
    Result row = add_matrix(p, kXIsRow, repeat, false, opt.seed);
    Result vec = add_matrix(p, kVec4, repeat, false, opt.seed);
    free_problem(p);
    report.check(col.check);
    report.check(row.check);
    report.check(vec.check);
    report.cpu_reference_ms(p.cpu_ms, verify::host_threads());

    // The DRAM bound of this read/write mix (2 reads : 1 write), measured now (not where the
    // data fit in L2: DRAM is not the limit there, and nothing is graded against it).
    const double bytes = 3.0 * big * sizeof(float);
    const std::string in_l2 = lesson::l2_note(bytes, prop);
    const lesson::StreamBound dram =
        in_l2.empty() ? lesson::measure_stream_bound(prop, 2, 1) : lesson::stream_bound_not_measured(2, 1, in_l2);
    lesson::add_bound(report, dram, int(opt.device));
    report.timing(lesson::kTimingMethod);
    const double col_gbps = bytes / (col.ms * 1e6), row_gbps = bytes / (row.ms * 1e6);
    const double vec_gbps = bytes / (vec.ms * 1e6);
    report.variant_bound("addMatricesRowMapped (x -> row, text)", row.ms, row_gbps, "GB/s", dram.gbps, "DRAM bound",
                         in_l2);
    report.variant_bound("addMatrices (x -> column, coalesced)", col.ms, col_gbps, "GB/s", dram.gbps, "DRAM bound",
                         in_l2);
    report.variant_bound("addMatricesVec4 (x -> 4 columns, float4)", vec.ms, vec_gbps, "GB/s", dram.gbps, "DRAM bound",
                         in_l2);
    report.metric("x -> column speedup over x -> row", row.ms / col.ms, "x");
    report.metric("working set (A, B, C)", bytes / 1e6, "MB");
    if (cols % 4 != 0) report.note("--cols is not a multiple of 4: addMatricesVec4 ran its scalar path");
    char key[96];
    std::snprintf(key, sizeof key, "addMatricesVec4 %.0f GB/s at %lldx%lld", vec_gbps, (long long)rows,
                  (long long)cols);
    report.key_result(key, vec_gbps / dram.gbps, "DRAM bound", lesson::Against::Bound, in_l2);
    report.default_size(cli.at_default_size());
    report.target("addMatricesVec4 of the DRAM bound", vec_gbps / dram.gbps, 0.90);
    return report.finish(opt.json);
}
