// Lesson 24 of the course (00-24): the capstone, a transformer decoder from the course's kernels.
// Before: lesson 23 (23_full_scale). Next: none; the course ends here.
// Run: ./build/bin/transformer_decoder [--quick] [--model=tiny|1b]   (--help lists every flag; README.md is the handout)
//
// A Llama-style decoder (RMSNorm, Q|K|V projection, RoPE, grouped-query attention, output
// projection, SwiGLU MLP, final norm, LM head, sampling) with seeded random bf16 weights drawn on
// the GPU. Prefill runs the prompt through cuBLAS GEMMs and a causal attention over the paged KV
// cache; decode makes one token per sequence per step: GEMV-shaped projections (kernels/gemv.cuh,
// or cuBLAS where it measures faster), split-key attention through the block table, the sampler.
// The step is captured once into a CUDA graph and replayed; it reads its positions from device
// memory. Checked against a double-precision CPU reference (checks.cuh), timed against the
// run's cuBLAS rate (prefill) and the memory bound of reading every weight once per step (decode).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "checks.cuh"
#include "common/ceilings.h"
#include "common/check.h"
#include "common/device.h"
#include "common/flags.h"
#include "common/memory.h"
#include "common/needs.h"
#include "common/report.h"
#include "common/timer.h"
#include "model.cuh"
#include "problem.cuh"
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

