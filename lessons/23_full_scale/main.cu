// Lesson 23 of the course (00-24): the full-scale run, the original text's 100,000 random
// 1024 x 1024 images, generated on the GPU and reduced to a few numbers each.
// Before: lesson 22 (one host thread per GPU). Next: lesson 24 (24_transformer_decoder), the capstone.
// Run: ./build/bin/full_scale [--quick]   (--images=100000 is the full run; README.md is the handout)
//
// cuRAND fills a chunk of images on the GPU, each image at its own offset of one sequence; one
// fused kernel (kernels/blur_stats.cuh) blurs every image (lesson 07) and reduces it to its raw
// sum and the sum, min and max of the blur (lesson 14); only those four numbers come back over
// PCIe. Each of --streams streams takes a contiguous part of a GPU's images, chunk by chunk; one
// host thread per GPU runs a contiguous range (lesson 22). What a GPU owns: gpus.cuh; the checks
// that regenerate images on the CPU: checks.cuh; the yardsticks and the report: summary.h.
#include <curand.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common/check.h"
#include "common/device.h"
#include "common/flags.h"
#include "common/launch.h"
#include "common/memory.h"
#include "common/report.h"
#include "common/timer.h"
#include "verify/compare.h"
#include "verify/full_scale.h"

#include "checks.cuh"
#include "curand_check.h"  // CURAND_CHECK: cuRAND's status codes, the exit path of CUDA_CHECK
#include "gpus.cuh"
#include "kernels/blur_stats.cuh"
#include "summary.h"

using namespace fullscale;

// Generate the next `count` images of stream i's generator into its image buffer, on stream i:
// each call continues the sequence where the last one stopped (curandSetGeneratorOffset says
// where a stream's images start; see run_range).
static void generate_chunk(Gpu& g, const Setup& s, size_t i, uint64_t count) {
    // Exercise 4 of the handout: draw the numbers inside the kernel (cuRAND device API) so no image goes to DRAM
    CURAND_CHECK(curandGenerateUniform(g.gens[i], g.d_images[i], count * s.px));  // (0, 1], on stream i
}

// Reduce the first `count` images of stream i's buffer to their statistics (d_stats), on stream i.
static void process_chunk(Gpu& g, const Setup& s, size_t i, uint64_t count) {
    const cudaStream_t st = g.streams[i];
    const dim3 grid(s.grid.x, s.grid.y, unsigned(count));  // count <= --chunk <= 65535
    blur3x3Stats<<<grid, dim3(kColsX, kRowsY), 0, st>>>(g.d_images[i], g.d_partials[i], int(s.side));
    CUDA_CHECK_LAUNCH();
    finishImageStats<<<unsigned(count), kFinishThreads, 0, st>>>(g.d_partials[i], g.d_stats[i], s.per_image);
    CUDA_CHECK_LAUNCH();
}

// Counts finished images for the progress line: a host function in each stream after each chunk.
struct ChunkDone {
    std::atomic<uint64_t>* done;
    uint64_t images;
};
static void CUDART_CB count_done(void* p) {
    const ChunkDone* c = static_cast<const ChunkDone*>(p);
    c->done->fetch_add(c->images);
}

// One GPU's share of a pass, on its own host thread (its device set): images [first, first +
// count). Stream i takes a contiguous part of them, chunk after chunk (its buffers are free again
// once its previous chunk's copy-out has run: a stream runs its work in order). Image k starts at
// value k * side^2 of the generator's one sequence (the offset counts 32-bit values), so a
// stream's generator is set to its first image once and then continues: the first generate
// after curandSetGeneratorOffset waits until the whole GPU is idle, the next ones do not.
// Results land in h_stats. With `done`, a host function after each chunk adds its images to
// *done (the progress line).
static void run_range(Gpu& g, const Setup& s, uint64_t first, uint64_t count, double* h_stats,
                      std::atomic<uint64_t>* done) {
    const size_t S = g.streams.size();
    std::vector<lesson::ChunkPlan> plans(S);
    uint64_t rounds = 0, chunks = 0;
    for (size_t i = 0; i < S; ++i) {
        plans[i] = lesson::plan_chunks(count * (i + 1) / S - count * i / S, uint64_t(s.chunk));
        rounds = std::max(rounds, plans[i].count), chunks += plans[i].count;
    }
    std::vector<ChunkDone> records(done ? chunks : 0, ChunkDone{done, 0});
    for (uint64_t k = 0, r = 0; k < rounds; ++k) {  // chunk k of every stream in turn
        for (size_t i = 0; i < S; ++i) {
            if (k >= plans[i].count) continue;
            const lesson::Chunk c = plans[i].at(k);
            const uint64_t at = first + count * i / S + c.first;  // the chunk's first image
            if (k == 0) CURAND_CHECK(curandSetGeneratorOffset(g.gens[i], at * s.px));
            generate_chunk(g, s, i, c.count);
            process_chunk(g, s, i, c.count);
            CUDA_CHECK(cudaMemcpyAsync(h_stats + at * kStatFields, g.d_stats[i], c.count * kStatFields * sizeof(double),
                                       cudaMemcpyDeviceToHost, g.streams[i]));
            if (done) {
                records[r].images = c.count;
                CUDA_CHECK(cudaLaunchHostFunc(g.streams[i], count_done, &records[r++]));
            }
        }
    }
    CUDA_CHECK(cudaDeviceSynchronize());  // every chunk done (and every host function: records may go)
}

