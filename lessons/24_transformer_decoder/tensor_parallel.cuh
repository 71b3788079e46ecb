// Lesson 24 of the course (the transformer decoder): tensor parallelism over two GPUs (--gpus=2),
// as Megatron-LM splits a layer. Each GPU holds a share of every layer: half the query heads and
// the KV heads they read (their columns of W_qkv, the rows of W_o their outputs meet, and a paged
// KV cache of its own for its KV heads), and half the MLP's columns (those columns of the gate and
// of up in W_gate_up, and their rows of W_down). Attention works head by head and SwiGLU column by
// column, so each GPU runs them on its share alone. Only where a layer leaves its heads or its
// columns, at the o and the down projections, does each GPU hold a partial sum of the d-wide
// output: one all-reduce (NCCL, a sum in fp32) after each, two per layer, in prefill and in every
// decode step, gives both GPUs the whole. The embedding, the norms, the LM head and the sampler
// are replicated: both GPUs carry the same residual stream and draw the same tokens.
// In decode, where each GPU can reach the other's memory, the all-reduce is not NCCL's but the
// lesson's own one-shot kernel, fused with the residual add (kernels/peer_sum.cuh); prefill's,
// of batch x prompt rows each, stay NCCL's. The decode loop is timed both ways.
//
// A decode step then reads half of every layer's weights on each GPU, and can take about half the
// time, less what does not split: the LM head, read whole on both; 2 x layers all-reduces of a few
// KB, whose time is latency, not bytes; and kernels half as large, which fill the GPU less.
//
// One host thread per GPU (std::thread; GPU 0's is the main thread), each running on its own
// stream the very steps one GPU runs (main.cu). One thread driving both would have to put each
// NCCL call in a group with the other GPU's (ncclGroupStart/End), which issues them at the group's
// end, after kernels that come later on the stream; and NCCL's documentation warns that a thread
// replaying the graphs of several GPUs may block in cudaGraphLaunch while the others wait for it.
// With a thread each, every GPU's work goes out in order and the collectives meet on the GPUs.
// Both communicators come from one call, ncclCommInitAll (lesson 22, part 3).
// Run: ./build/bin/transformer_decoder --gpus=2   (README.md is the handout, "Tensor parallelism")
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <cuda_runtime.h>

#include "common/check.h"
#include "common/device.h"
#include "common/flags.h"
#include "common/gpu_class.h"
#include "common/memory.h"
#include "common/nccl_check.h"
#include "common/report.h"
#include "common/timer.h"
#include "model.cuh"

// The two GPUs (--device and the one after it), each with its share of the model and its communicator.
struct TensorParallel {
    int device[2] = {0, 1};
    Decoder D[2];
    bool peer = false;  // each GPU can reach the other's memory: decode's all-reduce by peerAddResidual
#if LESSON_HAVE_NCCL
    ncclComm_t comm[2] = {};
#endif
};

// NVLink SHARP (NCCL_NVLS_ENABLE, multicast) stays off unless the caller turned it on (setenv's 0:
// a value already there is kept); NCCL reads it when it starts. Returns the value, for the report.
inline std::string nvls_off() {
    setenv("NCCL_NVLS_ENABLE", "0", 0);
    return std::getenv("NCCL_NVLS_ENABLE");
}

// Why --gpus=2 cannot run here ("" where it can): NCCL missing from the build, a second GPU
// missing, two GPUs of different kinds (the replicas must compute the same bits), or too little
// memory on the second for its share (`share_bytes`).
inline std::string two_gpus_missing(int device, double share_bytes) {
    if (!LESSON_HAVE_NCCL)
        return "--gpus=2 needs NCCL, not found at build time (install libnccl-dev, or set NCCL_ROOT, and rebuild)";
    int count = 0;
    CUDA_CHECK(cudaGetDeviceCount(&count));
    if (device + 2 > count)
        return "--gpus=2 needs 2 GPUs from --device=" + std::to_string(device) + " on; this machine has " +
               std::to_string(count);
    cudaDeviceProp a{}, b{};
    CUDA_CHECK(cudaGetDeviceProperties(&a, device));
    CUDA_CHECK(cudaGetDeviceProperties(&b, device + 1));
    if (std::string(a.name) != b.name || a.multiProcessorCount != b.multiProcessorCount)
        return "--gpus=2 needs two GPUs of one kind; GPU " + std::to_string(device) + " is " + a.name + ", GPU " +
               std::to_string(device + 1) + " " + b.name;
    size_t free_b = 0, total_b = 0;
    CUDA_CHECK(cudaSetDevice(device + 1));
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    CUDA_CHECK(cudaSetDevice(device));
    if (share_bytes > 0.9 * double(free_b))
        return "GPU " + std::to_string(device + 1) + "'s share needs " + lesson::gb_text(share_bytes) + "; " +
               lesson::gb_text(double(free_b)) + " free";
    return "";
}

