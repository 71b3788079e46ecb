// Lesson 03 of the course (00-24): batched 3D grid, many matrices added in one launch.
// Before: lesson 02 (02_matrix_add_multi_block). Next: lesson 04 (04_chunked_processing).
// Run: ./build/bin/batched_3d_grid [--quick]   (--help lists every flag; README.md is the handout)
//
// Batched 3D grid: many matrices added in one launch.
//
// blockIdx.x / blockIdx.y pick a 16 x 16 tile of a matrix, blockIdx.z picks
// the matrix. The original text's batch (1000 matrices of 256 x 256) fits the
// grid, but gridDim.z is limited to 65535, so the kernel walks the batch with a
// grid-stride loop over z: one launch covers any batch size. The report sets
// the text's launch beside a launch per matrix and a float4 version, and a
// second run past the z limit (--limit-batch) proves the loop. Lesson 03 of
// the course: lesson 02 covered one matrix with a 2D grid, lesson 04 processes a
// data set larger than the GPU in chunks. The grid check: checks.h; the DRAM bound
// and the verdict: summary.cuh.
// Run: ./build/bin/batched_3d_grid [--n=256 --batch=1000]. See README.md.
#include <algorithm>
#include <iterator>
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

constexpr int kTile = 16;  // 16 x 16 threads per block, as in the original text

// C[m] = A[m] + B[m] for every n x n matrix m of the batch, stored one after
// the other. Thread (x, y) of the grid owns element (row, col) of a matrix;
// blockIdx.z is the first matrix it handles, and it steps by gridDim.z until
// the batch is done (one step when gridDim.z == batch). Every offset is
// size_t: 1000 x 256 x 256 is 65.5 M elements, and m * n * n passes 2^31 as
// soon as the batch holds more than 32768 such matrices.
__global__ void addMatricesBatched(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                                   int n, size_t batch) {
    // EXERCISE 1 BEGIN: add element (row = y, col = x) of matrix blockIdx.z, then of every gridDim.z-th matrix after it
    // HINT: the grid's z may be smaller than the batch (65535 at most): loop m = blockIdx.z, m + gridDim.z, ...
    // HINT: n need not be a multiple of 16; offsets in size_t (m * n * n passes 2^31)
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= n || col >= n) return;  // edge tiles when n is not a multiple of 16
    const size_t matrix_elems = static_cast<size_t>(n) * n;
    const size_t in_matrix = static_cast<size_t>(row) * n + col;
    for (size_t m = blockIdx.z; m < batch; m += gridDim.z) {
        const size_t i = m * matrix_elems + in_matrix;
        C[i] = A[i] + B[i];
    }
    // EXERCISE 1 END
}

// The same batch with lesson 02's float4 idea: each thread adds 4 neighbouring
// columns with 16-byte loads, so it has 4x the bytes in flight that an HBM GPU
// needs to reach its copy bandwidth. Needs n % 4 == 0 (every row then starts
// 16-byte aligned); main() skips it otherwise.
__global__ void addMatricesBatchedVec4(const float4* __restrict__ A, const float4* __restrict__ B,
                                       float4* __restrict__ C, int n, size_t batch) {
    const int n4 = n / 4;  // float4s per row
    const int col4 = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= n || col4 >= n4) return;
    const size_t matrix_elems4 = static_cast<size_t>(n) * n4;
    const size_t in_matrix = static_cast<size_t>(row) * n4 + col4;
    for (size_t m = blockIdx.z; m < batch; m += gridDim.z) {
        const size_t i = m * matrix_elems4 + in_matrix;
        const float4 a = A[i], b = B[i];
        C[i] = make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
    }
}

// The launch shape: grid_for() ceil-divides the columns and rows by 16 for x
// and y; z is the number of matrix layers asked for, capped at the hardware's
// 65535 (the kernel's z loop covers the rest). grid_for() reports a dimension
// past its limit as ok = false instead of wrapping it: main() checks every grid
// it will launch before any CUDA call (exit 2), and grid_of() refuses one that
// is not ok rather than launch a wrong shape.
static lesson::Grid plan_grid(int cols, int rows, uint64_t z) {
    return lesson::grid_for(uint64_t(cols), uint64_t(rows), std::min<uint64_t>(z, lesson::kMaxGridYZ), kTile, kTile);
}
static dim3 grid_of(int cols, int rows, uint64_t z) {
    const lesson::Grid g = plan_grid(cols, rows, z);
    if (!g.ok)
        lesson::fail_call("host", "grid_of", "grid past the hardware limits (Grid::ok is false)", __FILE__, __LINE__);
    return dim3(g.x, g.y, g.z);
}

#include "checks.h"

// One batch on the device: `count` n x n matrices, one after another in each array.
struct Batch {
    const float* A;
    const float* B;
    float* C;
    int n;
    size_t count;
};

