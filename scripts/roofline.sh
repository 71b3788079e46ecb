#!/usr/bin/env bash
# scripts/roofline.sh - every lesson's kernels on this GPU's measured roofline, as one SVG.
#
#   scripts/roofline.sh [RESULTS_DIR] [--out=FILE]
#
# Reads the JSON reports in RESULTS_DIR (default build/results, written by
# scripts/run_all.sh or by a lesson's --json): lesson 17's report gives the roofs
# (its metrics "memory roof ..." in GB/s and "FP32 roof ..." in GFLOP/s, and the
# bounds they are measured against: the DRAM probe and the FP32 peak from the
# clock, drawn dashed); any report's metric or bound named "BF16 ... roof/peak"
# (or FP16, TF32, FP8) in GFLOP/s is drawn as a tensor-core roof (lessons 19-20).
# Every entry of every report's "work" list (Report::work: flops, bytes, ms) is
# a point. A lesson's default-size report (NN_name.json) is used where it exists,
# else its --quick report (NN_name.quick.json, marked "quick" in the legend).
# Writes FILE (default RESULTS_DIR/roofline.svg): log-log axes, intensity in
# flop/byte across, GFLOP/s up.
# Exit: 0 written, 1 no lesson 17 report (run lesson 17 first), 2 bad usage.
set -uo pipefail
DIR=""; OUT=""
for arg in "$@"; do
  case "$arg" in
    -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    --out=*) OUT=${arg#--out=}; [ -n "$OUT" ] || { echo "roofline.sh: --out needs a file name" >&2; exit 2; } ;;
    -*) echo "roofline.sh: unknown option '$arg' (usage: scripts/roofline.sh [RESULTS_DIR] [--out=FILE])" >&2; exit 2 ;;
    *) [ -z "$DIR" ] || { echo "roofline.sh: one results folder only ('$DIR' and '$arg')" >&2; exit 2; }
       DIR=$arg ;;
  esac
