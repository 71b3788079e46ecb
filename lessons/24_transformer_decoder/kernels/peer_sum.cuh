// Lesson 24 of the course (the transformer decoder): decode's all-reduce under tensor parallelism
// (--gpus=2), one-shot and fused with the residual add. After the o and the down projections each
// GPU holds a partial sum of every row of the layer's output; NCCL's all-reduce and residualTiles
// after it would add them up and into x, two launches and a protocol built for megabytes, here for
// a few KB a sequence. Where the two GPUs reach each other's memory (peer access, lesson 22), one
// kernel on each GPU does it all: each block tells the other GPU that it has started (so its
// partial sums, written by the kernel before, are ready), waits for the same word from the other
// GPU, reads the other GPU's partial sums straight from its memory (over NVLink), and adds both
// into x, with the tile sums of squares the next norm reads. README.md, "A one-shot all-reduce".
// Run: ./build/bin/transformer_decoder --gpus=2   (README.md is the handout)
#pragma once
#include <cstdint>

#include <cuda/atomic>

#include "gemv.cuh"

// One GPU's side of the exchange. part[j] (batch x d fp32): this GPU's partial sums of the o (j =
// 0) and the down (j = 1) projection, each written only by its projection; peer_part[j]: the other
// GPU's, in its memory. Two buffers, because a GPU may run one all-reduce ahead of the other, never
// two: it can finish all-reduce k + 1 only once the other GPU's blocks have started k + 1, so have
// finished k (stream order), reads of this GPU's buffer included; only then can this GPU's next
// projection, k + 2, rewrite the buffer that k read. With one buffer, k + 1's projection could
// overwrite what the other GPU is still reading for k.
// seq[i]: block i's calls so far; flag[i]: the count the other GPU's block i last published here
// (the other GPU writes it); peer_flag: the other GPU's flags. The counts only grow, and both GPUs
// make the same calls in the same order, so graph replays (and a second graph) just go on counting.
struct PeerSum {
    float* part[2] = {};
    const float* peer_part[2] = {};
    unsigned *seq = nullptr, *flag = nullptr, *peer_flag = nullptr;
    int blocks = 0;  // the grid, the same on both GPUs: at most one block per SM (peerAddResidual)
    int rank = 0;    // 0 or 1: whose partial sums come first in the sum
};

// x[b][c] += GPU 0's partial + GPU 1's, and ssq[b][tile] the tile's sum of squares of the new row:
// what residualTiles leaves after NCCL's all-reduce, to the bit (the partials are added first,
// then to x). Both GPUs add in the same order, GPU 0's first, so x stays a replica on both.
// j: 0 the o projection, 1 the down. Grid: ps.blocks blocks of 256 threads; block i takes tiles
// i, i + gridDim.x, ... of the batch x tiles 256-column tiles.
// Block i waits for block i of the other GPU, which waits for it in turn. Were one of them not
// yet running, queued behind blocks that wait, both GPUs would wait forever: every block of both
// grids must run at once. So the grid is at most one block per SM, each looping over its tiles,
// and the kernel is launched plainly (no overlap, pdl.cuh): it starts once the kernel before has
// ended, and the kernel after cannot take SMs before it ends.
__global__ void __launch_bounds__(kGemvCols)
    peerAddResidual(PeerSum ps, int j, float* x, float* ssq, int64_t B, int64_t d, int tiles) {
    __shared__ float warp_sq[kGemvCols / 32];
    if (threadIdx.x == 0) {
        const unsigned s = ps.seq[blockIdx.x] + 1;
        __threadfence_system();  // this GPU's partial sums, then the word that says they are there
        cuda::atomic_ref<unsigned, cuda::thread_scope_system>(ps.peer_flag[blockIdx.x])
            .store(s, cuda::memory_order_release);
        const cuda::atomic_ref<unsigned, cuda::thread_scope_system> mine(ps.flag[blockIdx.x]);
        while (int(mine.load(cuda::memory_order_acquire) - s) < 0) continue;  // >= s, even past a wrap
        ps.seq[blockIdx.x] = s;
    }
    __syncthreads();  // from here the other GPU's partial sums are ready, for every thread of the block
    const float* own = j ? ps.part[1] : ps.part[0];  // not part[j]: an indexed kernel argument goes to local memory
    const float* other = j ? ps.peer_part[1] : ps.peer_part[0];
    for (int64_t t = blockIdx.x; t < B * tiles; t += gridDim.x) {
        const int64_t b = t / tiles, c = (t % tiles) * kGemvCols + threadIdx.x;
        float sq = 0.0f;
        if (c < d) {
            const size_t i = size_t(b * d + c);
            const float me = own[i], them = __ldcv(other + i);  // the other GPU's memory, never a cached copy
            const float p0 = ps.rank == 0 ? me : them, p1 = ps.rank == 0 ? them : me;
            const float v = x[i] + (p0 + p1);
            x[i] = v;
            sq = v * v;
        }
        const float s = block_sum<kGemvCols>(sq, warp_sq);  // its first barrier frees warp_sq for this tile
        if (threadIdx.x == 0) ssq[b * tiles + t % tiles] = s;
    }
}
