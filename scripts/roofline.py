#!/usr/bin/env python3
"""scripts/roofline.py - every lesson's kernels on this GPU's measured roofline, as one SVG.

  scripts/roofline.py [RESULTS_DIR] [--out=FILE]      (scripts/roofline.sh runs this)

Reads the JSON reports in RESULTS_DIR (default build/results, written by
scripts/run_all.sh or by a lesson's --json). The roofs are every report's
"roofs" (Report::bound and Report::metric with a lesson::Roof): kind "memory"
(GB/s) is a slope, kind "compute" (GFLOP/s or TFLOP/s) a flat top; a measured
roof (reached by the lesson's own kernels: lesson 17's sweep) is drawn solid,
a bound (a DRAM probe, a peak from the clock) dashed. One line per roof name:
a DRAM bound is named for its read/write mix, so each mix gets its own slope
in its own color (lesson 17 measures the 1:0, 1:1 and 2:1 mixes), and where
several reports carry the same roof the highest default-size one is drawn. Every entry of every report's "work" list (Report::work: flops, bytes,
ms) is a point; a point above every memory slope (its mix has no slope in
these reports, or its data sat in L2) is circled red and listed. A lesson's
default-size report (NN_name.json) is used where it exists, else its --quick
report (NN_name.quick.json, marked "quick" in the legend). Writes FILE (default
RESULTS_DIR/roofline.svg): log-log axes, intensity in flop/byte across, GFLOP/s up.

Exit: 0 written, 1 no memory roof in any report (run lesson 17 first), 2 bad usage.
"""
import glob
import json
import math
import os
import sys

POINT_COLORS = ["#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#9c755f", "#edc948", "#ff9da7", "#76b7b2",
                "#e15759", "#bab0ac"]
# One color a lesson: solid for the roofs its kernels reached, dashed grey for its compute bounds.
MEASURED_COLORS = ["#e15759", "#76b7b2", "#f28e2b", "#b07aa1"]
BOUND_COLORS = ["#999999", "#bab0ac", "#79706e", "#c9b2a6"]
# One color a DRAM bound (a read/write mix), dashed: the slopes of two mixes lie a few percent apart.
MIX_COLORS = ["#999999", "#8c6d31", "#6b6ecf", "#637939", "#843c39"]


def die(msg, code=1):
    print("roofline: " + msg, file=sys.stderr)
    sys.exit(code)


def parse_args(argv):
    results_dir, out = None, None
    for arg in argv:
        if arg in ("-h", "--help"):
            print(__doc__)
            sys.exit(0)
        if arg.startswith("--out="):
            out = arg[len("--out="):]
            if not out:
                die("--out needs a file name", 2)
        elif arg.startswith("-"):
            die("unknown option '%s' (usage: scripts/roofline.sh [RESULTS_DIR] [--out=FILE])" % arg, 2)
        elif results_dir is not None:
            die("one results folder only ('%s' and '%s')" % (results_dir, arg), 2)
        else:
            results_dir = arg
    if results_dir is None:
        results_dir = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "build", "results")
    if not os.path.isdir(results_dir):
        die("no results folder '%s' (run scripts/run_all.sh, or name the folder)" % results_dir, 2)
    out = out or os.path.join(results_dir, "roofline.svg")
    out_dir = os.path.dirname(os.path.abspath(out))
    if not (os.path.isdir(out_dir) and os.access(out_dir, os.W_OK)):
        die("cannot write '%s' (folder '%s' missing or read-only)" % (out, out_dir), 2)
    return results_dir, out


def read_reports(results_dir):
    """{lesson: (report, mode)}: NN_name.json (mode ""), else NN_name.quick.json (mode "quick")."""
    reports = {}
    for path in sorted(glob.glob(os.path.join(results_dir, "[0-9][0-9]_*.json"))):
        lesson, _, mode = os.path.basename(path)[:-5].partition(".")
        if mode not in ("", "quick") or (lesson in reports and reports[lesson][1] == ""):
            continue
        try:
            with open(path) as f:
                reports[lesson] = (json.load(f), mode)
        except (OSError, ValueError) as e:
            die("cannot read %s: %s" % (path, e), 2)
    return reports


def number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0


