// Lesson 07 of the course (Gaussian blur), part 2: a batch of small images streamed through the
// GPU in chunks over several streams, from and to pinned host memory, blurred by rung 3
// (kernels/3_tiled.cuh) with one launch per chunk (blockIdx.z = image) against one per image.
// Part 1, the ladder on one large image, is main.cu's.
// Run: ./build/bin/gaussian_blur [--quick]   (README.md is the handout)
#pragma once
#include <string>
#include <vector>

#include "common/ceilings.h"
#include "common/check.h"
#include "common/flags.h"
#include "common/launch.h"
#include "common/report.h"
#include "common/timer.h"
#include "verify/blur.h"
#include "verify/parallel.h"
#include "verify/random.h"

#include "kernels/3_tiled.cuh"

// The batch: `images` images of width x height, `chunk` at a time over `streams` streams.
struct Batch {
    int64_t images, width, height, chunk, streams;
};

struct BatchTimes {
    lesson::LinkRates link;  // pinned, at the chunk's size, between the batch's pages and a slot
    uint64_t chunks = 0;
    double per_image_ms = 0, per_chunk_ms = 0;  // one launch per image, one per chunk
};

inline BatchTimes stream_batch(const Batch& b, const lesson::CommonOptions& opt, lesson::Report& report) {
    const size_t image_px = b.width * b.height, image_bytes = image_px * sizeof(float);
    const size_t chunk_bytes = b.chunk * image_bytes, batch_bytes = b.images * image_bytes;
    BatchTimes t;
    float *h_bin = nullptr, *h_bout = nullptr;
    CUDA_CHECK(cudaMallocHost(&h_bin, batch_bytes));  // pinned: cudaMemcpyAsync can overlap with kernels
    CUDA_CHECK(cudaMallocHost(&h_bout, batch_bytes));
    verify::fill_uniform(h_bin, b.images * image_px, opt.seed + 1);  // staged before any timing

    std::vector<cudaStream_t> streams(b.streams);
    std::vector<float*> d_slot_in(b.streams), d_slot_out(b.streams);
    for (int64_t s = 0; s < b.streams; ++s) {
        CUDA_CHECK(cudaStreamCreate(&streams[s]));
        CUDA_CHECK(cudaMalloc(&d_slot_in[s], chunk_bytes));
        CUDA_CHECK(cudaMalloc(&d_slot_out[s], chunk_bytes));
    }
    // The PCIe bound at this chunk size: bursts of back-to-back chunk copies, best of several trials,
    // from and to the batch's own pinned pages (the pipeline poisons h_bout before each run).
    t.link = lesson::measure_pinned_link_gbps(chunk_bytes, {h_bin, h_bout, batch_bytes, d_slot_in[0], d_slot_out[0]});

    // Chunk k goes to stream k % streams and that stream's device slot. The slot is reused by
    // chunk k + streams only after chunk k's copy-out finished: the stream runs its work in order.
    const lesson::ChunkPlan plan = lesson::plan_chunks(b.images, b.chunk);
    const lesson::Grid gi = lesson::grid_for(b.width, b.height, 1, kTileW, kTileH);
    const dim3 block(kTileW, kRows);
    const unsigned image_tiles = gi.x * gi.y;  // one block per tile of each image: small images have few
    auto pipeline = [&](bool one_launch_per_chunk) {
        for (uint64_t k = 0; k < plan.count; ++k) {
            const lesson::Chunk ch = plan.at(k);
            const cudaStream_t st = streams[k % b.streams];
            float* d_cin = d_slot_in[k % b.streams];
            float* d_cout = d_slot_out[k % b.streams];
            const size_t first = ch.first * image_px, nbytes = ch.count * image_bytes;
            CUDA_CHECK(cudaMemcpyAsync(d_cin, h_bin + first, nbytes, cudaMemcpyHostToDevice, st));
            if (one_launch_per_chunk) {  // blockIdx.z picks the image: ch.count <= --chunk <= 65535
                blur3x3Tiled<<<dim3(image_tiles, 1, unsigned(ch.count)), block, 0, st>>>(d_cin, d_cout, int(b.width),
                                                                                         int(b.height));
                CUDA_CHECK_LAUNCH();
            } else {  // the original text's way: one launch per image
                for (uint64_t i = 0; i < ch.count; ++i) {
                    blur3x3Tiled<<<dim3(image_tiles, 1, 1), block, 0, st>>>(d_cin + i * image_px, d_cout + i * image_px,
                                                                            int(b.width), int(b.height));
                    CUDA_CHECK_LAUNCH();
                }
            }
            CUDA_CHECK(cudaMemcpyAsync(h_bout + first, d_cout, nbytes, cudaMemcpyDeviceToHost, st));
        }
        CUDA_CHECK(cudaDeviceSynchronize());
    };
    // Poison, one warm-up run, `repeat` timed runs on the host clock (they span all streams),
    // then every pixel of every image is checked. Long runs take fewer samples (lesson::capped_samples).
    auto run_and_verify = [&](bool one_launch_per_chunk, const std::string& what) {
        verify::parallel_memset(h_bout, 0xFF, batch_bytes);
        for (int64_t s = 0; s < b.streams; ++s) CUDA_CHECK(cudaMemset(d_slot_out[s], 0xFF, chunk_bytes));
        lesson::HostTimer warm_up;
        pipeline(one_launch_per_chunk);
        const int64_t runs = lesson::capped_samples(opt.repeat, warm_up.ms());
        std::vector<double> ms;
        for (int64_t r = 0; r < runs; ++r) {
            lesson::HostTimer timer;
            pipeline(one_launch_per_chunk);
            ms.push_back(timer.ms());
        }
        report.check(verify::check_blurred_images(h_bin, h_bout, b.width, b.height, b.images,
                                                  what + ", every pixel of " + std::to_string(b.images) + " images"));
        return lesson::median(ms);
    };
    t.per_image_ms = run_and_verify(false, "streamed batch, one launch per image");
    t.per_chunk_ms = run_and_verify(true, "streamed batch, one launch per chunk");
    t.chunks = plan.count;

    for (int64_t s = 0; s < b.streams; ++s) {
        CUDA_CHECK(cudaFree(d_slot_in[s]));
        CUDA_CHECK(cudaFree(d_slot_out[s]));
        CUDA_CHECK(cudaStreamDestroy(streams[s]));
    }
    CUDA_CHECK(cudaFreeHost(h_bin));
    CUDA_CHECK(cudaFreeHost(h_bout));
    return t;
}
