#!/usr/bin/env bash
# Installs the Debian packages reshard needs (when missing; as root), configures and builds into
# build/ (or $RESHARD_BUILD_DIR). Sourced by scripts/main.sh and scripts/test.sh. The caller sets
#   RESHARD_PACKAGES=core   only what the `reshard` command needs (the main job), else everything
#                           the tests, the Python module and the notebooks need too;
#   RESHARD_TARGETS="..."   the CMake targets to build (default: all).
# ccache (a core package) caches compilations across builds in ~/.cache/ccache.
set -euo pipefail
RESHARD_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RESHARD_BUILD_DIR=${RESHARD_BUILD_DIR:-$RESHARD_ROOT/build}

packages=(cmake g++ make pkg-config
          libboost-graph-dev libeigen3-dev libyaml-cpp-dev nlohmann-json3-dev libcli11-dev
          libopenmpi-dev openmpi-bin ccache)
if [[ ${RESHARD_PACKAGES:-all} != core ]]; then
  packages+=(libgtest-dev libgmock-dev libbenchmark-dev libsimgrid-dev
             python3 python3-dev pybind11-dev python3-pandas python3-matplotlib jupyter-nbconvert python3-ipykernel python3-torch
             python3-venv python3-setuptools python3-wheel
             clang-14 libclang-rt-14-dev)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "reshard: installing ${missing[*]}" >&2
  sudo_cmd=()
  [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The Python module is built for Debian's interpreter, where the packages above install (pandas,
# matplotlib, Jupyter), whatever `python3` comes first on PATH.
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
cmake -S "$RESHARD_ROOT" -B "$RESHARD_BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DPython3_EXECUTABLE=/usr/bin/python3 "${launcher[@]}" \
  >"$RESHARD_BUILD_DIR.configure.log" 2>&1 ||
  { cat "$RESHARD_BUILD_DIR.configure.log" >&2; exit 1; }
sed -n '/reshard configure summary/,/^-- $/p' "$RESHARD_BUILD_DIR.configure.log" >&2
targets=()
for t in ${RESHARD_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$RESHARD_BUILD_DIR" -j"$(nproc)" "${targets[@]}" >"$RESHARD_BUILD_DIR.build.log" 2>&1 ||
  { tail -60 "$RESHARD_BUILD_DIR.build.log" >&2; exit 1; }
RESHARD_BIN=$RESHARD_BUILD_DIR/cli/reshard
export RESHARD_ROOT RESHARD_BUILD_DIR RESHARD_BIN
