#!/usr/bin/env bash
# expect_exit.sh CODE PROGRAM [ARGS...]
# Runs PROGRAM and passes (exit 0) when it exits with CODE. Exit 77 from the
# program (no GPU) is passed through as 77 so CTest reports SKIP, unless CODE is 77.
# For CODE 2 it also requires a "RESULT: ERROR" line on stdout and a message on stderr.
set -u
want=$1; shift
out=$(mktemp); err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
"$@" >"$out" 2>"$err"
rc=$?
cat "$out"; cat "$err" >&2
if [ "$rc" = 77 ] && [ "$want" != 77 ]; then echo "SKIP (no CUDA device)"; exit 77; fi
if [ "$rc" != "$want" ]; then echo "expected exit $want, got $rc"; exit 1; fi
if [ "$want" = 2 ]; then
  grep -q '^RESULT: ERROR (' "$out" || { echo "exit 2 without a 'RESULT: ERROR (...)' line"; exit 1; }
  [ -s "$err" ] || { echo "exit 2 without a message on stderr"; exit 1; }
fi
if [ "$want" = 1 ]; then
  grep -q '^RESULT: FAIL (' "$out" || { echo "exit 1 without a 'RESULT: FAIL (...)' line"; exit 1; }
fi
exit 0
