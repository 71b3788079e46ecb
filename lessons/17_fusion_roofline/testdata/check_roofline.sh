#!/usr/bin/env bash
# lessons/17_fusion_roofline/testdata/check_roofline.sh - the CTest of scripts/roofline.sh.
# Draws the fixture reports of this folder and checks the SVG: 7 points (lesson 17's default
# report, not its quick one: 3; lesson 00: 1, its null point skipped; lesson 13's quick report:
# 2; lesson 20: 1) and 6 roof lines (memory roof and DRAM bound, FP32 roof and peak, BF16 roof
# and peak). Then: no lesson 17 report -> exit 1; bad usage -> exit 2.
set -u
here=$(cd "$(dirname "$0")" && pwd)
script="$here/../../../scripts/roofline.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "check_roofline: $*"; exit 1; }

"$script" "$here" --out="$tmp/roofline.svg" || fail "roofline.sh failed on the fixture (exit $?)"
[ -s "$tmp/roofline.svg" ] || fail "no SVG written"
head -c 5 "$tmp/roofline.svg" | grep -q '<svg' || fail "the file is not an SVG"
tail -n 1 "$tmp/roofline.svg" | grep -q '</svg>' || fail "the SVG is not closed"
points=$(grep -o 'class="point"' "$tmp/roofline.svg" | wc -l)
roofs=$(grep -o 'class="roof"' "$tmp/roofline.svg" | wc -l)
[ "$points" = 7 ] || fail "expected 7 points, found $points"
[ "$roofs" = 6 ] || fail "expected 6 roof lines, found $roofs"
grep -q 'BF16 tensor roof' "$tmp/roofline.svg" || fail "the BF16 roof of lesson 20 is missing"

mkdir "$tmp/no17" && cp "$here/00_vector_add.json" "$tmp/no17/"
"$script" "$tmp/no17" --out="$tmp/x.svg" 2>"$tmp/err"; rc=$?
[ $rc = 1 ] || fail "without a lesson 17 report: expected exit 1, got $rc"
grep -q 'no lesson 17 report' "$tmp/err" || fail "without a lesson 17 report: no clear message"
for bad in "--bogus" "$here $here" "/nonexistent-dir" "$here --out=/nonexistent-dir/x.svg"; do
  # shellcheck disable=SC2086
  "$script" $bad >/dev/null 2>&1; rc=$?
  [ $rc = 2 ] || fail "bad usage '$bad': expected exit 2, got $rc"
done
echo "check_roofline: $points points, $roofs roof lines; bad usage exits 2; no lesson 17 report exits 1"
