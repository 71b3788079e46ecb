// Lesson 24 of the course (00-24): the capstone, a transformer decoder from the course's kernels.
// Before: lesson 23 (23_full_scale). Next: none; the course ends here.
// Run: ./build/bin/transformer_decoder [--quick] [--model=tiny|1b] [--gpus=2]   (--help lists every flag; README.md is the handout)
//
// A Llama-style decoder (RMSNorm, Q|K|V projection, RoPE, grouped-query attention, output
// projection, SwiGLU MLP, final norm, LM head, sampling) with seeded random bf16 weights drawn on
// the GPU. Prefill runs the prompt through cuBLAS GEMMs and a causal attention over the paged KV
// cache; decode makes one token per sequence per step: GEMV-shaped projections (kernels/gemv.cuh,
// or cuBLAS where it measures faster), split-key attention through the block table, the sampler.
// The step is captured once into a CUDA graph and replayed; it reads its positions from device
// memory. Checked against a double-precision CPU reference (checks.cuh), timed against the
// run's cuBLAS rate (prefill) and the memory bound of reading every weight once per step (decode).
// --gpus=2 then runs the same model split over two GPUs (tensor_parallel.cuh), the same steps on
// each GPU's host thread: checked as one GPU is and against it, and timed against it.
#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "checks.cuh"
#include "common/check.h"
#include "common/device.h"
#include "common/flags.h"
#include "common/memory.h"
#include "common/needs.h"
#include "common/report.h"
#include "common/timer.h"
#include "model.cuh"
#include "problem.cuh"
#include "tensor_parallel.cuh"
#include "timed.cuh"
#include "verify/compare.h"
#include "verify/parallel.h"
#include "verify/random.h"

// The preset, then every size flag that was given (0: the preset's).
static Dims model_dims(const std::string& model, bool quick, const int64_t (&given)[6]) {
    if (model != "tiny" && model != "1b") lesson::bad_input("--model=" + model + "; allowed: tiny, 1b");
    Dims m = quick || model == "tiny" ? kTiny : kOneB;
    int64_t* dims[6] = {&m.layers, &m.d, &m.heads, &m.kv_heads, &m.mlp, &m.vocab};
    for (int i = 0; i < 6; ++i)
        if (given[i] > 0) *dims[i] = given[i];
    return m;
}

// Random prompts: token (b, t) a pure function of the seed.
static std::vector<int> make_prompt(const RunSize& r, int64_t vocab, uint64_t seed) {
    std::vector<int> p(size_t(r.batch * r.prompt));
    for (size_t i = 0; i < p.size(); ++i) p[i] = int(verify::splitmix64(seed * 31 + i) % uint64_t(vocab));
    return p;
}

// The same tokens through prefill again: prompt and every token decode consumed, positions
// prompt-1.. kept. Its logits must be decode's (checks.cuh, check_consistency).
static void prefill_again(Decoder& D, Outputs& out) {
    const RunSize& r = D.r;
    const int64_t seq = r.ctx() - 1;
    std::vector<int> tokens;
    for (int64_t b = 0; b < r.batch; ++b) {
        const std::vector<int> s = sequence(out, r, D.m.vocab, b);
        tokens.insert(tokens.end(), s.begin(), s.end());
    }
    CUDA_CHECK(cudaMemcpy(D.d_tokens, tokens.data(), tokens.size() * 4, cudaMemcpyHostToDevice));
    prefill(D, seq, r.prompt - 1, false);
    out.again = to_host(D.logits, size_t(r.batch * r.tokens * D.m.vocab));
}

