#!/usr/bin/env python3
"""Estimate against simulation, one row per (scenario, strategy): the table in docs/simulator.md.

    scripts/sim_vs_estimate.py [--reshard build/cli/reshard] [--timeout 600] SCENARIO:STRATEGY ...

SCENARIO is a file under scenarios/ without .yaml; STRATEGY is written as `reshard compare` prints
it ("domain_chain max_chain=2"). Runs `reshard simulate SCENARIO --strategy S --json` for
each and prints a Markdown table: lower bound, estimate, simulated makespan, their ratio, the
simulator's wall time. A row that runs past --timeout says so instead of a time.
"""
import argparse
import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def seconds(x):
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if x >= scale or unit == "us":
            return f"{x / scale:.4g} {unit}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reshard", default=str(ROOT / "build" / "cli" / "reshard"))
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("rows", nargs="+", metavar="SCENARIO:STRATEGY")
    a = ap.parse_args()
    print("| scenario | strategy | lower bound | estimate | simulated | sim / est | simulator wall |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for row in a.rows:
        if ":" not in row:
            sys.exit(f"sim_vs_estimate: '{row}' is not SCENARIO:STRATEGY")
        scenario, strategy = row.split(":", 1)
        path = ROOT / "scenarios" / f"{scenario}.yaml"
        print(f"  {scenario}: {strategy} ...", file=sys.stderr, flush=True)
        try:
            out = subprocess.run([a.reshard, "simulate", str(path), "--strategy", strategy, "--json"],
                                 capture_output=True, text=True, timeout=a.timeout, check=True).stdout
        except subprocess.TimeoutExpired:
            print(f"| {scenario} | {strategy} | | | > {a.timeout:.0f} s | | |", flush=True)
            continue
        except subprocess.CalledProcessError as e:
            sys.exit(f"sim_vs_estimate: {scenario} {strategy}: {e.stderr.strip()}")
        j = json.loads(out)
        ratio = j["simulated_s"] / j["estimate_s"]
        print(f"| {scenario} | {strategy} | {seconds(j['lower_bound_s'])} | {seconds(j['estimate_s'])} | "
              f"{seconds(j['simulated_s'])} | {ratio:.3f} | {j['wall_s']:.2f} s |", flush=True)


if __name__ == "__main__":
    main()
