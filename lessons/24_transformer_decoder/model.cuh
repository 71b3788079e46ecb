// Lesson 24 of the course (the transformer decoder): the model on the GPU. Its weights (one
// allocation, drawn in place), the paged KV cache and its block allocator, the activations, and
// the two ways through the layers: prefill (every prompt position at once, GEMMs) and one decode
// step (one position per sequence, GEMV-shaped projections), each a list of kernel launches on one
// stream that main.cu runs, captures into a graph (capture_step), and times kernel by kernel.
// The same code runs one GPU's share of the model under tensor parallelism (tensor_parallel.cuh):
// there the o and down projections' outputs are partial sums, added over the GPUs (sum_partials
// in prefill; in decode, peerAddResidual where the GPUs reach each other's memory).
// Run: ./build/bin/transformer_decoder   (README.md is the handout)
#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "common/check.h"
#include "kernels/attention.cuh"
#include "kernels/elementwise.cuh"
#include "kernels/gemv.cuh"
#include "kernels/norm.cuh"
#include "kernels/paged_cache.cuh"
#include "kernels/peer_sum.cuh"
#include "kernels/sample.cuh"
#include "prefill_attention.cuh"
#include "prefill_gemm.cuh"
#include "problem.cuh"

struct LayerWeights {
    bf16 *attn_norm, *qkv, *wo, *mlp_norm, *gate_up, *down;
};

// The projections of a decode step, each timed against cuBLAS and run by the faster (Decoder::blas_for).
enum Proj { kPQkv, kPWo, kPGateUp, kPDown, kPLmHead, kProjs };
inline const char* proj_name(int p) {
    static const char* names[kProjs] = {"qkv", "o proj", "gate/up", "down", "lm head"};
    return names[p];
}
// Projection p's weight is K x N: its input's width and its output's.
inline int64_t proj_k(const Dims& m, int p) { return p == kPDown ? m.mlp : p == kPWo ? m.qd() : m.d; }
inline int64_t proj_n(const Dims& m, int p) {
    const int64_t ns[kProjs] = {m.qkv(), m.d, 2 * m.mlp, m.d, m.vocab};
    return ns[p];
}

// Events around every launch of a stream-launched step, summed by kernel name.
struct Breakdown {
    std::vector<std::string> names;
    std::vector<cudaEvent_t> ev;  // pairs: before, after
    size_t used = 0;
};

struct Decoder {
    Dims m;  // under tensor parallelism, this GPU's share (m.tp GPUs, this one number `rank`)
    RunSize r;
    int rank = 0;
    int sms = 0, splits = 1;  // decodeSplit's splits of the keys
    bool pdl = false;         // cc 9.0+: each decode kernel may start while the one before it ends (kernels/pdl.cuh)
    cudaStream_t s = nullptr;
    cublasHandle_t blas = nullptr;
    void* d_ws = nullptr;
    bf16* d_weights = nullptr;
    std::vector<LayerWeights> layer;
    bf16 *embed = nullptr, *final_norm = nullptr, *lm_head = nullptr;
    // The paged cache: `blocks` blocks per layer, a table of max_blocks per sequence, and the pool's free list.
    bf16* d_pool = nullptr;
    int blocks = 0;
    size_t layer_elems = 0;
    int* d_table = nullptr;
    std::vector<int> h_table, free_blocks, held;  // held[b]: blocks sequence b has
    // Activations, sized for the longest prefill (batch x ctx rows).
    float *x = nullptr, *proj = nullptr, *logits = nullptr, *step_logits = nullptr, *part_ml = nullptr,
          *part_o = nullptr;
    size_t proj_floats = 0;
    float* ssq = nullptr;             // decode: x's sums of squares, [batch][tiles()] (XNormed)
    Parts gu{};                       // decode: the gate/up projection's output, where it went
    float* planes = nullptr;          // a decode GEMV's split-K partial sums
    float* gemv_y[2] = {};            // a decode GEMV's result, batch x N (gate/up: [1], the down GEMV reads it)
    unsigned* gemv_done = nullptr;    // its blocks' counters, one per 256 columns
    unsigned* attn_done = nullptr;    // decodeSplit's counters, one per (sequence, row of blocks)
    Best* best = nullptr;             // sampleTokens: each block's largest logit, [batch][sample_chunks]
    unsigned* sample_done = nullptr;  // its counters, one per sequence
    bf16 *xn = nullptr, *q = nullptr, *attn = nullptr, *act = nullptr;
    int *d_tokens = nullptr, *d_zero = nullptr;
    DecodeState st{};
    SampleRule rule{};
    bool blas_for[kProjs] = {};
    PFN_cuTensorMapEncodeTiled_v12000 encode = nullptr;  // set: prefill GEMMs by lesson 20's rung 11 where they fit
    HeadMajor hm;                                        // hm.q set: prefill attention by lesson 21's rung 6
    Breakdown* bd = nullptr;                             // set: time each launch (a stream-launched step)
    int check_layer = -1;                                // prefill copies x before and after this layer
    std::vector<float> h_xin, h_xout;
    // Set under tensor parallelism (tensor_parallel.cuh): sums n floats over the GPUs, in place, on s.
    std::function<void(float*, size_t)> all_reduce;
    // Also there: the o and down projections' partial sums (ps.part), and, with one_shot, decode's
    // all-reduce and residual add by peerAddResidual instead of all_reduce and residualTiles.
    PeerSum ps{};
    bool one_shot = false;

