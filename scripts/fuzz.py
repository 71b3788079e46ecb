#!/usr/bin/env python3
"""Draws random valid command lines for the lessons and runs them; every run must PASS.

Called by scripts/fuzz.sh, which builds the lessons first; the space of command lines is
scripts/fuzz_space.txt (its header says how to read it).
"""
import argparse
import concurrent.futures as cf
import fnmatch
import math
import os
import random
import re
import shlex
import subprocess
import sys
import threading
import time

import lessons  # scripts/lessons.py: each lesson's manifest

HERE = os.path.dirname(os.path.abspath(__file__))
TIMEOUT_S = 180  # one drawn run: a hang is stopped here and counted as a failure


def die(msg):
    print(f"fuzz.sh: {msg}", file=sys.stderr)
    sys.exit(2)


def read_space(path):
    """{lesson: [[token, ...], ...]}: the alternatives of every lesson, in file order."""
    space = {}
    with open(path) as f:
        for number, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            lesson, *tokens = line.split()
            for t in tokens:
                if not t.startswith("--"):
                    die(f"{path}:{number}: '{t}' is not a --flag")
                parse_token(t, f"{path}:{number}")  # a malformed generator is caught here, not mid-run
            space.setdefault(lesson, []).append(tokens)
    return space


def parse_token(token, where):
    """(flag, generator or None, optional): '--n=edge(1,9,4)?' -> ('--n', 'edge(1,9,4)', True)."""
    optional = token.endswith("?")
    body = token[:-1] if optional else token
    flag, eq, gen = body.partition("=")
    if eq and not gen:
        die(f"{where}: '{token}' has no value")
    if gen:
        draw_value(gen, random.Random(0), where)
    return flag, (gen if eq else None), optional


def int_range(text, where):
    m = re.fullmatch(r"(-?\d+)\.\.(-?\d+)", text)
    if not m or int(m.group(1)) > int(m.group(2)):
        die(f"{where}: '{text}' is not a range a..b with a <= b")
    return int(m.group(1)), int(m.group(2))


def edge(rng, lo, hi, tiles):
    """A size where kernels break: a power of two or a tile multiple, moved by -2..+2; or log-uniform."""
    pick = rng.random()
    if pick < 0.4:
        powers = [1 << e for e in range(0, 63) if lo <= (1 << e) <= hi]
        base = rng.choice(powers) if powers else lo
    elif pick < 0.8 and tiles:
        t = rng.choice(tiles)
        most = max(1, hi // t)
        base = t * rng.choice([1, 2, 3, rng.randint(1, most), most])
    else:
        base = int(round(math.exp(rng.uniform(math.log(lo), math.log(hi)))))
    return min(hi, max(lo, base + rng.choice([-2, -1, 0, 0, 0, 1, 2])))


def draw_value(gen, rng, where="fuzz_space.txt"):
    m = re.fullmatch(r"\{([^}]*)\}", gen)
    if m:
        return rng.choice(m.group(1).split(","))
    m = re.fullmatch(r"mul\((\d+),([^)]*)\)", gen)
    if m:
        a, b = int_range(m.group(2), where)
        return str(int(m.group(1)) * rng.randint(a, b))
    m = re.fullmatch(r"edge\(([^)]*)\)", gen)
    if m:
        try:
            lo, hi, *tiles = [int(x) for x in m.group(1).split(",")]
        except ValueError:
            die(f"{where}: '{gen}': edge wants integers lo,hi[,tile...]")
        if not 1 <= lo <= hi or any(t < 1 for t in tiles):
            die(f"{where}: '{gen}': edge wants 1 <= lo <= hi and tiles >= 1")
        return str(edge(rng, lo, hi, tiles))
    if ".." in gen:
        a, b = int_range(gen, where)
        return str(rng.randint(a, b))
    if re.search(r"[(){}]", gen):
        die(f"{where}: '{gen}' is not a generator this fuzzer knows")
    return gen


def draw(space, lesson, rng):
    args = ["--quick", "--repeat=1", f"--seed={rng.randrange(1 << 31)}"]
    for token in rng.choice(space[lesson]):
        flag, gen, optional = parse_token(token, lesson)
        if optional and rng.random() < 0.5:
            continue
        args.append(flag if gen is None else f"{flag}={draw_value(gen, rng)}")
    return args


def exe_of(bin_dir, lesson):
    return os.path.join(bin_dir, lessons.manifest(lesson)["executable"])


def run_one(bin_dir, lesson, args, log_dir, index):
    cmd = [exe_of(bin_dir, lesson)] + args
    start = time.time()
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=TIMEOUT_S)
        rc, out = p.returncode, p.stdout.decode(errors="replace")
    except subprocess.TimeoutExpired as e:
        rc, out = "timeout", (e.stdout or b"").decode(errors="replace")
    seconds = time.time() - start
    if rc == 0 and "RESULT: PASS" in out:
        verdict = "PASS"
    elif rc == 77:
        verdict = "SKIP"
    elif rc == 0:
        verdict = "no RESULT: PASS line"
    elif rc == "timeout":
        verdict = f"ran past {TIMEOUT_S} s and was stopped (a hang)"
    elif rc == 1:
        verdict = "FAIL"
    elif rc == 2:
        verdict = "bad input: this drawn line is outside what the lesson accepts (fix scripts/fuzz_space.txt)"
    else:
        verdict = f"crashed (exit {rc})"
    kept = None
    if verdict not in ("PASS", "SKIP"):
        kept = os.path.join(log_dir, f"failure-{index:05d}-{lesson}.log")
        with open(kept, "w") as f:
            f.write(shlex.join(cmd) + "\n" + out)
    return cmd, verdict, seconds, kept, out


