// verify/transpose.h - CPU reference for a matrix transpose.
//
// A transpose only moves values, so the reference is exact in the input's own
// type: compare with tolerance 0. Blocked, so that both the rows being read
// and the rows being written stay in cache (a plain double loop over a
// 16384 x 16384 matrix misses the cache on every write). check_moved is the
// exact check of lesson 12's outputs: a transpose, or a copy, of the input.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include "common/report.h"
#include "verify/compare.h"
#include "verify/parallel.h"

namespace verify {

constexpr int64_t kTransposeBlock = 32;

// Rows [row_begin, row_end) of in, moved into out: the single-threaded loop.
template <class T>
void transpose_rows(const T* in, T* out, int64_t rows, int64_t cols, int64_t row_begin, int64_t row_end) {
    for (int64_t r0 = row_begin; r0 < row_end; r0 += kTransposeBlock) {
        const int64_t r1 = std::min(r0 + kTransposeBlock, row_end);
        for (int64_t c0 = 0; c0 < cols; c0 += kTransposeBlock) {
            const int64_t c1 = std::min(c0 + kTransposeBlock, cols);
            for (int64_t r = r0; r < r1; ++r)
                for (int64_t c = c0; c < c1; ++c) out[c * rows + r] = in[r * cols + c];
        }
    }
}

// in is rows x cols, out is cols x rows, both row-major: out[c][r] = in[r][c].
// Bands of kTransposeBlock rows run on all host cores (each writes its own slice of every row of out).
template <class T>
void transpose_reference(const T* in, T* out, int64_t rows, int64_t cols) {
    if (rows <= 0 || cols <= 0) return;
    const uint64_t bands = uint64_t((rows + kTransposeBlock - 1) / kTransposeBlock);
    parallel_blocks(bands, items_per_block(uint64_t(kTransposeBlock * cols)), [=](uint64_t b0, uint64_t b1) {
        transpose_rows(in, out, rows, cols, int64_t(b0) * kTransposeBlock,
                       std::min(int64_t(b1) * kTransposeBlock, rows));
    });
}

// True when gpu[0..n) and ref[0..n) hold the same bytes: memcmp of 1 MiB blocks on all host cores.
inline bool same_bytes(const float* gpu, const float* ref, uint64_t n) {
    const std::vector<char> same = block_partials<char>(n, uint64_t(1) << 18, [=](uint64_t begin, uint64_t end) {
        return char(std::memcmp(gpu + begin, ref + begin, (end - begin) * sizeof(float)) == 0);
    });
    return std::all_of(same.begin(), same.end(), [](char s) { return s != 0; });
}

// The exact check of one output that only moves values (tolerance 0). Identical bytes
// are what Comparer would pass with zero error, found at memory speed (the per-element
// comparison takes about a second per GiB); any difference goes through the Comparer,
// which names the first bad index. The inputs are finite, so identical bytes never hide a NaN.
inline lesson::Check check_moved(const float* gpu, const float* ref, uint64_t n, const std::string& what) {
    if (n > 0 && same_bytes(gpu, ref, n)) {
        lesson::Check c;
        c.what = what;
        c.checked = n;
        c.rel_l2 = 0.0;
        c.max_abs = 0.0;
        c.tol = 0.0;
        c.pass = true;
        return c;
    }
    Comparer cmp(0.0, 0.0);
    cmp.add(gpu, ref, n);
    return cmp.result(what);
}

}  // namespace verify
