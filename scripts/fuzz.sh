#!/usr/bin/env bash
# scripts/fuzz.sh --minutes=M [--seed=S] [--only=PATTERN] [--jobs=J] [--no-build] [--check-space=N]
#
# Runs the lessons with random valid command lines for M minutes: sizes at and around tile
# edges and powers of two, random seeds, rungs, modes, --causal, --d, batch and heads, drawn
# from scripts/fuzz_space.txt. Every run must PASS (a SKIP is counted and its reason kept);
# a FAIL, a crash, a hang (a run past 180 s) or a drawn line the lesson rejects is a failure,
# printed with the exact command line that replays it.
#
#   --minutes=M     how long to draw new runs (a real number > 0)
#   --seed=S        the draws' seed (default: from the clock, printed); same seed, same lines
#   --only=PATTERN  lessons whose folder name matches the shell pattern (e.g. '2[01]_*')
#   --jobs=J        runs at once on the GPU (default 1); they share it, which slows them only
#   --no-build      use the binaries already in the build folder
#   --check-space=N no GPU needed: draw N lines per lesson and check only that each is valid
#                   input (the lessons parse flags before any CUDA call); M is not needed
#
# Environment: BUILD_DIR (default build), CUDAARCHS as for scripts/run_all.sh. Every drawn
# command line and its verdict: $BUILD_DIR/fuzz/runs.txt; a failure's output beside it.
# Exit: 0 every run passed, 1 a failure, 2 bad usage, 77 no GPU on this machine.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD=${BUILD_DIR:-build}
MINUTES=""; SEED=""; ONLY='*'; JOBS=1; DO_BUILD=1; CHECK=0
for arg in "$@"; do
  case "$arg" in
    --minutes=*) MINUTES=${arg#--minutes=} ;;
    --seed=*) SEED=${arg#--seed=} ;;
    --only=*) ONLY=${arg#--only=} ;;
    --jobs=*) JOBS=${arg#--jobs=} ;;
    --no-build) DO_BUILD=0 ;;
    --check-space=*) CHECK=${arg#--check-space=} ;;
    -h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "fuzz.sh: unknown option '$arg' (see --help)" >&2; exit 2 ;;
  esac
done
bad() { echo "fuzz.sh: $1" >&2; exit 2; }
[[ "$CHECK" =~ ^[0-9]{1,4}$ ]] || bad "--check-space wants an integer in [1, 9999], not '$CHECK'"
if [ "$CHECK" = 0 ]; then
  [ -n "$MINUTES" ] || bad "--minutes=M is required (see --help)"
  [[ "$MINUTES" =~ ^[0-9]+(\.[0-9]+)?$ ]] && awk -v m="$MINUTES" 'BEGIN { exit !(m > 0 && m <= 10080) }' ||
    bad "--minutes wants a number in (0, 10080], not '$MINUTES'"
fi
[ -n "$SEED" ] || SEED=$(date +%s)
[[ "$SEED" =~ ^[0-9]{1,18}$ ]] || bad "--seed wants a non-negative integer, not '$SEED'"
[[ "$JOBS" =~ ^[1-9][0-9]?$ ]] || bad "--jobs wants an integer in [1, 99], not '$JOBS'"
command -v python3 >/dev/null || { echo "fuzz.sh: needs python3" >&2; exit 1; }

if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=/usr/local/cuda/bin:$PATH; fi
# The lessons the pattern picks, as folder names (the fuzzer checks them against its space).
lessons=()
for name in $(python3 scripts/lessons.py list); do
  [[ "$name" == $ONLY ]] && lessons+=("$name")
done
[ ${#lessons[@]} -gt 0 ] || bad "no lesson matches --only=$ONLY"
if [ "$DO_BUILD" = 1 ]; then
  targets=(gpu_check)
  for name in "${lessons[@]}"; do targets+=("$(python3 scripts/lessons.py get "$name" executable)"); done
  source scripts/build_lib.sh
  build_targets fuzz.sh "$BUILD" "${targets[@]}" || exit 1
fi
case "$BUILD" in /*) BUILD_ABS=$BUILD ;; *) BUILD_ABS=$ROOT/$BUILD ;; esac
if [ "$CHECK" = 0 ]; then
  "$BUILD_ABS/bin/gpu_check" >/dev/null 2>&1
  case $? in
    0) ;;
    77) echo "fuzz.sh: SKIP: no CUDA GPU (the fuzzer runs the lessons)"; exit 77 ;;
    *) echo "fuzz.sh: gpu_check failed"; exit 1 ;;
  esac
  exec python3 scripts/fuzz.py --minutes="$MINUTES" --seed="$SEED" --only="$ONLY" --jobs="$JOBS" \
    --bin="$BUILD_ABS/bin" --log="$BUILD_ABS/fuzz"
fi
exec python3 scripts/fuzz.py --minutes=0 --seed="$SEED" --only="$ONLY" --bin="$BUILD_ABS/bin" \
  --log="$BUILD_ABS/fuzz" --check-space="$CHECK"
