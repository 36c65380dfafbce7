#!/usr/bin/env bash
# The GPU bundle (docs/execution.md, "The GPU check"): everything the GPU check runs, in one folder
# that needs nothing but glibc, a GPU driver (libcuda) and, for the nccl steps, NCCL's library (the
# GPU machine's PyTorch brings it) -- no Debian package, no compiler, no network:
#   bin/reshard         reshard-gpu: the command without MPI; yaml-cpp, the C++ and CUDA runtimes static
#   bin/test_exec_gpu   the gpu-labelled tests, linked the same way
#   bin/refit_cuda      the C++ refit engine on CUDA buffers of its own
#   scenarios/ models/ topologies/ params/   the shipped data
#   reshard/            the Python package's pure-Python part (reshard.torch, reshard.adapters)
#   plans/              refit plan files (every GPU's program) that reshard.torch runs there
#   gpu_check.py, gpu-check.sh
# Builds what is missing (scripts/bootstrap.sh's build), assembles the folder, checks it, and prints
# its path as the last line.
#   scripts/gpu-bundle.sh            build, assemble, check
#   scripts/gpu-bundle.sh --check [BUNDLE]   the checks only, on an assembled bundle (gpu-check.sh --dry-run)
# The checks: its size is under 40 MiB; its binaries name no shared library beyond glibc's (readelf
# NEEDED); and its CPU paths (`reshard backends`, `plan`, `exec --dry-run`) run under `env -i` with
# no library folder on LD_LIBRARY_PATH but the bundle's own (empty) lib/.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${RESHARD_BUILD_DIR:-$ROOT/build}
BUNDLE=${RESHARD_GPU_BUNDLE:-$BUILD/gpu-bundle}
check_only=false
if [[ ${1:-} == --check ]]; then
  check_only=true
  [[ -n ${2:-} ]] && BUNDLE=$(cd "$2" && pwd)
fi

fail() { echo "gpu-bundle: $*" >&2; exit 1; }

if ! $check_only; then
  cmake --build "$BUILD" -j"$(nproc)" --target reshard reshard-gpu test_exec_gpu_bundle refit_cuda >/dev/null ||
    fail "cannot build reshard-gpu, test_exec_gpu_bundle and refit_cuda in $BUILD (needs CUDA at configure time)"
  rm -rf "$BUNDLE"
  mkdir -p "$BUNDLE/bin" "$BUNDLE/lib" "$BUNDLE/plans" "$BUNDLE/reshard"
  cp "$BUILD/cli/reshard-gpu" "$BUNDLE/bin/reshard"
  cp "$BUILD/tests/test_exec_gpu_bundle" "$BUNDLE/bin/test_exec_gpu"
  cp "$BUILD/tests/refit_cuda" "$BUNDLE/bin/refit_cuda"
  strip --strip-debug "$BUNDLE/bin/reshard" "$BUNDLE/bin/test_exec_gpu" "$BUNDLE/bin/refit_cuda"
  cp -r "$ROOT/scenarios" "$ROOT/models" "$ROOT/topologies" "$ROOT/params" "$BUNDLE/"
  cp "$ROOT/reshard/__init__.py" "$ROOT/reshard/torch.py" "$ROOT/reshard/adapters.py" "$BUNDLE/reshard/"
  cp "$ROOT/scripts/gpu_check.py" "$ROOT/scripts/gpu-check.sh" "$ROOT/scripts/gpu-bundle.sh" "$BUNDLE/"
  # Refit plan files, written by the bundle's own binary: every rank's program, run by reshard.torch.
  # (The small scenarios: a plan file holds every copy run, 113 MB for the 33 GB gpu-check scenario.)
  for spec in "small-moe-ep:auto" "small-moe-ep:gather_broadcast" "small-gqa-megatron-vllm:domain_chain"; do
    scenario=${spec%%:*} strategy=${spec#*:}
    "$BUNDLE/bin/reshard" plan "$BUNDLE/scenarios/$scenario.yaml" --strategy "$strategy" --programs \
      -o "$BUNDLE/plans/$scenario-$strategy.json" >/dev/null || fail "cannot write the plan of $spec"
  done
fi

[[ -d $BUNDLE/bin ]] || fail "no bundle in $BUNDLE (run scripts/gpu-bundle.sh first)"
# Size.
bytes=$(du -sb "$BUNDLE" | cut -f1)
((bytes < 40 * 1024 * 1024)) || fail "$BUNDLE holds $bytes bytes, more than 40 MiB"
# Dynamic dependencies: glibc's libraries only (libcuda and libnccl are loaded at run time).
allowed='^(libc\.so\.6|libm\.so\.6|libdl\.so\.2|libpthread\.so\.0|librt\.so\.1|ld-linux-x86-64\.so\.2|libstdc\+\+\.so\.6|libgcc_s\.so\.1|libcuda\.so\.1|libnccl\.so\.2)$'
for bin in "$BUNDLE/bin/reshard" "$BUNDLE/bin/test_exec_gpu" "$BUNDLE/bin/refit_cuda"; do
  while read -r lib; do
    [[ $lib =~ $allowed ]] || fail "$(basename "$bin") needs $lib, which the GPU machine does not have"
  done < <(readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  if ldd "$bin" | grep -Eq "yaml-cpp|boost|mpi|libcudart|libnccl|libstdc"; then
    fail "$(basename "$bin") resolves a library the GPU machine lacks: $(ldd "$bin" | grep -E 'yaml-cpp|boost|mpi|cudart|nccl|libstdc')"
  fi
done
# CPU paths, with nothing of this machine's library folders reachable but glibc.
run() { env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH="$BUNDLE/lib" HOME=/tmp "$@"; }
backends=$(run "$BUNDLE/bin/reshard" backends) || fail "reshard backends failed"
# Where this machine has NCCL's library (CUDA's folder here), the bundle loads it and reads its
# version through its entry points, as the nccl steps will there.
if ldconfig -p | grep -q libnccl.so.2; then
  grep -q "^nccl library: NCCL 2\." <<<"$backends" || fail "the bundle cannot load NCCL's library here: $(grep '^nccl library' <<<"$backends")"
fi
run "$BUNDLE/bin/reshard" plan "$BUNDLE/scenarios/small-moe-ep.yaml" --strategy auto >/dev/null || fail "reshard plan failed"
run "$BUNDLE/bin/reshard" exec "$BUNDLE/scenarios/gpu-check-qwen3-8b.yaml" --strategy domain_chain --backend cuda \
  --dry-run >/dev/null || fail "reshard exec --dry-run failed"
run "$BUNDLE/bin/test_exec_gpu" --gtest_list_tests >/dev/null || fail "test_exec_gpu does not start"
rc=0
run "$BUNDLE/bin/refit_cuda" "$BUNDLE/scenarios/small-moe-ep.yaml" direct 1 >/dev/null || rc=$?
((rc == 77 || rc == 0)) || fail "refit_cuda does not start (exit $rc)"
echo "gpu-bundle: $BUNDLE, $((bytes / 1024)) KiB; binaries need only glibc's libraries; CPU paths ran under env -i" >&2
echo "$BUNDLE"
