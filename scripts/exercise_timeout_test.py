#!/usr/bin/env python3
"""scripts/exercise_timeout_test.py - the TIMEOUT marker and the planted answers' caught-by line
(CTest exercise_timeout, label cpu, no GPU): parse() reads and refuses them, start's copies keep the
TIMEOUT line and leave the caught-by line out, and a run past the timeout ends, with its children,
exit 124 and the timeout line naming the message."""
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import exercise  # noqa: E402

fails = []


def expect(cond, what):
    print(("ok: " if cond else "FAIL: ") + what)
    if not cond:
        fails.append(what)


tmp = tempfile.mkdtemp(prefix="exercise-timeout-")
good = os.path.join(tmp, "good.cuh")
open(good, "w").write("\n".join([
    "__global__ void k(int* p) {",
    "    // EXERCISE 1 BEGIN: wait on the barrier's phase",
    "    // HINT: the phase flips each round",
    "    // TIMEOUT: 20 the empty barrier's parity is not inverted: the producer waits forever",
    "    p[0] = 1;",
    "    // EXERCISE 1 END",
    "}", ""]))
r = exercise.parse(good)[0]
expect(r.timeout == (20, "the empty barrier's parity is not inverted: the producer waits forever"),
       "TIMEOUT is read: %s" % (r.timeout,))
for bad, why in (("// TIMEOUT: 20", "no message"), ("// TIMEOUT: soon hangs", "no number"),
                 ("// TIMEOUT: 0 hangs", "zero seconds"), ("// TIMEOUT 20 hangs", "no colon")):
    path = os.path.join(tmp, "bad.cuh")
    open(path, "w").write("// EXERCISE 1 BEGIN: t\n%s\nx;\n// EXERCISE 1 END\n" % bad)
    try:
        exercise.parse(path)
        expect(False, "a malformed TIMEOUT (%s) is refused" % why)
    except ValueError as e:
        expect("malformed TIMEOUT" in str(e), "a malformed TIMEOUT (%s) is refused: %s" % (why, e))
path = os.path.join(tmp, "two.cuh")
open(path, "w").write("// EXERCISE 1 BEGIN: t\n// TIMEOUT: 5 a\n// TIMEOUT: 6 b\nx;\n// EXERCISE 1 END\n")
try:
    exercise.parse(path)
    expect(False, "two TIMEOUT lines in one region are refused")
except ValueError as e:
    expect("one at most" in str(e), "two TIMEOUT lines in one region are refused")

regions = exercise.parse(good)
text = exercise.starter_text(good, regions, 1, None)
expect("// TIMEOUT: 20 the empty barrier" in text and "p[0] = 1;" not in text,
       "the unsolved copy keeps the TIMEOUT line, not the solution")
planted = ["// caught-by: timeout", "p[0] = 2;"]
kept = [x for x in planted if not exercise.CAUGHT_BY.match(x)]
text = exercise.starter_text(good, regions, 1, kept)
expect("caught-by" not in text and "p[0] = 2;" in text and "// TIMEOUT: 20" in text,
       "the planted copy keeps the TIMEOUT line and leaves the caught-by line out")
expect(exercise.parse(os.path.join(tmp, "good.cuh"))[0].timeout is not None and
       len(exercise.region_violations(kept, 1)) == 0, "the planted lines break no rule")

# A run that hangs (a child that sleeps too) ends at the timeout, its process group killed.
exercise.RUN_TIMEOUT = (2, "the barrier's phase")
log = os.path.join(tmp, "hang.log")
t = time.time()
rc, _ = exercise.run_program(["bash", "-c", "sleep 60 & echo started; sleep 60"], log)
took = time.time() - t
line = exercise.result_line(log)
expect(rc == 124 and took < 20, "a hanging run ends at its timeout (exit %d after %.1f s)" % (rc, took))
expect(line == "run timed out after 2 s: the barrier's phase", "the log's verdict names the message: %s" % line)
log = os.path.join(tmp, "silent.log")
rc, _ = exercise.run_program(["bash", "-c", "echo working; exit 0"], log)
expect(rc == 0 and exercise.result_line(log).startswith("no RESULT line"),
       "a run that exits 0 without a RESULT line has none (check FAILs it: no-result)")
print("exercise_timeout: %d unexpected" % len(fails))
sys.exit(1 if fails else 0)
