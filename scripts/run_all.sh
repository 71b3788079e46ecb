#!/usr/bin/env bash
# scripts/run_all.sh - build every lesson, run them in numeric order, print a table.
#
#   scripts/run_all.sh [--quick] [--sanitize] [--check-targets] [--only=PATTERN] [--no-build]
#
#   --quick        run each lesson with --quick (small sizes)
#   --check-targets  the performance regression test: at default size, fail when a
#                  lesson misses one of its benchmark targets (the "targets" of its
#                  JSON report) or prints a WARNING (not with --quick or --sanitize);
#                  a lesson that does runs once more (after every lesson's first run),
#                  and fails only if it misses again
#   --sanitize     run each lesson at --quick size under compute-sanitizer
#                  memcheck, racecheck, synccheck and initcheck; any error is a FAIL
#   --only=PATTERN run only lessons whose folder name matches the shell pattern
#                  (e.g. --only='0[0-2]_*' or --only='*transpose*')
#   --no-build     use the binaries already in the build folder
#
# Environment: BUILD_DIR (default build), CUDAARCHS (e.g. 90) to pick the GPU
# architecture instead of "native". Each lesson's log and JSON report go to
# $BUILD_DIR/results/; the table, the targets and the WARNING lines come from the JSON
# report (scripts/results.py verdict), the retry from scripts/check_perf.sh. Each lesson
# is also run once with --quick --repeat=1 --inject-fault, which must FAIL (the check
# can catch a wrong element); those runs come after every timed run, FAULT_JOBS
# (default 8) at a time. Every WARNING a lesson reports (a rate above its bound: a
# measurement error) is listed after the table. A lesson that exits 77 with a reason
# (SKIP: nothing it was asked to run can run on this GPU) is a SKIP, listed with its
# reason after the table, not a failure; so is its fault check then.
# LESSON_GPU_LIMITS=<class> in the environment reaches every lesson (docs/setup.md).
# LESSON_PHASES=1 makes every lesson log where its wall time went ("[phase]" lines;
# docs/measuring.md).
# Exit: 0 no FAIL (every lesson PASS or SKIP), 1 any FAIL, 2 bad usage, 77 no GPU on this machine.
set -uo pipefail
# NVLink multicast (NVLS) stays off for NCCL in every run (lesson 22): the machines the course is
# measured on must not use it. A value already in the environment is kept.
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD=${BUILD_DIR:-build}
QUICK=0; SANITIZE=0; ONLY='*'; DO_BUILD=1; TARGETS=0
for arg in "$@"; do
  case "$arg" in
    --quick) QUICK=1 ;;
    --sanitize) SANITIZE=1 ;;
    --check-targets) TARGETS=1 ;;
    --only=*) ONLY=${arg#--only=} ;;
    --no-build) DO_BUILD=0 ;;
    -h|--help) sed -n '2,31p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_all.sh: unknown option '$arg' (see --help)" >&2; exit 2 ;;
  esac
done
if [ "$TARGETS" = 1 ] && { [ "$QUICK" = 1 ] || [ "$SANITIZE" = 1 ]; }; then
  echo "run_all.sh: --check-targets grades the default sizes; it does not combine with --quick or --sanitize" >&2; exit 2
fi

