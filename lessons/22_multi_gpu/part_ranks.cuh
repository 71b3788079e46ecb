// Lesson 22 of the course (several GPUs), part 4: one process per GPU (2+ GPUs, NCCL). The lesson
// starts its own ranks (posix_spawn of itself with --rank/--ranks/--nccl-id-file); rank 0 writes
// the ncclUniqueId to a file the others read (what mpirun or torchrun hand over between machines),
// each rank joins a non-blocking communicator (ncclCommInitRankConfig, blocking = 0) and runs
// part 3's sweep on its own GPU, polling for errors so that a rank gone ends the others with a
// FAIL instead of a hang. Built with NCCL only.
// Before: part 3, the all-reduce in one process (part_allreduce.cuh). Next: lesson 23 (23_full_scale).
// Run: ./build/bin/multi_gpu --part=4   (README.md is the handout)
#pragma once
#include "options.cuh"
#if LESSON_HAVE_NCCL
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "common/check.h"
#include "common/memory.h"
#include "common/report.h"
#include "verify/multi_gpu.h"

#include "kernels/multi_gpu.cuh"
#include "part_allreduce.cuh"  // burst_ms, merge_check, the nccl-tests table

extern char** environ;

// How long a rank waits for anything another rank must do (the id file, joining the communicator,
// one burst of all-reduces) before it gives up: far above the slowest of them at 4 GiB.
constexpr int kRankWaitS = 60;

// The rank's side of the id hand-over: rank 0 makes the id and writes it to the file (under another
// name first, then renamed, so no rank reads half an id); the others wait for the file, at most kRankWaitS.
static ncclUniqueId share_unique_id(int rank, const std::string& id_file) {
    ncclUniqueId id;
    if (rank == 0) {
        NCCL_CHECK(ncclGetUniqueId(&id));  // rank 0's address and a random key: what the others connect to
        const std::string tmp = id_file + ".tmp";
        std::ofstream f(tmp, std::ios::binary);
        f.write(reinterpret_cast<const char*>(&id), sizeof id);
        f.close();
        if (!f || std::rename(tmp.c_str(), id_file.c_str()) != 0)
            lesson::fail_call("host", "write the NCCL id file", std::strerror(errno), __FILE__, __LINE__);
        return id;
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kRankWaitS);
    std::ifstream f;
    while (!(f.open(id_file, std::ios::binary), f.is_open())) {
        if (std::chrono::steady_clock::now() > deadline)
            lesson::fail_call("host", "wait for the NCCL id file",
                              ("no id from rank 0 in " + std::to_string(kRankWaitS) + " s").c_str(), __FILE__,
                              __LINE__);
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    f.read(reinterpret_cast<char*>(&id), sizeof id);
    if (f.gcount() != std::streamsize(sizeof id))
        lesson::fail_call("host", "read the NCCL id file", "short file", __FILE__, __LINE__);
    return id;
}

// The watchdog of a non-blocking communicator: no NCCL call of this rank waits for the others, so
// every wait happens here, polling. Returns once the communicator is no longer ncclInProgress and
// `stream` (if any) has finished its work. An asynchronous error (a rank gone, a broken connection)
// or kRankWaitS without getting there aborts the communicator, which ends its outstanding work on
// this GPU, and ends the rank with a FAIL; the other ranks then see their own error or time out.
static void nccl_wait(ncclComm_t comm, cudaStream_t stream, const char* what) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kRankWaitS);
    for (;;) {
        ncclResult_t state;
        NCCL_CHECK(ncclCommGetAsyncError(comm, &state));
        const cudaError_t done = stream ? cudaStreamQuery(stream) : cudaSuccess;
        if (state == ncclSuccess && done == cudaSuccess) return;
        std::string why;
        if (state != ncclSuccess && state != ncclInProgress) why = ncclGetErrorString(state);
        else if (done != cudaSuccess && done != cudaErrorNotReady) why = cudaGetErrorName(done);
        else if (std::chrono::steady_clock::now() > deadline)
            why = "no progress in " + std::to_string(kRankWaitS) + " s (another rank gone or stuck?)";
        if (!why.empty()) {
            ncclCommAbort(comm);  // its own result does not matter: this rank fails either way
            why += "; communicator aborted";
            lesson::fail_call("NCCL", what, why.c_str(), __FILE__, __LINE__);
        }
        std::this_thread::yield();
    }
}

// A call on the non-blocking communicator returns ncclSuccess, ncclInProgress (still being set up
// or enqueued: wait before the next call) or an error (abort, FAIL).
static void nccl_issued(ncclComm_t comm, ncclResult_t r, const char* what) {
    if (r == ncclInProgress) nccl_wait(comm, nullptr, what);
    if (r == ncclSuccess || r == ncclInProgress) return;
    if (comm) ncclCommAbort(comm);
    lesson::fail_call("NCCL", what, ncclGetErrorString(r), __FILE__, __LINE__);
}

