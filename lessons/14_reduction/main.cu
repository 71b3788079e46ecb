// Lesson 14 of the course (00-24): reduction, a ladder of eleven kernels and a CUB side variant, against CUB.
// Before: lesson 13 (13_matmul_ladder). Next: lesson 15 (15_scan).
// Run: ./build/bin/reduction [--quick]   (--help lists every flag; README.md is the handout)
//
// The sum of n floats. One file per rung in kernels/ (diff two neighbours to see one idea):
//   1 interleaved      the classic tree in shared memory, tid % (2s): divergent warps
//   2 strided index    the work packed into the first warps: shared-memory bank conflicts
//   3 sequential       the tree folded the other way: no divergence, no conflicts
//   4 first add        a pair per thread, added during the load: half the blocks per pass
//   5 grid stride      one wave of blocks, each thread loops over many pairs first
//   6 warp shuffle     the last 64 values in one warp with __shfl_down_sync
//   7 cg::reduce       the same warp step with cooperative groups
//   8 one pass         a one-wave grid, then a one-block finish kernel in a fixed order
//   9 float4           16-byte loads, one in flight per thread
//  10 float4 x4        four 16-byte loads in flight, four accumulators
//  11 last block       the finish inside the kernel: the last block to take a ticket adds the partials
//  12 cub::BlockReduce a side variant of rung 10: CUB's block primitive in place of blockReduce()
// Rungs 1-7 reduce n values to one per block; run_rung() launches passes until one
// value is left. cub::DeviceReduce::Sum on the same floats is the yardstick (--rung=N runs
// one rung beside it). Every sum is checked against a compensated double sum on the CPU,
// within the error bound of its own summation order; rungs 10 and 11 also sum int32 values
// into int64, which must match the CPU bit for bit; and every rung and CUB sum
// integer-valued floats whose every partial sum is exact, so that they too must match the
// int64 sum bit for bit (checks.cuh).
#include <cub/device/device_reduce.cuh>

#include <algorithm>
#include <cmath>
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
#include "verify/reduction.h"

#include "kernels/10_float4_unrolled.cuh"
#include "kernels/11_last_block.cuh"
#include "kernels/12_cub_block_reduce.cuh"
#include "kernels/1_interleaved.cuh"
#include "kernels/2_strided_index.cuh"
#include "kernels/3_sequential.cuh"
#include "kernels/4_first_add.cuh"
#include "kernels/5_grid_stride.cuh"
#include "kernels/6_warp_shuffle.cuh"
#include "kernels/7_cooperative_groups.cuh"
#include "kernels/8_one_pass_finish.cuh"
#include "kernels/9_float4.cuh"

