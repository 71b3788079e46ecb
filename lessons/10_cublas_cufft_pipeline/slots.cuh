// Lesson 10 of the course (cuBLAS + cuFFT pipeline): the slots the chunks go through. T on the
// device once; per stream one slot (an input chunk, an output chunk, a cuBLAS workspace, an FFT
// plan, events); one cuBLAS handle and a plan for a shorter last chunk. main.cu holds what runs
// on them: the GEMM, the FFT and the pipeline's chunk loop.
// Run: ./build/bin/cublas_cufft_pipeline [--quick]   (README.md is the handout)
#pragma once
#include <cstdint>
#include <vector>

#include <cublas_v2.h>
#include <cufft.h>

#include "common/check.h"
#include "common/launch.h"

struct Slots {
    // The batch: `batch` n x n complex images, row-major, pinned on the host, in chunks of `chunk`.
    int64_t n = 0, batch = 0, chunk = 0, streams = 0;
    size_t img_elems = 0, img_bytes = 0;
    lesson::ChunkPlan plan;
    cuComplex *h_in = nullptr, *h_out = nullptr;
    // The device: T once, and one slot (input chunk, output chunk) per stream.
    cuComplex* d_t = nullptr;
    std::vector<cuComplex*> d_x, d_y;
    std::vector<void*> d_ws;  // a cuBLAS workspace per stream (32 MiB, the size cuBLAS suggests for Hopper)
    size_t ws_bytes = size_t(32) << 20;
    std::vector<cudaStream_t> stream;
    std::vector<cudaEvent_t> done;      // "this stream's work is done": stream 0 joins the others
    std::vector<cudaEvent_t> computed;  // "this stream's last GEMM + FFT are done"
    cudaEvent_t fork = nullptr;         // stream 0 forks the others
    std::vector<cufftHandle> fft;  // one plan per stream: a plan's work area must not be shared by two streams at once
    int64_t tail = 0;              // images in a shorter last chunk (0: none)
    cufftHandle fft_tail = 0;      // ... and its plan
    cublasHandle_t blas = nullptr;

    void create(const cuComplex* h_t);
    void destroy();
    // main.cu:
    void transform(int64_t s, int64_t count);      // Y = T * X for one slot's images
    void transform_fft(int64_t s, int64_t count);  // their 2D FFTs, in place
    void pipeline(int64_t k, bool in_order);       // the whole batch through k slots
    void compute_only();                           // every chunk's GEMM + FFT, no copies
};

// T goes to the device; every slot gets its buffers, stream, events and FFT plan.
inline void Slots::create(const cuComplex* h_t) {
    CUDA_CHECK(cudaMalloc(&d_t, img_bytes));
    CUDA_CHECK(cudaMemcpy(d_t, h_t, img_bytes, cudaMemcpyHostToDevice));
    d_x.resize(streams), d_y.resize(streams), d_ws.resize(streams);
    stream.resize(streams), done.resize(streams), fft.resize(streams), computed.resize(streams);
    const int dims[2] = {static_cast<int>(n), static_cast<int>(n)};
    const int dist = static_cast<int>(img_elems);
    for (int64_t s = 0; s < streams; ++s) {
        CUDA_CHECK(cudaMalloc(&d_x[s], chunk * img_bytes));
        CUDA_CHECK(cudaMalloc(&d_y[s], chunk * img_bytes));
        CUDA_CHECK(cudaMalloc(&d_ws[s], ws_bytes));
        CUDA_CHECK(cudaMemset(d_ws[s], 0, ws_bytes));
        CUDA_CHECK(cudaMemset(d_y[s], 0xFF, chunk * img_bytes));  // poison: NaN
        CUDA_CHECK(cudaStreamCreateWithFlags(&stream[s], cudaStreamNonBlocking));
        CUDA_CHECK(cudaEventCreateWithFlags(&done[s], cudaEventDisableTiming));
        // rank 2, n x n, `chunk` images per call. With inembed = onembed = nullptr cuFFT uses the
        // basic layout (images packed back to back) and ignores the strides and distances given;
        // dist = n*n is passed because it equals that default. Padding would need inembed/onembed.
        CUFFT_CHECK(cufftPlanMany(&fft[s], 2, const_cast<int*>(dims), nullptr, 1, dist, nullptr, 1, dist, CUFFT_C2C,
                                  static_cast<int>(chunk)));
    }
    tail = batch % chunk;  // the last chunk may be shorter: it gets a plan of its own
    if (tail)
        CUFFT_CHECK(cufftPlanMany(&fft_tail, 2, const_cast<int*>(dims), nullptr, 1, dist, nullptr, 1, dist, CUFFT_C2C,
                                  static_cast<int>(tail)));
    CUBLAS_CHECK(cublasCreate(&blas));
    for (auto& e : computed) CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
}

inline void Slots::destroy() {
    CUBLAS_CHECK(cublasDestroy(blas));
    if (tail) CUFFT_CHECK(cufftDestroy(fft_tail));
    for (int64_t s = 0; s < streams; ++s) {
        CUFFT_CHECK(cufftDestroy(fft[s]));
        CUDA_CHECK(cudaEventDestroy(done[s]));
        CUDA_CHECK(cudaStreamDestroy(stream[s]));
        CUDA_CHECK(cudaFree(d_x[s]));
        CUDA_CHECK(cudaFree(d_y[s]));
        CUDA_CHECK(cudaFree(d_ws[s]));
    }
    for (auto& e : computed) CUDA_CHECK(cudaEventDestroy(e));
    CUDA_CHECK(cudaEventDestroy(fork));
    CUDA_CHECK(cudaFree(d_t));
}
