// Lesson 21 of the course (00-24): flash attention, O = softmax(Q K^T / sqrt(d)) V.
// Before: lesson 20 (the tensor-core GEMM ladder). Next: lesson 22.
// Run: ./build/bin/flash_attention [--quick] [--rung=N[,N]]   (--help lists every flag; README.md is the handout)
//
// Scaled dot-product attention forward, bf16 Q, K, V, O ([heads][N][d], heads = batch x heads),
// fp32 softmax statistics, d = 64 and 128, optionally causal. The ladder (kernels/N_name.cuh):
//   1-3  a row-wise softmax: three passes; online (max and sum in one pass); one block per row
//        holding the row in registers. GB/s against a device-to-device copy.
//   4    the standard attention: S = Q K^T with cuBLAS strided-batched GEMM, rung 3's
//        softmax, O = P V with cuBLAS. It writes heads x N x N scores to device memory.
//   5    fused, scalar: one block per query tile, the online softmax over K/V tiles (FlashAttention).
//   6    fused on tensor cores: mma.sync + ldmatrix + cp.async, 16 query rows per warp (FA2).
//   7    decode: one query row per head against N keys, split over the keys: memory-bound.
//   8    fused on Hopper (sm_90a): wgmma (P from registers), K/V by TMA through an mbarrier ring.
//   9    rung 8 warp-specialized (a TMA producer warpgroup, setmaxnreg), the softmax overlapped with
//        the next tile's wgmma, and the consumer warpgroups taking turns (FlashAttention-3; three
//        of them at d = 64).
// Every rung is checked against a double-precision CPU reference at small N (every element,
// causal and not, N a multiple of no tile; the fused rungs also at N = 1000, past their ring depth);
// at the timed sizes the fused rungs are checked element by element against rung 4 (two bf16
// results: each element is allowed both sides' error, on its row's scale) and all of them on
// sampled rows against the CPU. The yardsticks are cuBLAS's BF16 GEMM rate (TFLOP/s; fp32 C and
// bf16 C, the faster named) and a device-to-device copy (GB/s), measured in this run. This file:
// flags, the rung table, which rung runs where, then the parts in order: checks.cuh (small N
// against the CPU), timed.cuh (the yardsticks, the timed sizes, the long run), decode.cuh; what
// they share: problem.cuh.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <sstream>
#include <string>
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

#include "kernels/1_softmax_three_pass.cuh"
#include "kernels/2_softmax_online.cuh"
#include "kernels/3_softmax_block.cuh"
#include "kernels/4_standard.cuh"
#include "kernels/5_fused_scalar.cuh"
#include "kernels/6_fused_mma.cuh"
#include "kernels/7_decode_split.cuh"
#include "kernels/8_fused_wgmma.cuh"
#include "kernels/9_fused_warp_specialized.cuh"

#include "checks.cuh"   // part 1
#include "decode.cuh"   // part 4
#include "problem.cuh"  // the inputs, a problem, the CPU reference rows, the context
#include "timed.cuh"    // the yardsticks, parts 2 and 3

// ---------------------------------------------------------------- the ladder
// Rung 6's cp.async ring depth at d = 64 ([0]) and d = 128 ([1]): the deepest that fits this GPU.
static int g_mma_stages[2] = {rung6::kStages, rung6::kStages};
static void fused_mma(const Attention& a) { rung6::launch(a, g_mma_stages[a.d == 128]); }

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

// --n: the comma-separated sequence lengths to time. Bad input exits 2.
static std::vector<int> parse_lengths(const std::string& n_list) {
    std::vector<int> ns;
    std::stringstream in(n_list);
    for (std::string item; std::getline(in, item, ',');) {
        char* end = nullptr;
        const long v = std::strtol(item.c_str(), &end, 10);
        if (item.empty() || *end != '\0' || v < 1 || v > (1 << 20))
            lesson::bad_input("--n=" + n_list + ": each length an integer in [1, 1048576]");
        ns.push_back(int(v));
    }
    if (ns.empty()) lesson::bad_input("--n=" + n_list + ": give at least one length");
    return ns;
}

