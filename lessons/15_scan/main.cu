// Lesson 15 of the course (00-23): scan (prefix sum) and stream compaction.
// Before: lesson 14 (14_reduction). Next: lesson 16 (16_histogram).
// Run: ./build/bin/scan [--quick]   (--help lists every flag; README.md is the handout)
//
// Scan (prefix sum) and stream compaction.
//
// Where it sits: lesson 14 reduced n numbers to one sum; a scan keeps all n
// running sums, and with them every element can compute where it goes
// (compaction, radix sort, allocating output space). Next: lesson 16, histograms.
//
// The ladder, one file per rung in kernels/ (diff neighbours to see each step):
//   1 Hillis-Steele    one block per 2048-element tile: 11 steps, 20481 additions
//   2 Blelloch         the same tiles: 22 steps, 4094 additions (work-efficient)
//   3 Blelloch padded  rung 2 with a conflict-free shared-memory index
//   4 three-phase      scan tiles, scan the tile sums, add them back: 4n of traffic
//   5 single-pass      decoupled look-back: read n, write n, one kernel
//   cub::DeviceScan    the yardstick, on the same data
// then stream compaction (flags, exclusive scan, scatter) against
// cub::DeviceSelect::If. Rungs 1-3 scan each tile on its own (a segmented
// scan); rungs 4, 5 and CUB scan the whole array, int32 and float. Every
// element of every result is checked against a CPU reference (verify/scan.h):
// ints exactly, floats within the worst-case rounding error of the rung's
// order of additions, and floats once more on integer values (1 and 2, at
// most 2^23 - 1 of them) whose every partial sum is exact: bit for bit
// against the int scan. See README.md.
//
// Run: ./build/bin/scan                      n = 2^28, every rung
//      ./build/bin/scan --rung=5 --n=1000003
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cub/cub.cuh>
#include <string>
#include <thread>
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
#include "kernels/5_single_pass.cuh"
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
    {"5 single-pass look-back", 0, single_pass::workspace_bytes, single_pass::scan<unsigned>, single_pass::scan<float>,
     single_pass::rounding_depth},
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

