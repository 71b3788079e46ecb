// common/ptx.cuh - thin device wrappers around single PTX instructions, one per line of the
// PTX ISA, for the tensor-core lessons (20 tensor_core_gemm, 21 flash_attention):
//   sm_80 and up  ldmatrix, mma.sync m16n8k16, cp.async                 (PTX_SM80)
//   sm_90a        mbarrier, cp.async.bulk.tensor (TMA), wgmma, fences,
//                 setmaxnreg, cluster barriers and mapa                  (PTX_SM90A)
// The sm_90a wrappers exist only in a device pass for compute_90a (__CUDA_ARCH_FEAT_SM90_ALL,
// which lesson_sm90a in lessons/CMakeLists.txt asks for); in every other pass the kernels that
// use them compile to a trap, and the lesson's gate skips them (lesson::pick_device,
// common/device.h, learns which image the driver loaded). The host side of TMA, the driver's
// tensor-map encoder, is common/tensor_map.h.
#pragma once
#include <cstdint>

#include <cuda.h>  // CUtensorMap, the TMA descriptor type (types only: nothing here links libcuda)
#include <cuda_bf16.h>

using bf16 = __nv_bfloat16;  // the element type of every tensor-core operand

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define PTX_SM80 1  // bf16 WMMA, mma.sync, ldmatrix, cp.async: Ampere and up
#endif
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define PTX_SM90A 1  // wgmma, setmaxnreg: the sm_90a target only (Hopper's arch-specific features)
#endif

#if defined(PTX_SM80)
// ------------------------------------------------------------------ sm_80 and up

// Four 8 x 8 matrices of 16-bit values from shared memory; lane l gives the address of row l % 8
// of matrix l / 8 (16 bytes), and receives one 32-bit register of each matrix.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}
// The same, each 8 x 8 matrix transposed on the way (B is stored k-rows, the MMA wants n-rows).
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}
// D (16 x 8, fp32) += A (16 x 16, bf16, row) * B (16 x 8, bf16, col): one warp, one instruction (HMMA).
__device__ __forceinline__ void mma_m16n8k16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// 16 bytes global -> shared without passing through registers (L2 only: .cg).
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int PENDING>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING) : "memory");
}
#endif  // PTX_SM80

#if defined(PTX_SM90A)
// ------------------------------------------------------------------ sm_90a

__device__ __forceinline__ uint32_t smem_addr(const void* p) { return uint32_t(__cvta_generic_to_shared(p)); }

// mbarrier: a 64-bit word in shared memory with a phase bit, a pending-arrival count and a
// transaction (byte) count. A phase completes when both counts reach zero; the phase bit flips.
__device__ __forceinline__ void mbar_init(uint64_t* bar, int arrivals) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(arrivals));
}
// Makes the initialised barriers visible to the async proxy (TMA) and to the other CTAs of the cluster.
__device__ __forceinline__ void fence_barrier_init() {
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// One arrival that also announces `bytes` more to come (the TMA loads will count them down).
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}
// An arrival on the barrier at the same offset in the shared memory of CTA `cta` of this cluster.
// Default semantics (release, CTA scope): what it orders is that this warp's wgmmas have read
// the stage, and wgmma_wait already guarantees that. A .release.cluster arrival would also
// make the warp wait for a cluster-wide memory fence at every stage.
__device__ __forceinline__ void mbar_arrive_cluster(uint64_t* bar, uint32_t cta) {
    asm volatile(
        "{\n"
        ".reg .b32 remote;\n"
        "mapa.shared::cluster.u32 remote, %0, %1;\n"
        "mbarrier.arrive.shared::cluster.b64 _, [remote];\n"
        "}\n" ::"r"(smem_addr(bar)),
        "r"(cta)
        : "memory");
}
// Waits until the phase with this parity (0 or 1) has completed.
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
    uint32_t done = 0;
    while (!done) {
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
            "selp.u32 %0, 1, 0, p;\n"
            "}\n"
            : "=r"(done)
            : "r"(smem_addr(bar)), "r"(parity)
            : "memory");
    }
}

// TMA: the box at (x = column, y = row) of the tensor `map` describes -> shared memory `dst`,
// swizzled as the map says; the copy engine counts the bytes down on `bar` when they land.
__device__ __forceinline__ void tma_load(void* dst, const CUtensorMap* map, int x, int y, uint64_t* bar) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], "
        "[%2];\n" ::"r"(smem_addr(dst)),
        "l"(map), "r"(smem_addr(bar)), "r"(x), "r"(y)
        : "memory");
}
// The same box written to the same offset in every CTA of `cta_mask` (a cluster), and the bytes
// counted on the barrier at `bar`'s offset in each of them.
__device__ __forceinline__ void tma_load_multicast(void* dst, const CUtensorMap* map, int x, int y, uint64_t* bar,
                                                   uint16_t cta_mask) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster "
        "[%0], [%1, {%3, %4}], [%2], %5;\n" ::"r"(smem_addr(dst)),
        "l"(map), "r"(smem_addr(bar)), "r"(x), "r"(y), "h"(cta_mask)
        : "memory");
}

