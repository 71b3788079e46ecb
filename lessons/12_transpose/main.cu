// Lesson 12 of the course (00-23): matrix transpose, a ladder for a memory-bound kernel.
// Before: lesson 11 (11_hybrid_fft_filter). Next: lesson 13 (13_matmul_ladder).
// Run: ./build/bin/transpose [--quick]   (--help lists every flag; README.md is the handout)
//
// Matrix transpose: an optimization ladder for a memory-bound kernel.
//
// out (cols x rows) = transpose of in (rows x cols), both row-major floats.
// Every rung sits in this file and is timed the same way, against the DRAM
// bound of a 1 : 1 read/write stream and beside a plain copy of the same matrix
// (the yardstick: the same bytes without the transpose):
//   copy        reads and writes rows: both sides coalesced (the yardstick)
//   1 naive     reads rows, writes columns: every write of a warp hits 32 rows
//   2 tiled     stages a 32x32 tile in shared memory so both sides are coalesced;
//               reading a tile column hits one bank 32 times (bank conflicts)
//   3 padded    the same with 33 columns per tile row: no bank conflicts
//   4 diagonal  the same with blocks visited along diagonals (the old cure for
//               partition camping; measured here, not assumed)
//   5 wide      64x64 tiles, 16-byte loads and stores, 16 floats per thread:
//               four times the bytes in flight per thread
// Every element of every rung is compared with a CPU transpose, exactly
// (tolerance 0: a transpose only moves values). Lesson 12 of the course:
// lesson 06 introduced shared memory, lesson 13 applies the ladder to SGEMM.
// Run: ./build/bin/transpose [--rows=16384 --cols=16384]. See README.md.
#include <algorithm>
#include <cstdio>
#include <cstring>
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
#include "verify/parallel.h"
#include "verify/random.h"
#include "verify/transpose.h"

// Rungs 1-4: a block of kTile x kBlockRows threads moves one kTile x kTile tile,
// each thread kTile / kBlockRows = 4 elements (one per pass of its j loop).
constexpr int kTile = 32;
constexpr int kBlockRows = 8;
// Rung 5 (and the copy yardstick): kWideThreads x kWideThreads threads move a
// kWide x kWide tile, each thread 4 float4s = 16 floats.
constexpr int kWide = 64;
constexpr int kWideThreads = 16;

// Every kernel works in two phases: first all of a thread's loads, then all
// of its stores. The loads are clamped into the matrix (an edge tile re-reads
// the last row or column instead of branching), so they have no branch
// between them and leave together: a load in flight costs nothing until its
// value is used. Only the stores are guarded.
__device__ __forceinline__ int clampTo(int i, int n) { return i < n ? i : n - 1; }

// ---- the yardstick: a copy with the wide rung's access pattern, minus the transpose ----
__global__ void copyWide(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
    const int x = blockIdx.x * kWide + 4 * threadIdx.x;  // first of this thread's 4 columns
    const int y0 = blockIdx.y * kWide + threadIdx.y;
    float4 v[kWide / kWideThreads];
    if (cols % 4 == 0) {  // rows start 16-byte aligned: 16-byte loads and stores
        const int xc = clampTo(x, cols - 3);
        for (int j = 0; j < kWide / kWideThreads; ++j)
            v[j] = *reinterpret_cast<const float4*>(
                in + static_cast<size_t>(clampTo(y0 + kWideThreads * j, rows)) * cols + xc);
        for (int j = 0; j < kWide / kWideThreads; ++j) {
            const int y = y0 + kWideThreads * j;
            if (y < rows && x < cols) *reinterpret_cast<float4*>(out + static_cast<size_t>(y) * cols + x) = v[j];
        }
    } else {  // element by element
        for (int j = 0; j < kWide / kWideThreads; ++j) {
            const size_t row = static_cast<size_t>(clampTo(y0 + kWideThreads * j, rows)) * cols;
            v[j] = make_float4(in[row + clampTo(x, cols)], in[row + clampTo(x + 1, cols)],
                               in[row + clampTo(x + 2, cols)], in[row + clampTo(x + 3, cols)]);
        }
        for (int j = 0; j < kWide / kWideThreads; ++j) {
            const int y = y0 + kWideThreads * j;
            if (y >= rows) continue;
            float* dst = out + static_cast<size_t>(y) * cols;
            if (x < cols) dst[x] = v[j].x;
            if (x + 1 < cols) dst[x + 1] = v[j].y;
            if (x + 2 < cols) dst[x + 2] = v[j].z;
            if (x + 3 < cols) dst[x + 3] = v[j].w;
        }
    }
}