// The ways of covering a batch, one launcher each (16 x 16 threads per block).
// The text's launch: one layer of blocks per matrix (gridDim.z = batch while it fits).
static void launch_z_is_batch(const Batch& b) {
    addMatricesBatched<<<grid_of(b.n, b.n, b.count), dim3(kTile, kTile)>>>(b.A, b.B, b.C, b.n, b.count);
    CUDA_CHECK_LAUNCH();
}
// A quarter of the layers: each thread's z loop adds 4 matrices.
static void launch_z_is_quarter(const Batch& b) {
    addMatricesBatched<<<grid_of(b.n, b.n, lesson::ceil_div(b.count, 4)), dim3(kTile, kTile)>>>(b.A, b.B, b.C, b.n,
                                                                                                b.count);
    CUDA_CHECK_LAUNCH();
}
// Without batching: a 2D launch per matrix, `count` launches of batch 1.
static void launch_per_matrix(const Batch& b) {
    const dim3 grid2d = grid_of(b.n, b.n, 1);
    const size_t per = static_cast<size_t>(b.n) * b.n;
    for (size_t m = 0; m < b.count; ++m) {
        addMatricesBatched<<<grid2d, dim3(kTile, kTile)>>>(b.A + m * per, b.B + m * per, b.C + m * per, b.n, 1);
        CUDA_CHECK_LAUNCH();
    }
}
// 16-byte loads: x covers n/4 float4 columns (n % 4 == 0 only).
static void launch_vec4(const Batch& b) {
    addMatricesBatchedVec4<<<grid_of(b.n / 4, b.n, b.count), dim3(kTile, kTile)>>>(
        reinterpret_cast<const float4*>(b.A), reinterpret_cast<const float4*>(b.B), reinterpret_cast<float4*>(b.C), b.n,
        b.count);
    CUDA_CHECK_LAUNCH();
}

// One row per way of covering the batch: its name in the report and its launcher.
struct Plan {
    const char* name;
    void (*launch)(const Batch&);
};
// Part 1: the original text's batch.
constexpr Plan kPlans[] = {
    {"one launch, grid z = batch", launch_z_is_batch},
    {"one launch, grid z = batch/4 (z loop)", launch_z_is_quarter},
    {"one 2D launch per matrix", launch_per_matrix},  // skipped for huge batches (minutes)
    {"one launch, float4 columns", launch_vec4},      // skipped unless n % 4 == 0
};
constexpr int kPerMatrixPlan = 2, kVec4Plan = 3;  // their rows in kPlans
// Part 2: more matrices than gridDim.z allows; the z loop takes the rest.
constexpr Plan kLimitPlans[] = {{"one launch, grid z = 65535 (z loop)", launch_z_is_batch}};

struct BatchTimes {
    std::vector<double> ms;  // median per plan
    double cpu_reference_ms = 0;
};

// Adds `batch` random n x n matrices with each plan, verifies every element of
// each plan's output and times it.
static BatchTimes run_batch(int n, size_t batch, uint64_t seed, const lesson::CommonOptions& opt,
                            const cudaDeviceProp& prop, double dram_gbps, const std::string& label,
                            const std::vector<Plan>& plans, lesson::Report& report) {
    const size_t count = static_cast<size_t>(n) * n * batch, bytes = count * sizeof(float);
    BatchTimes t;

    // Host inputs: random, seeded (constant inputs would hide indexing bugs); the CPU reference in double.
    // host_vector: not zeroed on one core; the parallel fills and the reference write A, B and ref first.
    verify::host_vector<float> h_A(count), h_B(count), h_C(count);
    verify::fill_uniform(h_A.data(), count, seed);
    verify::fill_uniform(h_B.data(), count, seed + 1);
    verify::touch_pages(h_C.data(), bytes);
    lesson::HostTimer cpu;
    verify::host_vector<double> ref(count);
    verify::add_reference(h_A.data(), h_B.data(), ref.data(), count);
    t.cpu_reference_ms = cpu.ms();

    // Device buffers for the whole batch, one allocation per array; the matrices lie one after the other.
    float *d_A = nullptr, *d_B = nullptr, *d_C = nullptr;
    CUDA_CHECK(cudaMalloc(&d_A, bytes));
    CUDA_CHECK(cudaMalloc(&d_B, bytes));
    CUDA_CHECK(cudaMalloc(&d_C, bytes));
    CUDA_CHECK(cudaMemcpy(d_A, h_A.data(), bytes, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_B, h_B.data(), bytes, cudaMemcpyHostToDevice));

    const Batch b{d_A, d_B, d_C, n, batch};
    for (size_t p = 0; p < plans.size(); ++p) {
        auto launch = [&] { plans[p].launch(b); };
        // Poison C (0xFF bytes are NaN), run once, copy back, check every element.
        CUDA_CHECK(cudaMemset(d_C, 0xFF, bytes));
        launch();
        CUDA_CHECK(cudaDeviceSynchronize());
        CUDA_CHECK(cudaMemcpy(h_C.data(), d_C, bytes, cudaMemcpyDeviceToHost));
        if (opt.inject_fault && p == 0) verify::inject_fault(h_C.data(), count, seed);
        report.check(
            verify::compare(h_C.data(), ref.data(), count, 1e-5, label + ", " + plans[p].name + ", every element"));

        // Time it: the relaunches rewrite the same values.
        const double ms = lesson::time_median_ms(static_cast<int>(opt.repeat), launch);
        const double gbps = 3.0 * bytes / (ms * 1e6);  // read A, read B, write C
        report.variant_bound(label + ": " + plans[p].name, ms, gbps, "GB/s", dram_gbps, "DRAM bound",
                             lesson::l2_note(3.0 * bytes, prop));
        t.ms.push_back(ms);
    }

    CUDA_CHECK(cudaFree(d_A));
    CUDA_CHECK(cudaFree(d_B));
    CUDA_CHECK(cudaFree(d_C));
    return t;
}

