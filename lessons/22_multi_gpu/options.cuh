// Lesson 22 of the course (several GPUs): what the four parts share. The options main.cu parses,
// and NCCL, which is optional: CMake defines LESSON_HAVE_NCCL=1 where it finds it
// (lessons/22_multi_gpu/CMakeLists.txt); without it parts 3 (the ring only) and the rest still build.
// Run: ./build/bin/multi_gpu --help   (README.md is the handout)
#pragma once
#include <cstdint>
#include <string>

#include "common/check.h"
#include "common/flags.h"
#include "common/nccl_check.h"

struct Options {
    lesson::CommonOptions common;
    int64_t n = 1024, batch = 96, samples = 1, gpus = 0, p2p_mib = 1024, max_mib = 1024, part = 0;
    int64_t rank = -1, ranks = 0;  // set only in the rank processes that part 4 starts
    std::string id_file;
    // NCCL at run time: built with it, and not under compute-sanitizer (scripts/run_all.sh --sanitize
    // sets LESSON_UNDER_SANITIZER=1): NCCL's start-up probes its kernels with CUDA calls that fail by
    // design, which memcheck counts as errors, and its rank processes take minutes to start there.
    bool use_nccl = LESSON_HAVE_NCCL != 0;
};
