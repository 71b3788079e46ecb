// Lesson 07 of the course (00-24): 3x3 Gaussian blur, tiled kernels and a streamed batch.
// Before: lesson 06 (06_tiled_matmul). Next: lesson 08 (08_cublas_sgemm).
// Run: ./build/bin/gaussian_blur [--quick]   (--help lists every flag; README.md is the handout)
//
// Part 1 blurs one large image with a ladder of four rungs, one file each in kernels/: a naive
// kernel that reads its 9 neighbours from global memory; a one-tile kernel, one 2D block per
// 32 x 8 output tile, that loads the tile and its one-pixel halo (corners included) into shared
// memory, waits at one barrier, and blurs; the tiled kernel, which loops over 128 x 32 tiles and
// loads its next tile while it blurs this one; and a kernel with no shared memory at all, each
// thread sliding a window of three rows down a float4 column strip. Part 2 (batch.cuh) pushes a
// batch of small images through 3 streams in chunks, pinned host memory, one launch per chunk
// (blockIdx.z = image) against one launch per image. Border rule everywhere: clamp-to-edge.
#include <algorithm>
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
#include "verify/blur.h"
#include "verify/compare.h"
#include "verify/parallel.h"
#include "verify/random.h"

#include "batch.cuh"
#include "kernels/1_naive.cuh"
#include "kernels/2_halo.cuh"
#include "kernels/3_tiled.cuh"
#include "kernels/4_rows.cuh"

// The ladder, one row per rung: its name in the report and its launcher. Rung 4 has two rows,
// of which main() runs the one that fits the width.
struct Rung {
    const char* name;
    void (*launch)(const Image& im);
};
constexpr Rung kRungs[] = {
    {"blur3x3Naive", launch_naive},
    {"blur3x3Halo", launch_halo},
    {"blur3x3Tiled", launch_tiled},
    {"blur3x3Rows (float4)", launch_rows<4>},  // every row starts 16-byte aligned: width % 4 == 0
    {"blur3x3Rows (scalar: width % 4 != 0)", launch_rows<1>},
};

// Part 1: one large image through every rung, each checked against the double-precision
// reference (made once for all rungs), then timed.
struct Ladder {
    std::vector<Rung> rungs;  // the rungs that ran: rung 4 in the form that fits the width
    std::vector<double> ms;
};

static Ladder run_ladder(int64_t width, int64_t height, const cudaDeviceProp& prop, const lesson::CommonOptions& opt,
                         lesson::Report& report) {
    const size_t pixels = size_t(width) * size_t(height), bytes = pixels * sizeof(float);
    verify::host_vector<float> h_in(pixels), h_out(pixels);  // not zeroed: filled, or copied back, before read
    verify::fill_uniform(h_in.data(), pixels, opt.seed);     // random, never constant: see README Pitfalls
    lesson::HostTimer cpu;
    verify::host_vector<double> ref(pixels);
    verify::blur3x3_reference(h_in.data(), ref.data(), width, height);
    report.cpu_reference_ms(cpu.ms(), verify::host_threads());
    const double ref_rms = verify::rms(ref.data(), pixels);
    const std::string dims = std::to_string(width) + "x" + std::to_string(height);

    float *d_in = nullptr, *d_out = nullptr;
    CUDA_CHECK(cudaMalloc(&d_in, bytes));
    CUDA_CHECK(cudaMalloc(&d_out, bytes));
    CUDA_CHECK(cudaMemcpy(d_in, h_in.data(), bytes, cudaMemcpyHostToDevice));

    // Tiled: no more blocks than the GPU runs at once; each loops over every gridDim.x-th tile.
    const lesson::Grid gt = lesson::grid_for(width, height, 1, kTileW, kTileH);  // tiles across, tiles down
    int per_sm = 0;
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, blur3x3Tiled, kTileW * kRows, 0));
    const uint64_t tiles = uint64_t(gt.x) * gt.y;
    const unsigned tiled_blocks = unsigned(std::min<uint64_t>(tiles, uint64_t(per_sm) * prop.multiProcessorCount));
    report.config("tiled blocks", std::to_string(tiled_blocks) + " (" + std::to_string(per_sm) + " per SM) for " +
                                      std::to_string(tiles) + " tiles");

    // The ladder: one table of rungs (kRungs), one verify-and-time loop. Rung 4 runs as float4
    // columns when every row starts 16-byte aligned (width % 4 == 0), else one column per thread.
    const Image image{d_in, d_out, int(width), int(height), tiled_blocks};
    Ladder ladder;
    for (const Rung& r : kRungs)
        if (r.launch != (width % 4 == 0 ? launch_rows<1> : launch_rows<4>)) ladder.rungs.push_back(r);
    for (const Rung& r : ladder.rungs) {
        // Poison (0xFF bytes are NaN), run, copy out: a pixel a kernel never writes fails the check.
        CUDA_CHECK(cudaMemset(d_out, 0xFF, bytes));
        r.launch(image);
        CUDA_CHECK(cudaMemcpy(h_out.data(), d_out, bytes, cudaMemcpyDeviceToHost));
        if (opt.inject_fault) verify::inject_fault(h_out.data(), pixels, opt.seed);
        report.check(verify::compare(h_out.data(), ref.data(), pixels, 1e-5,
                                     std::string(r.name) + ", every pixel of " + dims, ref_rms));
        ladder.ms.push_back(lesson::time_median_ms(int(opt.repeat), [&] { r.launch(image); }));
    }
    CUDA_CHECK(cudaFree(d_in));
    CUDA_CHECK(cudaFree(d_out));
    return ladder;
}

