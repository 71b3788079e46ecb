// Lesson 13 of the course (the SGEMM ladder): the host side's device buffers, filled, run once and read back.
// Part of lesson 13 of the course (00-23), 13_matmul_ladder; run: ./build/bin/matmul_ladder (main.cu uses these)
#pragma once
#include <cstdint>
#include <vector>

#include "common/check.h"
#include "common/gemm.h"
#include "kernels/common.cuh"
#include "verify/random.h"

// Fills h_A and h_B at random (seeds seed and seed + 1) and copies them to the device, with room for C there.
inline Gemm upload(const lesson::GemmShape& s, uint64_t seed, std::vector<float>& h_A, std::vector<float>& h_B) {
    verify::fill_uniform(h_A.data(), h_A.size(), seed);
    verify::fill_uniform(h_B.data(), h_B.size(), seed + 1);
    float *d_A = nullptr, *d_B = nullptr, *d_C = nullptr;
    CUDA_CHECK(cudaMalloc(&d_A, s.a() * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_B, s.b() * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_C, s.c() * sizeof(float)));
    CUDA_CHECK(cudaMemcpy(d_A, h_A.data(), s.a() * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_B, h_B.data(), s.b() * sizeof(float), cudaMemcpyHostToDevice));
    return {s.M, s.N, s.K, d_A, d_B, d_C};
}
inline void free_gemm(const Gemm& g) {  // A and B are const in Gemm (the kernels only read them)
    CUDA_CHECK(cudaFree(const_cast<float*>(g.A)));
    CUDA_CHECK(cudaFree(const_cast<float*>(g.B)));
    CUDA_CHECK(cudaFree(g.C));
}

// Poison C (0xFF bytes are NaN), run once, copy C back: that copy is what gets verified.
template <class Launch>
void run_once(Launch launch, const Gemm& g, float* h_C) {
    const size_t bytes = size_t(g.M) * g.N * sizeof(float);
    CUDA_CHECK(cudaMemset(g.C, 0xFF, bytes));
    launch();
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(h_C, g.C, bytes, cudaMemcpyDeviceToHost));
}
