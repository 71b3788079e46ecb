#!/usr/bin/env python3
"""scripts/lessons.py - every lesson's facts, read from its manifest lessons/NN_name/lesson.json.

A lesson is a folder lessons/NN_name/ with a lesson.json and a main.cu. The manifest is one JSON
object; lessons/CMakeLists.txt reads it for the build and the tests, the scripts read it here:

  "title"        its short name (the table of docs/README.md)                       required
  "executable"   the program: the folder's name without its number                  required
  "summary"      what it teaches, in one line (the table of the top README.md)      required
  "teaches"      what it teaches, in more words (the table of docs/README.md)        required
  "builds_on"    the lessons it builds on, by number ("05"); [] for none            required
  "hours"        the time to read the handout, run the lesson, do two exercises      required
  "libraries"    CMake targets it links besides the CUDA runtime ("CUDA::cublas")
  "bad_args"     command lines that must exit 2, one entry each (flags separated      required
                 by spaces): the lesson's own flags out of range, not numbers, ...
  "awkward"      command lines that must PASS: sizes of 1, sizes no tile divides, the
                 largest that runs in seconds (CTest NN_name.awkward.<i>, the grader)
  "focus"        flags that restrict a run to the part its exercises change (a --rung)
  "grade_size"   the size of the grader's timed runs, where the default takes longer
  "grade"        {"K": ["variant", ...]}: the report variants whose rate grades the
                 speed of exercise K (without it: the key result; docs/teaching.md)
  "ungraded"     {"K": "why"}: exercise K has no speed grade (its times are launch overhead)
  "difficulty"   the exercises': easy, medium or hard                                required
  "profile"      {"kernels": ["name", ...], "args": "flags", "skip": K}: the key kernels
                 scripts/profile.sh profiles (names are regular expressions, joined by |),
                 the lesson's flags besides --quick --repeat=1 (a --rung: the default), and
                 how many launches of the kernels to pass over first (default 0; a lesson
                 may check small shapes before the one worth profiling)
  "warn_spills"  why ptxas should warn when one of its kernels spills registers
  "sm90a"        which rungs exist only for sm_90a (the build makes sm_90a code for them)

  lessons.py list                 every lesson's folder name, in order
  lessons.py find LESSON          the folder of LESSON: a number (5, 05), a folder or an executable name
  lessons.py get LESSON FIELD     one field: a list one item a line, FIELD.KEY inside an object;
                                  nothing where an optional field is absent
  lessons.py table                the lesson tables of README.md and docs/README.md, as generated
  lessons.py write                rewrites those tables between their markers
  lessons.py check                every manifest well formed and both tables as generated
                                  (CTest lesson_manifests)
Exit codes: 0 done, 1 check found a problem, 2 bad usage or no such lesson.
"""
import json
import os
import re
import sys

import generated_block  # scripts/generated_block.py

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LESSONS = os.path.join(ROOT, "lessons")
TEMPLATE = "_template"

# field: (types, required, default)
FIELDS = {
    "title": (str, True, None),
    "executable": (str, True, None),
    "summary": (str, True, None),
    "teaches": (str, True, None),
    "builds_on": (list, True, None),
    "hours": ((int, float), True, None),
    "libraries": (list, False, []),
    "bad_args": (list, True, None),
    "awkward": (list, False, []),
    "focus": (str, False, ""),
    "grade_size": (str, False, ""),
    "grade": (dict, False, {}),
    "ungraded": (dict, False, {}),
    "difficulty": (str, True, None),
    "profile": (dict, False, None),
    "warn_spills": (str, False, ""),
    "sm90a": (str, False, ""),
}
DIFFICULTIES = ("easy", "medium", "hard")
CMAKE_FIELDS = ("executable", "libraries", "bad_args", "awkward", "focus", "grade_size", "warn_spills", "sm90a")

