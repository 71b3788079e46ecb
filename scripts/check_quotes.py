#!/usr/bin/env python3
"""Handouts quote code that exists: every code block a handout copies from a source file must
still be in that file.

    python3 scripts/check_quotes.py            check every handout; exit 0 pass, 1 fail
    python3 scripts/check_quotes.py --summary  also print the checked blocks and lines per handout
    python3 scripts/check_quotes.py FILE.md    check these handouts only

The handouts are lessons/NN_name/README.md and docs/*.md. A comment on the line above a
fenced block says what the block is:

    <!-- quote: kernels/3_tiled.cuh -->     the block is copied from that file
    <!-- diff: kernels/1_a.cuh kernels/2_b.cuh -->
                                            the block is a diff from the first file to the second
    <!-- sketch -->                         code written for the page; not checked

Paths are relative to the handout's folder, as its links are. A block tagged `cuda`, `cpp`, `c`
or `diff` needs one of the three comments (so no quote goes unchecked); other blocks (shell
commands, program output, drawings) need none.

A quote matches when its lines appear in the file in the same order and contiguous, compared
without trailing white space; each run of lines may be indented differently from the file as a
whole (a statement quoted out of its function), but not line by line (preprocessor lines such
as `#pragma unroll` excepted: the sources keep them in column 0). A line holding only `...`
or `// ...` (an elision) may stand between runs: the runs must then appear in order, with
anything between them. In a diff, the lines that start with ' ' or '-' are a quote of the first
file and those that start with ' ' or '+' a quote of the second (an elision or `@@` line
splits both). The exercise markup in the sources (`// EXERCISE K BEGIN`, `// EXERCISE K END`,
`// HINT:`, `// STUB:` lines; docs/lesson-contract.md) is not part of the code a quote shows.
"""
import glob
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
CODE_TAGS = {"cuda", "cpp", "c++", "c", "cu", "diff"}
MARKER = re.compile(r"^\s*<!--\s*(quote|diff|sketch)\s*:?\s*(.*?)\s*-->\s*$")
FENCE_OPEN = re.compile(r"^(\s*)(`{3,}|~{3,})\s*\{?\s*\.?([\w+-]*)")
ELISION = re.compile(r"^\s*(//\s*)?(\.\.\.|…)\s*$")
# The exercise markup of docs/lesson-contract.md (read by scripts/exercise.py): not lesson code.
EXERCISE_MARKUP = re.compile(r"^\s*//\s*(EXERCISE\s+\S+\s+(BEGIN|END)\b|HINT:|STUB:)")


def handouts():
    return sorted(glob.glob(os.path.join(ROOT, "lessons", "[0-9][0-9]_*", "README.md"))) + sorted(
        glob.glob(os.path.join(ROOT, "docs", "*.md")))


def blocks(lines):
    """Yield (line number of the fence, of its closing fence, tag, body lines, marker or None,
    line number of the marker)."""
    i = 0
    while i < len(lines):
        m = FENCE_OPEN.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, tag = len(m.group(1)), m.group(2), m.group(3).lower()
        close = re.compile(r"^\s*" + re.escape(fence[0]) + "{" + str(len(fence)) + r",}\s*$")
        j = i + 1
        while j < len(lines) and not close.match(lines[j]):
            j += 1
        body = [l[indent:] if l[:indent].strip() == "" else l.lstrip() for l in lines[i + 1:j]]
        k = i - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        mk = MARKER.match(lines[k]) if k >= 0 else None
        yield i + 1, j + 1, tag, body, (mk.group(1), mk.group(2).split()) if mk else None, k + 1
        i = j + 1


def runs(lines):
    """Split a quote into its runs at elision lines; drop blank lines at the ends of each run."""
    out = [[]]
    for line in lines:
        if ELISION.match(line):
            out.append([])
        else:
            out[-1].append(line.rstrip())
    trimmed = []
    for r in out:
        while r and not r[0].strip():
            r = r[1:]
        while r and not r[-1].strip():
            r = r[:-1]
        if r:
            trimmed.append(r)
    return trimmed


def indent(s):
    return len(s) - len(s.lstrip())


def run_at(run, src, i):
    """Does `run` match src[i:] line by line, with one indentation shift for the whole run?"""
    if i + len(run) > len(src):
        return False
    shift = None
    for a, b in zip(run, src[i:i + len(run)]):
        if a.strip() != b.strip():
            return False
        if not a.strip() or a.lstrip().startswith("#"):  # preprocessor lines keep column 0
            continue
        d = indent(b) - indent(a)
        if shift is None:
            shift = d
        elif d != shift:
            return False
    return True


def find(quote, src):
    """None when every run of `quote` is found in order in src, else the run that is not."""
    pos = 0
    for run in runs(quote):
        at = next((i for i in range(pos, len(src)) if run_at(run, src, i)), None)
        if at is None:
            return run, pos
        pos = at + len(run)
    return None


