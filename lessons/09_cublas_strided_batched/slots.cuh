// Lesson 09 of the course (cuBLAS strided-batched): the staged batch and the slots its chunks go
// through. The sizes and the chunk plan; A, B and C of the whole batch in pinned memory (main.cu
// allocates them); per stream one slot: the stream, device buffers for one chunk of A, B and C, a
// cuBLAS workspace and a "done" event; the event that forks the streams from stream[0]. main.cu
// holds what runs on them: issue_chunk, the staged pipeline and the just-in-time run.
// Run: ./build/bin/cublas_strided_batched [--quick]   (README.md is the handout)
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include <cublas_v2.h>

#include "common/check.h"
#include "common/flags.h"
#include "common/launch.h"
#include "common/report.h"

// A cuBLAS workspace per stream: 32 MiB, the size cuBLAS's documentation recommends for Hopper.
constexpr size_t kWorkspaceBytes = size_t(32) << 20;

struct PipelineBound;  // summary.cuh

struct Slots {
    // `batch` row-major n x n products in chunks of `chunk`, one slot per stream (S of them).
    int64_t n = 0, batch = 0, chunk = 0;
    int N = 0;
    uint64_t S = 0, nn = 0, mat_bytes = 0, chunk_bytes = 0;  // one of A, B, C per chunk
    lesson::ChunkPlan plan;
    size_t ws_bytes = kWorkspaceBytes;
    cublasHandle_t handle = nullptr;  // main.cu's one handle
    float *h_A = nullptr, *h_B = nullptr, *h_C = nullptr;
    std::vector<cudaStream_t> stream;
    std::vector<cudaEvent_t> done;
    std::vector<float*> d_A, d_B, d_C;
    std::vector<void*> d_ws;
    cudaEvent_t fork = nullptr;

    Slots(int64_t n_, int64_t batch_, int64_t chunk_, int64_t streams)
        : n(n_),
          batch(batch_),
          chunk(chunk_),
          N(static_cast<int>(n_)),
          S(uint64_t(streams)),
          nn(uint64_t(n_) * n_),
          mat_bytes(nn * sizeof(float)),
          chunk_bytes(uint64_t(chunk_) * mat_bytes),
          plan(lesson::plan_chunks(uint64_t(batch_), uint64_t(chunk_))) {}
    void create(cublasHandle_t h);  // the slots and the fork event
    void destroy();                 // after cublasDestroy: the handle may still point to a workspace
    // main.cu:
    void issue_chunk(const lesson::Chunk& ch, uint64_t s, const float* hA, const float* hB, float* hC);
    void staged_pipeline(uint64_t slots);
    void just_in_time(lesson::Report& report, int64_t samples, const lesson::CommonOptions& opt,
                      const PipelineBound& bound);
};

inline void Slots::create(cublasHandle_t h) {
    handle = h;
    stream.resize(S), done.resize(S), d_A.resize(S), d_B.resize(S), d_C.resize(S), d_ws.resize(S);
    for (uint64_t s = 0; s < S; ++s) {
        CUDA_CHECK(cudaStreamCreateWithFlags(&stream[s], cudaStreamNonBlocking));
        CUDA_CHECK(cudaEventCreateWithFlags(&done[s], cudaEventDisableTiming));
        CUDA_CHECK(cudaMalloc(&d_A[s], chunk_bytes));
        CUDA_CHECK(cudaMalloc(&d_B[s], chunk_bytes));
        CUDA_CHECK(cudaMalloc(&d_C[s], chunk_bytes));
        CUDA_CHECK(cudaMalloc(&d_ws[s], ws_bytes));  // cudaMalloc aligns to 256 bytes, as cuBLAS requires
    }
    CUDA_CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
}

inline void Slots::destroy() {
    for (uint64_t s = 0; s < S; ++s) {
        CUDA_CHECK(cudaFree(d_A[s]));
        CUDA_CHECK(cudaFree(d_B[s]));
        CUDA_CHECK(cudaFree(d_C[s]));
        CUDA_CHECK(cudaFree(d_ws[s]));
        CUDA_CHECK(cudaEventDestroy(done[s]));
        CUDA_CHECK(cudaStreamDestroy(stream[s]));
    }
    CUDA_CHECK(cudaEventDestroy(fork));
}
