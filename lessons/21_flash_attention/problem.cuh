// Lesson 21 of the course (flash attention): what the host parts share. The inputs (filled on
// the GPU, regenerated on the host), one attention problem on the device, the CPU reference of
// chosen rows of O, the row of the rung table and the context every part checks and reports
// through. main.cu holds the rung table and runs the parts (checks.cuh, timed.cuh, decode.cuh).
// Run: ./build/bin/flash_attention   (README.md is the handout)
#pragma once
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <cublas_v2.h>

#include "common/check.h"
#include "common/report.h"
#include "verify/attention.h"
#include "verify/compare.h"
#include "verify/gemm_bf16.h"
#include "verify/parallel.h"

#include "kernels/attention.cuh"

// Random inputs, a pure function of (seed, index) (verify/attention.h): the GPU fills its tensors and
// the host regenerates exactly the same values for whatever it checks. Q is drawn 4x wider than K
// and V, so that the scores spread over several units and the softmax has real peaks.
enum Tensor { kQ = 1, kK = 2, kV = 3 };
constexpr float kAmp[4] = {0.f, 4.f, 1.f, 1.f};
__global__ void fillInput(bf16* x, size_t n, uint64_t seed, float amp) {
    for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
        x[i] = __ushort_as_bfloat16(verify::attention_bf16_bits(verify::attention_value(seed, i, amp)));
}
static void fill(bf16* d_x, size_t n, uint64_t seed, Tensor t) {
    fillInput<<<1024, 256>>>(d_x, n, seed * 4 + t, kAmp[t]);
    CUDA_CHECK_LAUNCH();
}
static verify::host_vector<float> host_values(uint64_t seed, Tensor t, size_t first, size_t n) {
    verify::host_vector<float> v(n);  // not zeroed: the parallel loop writes every element
    verify::parallel_blocks(n, uint64_t(1) << 16, [&](uint64_t b, uint64_t e) {
        for (uint64_t i = b; i < e; ++i) v[i] = verify::attention_value(seed * 4 + t, first + i, kAmp[t]);
    });
    return v;
}

// bf16 output -> floats (exact), on all host cores. The bits' pages are touched first: a pageable
// copy into fresh pages faults them in one by one.
static verify::host_vector<float> copy_out(const bf16* d_x, size_t n) {
    verify::host_vector<uint16_t> bits(n);
    verify::parallel_memset(bits.data(), 0, n * sizeof(uint16_t));
    CUDA_CHECK(cudaMemcpy(bits.data(), d_x, n * sizeof(bf16), cudaMemcpyDeviceToHost));
    verify::host_vector<float> v(n);  // not zeroed: the loop writes every element
    verify::parallel_blocks(n, uint64_t(1) << 16, [&](uint64_t b, uint64_t e) {
        for (uint64_t i = b; i < e; ++i) v[i] = verify::bf16_float(bits[i]);
    });
    return v;
}

// One attention problem on the device.
struct Problem {
    int64_t heads;
    int N, d;
    bool causal;
    uint64_t seed;
    bf16 *d_Q = nullptr, *d_K = nullptr, *d_V = nullptr, *d_O = nullptr;
    size_t elems() const { return size_t(heads) * N * d; }
    Attention args() const { return {heads, N, d, d_Q, d_K, d_V, d_O, causal, float(1.0 / std::sqrt(double(d)))}; }
};
static void setup(Problem& p) {
    CUDA_CHECK(cudaMalloc(&p.d_Q, p.elems() * sizeof(bf16)));
    CUDA_CHECK(cudaMalloc(&p.d_K, p.elems() * sizeof(bf16)));
    CUDA_CHECK(cudaMalloc(&p.d_V, p.elems() * sizeof(bf16)));
    CUDA_CHECK(cudaMalloc(&p.d_O, p.elems() * sizeof(bf16)));
    fill(p.d_Q, p.elems(), p.seed, kQ);
    fill(p.d_K, p.elems(), p.seed, kK);
    fill(p.d_V, p.elems(), p.seed, kV);
}
static void release(Problem& p) {
    for (bf16* x : {p.d_Q, p.d_K, p.d_V, p.d_O}) CUDA_CHECK(cudaFree(x));
}