// Prefill of the prompt (out.prompt) into an empty cache, the first token sampled. Its logits (at
// every position where the CPU checks the whole model, else the last) and the sampled layer's
// input and output go to out. Returns the state decode starts from.
static Resume first_prefill(Decoder& D, Outputs& out, uint64_t seed) {
    const RunSize& r = D.r;
    const bool whole = cpu_runs_whole(D.m.whole(), r);
    CUDA_CHECK(cudaMemcpy(D.d_tokens, out.prompt.data(), out.prompt.size() * 4, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemset(D.st.step, 0, 4));
    hold_positions(D, r.prompt);
    D.check_layer = whole ? -1 : int(sampled_layer(D.m, seed));
    prefill(D, r.prompt, whole ? 0 : r.prompt - 1, true);
    CUDA_CHECK(cudaStreamSynchronize(D.s));
    D.check_layer = -1;
    out.prefill = to_host(D.logits, size_t(r.batch * (whole ? r.prompt : 1) * D.m.vocab));
    out.xin.swap(D.h_xin);
    out.xout.swap(D.h_xout);
    return {std::vector<int>(size_t(r.batch), int(r.prompt)), to_host(D.st.next, size_t(r.batch))};
}

// The decode loop: a block for every sequence that reaches a new page, then one replay of the
// step. Every token and every step's logits go to out; then the same tokens through prefill again.
static void decode_all(Decoder& D, cudaGraphExec_t step_graph, const Resume& at, Outputs& out) {
    const RunSize& r = D.r;
    resume(D, at);
    for (int64_t t = 1; t < r.tokens; ++t) {
        hold_positions(D, r.prompt + t);
        CUDA_CHECK(cudaGraphLaunch(step_graph, D.s));
    }
    CUDA_CHECK(cudaStreamSynchronize(D.s));
    out.history = to_host(D.st.history, size_t(r.tokens * r.batch));
    out.steps = to_host(D.step_logits, size_t(r.tokens * r.batch * D.m.vocab));
    prefill_again(D, out);
}

// Against the CPU (the whole model, or one layer), and decode against prefill; `on`: what ran.
static void verify_run(lesson::Report& report, const Dims& m, const RunSize& r, uint64_t seed, const SampleRule& rule,
                       const Outputs& out, const std::string& on) {
    if (cpu_runs_whole(m, r)) check_whole_model(report, m, r, seed, out, rule, on);
    else check_one_layer(report, m, r, seed, sampled_layer(m, seed), out, on);
    check_consistency(report, m, r, out, on);
}

// What the 2-GPU run leaves: GPU 0's outputs, GPU 1's tokens, and its times (tensor_parallel.cuh).
struct TwoGpus {
    Outputs out;
    std::vector<int> second;
    TwoGpuTimes t;
};

// --gpus=2: the model split over two GPUs (tensor_parallel.cuh), each GPU's share run by its own
// host thread through the same steps as one GPU's: prefill, the graph's capture, the decode loop.
// The all-reduces are inside prefill and the step, so inside the graph (NCCL's, or peerAddResidual).
static TwoGpus run_two_gpus(const Decoder& one, const Outputs& first, int device, int repeat, uint64_t seed) {
    const RunSize& r = one.r;
    TensorParallel tp;
    open_tensor_parallel(tp, one, device, seed, r.batch * std::max(cpu_runs_whole(one.m, r) ? r.prompt : 1, r.tokens));
    Outputs out[2];
    Resume at[2];
    each_gpu(tp, [&](Decoder& D, int g) {
        out[g].prompt = first.prompt;
        at[g] = first_prefill(D, out[g], seed);
    });
    // GEMV or cuBLAS, timed on GPU 0 alone and its choice taken by both: replicas run the same kernels.
    const std::string won = choose_projections(tp.D[0], repeat, nullptr, nullptr);
    std::copy(tp.D[0].blas_for, tp.D[0].blas_for + kProjs, tp.D[1].blas_for);
    cudaGraphExec_t graph[2][2] = {};  // each GPU's step; [1]: with NCCL's all-reduce, where [0]'s is the one-shot's
    each_gpu(tp, [&](Decoder& D, int g) {
        graph[g][0] = capture_step(D, D.pdl);
        graph[g][1] = capture_nccl_step(D);
        decode_all(D, graph[g][0], at[g], out[g]);
        CUDA_CHECK(cudaMemcpy(D.d_tokens, first.prompt.data(), first.prompt.size() * 4, cudaMemcpyHostToDevice));
    });
    const int n = graph[0][1] ? 3 : 2;  // the decode loop, prefill, the decode loop with NCCL's all-reduce
    const std::vector<double> ms = time_both(tp, repeat, n, [&](Decoder& D, int g, int v) {
        if (v == 1) return prefill(D, r.prompt, r.prompt - 1, false);
        resume(D, at[g]);
        for (int64_t t = 1; t < r.tokens; ++t) CUDA_CHECK(cudaGraphLaunch(graph[g][v / 2], D.s));
    });
    each_gpu(tp, [&](Decoder&, int g) {
        for (cudaGraphExec_t e : graph[g])
            if (e) CUDA_CHECK(cudaGraphExecDestroy(e));
    });
    close_tensor_parallel(tp);
    const double steps = double(r.tokens - 1);
    return {out[0], out[1].history, {ms[0] / steps, n == 3 ? ms[2] / steps : 0.0, ms[1], tp.peer, won}};
}

int main(int argc, char** argv) {
    // 1. Flags: the preset and its sizes, then the run's. Bad input exits 2 before any CUDA call.
    lesson::CommonOptions opt;
    std::string model = "1b", sample = "greedy";
    int64_t given[6] = {}, batch = 1, prompt = 512, tokens = 32, page = 16, top_k = 50, gpus = 1;
    double top_p = 0.9;
    lesson::Cli cli("transformer_decoder",
                    "A Llama-style decoder on the GPU: prefill of a prompt, then token-by-token decode over a paged "
                    "KV cache, one CUDA graph per step.");
    lesson::add_common_flags(cli, opt);
    cli.add_string("model", &model, "the preset: tiny (2 layers, d 256) or 1b (16 layers, d 2048); --quick: tiny");
    const char* dim_flags[6] = {"layers", "d-model", "heads", "kv-heads", "mlp", "vocab"};
    const int64_t dim_max[6] = {64, 8192, 128, 128, 32768, 262144};
    for (int i = 0; i < 6; ++i)
        cli.add_int(dim_flags[i], &given[i], 0, dim_max[i], "the model's size (0: the preset's)");
    cli.add_int("batch", &batch, 1, 64, "sequences decoded together", 2);
    cli.add_int("prompt", &prompt, 1, 8192, "prompt tokens per sequence", 13);
    cli.add_int("tokens", &tokens, 2, 1024, "tokens generated per sequence, the first by prefill", 6);
    cli.add_int("page", &page, 1, 1024, "positions per block of the paged KV cache", 5);
    cli.add_string("sample", &sample, "greedy, topk or topp (seeded by --seed)");
    cli.add_int("top-k", &top_k, 1, 262144, "--sample=topk: draw among the k largest logits");
    cli.add_double("top-p", &top_p, 0.01, 1.0, "--sample=topp: draw among the fewest tokens holding this probability");
    cli.add_int("gpus", &gpus, 1, 2, "1, or 2: then also the model split over GPUs --device and --device + 1");
    cli.parse_or_exit(argc, argv);
    const Dims m = model_dims(model, opt.quick, given);
    if (opt.quick) model = "tiny";  // what the report's config says is what ran
    const RunSize r{batch, prompt, tokens, page};
    const uint64_t seed = uint64_t(opt.seed);
    Decoder D{m, r};
    D.rule = {check_sizes(m, r, sample, top_k, gpus), int(top_k), float(top_p), seed};
    const bool whole_on_cpu = cpu_runs_whole(m, r);
    lesson::require_host_memory(uint64_t(whole_on_cpu ? m.params() : m.layer_params()) * 4 +
                                    uint64_t((2 * gpus - 1) * r.batch * r.ctx()) * (m.vocab * 40 + m.d * 16),
                                "pageable", "--model=" + model);

    // 2. The device: bf16 needs cc 8.0; the weights and the run's buffers must fit. --gpus=2 SKIPs
    // without NCCL or a second GPU of the same kind.
    cudaDeviceProp prop = lesson::pick_device(opt.device);
    lesson::Report report("24_transformer_decoder");
    report.device(prop);
    report.config_from(cli);
    report.config("parameters", m.params());
    lesson::Gate gate(report);
    size_t free_b = 0, total_b = 0, proj_floats = 0;
    if (gpus == 2) {
        report.config("NCCL_NVLS_ENABLE", nvls_off());
        const Dims half = m.shard(2);
        const std::string why =
            two_gpus_missing(int(opt.device), double(half.params()) * 2 + double(work_bytes(half, r, &proj_floats)));
        if (!why.empty()) {
            gate.skip("tensor parallelism over 2 GPUs", why);
            return report.skip(gate.reason(), opt.json);
        }
    }
    lesson::Needs needs;
    needs.cc = 80;
    needs.cc_why = "bf16 arithmetic and cuBLAS bf16 GEMMs";
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    const double need_b = double(m.params()) * 2 + double(work_bytes(m, r, &proj_floats));
    if (need_b > 0.9 * double(free_b))
        needs.shape =
            "needs " + lesson::gb_text(need_b) + " of device memory; " + lesson::gb_text(double(free_b)) + " free";
    if (!gate.run("the decoder", needs)) return report.skip(gate.reason(), opt.json);

    // 3. Weights drawn on the GPU, the activations, the paged cache; cuBLAS on the lesson's stream.
    D.sms = prop.multiProcessorCount;
    D.pdl = prop.major >= 9;  // decode kernels overlap their neighbours (kernels/pdl.cuh); plain launches elsewhere
    open_decoder(D);
    lesson::Gate fast_paths(report);  // not the run's gate: without them, cuBLAS and causalAttention
    if (fast_paths.run("lesson 20's rung 11 for the prefill GEMMs", wgmma_needs()))
        D.encode = lesson::tensor_map_encoder();
    if (D.encode && (r.batch * r.prompt) % 256 != 0)
        report.note("prefill GEMMs by cuBLAS: batch x prompt is not a multiple of 256");
    make_weights(D, seed);
    const bool fused = fast_paths.run("lesson 21's rung 6 for the prefill attention", fused_attention_needs(m.hd()));
    make_buffers(D, r.batch * std::max(whole_on_cpu ? r.prompt : 1, r.tokens), fused);
    make_cache(D, seed);

    // 4. Prefill: every prompt position of every sequence at once; the first token sampled.
    Outputs out;
    out.prompt = make_prompt(r, m.vocab, seed);
    const Resume at = first_prefill(D, out, seed);

    // 5. Decode projections: the GEMV or cuBLAS, whichever makes a step faster at this batch.
    report.note("decode projections, each the faster in whole steps: " +
                choose_projections(D, int(opt.repeat), &report, &at));

    // 6. The decode step, captured once: every launch reads its positions from device memory.
    // Where the kernels overlap (cc 9.0+), the same step with plain launches too, timed beside it.
    cudaGraphExec_t step_graph = capture_step(D, D.pdl);
    cudaGraphExec_t plain_graph = D.pdl ? capture_step(D, false) : nullptr;

    // 7. The decode loop, one replay a step, then prefill of the same tokens again.
    decode_all(D, step_graph, at, out);

    // 8. Timing. Prefill in turns with cuBLAS's GEMM; the decode loop (from the state prefill left)
    // by graph replays, by stream launches and by replays of the graph without the overlap, in
    // turns; one stream-launched step kernel by kernel.
    CUDA_CHECK(cudaMemcpy(D.d_tokens, out.prompt.data(), out.prompt.size() * 4, cudaMemcpyHostToDevice));
    const auto [prefill_ms, blas_tflops] = time_prefill_and_blas(D, int(opt.repeat));
    const std::vector<double> loop_ms = lesson::time_interleaved_ms(
        int(opt.repeat), plain_graph ? 3 : 2,
        [&](int v) {
            resume(D, at);
            for (int64_t t = 1; t < r.tokens; ++t) {
                if (v == 0) CUDA_CHECK(cudaGraphLaunch(step_graph, D.s));
                else if (v == 1) decode_step(D);
                else CUDA_CHECK(cudaGraphLaunch(plain_graph, D.s));
            }
        },
        D.s);
    const std::map<std::string, double> kernel_ms = step_breakdown(D, at);
    CUDA_CHECK(cudaGraphExecDestroy(step_graph));
    if (plain_graph) CUDA_CHECK(cudaGraphExecDestroy(plain_graph));
    close_decoder(D);

    // 9. --gpus=2: the same model on two GPUs, from the same prompt (its GPU memory freed first).
    TwoGpus two = gpus == 2 ? run_two_gpus(D, out, int(opt.device), int(opt.repeat), seed) : TwoGpus{};

    // 10. Verify: against the CPU (the whole model, or one layer), and decode against prefill; two
    // GPUs as one, and against one. A fault goes into the last run's logits: its checks must catch it.
    Outputs& last = gpus == 2 ? two.out : out;
    if (opt.inject_fault) verify::inject_fault(last.steps.data(), uint64_t(last.steps.size()), seed);  // must FAIL
    lesson::HostTimer cpu;
    verify_run(report, m, r, seed, D.rule, out, "");
    if (gpus == 2) verify_run(report, m, r, seed, D.rule, two.out, "2 GPUs: ");
    report.cpu_reference_ms(cpu.ms(), verify::host_threads());
    if (gpus == 2) check_two_gpus(report, m, r, out, two.out, two.second, D.rule);

    // 11. Report: prefill against cuBLAS, decode against its memory bound, graph against streams,
    // and two GPUs against one.
    report.default_size(graded_size(cli, opt.quick, gpus, batch));
    const double steps = double(r.tokens - 1), step_ms = loop_ms[0] / steps;
    report_speed(report, D, prop,
                 Timings{prefill_ms, blas_tflops, step_ms, loop_ms[1] / steps, plain_graph ? loop_ms[2] / steps : 0.0,
                         kernel_ms},
                 int(opt.device));
    if (gpus == 2) report_two_gpus(report, r, step_ms, prefill_ms, two.t);
    return report.finish(opt.json);
}