done
if [ -z "$DIR" ]; then DIR="$(cd "$(dirname "$0")/.." && pwd)/build/results"; fi
[ -d "$DIR" ] || { echo "roofline.sh: no results folder '$DIR' (run scripts/run_all.sh, or name the folder)" >&2; exit 2; }
[ -n "$OUT" ] || OUT="$DIR/roofline.svg"
OUTDIR=$(dirname "$OUT")
[ -d "$OUTDIR" ] && [ -w "$OUTDIR" ] || { echo "roofline.sh: cannot write '$OUT' (folder '$OUTDIR' missing or read-only)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "roofline.sh: needs python3" >&2; exit 2; }

exec python3 - "$DIR" "$OUT" <<'PYTHON'
import glob, json, math, os, re, sys

results_dir, out_path = sys.argv[1], sys.argv[2]

def die(msg, code=1):
    print("roofline.sh: " + msg, file=sys.stderr)
    sys.exit(code)

# One report per lesson: NN_name.json, else NN_name.quick.json.
reports = {}
for path in sorted(glob.glob(os.path.join(results_dir, "[0-9][0-9]_*.json"))):
    base = os.path.basename(path)[:-5]
    lesson, _, mode = base.partition(".")
    if mode not in ("", "quick"):
        continue
    if lesson in reports and reports[lesson][1] == "":
        continue
    try:
        with open(path) as f:
            reports[lesson] = (json.load(f), mode)
    except (OSError, ValueError) as e:
        die("cannot read %s: %s" % (path, e), 2)

l17 = [k for k in reports if k.startswith("17_")]
if not l17:
    die("no lesson 17 report in %s: run ./build/bin/fusion_roofline --json=%s/17_fusion_roofline.json "
        "(or scripts/run_all.sh --only='17_*') first" % (results_dir, results_dir))
roof_report, roof_mode = reports[l17[0]]

def named(report, key):
    return [m for m in report.get(key) or [] if isinstance(m, dict) and isinstance(m.get("value"), (int, float))]

def first(report, key, prefix):
    for m in named(report, key):
        if m.get("name", "").startswith(prefix):
            return m["value"]
    return None

slopes, roofs = [], []  # (value, color, dashed, label)
mem = first(roof_report, "metrics", "memory roof")
fp32 = first(roof_report, "metrics", "FP32 roof")
note = " (quick run: data in L2)" if roof_mode == "quick" else ""
if mem: slopes.append((mem, "#e15759", False, "memory roof, measured" + note))
if fp32: roofs.append((fp32, "#e15759", False, "FP32 roof, measured" + note))
dram = first(roof_report, "bounds", "DRAM bound")
peak = first(roof_report, "bounds", "FP32 peak")
if dram: slopes.append((dram, "#999999", True, "DRAM bound (probe)"))
if peak: roofs.append((peak, "#999999", True, "FP32 peak from the clock"))
if not (mem or dram):
    die("lesson 17's report has no memory roof (was the sweep run? --rung=0 or --rung=4)")
tensor = re.compile(r"\b(BF16|FP16|TF32|FP8)\b.*\b(roof|peak)\b", re.I)
seen = set()
for lesson, (report, mode) in sorted(reports.items()):
    for key in ("metrics", "bounds"):
        for m in named(report, key):
            name = m.get("name", "")
            if not tensor.search(name) or m.get("unit") not in ("GFLOP/s", "TFLOP/s") or m["value"] <= 0:
                continue
            value = m["value"] * (1000.0 if m["unit"] == "TFLOP/s" else 1.0)
            if (name, value) in seen:
                continue
            seen.add((name, value))
            measured = "peak" not in name.lower() and key == "metrics"
            roofs.append((value, "#76b7b2" if measured else "#bab0ac", not measured, "%s (lesson %s)" % (name, lesson[:2])))

palette = ["#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#9c755f", "#edc948", "#ff9da7", "#76b7b2", "#e15759", "#bab0ac"]
points, legend = [], []
for i, (lesson, (report, mode)) in enumerate(sorted(reports.items())):
    color = palette[i % len(palette)]
    count = 0
    for w in report.get("work") or []:
        x, y = w.get("intensity"), w.get("gflops")
        if isinstance(x, (int, float)) and isinstance(y, (int, float)) and x > 0 and y > 0:
            points.append((x, y, color, "%s: %s, %.4g flop/byte, %.4g GFLOP/s" % (lesson, w.get("name", ""), x, y)))
            count += 1
    if count:
        legend.append((color, "%s (%d point%s)%s" % (lesson, count, "" if count == 1 else "s", ", quick" if mode else "")))

# Axes: whole decades around every point, roof and ridge (as lessons/17_fusion_roofline/roofline_svg.h).
xs = [p[0] for p in points] + [r[0] / s[0] for r in roofs for s in slopes]
if not xs: xs = [0.01, 1000]
x_lo, x_hi = 10 ** math.floor(math.log10(min(xs))), 10 ** math.ceil(math.log10(max(xs)))
if x_hi <= x_lo: x_hi = x_lo * 10
ys = [p[1] for p in points] + [r[0] for r in roofs] + [s[0] * x_lo for s in slopes]
y_lo, y_hi = 10 ** math.floor(math.log10(min(ys))), 10 ** math.ceil(math.log10(max(ys)))
if y_hi <= y_lo: y_hi = y_lo * 10
y_lo = max(y_lo, y_hi / 1e8)
width, height = 960, 640
left, right, top = 80.0, 30.0, 50.0
legend_h = 18.0 * (len(roofs) + len(slopes) + len(legend)) + 10
bottom = 50 + legend_h
height = int(max(height, top + bottom + 360))
pw, ph = width - left - right, height - top - bottom
lx0, lx1, ly0, ly1 = map(math.log10, (x_lo, x_hi, y_lo, y_hi))
X = lambda v: left + pw * (math.log10(v) - lx0) / (lx1 - lx0)
Y = lambda v: top + ph * (1 - (math.log10(v) - ly0) / (ly1 - ly0))

def esc(t):
    return str(t).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")

def fmt(v):
    return "%.6g" % v

def line(x0, y0, x1, y1, color, dashed, cls="roof"):
    return '<line class="%s" x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="2"%s/>\n' % (
        cls, fmt(x0), fmt(y0), fmt(x1), fmt(y1), esc(color), ' stroke-dasharray="6 4"' if dashed else "")

device = (roof_report.get("device") or {}).get("name", "this GPU")
s = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">\n' % (width, height),
     '<rect width="100%" height="100%" fill="white"/>\n',
     '<text x="10" y="22" font-size="15" font-weight="bold">%s</text>\n' % esc("Roofline of %s: every lesson's kernels" % device),
     '<rect x="%s" y="%s" width="%s" height="%s" fill="#fafafa" stroke="#888888"/>\n' % tuple(map(fmt, (left, top, pw, ph)))]