    std::vector<void*> owned;  // every device buffer of the run, freed together by free_all()

    // A device buffer, filled as it is made: 0xFF (NaN as fp32 and as bf16, -1 as int) where a kernel
    // writes it before anything reads it, so that a missed write shows in the checks as NaN, or 0 where
    // zero is its starting state (counters). Nothing is read before it is set.
    template <class T>
    void alloc(T*& p, size_t bytes, int fill = 0xFF) {
        CUDA_CHECK(cudaMalloc(&p, bytes));
        owned.push_back(p);
        CUDA_CHECK(cudaMemset(p, fill, bytes));
    }
    void free_all() {
        for (void* p : owned) CUDA_CHECK(cudaFree(p));
        owned.clear();
    }
    int tiles() const { return int((m.d + kGemvCols - 1) / kGemvCols); }  // 256-column tiles of a row of x
    PagedKv kv(int l) const {
        return {d_pool + size_t(l) * layer_elems, d_table, int(r.pages()), int(r.page), int(m.kv_heads), int(m.hd())};
    }
    // The o and down projections' output: on one GPU the sum over all heads or MLP columns; on
    // each of tp GPUs the sum over its own, to be added to the others' before anything reads it.
    void sum_partials(float* y, int64_t n) {
        if (all_reduce) k("all-reduce", [&] { all_reduce(y, size_t(n)); });
    }
    template <class F>
    void k(const char* name, F&& launch) {
        if (!bd) return launch();
        if (bd->used + 2 > bd->ev.size()) {
            bd->ev.resize(bd->ev.size() + 64);
            for (size_t i = bd->ev.size() - 64; i < bd->ev.size(); ++i) CUDA_CHECK(cudaEventCreate(&bd->ev[i]));
        }
        CUDA_CHECK(cudaEventRecord(bd->ev[bd->used++], s));
        launch();
        CUDA_CHECK(cudaEventRecord(bd->ev[bd->used++], s));
        bd->names.push_back(name);
    }
};

// ---------------------------------------------------------------- setup

// The decoder's stream, and cuBLAS on it with a workspace of its own: a graph capture must not allocate.
static void open_decoder(Decoder& D) {
    CUDA_CHECK(cudaStreamCreate(&D.s));
    CUBLAS_CHECK(cublasCreate(&D.blas));
    CUBLAS_CHECK(cublasSetStream(D.blas, D.s));
    D.alloc(D.d_ws, 32 << 20, 0);
    CUBLAS_CHECK(cublasSetWorkspace(D.blas, D.d_ws, 32 << 20));
}
static void close_decoder(Decoder& D) {
    CUBLAS_CHECK(cublasDestroy(D.blas));
    CUDA_CHECK(cudaStreamDestroy(D.s));
    D.free_all();
}

