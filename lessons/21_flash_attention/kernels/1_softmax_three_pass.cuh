// Lesson 21 of the course (flash attention), rung 1: row-wise softmax in three passes, one warp per row.
//
// Before: lesson 14 reduced an array with warp shuffles; lesson 20 multiplied bf16 matrices on tensor cores.
// Here:   softmax(x)_j = exp(x_j - max) / sum_k exp(x_k - max), the textbook way: pass 1 finds the
//         row's maximum, pass 2 sums exp(x - max), pass 3 writes the normalized values. One warp
//         owns a row; its 32 lanes stride through it and combine with shuffles (warp_max, warp_sum).
//         Subtracting the maximum keeps exp() from overflowing (exp(89) is already inf in fp32).
// Lacks:  the row is read three times from memory: 3 reads + 1 write per element.
// Next:   rung 2 finds the maximum and the sum in one pass, the online softmax
//         (diff kernels/1_softmax_three_pass.cuh kernels/2_softmax_online.cuh).
// Run:    ./build/bin/flash_attention --rung=1
#pragma once
#include "attention.cuh"
#include "common/check.h"

namespace rung1 {

constexpr int kWarps = 8;  // rows per block

__global__ void __launch_bounds__(32 * kWarps) softmaxThreePass(Softmax a) {
    const int lane = threadIdx.x % 32;
    const int64_t row = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32;
    if (row >= a.rows) return;  // a whole warp leaves together
    const float* s = a.S + row * a.cols;
    bf16* p = a.P + row * a.cols;
    const int valid = a.causal ? int(row % a.cols) + 1 : a.cols;  // entries past `valid` are masked

    float m = -INFINITY;  // pass 1: the maximum
    for (int j = lane; j < valid; j += 32) m = fmaxf(m, s[j]);
    m = warp_max(m);
    float l = 0.f;  // pass 2: the sum of exp(x - max)
    for (int j = lane; j < valid; j += 32) l += exp2f((s[j] - m) * kLog2e);
    l = warp_sum(l);
    const float inv = 1.f / l;  // pass 3: normalize (masked entries are 0)
    for (int j = lane; j < a.cols; j += 32) p[j] = __float2bfloat16(j < valid ? exp2f((s[j] - m) * kLog2e) * inv : 0.f);
}

inline void launch(const Softmax& a) {
    const unsigned blocks = unsigned((a.rows + kWarps - 1) / kWarps);
    softmaxThreePass<<<blocks, 32 * kWarps>>>(a);
    CUDA_CHECK_LAUNCH();
}

}  // namespace rung1
