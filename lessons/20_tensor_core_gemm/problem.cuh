// Lesson 20 of the course (the tensor-core GEMM ladder): what the host parts share. The row of
// the rung table, the tolerance, cuBLAS's GemmEx with fp32 C (the reference of every check) and
// with bf16 C (a second yardstick), one problem on the device with its TMA descriptors, and one
// launch whose C is copied back to be verified, and the timed shapes of the flags. main.cu holds
// the rung table and runs the parts; checks.cuh checks against the CPU, timed.cuh times.
// Run: ./build/bin/tensor_core_gemm   (README.md is the handout)
#pragma once
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include <cublas_v2.h>
#include <cuda.h>
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled: the driver function, fetched at run time

#include "common/check.h"
#include "common/flags.h"
#include "common/gemm.h"
#include "common/needs.h"
#include "common/report.h"
#include "verify/gemm_bf16.h"

#include "kernels/common.cuh"

// One row of the ladder: name, launcher, the multiples M, N and K must be, and what it needs
// from the GPU (common/needs.h), its dynamic shared memory per block included. The FP8 rung
// has its own problem (fp8.cuh): launch is null and launch8 its launcher.
struct Rung {
    const char* name;
    void (*launch)(const Gemm&);
    int mult_m, mult_n, mult_k;
    lesson::Needs needs;
    void (*launch8)(const Fp8Gemm&) = nullptr;
};

using Shape = lesson::GemmShape;  // common/gemm.h: M, N, K and the arrays' sizes
static bool fits(const Rung& r, const Shape& s) {
    return s.M % r.mult_m == 0 && s.N % r.mult_n == 0 && s.K % r.mult_k == 0;
}

// The timed shapes: --sizes (square), else --m x --n x --k. Bad input exits 2.
static std::vector<Shape> timed_shapes(const std::string& sizes, int64_t m, int64_t n, int64_t k) {
    if (sizes.empty()) return {{int(m), int(n), int(k)}};
    std::vector<Shape> timed;
    std::stringstream in(sizes);
    for (std::string item; std::getline(in, item, ',');) {
        char* end = nullptr;
        const long v = std::strtol(item.c_str(), &end, 10);
        if (item.empty() || *end != '\0' || v < 16 || v > 16384)
            lesson::bad_input("--sizes=" + sizes + ": each size an integer in [16, 16384]");
        timed.push_back({int(v), int(v), int(v)});
    }
    return timed;
}

// The shapes as one line of text, for the report.
static std::string shapes_text(const std::vector<Shape>& shapes) {
    std::string text;
    for (const Shape& s : shapes) text += (text.empty() ? "" : ", ") + s.text();
    return text;
}

// fp32 accumulation of exactly the bf16 numbers the CPU reference multiplies: what is left is
// the order of the fp32 sums, far below bf16's own rounding (2^-8), which a kernel that
// rounded anything to bf16 on the way would exceed. A rung against cuBLAS (or rung 7) compares
// two fp32 results, each allowed kTol: verify::compare_two_approximations adds both allowances.
constexpr double kTol = 1e-4;

// B's rows lie b_pitch(N) elements apart on the device: N rounded up to a multiple of 8, since a
// TMA descriptor's row stride must be a multiple of 16 bytes. Only rung 13 takes an N where that
// pads (every other rung needs N a multiple of 16 and reads B with a stride of N); cuBLAS gets
// the same storage through its leading dimension.
static int b_pitch(int N) { return (N + 7) / 8 * 8; }

// cuBLAS is column-major: a row-major M x K matrix read column-major is its transpose, so
// ask for C^T (N x M) = B^T (N x K) * A^T (K x M): pass B first, swap M and N. bf16 in, fp32
// accumulation (CUBLAS_COMPUTE_32F), and by default fp32 C in g.C: the same problem as the rungs.
// With c_type CUDA_R_16BF (the one change: C's type) it writes bf16 to C instead; the rungs write
// fp32, so that call is a rate yardstick only (timed.cuh), never the reference of a check.
static void launch_cublas(cublasHandle_t handle, const Gemm& g, void* C = nullptr, cudaDataType_t c_type = CUDA_R_32F) {
    const float alpha = 1.0f, beta = 0.0f;
    CUBLAS_CHECK(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, g.N, g.M, g.K, &alpha, g.B, CUDA_R_16BF, b_pitch(g.N),
                              g.A, CUDA_R_16BF, g.K, &beta, C ? C : g.C, c_type, g.N, CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT));
}

