// Lesson 15 of the course (00-24): scan (prefix sum) and stream compaction.
// Before: lesson 14 (14_reduction). Next: lesson 16 (16_histogram).
// Run: ./build/bin/scan [--quick]   (--help lists every flag; README.md is the handout)
//
// Lesson 14 reduced n numbers to one sum; a scan keeps all n running sums, and with them every
// element can compute where it goes (compaction, radix sort, allocating output space). The
// ladder, one file per rung in kernels/ (diff neighbours to see each step):
//   1 Hillis-Steele    one block per 2048-element tile: 11 steps, 20481 additions
//   2 Blelloch         the same tiles: 22 steps, 4094 additions (work-efficient)
//   3 Blelloch padded  rung 2 with a conflict-free shared-memory index
//   4 three-phase      scan tiles, scan the tile sums, add them back: 4n of traffic
//   5 reduce-then-scan sum tiles, scan the tile sums, scan tiles from them: 3n
//   6 single-pass      decoupled look-back: read n, write n, one kernel, rung 4's tile shape
//   7 narrow tile      the same on 128 threads x 32 elements instead of 256 x 16
//   8 first-look pause rung 7, sleeping 1.2 us between publishing its sum and looking back
//   cub::DeviceScan    the yardstick, on the same data
// then stream compaction (flags, exclusive scan, scatter) against cub::DeviceSelect::If
// (compaction.cuh). Rungs 1-3 scan each tile on its own (a segmented scan); rungs 4-8 and CUB
// scan the whole array, int32 and float (floats.cuh). Every element of every result is checked
// against a CPU reference (verify/scan.h): ints exactly, floats within the worst-case rounding
// error of the rung's order of additions, and floats once more on integer values (1 and 2, at
// most 2^23 - 1 of them) whose every partial sum is exact: bit for bit against the int scan.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cub/cub.cuh>
#include <string>
#include <type_traits>
#include <vector>

#include "common/ceilings.h"
#include "common/check.h"
#include "common/device.h"
#include "common/flags.h"
#include "common/memory.h"
#include "common/report.h"
#include "common/timer.h"
#include "verify/compare.h"
#include "verify/parallel.h"
#include "verify/random.h"
#include "verify/scan.h"

#include "kernels/1_hillis_steele.cuh"
#include "kernels/2_blelloch.cuh"
#include "kernels/3_blelloch_padded.cuh"
#include "kernels/4_three_phase.cuh"
#include "kernels/5_reduce_then_scan.cuh"
#include "kernels/6_single_pass.cuh"
#include "kernels/7_single_pass_narrow.cuh"
#include "kernels/8_single_pass_wait.cuh"
#include "kernels/compact.cuh"

template <class T>
using ScanFn = void (*)(const T* in, T* out, size_t n, bool exclusive, void* workspace, cudaStream_t stream);

// The ladder. Every rung scans 4-byte elements; int32 inputs are scanned as
// uint32 (the same bits, and wrap-around is defined for unsigned adds, while
// signed overflow is undefined behaviour in C++).
struct Rung {
    const char* name;
    size_t tile;                          // > 0: scans each tile of this size on its own
    size_t (*workspace_bytes)(size_t n);  // device scratch it needs
    ScanFn<unsigned> scan_int;
    ScanFn<float> scan_float;              // nullptr: int32 only
    uint64_t (*rounding_depth)(size_t n);  // the float error bound's d (verify/scan.h)
};
static const Rung kRungs[] = {
    {"1 Hillis-Steele, 2048-tiles", hillis_steele::kTile, hillis_steele::workspace_bytes, hillis_steele::scan<unsigned>,
     nullptr, nullptr},
    {"2 Blelloch, 2048-tiles", blelloch::kTile, blelloch::workspace_bytes, blelloch::scan<unsigned>, nullptr, nullptr},
    {"3 Blelloch padded, 2048-tiles", blelloch_padded::kTile, blelloch_padded::workspace_bytes,
     blelloch_padded::scan<unsigned>, nullptr, nullptr},
    {"4 three-phase", 0, three_phase::workspace_bytes, three_phase::scan<unsigned>, three_phase::scan<float>,
     three_phase::rounding_depth},
    {"5 reduce-then-scan", 0, reduce_then_scan::workspace_bytes, reduce_then_scan::scan<unsigned>,
     reduce_then_scan::scan<float>, reduce_then_scan::rounding_depth},
    {"6 single-pass look-back", 0, single_pass::workspace_bytes, single_pass::scan<unsigned>, single_pass::scan<float>,
     single_pass::rounding_depth},
    {"7 look-back, 128 x 32 tile", 0, single_pass_narrow::workspace_bytes, single_pass_narrow::scan<unsigned>,
     single_pass_narrow::scan<float>, single_pass_narrow::rounding_depth},
    {"8 look-back after a pause", 0, single_pass_wait::workspace_bytes, single_pass_wait::scan<unsigned>,
     single_pass_wait::scan<float>, single_pass_wait::rounding_depth},
};
constexpr int kRungCount = sizeof(kRungs) / sizeof(kRungs[0]);

