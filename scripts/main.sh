#!/usr/bin/env bash
# The main job: installs what is missing, configures, builds, then runs reshard on the embedded
# default scenario. Extra arguments are passed to the command.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
exec "$RESHARD_BIN" compare "$@"
