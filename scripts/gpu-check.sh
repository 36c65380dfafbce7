#!/usr/bin/env bash
# The GPU check (docs/execution.md, "The GPU check"), from the GPU bundle (scripts/gpu-bundle.sh):
# on a machine with one GPU, a driver, and PyTorch (which brings NCCL), nothing else installed.
#   gpu-check.sh [BUNDLE]              every step, results in $OUT (default BUNDLE/out), a summary last;
#                                      PYTHON names the interpreter with torch (default /usr/bin/python3)
#   gpu-check.sh --dry-run [BUNDLE]    here, without a GPU: the bundle's checks and reshard.torch on
#                                      gloo; lists the GPU steps and the size of what they carry
# Steps on the GPU, each timed, each under a deadline (the whole check stops starting steps after
# RESHARD_GPU_CHECK_SECONDS, default 420; each step is stopped after RESHARD_GPU_STEP_SECONDS, default 150):
#   1. the gpu-labelled tests (bin/test_exec_gpu)
#   2. the cuda backend on gpu-check-qwen3-8b (16 virtual GPUs, 33 GB of shards): direct, domain_chain,
#      gather_broadcast, nemo_rl_reshard, each measured and checked against its prediction
#   3. bounded staging: gather_broadcast within 256 MiB per GPU on the cuda backend, checked
#   4. the C++ refit engine (reshard::exec::Refit, transport cuda) on CUDA buffers of its own, three
#      refits each, digest-verified and checked byte by byte: the check scenario with Qwen3-0.6B
#      (2.4 GB of shards), and small-moe-ep within 256 MiB of staging
#   5. the nccl backend at world size 1 (sends to itself): domain_chain, gather_broadcast
#   6. reshard.torch from plan files on CUDA tensors over torch's NCCL (and the device's copy bandwidth)
#   7. the cuda backend's copy rate (Measurement device_copy_bytes over elapsed_s) against a plain
#      device-to-device copy (copy_) of its chunk's size: 512 KiB (direct), 64 MiB (domain_chain chunk=64MiB)
set -uo pipefail
dry=false
[[ ${1:-} == --dry-run ]] && { dry=true; shift; }
B=$(cd "${1:-$(dirname "${BASH_SOURCE[0]}")}" && pwd)
# Results beside the bundle's binaries; run from the source tree's scripts/ (no bin/ there), under
# the build folder, never into the source tree.
if [[ -x $B/bin/reshard ]]; then OUT=${OUT:-$B/out}; else OUT=${OUT:-${RESHARD_BUILD_DIR:-$B/../build}/gpu-check-out}; fi
mkdir -p "$OUT"
BIN=$B/bin/reshard
# Debian's interpreter where there is one, as the build uses (a python3 earlier on PATH, such as a
# pyenv shim, may lack torch); PYTHON=... names another (a GPU machine's own, with torch).
if [[ -z ${PYTHON:-} && -x /usr/bin/python3 ]]; then PY=/usr/bin/python3; else PY=${PYTHON:-python3}; fi
DEADLINE=$((SECONDS + ${RESHARD_GPU_CHECK_SECONDS:-420}))
STEP_SECONDS=${RESHARD_GPU_STEP_SECONDS:-150}  # one step's limit (a hang costs this, not the whole check)
SUMMARY=$OUT/summary.tsv
: >"$SUMMARY"

# step NAME COMMAND...: runs it (its output in $OUT/NAME.log, shown), records status and seconds.
step() {
  local name=$1
  shift
  if ((SECONDS >= DEADLINE)); then
    printf '%s\tskipped\t0\tthe check ran out of time\n' "$name" >>"$SUMMARY"
    echo "== $name: skipped (out of time)"
    return
  fi
  echo "== $name"
  local t0=$SECONDS limit=$((DEADLINE - SECONDS))
  ((limit > STEP_SECONDS)) && limit=$STEP_SECONDS
  timeout --kill-after=5 "$limit" "$@" 2>&1 | tee "$OUT/$name.log"
  local rc=${PIPESTATUS[0]}
  printf '%s\t%s\t%s\t%s\n' "$name" "$([[ $rc == 0 ]] && echo ok || echo "FAILED ($rc)")" $((SECONDS - t0)) \
    "$(tail -1 "$OUT/$name.log" | cut -c1-110)" >>"$SUMMARY"
}

# NCCL: PyTorch's (the nvidia-nccl-cu13 wheel), for the nccl steps.
nccl_dir=$("$PY" - <<'EOF' 2>/dev/null
import importlib.util, os
spec = importlib.util.find_spec("nvidia.nccl")
for d in (list(spec.submodule_search_locations) if spec else []):
    if os.path.exists(os.path.join(d, "lib", "libnccl.so.2")):
        print(os.path.join(d, "lib"))
        break
EOF
)
[[ -n $nccl_dir ]] && export LD_LIBRARY_PATH=$nccl_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export RESHARD_SOURCE_DIR=$B RESHARD_BIN=$BIN PYTHONUNBUFFERED=1
SC=$B/scenarios/gpu-check-qwen3-8b.yaml

