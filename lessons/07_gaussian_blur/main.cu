// Lesson 07 of the course (00-23): 3x3 Gaussian blur, tiled kernels and a streamed batch.
// Before: lesson 06 (06_tiled_matmul). Next: lesson 08 (08_cublas_sgemm).
// Run: ./build/bin/gaussian_blur [--quick]   (--help lists every flag; README.md is the handout)
//
// 3x3 Gaussian blur: a naive kernel, two shared-memory tiled
// kernels, and a batch of images streamed through the GPU in chunks.
//
// Part 1 blurs one large image four times, a ladder of four rungs: a naive
// kernel that reads its 9 neighbours from global memory; a one-tile kernel, one
// 2D block per 32 x 8 output tile, that loads the tile and its one-pixel halo
// (corners included) into shared memory, waits at one barrier, and blurs; and
// the tiled kernel, which loops over 128 x 32 tiles and loads its next tile
// while it blurs this one; and a kernel with no shared memory at all, each
// thread sliding a window of three rows down a float4 column strip.
// Part 2 pushes a batch of small images through 3 streams in chunks, pinned
// host memory, one launch per chunk (blockIdx.z = image) against one launch per
// image. Border rule everywhere: clamp-to-edge.
// Lesson 07 of the course: lesson 06 tiled a matrix product in shared memory,
// lesson 08 calls cuBLAS. See README.md.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "common/ceilings.h"
#include "common/check.h"
#include "common/device.h"
#include "common/flags.h"
#include "common/launch.h"
#include "common/memory.h"
#include "common/report.h"
#include "common/timer.h"
#include "verify/blur.h"
#include "verify/compare.h"
#include "verify/parallel.h"
#include "verify/random.h"

constexpr int kTileW = 128;      // a tile is kTileW x kTileH output pixels, one block of kTileW x kRows threads
constexpr int kRows = 4;         // thread rows per block
constexpr int kPer = 8;          // output pixels per thread, one column of kPer consecutive rows
constexpr int kBlocksPerSm = 3;  // tiled blocks that must fit on one SM: caps registers per thread
constexpr int kTileH = kRows * kPer;
constexpr int kHaloW = 32, kHaloH = 8;  // the one-tile kernel: a 32 x 8 block writes a 32 x 8 tile

// [1 2 1] along a row; the 3x3 kernel is [1 2 1]^T [1 2 1] / 16.
__device__ __forceinline__ float taps121(float l, float c, float r) { return l + 2.0f * c + r; }

// Clamp-to-edge: a neighbour outside the image reads the nearest pixel inside it.
__device__ __forceinline__ int clampToEdge(int i, int n) { return min(max(i, 0), n - 1); }

// One thread per pixel, 9 reads from global memory (neighbours mostly hit the L1/L2 caches).
__global__ void blur3x3Naive(const float* __restrict__ in, float* __restrict__ out, int width, int height) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= width || y >= height) return;
    const int xl = clampToEdge(x - 1, width), xr = clampToEdge(x + 1, width);
    const float* up = in + static_cast<size_t>(clampToEdge(y - 1, height)) * width;
    const float* mid = in + static_cast<size_t>(y) * width;
    const float* down = in + static_cast<size_t>(clampToEdge(y + 1, height)) * width;
    const float s = taps121(up[xl], up[x], up[xr]) + 2.0f * taps121(mid[xl], mid[x], mid[xr]) +
                    taps121(down[xl], down[x], down[xr]);
    out[static_cast<size_t>(y) * width + x] = s * (1.0f / 16.0f);
}

