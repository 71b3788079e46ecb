// verify/parallel.h - the host cores for fills, references and comparisons.
//
// A lesson's host work (random inputs, CPU references, the comparison) is
// O(n) to O(n^3) and, on one core, can take longer than everything the GPU
// does. These helpers spread it over plain std::threads, joined before they
// return, and keep every result deterministic for any thread count:
//
//   parallel_blocks   f(begin, end) over fixed blocks of [0, n). Each output is
//                     computed by the same loop body whatever thread runs it,
//                     so references come out bit-identical to one thread.
//   block_partials    a reduction's partial for every block, in block order.
//                     The blocks depend on n and the block size only, never on
//                     the thread count, so combining the partials in order gives
//                     the same bits on 1 thread or 64.
//   parallel_for      fn(i) for each i in [0, count): whole independent items
//                     (images of a batch), each taking the next free index.
//   parallel_copy, parallel_memset
//                     memcpy and memset of gigabytes, in blocks on all host cores.
//   touch_pages       a fresh buffer written once, before anything is timed.
//   host_vector       a std::vector that leaves its elements uninitialised, so that
//                     the (parallel) loop that fills it is the first to touch its pages.
//
// A helper called from inside one of these loops runs inline: a batch of
// images already on every core gains nothing from cores x cores threads.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <system_error>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/phases.h"
#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace verify {

// The host threads the helpers use: every core, or LESSON_HOST_THREADS (>= 1)
// when set, so that a test (or a person timing the references) can choose.
inline int host_threads() {
    if (const char* env = std::getenv("LESSON_HOST_THREADS")) {
        char* end = nullptr;
        const long v = std::strtol(env, &end, 10);
        if (end != env && *end == '\0' && v >= 1) return static_cast<int>(std::min<long>(v, 1024));
    }
    const unsigned cores = std::thread::hardware_concurrency();  // 0 when unknown
    return cores > 0 ? static_cast<int>(cores) : 1;
}

// About how many simple operations a block should hold so that starting a
// thread (tens of microseconds) is small next to the work it does.
constexpr uint64_t kBlockWork = uint64_t(1) << 16;

// Items per block when each item costs `work_per_item` simple operations.
inline uint64_t items_per_block(uint64_t work_per_item) {
    return std::max<uint64_t>(1, kBlockWork / std::max<uint64_t>(1, work_per_item));
}

// Elements per block of the reductions in verify/compare.h. A fixed number: it
// decides the order of the floating-point sums, so it must not follow the thread count.
constexpr uint64_t kReduceBlock = uint64_t(1) << 16;

namespace detail {

// True on a thread that is working for one of the loops below; nested loops run inline there.
inline bool& inside_parallel() {
    thread_local bool inside = false;
    return inside;
}

// Runs work() on `team` threads, this one included, and joins them. work()
// takes items from a shared counter until none are left, so the items all get
// done even when the system refuses to start some of the threads.
template <class Work>
void run_team(int team, const Work& work) {
    auto member = [&work] {
        bool& inside = inside_parallel();
        const bool was = inside;
        inside = true;
        work();
        inside = was;
    };
    std::vector<std::thread> pool;
    pool.reserve(static_cast<size_t>(team - 1));
    try {
        for (int t = 1; t < team; ++t) pool.emplace_back(member);
    } catch (const std::system_error&) {
        // No more threads to be had: the ones started, and this one, do all the work.
    }
    member();
    for (std::thread& th : pool) th.join();
}

}  // namespace detail

// Splits [0, n) into blocks of `grain` elements (the last one shorter) and calls
// f(begin, end) once per block, on up to `threads` threads (0: host_threads()).
// One block, one thread, or a call from inside another parallel loop: the blocks
// run here, in order. f must be safe to run concurrently on different blocks.
template <class F>
void parallel_blocks(uint64_t n, uint64_t grain, const F& f, int threads = 0) {
    const lesson::Phase phase("host parallel_blocks, items", (long long)n, 0.02);
    grain = std::max<uint64_t>(grain, 1);
    const uint64_t blocks = n / grain + (n % grain != 0);
    auto block = [&](uint64_t b) {
        const uint64_t begin = b * grain;
        f(begin, begin + std::min(grain, n - begin));
    };
    if (threads <= 0) threads = host_threads();
    const uint64_t team = detail::inside_parallel() ? 1 : std::min<uint64_t>(uint64_t(threads), blocks);
    if (team <= 1) {
        for (uint64_t b = 0; b < blocks; ++b) block(b);
        return;
    }
    std::atomic<uint64_t> next{0};
    detail::run_team(static_cast<int>(team), [&] {
        for (uint64_t b; (b = next.fetch_add(1)) < blocks;) block(b);
    });
}

