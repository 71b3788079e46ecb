// Lesson 13 of the course (the SGEMM ladder): the host side's device buffers, filled, run once and read back,
// cuBLAS's C checked on sampled rows, and the one cuBLAS call. Part of lesson 13 of the course (00-23),
// 13_matmul_ladder; run: ./build/bin/matmul_ladder (main.cu and other_shapes.h use these)
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <cublas_v2.h>

#include "common/check.h"
#include "common/gemm.h"
#include "common/report.h"
#include "kernels/common.cuh"
#include "verify/gemm.h"
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

// One shape's arrays: A and B (random, seeds seed and seed + 1) on the host and the device, one rung's C (g.C on the
// device, h_C on the host) and cuBLAS's C (ref.C, h_ref). Freed with the object.
struct Arrays {
    std::vector<float> h_A, h_B, h_C, h_ref;
    Gemm g{}, ref{};  // the same A and B; C: the rung's, cuBLAS's
    Arrays(const lesson::GemmShape& s, uint64_t seed) : h_A(s.a()), h_B(s.b()), h_C(s.c()), h_ref(s.c()), made_(s) {
        g = ref = upload(s, seed, h_A, h_B);
        CUDA_CHECK(cudaMalloc(&ref.C, s.c() * sizeof(float)));
    }
    ~Arrays() {
        free_gemm(g);
        CUDA_CHECK(cudaFree(ref.C));
    }
    Arrays(const Arrays&) = delete;
    Arrays& operator=(const Arrays&) = delete;

    // From now on the same arrays are read as shape s, each row as long as s says: part 3 of main.cu times shapes
    // near the timed one in its arrays (the values are random either way). s must need no more elements than they
    // were made for.
    void as(const lesson::GemmShape& s) {
        if (s.a() > made_.a() || s.b() > made_.b() || s.c() > made_.c()) {
            std::fprintf(stderr, "%s does not fit in the arrays of %s\n", s.text().c_str(), made_.text().c_str());
            std::exit(1);
        }
        g.M = ref.M = s.M;
        g.N = ref.N = s.N;
        g.K = ref.K = s.K;
    }

private:
    lesson::GemmShape made_;
};

// cuBLAS's C (launch writes a.ref.C), copied to a.h_ref and checked against the double-precision CPU reference on
// sampled rows of A * B (verify/gemm.h): all rows for small shapes, else 16, the first and the last among them.
template <class Launch>
lesson::Check cublas_on_rows(Launch launch, Arrays& a, uint64_t seed, double tol) {
    run_once(launch, a.ref, a.h_ref.data());
    const Gemm& r = a.ref;
    const int64_t samples = double(r.M) * r.N * r.K <= double(1 << 27) ? r.M : std::min(r.M, 16);
    const verify::GemmRows rows = verify::gemm_reference_rows(a.h_A.data(), a.h_B.data(), r.N, r.K,
                                                              verify::sample_rows(r.M, samples, seed, true));
    const std::string what = std::to_string(samples) + " rows of " + lesson::GemmShape{r.M, r.N, r.K}.text();
    return rows.check_in(a.h_ref.data(), tol, "cuBLAS vs CPU, " + what);
}

// Runs a rung (launch) once on a.g and compares every element of its C with cuBLAS's, a.h_ref.
template <class Launch>
lesson::Check against_cublas(Launch launch, Arrays& a, const std::string& name, double tol) {
    run_once(launch, a.g, a.h_C.data());
    const lesson::GemmShape s{a.g.M, a.g.N, a.g.K};
    return verify::compare(a.h_C.data(), a.h_ref.data(), s.c(), tol, name + " vs cuBLAS, every element of " + s.text());
}

// cuBLAS is column-major: lesson::sgemm_row_major (common/gemm.h; lesson 08 writes the call out) asks for
// C^T = B^T * A^T, B first and M, N swapped, with no copies. main() sets CUBLAS_DEFAULT_MATH: true fp32, no TF32.
inline void launch_cublas(cublasHandle_t handle, const Gemm& g) {
    lesson::sgemm_row_major(handle, g.M, g.N, g.K, g.A, g.B, g.C);
}
