# scripts/expect_lib.sh - sourced by the scripts' own tests (perf_retry_test.sh,
# portable_test.sh): one verdict line per case, failures counted in $fails.
fails=0
expect() {  # expect WHAT WANTED_RC GOT_RC [OUTPUT PATTERN]
  if [ "$3" != "$2" ]; then echo "FAIL: $1: exit $3, expected $2"; fails=$((fails+1)); return; fi
  if [ $# -ge 5 ] && ! grep -qE -- "$5" "$4"; then echo "FAIL: $1: no line matching '$5'"; fails=$((fails+1)); return; fi
  echo "ok: $1"
}
