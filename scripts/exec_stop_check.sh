#!/usr/bin/env bash
# exec under a stopped process: runs `mpirun -np 16 reshard exec` RUNS times (default 20), each with
# one rank (random, 1..15, and rank 0 once in every 5 runs) stopped by SIGSTOP, and checks that
# every run ends with an error within the timeout + 5 s and that its message names the stopped rank.
#   WHEN=setup (default): stopped right after MPI_Init (--inject stop:RANK): rank 0 names the rank
#                         that never arrived (rank 0 stopped: the others name rank 0);
#   WHEN=init:            stopped before MPI_Init (--inject stop:RANK@init): the others block in
#                         MPI_Init, and a watchdog names the rank from the node's arrival marks.
# Usage: scripts/exec_stop_check.sh [RUNS] [TIMEOUT_S] [WHEN]   (reshard built in build/, or $RESHARD_BIN)
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=${RESHARD_BIN:-$root/build/cli/reshard}
runs=${1:-20}
timeout_s=${2:-10}
when=${3:-setup}
[[ $when == setup || $when == init ]] || { echo "WHEN must be setup or init, got '$when'" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
pass=0
for ((i = 1; i <= runs; i++)); do
  if ((i % 5 == 0)); then rank=0; else rank=$((1 + RANDOM % 15)); fi
  start=$(date +%s.%N)
  out=$(timeout -k 5 $((timeout_s + 60)) mpirun --oversubscribe -np 16 "$bin" exec "$root/scenarios/small-gqa-megatron-vllm.yaml" \
        --strategy direct --backend host --timeout "${timeout_s}s" --inject "stop:$rank$([[ $when == init ]] && echo @init)" 2>&1)
  rc=$?
  took=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  if [[ $when == init ]]; then want="rank $rank never reached MPI_Init"
  elif ((rank == 0)); then want="waiting for rank 0"; else want="rank 0 waited for rank $rank:"; fi
  ok=no
  if ((rc != 0)) && [[ $out == *"$want"* ]] && awk -v t="$took" -v l="$timeout_s" 'BEGIN { exit !(t <= l + 5) }'; then ok=yes; pass=$((pass + 1)); fi
  printf 'run %2d: rank %2d stopped, exit %3d after %5.1f s, named: %s\n' "$i" "$rank" "$rc" "$took" "$ok"
  [[ $ok == yes ]] || echo "$out" | grep -m3 "reshard:" | sed 's/^/    /'
done
echo "$pass of $runs runs (stopped at $when) ended within ${timeout_s} s + 5 s naming the stopped rank"
((pass == runs))
