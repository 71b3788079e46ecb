// CPU tests of common/needs.h and common/gpu_class.h: the one decision of run or skip that
// every rung goes through, and the GPU classes LESSON_GPU_LIMITS names.
#include <cstdlib>
#include <string>
#include "catch_shim.hpp"
#include "common/gpu_class.h"
#include "common/needs.h"
#include "common/report.h"

namespace {
// A Hopper GPU running an sm_90a image, as pick_device fills it in.
lesson::GpuLimits hopper() {
    lesson::GpuLimits g;
    g.cc = g.real_cc = 90;
    g.smem_optin = 232448;
    g.clusters = true;
    g.image_arch = 900;
    g.image_sm90a = true;
    g.sm90a_runs = true;
    return g;
}
const lesson::GpuClass* find_class(const std::string& name) {
    size_t n = 0;
    const lesson::GpuClass* k = lesson::gpu_classes(&n);
    for (size_t i = 0; i < n; ++i)
        if (name == k[i].name) return &k[i];
    return nullptr;
}
}  // namespace

TEST_CASE("needs: a Hopper GPU with an sm_90a image runs everything it has room for", "[needs]") {
    const lesson::GpuLimits g = hopper();
    lesson::Needs n;
    n.sm90a = true;
    n.clusters = true;
    n.smem = 232448;
    REQUIRE(lesson::why_not(n, g).empty());
    n.smem = 232449;
    REQUIRE(lesson::why_not(n, g) == "needs 232449 bytes of shared memory per block; this GPU gives 232448");
}

TEST_CASE("needs: sm_90a code needs the image and a cc 9.0 GPU", "[needs]") {
    lesson::GpuLimits g = hopper();
    lesson::Needs n;
    n.sm90a = true;
    g.image_sm90a = false;
    g.image_arch = 800;  // an sm_80 build, JIT-compiled from its PTX
    REQUIRE(lesson::why_not(n, g) ==
            "needs an sm_90a image; this build has sm_80 (configure with -DCMAKE_CUDA_ARCHITECTURES=90)");
    g.real_cc = g.cc = 80;  // the same build on an A100: nothing to configure
    REQUIRE(lesson::why_not(n, g) == "needs an sm_90a image; this build has sm_80");
    g.real_cc = g.cc = 90;
    g.image_arch = 900;  // an sm_90 build without the arch-specific target
    REQUIRE(lesson::why_not(n, g) ==
            "needs an sm_90a image; this build has sm_90 (configure with -DCMAKE_CUDA_ARCHITECTURES=90)");
    g.image_sm90a = true;
    g.sm90a_runs = false;  // an emulated class: the image is there, the class cannot run it
    g.emulated = find_class("sm_86");
    g.cc = 86;
    REQUIRE(lesson::why_not(n, g) == "needs a cc 9.0 GPU to run its sm_90a code; this GPU class (sm_86) is cc 8.6");
}

TEST_CASE("needs: compute capability, image, clusters and shape each give their reason", "[needs]") {
    lesson::GpuLimits g = hopper();
    g.cc = 75;
    lesson::Needs n;
    n.cc = 80;
    n.cc_why = "bf16 mma.sync";
    REQUIRE(lesson::why_not(n, g) == "needs compute capability 8.0 (bf16 mma.sync); this GPU is cc 7.5");
    g = hopper();
    g.image_arch = 750;
    g.image_sm90a = false;
    n = lesson::Needs{};
    n.image = 800;
    REQUIRE(lesson::why_not(n, g) == "needs an sm_80 or newer image; this build has sm_75");
    g = hopper();
    g.clusters = false;
    g.cc = 89;
    n = lesson::Needs{};
    n.clusters = true;
    REQUIRE(lesson::why_not(n, g) == "needs thread-block clusters (cc 9.0 and up); this GPU is cc 8.9");
    n = lesson::Needs{};
    n.shape = "M and N must be multiples of 128";
    REQUIRE(lesson::why_not(n, hopper()) == "M and N must be multiples of 128");
}

TEST_CASE("needs: a Gate counts what ran and gives the first skip as the reason", "[needs]") {
    lesson::gpu_limits() = hopper();
    lesson::gpu_limits().smem_optin = 101376;
    lesson::Report report("test");
    lesson::Gate gate(report);
    lesson::Needs big;
    big.smem = 114688;
    REQUIRE_FALSE(gate.run("rung 6 at d=128", big));
    REQUIRE(gate.none_ran());
    REQUIRE(gate.reason() ==
            "rung 6 at d=128 skipped: needs 114688 bytes of shared memory per block; this GPU gives 101376");
    REQUIRE_FALSE(gate.run("rung 8", big));
    REQUIRE(gate.reason().find("(and 1 more)") != std::string::npos);
    REQUIRE(gate.run("rung 1", lesson::Needs{}));
    REQUIRE_FALSE(gate.none_ran());
    REQUIRE(gate.ran() == 1);
    REQUIRE(gate.skipped() == 2);
    lesson::gpu_limits() = lesson::GpuLimits{};
}

TEST_CASE("gpu classes: every class LESSON_GPU_LIMITS names, with its limits", "[needs]") {
    REQUIRE(find_class("sm_75")->smem_optin == 65536);
    REQUIRE(find_class("sm_80")->smem_optin == 166912);
    for (const char* consumer : {"sm_86", "sm_89", "sm_120"}) {
        REQUIRE(find_class(consumer)->smem_optin == 101376);
        REQUIRE(find_class(consumer)->geforce);
    }
    REQUIRE(find_class("sm_100")->clusters);
    REQUIRE_FALSE(find_class("sm_89")->clusters);
    unsetenv("LESSON_GPU_LIMITS");
    REQUIRE(lesson::emulated_class() == nullptr);
    setenv("LESSON_GPU_LIMITS", "sm_89", 1);
    REQUIRE(lesson::emulated_class() == find_class("sm_89"));
    unsetenv("LESSON_GPU_LIMITS");
}
