// common/phases.h - where a lesson's wall time goes. With LESSON_PHASES=1 in the environment, the
// shared helpers (device set-up, the bound probes, time_median_ms, fills and host-parallel work)
// print one line each to stderr when they end: "[phase] <start s> <seconds> <what>", the start
// counted from flag parsing. Without the variable they print nothing and cost one branch.
// docs/measuring.md shows how to read it.
#pragma once
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace lesson {
namespace detail {
inline bool phases_on() {
    static const bool on = [] {
        const char* v = std::getenv("LESSON_PHASES");
        return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
    }();
    return on;
}
inline double phase_now_s() {
    using Clock = std::chrono::steady_clock;
    static const Clock::time_point t0 = Clock::now();
    return std::chrono::duration<double>(Clock::now() - t0).count();
}
inline int& phase_depth() {
    thread_local int depth = 0;
    return depth;
}
}  // namespace detail

// One phase: printed when it ends, indented by how many phases enclose it; phases shorter than
// min_s are not printed (host-parallel loops, which lessons call many times).
class Phase {
public:
    explicit Phase(const char* what, long long detail = -1, double min_s = 0.0)
        : on_(detail::phases_on()), what_(what), detail_(detail), min_s_(min_s) {
        if (!on_) return;
        start_ = detail::phase_now_s();
        ++detail::phase_depth();
    }
    ~Phase() {
        if (!on_) return;
        const int depth = --detail::phase_depth();
        const double s = detail::phase_now_s() - start_;
        if (s < min_s_) return;
        if (detail_ >= 0)
            std::fprintf(stderr, "[phase] %8.3f %8.3f %*s%s (%lld)\n", start_, s, 2 * depth, "", what_, detail_);
        else std::fprintf(stderr, "[phase] %8.3f %8.3f %*s%s\n", start_, s, 2 * depth, "", what_);
    }
    Phase(const Phase&) = delete;
    Phase& operator=(const Phase&) = delete;

private:
    bool on_;
    const char* what_;
    long long detail_;
    double min_s_;
    double start_ = 0.0;
};

// Starts the phase clock (flag parsing calls it first thing).
inline void phase_clock_start() { (void)detail::phase_now_s(); }

}  // namespace lesson
