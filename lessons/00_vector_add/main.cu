// Lesson 00 of the course (00-24): vector add, the memory-management basics.
// Before: none, this is the first lesson. Next: lesson 01 (01_matrix_add_single_block).
// Run: ./build/bin/vector_add [--quick]   (--help lists every flag; README.md is the handout)
//
// Vector add: the memory-management basics.
//
// Host buffers (h_), device buffers (d_), cudaMalloc, cudaMemcpy in both
// directions, one kernel launch with one thread per element, CUDA events
// around that launch, cudaFree. First the original text's 1000-element
// example, then a vector large enough to measure against the DRAM bound of the
// add's read/write mix (2 reads : 1 write), measured in the same run.
// See README.md.
#include <cstdio>
#include <vector>

#include "common/ceilings.h"
#include "common/check.h"
#include "common/device.h"
#include "common/flags.h"
#include "common/launch.h"
#include "common/memory.h"
#include "common/report.h"
#include "common/timer.h"
#include "verify/compare.h"
#include "verify/elementwise.h"
#include "verify/parallel.h"
#include "verify/random.h"

// One thread per element. The index is size_t: with n past 2^31 an int index
// would overflow (blockIdx.x * blockDim.x is computed in 32 bits otherwise).
__global__ void vectorAdd(const float* a, const float* b, float* c, size_t n) {
    // EXERCISE 1 BEGIN: compute c[i] = a[i] + b[i] for every i < n, one element per thread
    // HINT: the global index is blockIdx.x * blockDim.x + threadIdx.x, computed in size_t
    // HINT: the grid is ceil-divided, so the last block may hang over the end of the vector
    size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];  // the bounds check: the last block may be partly outside
    // EXERCISE 1 END
}

