// Lesson 02 - 2D matrix add over many 16x16 blocks.
//
// First the original text's 256x256 matrix over a 16x16 grid of 16x16 blocks,
// then sizes that are not multiples of 16 (the grid is ceil-divided and the
// kernel checks bounds), then a matrix large enough to measure bandwidth,
// where the text's thread mapping (threadIdx.x -> row) is timed against ours
// (threadIdx.x -> column). See README.md.
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
#include "verify/random.h"

constexpr int TILE = 16;  // 16x16 threads per block

// x runs along columns (contiguous in row-major memory): coalesced.
__global__ void addMatrices(const float* A, const float* B, float* C, int rows, int cols) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < rows && col < cols) {  // the edge blocks hang over the matrix
        size_t idx = static_cast<size_t>(row) * cols + col;  // row * cols passes 2^31 for large matrices
        C[idx] = A[idx] + B[idx];
    }
}

// The original text's mapping: x runs down the rows. A warp's 32 loads are
// `cols` floats apart, so each one needs its own memory transaction.
__global__ void addMatricesRowMapped(const float* A, const float* B, float* C, int rows, int cols) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    int col = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < rows && col < cols) {
        size_t idx = static_cast<size_t>(row) * cols + col;
        C[idx] = A[idx] + B[idx];
    }
}

// x -> column again, but each thread adds 4 neighbouring columns with 16-byte
// loads: 4x the bytes in flight per thread, which an HBM3 GPU needs to reach
// its copy bandwidth. Rows start 16-byte aligned only when cols % 4 == 0; other
// widths take the scalar path (still correct, just slower).
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

enum class Mapping { XIsColumn, XIsRow, Vec4 };

struct Result {
    lesson::Check check;
    double ms = 0;  // median kernel time (0 when not timed)
};

