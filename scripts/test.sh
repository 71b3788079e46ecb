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
if ! have_catch2; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "test.sh: Catch2 is missing; installing it with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q catch2 >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q catch2 >/dev/null; }
  else
    echo "test.sh: Catch2 is missing; install it with: sudo apt-get install catch2" >&2
    exit 1
  fi
fi

# The handout test renders PDFs: pandoc, weasyprint and poppler-utils.
if ! command -v pandoc >/dev/null || ! command -v weasyprint >/dev/null || ! command -v pdftotext >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "test.sh: installing pandoc, weasyprint and poppler-utils with apt-get (for the handout test)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q pandoc weasyprint poppler-utils >/dev/null 2>&1 ||
      { apt-get update -q >/dev/null && apt-get install -y -q pandoc weasyprint poppler-utils >/dev/null; }
  else
    echo "test.sh: the handout test needs: sudo apt-get install pandoc weasyprint poppler-utils (it will SKIP)" >&2
  fi
fi

if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=/usr/local/cuda/bin:$PATH; fi
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
cmake -S . -B "$BUILD" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release
cmake --build "$BUILD" --parallel "$(nproc)"
cd "$BUILD"
ctest --output-on-failure --parallel "$(nproc)" --timeout 300
