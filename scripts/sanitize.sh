#!/usr/bin/env bash
# sanitize.sh [--leak-check] [--print-limit=N] [--timeout=S] TOOL LOG PROGRAM [ARGS...]
#
# Runs PROGRAM ARGS under compute-sanitizer TOOL (memcheck, racecheck, synccheck, initcheck) with
# --error-exitcode 99, its output in LOG, and prints one line, the verdict:
#   TOOL: clean (exit 0; ERROR SUMMARY: 0 error)           the program passed, no error, no hazard
#   TOOL: errors (exit RC; SUMMARY)                        an error or hazard, or the program failed
#   TOOL: no summary (exit RC; none)                       it stopped before the tool's summary
#   TOOL: skipped (exit 77; SUMMARY; REASON)               the lesson cannot run here: a SKIP with
#                                                          the reason of its report or RESULT line
# SUMMARY is the tool's own last words: "ERROR SUMMARY: N error" (memcheck, synccheck, initcheck) or
# "RACECHECK SUMMARY: N hazard" (racecheck). The lesson's report is the file of its --json=FILE
# argument, removed first so that an old one never speaks for this run; without one, its RESULT line.
#   --leak-check     memcheck: also report device memory never freed (--leak-check full)
#   --print-limit=N  errors printed in LOG (default 10)
#   --timeout=S      stop the run after S seconds (exit 124, then: errors or no summary)
# compute-sanitizer is the one on PATH, else /usr/local/cuda/bin's.
# Exit: 0 clean, 1 errors or no summary, 77 skipped, 2 bad usage or no compute-sanitizer.
#
# scripts/run_all.sh --sanitize sources this file for sanitize_run (the same verdict in san_verdict,
# san_rc, san_summary, san_reason); scripts/exercise.py runs it.

SANITIZE_RESULTS_PY="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/results.py"

# The compute-sanitizer to run, or nothing (status 1).
sanitizer_path() {
  command -v compute-sanitizer || { [ -x /usr/local/cuda/bin/compute-sanitizer ] && echo /usr/local/cuda/bin/compute-sanitizer; }
}

# sanitize_run: the script's arguments. Sets san_verdict (clean, errors, "no summary", skipped),
# san_rc (the run's exit), san_summary (empty when none), san_reason (skipped only) and san_line
# (the line the script prints); returns the script's exit status.
sanitize_run() {
  local leak=() limit=10 secs="" tool log san json="" a why="" result="" tag text
  san_verdict=""; san_rc=""; san_summary=""; san_reason=""; san_line=""
  while [ $# -gt 0 ]; do
    case $1 in
      --leak-check) leak=(--leak-check full) ;;
      --print-limit=*) limit=${1#--print-limit=} ;;
      --timeout=*) secs=${1#--timeout=} ;;
      *) break ;;
    esac
    shift
  done
  if [ $# -lt 3 ] || [[ ! "$limit" =~ ^[0-9]+$ ]] || [[ ! "$secs" =~ ^[0-9]*$ ]]; then
    echo "usage: sanitize.sh [--leak-check] [--print-limit=N] [--timeout=S] TOOL LOG PROGRAM [ARGS...]" >&2
    return 2
  fi
  tool=$1 log=$2
  shift 2
  san=$(sanitizer_path) || { echo "sanitize.sh: no compute-sanitizer (CUDA Toolkit)" >&2; return 2; }
  for a in "$@"; do case $a in --json=*) json=${a#--json=} ;; esac; done
  [ -z "$json" ] || rm -f "$json"
  local run=("$san" --tool "$tool" "${leak[@]}" --error-exitcode 99 --print-limit "$limit" "$@")
  [ -z "$secs" ] || run=(timeout -k 10 "$secs" "${run[@]}")
  "${run[@]}" >"$log" 2>&1
  san_rc=$?
  san_summary=$(grep -m1 -oE '(ERROR SUMMARY: [0-9]+ error|RACECHECK SUMMARY: [0-9]+ hazard)' "$log")
  if [ "$san_rc" = 77 ]; then
    while IFS=$'\t' read -r tag text; do
      case $tag in result) result=$text ;; reason) why=$text ;; esac
    done < <(python3 "$SANITIZE_RESULTS_PY" verdict --log="$log" "$json")
  fi
  if [ "$result" = SKIP ] && [ -n "$why" ]; then
    san_verdict=skipped; san_reason=$why
  elif [ "$san_rc" = 0 ] && [[ "$san_summary" == *": 0 "* ]]; then
    san_verdict=clean
  elif [ -n "$san_summary" ]; then
    san_verdict=errors
  else
    san_verdict="no summary"
  fi
  san_line="$tool: $san_verdict (exit $san_rc; ${san_summary:-none}${san_reason:+; $san_reason})"
  case $san_verdict in clean) return 0 ;; skipped) return 77 ;; *) return 1 ;; esac
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -u
  case ${1:-} in -h|--help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
  sanitize_run "$@"
  rc=$?
  [ -z "$san_line" ] || echo "$san_line"
  exit $rc
fi