// One 2D block per kHaloW x kHaloH tile of outputs, one thread per output pixel. The block
// copies the (kHaloH+2) x (kHaloW+2) input cells its tile needs - the tile and a one-pixel halo,
// corners included - into shared memory, its threads striding over the cells numbered row by row
// (so no edge or corner can be forgotten), waits once, and blurs from shared memory. Every thread
// loads and reaches the barrier, also in blocks that hang over the image edge; only the final
// store is guarded.
__global__ void blur3x3Halo(const float* __restrict__ in, float* __restrict__ out, int width, int height) {
    // EXERCISE 1 BEGIN: stage the block's tile and its one-pixel halo (corners too) in shared memory, then blur from it
    // HINT: number the (kHaloH + 2) x (kHaloW + 2) cells row by row; the 256 threads stride over them, clampToEdge
    // HINT: every thread loads and reaches the barrier, also in blocks past the image edge; guard only the store
    constexpr int kSide = kHaloW + 2, kCells = kSide * (kHaloH + 2), kThreads = kHaloW * kHaloH;
    __shared__ float tile[kHaloH + 2][kSide];
    const int x0 = blockIdx.x * kHaloW, y0 = blockIdx.y * kHaloH;  // the tile's top-left output pixel
    // Cell (r, c) holds input pixel (x0 + c - 1, y0 + r - 1), clamped to the image.
    for (int i = threadIdx.y * kHaloW + threadIdx.x; i < kCells; i += kThreads) {
        const int r = i / kSide, c = i % kSide;
        tile[r][c] = in[static_cast<size_t>(clampToEdge(y0 + r - 1, height)) * width + clampToEdge(x0 + c - 1, width)];
    }
    __syncthreads();  // every cell is written before any thread reads its neighbours
    const int x = x0 + threadIdx.x, y = y0 + threadIdx.y;
    const int c = threadIdx.x + 1, r = threadIdx.y + 1;  // this thread's pixel in the shared tile
    if (x < width && y < height) {
        const float s = taps121(tile[r - 1][c - 1], tile[r - 1][c], tile[r - 1][c + 1]) +
                        2.0f * taps121(tile[r][c - 1], tile[r][c], tile[r][c + 1]) +
                        taps121(tile[r + 1][c - 1], tile[r + 1][c], tile[r + 1][c + 1]);
        out[static_cast<size_t>(y) * width + x] = s * (1.0f / 16.0f);
    }
    // EXERCISE 1 END
}

// The image blockIdx.z (images stored back to back) is cut into kTileW x kTileH tiles, numbered
// row by row; block b blurs tiles b, b + gridDim.x, ... (a grid-stride loop over tiles). Per tile:
// 1. store the (kTileW+2) x (kTileH+2) input tile, halo and its four corners included, from
//    registers into shared memory; 2. __syncthreads(); 3. issue the loads of the block's next tile
//    into registers; 4. blur this tile from shared memory while those loads are in flight.
// Two shared buffers take turns, so one barrier per tile is enough.
__global__ void __launch_bounds__(kTileW* kRows, kBlocksPerSm)
    blur3x3Tiled(const float* __restrict__ in, float* __restrict__ out, int width, int height) {
    __shared__ float tile[2][kTileH + 2][kTileW + 2];
    const size_t image = static_cast<size_t>(blockIdx.z) * width * height;
    in += image;
    out += image;
    const int tilesAcross = (width + kTileW - 1) / kTileW;
    const int tiles = tilesAcross * ((height + kTileH - 1) / kTileH);
    // Number the shared cells row by row; the block's threads stride over all of them, so the
    // halo and its four corners are loaded like any other cell. Cell i = (r, c) of tile k holds
    // input pixel (x0 + c - 1, y0 + r - 1), clamped to the image, (x0, y0) = tile k's top left.
    constexpr int kSide = kTileW + 2, kCells = kSide * (kTileH + 2), kThreads = kTileW * kRows;
    constexpr int kPasses = (kCells + kThreads - 1) / kThreads;  // cells per thread, rounded up
    const int t = threadIdx.y * kTileW + threadIdx.x;
    float v[kPasses];  // this thread's cells of the tile in flight
    // All kPasses loads are issued back to back, so they wait for memory together (README, "What
    // to observe"). In the last pass, a cell number past the tile's last cell still gives a valid
    // (clamped) address, so it loads without a branch; only its store is skipped.
    auto load = [&](int k) {
        const int left = (k % tilesAcross) * kTileW - 1, top = (k / tilesAcross) * kTileH - 1;  // cell (0, 0)
        int r = t / kSide, c = t % kSide;  // cell t + p * kThreads, stepped pass by pass
#pragma unroll
        for (int p = 0; p < kPasses; ++p) {
            v[p] = in[static_cast<size_t>(clampToEdge(top + r, height)) * width + clampToEdge(left + c, width)];
            r += kThreads / kSide;
            c += kThreads % kSide;
            if (c >= kSide) c -= kSide, ++r;
        }
    };
    const int first = blockIdx.x, step = gridDim.x;
    if (first < tiles) load(first);
    int b = 0;                                           // the shared buffer of this tile
    for (int k = first; k < tiles; k += step, b ^= 1) {  // the same trip count in every thread
#pragma unroll
        for (int p = 0; p < kPasses; ++p) {
            if (t + p * kThreads < kCells) (&tile[b][0][0])[t + p * kThreads] = v[p];
        }
        // Threads of a partial tile load and store too (clamped): no thread may skip the barrier.
        __syncthreads();  // without it a thread may read a cell that its neighbour has not written yet
        // Buffer b ^ 1 is free: every thread passed this barrier after blurring from it.
        if (k + step < tiles) load(k + step);  // in flight while this tile is blurred

        // The kernel is separable: [1 2 1] across each shared row, then [1 2 1] down the column.
        // A thread's kPer output rows need kPer + 2 shared rows, each summed across once (registers).
        const int c = threadIdx.x + 1, r0 = threadIdx.y * kPer;  // shared rows r0 .. r0 + kPer + 1
        float across[kPer + 2];
#pragma unroll
        for (int i = 0; i < kPer + 2; ++i)
            across[i] = taps121(tile[b][r0 + i][c - 1], tile[b][r0 + i][c], tile[b][r0 + i][c + 1]);
        const int x = (k % tilesAcross) * kTileW + threadIdx.x, y0 = (k / tilesAcross) * kTileH + r0;
#pragma unroll
        for (int i = 0; i < kPer; ++i) {
            const int y = y0 + i;
            if (x < width && y < height)
                out[static_cast<size_t>(y) * width + x] =
                    taps121(across[i], across[i + 1], across[i + 2]) * (1.0f / 16.0f);
        }
    }
}