// The ladder, in order. A launcher reduces `count` floats at `in` to Pass::values
// floats at `out` (kernels/common.cuh); `kernel` is its main kernel, for the
// occupancy query.
using Launcher = Pass (*)(const float* in, size_t count, float* out, const Scratch<float>& s);
struct Rung {
    const char* name;
    Launcher launch;
    const void* kernel;
    int threads;
};
static const Rung kRungs[] = {
    {"1 interleaved, divergent tid % (2s)", rung1::launch, (const void*)rung1::reduceInterleaved, rung1::kThreads},
    {"2 strided index (bank conflicts)", rung2::launch, (const void*)rung2::reduceStrided, rung2::kThreads},
    {"3 sequential addressing", rung3::launch, (const void*)rung3::reduceSequential, rung3::kThreads},
    {"4 first add during the load", rung4::launch, (const void*)rung4::reduceFirstAdd, rung4::kThreads},
    {"5 grid-stride, one wave", rung5::launch, (const void*)rung5::reduceCoarsened, rung5::kThreads},
    {"6 last warp: __shfl_down_sync", rung6::launch, (const void*)rung6::reduceWarpShuffle, rung6::kThreads},
    {"7 last warp: cg::reduce", rung7::launch, (const void*)rung7::reduceCg, rung7::kThreads},
    {"8 one pass, finish kernel", rung8::launch<float, float>, (const void*)rung8::reduceOnePass<float, float>,
     rung8::kThreads},
    {"9 float4, finish kernel", rung9::launch<float, float>, (const void*)rung9::reduceVec4<float, float>,
     rung9::kThreads},
    {"10 float4 x4, finish kernel", rung10::launch<float, float>, (const void*)rung10::reduceVec4<float, float>,
     rung10::kThreads},
    {"11 float4 x4, last block finishes", rung11::launch<float, float>,
     (const void*)rung11::reduceLastBlock<float, float>, rung11::kThreads},
    {"12 side: rung 10 with cub::BlockReduce", rung12::launch<float, float>,
     (const void*)rung12::reduceVec4<float, float>, rung12::kThreads},
};
constexpr int kRungCount = int(sizeof(kRungs) / sizeof(kRungs[0]));
constexpr int kRung10 = 9, kRung11 = 10, kRungCub = 11;  // their places in kRungs; kRungCub: the side variant
// --rung=R runs rung R alone (0: every rung); k is a place in kRungs.
static bool selected(int64_t rung_only, int k) { return rung_only == 0 || rung_only == k + 1; }
// The multi-pass work buffers are sized for one block width.
static_assert(rung1::kThreads == rung2::kThreads && rung2::kThreads == rung3::kThreads &&
                  rung3::kThreads == rung4::kThreads && rung4::kThreads == rung5::kThreads &&
                  rung5::kThreads == rung6::kThreads && rung6::kThreads == rung7::kThreads,
              "rungs 1-7 share the work buffers");
// The integers are drawn from [-2^27, 2^27): any sum of 2^36 of them fits in int64.
constexpr int64_t kMaxN = int64_t(1) << 36;

// Runs one rung to the end: each launcher call reduces `count` values to
// p.values (one per block for rungs 1-7, one for rungs 8-12); the multi-pass
// rungs go round this loop, ping-ponging between the work buffers, until one
// value is left. Returns where the sum is and the depth of the whole summation
// tree (the depths of the passes add up: a partial of pass 1 is an input of pass 2).
struct RungRun {
    const float* d_sum;
    uint64_t depth;
};
static RungRun run_rung(const Rung& rung, const float* d_in, size_t n, float* d_a, float* d_b,
                        const Scratch<float>& s) {
    const float* src = d_in;
    float* dst = d_a;
    size_t count = n;
    uint64_t depth = 0;
    do {
        const Pass p = rung.launch(src, count, dst, s);
        count = p.values;
        depth += p.depth;
        src = dst;
        dst = (dst == d_a) ? d_b : d_a;
    } while (count > 1);
    return {src, depth};
}

static std::string size_text(int64_t n) {
    for (int p = 0; p < 63; ++p)
        if (n == (int64_t(1) << p)) return "2^" + std::to_string(p);
    return std::to_string(n);
}

// The steps of main() that have files of their own: the device buffers, 1. occupancy, 6-8. the
// checks after the ladder, and the summary. They use the table and run_rung() above.
#include "buffers.cuh"
#include "checks.cuh"
#include "occupancy.cuh"
#include "summary.cuh"

// 4. The ladder. Per rung: poison what it writes, run it, check the sum against its bound;
//    time it (all its launches in one timed call), and check that the last timed call left
//    the same bits (every rung adds in a fixed order). Fills ms (0: not run) and sums.
static void run_ladder(lesson::Report& report, const Buffers& buf, size_t N, const verify::SumReference& ref,
                       const Grids& g, const lesson::CommonOptions& opt, int64_t rung_only, std::vector<double>& ms,
                       std::vector<float>& sums) {
    for (int k = 0; k < kRungCount; ++k) {
        if (!selected(rung_only, k)) continue;
        const Rung& rung = kRungs[k];
        const Scratch<float> s{buf.d_partials, buf.d_counter, g.grid[k]};
        buf.poison();
        const RungRun run = run_rung(rung, buf.d_in, N, buf.d_a, buf.d_b, s);
        sums[k] = copy_out(run.d_sum);
        float checked = sums[k];
        if (opt.inject_fault) verify::inject_fault(&checked, 1, uint64_t(opt.seed));
        lesson::Check c = verify::check_float_sum(checked, ref, run.depth, rung.name);
        buf.poison();
        ms[k] = lesson::time_median_ms(int(opt.repeat), [&] { run_rung(rung, buf.d_in, N, buf.d_a, buf.d_b, s); });
        const lesson::Check last = verify::check_same_bits(copy_out(run.d_sum), sums[k], "");
        c.what += last.pass ? ", last timed call: same bits" : ", last timed call: OTHER BITS";
        c.pass = c.pass && last.pass;
        c.bad_count = c.pass ? 0 : 1;
        c.first_bad = c.pass ? -1 : 0;
        report.check(c);
    }
}

