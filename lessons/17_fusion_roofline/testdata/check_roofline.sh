#!/usr/bin/env bash
# lessons/17_fusion_roofline/testdata/check_roofline.sh - the CTest of scripts/roofline.sh.
# Draws the fixture reports of this folder and checks the SVG: 7 points (lesson 17's default
# report, not its quick one: 3; lesson 00: 1, its null point skipped; lesson 13's quick report:
# 2; lesson 20: 1) and 8 roof lines (memory roof and the DRAM bounds of lesson 17's three mixes,
# 1:0, 1:1 and 2:1, FP32 roof and peak, BF16 roof and peak), each DRAM bound in its own color.
# Then one slope per read/write mix: three reports with the 1:0 DRAM bound give one slope (the
# highest), a 1:0 stream and a 2:1 stream above the 1:1 bound are under their own slopes, and
# only a point above every slope is listed. Then: no lesson 17 report -> exit 1; bad usage -> exit 2.
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
[ "$roofs" = 8 ] || fail "expected 8 roof lines, found $roofs"
grep -q 'BF16 tensor roof' "$tmp/roofline.svg" || fail "the BF16 roof of lesson 20 is missing"
for mix in '1 read : 0 writes' '1 read : 1 write' '2 reads : 1 write'; do
  grep -q "DRAM bound, $mix (best burst) (lesson 17)" "$tmp/roofline.svg" || fail "no $mix slope of lesson 17"
done
mix_colors=$(grep 'class="roof"' "$tmp/roofline.svg" | grep 'stroke-dasharray' | grep -o 'stroke="#[0-9a-f]*"' | sort -u | wc -l)
[ "$mix_colors" -ge 3 ] || fail "the dashed slopes and roofs share colors: $mix_colors colors"

mkdir "$tmp/mixes" && cp "$here/17_fusion_roofline.json" "$tmp/mixes/"
mix_report() {  # FILE 1:0-BOUND-GB/s POINT-GB/s: a 1:0 DRAM bound and one read stream at 1/4 flop/byte
  printf '{"roofs":[{"name":"DRAM bound, 1 read : 0 writes (best burst)","value":%s,"unit":"GB/s",' "$2" >"$1"
  printf '"kind":"memory","measured":false}],"work":[{"name":"read %s","intensity":0.25,' "$3" >>"$1"
  printf '"gflops":%s,"gbps":%s}]}\n' "$(($3 / 4))" "$3" >>"$1"
}
mix_report "$tmp/mixes/14_reduction.json" 3100 3084
mix_report "$tmp/mixes/16_histogram.json" 3180 3200
printf '{"work":[{"name":"add 3040","intensity":0.0833,"gflops":253,"gbps":3040}]}\n' >"$tmp/mixes/00_vector_add.json"
"$script" "$tmp/mixes" --out="$tmp/mixes.svg" >"$tmp/mixes.out" || fail "roofline.sh failed on three 1:0 reports"
mix_roofs=$(grep -o 'class="roof"' "$tmp/mixes.svg" | wc -l)
[ "$mix_roofs" = 6 ] || fail "lesson 17's roofs and two more 1:0 bounds: expected 6 roof lines, found $mix_roofs"
grep -q '1 read : 0 writes (best burst) (lesson 16, highest of 3 reports) (3180 GB/s)' "$tmp/mixes.svg" ||
  fail "the 1:0 slope is not the highest of the three reports"
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
