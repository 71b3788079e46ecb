#!/usr/bin/env bash
# scripts/build_handouts.sh - render every lesson handout and docs chapter to
# HTML and PDF under build/handouts/ (or $HANDOUT_DIR):
#   html/NN_name.html, pdf/NN_name.pdf      one per lesson
#   html/docs-NAME.html, pdf/docs-NAME.pdf  one per docs chapter
#   pdf/course.pdf, html/course.html        everything, with a table of contents
# Needs pandoc and weasyprint (Debian/Ubuntu packages); installs them with
# apt-get when missing and run as root. Fails on missing images or unresolved
# resources.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
OUT=${HANDOUT_DIR:-build/handouts}
case "$OUT" in /*) ;; *) OUT="$ROOT/$OUT" ;; esac
H="$ROOT/scripts/handouts"

missing=()
for tool in pandoc weasyprint pdfinfo pdftotext; do command -v $tool >/dev/null || missing+=($tool); done
if [ ${#missing[@]} -gt 0 ]; then
  bash "$ROOT/scripts/apt_install.sh" "the handouts (missing: ${missing[*]})" pandoc weasyprint poppler-utils || exit 77
fi

embed=(--self-contained)
pandoc --help | grep -q -- '--embed-resources' && embed=(--embed-resources --standalone)

rm -rf "$OUT"
mkdir -p "$OUT/html" "$OUT/pdf" "$OUT/work"
LOG="$OUT/work/warnings.log"
: >"$LOG"

# name<TAB>source, in course order: outline, setup, fundamentals, measuring, lessons, troubleshooting.
sources=()
for d in README setup gpu-fundamentals measuring; do sources+=("docs-$d	docs/$d.md"); done
for f in lessons/[0-9][0-9]_*/README.md; do n=${f#lessons/}; sources+=("${n%/README.md}	$f"); done
sources+=("docs-profiling	docs/profiling.md")
sources+=("docs-troubleshooting	docs/troubleshooting.md")
sources+=("docs-teaching	docs/teaching.md")
sources+=("docs-adding-a-lesson	docs/adding-a-lesson.md")
sources+=("docs-lesson-contract	docs/lesson-contract.md")

title_of() { sed -n 's/^# \(.*\)/\1/p' "$1" | head -n 1; }

render() {  # render NAME SRC LINKEXT OUTFILE
  local name=$1 src=$2 linkext=$3 outfile=$4
  pandoc "$src" -f markdown -t html5 "${embed[@]}" --css="$H/handout.css" --highlight-style=tango \
    --metadata pagetitle="$(title_of "$src")" --lua-filter="$H/links.lua" -M linkext="$linkext" \
    --resource-path="$(dirname "$src")" -o "$outfile" 2>>"$LOG"
}

combined_md="$OUT/work/course.md"
{
  echo "---"
  echo "title: CUDA lessons - course handouts"
  echo "subtitle: From vector add to production-style pipelines"
  echo "---"
} >"$combined_md"

for entry in "${sources[@]}"; do
  name=${entry%%	*}; src=${entry#*	}
  [ -f "$src" ] || { echo "build_handouts.sh: $src is missing" >&2; exit 1; }
  echo "rendering $src"
  render "$name" "$src" html "$OUT/html/$name.html"
  render "$name" "$src" pdf "$OUT/work/$name.pdf.html"
  weasyprint "$OUT/work/$name.pdf.html" "$OUT/pdf/$name.pdf" 2>>"$LOG"
  # The chapter for the combined course: anchor on the first heading, absolute image paths.
  pandoc "$src" -f markdown -t markdown --lua-filter="$H/links.lua" -M combined=1 \
    -M srcdir="$ROOT/$(dirname "$src")" 2>>"$LOG" |
    awk -v id="$name" '!done && /^# / { print $0 " {#h-" id "}"; done = 1; next } { print }' >>"$combined_md"
  printf '\n\n' >>"$combined_md"
done

echo "rendering the combined course"
printf 'h1 { page-break-before: always; break-before: page; }\n' >"$OUT/work/course.css"
pandoc "$combined_md" -f markdown -t html5 "${embed[@]}" --toc --toc-depth=1 --css="$H/handout.css" \
  --css="$OUT/work/course.css" --highlight-style=tango --resource-path="$ROOT" -o "$OUT/html/course.html" 2>>"$LOG"
weasyprint "$OUT/html/course.html" "$OUT/pdf/course.pdf" 2>>"$LOG"

# Missing images, unfetchable resources and dangling anchors are errors.
if grep -iE 'could not fetch|fetch resource|failed to load|not found|no anchor|unable to' "$LOG"; then
  echo "build_handouts.sh: the warnings above point at missing images or broken links (full log: $LOG)" >&2
  exit 1
fi
echo "build_handouts.sh: $(ls "$OUT/pdf" | wc -l) PDFs and $(ls "$OUT/html" | wc -l) HTML files in $OUT"
