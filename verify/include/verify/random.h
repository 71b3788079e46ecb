// verify/random.h - deterministic random inputs. Every value is a pure function
// of (seed, global index), so a chunk can be produced just in time, anywhere,
// and always equals what a one-shot fill would have produced.
#pragma once
#include <cstddef>
#include <cstdint>
#include "verify/parallel.h"

namespace verify {

inline uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

// Uniform in [lo, hi), 24 random bits (exactly representable in float).
inline float hash_uniform(uint64_t seed, uint64_t index, float lo = -1.0f, float hi = 1.0f) {
    uint64_t h = splitmix64(seed * 0x632BE59BD9B4E019ull + splitmix64(index));
    float u = static_cast<float>(h >> 40) * (1.0f / 16777216.0f);
    return lo + (hi - lo) * u;
}

// p[i] = hash_uniform(seed, first + i): element i of a stream that starts at `first`.
// Each element depends on its index alone, so blocks of it fill on all host cores.
inline void fill_uniform(float* p, size_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f, uint64_t first = 0) {
    parallel_blocks(n, items_per_block(1), [=](uint64_t begin, uint64_t end) {
        for (uint64_t i = begin; i < end; ++i) p[i] = hash_uniform(seed, first + i, lo, hi);
    });
}

}  // namespace verify
