#!/usr/bin/env bash
# scripts/mutants.sh [LESSON ...] - do the lessons' own checks catch the bugs people write?
#
# Each lessons/NN_name/mutants/*.patch plants one bug: its first line says what mistake it
# models, any following lines `run: <flags>` name extra command lines that reach the bug (a
# rung, a size past 2^31), then the diff against the lesson's files. For each patch this
# script applies it to a scratch copy of the checkout, builds the lesson there, and runs the
# lesson's own GPU tests (CTest: its --quick run and its awkward sizes) and the `run:` lines.
# A mutant is KILLED when one of them fails (exit 1), or when one runs past MUTANT_TIMEOUT
# seconds (default 300; said so, by name); it SURVIVED when every one passes. A patch that no
# longer applies or builds is an ERROR: fix the patch.
#
# LESSON: a number (14) or a folder name (14_reduction); default: every lesson with mutants.
# Environment: CUDAARCHS or CMAKE_CUDA_ARCHITECTURES (default: native), MUTANT_DIR (the
# scratch folder, default $TMPDIR/lesson-mutants).
# Exit: 0 every mutant killed, 1 one survived or would not build, 2 bad usage, 77 no GPU.
set -u
cd "$(dirname "$0")/.." || exit 2
ROOT=$PWD
SCRATCH=${MUTANT_DIR:-${TMPDIR:-/tmp}/lesson-mutants}  # outside the checkout: git apply works there as plain patch
LIMIT=${MUTANT_TIMEOUT:-300}

patches=()
for arg in "$@"; do
  case "$arg" in
    -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "mutants.sh: unknown option '$arg' (see --help)" >&2; exit 2 ;;
  esac
  found=$(compgen -G "lessons/${arg}*/mutants/*.patch" || true)
  [ -n "$found" ] || { echo "mutants.sh: no lesson '$arg' with mutants (lessons/NN_name/mutants/*.patch)" >&2; exit 2; }
  mapfile -t -O ${#patches[@]} patches <<<"$found"
done
[ $# -gt 0 ] || mapfile -t patches < <(compgen -G "lessons/[0-9][0-9]_*/mutants/*.patch" | sort)
[ ${#patches[@]} -gt 0 ] || { echo "mutants.sh: no mutants found" >&2; exit 2; }

if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=/usr/local/cuda/bin:$PATH; fi
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
arch=()
[ -n "${CMAKE_CUDA_ARCHITECTURES:-}" ] && arch=(-DCMAKE_CUDA_ARCHITECTURES="$CMAKE_CUDA_ARCHITECTURES")

# The scratch copy: the files git tracks or would track, as they are in the working tree.
src=$SCRATCH/src
rm -rf "$src"
mkdir -p "$src"
git ls-files --cached --others --exclude-standard -z | (cd "$ROOT" && xargs -0 cp --parents -t "$src") || exit 1
cmake -S "$src" -B "$SCRATCH/build" "${gen[@]}" "${arch[@]}" -DCMAKE_BUILD_TYPE=Release >"$SCRATCH/configure.log" 2>&1 ||
  { echo "mutants.sh: configure failed ($SCRATCH/configure.log)"; exit 1; }
cmake --build "$SCRATCH/build" --target gpu_check >/dev/null 2>&1 || { echo "mutants.sh: gpu_check does not build"; exit 1; }
"$SCRATCH/build/bin/gpu_check" >/dev/null 2>&1
case $? in
  0) ;;
  77) echo "mutants.sh: SKIP: no CUDA GPU (the mutants need one to run)"; exit 77 ;;
  *) echo "mutants.sh: gpu_check failed"; exit 1 ;;
esac

killed=0 survived=0 errors=0
for p in "${patches[@]}"; do
  lesson=$(basename "$(dirname "$(dirname "$p")")")
  exe=${lesson#[0-9][0-9]_}
  what=$(head -n 1 "$p")
  log=$SCRATCH/$lesson.$(basename "$p" .patch).log
  if ! (cd "$src" && git apply "$ROOT/$p") >"$log" 2>&1; then
    echo "ERROR     $p: does not apply ($log)"; errors=$((errors + 1)); continue
  fi
  verdict=""
  if ! cmake --build "$SCRATCH/build" --target "$exe" >>"$log" 2>&1; then
    verdict="ERROR     $p: does not build ($log)"; errors=$((errors + 1))
  else
    caught=""
    (cd "$SCRATCH/build" && ctest --no-tests=error --timeout "$LIMIT" -R "^${lesson}\.(quick|awkward\.[0-9]+)$" >>"$log" 2>&1) ||
      caught="its CTest --quick/awkward runs failed$(grep -q 'Timeout' "$log" && echo ", one by running past $LIMIT s (a hang)")"
    if [ -z "$caught" ]; then
      while read -r flags; do
        [ -n "$flags" ] || continue
        read -r -a args <<<"$flags"
        timeout -k 10 "$LIMIT" "$SCRATCH/build/bin/$exe" "${args[@]}" >>"$log" 2>&1
        rc=$?
        case $rc in
          0) ;;
          124|137) caught="'$exe $flags' ran past $LIMIT s and was stopped (a hang)"; break ;;
          *) caught="'$exe $flags' exited $rc"; break ;;
        esac
      done < <(sed -n '2,/^\(---\|diff \)/p' "$p" | sed -n 's/^run: //p')
    fi
    if [ -n "$caught" ]; then verdict="killed    $p: $caught"; killed=$((killed + 1))
    else verdict="SURVIVED  $p: every check passed ($log)"; survived=$((survived + 1)); fi
  fi
  echo "$verdict"
  echo "          ($what)"
  (cd "$src" && git apply -R "$ROOT/$p") >>"$log" 2>&1 ||
    { echo "mutants.sh: could not take $p back out of $src"; exit 1; }
  cmake --build "$SCRATCH/build" --target "$exe" >>"$log" 2>&1
done
echo "mutants.sh: ${#patches[@]} mutant(s): $killed killed, $survived survived, $errors error(s)"
[ $survived = 0 ] && [ $errors = 0 ]
