# shellcheck shell=bash
# scripts/build_lib.sh - configure and build, written once; sourced by run_all.sh, fuzz.sh, test.sh,
# mutants.sh, exercise_starters.sh and exercise_selftest.sh (scripts/exercise.py has its own build()).

# cmake_configure SRC BUILD [CMAKE_ARG...]: a Release configure of SRC in BUILD, with Ninja when there
# is one and BUILD is new (a configured folder keeps its generator: cmake refuses another one).
cmake_configure() {
  local src=$1 build=$2 gen=()
  shift 2
  command -v ninja >/dev/null && [ ! -f "$build/CMakeCache.txt" ] && gen=(-G Ninja)
  cmake -S "$src" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release "$@"
}

# cmake_build BUILD [TARGET...]: builds those targets (every target without any) on every core.
cmake_build() {
  local build=$1
  shift
  if [ $# -gt 0 ]; then
    cmake --build "$build" --parallel "$(nproc)" --target "$@"
  else
    cmake --build "$build" --parallel "$(nproc)"
  fi
}

# build_targets SCRIPT BUILD TARGET...: configure this checkout in BUILD and build only the targets a
# run needs; the logs ($BUILD.configure.log, $BUILD.build.log) stay only on failure.
build_targets() {
  local who=$1 build=$2
  shift 2
  cmake_configure . "$build" >"$build.configure.log" 2>&1 ||
    { cat "$build.configure.log"; echo "$who: configure failed"; return 1; }
  rm -f "$build.configure.log"
  cmake_build "$build" "$@" >"$build.build.log" 2>&1 ||
    { tail -n 40 "$build.build.log"; echo "$who: build failed (full log: $build.build.log)"; return 1; }
  rm -f "$build.build.log"
}
