#!/usr/bin/env python3
"""scripts/exercise.py - exercises that grade themselves (called by scripts/exercise.sh).

The lessons are the reference solutions. The code a learner writes is marked in a
lesson's sources:

    // EXERCISE 1 BEGIN: <the task, one line>
    // HINT: <a hint, kept in the learner's copy>          (any number, optional)
    // STUB: <code the learner's copy needs to compile>    (any number, optional)
        ... the reference solution ...
    // EXERCISE 1 END

K is the number of the exercise in the handout's Exercises section (a lesson marks
1 to 3 of its exercises; the others are questions to explore, not code to write).
An exercise may have several regions (a kernel and its launch, say), in one file or
in several files of the lesson; all regions of exercise K are replaced together. The learner's copy
keeps the markers: check takes the code between them, and nothing else, from the copy.
An unsolved copy must still build and must FAIL its check: a kernel body left empty
leaves the poisoned output in place; a host step that returns a value gets a STUB.

  exercise.py lint [LESSON ...]          markers well formed (all lessons by default)
  exercise.py start LESSON [K] [--planted] [--force] [--out=DIR]
                                          write the learner's copy (exercises/NN_name/)
  exercise.py check LESSON [--solution | --exe=BINARY] [--json=FILE] [--no-sanitize] [--no-speed] [--runs=R]
                          [--instructor=FILE]
                                          take the code between the copy's markers into a fresh copy
                                          of the lesson (a copy edited elsewhere is not graded), build,
                                          verify at every size, sanitize, grade speed
                                          (R runs each of yours and the reference's, alternating;
                                          default 3, or 2 where one timed run takes over 1.5 s);
                                          FILE: the instructor's own sizes and seeds, checked too
                                          (lines 'NN: <flags>', '#' comments; see read_instructor)
  exercise.py report DIR                  one table from a folder of check JSON files
  exercise.py list                        every exercise of the course, one line each
  exercise.py table                       every exercise as a Markdown table (docs/teaching.md), with
                                          the reference's grade per GPU from docs/results/grades/*.json
  exercise.py grades DIR FILE             the reference solutions' grades in DIR's check --solution
                                          JSON files, as one summary FILE (docs/results/grades/h100.json)

LESSON is a number (5, 05) or a folder name (05_stream_pipeline).
Exit codes: 0 done (check: correct at every size, sanitizers clean), 1 check failed,
2 bad usage or malformed markers, 77 SKIP (check: no GPU, or the exercise's code cannot run
on this GPU; the reason is printed).
"""
import concurrent.futures
import difflib
import fnmatch
import glob
import hashlib
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import time

import lessons  # scripts/lessons.py: each lesson's manifest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LESSONS = os.path.join(ROOT, "lessons")
SANITIZE_SH = os.path.join(ROOT, "scripts", "sanitize.sh")  # one compute-sanitizer tool on one run
SANITIZERS = ("memcheck", "racecheck")  # check's compute-sanitizer tools
SOURCES = (".cu", ".cuh", ".h", ".cpp")
BEGIN = re.compile(r"^(\s*)//\s*EXERCISE\s+(\S+)\s+BEGIN(?::\s*(.*))?$")
END = re.compile(r"^\s*//\s*EXERCISE\s+(\S+)\s+END\s*$")
ANY = re.compile(r"//\s*EXERCISE\b")
HINT = re.compile(r"^\s*//\s*HINT:\s?(.*)$")
STUB = re.compile(r"^\s*//\s*STUB:\s?(.*)$")
# TIMEOUT: <seconds> <message>: every run of the lesson's program in check ends after that many
# seconds (sanitizer runs: SANITIZE_FACTOR times as many) and FAILs naming the message (a deadlock's
# likely cause). Kept in the learner's copy; check reads it from the lesson, never from the copy.
TIMEOUT = re.compile(r"^\s*//\s*TIMEOUT:\s*(\d+)\s+(\S.*)$")
ANY_TIMEOUT = re.compile(r"^\s*//\s*TIMEOUT\b")
DEFAULT_TIMEOUT = 900
SANITIZE_FACTOR = 10
# The first lines of a planted answer: '// caught-by: default' (it FAILs the default size) or
# '// caught-by: timeout' (it hangs and ends by the exercise's TIMEOUT); without one, it passes the
# default size and an awkward size or a sanitizer catches it. start --planted leaves the line out.
CAUGHT_BY = re.compile(r"^\s*//\s*caught-by:\s*(\S*)\s*$")
CAUGHT_BY_KINDS = ("default", "timeout")
# Speed bands: the learner's rate as a fraction of the reference solution's, same run.
BANDS = [("A", 0.90), ("B", 0.75), ("C", 0.50), ("D", 0.0)]
MAX_SPREAD = 0.10      # (max - min) / median of the runs' rates: above it, timing is noise
MAX_CLOCK_DROP = 0.10  # SM clock at the end below 90% of the start: the GPU throttled


def die(msg, code=2):
    if code == 2:
        print("RESULT: ERROR (%s)" % msg)  # the lessons' convention for bad input
    print("exercise: " + msg, file=sys.stderr)
    sys.exit(code)


def find_lesson(arg):
    name = lessons.find(arg)
    if name is None:
        die("no lesson '%s'; lessons: %s" % (arg, " ".join(d[:2] for d in lessons.names())))
    return name


def source_files(folder):
    out = []
    for base, _, files in os.walk(folder):
        for f in sorted(files):
            if f.endswith(SOURCES):
                out.append(os.path.join(base, f))
    return sorted(out)


class Region:
    def __init__(self, path, k, task, begin, end, indent, hints, stubs, timeout=None):
        self.path, self.k, self.task, self.begin, self.end = path, k, task, begin, end
        self.indent, self.hints, self.stubs = indent, hints, stubs
        self.timeout = timeout  # (seconds, message) of its TIMEOUT line, or None


def parse(path):
    """Regions of one file, or raises ValueError naming the line of a malformed marker."""
    regions, open_ = [], None
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    rel = os.path.relpath(path, ROOT)
    for i, line in enumerate(lines):
        b, e = BEGIN.match(line), END.match(line)
        if b:
            if open_:
                raise ValueError("%s:%d: EXERCISE %s BEGIN inside exercise %s (line %d): regions do not nest"
                                 % (rel, i + 1, b.group(2), open_[0], open_[1] + 1))
            if not re.fullmatch(r"[1-9]\d*", b.group(2)):
                raise ValueError("%s:%d: exercise number '%s' is not a positive integer" % (rel, i + 1, b.group(2)))
            if not (b.group(3) or "").strip():
                raise ValueError("%s:%d: EXERCISE %s BEGIN has no task (write '// EXERCISE %s BEGIN: <task>')"
                                 % (rel, i + 1, b.group(2), b.group(2)))
            open_ = (int(b.group(2)), i, b.group(3).strip(), b.group(1))
        elif e:
            if not open_:
                raise ValueError("%s:%d: EXERCISE %s END without a BEGIN" % (rel, i + 1, e.group(1)))
            if e.group(1) != str(open_[0]):
                raise ValueError("%s:%d: EXERCISE %s END closes exercise %s (line %d)"
                                 % (rel, i + 1, e.group(1), open_[0], open_[1] + 1))
            body = lines[open_[1] + 1:i]
            hints = [HINT.match(x).group(1) for x in body if HINT.match(x)]
            stubs = [STUB.match(x).group(1) for x in body if STUB.match(x)]
            timeouts = []
            for j, x in enumerate(body):
                if ANY_TIMEOUT.match(x):
                    t = TIMEOUT.match(x)
                    if not t or int(t.group(1)) < 1:
                        raise ValueError("%s:%d: malformed TIMEOUT (write '// TIMEOUT: <whole seconds, at least 1> "
                                         "<message>'): %s" % (rel, open_[1] + 2 + j, x.strip()))
                    timeouts.append((int(t.group(1)), t.group(2).strip()))
            if len(timeouts) > 1:
                raise ValueError("%s:%d: exercise %d region has %d TIMEOUT lines; one at most"
                                 % (rel, open_[1] + 1, open_[0], len(timeouts)))
            regions.append(Region(path, open_[0], open_[2], open_[1], i, open_[3], hints, stubs,
                                  timeouts[0] if timeouts else None))
            open_ = None
        elif ANY.search(line):
            raise ValueError("%s:%d: malformed exercise marker (use '// EXERCISE K BEGIN: <task>' and "
                             "'// EXERCISE K END'): %s" % (rel, i + 1, line.strip()))
    if open_:
        raise ValueError("%s:%d: EXERCISE %d BEGIN is never closed" % (rel, open_[1] + 1, open_[0]))
    return regions


def lesson_regions(lesson):
    regions = []
    for p in source_files(os.path.join(LESSONS, lesson)):
        regions += parse(p)
    return regions


def handout_exercises(lesson):
    """The numbered items of the handout's Exercises section."""
    path = os.path.join(LESSONS, lesson, "README.md")
    try:
        text = open(path, encoding="utf-8").read()
    except OSError:
        return []
    m = re.search(r"^##\s+Exercises\s*$(.*?)(?=^##\s|\Z)", text, re.M | re.S)
    if not m:
        return []
    return [int(n) for n in re.findall(r"^(\d+)\.\s", m.group(1), re.M)]


