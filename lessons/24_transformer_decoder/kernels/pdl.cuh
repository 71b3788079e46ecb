// Lesson 24 of the course (the transformer decoder): programmatic dependent launch, the way a
// decode step's kernels overlap. A kernel launched with `overlap` set (cc 9.0 and later) may be
// scheduled while the kernel before it on the stream is still finishing: its blocks first start
// what needs nothing from that kernel (the weights they will read, on their way into L2), then
// wait_prior() until it has finished and its writes are visible, then let_next_start(), so the
// kernel after them can do the same. A batch-1 decode step is some eighty kernels that each read
// a few MB: without the overlap, every boundary leaves DRAM idle for a drain and a fill.
// Waiting first and then letting the next one start keeps at most one kernel ahead, and makes
// whatever the kernel two back wrote safe to read before the wait (it has finished by then).
// Run: ./build/bin/transformer_decoder   (README.md is the handout)
#pragma once
#include <cuda_runtime.h>

#include "common/check.h"

// Without the launch attribute, or below sm_90, griddepcontrol has nothing to wait for: no-ops.
__device__ __forceinline__ void wait_prior() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void let_next_start() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
// A hint, not a load: the line comes into L2 and nothing waits for it.
__device__ __forceinline__ void prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }

// kernel<<<grid, block, 0, s>>>(args...), allowed to overlap the kernel before it where `overlap`.
template <class... Params, class... Args>
void launch(bool overlap, void (*kernel)(Params...), dim3 grid, dim3 block, cudaStream_t s, Args... args) {
    cudaLaunchAttribute attr{};
    attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.stream = s;
    cfg.attrs = &attr;
    cfg.numAttrs = overlap ? 1 : 0;
    CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, Params(args)...));
}
