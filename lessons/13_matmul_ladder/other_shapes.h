// Lesson 13 of the course (the SGEMM ladder): part 3 of main.cu, the top rung off the square. Part of lesson 13 of the
// course (00-23), 13_matmul_ladder; run: ./build/bin/matmul_ladder [--quick] (with every rung, at the default shape)
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <cublas_v2.h>

#include "common/ceilings.h"
#include "common/gemm.h"
#include "common/report.h"
#include "common/timer.h"

#include "buffers.h"

// The top rung (name, launch) at shapes neither square nor multiples of its tiles, in the timed shape's arrays, checked
// as it is; the rung and cuBLAS on the same shape (its yardstick there) take their samples in turns. No target.
inline void time_other_shapes(const std::vector<lesson::GemmShape>& shapes, const std::string& name,
                              void (*launch)(const Gemm&), Arrays& a, cublasHandle_t handle, uint64_t seed, int repeat,
                              double tol, const cudaDeviceProp& prop, lesson::Report& report) {
    for (const lesson::GemmShape& s : shapes) {
        a.as(s);
        report.check(cublas_on_rows([&] { launch_cublas(handle, a.ref); }, a, seed, tol));
        report.check(against_cublas([&] { launch(a.g); }, a, name, tol));
        const std::vector<double> ms =
            lesson::time_interleaved_ms(repeat, 2, [&](int v) { v == 0 ? launch_cublas(handle, a.ref) : launch(a.g); });
        const double flops = 2.0 * s.M * s.N * s.K, cublas = flops / (ms[0] * 1e6);
        report.yardstick("cuBLAS SGEMM fp32 at " + s.text() + ", in turns with the rung", cublas, "GFLOP/s");
        report.variant_yardstick(name + " at " + s.text(), ms[1], flops / (ms[1] * 1e6), "GFLOP/s", cublas,
                                 "cuBLAS at " + s.text(), lesson::small_gemm_note(s.M, s.N, prop));
    }
}
