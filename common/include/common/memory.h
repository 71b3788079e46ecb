// common/memory.h - "does it fit?" checks that turn an allocation that would
// fail into a clear exit 2 (docs/lesson-contract.md). Host part needs no CUDA.
#pragma once
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include "common/flags.h"

namespace lesson {

inline std::string gb_text(double bytes) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f GB", bytes / 1e9);
    return buf;
}

// MemAvailable from /proc/meminfo (bytes); 0 when unknown.
inline uint64_t host_available_bytes() {
    std::ifstream f("/proc/meminfo");
    std::string key;
    uint64_t kb = 0;
    std::string unit;
    while (f >> key >> kb >> unit)
        if (key == "MemAvailable:") return kb * 1024ull;
    return 0;
}

// Exits 2 when `bytes` of host memory (pageable or pinned) would not fit in
// 80% of what the machine has available. `what` names the flags that set it.
inline void require_host_memory(uint64_t bytes, const char* kind, const std::string& what) {
    uint64_t avail = host_available_bytes();
    if (avail != 0 && static_cast<double>(bytes) > 0.8 * static_cast<double>(avail))
        bad_input(what + " needs " + gb_text(double(bytes)) + " of " + kind + " host memory; the machine has " +
                  gb_text(double(avail)) + " available (limit 80% of it)");
}

}  // namespace lesson

#if defined(__CUDACC__)
#include <cuda_runtime.h>
#include "common/check.h"
namespace lesson {
// Exits 2 when `bytes` of device memory would not fit in 90% of the free memory.
inline void require_device_memory(uint64_t bytes, const std::string& what) {
    size_t free_b = 0, total_b = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    if (static_cast<double>(bytes) > 0.9 * static_cast<double>(free_b))
        bad_input(what + " needs " + gb_text(double(bytes)) + " of GPU memory; the GPU has " + gb_text(double(free_b)) +
                  " free (limit 90% of it)");
}
}  // namespace lesson
#endif
