#!/usr/bin/env bash
# The main job: installs what the `reshard` command needs when missing, configures, builds that
# command alone (scripts/test.sh builds the rest), then runs it on the default scenario (DeepSeek-V3
# on 2 x 256 DGX H100), next to the other refit systems' predicted times (--systems all). Extra
# arguments are passed to the command instead.
set -euo pipefail
export RESHARD_PACKAGES=${RESHARD_PACKAGES:-core} RESHARD_TARGETS=${RESHARD_TARGETS:-reshard}
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
if [ $# -eq 0 ]; then set -- --systems all; fi
exec "$RESHARD_BIN" compare "$@"
