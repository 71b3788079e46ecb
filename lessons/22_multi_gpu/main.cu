// Lesson 22 of the course (00-24): several GPUs - the work split over devices, peer to peer, and
// the all-reduce (NCCL, and a ring written by hand). One file per part, run in this order:
//   1. part_split.cuh      lesson 09's batched SGEMM split over 1, 2, ..., all GPUs, one host thread each
//   2. part_peer.cuh       peer access, cudaMemcpyPeerAsync against the link, a kernel reading peer memory
//   3. part_allreduce.cuh  NCCL's all-reduce in one process (ncclCommInitAll) and a hand-written ring
//   4. part_ranks.cuh      one process per GPU (non-blocking ncclCommInitRankConfig), the lesson its own launcher
// Parts 2-4 need 2 GPUs, part 4 and part 3's NCCL half a build with NCCL; every part skipped says
// why. This file: the flags, the GPUs, the parts in order, the report. Kernels: kernels/multi_gpu.cuh.
// Before: lesson 21 (fused attention, one GPU). Next: lesson 23 (23_full_scale, the full-scale run).
// Run: ./build/bin/multi_gpu [--quick] [--part=1..4]   (--help lists every flag; README.md is the handout)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <string>
#include <vector>

#include "common/check.h"
#include "common/device.h"
#include "common/flags.h"
#include "common/memory.h"
#include "common/needs.h"
#include "common/report.h"
#include "common/timer.h"

#include "options.cuh"
#include "part_allreduce.cuh"
#include "part_peer.cuh"
#include "part_ranks.cuh"
#include "part_split.cuh"

static void add_flags(lesson::Cli& cli, Options& o) {
    lesson::add_common_flags(cli, o.common);
    cli.add_int("n", &o.n, 1, 4096, "side of every matrix of the split", 128);
    cli.add_int("batch", &o.batch, 1, 100000, "products in the split's batch", 8);
    cli.add_int("samples", &o.samples, 1, 100, "products per GPU range checked element by element");
    cli.add_int("gpus", &o.gpus, 0, 64, "GPUs to use from --device on (0 = all; the split: at most one per product)");
    cli.add_int("p2p-mib", &o.p2p_mib, 1, 16384, "MiB moved by the peer-to-peer part", 16);
    cli.add_int("max-mib", &o.max_mib, 1, 4096, "largest all-reduce, in MiB (the sweep starts at 4 KiB)", 1);
    cli.add_int("part", &o.part, 0, 4, "run one part alone: 1 split, 2 peer, 3 all-reduce, 4 one process per GPU");
    cli.add_int("rank", &o.rank, -1, 63, "(set by the lesson for the processes it starts) this process's rank");
    cli.add_int("ranks", &o.ranks, 0, 64, "(set by the lesson) number of rank processes");
    cli.add_string("nccl-id-file", &o.id_file, "(set by the lesson) where rank 0 leaves the NCCL unique id");
}

// The GPUs of this run: --gpus of them (0 = all) from --device on. Bad input exits 2.
static std::vector<int> choose_gpus(const Options& o, int count) {
    const int G = o.gpus == 0 ? count - int(o.common.device) : int(o.gpus);
    if (o.common.device + G > count)
        lesson::bad_input("--gpus=" + std::to_string(o.gpus) + " from --device=" + std::to_string(o.common.device) +
                          " needs " + std::to_string(G) + " GPUs; this machine has " + std::to_string(count) +
                          "; allowed: 0 <= gpus <= " + std::to_string(count - o.common.device));
    if (o.gpus != 0 && (o.part == 0 || o.part == 1) && o.batch < G)
        lesson::bad_input("--batch=" + std::to_string(o.batch) + " is smaller than the " + std::to_string(G) +
                          " GPUs; allowed: batch >= GPUs (use --gpus to use fewer)");
    const std::string have = "this run uses " + std::to_string(G) + (count == G ? "" : " of " + std::to_string(count));
    if (o.part >= 2 && G < 2) lesson::bad_input("--part=" + std::to_string(o.part) + " needs 2 GPUs; " + have);
    if (o.part == 4 && !LESSON_HAVE_NCCL)
        lesson::bad_input(
            "--part=4 needs NCCL; NCCL not found at build time: install libnccl-dev (or set NCCL_ROOT) "
            "and rebuild to run the all-reduce part");
    std::vector<int> dev(static_cast<size_t>(G));
    std::iota(dev.begin(), dev.end(), int(o.common.device));
    return dev;
}

