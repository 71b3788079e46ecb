// verify/graphs.h - the CPU reference of lesson 18 (CUDA graphs): the workload of
// many small kernels, computed with the very same float operations in the very
// same order as the GPU, so that every mode of the lesson must match it bit for
// bit, and the exact (bitwise) check of a float array.
//
// One step of the workload on a state x[0..n):
//   prev = x                                               (a copy: one memcpy node)
//   x[i] = w2 prev[i+1] + (w1 prev[i] + w0 prev[i-1])      (kernel 0: 3-point stencil, periodic)
//   x[i] = x[i] a_j + b_j        for j = 1 .. K-1          (kernels 1..K-1: affine updates in place)
// Every multiply-add is one fused operation, written out on both sides (fmaf
// here, __fmaf_rn in the kernels), and the first product is a plain rounded
// multiply (w0 * prev[i-1] here, __fmul_rn there): no compiler can contract or
// split an operation differently on the two sides. The weights and coefficients
// are exact floats (multiples of powers of two), chosen on the host and passed
// to the kernels as arguments.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>
#include "common/report.h"
#include "verify/compare.h"  // check_same_bits
#include "verify/parallel.h"

namespace verify {

// The stencil's weights: a diffusion step (they add up to 1).
constexpr float kStencilW0 = 0.25f, kStencilW1 = 0.5f, kStencilW2 = 0.25f;

// The coefficients of one affine update, x = x a + b.
struct Affine {
    float a, b;
};

// Kernel j (1 <= j < K) of every step: a = 1 - (1 + j % 4) 2^-16, b = (j % 3) 2^-16.
// A very slow contraction towards a fixed point near 0.4: after 1000 steps of 19
// updates the state still depends on where it started (and on every single
// update: leave one out and the bits change).
inline Affine step_affine(int j) {
    return {1.0f - static_cast<float>(1 + j % 4) * 0x1p-16f, static_cast<float>(j % 3) * 0x1p-16f};
}

// Kernel 0 on one element, given its left, centre and right neighbours in prev.
inline float stencil_point(float left, float centre, float right) {
    float t = kStencilW0 * left;           // __fmul_rn(w0, left) on the GPU
    t = std::fmaf(kStencilW1, centre, t);  // __fmaf_rn(w1, centre, t)
    return std::fmaf(kStencilW2, right, t);
}

// Kernel j >= 1 on one element.
inline float affine_point(float x, Affine c) { return std::fmaf(x, c.a, c.b); }

// The workload on the CPU: `steps` steps of `kernels_per_step` kernels (the stencil and
// kernels_per_step - 1 affine updates) on x[0..n), in place. The affine kernels touch one
// element each, so the K kernels of a step are applied element by element here (the same
// operations in the same order per element as K sweeps over the array). With state_sum,
// adds every step's final state into state_sum[0..n) (double), for the cuBLAS readout of
// mode (f). Blocks of elements run on all host cores for large n; the result does not
// depend on the thread count.
inline void steps_reference(float* x, uint64_t n, int64_t steps, int kernels_per_step, double* state_sum = nullptr) {
    std::vector<float> prev(n);
    std::vector<Affine> coef(static_cast<size_t>(kernels_per_step > 1 ? kernels_per_step : 1));
    for (int j = 1; j < kernels_per_step; ++j) coef[size_t(j)] = step_affine(j);
    const uint64_t grain = std::max<uint64_t>(items_per_block(2 * uint64_t(kernels_per_step)), uint64_t(1) << 14);
    for (int64_t s = 0; s < steps; ++s) {
        std::memcpy(prev.data(), x, n * sizeof(float));
        const float* p = prev.data();
        parallel_blocks(n, grain, [&](uint64_t begin, uint64_t end) {
            for (uint64_t i = begin; i < end; ++i) {
                const uint64_t l = i == 0 ? n - 1 : i - 1;
                const uint64_t r = i + 1 == n ? 0 : i + 1;
                float t = stencil_point(p[l], p[i], p[r]);
                for (int j = 1; j < kernels_per_step; ++j) t = affine_point(t, coef[size_t(j)]);
                x[i] = t;
                if (state_sum) state_sum[i] += static_cast<double>(t);
            }
        });
    }
}

// The references of lesson 18's run: state a (and its state sums, for mode (f), where state_sum
// is given) and, where b is given, state b, each advanced `steps` steps in place. A state of up to
// 2^14 floats is one block of steps_reference, one thread's work: then the two states run side by
// side, one thread each; larger states take every core in turn. Returns the host threads used.
inline int steps_references(float* a, float* b, uint64_t n, int64_t steps, int kernels_per_step,
                            double* state_sum = nullptr) {
    auto one = [&](int64_t which) {
        if (which == 0) steps_reference(a, n, steps, kernels_per_step, state_sum);
        else steps_reference(b, n, steps, kernels_per_step);
    };
    const bool side_by_side = b != nullptr && n <= (uint64_t(1) << 14);
    if (side_by_side) {
        parallel_for(2, one);
    } else {
        one(0);
        if (b) one(1);
    }
    return n > (uint64_t(1) << 14) ? host_threads() : side_by_side ? 2 : 1;
}

// y[r] = sum_i M[r + i m] v[i] for r < m: an m x n column-major matrix (cuBLAS's layout,
// leading dimension m) times a double vector, in double.
inline void gemv_reference(const float* M, uint64_t m, uint64_t n, const double* v, double* y) {
    for (uint64_t r = 0; r < m; ++r) y[r] = 0.0;
    for (uint64_t i = 0; i < n; ++i)
        for (uint64_t r = 0; r < m; ++r) y[r] += static_cast<double>(M[r + i * m]) * v[i];
}

}  // namespace verify
