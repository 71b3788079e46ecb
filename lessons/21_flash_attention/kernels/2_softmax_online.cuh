// Lesson 21 of the course (flash attention), rung 2: the online softmax, one warp per row.
//
// Before: rung 1 read the row three times (max, sum, normalize).
// Here:   the maximum and the sum in ONE pass. Each lane keeps a running maximum m and a running
//         sum l of exp(x - m); when a larger x arrives, the sum so far was taken against the old
//         maximum, so it is rescaled: l = l * exp(m_old - m_new) + exp(x - m_new). The 32 lanes'
//         (m, l) pairs are merged the same way (rescale each l to the warp's maximum, then add).
//         README.md works through an example with numbers. This rescaling is the whole trick of
//         flash attention (rungs 5-7): it lets a row be processed in pieces.
// Lacks:  2 reads + 1 write per element: the normalize pass still reads the row again.
// Next:   rung 3 gives a row to a whole block that keeps it in registers between the passes
//         (diff kernels/2_softmax_online.cuh kernels/3_softmax_block.cuh).
// Run:    ./build/bin/flash_attention --rung=2
#pragma once
#include "attention.cuh"
#include "common/check.h"

namespace rung2 {

constexpr int kWarps = 8;  // rows per block

__global__ void __launch_bounds__(32 * kWarps) softmaxOnline(Softmax a) {
    const int lane = threadIdx.x % 32;
    const int64_t row = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32;
    if (row >= a.rows) return;  // a whole warp leaves together
    const float* s = a.S + row * a.cols;
    bf16* p = a.P + row * a.cols;
    const int valid = a.causal ? int(row % a.cols) + 1 : a.cols;  // entries past `valid` are masked

    float m = -INFINITY, l = 0.f;  // pass 1: running maximum and running sum together
    for (int j = lane; j < valid; j += 32) {
        const float x = s[j];
        const float m_new = fmaxf(m, x);
        l = l * exp2f((m - m_new) * kLog2e) + exp2f((x - m_new) * kLog2e);  // exp2f(-inf) = 0 on the first x
        m = m_new;
    }
    const float m_row = warp_max(m);                                       // merge the lanes: one maximum,
    l = warp_sum(m == -INFINITY ? 0.f : l * exp2f((m - m_row) * kLog2e));  // every sum rescaled to it
    const float inv = 1.f / l;                                             // pass 2: normalize (masked entries are 0)
    for (int j = lane; j < a.cols; j += 32)
        p[j] = __float2bfloat16(j < valid ? exp2f((s[j] - m_row) * kLog2e) * inv : 0.f);
}

inline void launch(const Softmax& a) {
    const unsigned blocks = unsigned((a.rows + kWarps - 1) / kWarps);
    softmaxOnline<<<blocks, 32 * kWarps>>>(a);
    CUDA_CHECK_LAUNCH();
}

}  // namespace rung2
