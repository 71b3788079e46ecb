// gpu_check: prints the GPUs this machine has and exits 0, or exits 77 when
// there is no usable CUDA device. scripts/run_all.sh asks it before running lessons.
#include <cuda_runtime.h>
#include <cstdio>

int main() {
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || count == 0) {
        std::printf("no usable CUDA device (%s)\n", err != cudaSuccess ? cudaGetErrorName(err) : "0 devices");
        return 77;
    }
    for (int i = 0; i < count; ++i) {
        cudaDeviceProp p{};
        if (cudaGetDeviceProperties(&p, i) != cudaSuccess) return 77;
        std::printf("GPU %d: %s (cc %d.%d, %d SMs, %.1f GB, L2 %.1f MiB)\n", i, p.name, p.major, p.minor,
                    p.multiProcessorCount, p.totalGlobalMem / 1e9, p.l2CacheSize / 1048576.0);
    }
    return 0;
}
