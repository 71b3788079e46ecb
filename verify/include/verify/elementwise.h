// verify/elementwise.h - CPU references for elementwise work, in double.
#pragma once
#include <cstdint>
#include "verify/parallel.h"

namespace verify {

// out[i] = a[i] + b[i], computed in double. Blocks of elements run on all host cores.
inline void add_reference(const float* a, const float* b, double* out, uint64_t n) {
    parallel_blocks(n, items_per_block(1), [=](uint64_t begin, uint64_t end) {
        for (uint64_t i = begin; i < end; ++i) out[i] = static_cast<double>(a[i]) + static_cast<double>(b[i]);
    });
}

}  // namespace verify
