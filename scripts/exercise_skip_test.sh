#!/usr/bin/env bash
# scripts/exercise_skip_test.sh - CTest exercise_skip (no GPU): `exercise.py check` on a GPU that
# cannot run an exercise's code. A fake lesson 13 stands in for the real one, in a fake build
# whose gpu_check names a GPU:
#   - the FOCUS run (--quick --rung=3) exits 77: the verdict is SKIP with its reason (exit 77),
#     and nothing else runs;
#   - an AWKWARD size exits 77: "not applicable on this GPU (reason)", the check still PASSes;
#   - the timed run exits 77: PASS without a speed grade, with the reason.
# Exit 0 pass, 1 fail.
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
mkdir -p "$T/src" "$T/b/bin"
cat >"$T/src/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.20)
project(fake NONE)
add_custom_target(matmul_ladder)
add_custom_target(gpu_check)
EOF
cmake -S "$T/src" -B "$T/b" >/dev/null 2>&1 || { echo "FAIL: cannot configure the fake build"; exit 1; }
printf '#!/bin/sh\necho "GPU 0: fake"\n' >"$T/b/bin/gpu_check"
# The fake lesson: FAKE=focus skips the focus run, FAKE=awkward one awkward size, FAKE=timed the
# timed run (--rung=3 without --quick); everything else PASSes and writes a report.
cat >"$T/b/bin/matmul_ladder" <<'EOF'
#!/usr/bin/env bash
a="$*"
skip() { echo "RESULT: SKIP (rung 3 skipped: $1)"; exit 77; }
[ "${FAKE:-}" = focus ] && [[ "$a" == *--rung=3* ]] && skip "needs compute capability 8.0"
[ "${FAKE:-}" = awkward ] && [[ "$a" == *--m=17* ]] && skip "needs 200000 bytes of shared memory per block"
[ "${FAKE:-}" = timed ] && [[ "$a" == *--rung=3* ]] && [[ "$a" != *--quick* ]] && skip "needs 300000 bytes"
for x in "$@"; do
  case $x in --json=*) echo '{"key_result":{"fraction":0.5},"variants":[{"name":"3 2D register tile 8x8","rate":1.0,"fraction":0.5,"unit":"GFLOP/s"}]}' >"${x#--json=}" ;; esac
done
echo "RESULT: PASS"
EOF
chmod +x "$T/b/bin/gpu_check" "$T/b/bin/matmul_ladder"
check() { BUILD_DIR="$T/b" python3 "$ROOT/scripts/exercise.py" check 13 --exe="$T/b/bin/matmul_ladder" --no-sanitize --runs=1 "$@"; }

FAKE=focus check --json="$T/focus.json" >"$T/out" 2>&1
rc=$?
[ $rc = 77 ] || fail "focus run skipped: exit $rc, expected 77"
grep -q '^exercise: SKIP (rung 3 skipped: needs compute capability 8.0)' "$T/out" || fail "focus run skipped: no SKIP line with the reason"
python3 -c "import json,sys; r=json.load(open(sys.argv[1])); assert r['result']=='SKIP' and r['checks']==[], r" "$T/focus.json" ||
  fail "focus run skipped: the JSON is not a SKIP with no checks"

FAKE=awkward check --json="$T/awkward.json" >"$T/out" 2>&1
rc=$?
[ $rc = 0 ] || fail "awkward size skipped: exit $rc, expected 0"
grep -q 'not applicable on this GPU (rung 3 skipped: needs 200000 bytes of shared memory per block)' "$T/out" ||
  fail "awkward size skipped: not listed as not applicable with its reason"
python3 -c "import json,sys; r=json.load(open(sys.argv[1])); assert r['result']=='PASS' and r['grade']=='A', r" "$T/awkward.json" ||
  fail "awkward size skipped: not a PASS with a grade"

FAKE=timed check --json="$T/timed.json" >"$T/out" 2>&1
rc=$?
[ $rc = 0 ] || fail "timed run skipped: exit $rc, expected 0"
python3 -c "import json,sys; r=json.load(open(sys.argv[1])); assert r['result']=='PASS' and r['grade'] is None and 'needs 300000 bytes' in r['not_graded'], r" "$T/timed.json" ||
  fail "timed run skipped: not a PASS without a grade, with the reason"

[ $fails = 0 ] && echo "exercise_skip: ok"
[ $fails = 0 ]