def main():
    ap = argparse.ArgumentParser(prog="fuzz.py")
    ap.add_argument("--minutes", type=float, required=True)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--only", default="*")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--space", default=os.path.join(HERE, "fuzz_space.txt"))
    ap.add_argument("--check-space", type=int, default=0,
                    help="draw this many lines per lesson and only check that each is valid input (exit 2 = a fault)")
    a = ap.parse_args()

    space = read_space(a.space)
    lessons = sorted(l for l in space if fnmatch.fnmatch(l, a.only))
    if not lessons:
        die(f"no lesson of {os.path.relpath(a.space)} matches --only={a.only}")
    missing = [l for l in lessons if not os.access(exe_of(a.bin, l), os.X_OK)]
    if missing:
        die(f"not built in {a.bin}: {', '.join(missing)}")
    os.makedirs(a.log, exist_ok=True)
    rng = random.Random(a.seed)

    if a.check_space:
        # Without a GPU every lesson parses its flags (exit 2 on bad input) before its first CUDA
        # call, then exits 77: a drawn line that exits 2 is outside what the lesson accepts.
        bad = 0
        for lesson in lessons:
            for _ in range(a.check_space):
                cmd = [exe_of(a.bin, lesson)] + draw(space, lesson, rng)
                p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   env=dict(os.environ, CUDA_VISIBLE_DEVICES=""))
                if p.returncode == 2:
                    bad += 1
                    print(f"bad input drawn: {shlex.join(cmd)}\n  {p.stdout.decode(errors='replace').strip()}")
                elif p.returncode != 77:
                    bad += 1
                    print(f"expected exit 77 without a GPU, got {p.returncode}: {shlex.join(cmd)}")
        print(f"fuzz.sh: {a.check_space} lines drawn per lesson for {len(lessons)} lessons: "
              f"{'all valid' if bad == 0 else f'{bad} not'}")
        return 0 if bad == 0 else 1

    print(f"fuzz.sh: {len(lessons)} lessons, seed {a.seed}, {a.minutes:g} min, {a.jobs} at a time; "
          f"every run must PASS")
    deadline = time.time() + 60 * a.minutes
    counts = {"PASS": 0, "SKIP": 0}
    failures = []
    per_lesson = {l: 0 for l in lessons}
    lock = threading.Lock()
    index = 0
    last_note = time.time()
    with open(os.path.join(a.log, "runs.txt"), "w") as record, cf.ThreadPoolExecutor(a.jobs) as pool:
        pending = set()
        while True:
            while len(pending) < a.jobs and time.time() < deadline:
                lesson = rng.choice(lessons)
                args = draw(space, lesson, rng)
                index += 1
                pending.add(pool.submit(run_one, a.bin, lesson, args, a.log, index))
            if not pending:
                break
            done, pending = cf.wait(pending, return_when=cf.FIRST_COMPLETED)
            for fut in done:
                cmd, verdict, seconds, kept, out = fut.result()
                lesson = next(l for l in lessons if exe_of(a.bin, l) == cmd[0])
                with lock:
                    per_lesson[lesson] += 1
                    record.write(f"{verdict:<5} {seconds:7.1f} s  {shlex.join(cmd)}\n")
                    if verdict in counts:
                        counts[verdict] += 1
                        if verdict == "SKIP":
                            reason = re.search(r"RESULT: SKIP \((.*)\)", out)
                            record.write(f"      skipped: {reason.group(1) if reason else '?'}\n")
                    else:
                        failures.append(cmd)
                        print(f"FAILED ({verdict}); replay with:\n  {shlex.join(cmd)}\n  (output: {kept})",
                              flush=True)
            if time.time() - last_note > 60:
                last_note = time.time()
                print(f"  {sum(per_lesson.values())} runs, {len(failures)} failed", flush=True)
    total = sum(per_lesson.values())
    print("runs per lesson: " + ", ".join(f"{l[:2]}:{n}" for l, n in per_lesson.items()))
    print(f"fuzz.sh: {total} runs in {a.minutes:g} min (seed {a.seed}): {counts['PASS']} PASS, "
          f"{counts['SKIP']} SKIP, {len(failures)} failed; every command line: {os.path.join(a.log, 'runs.txt')}")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
