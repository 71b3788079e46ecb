#!/usr/bin/env bash
# portable_run.sh GPU_CHECK CLASS JSON PROGRAM [RUN ...] - the CTest `portable` test of one lesson
# and one GPU class (label portable; scripts/test.sh --portable).
#
# With LESSON_GPU_LIMITS=CLASS (sm_75, sm_80, sm_86, sm_89, sm_100, sm_120; docs/setup.md), or
# with it unset where CLASS is sm_90 (the plain run of this GPU), runs PROGRAM
#   --quick --json=JSON            the whole lesson at its small sizes, its report kept in JSON
# and then each RUN, one command line of flags (split at spaces, like the "awkward" and "focus"
# entries of a lesson's manifest), each under `timeout` (PORTABLE_TIMEOUT seconds, default 300:
# a hang fails).
# Passes when every run exits 0 (PASS) or 77 with a last line `RESULT: SKIP (<reason>)`, a
# reason given: on a smaller GPU a rung that cannot run is skipped with a reason, never failed,
# never crashed. Any other exit (a FAIL, bad input, a crash, a timeout) fails the test and names
# the command line. Exit 77 without a GPU (GPU_CHECK, the build's gpu_check, exits 77): CTest SKIP.
set -u
if [ $# -lt 4 ]; then
  echo "usage: portable_run.sh GPU_CHECK CLASS JSON PROGRAM [RUN ...]" >&2
  exit 2
fi
check=$1 class=$2 json=$3 exe=$4
shift 4
"$check" >/dev/null 2>&1
rc=$?
[ $rc = 77 ] && { echo "SKIP: no CUDA GPU"; exit 77; }
[ $rc = 0 ] || { echo "portable: gpu_check failed (exit $rc)"; exit 1; }
case "$class" in
  sm_90) unset LESSON_GPU_LIMITS ;;  # the plain run: this GPU's own limits
  *) export LESSON_GPU_LIMITS=$class ;;
esac
mkdir -p "$(dirname "$json")" || exit 1
rm -f "$json"  # a report left from an earlier run must not stand for this one
limit=${PORTABLE_TIMEOUT:-300}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
fails=0
one() {  # one command line of the lesson; prints it, its output and its verdict
  local what="LESSON_GPU_LIMITS=${LESSON_GPU_LIMITS:-(unset)} $exe $*" rc last
  echo "== $what"
  timeout -k 10 "$limit" "$exe" "$@" >"$out" 2>&1
  rc=$?
  cat "$out"
  last=$(grep -v '^[[:space:]]*$' "$out" | tail -n 1)
  case $rc in
    0) echo "-- PASS" ;;
    77)
      if [[ "$last" =~ ^RESULT:\ SKIP\ \(.+\)$ ]]; then
        echo "-- SKIP, with a reason"
      else
        echo "-- FAILED: exit 77 without a last line 'RESULT: SKIP (<reason>)': $what"
        fails=$((fails + 1))
      fi
      ;;
    124) echo "-- FAILED: no result after $limit s (a hang?): $what"; fails=$((fails + 1)) ;;
    137) echo "-- FAILED: killed (past $limit s, or out of memory): $what"; fails=$((fails + 1)) ;;
    *) echo "-- FAILED: exit $rc ($last): $what"; fails=$((fails + 1)) ;;
  esac
  last_rc=$rc
}
one --quick --json="$json"
if [ "$last_rc" = 0 ] && [ ! -s "$json" ]; then
  echo "-- FAILED: the --quick run PASSed but wrote no $json"
  fails=$((fails + 1))
fi
for run in "$@"; do
  read -r -a args <<<"$run"
  one "${args[@]}"
done
if [ $fails -gt 0 ]; then
  echo "portable ($class): $fails command line(s) failed"
  exit 1
fi
echo "portable ($class): every run PASSed or SKIPped with a reason"
exit 0