// Poison the output (0xFF bytes: -1 as int32, NaN as float), run once, copy the
// result back for checking, then time reruns (they write the same values).
template <class T, class Launch>
double run_and_time(Launch&& launch, T* d_out, T* h_out, size_t n, int repeat) {
    CUDA_CHECK(cudaMemset(d_out, 0xFF, n * sizeof(T)));
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
                int only_rung, int repeat, std::vector<Timed>& timed, Check&& check) {
    const double bytes = 2.0 * n * sizeof(T);  // read n, write n: the least any scan moves
    for (bool exclusive : {true, false}) {
        const std::string mode = std::string(type) + (exclusive ? " exclusive: " : " inclusive: ");
        const double cub_ms =
            run_and_time([&] { cub_scan(d_in, d_out, n, exclusive, d_work, work_bytes); }, d_out, h_out, n, repeat);
        check(h_out, exclusive, nullptr);
        timed.push_back(
            {mode + (exclusive ? "cub ExclusiveSum" : "cub InclusiveSum"), cub_ms, bytes / (cub_ms * 1e6), 0});
        for (int r = 0; r < kRungCount; ++r) {
            const Rung& rung = kRungs[r];
            ScanFn<T> fn = nullptr;
            if constexpr (std::is_same<T, unsigned>::value) fn = rung.scan_int;
            else fn = rung.scan_float;
            if (fn == nullptr || (only_rung != 0 && only_rung != r + 1)) continue;
            const double ms = run_and_time([&] { fn(d_in, d_out, n, exclusive, d_work, 0); }, d_out, h_out, n, repeat);
            check(h_out, exclusive, &rung);
            timed.push_back({mode + rung.name, ms, bytes / (ms * 1e6), rung.tile == 0 ? bytes / (cub_ms * 1e6) : 0});
        }
    }
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
    cli.add_int("rung", &rung, 0, kRungCount, "run and check one rung alone (0: all; compaction runs with 0 and 5)");
    cli.add_int("threshold", &threshold, -1001, 1000,
                "compaction keeps the elements > threshold (inputs: -1000..1000)");
    cli.parse_or_exit(argc, argv);

    const size_t N = static_cast<size_t>(n), bytes = N * 4;
    const std::string size_flag = "--n=" + std::to_string(n);
    const bool floats = rung == 0 || rung == 4 || rung == 5, compaction = rung == 0 || rung == 5;
    const size_t n_exact = std::min<size_t>(N, verify::kExactFloatMaxN);  // Part 3's exact float scans
    // Host: input and references (12n bytes pageable) and one pinned output (4n) at a time.
    lesson::require_host_memory(4 * bytes, "pageable and pinned", size_flag);

    // Part 1's int32 input and its references need no GPU (about 0.3 s at the default size):
    // they are computed on a host thread of their own while the CUDA context starts and the
    // pinned buffer is allocated, and joined before the input goes to the GPU.
    verify::host_vector<int32_t> h_ints(N), h_int_ref(N), h_tile_ref(N);  // not zeroed: filled before read
    double cpu_ms = 0;
    std::thread int_inputs([&] {
        verify::fill_scan_ints(h_ints.data(), N, opt.seed);
        lesson::HostTimer cpu;
        verify::inclusive_scan_reference(h_ints.data(), h_int_ref.data(), N);
        verify::inclusive_scan_reference(h_ints.data(), h_tile_ref.data(), N, hillis_steele::kTile);
        cpu_ms += cpu.ms();
    });
    cudaDeviceProp prop = lesson::pick_device(opt.device);

    // Device scratch: every rung and CUB say how much they need; one buffer serves them all.
    size_t work_bytes = 0, b = 0;
    const compact::Above keep{static_cast<int>(threshold)};
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
    // in, out, flags, kept (the float part reuses the same room after the int part).
    lesson::require_device_memory(4 * bytes + work_bytes + 8, size_flag);

    lesson::Report report("15_scan");
    report.device(prop.name, prop.major, prop.minor, prop.multiProcessorCount, prop.totalGlobalMem / 1e9);
    report.config("n", n);
    report.config("rung", rung);
    report.config("threshold", threshold);
    report.config("scratch_bytes", int64_t(work_bytes));
    report.config("repeat", opt.repeat);
    report.config("seed", opt.seed);
    const std::string in_l2 = lesson::l2_note(2.0 * bytes, prop);
    const int repeat = static_cast<int>(opt.repeat);
    std::vector<Timed> timed;
    bool injected = false;

    void* d_work = nullptr;
    CUDA_CHECK(cudaMalloc(&d_work, work_bytes));
    // Pinned: the many copies back run at full PCIe speed (lesson 05). Each input goes up through
    // it too (copied in on every host core first): 1 GB at 55 GB/s instead of about 7.5 pageable.
    void* h_out = nullptr;
    CUDA_CHECK(cudaMallocHost(&h_out, bytes));

    // ---- Part 1: int32, every rung.
    int_inputs.join();
    {
        int *d_in = nullptr, *d_out = nullptr;
        CUDA_CHECK(cudaMalloc(&d_in, bytes));
        CUDA_CHECK(cudaMalloc(&d_out, bytes));
        verify::parallel_copy(static_cast<int32_t*>(h_out), h_ints.data(), N);
        CUDA_CHECK(cudaMemcpy(d_in, h_out, bytes, cudaMemcpyHostToDevice));
        int32_t* h_got = static_cast<int32_t*>(h_out);
        run_ladder<unsigned>(
            "int32", reinterpret_cast<const unsigned*>(d_in), reinterpret_cast<unsigned*>(d_out),
            static_cast<unsigned*>(h_out), N, d_work, work_bytes, int(rung), repeat, timed,
            [&](const unsigned*, bool exclusive, const Rung* r) {
                if (opt.inject_fault && !injected && r != nullptr)
                    injected = verify::inject_fault(h_got, N, opt.seed) < N;
                const bool tiled = r != nullptr && r->tile > 0;
                const std::string what = std::string("int32 ") + (exclusive ? "exclusive, " : "inclusive, ") +
                                         (r ? r->name : "cub::DeviceScan") + ": every element, exact" +
                                         (tiled ? " (each tile on its own)" : "");
                report.check(verify::check_int_scan(h_got, tiled ? h_tile_ref.data() : h_int_ref.data(), N, exclusive,
                                                    tiled ? r->tile : 0, what));
            });

        // ---- Part 2: stream compaction of the same int32 input, built on rung 5, against cub::DeviceSelect::If.
        if (compaction) {
            unsigned* d_flags = nullptr;
            int* d_kept = nullptr;
            unsigned long long* d_count = nullptr;
            CUDA_CHECK(cudaMalloc(&d_flags, bytes));
            CUDA_CHECK(cudaMalloc(&d_kept, bytes));
            CUDA_CHECK(cudaMalloc(&d_count, sizeof(unsigned long long)));
            lesson::HostTimer cpu;
            const uint64_t ref_count = verify::compact_reference(h_ints.data(), N, keep.threshold, h_tile_ref.data());
            cpu_ms += cpu.ms();
            double ms[2];
            for (int k = 0; k < 2; ++k) {  // 0: ours, 1: CUB
                const char* who = k == 0 ? "flags + scan + scatter" : "cub::DeviceSelect::If";
                auto launch = [&] {
                    if (k == 0)
                        compact::compact(d_in, N, keep, d_flags, reinterpret_cast<unsigned*>(d_out), d_kept, d_count,
                                         d_work, 0);
                    else CUDA_CHECK(cub::DeviceSelect::If(d_work, work_bytes, d_in, d_kept, d_count, int64_t(N), keep));
                };
                CUDA_CHECK(cudaMemset(d_count, 0xFF, sizeof(unsigned long long)));
                ms[k] = run_and_time(launch, d_kept, h_got, N, repeat);
                unsigned long long count = 0;
                CUDA_CHECK(cudaMemcpy(&count, d_count, sizeof count, cudaMemcpyDeviceToHost));
                report.check(verify::check_compaction(
                    h_got, std::min<unsigned long long>(count, N), h_tile_ref.data(), ref_count,
                    std::string("compaction, ") + who + ": count and every kept element, exact"));
            }
            const double moved = 4.0 * N + 4.0 * ref_count;  // read n, write the kept ones
            timed.push_back({"compaction: cub::DeviceSelect::If", ms[1], moved / (ms[1] * 1e6), 0});
            timed.push_back(
                {"compaction: flags + scan + scatter", ms[0], moved / (ms[0] * 1e6), moved / (ms[1] * 1e6)});
            report.metric("compaction: fraction kept", double(ref_count) / double(N), "");
            CUDA_CHECK(cudaFree(d_flags));
            CUDA_CHECK(cudaFree(d_kept));
            CUDA_CHECK(cudaFree(d_count));
        }
        CUDA_CHECK(cudaFree(d_in));
        CUDA_CHECK(cudaFree(d_out));
        // Part 1's host buffers go before Part 3 allocates its own.
        verify::host_vector<int32_t>().swap(h_ints);
        verify::host_vector<int32_t>().swap(h_int_ref);
        verify::host_vector<int32_t>().swap(h_tile_ref);
    }

    // ---- Part 3: float, rungs 4 and 5 (the whole array) and CUB.
    if (floats) {
        verify::host_vector<float> h_in(N);  // not zeroed: filled before read
        verify::host_vector<double> h_ref(N);
        verify::fill_uniform(h_in.data(), N, opt.seed + 1);  // uniform in [-1, 1)
        lesson::HostTimer cpu;
        verify::inclusive_scan_reference(h_in.data(), h_ref.data(), N);
        cpu_ms += cpu.ms();
        // Sum |x| before each block of the input: the checks' bound, the same for every result.
        const std::vector<double> abs_before = verify::abs_sums_before_blocks(h_in.data(), N);
        float *d_in = nullptr, *d_out = nullptr;
        CUDA_CHECK(cudaMalloc(&d_in, bytes));
        CUDA_CHECK(cudaMalloc(&d_out, bytes));
        verify::parallel_copy(static_cast<float*>(h_out), h_in.data(), N);
        CUDA_CHECK(cudaMemcpy(d_in, h_out, bytes, cudaMemcpyHostToDevice));
        // CUB: tiles of at least 1024 items (128 threads x 8 or more on sm_70-sm_90), so at most
        // 64 + 3 * n / 1024 roundings per input by the same count as rung 5's.
        const uint64_t cub_depth = 64 + 3 * ((N + 1023) / 1024);
        run_ladder<float>("float", d_in, d_out, static_cast<float*>(h_out), N, d_work, work_bytes, int(rung), repeat,
                          timed, [&](const float* got, bool exclusive, const Rung* r) {
                              const uint64_t d = r ? r->rounding_depth(N) : cub_depth;
                              const double tol = verify::scan_float_tolerance(d, N);
                              const std::string what =
                                  std::string("float ") + (exclusive ? "exclusive, " : "inclusive, ") +
                                  (r ? r->name : "cub::DeviceScan") + ": every element, |gpu - ref| <= tol * " +
                                  "sum|x| (d = " + std::to_string(d) + ")";
                              report.check(verify::check_float_scan(got, h_in.data(), h_ref.data(), N, exclusive, tol,
                                                                    abs_before, what));
                          });

        // The exact float test: integers 1 and 2 as floats, n_exact = min(n, 2^23 - 1) of them.
        // Every sum of inputs that any scan forms (a tile's total, a look-back window, a prefix
        // plus an offset) is then an integer of at most 2^24, which a float holds exactly
        // (verify/scan.h), so every element of every float scan must be the int scan's value,
        // bit for bit. The bound above grows along the array, and a prefix error below it
        // passes there; here nothing does. The new input replaces the old in d_in.
        verify::host_vector<float>().swap(h_in);  // checked: the host buffers are done with
        verify::host_vector<double>().swap(h_ref);
        const size_t m = n_exact;
        verify::host_vector<float> h_exact(m);
        verify::host_vector<int32_t> h_exact_ints(m), h_exact_ref(m);
        verify::fill_exact_floats(h_exact.data(), h_exact_ints.data(), m, opt.seed + 2);
        cpu.reset();
        verify::inclusive_scan_reference(h_exact_ints.data(), h_exact_ref.data(), m);
        const verify::ExactSum exact = verify::exact_sum(h_exact_ints.data(), m);
        cpu_ms += cpu.ms();
        float* h_got = static_cast<float*>(h_out);
        verify::parallel_copy(h_got, h_exact.data(), m);
        CUDA_CHECK(cudaMemcpy(d_in, h_got, m * sizeof(float), cudaMemcpyHostToDevice));
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
                                         (fr ? fr->name : "cub::DeviceScan") +
                                         ", floats 1 and 2, n=" + std::to_string(m) +
                                         ": every element, the int scan's bits";
                report.check(verify::check_exact_float_scan(h_got, h_exact_ref.data(), m, exclusive, exact, what));
            }
        CUDA_CHECK(cudaFree(d_in));
        CUDA_CHECK(cudaFree(d_out));
    }
    CUDA_CHECK(cudaFree(d_work));
    CUDA_CHECK(cudaFreeHost(h_out));

    // ---- Report: every scan against the DRAM bound of 1 read : 1 write, measured now;
    // the whole-array rungs also against CUB on the same data.
    const lesson::StreamBound dram =
        in_l2.empty() ? lesson::measure_stream_bound(prop, 1, 1) : lesson::stream_bound_not_measured(1, 1, in_l2);
    lesson::add_bound(report, dram, int(opt.device));
    report.timing(lesson::kTimingMethod);
    report.cpu_reference_ms(cpu_ms, verify::host_threads());
    for (const Timed& t : timed)
        if (t.name.rfind("compaction", 0) != 0)
            report.variant_bound(t.name, t.ms, t.gbps, "GB/s", dram.gbps, "DRAM bound", in_l2);
        else if (t.cub_gbps == 0) report.variant(t.name, t.ms, t.gbps, "GB/s");
    for (const Timed& t : timed)
        if (t.cub_gbps > 0)
            report.variant_yardstick(t.name + " vs CUB", t.ms, t.gbps, "GB/s", t.cub_gbps, "CUB", in_l2);
    // The work and the steps of one 2048-element tile, and the bank conflicts of rungs 2 and 3 (CPU models).
    std::vector<unsigned> tile(hillis_steele::kTile, 1u);
    const verify::ScanWork hs = verify::hillis_steele_model(tile.data(), tile.size());
    const verify::ScanWork bl = verify::blelloch_model(tile.data(), tile.size());
    report.metric("one 2048-tile, Hillis-Steele: steps", double(hs.steps), "steps");
    report.metric("one 2048-tile, Hillis-Steele: additions", double(hs.adds), "adds");
    report.metric("one 2048-tile, Blelloch: steps", double(bl.steps), "steps");
    report.metric("one 2048-tile, Blelloch: additions", double(bl.adds), "adds");
    report.metric("bank conflicts per tile, rung 2 loads (model)",
                  double(verify::blelloch_load_conflicts_per_tile(blelloch::kTile, false)), "");
    report.metric("bank conflicts per tile, rung 3 loads (model)",
                  double(verify::blelloch_load_conflicts_per_tile(blelloch::kTile, true)), "");
    report.note(
        "int32 inputs are uniform in [-1000, 1000] and scanned as uint32 (wrap-around defined); float inputs "
        "uniform in [-1, 1). Float bound: gamma_d = d u / (1 - d u), u = 2^-24, d = the most additions any "
        "input passes through in the rung's order (README), plus the double reference's own bound. Exact float "
        "scans: integers 1 and 2 as floats, min(n, 2^23 - 1) of them, so that every partial sum is an integer "
        "below 2^24 and exact in any order: each element must be the int scan's value, bit for bit");
    if (compaction)
        report.note("compaction GB/s count n elements read and the kept ones written, the least it can move");

    // Key result and target: the single-pass scan against cub::DeviceScan::ExclusiveSum on int32.
    const Timed* cub = nullptr;
    const Timed* ours = nullptr;
    for (const Timed& t : timed) {
        if (t.name == "int32 exclusive: cub ExclusiveSum") cub = &t;
        if (t.name == std::string("int32 exclusive: ") + kRungs[4].name) ours = &t;
    }
    report.default_size(cli.at_default_size());
    if (ours && cub) {
        char key[128];
        std::snprintf(key, sizeof key, "single-pass scan %.0f GB/s at n=%lld (int32, exclusive)", ours->gbps,
                      (long long)n);
        report.key_result(key, ours->gbps / cub->gbps, "CUB ExclusiveSum", lesson::Against::Yardstick, in_l2);
        report.target("single-pass exclusive int32 scan vs cub::DeviceScan::ExclusiveSum", ours->gbps / cub->gbps, 0.85,
                      "x");
    } else {
        for (const Timed& t : timed)  // the rung run alone: its int32 exclusive scan
            if (t.name == std::string("int32 exclusive: ") + kRungs[rung - 1].name) {
                char key[128];
                std::snprintf(key, sizeof key, "%s %.0f GB/s at n=%lld", t.name.c_str(), t.gbps, (long long)n);
                report.key_result(key, t.gbps / dram.gbps, "DRAM bound", lesson::Against::Bound, in_l2);
            }
    }
    return report.finish(opt.json);
}
