#!/usr/bin/env python3
"""Every lesson reads in one sitting: main.cu at most 300 lines, main() at most 150.

    python3 scripts/check_sizes.py    (exit 0 when every lesson is within both limits)

main() is counted from its `int main(` line to the closing brace in column 0, both included.
"""
import glob
import os
import re
import sys

MAX_FILE, MAX_MAIN = 300, 150


def main_lines(lines):
    start = next((i for i, l in enumerate(lines) if re.match(r"int main\s*\(", l)), None)
    if start is None:
        return 0
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("}")), len(lines) - 1)
    return end - start + 1


def main():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    over = []
    files = sorted(glob.glob(os.path.join(root, "lessons", "[0-9][0-9]_*", "main.cu")))
    for path in files:
        lines = open(path).read().splitlines()
        name = os.path.relpath(path, root)
        if len(lines) > MAX_FILE:
            over.append(f"{name}: {len(lines)} lines (at most {MAX_FILE})")
        m = main_lines(lines)
        if m > MAX_MAIN:
            over.append(f"{name}: main() has {m} lines (at most {MAX_MAIN})")
    for o in over:
        print(o)
    print(f"check_sizes: {len(files)} lessons, {len(over)} over a limit")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
