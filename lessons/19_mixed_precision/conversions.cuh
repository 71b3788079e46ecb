// Lesson 19 - mixed precision: the conversion kernels of kernels/convert.cuh, checked and timed.
//
// A GEMM in a narrow format needs its operands in that format first. Per input format a
// precision of the run reads (all but TF32, which cuBLAS rounds itself), check_conversion()
// poisons the outputs, runs our kernels on A and Bt, checks their bits against the CPU's
// round-to-nearest-even (verify::round_gemm_inputs) for all of Bt and the sampled rows of A,
// checks that nothing was written past either end, for FP8 also both scales, and times the
// conversion of both matrices. main.cu calls it shape by shape; table.cuh reports the rates.
// Lesson 19 of the course; before: lesson 18 (CUDA graphs), next: lesson 20 (tensor-core GEMM).
// Run: ./build/bin/mixed_precision --precision=fp8
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/ceilings.h"
#include "common/check.h"
#include "common/report.h"
#include "common/timer.h"
#include "verify/parallel.h"
#include "verify/precision.h"

#include "kernels/convert.cuh"
#include "precisions.cuh"

// One conversion as the report rates it: both matrices of a shape, against the DRAM bound.
struct ConvTimed {
    std::string name;
    double ms, bytes, gemm_ms;
    std::string in_l2;
};

// The input formats a GEMM may read, and what converting to each writes.
struct Conversion {
    In in;
    const verify::FloatFormat* fmt;
    const char* name;
    double out_bytes;
};
static const Conversion kConversions[] = {
    {In::Tf32, &verify::kTf32, "", 4},
    {In::Bf16, &verify::kBf16, "float -> BF16", 2},
    {In::Fp16, &verify::kFp16, "float -> FP16", 2},
    {In::Fp8, &verify::kE4m3, "float -> FP8 E4M3 (amax pass + scaled conversion)", 1}};

// Where a conversion writes A and Bt.
static void* converted_a(const Buffers& b, In in) {
    return in == In::Bf16 ? static_cast<void*>(b.d_Abf) : in == In::Fp16 ? static_cast<void*>(b.d_A16) : b.d_A8;
}
static void* converted_bt(const Buffers& b, In in) {
    return in == In::Bf16 ? static_cast<void*>(b.d_Btbf) : in == In::Fp16 ? static_cast<void*>(b.d_Bt16) : b.d_Bt8;
}

// Both matrices of a shape to format `in`: FP8 finds each tensor's amax on the GPU first, then
// scales by 448 / amax and writes the dequantization scale amax / 448 for the GEMM.
static void convert_both(const Buffers& b, In in, int sms) {
    if (in == In::Bf16) {
        convert::to_bf16(b.d_A, b.d_Abf, b.nA);
        convert::to_bf16(b.d_Bt, b.d_Btbf, b.nB);
    } else if (in == In::Fp16) {
        convert::to_half(b.d_A, b.d_A16, b.nA);
        convert::to_half(b.d_Bt, b.d_Bt16, b.nB);
    } else {
        convert::to_e4m3(b.d_A, b.d_A8, b.nA, b.d_amax, b.d_scales, sms);
        convert::to_e4m3(b.d_Bt, b.d_Bt8, b.nB, b.d_amax + 1, b.d_scales + kScaleStride, sms);
    }
}

// `count` elements of `bytes` (1 or 2) each at d_src + offset, copied to the host as stored.
static verify::host_vector<uint8_t> copy_bits(const void* d_src, size_t offset, size_t count, size_t bytes) {
    verify::host_vector<uint8_t> out(count * bytes);
    CUDA_CHECK(cudaMemcpy(out.data(), static_cast<const uint8_t*>(d_src) + offset * bytes, count * bytes,
                          cudaMemcpyDeviceToHost));
    return out;
}

// Conversion cv of one shape: poisoned outputs, our kernels, every bit checked against the CPU's
// rounding r (all of Bt, the sampled rows of A, the guards past both ends, FP8's two scales),
// then timed (both matrices in one timed call).
static ConvTimed check_conversion(lesson::Report& report, const Buffers& b, const Conversion& cv,
                                  const verify::RoundedInputs& r, const std::vector<int64_t>& rows, int64_t K,
                                  const std::string& shape, float amax_a, float amax_bt, int R,
                                  const cudaDeviceProp& prop) {
    const size_t es = size_t(cv.out_bytes);
    void* d_a = converted_a(b, cv.in);
    void* d_bt = converted_bt(b, cv.in);
    CUDA_CHECK(cudaMemset(d_a, 0xFF, (b.nA + kGuard) * es));  // 0xFF bytes: NaN in FP16, BF16 and E4M3
    CUDA_CHECK(cudaMemset(d_bt, 0xFF, (b.nB + kGuard) * es));
    convert_both(b, cv.in, prop.multiProcessorCount);
    lesson::Check c;
    c.what = std::string("conversion ") + cv.name + ", " + shape +
             ": all of Bt and the sampled rows of A, bit for bit against the CPU's round-to-nearest-even; "
             "nothing written past the end of either";
    c = verify::add_same_bits(c, copy_bits(d_bt, 0, b.nB, es).data(), es, r.bt_bits.data(), b.nB, 0);
    for (size_t i = 0; i < rows.size(); ++i)
        c = verify::add_same_bits(c, copy_bits(d_a, size_t(rows[i]) * K, size_t(K), es).data(), es,
                                  r.a_bits.data() + i * K, size_t(K), b.nB + i * size_t(K));
    const std::vector<uint16_t> poison(kGuard, es == 2 ? 0xFFFF : 0xFF);  // the guards: still poisoned
    const size_t sampled = b.nB + rows.size() * size_t(K);
    c = verify::add_same_bits(c, copy_bits(d_a, b.nA, kGuard, es).data(), es, poison.data(), kGuard, sampled);
    c = verify::add_same_bits(c, copy_bits(d_bt, b.nB, kGuard, es).data(), es, poison.data(), kGuard, sampled + kGuard);
    if (cv.in == In::Fp8) {  // the scales the GEMM will use, bit for bit too
        float h_scales[2 * kScaleStride];
        CUDA_CHECK(cudaMemcpy(h_scales, b.d_scales, sizeof h_scales, cudaMemcpyDeviceToHost));
        const bool same = h_scales[0] == r.scale_a && h_scales[kScaleStride] == r.scale_bt;
        c.checked += 2;
        c.bad_count += same ? 0 : 1;
        c.pass = c.pass && same;
        report.metric("FP8: amax of A, " + shape, amax_a, "");
        report.metric("FP8: amax of Bt, " + shape, amax_bt, "");
    }
    report.check(c);
    const double ms = lesson::time_median_ms(R, [&] { convert_both(b, cv.in, prop.multiProcessorCount); });
    // Bytes: read the floats, write the narrow values; FP8 reads the floats twice (amax, then convert).
    const double bytes = double(b.nA + b.nB) * (4.0 + cv.out_bytes + (cv.in == In::Fp8 ? 4.0 : 0.0));
    return {std::string("convert ") + cv.name + ", A and Bt, " + shape, ms, bytes, 0.0, lesson::l2_note(bytes, prop)};
}