template <class T>
static std::vector<T> to_host(const T* d, size_t n) {
    std::vector<T> h(n);
    CUDA_CHECK(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
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

// Decode's memory bound: every weight and the cache read once per step, at the DRAM read bound
// (measured now); prefill against the cuBLAS GEMM rate; the graph against stream launches.
struct Timings {
    double prefill_ms, blas_tflops, graph_ms, stream_ms, plain_graph_ms;  // plain: no overlap (0: not timed)
    std::map<std::string, double> kernel_ms;
};
static void report_speed(lesson::Report& report, const Decoder& D, const cudaDeviceProp& prop, const Timings& t,
                         int device) {
    const Dims& m = D.m;
    const RunSize& r = D.r;
    const double step_bytes =
        double(m.step_params()) * 2 + 4.0 * m.layers * r.batch * m.kvd() * (double(r.prompt) + double(r.tokens) / 2);
    const std::string in_l2 = lesson::l2_note(step_bytes, prop);
    const lesson::StreamBound dram =
        in_l2.empty() ? lesson::measure_stream_bound(prop, 1, 0) : lesson::stream_bound_not_measured(1, 0, in_l2);
    lesson::add_bound(report, dram, device, lesson::Roof::Memory);
    report.yardstick("cuBLAS bf16 GEMM, prefill's gate/up shape", t.blas_tflops, "TFLOP/s");
    report.timing(lesson::kTimingMethod);
    const double flops = prefill_flops(m, r.batch, r.prompt, 1), tflops = flops / (t.prefill_ms * 1e9);
    report.variant_yardstick("prefill " + std::to_string(r.batch) + "x" + std::to_string(r.prompt) + " tokens",
                             t.prefill_ms, tflops, "TFLOP/s", t.blas_tflops, "cuBLAS GEMM",
                             lesson::small_gemm_note(r.batch * r.prompt, 2 * m.mlp, prop));
    report.metric("prefill tokens/s", double(r.batch * r.prompt) / (t.prefill_ms / 1e3), "tokens/s");
    const double bound_tps = double(r.batch) / (step_bytes / (dram.gbps * 1e9));  // GB/s: 1e9 bytes a second
    const double tps = double(r.batch) / (t.graph_ms / 1e3);
    report.variant_bound("decode step, CUDA graph", t.graph_ms, tps, "tokens/s", bound_tps, "memory bound", in_l2);
    report.variant_bound("decode step, stream launches", t.stream_ms, double(r.batch) / (t.stream_ms / 1e3), "tokens/s",
                         bound_tps, "memory bound", in_l2);
    if (t.plain_graph_ms > 0.0) {
        report.variant_bound("decode step, CUDA graph, no overlap", t.plain_graph_ms,
                             double(r.batch) / (t.plain_graph_ms / 1e3), "tokens/s", bound_tps, "memory bound", in_l2);
        report.metric("overlap (programmatic dependent launch) speed-up", t.plain_graph_ms / t.graph_ms, "x");
    }
    report.metric("graph speed-up over stream launches", t.stream_ms / t.graph_ms, "x");
    for (const auto& [name, ms] : t.kernel_ms) report.metric("decode step, " + name, ms, "ms");
    report.work("prefill", flops, double(m.params()) * 2, t.prefill_ms);
    report.work("decode step", 2.0 * double(m.step_params()) * r.batch, step_bytes, t.graph_ms);
    char key[128];
    std::snprintf(key, sizeof key, "decode %.0f tokens/s at batch %lld (graph)", tps, (long long)r.batch);
    report.key_result(key, tps / bound_tps, "memory bound", lesson::Against::Bound, in_l2);
    // A floor under what a step of separate kernels reaches (README.md, "Prefill against decode").
    if (r.batch == 1) report.target("batch-1 decode of its memory bound", tps / bound_tps, 0.45);
    report.target("graph over stream launches", t.stream_ms / t.graph_ms, 1.0, "x");
}

// One decode step captured into a graph and instantiated; `overlap`: launch the decode kernels
// with programmatic dependent launch (kernels/pdl.cuh). The executable graph keeps what it needs.
static cudaGraphExec_t capture_step(Decoder& D, bool overlap) {
    const bool was = D.pdl;
    D.pdl = overlap;
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    CUDA_CHECK(cudaStreamBeginCapture(D.s, cudaStreamCaptureModeGlobal));
    decode_step(D);
    CUDA_CHECK(cudaStreamEndCapture(D.s, &graph));
    CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    CUDA_CHECK(cudaGraphDestroy(graph));
    D.pdl = was;
    return exec;
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
    cli.add_int("gpus", &gpus, 1, 1, "GPUs: 1 (tensor parallelism over 2 is not in this version)");
    cli.parse_or_exit(argc, argv);
    const Dims m = model_dims(model, opt.quick, given);
    if (opt.quick) model = "tiny";  // what the report's config says is what ran
    const RunSize r{batch, prompt, tokens, page};
    const uint64_t seed = uint64_t(opt.seed);
    Decoder D{m, r};
    D.rule = {check_sizes(m, r, sample, top_k), int(top_k), float(top_p), seed};
    const bool whole_on_cpu = double(m.params()) * double(r.batch * r.ctx()) <= 4e9;
    const int64_t check_layer = int64_t(seed % uint64_t(m.layers));
    lesson::require_host_memory(uint64_t(whole_on_cpu ? m.params() : m.layer_params()) * 4 +
                                    uint64_t(r.batch * r.ctx()) * (m.vocab * 40 + m.d * 16),
                                "pageable", "--model=" + model);

    // 2. The device: bf16 needs cc 8.0; the weights and the run's buffers must fit.
    cudaDeviceProp prop = lesson::pick_device(opt.device);
    lesson::Report report("24_transformer_decoder");
    report.device(prop);
    report.config_from(cli);
    report.config("parameters", m.params());
    lesson::Gate gate(report);
    lesson::Needs needs;
    needs.cc = 80;
    needs.cc_why = "bf16 arithmetic and cuBLAS bf16 GEMMs";
    size_t free_b = 0, total_b = 0, proj_floats = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    const double need_b = double(m.params()) * 2 + double(work_bytes(m, r, &proj_floats));
    if (need_b > 0.9 * double(free_b))
        needs.shape =
            "needs " + lesson::gb_text(need_b) + " of device memory; " + lesson::gb_text(double(free_b)) + " free";
    if (!gate.run("the decoder", needs)) return report.skip(gate.reason(), opt.json);

    // 3. Weights drawn on the GPU, the activations, the paged cache; cuBLAS on the lesson's stream.
    D.sms = prop.multiProcessorCount;
    D.pdl = prop.major >= 9;  // decode kernels overlap their neighbours (kernels/pdl.cuh); plain launches elsewhere
    CUDA_CHECK(cudaStreamCreate(&D.s));
    CUBLAS_CHECK(cublasCreate(&D.blas));
    CUBLAS_CHECK(cublasSetStream(D.blas, D.s));
    D.alloc(D.d_ws, 32 << 20, 0);  // its own workspace: a graph capture must not allocate
    CUBLAS_CHECK(cublasSetWorkspace(D.blas, D.d_ws, 32 << 20));
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
    CUDA_CHECK(cudaMemcpy(D.d_tokens, out.prompt.data(), out.prompt.size() * 4, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemset(D.st.step, 0, 4));
    hold_positions(D, r.prompt);
    D.check_layer = whole_on_cpu ? -1 : check_layer;
    prefill(D, r.prompt, whole_on_cpu ? 0 : r.prompt - 1, true);
    CUDA_CHECK(cudaStreamSynchronize(D.s));
    D.check_layer = -1;
    out.prefill = to_host(D.logits, size_t(r.batch * (whole_on_cpu ? r.prompt : 1) * m.vocab));
    out.xin.swap(D.h_xin);
    out.xout.swap(D.h_xout);
    const Resume at{std::vector<int>(size_t(r.batch), int(r.prompt)), to_host(D.st.next, size_t(r.batch))};

    // 5. Decode projections: the GEMV or cuBLAS, whichever makes a step faster at this batch.
    choose_projections(D, report, int(opt.repeat), at);

    // 6. The decode step, captured once: every launch reads its positions from device memory.
    // Where the kernels overlap (cc 9.0+), the same step with plain launches too, timed beside it.
    cudaGraphExec_t step_graph = capture_step(D, D.pdl);
    cudaGraphExec_t plain_graph = D.pdl ? capture_step(D, false) : nullptr;

    // 7. The decode loop: a block for every sequence that reaches a new page, then one replay.
    resume(D, at);
    for (int64_t t = 1; t < r.tokens; ++t) {
        hold_positions(D, r.prompt + t);
        CUDA_CHECK(cudaGraphLaunch(step_graph, D.s));
    }
    CUDA_CHECK(cudaStreamSynchronize(D.s));
    out.history = to_host(D.st.history, size_t(r.tokens * r.batch));
    out.steps = to_host(D.step_logits, size_t(r.tokens * r.batch * m.vocab));
    prefill_again(D, out);
    if (opt.inject_fault) verify::inject_fault(out.steps.data(), uint64_t(out.steps.size()), seed);  // must FAIL

    // 8. Timing. Prefill against cuBLAS's rate; the decode loop (from the state prefill left)
    // by graph replays, by stream launches and by replays of the graph without the overlap, in
    // turns; one stream-launched step kernel by kernel.
    CUDA_CHECK(cudaMemcpy(D.d_tokens, out.prompt.data(), out.prompt.size() * 4, cudaMemcpyHostToDevice));
    const double prefill_ms = lesson::time_median_ms(
        int(opt.repeat), [&] { prefill(D, r.prompt, r.prompt - 1, false); }, D.s);
    const double blas_tflops = cublas_tflops(D, r.batch * r.prompt, int(opt.repeat));
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

    // 9. Verify: against the CPU (the whole model, or one layer), and decode against prefill.
    lesson::HostTimer cpu;
    if (whole_on_cpu) check_whole_model(report, m, r, seed, out, D.rule);
    else check_one_layer(report, m, r, seed, check_layer, out);
    report.cpu_reference_ms(cpu.ms(), verify::host_threads());
    check_consistency(report, m, r, out);

    // 10. Report: prefill against cuBLAS, decode against its memory bound, graph against streams.
    report.default_size(cli.at_default_size());
    report_speed(report, D, prop,
                 Timings{prefill_ms, blas_tflops, loop_ms[0] / double(r.tokens - 1), loop_ms[1] / double(r.tokens - 1),
                         plain_graph ? loop_ms[2] / double(r.tokens - 1) : 0.0, kernel_ms},
                 int(opt.device));
    CUDA_CHECK(cudaGraphExecDestroy(step_graph));
    if (plain_graph) CUDA_CHECK(cudaGraphExecDestroy(plain_graph));
    CUBLAS_CHECK(cublasDestroy(D.blas));
    CUDA_CHECK(cudaStreamDestroy(D.s));
    D.free_all();
    return report.finish(opt.json);
}
