// verify/chunked.h - the data set of the chunked lessons and its reference.
//
// Element g (a global index over the whole data set, 64-bit) of the inputs is
//   A[g] = hash_uniform(seed, g),  B[g] = hash_uniform(seed + 1, g)   (uniform in [-1, 1))
// so a program can produce any chunk just in time with
//   verify::fill_uniform(p, count, seed, -1.0f, 1.0f, first)
// and the reference of C = A + B for that chunk comes from the global index
// alone, not from the buffers that were sent: a chunk generated or copied at
// the wrong offset fails the check.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include "verify/parallel.h"
#include "verify/random.h"

namespace verify {

// RMS of a + b for independent a, b uniform in [-1, 1): sqrt(2/3). The
// comparison scale (verify/compare.h) of the chunked add, known before any
// chunk arrives, so a Comparer can accumulate chunk by chunk.
inline double uniform_sum_rms() { return std::sqrt(2.0 / 3.0); }

// Element g of C = A + B, in double: the reference of one element, from its global index alone.
inline double chunk_add_value(uint64_t seed, uint64_t g) {
    return static_cast<double>(hash_uniform(seed, g)) + static_cast<double>(hash_uniform(seed + 1, g));
}

// ref[i] = A[first + i] + B[first + i] in double, for i < count. Blocks of elements run on all host cores.
inline void chunk_add_reference(double* ref, uint64_t count, uint64_t seed, uint64_t first) {
    parallel_blocks(count, items_per_block(1), [=](uint64_t begin, uint64_t end) {
        for (uint64_t i = begin; i < end; ++i) ref[i] = chunk_add_value(seed, first + i);
    });
}

// ref[0..count) = C = A + B when the inputs come from a staging pool (lesson 05): C is cut into
// chunks of chunk_elems elements, and chunk i carries the inputs of chunk i % pool_chunks. With a
// pool that holds every chunk, element g's inputs are its own, as in chunk_add_reference.
inline void pooled_add_reference(double* ref, uint64_t count, uint64_t seed, uint64_t chunk_elems,
                                 uint64_t pool_chunks) {
    const uint64_t pooled = pool_chunks * chunk_elems;  // the elements the pool holds
    if (count <= pooled) return chunk_add_reference(ref, count, seed, 0);
    for (uint64_t first = 0; first < count; first += chunk_elems)
        chunk_add_reference(ref + first, std::min(chunk_elems, count - first), seed, first % pooled);
}

}  // namespace verify
