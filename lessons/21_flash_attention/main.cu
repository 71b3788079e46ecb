// Lesson 21 of the course (00-23): flash attention, O = softmax(Q K^T / sqrt(d)) V.
// Before: lesson 20 (the tensor-core GEMM ladder). Next: lesson 22.
// Run: ./build/bin/flash_attention [--quick] [--rung=N]   (--help lists every flag; README.md is the handout)
//
// Scaled dot-product attention forward, bf16 Q, K, V, O ([heads][N][d], heads = batch x heads),
// fp32 softmax statistics, d = 64 and 128, optionally causal. The ladder (kernels/N_name.cuh):
//   1-3  a row-wise softmax: three passes; online (max and sum in one pass); one block per row
//        holding the row in registers. GB/s against a device-to-device copy.
//   4    the standard attention (this file): S = Q K^T with cuBLAS strided-batched GEMM, rung 3's
//        softmax, O = P V with cuBLAS. It writes heads x N x N scores to device memory.
//   5    fused, scalar: one block per query tile, the online softmax over K/V tiles (FlashAttention).
//   6    fused on tensor cores: mma.sync + ldmatrix + cp.async, 16 query rows per warp (FA2).
//   7    decode: one query row per head against N keys, split over the keys: memory-bound.
//   8    fused on Hopper (sm_90a): wgmma (P from registers), K/V by TMA through an mbarrier ring.
//   9    rung 8 warp-specialized (a TMA producer warpgroup, setmaxnreg), the softmax overlapped with
//        the next tile's wgmma, and the two consumer warpgroups taking turns (FlashAttention-3).
// Every rung is checked against a double-precision CPU reference at small N (every element,
// causal and not, N a multiple of no tile; the fused rungs also at N = 1000, past their ring depth);
// at the timed sizes the fused rungs are checked element by element against rung 4 (two bf16
// results: each element is allowed both sides' error, on its row's scale) and all of them on
// sampled rows against the CPU. The yardsticks are cuBLAS's BF16 GEMM rate (TFLOP/s) and a
// device-to-device copy (GB/s), measured in this run.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <cublas_v2.h>

#include "common/ceilings.h"
#include "common/check.h"
#include "common/device.h"
#include "common/flags.h"
#include "common/memory.h"
#include "common/needs.h"
#include "common/report.h"
#include "common/timer.h"
#include "verify/attention.h"
#include "verify/compare.h"
#include "verify/gemm_bf16.h"
#include "verify/parallel.h"

#include "kernels/1_softmax_three_pass.cuh"
#include "kernels/2_softmax_online.cuh"
#include "kernels/3_softmax_block.cuh"
#include "kernels/5_fused_scalar.cuh"
#include "kernels/6_fused_mma.cuh"
#include "kernels/7_decode_split.cuh"
#include "kernels/8_fused_wgmma.cuh"
#include "kernels/9_fused_warp_specialized.cuh"

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

// ---------------------------------------------------------------- rung 4: the standard attention
static cublasHandle_t g_cublas;
static bool g_cublas_bf16 = false;  // cuBLAS's bf16 GEMM is used on this GPU (cc 8.0 and up)
static float* g_S = nullptr;        // heads x N x N fp32 scores
static bf16* g_P = nullptr;         // heads x N x N bf16 probabilities

// cuBLAS with bf16 inputs: rung 4 and the GEMM yardstick need it (cc 8.0, bf16 tensor cores).
static lesson::Needs cublas_bf16_needs() {
    lesson::Needs n;
    n.cc = 80;
    n.cc_why = "cuBLAS bf16 GEMM";
    return n;
}

