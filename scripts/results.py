#!/usr/bin/env python3
"""scripts/results.py - results tables from the runs' JSON, never typed by hand.

  scripts/results.py collect RESULTS_DIR OUT.json [--commit=SHA]
      Folds one machine's `scripts/run_all.sh` output (RESULTS_DIR = build/results:
      run-full.json, seconds-full.tsv and every lesson's NN_name.json) into one
      summary file, e.g. docs/results/h100.json. Commit that file. --commit names
      the commit the run built (the tables print it beside the date).

  scripts/results.py readme [README.md] [SUMMARY.json ...]
      Rewrites the table between the markers <!-- results:begin --> and
      <!-- results:end --> of README.md from the summaries (default: every
      run summary in docs/results/*.json), one column per GPU, device and date in the header.

  scripts/results.py check [README.md] [SUMMARY.json ...]
      Exits 1 when the README table is not what `readme` would write (CTest).

  scripts/results.py lesson NN_name [SUMMARY.json ...]
      Prints one lesson's variants and metrics, one column per GPU, as Markdown
      tables for its handout's "What to observe". The first line is the block's
      header, naming the command; scripts/check_numbers.py checks the handouts'
      blocks against it.

  scripts/results.py verdict [--log=LOG] REPORT.json
      One run of a lesson, read from its --json report, for scripts/run_all.sh
      and scripts/check_perf.sh: one tab-separated line per fact,
        result   PASS, FAIL or SKIP (or ERROR, bad input, read from LOG)
        reason   why it failed or skipped (the RESULT line's parentheses)
        metric   the key result
        against  where it stands: "97.1% of DRAM bound", "1.02x cuBLAS"
        missed   target: <name>: <value> (needs >= <minimum>), MISSED
        warning  WARNING: <text>
      (lines with nothing to say left out; "missed" only at the default size,
      where targets are graded). A run that wrote no report (it stopped on a
      failed CUDA call, found no GPU, or has no image for it) is read from the
      last RESULT line of LOG. Exit 0: PASS, every target met, no WARNING;
      1: FAIL or ERROR, or a PASS that missed a target or warned; 77: SKIP;
      2: neither a report nor a RESULT line.

Exit codes: 0 done, 1 check found a difference, 2 bad usage or unreadable input.
"""
import glob
import json
import os
import re
import sys

import generated_block  # scripts/generated_block.py

BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"


def die(msg):
    print("results.py: " + msg, file=sys.stderr)
    sys.exit(2)


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        die("cannot read %s: %s" % (path, e))


def lesson_entry(report, seconds=None):
    """What a summary keeps of one lesson's --json report."""
    return {
        "result": report.get("result"),
        "seconds": seconds,
        "key_result": report.get("key_result"),
        "targets": report.get("targets", []),
        "warnings": report.get("warnings", []),
        "bounds": report.get("bounds", []),
        "yardsticks": report.get("yardsticks", []),
        "variants": report.get("variants", []),
        "metrics": report.get("metrics", []),
        "checks": (report.get("verification") or {}).get("checks", []),
        "device": report.get("device"),
    }


def collect(results_dir, out_path, commit=None):
    run = load(os.path.join(results_dir, "run-full.json"))
    seconds = {}
    tsv = os.path.join(results_dir, "seconds-full.tsv")
    if os.path.exists(tsv):
        for line in open(tsv):
            parts = line.rstrip("\n").split("\t")
            if len(parts) == 2:
                seconds[parts[0]] = float(parts[1])
    lessons = {}
    for path in sorted(glob.glob(os.path.join(results_dir, "[0-9][0-9]_*.json"))):
        name = os.path.basename(path)[:-5]
        if "." in name:  # NN_name.quick.json and the like: not the default-size run
            continue
        lessons[name] = lesson_entry(load(path), seconds.get(name))
    if not lessons:
        die("no lesson JSON in " + results_dir)
    summary = dict(run)
    summary["total_seconds"] = round(sum(v for v in seconds.values()), 1)
    if commit:
        summary["commit"] = commit
    summary["lessons"] = lessons
    with open(out_path, "w") as f:
        json.dump(summary, f, indent=1, sort_keys=True)
        f.write("\n")
    print("results.py: %d lessons from %s -> %s" % (len(lessons), results_dir, out_path))