// A copy with the geometry of rungs 1-4 (scalar, 4 elements per thread): tells
// how much of what is left is the transpose and how much the geometry.
__global__ void copyTile(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
    const int x = blockIdx.x * kTile + threadIdx.x;
    const int y0 = blockIdx.y * kTile + threadIdx.y;
    float v[kTile / kBlockRows];
    for (int j = 0; j < kTile / kBlockRows; ++j)
        v[j] = in[static_cast<size_t>(clampTo(y0 + kBlockRows * j, rows)) * cols + clampTo(x, cols)];
    for (int j = 0; j < kTile / kBlockRows; ++j) {
        const int y = y0 + kBlockRows * j;
        if (x < cols && y < rows) out[static_cast<size_t>(y) * cols + x] = v[j];
    }
}

// ---- rung 1: naive. Reads are coalesced (a warp reads 32 neighbours of one
// row); writes are not (a warp writes one element in each of 32 output rows).
__global__ void transposeNaive(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
    const int x = blockIdx.x * kTile + threadIdx.x;  // column of in = row of out
    const int y0 = blockIdx.y * kTile + threadIdx.y;
    float v[kTile / kBlockRows];
    for (int j = 0; j < kTile / kBlockRows; ++j)
        v[j] = in[static_cast<size_t>(clampTo(y0 + kBlockRows * j, rows)) * cols + clampTo(x, cols)];
    for (int j = 0; j < kTile / kBlockRows; ++j) {
        const int y = y0 + kBlockRows * j;  // row of in = column of out
        if (x < cols && y < rows) out[static_cast<size_t>(x) * rows + y] = v[j];
    }
}

// ---- rungs 2 and 3: a tile through shared memory. PAD = 0: the 32 elements
// of a tile column sit 32 floats apart, all in one bank (a 32-way conflict
// when a warp reads a column). PAD = 1: a tile row is 33 floats, so element
// [r][t] is in bank (33 r + t) % 32 = (r + t) % 32: a column hits 32 banks.
// rowBlock/colBlock pick the tile; rung 4 passes a reordered pair.
template <int PAD>
__device__ void transposeTile(const float* __restrict__ in, float* __restrict__ out, int rows, int cols, int rowBlock,
                              int colBlock) {
    __shared__ float tile[kTile][kTile + PAD];
    const int r0 = rowBlock * kTile, c0 = colBlock * kTile;
    // EXERCISE 1 BEGIN: move the tile at (r0, c0) of in through shared memory into out: coalesced reads, coalesced writes
    // HINT: load rows of in into tile[row][col] (clamp the loads into the matrix), __syncthreads(), then read tile columns
    // HINT: out is cols x rows: row c of out is column c of in; store only inside out (ox < rows, oy < cols)
    // Read a tile of in, row by row (coalesced), into shared memory.
    const int x = clampTo(c0 + threadIdx.x, cols);
    for (int j = 0; j < kTile; j += kBlockRows)
        tile[threadIdx.y + j][threadIdx.x] = in[static_cast<size_t>(clampTo(r0 + threadIdx.y + j, rows)) * cols + x];
    __syncthreads();  // the whole tile is in shared memory before anyone reads a column of it
    // Write it as a tile of out, row by row (coalesced): row c of out is column c of in.
    float v[kTile / kBlockRows];
    for (int j = 0; j < kTile / kBlockRows; ++j) v[j] = tile[threadIdx.x][threadIdx.y + kBlockRows * j];
    const int ox = r0 + threadIdx.x;  // column of out = row of in
    for (int j = 0; j < kTile / kBlockRows; ++j) {
        const int oy = c0 + threadIdx.y + kBlockRows * j;  // row of out = column of in
        if (ox < rows && oy < cols) out[static_cast<size_t>(oy) * rows + ox] = v[j];
    }
    // EXERCISE 1 END
}

