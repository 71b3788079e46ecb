#!/usr/bin/env python3
"""scripts/exercise_splice_test.py - CTest exercise_splice (no GPU): `exercise.py check` grades only
the marked code (docs/teaching.md, "What a grade proves").
  - every lesson's unsolved copy, every planted answer and every reference solution splice back
    into the lesson unchanged outside the regions: what check builds is the copy `start` wrote;
  - a copy edited outside the regions is not graded (exit 1, before anything is built), and the
    message and the JSON name the file and the lines;
  - a region with #include, verify::, a RESULT line, exit() ... is not graded, the rule named;
  - a copy whose regions alone changed splices to the lesson with those regions, nothing else;
  - where the program fails its check, the sanitizer lines say "not run: the program failed"
    (a fake lesson and a fake compute-sanitizer), and errors the tool finds are still a FAIL.
Exit 0 pass, 1 fail.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import exercise  # noqa: E402
import lessons  # noqa: E402

EX = [sys.executable, os.path.join(HERE, "exercise.py")]
fails = []


def fail(msg):
    print("FAIL: " + msg)
    fails.append(msg)


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def write(path, text):
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def start(tmp, lesson, *args):
    out = os.path.join(tmp, "copies-" + "-".join(a.strip("-") for a in args) if args else os.path.join(tmp, "copies"))
    subprocess.run(EX + ["start", lesson] + list(args) + ["--out=" + out, "--force"], check=True,
                   stdout=subprocess.DEVNULL)
    return os.path.join(out, lesson)


def splices_to_itself(lesson, copy, what):
    """The copy has no problem, and the spliced text of every file is the copy's own."""
    texts, problems = exercise.splice(os.path.join(exercise.LESSONS, lesson), copy)
    if problems:
        fail("%s, %s: %s" % (lesson, what, "; ".join(exercise.describe(p) for p in problems)))
        return
    for rel, text in texts.items():
        if text != read(os.path.join(copy, rel)):
            fail("%s, %s: the spliced %s is not the copy's" % (lesson, what, rel))


def every_lesson(tmp):
    n = 0
    for lesson in sorted({lesson for lesson, _ in exercise.first_regions()}):
        pristine = os.path.join(exercise.LESSONS, lesson)
        splices_to_itself(lesson, pristine, "the reference solution")
        splices_to_itself(lesson, start(tmp, lesson), "the unsolved copy")
        for k in sorted({r.k for r in exercise.lesson_regions(lesson)}):
            if os.path.exists(os.path.join(pristine, "exercises", "%d.planted" % k)):
                splices_to_itself(lesson, start(tmp, lesson, str(k), "--planted"), "planted answer %d" % k)
        n += 1
    print("ok: %d lessons: reference, unsolved and planted copies splice to themselves" % n)


def check(tmp, copies, lesson="00"):
    """exercise.py check on the copies in `copies`: (exit code, output, JSON report)."""
    js = os.path.join(tmp, "check.json")
    if os.path.exists(js):
        os.remove(js)
    env = dict(os.environ, EXERCISES_DIR=copies, BUILD_DIR=os.path.join(tmp, "no-build"))
    p = subprocess.run(EX + ["check", lesson, "--json=" + js], capture_output=True, text=True, env=env)
    rep = json.load(open(js)) if os.path.exists(js) else {}
    return p.returncode, p.stdout + p.stderr, rep


def refused(tmp, copies, expect, name):
    """check refuses the copy before building (exit 1, nothing built), its output holding every
    string of expect, and the JSON saying it was not graded."""
    rc, out, rep = check(tmp, copies)
    ok = rc == 1 and all(e in out for e in expect) and rep.get("result") == "FAIL" and \
        rep.get("grade") is None and "not graded" in rep.get("why", "") and rep.get("not_graded") and \
        not os.path.exists(os.path.join(tmp, "no-build"))
    if ok:
        print("ok: %s: not graded (%s)" % (name, "; ".join(expect)))
    else:
        fail("%s: exit %d, expected 1 with %s and a 'not graded' JSON; output:\n%s\nJSON: %s" % (name, rc, expect, out, rep))
    return rep


def region(lesson="00_vector_add", k=1):
    return next(r for r in exercise.lesson_regions(lesson) if r.k == k)