def lint(lessons):
    problems, count = [], 0
    for lesson in lessons:
        try:
            regions = lesson_regions(lesson)
        except ValueError as e:
            problems.append(str(e))
            continue
        ks = sorted({r.k for r in regions})
        count += len(ks)
        ctx = reference_context(os.path.join(LESSONS, lesson), regions)
        # The reference solutions and the planted answers obey the rules a learner's regions must.
        for r in regions:
            with open(r.path, encoding="utf-8") as f:
                body = f.read().split("\n")[r.begin + 1:r.end]
            for line, rule, text in region_violations(body, r.begin + 2, ctx, r.k):
                problems.append("%s:%d: exercise %d breaks rule '%s': %s" % (os.path.relpath(r.path, ROOT), line, r.k, rule, text))
        for k in ks:
            tos = {r.timeout for r in regions if r.k == k and r.timeout}
            if len(tos) > 1:
                problems.append("%s: exercise %d has different TIMEOUT lines in its regions: %s" % (lesson, k, sorted(tos)))
            p = os.path.join(LESSONS, lesson, "exercises", "%d.planted" % k)
            if os.path.exists(p):
                with open(p, encoding="utf-8") as f:
                    plines = f.read().split("\n")
                for n, x in enumerate(plines, 1):
                    m = CAUGHT_BY.match(x)
                    if m and m.group(1) not in CAUGHT_BY_KINDS:
                        problems.append("%s:%d: caught-by '%s' is not one of %s" % (os.path.relpath(p, ROOT), n, m.group(1), ", ".join(CAUGHT_BY_KINDS)))
                    if m and m.group(1) == "timeout" and not tos:
                        problems.append("%s:%d: caught-by timeout, but exercise %d has no '// TIMEOUT:' line"
                                        % (os.path.relpath(p, ROOT), n, k))
                for line, rule, text in region_violations(plines, 1, ctx, k):
                    problems.append("%s:%d: breaks rule '%s': %s" % (os.path.relpath(p, ROOT), line, rule, text))
        if len(ks) > 3:
            problems.append("%s: %d marked exercises (%s); a lesson marks 1 to 3" % (lesson, len(ks), ks))
        items = handout_exercises(lesson)
        for k in ks:
            if k not in items:
                problems.append("%s: exercise %d is marked in the sources, but the handout's Exercises section "
                                "has no item %d" % (lesson, k, k))
    for p in problems:
        print("exercise lint: " + p)
    if problems:
        sys.exit(2)
    print("exercise lint: %d lesson(s), %d exercise(s), markers well formed" % (len(lessons), count))


def starter_text(path, regions, only, planted):
    """The file with the chosen regions' code replaced by a TODO (or by the planted wrong answer)."""
    lines = open(path, encoding="utf-8").read().split("\n")
    out, i = [], 0
    mine = {r.begin: r for r in regions if r.path == path and (only is None or r.k == only)}
    while i < len(lines):
        r = mine.get(i)
        if not r:
            out.append(lines[i])
            i += 1
            continue
        body = lines[r.begin + 1:r.end]
        code = [x for x in body if x.strip() and not HINT.match(x) and not STUB.match(x) and not TIMEOUT.match(x)]
        ind = re.match(r"^(\s*)", code[0]).group(1) if code else r.indent
        # The BEGIN and END lines stay: check takes what is between them, and only that.
        out.append(lines[r.begin])
        if r.timeout:  # kept, so the learner knows a hang ends there and why
            out.append("%s// TIMEOUT: %d %s" % (ind, r.timeout[0], r.timeout[1]))
        if planted is not None:
            out.append("%s// Planted wrong answer of exercise %d, for the grader's own tests" % (ind, r.k))
            out += [ind + x if x.strip() else x for x in planted]
        else:
            out.append("%s// TODO (exercise %d): %s" % (ind, r.k, r.task))
            out += ["%s// Hint: %s" % (ind, h) for h in r.hints]
            out += [ind + s for s in r.stubs]
        out.append(lines[r.end])
        i = r.end + 1
    return "\n".join(out)


def planted_answer(lesson, k):
    """lessons/NN_name/exercises/K.planted: a wrong answer that passes the default size only."""
    p = os.path.join(LESSONS, lesson, "exercises", "%d.planted" % k)
    if not os.path.exists(p):
        die("%s has no planted answer for exercise %d (%s)" % (lesson, k, os.path.relpath(p, ROOT)))
    lines = open(p, encoding="utf-8").read().rstrip("\n").split("\n")
    return [x for x in lines if not CAUGHT_BY.match(x)]  # the grader's own expectation, not code


def planted_caught_by(lesson, k):
    """What catches the planted answer of exercise k: "default", "timeout" or "" (an awkward size
    or a sanitizer, the default size passing)."""
    p = os.path.join(LESSONS, lesson, "exercises", "%d.planted" % k)
    with open(p, encoding="utf-8") as f:
        for x in f:
            m = CAUGHT_BY.match(x)
            if m:
                return m.group(1)
    return ""


def lesson_timeout(lesson):
    """(seconds, message) for each run of the lesson's program in check: the largest TIMEOUT of its
    exercises (a run runs every exercise's code), or the default with no message."""
    tos = sorted({r.timeout for r in lesson_regions(lesson) if r.timeout})
    if not tos:
        return DEFAULT_TIMEOUT, None
    return max(t for t, _ in tos), "; ".join(dict.fromkeys(m for _, m in tos))


def start(lesson, k, planted, force, out_root):
    regions = lesson_regions(lesson)
    ks = sorted({r.k for r in regions})
    if not ks:
        die("%s has no marked exercises" % lesson)
    if k is not None and k not in ks:
        die("%s has exercises %s, not %d" % (lesson, ks, k))
    if planted and k is None:
        die("--planted needs the exercise number")
    dest = os.path.join(out_root, lesson)
    if os.path.exists(dest) and not force:
        die("%s exists (your work?): check it with 'scripts/exercise.sh check %s', or start again with --force"
            % (os.path.relpath(dest, ROOT), lesson[:2]))
    if os.path.exists(dest):
        shutil.rmtree(dest)
    src = os.path.join(LESSONS, lesson)
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("exercises", "testdata", "*.svg", "*.pdf"))
    chosen = [r for r in regions if k is None or r.k == k]
    for path in sorted({r.path for r in chosen}):
        text = starter_text(path, chosen, k, planted_answer(lesson, k) if planted else None)
        with open(os.path.join(dest, os.path.relpath(path, src)), "w", encoding="utf-8") as f:
            f.write(text)
    with open(os.path.join(dest, "EXERCISE.md"), "w", encoding="utf-8") as f:
        f.write("# Exercises of lesson %s\n\nThe handout: lessons/%s/README.md (section Exercises).\n\n" % (lesson, lesson))
        for kk in ks:
            if k is None or kk == k:
                where = sorted({"%s:%d" % (os.path.relpath(r.path, src), r.begin + 1) for r in regions if r.k == kk})
                task = next(r.task for r in regions if r.k == kk)
                f.write("%d. %s (TODO in %s)\n" % (kk, task, ", ".join(where)))
        f.write("\nCheck your work: scripts/exercise.sh check %s\n" % lesson[:2])
    what = "exercise %d" % k if k is not None else "exercises %s" % ", ".join(map(str, ks))
    print("exercise: wrote %s (%s%s); edit the TODOs, then: scripts/exercise.sh check %s"
          % (os.path.relpath(dest, ROOT), what, ", planted wrong answer" if planted else "", lesson[:2]))


# ---- only the marked code is the learner's -------------------------------------------------
# check grades the lesson itself with the learner's regions spliced in: every line outside the
# regions (the verification, its tolerances, the timing, the report) comes from lessons/NN_name/.
# A copy whose text outside the regions differs is not graded, and a region may not reach the
# harness: the rules below (docs/teaching.md, "What a grade proves").
COPY_IGNORE = ("exercises", "testdata", "*.svg", "*.pdf")  # not copied by start
HARNESS_HEADERS = ("report.h", "timer.h", "timeline.h", "ceilings.h", "flags.h", "device.h", "needs.h",
                   "phases.h", "gpu_class.h")  # common/include/common/: reporting, timing, bounds, flags
