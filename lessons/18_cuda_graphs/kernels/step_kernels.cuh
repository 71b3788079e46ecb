// Lesson 18 - CUDA graphs: the small kernels of the workload.
//
// The lesson is about how kernels are launched, not about what they compute, so
// the kernels are tiny and deliberately plain: one thread per element, a few
// flops each. A step of the workload is a copy (prev = x, in main.cu), the
// stencil, and K - 1 affine updates (verify/graphs.h has the CPU reference and
// the coefficients). Every kernel works on the elements [first, first + count)
// of the array, so that the fork/join mode (e) can give each half of the array
// to its own branch of the graph; the other modes pass first = 0, count = n.
// The arithmetic is written with explicit rounding intrinsics (__fmul_rn,
// __fmaf_rn), which the compiler never contracts or splits: the CPU reference
// does the same operations and every mode must match it bit for bit.
// Before: lesson 17 (fusion and the roofline). Next: lesson 19 (mixed precision).
// Run: ./build/bin/cuda_graphs
#pragma once
#include <cuda_runtime.h>
#include <cstddef>

namespace step {

constexpr int kThreads = 256;

// Kernel 0 of a step: x[i] = w2 prev[i+1] + (w1 prev[i] + w0 prev[i-1]), periodic in [0, n).
// It reads the snapshot prev, never x: the neighbours it needs are not overwritten under it.
__global__ void stencil3(const float* __restrict__ prev, float* __restrict__ x, size_t n, size_t first, size_t count,
                         float w0, float w1, float w2) {
    // EXERCISE 1 BEGIN: x[i] = w2 prev[i+1] + (w1 prev[i] + w0 prev[i-1]) for i = first + k, k < count; periodic in [0, n)
    // HINT: element 0's left neighbour is element n - 1, element n - 1's right neighbour is element 0
    // HINT: the CPU reference rounds t = w0 prev[left], t = fma(w1, prev[i], t), x[i] = fma(w2, prev[right], t): use
    // HINT: __fmul_rn and __fmaf_rn in that order, or the bits differ
    const size_t k = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (k >= count) return;
    const size_t i = first + k;
    const size_t left = i == 0 ? n - 1 : i - 1;
    const size_t right = i + 1 == n ? 0 : i + 1;
    float t = __fmul_rn(w0, prev[left]);
    t = __fmaf_rn(w1, prev[i], t);
    x[i] = __fmaf_rn(w2, prev[right], t);
    // EXERCISE 1 END
}

// Kernels 1..K-1 of a step: x[i] = x[i] a + b, in place.
__global__ void affine(float* __restrict__ x, size_t first, size_t count, float a, float b) {
    const size_t k = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (k >= count) return;
    x[first + k] = __fmaf_rn(x[first + k], a, b);
}

// Nothing at all: what remains of a launch when the kernel does no work is its overhead.
__global__ void empty() {}

}  // namespace step