int main(int argc, char** argv) {
    // Flags first: bad input exits 2 before any CUDA call.
    lesson::CommonOptions opt;
    int64_t n = 8192, width = 8192, height = 8192;
    int64_t batch = 12000, image_w = 100, image_h = 75, chunk = 1000, nstreams = 3;
    lesson::Cli cli("gaussian_blur",
                    "3x3 Gaussian blur (clamp-to-edge): naive vs tiled on one large image, "
                    "then a batch of small images streamed in chunks.");
    lesson::add_common_flags(cli, opt);
    cli.add_int("n", &n, 1, 32768, "square large image: sets --width and --height");
    cli.add_int("width", &width, 1, 32768, "large image width in pixels", 1000);
    cli.add_int("height", &height, 1, 32768, "large image height in pixels", 744);
    cli.add_int("batch", &batch, 1, 1000000, "images in the streamed batch", 48);
    cli.add_int("image-width", &image_w, 1, 16384, "width of each batch image");
    cli.add_int("image-height", &image_h, 1, 16384, "height of each batch image");
    cli.add_int("chunk", &chunk, 1, 65535, "images per chunk (gridDim.z <= 65535)", 8);
    cli.add_int("streams", &nstreams, 1, 16, "CUDA streams (each owns one device slot)");
    cli.parse_or_exit(argc, argv);
    if (cli.given("n")) {
        if (!cli.given("width")) width = n;
        if (!cli.given("height")) height = n;
    }
    if (chunk > batch)
        lesson::bad_input("--chunk=" + std::to_string(chunk) + " is larger than --batch=" + std::to_string(batch) +
                          "; allowed: integer in [1, " + std::to_string(batch) + "]");

    const size_t W = width, H = height, pixels = W * H, image_px = image_w * image_h;
    const size_t image_bytes = image_px * sizeof(float), chunk_bytes = chunk * image_bytes;
    const size_t batch_bytes = batch * image_bytes;
    const std::string size_flags = "--width=" + std::to_string(width) + " --height=" + std::to_string(height) +
                                   " --batch=" + std::to_string(batch) + " --image-width=" + std::to_string(image_w) +
                                   " --image-height=" + std::to_string(image_h);
    // Host: the large image in, one result, the double reference; the batch in and out, pinned.
    lesson::require_host_memory(pixels * (2 * sizeof(float) + sizeof(double)) + 2 * batch_bytes, "pageable + pinned",
                                size_flags);
    cudaDeviceProp prop = lesson::pick_device(opt.device);
    // Device: part 1 needs in + out of the large image; part 2 an in + out slot per stream.
    lesson::require_device_memory(std::max(2 * pixels * sizeof(float), 2 * nstreams * chunk_bytes),
                                  size_flags + " --chunk=" + std::to_string(chunk) +
                                      " --streams=" + std::to_string(nstreams));

    lesson::Report report("07_gaussian_blur");
    report.device(prop);
    report.config_from(cli);
    report.config("border", "clamp-to-edge");
    report.config("tile", std::to_string(kTileW) + "x" + std::to_string(kTileH) + " outputs, " +
                              std::to_string(kTileW) + "x" + std::to_string(kRows) + " threads");
    report.config("halo tile", std::to_string(kHaloW) + "x" + std::to_string(kHaloH) + " outputs, one block each");

    // ---- Part 1: one large image, four rungs -------------------------------------------------
    const Ladder ladder = run_ladder(width, height, prop, opt, report);
    const std::vector<Rung>& rungs = ladder.rungs;
    const std::vector<double>& rung_ms = ladder.ms;

    // ---- Part 2: a batch of images, chunks over streams, pinned host memory (batch.cuh) -------
    const BatchTimes bt = stream_batch(Batch{batch, image_w, image_h, chunk, nstreams}, opt, report);

    // ---- Report ------------------------------------------------------------------------------
    // The blur reads each pixel once and writes it once: the DRAM bound of a 1 : 1 mix (a copy),
    // measured now unless the image fits in L2 (then nothing is graded against DRAM).
    const double kernel_bytes = 2.0 * pixels * sizeof(float);  // one read of the input, one write of the output
    const std::string dims = std::to_string(width) + "x" + std::to_string(height);
    const std::string in_l2 = lesson::l2_note(kernel_bytes, prop);
    const lesson::StreamBound dram =
        in_l2.empty() ? lesson::measure_stream_bound(prop, 1, 1) : lesson::stream_bound_not_measured(1, 1, in_l2);
    lesson::add_bound(report, dram, int(opt.device));
    report.bound("pinned H2D, burst of chunk copies", bt.link.h2d, "GB/s");
    report.bound("pinned D2H, burst of chunk copies", bt.link.d2h, "GB/s");
    report.bound("pinned H2D + D2H at once", bt.link.both, "GB/s");
    report.timing(std::string(lesson::kTimingMethod) +
                  "; pipelines: host clock around issue + cudaDeviceSynchronize, the same number of samples");
    for (size_t i = 0; i < rungs.size(); ++i)
        report.variant_bound(rungs[i].name + (" " + dims), rung_ms[i], kernel_bytes / (rung_ms[i] * 1e6), "GB/s",
                             dram.gbps, "DRAM bound", in_l2);
    report.metric("blur3x3Halo over blur3x3Naive", rung_ms[0] / rung_ms[1], "x");
    report.metric("blur3x3Tiled over blur3x3Halo", rung_ms[1] / rung_ms[2], "x");
    report.metric("blur3x3Rows over blur3x3Tiled", rung_ms[2] / rung_ms[3], "x");
    size_t best = 0;
    for (size_t i = 1; i < rungs.size(); ++i)
        if (rung_ms[i] < rung_ms[best]) best = i;
    const double best_gbps = kernel_bytes / (rung_ms[best] * 1e6);
    const double link_bytes = 2.0 * batch_bytes;  // the batch goes up once and comes down once
    const double bound_ms = lesson::link_bound_ms(double(batch_bytes), double(batch_bytes), bt.link);
    const double bound_gbps = link_bytes / (bound_ms * 1e6);
    report.variant_bound("pipeline, 1 launch per image (" + std::to_string(batch) + ")", bt.per_image_ms,
                         link_bytes / (bt.per_image_ms * 1e6), "GB/s", bound_gbps, "PCIe bound");
    report.variant_bound("pipeline, 1 launch per chunk (" + std::to_string(bt.chunks) + ")", bt.per_chunk_ms,
                         link_bytes / (bt.per_chunk_ms * 1e6), "GB/s", bound_gbps, "PCIe bound");
    report.metric("PCIe bound of the batch (H2D + D2H)", bound_ms, "ms");
    if (uint64_t(batch) > bt.chunks)
        report.metric("cost of each extra launch",
                      1000.0 * (bt.per_image_ms - bt.per_chunk_ms) / double(batch - bt.chunks), "us");
    report.metric("one launch per chunk vs per image", bt.per_image_ms / bt.per_chunk_ms, "x faster");
    report.note("border rule: clamp-to-edge (a neighbour outside the image reads the nearest edge pixel)");
    report.note(
        "kernel GB/s count one read of the input and one write of the output; pipeline GB/s count H2D + D2H bytes");
    report.note(
        "pipeline times: inputs already staged in pinned memory, host clock around issue + cudaDeviceSynchronize");
    char key[128];
    std::snprintf(key, sizeof key, "%s %.0f GB/s at %s; batch pipeline %.0f%% of PCIe bound", rungs[best].name,
                  best_gbps, dims.c_str(), 100.0 * bound_ms / bt.per_chunk_ms);
    report.key_result(key, best_gbps / dram.gbps, "DRAM bound", lesson::Against::Bound, in_l2);
    report.default_size(cli.at_default_size());
    report.target("best rung of the DRAM bound", best_gbps / dram.gbps, 0.80);
    report.target("batch pipeline of the PCIe bound", bound_ms / bt.per_chunk_ms, 0.85);
    return report.finish(opt.json);
}
