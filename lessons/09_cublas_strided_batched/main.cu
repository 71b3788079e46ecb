// Lesson 09 of the course (00-23): cublasSgemmStridedBatched, many small products.
// Before: lesson 08 (08_cublas_sgemm). Next: lesson 10 (10_cublas_cufft_pipeline).
// Run: ./build/bin/cublas_strided_batched [--quick]   (--help lists every flag; README.md is the handout)
//
// CublasSgemmStridedBatched: many small products, resident and streamed.
//
// First the whole batch of n x n products sits on the GPU: one strided-batched
// call against a loop of cublasSgemm calls. Then the original text's chunked
// form: chunks of --chunk products flow through --streams streams, each chunk
// copied in, multiplied and copied back on its slot's stream. At 256 x 256 the
// GEMMs are far faster than the PCIe copies, so the pipeline is judged against
// the PCIe bound, measured in the same run. Last, the same pipeline with inputs
// produced just in time into pinned slot buffers that are reused only after
// their previous chunk finished, so host memory stays a few chunks. One cuBLAS
// handle drives all streams, with a workspace of its own for each stream.
// Lesson 09 of the course: lesson 08 called cublasSgemm once, lesson 10 adds
// cuFFT. See README.md.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <cublas_v2.h>

#include "common/ceilings.h"
#include "common/check.h"
#include "common/device.h"
#include "common/flags.h"
#include "common/launch.h"
#include "common/memory.h"
#include "common/report.h"
#include "common/timer.h"
#include "verify/compare.h"
#include "verify/gemm_checksum.h"
#include "verify/matmul.h"
#include "verify/parallel.h"
#include "verify/random.h"

// `count` row-major n x n products C_i = A_i * B_i, stored back to back
// (stride n*n). Row-major through column-major cuBLAS as in lesson 08: ask for
// C_i^T = B_i^T * A_i^T, i.e. pass B first.
static void gemm_strided_batched(cublasHandle_t handle, int n, const float* d_A, const float* d_B, float* d_C,
                                 int count) {
    const float alpha = 1.0f, beta = 0.0f;
    const long long stride = static_cast<long long>(n) * n;
    CUBLAS_CHECK(cublasSgemmStridedBatched(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, d_B, n, stride, d_A, n,
                                           stride, &beta, d_C, n, stride, count));
}

// The CPU's side of the check for one chunk, computed from that chunk's inputs only.
struct ChunkReference {
    std::vector<double> sums;       // sum of every product's elements, O(n^2) each (verify/gemm_checksum.h)
    std::vector<uint64_t> sampled;  // products (index within the chunk) checked element by element
    std::vector<double> products;   // their double-precision products, n*n each
};

static ChunkReference reference_for_chunk(const float* A, const float* B, int64_t n, lesson::Chunk c, int64_t samples,
                                          uint64_t seed) {
    const uint64_t nn = uint64_t(n) * n;
    ChunkReference ref;
    for (uint64_t p = 0; p < c.count; ++p)
        ref.sums.push_back(verify::matmul_sum_reference(A + p * nn, B + p * nn, n, n, n));
    std::vector<uint64_t> pick(c.count);  // `samples` distinct products of this chunk, from the seed
    std::iota(pick.begin(), pick.end(), uint64_t(0));
    std::mt19937_64 rng(seed * 1000003 + c.index);
    const uint64_t s = std::min<uint64_t>(uint64_t(samples), c.count);
    for (uint64_t i = 0; i < s; ++i) std::swap(pick[i], pick[i + rng() % (c.count - i)]);
    ref.sampled.assign(pick.begin(), pick.begin() + s);
    ref.products.resize(s * nn);
    for (uint64_t i = 0; i < s; ++i) {
        const uint64_t p = ref.sampled[i];
        verify::matmul_reference(A + p * nn, B + p * nn, ref.products.data() + i * nn, n, n, n);
    }
    return ref;
}