// Rung 4: no shared memory at all. Each thread owns VEC adjacent columns (one float4 when the
// width is a multiple of 4) and walks down a strip of kStrip rows. Per row it loads its VEC
// pixels with one 16-byte load plus the pixel left and right of them (its neighbours' loads
// brought those lines into L1, so they cost no DRAM traffic), sums [1 2 1] across, and keeps
// the last three rows of those sums in registers: the vertical [1 2 1] needs no reload. Each
// input row is read from DRAM once per strip (plus 2 halo rows per kStrip, mostly L2 hits).
constexpr int kStrip = 16;              // output rows per thread
constexpr int kRowsX = 64, kRowsY = 4;  // block: 64 column groups x 4 strips
template <int VEC>
__global__ void __launch_bounds__(kRowsX* kRowsY)
    blur3x3Rows(const float* __restrict__ in, float* __restrict__ out, int width, int height) {
    const int x = VEC * (blockIdx.x * kRowsX + threadIdx.x);  // first of this thread's columns
    if (x >= width) return;
    const int y0 = (blockIdx.y * kRowsY + threadIdx.y) * kStrip;
    if (y0 >= height) return;
    const int xl = max(x - 1, 0), xr = min(x + VEC, width - 1);  // clamp-to-edge across
    auto across = [&](int y, float(&sum)[VEC]) {                 // [1 2 1] across row y (clamped) for the VEC columns
        const float* row = in + static_cast<size_t>(clampToEdge(y, height)) * width;
        float c[VEC + 2];
        c[0] = row[xl];
        if constexpr (VEC == 4) {
            const float4 q = *reinterpret_cast<const float4*>(row + x);
            c[1] = q.x, c[2] = q.y, c[3] = q.z, c[4] = q.w;
        } else {
            c[1] = row[x];
        }
        c[VEC + 1] = row[xr];
#pragma unroll
        for (int j = 0; j < VEC; ++j) sum[j] = taps121(c[j], c[j + 1], c[j + 2]);
    };
    float above[VEC], here[VEC], below[VEC];
    across(y0 - 1, above);
    across(y0, here);
    const int y_end = min(y0 + kStrip, height);
#pragma unroll 4
    for (int y = y0; y < y_end; ++y) {
        across(y + 1, below);
        float o[VEC];
#pragma unroll
        for (int j = 0; j < VEC; ++j) o[j] = taps121(above[j], here[j], below[j]) * (1.0f / 16.0f);
        float* dst = out + static_cast<size_t>(y) * width + x;
        if constexpr (VEC == 4) *reinterpret_cast<float4*>(dst) = make_float4(o[0], o[1], o[2], o[3]);
        else dst[0] = o[0];
#pragma unroll
        for (int j = 0; j < VEC; ++j) above[j] = here[j], here[j] = below[j];
    }
}

