// common/device.h - pick the GPU, or SKIP (exit 77) when there is none; learn
// its limits and which image of this program the driver loaded.
#pragma once
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include "common/check.h"
#include "common/flags.h"
#include "common/gpu_class.h"
#include "common/phases.h"

namespace lesson {

// Writes the __CUDA_ARCH__ of the image it runs from, and 1 where that image was built for
// sm_90a. Every kernel of a program comes from the same image, so this one launch tells which
// rungs hold real code (code built for a newer target than the image compiles to a trap).
template <int = 0>
__global__ void imageProbe(int* out) {
#if defined(__CUDA_ARCH__)
    out[0] = __CUDA_ARCH__;
#endif
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    out[1] = 1;
#else
    out[1] = 0;
#endif
}

// Selects GPU `id` and returns its properties, and fills in gpu_limits() (common/gpu_class.h).
// No usable GPU (no device, no driver), or no image in this build that the GPU can run: prints
// the SKIP result line and exits 77. An id past the last GPU, or an unknown LESSON_GPU_LIMITS,
// is bad input (exit 2).
//
// With LESSON_GPU_LIMITS=<class>, the properties returned are the class's compute capability
// and the smaller of this GPU's and the class's shared memory per block and clusters, so every
// check a lesson makes, and every peak computed from them, is the class's.
inline cudaDeviceProp pick_device(int64_t id) {
    const GpuClass* emulated = emulated_class();  // bad input before any CUDA call
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

    int* d_probe = nullptr;
    int probe[2] = {0, 0};
    CUDA_CHECK(cudaMalloc(&d_probe, sizeof probe));
    imageProbe<<<1, 1>>>(d_probe);
    err = cudaGetLastError();
    if (err == cudaErrorNoKernelImageForDevice || err == cudaErrorUnsupportedPtxVersion) {
        std::printf("this build has no code that a cc %d.%d GPU can run (%s)\n", prop.major, prop.minor,
                    cudaGetErrorName(err));
        std::printf("RESULT: SKIP (no image for cc %d.%d in this build: add %d%d to CMAKE_CUDA_ARCHITECTURES)\n",
                    prop.major, prop.minor, prop.major, prop.minor);
        std::exit(77);
    }
    if (err != cudaSuccess) fail_call("CUDA", "imageProbe<<<1, 1>>>", cudaGetErrorName(err), __FILE__, __LINE__);
    CUDA_CHECK(cudaMemcpy(probe, d_probe, sizeof probe, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaFree(d_probe));

    int clusters = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&clusters, cudaDevAttrClusterLaunch, static_cast<int>(id)));
    GpuLimits& g = gpu_limits();
    g.real_cc = 10 * prop.major + prop.minor;
    g.cc = g.real_cc;
    g.smem_optin = prop.sharedMemPerBlockOptin;
    g.clusters = clusters != 0;
    g.geforce = std::string(prop.name).find("GeForce") != std::string::npos;
    g.image_arch = probe[0];
    g.image_sm90a = probe[1] != 0;
    g.sm90a_runs = g.real_cc == 90;
    if (emulated) {
        g.emulated = emulated;
        // A Hopper GPU has every feature the course's portable code uses on newer classes (sm_100,
        // sm_120), so there the class's own compute capability is seen; an older GPU keeps its own
        // where it is the smaller.
        g.cc = g.real_cc >= 90 ? emulated->cc : std::min(g.cc, emulated->cc);
        g.smem_optin = std::min(g.smem_optin, emulated->smem_optin);
        g.clusters = g.clusters && emulated->clusters;
        g.geforce = emulated->geforce;
        g.sm90a_runs = false;  // arch-specific code runs on its own GPU class only
        prop.major = g.cc / 10;
        prop.minor = g.cc % 10;
        prop.sharedMemPerBlockOptin = g.smem_optin;
        std::printf(
            "emulating %s (LESSON_GPU_LIMITS, %s): cc %d.%d, %zu bytes of shared memory per block, %s, "
            "no sm_90a; running on %s (cc %d.%d)\n",
            emulated->name, emulated->example, prop.major, prop.minor, g.smem_optin,
            g.clusters ? "clusters" : "no clusters", prop.name, g.real_cc / 10, g.real_cc % 10);
    }
    return prop;
}

}  // namespace lesson
