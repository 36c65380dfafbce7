"""ctest pip_install: the package installs with pip from the source tree, without a package index, and works
outside it. A fresh venv (--system-site-packages: Debian's setuptools, wheel and pandas), then
`pip install --no-build-isolation --no-index SOURCE` with RESHARD_BUILD_DIR at the test run's CMake build folder
(setup.py takes the extension built there: CMake is not run), then, from a temporary folder and with neither
PYTHONPATH nor RESHARD_BUILD_DIR set: the package and its extension come from the venv, strategy_names(), a plan of
a scenario given by absolute path, and the ImportErrors of missing optional dependencies (pandas, torch) say what
to install. Run by ctest with RESHARD_BUILD_DIR set; about 15 s when the extension is built."""

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = Path(os.environ.get("RESHARD_BUILD_DIR") or ROOT / "build").resolve()
SCENARIO = ROOT / "scenarios" / "small-moe-ep.yaml"

CHECK = r'''
import json, sys
from pathlib import Path
import reshard
where = Path(reshard.__file__).resolve().parent
assert where.is_relative_to(Path(sys.prefix).resolve()), f"reshard imported from {where}, not from the venv {sys.prefix}"
assert reshard._reshard is not None, reshard._missing
assert Path(reshard._reshard.__file__).resolve().parent == where, f"the extension came from {reshard._reshard.__file__}"
for f in ("__init__.py", "torch.py", "adapters.py"):
    assert (where / f).is_file(), f"{f} is not installed in {where}"
names = reshard.strategy_names()
print("strategies:", " ".join(names))
assert "gather_broadcast" in names and len(names) >= 6, names
p = reshard.plan(sys.argv[1], strategy="auto")
e = p["estimate"]
print(f"plan: {p['bytes_to_move']} bytes to move, lower bound {p['lower_bound_s']:.6g} s, auto {e['estimate_s']:.6g} s")
assert p["bytes_to_move"] > 0 and 0 < p["lower_bound_s"] <= e["estimate_s"], p
try:
    reshard.load("no-such-scenario.yaml")
    raise AssertionError("a missing scenario loaded")
except reshard.ConfigError as err:
    print("missing scenario:", str(err).splitlines()[0])

# Missing optional dependencies: an ImportError that says what to install.
sys.modules["pandas"] = None
sys.modules["torch"] = sys.modules["torch.distributed"] = None
for what, call, package in [("reshard.sweep", lambda: reshard.sweep(sys.argv[1], {"destination.tp": [2]}), "python3-pandas"),
                            ("reshard.torch", lambda: __import__("reshard.torch"), "python3-torch"),
                            ("reshard.adapters", lambda: __import__("reshard.adapters"), "python3-torch")]:
    try:
        call()
        raise AssertionError(f"{what} ran without its dependency")
    except ImportError as err:
        assert what in str(err) and package in str(err) and "pip install" in str(err), str(err)
        print("without its dependency:", err)
print("OK")
'''


def run(cmd, **kw):
    """Runs cmd; returns its output (stdout and stderr), printed in full when it fails."""
    shown = " ".join("-c CHECK" if a == CHECK else str(a) for a in cmd).replace("-c -c CHECK", "-c CHECK")
    print("+", shown, flush=True)
    start = time.monotonic()
    r = subprocess.run(cmd, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, **kw)
    print(f"  ({time.monotonic() - start:.1f} s)", flush=True)
    if r.returncode != 0:
        print(r.stdout, flush=True)
        sys.exit(f"exit status {r.returncode}: {shown}")
    return r.stdout


def main():
    if not (BUILD / "CMakeCache.txt").is_file():
        sys.exit(f"{BUILD}: not a CMake build folder (set RESHARD_BUILD_DIR)")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "RESHARD_BUILD_DIR", "PYTHONHOME")}
    env["PIP_NO_INPUT"] = "1"
    with tempfile.TemporaryDirectory(prefix="reshard-pip-") as tmp:
        tmp = Path(tmp)
        venv = tmp / "venv"
        run([sys.executable, "-m", "venv", "--system-site-packages", venv], env=env)
        py = venv / "bin" / "python"
        out = run([py, "-m", "pip", "install", "-v", "--no-build-isolation", "--no-index", "--no-cache-dir",
                   "--disable-pip-version-check", "--root-user-action=ignore", ROOT],
                  env={**env, "RESHARD_BUILD_DIR": str(BUILD)}, cwd=tmp)
        print("\n".join(out.splitlines()[-5:]))
        if f"reshard: reusing the CMake build folder {BUILD}" not in out:
            print(out)
            sys.exit(f"pip install did not reuse {BUILD}")
        elsewhere = tmp / "elsewhere"
        elsewhere.mkdir()
        out = run([py, "-c", CHECK, SCENARIO], env=env, cwd=elsewhere)
        print(out, end="")
        if not out.endswith("OK\n"):
            sys.exit("the installed package failed its checks")


if __name__ == "__main__":
    main()
