// Lesson 14 of the course (reduction): what the rung files share (kernels/1_... to 12_...).
//
// The launcher interface of the ladder (Pass, Scratch) and, for rungs 9-12,
// 16-byte vector types for float and int. Every rung keeps its own kernel and
// block reduction, so that `diff kernels/N_a.cuh kernels/M_b.cuh` shows one idea.
// Run: ./build/bin/reduction --rung=N   (one rung alone, beside CUB; README.md is the handout)
#pragma once
#include <cuda_runtime.h>
#include <cstddef>
#include <cstdint>

// What one call of a rung's launcher did: it reduced `count` values to `values`
// values (one per block for the multi-pass rungs 1-7, one for rungs 8-12), and
// every input went through at most `depth` rounded additions on the way (the
// depth of the summation tree: the float error bound grows with it, README
// "Floating point").
struct Pass {
    size_t values;
    uint64_t depth;
};

// Device scratch space that main() allocates once for all rungs.
template <class Acc>
struct Scratch {
    Acc* partials;      // one value per block (rungs 8-12), at least `grid` of them
    unsigned* counter;  // blocks done (rung 11); zero before and after every launch
    unsigned grid;      // blocks of the grid-stride rungs 5-11: resident blocks per SM x SMs
};

// The 16-byte vector of T (rungs 9-12 load one per thread per step).
template <class T>
struct Vec4;
template <>
struct Vec4<float> {
    using type = float4;
};
template <>
struct Vec4<int> {
    using type = int4;
};

// The four lanes of a vector added as a pair of pairs (2 additions deep), in Acc.
template <class Acc, class V>
__device__ __forceinline__ Acc sum4(const V& v) {
    return (Acc(v.x) + Acc(v.y)) + (Acc(v.z) + Acc(v.w));
}
