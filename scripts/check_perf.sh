#!/usr/bin/env bash
# check_perf.sh PROGRAM [ARGS...] - the CTest `perf` test of one lesson (GPU only).
# Runs the lesson at its default size and passes when it PASSes, meets every
# benchmark target of its report (lessons 01, 08 and 11 have none: they report,
# they do not race) and prints no WARNING line. A run that PASSes but misses a
# target or prints a WARNING runs once more, and only a second miss fails (as in
# scripts/run_all.sh --check-targets: a shared machine has slow moments, a real
# regression misses twice). Exit 77 (no GPU, or nothing of the lesson can run on this GPU: its
# `RESULT: SKIP (<reason>)` line) is passed through with the reason, so CTest reports SKIP.
set -u
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for attempt in 1 2; do
  "$@" >"$out" 2>&1
  rc=$?
  cat "$out"
  if [ "$rc" = 77 ]; then
    why=$(grep '^RESULT: SKIP (' "$out" | tail -n 1 | sed 's/^RESULT: SKIP (\(.*\))$/\1/')
    echo "perf: SKIP (${why:-no reason given})"
    exit 77
  fi
  [ "$rc" = 0 ] || { echo "perf: the lesson did not PASS (exit $rc)"; exit 1; }
  bad=0
  if grep -q '^target: .*, MISSED$' "$out"; then echo "perf: targets missed:"; grep '^target: .*, MISSED$' "$out"; bad=1; fi
  if grep -q '^WARNING:' "$out"; then echo "perf: WARNING lines:"; grep '^WARNING:' "$out"; bad=1; fi
  again=""; [ $attempt = 2 ] && again=" (second run)"
  [ $bad = 0 ] && { echo "perf: every target met, no WARNING$again"; exit 0; }
  [ $attempt = 1 ] && echo "perf: running once more"
done
exit 1