# The generated tables: one block per range of lessons, between these markers.
BEGIN = re.compile(r"^<!-- lessons (\d\d)-(\d\d): generated from lessons/\*/lesson\.json by scripts/lessons\.py "
                   r"write; do not edit -->$", re.M)
BEGIN_TEXT = "<!-- lessons %s-%s: generated from lessons/*/lesson.json by scripts/lessons.py write; do not edit -->"
END_TEXT = "<!-- end lessons %s-%s -->"
TABLES = {  # file: (header lines, row of one lesson)
    "README.md": (["| # | lesson | what it teaches |", "|---|---|---|"],
                  lambda n, m: "| %s | [%s](lessons/%s/README.md) | %s |" % (n[:2], m["executable"], n, m["summary"])),
    os.path.join("docs", "README.md"): (
        ["| # | lesson | teaches | builds on | time |",
         "|----|----------------------|------------------------------------------------------------|----------|-------|"],
        lambda n, m: "| %s | [%s](../lessons/%s/README.md) | %s | %s | %g h |" % (
            n[:2], m["title"], n, m["teaches"], ", ".join(m["builds_on"]) or "-", m["hours"])),
}


def die(msg, code=2):
    print("lessons.py: " + msg, file=sys.stderr)
    sys.exit(code)


def names():
    """Every lesson's folder name (NN_name, with a lesson.json and a main.cu), in order."""
    return sorted(d for d in os.listdir(LESSONS) if re.match(r"^\d\d_", d)
                  and os.path.isfile(os.path.join(LESSONS, d, "lesson.json"))
                  and os.path.isfile(os.path.join(LESSONS, d, "main.cu")))


_cache = {}


def read(name):
    """The manifest of lessons/<name>/ as it is in the file; raises ValueError when unreadable."""
    path = os.path.join(LESSONS, name, "lesson.json")
    try:
        with open(path, encoding="utf-8") as f:
            m = json.load(f)
    except (OSError, ValueError) as e:
        raise ValueError("%s: %s" % (os.path.relpath(path, ROOT), e))
    if not isinstance(m, dict):
        raise ValueError("%s: not a JSON object" % os.path.relpath(path, ROOT))
    return m


def manifest(name):
    """The manifest of lesson <name>, every optional field filled with its default."""
    if name not in _cache:
        try:
            m = read(name)
        except ValueError as e:
            die(str(e))
        for field, (_, _, default) in FIELDS.items():
            m.setdefault(field, default)
        _cache[name] = m
    return _cache[name]


def find(arg):
    """The folder name of a lesson given as a number (5, 05), a folder name or an executable name; None if none."""
    for n in names():
        if arg == n or arg == manifest(n)["executable"] or (re.fullmatch(r"\d{1,2}", arg) and int(arg) == int(n[:2])):
            return n
    return None


