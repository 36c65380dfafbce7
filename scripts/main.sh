#!/usr/bin/env bash
# The main job: installs what is missing, configures, builds, then runs reshard on the embedded
# default scenario, next to the other refit systems' predicted times (--systems all). Extra arguments
# are passed to the command instead.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
if [ $# -eq 0 ]; then set -- --systems all; fi
exec "$RESHARD_BIN" compare "$@"