def verdict(report_path, log_path):
    """The verdict of one run as (exit code, [(tag, text)]); see `verdict` in the usage."""
    facts, report = [], None
    try:
        with open(report_path) as f:
            report = json.load(f)
    except (OSError, ValueError):  # none, or cut short: the log's RESULT line says what happened
        pass
    if isinstance(report, dict):
        result = report.get("result", "FAIL")
        facts.append(("result", result))
        facts.append(("reason", report.get("skip_reason") or report.get("fail_reason") or ""))
        key = report.get("key_result") or {}
        facts += [("metric", key.get("metric", "")), ("against", key.get("against_text", ""))]
        if report.get("default_size"):
            facts += [("missed", "target: %s, MISSED" % t.get("text", t.get("name")))
                      for t in report.get("targets", []) if not t.get("met")]
        facts += [("warning", "WARNING: " + w) for w in report.get("warnings", [])]
    else:
        last = None
        if log_path and os.path.exists(log_path):
            for line in open(log_path, errors="replace"):
                m = re.match(r"RESULT: (PASS|FAIL|SKIP|ERROR)(?: \((.*)\))?$", line.rstrip("\n"))
                last = m or last
        if not last:
            return 2, [("result", "FAIL"), ("reason", "no JSON report and no RESULT line")]
        facts += [("result", last.group(1)), ("reason", last.group(2) or "")]
    result = facts[0][1]
    clean = not any(tag in ("missed", "warning") for tag, _ in facts)
    code = 77 if result == "SKIP" else 0 if result == "PASS" and clean else 1
    # One fact a line: a tab or a line break inside a text would split it.
    return code, [(tag, " ".join(text.split())) for tag, text in facts if text]


def need_text(t):
    if t.get("unit") == "%":
        return ">= %.0f%%" % (100 * t["minimum"])
    return ">= %.2fx" % t["minimum"]


def targets_text(name, summaries):
    """'>= 90%: met on H100, met on H200' for each target of the lesson."""
    per_gpu = []
    for s in summaries:
        lesson = s["lessons"].get(name)
        per_gpu.append((short_label(s), lesson.get("targets", []) if lesson else []))
    count = max(len(t) for _, t in per_gpu) if per_gpu else 0
    out = []
    for i in range(count):
        need, verdicts = "", []
        for label, targets in per_gpu:
            if i < len(targets):
                need = need_text(targets[i])
                verdicts.append(("met" if targets[i].get("met") else "**MISSED**") + " on " + label)
        out.append(need + ": " + ", ".join(verdicts))
    return "; ".join(out) if out else "-"


def short_label(summary):
    label = gpu_label(summary).replace("NVIDIA ", "")
    return label.split()[0] if label else "?"


def gpu_label(summary):
    gpu = summary.get("gpu", "?")
    # "GPU 0: NVIDIA H100 80GB HBM3 (cc 9.0, ...)" -> "NVIDIA H100 80GB HBM3"
    if ": " in gpu:
        gpu = gpu.split(": ", 1)[1]
    return gpu.split(" (")[0]


def when(s):
    """The run's date, and its commit where the summary names one."""
    return s.get("date", "?") + (", commit %s" % s["commit"][:7] if s.get("commit") else "")


def table(summaries):
    names = sorted({n for s in summaries for n in s["lessons"]})
    lines = []
    for s in summaries:
        lines.append("- **%s**: driver %s, CUDA %s, %s; the lessons' default-size runs took %.0f s in all (`scripts/run_all.sh`; build, fault checks and the run_all bookkeeping not counted)."
                     % (gpu_label(s), s.get("driver", "?"), s.get("cuda", "?"), when(s),
                        s.get("total_seconds", 0)))
    lines.append("")
    head = "| lesson |"
    rule = "|---|"
    for s in summaries:
        head += " %s: key result | against |" % short_label(s)
        rule += "---|---|"
    head += " targets |"
    rule += "---|"
    lines += [head, rule]
    for n in names:
        row = "| %s |" % n.replace("_", " ", 1)
        for s in summaries:
            lesson = s["lessons"].get(n)
            if not lesson:
                row += " (not run) | |"
                continue
            key = lesson.get("key_result") or {}
            metric = key.get("metric", "")
            if lesson.get("result") != "PASS":
                metric = "**%s** %s" % (lesson.get("result"), metric)
            if lesson.get("warnings"):
                metric += " **WARNING**"
            row += " %s | %s |" % (metric.replace("|", "/"), key.get("against_text", ""))
        row += " %s |" % targets_text(n, summaries)
        lines.append(row)
    return "\n".join(lines)


