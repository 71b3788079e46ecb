// verify/transpose.h - CPU reference for a matrix transpose.
//
// A transpose only moves values, so the reference is exact in the input's own
// type: compare with tolerance 0. Blocked, so that both the rows being read
// and the rows being written stay in cache (a plain double loop over a
// 16384 x 16384 matrix misses the cache on every write).
#pragma once
#include <algorithm>
#include <cstdint>

namespace verify {

// in is rows x cols, out is cols x rows, both row-major: out[c][r] = in[r][c].
template <class T>
void transpose_reference(const T* in, T* out, int64_t rows, int64_t cols) {
    constexpr int64_t kBlock = 32;
    for (int64_t r0 = 0; r0 < rows; r0 += kBlock) {
        const int64_t r1 = std::min(r0 + kBlock, rows);
        for (int64_t c0 = 0; c0 < cols; c0 += kBlock) {
            const int64_t c1 = std::min(c0 + kBlock, cols);
            for (int64_t r = r0; r < r1; ++r)
                for (int64_t c = c0; c < c1; ++c) out[c * rows + r] = in[r * cols + c];
        }
    }
}

}  // namespace verify
