// Lesson 04 of the course (00-24): chunked processing, a data set larger than the GPU.
// Before: lesson 03 (03_batched_3d_grid). Next: lesson 05 (05_stream_pipeline).
// Run: ./build/bin/chunked_processing [--quick]   (--help lists every flag; README.md is the handout)
//
// Chunked processing: a data set larger than the GPU, one chunk at a time.
//
// The original text's problem: 100,000 matrices of 256 x 256 (26 GB per array)
// added on a GPU that holds one chunk of 1,000 matrices at a time. One set of
// device buffers sized for a chunk; a loop produces a chunk's inputs, copies
// them in, adds, copies the sum out and verifies it. Pageable host memory and
// plain cudaMemcpy, as the text does: the baseline that lesson 05 beats with
// pinned memory and streams. The report: summary.cuh. See README.md.
#include <string>

#include "common/ceilings.h"
#include "common/check.h"
#include "common/device.h"
#include "common/flags.h"
#include "common/launch.h"
#include "common/memory.h"
#include "common/report.h"
#include "common/timer.h"
#include "verify/chunked.h"
#include "verify/compare.h"
#include "verify/parallel.h"
#include "verify/random.h"

#include "summary.cuh"

// C = A + B over one chunk. The matrices of a chunk lie one after the other,
// so elementwise work does not care about rows and columns: the chunk is one
// flat array of `count` elements. A grid-stride loop lets one fixed grid,
// sized to the GPU, cover any chunk, the smaller last one included.
__global__ void addChunk(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c,
                         size_t count) {
    // EXERCISE 1 BEGIN: c[i] = a[i] + b[i] for every i < count, with a grid-stride loop over the chunk
    // HINT: the grid is fixed (8 blocks of 256 threads per SM): each thread steps by gridDim.x * blockDim.x
    // HINT: count is any size, the smaller last chunk included; indices in size_t
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride)
        c[i] = a[i] + b[i];
    // EXERCISE 1 END
}

