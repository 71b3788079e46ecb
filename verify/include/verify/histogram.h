// verify/histogram.h - the inputs and the CPU reference of lesson 16 (256-bin
// histogram of bytes).
//
// Two inputs, each byte a pure function of (seed, index) like verify/random.h:
//  - uniform: every byte uniform in 0..255 (little contention: a warp's 32
//    bytes fall into about 30 different bins);
//  - skewed: a synthetic 8-bit image. Half of the pixels, chosen at random, are
//    a flat background of value kBackground; the others follow a horizontal
//    gradient (0..255 across a row of kImageWidth pixels) plus noise in
//    [-8, 7], clamped to 0..255. Neighbouring pixels land in the same few bins
//    and half of all pixels in one bin: heavy contention.
// The reference counts exactly (uint64 counters); the GPU's uint32 counts are
// compared with it bin by bin, and their sum with n.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>
#include "common/report.h"
#include "verify/parallel.h"
#include "verify/random.h"

namespace verify {

constexpr int kHistogramBins = 256;
constexpr uint64_t kImageWidth = 4096;  // pixels per row of the skewed image
constexpr int kBackground = 200;        // the skewed image's background value (its hot bin)

// 64 random bits for bytes 8w .. 8w+7 of the stream `seed`: byte i uses bits
// 8 (i % 8) .. 8 (i % 8) + 7 of word i / 8, so one hash serves 8 bytes.
inline uint64_t random_word(uint64_t seed, uint64_t w) {
    return splitmix64(seed * 0x632BE59BD9B4E019ull + splitmix64(w ^ 0x5DEECE66Dull));
}

// The skewed image's pixel i, from its 8 random bits r: bit 0 picks background
// or gradient, bits 1-4 are the noise.
// (Written without branches: a random branch mispredicts half of the time.)
inline uint8_t skewed_pixel(uint64_t i, unsigned r) {
    const int gradient = static_cast<int>((i % kImageWidth) * 256 / kImageWidth);  // 0..255 across a row
    const int noise = static_cast<int>((r >> 1) & 15u) - 8;                        // -8..7
    const int v = std::min(std::max(gradient + noise, 0), 255);
    return static_cast<uint8_t>((r & 1u) ? v : kBackground);
}

inline uint8_t uniform_byte(uint64_t seed, uint64_t i) {
    return static_cast<uint8_t>(random_word(seed, i / 8) >> (8 * (i % 8)));
}
inline uint8_t skewed_byte(uint64_t seed, uint64_t i) {
    return skewed_pixel(i, static_cast<unsigned>(random_word(seed, i / 8) >> (8 * (i % 8))) & 0xFFu);
}

// p[i] = uniform_byte(seed, i) for i < n: one hash per 8 bytes, the last
// (partial) word byte by byte; blocks of words on all host cores (every byte
// is a pure function of its index, so the thread count changes nothing).
inline void fill_uniform_bytes(uint8_t* p, size_t n, uint64_t seed) {
    parallel_blocks(n / 8, items_per_block(8), [p, seed](uint64_t w0, uint64_t w1) {
        uint8_t* const out = p;  // locals: byte stores may alias anything in memory, but not these
        const uint64_t s = seed;
        for (uint64_t w = w0; w < w1; ++w) {
            const uint64_t h = random_word(s, w);
            for (int k = 0; k < 8; ++k) out[8 * w + k] = static_cast<uint8_t>(h >> (8 * k));
        }
    });
    for (size_t i = n / 8 * 8; i < n; ++i) p[i] = uniform_byte(seed, i);
}

// p[i] = skewed_byte(seed, i) for i < n, the same way.
inline void fill_skewed_bytes(uint8_t* p, size_t n, uint64_t seed) {
    parallel_blocks(n / 8, items_per_block(8), [p, seed](uint64_t w0, uint64_t w1) {
        uint8_t* const out = p;
        const uint64_t s = seed;
        for (uint64_t w = w0; w < w1; ++w) {
            const uint64_t h = random_word(s, w);
            for (int k = 0; k < 8; ++k)
                out[8 * w + k] = skewed_pixel(8 * w + k, static_cast<unsigned>(h >> (8 * k)) & 0xFFu);
        }
    });
    for (size_t i = n / 8 * 8; i < n; ++i) p[i] = skewed_byte(seed, i);
}

// The counts of p[begin..end) added to bins. Four sub-histograms, summed at
// the end: on the skewed input consecutive bytes are often equal, and one
// counter array would chain each increment on the previous one through memory
// (the CPU's own contention; the same cure as the GPU's privatization).
inline void count_bytes(const uint8_t* p, size_t begin, size_t end, uint64_t* bins) {
    uint64_t sub[4][kHistogramBins] = {};
    size_t i = begin;
    for (; i + 4 <= end; i += 4) {
        ++sub[0][p[i]];
        ++sub[1][p[i + 1]];
        ++sub[2][p[i + 2]];
        ++sub[3][p[i + 3]];
    }
    for (; i < end; ++i) ++sub[0][p[i]];
    for (int b = 0; b < kHistogramBins; ++b) bins[b] += sub[0][b] + sub[1][b] + sub[2][b] + sub[3][b];
}

// bins[b] = how many of p[0..n) equal b, exactly: a histogram per block of
// 4 MiB on all host cores, added up (integers: the same counts on any number
// of threads).
inline void histogram_reference(const uint8_t* p, size_t n, uint64_t* bins) {
    struct Counts {
        uint64_t c[kHistogramBins];
    };
    const std::vector<Counts> parts = block_partials<Counts>(n, uint64_t(1) << 22, [&](uint64_t begin, uint64_t end) {
        Counts part{};
        count_bytes(p, begin, end, part.c);
        return part;
    });
    for (int b = 0; b < kHistogramBins; ++b) bins[b] = 0;
    for (const Counts& part : parts)
        for (int b = 0; b < kHistogramBins; ++b) bins[b] += part.c[b];
}

// The mean number of different values among `group` neighbouring bytes
// (p[0..group), p[group..2 group), ...; a shorter last group counts too): how
// many different bins one warp-wide access of `group` neighbouring bytes
// touches. 1 means all lanes collide, `group` means none do.
inline double mean_distinct_per_group(const uint8_t* p, size_t n, size_t group) {
    if (n == 0 || group == 0) return 0.0;
    uint64_t distinct = 0, groups = 0;
    for (size_t g = 0; g < n; g += group) {
        bool seen[kHistogramBins] = {};
        for (size_t i = g; i < g + group && i < n; ++i) {
            if (!seen[p[i]]) ++distinct;
            seen[p[i]] = true;
        }
        ++groups;
    }
    return double(distinct) / double(groups);
}

// The largest bin's share of n (0.5 or a little more for the skewed input,
// about 1/256 for the uniform one).
inline double largest_bin_share(const uint64_t* bins, uint64_t n) {
    uint64_t top = 0;
    for (int b = 0; b < kHistogramBins; ++b) top = bins[b] > top ? bins[b] : top;
    return n ? double(top) / double(n) : 0.0;
}

// The exact check of one GPU histogram: every one of its `bins` bins (256 unless given) equals
// the reference, and the bins add up to n. A bad bin counts once; a wrong sum counts once more
// (first_bad = bins when every bin matched but the sum did not, i.e. when the reference itself
// was built from another n).
inline lesson::Check compare_histogram(const uint32_t* gpu, const uint64_t* ref, uint64_t n, const std::string& what,
                                       uint64_t bins = kHistogramBins) {
    lesson::Check c;
    c.what = what;
    c.checked = bins;
    c.tol = 0.0;
    double diff2 = 0, ref2 = 0, max_abs = 0;
    uint64_t sum = 0;
    for (uint64_t b = 0; b < bins; ++b) {
        sum += gpu[b];
        const double d = double(gpu[b]) - double(ref[b]);
        diff2 += d * d;
        ref2 += double(ref[b]) * double(ref[b]);
        max_abs = std::fabs(d) > max_abs ? std::fabs(d) : max_abs;
        if (uint64_t(gpu[b]) != ref[b]) {
            if (c.first_bad < 0) c.first_bad = int64_t(b);
            ++c.bad_count;
        }
    }
    if (sum != n) {
        if (c.first_bad < 0) c.first_bad = int64_t(bins);
        ++c.bad_count;
    }
    c.rel_l2 = ref2 > 0 ? std::sqrt(diff2) / std::sqrt(ref2) : (diff2 == 0 ? 0.0 : INFINITY);
    c.max_abs = max_abs;
    c.pass = c.bad_count == 0;
    return c;
}

}  // namespace verify