// partial(begin, end) for every block of `grain` elements of [0, n), returned in
// block order: the caller combines them in that order, on one thread.
template <class T, class F>
std::vector<T> block_partials(uint64_t n, uint64_t grain, const F& partial, int threads = 0) {
    grain = std::max<uint64_t>(grain, 1);
    std::vector<T> parts(static_cast<size_t>(n / grain + (n % grain != 0)));
    parallel_blocks(
        n, grain, [&](uint64_t begin, uint64_t end) { parts[begin / grain] = partial(begin, end); }, threads);
    return parts;
}

// Calls fn(i) for every i in [0, count), on up to `threads` host threads (0 =
// host_threads()), each taking the next index when it is free. fn must be safe
// to run concurrently for different i (write to separate places, or lock).
template <class Fn>
void parallel_for(int64_t count, Fn&& fn, int64_t threads = 0) {
    const lesson::Phase phase("host parallel_for, items", (long long)count, 0.02);
    if (threads <= 0) threads = host_threads();
    const int64_t team = detail::inside_parallel() ? 1 : std::min(threads, count);
    std::atomic<int64_t> next{0};
    auto work = [&] {
        for (int64_t i; (i = next++) < count;) fn(i);
    };
    if (team <= 1) {
        work();
        return;
    }
    detail::run_team(static_cast<int>(std::min<int64_t>(team, 1024)), work);
}

// dst[0..n) = src[0..n) (no overlap), in blocks on all host cores. A single-threaded memcpy of a
// gigabyte takes 0.1-0.3 s, longer where the destination's pages are touched for the first time.
template <class T>
void parallel_copy(T* dst, const T* src, uint64_t n, int threads = 0) {
    static_assert(std::is_trivially_copyable<T>::value, "parallel_copy copies bytes");
    const uint64_t grain = std::max<uint64_t>(1, (uint64_t(1) << 20) / sizeof(T));  // 1 MiB per block
    parallel_blocks(
        n, grain,
        [=](uint64_t begin, uint64_t end) { std::memcpy(dst + begin, src + begin, (end - begin) * sizeof(T)); },
        threads);
}

// `bytes` bytes at dst set to `value` (as memset), in blocks on all host cores.
inline void parallel_memset(void* dst, int value, uint64_t bytes, int threads = 0) {
    unsigned char* p = static_cast<unsigned char*>(dst);
    parallel_blocks(
        bytes, uint64_t(1) << 20, [=](uint64_t begin, uint64_t end) { std::memset(p + begin, value, end - begin); },
        threads);
}

// The operating system hands out a page of a fresh allocation only when something first writes
// it; a pageable copy into untouched pages would time those page faults with the transfer.
inline void touch_pages(void* p, uint64_t bytes) { parallel_memset(p, 0, bytes); }

// An allocator whose value-initialisation is default-initialisation: host_vector<float> v(n)
// leaves its floats uninitialised (a std::vector<float> of a gigabyte first zeroes it, on one
// thread, 0.3-0.5 s), so the parallel loop that fills it is the first to touch its pages.
// Read no element before writing it. Everything else is std::vector's.
//
// On Linux, a buffer of 16 MB or more is asked for in 2 MB pages (transparent huge pages,
// madvise): a gigabyte is then 512 pages to fault in and free, not 262,144, and the threads
// that first touch it do not queue on the page tables. Where the kernel has none to give, the
// buffer is in ordinary 4 KB pages.
constexpr size_t kHugePage = size_t(2) << 20, kHugeFrom = size_t(16) << 20;
template <class T>
struct DefaultInitAllocator : std::allocator<T> {
    template <class U>
    struct rebind {
        using other = DefaultInitAllocator<U>;
    };
    DefaultInitAllocator() = default;
    template <class U>
    DefaultInitAllocator(const DefaultInitAllocator<U>&) noexcept {}
#if defined(__linux__)
    T* allocate(size_t n) {
        if (n > SIZE_MAX / sizeof(T)) throw std::bad_array_new_length();
        const size_t bytes = n * sizeof(T);
        if (bytes < kHugeFrom) return std::allocator<T>::allocate(n);
        const size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
        void* p = std::aligned_alloc(kHugePage, rounded);
        if (!p) throw std::bad_alloc();
        madvise(p, rounded, MADV_HUGEPAGE);  // a request: nothing fails without it
        return static_cast<T*>(p);
    }
    void deallocate(T* p, size_t n) noexcept {
        if (n * sizeof(T) < kHugeFrom) return std::allocator<T>::deallocate(p, n);
        std::free(p);
    }
#endif
    template <class U>
    void construct(U* p) noexcept(std::is_nothrow_default_constructible<U>::value) {
        ::new (static_cast<void*>(p)) U;
    }
    template <class U, class... Args>
    void construct(U* p, Args&&... args) {
        ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
    }
};
template <class T>
using host_vector = std::vector<T, DefaultInitAllocator<T>>;

}  // namespace verify