// One run of the batch, checked chunk by chunk. The scales are the RMS that an
// element of C (sqrt(n)/3) and the sum of C (n*sqrt(n)/3) have for inputs
// uniform in [-1, 1): errors are judged against the size of what is summed.
struct BatchCheck {
    verify::Comparer sums, products;
    uint64_t sampled = 0;
    explicit BatchCheck(int64_t n)
        : sums(1e-4, double(n) * std::sqrt(double(n)) / 3.0), products(1e-4, std::sqrt(double(n)) / 3.0) {}
    // The sums of the GPU's products on `threads` host threads (0: all cores); each sum is the same
    // single loop whichever thread runs it, so the check comes out the same for any count.
    void add(const float* C, int64_t n, const lesson::Chunk& c, const ChunkReference& ref, int threads = 1) {
        const uint64_t nn = uint64_t(n) * n;
        std::vector<double> gpu_sums(c.count);
        verify::parallel_for(
            int64_t(c.count), [&](int64_t p) { gpu_sums[p] = verify::sum_of(C + p * nn, nn); }, threads);
        sums.add(gpu_sums.data(), ref.sums.data(), c.count, c.first);  // bad index = product index
        for (size_t i = 0; i < ref.sampled.size(); ++i) {
            const uint64_t p = ref.sampled[i];
            products.add(C + p * nn, ref.products.data() + i * nn, nn, (c.first + p) * nn);
        }
        sampled += ref.sampled.size();
    }
    void report_to(lesson::Report& report, const std::string& run, uint64_t batch) const {
        report.check(sums.result(
            run + ": sum of each of the " + std::to_string(batch) + " products vs sum_k colsum(A)*rowsum(B)", batch));
        report.check(products.result(run + ": " + std::to_string(sampled) + " sampled products, every element"));
    }
};