int main(int argc, char** argv) {
    // Flags first: bad input exits 2 before any CUDA call.
    lesson::CommonOptions opt;
    int64_t n = int64_t(1) << 28, rung_only = 0;
    lesson::Cli cli("reduction",
                    "Sums n floats with eleven kernels and a CUB side variant, against cub::DeviceReduce::Sum.");
    lesson::add_common_flags(cli, opt);
    cli.add_int("n", &n, 1, kMaxN, "values to sum", int64_t(1) << 20);
    cli.add_int("rung", &rung_only, 0, kRungCount, "run and check one rung alone (0 = all rungs)");
    cli.parse_or_exit(argc, argv);

    const size_t N = static_cast<size_t>(n);
    const std::string size_flag = "--n=" + std::to_string(n);
    // Host: the floats and the int32s. Device: both, plus the work buffers of the
    // multi-pass rungs (n / 256 and n / 256^2 floats) and a little scratch.
    lesson::require_host_memory(N * (sizeof(float) + sizeof(int32_t)), "pageable", size_flag);
    cudaDeviceProp prop = lesson::pick_device(opt.device);
    const int sms = prop.multiProcessorCount;
    Buffers buf;
    buf.work_a = lesson::ceil_div(N, rung1::kThreads), buf.work_b = lesson::ceil_div(buf.work_a, rung1::kThreads);
    lesson::require_device_memory(N * (sizeof(float) + sizeof(int32_t)) + (buf.work_a + buf.work_b) * sizeof(float) +
                                      (size_t(64) << 20),
                                  size_flag);

    lesson::Report report("14_reduction");
    report.device(prop);
    report.config_from(cli);
    report.config("input_mb", 4.0 * N / 1e6);
    report.config("l2_mb", prop.l2CacheSize / 1e6);

    // The inputs: floats uniform in [-1, 3) (mean 1: the sum is about n), int32 uniform in [-2^27, 2^27).
    verify::host_vector<float> h_in(N);  // not zeroed: the fills write every element
    verify::host_vector<int32_t> h_ints(N);
    verify::fill_uniform(h_in.data(), N, uint64_t(opt.seed), -1.0f, 3.0f);
    verify::fill_int32(h_ints.data(), N, uint64_t(opt.seed) + 1);

    // The CPU references: a compensated double sum (with sum |x|, which scales the error
    // bound) and the exact int64 sum.
    lesson::HostTimer cpu;
    const verify::SumReference ref = verify::sum_reference(h_in.data(), N);
    const int64_t ref_int = verify::sum_int64(h_ints.data(), N);
    report.cpu_reference_ms(cpu.ms(), verify::host_threads());
    report.metric("condition of the float sum: sum |x| / |sum x|", ref.sum_abs / std::fabs(ref.sum), "");

    // 1. Occupancy, and from it the grids of the grid-stride rungs.
    const Grids g = occupancy(report, sms, rung_only);
    buf.max_grid = g.max_grid;

    // 2. Allocate.
    CUDA_CHECK(cudaMalloc(&buf.d_in, N * sizeof(float)));  // 256-byte aligned: rungs 9-11 read float4s
    CUDA_CHECK(cudaMalloc(&buf.d_ints, N * sizeof(int)));
    CUDA_CHECK(cudaMalloc(&buf.d_a, buf.work_a * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&buf.d_b, buf.work_b * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&buf.d_partials, buf.max_grid * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&buf.d_partials64, buf.max_grid * sizeof(long long)));
    CUDA_CHECK(cudaMalloc(&buf.d_sum64, sizeof(long long)));
    CUDA_CHECK(cudaMalloc(&buf.d_cub_sum, sizeof(float)));
    CUDA_CHECK(cudaMalloc(&buf.d_counter, sizeof(unsigned)));
    CUDA_CHECK(cudaMemset(buf.d_counter, 0, sizeof(unsigned)));  // every rung-8 launch leaves it at 0 again

    // 3. Copy the inputs in.
    CUDA_CHECK(cudaMemcpy(buf.d_in, h_in.data(), N * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(buf.d_ints, h_ints.data(), N * sizeof(int), cudaMemcpyHostToDevice));

    // 4. The ladder.
    std::vector<double> ms(kRungCount, 0.0);
    std::vector<float> sums(kRungCount, NAN);
    run_ladder(report, buf, N, ref, g, opt, rung_only, ms, sums);

    // 5. The yardstick: cub::DeviceReduce::Sum. Called with no temporary storage it only says
    //    how much it needs; allocate that, then the same call sums. 32-bit item counts where
    //    they fit (CUB's fastest offsets), 64-bit beyond.
    float* d_in = buf.d_in;
    float* d_cub_sum = buf.d_cub_sum;
    void* d_temp = nullptr;
    size_t temp_bytes = 0;
    auto cub_sum = [&](void* temp, size_t& bytes) {
        return N <= size_t(INT32_MAX) ? cub::DeviceReduce::Sum(temp, bytes, d_in, d_cub_sum, int(N))
                                      : cub::DeviceReduce::Sum(temp, bytes, d_in, d_cub_sum, int64_t(N));
    };
    CUDA_CHECK(cub_sum(nullptr, temp_bytes));
    CUDA_CHECK(cudaMalloc(&d_temp, temp_bytes));
    report.metric("CUB temporary storage", double(temp_bytes), "bytes");
    CUDA_CHECK(cudaMemset(d_cub_sum, 0xFF, sizeof(float)));
    CUDA_CHECK(cub_sum(d_temp, temp_bytes));
    const float cub_result = copy_out(d_cub_sum);
    report.check(verify::compare(&cub_result, &ref.sum, 1, 1e-4, "cub::DeviceReduce::Sum (order unknown: 1e-4)"));
    const double cub_ms = lesson::time_median_ms(int(opt.repeat), [&] { CUDA_CHECK(cub_sum(d_temp, temp_bytes)); });

    // 6-8. More checks (checks.cuh): rung 11 at several grid sizes, the exact integer sums of
    //      rungs 10 and 11, and every rung and CUB on exactly summable floats.
    if (selected(rung_only, kRung11)) check_grid_sizes(report, buf, N, ref, g, sms, rung_only, sums[kRung11]);
    const double int_ms = check_integer_sums(report, buf, N, ref_int, g, opt, rung_only);
    verify::host_vector<float>().swap(h_in);  // the host copies are done with
    verify::host_vector<int32_t>().swap(h_ints);
    check_exact_floats(report, buf, N, g, opt, rung_only);

    // 9. Free device memory.
    CUDA_CHECK(cudaFree(d_temp));
    CUDA_CHECK(cudaFree(buf.d_counter));
    CUDA_CHECK(cudaFree(buf.d_cub_sum));
    CUDA_CHECK(cudaFree(buf.d_sum64));
    CUDA_CHECK(cudaFree(buf.d_partials64));
    CUDA_CHECK(cudaFree(buf.d_partials));
    CUDA_CHECK(cudaFree(buf.d_b));
    CUDA_CHECK(cudaFree(buf.d_a));
    CUDA_CHECK(cudaFree(buf.d_ints));
    CUDA_CHECK(cudaFree(buf.d_in));

    report_ladder(report, prop, opt, cli, n, ms, cub_ms, int_ms);
    return report.finish(opt.json);
}