// The same add, 16 bytes per load: thread i adds float4 number i, and the
// first n % 4 threads also add one of the leftover scalars at the end. Four
// times the bytes in flight per thread, which is what it takes to keep HBM busy
// (Little's law, README: "What to observe"). cudaMalloc returns 256-byte
// aligned pointers, so the float4 casts are aligned.
__global__ void vectorAdd4(const float* a, const float* b, float* c, size_t n) {
    // EXERCISE 2 BEGIN: thread i adds float4 number i (16-byte loads); threads i < n % 4 add the leftover scalars
    // HINT: reinterpret_cast<const float4*>(a)[i] loads a[4i .. 4i+3]; there are n / 4 whole float4s
    // HINT: the launch has at least one block even when n < 4: the tail must not depend on n being a multiple of 4
    size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    size_t n4 = n / 4;
    if (i < n4) {
        float4 x = reinterpret_cast<const float4*>(a)[i];
        float4 y = reinterpret_cast<const float4*>(b)[i];
        reinterpret_cast<float4*>(c)[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
    }
    if (i < n % 4) c[4 * n4 + i] = a[4 * n4 + i] + b[4 * n4 + i];
    // EXERCISE 2 END
}

struct AddRun {
    verify::host_vector<float> h_c, h_c4;  // GPU results of vectorAdd and vectorAdd4, copied back
    double first_launch_ms = 0;            // the verified launch, timed by hand with one pair of CUDA events
    double kernel_ms = 0, kernel4_ms = 0, h2d_ms = 0, d2h_ms = 0;
};

// The whole memory-management story for one vector length.
static AddRun add_on_gpu(const verify::host_vector<float>& h_a, const verify::host_vector<float>& h_b, int threads,
                         int repeat) {
    const size_t n = h_a.size(), bytes = n * sizeof(float);
    AddRun run;
    run.h_c.resize(n);  // host_vector: not zeroed on one core
    run.h_c4.resize(n);
    // Written once before any copy lands in them, so the timed D2H copy is the transfer alone.
    verify::touch_pages(run.h_c.data(), bytes);
    verify::touch_pages(run.h_c4.data(), bytes);

    // 1. Allocate device memory.
    float *d_a = nullptr, *d_b = nullptr, *d_c = nullptr;
    CUDA_CHECK(cudaMalloc(&d_a, bytes));
    CUDA_CHECK(cudaMalloc(&d_b, bytes));
    CUDA_CHECK(cudaMalloc(&d_c, bytes));
    // Poison the output (0xFF bytes are NaN floats): an element the kernel never writes fails the check.
    CUDA_CHECK(cudaMemset(d_c, 0xFF, bytes));

    // 2. Copy the inputs host -> device (pageable memory: synchronous, timed on the host).
    lesson::HostTimer t;
    CUDA_CHECK(cudaMemcpy(d_a, h_a.data(), bytes, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_b, h_b.data(), bytes, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaDeviceSynchronize());
    run.h2d_ms = t.ms();

    // 3. Launch: enough blocks to cover n (ceil-divide), bounds check in the kernel.
    //    CUDA events, written out once: an event is a marker queued on a stream like a kernel;
    //    the GPU notes the time when it reaches it. Record one before and one after the launch
    //    (both on stream 0, the launch's stream), wait until the GPU has passed the second, and
    //    read the milliseconds between them. Every other timing goes through
    //    lesson::time_median_ms, which does the same plus a warm-up, repeats and bursts (README).
    cudaEvent_t start = nullptr, stop = nullptr;
    CUDA_CHECK(cudaEventCreate(&start));
    CUDA_CHECK(cudaEventCreate(&stop));
    const unsigned blocks = static_cast<unsigned>(lesson::ceil_div(n, threads));
    CUDA_CHECK(cudaEventRecord(start, 0));
    vectorAdd<<<blocks, threads>>>(d_a, d_b, d_c, n);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaEventRecord(stop, 0));
    CUDA_CHECK(cudaEventSynchronize(stop));  // the host waits here until the kernel (and `stop`) are done
    float first_ms = 0.f;
    CUDA_CHECK(cudaEventElapsedTime(&first_ms, start, stop));
    run.first_launch_ms = first_ms;
    CUDA_CHECK(cudaEventDestroy(start));
    CUDA_CHECK(cudaEventDestroy(stop));

    // 4. Copy the result device -> host. This copy is what gets verified.
    t.reset();
    CUDA_CHECK(cudaMemcpy(run.h_c.data(), d_c, bytes, cudaMemcpyDeviceToHost));
    run.d2h_ms = t.ms();

    // Timing: relaunch the same kernel (it rewrites the same values) and take the median.
    run.kernel_ms = lesson::time_median_ms(repeat, [&] {
        vectorAdd<<<blocks, threads>>>(d_a, d_b, d_c, n);
        CUDA_CHECK_LAUNCH();
    });

    // The float4 kernel: a quarter of the threads (at least one block), its own poisoned output.
    const unsigned blocks4 = static_cast<unsigned>(lesson::ceil_div(n / 4 + 1, threads));
    CUDA_CHECK(cudaMemset(d_c, 0xFF, bytes));
    vectorAdd4<<<blocks4, threads>>>(d_a, d_b, d_c, n);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaMemcpy(run.h_c4.data(), d_c, bytes, cudaMemcpyDeviceToHost));
    run.kernel4_ms = lesson::time_median_ms(repeat, [&] {
        vectorAdd4<<<blocks4, threads>>>(d_a, d_b, d_c, n);
        CUDA_CHECK_LAUNCH();
    });

    // 5. Free device memory.
    CUDA_CHECK(cudaFree(d_a));
    CUDA_CHECK(cudaFree(d_b));
    CUDA_CHECK(cudaFree(d_c));
    return run;
}