template <class T>
static std::vector<T> to_host(const T* d, size_t n) {
    std::vector<T> h(n);
    CUDA_CHECK(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
}

static void draw(bf16* w, size_t n, uint64_t seed, int64_t id, float amp, float offset) {
    initWeights<<<1024, 256>>>(w, n, fill_of(seed, id, amp, offset));
    CUDA_CHECK_LAUNCH();
}

// A piece of a weight one GPU of several holds: n columns from column `from` of the whole tensor,
// at column `to` of its slice.
struct Piece {
    int64_t to, from, n;
};

// Every weight in one allocation, drawn on the GPU. Linear weights are [K][N] row-major (x W).
// One GPU's share of the model (D.m.tp > 1: tensor_parallel.cuh) holds its slices of the Q|K|V,
// o, gate/up and down weights: each whole tensor is drawn into `whole` as one GPU draws it, and
// this GPU's pieces copied out, so that one GPU and two compute the very same model.
static void make_weights(Decoder& D, uint64_t seed) {
    const Dims& m = D.m;
    const Dims M = m.whole();  // on one GPU, m itself
    const int64_t g = D.rank;
    CUDA_CHECK(cudaMalloc(&D.d_weights, size_t(m.params()) * sizeof(bf16)));
    D.owned.push_back(D.d_weights);
    bf16* p = D.d_weights;
    auto take = [&](int64_t n) {
        bf16* t = p;
        p += n;
        return t;
    };
    bf16* whole = nullptr;
    if (m.tp > 1) CUDA_CHECK(cudaMalloc(&whole, size_t(std::max(M.d * M.qkv(), M.d * 2 * M.mlp)) * sizeof(bf16)));
    // Tensor `kind` of layer l, K x N in the whole model: drawn in place, or whole and then cut:
    // `rows` rows from row0, each piece's columns into dst, a slice `cols` wide.
    auto split = [&](bf16* dst, int64_t l, Kind kind, int64_t K, int64_t N, float amp, int64_t row0, int64_t rows,
                     int64_t cols, std::initializer_list<Piece> pieces) {
        if (m.tp == 1) {
            draw(dst, size_t(K * N), seed, tensor_id(l, kind), amp, 0.0f);
            return;
        }
        draw(whole, size_t(K * N), seed, tensor_id(l, kind), amp, 0.0f);
        for (const Piece& c : pieces)
            CUDA_CHECK(cudaMemcpy2D(dst + c.to, cols * sizeof(bf16), whole + row0 * N + c.from, N * sizeof(bf16),
                                    c.n * sizeof(bf16), rows, cudaMemcpyDeviceToDevice));
    };
    for (int64_t l = 0; l < m.layers; ++l) {
        LayerWeights w{take(m.d), take(m.d * m.qkv()),   take(m.qd() * m.d),
                       take(m.d), take(m.d * 2 * m.mlp), take(m.mlp * m.d)};
        draw(w.attn_norm, m.d, seed, tensor_id(l, kAttnNorm), 0.25f, 1.0f);
        // Q|K|V: the columns of this GPU's query heads, then of their KV heads in K and in V.
        split(w.qkv, l, kQkv, M.d, M.qkv(), linear_amp(M.d), 0, m.d, m.qkv(),
              {{0, g * m.qd(), m.qd()},
               {m.qd(), M.qd() + g * m.kvd(), m.kvd()},
               {m.qd() + m.kvd(), M.qd() + M.kvd() + g * m.kvd(), m.kvd()}});
        split(w.wo, l, kWo, M.qd(), M.d, linear_amp(M.d), g * m.qd(), m.qd(), m.d, {{0, 0, m.d}});  // its heads' rows
        draw(w.mlp_norm, m.d, seed, tensor_id(l, kMlpNorm), 0.25f, 1.0f);
        // gate/up: this GPU's MLP columns of the gate and the same columns of up; down: their rows.
        split(w.gate_up, l, kGateUp, M.d, 2 * M.mlp, linear_amp(M.d), 0, m.d, 2 * m.mlp,
              {{0, g * m.mlp, m.mlp}, {m.mlp, M.mlp + g * m.mlp, m.mlp}});
        split(w.down, l, kDown, M.mlp, M.d, linear_amp(M.mlp), g * m.mlp, m.mlp, m.d, {{0, 0, m.d}});
        D.layer.push_back(w);
    }
    if (whole) CUDA_CHECK(cudaFree(whole));
    D.embed = take(m.vocab * m.d);
    D.final_norm = take(m.d);
    D.lm_head = take(m.d * m.vocab);
    draw(D.embed, m.vocab * m.d, seed, kEmbed, 1.0f, 0.0f);
    draw(D.final_norm, m.d, seed, kFinalNorm, 0.25f, 1.0f);
    draw(D.lm_head, m.d * m.vocab, seed, kLmHead, linear_amp(m.d), 0.0f);
}

// Device bytes the run needs besides the weights (the activations, the cache, the decode state).
inline size_t work_bytes(const Dims& m, const RunSize& r, size_t* proj_floats) {
    const size_t rows = size_t(r.batch * r.ctx());
    size_t pf = rows * size_t(std::max({m.qkv(), 2 * m.mlp, m.d}));
    for (int64_t n : {m.qkv(), m.d, 2 * m.mlp, m.vocab})  // GEMV planes: at most K N / 16 floats each
        pf = std::max(pf, size_t(std::max(m.d, m.mlp) * n / 16 + r.batch * n));
    *proj_floats = pf;
    const size_t cache = size_t(m.layers) * r.batch * r.pages() * 2 * m.kvd() * r.page * sizeof(bf16);
    return pf * 8 + rows * (m.d * 4 + m.d * 2 * 7 + m.mlp * 2) + rows * m.vocab * 4 + r.tokens * r.batch * m.vocab * 4 +
           cache + size_t(r.batch) * m.heads * 64 * (m.hd() + 2) * 4 + size_t(r.batch) * (2 * m.mlp + m.vocab) * 8 +
           (32 << 20);
}

template <class F>
static void for_hd(int64_t hd, F&& f) {
    if (hd == 32) f(std::integral_constant<int, 32>{});
    else if (hd == 64) f(std::integral_constant<int, 64>{});
    else f(std::integral_constant<int, 128>{});
}

static void make_buffers(Decoder& D, int64_t keep_rows, bool head_major) {
    const Dims& m = D.m;
    const RunSize& r = D.r;
    const size_t rows = size_t(r.batch * r.ctx());
    work_bytes(m, r, &D.proj_floats);
    D.alloc(D.proj, D.proj_floats * 4);
    const int64_t widest = std::max({m.qkv(), 2 * m.mlp, m.vocab, m.d});  // m.d: o and down, summed over GPUs
    for (float*& y : D.gemv_y) D.alloc(y, size_t(r.batch * widest) * 4);
    D.alloc(D.planes, D.proj_floats * 4);
    D.alloc(D.gemv_done, size_t(widest / kGemvCols + 1) * 4, 0);
    D.alloc(D.x, rows * m.d * 4);
    D.alloc(D.ssq, size_t(r.batch * D.tiles()) * 4);
    D.alloc(D.xn, rows * m.d * 2);
    D.alloc(D.q, rows * m.d * 2);
    D.alloc(D.attn, rows * m.d * 2);
    D.alloc(D.act, rows * m.mlp * 2);
    if (head_major) {
        for (bf16** p : {&D.hm.q, &D.hm.k, &D.hm.v, &D.hm.o}) D.alloc(*p, rows * m.d * 2);
        D.hm.group = int(m.group());
    }
    D.alloc(D.logits, size_t(std::max<int64_t>(keep_rows, r.batch)) * m.vocab * 4);
    D.alloc(D.d_tokens, rows * 4, 0);
    D.alloc(D.d_zero, r.batch * 4, 0);
    // Decode: the split-key attention's partials, the state the graph reads, every step's logits.
    // Splits: one chunk of 32 keys for each warp of a block at the longest context (a warp's time
    // is its chain of chunks, one memory trip each), more where that leaves fewer than two blocks
    // an SM; at most 64 (the merge), and no more than the context has chunks. Then no more than
    // the GPU holds at once, while that leaves a split a row: a second wave would begin its chain
    // only as the first ends, where one more chunk a warp in the first costs one memory trip.
    const int64_t ys = m.kv_heads * decode_slices(int(m.group())), chunks = (r.ctx() + 31) / 32;
    const int64_t rows_of_blocks = ys * r.batch, per_sm = (2 * D.sms + rows_of_blocks - 1) / rows_of_blocks;
    int fit = 0;  // decodeSplit's blocks an SM holds at once (its registers decide)
    for_hd(m.hd(), [&](auto hd) {
        CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fit, decodeSplit<hd>, 32 * kDecodeWarps, 0));
    });
    const int64_t splits = std::clamp<int64_t>(std::max(per_sm, (chunks + kDecodeWarps - 1) / kDecodeWarps), 1,
                                               std::min<int64_t>(64, chunks));
    D.splits = int(std::min(splits, std::max<int64_t>(1, int64_t(fit) * D.sms / rows_of_blocks)));
    D.alloc(D.part_ml, size_t(r.batch) * m.heads * D.splits * 2 * 4);
    D.alloc(D.part_o, size_t(r.batch) * m.heads * D.splits * m.hd() * 4);
    D.alloc(D.attn_done, size_t(rows_of_blocks) * 4, 0);
    D.alloc(D.best, size_t(r.batch * sample_chunks(m.vocab)) * sizeof(Best));
    D.alloc(D.sample_done, size_t(r.batch) * 4, 0);
    D.alloc(D.st.len, r.batch * 4, 0);
    D.alloc(D.st.step, 4, 0);
    D.alloc(D.st.next, r.batch * 4, 0);
    D.alloc(D.st.history, size_t(r.tokens) * r.batch * 4);
    D.alloc(D.step_logits, size_t(r.tokens) * r.batch * m.vocab * 4);
}

