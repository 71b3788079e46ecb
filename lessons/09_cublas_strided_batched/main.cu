// Lesson 09 of the course (00-24): cublasSgemmStridedBatched, many small products.
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
// The slots: slots.cuh; the checks: checks.h; the bound and the key result:
// summary.cuh. Lesson 09 of the course: lesson 08 called cublasSgemm once,
// lesson 10 adds cuFFT. See README.md.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include <cublas_v2.h>

#include "common/check.h"
#include "common/device.h"
#include "common/flags.h"
#include "common/launch.h"
#include "common/memory.h"
#include "common/report.h"
#include "common/timer.h"
#include "verify/compare.h"
#include "verify/parallel.h"
#include "verify/random.h"

#include "checks.h"
#include "slots.cuh"
#include "summary.cuh"

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

// Chunk c of (hA, hB) -> hC on slot c % slots. Within a slot, stream order
// keeps the device buffers safe: chunk c + slots waits for chunk c's copies.
// One handle, several streams (cuBLAS documentation, README): cublasSetStream before the
// call puts the GEMMs on the slot's stream, and also resets the handle to its default
// workspace pool, from which cuBLAS picks scratch memory for routines running in parallel
// streams; results may then differ bit for bit from run to run. So each stream gets its own
// workspace, set right after cublasSetStream (one handle per stream would do as well).
void Slots::issue_chunk(const lesson::Chunk& ch, uint64_t s, const float* hA, const float* hB, float* hC) {
    const size_t bytes = ch.count * mat_bytes;
    CUDA_CHECK(cudaMemcpyAsync(d_A[s], hA, bytes, cudaMemcpyHostToDevice, stream[s]));
    CUDA_CHECK(cudaMemcpyAsync(d_B[s], hB, bytes, cudaMemcpyHostToDevice, stream[s]));
    CUBLAS_CHECK(cublasSetStream(handle, stream[s]));             // this chunk's GEMMs run on its slot's stream
    CUBLAS_CHECK(cublasSetWorkspace(handle, d_ws[s], ws_bytes));  // ... with that stream's own workspace
    gemm_strided_batched(handle, N, d_A[s], d_B[s], d_C[s], static_cast<int>(ch.count));
    CUDA_CHECK(cudaMemcpyAsync(hC, d_C[s], bytes, cudaMemcpyDeviceToHost, stream[s]));
    CUDA_CHECK(cudaEventRecord(done[s], stream[s]));
}

// The whole staged pipeline, joined into stream[0] so one event pair times it.
void Slots::staged_pipeline(uint64_t slots) {
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
}