// --rung: "0" every rung, else one rung or a list, as bits (rung r: bit r - 1). Bad input exits 2.
static uint32_t parse_rungs(const std::string& list) {
    uint32_t mask = 0;
    std::stringstream in(list == "0" ? "" : list);
    for (std::string item; std::getline(in, item, ',');) {
        char* end = nullptr;
        const long v = std::strtol(item.c_str(), &end, 10);
        if (item.empty() || *end != '\0' || v < 1 || v > kRungs)
            lesson::bad_input("--rung=" + list + ": 0 (every rung), or rungs in [1, 9], e.g. 8 or 3,8");
        mask |= 1u << (v - 1);
    }
    if (list != "0" && mask == 0) lesson::bad_input("--rung=" + list + ": no rung");
    return mask;
}

// Which chosen rung runs at which d: the gate compares each rung's needs (rung_needs) with this
// GPU's limits, or those of the class LESSON_GPU_LIMITS names, and with the image the driver
// loaded; it prints one line per skip (one per rung when both d skip for the same reason).
static Plan choose_rungs(lesson::Gate& gate, uint32_t rungs, const std::vector<int>& ds) {
    const lesson::GpuLimits& gpu = lesson::gpu_limits();
    for (int d : ds) g_mma_stages[d == 128] = rung6::stages_that_fit(d, gpu.smem_optin);
    Plan plan{kLadder, std::vector<std::array<bool, 2>>(kRungs, {false, false}), {}};
    auto& run_at = plan.run_at;
    for (int i = 0; i < kRungs; ++i) {
        if (rungs != 0 && !(rungs >> i & 1)) continue;
        std::vector<std::string> why;
        for (int d : ds) why.push_back(lesson::why_not(rung_needs(i, d), gpu));
        const bool one_line = std::all_of(why.begin(), why.end(), [&](const std::string& w) { return w == why[0]; });
        for (size_t k = 0; k < ds.size(); ++k) {
            const std::string what =
                "rung " + std::to_string(i + 1) + (one_line ? "" : " at d=" + std::to_string(ds[k]));
            run_at[i][ds[k] == 128] =
                one_line && k > 0 ? run_at[i][ds[0] == 128] : gate.run(what, rung_needs(i, ds[k]));
        }
        if (run_at[i][0] || run_at[i][1]) plan.ladder.push_back(i);
    }
    return plan;
}

// Rung 6 with a shallower ring than kStages (a smaller configuration instead of a skip): say so.
static void note_smaller_ring(lesson::Report& report, const Plan& plan, const std::vector<int>& ds) {
    const lesson::GpuLimits& gpu = lesson::gpu_limits();
    for (int d : ds)
        if (plan.runs(5, d) && g_mma_stages[d == 128] != rung6::kStages) {
            const std::string line =
                "rung 6 at d=" + std::to_string(d) + ": " + std::to_string(g_mma_stages[d == 128]) + " stages (" +
                std::to_string(rung6::smem_bytes(d, g_mma_stages[d == 128])) + " B), " +
                (gpu.emulated ? std::string("this GPU class (") + gpu.emulated->name + ") gives " : "this GPU gives ") +
                std::to_string(gpu.smem_optin) + " B per block, not the " + std::to_string(rung6::kStages) +
                " stages' " + std::to_string(rung6::smem_bytes(d, rung6::kStages));
            std::printf("%s\n", line.c_str());
            report.note(line);
        }
}