// f(D, g) for both GPUs g at once, each from a host thread of its own with its GPU current.
template <class F>
void each_gpu(TensorParallel& tp, F&& f) {
    std::thread second([&] {
        CUDA_CHECK(cudaSetDevice(tp.device[1]));  // the current GPU is the thread's own
        f(tp.D[1], 1);
    });
    CUDA_CHECK(cudaSetDevice(tp.device[0]));
    f(tp.D[0], 0);
    second.join();
}

// Lessons 20 and 21 raise their kernels' shared memory limit once, on the GPU that first runs them
// (the one-GPU run, before these); the limit is each GPU's own, so every GPU raises it here.
inline void allow_prefill_smem(const Decoder& D) {
    const auto raise = [](auto kernel, int bytes) {
        CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
    };
    if (D.encode) raise(rung11::wgmmaPipelined, rung11::kSmemBytes);
    if (!D.hm.q) return;
    const int hd = int(D.m.hd());
    const bool deep = rung6::stages_that_fit(hd, lesson::gpu_limits().smem_optin) == rung6::kStages;
    if (hd == 64 && deep) raise(rung6::flashMma<64, rung6::kStages>, rung6::smem_bytes(64, rung6::kStages));
    if (hd == 64 && !deep) raise(rung6::flashMma<64, 2>, rung6::smem_bytes(64, 2));
    if (hd == 128 && deep) raise(rung6::flashMma<128, rung6::kStages>, rung6::smem_bytes(128, rung6::kStages));
    if (hd == 128 && !deep) raise(rung6::flashMma<128, 2>, rung6::smem_bytes(128, 2));
}

// One GPU's side of decode's all-reduce (kernels/peer_sum.cuh): the o and down projections'
// partial sums, the one-shot's counters, zero, one per block of its grid; and this GPU's access to
// the other's memory (lesson 22, part 2), unless `peer` is -1. NCCL may have turned that access on
// already (its transport between two GPUs of one process uses it), which is no error.
inline void open_peer_sum(Decoder& D, int peer) {
    for (float*& p : D.ps.part) D.alloc(p, size_t(D.r.batch * D.m.d) * 4);
    D.ps.blocks = int(std::min<int64_t>(D.r.batch * D.tiles(), D.sms));
    D.alloc(D.ps.seq, size_t(D.ps.blocks) * 4, 0);
    D.alloc(D.ps.flag, size_t(D.ps.blocks) * 4, 0);
    D.ps.rank = D.rank;
    CUDA_CHECK(cudaDeviceSynchronize());  // the flags are zero before the other GPU can write them
    if (peer < 0) return;
    const cudaError_t e = cudaDeviceEnablePeerAccess(peer, 0);
    if (e == cudaErrorPeerAccessAlreadyEnabled) (void)cudaGetLastError();
    else CUDA_CHECK(e);
}

