// Lesson 23 of the course (00-23): the full-scale run, the original text's 100,000 random
// 1024 x 1024 images, generated on the GPU and reduced to a few numbers each.
// Before: lesson 22 (one host thread per GPU). Next: none, the last lesson.
// Run: ./build/bin/full_scale [--quick]        (default 20000 images, seconds)
//      ./build/bin/full_scale --images=100000  (the full run; --help lists every flag)
//
// cuRAND fills a chunk of images on the GPU (Philox, each image at its own offset of one
// sequence, so image i is the same numbers whatever the chunk size, stream count or GPU
// count); one fused kernel blurs every image (lesson 07's 3x3 kernel) and reduces it to its
// raw sum and the sum, min and max of the blur (lesson 14), without writing the blur to DRAM;
// only those four numbers per image come back over PCIe. Each of --streams streams takes a
// contiguous part of a GPU's images, chunk by chunk; with several GPUs, one host thread per GPU
// runs a contiguous range of images (lesson 22). Every image's numbers are checked against
// bounds; a random sample of whole images per chunk is regenerated on the CPU with cuRAND's host
// generator and recomputed in double. See README.md.
#include <curand.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
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
#include "verify/full_scale.h"
#include "verify/parallel.h"

#include "curand_check.h"  // CURAND_CHECK: cuRAND's status codes, the exit path of CUDA_CHECK
#include "kernels/blur_stats.cuh"

using namespace fullscale;
using verify::kStatFields;

// The one generator setup, device or host: Philox4_32_10, the seed, and the LEGACY ordering,
// which cuRAND promises never to change between releases (README, "The idea").
static void setup_generator(curandGenerator_t gen, uint64_t seed) {
    CURAND_CHECK(curandSetPseudoRandomGeneratorSeed(gen, seed));
    CURAND_CHECK(curandSetGeneratorOrdering(gen, CURAND_ORDERING_PSEUDO_LEGACY));
}

// Everything one GPU owns: its streams, one generator per stream, one set of chunk buffers per stream.
struct Gpu {
    int device = 0;
    cudaDeviceProp prop{};
    std::vector<cudaStream_t> streams;
    std::vector<curandGenerator_t> gens;
    std::vector<float*> d_images;     // chunk x side^2 floats
    std::vector<double*> d_partials;  // chunk x blocks per image x kStatFields
    std::vector<double*> d_stats;     // chunk x kStatFields: what comes back
    double last_ms = 0;               // when it finished the last pass (ms on the pass's host clock)
};

struct Setup {
    int64_t side, chunk;
    uint64_t px;    // pixels per image
    dim3 grid;      // blocks per image (x, y); z = images of the chunk
    int per_image;  // grid.x * grid.y
};

static void setup_gpu(Gpu& g, const Setup& s, int64_t nstreams, uint64_t seed) {
    CUDA_CHECK(cudaSetDevice(g.device));  // streams, generators and buffers below belong to this GPU
    g.streams.resize(nstreams);
    g.gens.resize(nstreams);
    g.d_images.resize(nstreams);
    g.d_partials.resize(nstreams);
    g.d_stats.resize(nstreams);
    for (int64_t i = 0; i < nstreams; ++i) {
        CUDA_CHECK(cudaStreamCreateWithFlags(&g.streams[i], cudaStreamNonBlocking));
        CURAND_CHECK(curandCreateGenerator(&g.gens[i], CURAND_RNG_PSEUDO_PHILOX4_32_10));
        setup_generator(g.gens[i], seed);
        CURAND_CHECK(curandSetStream(g.gens[i], g.streams[i]));  // its launches go to this stream
        CUDA_CHECK(cudaMalloc(&g.d_images[i], s.chunk * s.px * sizeof(float)));
        CUDA_CHECK(cudaMalloc(&g.d_partials[i], s.chunk * s.per_image * kStatFields * sizeof(double)));
        CUDA_CHECK(cudaMalloc(&g.d_stats[i], s.chunk * kStatFields * sizeof(double)));
    }
}