// 3. The text's form: inputs produced just in time into pinned slot buffers.
// A slot's buffers are touched again only after its previous chunk's event
// fired: its output is verified, then its inputs overwritten.
void Slots::just_in_time(lesson::Report& report, int64_t samples, const lesson::CommonOptions& opt,
                         const PipelineBound& bound) {
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
    report.variant_bound("chunked, just in time (host work inside)", wall_ms, bound.bytes / (wall_ms * 1e6), "GB/s",
                         bound.gbps, bound.name);
    report.metric("just in time: host generation", gen_ms, "ms");
    report.metric("just in time: host verification", verify_ms, "ms");
    report.metric("just in time: pinned host memory held", double(S * 3 * chunk_bytes) / 1e6, "MB");
    for (uint64_t s = 0; s < S; ++s) {
        CUDA_CHECK(cudaFreeHost(slot_A[s]));
        CUDA_CHECK(cudaFreeHost(slot_B[s]));
        CUDA_CHECK(cudaFreeHost(slot_C[s]));
    }
}

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
    const uint64_t dev_bytes = require_sizes(n, batch, chunk, streams, samples);  // exits 2 before any CUDA call
    cudaDeviceProp prop = lesson::pick_device(opt.device);
    lesson::require_device_memory(dev_bytes, kSizeFlags);

    lesson::Report report("09_cublas_strided_batched");
    report.device(prop);
    report.config_from(cli);
    Slots slots(n, batch, chunk, streams);  // the sizes and the chunk plan; the buffers come below
    const uint64_t nn = slots.nn, mat_bytes = slots.mat_bytes, S = slots.S;
    const int R = static_cast<int>(opt.repeat), N = slots.N;
    const double flops = 2.0 * double(n) * double(n) * double(n) * double(batch);

    cublasHandle_t handle;  // one handle; each chunk tells it which stream and which workspace to use
    CUBLAS_CHECK(cublasCreate(&handle));

    // Staged inputs: the whole batch in pinned memory. Element e of A is
    // hash_uniform(seed, e), so a chunk can also be produced on its own later.
    float *h_A, *h_B, *h_C;
    CUDA_CHECK(cudaMallocHost(&h_A, batch * mat_bytes));
    CUDA_CHECK(cudaMallocHost(&h_B, batch * mat_bytes));
    CUDA_CHECK(cudaMallocHost(&h_C, batch * mat_bytes));
    slots.h_A = h_A, slots.h_B = h_B, slots.h_C = h_C;
    lesson::HostTimer gen;
    verify::fill_uniform(h_A, batch * nn, opt.seed);
    verify::fill_uniform(h_B, batch * nn, opt.seed + 1);
    report.metric("host generation of the staged batch", gen.ms(), "ms");

    lesson::HostTimer cpu;  // every chunk's reference, from the staged inputs (checks.h)
    const std::vector<ChunkReference> refs = references_for_batch(h_A, h_B, n, slots.plan, samples, opt.seed);
    report.cpu_reference_ms(cpu.ms(), verify::host_threads());

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
        check_staged(report, slots, refs, "resident, loop of cublasSgemm");
        const double loop_ms = lesson::time_median_ms(R, loop);

        CUDA_CHECK(cudaMemset(d_C, 0xFF, batch * mat_bytes));
        batched();
        CUDA_CHECK(cudaMemcpy(h_C, d_C, batch * mat_bytes, cudaMemcpyDeviceToHost));
        if (opt.inject_fault)  // into a product the check compares element by element
            verify::inject_fault(h_C + refs[0].sampled[0] * nn, nn, opt.seed);
        check_staged(report, slots, refs, "resident, strided batched");
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

    slots.create(handle);  // the pipeline's slots (slots.cuh)

    // 2. Chunked pipeline over the staged batch, against max(PCIe, GEMMs) (summary.cuh).
    const PipelineBound bound = report_bound(report, slots, compute_ms);
    double ms_by_slots[2] = {0, 0};  // 1 stream, then --streams streams
    for (int v = 0; v < (S > 1 ? 2 : 1); ++v) {
        const uint64_t k = (v == 0) ? 1 : S;
        verify::parallel_memset(h_C, 0xFF, batch * mat_bytes);  // NaN poison on the host side this time
        slots.staged_pipeline(k);
        CUDA_CHECK(cudaStreamSynchronize(slots.stream[0]));
        const std::string name = "chunked, staged, " + std::to_string(k) + (k == 1 ? " stream" : " streams");
        check_staged(report, slots, refs, name);
        const double ms = lesson::time_median_ms(
            R, [&] { slots.staged_pipeline(k); }, slots.stream[0]);
        report.variant_bound(name, ms, bound.bytes / (ms * 1e6), "GB/s", bound.gbps, bound.name);
        ms_by_slots[v] = ms;
    }
    const double best_ms = ms_by_slots[S > 1 ? 1 : 0];
    if (S > 1) report.metric("speedup of " + std::to_string(S) + " streams over 1", ms_by_slots[0] / best_ms, "x");

    slots.just_in_time(report, samples, opt, bound);  // 3. the text's form: inputs produced just in time
    report_result(report, cli, slots, bound, best_ms);

    CUDA_CHECK(cudaDeviceSynchronize());
    CUBLAS_CHECK(cublasDestroy(handle));  // before the workspaces it may still point to are freed
    slots.destroy();
    CUDA_CHECK(cudaFreeHost(h_A));
    CUDA_CHECK(cudaFreeHost(h_B));
    CUDA_CHECK(cudaFreeHost(h_C));
    return report.finish(opt.json);
}