// The pool: batch x pages blocks per layer, handed out in a seeded random order, so that a
// sequence's blocks are scattered through the pool as a server's are after a while.
static void make_cache(Decoder& D, uint64_t seed) {
    const RunSize& r = D.r;
    D.blocks = int(r.batch * r.pages());
    D.layer_elems = size_t(D.blocks) * 2 * D.m.kvd() * r.page;
    D.alloc(D.d_pool, size_t(D.m.layers) * D.layer_elems * sizeof(bf16));
    D.alloc(D.d_table, size_t(D.blocks) * 4);
    D.h_table.assign(size_t(D.blocks), -1);
    D.held.assign(size_t(r.batch), 0);
    D.free_blocks.resize(size_t(D.blocks));
    std::iota(D.free_blocks.begin(), D.free_blocks.end(), 0);
    std::shuffle(D.free_blocks.begin(), D.free_blocks.end(), std::mt19937_64(seed));
}

// Every sequence gets the blocks that positions 0..positions-1 need; the table goes to the GPU
// (stream-ordered: the step that reads it comes after).
static void hold_positions(Decoder& D, int64_t positions) {
    const int need = int((positions + D.r.page - 1) / D.r.page);
    bool changed = false;
    for (int b = 0; b < D.r.batch; ++b)
        for (; D.held[b] < need; ++D.held[b], changed = true) {
            D.h_table[size_t(b) * D.r.pages() + D.held[b]] = D.free_blocks.back();
            D.free_blocks.pop_back();
        }
    if (changed)
        CUDA_CHECK(cudaMemcpyAsync(D.d_table, D.h_table.data(), D.h_table.size() * 4, cudaMemcpyHostToDevice, D.s));
}

