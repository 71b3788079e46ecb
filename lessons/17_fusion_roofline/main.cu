// Lesson 17 - kernel fusion and this GPU's roofline, measured.
//
// Part 1, the fusion ladder (one file per rung in kernels/; diff two neighbours to see one idea):
//   1 three kernels   square, add one, ReLU: the intermediates go through global memory (6 n floats)
//   2 fused           the same chain in one kernel: intermediates in registers (2 n floats)
//   3 coarsened       rung 2 with 1, 2, 4, 8 elements per thread (coalesced), --coarsen=C
// Part 2, the roofline sweep (kernels/roofline_sweep.cuh, --rung=4): one kernel whose
// intensity is a template parameter, k FMAs per loaded float from 1/8 to 512, from
// memory-bound to compute-bound. Its best GB/s is this GPU's memory roof, its best GFLOP/s
// the FP32 roof, and their ratio the ridge point. --svg=FILE draws them.
// Every output is checked element by element: the chain against a double reference, every
// sweep point bit for bit against the same FMAs in float on the CPU. See README.md.
//
// Lesson 17 of the course: after the parallel patterns (lessons 14-16); the ladders of
// lessons 12-16 were all memory-bound, this lesson measures where "memory-bound" ends.
// Next: lesson 18 (CUDA graphs).
// Run: ./build/bin/fusion_roofline                    everything, n = 2^28
//      ./build/bin/fusion_roofline --rung=2           one rung alone
//      ./build/bin/fusion_roofline --rung=4 --k=512   one sweep point alone (for a profiler)
//      ./build/bin/fusion_roofline --svg=roofline.svg
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "common/check.h"
#include "common/device.h"
#include "common/flags.h"
#include "common/memory.h"
#include "common/report.h"
#include "common/timer.h"
#include "verify/compare.h"
#include "verify/fusion.h"
#include "verify/parallel.h"

#include "kernels/1_three_kernels.cuh"
#include "kernels/2_fused.cuh"
#include "kernels/3_coarsened.cuh"
#include "kernels/roofline_sweep.cuh"

// The fusion ladder, in order: rung number (for --rung), elements per thread, name, launcher.
struct Rung {
    int rung;
    int per_thread;
    const char* name;
    void (*launch)(const Chain&);
};
static const Rung kRungs[] = {
    {1, 1, "1 three kernels (t1, t2 through DRAM)", rung1::launch},
    {2, 1, "2 fused, 1 element per thread", rung2::launch},
    {3, 1, "3 fused, coarsened: 1 element per thread", rung3::launch<1>},
    {3, 2, "3 fused, coarsened: 2 elements per thread", rung3::launch<2>},
    {3, 4, "3 fused, coarsened: 4 elements per thread", rung3::launch<4>},
    {3, 8, "3 fused, coarsened: 8 elements per thread", rung3::launch<8>},
};
constexpr int kSweepRung = 4;

// The roofline sweep: k = fmas / every FMAs per float, 1/8 to 512 in powers of two.
struct SweepRow {
    verify::SweepPoint p;
    void (*launch)(const float*, float*, size_t, float, float);
};
static const SweepRow kSweep[] = {
    {{1, 8}, sweep::launch<1, 8>},     {{1, 4}, sweep::launch<1, 4>},     {{1, 2}, sweep::launch<1, 2>},
    {{1, 1}, sweep::launch<1, 1>},     {{2, 1}, sweep::launch<2, 1>},     {{4, 1}, sweep::launch<4, 1>},
    {{8, 1}, sweep::launch<8, 1>},     {{16, 1}, sweep::launch<16, 1>},   {{32, 1}, sweep::launch<32, 1>},
    {{64, 1}, sweep::launch<64, 1>},   {{128, 1}, sweep::launch<128, 1>}, {{256, 1}, sweep::launch<256, 1>},
    {{512, 1}, sweep::launch<512, 1>},
};
// v = fma(v, a, b) moves v towards 1 by 2^-10 of the distance: values stay in [-1, 1], never denormal.
constexpr float kA = 1.0f - 1.0f / 1024.0f, kB = 1.0f / 1024.0f;

static double k_of(verify::SweepPoint p) { return double(p.fmas) / double(p.every); }
static std::string k_text(verify::SweepPoint p) {
    return p.every > 1 ? "1/" + std::to_string(p.every) : std::to_string(p.fmas);
}

