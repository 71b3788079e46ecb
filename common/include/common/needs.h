// common/needs.h - what a rung, variant or part needs from the GPU, and the one
// place that decides whether it runs here. Host-only, no CUDA.
//
// Each rung declares its needs (Needs); lesson::pick_device (common/device.h)
// fills in the limits of this GPU, or of the class LESSON_GPU_LIMITS names, and
// of the image the driver loaded (gpu_limits(), common/gpu_class.h); a Gate
// turns the two into "run" or one printed line saying why not. docs/setup.md
// lists what each GPU class runs.
#pragma once
#include <cstddef>
#include <cstdio>
#include <string>

#include "common/gpu_class.h"
#include "common/report.h"

namespace lesson {

// What one rung, variant or part needs. Leave a field at its default when it needs nothing there.
struct Needs {
    int cc = 0;               // compute capability (80: bf16 tensor cores, cp.async; 89: FP8)
    const char* cc_why = "";  // what that capability brings, for the message ("bf16 mma.sync")
    int image = 0;            // least __CUDA_ARCH__ of the loaded image (code that traps below it)
    bool sm90a = false;       // Hopper's arch-specific instructions (wgmma, setmaxnreg): an sm_90a image
    bool clusters = false;    // thread-block clusters
    size_t smem = 0;          // dynamic shared memory per block at the configuration it will run
    std::string shape;        // non-empty: this shape does not suit it, and why
};

// Empty when `n` can run under `g`; otherwise the reason, one clause.
inline std::string why_not(const Needs& n, const GpuLimits& g) {
    const std::string gpu = g.emulated ? std::string("this GPU class (") + g.emulated->name + ") is cc " + cc_text(g.cc)
                                       : "this GPU is cc " + cc_text(g.cc);
    if (n.sm90a && !g.image_sm90a)
        return "needs an sm_90a image; this build has " + image_text(g) +
               (g.real_cc == 90 && !g.emulated ? " (configure with -DCMAKE_CUDA_ARCHITECTURES=90)" : "");
    if (n.sm90a && !g.sm90a_runs) return "needs a cc 9.0 GPU to run its sm_90a code; " + gpu;
    if (n.cc > g.cc)
        return "needs compute capability " + cc_text(n.cc) + (*n.cc_why ? std::string(" (") + n.cc_why + ")" : "") +
               "; " + gpu;
    if (n.image > g.image_arch)
        return "needs an sm_" + std::to_string(n.image / 10) + " or newer image; this build has " + image_text(g);
    if (n.clusters && !g.clusters) return "needs thread-block clusters (cc 9.0 and up); " + gpu;
    if (n.smem > g.smem_optin)
        return "needs " + std::to_string(n.smem) + " bytes of shared memory per block; " +
               (g.emulated ? std::string("this GPU class (") + g.emulated->name + ") gives " : "this GPU gives ") +
               std::to_string(g.smem_optin);
    if (!n.shape.empty()) return n.shape;
    return "";
}

// Decides run or skip for each selected rung, variant or part, prints one line for each
// skip and notes it in the report, and remembers whether anything ran.
class Gate {
public:
    explicit Gate(Report& report) : report_(report) {}
    // True: run `what`. False: printed "<what> skipped: <reason>".
    bool run(const std::string& what, const Needs& n) {
        const std::string why = why_not(n, gpu_limits());
        if (why.empty()) {
            ++ran_;
            return true;
        }
        skip(what, why);
        return false;
    }
    // A need this GPU's limits do not cover (a second GPU, a library the build lacks): skip
    // `what` with the reason, the same way.
    void skip(const std::string& what, const std::string& why) {
        std::printf("%s skipped: %s\n", what.c_str(), why.c_str());
        report_.note(what + " skipped: " + why);
        if (first_.empty()) first_ = what + " skipped: " + why;
        ++skipped_;
    }

    int ran() const { return ran_; }
    int skipped() const { return skipped_; }
    // Nothing selected could run (and something was selected): the run is a SKIP.
    bool none_ran() const { return ran_ == 0 && skipped_ > 0; }
    // The SKIP reason: the first skip's line, and how many more there were.
    std::string reason() const {
        return skipped_ > 1 ? first_ + " (and " + std::to_string(skipped_ - 1) + " more)" : first_;
    }

private:
    Report& report_;
    int ran_ = 0, skipped_ = 0;
    std::string first_;
};

}  // namespace lesson