// The yardstick. CUB's two-step pattern: a call with d_temp_storage = nullptr
// only returns the scratch size (see main); the same call with scratch scans.
// n < 2^32 here, so CUB gets 32-bit offsets, its fastest path.
template <class T>
void cub_scan(const T* in, T* out, size_t n, bool exclusive, void* temp, size_t temp_bytes) {
    if (exclusive) CUDA_CHECK(cub::DeviceScan::ExclusiveSum(temp, temp_bytes, in, out, static_cast<unsigned>(n)));
    else CUDA_CHECK(cub::DeviceScan::InclusiveSum(temp, temp_bytes, in, out, static_cast<unsigned>(n)));
}

// One timed result, reported once the DRAM bound is measured.
struct Timed {
    std::string name;
    double ms, gbps;
    double cub_gbps;  // > 0: also compared with CUB
};

// Poison the output (`poison` in every byte), run once, copy the result back for
// checking, then time reruns (they write the same values). The poison is a byte
// whose pattern is no right answer (verify::absent_fill_byte; for floats 0xFF, a
// NaN), so an element the kernel never wrote fails the check.
template <class T, class Launch>
double run_and_time(Launch&& launch, T* d_out, T* h_out, size_t n, int repeat, int poison) {
    CUDA_CHECK(cudaMemset(d_out, poison, n * sizeof(T)));
    launch();
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(h_out, d_out, n * sizeof(T), cudaMemcpyDeviceToHost));
    return lesson::time_median_ms(repeat, launch);
}

// The ladder on one element type: CUB first (the yardstick), then each rung
// that handles T, both scans. check(h_out, exclusive, rung or nullptr for CUB)
// verifies a result.
template <class T, class Check>
void run_ladder(const char* type, const T* d_in, T* d_out, T* h_out, size_t n, void* d_work, size_t work_bytes,
                int only_rung, int repeat, int poison, std::vector<Timed>& timed, Check&& check) {
    const double bytes = 2.0 * n * sizeof(T);  // read n, write n: the least any scan moves
    for (bool exclusive : {true, false}) {
        const std::string mode = std::string(type) + (exclusive ? " exclusive: " : " inclusive: ");
        const double cub_ms = run_and_time([&] { cub_scan(d_in, d_out, n, exclusive, d_work, work_bytes); }, d_out,
                                           h_out, n, repeat, poison);
        check(h_out, exclusive, nullptr);
        timed.push_back(
            {mode + (exclusive ? "cub ExclusiveSum" : "cub InclusiveSum"), cub_ms, bytes / (cub_ms * 1e6), 0});
        for (int r = 0; r < kRungCount; ++r) {
            const Rung& rung = kRungs[r];
            ScanFn<T> fn = nullptr;
            if constexpr (std::is_same<T, unsigned>::value) fn = rung.scan_int;
            else fn = rung.scan_float;
            if (fn == nullptr || (only_rung != 0 && only_rung != r + 1)) continue;
            const double ms =
                run_and_time([&] { fn(d_in, d_out, n, exclusive, d_work, 0); }, d_out, h_out, n, repeat, poison);
            check(h_out, exclusive, &rung);
            timed.push_back({mode + rung.name, ms, bytes / (ms * 1e6), rung.tile == 0 ? bytes / (cub_ms * 1e6) : 0});
        }
    }
}