def summaries_from(args):
    if args:
        return [load(p) for p in args]
    # Run summaries only (collect copies run_all's "mode"); docs/results/portable.json is another
    # kind of summary (scripts/portability.py).
    summaries = [s for s in (load(p) for p in sorted(glob.glob("docs/results/*.json"))) if "mode" in s]
    if not summaries:
        die("no summaries given and none in docs/results/")
    return summaries


def render(readme, summaries):
    note = "<!-- generated by scripts/results.py readme from docs/results/*.json: do not edit by hand -->"
    try:
        return generated_block.replace_between(readme, BEGIN, END, note + "\n\n" + table(summaries) + "\n")
    except ValueError as e:
        die(str(e))


def fmt(v, digits=4):
    if v is None:
        return "-"
    if isinstance(v, float):
        return "%.*g" % (digits, v)
    return str(v)


def lesson_header(name, paths):
    """The first line of `lesson`'s output: the command that writes the block."""
    return "<!-- generated by scripts/results.py lesson %s %s -->" % (
        name, " ".join(paths) if paths else "from docs/results/*.json")


def lesson_tables(name, summaries, paths=()):
    have = [s for s in summaries if name in s["lessons"]]
    if not have:
        die("no summary has lesson %s" % name)
    out = [lesson_header(name, paths), ""]
    out += ["- **%s**: driver %s, CUDA %s, %s." % (gpu_label(s), s.get("driver", "?"), s.get("cuda", "?"), when(s))
            for s in have]
    out.append("")
    head, rule = "| variant |", "|---|"
    for s in have:
        head += " %s: ms | rate | against |" % short_label(s)
        rule += "---:|---:|---|"
    out += [head, rule]
    names = []
    for s in have:
        for v in s["lessons"][name].get("variants", []):
            if v["name"] not in names:
                names.append(v["name"])
    for n in names:
        row = "| %s |" % n.replace("|", "/")
        for s in have:
            v = next((x for x in s["lessons"][name].get("variants", []) if x["name"] == n), None)
            if not v:
                row += " - | - | - |"
                continue
            row += " %s | %s %s | %s |" % (fmt(v.get("ms")), fmt(v.get("rate")), v.get("unit", ""),
                                          v.get("against_text", ""))
        out.append(row)
    metrics = []
    for s in have:
        for m in s["lessons"][name].get("metrics", []):
            if m["name"] not in metrics:
                metrics.append(m["name"])
    if metrics:
        out += ["", "| metric |" + "".join(" %s |" % short_label(s) for s in have),
                "|---|" + "---:|" * len(have)]
        for n in metrics:
            row = "| %s |" % n.replace("|", "/")
            for s in have:
                m = next((x for x in s["lessons"][name].get("metrics", []) if x["name"] == n), None)
                row += " %s |" % ("-" if not m else "%s %s" % (fmt(m.get("value")), m.get("unit", "")))
            out.append(row)
    return "\n".join(out)


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(argv) >= 2 else 2
    cmd, args = argv[1], argv[2:]
    if cmd == "verdict":
        log = None
        if args and args[0].startswith("--log="):
            log, args = args[0][len("--log="):], args[1:]
        if len(args) != 1:
            die("usage: results.py verdict [--log=LOG] REPORT.json")
        code, facts = verdict(args[0], log)
        for tag, text in facts:
            print("%s\t%s" % (tag, text))
        return code
    if cmd == "lesson":
        if not args:
            die("usage: results.py lesson NN_name [SUMMARY.json ...]")
        print(lesson_tables(args[0], summaries_from(args[1:]), args[1:]))
        return 0
    if cmd == "collect":
        commits = [a for a in args if a.startswith("--commit=")]
        rest = [a for a in args if not a.startswith("--commit=")]
        commit = commits[-1].split("=", 1)[1] if commits else None
        if len(rest) != 2 or (commits and not re.fullmatch(r"[0-9a-f]{7,40}", commit or "")):
            die("usage: results.py collect RESULTS_DIR OUT.json [--commit=SHA]")
        collect(rest[0], rest[1], commit)
        return 0
    if cmd in ("readme", "check"):
        readme = "README.md"
        if args and args[0].endswith(".md"):
            readme, args = args[0], args[1:]
        old, new = render(readme, summaries_from(args))
        if cmd == "check":
            if old != new:
                print("results.py: the table in %s is not the one the summaries give; run scripts/results.py readme"
                      % readme)
                return 1
            print("results.py: %s table matches the summaries" % readme)
            return 0
        with open(readme, "w") as f:
            f.write(new)
        print("results.py: wrote the results table of " + readme)
        return 0
    die("unknown command '%s' (collect, readme, check, lesson, verdict)" % cmd)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
