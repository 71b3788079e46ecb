#!/usr/bin/env bash
# scripts/exercise.sh - exercises that grade themselves (docs/teaching.md).
#
#   scripts/exercise.sh start NN [K]      your copy of lesson NN in exercises/NN_name/, the marked
#                                         code replaced by TODOs (all exercises, or only K)
#   scripts/exercise.sh check NN          put the code between your copy's EXERCISE markers into a
#                                         fresh copy of the lesson (a copy edited outside them is not
#                                         graded), build it, verify it at the default size and the
#                                         awkward ones, run memcheck (and racecheck where the code has
#                                         __shared__ memory), grade its speed against the reference
#                                         solution in the same run
#   scripts/exercise.sh check NN --solution --json=FILE    the same for the reference solution
#   scripts/exercise.sh check NN --instructor=FILE         also every size and seed FILE lists for
#                                         lesson NN (lines 'NN: <flags>', '#' comments), which the
#                                         learner's copy does not show: printed as "instructor size K"
#   scripts/exercise.sh report DIR        one table from a folder of check --json files
#   scripts/exercise.sh grades DIR FILE   the reference's grades in DIR as one summary (docs/results/grades/)
#   scripts/exercise.sh list | lint       every exercise; check the markers
#
# Exit: 0 done (check: correct and clean), 1 check failed, 2 bad usage, 77 no GPU.
command -v python3 >/dev/null || { echo "exercise.sh: needs python3" >&2; exit 2; }
exec python3 "$(dirname "$0")/exercise.py" "$@"
