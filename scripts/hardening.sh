#!/usr/bin/env bash
# The hardening build (docs/robustness.md): clang-14 with AddressSanitizer + UndefinedBehaviorSanitizer
# and libFuzzer, in build-asan/ (or $RESHARD_ASAN_DIR). Builds model, sim, the fast unit tests and one
# fuzz target per reader; runs the unit tests with ctest, then every fuzz target for FUZZ_SECONDS
# (default 5) from its seed corpus (the shipped files of its kind, or fuzz/corpus/KIND).
# Any sanitizer report, crash, leak, timeout or escaped exception fails the script.
#   scripts/hardening.sh                 build, unit tests, 5 s per target (CI)
#   FUZZ_SECONDS=600 scripts/hardening.sh   a longer run
#   FUZZ_RUNS=1000000 scripts/hardening.sh  a fixed number of executions per target
#   FUZZ_TARGETS="model topology" ...      only these targets
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dir=${RESHARD_ASAN_DIR:-$root/build-asan}
seconds=${FUZZ_SECONDS:-5}
runs=${FUZZ_RUNS:-}
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S "$root" -B "$dir" -DRESHARD_HARDENING=ON -DCMAKE_CXX_COMPILER=clang++-14 -DRESHARD_WITH_CUDA=OFF \
      -DRESHARD_WITH_MPI=OFF "${launcher[@]}" >"$dir.configure.log" 2>&1 || { cat "$dir.configure.log" >&2; exit 1; }
cmake --build "$dir" -j"$(nproc)" >"$dir.build.log" 2>&1 || { tail -60 "$dir.build.log" >&2; exit 1; }
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
(cd "$dir" && ctest --output-on-failure -j"$(nproc)" --timeout 300)

# The shipped files of a target's kind, and fuzz/corpus/KIND where it exists.
seeds() {
  case $1 in
    topology) echo "$root/topologies" ;;
    model) echo "$root/models" ;;
    scenario) echo "$root/scenarios" ;;
    params) echo "$root/params" ;;
  esac
  [[ -d $root/fuzz/corpus/$1 ]] && echo "$root/fuzz/corpus/$1"
  return 0
}
work=$(mktemp -d)
for t in ${FUZZ_TARGETS:-topology model scenario params schedule schedule_bin measurement flows flowdump calibration}; do
  mkdir -p "$work/$t"
  limit=(-max_total_time="$seconds")
  [[ -n $runs ]] && limit=(-runs="$runs")
  log=$work/$t.log
  if ! "$dir/fuzz/fuzz_$t" "${limit[@]}" -max_len=65536 -timeout=60 -rss_limit_mb=2048 -print_final_stats=1 \
       -artifact_prefix="$work/$t-" "$work/$t" $(seeds "$t") >"$log" 2>&1; then
    tail -40 "$log" >&2
    echo "fuzz_$t: FAILED; the input that failed and the log are kept in $work" >&2
    exit 1
  fi
  printf 'fuzz_%-12s %10s executions, %s\n' "$t" "$(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$')" \
         "no crash, leak, timeout or sanitizer report"
done
rm -rf "$work"
