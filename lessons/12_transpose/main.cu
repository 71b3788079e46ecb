// Lesson 12 of the course (00-24): matrix transpose, a ladder for a memory-bound kernel.
// Before: lesson 11 (11_hybrid_fft_filter). Next: lesson 13 (13_matmul_ladder).
// Run: ./build/bin/transpose [--quick]   (--help lists every flag; README.md is the handout)
//
// out (cols x rows) = transpose of in (rows x cols), both row-major floats. Every rung, one file
// each in kernels/, is timed the same way, against the DRAM bound of a 1 : 1 read/write stream
// and beside a plain copy of the same matrix (the yardstick: the same bytes without the transpose):
//   copy        reads and writes rows: both sides coalesced (kernels/copy.cuh)
//   1 naive     reads rows, writes columns: every write of a warp hits 32 rows
//   2 tiled     stages a 32x32 tile in shared memory so both sides are coalesced;
//               reading a tile column hits one bank 32 times (bank conflicts)
//   3 padded    the same with 33 columns per tile row: no bank conflicts (kernels/2_tiled.cuh too)
//   4 diagonal  the same with blocks visited along diagonals (the old cure for
//               partition camping; measured here, not assumed)
//   5 wide      64x64 tiles, 16-byte loads and stores, 16 floats per thread:
//               four times the bytes in flight per thread
//   control     rung 3's 32x32 tile and 4 floats per thread with rung 5's 16-byte accesses
//               (kernels/control.cuh), not a rung: timed in turns with rungs 3 and 5, it splits
//               rung 5's gain into the float4 accesses and the wider tile
// Every element of every rung is compared with a CPU transpose, exactly (tolerance 0: a
// transpose only moves values).
#include <cmath>
#include <cstdio>
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

#include "kernels/1_naive.cuh"
#include "kernels/2_tiled.cuh"
#include "kernels/4_diagonal.cuh"
#include "kernels/5_wide.cuh"
#include "kernels/control.cuh"
#include "kernels/copy.cuh"

// The ladder, one row per rung: its name, whether its output is the transpose
// (or a copy of the input), and its launcher (in the rung's file).
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
    {"control: 32x33 tile, float4, 4/thread", true, launch_float4_tile},
};
constexpr size_t kRungCount = std::size(kRungs);
constexpr size_t kFirstRung = 2;             // kRungs[k] is rung k - 1 from here on; before it, the copies
constexpr size_t kControl = kRungCount - 1;  // the last row, rung 5's control: checked and timed, never the best rung

// --rung=R runs rung R alone beside the float4 copy it is measured against (0: every row of kRungs).
static bool selected(int64_t rung_only, size_t k) {
    return rung_only == 0 || k == 0 || k == size_t(rung_only) + kFirstRung - 1;
}

