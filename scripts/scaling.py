#!/usr/bin/env python3
"""The planning cost's scaling curve: `reshard compare` on Kimi-K3 (scenarios/kimi-k3-gb200.yaml)
grown by --set to F times the racks, GPUs and destination data parallelism, and `reshard simulate
--flows` on random bursts of N transfers on topologies/dgx-h100-64n.yaml, by each rate engine
(--rate-solver: the default `auto`, the group engine, and the class engine up to --classes-up-to
transfers).

  scripts/scaling.py [--binary build/cli/reshard] [--factors 1,2,4,8] [--flows 3000,10000,30000,100000]
                     [--classes-up-to 30000] [--jobs 2] [--json]

Per point: the wall time and peak memory of the whole process (os.wait4), compare's phases
(--timings), auto's choice and the lower bound. Each compare point runs once: on a busy machine
compare two builds side by side instead (farm-bench --vs). The shape is stated as the exponent of
the wall time between successive points (time ~ size^k).
"""
import argparse
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
K3 = os.path.join(ROOT, "scenarios", "kimi-k3-gb200.yaml")
BURST_TOPOLOGY = os.path.join(ROOT, "topologies", "dgx-h100-64n.yaml")
K3_RACKS, K3_GPUS_PER_SIDE, K3_DEST_DP, K3_CORES = 128, 4608, 576, 32


def k3_sets(factor):
    """--set values for K3 grown `factor` times: racks, both GPU ranges, destination DP; from 4x the
    core layer too (32 x factor switches: more equal paths between pods as the pods grow)."""
    side = K3_GPUS_PER_SIDE * factor
    sets = [f"topology.cluster.racks={K3_RACKS * factor}", f"source.gpus=0-{side - 1}",
            f"destination.gpus={side}-{2 * side - 1}", f"destination.dp={K3_DEST_DP * factor}"]
    if factor >= 4:
        sets.append(f"topology.fabric.core.switches={K3_CORES * factor}")
    return sets