int main(int argc, char** argv) {
    lesson::CommonOptions opt;
    int64_t n = 256, batch = 1000, chunk = 50, streams = 3, samples = 1;
    lesson::Cli cli("cublas_strided_batched",
                    "--batch products of n x n matrices with cublasSgemmStridedBatched: all resident (against a loop\n"
                    "of cublasSgemm), then in chunks over --streams streams against the PCIe bound.");
    lesson::add_common_flags(cli, opt);
    cli.add_int("n", &n, 1, 4096, "side of every matrix", 64);
    cli.add_int("batch", &batch, 1, 10000000, "number of products", 48);
    cli.add_int("chunk", &chunk, 1, 10000000, "products per chunk of the pipeline", 8);
    cli.add_int("streams", &streams, 1, 32, "streams (and pinned/device buffer slots) of the pipeline", 3);
    cli.add_int("samples", &samples, 1, 1000, "products per chunk checked element by element", 1);
    cli.parse_or_exit(argc, argv);
    if (chunk > batch)
        lesson::bad_input("--chunk=" + std::to_string(chunk) + " exceeds --batch=" + std::to_string(batch) +
                          "; allowed: 1 to --batch");
    if (samples > chunk)
        lesson::bad_input("--samples=" + std::to_string(samples) + " exceeds --chunk=" + std::to_string(chunk) +
                          "; allowed: 1 to --chunk");

    const uint64_t nn = uint64_t(n) * n, mat_bytes = nn * sizeof(float);
    const lesson::ChunkPlan plan = lesson::plan_chunks(uint64_t(batch), uint64_t(chunk));
    const uint64_t S = uint64_t(streams), chunk_bytes = uint64_t(chunk) * mat_bytes;  // one of A, B, C per chunk
    // Pinned: the staged batch (A, B, C), the slots of the just-in-time run, the link test; plus the sampled references.
    const uint64_t pinned = uint64_t(batch) * 3 * mat_bytes + S * 3 * chunk_bytes + 2 * chunk_bytes;
    const std::string sizes = "--n/--batch/--chunk/--streams";
    lesson::require_host_memory(pinned + plan.count * uint64_t(samples) * nn * sizeof(double), "pinned", sizes);
    cudaDeviceProp prop = lesson::pick_device(opt.device);
    // A cuBLAS workspace per stream: 32 MiB, the size cuBLAS's documentation recommends for Hopper.
    const size_t ws_bytes = size_t(32) << 20;
    lesson::require_device_memory(
        std::max(uint64_t(batch) * 3 * mat_bytes, S * (3 * chunk_bytes + ws_bytes) + 2 * chunk_bytes), sizes);

    lesson::Report report("09_cublas_strided_batched");
    report.device(prop.name, prop.major, prop.minor, prop.multiProcessorCount, prop.totalGlobalMem / 1e9);
    report.config("n", n);
    report.config("batch", batch);
    report.config("chunk", chunk);
    report.config("streams", streams);
    report.config("samples_per_chunk", samples);
    report.config("repeat", opt.repeat);
    report.config("seed", opt.seed);
    const int R = static_cast<int>(opt.repeat), N = static_cast<int>(n);
    const double flops = 2.0 * double(n) * double(n) * double(n) * double(batch);

    cublasHandle_t handle;  // one handle; each chunk tells it which stream and which workspace to use
    CUBLAS_CHECK(cublasCreate(&handle));

    // Staged inputs: the whole batch in pinned memory. Element e of A is
    // hash_uniform(seed, e), so a chunk can also be produced on its own later.
    float *h_A, *h_B, *h_C;
    CUDA_CHECK(cudaMallocHost(&h_A, batch * mat_bytes));
    CUDA_CHECK(cudaMallocHost(&h_B, batch * mat_bytes));
    CUDA_CHECK(cudaMallocHost(&h_C, batch * mat_bytes));
    lesson::HostTimer gen;
    verify::fill_uniform(h_A, batch * nn, opt.seed);
    verify::fill_uniform(h_B, batch * nn, opt.seed + 1);
    report.metric("host generation of the staged batch", gen.ms(), "ms");

    // One chunk's reference per host thread where there are at least as many chunks as threads (the
    // helpers inside then run inline, each sum and product the same loop as on all cores): a chunk's
    // O(n^2) sums and few products are too little work to spread over every core one chunk at a time.
    lesson::HostTimer cpu;
    std::vector<ChunkReference> refs(plan.count);
    verify::parallel_for(
        int64_t(plan.count),
        [&](int64_t c) {
            const lesson::Chunk ch = plan.at(uint64_t(c));
            refs[c] = reference_for_chunk(h_A + ch.first * nn, h_B + ch.first * nn, n, ch, samples, opt.seed);
        },
        plan.count >= uint64_t(verify::host_threads()) ? 0 : 1);
    report.cpu_reference_ms(cpu.ms(), verify::host_threads());
    auto check_staged = [&](const std::string& run) {
        BatchCheck check(n);
        for (uint64_t c = 0; c < plan.count; ++c)  // outside any timed region: on all host cores
            check.add(h_C + plan.at(c).first * nn, n, plan.at(c), refs[c], 0);
        check.report_to(report, run, batch);
    };

    // 1. All resident: a loop of cublasSgemm, one per product, against one strided-batched call.
    double compute_ms = 0;  // the whole batch in one strided-batched call: what the GPU needs, at best
    {
        float *d_A, *d_B, *d_C;
        CUDA_CHECK(cudaMalloc(&d_A, batch * mat_bytes));
        CUDA_CHECK(cudaMalloc(&d_B, batch * mat_bytes));
        CUDA_CHECK(cudaMalloc(&d_C, batch * mat_bytes));
        CUDA_CHECK(cudaMemcpy(d_A, h_A, batch * mat_bytes, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(d_B, h_B, batch * mat_bytes, cudaMemcpyHostToDevice));
        auto loop = [&] {
            const float alpha = 1.0f, beta = 0.0f;
            for (int64_t i = 0; i < batch; ++i)
                CUBLAS_CHECK(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, N, N, N, &alpha, d_B + i * nn, N,
                                         d_A + i * nn, N, &beta, d_C + i * nn, N));
        };
        auto batched = [&] { gemm_strided_batched(handle, N, d_A, d_B, d_C, static_cast<int>(batch)); };

        CUDA_CHECK(cudaMemset(d_C, 0xFF, batch * mat_bytes));  // NaN poison
        loop();
        CUDA_CHECK(cudaMemcpy(h_C, d_C, batch * mat_bytes, cudaMemcpyDeviceToHost));
        check_staged("resident, loop of cublasSgemm");
        const double loop_ms = lesson::time_median_ms(R, loop);

        CUDA_CHECK(cudaMemset(d_C, 0xFF, batch * mat_bytes));
        batched();
        CUDA_CHECK(cudaMemcpy(h_C, d_C, batch * mat_bytes, cudaMemcpyDeviceToHost));
        if (opt.inject_fault)  // into a product the check compares element by element
            verify::inject_fault(h_C + refs[0].sampled[0] * nn, nn, opt.seed);
        check_staged("resident, strided batched");
        const double batched_ms = lesson::time_median_ms(R, batched);
        compute_ms = batched_ms;

        report.variant("resident, loop of cublasSgemm", loop_ms, flops / (loop_ms * 1e9), "TFLOP/s");
        report.variant("resident, cublasSgemmStridedBatched", batched_ms, flops / (batched_ms * 1e9), "TFLOP/s");
        report.metric("strided batched speedup over the loop", loop_ms / batched_ms, "x");
        report.metric("GEMM time of one chunk (strided batched)", batched_ms * double(chunk) / double(batch), "ms");
        CUDA_CHECK(cudaFree(d_A));
        CUDA_CHECK(cudaFree(d_B));
        CUDA_CHECK(cudaFree(d_C));
    }

    // The pipeline's slots: a stream, device buffers for one chunk, a cuBLAS workspace and a
    // "done" event each.
    std::vector<cudaStream_t> stream(S);
    std::vector<cudaEvent_t> done(S);
    std::vector<float*> d_A(S), d_B(S), d_C(S);
    std::vector<void*> d_ws(S);
    for (uint64_t s = 0; s < S; ++s) {
        CUDA_CHECK(cudaStreamCreateWithFlags(&stream[s], cudaStreamNonBlocking));
        CUDA_CHECK(cudaEventCreateWithFlags(&done[s], cudaEventDisableTiming));
        CUDA_CHECK(cudaMalloc(&d_A[s], chunk_bytes));
        CUDA_CHECK(cudaMalloc(&d_B[s], chunk_bytes));
        CUDA_CHECK(cudaMalloc(&d_C[s], chunk_bytes));
        CUDA_CHECK(cudaMalloc(&d_ws[s], ws_bytes));  // cudaMalloc aligns to 256 bytes, as cuBLAS requires
    }
    // Chunk c of (hA, hB) -> hC on slot c % slots. Within a slot, stream order
    // keeps the device buffers safe: chunk c + slots waits for chunk c's copies.
    // One handle, several streams (cuBLAS documentation, README): cublasSetStream before the
    // call puts the GEMMs on the slot's stream, and also resets the handle to its default
    // workspace pool, from which cuBLAS picks scratch memory for routines running in parallel
    // streams; results may then differ bit for bit from run to run. So each stream gets its own
    // workspace, set right after cublasSetStream (one handle per stream would do as well).
    auto issue_chunk = [&](const lesson::Chunk& ch, uint64_t s, const float* hA, const float* hB, float* hC) {
        const size_t bytes = ch.count * mat_bytes;
        CUDA_CHECK(cudaMemcpyAsync(d_A[s], hA, bytes, cudaMemcpyHostToDevice, stream[s]));
        CUDA_CHECK(cudaMemcpyAsync(d_B[s], hB, bytes, cudaMemcpyHostToDevice, stream[s]));
        CUBLAS_CHECK(cublasSetStream(handle, stream[s]));             // this chunk's GEMMs run on its slot's stream
        CUBLAS_CHECK(cublasSetWorkspace(handle, d_ws[s], ws_bytes));  // ... with that stream's own workspace
        gemm_strided_batched(handle, N, d_A[s], d_B[s], d_C[s], static_cast<int>(ch.count));
        CUDA_CHECK(cudaMemcpyAsync(hC, d_C[s], bytes, cudaMemcpyDeviceToHost, stream[s]));
        CUDA_CHECK(cudaEventRecord(done[s], stream[s]));
    };
    // The whole staged pipeline, joined into stream[0] so one event pair times it.
    cudaEvent_t fork;
    CUDA_CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
    auto staged_pipeline = [&](uint64_t slots) {
        // EXERCISE 1 BEGIN: issue every chunk of the staged batch on slot c % slots: fork from stream[0], join back
        // HINT: record `fork` on stream[0] and make streams 1..slots-1 wait for it; then one issue_chunk per chunk
        // HINT: plan.at(c) gives chunk c's first product and count (the last chunk holds the remainder)
        CUDA_CHECK(cudaEventRecord(fork, stream[0]));  // the other streams start after stream[0]'s timer event
        for (uint64_t s = 1; s < slots; ++s) CUDA_CHECK(cudaStreamWaitEvent(stream[s], fork, 0));
        for (uint64_t c = 0; c < plan.count; ++c) {
            const lesson::Chunk ch = plan.at(c);
            issue_chunk(ch, c % slots, h_A + ch.first * nn, h_B + ch.first * nn, h_C + ch.first * nn);
        }
        for (uint64_t s = 1; s < slots; ++s) CUDA_CHECK(cudaStreamWaitEvent(stream[0], done[s], 0));  // join
        // EXERCISE 1 END
    };

    // 2. Chunked pipeline over the staged batch. Its bound: the copies cannot beat the PCIe link
    //    (bursts of chunk-sized copies, best of several trials, measured now), and the GEMMs cannot
    //    beat one strided-batched call over the whole resident batch. The larger of the two wins.
    const lesson::LinkRates link = lesson::measure_link_gbps(chunk_bytes, true);
    report.bound("pinned H2D, burst of chunk copies", link.h2d, "GB/s");
    report.bound("pinned D2H, burst of chunk copies", link.d2h, "GB/s");
    report.bound("pinned H2D + D2H at once", link.both, "GB/s");
    const double h2d_bytes = 2.0 * batch * mat_bytes, d2h_bytes = 1.0 * batch * mat_bytes;
    const double link_ms = lesson::link_bound_ms(h2d_bytes, d2h_bytes, link);
    const double bound_ms = std::max(link_ms, compute_ms);
    const double bound_gbps = (h2d_bytes + d2h_bytes) / (bound_ms * 1e6);
    const char* bound_name = link_ms >= compute_ms ? "PCIe bound" : "GPU compute bound";
    report.bound(std::string("pipeline bound: max(PCIe, GEMMs) = ") + bound_name, bound_gbps, "GB/s");
    report.metric("PCIe bound of the batch (A, B up; C down)", link_ms, "ms");
    report.metric("GPU compute bound (one strided-batched call, resident)", compute_ms, "ms");
    report.metric("H2D time of one chunk (A and B)", 2.0 * chunk_bytes / (link.h2d * 1e6), "ms");
    double ms_by_slots[2] = {0, 0};  // 1 stream, then --streams streams
    for (int v = 0; v < (S > 1 ? 2 : 1); ++v) {
        const uint64_t slots = (v == 0) ? 1 : S;
        verify::parallel_memset(h_C, 0xFF, batch * mat_bytes);  // NaN poison on the host side this time
        staged_pipeline(slots);
        CUDA_CHECK(cudaStreamSynchronize(stream[0]));
        const std::string name = "chunked, staged, " + std::to_string(slots) + (slots == 1 ? " stream" : " streams");
        check_staged(name);
        const double ms = lesson::time_median_ms(
            R, [&] { staged_pipeline(slots); }, stream[0]);
        report.variant_bound(name, ms, (h2d_bytes + d2h_bytes) / (ms * 1e6), "GB/s", bound_gbps, bound_name);
        ms_by_slots[v] = ms;
    }
    const double best_ms = ms_by_slots[S > 1 ? 1 : 0];
    if (S > 1) report.metric("speedup of " + std::to_string(S) + " streams over 1", ms_by_slots[0] / best_ms, "x");

    // 3. The text's form: inputs produced just in time into pinned slot buffers.
    // A slot's buffers are touched again only after its previous chunk's event
    // fired: its output is verified, then its inputs overwritten.
    {
        std::vector<float*> slot_A(S), slot_B(S), slot_C(S);
        for (uint64_t s = 0; s < S; ++s) {
            CUDA_CHECK(cudaMallocHost(&slot_A[s], chunk_bytes));
            CUDA_CHECK(cudaMallocHost(&slot_B[s], chunk_bytes));
            CUDA_CHECK(cudaMallocHost(&slot_C[s], chunk_bytes));
        }
        BatchCheck check(n);
        double gen_ms = 0, verify_ms = 0;
        auto verify_slot = [&](uint64_t c) {  // chunk c has finished; its data is still in its slot
            lesson::HostTimer t;
            const lesson::Chunk ch = plan.at(c);
            const uint64_t s = c % S;
            check.add(slot_C[s], n, ch, reference_for_chunk(slot_A[s], slot_B[s], n, ch, samples, opt.seed));
            verify_ms += t.ms();
        };
        lesson::HostTimer wall;
        for (uint64_t c = 0; c < plan.count; ++c) {
            const uint64_t s = c % S;
            if (c >= S) {
                CUDA_CHECK(cudaEventSynchronize(done[s]));  // the slot's previous chunk, c - S, is finished
                verify_slot(c - S);
            }
            const lesson::Chunk ch = plan.at(c);
            lesson::HostTimer t;
            verify::fill_uniform(slot_A[s], ch.count * nn, opt.seed, -1.0f, 1.0f, ch.first * nn);
            verify::fill_uniform(slot_B[s], ch.count * nn, opt.seed + 1, -1.0f, 1.0f, ch.first * nn);
            std::memset(slot_C[s], 0xFF, ch.count * mat_bytes);
            gen_ms += t.ms();
            issue_chunk(ch, s, slot_A[s], slot_B[s], slot_C[s]);
        }
        for (uint64_t c = plan.count - std::min(plan.count, S); c < plan.count; ++c) {
            CUDA_CHECK(cudaEventSynchronize(done[c % S]));
            verify_slot(c);
        }
        const double wall_ms = wall.ms();
        check.report_to(report, "chunked, just in time", batch);
        report.variant_bound("chunked, just in time (host work inside)", wall_ms,
                             (h2d_bytes + d2h_bytes) / (wall_ms * 1e6), "GB/s", bound_gbps, bound_name);
        report.metric("just in time: host generation", gen_ms, "ms");
        report.metric("just in time: host verification", verify_ms, "ms");
        report.metric("just in time: pinned host memory held", double(S * 3 * chunk_bytes) / 1e6, "MB");
        for (uint64_t s = 0; s < S; ++s) {
            CUDA_CHECK(cudaFreeHost(slot_A[s]));
            CUDA_CHECK(cudaFreeHost(slot_B[s]));
            CUDA_CHECK(cudaFreeHost(slot_C[s]));
        }
    }

    char key[128];
    std::snprintf(key, sizeof key, "%lld x %lld^2 in chunks of %lld, %lld streams: %.1f GB/s", (long long)batch,
                  (long long)n, (long long)chunk, (long long)streams, (h2d_bytes + d2h_bytes) / (best_ms * 1e6));
    report.key_result(key, bound_ms / best_ms, bound_name, lesson::Against::Bound);
    report.timing(lesson::kTimingMethod);
    report.default_size(cli.at_default_size());
    report.target("staged pipeline of max(PCIe, GPU compute) bound", bound_ms / best_ms, 0.85);

    CUDA_CHECK(cudaDeviceSynchronize());
    CUBLAS_CHECK(cublasDestroy(handle));  // before the workspaces it may still point to are freed
    for (uint64_t s = 0; s < S; ++s) {
        CUDA_CHECK(cudaFree(d_A[s]));
        CUDA_CHECK(cudaFree(d_B[s]));
        CUDA_CHECK(cudaFree(d_C[s]));
        CUDA_CHECK(cudaFree(d_ws[s]));
        CUDA_CHECK(cudaEventDestroy(done[s]));
        CUDA_CHECK(cudaStreamDestroy(stream[s]));
    }
    CUDA_CHECK(cudaEventDestroy(fork));
    CUDA_CHECK(cudaFreeHost(h_A));
    CUDA_CHECK(cudaFreeHost(h_B));
    CUDA_CHECK(cudaFreeHost(h_C));
    return report.finish(opt.json);
}