// Both GPUs' shares of `one`'s model (one.m split in two), made as `one` was made, with its choices
// of kernels (only its sizes and choices are read: its GPU memory may be freed by now); the
// communicators, and each share's all-reduce, on its own stream: NCCL's, and in decode the one-shot
// kernel's where both GPUs reach each other's memory (each then holds the other's addresses).
inline void open_tensor_parallel(TensorParallel& tp, const Decoder& one, int device, uint64_t seed, int64_t keep_rows) {
    for (int g = 0; g < 2; ++g) {
        Decoder& D = tp.D[g];
        tp.device[g] = device + g;
        D.m = one.m.shard(2);
        D.r = one.r;
        D.rank = g;
        D.rule = one.rule;
        D.sms = one.sms;
        D.pdl = one.pdl;
        D.encode = one.encode;
    }
#if LESSON_HAVE_NCCL
    NCCL_CHECK(ncclCommInitAll(tp.comm, 2, tp.device));
    for (int g = 0; g < 2; ++g)
        tp.D[g].all_reduce = [&D = tp.D[g], comm = tp.comm[g]](float* y, size_t n) {
            NCCL_CHECK(ncclAllReduce(y, y, n, ncclFloat, ncclSum, comm, D.s));
        };
#endif
    int can[2] = {};
    CUDA_CHECK(cudaDeviceCanAccessPeer(&can[0], tp.device[0], tp.device[1]));
    CUDA_CHECK(cudaDeviceCanAccessPeer(&can[1], tp.device[1], tp.device[0]));
    tp.peer = can[0] && can[1];
    const bool head_major = one.hm.q != nullptr;
    each_gpu(tp, [&](Decoder& D, int g) {
        open_decoder(D);
        make_weights(D, seed);
        make_buffers(D, keep_rows, head_major);
        make_cache(D, seed);
        allow_prefill_smem(D);
        open_peer_sum(D, tp.peer ? tp.device[1 - g] : -1);
    });
    for (int g = 0; g < 2 && tp.peer; ++g) {
        PeerSum& ps = tp.D[g].ps;
        const PeerSum& other = tp.D[1 - g].ps;
        ps.peer_part[0] = other.part[0];
        ps.peer_part[1] = other.part[1];
        ps.peer_flag = other.flag;
        tp.D[g].one_shot = true;
    }
}

// The decode step again with NCCL's all-reduce and residualTiles where D's step has the one-shot
// kernel, captured to be timed beside it; nullptr where D's step is NCCL's already.
inline cudaGraphExec_t capture_nccl_step(Decoder& D) {
    if (!D.one_shot) return nullptr;
    D.one_shot = false;
    cudaGraphExec_t exec = capture_step(D, D.pdl);
    D.one_shot = true;
    return exec;
}

// Each communicator destroyed from its GPU's thread, its work done: a destroy may wait for the other's.
inline void close_tensor_parallel(TensorParallel& tp) {
    each_gpu(tp, [&](Decoder& D, int g) {
        CUDA_CHECK(cudaStreamSynchronize(D.s));
#if LESSON_HAVE_NCCL
        NCCL_CHECK(ncclCommDestroy(tp.comm[g]));
#endif
        close_decoder(D);
    });
}

// Times work(D, g, v), v = 0..n-1, on both GPUs. Each GPU's thread makes the same calls in the same
// order (their all-reduces must pair up), so the counts are fixed first from one timed call on GPU
// 0, as time_interleaved_ms fixes them: a burst for work under 0.5 ms, fewer samples of long work.
// Then rounds of one sample of every variant, each taken with events on the GPU's own stream; a
// sample is the slower GPU's. Returns each variant's median per call, in milliseconds.
template <class Work>
std::vector<double> time_both(TensorParallel& tp, int repeat, int n, Work&& work) {
    std::vector<double> first(static_cast<size_t>(n));
    std::vector<double> ms[2];  // each GPU's samples, variant v's at [v * repeat, ...)
    std::vector<int> calls(size_t(n), 1), samples(size_t(n), repeat);
    auto sample = [&](Decoder& D, lesson::EventTimer& t, int g, int v, int k) {
        t.start(D.s);
        for (int c = 0; c < k; ++c) work(D, g, v);
        return t.stop(D.s) / k;
    };
    each_gpu(tp, [&](Decoder& D, int g) {
        lesson::EventTimer t;
        for (int v = 0; v < n; ++v) {
            work(D, g, v);  // the warm-up
            const double one = sample(D, t, g, v, 1);
            if (g == 0) first[size_t(v)] = one;
        }
    });
    for (size_t v = 0; v < size_t(n); ++v) {
        calls[v] = lesson::burst_calls(first[v]);
        if (calls[v] == 1) samples[v] = int(lesson::capped_samples(repeat, first[v]));
    }
    each_gpu(tp, [&](Decoder& D, int g) {
        lesson::EventTimer t;
        ms[g].assign(size_t(n) * size_t(repeat), 0.0);
        for (int s = 0; s < repeat; ++s)
            for (int v = 0; v < n; ++v)
                if (s < samples[size_t(v)]) ms[g][size_t(v) * repeat + s] = sample(D, t, g, v, calls[size_t(v)]);
    });
    std::vector<double> out(static_cast<size_t>(n));
    for (int v = 0; v < n; ++v) {
        std::vector<double> slower;
        for (int s = 0; s < samples[size_t(v)]; ++s)
            slower.push_back(std::max(ms[0][size_t(v) * repeat + s], ms[1][size_t(v) * repeat + s]));
        out[size_t(v)] = lesson::median(slower);
    }
    return out;
}