def read_roofs(reports):
    """(slopes, roofs, device): each line (value, color, dashed, label), slopes in GB/s, roofs in
    GFLOP/s; the device of the report that gave the first memory roof.

    One line per kind and name. A memory bound's name states its read/write mix (lesson 17's
    1:0, 1:1 and 2:1), so each mix is one slope, in a color of its own, and a 1:0 stream is not
    held against the 1:1 roof alone. Several reports with one name (lessons that probe the same mix) give one
    line: a default-size report before a quick one (whose data may sit in L2), then the highest
    value, since a kernel of that mix may reach the best of the probes."""
    best, counts = {}, {}  # (kind, name) -> (rank, position, lesson, value, measured, mode, device); -> reports
    for lesson, (report, mode) in sorted(reports.items()):
        for i, r in enumerate(report.get("roofs") or []):
            kind, value, unit = r.get("kind"), r.get("value"), r.get("unit")
            if kind not in ("memory", "compute") or not number(value):
                continue
            if kind == "compute":
                if unit not in ("GFLOP/s", "TFLOP/s"):
                    continue
                value *= 1000.0 if unit == "TFLOP/s" else 1.0
            elif unit != "GB/s":
                continue
            key = (kind, r.get("name", "?"))
            counts[key] = counts.get(key, 0) + 1
            rank = (mode == "", value)  # a default-size report first, then the highest value
            if key not in best or rank > best[key][0]:
                best[key] = (rank, (lesson, i), lesson, value, r.get("measured") is True, mode,
                             (report.get("device") or {}).get("name"))
    slopes, roofs, device = [], [], None
    colors = {True: {}, False: {}}  # measured or not: lesson -> color
    mixes = 0  # DRAM bounds drawn so far
    for (kind, name), (_, _, lesson, value, measured, mode, dev) in sorted(best.items(), key=lambda kv: kv[1][1]):
        count = counts[(kind, name)]
        if kind == "memory" and not measured:
            color, mixes = MIX_COLORS[mixes % len(MIX_COLORS)], mixes + 1
        else:
            palette = MEASURED_COLORS if measured else BOUND_COLORS
            color = colors[measured].setdefault(lesson, palette[len(colors[measured]) % len(palette)])
        label = "%s (lesson %s%s%s)" % (name, lesson[:2], ", highest of %d reports" % count if count > 1 else "",
                                       ", quick run: data in L2" if mode else "")
        (slopes if kind == "memory" else roofs).append((value, color, not measured, label))
        if kind == "memory" and device is None:
            device = dev
    return slopes, roofs, device


def read_points(reports):
    """(points, legend): each point (intensity, GFLOP/s, GB/s, color, tooltip), one legend entry a lesson."""
    points, legend = [], []
    for i, (lesson, (report, mode)) in enumerate(sorted(reports.items())):
        color = POINT_COLORS[i % len(POINT_COLORS)]
        count = 0
        for w in report.get("work") or []:
            x, y = w.get("intensity"), w.get("gflops")
            if number(x) and number(y):
                gbps = w.get("gbps") if number(w.get("gbps")) else y / x
                points.append((x, y, gbps, color,
                               "%s: %s, %.4g flop/byte, %.4g GFLOP/s" % (lesson, w.get("name", ""), x, y)))
                count += 1
        if count:
            legend.append((color, "%s (%d point%s)%s" % (lesson, count, "" if count == 1 else "s",
                                                         ", quick" if mode else "")))
    return points, legend


ABOVE_NOTE = " (above every memory slope drawn: no roof of its read/write mix in these reports, or data in L2)"


def above_slopes(gbps, slopes):
    """True where a point moves its bytes faster than every memory slope: no slope drawn bounds it.
    The margin is the JSON's rounding (6 significant digits)."""
    return bool(slopes) and gbps > max(value for value, _, _, _ in slopes) * (1 + 1e-5)


def esc(t):
    return str(t).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def fmt(v):
    return "%.6g" % v


def line(x0, y0, x1, y1, color, dashed, cls="roof"):
    return '<line class="%s" x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="2"%s/>\n' % (
        cls, fmt(x0), fmt(y0), fmt(x1), fmt(y1), esc(color), ' stroke-dasharray="6 4"' if dashed else "")


def decades(values):
    """Whole decades around the values (as lessons/17_fusion_roofline/roofline_svg.h)."""
    lo, hi = 10 ** math.floor(math.log10(min(values))), 10 ** math.ceil(math.log10(max(values)))
    return lo, (hi if hi > lo else lo * 10)


