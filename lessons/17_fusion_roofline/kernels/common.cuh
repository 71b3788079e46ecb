// Lesson 17 - fusion and the roofline: what the rung files share (kernels/1_... to 3_...).
//
// The buffers of the elementwise chain y = relu(x * x + 1). Only rung 1 uses the two
// intermediates; every rung keeps its own kernels, so that
// `diff kernels/2_fused.cuh kernels/3_coarsened.cuh` shows one idea.
// Run: ./build/bin/fusion_roofline --rung=N
#pragma once
#include <cstddef>

struct Chain {
    const float* x;  // input, n floats
    float* t1;       // x * x       (rung 1 only: the intermediates that go through DRAM)
    float* t2;       // t1 + 1      (rung 1 only)
    float* y;        // output, n floats
    size_t n;
};
