#!/usr/bin/env bash
# scripts/check_format.sh - the format test (CTest "format"): every tracked C++/CUDA
# source (*.cu *.cuh *.h *.cpp) must be as clang-format formats it with the repo's
# .clang-format. Prints the files that differ and exits 1; exits 0 when all match.
# Exits 77 (SKIP) when clang-format is missing, or when its major version is not the
# one the tree was formatted with (different versions format differently).
# Fix a file: clang-format -i FILE (docs/setup.md).
set -uo pipefail
cd "$(dirname "$0")/.."
WANT_MAJOR=14  # the tree is formatted with clang-format 14 (Debian bookworm)

CF=${CLANG_FORMAT:-}
if [ -z "$CF" ]; then
  for c in clang-format-$WANT_MAJOR clang-format; do
    if command -v "$c" >/dev/null; then CF=$c; break; fi
  done
fi
if [ -z "$CF" ] || ! command -v "$CF" >/dev/null; then
  echo "SKIP: clang-format not found"
  exit 77
fi
major=$("$CF" --version | sed -nE 's/.*version ([0-9]+)\..*/\1/p' | head -n 1)
if [ "$major" != "$WANT_MAJOR" ]; then
  echo "SKIP: $CF is version ${major:-unknown}, the tree is formatted with clang-format $WANT_MAJOR"
  exit 77
fi

# The files: tracked ones in a git checkout, else every matching file under the tree.
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files -- '*.cu' '*.cuh' '*.h' '*.cpp')
else
  mapfile -t files < <(find . -path ./.git -prune -o -path './build*' -prune -o \
    -type f \( -name '*.cu' -o -name '*.cuh' -o -name '*.h' -o -name '*.cpp' \) -print | sed 's|^\./||' | sort)
fi

bad=()
for f in "${files[@]}"; do
  [ -f "$f" ] || continue  # deleted in the work tree but still tracked
  "$CF" --style=file --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  echo "not formatted (clang-format -i FILE fixes it):"
  printf '  %s\n' "${bad[@]}"
  echo "FAIL: ${#bad[@]} of ${#files[@]} files differ from $CF's format"
  exit 1
fi
echo "PASS: ${#files[@]} files formatted ($CF $major)"