def svg(device, slopes, roofs, points, legend):
    """The SVG text and the number of points drawn."""
    x_lo, x_hi = decades([p[0] for p in points] + [r[0] / s[0] for r in roofs for s in slopes] or [0.01, 1000])
    y_lo, y_hi = decades([p[1] for p in points] + [r[0] for r in roofs] + [s[0] * x_lo for s in slopes])
    y_lo = max(y_lo, y_hi / 1e8)
    width, left, right, top = 960, 80.0, 30.0, 50.0
    bottom = 50 + 18.0 * (len(roofs) + len(slopes) + len(legend)) + 10
    height = int(max(640, top + bottom + 360))
    pw, ph = width - left - right, height - top - bottom
    lx0, lx1, ly0, ly1 = map(math.log10, (x_lo, x_hi, y_lo, y_hi))

    def X(v):
        return left + pw * (math.log10(v) - lx0) / (lx1 - lx0)

    def Y(v):
        return top + ph * (1 - (math.log10(v) - ly0) / (ly1 - ly0))

    s = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">\n'
         % (width, height),
         '<rect width="100%" height="100%" fill="white"/>\n',
         '<text x="10" y="22" font-size="15" font-weight="bold">%s</text>\n'
         % esc("Roofline of %s: every lesson's kernels" % device),
         '<rect x="%s" y="%s" width="%s" height="%s" fill="#fafafa" stroke="#888888"/>\n'
         % tuple(map(fmt, (left, top, pw, ph)))]
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
    s.append('<text x="%s" y="%s" text-anchor="middle">arithmetic intensity (flop/byte)</text>\n'
             % (fmt(left + pw / 2), fmt(top + ph + 36)))
    s.append('<text x="18" y="%s" text-anchor="middle" transform="rotate(-90 18 %s)">GFLOP/s</text>\n'
             % (fmt(top + ph / 2), fmt(top + ph / 2)))
    # A measured roof starts where the fastest measured slope meets it, and that slope ends there.
    solid_roof = max([r[0] for r in roofs if not r[2]] or [0])
    solid_slope = max([m[0] for m in slopes if not m[2]] or [0])
    for value, color, dashed, _ in roofs:
        x0 = max(x_lo, value / solid_slope) if (not dashed and solid_slope > 0) else x_lo
        if y_lo <= value <= y_hi and x0 < x_hi:
            s.append(line(X(x0), Y(value), X(x_hi), Y(value), color, dashed))
    for value, color, dashed, _ in slopes:
        top_value = min(solid_roof, y_hi) if (not dashed and solid_roof > 0) else y_hi
        x0, x1 = max(x_lo, y_lo / value), min(x_hi, top_value / value)
        if x1 > x0:
            s.append(line(X(x0), Y(value * x0), X(x1), Y(value * x1), color, dashed))
    drawn = 0
    for x, y, gbps, color, tip in points:
        if x_lo <= x <= x_hi and y_lo <= y <= y_hi:
            above = above_slopes(gbps, slopes)
            s.append('<circle class="point" cx="%s" cy="%s" r="4.5" fill="%s" stroke="%s" stroke-width="%s">'
                     '<title>%s</title></circle>\n'
                     % (fmt(X(x)), fmt(Y(y)), esc(color), "#d62728" if above else "black", "2" if above else "0.5",
                        esc(tip + (ABOVE_NOTE if above else ""))))
            drawn += 1
    ly = top + ph + 56
    for lines, unit in ((slopes, "GB/s"), (roofs, "GFLOP/s")):
        for value, color, dashed, label in lines:
            s.append(line(left, ly - 4, left + 28, ly - 4, color, dashed, "legend"))
            s.append('<text x="%s" y="%s">%s</text>\n' % (fmt(left + 36), fmt(ly), esc("%s (%.0f %s)" % (label, value, unit))))
            ly += 18
    for color, label in legend:
        s.append('<circle cx="%s" cy="%s" r="4.5" fill="%s" stroke="black" stroke-width="0.5"/>\n'
                 % (fmt(left + 14), fmt(ly - 4), esc(color)))
        s.append('<text x="%s" y="%s">%s</text>\n' % (fmt(left + 36), fmt(ly), esc(label)))
        ly += 18
    s.append("</svg>\n")
    return "".join(s), drawn


def main(argv):
    results_dir, out = parse_args(argv[1:])
    reports = read_reports(results_dir)
    slopes, roofs, device = read_roofs(reports)
    if not slopes:
        if not any(lesson.startswith("17_") for lesson in reports):
            die("no lesson 17 report in %s: run ./build/bin/fusion_roofline --json=%s/17_fusion_roofline.json "
                "(or scripts/run_all.sh --only='17_*') first" % (results_dir, results_dir))
        die("no memory roof in the reports of %s: lesson 17 measures it in its sweep (--rung=0 or --rung=4)"
            % results_dir)
    points, legend = read_points(reports)
    text, drawn = svg(device or "this GPU", slopes, roofs, points, legend)
    try:
        with open(out, "w") as f:
            f.write(text)
    except OSError as e:
        die("cannot write %s: %s" % (out, e), 2)
    print("roofline: %d points from %d report(s), %d roof line(s) -> %s"
          % (drawn, len(reports), len(roofs) + len(slopes), out))
    for _, _, gbps, _, tip in points:
        if above_slopes(gbps, slopes):
            print("roofline: above every memory slope: " + tip + ABOVE_NOTE)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
