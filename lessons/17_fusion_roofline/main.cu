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
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "common/ceilings.h"
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
#include "roofline_svg.h"

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
static std::string size_text(int64_t n) {
    for (int e = 0; e < 63; ++e)
        if (n == (int64_t(1) << e)) return "2^" + std::to_string(e);
    return std::to_string(n);
}

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
    report.device(prop.name, prop.major, prop.minor, prop.multiProcessorCount, prop.totalGlobalMem / 1e9);
    report.config("n", n);
    report.config("rung", rung_only);
    report.config("coarsen", coarsen);
    report.config("k", k_only);
    report.config("repeat", opt.repeat);
    report.config("seed", opt.seed);

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

    // 6. Bounds and yardsticks, measured now. The DRAM probe (1 read : 1 write, the mix of the
    //    chain and of the sweep) and the D2D copy only where the data do not fit in the L2.
    const std::string in_l2 = lesson::l2_note(verify::sweep_bytes(N), prop);
    lesson::StreamBound dram;
    dram.gbps = NAN;
    double d2d = NAN;
    if (in_l2.empty()) {
        dram = lesson::measure_stream_bound(prop, 1, 1);
        lesson::add_bound(report, dram, int(opt.device), lesson::Roof::Memory);
        if (sweeping) {
            d2d = lesson::measure_d2d_gbps(prop);
            report.yardstick("device-to-device cudaMemcpy, 1 GiB (read + write)", d2d, "GB/s");
        }
    } else {
        report.note("DRAM bound not measured (" + in_l2 + ")");
    }
    const double clock_ghz = lesson::sm_clock_ghz(int(opt.device));
    const double peak = lesson::peak_gflops(prop, int(opt.device), lesson::MathUnit::Fp32Simt);
    char peak_name[128];
    std::snprintf(peak_name, sizeof peak_name, "FP32 peak: %d SMs x 128 lanes x 2 x %.3f GHz (max SM clock)",
                  prop.multiProcessorCount, clock_ghz);
    report.bound(peak_name, peak, "GFLOP/s", lesson::Roof::Compute);
    report.timing(std::string(lesson::kTimingMethod) + "; rung 1's call is its three launches");

    // 7. The ladder's report: the bytes each rung must move, against the DRAM bound.
    int best = -1;
    for (int r = 0; r < rung_count; ++r) {
        if (rung_ms[r] <= 0) continue;
        const double bytes = verify::chain_bytes(N, kRungs[r].rung != 1);
        report.variant_bound(kRungs[r].name, rung_ms[r], bytes / (rung_ms[r] * 1e6), "GB/s", dram.gbps, "DRAM bound",
                             in_l2);
        report.work(std::string("17 ") + kRungs[r].name, verify::chain_flops(N), bytes, rung_ms[r]);
        if (kRungs[r].rung != 1 && (best < 0 || rung_ms[r] < rung_ms[best])) best = r;
    }
    report.metric("bytes moved by the three kernels (6 n floats)", verify::chain_bytes(N, false), "bytes");
    report.metric("bytes moved by a fused kernel (2 n floats)", verify::chain_bytes(N, true), "bytes");
    const double speedup = (rung_ms[0] > 0 && rung_ms[1] > 0) ? rung_ms[0] / rung_ms[1] : NAN;
    if (std::isfinite(speedup)) report.metric("speedup of fusion: rung 1 time / rung 2 time", speedup, "x");

    // 8. The sweep's report: per point intensity, GFLOP/s and GB/s, against the roofline at that
    //    intensity, min(FP32 peak, I x DRAM bound); then the measured roofs and the ridge.
    RooflinePlot plot(std::string("Roofline of ") + prop.name + ", measured (lesson 17)");
    double mem_roof = 0, fp32_roof = 0, mem_ms = 0, fp32_ms = 0;
    for (int s = 0; s < sweep_count; ++s) {
        if (sweep_ms[s] <= 0) continue;
        const verify::SweepPoint p = kSweep[s].p;
        const double flops = verify::sweep_flops(N, p), bytes = verify::sweep_bytes(N);
        const double gflops = flops / (sweep_ms[s] * 1e6), gbps = bytes / (sweep_ms[s] * 1e6);
        const double intensity = flops / bytes;
        const double roof_here = std::min(peak, intensity * dram.gbps);  // NaN where the probe did not run
        const std::string name = "sweep k=" + k_text(p) + " FMA/float";
        report.variant_bound(name, sweep_ms[s], gflops, "GFLOP/s", roof_here, "roofline at its intensity", in_l2);
        report.work(name, flops, bytes, sweep_ms[s]);
        char line[160];
        std::snprintf(line, sizeof line, "sweep k=%-4s intensity %8.4f flop/byte: %10.1f GFLOP/s %8.1f GB/s",
                      k_text(p).c_str(), intensity, gflops, gbps);
        report.note(line);
        plot.add_point(intensity, gflops, "#4e79a7", line);
        if (k_of(p) <= 1 && gbps > mem_roof) mem_roof = gbps, mem_ms = sweep_ms[s];  // memory-bound: k <= 1
        if (gflops > fp32_roof) fp32_roof = gflops, fp32_ms = sweep_ms[s];
    }
    const bool have_mem = mem_roof > 0, have_fp32 = fp32_roof > 0 && sweep_ms[sweep_count - 1] > 0;
    if (have_mem) {
        report.metric("memory roof (best GB/s of the sweep at k <= 1)", mem_roof, "GB/s", lesson::Roof::Memory);
        report.variant_bound("memory roof (sweep, k <= 1)", mem_ms, mem_roof, "GB/s", dram.gbps, "DRAM bound", in_l2);
        report.variant_yardstick("memory roof vs D2D copy", mem_ms, mem_roof, "GB/s", d2d, "D2D copy", in_l2);
        plot.add_slope(mem_roof, "#e15759", false,
                       in_l2.empty() ? "memory roof (measured)" : "memory roof (data in L2)");
    }
    if (have_fp32) {
        report.metric("FP32 roof (best GFLOP/s of the sweep)", fp32_roof, "GFLOP/s", lesson::Roof::Compute);
        report.variant_bound("FP32 roof (best sweep point)", fp32_ms, fp32_roof, "GFLOP/s", peak, "FP32 peak", in_l2);
        plot.add_roof(fp32_roof, "#e15759", false, in_l2.empty() ? "FP32 roof (measured)" : "FP32 roof (small n)");
    }
    if (have_mem && have_fp32) report.metric("ridge point: FP32 roof / memory roof", fp32_roof / mem_roof, "flop/byte");
    if (std::isfinite(dram.gbps)) {
        report.metric("ridge point from the bounds: FP32 peak / DRAM bound", peak / dram.gbps, "flop/byte");
        plot.add_slope(dram.gbps, "#999999", true, "DRAM bound (1 read : 1 write probe)");
    }
    if (std::isfinite(peak)) plot.add_roof(peak, "#999999", true, "FP32 peak from the clock");
    for (int r = 0; r < rung_count; ++r)
        if (rung_ms[r] > 0)
            plot.add_point(verify::chain_flops(N) / verify::chain_bytes(N, kRungs[r].rung != 1),
                           verify::chain_flops(N) / (rung_ms[r] * 1e6), kRungs[r].rung == 1 ? "#f28e2b" : "#59a14f",
                           kRungs[r].name);
    plot.add_legend("#4e79a7", "sweep: k FMAs per float, 1/8 ... 512");
    plot.add_legend("#f28e2b", "three kernels");
    plot.add_legend("#59a14f", "fused (rungs 2-3)");
    if (!svg_path.empty()) {
        std::FILE* f = std::fopen(svg_path.c_str(), "w");
        const bool written = plot.write(f);
        if (f && std::fclose(f) != 0) report.warning("could not close the SVG file " + svg_path);
        if (written) report.note("roofline drawn to " + svg_path);
        else report.warning("could not write the SVG file " + svg_path);
    }

    // 9. Targets (graded at the default size only) and the key result.
    report.default_size(cli.at_default_size());
    if (in_l2.empty()) {
        if (std::isfinite(speedup)) report.target("fused (rung 2) vs three kernels (rung 1)", speedup, 2.7, "x");
        if (best >= 0 && kRungs[best].rung != 1)  // the fastest fused kernel (rung 2 or a coarsening of rung 3)
            report.target("best fused rung vs DRAM bound",
                          verify::chain_bytes(N, true) / (rung_ms[best] * 1e6) / dram.gbps, 0.90, "%");
        if (have_mem) report.target("sweep memory-bound end vs D2D copy", mem_roof / d2d, 0.90, "%");
        if (have_fp32)
            report.target("sweep compute-bound end vs FP32 peak from the clock", fp32_roof / peak, 0.90, "%");
    }
    char key[200];
    if (ladder && best >= 0) {
        const double gbps = verify::chain_bytes(N, true) / (rung_ms[best] * 1e6);
        char vs[48] = "";
        if (std::isfinite(speedup)) std::snprintf(vs, sizeof vs, ", rung 2 %.2fx the 3 kernels", speedup);
        std::snprintf(key, sizeof key, "fused chain %.0f GB/s (%s)%s at n=%s", gbps, kRungs[best].name, vs,
                      size_text(n).c_str());
        report.key_result(key, gbps / dram.gbps, "DRAM bound", lesson::Against::Bound, in_l2);
    } else if (have_fp32 || have_mem) {
        std::snprintf(key, sizeof key, "roofs: memory %.0f GB/s, FP32 %.0f GFLOP/s at n=%s", mem_roof, fp32_roof,
                      size_text(n).c_str());
        report.key_result(key, have_fp32 ? fp32_roof / peak : NAN, "FP32 peak", lesson::Against::Bound, in_l2);
    } else {
        report.key_result("rung 1 alone: the three kernels at n=" + size_text(n));
    }
    return report.finish(opt.json);
}
