// common/gpu_class.h - the limits of the GPU a lesson runs on, and the GPU classes
// that LESSON_GPU_LIMITS=<class> makes a lesson see instead, so that one Hopper
// machine can take every path a learner's GPU takes. Host-only, no CUDA:
// lesson::pick_device (common/device.h) fills gpu_limits() in; common/needs.h
// decides from it what runs.
#pragma once
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/flags.h"

namespace lesson {

// A GPU class that LESSON_GPU_LIMITS can emulate. The consumer classes (86, 89, 120) are
// the GeForce cards most learners own, with their half-rate 16-bit tensor math.
struct GpuClass {
    const char* name;     // the LESSON_GPU_LIMITS value
    int cc;               // compute capability, 10 * major + minor
    size_t smem_optin;    // shared memory per block after cudaFuncSetAttribute, bytes
    bool clusters;        // thread-block clusters (cc 9.0 and up)
    bool geforce;         // GeForce tensor rates (common/ceilings.h: flops_per_clock_per_sm)
    const char* example;  // the cards it stands for
};
inline const GpuClass* gpu_classes(size_t* count) {
    static const GpuClass k[] = {
        {"sm_75", 75, 65536, false, false, "T4"},
        {"sm_80", 80, 166912, false, false, "A100"},
        {"sm_86", 86, 101376, false, true, "GeForce RTX 30"},
        {"sm_89", 89, 101376, false, true, "GeForce RTX 40"},
        {"sm_100", 100, 232448, true, false, "B200"},
        {"sm_120", 120, 101376, true, true, "GeForce RTX 50"},
    };
    *count = sizeof k / sizeof k[0];
    return k;
}

// The class named by LESSON_GPU_LIMITS, or nullptr when it is unset or empty. Any other
// value is bad input (exit 2).
inline const GpuClass* emulated_class() {
    const char* v = std::getenv("LESSON_GPU_LIMITS");
    if (!v || !*v) return nullptr;
    size_t n = 0;
    const GpuClass* k = gpu_classes(&n);
    std::string allowed;
    for (size_t i = 0; i < n; ++i) {
        if (std::strcmp(v, k[i].name) == 0) return &k[i];
        allowed += std::string(i ? "|" : "") + k[i].name;
    }
    bad_input(std::string("LESSON_GPU_LIMITS=") + v + " is not a GPU class; allowed: " + allowed + " (or unset)");
}

// What a lesson may use on this GPU, as pick_device found it (or as the emulated class limits it).
struct GpuLimits {
    int cc = 0;                // compute capability the lesson sees (10 * major + minor)
    int real_cc = 0;           // the GPU's own
    size_t smem_optin = 0;     // shared memory per block, opt-in
    bool clusters = false;     // thread-block clusters
    bool geforce = false;      // GeForce tensor rates
    int image_arch = 0;        // __CUDA_ARCH__ of the image the driver loaded (750, 800, 900, ...)
    bool image_sm90a = false;  // that image is sm_90a (wgmma, setmaxnreg compiled in)
    bool sm90a_runs = false;   // sm_90a code may run: a cc 9.0 GPU, not emulating another class
    const GpuClass* emulated = nullptr;
};
inline GpuLimits& gpu_limits() {
    static GpuLimits g;
    return g;
}

inline std::string cc_text(int cc) { return std::to_string(cc / 10) + "." + std::to_string(cc % 10); }
inline std::string image_text(const GpuLimits& g) {
    return "sm_" + std::to_string(g.image_arch / 10) + (g.image_sm90a ? "a" : "");
}

}  // namespace lesson