template <int PAD>
__global__ void transposeTiled(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
    transposeTile<PAD>(in, out, rows, cols, blockIdx.y, blockIdx.x);
}

// ---- rung 4: padded tile, blocks taken along diagonals. Blocks start roughly
// in the order of their linear id; here consecutive ids get tiles on a
// diagonal, so they read and write different rows AND columns at once (on
// GPUs with few, coarsely interleaved memory partitions, the row-major order
// sent every write of a wave to one partition: "partition camping").
// bid -> (colBlock, rowBlock) is a bijection on the gridDim.x x gridDim.y grid.
__global__ void transposeDiagonal(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
    const unsigned bid = blockIdx.x + gridDim.x * blockIdx.y;
    const unsigned rowBlock = bid % gridDim.y;
    const unsigned colBlock = (bid / gridDim.y + rowBlock) % gridDim.x;
    transposeTile<1>(in, out, rows, cols, static_cast<int>(rowBlock), static_cast<int>(colBlock));
}

// ---- rung 5: wide. A 64x64 tile, 16x16 threads. Each thread loads 4 float4s
// (16-byte loads of rows ty, ty+16, ty+32, ty+48) and stores 4 float4s, so a
// thread has 64 bytes of loads in flight instead of 16 before the barrier.
// Shapes whose rows are not 16-byte aligned (cols or rows not a multiple of 4)
// go element by element.
__global__ void transposeWide(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
    __shared__ float tile[kWide][kWide + 1];  // padded: a column read is at most 2-way conflicted
    const int r0 = blockIdx.y * kWide, c0 = blockIdx.x * kWide;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int x = c0 + 4 * tx;  // first of this thread's 4 columns of in
    float4 v[kWide / kWideThreads];
    for (int j = 0; j < kWide / kWideThreads; ++j) {
        const size_t row = static_cast<size_t>(clampTo(r0 + ty + kWideThreads * j, rows)) * cols;
        if (cols % 4 == 0) v[j] = *reinterpret_cast<const float4*>(in + row + clampTo(x, cols - 3));
        else
            v[j] = make_float4(in[row + clampTo(x, cols)], in[row + clampTo(x + 1, cols)],
                               in[row + clampTo(x + 2, cols)], in[row + clampTo(x + 3, cols)]);
    }
    for (int j = 0; j < kWide / kWideThreads; ++j) {
        const int r = ty + kWideThreads * j;
        tile[r][4 * tx] = v[j].x;
        tile[r][4 * tx + 1] = v[j].y;
        tile[r][4 * tx + 2] = v[j].z;
        tile[r][4 * tx + 3] = v[j].w;
    }
    __syncthreads();
    // Row c of the out tile holds rows 4tx..4tx+3 of the in tile at column c.
    for (int j = 0; j < kWide / kWideThreads; ++j) {
        const int c = ty + kWideThreads * j;
        v[j] = make_float4(tile[4 * tx][c], tile[4 * tx + 1][c], tile[4 * tx + 2][c], tile[4 * tx + 3][c]);
    }
    const int ox = r0 + 4 * tx;  // first of this thread's 4 columns of out (= rows of in)
    for (int j = 0; j < kWide / kWideThreads; ++j) {
        const int oy = c0 + ty + kWideThreads * j;  // row of out = column of in
        if (oy >= cols || ox >= rows) continue;
        float* dst = out + static_cast<size_t>(oy) * rows + ox;
        if (rows % 4 == 0) {
            *reinterpret_cast<float4*>(dst) = v[j];
        } else {
            dst[0] = v[j].x;
            if (ox + 1 < rows) dst[1] = v[j].y;
            if (ox + 2 < rows) dst[2] = v[j].z;
            if (ox + 3 < rows) dst[3] = v[j].w;
        }
    }
}

