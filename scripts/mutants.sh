#!/usr/bin/env bash
# scripts/mutants.sh [--jobs=J] [LESSON ...] - do the lessons' own checks catch the bugs people write?
#
# Each lessons/NN_name/mutants/*.patch plants one bug: its first line says what mistake it
# models, any following lines `run: <flags>` name extra command lines that reach the bug (a
# rung, a size past 2^31) and `timeout: S` a shorter time limit for a bug that hangs, then the
# diff against the lesson's files. For each patch this
# script applies it to a scratch copy of the checkout, builds the lesson there, and runs the
# lesson's own GPU tests (CTest: its --quick run and its awkward sizes) and the `run:` lines.
# A mutant is KILLED when one of them fails (exit 1, or a crash), or when one runs past
# MUTANT_TIMEOUT seconds (default 300; said so, by name); it SURVIVED when every one passes. A
# patch that no longer applies or builds, or a run: line the lesson cannot run (exit 2: bad
# input or too little memory; 77: SKIP), is an ERROR: it proves nothing.
#
# LESSON: a number (14) or a folder name (14_reduction); default: every lesson with mutants.
# --jobs=J: J scratch copies work at once, each on whole lessons (default: cores / 2, at most
# 8); their runs share the GPU, which slows them but does not change a verdict.
# Environment: CUDAARCHS or CMAKE_CUDA_ARCHITECTURES (default: native), MUTANT_DIR (the
# scratch folder, default $TMPDIR/lesson-mutants), BUILD_DIR (whose gpu_check, when built,
# says whether there is a GPU; default build).
# Exit: 0 every mutant killed, 1 one survived or would not build, 2 bad usage, 77 no GPU.
set -u
cd "$(dirname "$0")/.." || exit 2
ROOT=$PWD
SCRATCH=${MUTANT_DIR:-${TMPDIR:-/tmp}/lesson-mutants}  # outside the checkout: git apply works there as plain patch
LIMIT=${MUTANT_TIMEOUT:-300}
jobs=$(($(nproc) / 2))
[ "$jobs" -le 8 ] || jobs=8

