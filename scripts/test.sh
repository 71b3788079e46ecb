#!/usr/bin/env bash
# scripts/test.sh [--perf] [--exercises] - configure, build and run CTest, from a fresh clone.
# No GPU needed: CPU tests run, lesson runs report SKIP (exit 77), bad-input
# runs check exit 2, the handouts are rendered and checked. Installs Catch2
# (and pandoc, weasyprint, poppler-utils for the handouts) with apt-get when
# missing and this runs as root; otherwise prints the command to run.
# The performance tests (label perf: each lesson at its default size against its
# benchmark targets) depend on the machine as much as on the code, so they run
# only with --perf (or `ctest -L perf`, or `scripts/run_all.sh --check-targets`).
# The exercise grader's own GPU test (label exercise: every exercise's unsolved copy,
# planted wrong answer and reference solution, docs/teaching.md) runs with --exercises.
set -euo pipefail
PERF=0
EXERCISES=0
for arg in "$@"; do
  case "$arg" in
    --perf) PERF=1 ;;
    --exercises) EXERCISES=1 ;;
    -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "test.sh: unknown option '$arg' (see --help)" >&2; exit 2 ;;
  esac
done
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
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
cmake -S . -B "$BUILD" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release
cmake --build "$BUILD" --parallel "$(nproc)"
cd "$BUILD"
labels=()
[ "$PERF" = 1 ] || labels+=(perf)
[ "$EXERCISES" = 1 ] || labels+=(exercise)
select=()
[ ${#labels[@]} -gt 0 ] && select=(-LE "^($(IFS='|'; echo "${labels[*]}"))$")
ctest --output-on-failure --parallel "$(nproc)" --timeout 300 "${select[@]}"