def closest(run, src, start):
    """The longest prefix of `run` that matches somewhere in src[start:] (to show what changed)."""
    best, where = 0, None
    for i in range(start, len(src)):
        n = 0
        while n < len(run) and i + n < len(src) and run[n].strip() == src[i + n].strip():
            n += 1
        if n > best:
            best, where = n, i
    return best, where


def read_source(path):
    """The file's lines without the exercise markup, and the line number of each."""
    with open(path, encoding="utf-8", errors="replace") as f:
        kept = [(n + 1, l.rstrip()) for n, l in enumerate(f.read().split("\n")) if not EXERCISE_MARKUP.match(l)]
    return [l for _, l in kept], [n for n, _ in kept]


def check_quote(quote, path, label, errors):
    if not os.path.isfile(path):
        errors.append(f"{label}: quotes {os.path.relpath(path, ROOT)}, which does not exist")
        return
    src, numbers = read_source(path)
    miss = find(quote, src)
    if miss is None:
        return
    run, start = miss
    n, where = closest(run, src, start)
    rel = os.path.relpath(path, ROOT)
    msg = f"{label}: not in {rel}"
    if where is None:
        msg += f"; its line\n      {run[0].strip()}\n    is nowhere in the file"
        msg += " after the previous run" if start else ""
    elif n == len(run):
        msg += f"; the run at {rel}:{numbers[where]} has its lines, indented differently from one another"
    else:
        msg += f"; the first {n} line(s) of a run match {rel}:{numbers[where]}, then the handout has\n"
        msg += f"      {run[n].strip()}\n    where the file has\n"
        msg += f"      {src[where + n].strip() if where + n < len(src) else '(end of file)'}"
    errors.append(msg)


def diff_sides(body):
    old, new = [], []
    for line in body:
        if ELISION.match(line[1:] if line[:1] in " +-" else line) or line.startswith("@@"):
            old.append("...")
            new.append("...")
        elif line.startswith("-"):
            old.append(line[1:])
        elif line.startswith("+"):
            new.append(line[1:])
        else:
            old.append(line[1:])
            new.append(line[1:])
    return old, new


def check_handout(md, errors):
    """Check one handout; return (blocks checked, quoted lines checked)."""
    with open(md, encoding="utf-8") as f:
        lines = f.read().split("\n")
    rel_md = os.path.relpath(md, ROOT)
    here = os.path.dirname(md)
    n_blocks = n_lines = 0
    used_markers, in_blocks = set(), set()
    for line_no, end_no, tag, body, marker, marker_line in blocks(lines):
        in_blocks.update(range(line_no, end_no + 1))
        label = f"{rel_md}:{line_no}"
        if marker is None:
            if tag in CODE_TAGS:
                errors.append(f"{label}: a `{tag}` block needs <!-- quote: FILE -->, <!-- diff: OLD NEW --> "
                              "or <!-- sketch --> on the line above it")
            continue
        used_markers.add(marker_line)
        kind, paths = marker
        if kind == "sketch":
            continue
        want = 1 if kind == "quote" else 2
        if len(paths) != want:
            errors.append(f"{rel_md}:{marker_line}: <!-- {kind}: --> names {want} file(s), not {len(paths)}")
            continue
        full = [os.path.normpath(os.path.join(here, p)) for p in paths]
        if kind == "quote":
            check_quote(body, full[0], label, errors)
        else:
            old, new = diff_sides(body)
            check_quote(old, full[0], label + " (the - side)", errors)
            check_quote(new, full[1], label + " (the + side)", errors)
        n_blocks += 1
        n_lines += sum(1 for l in body if l.strip() and not ELISION.match(l) and not l.startswith("@@"))
    for k, line in enumerate(lines):
        if MARKER.match(line) and (k + 1) not in used_markers and (k + 1) not in in_blocks:
            errors.append(f"{rel_md}:{k + 1}: a quote marker with no code block after it")
    return n_blocks, n_lines


def main(argv):
    summary = "--summary" in argv
    files = [os.path.abspath(a) for a in argv if not a.startswith("--")] or handouts()
    errors = []
    total_blocks = total_lines = 0
    for md in files:
        b, n = check_handout(md, errors)
        total_blocks += b
        total_lines += n
        if summary and b:
            print(f"{os.path.relpath(md, ROOT)}: {b} blocks, {n} lines")
    for e in errors:
        print("FAIL: " + e)
    verdict = "FAIL" if errors else "PASS"
    print(f"{verdict}: {total_blocks} quoted blocks ({total_lines} lines) in {len(files)} handouts"
          + (f", {len(errors)} problem(s)" if errors else ", all found in their sources"))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
