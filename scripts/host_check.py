#!/usr/bin/env python3
"""Host backend: predict, measure, check (docs/validation.md, the section of that name).

1. `mpirun -np N reshard bench-host --passes 3 -o host.yaml`: the host profile, measured on this
   machine (N: the most processes a run below uses; each constant the median of 3 passes).
2. For every small shipped scenario (scenarios/small-*.yaml) and every strategy (`reshard compare
   --json` lists them; auto is left out, it is one of them): `mpirun -np G reshard exec SCENARIO
   --strategy S --backend host -o M.json`, G the GPUs the schedule runs on (one process per GPU),
   --repeat times; the run with the median time is kept.
3. `reshard check M.json --params host.yaml --json`: the host model's prediction (model/host_cost.hpp)
   against the measurement, per step and in total.
4. A table (scenario, strategy, processes, measured, predicted, error) and the median |error|; then
   `reshard calibrate` on every kept measurement (the calibration loop takes host measurements).

The errors are printed, never asserted: how close the model comes on this machine is the finding.
`--check` (the ctest `host_check`, label mpi) fails only when the pipeline does not work: a command
fails, a run is not checked, or an error is not a finite number.

    scripts/host_check.py [--binary build/cli/reshard] [--mpirun mpirun] [--repeat 3] [--passes 3]
                          [--out DIR] [--profile host.yaml] [--json] [--check]

The reshard binary: --binary, else $RESHARD_BINARY, else build/cli/reshard. Python 3 standard
library only.
"""
import argparse
import glob
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def fail(msg):
    print("host_check: error: " + msg, file=sys.stderr)
    sys.exit(1)


def run(cmd, what):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        fail(f"{what} failed (exit {p.returncode}): {' '.join(cmd)}\n{p.stdout[-2000:]}{p.stderr[-2000:]}")
    return p.stdout


