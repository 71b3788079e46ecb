// verify/elementwise.h - CPU references for elementwise work, in double.
#pragma once
#include <cstdint>

namespace verify {

// out[i] = a[i] + b[i], computed in double.
inline void add_reference(const float* a, const float* b, double* out, uint64_t n) {
    for (uint64_t i = 0; i < n; ++i) out[i] = static_cast<double>(a[i]) + static_cast<double>(b[i]);
}

}  // namespace verify