def edited_copies(tmp):
    lesson = "00_vector_add"
    r = region(lesson)
    rel = os.path.relpath(r.path, os.path.join(exercise.LESSONS, lesson))
    base = start(tmp, lesson)
    # The unsolved copy's region 1 starts at the lesson's line r.begin + 1 too (what comes before is
    # the lesson's own text); its END line is 1 + hints + stubs + 1 lines further.

    def fresh(name):
        d = os.path.join(tmp, name)
        shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(base, os.path.join(d, lesson))
        return d, os.path.join(d, lesson, rel)

    # 1. A line changed before the region, one added after it: both reported, with the copy's lines.
    d, path = fresh("outside")
    lines = read(path).split("\n")
    m_regions = exercise.parse(path)
    changed = r.begin - 2  # two lines above the BEGIN marker (0-based)
    lines[changed] = lines[changed] + " // and more"
    after = m_regions[-1].end + 1  # just after the last END marker of the copy (0-based)
    lines.insert(after + 1, 'printf("RESULT: PASS\\n");')
    write(path, "\n".join(lines))
    rep = refused(tmp, d, ["%s:%d: changed outside the exercise regions (the lesson's line %d)" % (rel, changed + 1, changed + 1),
                           "%s:%d: added outside the exercise regions" % (rel, after + 2)],
                  "an edit before a region and a line added after the regions")
    lines_reported = sorted(x for p in rep.get("not_graded", []) for x in p.get("lines", []))
    if lines_reported != [changed + 1, after + 2]:
        fail("outside edits: the JSON reports lines %s, expected %s" % (lines_reported, [changed + 1, after + 2]))

    # 2. Trailing whitespace outside the regions is not an edit.
    d, path = fresh("spaces")
    write(path, "\n".join(x + "  " if x.strip() else x for x in read(path).split("\n")))
    texts, problems = exercise.splice(os.path.join(exercise.LESSONS, lesson), os.path.join(d, lesson))
    if problems:
        fail("trailing spaces outside the regions: %s" % [exercise.describe(p) for p in problems])
    else:
        print("ok: trailing whitespace outside the regions is ignored")

    # 3. Rules: each forbidden line inside the region, alone, is refused with its rule.
    for code, rule in [("#include <cublas_v2.h>", "preprocessor"), ("#define N 1", "preprocessor"),
                       ("verify::compare_floats(c, c, n);", "verification"), ("lesson::Report rep;", "harness"),
                       ("report.note(\"x\");", "harness"), ("exit(0);", "exit"), ("std::exit(0);", "exit"),
                       ("printf(\"RESULT: PASS\\n\");", "result-line"), ("if (inject_fault) return;", "fault-injection"),
                       ("using namespace verify;", "namespace"), ("} void f() {", "braces")]:
        d, path = fresh("rule")
        lines = read(path).split("\n")
        end = exercise.parse(path)[0].end
        lines.insert(end, "    " + code)
        write(path, "\n".join(lines))
        refused(tmp, d, ["%s:%d: exercise 1 breaks rule '%s'" % (rel, end + 1, rule)], "a region with '%s'" % code)

    # 4. Markers taken out: not graded, nothing to splice.
    d, path = fresh("markers")
    write(path, "\n".join(x for x in read(path).split("\n") if "EXERCISE 1 " not in x))
    refused(tmp, d, ["the copy marks exercises", "keep every '// EXERCISE K BEGIN'"], "a copy without its markers")


def region_edits(tmp):
    """A copy with only its regions changed: spliced, the lesson with those regions and nothing else."""
    lesson = "00_vector_add"
    pristine = os.path.join(exercise.LESSONS, lesson)
    base = start(tmp, lesson)
    d = os.path.join(tmp, "solved")
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(base, os.path.join(d, lesson))
    expected, bodies = {}, {}
    for r in exercise.lesson_regions(lesson):
        rel = os.path.relpath(r.path, pristine)
        bodies.setdefault(rel, []).append(["    // learner's answer %d" % r.k, "    int mine_%d = 0;" % r.k])
    for rel, new in bodies.items():
        # The expected text, built without the splicer: the lesson's lines, each region's body
        # replaced by the new one.
        p_lines, out, regs = read(os.path.join(pristine, rel)).split("\n"), [], exercise.parse(os.path.join(pristine, rel))
        at = 0
        for r, body in zip(regs, new):
            out += p_lines[at:r.begin + 1] + body
            at = r.end
        out += p_lines[at:]
        expected[rel] = "\n".join(out)
        # The learner's copy: the starter, each TODO region's body replaced by the same new one.
        c_path = os.path.join(d, lesson, rel)
        c_lines, out, at = read(c_path).split("\n"), [], 0
        for r, body in zip(exercise.parse(c_path), new):
            out += c_lines[at:r.begin + 1] + body
            at = r.end
        out += c_lines[at:]
        write(c_path, "\n".join(out))
    write(os.path.join(d, lesson, "scratch.cu"), "int unused;\n")  # not the lesson's: not built
    texts, problems = exercise.splice(pristine, os.path.join(d, lesson))
    if problems:
        fail("region edits only: %s" % [exercise.describe(p) for p in problems])
        return
    tree = os.path.join(tmp, "spliced", lesson)
    exercise.write_tree(pristine, texts, tree)
    want = {rel: read(os.path.join(pristine, rel)) for rel in exercise.lesson_sources(pristine)}
    want.update(expected)
    got = {rel: read(os.path.join(tree, rel)) for rel in exercise.lesson_sources(tree)}
    if got != want:
        fail("region edits only: the spliced tree differs from the lesson with those regions in: %s"
             % sorted(k for k in set(got) | set(want) if got.get(k) != want.get(k)))
        return
    before = {rel: os.stat(os.path.join(tree, rel)).st_mtime_ns for rel in got}
    exercise.write_tree(pristine, texts, tree)
    if any(os.stat(os.path.join(tree, rel)).st_mtime_ns != t for rel, t in before.items()):
        fail("region edits only: writing the same splice again touched files (a rebuild each check)")
    print("ok: a copy with region edits only splices to the lesson with those regions (%d file(s)); "
          "scratch.cu left out" % len(expected))