def problems_of(name):
    """What is wrong with one manifest (the template's too: its own rules aside)."""
    where = "lessons/%s/lesson.json" % name
    try:
        m = read(name)
    except ValueError as e:
        return [str(e)]
    out = []
    for field in m:
        if field not in FIELDS:
            out.append("%s: unknown field '%s' (fields: %s)" % (where, field, ", ".join(FIELDS)))
    for field, (types, required, _) in FIELDS.items():
        if field not in m:
            if required:
                out.append("%s: no '%s'" % (where, field))
            continue
        v = m[field]
        if not isinstance(v, types) or isinstance(v, bool):
            out.append("%s: '%s' has the wrong type (%s)" % (where, field, type(v).__name__))
            continue
        if isinstance(v, str) and not v.strip():
            out.append("%s: '%s' is empty" % (where, field))
        for s in v if isinstance(v, list) else []:
            if not isinstance(s, str) or not s.strip():
                out.append("%s: '%s' holds %r (non-empty strings only)" % (where, field, s))
        # CMake reads these into lists, where a ';' would split an entry in two.
        if field in CMAKE_FIELDS and ";" in json.dumps(v):
            out.append("%s: '%s' holds a ';', which CMake would read as two entries" % (where, field))
    if out:
        return out
    exe = m["executable"]
    if name != TEMPLATE:
        if exe != re.sub(r"^\d\d_", "", name):
            out.append("%s: executable '%s' is not the folder's name without its number ('%s'): the scripts "
                       "and the handouts find a program by that rule" % (where, exe, re.sub(r"^\d\d_", "", name)))
        for field in ("title", "summary", "teaches"):
            if "TEMPLATE" in m[field]:
                out.append("%s: '%s' still says TEMPLATE" % (where, field))
        if not m["bad_args"]:
            out.append("%s: no 'bad_args': every lesson has flags of its own that can be wrong" % where)
    for n in m["builds_on"]:
        if not isinstance(n, str) or not re.fullmatch(r"\d\d", n):
            out.append("%s: 'builds_on' holds %r, not a two-digit lesson number" % (where, n))
        elif name != TEMPLATE and not any(x.startswith(n + "_") for x in names()):
            out.append("%s: 'builds_on' names lesson %s, which does not exist" % (where, n))
    if m["difficulty"] not in DIFFICULTIES:
        out.append("%s: 'difficulty' is '%s', not one of %s" % (where, m["difficulty"], ", ".join(DIFFICULTIES)))
    for field in ("grade", "ungraded"):
        for k, v in m.get(field, {}).items():
            if not re.fullmatch(r"[1-9]\d*", k):
                out.append("%s: '%s' key '%s' is not an exercise number" % (where, field, k))
            ok = (isinstance(v, list) and v and all(isinstance(x, str) and x.strip() for x in v)) if field == "grade" \
                else (isinstance(v, str) and v.strip())
            if not ok:
                out.append("%s: '%s' of exercise %s must be %s" % (
                    where, field, k, "a list of variant names" if field == "grade" else "the reason, a string"))
    both = set(m.get("grade", {})) & set(m.get("ungraded", {}))
    if both:
        out.append("%s: exercise(s) %s are both graded and ungraded" % (where, ", ".join(sorted(both))))
    p = m.get("profile")
    if p is not None:
        extra = set(p) - {"kernels", "args", "skip"}
        skip = p.get("skip", 0)
        if extra or not isinstance(p.get("kernels"), list) or not p["kernels"] or \
                not all(isinstance(k, str) and k for k in p["kernels"]) or not isinstance(p.get("args", ""), str) or \
                not isinstance(skip, int) or isinstance(skip, bool) or skip < 0:
            out.append("%s: 'profile' must be {\"kernels\": [\"name\", ...], \"args\": \"flags\", \"skip\": "
                       "launches >= 0}" % where)
    return out


# ---- the tables ----------------------------------------------------------------------------

def blocks(text):
    """(first, last) lesson numbers of every generated block of a file's text."""
    return [(int(m.group(1)), int(m.group(2))) for m in BEGIN.finditer(text)]


def render(rel):
    """(old text, new text, problems) of one file whose tables the manifests generate."""
    path = os.path.join(ROOT, rel)
    try:
        old = open(path, encoding="utf-8").read()
    except OSError as e:
        return None, None, ["cannot read %s: %s" % (rel, e)]
    header, row = TABLES[rel]
    ranges, problems, new = blocks(old), [], old
    if not ranges:
        problems.append("%s has no '%s' marker" % (rel, BEGIN_TEXT % ("NN", "MM")))
    for lo, hi in ranges:
        rows = [row(n, manifest(n)) for n in names() if lo <= int(n[:2]) <= hi]
        try:
            _, new = generated_block.replace_between_text(new, BEGIN_TEXT % ("%02d" % lo, "%02d" % hi),
                                                          END_TEXT % ("%02d" % lo, "%02d" % hi), "\n".join(header + rows))
        except ValueError as e:
            problems.append("%s: %s" % (rel, e))
    for n in names():
        inside = [r for r in ranges if r[0] <= int(n[:2]) <= r[1]]
        if len(inside) != 1:
            problems.append("%s: lesson %s is in %d generated tables, not 1 (the markers' ranges: %s)"
                            % (rel, n, len(inside), ", ".join("%02d-%02d" % r for r in ranges) or "none"))
    return old, new, problems


