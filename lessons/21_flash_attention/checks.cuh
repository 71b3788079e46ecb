// Lesson 21 of the course (flash attention), part 1: every rung against the CPU at small N, every
// element, causal and not. main.cu runs it after the yardsticks, before the timed sizes
// (timed.cuh).
// Run: ./build/bin/flash_attention --quick   (README.md is the handout)
#pragma once
#include <algorithm>
#include <string>
#include <vector>

#include "common/check.h"
#include "verify/attention.h"

#include "kernels/4_standard.cuh"
#include "problem.cuh"

// Every element, causal and not: every rung at N = 256 and N = 200 (a multiple of no tile), 3 heads;
// the fused rungs (5, 6, 8, 9) at N = 1000, 1 head: 8 key tiles of 128 (the last one partial), more
// than rungs 8 and 9 have stages (2 to 4), and 16 of 64 for rung 6's 2 or 3, so every ring is
// refilled and its barriers change phase, here and under compute-sanitizer (--quick). Rung 4 and
// the softmax rungs have no such ring (and cuBLAS picks other kernels at other sizes: the
// handout's note on racecheck).
static void check_small(Context& c, const std::vector<int>& ds) {
    const Plan& plan = c.plan;
    for (int d : ds)
        for (bool cz : {false, true})
            for (int N : {256, 200, 1000}) {
                const bool fused_only = N == 1000;
                if (fused_only && std::none_of(plan.ladder.begin(), plan.ladder.end(),
                                               [&](int i) { return plan.runs(i, d) && plan.fused(i); }))
                    continue;  // no fused rung runs at this d: no problem to set up
                Problem p{fused_only ? 1 : 3, N, d, cz, c.seed + 17 * N + d + cz};
                setup(p);
                const std::vector<double> ref = reference_rows(p, all_rows(p));
                const std::string tag = "N=" + std::to_string(N) + ", d=" + std::to_string(d) + (cz ? ", causal" : "");
                const size_t nn = size_t(p.heads) * N * N;
                if (!fused_only) {
                    CUDA_CHECK(cudaMalloc(&g_S, nn * sizeof(float)));
                    CUDA_CHECK(cudaMalloc(&g_P, nn * sizeof(bf16)));
                    // Poison S (0xFF bytes are NaN): a score cuBLAS left unwritten would show. It also gives
                    // compute-sanitizer initcheck a defined start: it reports the scores cuBLAS wrote as
                    // uninitialized when they are copied back (their values match the CPU's).
                    CUDA_CHECK(cudaMemset(g_S, 0xFF, nn * sizeof(float)));
                }
                for (int i : plan.ladder) {
                    const Rung& r = plan.rungs[i];
                    if (!plan.runs(i, d) || (fused_only && !plan.fused(i))) continue;
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
                        c.check(got, ref_P.data(), std::string(r.name) + " vs CPU, every element, " + tag);
                    } else if (r.kind == Kind::Attention) {
                        CUDA_CHECK(cudaMemset(p.d_O, 0xFF, p.elems() * sizeof(bf16)));  // 0xFFFF is a bf16 NaN
                        r.attention(p.args());
                        verify::host_vector<float> got = copy_out(p.d_O, p.elems());
                        c.check(got, ref.data(), std::string(r.name) + " vs CPU, every element, " + tag);
                    }
                }
                if (!fused_only) {
                    CUDA_CHECK(cudaFree(g_S));
                    CUDA_CHECK(cudaFree(g_P));
                }
                release(p);
            }
}
