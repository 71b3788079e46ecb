// Lesson 23 of the course (the full-scale run): the check of a cuRAND host API call, used by
// main.cu. cuRAND returns a curandStatus_t, not a cudaError_t; a failed call takes the same exit
// path as CUDA_CHECK (common/check.h): the call, file and line, RESULT: FAIL, exit 1.
// Run: ./build/bin/full_scale [--quick]   (README.md is the handout)
#pragma once
#include <curand.h>

#include "common/check.h"

inline const char* curand_status_name(curandStatus_t s) {
    switch (s) {
        case CURAND_STATUS_VERSION_MISMATCH: return "CURAND_STATUS_VERSION_MISMATCH";
        case CURAND_STATUS_NOT_INITIALIZED: return "CURAND_STATUS_NOT_INITIALIZED";
        case CURAND_STATUS_ALLOCATION_FAILED: return "CURAND_STATUS_ALLOCATION_FAILED";
        case CURAND_STATUS_TYPE_ERROR: return "CURAND_STATUS_TYPE_ERROR";
        case CURAND_STATUS_OUT_OF_RANGE: return "CURAND_STATUS_OUT_OF_RANGE";
        case CURAND_STATUS_LENGTH_NOT_MULTIPLE: return "CURAND_STATUS_LENGTH_NOT_MULTIPLE";
        case CURAND_STATUS_LAUNCH_FAILURE: return "CURAND_STATUS_LAUNCH_FAILURE";
        case CURAND_STATUS_INITIALIZATION_FAILED: return "CURAND_STATUS_INITIALIZATION_FAILED";
        case CURAND_STATUS_ARCH_MISMATCH: return "CURAND_STATUS_ARCH_MISMATCH";
        case CURAND_STATUS_INTERNAL_ERROR: return "CURAND_STATUS_INTERNAL_ERROR";
        default: return "CURAND_STATUS_<other>";
    }
}
#define CURAND_CHECK(call)                                                                   \
    do {                                                                                     \
        curandStatus_t st_ = (call);                                                         \
        if (st_ != CURAND_STATUS_SUCCESS)                                                    \
            lesson::fail_call("cuRAND", #call, curand_status_name(st_), __FILE__, __LINE__); \
    } while (0)
