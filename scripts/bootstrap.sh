#!/usr/bin/env bash
# Installs the Debian packages reshard needs (when missing; as root), configures and builds into
# build/ (or $RESHARD_BUILD_DIR). Sourced by scripts/main.sh and scripts/test.sh.
set -euo pipefail
RESHARD_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RESHARD_BUILD_DIR=${RESHARD_BUILD_DIR:-$RESHARD_ROOT/build}

packages=(cmake g++ make pkg-config
          libboost-graph-dev libeigen3-dev libyaml-cpp-dev nlohmann-json3-dev libcli11-dev
          libgtest-dev libgmock-dev libbenchmark-dev libopenmpi-dev openmpi-bin libsimgrid-dev
          python3 python3-dev pybind11-dev python3-pandas python3-matplotlib jupyter-nbconvert python3-ipykernel python3-torch
          python3-venv python3-setuptools python3-wheel
          clang-14 libclang-rt-14-dev)
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
cmake -S "$RESHARD_ROOT" -B "$RESHARD_BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DPython3_EXECUTABLE=/usr/bin/python3 >"$RESHARD_BUILD_DIR.configure.log" 2>&1 ||
  { cat "$RESHARD_BUILD_DIR.configure.log" >&2; exit 1; }
sed -n '/reshard configure summary/,/^-- $/p' "$RESHARD_BUILD_DIR.configure.log" >&2
cmake --build "$RESHARD_BUILD_DIR" -j"$(nproc)" >"$RESHARD_BUILD_DIR.build.log" 2>&1 ||
  { tail -60 "$RESHARD_BUILD_DIR.build.log" >&2; exit 1; }
RESHARD_BIN=$RESHARD_BUILD_DIR/cli/reshard
export RESHARD_ROOT RESHARD_BUILD_DIR RESHARD_BIN