RULES = {
    "preprocessor": "a region may not hold a preprocessor line (#include, #define, #undef, #pragma, ...; "
                    "'#pragma unroll' aside): it would reach code outside the region",
    "verification": "a region may not name the verification (verify::), only its constants (verify::kName)",
    "harness": "a region may not call the harness: the report, the timers, the bounds, the flags "
               "(Report, report, time_median_ms, lesson:: names of common/%s)" % ", ".join(HARNESS_HEADERS),
    "namespace": "a region may not open, alias or import a namespace (using namespace, namespace X = ...)",
    "fault-injection": "a region may not read or name the fault injection (inject)",
    "exit": "a region may not end the program (exit, abort, quick_exit, _Exit, std::terminate)",
    "result-line": "a region may not print a RESULT line (a string holding \"RESULT\")",
    "braces": "a region may not close the function or block it is in (its braces must balance)",
    # The rules below allow what the reference solution's regions of the same exercise use: they
    # keep a region to the tools the task needs, without a list per lesson.
    "library": "a region may call a library (cuBLAS, cuBLASLt, CUB, Thrust, cuDNN, cuFFT, cuRAND, cuSPARSE, "
               "CUTLASS) only where the reference solution's region does: the exercise is the code, not a call",
    "lesson-code": "a region may call the lesson's own functions and kernels (other rungs, the CPU reference, "
                   "the checks) only where the reference solution's region does",
    "api": "a region may use a CUDA runtime or driver name (cuda*, cu[A-Z]*: copies, streams, syncs, events) "
           "only where the reference solution's region does (%s aside): a host-computed answer copied in, "
           "work on another stream, a sync that hides time" % ", ".join(sorted(["cudaGetLastError", "cudaPeekAtLastError", "cudaSuccess", "cudaError_t", "cudaGetErrorString"])),
    "state": "a region may not keep state between calls or runs (static, thread_local, __device__, __managed__ or "
             "__constant__ variables) unless the reference solution's region does: a call counter or a cached answer",
    "io": "a region may not read or write files, the environment or the command line (fopen, fstream, getenv, "
          "system, popen, argv, ...) unless the reference solution's region does",
}
ALWAYS_API = {"cudaGetLastError", "cudaPeekAtLastError", "cudaSuccess", "cudaError_t", "cudaGetErrorString"}
LIBRARY = re.compile(r"\b(?:(?:cublasLt|cublas|cudnn|cufft|curand|cusparse)\w*|(?:cub|thrust|cutlass)\s*::\s*\w+)")
API = re.compile(r"\b(?:cuda[A-Z]\w*|cu[A-Z]\w*|CU_\w+)")
STATE = re.compile(r"\b(?:static|thread_local)\b|__(?:managed|constant)__|__device__\s+(?!__)(?:const\s+)?[\w:<>]+[\s*&]+\w+\s*[;=\[{]")
IO = re.compile(r"\b(?:fopen|freopen|fdopen|fstream|ifstream|ofstream|getenv|secure_getenv|setenv|putenv|popen|system|"
                r"argv|argc|environ|tmpfile|fwrite|fread|fscanf|filesystem|dlopen|mmap)\b")
CALL = re.compile(r"(?<![\w.>])([A-Za-z_]\w*)\s*(?:<<<|\(|<[^;<>]*>\s*(?:<<<|\())")
DEFINED = re.compile(r"^(?:template\s*<[^>]*>\s*)?(?:(?:static|inline|__global__|__device__|__host__|__forceinline__|"
                     r"constexpr|extern|__launch_bounds__\s*\([^)]*\))\s+)*[A-Za-z_][\w:<>,*&\s]*?[\s*&](\w+)\s*\(")
NOT_DEFINED = {"if", "for", "while", "switch", "return", "sizeof", "main", "operator"}


def reference_context(pristine_dir, regions):
    """What the new rules compare a region with: {"ref": {K: the reference regions' code of exercise K}},
    "defined": the names of the functions and kernels the lesson defines outside its regions}."""
    ref, defined = {}, set()
    for path in source_files(pristine_dir):
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
        mine = [r for r in regions if os.path.abspath(r.path) == os.path.abspath(path)]
        inside = set()
        for r in mine:
            inside.update(range(r.begin, r.end + 1))
            ref[r.k] = ref.get(r.k, "") + "\n" + "\n".join(c for _, c, _ in lex(lines[r.begin + 1:r.end]))
        for _, code, _ in lex([x if i not in inside else "" for i, x in enumerate(lines)]):
            m = DEFINED.match(code)
            if m and not code.rstrip().endswith(";") and m.group(1) not in NOT_DEFINED:
                defined.add(m.group(1))
    return {"ref": ref, "defined": defined}


def harness_names():
    """The names the harness headers declare at namespace level (classes, functions, aliases)."""
    names = {"Report", "report", "time_median_ms", "time_interleaved_ms"}
    for h in HARNESS_HEADERS:
        with open(os.path.join(ROOT, "common", "include", "common", h), encoding="utf-8") as f:
            for line in f:
                m = (re.match(r"using\s+(\w+)\s*=", line) or
                     re.match(r"(?:(?:inline|static|constexpr|__host__|__device__|__forceinline__)\s+)*"
                              r"(?:struct|class|enum(?:\s+class)?)\s+(\w+)", line) or
                     (None if re.match(r"(namespace|using|template|return|typedef)\b|[^A-Za-z_]", line) else
                      re.match(r"[\w:<>,\s*&]*?\b(\w+)\s*\(", line)))
                if m and m.group(1) not in ("void", "struct", "class", "enum"):
                    names.add(m.group(1))
    return names


_HARNESS = None


def lex(lines):
    """The region's logical lines (backslash continuations joined) as (first line index, code, strings):
    code with comments removed and string and character literals emptied, strings their contents."""
    out, state = [], "code"  # state: "block" inside a /* */ comment, which may span lines
    joined = []  # (first physical line, text)
    for n, line in enumerate(lines):
        if joined and joined[-1][1].endswith("\\"):
            joined[-1] = (joined[-1][0], joined[-1][1][:-1] + line)
        else:
            joined.append((n, line))
    for first, text in joined:
        buf, strs, i = [], [], 0
        while i < len(text):
            c, two = text[i], text[i:i + 2]
            if state == "block":
                if two == "*/":
                    state, i = "code", i + 2
                    buf.append(" ")
                else:
                    i += 1
                continue
            if two == "//":
                break
            if two == "/*":
                state, i = "block", i + 2
                continue
            if c in "\"'":
                j, lit = i + 1, []
                while j < len(text) and text[j] != c:
                    if text[j] == "\\" and j + 1 < len(text):
                        lit.append(text[j:j + 2])
                        j += 2
                        continue
                    lit.append(text[j])
                    j += 1
                buf.append(c + c)
                if c == '"':
                    strs.append("".join(lit))
                i = j + 1
                continue
            buf.append(c)
            i += 1
        out.append((first, "".join(buf), strs))
    return out


def region_violations(lines, first_line, ctx=None, k=None):
    """(line number, rule, text) for each rule of RULES the region's lines break; first_line is the
    1-based number of lines[0] in its file; ctx (reference_context) and k: the reference solution's
    regions of exercise k, for the rules that allow what those use (None: nothing is allowed)."""
    global _HARNESS
    if _HARNESS is None:
        _HARNESS = harness_names()
    found, depth = [], 0
    # The reference regions of exercise k, what the allow-if-the-reference-does rules compare with.
    ref = ((ctx or {}).get("ref") or {}).get(k, "")
    ref_flat = re.sub(r"\s+", "", ref)
    defined = (ctx or {}).get("defined") or set()
    in_ref = lambda name: re.search(r"\b%s\b" % re.escape(name), ref) is not None
    logical = lex(lines)
    for n, code, strs in logical:
        where = first_line + n
        hits = []
        if re.match(r"\s*(#|%:|\?\?=)", code) and not re.match(r"\s*#\s*pragma\s+unroll\b[\s\w()]*$", code):
            hits.append("preprocessor")
        if re.search(r"\b_Pragma\s*\(|\b__pragma\s*\(", code):
            hits.append("preprocessor")
        if any(not re.fullmatch(r"k[A-Z]\w*", m) for m in re.findall(r"\bverify\s*::\s*(\w+)", code)):
            hits.append("verification")
        if re.search(r"\busing\s+namespace\b|\bnamespace\s+\w*\s*[={]", code):
            hits.append("namespace")
        qualified = re.findall(r"\blesson\s*::\s*(\w+)", code)
        bare = re.findall(r"(?<![\w.:>])([A-Za-z_]\w*)", re.sub(r"\blesson\s*::\s*\w+", " ", code))
        if any(x in _HARNESS for x in qualified) or any(x in _HARNESS for x in bare):
            hits.append("harness")
        if re.search(r"inject", code, re.I) or any(re.search(r"inject", s, re.I) for s in strs):
            hits.append("fault-injection")
        if re.search(r"\b(exit|_Exit|quick_exit|abort|terminate)\s*\(", code):
            hits.append("exit")
        if "RESULT" in "".join(strs):  # "RES" "ULT" is one string to the compiler
            hits.append("result-line")
        if any(re.sub(r"\s+", "", x) not in ref_flat for x in LIBRARY.findall(code)):
            hits.append("library")
        if any(x not in ALWAYS_API and not in_ref(x) for x in API.findall(code)):
            hits.append("api")
        if any(not in_ref(x.split()[0] if x.split() else x) for x in STATE.findall(code)):
            hits.append("state")
        if any(not in_ref(x) for x in IO.findall(code)):
            hits.append("io")
        if any(x in defined and not in_ref(x) for x in CALL.findall(code)):
            hits.append("lesson-code")
        for c in code:
            depth += (c == "{") - (c == "}")
            if depth < 0 and "braces" not in hits:
                hits.append("braces")
                depth = 0
        text = lines[n].strip()
        found += [(where, rule, text) for rule in dict.fromkeys(hits)]
    if depth > 0:
        found.append((first_line + len(lines) - 1, "braces", "%d brace(s) left open at the end of the region" % depth))
    return found


def outside_parts(lines, regions):
    """The file's text outside its regions as a list of (first line index, lines): the BEGIN and END
    marker lines belong to it; and the region bodies as a list of lines each."""
    parts, bodies, at = [], [], 0
    for r in regions:
        parts.append((at, lines[at:r.begin + 1]))
        bodies.append(lines[r.begin + 1:r.end])
        at = r.end
    parts.append((at, lines[at:]))
    return parts, bodies