// The CPU reference of the given rows (head, query) of O, in double, d values each.
struct Row {
    int64_t head;
    int i;
};
static std::vector<double> reference_rows(const Problem& p, const std::vector<Row>& rows) {
    std::vector<double> ref(rows.size() * p.d);
    const size_t per_head = size_t(p.N) * p.d;
    for (size_t r0 = 0; r0 < rows.size();) {  // one head at a time: regenerate its Q, K, V
        size_t r1 = r0;
        while (r1 < rows.size() && rows[r1].head == rows[r0].head) ++r1;
        const size_t first = size_t(rows[r0].head) * per_head;
        const verify::host_vector<float> Q = host_values(p.seed, kQ, first, per_head),
                                         K = host_values(p.seed, kK, first, per_head),
                                         V = host_values(p.seed, kV, first, per_head);
        verify::parallel_for(int64_t(r1 - r0), [&](int64_t k) {
            const int i = rows[r0 + k].i;
            verify::attention_reference_row(Q.data() + size_t(i) * p.d, K.data(), V.data(), p.causal ? i + 1 : p.N, p.d,
                                            1.0 / std::sqrt(double(p.d)), ref.data() + (r0 + k) * p.d);
        });
        r0 = r1;
    }
    return ref;
}
static std::vector<Row> all_rows(const Problem& p) {
    std::vector<Row> rows;
    for (int64_t h = 0; h < p.heads; ++h)
        for (int i = 0; i < p.N; ++i) rows.push_back({h, i});
    return rows;
}
static std::vector<Row> sample_rows(const Problem& p, int per_head) {  // first and last head, rows spread out
    std::vector<Row> rows;
    for (int64_t h : {int64_t(0), p.heads - 1}) {
        for (int k = 0; k < per_head; ++k) rows.push_back({h, int(int64_t(k) * (p.N - 1) / (per_head - 1))});
        if (p.heads == 1) break;
    }
    return rows;
}
// The same rows of O copied straight from the device, d values each.
static std::vector<float> copy_rows(const Problem& p, const std::vector<Row>& rows) {
    std::vector<float> got;
    for (const Row& r : rows) {
        const verify::host_vector<float> row = copy_out(p.d_O + (size_t(r.head) * p.N + r.i) * p.d, size_t(p.d));
        got.insert(got.end(), row.begin(), row.end());
    }
    return got;
}
static std::vector<float> pick_rows(const verify::host_vector<float>& O, const Problem& p,
                                    const std::vector<Row>& rows) {
    std::vector<float> got(rows.size() * p.d);
    for (size_t k = 0; k < rows.size(); ++k)
        std::copy_n(O.begin() + (size_t(rows[k].head) * p.N + rows[k].i) * p.d, p.d, got.begin() + k * p.d);
    return got;
}

// bf16 P and O: each element carries a rounding of up to 2^-8 relative (bf16's unit roundoff), and the fused rungs round the
// unnormalized probabilities to bf16 before P V. A wrong mask, tile or rescale is off by far more.
// Against the CPU: verify::compare. A fused rung against rung 4 compares two bf16 results, each with
// its own error, and the rows of a causal attention differ in size (row i averages i + 1 values):
// verify::compare_two_approximations allows each element both sides' kTol on its row's scale.
constexpr double kTol = 2e-2;

// One row of the ladder: its name, its kind and the launcher of that kind.
enum class Kind { Softmax, Attention, Decode };
struct Rung {
    const char* name;
    Kind kind;
    void (*softmax)(const Softmax&);
    void (*attention)(const Attention&);
    void (*decode)(const Decode&);
};
constexpr int kStandard = 3;  // index of rung 4

// Which chosen rung runs at which head dimension (main.cu's gate decides).
struct Plan {
    const Rung* rungs;                        // the rung table, kLadder
    std::vector<std::array<bool, 2>> run_at;  // rung i + 1 runs at d = 64 ([0]), d = 128 ([1])
    std::vector<int> ladder;                  // the chosen rungs that run at some d
    bool runs(int i, int d) const { return run_at[size_t(i)][d == 128]; }
    bool fused(int i) const { return rungs[i].kind == Kind::Attention && i != kStandard; }
};

// The GEMM yardstick: cuBLAS at a square n, bf16 A and B, fp32 accumulation (CUBLAS_COMPUTE_32F),
// in its two configurations: fp32 C (out 0) and bf16 C (out 1), which writes half the bytes of C
// and is the faster at some sizes. Attention writes bf16, but the yardstick is a rate, not an
// output: the faster of the two is the one named. Kept for the run, since the graded ratio
// times it again, in turns with the rung (timed.cuh).
struct GemmYardstick {
    int n = 0;
    bf16 *A = nullptr, *B = nullptr, *C16 = nullptr;
    float* C32 = nullptr;
    static constexpr const char* kOut[2] = {"fp32 out", "bf16 out"};
    void run(cublasHandle_t h, int out) const {
        const float one = 1.f, zero = 0.f;
        CUBLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, B, CUDA_R_16BF, n, A, CUDA_R_16BF, n,
                                  &zero, out == 0 ? static_cast<void*>(C32) : static_cast<void*>(C16),
                                  out == 0 ? CUDA_R_32F : CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    }
    double tflops(double ms) const { return 2.0 * double(n) * n * n / (ms * 1e9); }
    static std::string name(int out) { return std::string("cuBLAS BF16 GEMM (") + kOut[out] + ")"; }
};

// What every part of a run uses: the report, the GPU, the plan, the seed and the timing repeats,
// the yardsticks, and the one check every result goes through.
struct Context {
    lesson::Report& report;
    const cudaDeviceProp& prop;
    const Plan& plan;
    uint64_t seed;
    int repeat;
    bool inject;                                   // --inject-fault: corrupts the first result checked
    GemmYardstick gemm;                            // its buffers (null without it)
    double cublas_tflops = NAN;                    // the cuBLAS BF16 GEMM yardstick, the faster output (NAN without it)
    std::string cublas_name = "cuBLAS BF16 GEMM";  // which output that was
    double copy_gbps = NAN;                        // the device-to-device copy yardstick
    std::string no_gemm;                           // why there is no GEMM yardstick ("" when there is one)

    template <class Floats>  // a vector of floats
    void check(Floats& got, const double* ref, const std::string& what) {
        if (inject) verify::inject_fault(got.data(), got.size(), seed);
        inject = false;
        report.check(verify::compare(got.data(), ref, got.size(), kTol, what));
    }
    // A rate is graded against the GEMM yardstick only where there is one.
    std::string not_graded(const std::string& why) const { return no_gemm.empty() ? why : no_gemm; }
};