static void print_gpus(const std::vector<int>& dev, int count) {
    std::printf("%d GPU(s) in this run (of %d on the machine), NCCL_NVLS_ENABLE=%s\n", int(dev.size()), count,
                std::getenv("NCCL_NVLS_ENABLE"));
    for (int d : dev) {
        cudaDeviceProp p{};
        CUDA_CHECK(cudaGetDeviceProperties(&p, d));
        std::printf("  GPU %d: %s, %d SMs, %.1f GB, PCI %04x:%02x:%02x\n", d, p.name, p.multiProcessorCount,
                    p.totalGlobalMem / 1e9, p.pciDomainID, p.pciBusID, p.pciDeviceID);
    }
}

// The key result: the split's scaling from 1 GPU to 2 (graded: 1.9x), or its 1-GPU rate, or where
// part 1 did not run, the ring at the largest size.
static void report_key_result(lesson::Report& report, const Options& o, const SplitResult& split,
                              const AllreduceResult& ar) {
    if (!split.gemm_ms.empty()) {
        const double flops = 2.0 * double(o.n) * o.n * o.n * double(o.batch);
        char key[200];
        if (split.gemm_ms.size() >= 2) {
            const double x2 = split.gemm_ms[0] / split.gemm_ms[1];
            std::snprintf(key, sizeof key, "batched SGEMM %lld x %lld^2: %.1f TFLOP/s on 1 GPU, %.2fx on 2",
                          (long long)o.batch, (long long)o.n, flops / (split.gemm_ms[0] * 1e9), x2);
            report.key_result(key, x2 / 2.0, "perfect scaling", lesson::Against::Yardstick);
            report.target("compute split, 2 GPUs over 1", x2, 1.9, "x");
        } else {
            std::snprintf(key, sizeof key, "batched SGEMM %lld x %lld^2: %.1f TFLOP/s on 1 GPU (%s)",
                          (long long)o.batch, (long long)o.n, flops / (split.gemm_ms[0] * 1e9),
                          o.batch < 2 ? "one product: one GPU" : "no second GPU");
            report.key_result(key);
        }
    } else if (std::isfinite(ar.ring_ms)) {
        report.key_result("ring all-reduce at the largest size: " + std::to_string(ar.ring_ms) + " ms");
    }
}

