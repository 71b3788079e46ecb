// Lesson 22 of the course (00-23): several GPUs. The lesson's three small kernels.
// Before: lesson 21. Next: lesson 23 (23_full_scale).
// Run: ./build/bin/multi_gpu [--quick]   (the part_*.cuh files launch them; README.md is the handout)
//
//   fillAllreduceInput  rank r's all-reduce input: small integers (verify/multi_gpu.h)
//   addChunk            the ring's reduction step: y = x + tmp, where tmp just arrived from the
//                       left neighbour by cudaMemcpyPeerAsync
//   scaleCopy4          dst = 2 * src, 16 bytes per load: run on GPU 0 with src on GPU 1 it reads
//                       the other GPU's memory directly over the peer link (peer access enabled)
#pragma once
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdint>
#include "verify/multi_gpu.h"

namespace multigpu {

constexpr int kThreads = 256;

// Grid-stride, so any n runs with a grid of a few waves.
__global__ void fillAllreduceInput(float* x, uint64_t n, uint64_t seed, int rank) {
    for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x)
        x[i] = verify::allreduce_input(seed, rank, i);
}

// Chunk boundaries n*k/P are not 16-byte aligned in general: scalar loads, coalesced all the same.
__global__ void addChunk(float* y, const float* x, const float* tmp, uint64_t n) {
    for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x)
        y[i] = x[i] + tmp[i];
}

// n4 float4 elements. src may live on another GPU: each load then crosses the peer link.
__global__ void scaleCopy4(float4* dst, const float4* src, uint64_t n4) {
    for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n4; i += uint64_t(gridDim.x) * blockDim.x) {
        const float4 v = src[i];
        dst[i] = make_float4(2.0f * v.x, 2.0f * v.y, 2.0f * v.z, 2.0f * v.w);
    }
}

// Blocks for a grid-stride kernel over n items: enough for 8 blocks per SM, never more than needed.
inline unsigned grid_for(uint64_t n, int sms) {
    const uint64_t need = (n + kThreads - 1) / kThreads;
    return unsigned(std::max<uint64_t>(1, std::min<uint64_t>(need, uint64_t(sms) * 8)));
}

}  // namespace multigpu