// Allocate, copy in, launch over a 2D grid, copy out, verify: one N x N add.
static Result add_square(int n, Mapping mapping, const lesson::CommonOptions& opt, int repeat, bool inject,
                         double* cpu_ms) {
    const size_t count = size_t(n) * n, bytes = count * sizeof(float);
    std::vector<float> h_A(count), h_B(count), h_C(count);
    verify::fill_uniform(h_A.data(), count, opt.seed + n);
    verify::fill_uniform(h_B.data(), count, opt.seed + n + 1);

    float *d_A, *d_B, *d_C;
    CUDA_CHECK(cudaMalloc(&d_A, bytes));
    CUDA_CHECK(cudaMalloc(&d_B, bytes));
    CUDA_CHECK(cudaMalloc(&d_C, bytes));
    CUDA_CHECK(cudaMemcpy(d_A, h_A.data(), bytes, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_B, h_B.data(), bytes, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemset(d_C, 0xFF, bytes));  // NaN poison

    // ceil(n / 16) blocks each way; for x -> row the grid's x covers rows, but the matrix is square.
    dim3 threads(TILE, TILE);
    // Vec4 threads cover 4 columns each, so x needs a quarter of the blocks.
    dim3 blocks(static_cast<unsigned>(lesson::ceil_div(n, mapping == Mapping::Vec4 ? 4 * TILE : TILE)),
                static_cast<unsigned>(lesson::ceil_div(n, TILE)));
    auto launch = [&] {
        if (mapping == Mapping::XIsColumn) addMatrices<<<blocks, threads>>>(d_A, d_B, d_C, n, n);
        else if (mapping == Mapping::XIsRow) addMatricesRowMapped<<<blocks, threads>>>(d_A, d_B, d_C, n, n);
        else addMatricesVec4<<<blocks, threads>>>(d_A, d_B, d_C, n, n);
        CUDA_CHECK_LAUNCH();
    };
    launch();
    CUDA_CHECK(cudaMemcpy(h_C.data(), d_C, bytes, cudaMemcpyDeviceToHost));

    Result r;
    if (repeat > 0) r.ms = lesson::time_median_ms(repeat, launch);
    CUDA_CHECK(cudaFree(d_A));
    CUDA_CHECK(cudaFree(d_B));
    CUDA_CHECK(cudaFree(d_C));

    if (inject) verify::inject_fault(h_C.data(), count, opt.seed);
    lesson::HostTimer cpu;
    std::vector<double> ref(count);
    verify::add_reference(h_A.data(), h_B.data(), ref.data(), count);
    if (cpu_ms) *cpu_ms = cpu.ms();
    const char* name = mapping == Mapping::XIsColumn ? " addMatrices"
                       : mapping == Mapping::XIsRow  ? " addMatricesRowMapped"
                                                     : " addMatricesVec4";
    std::string what = std::to_string(n) + "x" + std::to_string(n) + name + ", every element";
    r.check = verify::compare(h_C.data(), ref.data(), count, 1e-5, what);
    return r;
}

int main(int argc, char** argv) {
    lesson::CommonOptions opt;
    int64_t n = 12000;
    lesson::Cli cli("matrix_add_multi_block",
                    "Adds N x N matrices over a 2D grid of 16x16 blocks: 256, 1000, 8191, then --n for bandwidth.");
    lesson::add_common_flags(cli, opt);
    // gridDim.y <= 65535 blocks of 16 rows caps N at 1048560.
    cli.add_int("n", &n, 1, 65535 * TILE, "side of the large square matrix (bandwidth run)", 1024);
    cli.parse_or_exit(argc, argv);

    const size_t big = size_t(n) * size_t(n);
    lesson::require_host_memory(big * (3 * sizeof(float) + sizeof(double)), "pageable", "--n=" + std::to_string(n));
    cudaDeviceProp prop = lesson::pick_device(opt.device);
    lesson::require_device_memory(big * 3 * sizeof(float), "--n=" + std::to_string(n));

    lesson::Report report("02_matrix_add_multi_block");
    report.device(prop.name, prop.major, prop.minor, prop.multiProcessorCount, prop.totalGlobalMem / 1e9);
    report.config("n", n);
    report.config("block", std::string("16x16"));
    report.config("repeat", opt.repeat);
    report.config("seed", opt.seed);

    // 1. The text's 256x256 (a 16x16 grid), then sizes that are not multiples of 16.
    for (int side : {256, 1000, 8191}) {
        if (opt.quick && side == 8191) continue;
        report.check(add_square(side, Mapping::XIsColumn, opt, 0, false, nullptr).check);
    }
    report.check(add_square(1001, Mapping::Vec4, opt, 0, false, nullptr).check);  // the scalar path

    // 2. The bandwidth run: both mappings, each verified. --inject-fault corrupts the first.
    double cpu_ms = 0;
    Result col = add_square(static_cast<int>(n), Mapping::XIsColumn, opt, static_cast<int>(opt.repeat),
                            opt.inject_fault, &cpu_ms);
    Result row = add_square(static_cast<int>(n), Mapping::XIsRow, opt, static_cast<int>(opt.repeat), false, nullptr);
    Result vec = add_square(static_cast<int>(n), Mapping::Vec4, opt, static_cast<int>(opt.repeat), false, nullptr);
    report.check(col.check);
    report.check(row.check);
    report.check(vec.check);
    report.cpu_reference_ms(cpu_ms);

    // The DRAM bound of this read/write mix (2 reads : 1 write), measured now.
    const lesson::StreamBound dram = lesson::measure_stream_bound(prop, 2, 1);
    lesson::add_bound(report, dram, int(opt.device));
    report.timing(lesson::kTimingMethod);
    const double bytes = 3.0 * big * sizeof(float);
    const std::string in_l2 = lesson::l2_note(bytes, prop);
    const double col_gbps = bytes / (col.ms * 1e6), row_gbps = bytes / (row.ms * 1e6);
    const double vec_gbps = bytes / (vec.ms * 1e6);
    report.variant_bound("addMatricesRowMapped (x -> row, text)", row.ms, row_gbps, "GB/s", dram.gbps, "DRAM bound", in_l2);
    report.variant_bound("addMatrices (x -> column, coalesced)", col.ms, col_gbps, "GB/s", dram.gbps, "DRAM bound", in_l2);
    report.variant_bound("addMatricesVec4 (x -> 4 columns, float4)", vec.ms, vec_gbps, "GB/s", dram.gbps, "DRAM bound", in_l2);
    report.metric("x -> column speedup over x -> row", row.ms / col.ms, "x");
    if (n % 4 != 0) report.note("--n is not a multiple of 4: addMatricesVec4 ran its scalar path");
    char key[96];
    std::snprintf(key, sizeof key, "addMatricesVec4 %.0f GB/s at %lldx%lld", vec_gbps, (long long)n, (long long)n);
    report.key_result(key, vec_gbps / dram.gbps, "DRAM bound", lesson::Against::Bound, in_l2);
    report.default_size(cli.at_default_size());
    report.target("addMatricesVec4 of the DRAM bound", vec_gbps / dram.gbps, 0.90);
    return report.finish(opt.json);
}
