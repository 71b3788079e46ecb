// gpu_check: prints the GPUs this machine has and exits 0, or exits 77 when
// there is no usable CUDA device. scripts/run_all.sh asks it before running lessons.
//
// gpu_check --hold=PID: initializes the CUDA driver and stays until process PID has
// ended (or it is killed). While one process has the driver open, the next one to
// start a CUDA context finds it initialized: scripts/run_all.sh keeps one for the
// whole run, and each lesson's start (and end) is about 0.1 s shorter. It creates no
// context, so it takes no GPU memory and no GPU time.
#include <cuda_runtime.h>
#include <signal.h>
#include <unistd.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>

static int hold(const char* arg) {
    char* end = nullptr;
    const long pid = std::strtol(arg, &end, 10);
    if (end == arg || *end != '\0' || pid <= 0) {
        std::fprintf(stderr, "gpu_check: --hold needs a process id, got '%s'\n", arg);
        return 2;
    }
    int count = 0;  // initializes the driver (cuInit), creates no context
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) return 77;
    while (kill(static_cast<pid_t>(pid), 0) == 0) usleep(100 * 1000);
    return 0;
}

int main(int argc, char** argv) {
    if (argc == 2 && std::strncmp(argv[1], "--hold=", 7) == 0) return hold(argv[1] + 7);
    if (argc > 1) {
        std::fprintf(stderr, "usage: gpu_check [--hold=PID]\n");
        return 2;
    }
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