// Parts 2 and 3 and the summary have files of their own; they use the table and
// run_ladder() above.
#include "compaction.cuh"
#include "floats.cuh"
#include "summary.cuh"

// Device scratch: every rung and CUB say how much they need; one buffer serves them all.
static size_t scratch_bytes(size_t N, size_t n_exact, const compact::Above& keep) {
    size_t work_bytes = 0, b = 0;
    CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, b, (const unsigned*)nullptr, (unsigned*)nullptr, unsigned(N)));
    work_bytes = std::max(work_bytes, b);
    CUDA_CHECK(cub::DeviceScan::InclusiveSum(nullptr, b, (const unsigned*)nullptr, (unsigned*)nullptr, unsigned(N)));
    work_bytes = std::max(work_bytes, b);
    for (const size_t items : {N, n_exact}) {  // Part 3 scans floats at both sizes
        CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, b, (const float*)nullptr, (float*)nullptr, unsigned(items)));
        work_bytes = std::max(work_bytes, b);
        CUDA_CHECK(cub::DeviceScan::InclusiveSum(nullptr, b, (const float*)nullptr, (float*)nullptr, unsigned(items)));
        work_bytes = std::max(work_bytes, b);
    }
    CUDA_CHECK(cub::DeviceSelect::If(nullptr, b, (int*)nullptr, (int*)nullptr, (unsigned long long*)nullptr, int64_t(N),
                                     keep));
    work_bytes = std::max(work_bytes, b);
    for (const Rung& r : kRungs) work_bytes = std::max({work_bytes, r.workspace_bytes(N), r.workspace_bytes(n_exact)});
    return work_bytes;
}

