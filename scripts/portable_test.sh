#!/usr/bin/env bash
# portable_test.sh - CPU test (CTest portable_rules) of the rules of the portability tests:
# scripts/portable_run.sh (every run PASSes or SKIPs with a reason; a FAIL, a SKIP without a
# reason, a crash or a hang fails; LESSON_GPU_LIMITS set per class, unset for sm_90) and
# scripts/portability.py (summary and table from the reports). Fake lessons stand in for the
# real ones (no GPU needed).
set -u
cd "$(dirname "$0")/.." || exit 2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. scripts/expect_lib.sh
printf '#!/bin/sh\necho "GPU 0: fake"\n' >"$tmp/gpu"
printf '#!/bin/sh\necho "no usable CUDA device"\nexit 77\n' >"$tmp/nogpu"
# The fake lesson: --mode=X decides what this run does; --json=F writes a report naming the class.
cat >"$tmp/lesson" <<'EOS'
#!/usr/bin/env bash
mode=pass json=""
for a in "$@"; do
  case $a in --mode=*) mode=${a#--mode=} ;; --json=*) json=${a#--json=} ;; esac
done
echo "LESSON_GPU_LIMITS=${LESSON_GPU_LIMITS-unset}"
if [ -n "$json" ]; then
  printf '{"lesson":"fake","result":"PASS","device":{"name":"Fake GPU","emulating":"%s"},"notes":["rung 9 skipped: needs an sm_90a image; this GPU class (sm_86) is cc 8.6","rung 5 uses 3 stages instead of 4","peak rate note"]}\n' "${LESSON_GPU_LIMITS-}" >"$json"
fi
[ -n "$json" ] && [ -n "${FAKE_QUICK_FAIL:-}" ] && { echo "RESULT: FAIL (quick)"; exit 1; }
case $mode in
  pass) echo "RESULT: PASS" ;;
  skip) echo "rung 9 skipped: needs 200000 bytes"; echo "RESULT: SKIP (rung 9 skipped: needs 200000 bytes)"; exit 77 ;;
  bareskip) echo "RESULT: SKIP ()"; exit 77 ;;
  fail) echo "RESULT: FAIL (check)"; exit 1 ;;
  crash) kill -SEGV $$ ;;
  hang) sleep 30 ;;
esac
EOS
chmod +x "$tmp/gpu" "$tmp/nogpu" "$tmp/lesson"
o=$tmp/out j=$tmp/p/00_fake.sm_86.json
run() { bash scripts/portable_run.sh "$@" >"$o" 2>&1; }

run "$tmp/nogpu" sm_86 "$j" "$tmp/lesson"; expect "no GPU: SKIP" 77 $? "$o"
run "$tmp/gpu" sm_86 "$j" "$tmp/lesson" "--n=1" "--mode=skip --repeat=1"
expect "PASS and SKIP with a reason pass" 0 $? "$o" "^portable \(sm_86\): every run"
grep -q "^LESSON_GPU_LIMITS=sm_86$" "$o" && [ -s "$j" ] && echo "ok: the class is set, the JSON written" ||
  { echo "FAIL: LESSON_GPU_LIMITS=sm_86 not seen or no JSON"; fails=$((fails+1)); }
LESSON_GPU_LIMITS=sm_75 run "$tmp/gpu" sm_90 "$tmp/p/00_fake.sm_90.json" "$tmp/lesson"
expect "sm_90 is the plain run" 0 $? "$o" "^LESSON_GPU_LIMITS=unset$"
run "$tmp/gpu" sm_86 "$j" "$tmp/lesson" "--mode=bareskip"; expect "a SKIP without a reason fails" 1 $? "$o" "FAILED: exit 77 without"
run "$tmp/gpu" sm_86 "$j" "$tmp/lesson" "--mode=fail --n=3"
expect "a FAIL fails, naming the command line" 1 $? "$o" "FAILED: exit 1 .*lesson --mode=fail --n=3$"
run "$tmp/gpu" sm_86 "$j" "$tmp/lesson" "--mode=crash"; expect "a crash fails" 1 $? "$o" "FAILED: exit 139"
PORTABLE_TIMEOUT=1 run "$tmp/gpu" sm_86 "$j" "$tmp/lesson" "--mode=hang"; expect "a hang fails" 1 $? "$o" "no result after 1 s"
FAKE_QUICK_FAIL=1 run "$tmp/gpu" sm_86 "$j" "$tmp/lesson"; expect "the --quick run counts too" 1 $? "$o" "FAILED: exit 1 .*--quick --json="

# portability.py: the reports of two classes, summarized and tabulated.
run "$tmp/gpu" sm_86 "$tmp/p/00_fake.sm_86.json" "$tmp/lesson"
python3 scripts/portability.py summarize "$tmp/p" "$tmp/s.json" >"$o" 2>&1; expect "summarize" 0 $? "$o"
python3 scripts/portability.py table "$tmp/s.json" >"$o" 2>&1
expect "table: a skipped rung and a smaller configuration, with notes" 0 $? "$o" \
  "^\| 00 fake \| not run \| not run \| skips rung 9 \[1\]; smaller configuration \[2\] \| not run \| skips rung 9 \[1\]; smaller"
expect "table: the note without the class's clause" 0 0 "$o" "^1\. needs an sm_90a image$"
grep -q "peak rate" "$o" && { echo "FAIL: table: a note that is neither a skip nor a smaller configuration"; fails=$((fails+1)); }
cp "$tmp/p/00_fake.sm_86.json" "$tmp/p/00_fake.sm_89.json"
python3 scripts/portability.py summarize "$tmp/p" "$tmp/s2.json" >"$o" 2>&1
expect "summarize: a report of another class under a class's name is refused" 2 $? "$o" "emulated 'sm_86'"
python3 scripts/portability.py check "$tmp/none.json" >"$o" 2>&1; expect "check without a summary: SKIP" 77 $? "$o"
[ $fails = 0 ] && echo "portable_test: all passed" || echo "portable_test: $fails failed"
[ $fails = 0 ]