static void free_gpu(Gpu& g) {
    CUDA_CHECK(cudaSetDevice(g.device));
    for (size_t i = 0; i < g.streams.size(); ++i) {
        CURAND_CHECK(curandDestroyGenerator(g.gens[i]));
        CUDA_CHECK(cudaFree(g.d_images[i]));
        CUDA_CHECK(cudaFree(g.d_partials[i]));
        CUDA_CHECK(cudaFree(g.d_stats[i]));
        CUDA_CHECK(cudaStreamDestroy(g.streams[i]));
    }
}

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
    const int batch = std::min(verify::host_threads(), 16);  // sampled images recomputed at a time
    const std::string flags = "--images=" + std::to_string(images) + " --side=" + std::to_string(side) +
                              " --chunk=" + std::to_string(chunk) + " --streams=" + std::to_string(nstreams);
    // Host: the per-image results twice (pinned), a batch of sampled images and their blur.
    lesson::require_host_memory(2 * N * kStatFields * sizeof(double) + batch * px * (sizeof(float) + sizeof(double)),
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
    report.device(prop.name, prop.major, prop.minor, prop.multiProcessorCount, prop.totalGlobalMem / 1e9);
    report.config("images", images);
    report.config("side", side);
    report.config("chunk", chunk);
    report.config("streams", nstreams);
    report.config("gpus", int64_t(G));
    report.config("sample_per_chunk", sample);
    report.config("generator", "cuRAND Philox4_32_10, ordering LEGACY, offset = image x side^2");
    report.config("seed", opt.seed);
    if (G == 1)
        std::printf("one GPU (device %d of %d on this machine): the split runs on it alone; no scaling is measured\n",
                    int(opt.device), count);

    // ---- Yardsticks and bounds, measured before the buffers exist ---------------------------
    // Bytes each stage must move per image: the generator writes 4 side^2, the fused kernel reads
    // them once (its writes are 4 doubles per block). A D2D copy moves the same 1 read : 1 write.
    std::vector<double> d2d(G);
    for (int g = 0; g < G; ++g) {
        CUDA_CHECK(cudaSetDevice(gpu[g].device));
        d2d[g] = lesson::measure_d2d_gbps(gpu[g].prop);
    }
    CUDA_CHECK(cudaSetDevice(int(opt.device)));
    // Exercise 2 of the handout: run --chunk=4 (chunks inside the L2) against the default; explain the rate and this note
    const double in_flight = double(nstreams) * double(chunk) * double(px) * sizeof(float);
    const std::string in_l2 = lesson::l2_note(in_flight, prop);  // chunks that fit in L2 skip DRAM
    const lesson::StreamBound dram =
        in_l2.empty() ? lesson::measure_stream_bound(prop, 1, 1) : lesson::stream_bound_not_measured(1, 1, in_l2);

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

    // 2. Timed passes. With several GPUs in turns: all GPUs, then the first GPU alone, so that both
    //    medians see the same clocks and temperatures. Every pass must give the verified pass's
    //    bits: the kernels add in a fixed order, and image i's numbers do not depend on the chunk
    //    or the GPU that made them.
    const int passes = int(std::min<int64_t>(opt.repeat, 5));
    const std::vector<size_t> uses = G > 1 ? std::vector<size_t>{size_t(G), 1} : std::vector<size_t>{1};
    std::vector<std::vector<double>> pass_ms(uses.size()), gpu_ms(G);  // gpu_ms: each GPU's end, all-GPU passes
    std::vector<lesson::Check> same(uses.size());
    for (int r = 0; r < passes; ++r) {
        for (size_t u = 0; u < uses.size(); ++u) {
            std::memset(h_again, 0xFF, N * kStatFields * sizeof(double));
            pass_ms[u].push_back(run_pass(gpu, uses[u], s, N, h_again, /*progress=*/false));
            for (int g = 0; u == 0 && g < G; ++g) gpu_ms[g].push_back(gpu[g].last_ms);
            const std::string who =
                u == 0 ? std::to_string(G) + " GPU(s)" : "GPU " + std::to_string(opt.device) + " alone";
            const lesson::Check c =
                verify::check_same_bits(h_again, h_stats, N * kStatFields,
                                        "timed passes on " + who + ": the verified pass's bits, every image");
            if (r == 0 || !c.pass) same[u] = c;  // the first pass, or one that differs
        }
    }
    for (const lesson::Check& c : same) report.check(c);
    const double all_ms = lesson::median(pass_ms[0]), one_ms = lesson::median(pass_ms.back());

    // 3. Each stage alone on one full chunk (GPU --device, stream 0): cuRAND's generate, then the
    //    fused blur + statistics on what it wrote.
    Gpu& g0 = gpu[0];
    const uint64_t c0 = std::min<uint64_t>(uint64_t(chunk), N);
    CURAND_CHECK(curandSetGeneratorOffset(g0.gens[0], 0));  // once: each generate continues the sequence
    const double gen_ms = lesson::time_median_ms(
        int(opt.repeat), [&] { generate_chunk(g0, s, 0, c0); }, g0.streams[0]);
    const double proc_ms = lesson::time_median_ms(
        int(opt.repeat), [&] { process_chunk(g0, s, 0, c0); }, g0.streams[0]);

    // 4. The generator's promise, checked. The last kGenTest images (the largest offsets) made by
    //    one generate call, then the last alone at its own offset and the others one call each,
    //    continuing from the first one's offset (as the streams of a pass do): the same bits.
    //    Then the host generator (same seed, offset, ordering) must give those bits too.
    const uint64_t t0 = N - uint64_t(kGenTest), tn = uint64_t(kGenTest) * px;
    float* d_one = nullptr;  // tn floats from one call, then tn from one call per image (d_each)
    CUDA_CHECK(cudaMalloc(&d_one, 2 * tn * sizeof(float)));
    float* d_each = d_one + tn;
    // Poisoned on the generator's stream: a non-blocking stream does not wait for the legacy default stream.
    CUDA_CHECK(cudaMemsetAsync(d_one, 0xFF, 2 * tn * sizeof(float), g0.streams[0]));
    CURAND_CHECK(curandSetGeneratorOffset(g0.gens[0], t0 * px));
    CURAND_CHECK(curandGenerateUniform(g0.gens[0], d_one, tn));
    CURAND_CHECK(curandSetGeneratorOffset(g0.gens[0], (t0 + kGenTest - 1) * px));
    CURAND_CHECK(curandGenerateUniform(g0.gens[0], d_each + (kGenTest - 1) * px, px));
    CURAND_CHECK(curandSetGeneratorOffset(g0.gens[0], t0 * px));
    for (int i = 0; i + 1 < kGenTest; ++i) CURAND_CHECK(curandGenerateUniform(g0.gens[0], d_each + i * px, px));
    std::vector<float> h_one(tn), h_each(tn), h_host(tn);
    CUDA_CHECK(cudaMemcpyAsync(h_one.data(), d_one, tn * sizeof(float), cudaMemcpyDeviceToHost, g0.streams[0]));
    CUDA_CHECK(cudaMemcpyAsync(h_each.data(), d_each, tn * sizeof(float), cudaMemcpyDeviceToHost, g0.streams[0]));
    CUDA_CHECK(cudaStreamSynchronize(g0.streams[0]));
    CUDA_CHECK(cudaFree(d_one));
    curandGenerator_t host_gen;
    CURAND_CHECK(curandCreateGeneratorHost(&host_gen, CURAND_RNG_PSEUDO_PHILOX4_32_10));  // runs on the CPU
    setup_generator(host_gen, uint64_t(opt.seed));
    CURAND_CHECK(curandSetGeneratorOffset(host_gen, t0 * px));
    CURAND_CHECK(curandGenerateUniform(host_gen, h_host.data(), tn));
    const std::string last = "images " + std::to_string(t0) + ".." + std::to_string(N - 1);
    report.check(verify::check_same_bits(
        h_each.data(), h_one.data(), tn,
        "GPU generator, " + last + ": the last at its offset, the others continuing = one call, every pixel"));
    report.check(verify::check_same_bits(h_host.data(), h_one.data(), tn,
                                         "host generator = GPU generator, " + last + ", every pixel"));

    // 5. Verification. --inject-fault corrupts one number of the results first.
    if (opt.inject_fault) verify::inject_fault(h_stats, N * kStatFields, uint64_t(opt.seed));
    //  a. Every image against its bounds.
    report.check(verify::check_every_image(h_stats, N, side, kThreadDepth, double_depth(int(side)),
                                           "every image: |blur sum - raw sum| <= rounding bound, raw mean within 7 sd "
                                           "of 0.5, 0 < blur min <= mean <= max <= 1"));
    //  b. A random sample of whole images per chunk, regenerated on the CPU by the host generator
    //     and blurred and reduced in double: all four numbers within 1e-5 (relative).
    const lesson::ChunkPlan plan = lesson::plan_chunks(N, uint64_t(chunk));
    std::vector<uint64_t> picked;
    for (uint64_t k = 0; k < plan.count; ++k) {
        const std::vector<uint64_t> p =
            verify::sample_images(plan.at(k).first, plan.at(k).count, uint64_t(sample), uint64_t(opt.seed), k);
        picked.insert(picked.end(), p.begin(), p.end());
    }
    //     The host generator runs on one thread (10-20 ms an image), so each image of a batch has a
    //     host thread and a host generator of its own (the same seed and ordering, set to the image's
    //     offset: the same bits as one generator moved from image to image).
    lesson::HostTimer cpu;
    std::vector<curandGenerator_t> image_gens(static_cast<size_t>(batch));
    for (curandGenerator_t& gen : image_gens) {
        CURAND_CHECK(curandCreateGeneratorHost(&gen, CURAND_RNG_PSEUDO_PHILOX4_32_10));
        setup_generator(gen, uint64_t(opt.seed));
    }
    verify::host_vector<float> h_img(size_t(batch) * px);  // not zeroed: the generator writes every pixel
    std::vector<double> ref(picked.size() * kStatFields), got(picked.size() * kStatFields);
    for (size_t b0 = 0; b0 < picked.size(); b0 += batch) {
        const size_t nb = std::min(picked.size() - b0, size_t(batch));
        verify::parallel_for(int64_t(nb), [&](int64_t j) {  // the host generator: the image at its offset
            CURAND_CHECK(curandSetGeneratorOffset(image_gens[size_t(j)], picked[b0 + j] * px));
            CURAND_CHECK(curandGenerateUniform(image_gens[size_t(j)], h_img.data() + j * px, px));
            verify::image_stats_reference(h_img.data() + j * px, side, ref.data() + (b0 + j) * kStatFields);
        });
        for (size_t j = b0; j < b0 + nb; ++j)
            std::memcpy(got.data() + j * kStatFields, h_stats + picked[j] * kStatFields, kStatFields * sizeof(double));
    }
    report.cpu_reference_ms(cpu.ms(), verify::host_threads());
    for (curandGenerator_t gen : image_gens) CURAND_CHECK(curandDestroyGenerator(gen));
    CURAND_CHECK(curandDestroyGenerator(host_gen));
    report.check(verify::compare(got.data(), ref.data(), got.size(), 1e-5,
                                 std::to_string(picked.size()) + " sampled images (" + std::to_string(sample) +
                                     " per chunk) vs CPU double reference, 4 numbers each (index = 4 x sample + field)",
                                 0.0));

    for (Gpu& g : gpu) free_gpu(g);
    CUDA_CHECK(cudaSetDevice(int(opt.device)));
    CUDA_CHECK(cudaFreeHost(h_stats));
    CUDA_CHECK(cudaFreeHost(h_again));

    // ---- Report -----------------------------------------------------------------------------
    const double bytes = 8.0 * double(N) * double(px);  // generate writes 4 B a pixel, the kernel reads them
    const double chunk_bytes = 4.0 * double(c0) * double(px);
    auto gbps = [](double b, double ms) { return b / (ms * 1e6); };
    double d2d_all = 0;
    for (double r : d2d) d2d_all += r;
    lesson::add_bound(report, dram, int(opt.device));
    report.yardstick("D2D cudaMemcpy, GPU " + std::to_string(opt.device) + " (read + write)", d2d[0], "GB/s");
    if (G > 1) report.yardstick("D2D cudaMemcpy, sum over " + std::to_string(G) + " GPUs", d2d_all, "GB/s");
    report.timing("passes: host clock from every GPU's thread ready to the last cudaDeviceSynchronize, median of " +
                  std::to_string(passes) + " after a verified pass; stages: " + lesson::kTimingMethod);
    report.variant_yardstick("stage: curandGenerateUniform, " + std::to_string(c0) + " images", gen_ms,
                             gbps(chunk_bytes, gen_ms), "GB/s", d2d[0], "D2D copy", in_l2);
    report.variant_yardstick("stage: blur3x3Stats + finishImageStats, " + std::to_string(c0) + " images", proc_ms,
                             gbps(chunk_bytes, proc_ms), "GB/s", d2d[0], "D2D copy", in_l2);
    const std::string what = std::to_string(N) + " images of " + std::to_string(side) + "^2";
    report.variant_bound("pipeline, 1 GPU, " + what, one_ms, gbps(bytes, one_ms), "GB/s", dram.gbps, "DRAM bound",
                         in_l2);
    report.variant_yardstick("pipeline, 1 GPU vs D2D copy", one_ms, gbps(bytes, one_ms), "GB/s", d2d[0], "D2D copy",
                             in_l2);
    if (G > 1)
        report.variant_yardstick("pipeline, " + std::to_string(G) + " GPUs vs their D2D copies", all_ms,
                                 gbps(bytes, all_ms), "GB/s", d2d_all, "D2D copies", in_l2);
    report.metric("wall time of the verified first pass (" + std::to_string(G) + " GPUs, warm-up included)", first_ms,
                  "ms");
    report.metric("wall time of a pass, 1 GPU", one_ms, "ms");
    for (size_t u = 0; u < uses.size(); ++u)
        report.metric("slowest / fastest timed pass, " + std::to_string(uses[u]) + " GPU(s)",
                      *std::max_element(pass_ms[u].begin(), pass_ms[u].end()) /
                          *std::min_element(pass_ms[u].begin(), pass_ms[u].end()),
                      "x");
    report.metric("images per second, 1 GPU", 1e3 * double(N) / one_ms, "images/s");
    if (G > 1) {
        report.metric("wall time of a pass, " + std::to_string(G) + " GPUs", all_ms, "ms");
        report.metric("images per second, " + std::to_string(G) + " GPUs", 1e3 * double(N) / all_ms, "images/s");
        for (int g = 0; g < G; ++g)
            report.metric("  GPU " + std::to_string(gpu[g].device) + " in the " + std::to_string(G) + "-GPU pass",
                          1e3 * double(N * (g + 1) / G - N * g / G) / lesson::median(gpu_ms[g]), "images/s");
        report.metric("scaling: " + std::to_string(G) + " GPUs over 1", one_ms / all_ms, "x");
    }
    report.metric("stages back to back (generate + process), per image", (gen_ms + proc_ms) / double(c0), "ms");
    report.metric("PCIe: bytes back per image", double(kStatFields * sizeof(double)), "bytes");
    // The fused kernel: the 3x3 blur as 9 multiply-adds (18 flops) and 2 additions per pixel for
    // the sums; it must read each pixel once (its few partial writes are left out).
    report.work("blur3x3Stats + finishImageStats (fused)", 20.0 * double(c0) * double(px), chunk_bytes, proc_ms);
    report.note(
        "GB/s count the bytes each stage must move: the generator writes 4 B a pixel, the fused kernel "
        "reads them once; 32 bytes per image come back over PCIe");
    report.note(
        "sum relation: clamp-to-edge [1 2 1]/4 passes hand out exactly 1 per pixel, so sum(blur) = sum(raw) "
        "exactly; the check allows the float rounding bound (verify/full_scale.h)");

    char key[160];
    std::snprintf(key, sizeof key, "%s: %.2f s on 1 GPU, %.0f images/s, %.0f GB/s", what.c_str(), one_ms / 1e3,
                  1e3 * double(N) / one_ms, gbps(bytes, one_ms));
    report.key_result(key, gbps(bytes, one_ms) / d2d[0], "D2D copy", lesson::Against::Yardstick, in_l2);
    report.default_size(cli.at_default_size());
    report.target("pipeline on 1 GPU vs D2D copy", gbps(bytes, one_ms) / d2d[0], 0.70);
    if (G > 1) report.target(std::to_string(G) + " GPUs over 1 (needs 0.95 x GPUs)", one_ms / all_ms, 0.95 * G, "x");
    return report.finish(opt.json);
}
