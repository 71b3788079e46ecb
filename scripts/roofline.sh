#!/usr/bin/env bash
# scripts/roofline.sh - every lesson's kernels on this GPU's measured roofline, as one SVG.
#
#   scripts/roofline.sh [RESULTS_DIR] [--out=FILE]
#
# Runs scripts/roofline.py, which draws the typed "roofs" and the "work" points of the JSON
# reports in RESULTS_DIR (default build/results); `scripts/roofline.sh --help` says how.
command -v python3 >/dev/null || { echo "roofline.sh: needs python3" >&2; exit 2; }
exec python3 "$(dirname "$0")/roofline.py" "$@"
