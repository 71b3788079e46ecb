// common/launch.h - launch and chunk arithmetic as pure host functions
// (no CUDA types, so the CPU tests check them without a GPU).
#pragma once
#include <cstdint>

namespace lesson {

// Ceil-divide: blocks needed to cover n items with b per block.
constexpr uint64_t ceil_div(uint64_t n, uint64_t b) { return (n + b - 1) / b; }

// Hardware grid limits (all GPUs since compute capability 3.0).
constexpr uint64_t kMaxGridX = 2147483647ull;  // 2^31 - 1
constexpr uint64_t kMaxGridYZ = 65535ull;

struct Grid {
    uint32_t x = 0, y = 0, z = 0;
    bool ok = false;  // false when a dimension exceeds the hardware limit
};

// Blocks of bx*by*bz threads covering a cols x rows x depth volume
// (x runs along columns, the contiguous dimension).
inline Grid grid_for(uint64_t cols, uint64_t rows, uint64_t depth, uint32_t bx, uint32_t by = 1, uint32_t bz = 1) {
    Grid g;
    uint64_t gx = ceil_div(cols, bx), gy = ceil_div(rows, by), gz = ceil_div(depth, bz);
    g.ok = gx >= 1 && gy >= 1 && gz >= 1 && gx <= kMaxGridX && gy <= kMaxGridYZ && gz <= kMaxGridYZ;
    g.x = static_cast<uint32_t>(gx > kMaxGridX ? 0 : gx);
    g.y = static_cast<uint32_t>(gy > kMaxGridYZ ? 0 : gy);
    g.z = static_cast<uint32_t>(gz > kMaxGridYZ ? 0 : gz);
    return g;
}

// A run of items [first, first + count) processed as one chunk.
struct Chunk {
    uint64_t index = 0, first = 0, count = 0;
};

// total items in chunks of `chunk`; the last chunk holds the remainder.
struct ChunkPlan {
    uint64_t total = 0, chunk = 0, count = 0;
    Chunk at(uint64_t i) const {
        Chunk c;
        c.index = i;
        c.first = i * chunk;
        c.count = (c.first + chunk <= total) ? chunk : total - c.first;
        return c;
    }
};

inline ChunkPlan plan_chunks(uint64_t total, uint64_t chunk) {
    ChunkPlan p;
    p.total = total;
    p.chunk = chunk;
    p.count = (chunk == 0) ? 0 : ceil_div(total, chunk);
    return p;
}

}  // namespace lesson