// ---------------------------------------------------------------- the projections

// out (rows x N, fp32) = A (rows x K, bf16) W (K x N, bf16), row-major: cuBLAS sees the
// column-major transpose, out^T = W^T A^T, so W comes first. bf16 in, fp32 accumulate and out.
// Into `out` where given, else D.proj.
static Parts gemm_cublas(Decoder& D, const bf16* A, const bf16* W, int64_t rows, int64_t K, int64_t N,
                         float* out = nullptr) {
    const float one = 1.0f, zero = 0.0f;
    if (!out) out = D.proj;
    CUBLAS_CHECK(cublasGemmEx(D.blas, CUBLAS_OP_N, CUBLAS_OP_N, int(N), int(rows), int(K), &one, W, CUDA_R_16BF, int(N),
                              A, CUDA_R_16BF, int(K), &zero, out, CUDA_R_32F, int(N), CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT));
    return {out, N};
}

// A prefill projection: lesson 20's rung 11 where it runs and the shape fits its tiles, else cuBLAS.
static Parts gemm_prefill(Decoder& D, const bf16* A, const bf16* W, int64_t rows, int64_t K, int64_t N) {
    if (!D.encode || !wgmma_fits(rows, K, N)) return gemm_cublas(D, A, W, rows, K, N);
    gemm_wgmma(D.encode, A, W, D.proj, rows, K, N, D.sms);
    return {D.proj, N};
}