int main(int argc, char** argv) {
    // NVLink SHARP (multicast) stays off unless the caller turns it on: 0 = do not overwrite.
    setenv("NCCL_NVLS_ENABLE", "0", 0);

    // 1. Flags: bad input exits 2 before any CUDA call. The rank processes part 4 starts stop here.
    Options o;
    lesson::Cli cli("multi_gpu",
                    "Lesson 09's batched SGEMM split over every GPU (one host thread each), peer-to-peer copies and\n"
                    "direct peer reads, and the all-reduce: NCCL in one process and one process per GPU, and a ring\n"
                    "written by hand.");
    add_flags(cli, o);
    cli.parse_or_exit(argc, argv);
    const char* under_sanitizer = std::getenv("LESSON_UNDER_SANITIZER");
    if (under_sanitizer && std::string(under_sanitizer) == "1") o.use_nccl = false;
    const bool rank_mode = o.rank >= 0;
    if (rank_mode != (o.ranks > 0) || rank_mode != !o.id_file.empty() || (rank_mode && o.rank >= o.ranks))
        lesson::bad_input(
            "--rank, --ranks and --nccl-id-file go together (0 <= rank < ranks); the lesson sets them "
            "for the processes it starts");
    if (o.samples > o.batch)
        lesson::bad_input("--samples=" + std::to_string(o.samples) + " exceeds --batch=" + std::to_string(o.batch) +
                          "; allowed: 1 to --batch");
    if (rank_mode) {
#if LESSON_HAVE_NCCL
        return run_rank(o);
#else
        lesson::bad_input("--rank needs NCCL, which this build does not have");
#endif
    }
    const uint64_t nn = uint64_t(o.n) * uint64_t(o.n);
    lesson::require_host_memory(3 * uint64_t(o.batch) * nn * 4 + (uint64_t(o.p2p_mib) << 20) * 4 +
                                    2 * (uint64_t(o.max_mib) << 20),
                                "pinned + pageable", "--n/--batch/--p2p-mib/--max-mib");

    // 2. The GPUs: --device and the --gpus after it.
    cudaDeviceProp prop = lesson::pick_device(o.common.device);
    int count = 0;
    CUDA_CHECK(cudaGetDeviceCount(&count));
    const std::vector<int> dev = choose_gpus(o, count);
    const int G = int(dev.size());

    lesson::Report report("22_multi_gpu");
    report.device(prop);
    report.config_from(cli);
    report.config("gpus", int64_t(G));  // --gpus=0 means all: the number used
    report.config("NCCL_NVLS_ENABLE", std::string(std::getenv("NCCL_NVLS_ENABLE")));
    report.config("nccl", std::string(LESSON_HAVE_NCCL ? "built with NCCL" : "not found at build time"));
    print_gpus(dev, count);

    // 3. The parts, in order; each one that cannot run here prints one line saying why.
    lesson::Gate gate(report);  // common/needs.h: one line per part skipped, and whether any part ran
    const std::string have = "this run uses " + std::to_string(G) + (count == G ? "" : " of " + std::to_string(count));
    const std::string two = "needs 2 GPUs, " + have;
    const std::string under_san =
        "LESSON_UNDER_SANITIZER=1 (scripts/run_all.sh --sanitize): NCCL's start-up makes CUDA calls that fail by "
        "design, which the sanitizer counts as errors";
    const std::string no_nccl =
        "NCCL not found at build time: install libnccl-dev (or set NCCL_ROOT) and rebuild to run the all-reduce part";

    SplitResult split;
    PeerResult peer;
    AllreduceResult ar;
    if ((o.part == 0 || o.part == 1) && gate.run("compute split", {})) {
        // With --gpus=0 (all), a batch of fewer products than GPUs is split over one GPU per product.
        const std::vector<int> split_dev(dev.begin(), dev.begin() + std::min<int64_t>(G, o.batch));
        if (int(split_dev.size()) < G)
            std::printf("part 1: --batch=%lld is fewer products than the %d GPUs: the split uses %d\n",
                        (long long)o.batch, G, int(split_dev.size()));
        split = part_split(o, split_dev, report);
    }
    if (o.part == 0 || o.part == 2) {
        if (G < 2) gate.skip("peer access", two);
        else if (gate.run("peer access", {})) peer = part_peer(o, dev, report);
    }
    if (o.part == 0 || o.part == 3) {
        if (G >= 2 && gate.run("all-reduce", {})) {
            if (!LESSON_HAVE_NCCL) gate.skip("NCCL all-reduce (one process)", no_nccl);
            else if (!o.use_nccl) gate.skip("NCCL all-reduce (one process)", under_san);
            ar = part_allreduce(o, dev, peer.link_gbps, report);
        } else {
            gate.skip("all-reduce (NCCL and the hand-written ring)", two);
        }
    }
    if (o.part == 0 || o.part == 4) {
        if (G < 2) gate.skip("NCCL all-reduce, one process per GPU", two);
        else if (!LESSON_HAVE_NCCL) gate.skip("NCCL all-reduce, one process per GPU", no_nccl);
        else if (!o.use_nccl) gate.skip("NCCL all-reduce, one process per GPU", under_san);
#if LESSON_HAVE_NCCL
        else if (gate.run("NCCL all-reduce, one process per GPU", {})) part_ranks(o, G, report);
#endif
    }
    CUDA_CHECK(cudaSetDevice(int(o.common.device)));

    // 4. The report: how each part timed, the key result and the split's target.
    report.timing("GEMMs: host clock around one thread per GPU, " + std::to_string(3) +
                  " passes each, median of --repeat; peer copies and kernels: " + lesson::kTimingMethod +
                  "; all-reduce: host clock around bursts of calls ended by synchronizing every stream, median of "
                  "--repeat bursts");
    report.default_size(cli.at_default_size());
    report_key_result(report, o, split, ar);
    if (gate.none_ran()) return report.skip(gate.reason(), o.common.json);
    return report.finish(o.common.json);
}