if $dry; then
  step bundle-checks bash "$B/gpu-bundle.sh" --check "$B"
  step torch-gloo "$PY" "$B/gpu_check.py" --plans "$B/plans" --out "$OUT" --device cpu --backend gloo --runs 1
  echo "== the GPU steps (not run without a GPU):"
  echo "   gpu-tests; cuda-{direct,domain_chain,gather_broadcast,nemo_rl_reshard} and cuda-staging-256MiB on"
  echo "   $(basename "$SC") ($("$BIN" plan "$SC" --json | "$PY" -c 'import json,sys; j=json.load(sys.stdin); print("%.1f GB to move, %d + %d virtual GPUs" % (j["bytes_needed"] / 1e9, j["source_gpus"], j["destination_gpus"]))'));"
  echo "   cuda-domain_chain-64MiB; refit-cuda-buffers (the C++ engine on CUDA buffers);
   nccl-{domain_chain,gather_broadcast};"
  echo "   torch-nccl on $(ls "$B/plans" | wc -l) plan files; copy bandwidth"
  echo "   the bundle carries $(du -sh "$B" | cut -f1) ($(du -sh "$B/bin" | cut -f1) of binaries, $(du -sh "$B/plans" | cut -f1) of plans)"
else
  # The cuda backend's model (model/device_cost.hpp) predicts each cuda run from this profile:
  # device-check-*.json beside each check-*.json (docs/validation.md, "The engine: predicted against
  # measured"); its copy rate is the copy.json figure of the machine it was made on.
  DEV="$B/params/gpu-check-h200.yaml"
  step gpu nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  step gpu-tests "$B/bin/test_exec_gpu" --gtest_output=json:"$OUT/gpu-tests.json"
  for s in direct domain_chain gather_broadcast nemo_rl_reshard; do
    step "cuda-$s" bash -c "'$BIN' exec '$SC' --backend cuda --strategy $s --timeout 120s -o '$OUT/cuda-$s.json' && \
      '$BIN' check '$OUT/cuda-$s.json' && '$BIN' check '$OUT/cuda-$s.json' --json > '$OUT/check-cuda-$s.json' && \
      '$BIN' check '$OUT/cuda-$s.json' --params '$DEV' --json > '$OUT/device-check-cuda-$s.json'"
  done
  step cuda-staging-256MiB bash -c "'$BIN' exec '$SC' --backend cuda --strategy gather_broadcast --max-staging 256MiB \
    --timeout 120s -o '$OUT/cuda-staging.json' && '$BIN' check '$OUT/cuda-staging.json' && \
    '$BIN' check '$OUT/cuda-staging.json' --json > '$OUT/check-cuda-staging.json' && \
      '$BIN' check '$OUT/cuda-staging.json' --params '$DEV' --json > '$OUT/device-check-cuda-staging.json'"
  step cuda-domain_chain-64MiB bash -c "'$BIN' exec '$SC' --backend cuda --strategy 'domain_chain chunk=64MiB' --timeout 120s \
    -o '$OUT/cuda-chain-64MiB.json' && '$BIN' check '$OUT/cuda-chain-64MiB.json' && \
    '$BIN' check '$OUT/cuda-chain-64MiB.json' --json > '$OUT/check-cuda-chain-64MiB.json' && \
      '$BIN' check '$OUT/cuda-chain-64MiB.json' --params '$DEV' --json > '$OUT/device-check-cuda-chain-64MiB.json'"
  step refit-cuda-buffers "$B/bin/refit_cuda" "$SC" hybrid 3 "model=$B/models/qwen3-0.6b.yaml"
  step refit-cuda-buffers-256MiB "$B/bin/refit_cuda" "$B/scenarios/small-moe-ep.yaml" gather_broadcast 3 268435456
  for s in domain_chain gather_broadcast; do
    step "nccl-$s" bash -c "'$BIN' exec '$SC' --backend nccl --strategy $s --timeout 120s -o '$OUT/nccl-$s.json' && \
      '$BIN' check '$OUT/nccl-$s.json' && '$BIN' check '$OUT/nccl-$s.json' --json > '$OUT/check-nccl-$s.json'"
  done
  step torch-nccl "$PY" "$B/gpu_check.py" --plans "$B/plans" --out "$OUT" --device cuda --backend nccl --runs 3
  step copy-vs-cuda "$PY" - "$OUT" <<'EOF'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
copy = {r["bytes"]: r for r in json.loads((out / "copy.json").read_text())}
for name, size in (("cuda-direct.json", 512 << 10), ("cuda-chain-64MiB.json", 64 << 20)):
    m = json.loads((out / name).read_text())
    moved = sum(o["bytes"] for o in m["ops"])
    rate = m["device_copy_bytes"] / m["elapsed_s"] / 1e9
    ref = copy[min(copy, key=lambda b: abs(b - size))]
    print(f"{name}: {moved / 1e9:.2f} GB moved in {m['elapsed_s'] * 1e3:.1f} ms ({moved / m['elapsed_s'] / 1e9:.0f} GB/s); its copies "
          f"{m['device_copy_bytes'] / 1e9:.2f} GB at {rate:.0f} GB/s = {rate / ref['copy_GBps'] * 100:.0f} % of copy_ of "
          f"{ref['bytes'] / 2**20:g} MiB ({ref['copy_GBps']:.0f} GB/s)")
EOF
fi

echo
echo "== summary ($OUT)"
awk -F'\t' '{printf "%-26s %-12s %5ss  %s\n", $1, $2, $3, $4}' "$SUMMARY"
! grep -q FAILED "$SUMMARY"
