// Lesson 21 of the course (flash attention), rung 5: fused attention with the online softmax, scalar math.
//
// Before: rung 4 (kernels/4_standard.cuh), the standard attention: S = Q K^T and O = P V with
//         cuBLAS and rung 3's softmax between them, through a heads x N x N score matrix in
//         device memory.
// Here:   the algorithm of FlashAttention with no hardware detail. One block owns a tile of kBM = 32
//         queries (4 threads per query) and walks over the keys in tiles of kBN = 32, loading K and V
//         tiles into shared memory (as fp32). For each key tile it computes the 32 x 32 scores,
//         updates each query's running maximum m and sum l, rescales the output accumulated so far
//         by alpha = exp(m_old - m_new), and adds P V. O is divided by l once, at the end. The
//         scores never leave the block: memory holds only Q, K, V and O.
// Lacks:  speed: every multiply-add is an FFMA fed from shared memory (two loads per FMA), far
//         from the tensor cores.
// Next:   rung 6 does the two products on tensor cores with mma.sync, FlashAttention-2's work split
//         (diff kernels/5_fused_scalar.cuh kernels/6_fused_mma.cuh).
// Run:    ./build/bin/flash_attention --rung=5
#pragma once
#include "attention.cuh"
#include "common/check.h"

namespace rung5 {

constexpr int kBM = 32, kBN = 32;  // queries per block, keys per tile
constexpr int kThreads = 128;      // 4 threads per query: thread t owns query t / 4, columns t % 4 + 4 i
template <int D>
constexpr int smem_bytes() {  // Q and K padded by one float (no bank conflicts), V, P padded
    return (kBM * (D + 1) + kBN * (D + 1) + kBN * D + kBM * (kBN + 1)) * int(sizeof(float));
}

// With no minimum of blocks per SM, ptxas (CUDA 13.0) gives flashScalar<128> 96 registers in sm_80
// and sm_89 code and spills 8 bytes; with a minimum named (1: shared memory, not registers, bounds
// the blocks per SM) it takes 114 and spills nothing. sm_90 and newer code keeps the default
// (72 registers for sm_90a, no spill).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define L21_SCALAR_BOUNDS __launch_bounds__(kThreads, 1)
#else
#define L21_SCALAR_BOUNDS __launch_bounds__(kThreads)
#endif

template <int D>
__global__ void L21_SCALAR_BOUNDS flashScalar(Attention a) {
    extern __shared__ float smem[];
    float* Qs = smem;                // [kBM][D + 1]
    float* Ks = Qs + kBM * (D + 1);  // [kBN][D + 1]
    float* Vs = Ks + kBN * (D + 1);  // [kBN][D]
    float* Ps = Vs + kBN * D;        // [kBM][kBN + 1]
    const int tid = threadIdx.x, r = tid / 4, sub = tid % 4;
    const int N = a.N, m0 = blockIdx.x * kBM;
    const size_t base = size_t(blockIdx.y) * N * D;  // this head
    const bf16 *Q = a.Q + base, *K = a.K + base, *V = a.V + base;
    const int qrow = m0 + r;
    const int kv_end = a.causal ? min(N, m0 + kBM) : N;  // causal: no key past the last query

    for (int i = tid; i < kBM * D; i += kThreads) {
        const int rr = i / D, c = i % D;
        Qs[rr * (D + 1) + c] = m0 + rr < N ? __bfloat162float(Q[size_t(m0 + rr) * D + c]) : 0.f;
    }
    float o[D / 4] = {};           // this thread's columns sub + 4 i of its query's output
    float m = -INFINITY, l = 0.f;  // running max and sum of its query (the 4 threads keep copies)
    for (int n0 = 0; n0 < kv_end; n0 += kBN) {
        __syncthreads();  // everyone is done with the previous K, V, P tiles (and Q is loaded)
        for (int i = tid; i < kBN * D; i += kThreads) {
            const int rr = i / D, c = i % D;
            const bool in = n0 + rr < N;
            Ks[rr * (D + 1) + c] = in ? __bfloat162float(K[size_t(n0 + rr) * D + c]) : 0.f;
            Vs[rr * D + c] = in ? __bfloat162float(V[size_t(n0 + rr) * D + c]) : 0.f;
        }
        __syncthreads();

        // Scores of this query against 8 of the tile's keys (columns sub, sub + 4, ...), masked to -inf.
        float s[kBN / 4];
        float mx = m;
#pragma unroll
        for (int i = 0; i < kBN / 4; ++i) {
            const int c = sub + 4 * i, key = n0 + c;
            float dot = 0.f;
#pragma unroll 4
            for (int k = 0; k < D; ++k) dot += Qs[r * (D + 1) + k] * Ks[c * (D + 1) + k];
            s[i] = (key < N && !(a.causal && key > qrow)) ? dot * a.scale : -INFINITY;
            mx = fmaxf(mx, s[i]);
        }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));  // the 4 threads of a query are lanes 4q..4q+3
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        // The online softmax: rescale what was summed against the old maximum.
        // Exercise 3 of the handout: set alpha to 1 (no rescaling) and see which checks fail, and by how much
        const float alpha = m == -INFINITY ? 0.f : __expf(m - mx);
        float rs = 0.f;
#pragma unroll
        for (int i = 0; i < kBN / 4; ++i) {
            const float p = s[i] == -INFINITY ? 0.f : __expf(s[i] - mx);
            Ps[r * (kBN + 1) + sub + 4 * i] = p;
            rs += p;
        }
        rs += __shfl_xor_sync(0xffffffffu, rs, 1);
        rs += __shfl_xor_sync(0xffffffffu, rs, 2);
        l = l * alpha + rs;
        m = mx;
        __syncwarp();  // this query's row of P was written by its 4 lanes, all in this warp

        // O = alpha * O + P V (this thread's columns).
#pragma unroll  // fully: o[] must be indexed by constants to stay in registers
        for (int i = 0; i < D / 4; ++i) {
            const int c = sub + 4 * i;
            float acc = o[i] * alpha;
#pragma unroll 16
            for (int j = 0; j < kBN; ++j) acc += Ps[r * (kBN + 1) + j] * Vs[j * D + c];
            o[i] = acc;
        }
    }
    if (qrow < N) {
        bf16* out = a.O + base + size_t(qrow) * D;
        const float inv = 1.f / l;
#pragma unroll
        for (int i = 0; i < D / 4; ++i) out[sub + 4 * i] = __float2bfloat16(o[i] * inv);
    }
}

template <int D>
void launch_d(const Attention& a) {
    static bool raised = false;  // above 48 KB of dynamic shared memory only after opting in
    if (!raised) {
        CUDA_CHECK(cudaFuncSetAttribute(flashScalar<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes<D>()));
        raised = true;
    }
    const dim3 grid((a.N + kBM - 1) / kBM, unsigned(a.heads));
    flashScalar<D><<<grid, kThreads, smem_bytes<D>()>>>(a);
    CUDA_CHECK_LAUNCH();
}
inline void launch(const Attention& a) {
    if (a.d == 64) launch_d<64>(a);
    else launch_d<128>(a);
}

}  // namespace rung5