int main(int argc, char** argv) {
    // Flags first: bad input exits 2 before any CUDA call.
    lesson::CommonOptions opt;
    int64_t batch = 2, heads = 8, d_flag = 0, decode_n = 65536, decode_batch = 8, decode_heads = 32;
    int64_t long_n = 131072, long_heads = 4;
    bool causal = false;
    std::string n_list = "2048,8192", rung_list = "0";
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
    cli.add_string("rung", &rung_list, "run and check these rungs alone: 8, or a list such as 3,8 (0: every rung)");
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
    const std::vector<int> ns = parse_lengths(n_list);
    const uint32_t rungs = parse_rungs(rung_list);
    const int64_t bh = batch * heads, dbh = decode_batch * decode_heads;
    if (bh > 65535 || dbh > 65535 || long_heads > 65535)
        lesson::bad_input("--batch x --heads (and --decode-batch x --decode-heads, --long-heads) must be <= 65535");
    const std::vector<int> ds = d_flag == 0 ? std::vector<int>{64, 128} : std::vector<int>{int(d_flag)};
    uint64_t dev_bytes = 0;  // Q, K, V, O of the largest timed problem, and the decode cache
    for (int n : ns) dev_bytes = std::max<uint64_t>(dev_bytes, 4ull * bh * n * 128 * 2);
    dev_bytes = std::max<uint64_t>(dev_bytes, 2ull * dbh * decode_n * 128 * 2);
    dev_bytes = std::max<uint64_t>(dev_bytes, 4ull * long_heads * long_n * 128 * 2);
    const std::string what = "--batch/--heads/--n/--decode-*/--long";
    lesson::require_host_memory(3ull * long_n * 128 * 4 + 16ull * bh * 8192 * 128, "pageable", what);
    cudaDeviceProp prop = lesson::pick_device(opt.device);
    lesson::require_device_memory(dev_bytes, what);

    lesson::Report report("21_flash_attention");
    report.device(prop);
    report.config_from(cli);  // every flag as parsed: batch, heads, n, d, causal, rung, decode_n, ...
    report.config("batch_x_heads", bh);
    report.config("head_dims", d_flag == 0 ? std::string("64,128") : std::to_string(d_flag));
    report.config("tolerance_rel_l2", kTol);

    lesson::Gate gate(report);
    const Plan plan = choose_rungs(gate, rungs, ds);
    // Rungs named by --rung must all run: a list with one this GPU cannot run is a SKIP too.
    if (gate.none_ran() || (rungs != 0 && int(plan.ladder.size()) < __builtin_popcount(rungs)))
        return report.skip(gate.reason(), opt.json);
    note_smaller_ring(report, plan, ds);
    CUBLAS_CHECK(cublasCreate(&g_cublas));
    Context c{report, prop, plan, uint64_t(opt.seed), int(opt.repeat), opt.inject_fault};
    // --quick: 512, where cuBLAS picks a kernel racecheck passes (at 1024 it reports 6 hazards inside cuBLAS).
    const int gemm_n = opt.quick ? 512 : 8192;
    measure_yardsticks(c, gemm_n);

    check_small(c, ds);  // part 1: small N against the CPU, every element
    Key key;             // part 2: the timed sizes
    for (int d : ds)
        for (int N : ns) time_size(c, bh, N, d, causal, N == ns.back() && d == ds.back(), key);
    if (long_n > 0 && plan.runs(5, ds.back()))  // part 3: a sequence rung 4 cannot hold
        long_run(c, kLadder[5], long_n, long_heads, ds.back(), causal);
    if (rungs == 0 || (rungs >> 6 & 1)) decode_part(c, kLadder[6], ds, decode_n, dbh);  // part 4: decode

    report.note("inputs: Q uniform on multiples of 4/128 in [-4, 4), K and V of 1/128 in [-1, 1): exact in bf16");
    report.note("TFLOP/s count 4 N^2 d per head (half when causal) for every attention rung; " +
                (g_cublas_bf16
                     ? "the yardstick is cuBLAS GemmEx (bf16 in, fp32 accumulate) at " + std::to_string(gemm_n) +
                           "^3 in this run, fp32 C and bf16 C timed in turns, the faster named; the graded "
                           "ratio times the best fused rung in turns with both"
                     : c.no_gemm));
    if (key.text.empty())
        report.key_result("no fused rung was timed", NAN, c.cublas_name, lesson::Against::Yardstick, "not timed");
    else report.key_result(key.text, key.fraction, key.of, lesson::Against::Yardstick, key.small);
    report.default_size(cli.at_default_size());
    for (void* x : {(void*)c.gemm.A, (void*)c.gemm.B, (void*)c.gemm.C32, (void*)c.gemm.C16}) CUDA_CHECK(cudaFree(x));
    CUBLAS_CHECK(cublasDestroy(g_cublas));
    return report.finish(opt.json);
}