// True when gpu[0..n) and ref[0..n) hold the same bytes: memcmp of 1 MiB blocks on all host cores.
static bool same_bytes(const float* gpu, const float* ref, size_t n) {
    const std::vector<char> same =
        verify::block_partials<char>(n, uint64_t(1) << 18, [=](uint64_t begin, uint64_t end) {
            return char(std::memcmp(gpu + begin, ref + begin, (end - begin) * sizeof(float)) == 0);
        });
    return std::all_of(same.begin(), same.end(), [](char s) { return s != 0; });
}

// The exact check of one output (tolerance 0: a transpose only moves values).
// Identical bytes are what verify::Comparer would pass with zero error, found
// at memory speed (the per-element comparison takes about a second per GiB);
// any difference goes through the Comparer, which names the first bad index.
// The inputs are finite, so identical bytes never hide a NaN.
static lesson::Check check_exact(const float* gpu, const float* ref, size_t n, const std::string& what) {
    if (n > 0 && same_bytes(gpu, ref, n)) {
        lesson::Check c;
        c.what = what;
        c.checked = n;
        c.rel_l2 = 0.0;
        c.max_abs = 0.0;
        c.tol = 0.0;
        c.pass = true;
        return c;
    }
    verify::Comparer cmp(0.0, 0.0);
    cmp.add(gpu, ref, n);
    return cmp.result(what);
}

// The launchers, one per rung. Grids cover the input: x along its columns, y along its rows
// (main() checked that both tilings fit the grid limits before any CUDA call).
static dim3 tile_grid(int rows, int cols) {
    const lesson::Grid g = lesson::grid_for(uint64_t(cols), uint64_t(rows), 1, kTile, kTile);
    return dim3(g.x, g.y);
}
static dim3 wide_grid(int rows, int cols) {
    const lesson::Grid g = lesson::grid_for(uint64_t(cols), uint64_t(rows), 1, kWide, kWide);
    return dim3(g.x, g.y);
}
static void launch_copy_wide(const float* in, float* out, int rows, int cols) {
    copyWide<<<wide_grid(rows, cols), dim3(kWideThreads, kWideThreads)>>>(in, out, rows, cols);
}
static void launch_copy_tile(const float* in, float* out, int rows, int cols) {
    copyTile<<<tile_grid(rows, cols), dim3(kTile, kBlockRows)>>>(in, out, rows, cols);
}
static void launch_naive(const float* in, float* out, int rows, int cols) {
    transposeNaive<<<tile_grid(rows, cols), dim3(kTile, kBlockRows)>>>(in, out, rows, cols);
}
template <int PAD>
static void launch_tiled(const float* in, float* out, int rows, int cols) {
    transposeTiled<PAD><<<tile_grid(rows, cols), dim3(kTile, kBlockRows)>>>(in, out, rows, cols);
}
static void launch_diagonal(const float* in, float* out, int rows, int cols) {
    transposeDiagonal<<<tile_grid(rows, cols), dim3(kTile, kBlockRows)>>>(in, out, rows, cols);
}
static void launch_wide(const float* in, float* out, int rows, int cols) {
    transposeWide<<<wide_grid(rows, cols), dim3(kWideThreads, kWideThreads)>>>(in, out, rows, cols);
}

// The ladder, one row per rung: its name, whether its output is the transpose
// (or a copy of the input), and its launcher.
struct Rung {
    const char* name;
    bool transposes;
    void (*launch)(const float* in, float* out, int rows, int cols);
};
constexpr Rung kRungs[] = {
    {"copy: float4, 64x64 tiles (yardstick)", false, launch_copy_wide},
    {"copy: scalar, 32x32 tiles", false, launch_copy_tile},
    {"1 naive (strided writes)", true, launch_naive},
    {"2 tiled 32x32 (bank conflicts)", true, launch_tiled<0>},
    {"3 tiled 32x33 (padded)", true, launch_tiled<1>},
    {"4 padded, diagonal block order", true, launch_diagonal},
    {"5 wide: 64x65 tile, float4, 16/thread", true, launch_wide},
};
constexpr size_t kRungCount = std::size(kRungs);

