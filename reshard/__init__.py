"""reshard from Python: load a scenario, plan, compare, simulate and sweep.

    import reshard
    reshard.compare("scenarios/deepseek-v3-h100.yaml")["best"]
    reshard.simulate("scenarios/deepseek-v3-h100.yaml", strategy="auto", timeline=True)
    reshard.sweep("scenarios/kimi-k3-gb200.yaml", {"topology.cluster.nic_speed": ["400Gbps", "800Gbps"]})

A scenario is a path, a dict in the scenario format, or a Scenario from reshard.load();
`overrides` are `reshard --set` changes as a dict ({"destination.tp": 16}). Results are dicts;
sweeps are pandas DataFrames.

The C++ core is the extension `_reshard`, which the CMake build puts in BUILD/python/reshard/
(BUILD: $RESHARD_BUILD_DIR, else build/ at the top of the source tree, where scripts/main.sh and
scripts/test.sh build). This package, at the top of the source tree, finds it there: run Python
from the source tree, or put the source tree on PYTHONPATH.
"""

import os as _os
from pathlib import Path as _Path

_root = _Path(__file__).resolve().parent.parent
_build = _Path(_os.environ.get("RESHARD_BUILD_DIR") or _root / "build")
__path__.append(str(_build / "python" / "reshard"))

try:
    from . import _reshard
except ImportError as _e:  # not built, or built for another Python version
    raise ImportError(
        f"reshard: the extension _reshard was not found in {_build / 'python' / 'reshard'} or does not load "
        f"({_e}); build it with scripts/main.sh (or cmake --build {_build} --target reshard_python), or set "
        "RESHARD_BUILD_DIR to the build folder"
    ) from None

from ._reshard import (  # noqa: E402,F401
    ConfigError, Error, PlanError, Scenario, ScheduleError, load, plan, simulate, strategy_names)

__all__ = ["ConfigError", "Error", "PlanError", "Scenario", "ScheduleError", "load", "plan", "simulate",
           "strategy_names"]