def lesson_sources(folder):
    """The lesson's source files, relative to folder, as start copies them."""
    out = []
    for base, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d not in COPY_IGNORE)
        out += [os.path.relpath(os.path.join(base, f), folder) for f in sorted(files) if f.endswith(SOURCES)]
    return sorted(out)


def splice(pristine_dir, copy_dir):
    """The lesson in pristine_dir with the regions of copy_dir: ({relative path: text} of every source
    file whose text is the spliced one, problems). problems: dicts with "file", "kind" (outside,
    markers, missing, rule) and what and where; no files are returned when there are any."""
    problems, texts = [], {}
    try:
        ctx = reference_context(pristine_dir, [r for p in source_files(pristine_dir) for r in parse(p)])
    except ValueError:
        ctx = None
    for rel in lesson_sources(pristine_dir):
        mine_path = os.path.join(copy_dir, rel)
        p_path = os.path.join(pristine_dir, rel)
        with open(p_path, encoding="utf-8") as f:
            p_lines = f.read().split("\n")
        if not os.path.exists(mine_path):
            problems.append({"file": rel, "kind": "missing", "what": "the lesson's file is missing from the copy"})
            continue
        with open(mine_path, encoding="utf-8", errors="replace") as f:
            m_lines = f.read().split("\n")
        p_regions = parse(p_path)
        try:
            m_regions = parse(mine_path)
        except ValueError as e:
            problems.append({"file": rel, "kind": "markers", "what": str(e).split(": ", 1)[-1],
                             "lines": [int(re.search(r":(\d+):", str(e)).group(1))] if re.search(r":(\d+):", str(e)) else []})
            continue
        if [r.k for r in p_regions] != [r.k for r in m_regions]:
            problems.append({"file": rel, "kind": "markers", "lines": [r.begin + 1 for r in m_regions],
                             "what": "the copy marks exercises %s, the lesson %s: keep every "
                                     "'// EXERCISE K BEGIN' and '// EXERCISE K END' line of the lesson"
                                     % ([r.k for r in m_regions], [r.k for r in p_regions])})
            continue
        p_parts, _ = outside_parts(p_lines, p_regions)
        m_parts, m_bodies = outside_parts(m_lines, m_regions)
        for (pa, pl), (ma, ml) in zip(p_parts, m_parts):
            sm = difflib.SequenceMatcher(None, [x.rstrip() for x in pl], [x.rstrip() for x in ml], autojunk=False)
            for op, i1, i2, j1, j2 in sm.get_opcodes():
                if op == "equal":
                    continue
                problems.append({"file": rel, "kind": "outside",
                                 "lines": list(range(ma + j1 + 1, ma + j2 + 1)),
                                 "lesson_lines": list(range(pa + i1 + 1, pa + i2 + 1)),
                                 "what": {"replace": "changed", "delete": "removed", "insert": "added"}[op]})
        for r, body in zip(m_regions, m_bodies):
            for line, rule, text in region_violations(body, r.begin + 2, ctx, r.k):
                problems.append({"file": rel, "kind": "rule", "rule": rule, "exercise": r.k, "lines": [line],
                                 "what": text})
        out = list(p_parts[0][1])
        for body, (_, part) in zip(m_bodies, p_parts[1:]):
            out += body + part
        texts[rel] = "\n".join(out)
    return ({} if problems else texts), problems


def describe(problem):
    """One line for one problem of splice()."""
    p = problem
    lines = p.get("lines") or []
    span = ("%d" % lines[0] if len(lines) == 1 else "%d-%d" % (lines[0], lines[-1])) if lines else ""
    where = p["file"] + (":" + span if span else "")
    if p["kind"] == "outside":
        ll = p["lesson_lines"]
        at = ("the lesson's line %d" % ll[0] if len(ll) == 1 else "the lesson's lines %d-%d" % (ll[0], ll[-1])) \
            if ll else "after the lesson's line %d" % (lines[0] - 1 if lines else 0)
        return "%s: %s outside the exercise regions (%s)" % (where, p["what"], at)
    if p["kind"] == "rule":
        return "%s: exercise %d breaks rule '%s': %s: %s" % (where, p["exercise"], p["rule"], RULES[p["rule"]], p["what"])
    return "%s: %s" % (where, p["what"])


def write_tree(pristine_dir, texts, dest):
    """dest/: the lesson as start copies it, with texts (relative path: text) in place of its files.
    A file whose text is already there is left alone (its time too: an unchanged copy does not
    rebuild); files the lesson does not have are removed."""
    want = {}
    for base, dirs, files in os.walk(pristine_dir):
        dirs[:] = [d for d in dirs if d not in COPY_IGNORE]
        for f in files:
            if not any(fnmatch.fnmatch(f, pat) for pat in COPY_IGNORE):
                rel = os.path.relpath(os.path.join(base, f), pristine_dir)
                want[rel] = os.path.join(base, f)
    for base, _, files in os.walk(dest):
        for f in files:
            rel = os.path.relpath(os.path.join(base, f), dest)
            if rel not in want:
                os.remove(os.path.join(base, f))
    for rel, src in want.items():
        if rel in texts:
            data = texts[rel].encode("utf-8")
        else:
            with open(src, "rb") as f:
                data = f.read()
        out = os.path.join(dest, rel)
        if os.path.exists(out):
            with open(out, "rb") as f:
                if f.read() == data:
                    continue
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with open(out, "wb") as f:
            f.write(data)


def splice_copy(lesson, copy_dir, dest, json_path):
    """check's first step for a learner's copy: the lesson with the copy's regions, written to dest;
    a copy with edits outside the regions, or a region that breaks a rule, is not graded (exit 1)."""
    pristine = os.path.join(LESSONS, lesson)
    texts, problems = splice(pristine, copy_dir)
    extra = sorted(set(lesson_sources(copy_dir)) - set(lesson_sources(pristine)))
    if problems:
        outside = [p for p in problems if p["kind"] != "rule"]
        rules = [p for p in problems if p["kind"] == "rule"]
        print("exercise: not graded (only the code between '// EXERCISE K BEGIN' and '// EXERCISE K END' is yours):")
        for p in problems:
            print("  " + describe(p))
        why = []
        if outside:
            why.append("the copy differs from the lesson outside the exercise regions: undo those edits "
                       "(or start a fresh copy with 'scripts/exercise.sh start %s --force' and move your code "
                       "between its markers)" % lesson[:2])
        if rules:
            why.append("a region breaks the rules: %s" % ", ".join(sorted({p["rule"] for p in rules})))
        print("exercise: FAIL (not graded): " + "; ".join(why))
        write_report(json_path, {"lesson": lesson, "solution": False, "result": "FAIL", "grade": None,
                                 "why": "not graded: " + "; ".join(why),
                                 "not_graded": [dict(p, message=describe(p)) for p in problems],
                                 "date": time.strftime("%Y-%m-%d %H:%M:%S")})
        sys.exit(1)
    for rel in extra:
        print("exercise: note: %s is not a file of the lesson: it is not built" % rel)
    write_tree(pristine, texts, dest)
    return texts


# ---- the instructor's sizes ----------------------------------------------------------------
# A learner sees the default size and the manifest's "awkward" ones, so a copy can be tuned to
# them (a size hard-coded, a branch on n). The instructor keeps a file of other sizes and seeds,
# never handed out; check --instructor=FILE runs each of its lines for the lesson checked as one
# more correctness check. The printed output numbers them ("instructor size 1"); the JSON keeps
# the flags, for the instructor.
INSTRUCTOR_LINE = re.compile(r"^\s*([^\s:#]+)\s*:(.*)$")
INSTRUCTOR_REFUSED = ("--json", "--repeat", "--inject-fault", "--help")  # set by the grader, or no check


