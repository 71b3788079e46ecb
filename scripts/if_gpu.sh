#!/usr/bin/env bash
# if_gpu.sh GPU_CHECK PROGRAM [ARGS...] - runs PROGRAM only where a CUDA GPU is (GPU_CHECK, the
# build's gpu_check, exits 0); otherwise exits 77, which CTest reports as SKIP. For tests whose
# sizes are meant for a GPU machine (the "awkward" sizes of a lesson's manifest).
check=${1:?usage: if_gpu.sh GPU_CHECK PROGRAM [ARGS...]}; shift
"$check" >/dev/null 2>&1 || { echo "SKIP: no CUDA GPU"; exit 77; }
exec "$@"