// Every pixel of `count` images of w x h at h_in / h_out against the double-precision reference.
static lesson::Check verify_images(const float* h_in, const float* h_out, int64_t w, int64_t h, int64_t count,
                                   const std::string& what) {
    const size_t pixels = static_cast<size_t>(w * h);
    // Small images (one comparison block each): a group of images at once, one image per host
    // thread, its reference and its comparison in a Comparer of its own; the images' Comparers
    // are then added in image order, the same sums as one image at a time. Large images: one at a
    // time, each reference and comparison on all host cores.
    const bool small = pixels <= verify::kReduceBlock;
    const int64_t group = small ? 256 : 1;
    verify::host_vector<double> ref(pixels * size_t(std::max<int64_t>(1, std::min(group, count))));
    verify::blur3x3_reference(h_in, ref.data(), w, h);
    const double scale = verify::rms(ref.data(), pixels);  // every image has the same distribution
    verify::Comparer cmp(1e-5, scale);
    for (int64_t g0 = 0; g0 < count; g0 += group) {
        const int64_t n = std::min(group, count - g0);
        std::vector<verify::Comparer> part(size_t(n), verify::Comparer(1e-5, scale));
        verify::parallel_for(n, [&](int64_t k) {
            const size_t first = size_t(g0 + k) * pixels;
            if (g0 + k > 0) verify::blur3x3_reference(h_in + first, ref.data() + k * pixels, w, h);
            if (small) part[k].add(h_out + first, ref.data() + k * pixels, pixels, first);
        });
        for (int64_t k = 0; k < n; ++k) {
            if (small) cmp.add(part[k]);
            else cmp.add(h_out + (g0 + k) * pixels, ref.data() + k * pixels, pixels, (g0 + k) * pixels);
        }
    }
    return cmp.result(what);
}

// One image on the device and the launch shape of the tiled kernel (blocks the GPU holds at once).
struct Image {
    const float* in;
    float* out;
    int width, height;
    unsigned tiled_blocks;
};

// The launchers, one per rung. Grids ceil-divide the image (main() checked every one fits).
static void launch_naive(const Image& im) {  // one pixel per thread
    const lesson::Grid g = lesson::grid_for(uint64_t(im.width), uint64_t(im.height), 1, kTileW, kRows);
    blur3x3Naive<<<dim3(g.x, g.y), dim3(kTileW, kRows)>>>(im.in, im.out, im.width, im.height);
    CUDA_CHECK_LAUNCH();
}
static void launch_halo(const Image& im) {  // one block per kHaloW x kHaloH tile
    const lesson::Grid g = lesson::grid_for(uint64_t(im.width), uint64_t(im.height), 1, kHaloW, kHaloH);
    blur3x3Halo<<<dim3(g.x, g.y), dim3(kHaloW, kHaloH)>>>(im.in, im.out, im.width, im.height);
    CUDA_CHECK_LAUNCH();
}
static void launch_tiled(const Image& im) {  // each block loops over every gridDim.x-th tile
    blur3x3Tiled<<<dim3(im.tiled_blocks, 1, 1), dim3(kTileW, kRows)>>>(im.in, im.out, im.width, im.height);
    CUDA_CHECK_LAUNCH();
}
template <int VEC>
static void launch_rows(const Image& im) {  // VEC columns per thread, a strip of kStrip rows
    const dim3 grid(unsigned(lesson::ceil_div(lesson::ceil_div(uint64_t(im.width), VEC), kRowsX)),
                    unsigned(lesson::ceil_div(lesson::ceil_div(uint64_t(im.height), kStrip), kRowsY)));
    blur3x3Rows<VEC><<<grid, dim3(kRowsX, kRowsY)>>>(im.in, im.out, im.width, im.height);
    CUDA_CHECK_LAUNCH();
}

