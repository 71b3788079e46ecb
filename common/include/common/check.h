// common/check.h - one error-check family for the CUDA runtime, cuBLAS and cuFFT.
//
// Every failed call prints the call, file, line and the library's error name,
// then ends the program with "RESULT: FAIL (...)" and exit code 1 (docs/lesson-contract.md).
// Checks never compile away: there is no release mode that
// hides errors.
#pragma once
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>

namespace lesson {

[[noreturn]] inline void fail_call(const char* lib, const char* call, const char* err, const char* file, int line) {
    std::fflush(stdout);
    std::fprintf(stderr, "%s error %s in %s at %s:%d\n", lib, err, call, file, line);
    std::printf("RESULT: FAIL (%s call failed: %s, %s:%d)\n", lib, err, file, line);
    std::fflush(stdout);
    std::exit(1);
}

}  // namespace lesson

#define CUDA_CHECK(call)                                                                                       \
    do {                                                                                                       \
        cudaError_t err_ = (call);                                                                             \
        if (err_ != cudaSuccess) lesson::fail_call("CUDA", #call, cudaGetErrorName(err_), __FILE__, __LINE__); \
    } while (0)

// After every kernel launch: catches bad launch configurations at once
// (cudaGetLastError) without synchronizing; errors inside the kernel surface at
// the next synchronizing call, which is checked too.
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())

// cuBLAS and cuFFT statuses are plain enums; naming them by value keeps this
// header free of the library headers, so include order does not matter.
namespace lesson {
inline const char* cublas_status_name(int s) {
    switch (s) {
        case 0: return "CUBLAS_STATUS_SUCCESS";
        case 1: return "CUBLAS_STATUS_NOT_INITIALIZED";
        case 3: return "CUBLAS_STATUS_ALLOC_FAILED";
        case 7: return "CUBLAS_STATUS_INVALID_VALUE";
        case 8: return "CUBLAS_STATUS_ARCH_MISMATCH";
        case 11: return "CUBLAS_STATUS_MAPPING_ERROR";
        case 13: return "CUBLAS_STATUS_EXECUTION_FAILED";
        case 14: return "CUBLAS_STATUS_INTERNAL_ERROR";
        case 15: return "CUBLAS_STATUS_NOT_SUPPORTED";
        case 16: return "CUBLAS_STATUS_LICENSE_ERROR";
        default: return "CUBLAS_STATUS_<unknown>";
    }
}
inline const char* cufft_result_name(int r) {
    static const char* names[] = {"CUFFT_SUCCESS",        "CUFFT_INVALID_PLAN",  "CUFFT_ALLOC_FAILED",
                                  "CUFFT_INVALID_TYPE",   "CUFFT_INVALID_VALUE", "CUFFT_INTERNAL_ERROR",
                                  "CUFFT_EXEC_FAILED",    "CUFFT_SETUP_FAILED",  "CUFFT_INVALID_SIZE",
                                  "CUFFT_UNALIGNED_DATA", "CUFFT_<0xA>",         "CUFFT_INVALID_DEVICE",
                                  "CUFFT_<0xC>",          "CUFFT_NO_WORKSPACE",  "CUFFT_NOT_IMPLEMENTED",
                                  "CUFFT_<0xF>",          "CUFFT_NOT_SUPPORTED"};
    return (r >= 0 && r <= 16) ? names[r] : "CUFFT_<other error>";
}
}  // namespace lesson

#define CUBLAS_CHECK(call)                                                                                     \
    do {                                                                                                       \
        int st_ = static_cast<int>(call);                                                                      \
        if (st_ != 0) lesson::fail_call("cuBLAS", #call, lesson::cublas_status_name(st_), __FILE__, __LINE__); \
    } while (0)

#define CUFFT_CHECK(call)                                                                                  \
    do {                                                                                                   \
        int r_ = static_cast<int>(call);                                                                   \
        if (r_ != 0) lesson::fail_call("cuFFT", #call, lesson::cufft_result_name(r_), __FILE__, __LINE__); \
    } while (0)