// S = scale * Q K^T for every head in one strided-batched call. cuBLAS is column-major: row-major
// S (N x N) is the column-major S^T = K Q^T, and a row-major N x d matrix is a column-major d x N one,
// so K goes first, transposed (OP_T, lda = d), then Q as it is (ldb = d).
static void scores_gemm(const Attention& a) {
    const float zero = 0.f;
    const long long nd = (long long)a.N * a.d, nn = (long long)a.N * a.N;
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(g_cublas, CUBLAS_OP_T, CUBLAS_OP_N, a.N, a.N, a.d, &a.scale, a.K,
                                            CUDA_R_16BF, a.d, nd, a.Q, CUDA_R_16BF, a.d, nd, &zero, g_S, CUDA_R_32F,
                                            a.N, nn, int(a.heads), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}
// The same S without cuBLAS, one thread per score in fp32: the softmax rungs' input where cuBLAS's
// bf16 GEMM is not used (cc below 8.0, where rung 4 is skipped). Simple and slow; never timed.
__global__ void scoresDirect(Attention a, float* S) {
    const size_t n = size_t(a.N), total = size_t(a.heads) * n * n;
    for (size_t x = size_t(blockIdx.x) * blockDim.x + threadIdx.x; x < total; x += size_t(gridDim.x) * blockDim.x) {
        const size_t h = x / (n * n), i = x / n % n, j = x % n;  // S[h][i][j] = scale * Q[h][i] . K[h][j]
        const bf16 *q = a.Q + (h * n + i) * a.d, *k = a.K + (h * n + j) * a.d;
        float dot = 0.f;
        for (int c = 0; c < a.d; ++c) dot += __bfloat162float(q[c]) * __bfloat162float(k[c]);
        S[x] = dot * a.scale;
    }
}
static void scores(const Attention& a) {
    if (g_cublas_bf16) {
        scores_gemm(a);
    } else {
        scoresDirect<<<1024, 256>>>(a, g_S);
        CUDA_CHECK_LAUNCH();
    }
}
static void standard_attention(const Attention& a) {
    scores_gemm(a);
    rung3::launch(Softmax{g_S, g_P, a.heads * a.N, a.N, a.causal});
    // O = P V: column-major O^T (d x N) = V^T (d x N, ld d) * P^T (N x N, ld N); bf16 out, fp32 accumulate.
    const float one = 1.f, zero = 0.f;
    const long long nd = (long long)a.N * a.d, nn = (long long)a.N * a.N;
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(g_cublas, CUBLAS_OP_N, CUBLAS_OP_N, a.d, a.N, a.N, &one, a.V, CUDA_R_16BF,
                                            a.d, nd, g_P, CUDA_R_16BF, a.N, nn, &zero, a.O, CUDA_R_16BF, a.d, nd,
                                            int(a.heads), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

// ---------------------------------------------------------------- the ladder
// Rung 6's cp.async ring depth at d = 64 ([0]) and d = 128 ([1]): the deepest that fits this GPU.
static int g_mma_stages[2] = {rung6::kStages, rung6::kStages};
static void fused_mma(const Attention& a) { rung6::launch(a, g_mma_stages[a.d == 128]); }

enum class Kind { Softmax, Attention, Decode };
struct Rung {
    const char* name;
    Kind kind;
    void (*softmax)(const Softmax&);
    void (*attention)(const Attention&);
    void (*decode)(const Decode&);
};
static const Rung kLadder[] = {
    {"1 softmax, 3 passes, warp/row", Kind::Softmax, rung1::launch, nullptr, nullptr},
    {"2 softmax, online, warp/row", Kind::Softmax, rung2::launch, nullptr, nullptr},
    {"3 softmax, online, block/row in regs", Kind::Softmax, rung3::launch, nullptr, nullptr},
    {"4 standard: cuBLAS+softmax+cuBLAS", Kind::Attention, nullptr, standard_attention, nullptr},
    {"5 fused, scalar, online softmax", Kind::Attention, nullptr, rung5::launch, nullptr},
    {"6 fused, mma.sync (FA2 split)", Kind::Attention, nullptr, fused_mma, nullptr},
    {"7 decode, split-K", Kind::Decode, nullptr, nullptr, rung7::launch},
    {"8 fused, wgmma + TMA", Kind::Attention, nullptr, rung8::launch, nullptr},
    {"9 fused, wgmma, warp-specialized", Kind::Attention, nullptr, rung9::launch, nullptr},
};
constexpr int kRungs = int(std::size(kLadder));
constexpr int kStandard = 3;  // index of rung 4

// What rung i + 1 needs from the GPU at head dimension d; common/needs.h decides run or skip.
// Rungs 1-3 and 7 are plain CUDA with static shared memory (the softmax rungs take their S from
// cuBLAS or, below cc 8.0, from scoresDirect): they run on every GPU.
static lesson::Needs rung_needs(int i, int d) {
    lesson::Needs n;
    const bool d128 = d == 128;
    switch (i + 1) {
        case 4: n = cublas_bf16_needs(); break;
        case 5: n.smem = size_t(d128 ? rung5::smem_bytes<128>() : rung5::smem_bytes<64>()); break;
        case 6:  // kernels written for sm_80 (a trap in an older image); the ring depth picked for this GPU
            n.cc = 80;
            n.cc_why = "bf16 mma.sync, cp.async";
            n.image = 800;
            n.smem = size_t(rung6::smem_bytes(d, g_mma_stages[d128]));
            break;
        case 8:  // wgmma and TMA: the sm_90a image on a Hopper GPU
            n.sm90a = true;
            n.smem = size_t(d128 ? rung8::smem_bytes<128>() : rung8::smem_bytes<64>());
            break;
        case 9:
            n.sm90a = true;
            n.smem = size_t(d128 ? rung9::smem_bytes<128>() : rung9::smem_bytes<64>());
            break;
        default: break;
    }
    return n;
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

// bf16 P and O: each element carries a rounding of 2^-9 relative, and the fused rungs round the
// unnormalized probabilities to bf16 before P V. A wrong mask, tile or rescale is off by far more.
// Against the CPU: verify::compare. A fused rung against rung 4 compares two bf16 results, each with
// its own error, and the rows of a causal attention differ in size (row i averages i + 1 values):
// verify::compare_two_approximations allows each element both sides' kTol on its row's scale.
constexpr double kTol = 2e-2;

int main(int argc, char** argv) {
    // Flags first: bad input exits 2 before any CUDA call.
    lesson::CommonOptions opt;
    int64_t batch = 2, heads = 8, d_flag = 0, rung = 0, decode_n = 65536, decode_batch = 8, decode_heads = 32;
    int64_t long_n = 131072, long_heads = 4;
    bool causal = false;
    std::string n_list = "2048,8192";
    lesson::Cli cli(
        "flash_attention",
        "attention forward O = softmax(Q K^T / sqrt(d)) V in bf16: a softmax ladder, the standard "
        "cuBLAS attention, fused kernels (scalar, mma.sync FlashAttention-2, wgmma on Hopper) and split-K decode.");
    lesson::add_common_flags(cli, opt);
    cli.add_int("batch", &batch, 1, 4096, "batch of the timed attention (heads x batch independent problems)", 1);
    cli.add_int("heads", &heads, 1, 4096, "heads of the timed attention", 2);
    cli.add_string("n", &n_list, "comma-separated sequence lengths to time (default 2048,8192; --quick 256)");
    cli.add_int("d", &d_flag, 0, 128, "head dimension: 64 or 128 (0: both)");
    cli.add_switch("causal", &causal, "time the causal (lower-triangular) attention (the checks do both)");
    cli.add_int("rung", &rung, 0, kRungs, "run and check this rung alone (0: every rung)");
    cli.add_int("decode-n", &decode_n, 1, 1 << 22, "keys of the decode rung (--quick 4096)", 1000);
    cli.add_int("decode-batch", &decode_batch, 1, 4096, "batch of the decode rung", 2);
    cli.add_int("decode-heads", &decode_heads, 1, 4096, "heads of the decode rung", 2);
    cli.add_int("long", &long_n, 0, 1 << 20,
                "sequence length of the long run, where rung 4 cannot allocate (0: none; --quick 0)", 0);
    cli.add_int("long-heads", &long_heads, 1, 4096, "batch x heads of the long run", 1);
    cli.parse_or_exit(argc, argv);
    if (opt.quick) {  // small enough for compute-sanitizer: N = 256 x 2 heads, a short decode, no long run
        if (!cli.given("n")) n_list = "256";
        if (!cli.given("batch")) batch = 1;
        if (!cli.given("heads")) heads = 2;
        if (!cli.given("decode-n")) decode_n = 4096;
        if (!cli.given("decode-batch")) decode_batch = 2;
        if (!cli.given("decode-heads")) decode_heads = 8;
        if (!cli.given("long")) long_n = 0;
    }
    if (d_flag != 0 && d_flag != 64 && d_flag != 128)
        lesson::bad_input("--d=" + std::to_string(d_flag) + ": allowed 0, 64, 128");
    std::vector<int> ns;
    {
        std::stringstream in(n_list);
        for (std::string item; std::getline(in, item, ',');) {
            char* end = nullptr;
            const long v = std::strtol(item.c_str(), &end, 10);
            if (item.empty() || *end != '\0' || v < 1 || v > (1 << 20))
                lesson::bad_input("--n=" + n_list + ": each length an integer in [1, 1048576]");
            ns.push_back(int(v));
        }
        if (ns.empty()) lesson::bad_input("--n=" + n_list + ": give at least one length");
    }
    const int64_t bh = batch * heads, dbh = decode_batch * decode_heads;
    if (bh > 65535 || dbh > 65535 || long_heads > 65535)
        lesson::bad_input("--batch x --heads (and --decode-batch x --decode-heads, --long-heads) must be <= 65535");
    const std::vector<int> ds = d_flag == 0 ? std::vector<int>{64, 128} : std::vector<int>{int(d_flag)};
    const auto chosen = [&](int i) { return rung == 0 || rung == i + 1; };
    uint64_t dev_bytes = 0;  // Q, K, V, O of the largest timed problem, and the decode cache
    for (int n : ns) dev_bytes = std::max<uint64_t>(dev_bytes, 4ull * bh * n * 128 * 2);
    dev_bytes = std::max<uint64_t>(dev_bytes, 2ull * dbh * decode_n * 128 * 2);
    dev_bytes = std::max<uint64_t>(dev_bytes, 4ull * long_heads * long_n * 128 * 2);
    const std::string what = "--batch/--heads/--n/--decode-*/--long";
    lesson::require_host_memory(3ull * long_n * 128 * 4 + 16ull * bh * 8192 * 128, "pageable", what);
    cudaDeviceProp prop = lesson::pick_device(opt.device);
    lesson::require_device_memory(dev_bytes, what);

    lesson::Report report("21_flash_attention");
    report.device(prop.name, prop.major, prop.minor, prop.multiProcessorCount, prop.totalGlobalMem / 1e9);
    report.config("batch_x_heads", bh);
    report.config("n", n_list);
    report.config("d", d_flag == 0 ? std::string("64,128") : std::to_string(d_flag));
    report.config("causal_timed", std::string(causal ? "yes" : "no"));
    report.config("decode", std::to_string(decode_batch) + "x" + std::to_string(decode_heads) +
                                " heads, N=" + std::to_string(decode_n));
    report.config("rung", rung);
    report.config("repeat", opt.repeat);
    report.config("seed", opt.seed);
    report.config("tolerance_rel_l2", kTol);

    // Which chosen rung runs at which d: the gate compares each rung's needs (rung_needs) with this
    // GPU's limits, or those of the class LESSON_GPU_LIMITS names, and with the image the driver
    // loaded; it prints one line per skip (one per rung when both d skip for the same reason).
    const lesson::GpuLimits& gpu = lesson::gpu_limits();
    for (int d : ds) g_mma_stages[d == 128] = rung6::stages_that_fit(d, gpu.smem_optin);
    lesson::Gate gate(report);
    bool run_at[kRungs][2] = {};  // rung i + 1 runs at d = 64 ([0]), d = 128 ([1])
    const auto runs = [&](int i, int d) { return run_at[i][d == 128]; };
    std::vector<int> ladder;  // the chosen rungs that run at some d
    for (int i = 0; i < kRungs; ++i) {
        if (!chosen(i)) continue;
        std::vector<std::string> why;
        for (int d : ds) why.push_back(lesson::why_not(rung_needs(i, d), gpu));
        const bool one_line = std::all_of(why.begin(), why.end(), [&](const std::string& w) { return w == why[0]; });
        for (size_t k = 0; k < ds.size(); ++k) {
            const std::string what =
                "rung " + std::to_string(i + 1) + (one_line ? "" : " at d=" + std::to_string(ds[k]));
            run_at[i][ds[k] == 128] =
                one_line && k > 0 ? run_at[i][ds[0] == 128] : gate.run(what, rung_needs(i, ds[k]));
        }
        if (run_at[i][0] || run_at[i][1]) ladder.push_back(i);
    }
    if (gate.none_ran()) return report.skip(gate.reason(), opt.json);
    for (int d : ds)  // a smaller configuration instead of a skip: say so
        if (runs(5, d) && g_mma_stages[d == 128] != rung6::kStages) {
            const std::string line =
                "rung 6 at d=" + std::to_string(d) + ": " + std::to_string(g_mma_stages[d == 128]) + " stages (" +
                std::to_string(rung6::smem_bytes(d, g_mma_stages[d == 128])) + " B), " +
                (gpu.emulated ? std::string("this GPU class (") + gpu.emulated->name + ") gives " : "this GPU gives ") +
                std::to_string(gpu.smem_optin) + " B per block, not the " + std::to_string(rung6::kStages) +
                " stages' " + std::to_string(rung6::smem_bytes(d, rung6::kStages));
            std::printf("%s\n", line.c_str());
            report.note(line);
        }
    CUBLAS_CHECK(cublasCreate(&g_cublas));
    const uint64_t seed = uint64_t(opt.seed);
    bool inject = opt.inject_fault;  // corrupts the first result checked
    const auto check = [&](auto& got, const double* ref, const std::string& what) {  // got: a vector of floats
        if (inject) verify::inject_fault(got.data(), got.size(), seed);
        inject = false;
        report.check(verify::compare(got.data(), ref, got.size(), kTol, what));
    };

    // Yardsticks: cuBLAS BF16 GEMM (bf16 in, fp32 accumulate and out) at a square size, and a copy.
    // They are not rungs (their own gate: they never make the run a SKIP); without the GEMM the
    // TFLOP/s of the attention rungs are printed ungraded.
    lesson::Gate yardstick_gate(report);
    g_cublas_bf16 = yardstick_gate.run("the cuBLAS BF16 GEMM yardstick", cublas_bf16_needs());
    const std::string no_gemm = g_cublas_bf16 ? "" : "no cuBLAS BF16 GEMM yardstick below cc 8.0";
    const auto not_graded = [&](const std::string& why) { return no_gemm.empty() ? why : no_gemm; };
    const int gemm_n =
        opt.quick
            ? 512
            : 8192;  // quick: 512, where cuBLAS picks a kernel racecheck passes (1024: 6 hazards reported inside cuBLAS)
    double cublas_tflops = NAN;
    if (g_cublas_bf16) {
        bf16 *d_A = nullptr, *d_B = nullptr;
        float* d_C = nullptr;
        const size_t nn = size_t(gemm_n) * gemm_n;
        CUDA_CHECK(cudaMalloc(&d_A, nn * sizeof(bf16)));
        CUDA_CHECK(cudaMalloc(&d_B, nn * sizeof(bf16)));
        CUDA_CHECK(cudaMalloc(&d_C, nn * sizeof(float)));
        fill(d_A, nn, seed + 7, kK);
        fill(d_B, nn, seed + 8, kV);
        const float one = 1.f, zero = 0.f;
        const double ms = lesson::time_median_ms(int(opt.repeat), [&] {
            CUBLAS_CHECK(cublasGemmEx(g_cublas, CUBLAS_OP_N, CUBLAS_OP_N, gemm_n, gemm_n, gemm_n, &one, d_B,
                                      CUDA_R_16BF, gemm_n, d_A, CUDA_R_16BF, gemm_n, &zero, d_C, CUDA_R_32F, gemm_n,
                                      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        });
        cublas_tflops = 2.0 * double(gemm_n) * gemm_n * gemm_n / (ms * 1e9);
        for (void* x : {(void*)d_A, (void*)d_B, (void*)d_C}) CUDA_CHECK(cudaFree(x));
    }
    const std::string gemm_text = std::to_string(gemm_n) + "^3";
    if (g_cublas_bf16) report.yardstick("cuBLAS GemmEx bf16 -> fp32, " + gemm_text, cublas_tflops, "TFLOP/s");
    const double copy_gbps = lesson::measure_d2d_gbps(prop, int(opt.repeat));
    report.yardstick("device-to-device cudaMemcpy (read + write)", copy_gbps, "GB/s");
    report.timing(lesson::kTimingMethod);

    // ------------------------------------------------------------ Part 1: small N against the CPU
    // Every element, causal and not: every rung at N = 256 and N = 200 (a multiple of no tile), 3 heads;
    // the fused rungs (5, 6, 8, 9) at N = 1000, 1 head: 8 key tiles of 128 (the last one partial), more
    // than rungs 8 and 9 have stages (2 to 4), and 16 of 64 for rung 6's 2 or 3, so every ring is
    // refilled and its barriers change phase, here and under compute-sanitizer (--quick). Rung 4 and
    // the softmax rungs have no such ring (and cuBLAS picks other kernels at other sizes: the
    // handout's note on racecheck).
    for (int d : ds)
        for (bool cz : {false, true})
            for (int N : {256, 200, 1000}) {
                const bool fused_only = N == 1000;
                const auto fused = [&](int i) { return kLadder[i].kind == Kind::Attention && i != kStandard; };
                if (fused_only &&
                    std::none_of(ladder.begin(), ladder.end(), [&](int i) { return runs(i, d) && fused(i); }))
                    continue;  // no fused rung runs at this d: no problem to set up
                Problem p{fused_only ? 1 : 3, N, d, cz, seed + 17 * N + d + cz};
                setup(p);
                const std::vector<double> ref = reference_rows(p, all_rows(p));
                const std::string tag = "N=" + std::to_string(N) + ", d=" + std::to_string(d) + (cz ? ", causal" : "");
                const size_t nn = size_t(p.heads) * N * N;
                if (!fused_only) {
                    CUDA_CHECK(cudaMalloc(&g_S, nn * sizeof(float)));
                    CUDA_CHECK(cudaMalloc(&g_P, nn * sizeof(bf16)));
                    // Poison S (0xFF bytes are NaN): a score cuBLAS left unwritten would show. It also gives
                    // compute-sanitizer initcheck a defined start: it reported the scores cuBLAS wrote as
                    // uninitialized when they were copied back (their values match the CPU's).
                    CUDA_CHECK(cudaMemset(g_S, 0xFF, nn * sizeof(float)));
                }
                for (int i : ladder) {
                    const Rung& r = kLadder[i];
                    if (!runs(i, d) || (fused_only && !fused(i))) continue;
                    if (r.kind == Kind::Softmax) {  // softmax of the GPU's S, against the CPU's softmax of the same S
                        scores(p.args());
                        std::vector<float> h_S(nn);
                        CUDA_CHECK(cudaMemcpy(h_S.data(), g_S, nn * sizeof(float), cudaMemcpyDeviceToHost));
                        std::vector<double> ref_P(nn);
                        for (size_t row = 0; row < size_t(p.heads) * N; ++row)
                            verify::softmax_reference_row(h_S.data() + row * N, N, cz ? int64_t(row % N) + 1 : N,
                                                          ref_P.data() + row * N);
                        CUDA_CHECK(cudaMemset(g_P, 0xFF, nn * sizeof(bf16)));
                        r.softmax(Softmax{g_S, g_P, p.heads * N, N, cz});
                        verify::host_vector<float> got = copy_out(g_P, nn);
                        check(got, ref_P.data(), std::string(r.name) + " vs CPU, every element, " + tag);
                    } else if (r.kind == Kind::Attention) {
                        CUDA_CHECK(cudaMemset(p.d_O, 0xFF, p.elems() * sizeof(bf16)));  // 0xFFFF is a bf16 NaN
                        r.attention(p.args());
                        verify::host_vector<float> got = copy_out(p.d_O, p.elems());
                        check(got, ref.data(), std::string(r.name) + " vs CPU, every element, " + tag);
                    }
                }
                if (!fused_only) {
                    CUDA_CHECK(cudaFree(g_S));
                    CUDA_CHECK(cudaFree(g_P));
                }
                release(p);
            }

    // ------------------------------------------------------------ Part 2: the timed sizes
    std::string key;
    double key_fraction = NAN;
    std::string key_small = "N=8192, d=128 not timed";
    for (int d : ds)
        for (int N : ns) {
            Problem p{bh, N, d, causal, seed + 1000 + N + d};
            setup(p);
            const Attention a = p.args();
            const std::string tag = "N=" + std::to_string(N) + ", d=" + std::to_string(d) + (causal ? ", causal" : "");
            const double flop = 4.0 * double(N) * N * d * bh * (causal ? 0.5 : 1.0);
            const double io_bytes = 4.0 * double(p.elems()) * sizeof(bf16);  // Q, K, V read once, O written once
            const auto tflops = [&](double ms) { return flop / (ms * 1e9); };
            const double tiles = double(bh) * ((N + 127) / 128);
            const std::string small = tiles < 2.0 * prop.multiProcessorCount ? "too small to fill the GPU" : "";
            const std::vector<Row> rows = sample_rows(p, 16);
            const std::vector<double> ref = reference_rows(p, rows);
            const size_t nn = size_t(bh) * N * N;
            const double score_bytes = double(nn) * (sizeof(float) + sizeof(bf16));
            size_t free_b = 0, total_b = 0;
            CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
            const bool standard_fits = score_bytes < 0.8 * double(free_b);
            report.metric("rung 4 scores S (fp32) + P (bf16), " + tag, score_bytes / 1e9, "GB");
            report.metric("Q, K, V, O (all rungs), " + tag, io_bytes / 1e9, "GB");
            verify::host_vector<float> h_std;  // rung 4's O: the reference of the fused rungs, every element
            double std_ms = NAN, best_fused = 0, mma_ms = NAN;
            bool wgmma_timed = false;  // rung 8 or 9 ran: the target below is theirs
            if (standard_fits) {
                CUDA_CHECK(cudaMalloc(&g_S, nn * sizeof(float)));
                CUDA_CHECK(cudaMalloc(&g_P, nn * sizeof(bf16)));
                CUDA_CHECK(cudaMemset(g_S, 0xFF, nn * sizeof(float)));  // poisoned, as in part 1
                const bool softmax_here = std::any_of(ladder.begin(), ladder.end(), [&](int i) {
                    return kLadder[i].kind == Kind::Softmax && runs(i, d);
                });
                if (softmax_here) scores(a);  // the softmax rungs' S, once (rung 4 writes the same S again)
            } else {
                report.note("rung 4 and the softmax rungs skipped at " + tag + ": the scores need " +
                            lesson::gb_text(score_bytes) + ", the GPU has " + lesson::gb_text(double(free_b)) +
                            " free");
            }
            for (int i : ladder) {
                const Rung& r = kLadder[i];
                const std::string name = std::string(r.name) + " @" + tag;
                if (!runs(i, d) || r.kind == Kind::Decode ||
                    (!standard_fits && (r.kind == Kind::Softmax || i == kStandard)))
                    continue;
                if (r.kind == Kind::Softmax) {  // on S = scale Q K^T, written above
                    std::vector<float> got;
                    std::vector<double> ref_P;
                    CUDA_CHECK(cudaMemset(g_P, 0xFF, nn * sizeof(bf16)));
                    r.softmax(Softmax{g_S, g_P, bh * N, N, causal});
                    CUDA_CHECK(cudaDeviceSynchronize());
                    std::vector<float> h_row(N);
                    std::vector<double> ref_row(N);
                    for (const Row& w : rows) {  // the sampled rows of S and P
                        const size_t off = (size_t(w.head) * N + w.i) * N;
                        CUDA_CHECK(cudaMemcpy(h_row.data(), g_S + off, N * sizeof(float), cudaMemcpyDeviceToHost));
                        verify::softmax_reference_row(h_row.data(), N, causal ? w.i + 1 : N, ref_row.data());
                        ref_P.insert(ref_P.end(), ref_row.begin(), ref_row.end());
                        const verify::host_vector<float> pr = copy_out(g_P + off, N);
                        got.insert(got.end(), pr.begin(), pr.end());
                    }
                    check(got, ref_P.data(),
                          std::string(r.name) + " vs CPU, " + std::to_string(rows.size()) + " sampled rows, " + tag);
                    const double ms = lesson::time_median_ms(int(opt.repeat), [&] {
                        r.softmax(Softmax{g_S, g_P, bh * N, N, causal});
                    });
                    const double bytes = double(bh) * N * N * sizeof(bf16) +
                                         double(bh) * (causal ? 0.5 * N * (N + 1.0) : double(N) * N) * sizeof(float);
                    report.variant_yardstick(name, ms, bytes / (ms * 1e6), "GB/s", copy_gbps, "copy",
                                             lesson::l2_note(bytes, prop));
                    continue;
                }
                CUDA_CHECK(cudaMemset(p.d_O, 0xFF, p.elems() * sizeof(bf16)));
                r.attention(a);
                verify::host_vector<float> got = copy_out(p.d_O, p.elems());
                std::vector<float> sampled = pick_rows(got, p, rows);
                check(sampled, ref.data(),
                      std::string(r.name) + " vs CPU, " + std::to_string(rows.size()) + " sampled rows, " + tag);
                if (i == kStandard) h_std = std::move(got);  // not read again here
                else if (!h_std.empty())  // two bf16 results, each allowed its error: verify/compare.h
                    report.check(verify::compare_two_approximations(
                        got.data(), h_std.data(), got.size(), size_t(d), kTol,
                        std::string(r.name) + " vs rung 4, every element (two-sided), " + tag));
                const int reps =
                    i == 4 ? std::min<int>(int(opt.repeat), 3) : int(opt.repeat);  // the scalar rung is slow
                const double ms = lesson::time_median_ms(reps, [&] { r.attention(a); });
                report.variant_yardstick(name, ms, tflops(ms), "TFLOP/s", cublas_tflops, "cuBLAS GEMM",
                                         not_graded(small));
                report.work(name, flop, io_bytes, ms);
                if (i == kStandard) std_ms = ms;
                else best_fused = std::max(best_fused, tflops(ms));
                if (i == 5) mma_ms = ms;
                if (i >= 7) wgmma_timed = true;
            }
            // Targets only for what ran: rung 6 against rung 4; the best fused rung against the GEMM
            // where the wgmma rungs ran (mma.sync alone is not meant to reach it, README "Results").
            if (N >= 2048 && std::isfinite(std_ms) && std::isfinite(mma_ms))
                report.target("rung 6 vs rung 4 (standard), " + tag, std_ms / mma_ms, 1.0, "x");
            if (N == 8192 && d == 128 && !causal && best_fused > 0) {
                if (wgmma_timed && g_cublas_bf16)
                    report.target("best fused rung vs cuBLAS BF16 GEMM, " + tag, best_fused / cublas_tflops, 0.5, "x");
                key = "best fused rung " + std::to_string(int(best_fused + 0.5)) + " TFLOP/s at " + tag;
                key_fraction = best_fused / cublas_tflops;
                key_small = not_graded(small);
            } else if (key.empty() && best_fused > 0 && N == ns.back() && d == ds.back()) {
                key = "best fused rung " + std::to_string(int(best_fused + 0.5)) + " TFLOP/s at " + tag;
                key_fraction = best_fused / cublas_tflops;
                key_small = not_graded(small.empty() ? "not the graded size (N=8192, d=128, non-causal)" : small);
            }
            if (standard_fits) {
                CUDA_CHECK(cudaFree(g_S));
                CUDA_CHECK(cudaFree(g_P));
            }
            release(p);
        }

    // ------------------------------------------------------------ Part 3: a sequence rung 4 cannot hold
    if (long_n > 0 && runs(5, ds.back())) {
        Problem p{long_heads, int(long_n), ds.back(), causal, seed + 5000};
        const std::string tag = "N=" + std::to_string(long_n) + ", d=" + std::to_string(p.d) + ", " +
                                std::to_string(long_heads) + " heads" + (causal ? ", causal" : "");
        const double score_bytes = double(long_heads) * long_n * long_n * (sizeof(float) + sizeof(bf16));
        size_t free_b = 0, total_b = 0;
        CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
        float* d_S = nullptr;  // rung 4 would need this first
        const cudaError_t e = cudaMalloc(&d_S, size_t(long_heads) * long_n * long_n * sizeof(float));
        if (e == cudaSuccess) {
            CUDA_CHECK(cudaFree(d_S));
            report.note("long run " + tag + ": cudaMalloc of rung 4's S succeeded on this GPU");
        } else {
            (void)cudaGetLastError();  // an allocation failure is not sticky: clear it and go on
            report.note("long run " + tag + ": rung 4 would need " + lesson::gb_text(score_bytes) +
                        " for S and P; cudaMalloc of S alone failed (" + cudaGetErrorString(e) + "), the GPU has " +
                        lesson::gb_text(double(free_b)) + " free of " + lesson::gb_text(double(total_b)));
        }
        setup(p);
        report.metric("long run: Q, K, V, O (rung 6's whole footprint), " + tag, 4.0 * p.elems() * 2 / 1e9, "GB");
        report.metric("long run: rung 4's S + P would be, " + tag, score_bytes / 1e9, "GB");
        const std::vector<Row> rows = sample_rows(p, 8);
        const std::vector<double> ref = reference_rows(p, rows);
        CUDA_CHECK(cudaMemset(p.d_O, 0xFF, p.elems() * sizeof(bf16)));
        kLadder[5].attention(p.args());
        std::vector<float> got = copy_rows(p, rows);  // the sampled rows only: O is 4 x 2^17 x 128 values
        check(got, ref.data(),
              std::string(kLadder[5].name) + " vs CPU, " + std::to_string(rows.size()) + " sampled rows, long run " +
                  tag);
        const double ms =
            lesson::time_median_ms(std::min<int>(int(opt.repeat), 3), [&] { kLadder[5].attention(p.args()); });
        const double flop = 4.0 * double(long_n) * long_n * p.d * long_heads * (causal ? 0.5 : 1.0);
        const std::string name = std::string(kLadder[5].name) + " @" + tag;
        report.variant_yardstick(name, ms, flop / (ms * 1e9), "TFLOP/s", cublas_tflops, "cuBLAS GEMM", not_graded(""));
        report.work(name, flop, 4.0 * p.elems() * 2, ms);
        release(p);
    }

    // ------------------------------------------------------------ Part 4: decode
    if (chosen(6)) {
        const std::vector<int> decode_ns = {257, int(decode_n)};  // a small exact check, then the timed size
        for (int d : ds)
            for (int N : decode_ns) {
                if (!runs(6, d)) continue;
                const bool timed = N == int(decode_n);
                Decode a{};
                a.heads = timed ? dbh : 5;
                a.N = N;
                a.d = d;
                a.scale = float(1.0 / std::sqrt(double(d)));
                // Enough blocks to fill the GPU (about 8 per SM), pieces of at least 256 keys.
                // Exercise 3 of the handout: force a.splits = 1 and time --rung=7 --decode-batch=1 --decode-heads=8
                const int64_t want = (8ll * prop.multiProcessorCount + a.heads - 1) / a.heads;
                a.splits = int(std::max<int64_t>(1, std::min<int64_t>(want, (N + 255) / 256)));
                a.keys_per_split = (N + a.splits - 1) / a.splits;
                a.splits = (N + a.keys_per_split - 1) / a.keys_per_split;
                const size_t kv = size_t(a.heads) * N * d;
                const uint64_t s = seed + 9000 + N + d;
                bf16 *d_q = nullptr, *d_K = nullptr, *d_V = nullptr, *d_o = nullptr;
                float* d_part = nullptr;
                CUDA_CHECK(cudaMalloc(&d_q, a.heads * d * sizeof(bf16)));
                CUDA_CHECK(cudaMalloc(&d_K, kv * sizeof(bf16)));
                CUDA_CHECK(cudaMalloc(&d_V, kv * sizeof(bf16)));
                CUDA_CHECK(cudaMalloc(&d_o, a.heads * d * sizeof(bf16)));
                CUDA_CHECK(cudaMalloc(&d_part, size_t(a.heads) * a.splits * (d + 2) * sizeof(float)));
                fill(d_q, a.heads * d, s, kQ);
                fill(d_K, kv, s, kK);
                fill(d_V, kv, s, kV);
                a.q = d_q;
                a.K = d_K;
                a.V = d_V;
                a.o = d_o;
                a.partial = d_part;
                CUDA_CHECK(cudaMemset(d_o, 0xFF, a.heads * d * sizeof(bf16)));
                rung7::launch(a);
                const verify::host_vector<float> all = copy_out(d_o, a.heads * d);
                std::vector<int64_t> heads_checked;  // every head when small, else 8 spread out
                const int64_t hc = std::min<int64_t>(a.heads, 8);
                for (int64_t k = 0; k < hc; ++k) heads_checked.push_back(hc == 1 ? 0 : k * (a.heads - 1) / (hc - 1));
                std::vector<double> ref(heads_checked.size() * d);
                std::vector<float> got;
                for (int64_t h : heads_checked) got.insert(got.end(), all.begin() + h * d, all.begin() + (h + 1) * d);
                // One checked head per host thread: each regenerates its q, K, V and computes its row.
                verify::parallel_for(int64_t(heads_checked.size()), [&](int64_t k) {
                    const int64_t h = heads_checked[size_t(k)];
                    const verify::host_vector<float> q = host_values(s, kQ, size_t(h) * d, d),
                                                     K = host_values(s, kK, size_t(h) * N * d, size_t(N) * d),
                                                     V = host_values(s, kV, size_t(h) * N * d, size_t(N) * d);
                    verify::attention_reference_row(q.data(), K.data(), V.data(), N, d, a.scale, ref.data() + k * d);
                });
                const std::string tag = "N=" + std::to_string(N) + ", d=" + std::to_string(d) + ", " +
                                        std::to_string(a.heads) + " heads, " + std::to_string(a.splits) + " splits";
                check(got, ref.data(),
                      std::string(kLadder[6].name) + " vs CPU, " + std::to_string(heads_checked.size()) + " heads, " +
                          tag);
                if (timed) {
                    const double ms = lesson::time_median_ms(int(opt.repeat), [&] { rung7::launch(a); });
                    const double bytes = 2.0 * kv * sizeof(bf16) + 2.0 * a.heads * d * sizeof(bf16);  // K, V, q, o
                    const std::string name = std::string(kLadder[6].name) + " @" + tag;
                    const std::string in_l2 = lesson::l2_note(bytes, prop);
                    report.variant_yardstick(name, ms, bytes / (ms * 1e6), "GB/s", copy_gbps, "copy", in_l2);
                    report.work(name, 4.0 * N * d * a.heads, bytes, ms);
                    if (N == 65536) report.target("decode vs copy, " + tag, bytes / (ms * 1e6) / copy_gbps, 0.85, "x");
                }
                for (void* x : {(void*)d_q, (void*)d_K, (void*)d_V, (void*)d_o, (void*)d_part}) CUDA_CHECK(cudaFree(x));
            }
    }

    report.note("inputs: Q uniform on multiples of 4/128 in [-4, 4), K and V of 1/128 in [-1, 1): exact in bf16");
    report.note("TFLOP/s count 4 N^2 d per head (half when causal) for every attention rung; " +
                (g_cublas_bf16 ? "the yardstick is cuBLAS GemmEx (bf16 in, fp32 accumulate and out) at " + gemm_text +
                                     " in this run"
                               : no_gemm));
    if (key.empty())
        report.key_result("no fused rung was timed", NAN, "cuBLAS BF16 GEMM", lesson::Against::Yardstick, "not timed");
    else report.key_result(key, key_fraction, "cuBLAS BF16 GEMM", lesson::Against::Yardstick, key_small);
    report.default_size(cli.at_default_size());
    CUBLAS_CHECK(cublasDestroy(g_cublas));
    return report.finish(opt.json);
}