def read_instructor(path, lesson):
    """The runs of the instructor file at path for lesson: [(line number, [flags])]. Each line is
    'LESSON: FLAGS' (LESSON a number, a folder or an executable name; FLAGS as on the lesson's command
    line, at least one); '#' starts a comment; blank lines are skipped; lines of other lessons are
    checked and left out. A file that cannot be read, a line that does not parse, an unknown lesson
    or a flag the grader sets itself: exit 2, naming the line."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        die("--instructor=%s: cannot read the file: %s" % (path, e.strerror if isinstance(e, OSError) else e))
    runs = []
    for n, line in enumerate(text.split("\n"), 1):
        if not line.split("#", 1)[0].strip():
            continue
        where = "--instructor=%s:%d" % (path, n)
        m = INSTRUCTOR_LINE.match(line)
        if not m:
            die("%s: not 'LESSON: FLAGS' (for example '00: --n=999983 --seed=7')" % where)
        name = lessons.find(m.group(1))
        if name is None:
            die("%s: no lesson '%s'" % (where, m.group(1)))
        try:
            flags = shlex.split(m.group(2), comments=True)
        except ValueError as e:
            die("%s: %s" % (where, e))
        if not flags:
            die("%s: no flags for lesson %s" % (where, name))
        for a in flags:
            if not a.startswith("-"):
                die("%s: '%s' is not a flag (flags start with '-')" % (where, a))
            if a.split("=", 1)[0] in INSTRUCTOR_REFUSED:
                die("%s: %s is set by the grader (each run is --repeat=1, no --json) or defeats the check"
                    % (where, a.split("=", 1)[0]))
        if name == lesson:
            runs.append((n, flags))
    return runs


# ---- check -------------------------------------------------------------------------------

def gpu_state():
    try:
        q = subprocess.run(["nvidia-smi", "--query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu",
                            "--format=csv,noheader,nounits", "-i", os.environ.get("LESSON_DEVICE", "0")],
                           capture_output=True, text=True, timeout=20)
        name, sm, smax, temp = [x.strip() for x in q.stdout.strip().split("\n")[0].split(",")]
        return {"gpu": name, "sm_clock_mhz": float(sm), "max_sm_clock_mhz": float(smax), "temperature_c": float(temp)}
    except Exception:
        return {}


def run(cmd, log, timeout=900, append=False):
    t = time.time()
    with open(log, "a" if append else "w") as f:
        try:
            rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            rc = 124
    return rc, time.time() - t


# Each run of the lesson's program in check: (seconds, message) from lesson_timeout, set by check.
RUN_TIMEOUT = (DEFAULT_TIMEOUT, None)
TIMED_OUT = "run timed out after"


def timeout_line(secs=None):
    secs = secs or RUN_TIMEOUT[0]
    return "%s %d s%s" % (TIMED_OUT, secs, ": " + RUN_TIMEOUT[1] if RUN_TIMEOUT[1] else "")


def run_program(cmd, log, timeout=None):
    """One run of a program under check: in its own process group, so that a run past the timeout
    (RUN_TIMEOUT) ends with everything it started; then exit 124 and the timeout line in the log."""
    timeout = timeout or RUN_TIMEOUT[0]
    t = time.time()
    with open(log, "w") as f:
        p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            rc = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(p.pid, 9)
            except OSError:
                pass
            p.wait()
            rc = 124
    if rc == 124:
        with open(log, "a") as f:
            f.write("\n" + timeout_line(timeout) + "\n")
    return rc, time.time() - t


def result_line(log):
    text = open(log, errors="replace").read().split("\n")
    if any(x.startswith(TIMED_OUT) for x in text):
        return [x for x in text if x.startswith(TIMED_OUT)][-1]
    lines = [x for x in text if x.startswith("RESULT:")]
    # A program that exits 0 without its RESULT line (a 'return 0' before the checks) did not pass.
    return lines[-1] if lines else "no RESULT line (exit code only)"


def skip_reason(log):
    """The reason of a run that exited 77: '<reason>' of its 'RESULT: SKIP (<reason>)' line."""
    m = re.fullmatch(r"RESULT: SKIP \((.+)\)", result_line(log).strip())
    return m.group(1) if m else "exit 77 without a RESULT: SKIP line"


class NotHere(Exception):
    """A timed run exited 77: what it times cannot run on this GPU (the reason)."""


def build(build_dir, target, extra):
    os.makedirs(build_dir, exist_ok=True)
    configured = os.path.exists(os.path.join(build_dir, "CMakeCache.txt"))
    gen = ["-G", "Ninja"] if shutil.which("ninja") and not configured else []
    log = os.path.join(build_dir, "exercise-build.log")
    open(log, "w").close()
    rc = 0
    if extra or not configured:
        # A configured reference folder is not configured again (seconds saved on every check):
        # cmake --build configures it again by itself when a CMakeLists.txt or lesson.json changed. A learner's
        # folder always is, so that it points at the learner's copy.
        rc, _ = run(["cmake", "-S", ROOT, "-B", build_dir] + gen + ["-DCMAKE_BUILD_TYPE=Release"] + extra, log)
    if rc == 0:
        rc, _ = run(["cmake", "--build", build_dir, "--target", target, "gpu_check", "--parallel"], log, append=True)
    if rc != 0:
        print(open(log, errors="replace").read()[-4000:])
    return rc == 0


def variant_rate(report, name):
    for v in report.get("variants", []):
        if v.get("name") == name:
            return v
    return None


def lower_is_better(unit):
    """A variant reported as a time (ms, us per kernel, ...) is better when lower."""
    return (unit or "").split("/")[0].strip() in ("s", "ms", "us", "ns")


def grade_band(ratio):
    for band, low in BANDS:
        if ratio >= low:
            return band
    return "D"


def uses_shared_memory(src_dir):
    """True when a source file under src_dir declares __shared__ memory (static or extern)."""
    for root, _, files in os.walk(src_dir):
        for f in files:
            if f.endswith((".cu", ".cuh", ".h", ".hpp")):
                with open(os.path.join(root, f), errors="replace") as fh:
                    if "__shared__" in fh.read():
                        return True
    return False


def sanitizer_run(tool, cmd, log, timeout=900):
    """compute-sanitizer TOOL on cmd, its output in log, through scripts/sanitize.sh (the runner of
    scripts/run_all.sh --sanitize too): (clean, the run's exit code, the tool's summary or None, seconds)."""
    t = time.time()
    p = subprocess.run(["bash", SANITIZE_SH, "--print-limit=10", "--timeout=%d" % timeout, tool, log] + cmd,
                       capture_output=True, text=True)
    # The verdict line: "TOOL: VERDICT (exit RC; SUMMARY or none[; REASON])".
    m = re.match(r"\S+: (?:clean|errors|skipped|no summary) \(exit (\d+); ([^;)]+)", p.stdout)
    rc, summary = (int(m.group(1)), None if m.group(2) == "none" else m.group(2)) if m else (p.returncode, None)
    return p.returncode == 0, rc, summary, time.time() - t


def sanitizer_found(summary):
    """True when the tool's summary counts an error or a hazard ("ERROR SUMMARY: 3 errors")."""
    m = re.search(r"SUMMARY: (\d+)", summary or "")
    return bool(m and int(m.group(1)) > 0)


def build_programs(lesson, exe, solution, exe_path, json_path):
    """Step 1: build the reference (and the learner's copy); exits 77 without a GPU, 1 when the copy
    does not build. The programs to check, their log folder and the sources the copy was built from."""
    ref_build = os.environ.get("BUILD_DIR", os.path.join(ROOT, "build"))
    ref_build = ref_build if os.path.isabs(ref_build) else os.path.join(ROOT, ref_build)
    ex_root = os.environ.get("EXERCISES_DIR", os.path.join(ROOT, "exercises"))
    mine_build = os.path.join(ref_build, "exercises")
    if not solution and not exe_path and not os.path.exists(os.path.join(ex_root, lesson, "main.cu")):
        die("no learner copy at %s: start one with 'scripts/exercise.sh start %s'"
            % (os.path.relpath(os.path.join(ex_root, lesson), ROOT), lesson[:2]))
    # Only the marked code is the learner's: the copy's regions go into a fresh copy of the lesson,
    # which is what is built and checked (refused, exit 1, where the copy differs outside them).
    spliced_root = os.path.join(ref_build, "exercises-src")
    if not solution and not exe_path:
        splice_copy(lesson, os.path.join(ex_root, lesson), os.path.join(spliced_root, lesson), json_path)
    print("exercise: building the reference solution (%s) and %s" % (
        ref_build, "nothing else (--solution)" if solution else ("nothing else (--exe)" if exe_path else
                                                                 "your regions in the lesson (%s)" % mine_build)))
    if not build(ref_build, exe, []):
        die("the reference solution did not build", 1)
    if subprocess.run([os.path.join(ref_build, "bin", "gpu_check")], capture_output=True).returncode == 77:
        print("exercise: SKIP: no CUDA GPU on this machine (the copy builds; run the check where a GPU is)")
        sys.exit(77)
    ref_exe = os.path.join(ref_build, "bin", exe)
    if solution:
        mine_exe = ref_exe
    elif exe_path:
        mine_exe = os.path.abspath(exe_path)
    else:
        if not build(mine_build, exe, ["-DLESSON_EXERCISES_DIR=" + spliced_root]):
            print("exercise: FAIL: your copy does not build (the compiler's messages are above)")
            write_report(json_path, {"lesson": lesson, "result": "FAIL", "why": "does not build"})
            sys.exit(1)
        mine_exe = os.path.join(mine_build, "bin", exe)
    # One log folder per program checked, so that checks of different copies can run at once.
    who = "solution" if solution else ("mine" if not exe_path else
                                       "exe-" + hashlib.sha1(mine_exe.encode()).hexdigest()[:10])
    logs = os.path.join(ref_build, "exercise-logs", lesson, who)
    os.makedirs(logs, exist_ok=True)
    # The sources of the code checked (None for --exe: unknown).
    src = os.path.join(ROOT, "lessons", lesson) if solution else (None if exe_path else os.path.join(spliced_root, lesson))
    return ref_exe, mine_exe, logs, src


