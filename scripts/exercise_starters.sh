#!/usr/bin/env bash
# scripts/exercise_starters.sh OUT [ARCH] - every lesson's learner copy (all of its marked
# exercises replaced by TODOs) is written with scripts/exercise.sh start and must build:
# an unsolved exercise compiles and fails its check, it never fails to build (CTest
# exercise_starters; OUT is a scratch folder, ARCH one CUDA architecture, default 90).
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT=${1:?usage: exercise_starters.sh OUT [ARCH]}
ARCH=${2:-90}
rm -rf "$OUT" && mkdir -p "$OUT/src" || exit 2
targets=()
while read -r lesson; do
  python3 "$ROOT/scripts/exercise.py" start "$lesson" --out="$OUT/src" --force >/dev/null || exit 1
  targets+=("$(python3 "$ROOT/scripts/lessons.py" get "$lesson" executable)")
done < <(python3 "$ROOT/scripts/exercise.py" list | cut -d' ' -f1 | uniq)
[ ${#targets[@]} -gt 0 ] || { echo "exercise_starters: no lesson marks an exercise"; exit 1; }
source "$ROOT/scripts/build_lib.sh"  # cmake_configure, cmake_build
cmake_configure "$ROOT" "$OUT/build" -DCMAKE_CUDA_ARCHITECTURES="$ARCH" -DLESSON_EXERCISES_DIR="$OUT/src" \
  >"$OUT/configure.log" 2>&1 || { cat "$OUT/configure.log"; exit 1; }
if ! cmake_build "$OUT/build" "${targets[@]}" >"$OUT/build.log" 2>&1; then
  grep -E "error|Error" "$OUT/build.log" | head -40
  echo "exercise_starters: a learner's copy does not build (log: $OUT/build.log)"; exit 1
fi
echo "exercise_starters: ${#targets[@]} learner copies built: ${targets[*]}"
