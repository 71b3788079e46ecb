// verify/fusion.h - CPU references of lesson 17 (kernel fusion and the roofline).
//
//  - square_add_relu_reference: the guide's chain relu(x * x + 1), in double.
//  - chain_bytes: the DRAM bytes the chain must move as three kernels (every
//    intermediate written out and read back) or as one fused kernel.
//  - The roofline sweep: every element gets k fused multiply-adds v = fma(v, a, b)
//    (k = 1, 2, 4, ... 512), or, for k = 1/8, 1/4, 1/2, one FMA on every 8th,
//    4th or 2nd element and none on the others. The sweep's input takes 65536
//    distinct values (16 random bits per element), so the reference computes each
//    value's FMA chain once, in float with std::fma (rounded once, as the GPU's
//    FFMA is), and checks every element of the output bit for bit against it.
// Host-only, no CUDA.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>
#include "common/report.h"
#include "verify/compare.h"  // check_exact
#include "verify/parallel.h"
#include "verify/random.h"

namespace verify {

// out[i] = max(x[i] * x[i] + 1, 0) in double (the chain never clips: x^2 + 1 >= 1).
inline void square_add_relu_reference(const float* x, double* out, uint64_t n) {
    parallel_blocks(n, items_per_block(3), [=](uint64_t begin, uint64_t end) {
        for (uint64_t i = begin; i < end; ++i) {
            const double v = static_cast<double>(x[i]);
            out[i] = std::fmax(v * v + 1.0, 0.0);
        }
    });
}

// DRAM bytes of the chain over n floats. Three kernels: x read, t1 written, t1 read,
// t2 written, t2 read, y written = 6 n floats. Fused: x read, y written = 2 n floats.
inline double chain_bytes(uint64_t n, bool fused) { return (fused ? 2.0 : 6.0) * 4.0 * static_cast<double>(n); }

// Floating-point operations of the chain: a multiply, an add and a max per element.
inline double chain_flops(uint64_t n) { return 3.0 * static_cast<double>(n); }

// ---------------------------------------------------------------- the roofline sweep

// Values of the sweep's input: -1 + j 2^-15 for j in [0, 65536), all exact in float.
constexpr uint32_t kSweepValues = 65536;

inline float sweep_value_of(uint32_t j) { return -1.0f + static_cast<float>(j) * (1.0f / 32768.0f); }

// Element i of the sweep's input: 16 random bits of (seed, i).
inline float sweep_input(uint64_t seed, uint64_t i) {
    const uint64_t h = splitmix64(seed * 0x632BE59BD9B4E019ull + splitmix64(i));
    return sweep_value_of(static_cast<uint32_t>(h >> 48));
}

inline void fill_sweep_input(float* p, uint64_t n, uint64_t seed) {
    parallel_blocks(n, items_per_block(1), [=](uint64_t begin, uint64_t end) {
        for (uint64_t i = begin; i < end; ++i) p[i] = sweep_input(seed, i);
    });
}

// j with sweep_value_of(j) == x, or kSweepValues when x is not one of the values.
inline uint32_t sweep_index_of(float x) {
    if (!(x >= -1.0f && x < 1.0f)) return kSweepValues;
    const uint32_t j = static_cast<uint32_t>((x + 1.0f) * 32768.0f);  // exact for the values on the grid
    return (j < kSweepValues && sweep_value_of(j) == x) ? j : kSweepValues;
}

// One sweep point: `fmas` FMAs on every element of which index % every == 0, none on the
// others. k FMAs per float = fmas / every; either fmas or every is 1.
struct SweepPoint {
    int fmas = 1;
    int every = 1;
};

// FMAs the GPU runs on element e.
inline int sweep_fmas_at(uint64_t e, SweepPoint p) { return (e % uint64_t(p.every) == 0) ? p.fmas : 0; }

// Floating-point operations of one sweep point over n elements (an FMA counts 2).
inline double sweep_flops(uint64_t n, SweepPoint p) {
    const uint64_t touched = n / uint64_t(p.every) + (n % uint64_t(p.every) != 0);  // e = 0, every, 2 every, ...
    return 2.0 * static_cast<double>(p.fmas) * static_cast<double>(touched);
}

// DRAM bytes of one sweep point: every element read once and written once.
inline double sweep_bytes(uint64_t n) { return 8.0 * static_cast<double>(n); }

// `count` dependent FMAs on one value, in float, each rounded once (std::fma).
inline float sweep_chain(float v, int count, float a, float b) {
    for (int i = 0; i < count; ++i) v = std::fma(v, a, b);
    return v;
}

// Checks every element of one sweep point's output bit for bit: y[e] must be x[e] after
// sweep_fmas_at(e) FMAs. Values of the 65536-value grid come from a table computed once;
// any other input value (tests) is computed directly. NaN or Inf never passes.
inline lesson::Check check_sweep(const float* gpu, const float* x, uint64_t n, SweepPoint p, float a, float b,
                                 const std::string& what) {
    std::vector<float> table(kSweepValues);
    parallel_blocks(kSweepValues, items_per_block(uint64_t(p.fmas)), [&](uint64_t begin, uint64_t end) {
        for (uint64_t j = begin; j < end; ++j) table[j] = sweep_chain(sweep_value_of(uint32_t(j)), p.fmas, a, b);
    });
    return check_exact(
        gpu, n,
        [&](uint64_t e) {
            if (sweep_fmas_at(e, p) == 0) return x[e];
            const uint32_t j = sweep_index_of(x[e]);
            return j < kSweepValues ? table[j] : sweep_chain(x[e], p.fmas, a, b);
        },
        what);
}

}  // namespace verify
