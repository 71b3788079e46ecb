// Lesson 24 of the course (the transformer decoder): the last kernels of a step. The sampler turns
// each sequence's logits into its next token (a block per 1024 logits, the last block of each
// sequence drawing): greedy (the largest logit, the lowest index on a
// tie), top-k (among the k largest) or top-p (among the fewest largest whose probability reaches
// p), both with a seeded generator; then `advance` moves every sequence one position on. Both
// read and write their state in device memory, so one captured graph serves every step.
// Run: ./build/bin/transformer_decoder   (README.md is the handout)
#pragma once
#include <cstdint>

#include "../problem.cuh"
#include "elementwise.cuh"
#include "pdl.cuh"

constexpr int kSampleThreads = 1024;

// Decode state in device memory: what the graph reads instead of kernel arguments.
struct DecodeState {
    int* len;      // [batch] positions in the cache before this step
    int* step;     // the step number (0: the token prefill sampled)
    int* next;     // [batch] this step's input token, the last sampled one
    int* history;  // [tokens][batch] every sampled token
};

struct SampleRule {
    Sample kind;
    int top_k;
    float top_p;
    uint64_t seed;
};

// (value, index) of the largest value, the lowest index among equals.
__device__ void block_argmax(float& v, int& idx, float* shv, int* shi) {
    for (int o = 16; o > 0; o >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, v, o);
        const int oi = __shfl_xor_sync(0xffffffffu, idx, o);
        if (ov > v || (ov == v && oi < idx)) v = ov, idx = oi;
    }
    __syncthreads();
    if (threadIdx.x % 32 == 0) shv[threadIdx.x / 32] = v, shi[threadIdx.x / 32] = idx;
    __syncthreads();
    v = shv[0], idx = shi[0];
    for (int i = 1; i < kSampleThreads / 32; ++i)
        if (shv[i] > v || (shv[i] == v && shi[i] < idx)) v = shv[i], idx = shi[i];
}

// A block's largest logit and its index (the lowest among equals), for the sequence's last block.
struct Best {
    float v;
    int i;
};
inline int sample_chunks(int64_t vocab) { return int((vocab + kSampleThreads - 1) / kSampleThreads); }