patches=()
for arg in "$@"; do
  case "$arg" in
    -h|--help) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    --jobs=*)
      jobs=${arg#--jobs=}
      [[ "$jobs" =~ ^[1-9][0-9]?$ ]] || { echo "mutants.sh: --jobs wants an integer in [1, 99], not '${arg#--jobs=}'" >&2; exit 2; }
      continue ;;
    -*) echo "mutants.sh: unknown option '$arg' (see --help)" >&2; exit 2 ;;
  esac
  dir=$(python3 scripts/lessons.py find "$arg" 2>/dev/null)
  found=$([ -n "$dir" ] && compgen -G "lessons/$dir/mutants/*.patch" || true)
  [ -n "$found" ] || { echo "mutants.sh: no lesson '$arg' with mutants (lessons/NN_name/mutants/*.patch)" >&2; exit 2; }
  mapfile -t -O ${#patches[@]} patches <<<"$found"
done
[ ${#patches[@]} -gt 0 ] || mapfile -t patches < <(compgen -G "lessons/[0-9][0-9]_*/mutants/*.patch" | sort)
[ ${#patches[@]} -gt 0 ] || { echo "mutants.sh: no mutants found" >&2; exit 2; }
[ "$jobs" -ge 1 ] || jobs=1

if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=/usr/local/cuda/bin:$PATH; fi
source scripts/build_lib.sh  # cmake_configure, cmake_build
arch=()
[ -n "${CMAKE_CUDA_ARCHITECTURES:-}" ] && arch=(-DCMAKE_CUDA_ARCHITECTURES="$CMAKE_CUDA_ARCHITECTURES")

# One scratch copy: the files git tracks or would track, as they are in the working tree.
make_copy() {  # make_copy DIR
  rm -rf "$1"
  mkdir -p "$1/src"
  git ls-files --cached --others --exclude-standard -z | (cd "$ROOT" && xargs -0 cp --parents -t "$1/src") || return 1
  cmake_configure "$1/src" "$1/build" "${arch[@]}" >"$1/configure.log" 2>&1 ||
    { echo "mutants.sh: configure failed ($1/configure.log)"; return 1; }
  # The awkward-size tests run only where this copy's own gpu_check finds a GPU (scripts/if_gpu.sh).
  cmake_build "$1/build" gpu_check >>"$1/configure.log" 2>&1 || { echo "mutants.sh: gpu_check does not build"; return 1; }
}

# A GPU first: the gpu_check of BUILD_DIR (default build) when built, else one built in a copy.
mkdir -p "$SCRATCH"
check=${BUILD_DIR:-build}/bin/gpu_check
fresh=0  # scratch copies made already
if [ ! -x "$check" ]; then
  make_copy "$SCRATCH/w0" || exit 1
  fresh=1
  check=$SCRATCH/w0/build/bin/gpu_check
fi
"$check" >/dev/null 2>&1
case $? in
  0) ;;
  77) echo "mutants.sh: SKIP: no CUDA GPU (the mutants need one to run)"; exit 77 ;;
  *) echo "mutants.sh: gpu_check failed"; exit 1 ;;
esac

# One mutant in one scratch copy: prints two lines, the verdict and what the patch models.
one_mutant() {  # one_mutant DIR PATCH
  local dir=$1 p=$2
  local src=$dir/src build=$dir/build
  local lesson exe what log verdict caught flags rc limit
  lesson=$(basename "$(dirname "$(dirname "$p")")")
  exe=$(python3 "$ROOT/scripts/lessons.py" get "$lesson" executable)
  what=$(head -n 1 "$p")
  limit=$(sed -n '2,/^\(---\|diff \)/p' "$p" | sed -n 's/^timeout: \([0-9][0-9]*\)$/\1/p' | head -n 1)
  limit=${limit:-$LIMIT}
  log=$SCRATCH/$lesson.$(basename "$p" .patch).log
  if ! (cd "$src" && git apply "$ROOT/$p") >"$log" 2>&1; then
    echo "ERROR     $p: does not apply ($log)"; echo "          ($what)"; return
  fi
  if ! cmake --build "$build" --target "$exe" >>"$log" 2>&1; then
    verdict="ERROR     $p: does not build ($log)"
  else
    caught=""
    (cd "$build" && ctest --no-tests=error --timeout "$limit" -R "^${lesson}\.(quick|awkward\.[0-9]+)$" >>"$log" 2>&1) ||
      caught="its CTest --quick/awkward runs failed$(grep -q 'Timeout' "$log" && echo ", one by running past $limit s (a hang)")"
    # A skipped run checked nothing: on the GPU the mutants run on, every one of them must run.
    if [ -z "$caught" ] && grep -q '(Skipped)' "$log"; then
      caught=ERROR; verdict="ERROR     $p: a CTest run was skipped, so it checked nothing ($log)"
    fi
    if [ -z "$caught" ]; then
      while read -r flags; do
        [ -n "$flags" ] || continue
        read -r -a args <<<"$flags"
        timeout -k 10 "$limit" "$build/bin/$exe" "${args[@]}" >>"$log" 2>&1
        rc=$?
        case $rc in
          0) ;;
          124|137) caught="'$exe $flags' ran past $limit s and was stopped (a hang)"; break ;;
          2|77) caught="ERROR"; verdict="ERROR     $p: '$exe $flags' could not run here (exit $rc: bad input, too little memory or SKIP; $log)"; break ;;
          *) caught="'$exe $flags' exited $rc"; break ;;
        esac
      done < <(sed -n '2,/^\(---\|diff \)/p' "$p" | sed -n 's/^run: //p')
    fi
    if [ "$caught" = ERROR ]; then :
    elif [ -n "$caught" ]; then verdict="killed    $p: $caught"
    else verdict="SURVIVED  $p: every check passed ($log)"; fi
  fi
  echo "$verdict"
  echo "          ($what)"
  # Taken back out; the next mutant's build recompiles what it touched.
  (cd "$src" && git apply -R "$ROOT/$p") >>"$log" 2>&1 ||
    { echo "ERROR     $p: could not be taken back out of $src"; return 1; }
}

# Whole lessons go to one worker (a lesson is compiled once per mutant there); the lessons with
# the most mutants are dealt first.
mapfile -t lessons < <(printf '%s\n' "${patches[@]}" | xargs -n1 dirname | sort | uniq -c | sort -k1,1nr -k2 | awk '{print $2}')
[ "$jobs" -le ${#lessons[@]} ] || jobs=${#lessons[@]}
echo "mutants.sh: ${#patches[@]} mutant(s) of ${#lessons[@]} lesson(s), $jobs at a time, time limit $LIMIT s per run"
for ((w = fresh; w < jobs; ++w)); do make_copy "$SCRATCH/w$w" || exit 1; done
rm -f "$SCRATCH"/w*.out
for ((w = 0; w < jobs; ++w)); do
  (
    for ((i = w; i < ${#lessons[@]}; i += jobs)); do
      for p in "${patches[@]}"; do
        [ "$(dirname "$p")" = "${lessons[$i]}" ] && one_mutant "$SCRATCH/w$w" "$p"
      done
    done
  ) >"$SCRATCH/w$w.out" 2>&1 &
done
wait

# Verdicts in patch order.
out=$(cat "$SCRATCH"/w*.out)
killed=0 survived=0 errors=0
for p in "${patches[@]}"; do
  line=$(grep -F -A1 " $p: " <<<"$out")
  [ -n "$line" ] || line="ERROR     $p: no verdict (see $SCRATCH/w*.out)"
  echo "$line"
  case $line in
    killed*) killed=$((killed + 1)) ;;
    SURVIVED*) survived=$((survived + 1)) ;;
    *) errors=$((errors + 1)) ;;
  esac
done
echo "mutants.sh: ${#patches[@]} mutant(s): $killed killed, $survived survived, $errors error(s)"
[ $survived = 0 ] && [ $errors = 0 ]