def correctness(cm, rep, mine_exe, logs, src, sanitize, timed_args, t0, json_path, instructor=None):
    """Step 2: the exercise's part at --quick size first (exits 77 where it cannot run on this GPU),
    then every size (and the instructor's: (file, [(line, flags)])) and the sanitizers, into
    rep["checks"] and rep["sanitizers"]. True when all pass; exits 2 where the lesson rejects an
    instructor line's flags."""
    focus = shlex.split(cm["focus"])
    # 0. The part of the lesson the exercises change, at --quick size, first: where it cannot run
    #    on this GPU (a rung that needs a newer GPU, more shared memory, an sm_90a image), the
    #    exercise cannot be checked here. That is a SKIP with the lesson's reason, neither a PASS
    #    nor a FAIL, and nothing else runs.
    focus_label = " ".join(["--quick"] + focus)
    focus_log = os.path.join(logs, "focus.log")
    focus_rc, focus_secs = run_program([mine_exe, "--quick", "--repeat=1"] + focus, focus_log)
    if focus_rc == 77:
        why = skip_reason(focus_log)
        rep.update({"result": "SKIP", "why": why, "grade": None, "seconds": round(time.time() - t0, 1)})
        print("  %-45s SKIP (%s)" % (focus_label + ":", why))
        print("exercise: SKIP (%s): the code of this exercise cannot run on this GPU" % why)
        write_report(json_path, rep)
        sys.exit(77)
    if focus_rc == 124:  # a hang (a barrier phase that never flips): every other run would hang too
        rep["checks"].append({"size": focus_label + " (run first)", "pass": False, "exit": focus_rc,
                              "result": result_line(focus_log), "seconds": round(focus_secs, 1)})
        print("  correctness, %-34s FAIL  (%s)" % (focus_label + ":", timeout_line()))
        print("exercise: the other sizes and the sanitizers are not run: this run did not end")
        return False

    # 1. Correctness: the lesson's own verification, at the default size and at the awkward ones,
    #    while
    # 2. compute-sanitizer memcheck and racecheck run at --quick size (restricted to the lesson's
    #    "focus", the part the exercises change). None of it is timed, so it shares the GPU, up to
    #    five programs at once; only where the lesson has neither "focus" nor "grade_size" is the
    #    default-size run also your first timed run, and then it runs alone, first.
    if os.path.exists(os.path.join(logs, "default.json")):  # an earlier check's: no proof of this run
        os.remove(os.path.join(logs, "default.json"))
    jobs = [("size0", [mine_exe, "--json=" + os.path.join(logs, "default.json")], "default size")]
    for i, a in enumerate(cm["awkward"], 1):
        jobs.append(("size%d" % i, [mine_exe] + shlex.split(a) + ["--repeat=1"], a))
    hidden = {}  # tag: (k, line of the instructor file, flags); their labels do not show the flags
    for k, (n, flags) in enumerate(instructor[1] if instructor else [], 1):
        hidden["instructor%d" % k] = (k, n, flags)
        jobs.append(("instructor%d" % k, [mine_exe] + flags + ["--repeat=1"], "instructor size %d" % k))
    # racecheck finds hazards on shared memory only. Where the code checked declares none, it would
    # check only library kernels (cuBLAS, cuFFT), none of them the exercise: it is not run, and the
    # report says so. A copy that adds a __shared__ array is racechecked. (--exe: always run.)
    tools = list(SANITIZERS)
    if sanitize and src and not uses_shared_memory(src):
        tools.remove("racecheck")
        rep["not_run"] = ["racecheck: the code checked declares no __shared__ memory, the only memory racecheck watches"]
    if sanitize:
        for tool in tools:
            jobs.append((tool, [mine_exe, "--quick", "--repeat=1"] + focus, tool))
    done = {}
    if not timed_args:  # the default-size run is your first timed run: alone on the GPU
        done["size0"] = run_program(jobs[0][1], os.path.join(logs, "size0.log"))
    with concurrent.futures.ThreadPoolExecutor(max_workers=5) as pool:
        futures = {tag: pool.submit(run_program, cmd, os.path.join(logs, tag + ".log")) if tag not in SANITIZERS else
                   pool.submit(sanitizer_run, tag, cmd, os.path.join(logs, tag + ".log"),
                               SANITIZE_FACTOR * RUN_TIMEOUT[0])
                   for tag, cmd, _ in jobs if tag not in done}
        for tag, f in futures.items():
            done[tag] = f.result()
    # An instructor line the lesson refuses (exit 2, bad input) is a mistake in the file, not the learner's.
    rejected = [(hidden[t][1], result_line(os.path.join(logs, t + ".log"))) for t in hidden if done[t][0] == 2]
    if rejected:
        die("--instructor=%s: the lesson rejects the flags of %s" % (instructor[0], "; ".join(
            "line %d (exit 2: %s)" % r for r in rejected)))
    ok = True
    for tag, cmd, label in jobs:
        log = os.path.join(logs, tag + ".log")
        if tag not in SANITIZERS:
            rc, secs = done[tag]
            line = result_line(log)
            extra = {"instructor": {"line": hidden[tag][1], "args": " ".join(hidden[tag][2])}} if tag in hidden else {}
            if rc == 77:  # this size needs what this GPU lacks (the focus run above did run): no verdict
                why = skip_reason(log)
                rep["checks"].append(dict({"size": label, "pass": True, "exit": rc, "result": line,
                                           "not_applicable": why, "seconds": round(secs, 1)}, **extra))
                print("  correctness, %-34s not applicable on this GPU (%s)" % (label + ":", why))
                continue
            # Exit 0 is a PASS only with the lesson's RESULT: PASS line (its JSON report, at the
            # default size): a region that ends the program early with 0 skipped the checks.
            passed = rc == 0 and line.startswith("RESULT: PASS")
            if rc == 0 and not passed:
                line = "exit 0 without a 'RESULT: PASS' line (no-result: the program ended before its checks)"
            if passed and tag == "size0" and not os.path.exists(os.path.join(logs, "default.json")):
                passed, line = False, "no JSON report (no-result: the program ended before writing it)"
            ok &= passed
            rep["checks"].append(dict({"size": label, "pass": passed, "exit": rc, "result": line,
                                       "seconds": round(secs, 1)}, **extra))
            # The lesson's RESULT line of a failed instructor size may show the size (an index): the log has it.
            why = "%.1f s" % secs if passed else (timeout_line() if rc == 124 else
                                                  "exit %d; log %s" % (rc, log) if tag in hidden else line)
            print("  correctness, %-34s %s  (%s)" % (label + ":", "PASS" if passed else "FAIL", why))
        else:
            clean, rc, summary, secs = done[tag]
            ok &= clean
            entry = {"tool": tag, "clean": clean, "exit": rc, "summary": summary or "none",
                     "args": " ".join(["--quick"] + focus), "seconds": round(secs, 1)}
            # Decided once the sizes and the focus run have finished too: where the program failed its
            # own check (here, exit 1 with no error found, or at the same --quick run), the tool's
            # "0 errors" is no verdict, and a FAIL beside it would blame the sanitizer.
            program_failed = rc not in (0, 99) or focus_rc not in (0, 77)
            if not clean and rc == 124:
                entry["verdict"] = timeout_line(SANITIZE_FACTOR * RUN_TIMEOUT[0])
                print("  compute-sanitizer %-10s FAIL (%s; log %s)" % (tag + ":", entry["verdict"], log))
            elif not clean and program_failed and not sanitizer_found(summary):
                entry["verdict"] = "not run: the program failed"
                print("  compute-sanitizer %-10s not run: the program failed (exit %d%s; no verdict; log %s)"
                      % (tag + ":", rc, ", and at %s" % focus_label if focus_rc not in (0, 77) else "", log))
            else:
                entry["verdict"] = "clean" if clean else "errors"
                print("  compute-sanitizer %-10s %s" % (tag + ":", "clean (%.1f s)" % secs if clean else "FAIL (%s; log %s)" % (summary or "rc %d" % rc, log)))
            rep["sanitizers"].append(entry)
    for why in rep.get("not_run", []):
        print("  compute-sanitizer %s" % why.replace(": ", ": not run: ", 1))
    # The focus run of step 0 is a correctness check too (after the sizes: checks[0] stays the default size).
    focus_line = result_line(focus_log)
    focus_ok = focus_rc == 0 and focus_line.startswith("RESULT: PASS")
    ok &= focus_ok
    rep["checks"].append({"size": focus_label + " (run first)", "pass": focus_ok, "exit": focus_rc,
                          "result": result_line(focus_log), "seconds": round(focus_secs, 1)})
    print("  correctness, %-34s %s  (%s)" % (focus_label + ":", "PASS" if focus_ok else "FAIL",
                                              "%.1f s, run first" % focus_secs if focus_ok else focus_line))
    return ok


