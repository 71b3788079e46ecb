// Lesson 14 of the course (reduction): the device buffers of main(), allocated once for every rung.
// Before: main.cu's rung table and run_rung(). Used by main.cu, checks.cuh and summary.cuh.
// Run: ./build/bin/reduction [--quick]   (README.md is the handout)
#pragma once
#include <cuda_runtime.h>
#include <cstddef>

#include "common/check.h"

template <class T>
static T copy_out(const T* d_value) {
    T h = 0;
    CUDA_CHECK(cudaMemcpy(&h, d_value, sizeof(T), cudaMemcpyDeviceToHost));  // waits for the kernels
    return h;
}

// The device buffers, allocated in main() once for every rung: the inputs, the two work
// buffers of the multi-pass rungs, the per-block partials (float and int64) and the ticket
// counter of rung 11, the results.
struct Buffers {
    float *d_in = nullptr, *d_a = nullptr, *d_b = nullptr, *d_partials = nullptr, *d_cub_sum = nullptr;
    int* d_ints = nullptr;
    long long *d_partials64 = nullptr, *d_sum64 = nullptr;
    unsigned* d_counter = nullptr;
    size_t work_a = 0, work_b = 0;  // values in d_a and d_b
    unsigned max_grid = 0;          // partials in d_partials and d_partials64

    // Poison what a rung writes (0xFF bytes are NaN).
    void poison() const {
        CUDA_CHECK(cudaMemset(d_a, 0xFF, work_a * sizeof(float)));
        CUDA_CHECK(cudaMemset(d_b, 0xFF, work_b * sizeof(float)));
        CUDA_CHECK(cudaMemset(d_partials, 0xFF, max_grid * sizeof(float)));
    }
};
