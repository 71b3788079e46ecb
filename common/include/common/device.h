// common/device.h - pick the GPU, or SKIP (exit 77) when there is none.
#pragma once
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
#include <string>
#include "common/check.h"
#include "common/flags.h"
#include "common/phases.h"

namespace lesson {

// Selects GPU `id` and returns its properties. No usable GPU (no device, no
// driver): prints the SKIP result line and exits 77. An id past the last GPU is
// bad input (exit 2).
inline cudaDeviceProp pick_device(int64_t id) {
    const Phase phase("pick_device (CUDA context)");
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || count == 0) {
        std::printf("no usable CUDA device (%s)\n", err != cudaSuccess ? cudaGetErrorName(err) : "0 devices");
        std::printf("RESULT: SKIP (no CUDA device)\n");
        std::exit(77);
    }
    if (id >= count)
        bad_input("--device=" + std::to_string(id) + " is out of range; allowed: integer in [0, " +
                  std::to_string(count - 1) + "] (this machine has " + std::to_string(count) + " GPU(s))");
    CUDA_CHECK(cudaSetDevice(static_cast<int>(id)));
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, static_cast<int>(id)));
    return prop;
}

}  // namespace lesson
