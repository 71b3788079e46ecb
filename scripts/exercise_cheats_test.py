#!/usr/bin/env python3
"""scripts/exercise_cheats_test.py [--gpu BUILD] - every submission in scripts/exercise_cheats/ is caught.

Each cheat (format: scripts/exercise_cheats/README.md) is put into a fresh learner's copy
(exercise.py start NN K) and graded with exercise.py check:
  - without --gpu (CTest exercise_cheats_rules, label cpu): a cheat caught by a rule or by an edit
    outside the regions is refused before anything is built, and the output names that rule; a cheat
    caught at run time is accepted by the rules (so that the GPU test is what catches it);
  - with --gpu BUILD (CTest exercise_cheats, label gpu): the cheats caught at run time are built in
    BUILD and checked (--no-speed --no-sanitize: the catch is at correctness); each must FAIL with
    the named check in the output. Exit 77 without a GPU.
Exit 0 all caught, 1 otherwise.
"""
import glob
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import exercise  # noqa: E402
import lessons  # noqa: E402

EX = [sys.executable, os.path.join(ROOT, "scripts", "exercise.py")]
CHEATS = os.path.join(ROOT, "scripts", "exercise_cheats")
HEADER = re.compile(r"^//\s*([a-z-]+):\s*(.*)$")
KEYS = ("cheat", "lesson", "exercise", "place", "caught-by", "naive")
RUNTIME = {"correctness": "correctness,", "no-result": "no-result", "timeout": exercise.TIMED_OUT}


def read_cheat(path):
    """(header dict, body lines) of one cheat file; raises ValueError for a malformed one."""
    lines = open(path, encoding="utf-8").read().rstrip("\n").split("\n")
    head, n = {}, 0
    while n < len(lines) and HEADER.match(lines[n]):
        m = HEADER.match(lines[n])
        head[m.group(1)] = m.group(2).strip()
        n += 1
    missing = [k for k in KEYS if not head.get(k)]
    if missing:
        raise ValueError("%s: header lacks %s" % (os.path.basename(path), ", ".join(missing)))
    rule = head["caught-by"]
    if rule not in exercise.RULES and rule != "outside" and rule not in RUNTIME:
        raise ValueError("%s: caught-by '%s' is neither a rule of exercise.py, 'outside', nor one of %s"
                         % (os.path.basename(path), rule, ", ".join(RUNTIME)))
    return head, lines[n:]


def apply(head, body, copy_dir):
    """Write the cheat into the learner's copy at copy_dir (exercise.py start's folder of the lesson)."""
    k = int(head["exercise"])
    for path in exercise.source_files(copy_dir):
        lines = open(path, encoding="utf-8").read().split("\n")
        if head["place"] == "region":
            for r in exercise.parse(path):
                if r.k == k:
                    ind = r.indent
                    lines[r.begin + 1:r.end] = [ind + x if x.strip() else x for x in body]
                    open(path, "w", encoding="utf-8").write("\n".join(lines))
                    return
        else:
            at = head["place"][len("before "):]
            for i, x in enumerate(lines):
                if at in x:
                    lines[i:i] = body
                    open(path, "w", encoding="utf-8").write("\n".join(lines))
                    return
    raise ValueError("place '%s' of exercise %d not found in the copy" % (head["place"], k))


def main(argv):
    gpu = argv[1:2] == ["--gpu"] and len(argv) == 3
    if len(argv) > 1 and not gpu:
        print("usage: exercise_cheats_test.py [--gpu BUILD]")
        return 2
    paths = sorted(glob.glob(os.path.join(CHEATS, "*.cu")))
    fails = []
    if len(paths) < 12:
        fails.append("only %d cheats in %s (at least 12)" % (len(paths), CHEATS))
    tmp = tempfile.mkdtemp(prefix="exercise-cheats-")
    build = os.path.abspath(argv[2]) if gpu else os.path.join(tmp, "build")
    ran = 0
    for path in paths:
        name = os.path.basename(path)
        try:
            head, body = read_cheat(path)
        except ValueError as e:
            fails.append(str(e))
            continue
        lesson = lessons.find(head["lesson"])
        rule = head["caught-by"]
        runtime = rule in RUNTIME
        if gpu != runtime and not (not gpu and runtime):
            continue
        root = os.path.join(tmp, name[:-3])
        subprocess.run(EX + ["start", lesson, head["exercise"], "--out=" + root, "--force"], check=True,
                       capture_output=True)
        apply(head, body, os.path.join(root, lesson))
        if runtime and not gpu:
            # The rules let it through: only a run can catch it (the GPU test does).
            _, problems = exercise.splice(os.path.join(exercise.LESSONS, lesson), os.path.join(root, lesson))
            if problems:
                fails.append("%s: caught at run time by '%s', but the rules refuse it first: %s"
                             % (name, rule, "; ".join(exercise.describe(p) for p in problems)))
            else:
                print("ok: %s passes the rules (caught at run time: %s, by the gpu test)" % (name, rule))
            continue
        env = dict(os.environ, EXERCISES_DIR=root, BUILD_DIR=build)
        args = ["check", lesson, "--json=" + os.path.join(tmp, name + ".json")]
        if gpu:
            args += ["--no-speed", "--no-sanitize"]
        p = subprocess.run(EX + args, capture_output=True, text=True, env=env)
        out = p.stdout + p.stderr
        ran += 1
        if gpu and p.returncode == 77:
            print("SKIP: no CUDA GPU")
            return 77
        want = RUNTIME[rule] if runtime else ("outside the exercise regions" if rule == "outside"
                                              else "breaks rule '%s'" % rule)
        named = want in out and (not runtime or re.search(r"^\s*correctness,.*FAIL|%s" % re.escape(want), out, re.M))
        if p.returncode == 1 and named and "exercise: FAIL" in out:
            print("ok: %s (%s) is refused, caught by %s" % (name, head["cheat"][:60], rule))
        else:
            fails.append("%s: exit %d, expected 1 with '%s' named in the output:\n%s" % (name, p.returncode, want, out[-3000:]))
    for f in fails:
        print("FAIL: " + f)
    print("exercise_cheats%s: %d cheat(s) graded, %d unexpected" % (" (gpu)" if gpu else "", ran, len(fails)))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
