#!/usr/bin/env bash
# scripts/test.sh [--perf] [--exercises] | --portable - configure, build and run CTest, from a fresh clone.
# No GPU needed: CPU tests run, lesson runs report SKIP (exit 77), bad-input
# runs check exit 2, the handouts are rendered and checked, and four lessons are
# compiled for sm_80, sm_89, sm_100 and sm_120 (arch_compile). Installs Catch2
# (and pandoc, weasyprint, poppler-utils for the handouts) with apt-get when
# missing and this runs as root; otherwise prints the command to run.
# The performance tests (label perf: each lesson at its default size against its
# benchmark targets) depend on the machine as much as on the code, so they run
# only with --perf (or `ctest -L perf`, or `scripts/run_all.sh --check-targets`).
# The planted bugs (label mutants: scripts/mutants.sh) run only with `ctest -L mutants`.
# The exercise grader's own GPU test (label exercise: every exercise's unsolved copy,
# planted wrong answer and reference solution, docs/teaching.md) runs with --exercises.
# --portable runs the portability tests instead of the others (docs/setup.md): label
# portable, every lesson under each GPU class LESSON_GPU_LIMITS emulates (reports in
# $BUILD_DIR/portable/), then a second build, $BUILD_DIR-sm80, of compute_80 PTX and
# sm_80 code only (on a newer GPU the driver compiles that PTX), whose GPU tests must
# PASS or SKIP; its --quick results are printed and written to $BUILD_DIR-sm80/sm80-table.md.
# Without a GPU both builds are made and every GPU test reports SKIP.
set -euo pipefail
PERF=0
EXERCISES=0
PORTABLE=0
for arg in "$@"; do
  case "$arg" in
    --perf) PERF=1 ;;
    --exercises) EXERCISES=1 ;;
    --portable) PORTABLE=1 ;;
    -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "test.sh: unknown option '$arg' (see --help)" >&2; exit 2 ;;
  esac
done
if [ "$PORTABLE" = 1 ] && { [ "$PERF" = 1 ] || [ "$EXERCISES" = 1 ]; }; then
  echo "test.sh: --portable runs the portability tests alone; it does not combine with --perf or --exercises" >&2
  exit 2
fi
cd "$(dirname "$0")/.."
BUILD=${BUILD_DIR:-build}

have_catch2() {
  [ -f /usr/include/catch2/catch.hpp ] || [ -f /usr/include/catch2/catch_test_macros.hpp ] ||
  [ -f /usr/local/include/catch2/catch.hpp ] || [ -f /usr/local/include/catch2/catch_test_macros.hpp ]
}
have_catch2 || bash scripts/apt_install.sh "the unit tests" catch2 || exit 1
# The handout test renders PDFs (it reports SKIP when these are missing).
if ! command -v pandoc >/dev/null || ! command -v weasyprint >/dev/null || ! command -v pdftotext >/dev/null; then
  bash scripts/apt_install.sh "the handout test" pandoc weasyprint poppler-utils || true
fi
# The format test (scripts/check_format.sh) needs clang-format (it reports SKIP without it).
command -v clang-format >/dev/null || bash scripts/apt_install.sh "the format test" clang-format || true

if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=/usr/local/cuda/bin:$PATH; fi
source scripts/build_lib.sh  # cmake_configure, cmake_build
cmake_configure . "$BUILD"
cmake_build "$BUILD"
if [ "$PORTABLE" = 1 ]; then
  # 1. Every lesson under every GPU class, in this build (the reports: $BUILD/portable/).
  rm -rf "$BUILD/portable"
  rc=0
  (cd "$BUILD" && ctest --output-on-failure --parallel "$(nproc)" -L '^portable$') || rc=1
  # 2. A build of compute_80 PTX and sm_80 code alone: on an sm_90 GPU the driver JIT-compiles
  #    the PTX, as on any GPU newer than the build's list, and what needs sm_90a skips.
  SM80=$BUILD-sm80
  cmake_configure . "$SM80" -DCMAKE_CUDA_ARCHITECTURES=80
  cmake_build "$SM80"
  rm -f "$SM80"/quick/*.json
  (cd "$SM80" && ctest --output-on-failure --parallel "$(nproc)" --timeout 300 -L '^gpu$') || rc=1
  nogpu=()
  "$SM80/bin/gpu_check" >/dev/null 2>&1 || nogpu=(--no-gpu)
  if command -v python3 >/dev/null; then
    echo "The sm_80 build ($SM80), --quick runs:"
    python3 scripts/portability.py quick-table "$SM80/quick" "$SM80/sm80-table.md" "${nogpu[@]}" || rc=1
  else
    echo "test.sh: no python3: the sm_80 table is not written (the reports are in $SM80/quick/)"
  fi
  if [ $rc = 0 ]; then echo "test.sh --portable: every portability test PASSed or SKIPped"; else echo "test.sh --portable: FAILED"; fi
  exit $rc
fi
cd "$BUILD"
labels=(portable mutants)
[ "$PERF" = 1 ] || labels+=(perf)
[ "$EXERCISES" = 1 ] || labels+=(exercise)
ctest --output-on-failure --parallel "$(nproc)" --timeout 300 -LE "^($(IFS='|'; echo "${labels[*]}"))$"