int main(int argc, char** argv) {
    // Flags first: bad input exits 2 before any CUDA call.
    lesson::CommonOptions opt;
    int64_t rows = 16384, cols = 16384;
    lesson::Cli cli("transpose",
                    "Transposes a rows x cols float matrix with a ladder of kernels, against a copy kernel.");
    lesson::add_common_flags(cli, opt);
    cli.add_int("rows", &rows, 1, int64_t(1) << 20, "rows of the input matrix", 1000);
    cli.add_int("cols", &cols, 1, int64_t(1) << 20, "columns of the input matrix", 1016);
    cli.parse_or_exit(argc, argv);

    const size_t N = static_cast<size_t>(rows) * static_cast<size_t>(cols);
    const size_t bytes = N * sizeof(float);
    const std::string shape = "--rows=" + std::to_string(rows) + " --cols=" + std::to_string(cols);
    // Both tilings must fit the grid limits (x: columns, y: rows of tiles).
    const lesson::Grid g32 = lesson::grid_for(cols, rows, 1, kTile, kTile);
    const lesson::Grid g64 = lesson::grid_for(cols, rows, 1, kWide, kWide);
    if (!g32.ok || !g64.ok) lesson::bad_input(shape + " needs more than 65535 tiles along y");
    // Host: input, CPU reference, GPU result. Device: input and output.
    lesson::require_host_memory(3 * bytes, "pageable", shape);
    cudaDeviceProp prop = lesson::pick_device(opt.device);
    lesson::require_device_memory(2 * bytes, shape);

    lesson::Report report("12_transpose");
    report.device(prop.name, prop.major, prop.minor, prop.multiProcessorCount, prop.totalGlobalMem / 1e9);
    report.config("rows", rows);
    report.config("cols", cols);
    report.config("matrix_mb", bytes / 1e6);
    report.config("l2_mb", prop.l2CacheSize / 1e6);
    report.config("repeat", opt.repeat);
    report.config("seed", opt.seed);

    // Random input and the exact CPU transpose. host_vector: not zeroed on one core. The fill is
    // the first to touch h_in; h_ref and h_out are touched by parallel_memset, each thread its own
    // run of pages. The transpose writes a slice of every row of h_ref, so on fresh pages all of
    // its threads would fault on the same pages at once; the first copy into fresh h_out pages
    // would fault them in one by one.
    verify::host_vector<float> h_in(N), h_ref(N), h_out(N);
    verify::fill_uniform(h_in.data(), N, opt.seed);
    verify::parallel_memset(h_out.data(), 0, bytes);
    lesson::HostTimer cpu;
    verify::parallel_memset(h_ref.data(), 0, bytes);
    verify::transpose_reference(h_in.data(), h_ref.data(), rows, cols);
    report.cpu_reference_ms(cpu.ms(), verify::host_threads());

    // 1. Allocate device memory, 2. copy the input in.
    float *d_in = nullptr, *d_out = nullptr;
    CUDA_CHECK(cudaMalloc(&d_in, bytes));
    CUDA_CHECK(cudaMalloc(&d_out, bytes));
    CUDA_CHECK(cudaMemcpy(d_in, h_in.data(), bytes, cudaMemcpyHostToDevice));

    // 3. Launch each rung (kRungs), then verify and time it.
    const int R = static_cast<int>(rows), C = static_cast<int>(cols);
    std::vector<double> ms(kRungCount), gbps(kRungCount);
    for (size_t k = 0; k < kRungCount; ++k) {
        const Rung& rung = kRungs[k];
        // Poison the output (0xFF bytes are NaN): an element a rung never writes fails the check.
        CUDA_CHECK(cudaMemset(d_out, 0xFF, bytes));
        rung.launch(d_in, d_out, R, C);
        CUDA_CHECK_LAUNCH();
        CUDA_CHECK(cudaDeviceSynchronize());
        // 4. Copy the result out; 5. verify every element, exactly.
        CUDA_CHECK(cudaMemcpy(h_out.data(), d_out, bytes, cudaMemcpyDeviceToHost));
        if (opt.inject_fault && k + 1 == kRungCount) verify::inject_fault(h_out.data(), N, opt.seed);
        report.check(check_exact(h_out.data(), rung.transposes ? h_ref.data() : h_in.data(), N,
                                 std::string(rung.name) + ": every element, exact, " +
                                     (rung.transposes ? "vs the CPU transpose" : "vs the input")));
        // Time it: relaunches write the same values again.
        ms[k] = lesson::time_median_ms(static_cast<int>(opt.repeat), [&] {
            rung.launch(d_in, d_out, R, C);
            CUDA_CHECK_LAUNCH();
        });
        gbps[k] = 2.0 * bytes / (ms[k] * 1e6);  // each element read once and written once
    }

    // The ladder: each rung against the copy kernel of the same matrix (a yardstick: same bytes,
    // no transpose) and against the naive transpose; the DRAM bound of a 1 : 1 mix beside them.
    const double copy_gbps = gbps[0], naive_ms = ms[2];
    const std::string in_l2 = lesson::l2_note(2.0 * bytes, prop);
    const lesson::StreamBound dram =
        in_l2.empty() ? lesson::measure_stream_bound(prop, 1, 1) : lesson::stream_bound_not_measured(1, 1, in_l2);
    lesson::add_bound(report, dram, int(opt.device));
    const double d2d = lesson::measure_d2d_gbps(prop);
    report.yardstick("copy kernel (float4, same matrix)", copy_gbps, "GB/s");
    report.yardstick("device-to-device cudaMemcpy", d2d, "GB/s");
    report.timing(lesson::kTimingMethod);
    std::printf("%-40s %10s %10s %9s %9s\n", "rung", "ms", "GB/s", "vs copy", "x naive");
    size_t best = 2;
    for (size_t k = 0; k < kRungCount; ++k) {
        const Rung& r = kRungs[k];
        std::printf("%-40s %10.4f %10.1f %8.2fx %8.2fx\n", r.name, ms[k], gbps[k], gbps[k] / copy_gbps,
                    naive_ms / ms[k]);
        report.variant_bound(r.name, ms[k], gbps[k], "GB/s", dram.gbps, "DRAM bound", in_l2);
        if (r.transposes) report.metric(std::string("speedup over naive: ") + r.name, naive_ms / ms[k], "x");
        if (r.transposes && gbps[k] > gbps[best]) best = k;
    }
    report.variant_yardstick(std::string(kRungs[best].name) + " against the copy kernel", ms[best], gbps[best], "GB/s",
                             copy_gbps, "copy kernel", in_l2);
    report.metric("diagonal / row-major block order (time)", ms[5] / ms[4], "x");
    report.metric("best rung / device-to-device cudaMemcpy", gbps[best] / d2d, "x");
    int blocksPadded = 0, blocksWide = 0;
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocksPadded, transposeTiled<1>, kTile * kBlockRows, 0));
    CUDA_CHECK(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocksWide, transposeWide, kWideThreads * kWideThreads, 0));
    report.metric("resident blocks per SM, padded 32x33", double(blocksPadded), "blocks");
    report.metric("resident blocks per SM, wide 64x65", double(blocksWide), "blocks");
    char key[128];
    std::snprintf(key, sizeof key, "%s %.0f GB/s at %lldx%lld", kRungs[best].name, gbps[best], (long long)rows,
                  (long long)cols);
    report.key_result(key, gbps[best] / copy_gbps, "copy kernel", lesson::Against::Yardstick, in_l2);
    report.default_size(cli.at_default_size());
    report.target("best rung vs the copy kernel", gbps[best] / copy_gbps, 0.90);

    // Free device memory.
    CUDA_CHECK(cudaFree(d_in));
    CUDA_CHECK(cudaFree(d_out));
    return report.finish(opt.json);
}
