#!/usr/bin/env bash
# scripts/check_handouts.sh - the handout test (CTest "handouts"):
#  1. every relative link and image in the Markdown handouts resolves;
#  2. scripts/build_handouts.sh builds every PDF and HTML (skip with --no-build);
#  3. each lesson PDF has pages and its text holds the lesson title,
#     "Exercises" and its nvcc build command; each chapter PDF its title; the
#     course PDF every lesson title.
# Exit 0 pass, 1 fail, 77 when the tools are missing and cannot be installed.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${HANDOUT_DIR:-build/handouts}
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# 1. Links.
for md in README.md docs/*.md lessons/[0-9][0-9]_*/README.md; do
  dir=$(dirname "$md")
  while IFS= read -r target; do
    t=${target%%#*}
    case "$target" in http://*|https://*|mailto:*|\#*) continue ;; esac
    [ -n "$t" ] || continue
    [ -e "$dir/$t" ] || bad "$md links to '$target', which does not exist"
  done < <(grep -oE '\]\([^) ]+\)' "$md" | sed -E 's/^\]\(//; s/\)$//')
done

# 2. Build.
if [ "${1:-}" != "--no-build" ]; then
  mkdir -p "$(dirname "${OUT%/}")"  # a fresh checkout has no build/ yet
  bash scripts/build_handouts.sh >"${OUT%/}.log" 2>&1
  rc=$?
  if [ $rc = 77 ]; then cat "${OUT%/}.log"; exit 77; fi
  [ $rc = 0 ] || { tail -n 30 "${OUT%/}.log"; bad "scripts/build_handouts.sh exited $rc"; }
fi

# 3. PDFs.
# PDF text with all white space removed, so a title that wraps (or breaks after
# a hyphen) still matches: spaces and hyphens are removed from both sides.
# Compared without spaces, hyphens and quote marks (pandoc turns ' and " into typographic ones).
text_of() { pdftotext "$1" - 2>/dev/null | sed "s/[’‘“”'\"]//g" | tr -d '[:space:]-'; }
squeeze() { printf '%s' "$1" | sed "s/[’‘“”'\"]//g" | tr -d '[:space:]-'; }
title_of() { sed -n 's/^# \(.*\)/\1/p' "$1" | head -n 1; }
pages_of() { pdfinfo "$1" 2>/dev/null | awk '/^Pages:/ { print $2 }'; }
course_text=$(text_of "$OUT/pdf/course.pdf")
[ "$(pages_of "$OUT/pdf/course.pdf")" -gt 1 ] 2>/dev/null || bad "course.pdf is missing or has no pages"
for md in lessons/[0-9][0-9]_*/README.md docs/*.md; do
  case "$md" in
    lessons/*) name=${md#lessons/}; name=${name%/README.md} ;;
    docs/*) name=docs-$(basename "$md" .md) ;;
  esac
  pdf="$OUT/pdf/$name.pdf"
  [ -f "$pdf" ] || { bad "$pdf was not built"; continue; }
  pages=$(pages_of "$pdf")
  [ "${pages:-0}" -ge 1 ] || bad "$pdf has no pages"
  [ -f "$OUT/html/$name.html" ] || bad "$OUT/html/$name.html was not built"
  text=$(text_of "$pdf")
  title=$(squeeze "$(title_of "$md")")
  [[ "$text" == *"$title"* ]] || bad "$pdf does not contain its title '$title'"
  [[ "$course_text" == *"$title"* ]] || bad "course.pdf does not contain '$title'"
  if [[ "$md" == lessons/* ]]; then
    exe=$(python3 scripts/lessons.py get "$name" executable)
    [[ "$text" == *"Exercises"* ]] || bad "$pdf has no Exercises section"
    [[ "$text" == *"nvccO3"* ]] || bad "$pdf has no nvcc build command"
    [[ "$text" == *"$exe"* ]] || bad "$pdf never names its executable $exe"
  fi
  echo "ok: $pdf ($pages pages)"
done
[ $fail = 0 ] && echo "check_handouts.sh: all handouts pass" || echo "check_handouts.sh: failures above"
exit $fail
