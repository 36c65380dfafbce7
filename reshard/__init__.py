"""reshard from Python: load a scenario, plan, compare, simulate and sweep.

    import reshard
    reshard.compare("scenarios/deepseek-v3-h100.yaml")["best_params"]
    reshard.simulate("scenarios/deepseek-v3-h100.yaml", strategy="auto", timeline=True)
    reshard.sweep("scenarios/kimi-k3-gb200.yaml", {"topology.cluster.nic_speed": ["400Gbps", "800Gbps"]})
    reshard.sweep("scenarios/deepseek-v3-h100.yaml",
                  [{"destination.tp": [8, 16], "destination.dp": [32, 16]},
                   {"topology.cluster.nic_speed": ["400Gbps", "800Gbps"]}])

A scenario is a path, a dict in the scenario format, or a Scenario from reshard.load();
`overrides` are `reshard --set` changes as a dict ({"destination.tp": 16}). Results are dicts;
sweeps are pandas DataFrames.

The C++ core is the extension `_reshard`. Installed (`pip install --no-build-isolation .` at the top
of the source tree, setup.py), it sits in this package. In the source tree, the CMake build puts it
in BUILD/python/reshard/ (BUILD: $RESHARD_BUILD_DIR, else build/ at the top of the source tree, where
scripts/main.sh and scripts/test.sh build) and this package finds it there: run Python from the
source tree, or put the source tree on PYTHONPATH. Scenario, model and topology files are given by
path (nothing is read from the source tree at run time).
"""

import itertools as _itertools
import os as _os
from pathlib import Path as _Path

_here = _Path(__file__).resolve().parent
_build = _Path(_os.environ.get("RESHARD_BUILD_DIR") or _here.parent / "build")
__path__.append(str(_build / "python" / "reshard"))  # after this folder, where an installed package has it

_EXTENSION_NAMES = ["ConfigError", "Error", "PlanError", "Scenario", "ScheduleError", "compare", "load", "plan",
                    "simulate", "strategy_names"]
__all__ = _EXTENSION_NAMES + ["sweep"]

try:
    from . import _reshard
    from ._reshard import (  # noqa: F401
        ConfigError, Error, PlanError, Scenario, ScheduleError, compare, load, plan, simulate, strategy_names)
except ImportError as _e:  # not built, or built for another Python version
    # reshard.torch runs a refit plan file without the extension (a machine with PyTorch only);
    # everything else needs it and says so when used.
    _reshard = None
    _missing = (f"reshard: the extension _reshard was not found in {_here} or {_build / 'python' / 'reshard'} or "
                f"does not load ({_e}); build it with scripts/main.sh (or cmake --build {_build} --target "
                "reshard_python) and set RESHARD_BUILD_DIR to the build folder, or install the package with "
                "`pip install --no-build-isolation .` at the top of the source tree")

    def __getattr__(name):
        if name in _EXTENSION_NAMES:
            raise ImportError(_missing)
        raise AttributeError(f"module 'reshard' has no attribute {name!r}")


def _need_extension():
    """Raises ImportError (saying where the extension was looked for) when it is missing."""
    if _reshard is None:
        raise ImportError(_missing)


def _points(axes):
    """Axes -> (keys, points). A dict {KEY: values}: one axis per key, their product. A list of such
    dicts: the keys of one dict are zipped (values of equal lengths), the dicts multiplied. The last
    axis varies fastest."""
    if isinstance(axes, dict):
        groups = [{k: list(v)} for k, v in axes.items()]
    elif isinstance(axes, (list, tuple)) and all(isinstance(g, dict) for g in axes):
        groups = [{k: list(v) for k, v in g.items()} for g in axes]
    else:
        raise TypeError(f"axes: expected a dict or a list of dicts, got {type(axes).__name__}")
    keys, columns = [], []
    for g in groups:
        lengths = sorted({len(v) for v in g.values()})
        if len(lengths) != 1 or lengths[0] == 0:
            raise ValueError(f"axes: the zipped keys {list(g)} need values of one non-zero length, got {lengths}")
        keys += list(g)
        columns.append(list(zip(*g.values())))
    if len(set(keys)) != len(keys):
        raise ValueError(f"axes: a key on two axes: {keys}")
    return keys, [sum(combo, ()) for combo in _itertools.product(*columns)]


def sweep(scenario, axes, strategies=None, profiles=None, simulate=False, set=None, threads=0, base_dir=None):
    """The scenario (a file, or a dict in the scenario format: relative model and topology paths
    against `base_dir`, default the current directory) compared at every point of `axes`, with `set` ({KEY: VALUE}) applied to all
    (as `reshard sweep` does, docs/sweep.md). `axes`: {KEY: values} (product), or a list of such dicts
    (keys within one dict zipped, the dicts multiplied). `strategies`: names or "auto" (default:
    every named strategy); `profiles`: default ["reshard"]; `threads`: 0 for one per core.

    Returns a pandas DataFrame, one row per point, profile and strategy: the axis keys (the values
    as given), point, profile, strategy, params, estimate_s, simulated_s, lower_bound_s, bound_cut,
    bound_where, bound_limit, limited_by, limit, bottleneck, network_bytes, nvlink_bytes,
    operations, peak_staging_bytes, staging_budget_bytes, best and error (a point that failed: one
    row with its error)."""
    try:
        import pandas as pd
    except ImportError as e:
        raise ModuleNotFoundError(f"reshard.sweep needs pandas ({e}): apt-get install python3-pandas "
                                  "(or pip install pandas)", name="pandas") from e

    keys, points = _points(axes)
    if isinstance(scenario, dict):  # the sweep reloads a file at every point: the dict becomes one
        import json
        import tempfile

        base = _Path(base_dir) if base_dir is not None else _Path.cwd()
        scenario = {k: (str(base / v) if k in ("model", "topology") and isinstance(v, str) and not _Path(v).is_absolute()
                        else v) for k, v in scenario.items()}
        with tempfile.TemporaryDirectory(prefix="reshard-sweep-") as tmp:
            path = _Path(tmp) / f"{scenario.get('name', 'scenario')}.yaml"
            path.write_text(json.dumps(scenario))  # JSON is YAML
            return sweep(str(path), axes, strategies, profiles, simulate, set, threads, base_dir)
    _need_extension()
    rows = _reshard._sweep(scenario, keys, points, strategies=strategies, profiles=profiles, simulate=simulate,
                           overrides=set, threads=threads, base_dir=base_dir)
    frame = pd.DataFrame([{k: v for k, v in r.items() if k != "inputs"} for r in rows])
    for i, key in enumerate(keys):
        frame.insert(i, key, [points[p][i] for p in frame["point"]])
    return frame
