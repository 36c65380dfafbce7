#!/usr/bin/env python3
"""Simulated NCCL ring collectives against published nccl-tests figures (docs/validation.md).

For every row of params/nccl-tests-published.csv, runs
    reshard simulate --topology T --collective C --ranks 0-(n-1) --size S --json
on the shipped topology of the row's system (dgx-h100: topologies/dgx-h100-32n.yaml, dgx-b200:
topologies/dgx-b200-32n.yaml; the first nodes x 8 GPUs) and prints a markdown table of published,
simulated and estimated busbw with the simulation's error.

    scripts/nccl_tests_compare.py --reshard build/cli/reshard [--check 0.15] [--min-size 64MB]

--check TOL exits 1 when a row of at least --min-size bytes is off by more than TOL (relative).
"""
import argparse
import csv
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOPOLOGY = {"dgx-h100": "topologies/dgx-h100-32n.yaml", "dgx-b200": "topologies/dgx-b200-32n.yaml"}


def read_rows(path):
    with open(path) as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def size_text(b):
    for unit, v in (("GiB", 1 << 30), ("MiB", 1 << 20)):
        if b % v == 0:
            return f"{b // v} {unit}"
    return f"{b / 1e6:.1f} MB"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reshard", default=os.path.join(ROOT, "build/cli/reshard"))
    ap.add_argument("--published", default=os.path.join(ROOT, "params/nccl-tests-published.csv"))
    ap.add_argument("--check", type=float, default=None)
    ap.add_argument("--min-size", type=float, default=64e6)
    args = ap.parse_args()
    failures = []
    print("| source | collective | GPUs | size | published busbw | simulated busbw | error | estimate busbw |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for row in read_rows(args.published):
        n = int(row["nodes"]) * int(row["gpus_per_node"])
        size = int(row["size_bytes"])
        cmd = [args.reshard, "simulate", "--topology", os.path.join(ROOT, TOPOLOGY[row["system"]]), "--collective",
               row["collective"], "--ranks", f"0-{n - 1}", "--size", f"{size}B", "--profile", "nccl", "--json"]
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit(f"{' '.join(cmd)} failed: {out.stderr.strip()}")
        j = json.loads(out.stdout)
        published = float(row["busbw_GBps"])
        simulated = j["busbw_Bps"] / 1e9
        error = simulated / published - 1
        print(f"| {row['source']} | {row['collective']} | {n} | {size_text(size)} | {published:.1f} GB/s | "
              f"{simulated:.1f} GB/s | {error * 100:+.1f} % | {j['estimate_busbw_Bps'] / 1e9:.1f} GB/s |")
        if args.check is not None and size >= args.min_size and abs(error) > args.check:
            failures.append(f"{row['source']} {n} GPUs {size_text(size)}: {error * 100:+.1f} %")
    if failures:
        print(f"\n{len(failures)} rows off by more than {args.check * 100:.0f} %:", file=sys.stderr)
        for f in failures:
            print("  " + f, file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
