#!/usr/bin/env bash
# lessons/17_fusion_roofline/testdata/check_roofline.sh - the CTest of scripts/roofline.sh.
# Draws the fixture reports of this folder and checks the SVG: 7 points (lesson 17's default
# report, not its quick one: 3; lesson 00: 1, its null point skipped; lesson 13's quick report:
# 2; lesson 20: 1) and 6 roof lines (memory roof and DRAM bound, FP32 roof and peak, BF16 roof
# and peak). Then one slope per read/write mix: two reports with the 1:0 DRAM bound give one
# slope (the higher), a 1:0 stream above the 1:1 roof is under it, and only a point above
# every slope is listed. Then: no lesson 17 report -> exit 1; bad usage -> exit 2.
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

mkdir "$tmp/mixes" && cp "$here/17_fusion_roofline.json" "$tmp/mixes/"
mix_report() {  # FILE 1:0-BOUND-GB/s POINT-GB/s: a 1:0 DRAM bound and one read stream at 1/4 flop/byte
  printf '{"roofs":[{"name":"DRAM bound, 1 read : 0 writes (best burst)","value":%s,"unit":"GB/s",' "$2" >"$1"
  printf '"kind":"memory","measured":false}],"work":[{"name":"read %s","intensity":0.25,' "$3" >>"$1"
  printf '"gflops":%s,"gbps":%s}]}\n' "$(($3 / 4))" "$3" >>"$1"
}
mix_report "$tmp/mixes/14_reduction.json" 3100 3084
mix_report "$tmp/mixes/16_histogram.json" 3150 3200
"$script" "$tmp/mixes" --out="$tmp/mixes.svg" >"$tmp/mixes.out" || fail "roofline.sh failed on two 1:0 reports"
mix_roofs=$(grep -o 'class="roof"' "$tmp/mixes.svg" | wc -l)
[ "$mix_roofs" = 5 ] || fail "1:1 and 1:0 bounds: expected 5 roof lines (one 1:0 slope), found $mix_roofs"
grep -q '1 read : 0 writes (best burst) (lesson 16, highest of 2 reports) (3150 GB/s)' "$tmp/mixes.svg" ||
  fail "the 1:0 slope is not the higher of the two reports"
[ "$(grep -c 'above every memory slope' "$tmp/mixes.out")" = 1 ] || fail "expected one point above every slope listed"
grep -q 'above every memory slope: 16_histogram: read 3200' "$tmp/mixes.out" ||
  fail "the 3200 GB/s point is not the one listed above every slope"

mkdir "$tmp/no17" && cp "$here/00_vector_add.json" "$tmp/no17/"
"$script" "$tmp/no17" --out="$tmp/x.svg" 2>"$tmp/err"; rc=$?
[ $rc = 1 ] || fail "without a lesson 17 report: expected exit 1, got $rc"
grep -q 'no lesson 17 report' "$tmp/err" || fail "without a lesson 17 report: no clear message"
for bad in "--bogus" "$here $here" "/nonexistent-dir" "$here --out=/nonexistent-dir/x.svg"; do
  # shellcheck disable=SC2086
  "$script" $bad >/dev/null 2>&1; rc=$?
  [ $rc = 2 ] || fail "bad usage '$bad': expected exit 2, got $rc"
done
echo "check_roofline: $points points, $roofs roof lines; one slope per mix; bad usage exits 2; no lesson 17 report exits 1"
