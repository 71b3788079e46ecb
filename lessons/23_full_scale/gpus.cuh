// Lesson 23 of the course (the full-scale run): what each GPU owns - its streams, one cuRAND
// generator per stream, one set of chunk buffers per stream - made and freed, and the one
// generator setup that the device and host generators share. main.cu runs the passes on them.
// Run: ./build/bin/full_scale [--quick]   (README.md is the handout)
#pragma once
#include <curand.h>

#include <cstdint>
#include <vector>

#include "common/check.h"

#include "curand_check.h"
#include "kernels/blur_stats.cuh"

using fullscale::kStatFields;

// The one generator setup, device or host: Philox4_32_10, the seed, and the LEGACY ordering,
// which cuRAND promises never to change between releases (README, "The idea").
inline void setup_generator(curandGenerator_t gen, uint64_t seed) {
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

inline void setup_gpu(Gpu& g, const Setup& s, int64_t nstreams, uint64_t seed) {
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

inline void free_gpu(Gpu& g) {
    CUDA_CHECK(cudaSetDevice(g.device));
    for (size_t i = 0; i < g.streams.size(); ++i) {
        CURAND_CHECK(curandDestroyGenerator(g.gens[i]));
        CUDA_CHECK(cudaFree(g.d_images[i]));
        CUDA_CHECK(cudaFree(g.d_partials[i]));
        CUDA_CHECK(cudaFree(g.d_stats[i]));
        CUDA_CHECK(cudaStreamDestroy(g.streams[i]));
    }
}