#include "summary.cuh"

int main(int argc, char** argv) {
    // Flags first: bad input exits 2 before any CUDA call.
    lesson::CommonOptions opt;
    int64_t n = 256, batch = 1000, limit_n = 16, limit_batch = 70000;
    lesson::Cli cli("batched_3d_grid",
                    "Adds a batch of n x n float matrices in one launch (blockIdx.z = matrix), then a batch past "
                    "the gridDim.z limit of 65535.");
    lesson::add_common_flags(cli, opt);
    cli.add_int("n", &n, 1, 8192, "matrix side", 64);
    cli.add_int("batch", &batch, 1, 10000000, "matrices in the batch", 64);
    cli.add_int("limit-n", &limit_n, 1, 256, "matrix side of the second run, past the grid limit", 4);
    cli.add_int("limit-batch", &limit_batch, 65536, 10000000, "matrices of the second run (more than 65535)");
    cli.parse_or_exit(argc, argv);
    require_grids_fit(n, batch, limit_n, limit_batch);  // every grid this run launches, before any CUDA call

    // Per element: A, B, C as floats and the double reference on the host; A, B, C on the GPU.
    const uint64_t elems = std::max(uint64_t(n) * n * batch, uint64_t(limit_n) * limit_n * limit_batch);
    const std::string sizes = "--n=" + std::to_string(n) + " --batch=" + std::to_string(batch) +
                              " --limit-n=" + std::to_string(limit_n) + " --limit-batch=" + std::to_string(limit_batch);
    lesson::require_host_memory(elems * (3 * sizeof(float) + sizeof(double)), "pageable", sizes);
    cudaDeviceProp prop = lesson::pick_device(opt.device);
    lesson::require_device_memory(elems * 3 * sizeof(float), sizes);

    lesson::Report report("03_batched_3d_grid");
    report.device(prop);
    report.config_from(cli);  // every flag as parsed: n, batch, limit_n, limit_batch, repeat, seed, ...
    report.config("block", std::string("16x16"));
    const dim3 grid = grid_of(static_cast<int>(n), static_cast<int>(n), batch);
    report.config("grid", std::to_string(grid.x) + "x" + std::to_string(grid.y) + "x" + std::to_string(grid.z));

    const int N = static_cast<int>(n);
    const size_t nb = static_cast<size_t>(batch), per = static_cast<size_t>(N) * N;

    // The DRAM bound of the add (2 reads : 1 write), measured now unless both batches fit in L2.
    const lesson::StreamBound dram =
        dram_bound(report, double(nb) * per, double(limit_batch) * limit_n * limit_n, prop, int(opt.device));

    // Part 1: the original text's batch, covered several ways.
    const bool vec4 = N % 4 == 0;
    std::vector<Plan> plans;
    size_t vec4_plan = 0;
    for (int i = 0; i < int(std::size(kPlans)); ++i) {
        if (i == kPerMatrixPlan && nb > 100000) continue;  // `batch` launches would take minutes
        if (i == kVec4Plan && !vec4) {
            report.note("float4 variant skipped: --n=" + std::to_string(n) + " is not a multiple of 4");
            continue;
        }
        if (i == kVec4Plan) vec4_plan = plans.size();
        plans.push_back(kPlans[i]);
    }
    const BatchTimes main_run =
        run_batch(N, nb, opt.seed, opt, prop, dram.gbps, "batch " + std::to_string(batch), plans, report);
    report.cpu_reference_ms(main_run.cpu_reference_ms, verify::host_threads());

    // Part 2: more matrices than gridDim.z allows; the z loop takes the rest.
    const int LN = static_cast<int>(limit_n);
    const size_t lb = static_cast<size_t>(limit_batch);
    run_batch(LN, lb, opt.seed + 2, opt, prop, dram.gbps, "batch " + std::to_string(limit_batch),
              std::vector<Plan>(std::begin(kLimitPlans), std::end(kLimitPlans)), report);

    // Key result: the fastest one-launch kernel (float4 when n allows it, else the text's).
    const double best_ms = vec4 ? main_run.ms[vec4_plan] : main_run.ms[0];
    report_verdict(report, cli, best_ms, vec4, nb, N, dram.gbps, prop);
    return report.finish(opt.json);
}