e = lx0
while e <= lx1 + 1e-9:
    x = fmt(X(10 ** e))
    s.append('<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#dddddd"/>\n' % (x, fmt(top), x, fmt(top + ph)))
    s.append('<text x="%s" y="%s" text-anchor="middle">%s</text>\n' % (x, fmt(top + ph + 16), fmt(10 ** e)))
    e += 1
e = ly0
while e <= ly1 + 1e-9:
    y = fmt(Y(10 ** e))
    s.append('<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#dddddd"/>\n' % (fmt(left), y, fmt(left + pw), y))
    s.append('<text x="%s" y="%s" text-anchor="end" dy="4">%s</text>\n' % (fmt(left - 6), y, fmt(10 ** e)))
    e += 1
s.append('<text x="%s" y="%s" text-anchor="middle">arithmetic intensity (flop/byte)</text>\n' % (fmt(left + pw / 2), fmt(top + ph + 36)))
s.append('<text x="18" y="%s" text-anchor="middle" transform="rotate(-90 18 %s)">GFLOP/s</text>\n' % (fmt(top + ph / 2), fmt(top + ph / 2)))
solid_roof = max([r[0] for r in roofs if not r[2]] or [0])
solid_slope = max([l[0] for l in slopes if not l[2]] or [0])
for value, color, dashed, label in roofs:
    x0 = max(x_lo, value / solid_slope) if (not dashed and solid_slope > 0) else x_lo
    if y_lo <= value <= y_hi and x0 < x_hi:
        s.append(line(X(x0), Y(value), X(x_hi), Y(value), color, dashed))
for value, color, dashed, label in slopes:
    top_value = min(solid_roof, y_hi) if (not dashed and solid_roof > 0) else y_hi
    x0, x1 = max(x_lo, y_lo / value), min(x_hi, top_value / value)
    if x1 > x0:
        s.append(line(X(x0), Y(value * x0), X(x1), Y(value * x1), color, dashed))
drawn = 0
for x, y, color, tip in points:
    if x_lo <= x <= x_hi and y_lo <= y <= y_hi:
        s.append('<circle class="point" cx="%s" cy="%s" r="4.5" fill="%s" stroke="black" stroke-width="0.5"><title>%s</title></circle>\n'
                 % (fmt(X(x)), fmt(Y(y)), esc(color), esc(tip)))
        drawn += 1
ly = top + ph + 56
for value, color, dashed, label in slopes + roofs:
    unit = "GB/s" if (value, color, dashed, label) in slopes else "GFLOP/s"
    s.append(line(left, ly - 4, left + 28, ly - 4, color, dashed, "legend"))
    s.append('<text x="%s" y="%s">%s</text>\n' % (fmt(left + 36), fmt(ly), esc("%s (%.0f %s)" % (label, value, unit))))
    ly += 18
for color, label in legend:
    s.append('<circle cx="%s" cy="%s" r="4.5" fill="%s" stroke="black" stroke-width="0.5"/>\n' % (fmt(left + 14), fmt(ly - 4), esc(color)))
    s.append('<text x="%s" y="%s">%s</text>\n' % (fmt(left + 36), fmt(ly), esc(label)))
    ly += 18
s.append("</svg>\n")
try:
    with open(out_path, "w") as f:
        f.write("".join(s))
except OSError as e:
    die("cannot write %s: %s" % (out_path, e), 2)
print("roofline.sh: %d points from %d report(s), %d roof line(s) -> %s" % (drawn, len(reports), len(roofs) + len(slopes), out_path))
PYTHON
