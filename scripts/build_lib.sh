# scripts/build_lib.sh - sourced by run_all.sh and fuzz.sh: configure BUILD (Ninja when there is
# one and the folder is new) and build only the targets a run needs; the logs stay only on failure.
build_targets() {  # build_targets SCRIPT BUILD TARGET...
  local who=$1 build=$2 gen=()
  shift 2
  command -v ninja >/dev/null && [ ! -f "$build/CMakeCache.txt" ] && gen=(-G Ninja)
  cmake -S . -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release >"$build.configure.log" 2>&1 ||
    { cat "$build.configure.log"; echo "$who: configure failed"; return 1; }
  rm -f "$build.configure.log"
  cmake --build "$build" --parallel "$(nproc)" --target "$@" >"$build.build.log" 2>&1 ||
    { tail -n 40 "$build.build.log"; echo "$who: build failed (full log: $build.build.log)"; return 1; }
  rm -f "$build.build.log"
}