// Grid (sample_chunks(vocab), batch): block c of sequence b takes logits c * 1024 .. of the row
// b * keep + keep - 1 of `lm` (prefill keeps `keep` rows per sequence, decode one), a logit a
// thread: it copies them to logits[step][b] (for the checks) and leaves their largest in
// best[b][c]. The last block of the sequence to finish (done[b], which it sets back to zero) draws
// the token: greedy, the largest of the blocks' largest; top-k and top-p, over the whole row,
// written by then.
__global__ void __launch_bounds__(kSampleThreads)
    sampleTokens(Parts lm, int keep, float* logits, DecodeState st, int batch, SampleRule rule, Best* best_of,
                 unsigned* done) {
    __shared__ float shv[32];
    __shared__ int shi[32];
    __shared__ float prefix[kSampleThreads];
    __shared__ bool last;
    wait_prior();  // the LM head's logits (pdl.cuh)
    let_next_start();
    const int b = blockIdx.y, V = int(lm.cols), step = *st.step, chunks = int(gridDim.x);
    float* lg = logits + (size_t(step) * batch + b) * V;
    float best = -INFINITY;
    int arg = V;
    const int mine_i = int(blockIdx.x) * kSampleThreads + int(threadIdx.x);
    if (mine_i < V) {
        const float v = lm.at(int64_t(b) * keep + keep - 1, mine_i);
        lg[mine_i] = v;
        if (v > best) best = v, arg = mine_i;
    }
    block_argmax(best, arg, shv, shi);
    if (threadIdx.x == 0) best_of[size_t(b) * chunks + blockIdx.x] = {best, arg};
    __threadfence();  // this block's logits and its best are visible before its count is
    __syncthreads();
    if (threadIdx.x == 0) {
        last = atomicAdd(&done[b], 1u) == unsigned(chunks - 1);
        if (last) done[b] = 0;
    }
    __syncthreads();
    if (!last) return;
    best = -INFINITY;
    arg = V;
    for (int c = threadIdx.x; c < chunks; c += kSampleThreads) {
        const float v = __ldcg(&best_of[size_t(b) * chunks + c].v);
        const int i = __ldcg(&best_of[size_t(b) * chunks + c].i);
        if (v > best || (v == best && i < arg)) best = v, arg = i;
    }
    block_argmax(best, arg, shv, shi);
    int token = arg < V ? arg : 0;  // no finite logit (a NaN row): token 0, and the checks fail on the logits
    if (rule.kind != Sample::Greedy) {
        // The kept set is {i : lg[i] >= tau}; tau by bisection between the smallest logit and the
        // largest. The row is read from L2 (__ldcg): other blocks wrote it.
        float low = best;
        for (int i = threadIdx.x; i < V; i += kSampleThreads) low = fminf(low, __ldcg(lg + i));
        float neg = -low;
        int unused = 0;
        block_argmax(neg, unused, shv, shi);
        float lo = -neg, hi = best;
        const float total = block_sum<kSampleThreads>(
            [&] {
                float s = 0.0f;
                for (int i = threadIdx.x; i < V; i += kSampleThreads) s += __expf(__ldcg(lg + i) - best);
                return s;
            }(),
            shv);
        for (int it = 0; it < 40; ++it) {
            const float mid = 0.5f * (lo + hi);
            float c = 0.0f;
            for (int i = threadIdx.x; i < V; i += kSampleThreads)
                if (__ldcg(lg + i) >= mid) c += rule.kind == Sample::TopK ? 1.0f : __expf(__ldcg(lg + i) - best);
            c = block_sum<kSampleThreads>(c, shv);
            const bool enough = rule.kind == Sample::TopK ? c >= float(rule.top_k) : c >= rule.top_p * total;
            if (enough) lo = mid;
            else hi = mid;
        }
        // Sample among the kept logits in index order: thread t sums its contiguous share, a scan
        // over threads finds the share holding u * mass, and that thread walks it.
        const int per = (V + kSampleThreads - 1) / kSampleThreads, i0 = threadIdx.x * per, i1 = min(V, i0 + per);
        float mine = 0.0f;
        for (int i = i0; i < i1; ++i)
            if (__ldcg(lg + i) >= lo) mine += __expf(__ldcg(lg + i) - best);
        prefix[threadIdx.x] = mine;
        __syncthreads();
        if (threadIdx.x == 0) {
            float run = 0.0f;
            for (int t = 0; t < kSampleThreads; ++t) {
                const float v = prefix[t];
                prefix[t] = run;
                run += v;
            }
            const uint64_t h = verify::attention_mix(rule.seed * 0x9E3779B97F4A7C15ull + uint64_t(step) * 65536 + b);
            shv[0] = float(h >> 40) * (1.0f / 16777216.0f) * run;  // u * mass
            shi[1] = token;  // kept where rounding leaves u * mass past the last kept logit
        }
        __syncthreads();
        const float target = shv[0];
        float run = prefix[threadIdx.x];
        if (run <= target && target < run + mine)
            for (int i = i0; i < i1; ++i)
                if (__ldcg(lg + i) >= lo && (run += __expf(__ldcg(lg + i) - best)) > target) {
                    shi[1] = i;
                    break;
                }
        __syncthreads();
        token = shi[1];
    }
    if (threadIdx.x == 0) {
        st.next[b] = token;
        st.history[size_t(step) * batch + b] = token;
    }
}

// Every sequence one position longer, the step one on: the last node of the decode graph.
__global__ void advance(DecodeState st, int batch) {
    wait_prior();  // the sampler reads step and len (pdl.cuh)
    let_next_start();
    if (threadIdx.x < batch) st.len[threadIdx.x] += 1;
    if (threadIdx.x == 0) *st.step += 1;
}