int main(int argc, char** argv) {
    // Flags first: bad input exits 2 before any CUDA call.
    lesson::CommonOptions opt;
    int64_t n = int64_t(1) << 28, rung = 0, threshold = 0;
    lesson::Cli cli("scan",
                    "Prefix sums (inclusive and exclusive) of n int32 and floats: a ladder of scans against "
                    "cub::DeviceScan, then stream compaction against cub::DeviceSelect::If.");
    lesson::add_common_flags(cli, opt);
    cli.add_int("n", &n, 1, (int64_t(1) << 32) - 1, "elements to scan (positions are 32-bit)", int64_t(1) << 20);
    cli.add_int("rung", &rung, 0, kRungCount, "run and check one rung alone (0: all; compaction runs with 0 and 6)");
    cli.add_int("threshold", &threshold, -1001, 1000,
                "compaction keeps the elements > threshold (inputs: -1000..1000)");
    cli.parse_or_exit(argc, argv);

    const size_t N = static_cast<size_t>(n), bytes = N * 4;
    const std::string size_flag = "--n=" + std::to_string(n);
    const bool floats = rung == 0 || rung >= 4, compaction = rung == 0 || rung == 6;
    const size_t n_exact = std::min<size_t>(N, verify::kExactFloatMaxN);  // Part 3's exact float scans
    // Host: input and references (12n bytes pageable) and one pinned output (4n) at a time.
    lesson::require_host_memory(4 * bytes, "pageable and pinned", size_flag);

    cudaDeviceProp prop = lesson::pick_device(opt.device);

    // Part 1's int32 input and its references: the whole array, and each 2048-tile on its own.
    verify::host_vector<int32_t> h_ints(N), h_int_ref(N), h_tile_ref(N);  // not zeroed: filled before read
    verify::fill_scan_ints(h_ints.data(), N, opt.seed);
    lesson::HostTimer cpu;
    verify::inclusive_scan_reference(h_ints.data(), h_int_ref.data(), N);
    verify::inclusive_scan_reference(h_ints.data(), h_tile_ref.data(), N, hillis_steele::kTile);
    double cpu_ms = cpu.ms();
    // An element a rung never writes keeps the poison: one that no right answer equals.
    const int poison = verify::absent_fill_byte({{h_int_ref.data(), N}, {h_tile_ref.data(), N}});
    if (poison < 0)
        lesson::bad_input("at --n=" + std::to_string(n) + " --seed=" + std::to_string(opt.seed) +
                          " every byte pattern is a right answer, so no poison shows an unwritten element; "
                          "try another --seed");

    const compact::Above keep{static_cast<int>(threshold)};
    const size_t work_bytes = scratch_bytes(N, n_exact, keep);
    // in, out, flags, kept (the float part reuses the same room after the int part).
    lesson::require_device_memory(4 * bytes + work_bytes + 8, size_flag);

    lesson::Report report("15_scan");
    report.device(prop);
    report.config_from(cli);
    report.config("scratch_bytes", int64_t(work_bytes));
    const int repeat = static_cast<int>(opt.repeat);
    std::vector<Timed> timed;
    bool injected = false;

    void* d_work = nullptr;
    CUDA_CHECK(cudaMalloc(&d_work, work_bytes));
    // Pinned: the many copies back run at full PCIe speed (lesson 05).
    void* h_out = nullptr;
    CUDA_CHECK(cudaMallocHost(&h_out, bytes));

    // ---- Part 1: int32, every rung.
    {
        int *d_in = nullptr, *d_out = nullptr;
        CUDA_CHECK(cudaMalloc(&d_in, bytes));
        CUDA_CHECK(cudaMalloc(&d_out, bytes));
        CUDA_CHECK(cudaMemcpy(d_in, h_ints.data(), bytes, cudaMemcpyHostToDevice));
        int32_t* h_got = static_cast<int32_t*>(h_out);
        run_ladder<unsigned>(
            "int32", reinterpret_cast<const unsigned*>(d_in), reinterpret_cast<unsigned*>(d_out),
            static_cast<unsigned*>(h_out), N, d_work, work_bytes, int(rung), repeat, poison, timed,
            [&](const unsigned*, bool exclusive, const Rung* r) {
                if (opt.inject_fault && !injected && r != nullptr)
                    injected = verify::inject_fault(h_got, N, opt.seed) < N;
                const bool tiled = r != nullptr && r->tile > 0;
                const std::string what = std::string("int32 ") + (exclusive ? "exclusive, " : "inclusive, ") +
                                         (r ? r->name : "cub::DeviceScan") + ": every element, exact" +
                                         (tiled ? " (each tile on its own)" : "");
                report.check(verify::check_int_scan(h_got, tiled ? h_tile_ref.data() : h_int_ref.data(), N, exclusive,
                                                    tiled ? r->tile : 0, what + ", no element unwritten"));
            });

        // ---- Part 2: stream compaction of the same int32 input (compaction.cuh).
        if (compaction)
            cpu_ms += run_compaction(report, d_in, reinterpret_cast<unsigned*>(d_out), h_got, h_ints.data(),
                                     h_tile_ref.data(), N, keep, d_work, work_bytes, repeat, timed);
        CUDA_CHECK(cudaFree(d_in));
        CUDA_CHECK(cudaFree(d_out));
        // Part 1's host buffers go before Part 3 allocates its own.
        verify::host_vector<int32_t>().swap(h_ints);
        verify::host_vector<int32_t>().swap(h_int_ref);
        verify::host_vector<int32_t>().swap(h_tile_ref);
    }

    // ---- Part 3: float, rungs 4-8 (the whole array) and CUB (floats.cuh).
    if (floats) cpu_ms += run_float_scans(report, d_work, work_bytes, h_out, N, opt, int(rung), timed);
    CUDA_CHECK(cudaFree(d_work));
    CUDA_CHECK(cudaFreeHost(h_out));

    report_scans(report, prop, opt, cli, n, int(rung), compaction, cpu_ms, timed);
    return report.finish(opt.json);
}
