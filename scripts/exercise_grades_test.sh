#!/usr/bin/env bash
# scripts/exercise_grades_test.sh - CTest exercise_grades (no GPU): `exercise.py grades` folds check
# --solution JSON files into one summary (learner checks and other GPU models refused or left out),
# and `exercise.py table` shows the summary's grades. Exit 0 pass, 1 fail.
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
check_json() {  # file lesson solution gpu grade seconds
  cat >"$1" <<JSON
{"lesson": "$2", "solution": $3, "result": "PASS", "grade": "$5", "seconds": $6, "date": "2026-11-23 01:00:00",
 "measurement": {"before": {"gpu": "$4"}}, "speed": [{"of_reference": 0.99, "spread": 0.01}]}
JSON
}
mkdir -p "$T/in" "$T/mixed"
check_json "$T/in/a.json" 00_vector_add true "NVIDIA H100 80GB HBM3" A 21.5
check_json "$T/in/b.json" 02_matrix_add_multi_block true "NVIDIA H100 80GB HBM3" B 12.0
check_json "$T/in/c.json" 03_batched_3d_grid false "NVIDIA H100 80GB HBM3" C 9.0  # a learner's check: left out
echo "not json" >"$T/in/notes.txt"
python3 "$ROOT/scripts/exercise.py" grades "$T/in" "$T/g.json" || fail "grades exited $?"
python3 - "$T/g.json" <<'PY' || fail "summary content"
import json, sys
g = json.load(open(sys.argv[1]))
assert g["gpu"] == "NVIDIA H100 80GB HBM3", g["gpu"]
assert sorted(g["lessons"]) == ["00_vector_add", "02_matrix_add_multi_block"], sorted(g["lessons"])
assert g["lessons"]["02_matrix_add_multi_block"]["grade"] == "B"
assert g["lessons"]["00_vector_add"]["seconds"] == 21.5
PY
# Two GPU models in one folder: refused (exit 2), nothing written.
check_json "$T/mixed/a.json" 00_vector_add true "NVIDIA H100 80GB HBM3" A 20
check_json "$T/mixed/b.json" 02_matrix_add_multi_block true "NVIDIA H200" A 20
python3 "$ROOT/scripts/exercise.py" grades "$T/mixed" "$T/m.json" >/dev/null 2>&1; rc=$?
[ $rc = 2 ] || fail "two GPU models: exit $rc, expected 2"
[ ! -e "$T/m.json" ] || fail "two GPU models: a summary was written"
# The committed summaries appear as table columns, one cell per lesson.
python3 "$ROOT/scripts/exercise.py" table >"$T/table.md" || fail "table exited $?"
cols=$(ls "$ROOT"/docs/results/grades/*.json 2>/dev/null | wc -l)
head -n 1 "$T/table.md" | grep -o "reference, " | wc -l | grep -qx "$cols" || fail "table header has not $cols grade column(s)"
echo "exercise_grades: ok"