int main(int argc, char** argv) {
    // Flags first: bad input exits 2 before any CUDA call.
    lesson::CommonOptions opt;
    int64_t matrices = 3500, chunk = 1000, n = 256;
    lesson::Cli cli("chunked_processing",
                    "Adds --matrices n x n float matrices on a GPU that holds one chunk of --chunk matrices at a "
                    "time (pageable memory, plain cudaMemcpy). --matrices=100000 is the original text's full scale.");
    lesson::add_common_flags(cli, opt);
    cli.add_int("matrices", &matrices, 1, 10000000, "matrices in the whole data set", 40);
    cli.add_int("chunk", &chunk, 1, 10000000, "matrices per chunk (what the GPU holds at a time)", 16);
    cli.add_int("n", &n, 1, 65536, "matrix side");
    cli.parse_or_exit(argc, argv);
    if (chunk > matrices)
        lesson::bad_input("--chunk=" + std::to_string(chunk) + " is larger than --matrices=" +
                          std::to_string(matrices) + "; allowed: 1 <= chunk <= matrices");

    // 64-bit sizes throughout: 100,000 x 65,536 elements is 6.5e9, far past 2^31.
    const uint64_t per_matrix = uint64_t(n) * uint64_t(n);
    const uint64_t chunk_elems = uint64_t(chunk) * per_matrix, chunk_bytes = chunk_elems * sizeof(float);
    const uint64_t total_elems = uint64_t(matrices) * per_matrix;
    const std::string sizes = "--chunk=" + std::to_string(chunk) + " --n=" + std::to_string(n);
    // Host: one input buffer (A's chunk, then B's) and one output buffer. The whole
    // data set (3 x 26 GB at full scale) never sits in host memory.
    lesson::require_host_memory(2 * chunk_bytes + (size_t(1) << 18) * sizeof(double), "pageable", sizes);
    cudaDeviceProp prop = lesson::pick_device(opt.device);
    // Device: A, B and C of one chunk.
    lesson::require_device_memory(3 * chunk_bytes, sizes);

    const lesson::ChunkPlan plan = lesson::plan_chunks(uint64_t(matrices), uint64_t(chunk));
    lesson::Report report("04_chunked_processing");
    report.device(prop);
    report.config_from(cli);  // every flag as parsed: matrices, chunk, n, seed, ...
    report.config("chunks", int64_t(plan.count));
    report.config("last_chunk", int64_t(plan.at(plan.count - 1).count));
    report.config("elements_per_array", int64_t(total_elems));

    // What the link allows, measured now (before our buffers exist, so they fit): pinned copies,
    // the PCIe bound, and pageable ones as this loop issues them, the yardstick (report_link).
    const lesson::LinkRates pinned = lesson::measure_link_gbps(chunk_bytes, /*pinned=*/true);
    const lesson::LinkRates link = lesson::measure_link_gbps(chunk_bytes, /*pinned=*/false);
    report_link(report, pinned, link);

    // 1. Allocate once, sized for one chunk, and reuse for every chunk.
    verify::host_vector<float> h_in(chunk_elems), h_c(chunk_elems);
    verify::touch_pages(h_in.data(), chunk_bytes);
    verify::touch_pages(h_c.data(), chunk_bytes);
    float *d_a = nullptr, *d_b = nullptr, *d_c = nullptr;
    CUDA_CHECK(cudaMalloc(&d_a, chunk_bytes));
    CUDA_CHECK(cudaMalloc(&d_b, chunk_bytes));
    CUDA_CHECK(cudaMalloc(&d_c, chunk_bytes));
    const int threads = 256, blocks = prop.multiProcessorCount * 8;  // a full GPU of 2048 threads per SM

    verify::Comparer comparer(1e-5, verify::uniform_sum_rms());
    double gen_ms = 0, h2d_ms = 0, kernel_ms = 0, d2h_ms = 0, verify_ms = 0;
    lesson::EventTimer kernel_timer;
    lesson::HostTimer wall;

    for (uint64_t k = 0; k < plan.count; ++k) {
        const lesson::Chunk c = plan.at(k);
        // Global index of the chunk's first element: 64-bit. The text's `int offset`
        // wraps at chunk 33 (33 x 1000 x 65536 > 2^31 - 1).
        const uint64_t first = c.first * per_matrix;
        const size_t count = c.count * per_matrix, bytes = count * sizeof(float);

        // 2. Produce A's chunk (as if read from disk) and copy it in; then the same for B,
        //    in the same host buffer: a pageable cudaMemcpy returns only once it has
        //    taken the data out of the host buffer, so the buffer is free again.
        for (int input = 0; input < 2; ++input) {
            lesson::HostTimer t;
            verify::fill_uniform(h_in.data(), count, opt.seed + input, -1.0f, 1.0f, first);
            gen_ms += t.ms();
            t.reset();
            CUDA_CHECK(cudaMemcpy(input == 0 ? d_a : d_b, h_in.data(), bytes, cudaMemcpyHostToDevice));
            CUDA_CHECK(cudaDeviceSynchronize());  // the copy may return before its last bytes land
            h2d_ms += t.ms();
        }

        // 3. Add. C is poisoned first (NaN bytes), outside the timing.
        CUDA_CHECK(cudaMemset(d_c, 0xFF, bytes));
        kernel_timer.start();
        addChunk<<<blocks, threads>>>(d_a, d_b, d_c, count);
        CUDA_CHECK_LAUNCH();
        kernel_ms += kernel_timer.stop();

        // 4. Copy the sum out.
        lesson::HostTimer t;
        CUDA_CHECK(cudaMemcpy(h_c.data(), d_c, bytes, cudaMemcpyDeviceToHost));
        d2h_ms += t.ms();

        // 5. Verify the chunk as it returns, against a reference computed element by element
        //    from the global index alone (a chunk produced at a wrong offset fails): one pass
        //    over the chunk on all host cores, with no reference buffer.
        if (opt.inject_fault && k == plan.count - 1) verify::inject_fault(h_c.data(), count, opt.seed);
        t.reset();
        comparer.add_computed(h_c.data(), count, first,
                              [&](uint64_t g) { return verify::chunk_add_value(uint64_t(opt.seed), g); });
        verify_ms += t.ms();
    }
    const double wall_ms = wall.ms();

    // 6. The kernel alone, steadily: the loop above times each chunk's add once, right after
    //    host work that leaves the GPU idle (its clocks may have dropped). Here the same launch
    //    over one full chunk runs back to back, median of --repeat, against the DRAM bound of
    //    its mix (2 reads : 1 write): the number the exercise grader compares.
    const uint64_t full_elems = plan.at(0).count * per_matrix;
    const double add_ms = lesson::time_median_ms(static_cast<int>(opt.repeat), [&] {
        addChunk<<<blocks, threads>>>(d_a, d_b, d_c, full_elems);
        CUDA_CHECK_LAUNCH();
    });
    const double add_bytes = 3.0 * full_elems * sizeof(float);
    const lesson::StreamBound dram = dram_bound(report, add_bytes, prop, int(opt.device));

    // 7. Free.
    CUDA_CHECK(cudaFree(d_a));
    CUDA_CHECK(cudaFree(d_b));
    CUDA_CHECK(cudaFree(d_c));

    report.check(comparer.result("every element of C, " + std::to_string(matrices) + " matrices in " +
                                     std::to_string(plan.count) + " chunks, reference from the global index",
                                 total_elems));
    report.cpu_reference_ms(verify_ms, verify::host_threads());  // reference and comparison, all host cores

    // Report: end-to-end (H2D + add + D2H) against the PCIe bound and the pageable copies alone.
    const LoopTimes times{gen_ms, h2d_ms, kernel_ms, d2h_ms, verify_ms, wall_ms, add_ms, add_bytes};
    report_loop(report, cli, times, pinned, link, dram.gbps, total_elems, matrices, chunk, prop);
    return report.finish(opt.json);
}