// The ladder, one row per rung: its name in the report and its launcher. Rung 4 has two rows,
// of which main() runs the one that fits the width.
struct Rung {
    const char* name;
    void (*launch)(const Image& im);
};
constexpr Rung kRungs[] = {
    {"blur3x3Naive", launch_naive},
    {"blur3x3Halo", launch_halo},
    {"blur3x3Tiled", launch_tiled},
    {"blur3x3Rows (float4)", launch_rows<4>},  // every row starts 16-byte aligned: width % 4 == 0
    {"blur3x3Rows (scalar: width % 4 != 0)", launch_rows<1>},
};

int main(int argc, char** argv) {
    // Flags first: bad input exits 2 before any CUDA call.
    lesson::CommonOptions opt;
    int64_t n = 8192, width = 8192, height = 8192;
    int64_t batch = 12000, image_w = 100, image_h = 75, chunk = 1000, nstreams = 3;
    lesson::Cli cli("gaussian_blur",
                    "3x3 Gaussian blur (clamp-to-edge): naive vs tiled on one large image, "
                    "then a batch of small images streamed in chunks.");
    lesson::add_common_flags(cli, opt);
    cli.add_int("n", &n, 1, 32768, "square large image: sets --width and --height");
    cli.add_int("width", &width, 1, 32768, "large image width in pixels", 1000);
    cli.add_int("height", &height, 1, 32768, "large image height in pixels", 744);
    cli.add_int("batch", &batch, 1, 1000000, "images in the streamed batch", 48);
    cli.add_int("image-width", &image_w, 1, 16384, "width of each batch image");
    cli.add_int("image-height", &image_h, 1, 16384, "height of each batch image");
    cli.add_int("chunk", &chunk, 1, 65535, "images per chunk (gridDim.z <= 65535)", 8);
    cli.add_int("streams", &nstreams, 1, 16, "CUDA streams (each owns one device slot)");
    cli.parse_or_exit(argc, argv);
    if (cli.given("n")) {
        if (!cli.given("width")) width = n;
        if (!cli.given("height")) height = n;
    }
    if (chunk > batch)
        lesson::bad_input("--chunk=" + std::to_string(chunk) + " is larger than --batch=" + std::to_string(batch) +
                          "; allowed: integer in [1, " + std::to_string(batch) + "]");

    const size_t W = width, H = height, pixels = W * H, image_px = image_w * image_h;
    const size_t image_bytes = image_px * sizeof(float), chunk_bytes = chunk * image_bytes;
    const size_t batch_bytes = batch * image_bytes;
    const std::string size_flags = "--width=" + std::to_string(width) + " --height=" + std::to_string(height) +
                                   " --batch=" + std::to_string(batch) + " --image-width=" + std::to_string(image_w) +
                                   " --image-height=" + std::to_string(image_h);
    // Host: the large image in, one result, the double reference; the batch in and out, pinned.
    lesson::require_host_memory(pixels * (2 * sizeof(float) + sizeof(double)) + 2 * batch_bytes, "pageable + pinned",
                                size_flags);
    cudaDeviceProp prop = lesson::pick_device(opt.device);
    // Device: part 1 needs in + out of the large image; part 2 an in + out slot per stream.
    lesson::require_device_memory(std::max(2 * pixels * sizeof(float), 2 * nstreams * chunk_bytes),
                                  size_flags + " --chunk=" + std::to_string(chunk) +
                                      " --streams=" + std::to_string(nstreams));

    lesson::Report report("07_gaussian_blur");
    report.device(prop.name, prop.major, prop.minor, prop.multiProcessorCount, prop.totalGlobalMem / 1e9);
    report.config("width", width);
    report.config("height", height);
    report.config("border", "clamp-to-edge");
    report.config("tile", std::to_string(kTileW) + "x" + std::to_string(kTileH) + " outputs, " +
                              std::to_string(kTileW) + "x" + std::to_string(kRows) + " threads");
    report.config("halo tile", std::to_string(kHaloW) + "x" + std::to_string(kHaloH) + " outputs, one block each");
    report.config("batch", batch);
    report.config("image", std::to_string(image_w) + "x" + std::to_string(image_h));
    report.config("chunk", chunk);
    report.config("streams", nstreams);
    report.config("repeat", opt.repeat);
    report.config("seed", opt.seed);

    // ---- Part 1: one large image, four rungs -------------------------------------------------
    const size_t bytes = pixels * sizeof(float);
    verify::host_vector<float> h_in(pixels), h_out(pixels);  // not zeroed: filled, or copied back, before read
    verify::fill_uniform(h_in.data(), pixels, opt.seed);     // random, never constant: see README Pitfalls
    verify::parallel_memset(h_out.data(), 0, pixels * sizeof(float));  // pages touched on all cores, not by the copy
    // The double-precision reference, once for all rungs.
    lesson::HostTimer cpu;
    verify::host_vector<double> ref(pixels);
    verify::blur3x3_reference(h_in.data(), ref.data(), width, height);
    report.cpu_reference_ms(cpu.ms(), verify::host_threads());
    const double ref_rms = verify::rms(ref.data(), pixels);
    const std::string dims = std::to_string(width) + "x" + std::to_string(height);

    float *d_in = nullptr, *d_out = nullptr;
    CUDA_CHECK(cudaMalloc(&d_in, bytes));
    CUDA_CHECK(cudaMalloc(&d_out, bytes));
    CUDA_CHECK(cudaMemcpy(d_in, h_in.data(), bytes, cudaMemcpyHostToDevice));

    // Tiled: no more blocks than the GPU runs at once; each loops over every gridDim.x-th tile.
    const lesson::Grid gt = lesson::grid_for(W, H, 1, kTileW, kTileH);  // tiles across, tiles down
    int per_sm = 0;
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, blur3x3Tiled, kTileW * kRows, 0));
    const uint64_t tiles = uint64_t(gt.x) * gt.y;
    const unsigned tiled_blocks = unsigned(std::min<uint64_t>(tiles, uint64_t(per_sm) * prop.multiProcessorCount));
    report.config("tiled blocks", std::to_string(tiled_blocks) + " (" + std::to_string(per_sm) + " per SM) for " +
                                      std::to_string(tiles) + " tiles");

    // The ladder: one table of rungs (kRungs), one verify-and-time loop. Rung 4 runs as float4
    // columns when every row starts 16-byte aligned (width % 4 == 0), else one column per thread.
    const Image image{d_in, d_out, int(width), int(height), tiled_blocks};
    std::vector<Rung> rungs;
    for (const Rung& r : kRungs)
        if (r.launch != (width % 4 == 0 ? launch_rows<1> : launch_rows<4>)) rungs.push_back(r);
    std::vector<double> rung_ms;
    for (const Rung& r : rungs) {
        // Poison (0xFF bytes are NaN), run, copy out: a pixel a kernel never writes fails the check.
        CUDA_CHECK(cudaMemset(d_out, 0xFF, bytes));
        r.launch(image);
        CUDA_CHECK(cudaMemcpy(h_out.data(), d_out, bytes, cudaMemcpyDeviceToHost));
        if (opt.inject_fault) verify::inject_fault(h_out.data(), pixels, opt.seed);
        report.check(verify::compare(h_out.data(), ref.data(), pixels, 1e-5,
                                     std::string(r.name) + ", every pixel of " + dims, ref_rms));
        rung_ms.push_back(lesson::time_median_ms(int(opt.repeat), [&] { r.launch(image); }));
    }
    CUDA_CHECK(cudaFree(d_in));
    CUDA_CHECK(cudaFree(d_out));

    // ---- Part 2: a batch of images, chunks over streams, pinned host memory ------------------
    // The PCIe bound at this chunk size: bursts of back-to-back chunk copies, best of several trials.
    const lesson::LinkRates link = lesson::measure_link_gbps(chunk_bytes, true);
    float *h_bin = nullptr, *h_bout = nullptr;
    CUDA_CHECK(cudaMallocHost(&h_bin, batch_bytes));  // pinned: cudaMemcpyAsync can overlap with kernels
    CUDA_CHECK(cudaMallocHost(&h_bout, batch_bytes));
    verify::fill_uniform(h_bin, batch * image_px, opt.seed + 1);  // staged before any timing

    std::vector<cudaStream_t> streams(nstreams);
    std::vector<float*> d_slot_in(nstreams), d_slot_out(nstreams);
    for (int64_t s = 0; s < nstreams; ++s) {
        CUDA_CHECK(cudaStreamCreate(&streams[s]));
        CUDA_CHECK(cudaMalloc(&d_slot_in[s], chunk_bytes));
        CUDA_CHECK(cudaMalloc(&d_slot_out[s], chunk_bytes));
    }

    // Chunk k goes to stream k % streams and that stream's device slot. The slot is reused by
    // chunk k + streams only after chunk k's copy-out finished: the stream runs its work in order.
    const lesson::ChunkPlan plan = lesson::plan_chunks(batch, chunk);
    const lesson::Grid gi = lesson::grid_for(image_w, image_h, 1, kTileW, kTileH);
    const dim3 block(kTileW, kRows);
    const unsigned image_tiles = gi.x * gi.y;  // one block per tile of each image: small images have few
    auto pipeline = [&](bool one_launch_per_chunk) {
        for (uint64_t k = 0; k < plan.count; ++k) {
            const lesson::Chunk ch = plan.at(k);
            const cudaStream_t st = streams[k % nstreams];
            float* d_cin = d_slot_in[k % nstreams];
            float* d_cout = d_slot_out[k % nstreams];
            const size_t first = ch.first * image_px, nbytes = ch.count * image_bytes;
            CUDA_CHECK(cudaMemcpyAsync(d_cin, h_bin + first, nbytes, cudaMemcpyHostToDevice, st));
            if (one_launch_per_chunk) {  // blockIdx.z picks the image: ch.count <= --chunk <= 65535
                blur3x3Tiled<<<dim3(image_tiles, 1, unsigned(ch.count)), block, 0, st>>>(d_cin, d_cout, int(image_w),
                                                                                         int(image_h));
                CUDA_CHECK_LAUNCH();
            } else {  // the original text's way: one launch per image
                for (uint64_t i = 0; i < ch.count; ++i) {
                    blur3x3Tiled<<<dim3(image_tiles, 1, 1), block, 0, st>>>(d_cin + i * image_px, d_cout + i * image_px,
                                                                            int(image_w), int(image_h));
                    CUDA_CHECK_LAUNCH();
                }
            }
            CUDA_CHECK(cudaMemcpyAsync(h_bout + first, d_cout, nbytes, cudaMemcpyDeviceToHost, st));
        }
        CUDA_CHECK(cudaDeviceSynchronize());
    };
    // Poison, one warm-up run, `repeat` timed runs on the host clock (they span all streams),
    // then every pixel of every image is checked. Long runs take fewer samples (lesson::capped_samples):
    // at the default size, one launch per image (about 40 ms a run) takes the median of 7.
    auto run_and_verify = [&](bool one_launch_per_chunk, const std::string& what, double* ms) {
        verify::parallel_memset(h_bout, 0xFF, batch_bytes);
        for (int64_t s = 0; s < nstreams; ++s) CUDA_CHECK(cudaMemset(d_slot_out[s], 0xFF, chunk_bytes));
        lesson::HostTimer warm_up;
        pipeline(one_launch_per_chunk);
        const int64_t runs = lesson::capped_samples(opt.repeat, warm_up.ms());
        std::vector<double> t;
        for (int64_t r = 0; r < runs; ++r) {
            lesson::HostTimer timer;
            pipeline(one_launch_per_chunk);
            t.push_back(timer.ms());
        }
        *ms = lesson::median(t);
        report.check(verify_images(h_bin, h_bout, image_w, image_h, batch,
                                   what + ", every pixel of " + std::to_string(batch) + " images"));
    };
    double per_image_ms = 0, per_chunk_ms = 0;
    run_and_verify(false, "streamed batch, one launch per image", &per_image_ms);
    run_and_verify(true, "streamed batch, one launch per chunk", &per_chunk_ms);

    for (int64_t s = 0; s < nstreams; ++s) {
        CUDA_CHECK(cudaFree(d_slot_in[s]));
        CUDA_CHECK(cudaFree(d_slot_out[s]));
        CUDA_CHECK(cudaStreamDestroy(streams[s]));
    }
    CUDA_CHECK(cudaFreeHost(h_bin));
    CUDA_CHECK(cudaFreeHost(h_bout));

    // ---- Report ------------------------------------------------------------------------------
    // The blur reads each pixel once and writes it once: the DRAM bound of a 1 : 1 mix (a copy),
    // measured now unless the image fits in L2 (then nothing is graded against DRAM).
    const double kernel_bytes = 2.0 * bytes;  // one read of the input, one write of the output
    const std::string in_l2 = lesson::l2_note(kernel_bytes, prop);
    const lesson::StreamBound dram =
        in_l2.empty() ? lesson::measure_stream_bound(prop, 1, 1) : lesson::stream_bound_not_measured(1, 1, in_l2);
    lesson::add_bound(report, dram, int(opt.device));
    report.bound("pinned H2D, burst of chunk copies", link.h2d, "GB/s");
    report.bound("pinned D2H, burst of chunk copies", link.d2h, "GB/s");
    report.bound("pinned H2D + D2H at once", link.both, "GB/s");
    report.timing(std::string(lesson::kTimingMethod) +
                  "; pipelines: host clock around issue + cudaDeviceSynchronize, the same number of samples");
    for (size_t i = 0; i < rungs.size(); ++i)
        report.variant_bound(rungs[i].name + (" " + dims), rung_ms[i], kernel_bytes / (rung_ms[i] * 1e6), "GB/s",
                             dram.gbps, "DRAM bound", in_l2);
    report.metric("blur3x3Halo over blur3x3Naive", rung_ms[0] / rung_ms[1], "x");
    report.metric("blur3x3Tiled over blur3x3Halo", rung_ms[1] / rung_ms[2], "x");
    report.metric("blur3x3Rows over blur3x3Tiled", rung_ms[2] / rung_ms[3], "x");
    size_t best = 0;
    for (size_t i = 1; i < rungs.size(); ++i)
        if (rung_ms[i] < rung_ms[best]) best = i;
    const double best_gbps = kernel_bytes / (rung_ms[best] * 1e6);
    const double link_bytes = 2.0 * batch_bytes;  // the batch goes up once and comes down once
    const double bound_ms = lesson::link_bound_ms(double(batch_bytes), double(batch_bytes), link);
    const double bound_gbps = link_bytes / (bound_ms * 1e6);
    report.variant_bound("pipeline, 1 launch per image (" + std::to_string(batch) + ")", per_image_ms,
                         link_bytes / (per_image_ms * 1e6), "GB/s", bound_gbps, "PCIe bound");
    report.variant_bound("pipeline, 1 launch per chunk (" + std::to_string(plan.count) + ")", per_chunk_ms,
                         link_bytes / (per_chunk_ms * 1e6), "GB/s", bound_gbps, "PCIe bound");
    report.metric("PCIe bound of the batch (H2D + D2H)", bound_ms, "ms");
    if (uint64_t(batch) > plan.count)
        report.metric("cost of each extra launch", 1000.0 * (per_image_ms - per_chunk_ms) / double(batch - plan.count),
                      "us");
    report.metric("one launch per chunk vs per image", per_image_ms / per_chunk_ms, "x faster");
    report.note("border rule: clamp-to-edge (a neighbour outside the image reads the nearest edge pixel)");
    report.note(
        "kernel GB/s count one read of the input and one write of the output; pipeline GB/s count H2D + D2H bytes");
    report.note(
        "pipeline times: inputs already staged in pinned memory, host clock around issue + cudaDeviceSynchronize");
    char key[128];
    std::snprintf(key, sizeof key, "%s %.0f GB/s at %s; batch pipeline %.0f%% of PCIe bound", rungs[best].name,
                  best_gbps, dims.c_str(), 100.0 * bound_ms / per_chunk_ms);
    report.key_result(key, best_gbps / dram.gbps, "DRAM bound", lesson::Against::Bound, in_l2);
    report.default_size(cli.at_default_size());
    report.target("best rung of the DRAM bound", best_gbps / dram.gbps, 0.80);
    report.target("batch pipeline of the PCIe bound", bound_ms / per_chunk_ms, 0.85);
    return report.finish(opt.json);
}
