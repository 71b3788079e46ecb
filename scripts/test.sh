#!/usr/bin/env bash
# scripts/test.sh - configure, build and run CTest, from a fresh clone.
# No GPU needed: CPU tests run, lesson runs report SKIP (exit 77), bad-input
# runs check exit 2, the handouts are rendered and checked. Installs Catch2
# (and pandoc, weasyprint, poppler-utils for the handouts) with apt-get when
# missing and this runs as root; otherwise prints the command to run.
set -euo pipefail
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

if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=/usr/local/cuda/bin:$PATH; fi
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
cmake -S . -B "$BUILD" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release
cmake --build "$BUILD" --parallel "$(nproc)"
cd "$BUILD"
ctest --output-on-failure --parallel "$(nproc)" --timeout 300