def tables():
    return {rel: render(rel) for rel in TABLES}


def get(name, field):
    m = manifest(name)
    top, _, key = field.partition(".")
    if top not in FIELDS:
        die("no field '%s' (fields: %s)" % (top, ", ".join(FIELDS)))
    v = m[top]
    if key:
        v = v.get(key) if isinstance(v, dict) else None
    if v is None or v == "" or v == [] or v == {}:
        return []
    if isinstance(v, list):
        return [str(x) for x in v]
    if isinstance(v, dict):
        return [json.dumps(v)]
    return [("%g" % v) if isinstance(v, float) else str(v)]


def check():
    problems = []
    for d in sorted(os.listdir(LESSONS)):
        folder = os.path.join(LESSONS, d)
        if not os.path.isdir(folder) or not (re.match(r"^\d\d_", d) or d == TEMPLATE):
            continue
        for f in ("lesson.json", "main.cu", "README.md"):
            if not os.path.isfile(os.path.join(folder, f)):
                problems.append("lessons/%s has no %s" % (d, f))
        if os.path.isfile(os.path.join(folder, "lesson.json")):
            problems += problems_of(d)
    numbers = [n[:2] for n in names()]
    for n in sorted({x for x in numbers if numbers.count(x) > 1}):
        problems.append("two lessons are numbered %s" % n)
    if not problems:  # the tables need well-formed manifests
        for rel, (old, new, probs) in tables().items():
            problems += probs
            if not probs and old != new:
                problems.append("%s: the lesson tables are not what the manifests give; run "
                                "`scripts/lessons.py write`" % rel)
    for p in problems:
        print("lessons.py: " + p)
    if problems:
        return 1
    print("lessons.py: %d lesson manifest(s) and the template's well formed; the tables of %s match them"
          % (len(names()), " and ".join(TABLES)))
    return 0


def main(argv):
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(__doc__)
        return 0 if argv else 2
    cmd, args = argv[0], argv[1:]
    want = {"list": 0, "find": 1, "get": 2, "table": 0, "write": 0, "check": 0}
    if cmd not in want:
        die("unknown command '%s' (commands: %s; see --help)" % (cmd, ", ".join(want)))
    if len(args) != want[cmd]:
        die("%s takes %d argument(s) (see --help)" % (cmd, want[cmd]))
    if cmd == "check":
        return check()
    if cmd in ("find", "get"):
        name = find(args[0])
        if name is None:
            die("no lesson '%s' (lessons: %s)" % (args[0], " ".join(n[:2] for n in names())))
        for line in [name] if cmd == "find" else get(name, args[1]):
            print(line)
        return 0
    if cmd == "list":
        for name in names():
            print(name)
        return 0
    for d in names():
        probs = problems_of(d)
        if probs:
            die("; ".join(probs), 1)
    for rel, (old, new, probs) in tables().items():
        if probs:
            die("; ".join(probs), 1)
        if cmd == "table":
            for lo, hi in blocks(new):
                block = new.split(BEGIN_TEXT % ("%02d" % lo, "%02d" % hi), 1)[1].split(END_TEXT % ("%02d" % lo, "%02d" % hi), 1)[0]
                print("%s, lessons %02d-%02d:%s" % (rel, lo, hi, block))
        elif old != new:
            with open(os.path.join(ROOT, rel), "w", encoding="utf-8") as f:
                f.write(new)
            print("lessons.py: wrote the lesson tables of %s" % rel)
        else:
            print("lessons.py: the lesson tables of %s are up to date" % rel)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
