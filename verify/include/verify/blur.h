// verify/blur.h - CPU reference for the 3x3 Gaussian blur, in double.
//
// Kernel [1 2 1; 2 4 2; 1 2 1] / 16. Border rule: clamp-to-edge. A neighbour
// outside the image takes the value of the nearest pixel inside it, so
// in(-1, y) reads in(0, y) and in(width, y) reads in(width - 1, y). Under this
// rule a constant image stays constant, borders included.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>
#include "common/report.h"
#include "verify/compare.h"
#include "verify/parallel.h"

namespace verify {

// The weights, row by row (dy = -1, 0, +1), column by column (dx = -1, 0, +1); they sum to 16.
constexpr int kBlur3x3Weights[3][3] = {{1, 2, 1}, {2, 4, 2}, {1, 2, 1}};

// Clamp-to-edge: the index of the pixel that stands in for position i of an axis of length n.
inline int64_t clamp_to_edge(int64_t i, int64_t n) { return std::min(std::max<int64_t>(i, 0), n - 1); }

// Rows [y0, y1) of out = blur(in): the single-threaded loop.
inline void blur3x3_rows(const float* in, double* out, int64_t width, int64_t height, int64_t y0, int64_t y1) {
    for (int64_t y = y0; y < y1; ++y) {
        const float* rows[3];
        for (int dy = -1; dy <= 1; ++dy) rows[dy + 1] = in + clamp_to_edge(y + dy, height) * width;
        for (int64_t x = 0; x < width; ++x) {
            const int64_t xs[3] = {clamp_to_edge(x - 1, width), x, clamp_to_edge(x + 1, width)};
            double s = 0.0;
            for (int r = 0; r < 3; ++r)
                for (int c = 0; c < 3; ++c) s += kBlur3x3Weights[r][c] * static_cast<double>(rows[r][xs[c]]);
            out[y * width + x] = s / 16.0;
        }
    }
}

// out = blur(in) for one width x height image (row-major: pixel (x, y) at y * width + x).
// Blocks of rows run on all host cores; each pixel is the same sum as on one thread.
inline void blur3x3_reference(const float* in, double* out, int64_t width, int64_t height) {
    if (width <= 0 || height <= 0) return;
    parallel_blocks(uint64_t(height), items_per_block(9 * uint64_t(width)),
                    [=](uint64_t y0, uint64_t y1) { blur3x3_rows(in, out, width, height, int64_t(y0), int64_t(y1)); });
}

// Every pixel of `count` images of w x h, stored back to back at in / out (a blurred batch),
// against the double reference, tolerance 1e-5, the comparison scale the RMS of the first
// image's blur (every image has the same distribution). Small images (one comparison block
// each) go a group at a time, one image per host thread, each with a Comparer of its own, added
// in image order: the same sums as one image at a time. Large images go one at a time, each
// reference and comparison on all host cores.
inline lesson::Check check_blurred_images(const float* in, const float* out, int64_t w, int64_t h, int64_t count,
                                          const std::string& what) {
    const size_t pixels = static_cast<size_t>(w * h);
    const bool small = pixels <= kReduceBlock;
    const int64_t group = small ? 256 : 1;
    host_vector<double> ref(pixels * size_t(std::max<int64_t>(1, std::min(group, count))));
    blur3x3_reference(in, ref.data(), w, h);
    const double scale = rms(ref.data(), pixels);
    Comparer cmp(1e-5, scale);
    for (int64_t g0 = 0; g0 < count; g0 += group) {
        const int64_t n = std::min(group, count - g0);
        std::vector<Comparer> part(size_t(n), Comparer(1e-5, scale));
        parallel_for(n, [&](int64_t k) {
            const size_t first = size_t(g0 + k) * pixels;
            if (g0 + k > 0) blur3x3_reference(in + first, ref.data() + k * pixels, w, h);
            if (small) part[k].add(out + first, ref.data() + k * pixels, pixels, first);
        });
        for (int64_t k = 0; k < n; ++k) {
            if (small) cmp.add(part[k]);
            else cmp.add(out + (g0 + k) * pixels, ref.data() + k * pixels, pixels, (g0 + k) * pixels);
        }
    }
    return cmp.result(what);
}

}  // namespace verify
