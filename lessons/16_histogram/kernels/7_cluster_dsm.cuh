// Lesson 16 of the course (the histogram ladder), rung 7 of 7: more bins than one block can hold.
// Run this rung alone: ./build/bin/histogram --rung=7 [--bins=131072]   (lesson 16 of the course, 00-23)
//
// Before: rungs 2-6 keep a whole private histogram in one block's shared
//         memory: 256 bins, 1 KB (32 KB in rung 6). At 4 bytes a bin, one
//         block holds at most its opt-in shared memory / 4 bins (58,112 on an
//         H100, 227 KB), and past that the counters would have to live in
//         global memory again.
// Here:   a thread-block cluster of C = 2, 4 or 8 blocks (compute capability
//         9.0 and up) holds one private histogram between them: block r of the
//         cluster owns bins [r * slice, (r + 1) * slice). Every thread reads
//         keys and adds each one to the owning block's shared memory, found by
//         cluster.map_shared_rank (distributed shared memory): (C - 1) / C of
//         the adds go to another SM of the cluster. At the end each block
//         merges its own slice into the global histogram.
//         The input is its own: 4-byte keys, uniform in [0, bins) (main.cu,
//         part 2), since 256 bins of bytes fit one block.
// Lacks:  a remote atomic crosses the cluster's network between SMs, slower
//         than one in the SM's own shared memory; every cluster still zeroes
//         and merges all the bins.
// Next:   cub::DeviceHistogram::HistogramEven on the same keys, the yardstick.
// Run:    ./build/bin/histogram --rung=7
#pragma once
#include <cooperative_groups.h>
#include <cuda_runtime.h>
#include <cstddef>
#include <cstdint>
#include "common/check.h"

namespace rung7 {

constexpr int kThreads = 512;
constexpr unsigned kClusterSizes[] = {2, 4, 8};  // 8: the largest portable cluster

// The launch, chosen once for a bin count: the smallest cluster whose blocks
// each hold their slice, and as many clusters as are resident at once.
struct Plan {
    unsigned cluster = 0;   // blocks per cluster
    unsigned slice = 0;     // bins per block: ceil(bins / cluster)
    size_t smem_bytes = 0;  // dynamic shared memory per block: slice counters
    unsigned blocks = 0;    // the grid, a multiple of cluster (0: not chosen yet)
};

// Keys in[0..n), each < bins, added to hist[0..bins), which must hold zeros.
__global__ void __launch_bounds__(kThreads)
    histogramCluster(const uint32_t* __restrict__ in, size_t n, unsigned int* __restrict__ hist, unsigned bins,
                     unsigned slice) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    namespace cg = cooperative_groups;
    extern __shared__ unsigned int s_slice[];  // this block's bins: [rank * slice, rank * slice + slice)
    cg::cluster_group cluster = cg::this_cluster();
    for (unsigned b = threadIdx.x; b < slice; b += blockDim.x) s_slice[b] = 0;
    // Every block of the cluster has started and zeroed its slice before any
    // block adds to it.
    cluster.sync();

    // 16 bytes per load, four keys: in must be 16-byte aligned (cudaMalloc gives 256).
    const uint4* in16 = reinterpret_cast<const uint4*>(in);
    const size_t n16 = n / 4;
    const size_t first = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
    const size_t stride = size_t(gridDim.x) * blockDim.x;
    auto add = [&](unsigned key) {
        const unsigned owner = key / slice;
        unsigned int* counters = cluster.map_shared_rank(s_slice, owner);  // owner's shared memory
        atomicAdd(&counters[key - owner * slice], 1u);
    };
    for (size_t i = first; i < n16; i += stride) {
        const uint4 v = in16[i];
        add(v.x), add(v.y), add(v.z), add(v.w);
    }
    if (first < n % 4) add(in[4 * n16 + first]);  // the last n % 4 keys
    // Every add of the cluster is done before a block reads its slice, and no
    // block exits (its shared memory gone) while another may still add to it.
    cluster.sync();

    const unsigned base = cluster.block_rank() * slice;
    for (unsigned b = threadIdx.x; b < slice && base + b < bins; b += blockDim.x) {
        const unsigned int count = s_slice[b];
        if (count != 0) atomicAdd(&hist[base + b], count);
    }
#else
    __trap();  // no clusters in this image: main.cu's gate never launches it here
#endif
}

// The smallest cluster whose slices fit `smem_optin` bytes per block; the
// largest (8) when none does, and then its smem_bytes says how much it lacks.
inline Plan choose(unsigned bins, size_t smem_optin) {
    Plan p;
    for (unsigned c : kClusterSizes) {
        p.cluster = c;
        p.slice = (bins + c - 1) / c;
        p.smem_bytes = size_t(p.slice) * sizeof(unsigned int);
        if (p.smem_bytes <= smem_optin) break;
    }
    return p;
}

inline cudaLaunchConfig_t config(const Plan& p, cudaLaunchAttribute* attr, cudaStream_t stream) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(p.blocks > 0 ? p.blocks : p.cluster);
    cfg.blockDim = dim3(kThreads);
    cfg.dynamicSmemBytes = p.smem_bytes;
    cfg.stream = stream;
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = p.cluster;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    return cfg;
}

// Fills in p.blocks for n keys: one wave of clusters (as many as are resident
// at once), no more than the 16-byte words need. Returns the resident clusters
// (0: a cluster of these blocks does not fit on this GPU; p.blocks stays 0).
inline int size_grid(Plan& p, size_t n) {
    CUDA_CHECK(cudaFuncSetAttribute(histogramCluster, cudaFuncAttributeMaxDynamicSharedMemorySize, int(p.smem_bytes)));
    cudaLaunchAttribute attr[1];
    const cudaLaunchConfig_t cfg = config(p, attr, 0);
    int resident = 0;
    CUDA_CHECK(cudaOccupancyMaxActiveClusters(&resident, histogramCluster, &cfg));
    if (resident <= 0) return 0;
    const size_t needed = (n / 4 + kThreads - 1) / kThreads;  // blocks with a word each (at least one: the tail)
    size_t clusters = (needed + p.cluster - 1) / p.cluster;
    if (clusters > size_t(resident)) clusters = size_t(resident);
    if (clusters < 1) clusters = 1;
    p.blocks = unsigned(clusters) * p.cluster;
    return resident;
}

// hist must hold zeros (the kernel adds to it). p from choose() and size_grid().
inline void launch(const Plan& p, const uint32_t* d_in, size_t n, unsigned int* d_hist, unsigned bins,
                   cudaStream_t stream) {
    cudaLaunchAttribute attr[1];
    const cudaLaunchConfig_t cfg = config(p, attr, stream);
    CUDA_CHECK(cudaLaunchKernelEx(&cfg, histogramCluster, d_in, n, d_hist, bins, p.slice));
}

}  // namespace rung7