FAKE_SANITIZER = r'''#!/usr/bin/env bash
# compute-sanitizer stand-in: runs the program; FAKE_SAN_ERRORS errors found (exit 99), else its exit.
while [ $# -gt 0 ]; do case $1 in --tool|--error-exitcode|--print-limit) shift 2 ;; --*) shift ;; *) break ;; esac; done
"$@"; rc=$?
n=${FAKE_SAN_ERRORS:-0}
echo "========= ERROR SUMMARY: $n errors"
[ "$n" = 0 ] && exit $rc || exit 99
'''
FAKE_LESSON = r'''#!/usr/bin/env bash
# FAKE=quick: FAILs its check at --quick size; otherwise PASSes and writes a report.
for x in "$@"; do
  case $x in --json=*) echo '{"key_result":{"fraction":0.5},"variants":[]}' >"${x#--json=}" ;; esac
done
[ "${FAKE:-}" = quick ] && [[ "$*" == *--quick* ]] && { echo "RESULT: FAIL (c[7] = 0, expected 3)"; exit 1; }
echo "RESULT: PASS"
'''


def fake_build(tmp, lesson_script):
    """A build folder whose lesson 00 is LESSON_SCRIPT and whose compute-sanitizer is
    FAKE_SANITIZER: (build folder, path of the lesson, environment that finds both)."""
    src, b = os.path.join(tmp, "fake-src"), os.path.join(tmp, "fake-build")
    exe = lessons.manifest("00_vector_add")["executable"]
    os.makedirs(src)
    os.makedirs(os.path.join(b, "bin"))
    write(os.path.join(src, "CMakeLists.txt"), "cmake_minimum_required(VERSION 3.20)\nproject(fake NONE)\n"
          "add_custom_target(%s)\nadd_custom_target(gpu_check)\n" % exe)
    subprocess.run(["cmake", "-S", src, "-B", b], check=True, capture_output=True)
    tools = os.path.join(tmp, "fake-tools")
    os.makedirs(tools)
    for path, text in ((os.path.join(b, "bin", "gpu_check"), '#!/bin/sh\necho "GPU 0: fake"\n'),
                       (os.path.join(b, "bin", exe), lesson_script),
                       (os.path.join(tools, "compute-sanitizer"), FAKE_SANITIZER)):
        write(path, text)
        os.chmod(path, 0o755)
    env = dict(os.environ, BUILD_DIR=b, PATH=tools + os.pathsep + os.environ["PATH"])
    return b, os.path.join(b, "bin", exe), env


def sanitizer_lines(tmp):
    if not shutil.which("cmake"):
        fail("the sanitizer messages need cmake (the fake build)")
        return
    b, exe_path, base = fake_build(tmp, FAKE_LESSON)

    def run(fake, errors):
        js = os.path.join(tmp, "san.json")
        env = dict(base, FAKE=fake, FAKE_SAN_ERRORS=str(errors))
        p = subprocess.run(EX + ["check", "00", "--exe=" + exe_path, "--no-speed", "--json=" + js],
                           capture_output=True, text=True, env=env)
        return p.returncode, p.stdout + p.stderr, json.load(open(js))

    rc, out, rep = run("quick", 0)
    lines = [x for x in out.split("\n") if "compute-sanitizer" in x]
    if rc == 1 and len(lines) == 2 and all("not run: the program failed" in x for x in lines) and \
            "FAIL (ERROR SUMMARY" not in out and all(s["verdict"] == "not run: the program failed" for s in rep["sanitizers"]):
        print("ok: a program that fails its check: the sanitizer lines say 'not run: the program failed'")
    else:
        fail("program failed: exit %d, sanitizer lines %s" % (rc, lines))
    rc, out, rep = run("", 2)
    if rc == 1 and re.search(r"memcheck: +FAIL \(ERROR SUMMARY: 2 error", out) and \
            all(s["verdict"] == "errors" for s in rep["sanitizers"]):
        print("ok: a program that passes with errors under the tool: FAIL (ERROR SUMMARY: 2 error...)")
    else:
        fail("errors found: exit %d, output:\n%s" % (rc, out))
    rc, out, rep = run("", 0)
    if rc == 0 and all(s["verdict"] == "clean" for s in rep["sanitizers"]):
        print("ok: a program that passes with no error: the sanitizers are clean")
    else:
        fail("clean: exit %d, output:\n%s" % (rc, out))


def main():
    tmp = tempfile.mkdtemp()
    try:
        every_lesson(tmp)
        edited_copies(tmp)
        region_edits(tmp)
        sanitizer_lines(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("exercise_splice: %s" % ("ok" if not fails else "%d failure(s)" % len(fails)))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
