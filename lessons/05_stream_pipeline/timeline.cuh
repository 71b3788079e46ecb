// Lesson 05 (stream pipeline): the --timeline picture. The pipeline runs again with 4 events per
// chunk (before H2D, after H2D, after the kernel, after D2H), and the intervals between them
// become one row per stream and stage of an SVG Gantt chart (lesson::Timeline, common/timeline.h).
// Run: ./build/bin/stream_pipeline --timeline=timeline.svg   (README.md is the handout)
#pragma once
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common/check.h"
#include "common/report.h"
#include "common/timeline.h"

// The picture's file, opened before any CUDA call (the flag parser already checked that it can
// be written); nullptr without --timeline.
inline std::FILE* open_timeline(const std::string& path) {
    std::FILE* file = nullptr;
    if (!path.empty() && !(file = std::fopen(path.c_str(), "w")))
        lesson::bad_input("--timeline=" + path + " cannot be opened for writing (" + std::strerror(errno) + ")");
    return file;
}

// 1 stream, then 2 and 4 (and the fastest count), each a full run; the picture draws the first
// 16 chunks of each, where start-up and steady state both show. run(S, t0, &marks) is one
// verified run on S streams: t0 recorded on stream 0 where it starts, marks[4 i .. 4 i + 3]
// recorded around chunk i's copies and kernel (chunks of `chunk` n x n matrices).
template <class Run>
void draw_timeline(std::FILE* file, const std::string& path, const std::string& device, int64_t chunk, int64_t n,
                   uint64_t chunks, int best_S, int S_max, lesson::Report& report, Run&& run) {
    std::vector<int> shown = {1};
    for (int S : {2, 4, best_S})
        if (S <= S_max && std::find(shown.begin(), shown.end(), S) == shown.end()) shown.push_back(S);
    std::sort(shown.begin(), shown.end());
    const uint64_t drawn = std::min<uint64_t>(chunks, 16);
    lesson::Timeline tl("stream_pipeline on " + device + ": first " + std::to_string(drawn) + " of " +
                        std::to_string(chunks) + " chunks (" + std::to_string(chunk) + " matrices " +
                        std::to_string(n) + "x" + std::to_string(n) + " each)");
    std::vector<cudaEvent_t> marks(4 * chunks);
    for (cudaEvent_t& e : marks) CUDA_CHECK(cudaEventCreate(&e));
    cudaEvent_t t0;
    CUDA_CHECK(cudaEventCreate(&t0));
    const char* what[3] = {"H2D A,B", "kernel", "D2H C"};
    const char* color[3] = {"#4e79a7", "#59a14f", "#f28e2b"};
    for (int S : shown) {
        run(S, t0, &marks);
        float total = 0, t = 0;
        for (uint64_t i = 0; i < chunks; ++i) {
            CUDA_CHECK(cudaEventElapsedTime(&t, t0, marks[4 * i + 3]));
            total = std::max(total, t);
        }
        char head[96];
        std::snprintf(head, sizeof head, "%d stream%s (whole run %.2f ms)", S, S == 1 ? "" : "s", total);
        tl.add_row(head, true);
        const int row0 = static_cast<int>(tl.rows());
        for (int s = 0; s < S; ++s)
            for (int k = 0; k < 3; ++k) tl.add_row("stream " + std::to_string(s) + " " + what[k]);
        for (uint64_t i = 0; i < drawn; ++i)
            for (int k = 0; k < 3; ++k) {
                float a = 0, b = 0;
                CUDA_CHECK(cudaEventElapsedTime(&a, t0, marks[4 * i + k]));
                CUDA_CHECK(cudaEventElapsedTime(&b, t0, marks[4 * i + k + 1]));
                char tip[96];
                std::snprintf(tip, sizeof tip, "chunk %llu %s: %.3f to %.3f ms", (unsigned long long)i, what[k], a, b);
                tl.add_bar(row0 + static_cast<int>(i % S) * 3 + k, a, b, color[k], tip);
            }
    }
    for (int k = 0; k < 3; ++k) tl.add_legend(color[k], what[k]);
    for (cudaEvent_t& e : marks) CUDA_CHECK(cudaEventDestroy(e));
    CUDA_CHECK(cudaEventDestroy(t0));
    const bool written = tl.write(file);
    if ((std::fclose(file) != 0) || !written)
        lesson::fail_call("host", "write --timeline", std::strerror(errno), __FILE__, __LINE__);
    report.note("timeline written to " + path + " (events around each H2D, kernel and D2H)");
}