int main(int argc, char** argv) {
    // Flags first: bad input exits 2 before any CUDA call.
    lesson::CommonOptions opt;
    int64_t n = int64_t(1) << 27, threads = 256;
    lesson::Cli cli("vector_add", "Adds two float vectors on the GPU: the text's 1000 elements, then --n elements.");
    lesson::add_common_flags(cli, opt);
    cli.add_int("n", &n, 1, int64_t(1) << 34, "elements of the large vectors", int64_t(1) << 20);
    cli.add_int("threads", &threads, 32, 1024, "threads per block (a multiple of 32)");
    cli.parse_or_exit(argc, argv);
    if (threads % 32 != 0)
        lesson::bad_input("--threads=" + std::to_string(threads) +
                          " is not a multiple of 32; allowed: 32, 64, ..., 1024");

    const size_t N = static_cast<size_t>(n);
    // Host: a, b and the two results (vectorAdd, vectorAdd4) as floats, plus the double
    // reference: 4 x 4 + 8 = 24 bytes per element. GPU: a, b, c.
    lesson::require_host_memory(N * (4 * sizeof(float) + sizeof(double)), "pageable", "--n=" + std::to_string(n));
    cudaDeviceProp prop = lesson::pick_device(opt.device);
    lesson::require_device_memory(N * 3 * sizeof(float), "--n=" + std::to_string(n));

    lesson::Report report("00_vector_add");
    report.device(prop);
    report.config_from(cli);  // every flag as parsed: n, threads, repeat, seed, ...

    // Part 1: the original text's example, 1000 elements (random, not constant, inputs).
    {
        verify::host_vector<float> h_a(1000), h_b(1000);
        verify::fill_uniform(h_a.data(), 1000, opt.seed);
        verify::fill_uniform(h_b.data(), 1000, opt.seed + 1);
        AddRun small = add_on_gpu(h_a, h_b, static_cast<int>(threads), 1);
        verify::host_vector<double> ref(1000);
        verify::add_reference(h_a.data(), h_b.data(), ref.data(), 1000);
        report.check(verify::compare(small.h_c.data(), ref.data(), 1000, 1e-5, "1000-element example, every element"));
        report.check(verify::compare(small.h_c4.data(), ref.data(), 1000, 1e-5, "1000-element example, vectorAdd4"));
    }

    // Part 2: a vector large enough to measure. host_vector: the parallel fill is the first to
    // touch its pages (a std::vector of 512 MB would first be zeroed on one core).
    verify::host_vector<float> h_a(N), h_b(N);
    verify::fill_uniform(h_a.data(), N, opt.seed + 2);
    verify::fill_uniform(h_b.data(), N, opt.seed + 3);
    AddRun big = add_on_gpu(h_a, h_b, static_cast<int>(threads), static_cast<int>(opt.repeat));
    if (opt.inject_fault) verify::inject_fault(big.h_c.data(), N, opt.seed);

    lesson::HostTimer cpu;
    verify::host_vector<double> ref(N);  // every element written by add_reference
    verify::add_reference(h_a.data(), h_b.data(), ref.data(), N);
    report.cpu_reference_ms(cpu.ms(), verify::host_threads());
    report.check(verify::compare(big.h_c.data(), ref.data(), N, 1e-5, "n-element vectorAdd, every element"));
    report.check(verify::compare(big.h_c4.data(), ref.data(), N, 1e-5, "n-element vectorAdd4, every element"));

    // Report: the kernels against the DRAM bound of their read/write mix (2 reads : 1 write),
    // measured now (unless the data fit in L2, where DRAM is not the limit and nothing is graded);
    // the D2D copy (1 : 1) beside them as a yardstick.
    const double kernel_bytes = 3.0 * N * sizeof(float);  // read a, read b, write c
    const std::string in_l2 = lesson::l2_note(kernel_bytes, prop);
    const lesson::StreamBound dram =
        in_l2.empty() ? lesson::measure_stream_bound(prop, 2, 1) : lesson::stream_bound_not_measured(2, 1, in_l2);
    lesson::add_bound(report, dram, int(opt.device));
    const double d2d = lesson::measure_d2d_gbps(prop);
    report.yardstick("device-to-device cudaMemcpy", d2d, "GB/s");
    report.timing(lesson::kTimingMethod);
    const double kernel_gbps = kernel_bytes / (big.kernel_ms * 1e6);
    const double kernel4_gbps = kernel_bytes / (big.kernel4_ms * 1e6);
    report.variant("vectorAdd, first launch, one event pair by hand", big.first_launch_ms,
                   kernel_bytes / (big.first_launch_ms * 1e6), "GB/s");
    report.variant_bound("vectorAdd kernel (4 bytes per load)", big.kernel_ms, kernel_gbps, "GB/s", dram.gbps,
                         "DRAM bound", in_l2);
    report.variant_bound("vectorAdd4 kernel (16 bytes per load)", big.kernel4_ms, kernel4_gbps, "GB/s", dram.gbps,
                         "DRAM bound", in_l2);
    report.variant_yardstick("vectorAdd4 kernel against the D2D copy", big.kernel4_ms, kernel4_gbps, "GB/s", d2d,
                             "copy");
    report.variant("cudaMemcpy H2D of a and b (pageable, one call each)", big.h2d_ms,
                   2.0 * N * sizeof(float) / (big.h2d_ms * 1e6), "GB/s");
    report.variant("cudaMemcpy D2H of c (pageable, one call)", big.d2h_ms, 1.0 * N * sizeof(float) / (big.d2h_ms * 1e6),
                   "GB/s");
    report.metric("transfer time / kernel time", (big.h2d_ms + big.d2h_ms) / big.kernel_ms, "x");
    char key[96];
    std::snprintf(key, sizeof key, "vectorAdd4 %.0f GB/s at n=%lld", kernel4_gbps, (long long)n);
    report.key_result(key, kernel4_gbps / dram.gbps, "DRAM bound", lesson::Against::Bound, in_l2);
    report.default_size(cli.at_default_size());
    report.target("vectorAdd4 of the DRAM bound", kernel4_gbps / dram.gbps, 0.90);
    return report.finish(opt.json);
}