command -v python3 >/dev/null || { echo "run_all.sh: needs python3 (it reads the lessons' JSON reports)" >&2; exit 1; }
. scripts/check_perf.sh  # verdict_read, perf_first and perf_second: the retry rule of --check-targets
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=/usr/local/cuda/bin:$PATH; fi
lessons=()
for d in lessons/[0-9][0-9]_*/; do
  d=${d%/}; name=${d#lessons/}
  [[ "$name" == $ONLY ]] || continue
  [ -f "$d/main.cu" ] || continue
  lessons+=("$name")
done
[ ${#lessons[@]} -gt 0 ] || { echo "run_all.sh: no lesson matches --only=$ONLY" >&2; exit 2; }

elapsed() { awk -v a="$1" -v b="$(date +%s%N)" 'BEGIN { printf "%.1f", (b - a) / 1e9 }'; }
if [ "$DO_BUILD" = 1 ]; then
  # Build only what runs: gpu_check and the selected lessons.
  targets=(gpu_check)
  for name in "${lessons[@]}"; do targets+=("${name#[0-9][0-9]_}"); done
  source scripts/build_lib.sh
  build_targets run_all.sh "$BUILD" "${targets[@]}" || exit 1
fi
case "$BUILD" in /*) BUILD_ABS=$BUILD ;; *) BUILD_ABS=$ROOT/$BUILD ;; esac
BIN="$BUILD_ABS/bin"
RES="$BUILD_ABS/results"
mkdir -p "$RES"

gpu=$("$BIN/gpu_check" 2>&1); rc=$?
if [ $rc = 77 ]; then
  echo "run_all.sh: no CUDA GPU on this machine ($gpu); lessons are built but not run."
  exit 77
elif [ $rc != 0 ]; then
  echo "run_all.sh: gpu_check failed: $gpu"; exit 1
fi
echo "$gpu" | head -n 1
# One process keeps the CUDA driver initialized for the whole run (no context, no GPU memory): each
# lesson then starts and ends about 0.1 s sooner (docs/measuring.md). It ends with this script.
"$BIN/gpu_check" --hold=$$ >/dev/null 2>&1 &
holder=$!
disown "$holder"  # not a job of this script: the waits below are for lessons only
trap 'kill "$holder" 2>/dev/null' EXIT
run_start=$(date +%s%N)
# What the run was: for scripts/results.py, which turns build/results/*.json into tables.
mode=full; [ "$QUICK" = 1 ] && mode=quick; [ "$SANITIZE" = 1 ] && mode=sanitize
driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n 1)
cuda=$(nvcc --version 2>/dev/null | grep -o 'release [0-9.]*' | head -n 1)
printf '{"gpu":"%s","driver":"%s","cuda":"%s","date":"%s","mode":"%s"}\n' "$(echo "$gpu" | head -n 1 | sed 's/"//g')" \
  "${driver:-unknown}" "${cuda#release }" "$(date -u +%Y-%m-%d)" "$mode" >"$RES/run-$mode.json"
: >"$RES/seconds-$mode.tsv"
if [ "$SANITIZE" = 1 ]; then
  . scripts/sanitize.sh  # sanitize_run: one tool on one run, and its verdict
  sanitizer_path >/dev/null || { echo "run_all.sh: --sanitize needs compute-sanitizer (CUDA Toolkit)"; exit 1; }
fi

fails=0
passes=0
skips=()  # "name: reason" of each lesson that exited 77 (SKIP)
table=()
# Fixed-width columns first, the free-length key metric last.
row() { table+=("$(printf '%-28s %-7s %7s  %-16s %-36s %s' "$1" "$2" "$5" "$6" "$4" "$3")"); }
row "lesson" "result" "key metric" "against" "seconds" "fault check"
warnings=()
missed=()
retried=()  # --check-targets: what a lesson's first run missed (it then ran once more)
pending=()  # lessons run (name, result, metric, fraction, seconds), waiting for their fault check
suffix=""; [ "$QUICK" = 1 ] && suffix=".quick"
args=()
[ "$QUICK" = 1 ] && args+=(--quick)
# The timed runs, one lesson after another, nothing else running beside them. Then every run's
# report is read (results.py verdict, one Python process each), all at once; a run that
# --check-targets sends round again (perf_second, scripts/check_perf.sh) runs after that.
if [ "$SANITIZE" = 0 ]; then
  for name in "${lessons[@]}"; do
    exe="$BIN/${name#[0-9][0-9]_}"
    rm -f "$RES/$name.run" "$RES/$name.verdict"
    [ -x "$exe" ] || continue
    log="$RES/$name$suffix.log"; json="$RES/$name$suffix.json"
    perf_first "$log" "$json" "$exe" "${args[@]}"
    printf '%s %s\n' "$perf_rc" "$perf_secs" >"$RES/$name.run"
    echo "$name: exit $perf_rc ($perf_secs s)"
  done
  verdicts=()
  for name in "${lessons[@]}"; do
    [ -f "$RES/$name.run" ] || continue
    python3 "$RESULTS_PY" verdict --log="$RES/$name$suffix.log" "$RES/$name$suffix.json" >"$RES/$name.verdict" &
    verdicts+=($!)
  done
  [ ${#verdicts[@]} = 0 ] || wait "${verdicts[@]}"
fi
for name in "${lessons[@]}"; do
  exe="$BIN/${name#[0-9][0-9]_}"
  if [ ! -x "$exe" ]; then pending+=("$name"$'\x1f'"FAIL"$'\x1f'"(not built)"$'\x1f'$'\x1f'); fails=$((fails+1)); continue; fi
  if [ "$SANITIZE" = 1 ]; then
    result=PASS; detail=""; SKIPPED_TOOLS=0; why=""
    start=$(date +%s%N)
    for tool in memcheck racecheck synccheck initcheck; do
      extra=()
      [ "$tool" = memcheck ] && extra=(--leak-check)
      LESSON_UNDER_SANITIZER=1 sanitize_run "${extra[@]}" --print-limit=20 "$tool" "$RES/$name.$tool.log" \
        "$exe" --quick --repeat=1 --json="$RES/$name.$tool.json"
      [ "$san_verdict" = skipped ] && { SKIPPED_TOOLS=$((SKIPPED_TOOLS+1)); why=${why:-$san_reason}; }
      if [ "$san_verdict" != clean ]; then
        result=FAIL; detail+="$tool(rc=$san_rc ${san_summary:-no summary}) "
      else
        detail+="$tool:0 "
      fi
    done
    secs=$(elapsed "$start")
    # A lesson that cannot run here exits 77 under every tool, with its reason.
    if [ $result = FAIL ] && [ "$SKIPPED_TOOLS" = 4 ]; then
      result=SKIP; skips+=("$name: SKIP ($why)")
    fi
    case $result in PASS) passes=$((passes+1)) ;; FAIL) fails=$((fails+1)) ;; esac
    row "$name" "$result" "${detail% }" "" "$secs" ""
    echo "$name: $result ($detail)"
    continue
  fi
  # --check-targets: the second run the rule asks for (perf_second).
  log="$RES/$name$suffix.log"; json="$RES/$name$suffix.json"
  read -r perf_rc perf_secs <"$RES/$name.run"
  verdict_read <"$RES/$name.verdict"
  rm -f "$RES/$name.run" "$RES/$name.verdict"
  perf_second "$TARGETS" "$log" "$json" "$exe" "${args[@]}"
  rc=$perf_rc; secs=$perf_secs
  for t in "${perf_first_missed[@]}" "${perf_first_warnings[@]}"; do retried+=("$name: first run: $t"); done
  case $rc in
    0) result=PASS; passes=$((passes+1)) ;;
    77) result=SKIP; skips+=("$name: SKIP${v_reason:+ ($v_reason)}") ;;
    *) result=FAIL; fails=$((fails+1)) ;;
  esac
  metric=$v_metric; frac=$v_against
  [ $rc = 0 ] || metric="RESULT: $v_result${v_reason:+ ($v_reason)}"
  for w in "${v_warnings[@]}"; do warnings+=("$name: $w"); done
  if [ "$TARGETS" = 1 ] && [ $rc = 0 ]; then
    for t in "${v_missed[@]}"; do missed+=("$name: $t"); done
  fi
  printf '%s\t%s\n' "$name" "$secs" >>"$RES/seconds-$mode.tsv"
  pending+=("$name"$'\x1f'"$result"$'\x1f'"$metric"$'\x1f'"$frac"$'\x1f'"$secs")
  echo "$name: $result ($secs s) $metric${frac:+ | $frac}"
done

# The fault checks: each lesson again at --quick --repeat=1, corrupted on purpose (--inject-fault); it must
# FAIL with exit 1. Nothing in them is timed, so they run after every timed run, FAULT_JOBS
# (default 8) at a time. Their logs may hold WARNING lines (runs that share the GPU and the PCIe
# link measure their bounds and pipelines side by side); only their exit and result count. Their
# cost is mostly CUDA context creation, which the driver does one process at a time (on an H100,
# 24 of them took 5.3 s with 8, 16 or 24 at a time).
if [ ${#pending[@]} -gt 0 ]; then
  fault_start=$(date +%s%N)
  # Longest timed run first, so that the slow fault checks do not start last and run alone.
  mapfile -t order < <(for entry in "${pending[@]}"; do
    IFS=$'\x1f' read -r name result metric frac secs <<<"$entry"
    printf '%s\t%s\n' "${secs:-0}" "$name"
  done | sort -t$'\t' -k1,1gr -k2,2 | cut -f2)
  for name in "${order[@]}"; do
    [ -x "$BIN/${name#[0-9][0-9]_}" ] || continue  # not built: no fault check
    while [ "$(jobs -rp | wc -l)" -ge "${FAULT_JOBS:-8}" ]; do wait -n; done
    f="$RES/$name.fault"
    rm -f "$f.json"
    ( "$BIN/${name#[0-9][0-9]_}" --quick --repeat=1 --inject-fault --json="$f.json" >"$f.log" 2>&1; echo $? >"$f.rc"
      python3 "$RESULTS_PY" verdict --log="$f.log" "$f.json" >"$f.verdict" ) &
  done
  wait
  for entry in "${pending[@]}"; do
    IFS=$'\x1f' read -r name result metric frac secs <<<"$entry"
    if [ "$metric" = "(not built)" ]; then row "$name" "$result" "$metric" "" "" ""; continue; fi
    frc=$(cat "$RES/$name.fault.rc" 2>/dev/null || echo none)
    verdict_read < <(cat "$RES/$name.fault.verdict" 2>/dev/null)
    rm -f "$RES/$name.fault.rc" "$RES/$name.fault.verdict"
    if [ "$frc" = 1 ] && [ "$v_result" = FAIL ]; then fault="caught (FAIL)"
    elif [ "$frc" = 77 ] && [ "$v_result" = SKIP ] && [ -n "$v_reason" ]; then fault="SKIP"
    else fault="MISSED (exit $frc)"; fails=$((fails+1)); fi
    row "$name" "$result" "$metric" "$frac" "$secs" "$fault"
    [[ "$fault" == MISSED* ]] && echo "$name: fault check $fault (log $RES/$name.fault.log)"
  done
  echo "fault checks: ${#pending[@]} lesson(s) in $(elapsed "$fault_start") s, ${FAULT_JOBS:-8} at a time"
fi

echo
summary_file="$RES/summary-$mode.txt"
printf '%s\n' "${table[@]}" | tee "$summary_file"
if [ ${#warnings[@]} -gt 0 ]; then
  printf '\n%s\n' "WARNING lines (a rate above its bound is a measurement error):" | tee -a "$summary_file"
  printf '  %s\n' "${warnings[@]}" | tee -a "$summary_file"
fi
if [ ${#skips[@]} -gt 0 ]; then
  printf '\n%s\n' "SKIP (nothing the lesson was asked to run can run on this GPU):" | tee -a "$summary_file"
  printf '  %s\n' "${skips[@]}" | tee -a "$summary_file"
fi
if [ ${#retried[@]} -gt 0 ]; then
  printf '\n%s\n' "Run twice (--check-targets): the first run missed, the table shows the second:" | tee -a "$summary_file"
  printf '  %s\n' "${retried[@]}" | tee -a "$summary_file"
fi
if [ "$TARGETS" = 1 ]; then
  if [ ${#missed[@]} -gt 0 ] || [ ${#warnings[@]} -gt 0 ]; then
    printf '\n%s\n' "--check-targets: FAILED" | tee -a "$summary_file"
    [ ${#missed[@]} -gt 0 ] && printf '  %s\n' "${missed[@]}" | tee -a "$summary_file"
    fails=$((fails+1))
  else
    printf '\n%s\n' "--check-targets: every benchmark target met, no WARNING" | tee -a "$summary_file"
  fi
fi
echo "run_all.sh: lessons ran in $(elapsed "$run_start") s (build not counted)" | tee -a "$summary_file"
echo "run_all.sh: ${#lessons[@]} lesson(s): $passes PASS, ${#skips[@]} SKIP, $((${#lessons[@]} - passes - ${#skips[@]})) FAIL" |
  tee -a "$summary_file"
if [ $fails -gt 0 ]; then echo "run_all.sh: $fails failure(s)"; exit 1; fi
exit 0
