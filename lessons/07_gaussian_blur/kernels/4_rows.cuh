// Lesson 07 of the course (Gaussian blur), rung 4 of 4: no shared memory, a window of three rows
// in registers. Before: rung 3 (kernels/3_tiled.cuh) stages tiles in shared memory. Next: lesson
// 08 calls cuBLAS; lesson 23 fuses this rung with a reduction.
// Run: ./build/bin/gaussian_blur [--quick]   (README.md is the handout)
#pragma once
#include "common.cuh"

// No shared memory at all. Each thread owns VEC adjacent columns (one float4 when the
// width is a multiple of 4) and walks down a strip of kStrip rows. Per row it loads its VEC
// pixels with one 16-byte load plus the pixel left and right of them (its neighbours' loads
// brought those lines into L1, so they cost no DRAM traffic), sums [1 2 1] across, and keeps
// the last three rows of those sums in registers: the vertical [1 2 1] needs no reload. Each
// input row is read from DRAM once per strip (plus 2 halo rows per kStrip, mostly L2 hits).
constexpr int kStrip = 16;              // output rows per thread
constexpr int kRowsX = 64, kRowsY = 4;  // block: 64 column groups x 4 strips
template <int VEC>
__global__ void __launch_bounds__(kRowsX* kRowsY)
    blur3x3Rows(const float* __restrict__ in, float* __restrict__ out, int width, int height) {
    const int x = VEC * (blockIdx.x * kRowsX + threadIdx.x);  // first of this thread's columns
    if (x >= width) return;
    const int y0 = (blockIdx.y * kRowsY + threadIdx.y) * kStrip;
    if (y0 >= height) return;
    const int xl = max(x - 1, 0), xr = min(x + VEC, width - 1);  // clamp-to-edge across
    auto across = [&](int y, float(&sum)[VEC]) {                 // [1 2 1] across row y (clamped) for the VEC columns
        const float* row = in + static_cast<size_t>(clampToEdge(y, height)) * width;
        float c[VEC + 2];
        c[0] = row[xl];
        if constexpr (VEC == 4) {
            const float4 q = *reinterpret_cast<const float4*>(row + x);
            c[1] = q.x, c[2] = q.y, c[3] = q.z, c[4] = q.w;
        } else {
            c[1] = row[x];
        }
        c[VEC + 1] = row[xr];
#pragma unroll
        for (int j = 0; j < VEC; ++j) sum[j] = taps121(c[j], c[j + 1], c[j + 2]);
    };
    float above[VEC], here[VEC], below[VEC];
    across(y0 - 1, above);
    across(y0, here);
    const int y_end = min(y0 + kStrip, height);
#pragma unroll 4
    for (int y = y0; y < y_end; ++y) {
        across(y + 1, below);
        float o[VEC];
#pragma unroll
        for (int j = 0; j < VEC; ++j) o[j] = taps121(above[j], here[j], below[j]) * (1.0f / 16.0f);
        float* dst = out + static_cast<size_t>(y) * width + x;
        if constexpr (VEC == 4) *reinterpret_cast<float4*>(dst) = make_float4(o[0], o[1], o[2], o[3]);
        else dst[0] = o[0];
#pragma unroll
        for (int j = 0; j < VEC; ++j) above[j] = here[j], here[j] = below[j];
    }
}

template <int VEC>
inline void launch_rows(const Image& im) {  // VEC columns per thread, a strip of kStrip rows
    const dim3 grid(unsigned(lesson::ceil_div(lesson::ceil_div(uint64_t(im.width), VEC), kRowsX)),
                    unsigned(lesson::ceil_div(lesson::ceil_div(uint64_t(im.height), kStrip), kRowsY)));
    blur3x3Rows<VEC><<<grid, dim3(kRowsX, kRowsY)>>>(im.in, im.out, im.width, im.height);
    CUDA_CHECK_LAUNCH();
}
