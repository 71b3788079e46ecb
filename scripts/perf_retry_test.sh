#!/usr/bin/env bash
# perf_retry_test.sh - CPU test of the rule that scripts/check_perf.sh and
# scripts/run_all.sh --check-targets share (perf_first, perf_second): a lesson that PASSes but
# misses a target (or warns) runs once more, and only a second miss fails; and of
# how both read a run from its JSON report (scripts/results.py verdict), or from its
# RESULT line where it wrote none; and of the sanitizer runner (scripts/sanitize.sh) that
# run_all.sh --sanitize and exercise.py share. Fake lessons and a fake compute-sanitizer
# stand in for the real ones (no GPU needed).
set -u
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. scripts/expect_lib.sh
# A fake lesson: its Nth run reports the Nth word of RUNS (met, miss, warn; fake's second
# argument, else the environment's), counted in a file, in its JSON report (--json=FILE) as the
# real ones do. Marker files beside it: .skip (exit 77 with that reason), .nojson (a SKIP or FAIL
# told only by the RESULT line, as a run with no GPU or a failed CUDA call is), .nofault
# (--inject-fault PASSes), .small (a run below the default size: targets not graded).
fake() {
  cat >"$1" <<'EOS'
#!/usr/bin/env bash
json=""; fault=0; n=0
for a in "$@"; do case $a in --json=*) json=${a#--json=} ;; --inject-fault) fault=1 ;; esac; done
[ -f "$0.nojson" ] && json=""
report() {  # report RESULT REASON [TARGET_PERCENT WARNINGS]: the JSON report, when asked for one
  [ -n "$json" ] || return 0
  local why="" pct=${3:-95} small=false
  [ -n "$2" ] && why=$(printf ',"%s_reason":"%s"' "$(echo "$1" | tr A-Z a-z)" "$2")
  [ -f "$0.small" ] && small=true
  { printf '{"lesson":"fake","result":"%s"%s,"default_size":%s,' "$1" "$why" "$([ $small = true ] && echo false || echo true)"
    printf '"key_result":{"metric":"fake run %s","against_text":"%s.0%% of fake bound"},' "$n" "$pct"
    printf '"targets":[{"name":"x","met":%s,"text":"x: %s.0%% (needs >= 90.0%%)"}],' "$([ "$pct" -ge 90 ] && echo true || echo false)" "$pct"
    printf '"warnings":[%s]}\n' "${4:-}"; } >"$json"
}
if [ -f "$0.skip" ]; then echo "RESULT: SKIP ($(cat "$0.skip"))"; report SKIP "$(cat "$0.skip")"; exit 77; fi
if [ $fault = 1 ] && [ ! -f "$0.nofault" ]; then echo "RESULT: FAIL (injected)"; report FAIL injected; exit 1; fi
[ -n "${EXIT:-}" ] && exit "$EXIT"
n=$(( $(cat "$0.count" 2>/dev/null || echo 0) + 1 )); echo $n >"$0.count"
[ -f "$0.runs" ] && RUNS=$(cat "$0.runs")
case $(echo $RUNS | cut -d' ' -f$n) in
  met) report PASS "" 95 ;;
  miss) report PASS "" 80 ;;
  warn) report PASS "" 95 '"y is 101.0% of DRAM bound, above a bound: a measurement error"' ;;
esac
echo "RESULT: PASS"; exit 0
EOS
  chmod +x "$1"; rm -f "$1.count" "$1.runs" "$1.skip" "$1.nojson" "$1.nofault" "$1.small"
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
fake $p; echo "no image for cc 9.0 in this build" >$p.skip; touch $p.nojson
bash scripts/check_perf.sh $p >$o 2>&1; expect "check_perf: a SKIP with no report" 77 $? $o "^perf: SKIP \(no image for cc 9.0 in this build\)$"
fake $p; touch $p.small; RUNS="miss" bash scripts/check_perf.sh $p >$o 2>&1
expect "check_perf: no target graded below the default size" 0 $? $o "every target met"
fake $p; RUNS="miss miss" bash scripts/check_perf.sh $p >$o 2>&1
expect "check_perf: the first run's misses are shown" 1 $? $o "^perf: running once more$"
expect "check_perf: the missed target's text" 0 0 $o "^target: x: 80.0% \(needs >= 90.0%\), MISSED$"