// One pass over all images on `use` GPUs: contiguous ranges, one host thread each. The clock
// starts when every thread has set its device, so no thread's start-up is inside the pass;
// gpus[g].last_ms is when GPU g finished, the pass the last of them. `progress`: host functions
// count the finished images and this thread prints a line every 2 s (the verified pass); a
// timed pass is GPU work alone.
static double run_pass(std::vector<Gpu>& gpus, size_t use, const Setup& s, uint64_t images, double* h_stats,
                       bool progress) {
    std::atomic<uint64_t> done{0};
    std::atomic<size_t> ready{0};
    std::atomic<bool> go{false};
    lesson::HostTimer wall;
    std::vector<std::thread> threads;
    for (size_t g = 0; g < use; ++g) {
        threads.emplace_back([&, g] {
            CUDA_CHECK(cudaSetDevice(gpus[g].device));  // the current device is per host thread
            ++ready;
            while (!go.load()) std::this_thread::yield();  // every GPU starts on the same clock
            const uint64_t first = images * g / use, last = images * (g + 1) / use;
            run_range(gpus[g], s, first, last - first, h_stats, progress ? &done : nullptr);
            gpus[g].last_ms = wall.ms();
        });
    }
    while (ready.load() < use) std::this_thread::yield();
    wall.reset();
    go = true;
    for (double next = 2000; progress && done.load() < images;) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        if (wall.ms() >= next) {
            const uint64_t d = done.load();
            std::printf("progress: %llu of %llu images (%.0f%%), %.1f s on %zu GPU(s)\n", (unsigned long long)d,
                        (unsigned long long)images, 100.0 * double(d) / double(images), wall.ms() / 1e3, use);
            std::fflush(stdout);
            next += 2000;
        }
    }
    for (std::thread& th : threads) th.join();
    double end = 0;
    for (size_t g = 0; g < use; ++g) end = std::max(end, gpus[g].last_ms);
    return end;
}

// 2. Timed passes. With several GPUs in turns: all GPUs, then the first GPU alone, so that both
//    medians see the same clocks and temperatures. Every pass must give the verified pass's
//    bits: the kernels add in a fixed order, and image i's numbers do not depend on the chunk
//    or the GPU that made them.
static Passes timed_passes(std::vector<Gpu>& gpu, const Setup& s, uint64_t N, const double* h_stats, double* h_again,
                           const lesson::CommonOptions& opt, lesson::Report& report) {
    const size_t G = gpu.size();
    Passes p;
    p.count = int(std::min<int64_t>(opt.repeat, 5));
    p.uses = G > 1 ? std::vector<size_t>{G, 1} : std::vector<size_t>{1};
    p.ms.resize(p.uses.size());
    p.gpu_ms.resize(G);
    std::vector<lesson::Check> same(p.uses.size());
    for (int r = 0; r < p.count; ++r) {
        for (size_t u = 0; u < p.uses.size(); ++u) {
            std::memset(h_again, 0xFF, N * kStatFields * sizeof(double));
            p.ms[u].push_back(run_pass(gpu, p.uses[u], s, N, h_again, /*progress=*/false));
            for (size_t g = 0; u == 0 && g < G; ++g) p.gpu_ms[g].push_back(gpu[g].last_ms);
            const std::string who =
                u == 0 ? std::to_string(G) + " GPU(s)" : "GPU " + std::to_string(opt.device) + " alone";
            const lesson::Check c =
                verify::check_same_bits(h_again, h_stats, N * kStatFields,
                                        "timed passes on " + who + ": the verified pass's bits, every image");
            if (r == 0 || !c.pass) same[u] = c;  // the first pass, or one that differs
        }
    }
    for (const lesson::Check& c : same) report.check(c);
    p.all_ms = lesson::median(p.ms[0]), p.one_ms = lesson::median(p.ms.back());
    return p;
}