// Device buffers and TMA descriptors of one shape; inputs random bf16 (host copies kept as floats).
struct Problem {
    Shape s;
    std::vector<uint16_t> h_Abits, h_Bbits;
    std::vector<float> h_A, h_B;
    bf16 *d_A = nullptr, *d_B = nullptr;
    float* d_C = nullptr;
    CUtensorMap map_A{}, map_B{};
    Gemm gemm(float* C, int sms) const { return {s.M, s.N, s.K, d_A, d_B, C, &map_A, &map_B, sms}; }
};
static void setup(Problem& p, uint64_t seed, PFN_cuTensorMapEncodeTiled_v12000 encode) {
    const Shape& s = p.s;
    p.h_Abits.resize(s.a());
    p.h_Bbits.resize(s.b());
    p.h_A.resize(s.a());
    p.h_B.resize(s.b());
    verify::fill_bf16(p.h_Abits.data(), p.h_A.data(), s.a(), seed);
    verify::fill_bf16(p.h_Bbits.data(), p.h_B.data(), s.b(), seed + 1);
    // A last: a read past its end (a tile row past M) then does not land in this problem's B or C,
    // which memcheck could not tell from a valid read (it reports accesses outside every allocation).
    CUDA_CHECK(cudaMalloc(&p.d_C, s.c() * sizeof(float)));
    const size_t ldb = size_t(b_pitch(s.N));
    CUDA_CHECK(cudaMalloc(&p.d_B, size_t(s.K) * ldb * sizeof(bf16)));
    CUDA_CHECK(cudaMalloc(&p.d_A, s.a() * sizeof(bf16)));
    CUDA_CHECK(cudaMemcpy(p.d_A, p.h_Abits.data(), s.a() * sizeof(bf16), cudaMemcpyHostToDevice));
    // The padding past N is zeroed: neither TMA nor cuBLAS should read it, but a wide load that
    // spans it then meets defined bytes (compute-sanitizer initcheck).
    if (ldb != size_t(s.N)) CUDA_CHECK(cudaMemset(p.d_B, 0, size_t(s.K) * ldb * sizeof(bf16)));
    CUDA_CHECK(cudaMemcpy2D(p.d_B, ldb * sizeof(bf16), p.h_Bbits.data(), size_t(s.N) * sizeof(bf16),
                            size_t(s.N) * sizeof(bf16), s.K, cudaMemcpyHostToDevice));  // rows padded to ldb
    if (encode) {
        p.map_A = make_tensor_map(encode, p.d_A, s.M, s.K);
        p.map_B = make_tensor_map(encode, p.d_B, s.K, s.N, int(ldb));
    }
}
static void release(Problem& p) {
    CUDA_CHECK(cudaFree(p.d_A));
    CUDA_CHECK(cudaFree(p.d_B));
    CUDA_CHECK(cudaFree(p.d_C));
}

// Poison C (0xFF bytes are NaN), run once, copy C back: that copy is what gets verified.
template <class Launch>
static void run_once(Launch launch, float* d_C, float* h_C, size_t n) {
    CUDA_CHECK(cudaMemset(d_C, 0xFF, n * sizeof(float)));
    launch();
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(h_C, d_C, n * sizeof(float), cudaMemcpyDeviceToHost));
}

// What every part of a run uses: the report, cuBLAS, the GPU, the rungs that run, the TMA
// encoder (null when no wgmma rung runs), the seed and the timing repeats.
struct Context {
    lesson::Report& report;
    cublasHandle_t handle;
    const cudaDeviceProp& prop;
    const std::vector<const Rung*>& ladder;
    PFN_cuTensorMapEncodeTiled_v12000 encode;
    uint64_t seed;
    int repeat;
};
