#!/usr/bin/env bash
# arch_compile.sh SOURCE BUILD GENERATOR NVCC - CTest arch_compile (label compile, no GPU needed):
# the lessons with the most architecture-dependent code (13 matmul_ladder, 19 mixed_precision,
# 20 tensor_core_gemm, 21 flash_attention) must compile for the GPUs learners own, not only for
# the one the course is measured on: configures BUILD from SOURCE with GENERATOR and the CUDA
# compiler NVCC for sm_80 (A100), sm_89 (RTX 40, L4), sm_100 (B200) and sm_120 (RTX 50), and
# builds those four targets. Any compile error fails (exit 1); the log names it. sm_100 and
# sm_120 need CUDA 12.8 or newer (docs/setup.md).
set -uo pipefail
if [ $# != 4 ]; then
  echo "usage: arch_compile.sh SOURCE BUILD GENERATOR NVCC" >&2
  exit 2
fi
src=$1 build=$2 gen=$3 nvcc=$4
archs="80;89;100;120"
targets=(matmul_ladder mixed_precision tensor_core_gemm flash_attention)
start=$(date +%s)
echo "arch_compile: configuring $build for $archs ($("$nvcc" --version | grep -o 'release [0-9.]*'))"
cmake -S "$src" -B "$build" -G "$gen" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER="$nvcc" \
  -DCMAKE_CUDA_ARCHITECTURES="$archs" >"$build.configure.log" 2>&1 ||
  { cat "$build.configure.log"; echo "arch_compile: configure failed"; exit 1; }
echo "arch_compile: building ${targets[*]}"
if ! cmake --build "$build" --parallel "$(nproc)" --target "${targets[@]}" >"$build.build.log" 2>&1; then
  grep -E 'error|Error' "$build.build.log" | head -n 40
  echo "arch_compile: FAILED to compile for $archs (full log: $build.build.log)"
  exit 1
fi
echo "arch_compile: ${targets[*]} compile for $archs ($(($(date +%s) - start)) s)"