// Projection p of a decode step (layer l; the LM head: kPLmHead), as the step runs it. The GEMV of
// kernels/gemv.cuh normalizes its input as it reads it (XNormed: the RMSNorm before the Q|K|V, the
// gate/up and the LM head) or gates it (XSwiglu: the down projection), and adds its output into the
// residual stream (AddResidual: o and down) or rotates it into the cache (RopeToCache: Q|K|V) as it
// writes it. Where cuBLAS was measured faster (blas_for), cuBLAS runs with kernels of a block per
// 256 columns of a row around it doing the same. Under tensor parallelism the o and down outputs
// are partial sums: stored (YStore, or cuBLAS's output) into D.ps.part, then summed over the GPUs
// and added into x, by peerAddResidual (D.one_shot) or by NCCL and residualTiles. `timing`
// (choose_projections): the Q|K|V output is stored, not written into the cache, and nothing is
// summed over GPUs (one GPU times alone). Returns where the output went (gate/up, LM head).
static Parts project(Decoder& D, Proj p, int64_t l, bool timing = false) {
    static const char* gemv_names[kProjs] = {"qkv proj (norm in; RoPE, cache out)", "o proj (residual add out)",
                                             "gate/up proj (norm in)", "down proj (SwiGLU in, residual add out)",
                                             "lm head (norm in)"};
    const Dims& m = D.m;
    const int64_t B = D.r.batch, K = proj_k(m, p), N = proj_n(m, p);
    const LayerWeights& w = D.layer[size_t(l)];
    const bf16* Ws[kProjs] = {w.qkv, w.wo, w.gate_up, w.down, D.lm_head};
    const XNormed xn{D.x, p == kPQkv ? w.attn_norm : p == kPGateUp ? w.mlp_norm : D.final_norm, D.ssq, m.d, D.tiles()};
    const AddResidual add{D.x, D.ssq, m.d, D.tiles()};
    const dim3 tiles(unsigned(D.tiles()), unsigned(B));
    const bool residual = p == kPWo || p == kPDown, partial = residual && D.all_reduce;
    float* part = partial ? D.ps.part[p == kPDown] : nullptr;  // o and down: two buffers (PeerSum says why)
    const YStore y{part ? part : D.gemv_y[p == kPGateUp], N};
    // one_shot: the sum over the GPUs and the add into x in one kernel (peerAddResidual).
    const bool one_shot = partial && D.one_shot && !timing;
    auto add_in = [&](float* out) {  // out (B x d) into x, after cuBLAS or the all-reduce
        if (!timing && !one_shot) D.sum_partials(out, B * m.d);
        D.k(one_shot ? "all-reduce + residual add (one-shot)" : "residual add", [&] {
            if (one_shot)
                peerAddResidual<<<D.ps.blocks, kGemvCols, 0, D.s>>>(D.ps, p == kPDown, D.x, D.ssq, B, m.d, D.tiles());
            else residualTiles<<<tiles, kGemvCols, 0, D.s>>>(nullptr, nullptr, Parts{out, m.d}, D.x, D.ssq, m.d);
        });
        CUDA_CHECK_LAUNCH();
    };
    if (D.blas_for[p]) {
        const bf16* in = p == kPWo ? D.attn : p == kPDown ? D.act : D.xn;
        if (in == D.xn) D.k("rmsnorm", [&] { normTiles<<<tiles, kGemvCols, 0, D.s>>>(xn, D.xn); });
        if (p == kPDown)
            D.k("swiglu", [&] {
                swiglu<<<unsigned(std::min<int64_t>(1024, (B * m.mlp + 255) / 256)), 256, 0, D.s>>>(D.gu, D.act, B,
                                                                                                    m.mlp);
            });
        Parts out;
        D.k(proj_name(p), [&] { out = gemm_cublas(D, in, Ws[p], B, K, N, part); });
        if (residual) add_in(part ? part : D.proj);
        if (p == kPQkv && !timing)
            D.k("rope + cache", [&] {
                ropeToCache<<<unsigned(B), 256, 0, D.s>>>(out, D.st.len, 1, D.q, D.kv(int(l)), int(m.heads),
                                                          HeadMajor{});
            });
        if (p == kPGateUp) D.gu = out;
        CUDA_CHECK_LAUNCH();
        return out;
    }
    const int splits = gemv_splits(B, K, N, D.sms);
    auto gemv = [&](auto x, auto epilogue) {
        launch_gemv(x, Ws[p], D.planes, epilogue, D.gemv_done, B, K, N, splits, D.pdl, D.s);
    };
    D.k(gemv_names[p], [&] {
        if (p == kPQkv && !timing) gemv(xn, RopeToCache{D.q, D.kv(int(l)), D.st.len, int(m.heads)});
        else if (p == kPWo && partial) gemv(XRows{D.attn, K}, y);
        else if (p == kPWo) gemv(XRows{D.attn, K}, add);
        else if (p == kPDown && partial) gemv(XSwiglu{D.gu.p, m.mlp}, y);
        else if (p == kPDown) gemv(XSwiglu{D.gu.p, m.mlp}, add);
        else gemv(xn, y);
    });
    if (partial) add_in(y.y);
    if (p == kPGateUp) D.gu = {y.y, N};
    return {y.y, N};
}