def json_of(text, what):
    """The JSON object process 0 printed (the last '{' ... '}' block)."""
    b, e = text.find("{"), text.rfind("}")
    if b < 0 or e < 0:
        fail(f"{what}: no JSON in the output:\n{text[-2000:]}")
    return json.loads(text[b:e + 1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--binary", default=os.environ.get("RESHARD_BINARY", os.path.join(ROOT, "build", "cli", "reshard")))
    ap.add_argument("--mpirun", default=os.environ.get("MPIEXEC", "mpirun"))
    ap.add_argument("--repeat", type=int, default=3, help="runs of each scenario and strategy; the median one is kept")
    ap.add_argument("--out", help="keep the profile and measurements here (default: a temporary folder)")
    ap.add_argument("--profile", help="a host profile to use instead of measuring one")
    ap.add_argument("--passes", type=int, default=3, help="bench-host --passes: each constant the median of this many")
    ap.add_argument("--scenarios", default=os.path.join(ROOT, "scenarios", "small-*.yaml"),
                    help="a glob of scenario files (default: every small shipped scenario)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--check", action="store_true", help="fail only when the pipeline does not work (ctest)")
    a = ap.parse_args()
    if a.repeat < 1:
        fail("--repeat must be at least 1")
    if not os.path.exists(a.binary):
        fail(f"no reshard binary at {a.binary} (--binary or $RESHARD_BINARY)")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    os.environ.update(env)
    out = a.out or tempfile.mkdtemp(prefix="reshard-host-check-")
    os.makedirs(out, exist_ok=True)
    mpirun = [a.mpirun, "--oversubscribe", "-np"]
    log = sys.stderr

    scenarios = sorted(glob.glob(a.scenarios))
    if not scenarios:
        fail(f"no scenario matches {a.scenarios}")
    plan = []  # (scenario path, strategy, gpus)
    for sc in scenarios:
        strategies = [s["strategy"] for s in json_of(run([a.binary, "compare", sc, "--json"], "compare"), "compare")["strategies"]
                      if s["strategy"] != "auto"]
        for st in strategies:
            dry = json_of(run([a.binary, "exec", sc, "--strategy", st, "--dry-run", "--json"], "exec --dry-run"), "dry run")
            plan.append((sc, st, int(dry["gpus"])))

    profile = a.profile
    if not profile:
        profile = os.path.join(out, "host.yaml")
        n = max(g for _, _, g in plan)
        print(f"measuring the host profile: {a.mpirun} -np {n} reshard bench-host --passes {a.passes} -o {profile}", file=log)
        run(mpirun + [str(n), a.binary, "bench-host", "--passes", str(a.passes), "-o", profile], "bench-host")

    rows = []
    for sc, st, gpus in plan:
        name = os.path.splitext(os.path.basename(sc))[0]
        runs = []
        for r in range(a.repeat):
            m = os.path.join(out, f"{name}.{st}.{r}.json")
            run(mpirun + [str(gpus), a.binary, "exec", sc, "--strategy", st, "--backend", "host", "--timeout", "120s",
                          "-o", m], f"exec {name} {st}")
            with open(m) as f:
                runs.append((json.load(f)["elapsed_s"], m))
        runs.sort()
        elapsed, m = runs[(len(runs) - 1) // 2]
        c = json_of(run([a.binary, "check", m, "--params", profile, "--json"], f"check {name} {st}"), "check")
        t = c["total"]
        err = t["relative_error"]
        if c.get("profile") != "host" or not math.isfinite(err) or t["estimate_s"] <= 0:
            fail(f"check of {m} did not predict with the host profile: {json.dumps(t)}")
        rows.append({"scenario": name, "strategy": st, "processes": gpus, "measured_s": t["measured_s"],
                     "predicted_s": t["estimate_s"], "error": err, "measurement": m,
                     "runs_s": [x for x, _ in runs],
                     "steps": [{"step": s["step"], "measured_s": s["measured_s"], "predicted_s": s["estimate_s"],
                                "terms": s.get("host_terms")} for s in c["steps"]]})
        print(f"  {name:<26} {st:<17} measured {t['measured_s'] * 1e3:8.1f} ms  predicted {t['estimate_s'] * 1e3:8.1f} ms"
              f"  {100 * err:+7.1f} %", file=log)

    # The calibration loop takes the same measurements (reshard calibrate reads Measurement files).
    cal = json_of(run([a.binary, "calibrate"] + [r["measurement"] for r in rows] + ["--json"], "calibrate"), "calibrate")
    if len(cal["rows"]) != len(rows):
        fail(f"calibrate read {len(cal['rows'])} of {len(rows)} measurements")

    errors = [abs(r["error"]) for r in rows]
    median = statistics.median(errors)
    with open(profile) as f:
        machine = next((l.split(":", 1)[1].strip().strip('"') for l in f if l.startswith("machine:")), "")
    if a.json:
        print(json.dumps({"schema": "reshard-host-check-1", "profile": profile, "machine": machine, "repeat": a.repeat,
                          "rows": rows, "median_abs_error": median,
                          "beyond_25_percent": sum(e > 0.25 for e in errors)}, indent=2))
    else:
        print(f"host profile: {profile} ({machine}); each run the median of {a.repeat}")
        print(f"{'scenario':<26} {'strategy':<17} {'procs':>5} {'measured':>11} {'predicted':>11} {'error':>9}")
        for r in rows:
            print(f"{r['scenario']:<26} {r['strategy']:<17} {r['processes']:>5} {r['measured_s'] * 1e3:>8.1f} ms"
                  f" {r['predicted_s'] * 1e3:>8.1f} ms {100 * r['error']:>+8.1f} %")
        print(f"median |error|: {100 * median:.1f} % over {len(rows)} runs; {sum(e > 0.25 for e in errors)} beyond 25 %")
        print(f"calibrate read all {len(cal['rows'])} host measurements")
    if not a.out:
        shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