// What one rank process does (this same program, started by part 4 with --rank/--ranks/--nccl-id-file):
// get the unique id, join a non-blocking communicator, run the sweep on its own GPU, write one line
// per size (verify::format_rank_line) to <id file>.rank<R>.
static int run_rank(const Options& o) {
    const int rank = int(o.rank), P = int(o.ranks), device = int(o.common.device) + rank;
    const uint64_t max_bytes = uint64_t(o.max_mib) << 20, max_n = max_bytes / 4, seed = uint64_t(o.common.seed);
    CUDA_CHECK(cudaSetDevice(device));  // a rank's communicator belongs to the device current at init
    lesson::require_device_memory(2 * max_bytes, "--max-mib on GPU " + std::to_string(device));
    const ncclUniqueId id = share_unique_id(rank, o.id_file);
    ncclComm_t comm = nullptr;
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;  // no call waits for the other ranks: nccl_wait polls them, with a deadline
    const ncclResult_t joining = ncclCommInitRankConfig(&comm, P, id, rank, &config);  // sets comm: then use it
    nccl_issued(comm, joining, "ncclCommInitRankConfig (every rank joining)");

    cudaStream_t stream;
    int sms = 0;
    float *d_x, *d_out;
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    CUDA_CHECK(cudaMalloc(&d_x, max_bytes));
    CUDA_CHECK(cudaMalloc(&d_out, max_bytes));
    multigpu::fillAllreduceInput<<<multigpu::grid_for(max_n, sms), multigpu::kThreads, 0, stream>>>(d_x, max_n, seed,
                                                                                                    rank);
    CUDA_CHECK_LAUNCH();
    auto allreduce = [&](uint64_t count) {  // no group: one rank in this process
        nccl_issued(comm, ncclAllReduce(d_x, d_out, count, ncclFloat, ncclSum, comm, stream), "ncclAllReduce");
    };
    auto wait_all = [&] { nccl_wait(comm, stream, "all-reduce on the rank's stream"); };  // not cudaStreamSynchronize
    std::vector<float> h(max_n);
    std::string lines;
    bool pass = true;
    for (uint64_t bytes : verify::sweep_sizes(max_bytes)) {
        const uint64_t count = bytes / 4;
        CUDA_CHECK(cudaMemsetAsync(d_out, 0xFF, bytes, stream));
        allreduce(count);
        CUDA_CHECK(cudaMemcpyAsync(h.data(), d_out, bytes, cudaMemcpyDeviceToHost, stream));
        wait_all();
        if (o.common.inject_fault && rank == 0 && bytes == max_bytes) verify::inject_fault(h.data(), count, seed);
        const lesson::Check c = verify::check_allreduce(h.data(), count, seed, P, "");
        pass = pass && c.pass;
        verify::RankLine l;
        l.bytes = bytes;
        auto one_call = [&] { allreduce(count); };
        l.ms = burst_ms(bytes, int(o.common.repeat), one_call, wait_all);
        l.checked = c.checked;
        l.bad = c.bad_count;
        l.first_bad = c.first_bad;
        lines += verify::format_rank_line(l);
    }
    const std::string out = o.id_file + ".rank" + std::to_string(rank);
    std::ofstream f(out + ".tmp");
    f << lines;
    f.close();
    if (!f || std::rename((out + ".tmp").c_str(), out.c_str()) != 0)
        lesson::fail_call("host", "write the rank's results", std::strerror(errno), __FILE__, __LINE__);
    nccl_issued(comm, ncclCommFinalize(comm), "ncclCommFinalize (quiescent on every rank)");
    NCCL_CHECK(ncclCommDestroy(comm));
    CUDA_CHECK(cudaFree(d_x));
    CUDA_CHECK(cudaFree(d_out));
    CUDA_CHECK(cudaStreamDestroy(stream));
    return pass ? 0 : 1;
}

