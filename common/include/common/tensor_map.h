// common/tensor_map.h - the driver's TMA descriptor encoder (cuTensorMapEncodeTiled), fetched
// through the CUDA runtime, so that a program that builds tensor maps needs no -lcuda. The
// lessons that use TMA (20 tensor_core_gemm, 21 flash_attention) call it once and encode their
// own maps with it; the device side of TMA is common/ptx.cuh.
#pragma once
#include <cuda.h>          // CUtensorMap and the driver's enums (types only: nothing here links libcuda)
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled: the driver function, fetched at run time
#include <cuda_runtime.h>

#include "common/check.h"  // CUDA_CHECK, lesson::fail_call

namespace lesson {

// The address of cuTensorMapEncodeTiled, for the ABI of CUDA 12.0; a driver without it ends the
// program (exit 1).
inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found;
#if CUDART_VERSION >= 12050  // names the ABI wanted (12.0); cudaGetDriverEntryPoint is deprecated from 12.5
    CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found));
#else  // CUDA 12.0-12.4: the ABI of this runtime's version, which for this function is 12.0's
    CUDA_CHECK(cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &fn, cudaEnableDefault, &found));
#endif
    if (found != cudaDriverEntryPointSuccess || !fn)
        lesson::fail_call("CUDA runtime", "cudaGetDriverEntryPoint(cuTensorMapEncodeTiled)", "not found", __FILE__,
                          __LINE__);
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
}

}  // namespace lesson