// The targets' sizes: the default, and for the 2-GPU target --gpus=2 --batch=16 with every other
// size flag at its default (the 1b model, prompt 512, 32 tokens).
inline bool graded_size(const lesson::Cli& cli, bool quick, int64_t gpus, int64_t batch) {
    if (cli.at_default_size()) return true;
    if (quick || gpus != 2 || batch != 16) return false;
    for (const char* f : {"model", "layers", "d-model", "heads", "kv-heads", "mlp", "vocab", "prompt", "tokens", "page",
                          "sample", "top-k", "top-p"})
        if (cli.given(f)) return false;
    return true;
}

// What the 2-GPU run measured: a decode step by graph replays (the loop's time over its steps),
// the same with NCCL's all-reduce where the step's is the one-shot's (0 elsewhere), prefill; and
// which way each decode projection ran.
struct TwoGpuTimes {
    double step_ms = 0, nccl_step_ms = 0, prefill_ms = 0;
    bool one_shot = false;
    std::string won;
};

// Two GPUs against one, both measured in this run: a decode step by graph replays, with the
// one-shot all-reduce and with NCCL's, and prefill. The target is graded at batch 16 (README.md,
// "Tensor parallelism").
inline void report_two_gpus(lesson::Report& report, const RunSize& r, double one_step_ms, double one_prefill_ms,
                            const TwoGpuTimes& two) {
    const double two_step_ms = two.step_ms, two_prefill_ms = two.prefill_ms;
    const double tps1 = double(r.batch) / (one_step_ms / 1e3), tps2 = double(r.batch) / (two_step_ms / 1e3);
    report.config("decode_all_reduce", two.one_shot ? "peer one-shot" : "NCCL");
    report.note("2 GPUs: decode projections run by the faster (timed on GPU 0): " + two.won);
    report.note(two.one_shot ? "2 GPUs: decode's all-reduces by the peer one-shot kernel (NCCL's timed beside it), "
                               "prefill's by NCCL"
                             : "2 GPUs: every all-reduce by NCCL (the GPUs cannot reach each other's memory)");
    const double prompt = double(r.batch * r.prompt);
    report.variant_yardstick("decode step, 2 GPUs (tensor parallel), CUDA graph", two_step_ms, tps2, "tokens/s", tps1,
                             "1 GPU, CUDA graph");
    report.variant_yardstick(
        "prefill " + std::to_string(r.batch) + "x" + std::to_string(r.prompt) + " tokens, 2 GPUs (tensor parallel)",
        two_prefill_ms, prompt / (two_prefill_ms / 1e3), "tokens/s", prompt / (one_prefill_ms / 1e3), "1 GPU");
    if (two.nccl_step_ms > 0) {
        report.variant_yardstick("decode step, 2 GPUs, NCCL all-reduce, CUDA graph", two.nccl_step_ms,
                                 double(r.batch) / (two.nccl_step_ms / 1e3), "tokens/s", tps1, "1 GPU, CUDA graph");
        report.metric("decode speed-up, one-shot all-reduce over NCCL's (2 GPUs)", two.nccl_step_ms / two_step_ms, "x");
    }
    report.metric("decode tokens/s, 2 GPUs (CUDA graph)", tps2, "tokens/s");
    report.metric("decode speed-up, 2 GPUs over 1 (CUDA graphs)", one_step_ms / two_step_ms, "x");
    report.metric("prefill speed-up, 2 GPUs over 1", one_prefill_ms / two_prefill_ms, "x");
    // A floor, not the aim (the bytes alone would allow about 1.9x): what a step loses to its
    // 2 x layers all-reduces and to kernels half as large is not measured apart (README.md).
    if (r.batch == 16) report.target("2 GPUs over one in decode at batch 16", one_step_ms / two_step_ms, 1.0, "x");
}
