#!/usr/bin/env python3
"""scripts/exercise_instructor_test.py - CTest exercise_instructor (no GPU): `exercise.py check
--instructor=FILE` (docs/teaching.md, "Sizes the learner does not see").
  - the file's format: 'LESSON: FLAGS' lines, '#' comments, blank lines, other lessons' lines;
  - a bad file is bad input (exit 2, the line named): missing, unreadable, not 'LESSON: FLAGS', an
    unknown lesson, no flags, a flag the grader sets, flags the lesson rejects (exit 2);
  - every line for the lesson runs with --repeat=1 and must PASS; the output says "instructor size K"
    without its flags, the JSON keeps the flags and the file's line.
A fake lesson 00 in a fake build, and a fake compute-sanitizer, as in exercise_splice_test.py.
Exit 0 pass, 1 fail.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import lessons  # noqa: E402
from exercise_splice_test import fake_build  # noqa: E402

EX = [sys.executable, os.path.join(HERE, "exercise.py")]
fails = []
# FAILs at --n=1001 (a size tuned away), rejects --bogus (exit 2); logs every command line.
FAKE_LESSON = r'''#!/usr/bin/env bash
echo "$*" >>"$FAKE_ARGS"
for x in "$@"; do
  case $x in --json=*) echo '{"key_result":{"fraction":0.5},"variants":[]}' >"${x#--json=}" ;; esac
done
[[ " $* " == *" --bogus "* ]] && { echo "RESULT: ERROR (unknown flag --bogus)"; exit 2; }
[[ " $* " == *" --n=1001 "* ]] && { echo "RESULT: FAIL (c[1000] = 0, expected 3)"; exit 1; }
echo "RESULT: PASS"
'''


def fail(msg):
    print("FAIL: " + msg)
    fails.append(msg)


def write(path, text, mode=0o644):
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    os.chmod(path, mode)


def parsing(tmp):
    """read_instructor in-process: the runs of one lesson, comments and other lessons left out."""
    import exercise
    p = os.path.join(tmp, "sizes.txt")
    write(p, "# the class's hidden sizes\n\n00: --n=999983 --seed=7   # prime\n"
             "  vector_add : --n=3 --threads=96\n01: --seed=5\n00_vector_add: --n='17'\n")
    lesson01 = lessons.find("01")
    got = exercise.read_instructor(p, "00_vector_add"), exercise.read_instructor(p, lesson01)
    want = [(3, ["--n=999983", "--seed=7"]), (4, ["--n=3", "--threads=96"]), (6, ["--n=17"])], [(5, ["--seed=5"])]
    if got == want:
        print("ok: the file's lines for each lesson, comments, blank lines and other lessons left out")
    else:
        fail("parsing: got %s, expected %s" % (got, want))


def check(tmp, env, text, name="inst.txt", extra=()):
    """exercise.py check 00 on the fake lesson with --instructor: (exit, output, JSON or {})."""
    path = os.path.join(tmp, name)
    if text is not None:
        write(path, text)
    js = os.path.join(tmp, "check.json")
    if os.path.exists(js):
        os.remove(js)
    open(env["FAKE_ARGS"], "w").close()
    p = subprocess.run(EX + ["check", "00", "--exe=" + env["FAKE_EXE"], "--no-speed", "--json=" + js,
                             "--instructor=" + path] + list(extra), capture_output=True, text=True, env=env)
    rep = json.load(open(js)) if os.path.exists(js) else {}
    return p.returncode, p.stdout + p.stderr, rep


def bad_files(tmp, env):
    os.makedirs(os.path.join(tmp, "a-folder"), exist_ok=True)
    with open(os.path.join(tmp, "binary.txt"), "wb") as f:
        f.write(b"00: --n=5 \xff\xfe\n")
    unreadable = os.path.join(tmp, "secret.txt")
    write(unreadable, "00: --n=5\n", 0o000)
    cases = [(None, "missing.txt", "cannot read the file"), (None, "a-folder", "cannot read the file"),
             (None, "binary.txt", "cannot read the file"),
             ("00 --n=5\n", "inst.txt", "inst.txt:1: not 'LESSON: FLAGS'"),
             ("# ok\n00: --n=5\n99: --n=5\n", "inst.txt", "inst.txt:3: no lesson '99'"),
             ("00:   # nothing\n", "inst.txt", "inst.txt:1: no flags"),
             ("00: n=5\n", "inst.txt", "'n=5' is not a flag"),
             ("00: --n=5 --json=x.json\n", "inst.txt", "inst.txt:1: --json is set by the grader"),
             ("00: --n='5\n", "inst.txt", "inst.txt:1: No closing quotation"),
             ("00: --n=5\n00: --bogus\n", "inst.txt", "the lesson rejects the flags of line 2 (exit 2: RESULT: ERROR")]
    if os.geteuid() != 0:  # root reads a file whatever its mode
        cases.append((None, "secret.txt", "cannot read the file"))
    for text, name, expect in cases:
        rc, out, _ = check(tmp, env, text, name)
        if rc == 2 and expect in out and "RESULT: ERROR" in out:
            print("ok: bad instructor file %s (%s): exit 2" % (name, expect))
        else:
            fail("bad instructor file (%s): exit %d, output:\n%s" % (expect, rc, out))
    os.chmod(unreadable, 0o644)


def runs(tmp, env):
    awkward = lessons.manifest("00_vector_add")["awkward"]
    text = "# hidden\n00: --n=999983 --seed=7\n01: --seed=5\n\n00: --n=77 --threads=96  # odd block\n"
    rc, out, rep = check(tmp, env, text)
    ran = open(env["FAKE_ARGS"]).read().split("\n")
    checks = {c["size"]: c for c in rep.get("checks", [])}
    inst = [checks.get("instructor size %d" % k, {}) for k in (1, 2)]
    ok = rc == 0 and "--n=999983 --seed=7 --repeat=1" in ran and "--n=77 --threads=96 --repeat=1" in ran and \
        "--seed=5 --repeat=1" not in ran and \
        [c.get("instructor") for c in inst] == [{"line": 2, "args": "--n=999983 --seed=7"},
                                                {"line": 5, "args": "--n=77 --threads=96"}] and \
        all(c.get("pass") for c in inst) and all(a in checks for a in awkward) and \
        "instructor size 1:" in out and "instructor size 2:" in out and "999983" not in out and "--n=77" not in out and \
        rep.get("instructor", {}).get("sizes") == 2 and len(rep["instructor"].get("sha256", "")) == 64
    if ok:
        print("ok: each instructor line runs with --repeat=1 beside the awkward sizes; the output numbers "
              "them, the JSON keeps their flags and lines")
    else:
        fail("instructor runs: exit %d, ran %s, JSON checks %s, output:\n%s" % (rc, ran, rep.get("checks"), out))
    rc, out, rep = check(tmp, env, "00: --n=5\n00: --n=1001 --seed=3\n")
    checks = {c["size"]: c for c in rep.get("checks", [])}
    bad = checks.get("instructor size 2", {})
    line = next((x for x in out.split("\n") if "instructor size 2:" in x), "")
    if rc == 1 and rep.get("result") == "FAIL" and bad.get("pass") is False and "FAIL" in line and \
            "1001" not in out and bad.get("result", "").startswith("RESULT: FAIL") and \
            bad.get("instructor", {}).get("args") == "--n=1001 --seed=3" and checks.get("instructor size 1", {}).get("pass"):
        print("ok: a copy that fails an instructor size FAILs; the output does not show the size, the JSON does")
    else:
        fail("instructor size failing: exit %d, JSON %s, output:\n%s" % (rc, rep, out))
    rc, out, rep = check(tmp, env, "01: --seed=5\n")
    if rc == 0 and "has no line for lesson 00_vector_add" in out and not any(
            c["size"].startswith("instructor") for c in rep.get("checks", [])):
        print("ok: a file without a line for the lesson: a note, the published sizes only")
    else:
        fail("no line for the lesson: exit %d, output:\n%s" % (rc, out))


def main():
    if not shutil.which("cmake"):
        print("FAIL: the fake build needs cmake")
        return 1
    tmp = tempfile.mkdtemp()
    try:
        parsing(tmp)
        _, exe_path, env = fake_build(tmp, FAKE_LESSON)
        env.update(FAKE_EXE=exe_path, FAKE_ARGS=os.path.join(tmp, "args.log"))
        bad_files(tmp, env)
        runs(tmp, env)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("exercise_instructor: %s" % ("ok" if not fails else "%d failure(s)" % len(fails)))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