int main(int argc, char** argv) {
    // Flags first: bad input exits 2 before any CUDA call.
    lesson::CommonOptions opt;
    int64_t images = 20000, side = 1024, chunk = 256, nstreams = 3, gpus = 0, sample = 1;
    lesson::Cli cli("full_scale",
                    "Generates --images random side x side images with cuRAND on every GPU, blurs each "
                    "and reduces it to 4 numbers (fused), chunk by chunk. --images=100000 is the "
                    "original text's full scale.");
    lesson::add_common_flags(cli, opt);
    cli.add_int("images", &images, 1, 10000000, "images in the data set", 6);
    cli.add_int("side", &side, 4, 16384, "image side in pixels (a multiple of 4)", 256);
    cli.add_int("chunk", &chunk, 1, 65535, "images per chunk (one generate + one launch; gridDim.z)", 4);
    cli.add_int("streams", &nstreams, 1, 8,
                "streams per GPU, each with its own generator, chunk buffers and part of the images");
    cli.add_int("gpus", &gpus, 0, 64, "GPUs to use from --device on (0 = all)");
    cli.add_int("sample", &sample, 1, 64, "images per chunk recomputed on the CPU", 2);
    cli.parse_or_exit(argc, argv);
    if (!cli.given("chunk")) chunk = std::min(chunk, images);  // the default chunk never exceeds the data set
    if (side % 4 != 0)
        lesson::bad_input("--side=" + std::to_string(side) + " is not a multiple of 4; allowed: 4, 8, ..., 16384");
    if (chunk > images)
        lesson::bad_input("--chunk=" + std::to_string(chunk) + " is larger than --images=" + std::to_string(images) +
                          "; allowed: 1 <= chunk <= images");

    Setup s{side, chunk, uint64_t(side) * uint64_t(side), blocks_per_image(int(side)), 0};
    s.per_image = int(s.grid.x * s.grid.y);
    const uint64_t N = uint64_t(images), px = s.px;
    const std::string flags = "--images=" + std::to_string(images) + " --side=" + std::to_string(side) +
                              " --chunk=" + std::to_string(chunk) + " --streams=" + std::to_string(nstreams);
    // Host: the per-image results twice (pinned), the sampled images in flight and their blur.
    lesson::require_host_memory(2 * N * kStatFields * sizeof(double) + verify::sampled_stats_bytes(side),
                                "pinned + pageable", flags);
    cudaDeviceProp prop = lesson::pick_device(opt.device);
    int count = 0;
    CUDA_CHECK(cudaGetDeviceCount(&count));
    const int G = gpus == 0 ? count - int(opt.device) : int(gpus);
    if (opt.device + G > count)
        lesson::bad_input("--gpus=" + std::to_string(gpus) + " from --device=" + std::to_string(opt.device) +
                          " needs GPUs up to " + std::to_string(opt.device + G - 1) + "; this machine has " +
                          std::to_string(count) + "; allowed: 0 <= gpus <= " + std::to_string(count - opt.device));
    const int kGenTest = int(std::min<int64_t>(images, 3));  // images of the generator checks
    std::vector<Gpu> gpu(G);
    for (int g = 0; g < G; ++g) {
        gpu[g].device = int(opt.device) + g;
        CUDA_CHECK(cudaSetDevice(gpu[g].device));
        CUDA_CHECK(cudaGetDeviceProperties(&gpu[g].prop, gpu[g].device));
        const uint64_t per_stream = chunk * (px * sizeof(float) + (s.per_image + 1) * kStatFields * sizeof(double));
        lesson::require_device_memory(nstreams * per_stream + (g == 0 ? 2 * kGenTest * px * sizeof(float) : 0),
                                      flags + " on GPU " + std::to_string(gpu[g].device));
    }
    CUDA_CHECK(cudaSetDevice(int(opt.device)));

    lesson::Report report("23_full_scale");
    report.device(prop);
    report.config_from(cli);
    report.config("gpus", int64_t(G));  // --gpus=0 means all of them: the count used
    report.config("generator", "cuRAND Philox4_32_10, ordering LEGACY, offset = image x side^2");
    if (G == 1)
        std::printf("one GPU (device %d of %d on this machine): the split runs on it alone; no scaling is measured\n",
                    int(opt.device), count);

    // ---- Yardsticks and bounds, measured before the buffers exist ---------------------------
    // Exercise 2 of the handout: run --chunk=4 (chunks inside the L2) against the default; explain the rate and this note
    const double in_flight = double(nstreams) * double(chunk) * double(px) * sizeof(float);
    const Yardsticks yard = measure_yardsticks(gpu, prop, in_flight, int(opt.device));

    // ---- Set up every GPU; the per-image results land in portable pinned memory --------------
    for (Gpu& g : gpu) setup_gpu(g, s, nstreams, uint64_t(opt.seed));
    CUDA_CHECK(cudaSetDevice(int(opt.device)));
    double *h_stats = nullptr, *h_again = nullptr;  // portable: every GPU's copies may write into it
    CUDA_CHECK(cudaHostAlloc(&h_stats, N * kStatFields * sizeof(double), cudaHostAllocPortable));
    CUDA_CHECK(cudaHostAlloc(&h_again, N * kStatFields * sizeof(double), cudaHostAllocPortable));

    // 1. The verified pass on every GPU (also the warm-up). Poisoned first (0xFF bytes are NaN):
    //    an image whose result never arrives fails its check.
    std::memset(h_stats, 0xFF, N * kStatFields * sizeof(double));
    const double first_ms = run_pass(gpu, G, s, N, h_stats, /*progress=*/true);
    // 2. Timed passes, every one checked against the verified pass's bits.
    Passes passes = timed_passes(gpu, s, N, h_stats, h_again, opt, report);
    passes.first_ms = first_ms;

    // 3. Each stage alone on one full chunk (GPU --device, stream 0): cuRAND's generate, then the
    //    fused blur + statistics on what it wrote.
    Gpu& g0 = gpu[0];
    Stages st;
    st.images = std::min<uint64_t>(uint64_t(chunk), N);
    CURAND_CHECK(curandSetGeneratorOffset(g0.gens[0], 0));  // once: each generate continues the sequence
    st.gen_ms = lesson::time_median_ms(
        int(opt.repeat), [&] { generate_chunk(g0, s, 0, st.images); }, g0.streams[0]);
    st.proc_ms = lesson::time_median_ms(
        int(opt.repeat), [&] { process_chunk(g0, s, 0, st.images); }, g0.streams[0]);

    // 4. The generator's promise, checked (checks.cuh).
    check_generator(g0, N, px, kGenTest, uint64_t(opt.seed), report);

    // 5. Verification. --inject-fault corrupts one number of the results first.
    if (opt.inject_fault) verify::inject_fault(h_stats, N * kStatFields, uint64_t(opt.seed));
    //  a. Every image against its bounds.
    report.check(verify::check_every_image(h_stats, N, side, kThreadDepth, double_depth(int(side)),
                                           "every image: |blur sum - raw sum| <= rounding bound, raw mean within 7 sd "
                                           "of 0.5, 0 < blur min <= mean <= max <= 1"));
    //  b. A random sample of whole images per chunk, regenerated and reduced on the CPU (checks.cuh).
    check_sample(h_stats, N, side, chunk, sample, uint64_t(opt.seed), report);

    for (Gpu& g : gpu) free_gpu(g);
    CUDA_CHECK(cudaSetDevice(int(opt.device)));
    CUDA_CHECK(cudaFreeHost(h_stats));
    CUDA_CHECK(cudaFreeHost(h_again));

    // ---- Report (summary.h) ------------------------------------------------------------------
    report_results(report, gpu, int(opt.device), N, side, yard, passes, st);

    const double gbps = 8.0 * double(N) * double(px) / (passes.one_ms * 1e6);  // generate writes, the kernel reads
    report.default_size(cli.at_default_size());
    report.target("pipeline on 1 GPU vs D2D copy", gbps / yard.d2d[0], 0.70);
    if (G > 1)
        report.target(std::to_string(G) + " GPUs over 1 (needs 0.95 x GPUs)", passes.one_ms / passes.all_ms, 0.95 * G,
                      "x");
    return report.finish(opt.json);
}
