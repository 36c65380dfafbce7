#!/usr/bin/env bash
# The executor on a machine with one GPU (docs/design.md §10): builds, runs the `gpu`-labelled tests,
# runs `reshard exec --backend cuda` on a 16 GB scenario (every GPU of it a virtual rank on this one
# device) and `--backend nccl` at world size 1, and prints measured against predicted (reshard
# check). Besides plain transfers (direct) it runs chain ops: domain trees (domain_chain,
# nemo_rl_reshard, in 512 and 256 KiB chunks) and broadcast rings over every destination GPU
# (gather_broadcast), on both backends. Measurements are kept in $RESHARD_GPU_OUT (default:
# build-gpu/measurements).
#   scripts/gpu-check.sh [SCENARIO]      default scenarios/gpu-check-qwen3-8b.yaml (33 GB of shards;
#                                        staging up to the GPU's free memory, reused once it is spent)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${RESHARD_GPU_BUILD_DIR:-$ROOT/build-gpu}
OUT=${RESHARD_GPU_OUT:-$BUILD/measurements}
SCENARIO=${1:-$ROOT/scenarios/gpu-check-qwen3-8b.yaml}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || { echo "gpu-check: no GPU" >&2; exit 1; }
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DRESHARD_BUILD_BENCH=OFF >"$BUILD.configure.log" 2>&1 ||
  { cat "$BUILD.configure.log" >&2; exit 1; }
sed -n '/reshard configure summary/,/^-- $/p' "$BUILD.configure.log"
grep -q "CUDA              : ON" "$BUILD.configure.log" || { echo "gpu-check: CUDA not found at configure time" >&2; exit 1; }
cmake --build "$BUILD" -j"$(nproc)" --target reshard test_exec test_exec_gpu >"$BUILD.build.log" 2>&1 ||
  { tail -60 "$BUILD.build.log" >&2; exit 1; }
BIN=$BUILD/cli/reshard
mkdir -p "$OUT"

echo "== gpu-labelled tests"
(cd "$BUILD" && ctest -L gpu --output-on-failure --timeout 600)

echo "== cuda backend: $(basename "$SCENARIO"), every GPU a virtual rank on device 0"
for strategy in direct domain_chain gather_broadcast nemo_rl_reshard; do
  "$BIN" exec "$SCENARIO" --backend cuda --strategy "$strategy" --timeout 300s -o "$OUT/cuda-$strategy.json"
  "$BIN" check "$OUT/cuda-$strategy.json"
done

echo "== nccl backend at world size 1 (operations are NCCL sends to the same rank; chain ops in waves of chunks)"
for strategy in domain_chain gather_broadcast nemo_rl_reshard; do
  mpirun -np 1 "$BIN" exec "$SCENARIO" --backend nccl --strategy "$strategy" --timeout 300s -o "$OUT/nccl-$strategy.json"
  "$BIN" check "$OUT/nccl-$strategy.json"
done
echo "gpu-check: done; measurements in $OUT"
