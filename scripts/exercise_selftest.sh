#!/usr/bin/env bash
# scripts/exercise_selftest.sh BUILD - the grader, graded (CTest exercise_grader, label exercise,
# GPU only; scripts/test.sh --exercises). For every exercise marked in the lessons:
#   1. the unsolved copy (scripts/exercise.sh start NN K) builds and FAILs its check;
#   2. the planted wrong answer (lessons/NN_name/exercises/K.planted) is caught the way its
#      '// caught-by:' line says: 'default', it FAILs the default size; 'timeout', it hangs and its
#      run ends at the exercise's TIMEOUT, the output naming the TIMEOUT's message; without the line,
#      it PASSes the default size but FAILs an awkward size or a sanitizer;
#   3. the reference solution (check --solution) PASSes with grade A (or, where the lesson's
#      manifest says "ungraded" because its times are launch overhead, PASSes ungraded).
# BUILD is the configured build folder (its bin/ holds the reference solutions).
# ONLY="00 12" in the environment limits it to those lessons; SELFTEST_JOBS (default 4) is how many
# steps 1-2 (correctness only, nothing timed) share the GPU at once. Step 3 is timed: one at a time.
# Exit: 0 all as expected, 1 otherwise, 77 no GPU.
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
B=$(cd "${1:?usage: exercise_selftest.sh BUILD}" && pwd) || exit 2
EX="python3 $ROOT/scripts/exercise.py"
export BUILD_DIR="$B"
source "$ROOT/scripts/build_lib.sh"  # cmake_configure, cmake_build
cmake_build "$B" gpu_check >/dev/null 2>&1
"$B/bin/gpu_check" >/dev/null 2>&1; [ $? = 77 ] && { echo "SKIP: no CUDA GPU"; exit 77; }
arch=$(sed -n 's/^CMAKE_CUDA_ARCHITECTURES:[A-Z]*=//p' "$B/CMakeCache.txt")
W="$B/grader"; rm -rf "$W"; mkdir -p "$W"
mapfile -t pairs < <($EX list | awk '{sub(":", "", $2); print $1, $2}')
if [ -n "${ONLY:-}" ]; then  # ONLY="00 12": those lessons alone (a quick look; CTest runs them all)
  keep=(); for p in "${pairs[@]}"; do for o in $ONLY; do [[ "$p" == ${o}_* ]] && keep+=("$p"); done; done
  pairs=("${keep[@]}")
