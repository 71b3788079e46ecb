// common/check.h's family for NCCL, in the lessons that use it (22, 24): NCCL_CHECK where the
// lesson's CMakeLists.txt found NCCL and set LESSON_HAVE_NCCL=1; without it, LESSON_HAVE_NCCL is
// 0 and the lesson leaves its NCCL parts out (they SKIP with the reason).
#pragma once
#include "common/check.h"

#ifndef LESSON_HAVE_NCCL
#define LESSON_HAVE_NCCL 0
#endif
#if LESSON_HAVE_NCCL
#include <nccl.h>

#define NCCL_CHECK(call)                                                                                     \
    do {                                                                                                     \
        ncclResult_t r_ = (call);                                                                            \
        if (r_ != ncclSuccess) lesson::fail_call("NCCL", #call, ncclGetErrorString(r_), __FILE__, __LINE__); \
    } while (0)
#endif