// Starts rank r: this program again (posix_spawn: a fresh process image, so it does not matter
// that this process has initialized CUDA), its output in `log`.
static pid_t spawn_rank(const char* exe, int r, int P, const std::string& id_file, const std::string& log,
                        const Options& o) {
    std::vector<std::string> args = {exe,
                                     "--rank=" + std::to_string(r),
                                     "--ranks=" + std::to_string(P),
                                     "--nccl-id-file=" + id_file,
                                     "--device=" + std::to_string(o.common.device),
                                     "--max-mib=" + std::to_string(o.max_mib),
                                     "--repeat=" + std::to_string(o.common.repeat),
                                     "--seed=" + std::to_string(o.common.seed)};
    if (o.common.inject_fault) args.push_back("--inject-fault");
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(&a[0]);
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    pid_t pid = -1;
    const int e = posix_spawn(&pid, exe, &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (e != 0) lesson::fail_call("host", "posix_spawn of a rank", std::strerror(e), __FILE__, __LINE__);
    return pid;
}

// Waits for every rank, at most 300 s; a rank still running then is stopped (by its pid) and
// counts as exit status 124. Returns each rank's exit status (128 + signal where one ended it).
static std::vector<int> wait_for_ranks(std::vector<pid_t> pids) {
    const int P = int(pids.size());
    std::vector<int> status(size_t(P), -1);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(300);
    for (int left = P; left > 0;) {
        for (int r = 0; r < P; ++r) {
            if (pids[size_t(r)] < 0) continue;
            int st = 0;
            if (waitpid(pids[size_t(r)], &st, WNOHANG) == pids[size_t(r)]) {
                status[size_t(r)] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
                pids[size_t(r)] = -1;
                --left;
            }
        }
        if (left > 0 && std::chrono::steady_clock::now() > deadline) {
            for (int r = 0; r < P; ++r)
                if (pids[size_t(r)] > 0) {
                    kill(pids[size_t(r)], SIGKILL);
                    waitpid(pids[size_t(r)], nullptr, 0);
                    pids[size_t(r)] = -1;
                    status[size_t(r)] = 124;
                }
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return status;
}

// The launcher's side: start P copies of this program, hand them a file for the id, wait for them,
// and collect their lines. Across machines, mpirun or torchrun play this part.
static void part_ranks(const Options& o, int P, lesson::Report& report) {
    char dir_buf[] = "/tmp/multi_gpu_ranks.XXXXXX";
    if (!mkdtemp(dir_buf)) lesson::fail_call("host", "mkdtemp", std::strerror(errno), __FILE__, __LINE__);
    const std::string dir = dir_buf, id_file = dir + "/nccl_id";
    char exe[4096];
    const ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0) lesson::fail_call("host", "readlink /proc/self/exe", std::strerror(errno), __FILE__, __LINE__);
    exe[len] = '\0';
    std::printf("part 4: %d processes, one per GPU (ncclCommInitRankConfig; the id handed over in %s)\n", P,
                id_file.c_str());
    std::fflush(stdout);

    std::vector<pid_t> pids(size_t(P), -1);
    for (int r = 0; r < P; ++r)
        pids[size_t(r)] = spawn_rank(exe, r, P, id_file, dir + "/rank" + std::to_string(r) + ".log", o);
    const std::vector<int> status = wait_for_ranks(pids);

    // Collect: per size, the slowest rank's time (the collective ends when its last rank does).
    std::vector<verify::RankLine> rows;
    lesson::Check all;
    bool complete = true;
    for (int r = 0; r < P; ++r) {
        const std::string log = dir + "/rank" + std::to_string(r) + ".log";
        if (status[size_t(r)] != 0) {
            std::printf("  rank %d exited with %d; its output:\n", r, status[size_t(r)]);
            std::ifstream lf(log);
            for (std::string line; std::getline(lf, line);) std::printf("    rank %d: %s\n", r, line.c_str());
        }
        std::ifstream f(id_file + ".rank" + std::to_string(r));
        size_t i = 0;
        for (std::string line; std::getline(f, line); ++i) {
            verify::RankLine l;
            if (!verify::parse_rank_line(line + "\n", &l)) break;
            if (rows.size() <= i) rows.push_back(l);
            else rows[i].ms = std::max(rows[i].ms, l.ms);
            lesson::Check c;
            c.checked = l.checked;
            c.bad_count = l.bad;
            c.first_bad = l.first_bad;
            c.rel_l2 = l.bad ? NAN : 0.0;
            c.max_abs = l.bad ? NAN : 0.0;
            c.pass = l.bad == 0 && l.checked > 0;
            merge_check(all, c);
        }
        complete = complete && i == verify::sweep_sizes(uint64_t(o.max_mib) << 20).size();
        std::remove((id_file + ".rank" + std::to_string(r)).c_str());
        std::remove(log.c_str());
    }
    std::remove(id_file.c_str());
    rmdir(dir.c_str());
    all.what = "one process per GPU (" + std::to_string(P) +
               " ranks, non-blocking ncclCommInitRankConfig): every rank's result vs the "
               "exact sum, every element, every size; every rank exited 0 with all its lines";
    all.pass = all.pass && complete && std::all_of(status.begin(), status.end(), [](int s) { return s == 0; });
    report.check(all);
    if (rows.empty()) return;
    print_table_head("NCCL all-reduce, one process per GPU (ncclCommInitRankConfig), slowest rank:");
    for (const verify::RankLine& l : rows) print_table_row(l.bytes, l.ms, P, l.bad);
    const verify::RankLine& top = rows.back();
    report.variant("NCCL all-reduce " + std::to_string(top.bytes) + " B, one process per GPU, busbw", top.ms,
                   verify::algbw_gbps(double(top.bytes), top.ms) * verify::allreduce_busbw_factor(P), "GB/s");
}
#endif