int main(int argc, char** argv) {
    // Flags first: bad input exits 2 before any CUDA call.
    lesson::CommonOptions opt;
    int64_t rows = 16384, cols = 16384;
    lesson::Cli cli("transpose",
                    "Transposes a rows x cols float matrix with a ladder of kernels, against a copy kernel.");
    lesson::add_common_flags(cli, opt);
    cli.add_int("rows", &rows, 1, int64_t(1) << 20, "rows of the input matrix", 1000);
    cli.add_int("cols", &cols, 1, int64_t(1) << 20, "columns of the input matrix", 1016);
    int64_t rung_only = 0;
    cli.add_int("rung", &rung_only, 0, int64_t(kControl - kFirstRung),
                "run and check one rung alone, beside the float4 copy (0: every rung and the control)");
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
    report.device(prop);
    report.config_from(cli);
    report.config("matrix_mb", bytes / 1e6);
    report.config("l2_mb", prop.l2CacheSize / 1e6);

    // Random input and the exact CPU transpose (not zeroed: every element is written before it is read).
    verify::host_vector<float> h_in(N), h_ref(N), h_out(N);
    verify::fill_uniform(h_in.data(), N, opt.seed);
    lesson::HostTimer cpu;
    verify::transpose_reference(h_in.data(), h_ref.data(), rows, cols);
    report.cpu_reference_ms(cpu.ms(), verify::host_threads());

    // 1. Allocate device memory, 2. copy the input in.
    float *d_in = nullptr, *d_out = nullptr;
    CUDA_CHECK(cudaMalloc(&d_in, bytes));
    CUDA_CHECK(cudaMalloc(&d_out, bytes));
    CUDA_CHECK(cudaMemcpy(d_in, h_in.data(), bytes, cudaMemcpyHostToDevice));

    // 3. Launch each rung (kRungs), then verify and time it.
    const int R = static_cast<int>(rows), C = static_cast<int>(cols);
    std::vector<double> ms(kRungCount, NAN), gbps(kRungCount, NAN);
    size_t last = 0;  // the last row run: --inject-fault corrupts its output
    for (size_t k = 0; k < kRungCount; ++k)
        if (selected(rung_only, k)) last = k;
    for (size_t k = 0; k < kRungCount; ++k) {
        if (!selected(rung_only, k)) continue;
        const Rung& rung = kRungs[k];
        // Poison the output (0xFF bytes are NaN): an element a rung never writes fails the check.
        CUDA_CHECK(cudaMemset(d_out, 0xFF, bytes));
        rung.launch(d_in, d_out, R, C);
        CUDA_CHECK_LAUNCH();
        CUDA_CHECK(cudaDeviceSynchronize());
        // 4. Copy the result out; 5. verify every element, exactly.
        CUDA_CHECK(cudaMemcpy(h_out.data(), d_out, bytes, cudaMemcpyDeviceToHost));
        if (opt.inject_fault && k == last) verify::inject_fault(h_out.data(), N, opt.seed);
        report.check(verify::check_moved(h_out.data(), rung.transposes ? h_ref.data() : h_in.data(), N,
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
    const double copy_gbps = gbps[0], naive_ms = ms[kFirstRung];  // NaN when rung 1 did not run
    const std::string in_l2 = lesson::l2_note(2.0 * bytes, prop);
    const lesson::StreamBound dram =
        in_l2.empty() ? lesson::measure_stream_bound(prop, 1, 1) : lesson::stream_bound_not_measured(1, 1, in_l2);
    lesson::add_bound(report, dram, int(opt.device));
    const double d2d = lesson::measure_d2d_gbps(prop);
    report.yardstick("copy kernel (float4, same matrix)", copy_gbps, "GB/s");
    report.yardstick("device-to-device cudaMemcpy", d2d, "GB/s");
    report.timing(lesson::kTimingMethod);
    std::printf("%-40s %10s %10s %9s %9s\n", "rung", "ms", "GB/s", "vs copy", "x naive");
    size_t best = rung_only == 0 ? kFirstRung : last;  // the fastest rung, or the one run alone
    for (size_t k = 0; k < kRungCount; ++k) {
        if (!selected(rung_only, k)) continue;
        const Rung& r = kRungs[k];
        std::printf("%-40s %10.4f %10.1f %8.2fx ", r.name, ms[k], gbps[k], gbps[k] / copy_gbps);
        if (std::isnan(naive_ms)) std::printf("%9s\n", "-");
        else std::printf("%8.2fx\n", naive_ms / ms[k]);
        report.variant_bound(r.name, ms[k], gbps[k], "GB/s", dram.gbps, "DRAM bound", in_l2);
        if (k == kControl) continue;
        if (r.transposes && rung_only == 0)
            report.metric(std::string("speedup over naive: ") + r.name, naive_ms / ms[k], "x");
        if (r.transposes && gbps[k] > gbps[best]) best = k;
    }
    // Rung 5's gain over rung 3 in two steps, the three kernels timed in turns: rung 3 -> control is the float4
    // accesses alone, control -> rung 5 the 64x64 tile with 16 floats per thread (and its 16x16 block).
    if (rung_only == 0) {
        const size_t split[] = {kFirstRung + 2, kControl, kFirstRung + 4};  // rung 3, the control, rung 5
        const std::vector<double> t = lesson::time_interleaved_ms(static_cast<int>(opt.repeat), 3, [&](int v) {
            kRungs[split[v]].launch(d_in, d_out, R, C);
            CUDA_CHECK_LAUNCH();
        });
        report.metric("float4 accesses: rung 3 / control (time, in turns)", t[0] / t[1], "x");
        report.metric("64x64 tile, 16 floats per thread: control / rung 5 (time, in turns)", t[1] / t[2], "x");
    }
    report.variant_yardstick(std::string(kRungs[best].name) + " against the copy kernel", ms[best], gbps[best], "GB/s",
                             copy_gbps, "copy kernel", in_l2);
    if (rung_only == 0) report.metric("diagonal / row-major block order (time)", ms[5] / ms[4], "x");
    report.metric("best rung / device-to-device cudaMemcpy", gbps[best] / d2d, "x");
    int blocksPadded = 0, blocksWide = 0, blocksControl = 0;
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocksPadded, transposeTiled<1>, kTile * kBlockRows, 0));
    CUDA_CHECK(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocksWide, transposeWide, kWideThreads * kWideThreads, 0));
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocksControl, transposeFloat4Tile,
                                                             kCtlThreadsX * kCtlThreadsY, 0));
    report.metric("resident blocks per SM, padded 32x33", double(blocksPadded), "blocks");
    report.metric("resident blocks per SM, wide 64x65", double(blocksWide), "blocks");
    report.metric("resident blocks per SM, control 32x33 float4", double(blocksControl), "blocks");
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