# run_all.sh over a fake build: gpu_check names a GPU, two fake lessons.
b=$tmp/build; mkdir -p $b/bin
printf '#!/bin/sh\necho "GPU 0: fake"\n' >$b/bin/gpu_check; chmod +x $b/bin/gpu_check
fake $b/bin/vector_add; fake $b/bin/matrix_add_single_block
RUNS="miss met" BUILD_DIR=$b bash scripts/run_all.sh --no-build --check-targets --only='0[01]_*' >$o 2>&1
expect "run_all: missed, then met" 0 $? $o "^  00_vector_add: first run: target: x: 80.0%"
[ -f $b/results/00_vector_add.first.log ] && [ -f $b/results/00_vector_add.first.json ] && [ -f $b/results/00_vector_add.log ] &&
  echo "ok: run_all keeps the first log and report" ||
  { echo "FAIL: run_all: NAME.first.log, NAME.first.json and NAME.log not all kept"; fails=$((fails+1)); }
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
expect "run_all: a FAIL's row says why" 0 0 $o "^00_vector_add +FAIL .*RESULT: FAIL \(no JSON report and no RESULT line\)$"
# The table from the JSON: the key metric and its "against" text as the report wrote them.
fake $b/bin/vector_add "met"; fake $b/bin/matrix_add_single_block "warn"
BUILD_DIR=$b bash scripts/run_all.sh --no-build --only='0[01]_*' >$o 2>&1
expect "run_all: the row from the report" 0 $? $o "^00_vector_add +PASS +[0-9.]+ +caught \(FAIL\) +95.0% of fake bound +fake run 1$"
expect "run_all: WARNING listed under the table" 0 0 $o "^  01_matrix_add_single_block: WARNING: y is 101.0% of DRAM bound"
# A SKIP told only by its RESULT line (no GPU, no image for it: no report); a fault not caught.
fake $b/bin/vector_add "met"; touch $b/bin/vector_add.nofault
fake $b/bin/matrix_add_single_block; echo "no image for cc 9.0 in this build" >$b/bin/matrix_add_single_block.skip
touch $b/bin/matrix_add_single_block.nojson
BUILD_DIR=$b bash scripts/run_all.sh --no-build --only='0[01]_*' >$o 2>&1
expect "run_all: a fault not caught fails" 1 $? $o "^00_vector_add +PASS .*MISSED \(exit 0\)"
expect "run_all: a SKIP with no report, its reason from the log" 0 0 $o "^  01_matrix_add_single_block: SKIP \(no image for cc 9.0 in this build\)$"
# --sanitize: four tools each; a lesson that cannot run here is a SKIP with its reason.
mkdir -p $tmp/san
cat >$tmp/san/compute-sanitizer <<'EOS'
#!/usr/bin/env bash
tool=""
while [ $# -gt 0 ]; do case $1 in --tool) tool=$2; shift 2 ;; --*) shift 2 ;; *) break ;; esac; done
"$@"; rc=$?
[ -n "${HAZARDS:-}" ] && [ $tool = racecheck ] && [ $rc = 0 ] && rc=99
[ $tool = racecheck ] && echo "========= RACECHECK SUMMARY: ${HAZARDS:-0} hazards displayed (0 errors, 0 warnings)" || echo "========= ERROR SUMMARY: 0 errors"
exit $rc
EOS
chmod +x $tmp/san/compute-sanitizer
fake $b/bin/vector_add "met met met met"; fake $b/bin/matrix_add_single_block
echo "part 2 skipped: needs 2 GPUs" >$b/bin/matrix_add_single_block.skip
PATH=$tmp/san:$PATH BUILD_DIR=$b bash scripts/run_all.sh --no-build --sanitize --only='0[01]_*' >$o 2>&1
expect "run_all --sanitize: clean and SKIP" 0 $? $o "2 lesson\(s\): 1 PASS, 1 SKIP, 0 FAIL"
expect "run_all --sanitize: every tool" 0 0 $o "^00_vector_add +PASS .*memcheck:0 racecheck:0 synccheck:0 initcheck:0$"
expect "run_all --sanitize: the SKIP's reason" 0 0 $o "^  01_matrix_add_single_block: SKIP \(part 2 skipped: needs 2 GPUs\)$"
fake $b/bin/vector_add "met met met met"
HAZARDS=2 PATH=$tmp/san:$PATH BUILD_DIR=$b bash scripts/run_all.sh --no-build --sanitize --only='00_*' >$o 2>&1
expect "run_all --sanitize: a hazard fails" 1 $? $o "^00_vector_add +FAIL .*racecheck\(rc=99 RACECHECK SUMMARY: 2 hazard\) synccheck:0"
# The runner alone (scripts/sanitize.sh, which exercise.py runs too): its one-line verdict and exit.
fake $b/bin/vector_add "met"
PATH=$tmp/san:$PATH bash scripts/sanitize.sh memcheck $tmp/san.log $b/bin/vector_add --quick >$o 2>&1
expect "sanitize.sh: clean" 0 $? $o "^memcheck: clean \(exit 0; ERROR SUMMARY: 0 error\)$"
PATH=$tmp/san:$PATH bash scripts/sanitize.sh racecheck $tmp/san.log $b/bin/matrix_add_single_block --json=$tmp/s.json >$o 2>&1
expect "sanitize.sh: skipped" 77 $? $o "^racecheck: skipped \(exit 77; RACECHECK SUMMARY: 0 hazard; part 2 skipped: needs 2 GPUs\)$"
PATH=$tmp/san:$PATH bash scripts/sanitize.sh racecheck $tmp/san.log false >$o 2>&1
expect "sanitize.sh: the program failed" 1 $? $o "^racecheck: errors \(exit 1; RACECHECK SUMMARY: 0 hazard\)$"
[ $fails = 0 ] && echo "perf_retry_test: all passed" || echo "perf_retry_test: $fails failed"
[ $fails = 0 ]