// wgmma shared-memory descriptors (PTX ISA, "Matrix Descriptor Format"): start address, leading
// and stride byte offsets (all >> 4), swizzle mode in bits 62-63 (1 = 128-byte swizzle).
// Tiles must be 1024-byte aligned, so that the base-offset field stays 0.
__device__ __forceinline__ uint64_t make_desc(const void* tile, uint32_t lbo, uint32_t sbo) {
    const uint64_t addr = smem_addr(tile);
    return ((addr & 0x3FFFF) >> 4) | (uint64_t((lbo & 0x3FFFF) >> 4) << 16) | (uint64_t((sbo & 0x3FFFF) >> 4) << 32) |
           (uint64_t(1) << 62);
}
// wgmma.fence: register accesses (accumulators, a register A) before it are ordered with the wgmmas
// after it. It does not order shared memory: operand tiles written by threads need
// fence.proxy.async.shared::cta and a barrier first; tiles written by TMA need only their mbarrier.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int PENDING>
__device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(PENDING) : "memory");
}
// The accumulators are written by the tensor cores behind the compiler's back: after
// wgmma_wait, this tells it that every one of them may have changed, so no read moves above.
template <int R>
__device__ __forceinline__ void fence_acc(float (&d)[R]) {
#pragma unroll
    for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// Register reallocation between warpgroups (all 128 threads of a warpgroup execute it).
template <int REGS>
__device__ __forceinline__ void setmaxnreg_inc() {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(REGS));
}
template <int REGS>
__device__ __forceinline__ void setmaxnreg_dec() {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(REGS));
}

// Clusters: this CTA's rank in its cluster, and a barrier across all threads of the cluster.
__device__ __forceinline__ uint32_t cluster_rank() {
    uint32_t r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
}
__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

// The accumulator operands of a wgmma, the first operands of its asm: %0 .. %63 (m64n128), then
// %64 .. %127 (m64n256). PTX_WGMMA_ACC64(i) binds d[i] .. d[i + 63] to 64 of them, in order.
#define PTX_WGMMA_D64                                                                  \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "           \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define PTX_WGMMA_D64_HI                                                                           \
    "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "             \
    "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "             \
    "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
    "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
#define PTX_WGMMA_ACC8(i)                                                                                   \
    "+f"(d[(i)]), "+f"(d[(i) + 1]), "+f"(d[(i) + 2]), "+f"(d[(i) + 3]), "+f"(d[(i) + 4]), "+f"(d[(i) + 5]), \
        "+f"(d[(i) + 6]), "+f"(d[(i) + 7])
#define PTX_WGMMA_ACC64(i)                                                                          \
    PTX_WGMMA_ACC8(i), PTX_WGMMA_ACC8((i) + 8), PTX_WGMMA_ACC8((i) + 16), PTX_WGMMA_ACC8((i) + 24), \
        PTX_WGMMA_ACC8((i) + 32), PTX_WGMMA_ACC8((i) + 40), PTX_WGMMA_ACC8((i) + 48), PTX_WGMMA_ACC8((i) + 56)

// D (64 x 128 fp32: 64 registers a thread) = A (64 x 16, K-major) * B (16 x 128, N-major) + (scale_d ? D : 0).
// kTransB = 0 takes B K-major instead (its tile holds 128 rows of the 16 k-values): lesson 21's S = Q K^T.
template <int kTransB = 1>
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], uint64_t desc_a, uint64_t desc_b, int scale_d) {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
        "{" PTX_WGMMA_D64
        "}, "
        "%64, %65, p, 1, 1, 0, %67;\n"  // scale A, B: 1; trans A: 0 (K-major); trans B: kTransB (1: N-major)
        "}\n"
        : PTX_WGMMA_ACC64(0)
        : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(kTransB));
}

// D (64 x 256 fp32: 128 registers a thread) = A (64 x 16, K-major) * B (16 x 256, N-major) + (scale_d ? D : 0)
__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], uint64_t desc_a, uint64_t desc_b, int scale_d) {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
        "{" PTX_WGMMA_D64 ", " PTX_WGMMA_D64_HI
        "}, "
        "%128, %129, p, 1, 1, 0, 1;\n"  // scale A, B: 1; trans A: 0 (K-major); trans B: 1 (N-major)
        "}\n"
        : PTX_WGMMA_ACC64(0), PTX_WGMMA_ACC64(64)
        : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

#endif  // PTX_SM90A
