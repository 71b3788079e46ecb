#!/usr/bin/env bash
# scripts/profile.sh - Nsight Compute on one lesson's key kernel, in seconds.
#
#   scripts/profile.sh LESSON [--rung=N] [--count=K] [-- LESSON_FLAGS...]
#
# LESSON is a number (17), a folder name (17_fusion_roofline) or a program name
# (fusion_roofline). The lesson runs at --quick size (--repeat=1) under ncu, which
# profiles its key kernel (the "profile" of its manifest) with the sections that answer the
# first questions about a kernel: SpeedOfLight (how close to the memory and
# compute peaks), MemoryWorkloadAnalysis (which level of the memory hierarchy,
# how many bytes), Occupancy (how many warps, what limits them) and
# SourceCounters (which source lines stall; the lessons build with -lineinfo).
#   --rung=N    for lessons with a ladder: profile rung N (passed to the lesson)
#   --count=K   profile K launches of the key kernel (default 1), after the manifest's
#               "skip" launches (default 0; lesson 13 skips its three small check shapes)
#   -- FLAGS    more flags for the lesson (e.g. -- --k=512 for lesson 17's sweep)
# Writes build/results/profile-<lesson>.ncu-rep (open it in the Nsight Compute
# GUI) and profile-<lesson>.txt (the same report as text). docs/profiling.md
# walks through one. Environment: BUILD_DIR (default build), NCU (the ncu to use).
# Exit: 0 done, 1 the build or the profile failed, 2 bad usage,
#       77 no ncu or no GPU on this machine.
set -uo pipefail
cd "$(dirname "$0")/.."
usage() { sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; }
bad() { echo "profile.sh: $1" >&2; echo "usage: scripts/profile.sh LESSON [--rung=N] [--count=K] [-- LESSON_FLAGS...] (--help)" >&2; exit 2; }

# The key kernels are the "profile" of the lesson's manifest (lessons/NN_name/lesson.json,
# scripts/lessons.py): "kernels", names (regular expressions) that ncu matches as
# "(^|::)(NAME|NAME...)($|[<(])" against each kernel's function name (with or without a
# namespace, any template arguments, and never a library kernel: CUB's and cuBLAS's names
# start otherwise), and "args", the lesson's flags besides --quick --repeat=1 (a --rung there
# is the default rung; --rung=N replaces it). Lessons with a ladder profile their best rung by
# default; the names cover every rung, so --rung=N profiles another one.
LESSONS="python3 scripts/lessons.py"

LESSON=""; RUNG=""; COUNT=1; EXTRA=()
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --rung=*) RUNG=${1#--rung=}; [[ "$RUNG" =~ ^[0-9]+$ ]] || bad "--rung needs a whole number, got '$RUNG'" ;;
    --count=*) COUNT=${1#--count=}; [[ "$COUNT" =~ ^[1-9][0-9]*$ ]] || bad "--count needs a number >= 1, got '$COUNT'" ;;
    --) shift; EXTRA=("$@"); break ;;
    -*) bad "unknown option '$1'" ;;
    *) [ -z "$LESSON" ] || bad "one lesson at a time ('$LESSON' and '$1')"; LESSON=$1 ;;
  esac
  shift
done
[ -n "$LESSON" ] || bad "which lesson? (e.g. scripts/profile.sh 17)"

# The lesson's folder, from a number, a folder name or a program name.
dir=$($LESSONS find "$LESSON" 2>/dev/null) ||
  bad "no lesson '$LESSON' (lessons: $($LESSONS list | cut -c1-2 | xargs))"
names=$($LESSONS get "$dir" profile.kernels | paste -sd'|')
if [ -z "$names" ]; then
  with=$(for d in $($LESSONS list); do [ -n "$($LESSONS get "$d" profile.kernels)" ] && echo "${d:0:2}"; done | xargs)
  bad "lesson $dir has no key kernel (no \"profile\" in lessons/$dir/lesson.json; lessons with one: $with)"
fi
defaults=$($LESSONS get "$dir" profile.args)
SKIP=$($LESSONS get "$dir" profile.skip); SKIP=${SKIP:-0}  # launches of the key kernel before the one profiled
regex="(^|::)($names)(\$|[<(])"
read -r -a args <<<"$defaults"
if [ -n "$RUNG" ]; then
  grep -q 'add_int("rung"' "lessons/$dir/main.cu" || bad "lesson $dir has no --rung flag"
  kept=(); for a in "${args[@]}"; do [[ "$a" == --rung=* ]] || kept+=("$a"); done
  args=("${kept[@]}" "--rung=$RUNG")
fi

# The tools: ncu, then a GPU.
NCU=${NCU:-$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || true)}
if [ -z "$NCU" ] || [ ! -x "$NCU" ]; then
  echo "profile.sh: SKIP: Nsight Compute (ncu) is not installed here; it comes with the CUDA Toolkit"
  echo "  (apt-get install cuda-nsight-compute-13-0, or the installer from developer.nvidia.com/nsight-compute)"
  exit 77
fi
if ! { command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; }; then
  echo "profile.sh: SKIP: no NVIDIA GPU visible on this machine (nvidia-smi -L lists none)"
  exit 77
fi

BUILD=${BUILD_DIR:-build}
case "$BUILD" in /*) ;; *) BUILD=$(pwd)/$BUILD ;; esac
exe_name=$($LESSONS get "$dir" executable)
exe="$BUILD/bin/$exe_name"
if [ ! -x "$exe" ]; then
  [ -f "$BUILD/CMakeCache.txt" ] || { echo "profile.sh: $exe is not built; build it first: cmake -S . -B $BUILD && cmake --build $BUILD --target $exe_name" >&2; exit 1; }
  echo "profile.sh: building $exe_name"
  cmake --build "$BUILD" --target "$exe_name" >/dev/null || { echo "profile.sh: the build of $exe_name failed" >&2; exit 1; }
fi
RES="$BUILD/results"
mkdir -p "$RES"
report="$RES/profile-$dir"

cmd=("$NCU" --kernel-name "regex:$regex" --launch-skip "$SKIP" --launch-count "$COUNT"
     --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section SourceCounters
     --import-source yes -f -o "$report"
     "$exe" --quick --repeat=1 "${args[@]}" "${EXTRA[@]}")
echo "profile.sh: ${cmd[*]}"
"${cmd[@]}" >"$report.log" 2>&1
rc=$?
if [ $rc = 77 ] || grep -q '^RESULT: SKIP' "$report.log"; then
  echo "profile.sh: SKIP: the lesson found no usable GPU (log: $report.log)"; exit 77
fi
if grep -q 'ERR_NVGPUCTRPERM' "$report.log"; then
  echo "profile.sh: ncu may not read the GPU's performance counters here (ERR_NVGPUCTRPERM): run as root," >&2
  echo "  or load the driver with NVreg_RestrictProfilingToAdminUsers=0 (docs/profiling.md)" >&2
  exit 1
fi
if [ $rc != 0 ] || [ ! -f "$report.ncu-rep" ]; then
  tail -n 20 "$report.log" >&2
  echo "profile.sh: the profile failed (exit $rc; no kernel matched '$regex'?); full log: $report.log" >&2
  exit 1
fi
"$NCU" --import "$report.ncu-rep" --page details >"$report.txt" 2>&1 ||
  { echo "profile.sh: could not export $report.ncu-rep as text" >&2; exit 1; }
echo "profile.sh: report $report.ncu-rep (ncu-ui), text $report.txt, lesson output $report.log"