fi
[ ${#pairs[@]} -gt 0 ] || { echo "no marked exercise"; exit 1; }
fails=0
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }

# Build every copy of one kind (unsolved or planted) of exercise K of every lesson in one build.
build_kind() {  # kind K -> sets the folder $W/build-kind-K
  local kind=$1 k=$2 targets=() flag=""
  [ "$kind" = planted ] && flag=--planted
  for p in "${pairs[@]}"; do
    set -- $p
    [ "$2" = "$k" ] || continue
    $EX start "$1" "$k" $flag --out="$W/src-$kind-$k" --force >/dev/null || { bad "$1 exercise $k: start $flag"; continue; }
    targets+=("$(python3 "$ROOT/scripts/lessons.py" get "$1" executable)")
  done
  [ ${#targets[@]} -gt 0 ] || return 0
  cmake_configure "$ROOT" "$W/build-$kind-$k" -DCMAKE_CUDA_ARCHITECTURES="$arch" -DLESSON_EXERCISES_DIR="$W/src-$kind-$k" \
    >"$W/configure-$kind-$k.log" 2>&1 || { bad "configure $kind $k"; return; }
  cmake_build "$W/build-$kind-$k" "${targets[@]}" >"$W/build-$kind-$k.log" 2>&1 ||
    bad "build of the $kind copies of exercise $k (log $W/build-$kind-$k.log)"
}
for k in $(printf '%s\n' "${pairs[@]}" | awk '{print $2}' | sort -u); do
  build_kind unsolved "$k"
  build_kind planted "$k"
done

# The reference programs first, once: every check below finds them built (no two builds in one folder).
refs=(); for p in "${pairs[@]}"; do set -- $p; refs+=("$(python3 "$ROOT/scripts/lessons.py" get "$1" executable)"); done
cmake_build "$B" $(printf '%s\n' "${refs[@]}" | sort -u) >"$W/build-reference.log" 2>&1 ||
  bad "build of the reference programs (log $W/build-reference.log)"
# Steps 1 and 2 check correctness only (no timing): JOBS of them share the GPU at once.
one_pair() {  # lesson K -> prints ok/FAIL lines
  local lesson=$1 k=$2 exe rc caught
  exe=$(python3 "$ROOT/scripts/lessons.py" get "$lesson" executable)
  # 1. Unsolved: must FAIL (exit 1), never PASS.
  $EX check "$lesson" --exe="$W/build-unsolved-$k/bin/$exe" --no-sanitize --no-speed >"$W/$lesson-$k-unsolved.log" 2>&1
  rc=$?
  [ $rc = 1 ] && echo "ok: $lesson exercise $k: the unsolved copy FAILs" ||
    echo "FAIL: $lesson exercise $k: unsolved copy exit $rc, expected 1 (log $W/$lesson-$k-unsolved.log)"
  # 2. Planted: caught the way its '// caught-by:' line says (exercise.py CAUGHT_BY).
  local by
  by=$(python3 -c "import sys; sys.path.insert(0, sys.argv[1]); import exercise; print(exercise.planted_caught_by(sys.argv[2], int(sys.argv[3])) or 'awkward')" \
       "$ROOT/scripts" "$lesson" "$k")
  $EX check "$lesson" --exe="$W/build-planted-$k/bin/$exe" --no-speed --json="$W/$lesson-$k-planted.json" >"$W/$lesson-$k-planted.log" 2>&1
  rc=$?
  caught=$(python3 - "$W/$lesson-$k-planted.json" "$by" "$ROOT/scripts" "$lesson" <<'PY' 2>/dev/null || echo no
import json, sys
sys.path.insert(0, sys.argv[3])
import exercise
r, by = json.load(open(sys.argv[1])), sys.argv[2]
c, s = r.get("checks", []), r.get("sanitizers", [])
if by == "default":    # the default size FAILs (not by a timeout)
    ok = bool(c) and not c[0]["pass"] and not c[0]["result"].startswith(exercise.TIMED_OUT)
elif by == "timeout":  # some run ended at the TIMEOUT, the line naming its message
    msg = exercise.lesson_timeout(sys.argv[4])[1] or "?"
    ok = any(x["result"].startswith(exercise.TIMED_OUT) and x["result"].endswith(msg) for x in c)
else:                  # the default size PASSes, an awkward size or a sanitizer catches it
    ok = bool(c) and c[0]["pass"] and (not all(x["pass"] for x in c) or not all(x["clean"] for x in s))
print("yes" if ok else "no")
PY
)
  case $by in
    default) what="FAILs the default size" ;;
    timeout) what="hangs and ends at the exercise's TIMEOUT, its message named" ;;
    *) what="passes the default size and is caught" ;;
  esac
  [ $rc = 1 ] && [ "$caught" = yes ] && echo "ok: $lesson exercise $k: the planted answer $what" ||
    echo "FAIL: $lesson exercise $k: planted answer (caught-by $by) exit $rc, caught as expected: $caught (log $W/$lesson-$k-planted.log)"
}
jobs_max=${SELFTEST_JOBS:-4}
for p in "${pairs[@]}"; do
  set -- $p
  while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n; done
  one_pair "$1" "$2" >"$W/$1-$2.result" &
done
wait
for p in "${pairs[@]}"; do
  set -- $p
  while IFS= read -r line; do
    echo "$line"
    [[ "$line" == FAIL:* ]] && fails=$((fails + 1))
  done <"$W/$1-$2.result"
done
# 3. Each lesson's reference solution: PASS, grade A.
for lesson in $(printf '%s\n' "${pairs[@]}" | awk '{print $1}' | sort -u); do
  $EX check "$lesson" --solution --json="$W/$lesson-solution.json" >"$W/$lesson-solution.log" 2>&1
  rc=$?
  grade=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1])).get('grade'))" "$W/$lesson-solution.json" 2>/dev/null)
  secs=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1])).get('seconds'))" "$W/$lesson-solution.json" 2>/dev/null)
  # "ungraded" comes only from the manifest's "ungraded" (exercise.py); any other refusal leaves no grade.
  [ $rc = 0 ] && { [ "$grade" = A ] || [ "$grade" = ungraded ]; } && echo "ok: $lesson reference solution PASS, grade $grade (${secs} s)" ||
    bad "$lesson reference solution: exit $rc, grade $grade (log $W/$lesson-solution.log)"
done
$EX report "$W" > "$W/report.md" 2>/dev/null && cat "$W/report.md"
# The reference's grades on this GPU, for docs/results/grades/<gpu>.json (docs/teaching.md's table).
$EX grades "$W" "$W/grades.json" 2>/dev/null || true
[ $fails = 0 ] && echo "exercise_selftest: all as expected" || echo "exercise_selftest: $fails unexpected result(s)"
[ $fails = 0 ]