// ---------------------------------------------------------------- prefill

// Prefill of seq positions of every sequence (tokens in D.d_tokens, batch x seq): every layer on
// batch x seq rows at once, then the LM head on the positions from keep_from on (their logits in
// D.logits), and, with `sample`, the first token drawn from each sequence's last position.
static void prefill(Decoder& D, int64_t seq, int64_t keep_from, bool sample) {
    const Dims& m = D.m;
    const int64_t rows = D.r.batch * seq;
    const unsigned R = unsigned(rows);
    auto copy_x = [&](std::vector<float>& h) {
        h.resize(size_t(rows * m.d));
        CUDA_CHECK(cudaMemcpyAsync(h.data(), D.x, h.size() * 4, cudaMemcpyDeviceToHost, D.s));
        CUDA_CHECK(cudaStreamSynchronize(D.s));
    };
    embedTokens<<<R, 256, 0, D.s>>>(D.d_tokens, D.embed, D.x, m.d);
    CUDA_CHECK_LAUNCH();
    Parts down{nullptr, m.d};
    for (int64_t l = 0; l < m.layers; ++l) {
        const LayerWeights& w = D.layer[l];
        addRmsNorm<<<R, kNormThreads, 0, D.s>>>(D.x, down, w.attn_norm, D.xn, m.d, seq, 0);
        CUDA_CHECK_LAUNCH();
        if (l == D.check_layer) copy_x(D.h_xin);
        if (l == D.check_layer + 1) copy_x(D.h_xout);
        const Parts qkv = gemm_prefill(D, D.xn, w.qkv, rows, m.d, m.qkv());
        ropeToCache<<<R, 256, 0, D.s>>>(qkv, D.d_zero, seq, D.q, D.kv(int(l)), int(m.heads), D.hm);
        CUDA_CHECK_LAUNCH();
        if (D.hm.q) fused_attention(D.hm, D.r.batch, seq, int(m.heads), int(m.hd()), D.attn, D.s);
        else
            for_hd(m.hd(), [&](auto hd) {
                const unsigned blocks = unsigned((rows * m.heads + kAttnWarps - 1) / kAttnWarps);
                causalAttention<hd>
                    <<<blocks, kAttnWarps * 32, 0, D.s>>>(D.q, D.kv(int(l)), D.d_zero, seq, rows, int(m.heads), D.attn);
            });
        CUDA_CHECK_LAUNCH();
        const Parts o = gemm_prefill(D, D.attn, w.wo, rows, m.qd(), m.d);
        D.sum_partials(D.proj, rows * m.d);  // the projections' outputs are in D.proj
        addRmsNorm<<<R, kNormThreads, 0, D.s>>>(D.x, o, w.mlp_norm, D.xn, m.d, seq, 0);
        CUDA_CHECK_LAUNCH();
        const Parts gu = gemm_prefill(D, D.xn, w.gate_up, rows, m.d, 2 * m.mlp);
        swiglu<<<1024, 256, 0, D.s>>>(gu, D.act, rows, m.mlp);
        CUDA_CHECK_LAUNCH();
        down = gemm_prefill(D, D.act, w.down, rows, m.mlp, m.d);
        D.sum_partials(D.proj, rows * m.d);
    }
    addRmsNorm<<<R, kNormThreads, 0, D.s>>>(D.x, down, D.final_norm, D.xn, m.d, seq, keep_from);
    CUDA_CHECK_LAUNCH();
    if (D.check_layer == m.layers - 1) copy_x(D.h_xout);
    const int64_t keep = seq - keep_from;
    const float one = 1.0f, zero = 0.0f;
    CUBLAS_CHECK(cublasGemmEx(D.blas, CUBLAS_OP_N, CUBLAS_OP_N, int(m.vocab), int(D.r.batch * keep), int(m.d), &one,
                              D.lm_head, CUDA_R_16BF, int(m.vocab), D.xn, CUDA_R_16BF, int(m.d), &zero, D.logits,
                              CUDA_R_32F, int(m.vocab), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    if (sample) {
        const Parts lm{D.logits, m.vocab};
        sampleTokens<<<dim3(unsigned(sample_chunks(m.vocab)), unsigned(D.r.batch)), kSampleThreads, 0, D.s>>>(
            lm, int(keep), D.step_logits, D.st, int(D.r.batch), D.rule, D.best, D.sample_done);
        CUDA_CHECK_LAUNCH();
    }
}

// ---------------------------------------------------------------- one decode step

// One token of every sequence: its embedding, every layer on batch rows, the LM head, the sampler,
// and the step's end. Every launch reads the step's positions from D.st, none from the host: the
// same launches serve every step, captured once into a graph (capture_step). The sampler leaves each
// step's logits in D.step_logits ([tokens][batch][vocab], indexed by the step in device memory).
static void decode_step(Decoder& D) {
    const Dims& m = D.m;
    const unsigned B = unsigned(D.r.batch);
    D.k("embed", [&] {  // a plain launch: a graph's first kernel has no kernel before it to overlap
        launch(false, residualTiles, dim3(unsigned(D.tiles()), B), kGemvCols, D.s, D.st.next, D.embed,
               Parts{nullptr, m.d}, D.x, D.ssq, m.d);
    });
    for (int64_t l = 0; l < m.layers; ++l) {
        project(D, kPQkv, l);
        for_hd(m.hd(), [&](auto hd) {
            const dim3 grid(unsigned(D.splits), unsigned(m.kv_heads * decode_slices(int(m.group()))), B);
            D.k("attention (split keys)", [&] {
                launch(D.pdl, decodeSplit<hd>, grid, unsigned(32 * kDecodeWarps), D.s, D.q, D.kv(int(l)), D.st.len,
                       int(m.heads), D.part_ml, D.part_o, D.attn_done, D.attn);
            });
        });
        project(D, kPWo, l);
        project(D, kPGateUp, l);
        project(D, kPDown, l);
    }
    const Parts lm = project(D, kPLmHead, 0);
    D.k("sample", [&] {
        launch(D.pdl, sampleTokens, dim3(unsigned(sample_chunks(m.vocab)), B), kSampleThreads, D.s, lm, 1,
               D.step_logits, D.st, int(B), D.rule, D.best, D.sample_done);
    });
    D.k("advance", [&] { launch(D.pdl, advance, 1, 64, D.s, D.st, int(B)); });
}

// One decode step captured into a graph and instantiated; `overlap`: launch the decode kernels
// with programmatic dependent launch (kernels/pdl.cuh). The executable graph keeps what it needs.
// Under tensor parallelism each GPU's host thread captures its own step at the same time, NCCL's
// calls included: thread-local capture, so that one thread's capture does not forbid the other's
// calls (NCCL's documentation, "Using NCCL with CUDA Graphs").
static cudaGraphExec_t capture_step(Decoder& D, bool overlap) {
    const bool was = D.pdl;
    D.pdl = overlap;
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    const cudaStreamCaptureMode mode = D.all_reduce ? cudaStreamCaptureModeThreadLocal : cudaStreamCaptureModeGlobal;
    CUDA_CHECK(cudaStreamBeginCapture(D.s, mode));
    decode_step(D);
    CUDA_CHECK(cudaStreamEndCapture(D.s, &graph));
    CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    CUDA_CHECK(cudaGraphDestroy(graph));
    D.pdl = was;
    return exec;
}