def speed_runs(lesson, rep, graded, ref_exe, mine_exe, logs, runs, timed_args):
    """Step 3: the graded variants of your build and of the reference, alternating, one at a time.
    The lesson's "focus" flags (a --rung, a --mode) leave out what the exercises do not touch, its
    "grade_size" makes a long run shorter; without either, your default-size run of step 2 is your
    first timed run. Raises NotHere where a timed run cannot run on this GPU. Returns the rates."""
    before = gpu_state()
    rates = {"mine": {}, "ref": {}}      # the variant's rate in each run
    fractions = {"mine": {}, "ref": {}}  # ... and as a fraction of the bound or yardstick of that run (or None)
    inverted = set()  # variants whose "rate" is a time: the grade compares reference / learner

    def take(who, js):
        report = json.load(open(js))
        for name in graded:
            if name == "key result":
                f = report["key_result"].get("fraction")
                v = {"rate": f, "fraction": f}
            else:
                v = variant_rate(report, name)
            if v is None or v.get("rate") is None:
                die("the lesson's JSON has no rate for '%s' (\"grade\" in lessons/%s/lesson.json)" % (name, lesson))
            rates[who].setdefault(name, []).append(v["rate"])
            f = v.get("fraction")
            fractions[who].setdefault(name, []).append(f if isinstance(f, (int, float)) and f > 0 else None)
            if lower_is_better(v.get("unit")):
                inverted.add(name)

    def timed(who, path, tag):
        js = os.path.join(logs, "speed-%s.json" % tag)
        if os.path.exists(js):
            os.remove(js)
        rc, secs = run_program([path, "--json=" + js] + timed_args, os.path.join(logs, "speed-%s.log" % tag))
        if rc == 124:
            die("the %s run for timing: %s (logs in %s)" % ("reference" if who == "ref" else "your", timeout_line(), logs), 1)
        if rc == 0 and not os.path.exists(js):
            die("your run for timing exited 0 without its JSON report (no-result; logs in %s)" % logs, 1)
        if rc == 77:
            raise NotHere(skip_reason(os.path.join(logs, "speed-%s.log" % tag)))
        if rc != 0:
            die("the %s run for timing failed (exit %d; logs in %s)" % ("reference" if who == "ref" else "your", rc, logs), 1)
        take(who, js)
        return secs

    if timed_args:
        first = timed("ref", ref_exe, "ref-0")
    elif rep["checks"][0].get("not_applicable"):
        raise NotHere(rep["checks"][0]["not_applicable"])
    else:
        take("mine", os.path.join(logs, "default.json"))
        first = rep["checks"][0]["seconds"]
    taken = "ref" if timed_args else "mine"  # whose first run that was
    if runs is None:
        runs = 3 if first <= 1.5 else 2
    for r in range(runs):
        for who, path in (("ref", ref_exe), ("mine", mine_exe)):
            if r > 0 or who != taken:
                timed(who, path, "%s-%d" % (who, r))
    return {"before": before, "after": gpu_state(), "runs": runs, "rates": rates, "fractions": fractions,
            "inverted": inverted}


def grade(rep, m, timed_args):
    """Step 4: the grade from the speed runs, or the reasons there is none (a throttled clock, runs
    that varied too much), into rep and printed."""
    before, after, runs = m["before"], m["after"], m["runs"]
    rates, fractions, inverted = m["rates"], m["fractions"], m["inverted"]
    rep["measurement"] = {"before": before, "after": after, "runs": runs, "args": " ".join(timed_args),
                          "how": "each run is the lesson at its default size (median of its --repeat samples)%s; "
                                 "reference and learner alternate; the grade compares medians over the runs of "
                                 "the rate as a fraction of the bound or yardstick measured in the same run"
                                 % (", with " + " ".join(timed_args) if timed_args else "")}
    refusals = []
    if before.get("sm_clock_mhz") and after.get("sm_clock_mhz") and \
            after["sm_clock_mhz"] < (1 - MAX_CLOCK_DROP) * before["sm_clock_mhz"] and before["sm_clock_mhz"] > 0.5 * before.get("max_sm_clock_mhz", 0):
        refusals.append("the SM clock dropped from %.0f to %.0f MHz during the runs (throttling)" % (before["sm_clock_mhz"], after["sm_clock_mhz"]))
    grades = []
    for name in rates["mine"]:
        # A machine that is slower in one run (a busy host, a shared link, a lower clock) is slower
        # for its bound as well: the fraction of the bound measured in the same run cancels that,
        # the raw rate does not. The rates are graded only where some run has no fraction.
        have_fractions = all(f is not None for who in fractions for f in fractions[who][name])
        mine, ref = (fractions["mine"][name], fractions["ref"][name]) if have_fractions else \
                    (rates["mine"][name], rates["ref"][name])
        spread = max((max(x) - min(x)) / statistics.median(x) if statistics.median(x) else 0 for x in (mine, ref))
        ratio = statistics.median(mine) / statistics.median(ref)
        if name in inverted:  # a time: half the reference's time is twice as fast
            ratio = 1.0 / ratio
        entry = {"variant": name, "rate": statistics.median(rates["mine"][name]),
                 "reference_rate": statistics.median(rates["ref"][name]),
                 "of_reference": ratio, "spread": spread,
                 "of_bound": statistics.median(fractions["mine"][name]) if have_fractions else None}
        if runs > 1 and spread > MAX_SPREAD:
            refusals.append("'%s' varied by %.0f%% between runs (more than %.0f%%)" % (name, 100 * spread, 100 * MAX_SPREAD))
        grades.append(entry)
    rep["speed"] = grades
    if refusals:
        rep["grade"] = None
        rep["refused"] = refusals
        print("exercise: PASS, but no speed grade: " + "; ".join(refusals) + ". Run the check again on an idle GPU.")
    else:
        worst = min(g["of_reference"] for g in grades)
        rep["grade"] = grade_band(worst)
        for g in grades:
            print("  speed, %-40s %10.4g vs reference %10.4g: %.2fx%s" % (g["variant"][:40], g["rate"], g["reference_rate"], g["of_reference"],
                  ", %.1f%% of the run's bound or yardstick" % (100 * g["of_bound"]) if g["of_bound"] is not None else ""))
        print("  grade bands (of the reference, same run): " + ", ".join("%s >= %.2f" % b for b in BANDS[:-1]) + ", D below")
        print("exercise: PASS, grade %s (%.2fx the reference solution; %d run(s) each, spread %.1f%%; GPU %s, SM clock %s -> %s MHz, %s -> %s C)"
              % (rep["grade"], worst, runs, 100 * max(g["spread"] for g in grades), before.get("gpu", "?"),
                 before.get("sm_clock_mhz", "?"), after.get("sm_clock_mhz", "?"), before.get("temperature_c", "?"), after.get("temperature_c", "?")))