def measured(cmd):
    """cmd under /usr/bin/time: (stdout, wall s, peak memory bytes, user+system CPU s)."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as t:
        start = time.monotonic()
        proc = subprocess.run(["/usr/bin/time", "-f", "%M %U %S", "-o", t.name] + cmd, capture_output=True, text=True)
        wall = time.monotonic() - start
        if proc.returncode != 0:
            sys.exit(f"scaling.py: {' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr}")
        kib, user, system = t.read().split()[-3:]
    return proc.stdout, wall, int(kib) * 1024, float(user) + float(system)


def burst_csv(path, transfers, gpus=512, seed=7):
    """`transfers` random GPU pairs of 1-64 MB, all released at once."""
    rng = random.Random(seed)
    with open(path, "w") as f:
        f.write("id,src,dst,bytes\n")
        for i in range(transfers):
            a = rng.randrange(gpus)
            b = rng.randrange(gpus - 1)
            b = b + 1 if b >= a else b
            f.write(f"{i},{a},{b},{rng.randint(1_000_000, 64_000_000)}\n")


def exponent(rows, size_key):
    for prev, row in zip(rows, rows[1:]):
        if prev["wall_s"] > 0 and row[size_key] > prev[size_key]:
            row["exponent"] = math.log(row["wall_s"] / prev["wall_s"]) / math.log(row[size_key] / prev[size_key])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "cli", "reshard"))
    ap.add_argument("--factors", default="1,2,4,8", help="K3 sizes, comma-separated (empty: none)")
    ap.add_argument("--flows", default="3000,10000,30000,100000",
                    help="burst sizes in transfers, comma-separated (empty: none)")
    ap.add_argument("--classes-up-to", type=int, default=30000,
                    help="also run the class engine (--rate-solver classes) on bursts up to this size")
    ap.add_argument("--jobs", type=int, default=2, help="compare -j")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()

    compare_rows = []
    for f in [int(x) for x in a.factors.split(",") if x]:
        cmd = [a.binary, "compare", K3, "--json", "--timings", "-j", str(a.jobs)]
        for s in k3_sets(f):
            cmd += ["--set", s]
        out, wall, peak, cpu = measured(cmd)
        j = json.loads(out)
        auto = next(r for r in j["strategies"] if r["strategy"] == "auto")
        compare_rows.append({"factor": f, "gpus": 2 * K3_GPUS_PER_SIDE * f, "wall_s": wall, "cpu_s": cpu,
                             "peak_bytes": peak, "candidates": j["candidates"], "auto": j["best_params"],
                             "auto_s": auto["estimate_s"], "lower_bound_s": j["lower_bound_s"],
                             "phases": j["timings"]})
        if not a.json:
            print(f"compare {f}x: {wall:.1f} s", file=sys.stderr)
    exponent(compare_rows, "gpus")

    flow_rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in [int(x) for x in a.flows.split(",") if x]:
            csv = os.path.join(tmp, f"burst{n}.csv")
            burst_csv(csv, n)
            first = None
            for solver in ["auto", "groups"] + (["classes"] if n <= a.classes_up_to else []):
                out, wall, peak, cpu = measured([a.binary, "simulate", "--topology", BURST_TOPOLOGY, "--flows", csv,
                                                 "--rate-solver", solver, "--json"])
                j = json.loads(out)
                first = first or j
                flow_rows.append({"transfers": n, "asked": solver, "engine": j["rate_solver"], "flows": j["flows"],
                                  "wall_s": wall, "cpu_s": cpu, "peak_bytes": peak, "simulated_s": j["simulated_s"],
                                  "rate_updates": j["rate_updates"], "rate_changes": j["rate_changes"],
                                  "vs_auto": abs(j["simulated_s"] - first["simulated_s"]) / first["simulated_s"]})
                if not a.json:
                    print(f"simulate {n} transfers ({j['rate_solver']}): {wall:.1f} s", file=sys.stderr)
    for solver in ("auto", "groups", "classes"):
        exponent([r for r in flow_rows if r["asked"] == solver], "transfers")

    if a.json:
        print(json.dumps({"compare": compare_rows, "flows": flow_rows}, indent=2))
        return
    if compare_rows:
        print("| K3 size | GPUs | wall | CPU | peak memory | candidates | auto | estimate | lower bound | time ~ GPUs^k |")
        print("|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|")
        for r in compare_rows:
            k = f"{r['exponent']:.2f}" if "exponent" in r else "-"
            print(f"| {r['factor']}x | {r['gpus']:,} | {r['wall_s']:.1f} s | {r['cpu_s']:.1f} s | {r['peak_bytes'] / 1e9:.2f} GB "
                  f"| {r['candidates']} | {r['auto']} | {r['auto_s']:.3f} s | {r['lower_bound_s']:.3f} s | {k} |")
        print()
        print("| K3 size | load | plan | bound | basis | strategies | tune |")
        print("|---:|---:|---:|---:|---:|---:|---:|")
        for r in compare_rows:
            p = r["phases"]
            print(f"| {r['factor']}x | " + " | ".join(f"{p[k]:.2f} s" for k in
                                                     ("load_s", "plan_s", "bound_s", "basis_s", "strategies_s", "tune_s")) + " |")
        print()
    if flow_rows:
        print("| transfers | flows | --rate-solver | engine | wall | peak memory | rate updates | rates changed "
              "| changes per update | simulated time | against auto | time ~ n^k |")
        print("|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in flow_rows:
            k = f"{r['exponent']:.2f}" if "exponent" in r else "-"
            per = r["rate_changes"] / max(1, r["rate_updates"])
            print(f"| {r['transfers']:,} | {r['flows']:,} | {r['asked']} | {r['engine']} | {r['wall_s']:.1f} s "
                  f"| {r['peak_bytes'] / 1e6:.0f} MB | {r['rate_updates']:,} | {r['rate_changes']:,} | {per:,.0f} "
                  f"| {r['simulated_s'] * 1e3:.6f} ms | {r['vs_auto']:.1e} | {k} |")


if __name__ == "__main__":
    main()
