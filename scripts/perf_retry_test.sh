#!/usr/bin/env bash
# perf_retry_test.sh - CPU test of the rule that scripts/check_perf.sh and
# scripts/run_all.sh --check-targets share: a lesson that PASSes but misses a
# target (or prints a WARNING) runs once more, and only a second miss fails.
# Fake lessons stand in for the real ones (no GPU needed).
set -u
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. scripts/expect_lib.sh
# A fake lesson: its Nth run prints the Nth word of RUNS (met, miss, warn; fake's second
# argument, else the environment's), counted in a file.
fake() {
  cat >"$1" <<'EOS'
#!/usr/bin/env bash
[ -f "$0.skip" ] && { echo "RESULT: SKIP ($(cat "$0.skip"))"; exit 77; }
for a in "$@"; do [ "$a" = --inject-fault ] && { echo "RESULT: FAIL"; exit 1; }; done
[ -n "${EXIT:-}" ] && exit "$EXIT"
n=$(( $(cat "$0.count" 2>/dev/null || echo 0) + 1 )); echo $n >"$0.count"
[ -f "$0.runs" ] && RUNS=$(cat "$0.runs")
w=$(echo $RUNS | cut -d' ' -f$n)
case $w in
  met) echo "target: x: 95.0% (needs >= 90.0%), met" ;;
  miss) echo "target: x: 80.0% (needs >= 90.0%), MISSED" ;;
  warn) echo "WARNING: y is 101.0% of DRAM bound, above a bound: a measurement error" ;;
esac
echo "RESULT: PASS"; echo "Key result: fake"; exit 0
EOS
  chmod +x "$1"; rm -f "$1.count" "$1.runs" "$1.skip"
  [ $# -ge 2 ] && echo "$2" >"$1.runs"
}
p=$tmp/lesson; o=$tmp/out
fake $p; RUNS="met" bash scripts/check_perf.sh $p >$o 2>&1; expect "check_perf: met" 0 $? $o "every target met"
fake $p; RUNS="miss met" bash scripts/check_perf.sh $p >$o 2>&1; expect "check_perf: missed, then met" 0 $? $o "second run"
fake $p; RUNS="warn met" bash scripts/check_perf.sh $p >$o 2>&1; expect "check_perf: WARNING, then met" 0 $? $o "second run"
fake $p; RUNS="miss miss" bash scripts/check_perf.sh $p >$o 2>&1; expect "check_perf: missed twice" 1 $? $o "targets missed"
fake $p; RUNS="met warn" EXIT=1 bash scripts/check_perf.sh $p >$o 2>&1; expect "check_perf: FAIL is not run again" 1 $? $o "did not PASS"
fake $p; EXIT=77 bash scripts/check_perf.sh $p >$o 2>&1; expect "check_perf: no GPU" 77 $? $o "SKIP"
fake $p; echo "rung 9 skipped: needs an sm_90a image" >$p.skip
bash scripts/check_perf.sh $p >$o 2>&1; expect "check_perf: SKIP with its reason" 77 $? $o "^perf: SKIP \(rung 9 skipped: needs an sm_90a image\)$"

# run_all.sh over a fake build: gpu_check names a GPU, two fake lessons.
b=$tmp/build; mkdir -p $b/bin
printf '#!/bin/sh\necho "GPU 0: fake"\n' >$b/bin/gpu_check; chmod +x $b/bin/gpu_check
fake $b/bin/vector_add; fake $b/bin/matrix_add_single_block
RUNS="miss met" BUILD_DIR=$b bash scripts/run_all.sh --no-build --check-targets --only='0[01]_*' >$o 2>&1
expect "run_all: missed, then met" 0 $? $o "^  00_vector_add: first run: target: x: 80.0%"
[ -f $b/results/00_vector_add.first.log ] && [ -f $b/results/00_vector_add.log ] && echo "ok: run_all keeps the first log" ||
  { echo "FAIL: run_all: NAME.first.log and NAME.log not both kept"; fails=$((fails+1)); }
fake $b/bin/vector_add "met"; fake $b/bin/matrix_add_single_block "miss miss"
BUILD_DIR=$b bash scripts/run_all.sh --no-build --check-targets --only='0[01]_*' >$o 2>&1
expect "run_all: one lesson missed twice" 1 $? $o "^--check-targets: FAILED"
fake $b/bin/vector_add; fake $b/bin/matrix_add_single_block
RUNS="miss met" BUILD_DIR=$b bash scripts/run_all.sh --no-build --only='0[01]_*' >$o 2>&1
expect "run_all without --check-targets: one run each" 0 $? $o "2 lesson\(s\): 2 PASS, 0 SKIP, 0 FAIL"
[ "$(cat $b/bin/vector_add.count)" = 1 ] && echo "ok: run_all without --check-targets runs a lesson once" ||
  { echo "FAIL: run_all without --check-targets ran a lesson more than once"; fails=$((fails+1)); }
# A lesson that cannot run on this GPU (exit 77, RESULT: SKIP): a SKIP with its reason, its fault
# check too, and not a failure.
fake $b/bin/vector_add "met"; fake $b/bin/matrix_add_single_block "met"
echo "part 2 skipped: needs 2 GPUs" >$b/bin/matrix_add_single_block.skip
BUILD_DIR=$b bash scripts/run_all.sh --no-build --check-targets --only='0[01]_*' >$o 2>&1
expect "run_all: a SKIP is no failure" 0 $? $o "2 lesson\(s\): 1 PASS, 1 SKIP, 0 FAIL"
expect "run_all: the SKIP's reason is listed" 0 0 $o "^  01_matrix_add_single_block: SKIP \(part 2 skipped: needs 2 GPUs\)$"
fake $b/bin/matrix_add_single_block; RUNS="met" EXIT=1 BUILD_DIR=$b bash scripts/run_all.sh --no-build --only='0[01]_*' >$o 2>&1
expect "run_all: a FAIL is counted" 1 $? $o "2 lesson\(s\): 0 PASS, 0 SKIP, 2 FAIL"
[ $fails = 0 ] && echo "perf_retry_test: all passed" || echo "perf_retry_test: $fails failed"
[ $fails = 0 ]