// The combinations the flags' ranges cannot express; each bad one exits 2.
static void check_flags(int64_t rung_only, int64_t coarsen, double k_only) {
    if (coarsen != 0 && coarsen != 1 && coarsen != 2 && coarsen != 4 && coarsen != 8)
        lesson::bad_input("--coarsen=" + std::to_string(coarsen) + " is not allowed; allowed: 0, 1, 2, 4 or 8");
    if (coarsen != 0 && rung_only != 0 && rung_only != 3)
        lesson::bad_input("--coarsen applies to rung 3; allowed with --rung=0 or --rung=3");
    bool k_known = k_only == 0;
    for (const SweepRow& s : kSweep) k_known = k_known || k_of(s.p) == k_only;
    if (!k_known)
        lesson::bad_input("--k is not a point of the sweep; allowed: 0 (all), 0.125, 0.25, 0.5, 1, 2, ... 512");
    if (k_only != 0 && rung_only != 0 && rung_only != kSweepRung)
        lesson::bad_input("--k applies to the sweep; allowed with --rung=0 or --rung=4");
}

#include "summary.cuh"

int main(int argc, char** argv) {
    // Flags first: bad input exits 2 before any CUDA call.
    lesson::CommonOptions opt;
    int64_t n = int64_t(1) << 28, rung_only = 0, coarsen = 0;
    double k_only = 0;
    std::string svg_path;
    lesson::Cli cli("fusion_roofline",
                    "Fuses square, add one, ReLU into one kernel, and measures this GPU's roofline.");
    lesson::add_common_flags(cli, opt);
    cli.add_int("n", &n, 1, int64_t(1) << 34, "floats of x and y (any n: the tails are handled)", int64_t(1) << 20);
    cli.add_int("rung", &rung_only, 0, kSweepRung, "run one part alone: 1-3 a rung of the fusion ladder, 4 the sweep");
    cli.add_int("coarsen", &coarsen, 0, 8, "rung 3: elements per thread, 1, 2, 4 or 8 (0 = all four)");
    cli.add_double("k", &k_only, 0, 512, "the sweep: one point alone, k FMAs per float (1/8 = 0.125 ... 512; 0 = all)");
    cli.add_output("svg", &svg_path, "draw the measured roofline with the sweep's points as an SVG file");
    cli.parse_or_exit(argc, argv);
    check_flags(rung_only, coarsen, k_only);
    auto rung_selected = [&](const Rung& r) {
        return (rung_only == 0 || rung_only == r.rung) && (r.rung != 3 || coarsen == 0 || coarsen == r.per_thread);
    };
    auto point_selected = [&](const SweepRow& s) {
        return (rung_only == 0 || rung_only == kSweepRung) && (k_only == 0 || k_of(s.p) == k_only);
    };
    const bool ladder = rung_only != kSweepRung, sweeping = rung_only == 0 || rung_only == kSweepRung;

    const size_t N = size_t(n);
    const std::string size_flag = "--n=" + std::to_string(n);
    // Host: x, y and the double reference of the chain. Device: x, t1, t2, y.
    lesson::require_host_memory(N * (sizeof(float) * 2 + (ladder ? sizeof(double) : 0)), "pageable and pinned",
                                size_flag);

    // 1. The input: 16 random bits per float (65536 values in [-1, 1): the sweep's reference
    //    computes each value's FMA chain once). The chain's reference in double. Neither needs the
    //    GPU (about 0.3 s at the default size): they are computed on a host thread of their own
    //    while the CUDA context starts and the pinned buffer is allocated, joined before x goes up.
    verify::host_vector<float> h_x(N);  // not zeroed: filled before it is read
    verify::host_vector<double> h_ref(ladder ? N : 0);
    double cpu_ms = 0, ref_rms = 0;
    std::thread inputs([&] {
        verify::fill_sweep_input(h_x.data(), N, uint64_t(opt.seed));
        lesson::HostTimer cpu;
        if (ladder) verify::square_add_relu_reference(h_x.data(), h_ref.data(), N);
        cpu_ms = cpu.ms();
        if (ladder) ref_rms = verify::rms(h_ref.data(), N);  // the checks' scale, the same for every rung
    });
    cudaDeviceProp prop = lesson::pick_device(opt.device);
    lesson::require_device_memory(N * sizeof(float) * (ladder ? 4 : 2) + (size_t(64) << 20), size_flag);

    lesson::Report report("17_fusion_roofline");
    report.device(prop);
    report.config_from(cli);  // every flag as parsed: n, rung, coarsen, k, repeat, seed, ...

    // 2. Allocate (the intermediates only where rung 1 runs) and copy x in.
    float *d_x = nullptr, *d_t1 = nullptr, *d_t2 = nullptr, *d_y = nullptr;
    CUDA_CHECK(cudaMalloc(&d_x, N * sizeof(float)));  // 256-byte aligned: the sweep reads float4s
    CUDA_CHECK(cudaMalloc(&d_y, N * sizeof(float)));
    if (ladder) {
        CUDA_CHECK(cudaMalloc(&d_t1, N * sizeof(float)));
        CUDA_CHECK(cudaMalloc(&d_t2, N * sizeof(float)));
    }
    // Every output comes back into one pinned buffer (lesson 05), which also carries x up (copied in
    // on every host core first): 20 copies of 1 GB at about 55 GB/s instead of about 10 from pageable
    // memory, and no page faulted in by a copy.
    float* h_y = nullptr;
    CUDA_CHECK(cudaMallocHost(&h_y, N * sizeof(float)));
    inputs.join();
    report.cpu_reference_ms(cpu_ms, verify::host_threads());
    verify::parallel_copy(h_y, h_x.data(), N);
    CUDA_CHECK(cudaMemcpy(d_x, h_y, N * sizeof(float), cudaMemcpyHostToDevice));
    const Chain chain{d_x, d_t1, d_t2, d_y, N};
    auto poison = [&] {  // 0xFF bytes are NaN: an element no kernel wrote fails the check
        CUDA_CHECK(cudaMemset(d_y, 0xFF, N * sizeof(float)));
        if (d_t1) CUDA_CHECK(cudaMemset(d_t1, 0xFF, N * sizeof(float)));
        if (d_t2) CUDA_CHECK(cudaMemset(d_t2, 0xFF, N * sizeof(float)));
    };
    auto copy_out = [&] {  // waits for the kernels; --inject-fault corrupts the copy
        CUDA_CHECK(cudaMemcpy(h_y, d_y, N * sizeof(float), cudaMemcpyDeviceToHost));
        if (opt.inject_fault) verify::inject_fault(h_y, N, uint64_t(opt.seed));
    };

    // 3. The fusion ladder: run, check every element, time.
    const int rung_count = int(sizeof(kRungs) / sizeof(kRungs[0]));
    std::vector<double> rung_ms(rung_count, 0.0);
    for (int r = 0; r < rung_count; ++r) {
        if (!rung_selected(kRungs[r])) continue;
        poison();
        kRungs[r].launch(chain);
        copy_out();
        report.check(verify::compare(h_y, h_ref.data(), N, 1e-6,
                                     std::string(kRungs[r].name) + ": every element of relu(x * x + 1)", ref_rms));
        rung_ms[r] = lesson::time_median_ms(int(opt.repeat), [&] { kRungs[r].launch(chain); });
    }

    // 4. The roofline sweep: every point run, checked bit for bit, timed.
    const int sweep_count = int(sizeof(kSweep) / sizeof(kSweep[0]));
    std::vector<double> sweep_ms(sweep_count, 0.0);
    for (int s = 0; s < sweep_count; ++s) {
        if (!point_selected(kSweep[s])) continue;
        poison();
        kSweep[s].launch(d_x, d_y, N, kA, kB);
        copy_out();
        report.check(verify::check_sweep(h_y, h_x.data(), N, kSweep[s].p, kA, kB,
                                         "sweep k=" + k_text(kSweep[s].p) + ": every element, bit for bit"));
        sweep_ms[s] = lesson::time_median_ms(int(opt.repeat), [&] { kSweep[s].launch(d_x, d_y, N, kA, kB); });
    }

    // 5. Free device memory (before the bounds below allocate their own buffers) and the pinned buffer.
    CUDA_CHECK(cudaFreeHost(h_y));
    CUDA_CHECK(cudaFree(d_x));
    CUDA_CHECK(cudaFree(d_y));
    CUDA_CHECK(cudaFree(d_t1));  // cudaFree(nullptr) does nothing
    CUDA_CHECK(cudaFree(d_t2));

    // 6-9. Bounds and yardsticks measured now, the ladder's and the sweep's reports (with the
    //      roofline picture), the targets and the key result: summary.cuh.
    const Bounds bounds = measure_bounds(report, prop, int(opt.device), N, sweeping);
    const LadderResult fused = report_ladder(report, bounds, N, rung_ms);
    const Roofs roofs = report_sweep(report, bounds, prop, N, rung_ms, sweep_ms, svg_path);
    report_verdict(report, cli, bounds, n, ladder, fused, roofs, rung_ms);
    return report.finish(opt.json);
}