def check(lesson, solution, json_path, sanitize, runs, exe_path=None, speed=True, instructor=None):
    """build, correctness, speed, grade: the report in json_path; exits 0, 1 or 77 (see the usage).
    instructor: (file, its runs for this lesson) of --instructor=FILE, or None."""
    global RUN_TIMEOUT
    cm = lessons.manifest(lesson)
    t0 = time.time()
    RUN_TIMEOUT = lesson_timeout(lesson)
    if RUN_TIMEOUT[1]:
        print("exercise: each run ends after %d s (sanitizer runs %d s): %s"
              % (RUN_TIMEOUT[0], SANITIZE_FACTOR * RUN_TIMEOUT[0], RUN_TIMEOUT[1]))
    ref_exe, mine_exe, logs, src = build_programs(lesson, cm["executable"], solution, exe_path, json_path)
    rep = {"lesson": lesson, "solution": solution, "checks": [], "sanitizers": [], "date": time.strftime("%Y-%m-%d %H:%M:%S")}
    if instructor:
        with open(instructor[0], "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        rep["instructor"] = {"file": os.path.abspath(instructor[0]), "sha256": digest, "sizes": len(instructor[1])}
        if not instructor[1]:
            print("exercise: note: --instructor=%s has no line for lesson %s" % (instructor[0], lesson))
    timed_args = shlex.split(cm["grade_size"]) + shlex.split(cm["focus"])  # the timed runs' size and focus

    ok = correctness(cm, rep, mine_exe, logs, src, sanitize, timed_args, t0, json_path, instructor)
    rep["result"] = "PASS" if ok else "FAIL"
    not_here = sum(1 for c in rep["checks"] if c.get("not_applicable"))
    every_size = "every size" + (" that runs on this GPU (%d not applicable)" % not_here if not_here else "")
    if ok and not speed:
        print("exercise: PASS (correct at %s%s; no speed grade asked for)" % (every_size, ", sanitizers clean" if sanitize else ""))
        write_report(json_path, rep)
        sys.exit(0)
    if not ok:
        print("exercise: FAIL: fix correctness first; no speed grade for a wrong answer")
        rep["grade"] = None
        write_report(json_path, rep)
        sys.exit(1)

    # The manifest's "grade" names the variants the exercises write; without it the lesson's key
    # result is graded, unless "ungraded" says why nothing is.
    named = {v for variants in cm["grade"].values() for v in variants}
    if not named and cm["ungraded"]:
        why = "; ".join(cm["ungraded"].values())
        why = "%s (\"ungraded\" in lessons/%s/lesson.json)" % (why, lesson)
        rep["grade"] = "ungraded"
        rep["ungraded_why"] = why
        rep["seconds"] = round(time.time() - t0, 1)
        print("exercise: PASS (correct at %s%s); no speed grade: %s"
              % (every_size, ", sanitizers clean" if sanitize else "", why))
        write_report(json_path, rep)
        sys.exit(0)
    try:
        measured = speed_runs(lesson, rep, sorted(named) or ["key result"], ref_exe, mine_exe, logs, runs, timed_args)
    except NotHere as e:
        rep["grade"] = None
        rep["not_graded"] = "the timed run cannot run on this GPU: %s" % e
        rep["seconds"] = round(time.time() - t0, 1)
        print("exercise: PASS (correct at %s%s); no speed grade: %s"
              % (every_size, ", sanitizers clean" if sanitize else "", rep["not_graded"]))
        write_report(json_path, rep)
        sys.exit(0)
    grade(rep, measured, timed_args)
    rep["seconds"] = round(time.time() - t0, 1)
    write_report(json_path, rep)
    sys.exit(0)


def write_report(path, rep):
    if path:
        with open(path, "w") as f:
            json.dump(rep, f, indent=1)


def read_reports(folder):
    """(path, report) for every JSON file in folder, in name order; an unreadable one is bad input."""
    out = []
    for p in sorted(glob.glob(os.path.join(folder, "*.json"))):
        try:
            out.append((p, json.load(open(p))))
        except (OSError, ValueError) as e:
            die("cannot read %s: %s" % (p, e))
    return out


def report_table(folder):
    reports = read_reports(folder)
    if not reports:
        die("no JSON files in %s" % folder)
    print("| file | lesson | correct (sizes) | sanitizers | grade | of reference | of bound |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for p, r in reports:
        checks = [c for c in r.get("checks", []) if not c.get("not_applicable")]
        not_here = len(r.get("checks", [])) - len(checks)
        sizes = ("%d/%d" % (sum(c["pass"] for c in checks), len(checks)) +
                 (" (%d not applicable)" % not_here if not_here else "")) if checks else r.get("why", "-")
        sans = r.get("sanitizers") or []
        san = "-" if not sans else "clean" if all(s["clean"] for s in sans) else \
            "errors" if any(not s["clean"] and s.get("verdict") != "not run: the program failed" for s in sans) else \
            "not run: the program failed"
        speed = r.get("speed") or []
        ofref = min((g["of_reference"] for g in speed), default=None)
        ofb = [g["of_bound"] for g in speed if g.get("of_bound") is not None]
        print("| %s | %s | %s | %s | %s | %s | %s |" % (
            os.path.basename(p), r.get("lesson", "?"), sizes, san,
            r.get("grade") or ("refused: " + "; ".join(r["refused"]) if r.get("refused") else
                               "SKIP" if r.get("result") == "SKIP" else "-"),
            "%.2fx" % ofref if ofref is not None else "-", "%.1f%%" % (100 * min(ofb)) if ofb else "-"))


def no_grade(r):
    """Why a check gave no grade: the rules refused the code, or its timed runs varied too much."""
    refused = r.get("refused") or []
    if refused and all("varied by" in x for x in refused):
        return "no grade (runs varied %s)" % ", ".join(re.search(r"varied by (\d+%)", x).group(1) for x in refused)
    return "refused" if refused else None


def grades_summary(folder, out):
    """One summary of the check --solution JSON files in folder: GPU, date, and per lesson its grade."""
    lessons, gpus, dates = {}, set(), []
    for _, r in read_reports(folder):
        if not isinstance(r, dict) or not r.get("solution") or "lesson" not in r:
            continue
        m = r.get("measurement", {}).get("before", {})
        if m.get("gpu"):
            gpus.add(m["gpu"])
        dates.append(r.get("date", "")[:10])
        speed = r.get("speed") or []
        lessons[r["lesson"]] = {
            "result": r.get("result"), "grade": r.get("grade") or no_grade(r),
            "of_reference": min((g["of_reference"] for g in speed), default=None),
            "spread": max((g.get("spread", 0) for g in speed), default=None),
            "seconds": r.get("seconds"), "date": r.get("date")}
    if not lessons:
        die("no check --solution JSON files in %s" % folder)
    if len(gpus) > 1:
        die("the files in %s come from more than one GPU model: %s" % (folder, ", ".join(sorted(gpus))))
    with open(out, "w") as f:
        json.dump({"gpu": gpus.pop() if gpus else "unknown", "dates": sorted(set(dates)), "lessons": lessons}, f,
                  indent=1, sort_keys=True)
        f.write("\n")
    print("exercise: %d lesson(s) from %s -> %s" % (len(lessons), folder, out))


def grade_columns():
    """(header, {lesson: cell}) for each docs/results/grades/*.json, H100 before H200."""
    cols = []
    for p in sorted(glob.glob(os.path.join(ROOT, "docs", "results", "grades", "*.json"))):
        g = json.load(open(p))
        short = re.sub(r"^NVIDIA\s+", "", g.get("gpu", "?")).split()[0]
        cells = {}
        for lesson, x in g["lessons"].items():
            cell = x.get("grade") or x.get("result") or "-"
            if x.get("of_reference") is not None:
                cell += " (%.2fx)" % x["of_reference"]
            if x.get("seconds") is not None:
                cell += ", %.0f s" % x["seconds"]
            cells[lesson] = cell
        cols.append(("reference, %s" % short, cells))
    return cols


def first_regions():
    """(lesson, first region of exercise K) for every marked exercise of the course, in order."""
    for lesson in lessons.names():
        try:
            regions = lesson_regions(lesson)
        except ValueError as e:
            die(str(e))
        seen = set()
        for r in regions:
            if r.k not in seen:
                seen.add(r.k)
                yield lesson, r


def list_all():
    for lesson, r in first_regions():
        print("%s %d: %s" % (lesson, r.k, r.task))


def table():
    cols = grade_columns()
    print("| lesson | K | task | difficulty | what PASS requires | speed graded on | planted answer |" +
          "".join(" %s |" % h for h, _ in cols))
    print("|---|---:|---|---|---|---|---|" + "---|" * len(cols))
    for lesson, r in first_regions():
        cm = lessons.manifest(lesson)
        graded = cm["grade"].get(str(r.k)) or (["not graded (launch overhead)"] if str(r.k) in cm["ungraded"]
                                               else ["the key result"])
        sizes = "; ".join("`%s`" % a for a in cm["awkward"]) or "no other size"
        planted = os.path.exists(os.path.join(LESSONS, lesson, "exercises", "%d.planted" % r.k))
        tools = "memcheck and racecheck" if uses_shared_memory(os.path.join(LESSONS, lesson)) else "memcheck"
        print("| %s | %d | %s | %s | the lesson's checks at the default size and at %s; %s "
              "clean | %s | %s |" % (lesson, r.k, r.task.replace("|", "/"), cm["difficulty"], sizes, tools,
                                      "; ".join(graded), "yes" if planted else "no") +
              "".join(" %s |" % cells.get(lesson, "not run") for _, cells in cols))


def main(argv):
    if not argv:
        die("no command; commands: start, check, report, lint, list (see --help)")
    if argv[0] in ("-h", "--help", "help"):
        print(__doc__)
        sys.exit(0)
    cmd, rest = argv[0], argv[1:]
    flags = {a.split("=", 1)[0]: (a.split("=", 1)[1] if "=" in a else True) for a in rest if a.startswith("--")}
    pos = [a for a in rest if not a.startswith("--")]
    allowed = {"lint": set(), "list": set(), "table": set(), "report": set(), "grades": set(), "start": {"--planted", "--force", "--out"},
               "check": {"--solution", "--json", "--no-sanitize", "--runs", "--exe", "--no-speed", "--instructor"}}
    if cmd not in allowed:
        die("unknown command '%s'; commands: start, check, report, grades, lint, list, table (see --help)" % cmd)
    for f in flags:
        if f not in allowed[cmd]:
            die("%s does not take %s" % (cmd, f))
    if cmd == "lint":
        lint([find_lesson(a) for a in pos] if pos else lessons.names())
    elif cmd == "table":
        if pos:
            die("table takes no arguments")
        table()
    elif cmd == "list":
        if pos:
            die("list takes no arguments")
        list_all()
    elif cmd == "grades":
        if len(pos) != 2 or not os.path.isdir(pos[0]) or not os.path.isdir(os.path.dirname(os.path.abspath(pos[1]))):
            die("usage: grades DIR FILE (DIR: a folder of check --solution --json files; FILE in an existing folder)")
        grades_summary(pos[0], pos[1])
    elif cmd == "report":
        if len(pos) != 1 or not os.path.isdir(pos[0]):
            die("usage: report DIR (a folder of check --json files)")
        report_table(pos[0])
    elif cmd == "start":
        if len(pos) not in (1, 2):
            die("usage: start LESSON [K] [--planted] [--force] [--out=DIR]")
        lesson = find_lesson(pos[0])
        if len(pos) == 2 and not re.fullmatch(r"[1-9]\d*", pos[1]):
            die("exercise number '%s' is not a positive integer" % pos[1])
        k = int(pos[1]) if len(pos) == 2 else None
        out = flags.get("--out", os.environ.get("EXERCISES_DIR", os.path.join(ROOT, "exercises")))
        if out is True or not out:
            die("--out needs a folder")
        lint([lesson])
        start(lesson, k, bool(flags.get("--planted")), bool(flags.get("--force")), os.path.abspath(out))
    elif cmd == "check":
        if len(pos) != 1:
            die("usage: check LESSON [--solution] [--json=FILE] [--no-sanitize] [--runs=R] [--instructor=FILE]")
        lesson = find_lesson(pos[0])
        runs = flags.get("--runs")
        if runs is not None and (runs is True or not re.fullmatch(r"[1-9]", str(runs))):
            die("--runs takes 1..9")
        jp = flags.get("--json")
        if jp is True or jp == "":
            die("--json needs a file name")
        if jp and not os.path.isdir(os.path.dirname(os.path.abspath(jp))):
            die("--json=%s: no such folder" % jp)
        exe = flags.get("--exe")
        if exe is True or (exe and not os.access(exe, os.X_OK)):
            die("--exe=%s: not an executable file" % exe)
        if exe and flags.get("--solution"):
            die("--exe and --solution do not combine")
        inst = flags.get("--instructor")
        if inst is True or inst == "":
            die("--instructor needs a file (lines 'NN: <flags>')")
        check(lesson, bool(flags.get("--solution")), jp, not flags.get("--no-sanitize"), int(runs) if runs else None,
              exe, not flags.get("--no-speed"), (inst, read_instructor(inst, lesson)) if inst else None)


if __name__ == "__main__":
    main(sys.argv[1:])
