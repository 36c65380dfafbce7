#!/usr/bin/env python3
"""Fitted vs predicted: reshard's refit predictions against published measurements.

For every row of params/published-refit.csv with a shipped scenario, runs
`reshard compare SCENARIO --profile P --json` with the profile and strategy that model the row's
system, and prints measured, predicted and the error, each row marked "fitted" (it is in the
calibration subset the profile's constants were fitted to) or "predicted" (it is not; "setup also
fitted" when the subset holds another measurement of the same scenario and strategy). Then the
median |error| of the predicted rows, how many miss by more than 35 %, and leave-one-platform-out
errors where the rows span two platforms or more: the profile's constants are refitted with
`reshard calibrate` on the other platforms' rows and this platform's rows predicted with them
(leave-one-scenario-out the same, a scenario held out in turn).

The errors are printed, never asserted: how large they are is the finding (docs/validation.md,
"Fitted vs predicted"). `--check` (the ctest `validate_published`) fails only when the script
cannot do its job: a command fails, or a printed row is neither fitted nor predicted.

    scripts/validate.py [--binary build/cli/reshard] [--csv params/published-refit.csv] [--json] [--check]

The reshard binary: --binary, else $RESHARD_BINARY, else build/cli/reshard. Python 3 standard
library only.
"""
import argparse
import csv
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The profile and strategy that model each system (the `system` column). A system not listed has no
# profile yet: its rows are reported as "no profile" and not predicted.
SYSTEM_MODELS = {
    "nemo_rl_broadcast": ("nemo_rl", "gather_broadcast"),      # NeMo RL's packed broadcast
    "nemo_rl_nccl_reshard": ("nemo_rl", "nemo_rl_reshard"),    # NeMo RL's nccl_reshard transport
}

# Profiles whose constants come from a fit: the calibration subset (a `reshard calibrate` CSV,
# relative to the repository), the base profile and the constants fitted (docs/calibration.md).
PROFILE_FITS = {
    "nemo_rl": {"calibration": "params/nemo_rl-published.csv", "base": "nemo_rl", "fit": "per_bucket,per_stage"},
}

# What misses by more than this counts as "beyond" (the acceptance line of issue 34).
BEYOND = 0.35

GENERATIONS = {
    "dgx-h100": "Hopper", "dgx-h200": "Hopper", "hgx-h800": "Hopper", "hgx-h20": "Hopper",
    "dgx-b200": "Blackwell", "gb200-nvl72": "Blackwell", "dgx-a100": "Ampere", "ascend-910c": "Ascend 910",
}

# Implementation families, by the prefix of `system`.
FAMILIES = [
    ("nemo_rl", "NeMo RL"), ("megatron_core", "Megatron-Core copy service"), ("nccl_m2n", "NCCL M2N"),
    ("checkpoint_engine", "checkpoint-engine"), ("verl", "verl"), ("slime", "slime"),
    ("mooncake_p2p", "miles (Mooncake P2P)"), ("vime", "vime"), ("perplexity", "Perplexity"),
    ("prime_rl", "prime-rl"), ("skyrl", "SkyRL"),
]


def family(system):
    for prefix, name in FAMILIES:
        if system.startswith(prefix):
            return name
    return system


def read_rows(path):
    with open(path, newline="") as f:
        lines = [line for line in f if not line.startswith("#")]
    rows = list(csv.DictReader(lines))
    for need in ("id", "system", "measured_s", "scenario", "platform"):
        if rows and need not in rows[0]:
            raise SystemExit(f"validate.py: {path} has no column '{need}'")
    return rows


def read_calibration(path):
    """The (scenario realpath, strategy, measured_s) rows of a `reshard calibrate` CSV."""
    base = os.path.dirname(path)
    with open(path, newline="") as f:
        rows = list(csv.DictReader(line for line in f if not line.startswith("#")))
    return [(os.path.realpath(os.path.join(base, r["scenario"])), r["strategy"].strip(), float(r["measured_s"]))
            for r in rows]


class Reshard:
    def __init__(self, binary):
        self.binary = binary
        self.cache = {}

    def run(self, args):
        p = subprocess.run([self.binary] + args, capture_output=True, text=True)
        return p.returncode, p.stdout, p.stderr

    def compare(self, scenario, profile=None, params=None):
        """compare's JSON for the scenario, or raises RuntimeError with its message."""
        key = (scenario, profile, params)
        if key not in self.cache:
            args = ["compare", scenario, "--json"]
            args += ["--params", params] if params else ["--profile", profile]
            rc, out, err = self.run(args)
            if rc != 0:
                self.cache[key] = RuntimeError(err.strip().splitlines()[-1] if err.strip() else f"exit {rc}")
            else:
                self.cache[key] = json.loads(out)
        v = self.cache[key]
        if isinstance(v, Exception):
            raise v
        return v


def estimate(compare_json, strategy):
    for s in compare_json["strategies"]:
        if s["strategy"] == strategy:
            return s["estimate_s"]
    raise RuntimeError(f"compare has no strategy '{strategy}'")


def same_time(a, b):
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=0)


def predict_rows(rows, reshard, calib_sets):
    """Each row with a scenario: its prediction and class, or why there is none."""
    out = []
    for r in rows:
        if not r["scenario"]:
            continue
        item = {"id": r["id"], "system": r["system"], "platform": r["platform"], "scenario": r["scenario"],
                "measured_s": float(r["measured_s"])}
        model = SYSTEM_MODELS.get(r["system"])
        if not model:
            item["status"] = "no profile"
            out.append(item)
            continue
        profile, strategy = model
        item.update(profile=profile, strategy=strategy)
        scenario = os.path.realpath(os.path.join(ROOT, r["scenario"]))
        try:
            item["predicted_s"] = estimate(reshard.compare(scenario, profile=profile), strategy)
        except RuntimeError as e:
            item["status"] = "no profile" if "unknown profile" in str(e) else "error"
            item["error"] = str(e)
            out.append(item)
            continue
        item["relative_error"] = (item["predicted_s"] - item["measured_s"]) / item["measured_s"]
        calib = calib_sets.get(profile, [])
        fitted = any(s == scenario and st == strategy and same_time(m, item["measured_s"]) for s, st, m in calib)
        item["status"] = "fitted" if fitted else "predicted"
        # A predicted row on a setup (scenario and strategy) the calibration subset holds too is a
        # second measurement of a fitted point, not a prediction somewhere new.
        item["setup_fitted"] = not fitted and any(s == scenario and st == strategy for s, st, _ in calib)
        out.append(item)
    return out


def leave_one_out(items, reshard, key, what):
    """Per fitted profile and per value of `key` (platform, scenario): refit the profile's constants
    on the rows with another value, predict the rows with this one."""
    results = []
    for profile, fit in PROFILE_FITS.items():
        mine = [i for i in items if i.get("profile") == profile and i["status"] in ("fitted", "predicted")]
        groups = sorted({i[key] for i in mine})
        entry = {"profile": profile, key + "s": groups, "folds": []}
        if len(groups) < 2:
            entry["note"] = (f"not applicable: the {profile} rows with a shipped scenario are all on one {what} "
                             f"({', '.join(groups) or 'none'}); it needs rows on 2 {what}s or more")
            results.append(entry)
            continue
        with tempfile.TemporaryDirectory(prefix="reshard-validate-") as tmp:
            for n, held in enumerate(groups):
                train = [i for i in mine if i[key] != held]
                test = [i for i in mine if i[key] == held]
                csv_path = os.path.join(tmp, f"train-{n}.csv")
                with open(csv_path, "w") as f:
                    f.write("scenario,strategy,measured_s\n")
                    for i in train:
                        f.write(f"{os.path.realpath(os.path.join(ROOT, i['scenario']))},{i['strategy']},{i['measured_s']!r}\n")
                params = os.path.join(tmp, f"fit-{n}.yaml")
                rc, out, err = reshard.run(["calibrate", csv_path, "--profile", fit["base"], "--fit", fit["fit"],
                                            "-o", params, "--json"])
                if rc != 0:
                    raise RuntimeError(f"calibrate on the rows off {what} {held} failed: {err.strip()}")
                cal = json.loads(out)
                fold = {"held_out": held, "trained_on": len(train), "warnings": cal.get("warnings", []),
                        "constants": {c["name"]: c["value_s"] for c in cal.get("constants", []) if c["fitted"]},
                        "rows": []}
                for i in test:
                    scenario = os.path.realpath(os.path.join(ROOT, i["scenario"]))
                    p = estimate(reshard.compare(scenario, params=params), i["strategy"])
                    fold["rows"].append({"id": i["id"], "measured_s": i["measured_s"], "predicted_s": p,
                                         "relative_error": (p - i["measured_s"]) / i["measured_s"]})
                entry["folds"].append(fold)
        results.append(entry)
    return results


def dataset_summary(rows):
    systems = sorted({r["system"] for r in rows})
    families = sorted({family(s) for s in systems})
    platforms = sorted({r["platform"] for r in rows})
    generations = sorted({GENERATIONS[p] for p in platforms if p in GENERATIONS})
    return {"rows": len(rows), "systems": len(systems), "implementations": families,
            "platforms": platforms, "generations": generations,
            "with_scenario": sum(1 for r in rows if r["scenario"]),
            "without_profile": sorted({s for s in systems if s not in SYSTEM_MODELS})}


def summary(items):
    def stats(cls):
        errs = [abs(i["relative_error"]) for i in items if i["status"] == cls]
        return {"rows": len(errs), "median_abs_error": statistics.median(errs) if errs else None,
                "beyond_35": sum(1 for e in errs if e > BEYOND)}
    return {"fitted": stats("fitted"), "predicted": stats("predicted"),
            "predicted_on_new_setups": sum(1 for i in items if i["status"] == "predicted" and not i["setup_fitted"]),
            "no_profile": sum(1 for i in items if i["status"] == "no profile"),
            "errors": sum(1 for i in items if i["status"] == "error")}


def pct(x):
    return f"{100 * x:+.1f} %"


def fmt_s(x):
    return f"{x:.3f} s" if x < 10 else f"{x:.2f} s"


def print_table(items):
    head = ["id", "system", "platform", "measured", "predicted", "error", "class", "note"]
    right = {3, 4, 5}
    body = [[i["id"], i["system"], i["platform"], fmt_s(i["measured_s"]), fmt_s(i["predicted_s"]),
             pct(i["relative_error"]), i["status"], "setup also fitted" if i.get("setup_fitted") else ""]
            for i in items]
    widths = [max(len(str(x[c])) for x in [head] + body) for c in range(len(head))]
    for line in [head] + body:
        print("  ".join(str(v).rjust(w) if c in right else str(v).ljust(w)
                        for c, (v, w) in enumerate(zip(line, widths))).rstrip())


def median_text(s):
    return "-" if s["median_abs_error"] is None else f"{100 * s['median_abs_error']:.1f} %"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--csv", default=os.path.join(ROOT, "params", "published-refit.csv"))
    ap.add_argument("--binary", default=os.environ.get("RESHARD_BINARY") or os.path.join(ROOT, "build", "cli", "reshard"))
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--check", action="store_true",
                    help="exit 1 when a command fails or a printed row is neither fitted nor predicted (errors are not checked)")
    a = ap.parse_args()
    if not os.access(a.binary, os.X_OK):
        raise SystemExit(f"validate.py: no reshard binary at {a.binary} (--binary or RESHARD_BINARY)")

    rows = read_rows(a.csv)
    reshard = Reshard(a.binary)
    calib_sets = {p: read_calibration(os.path.join(ROOT, f["calibration"])) for p, f in PROFILE_FITS.items()}
    items = predict_rows(rows, reshard, calib_sets)
    lopo = leave_one_out(items, reshard, "platform", "platform")
    loso = leave_one_out(items, reshard, "scenario", "scenario")
    data = dataset_summary(rows)
    summ = summary(items)

    # The table holds the rows with a prediction; the others (no profile, or a failed command) are
    # listed apart.
    table = [i for i in items if "predicted_s" in i]
    skipped = [i for i in items if "predicted_s" not in i]
    if a.json:
        print(json.dumps({"schema": "reshard-validate-1", "csv": os.path.relpath(a.csv, ROOT), "dataset": data,
                          "rows": table, "skipped": skipped, "summary": summ, "leave_one_platform_out": lopo,
                          "leave_one_scenario_out": loso},
                         indent=2))
    else:
        print(f"{os.path.relpath(a.csv, ROOT)}: {data['rows']} published measurements, {data['systems']} systems "
              f"from {len(data['implementations'])} implementations, {len(data['generations'])} accelerator generations "
              f"({', '.join(data['generations'])}); {data['with_scenario']} rows with a shipped scenario")
        print()
        print_table(table)
        print()
        f, p = summ["fitted"], summ["predicted"]
        print(f"fitted rows (the calibration subset, in-sample): {f['rows']}, median |error| {median_text(f)}")
        print(f"predicted rows (not fitted): {p['rows']}, median |error| {median_text(p)}, "
              f"{p['beyond_35']} of {p['rows']} beyond {100 * BEYOND:.0f} %; "
              f"{summ['predicted_on_new_setups']} on a setup (scenario and strategy) the calibration subset does not hold")
        for i in skipped:
            print(f"skipped {i['id']} ({i['system']}, {i['scenario']}): {i['status']}"
                  + (f": {i['error']}" if i.get("error") else ""))
        print(f"rows without a shipped scenario (not predicted): {data['rows'] - data['with_scenario']}")
        print(f"systems without a profile: {len(data['without_profile'])} ({', '.join(data['without_profile'])})")
        for title, results in (("leave-one-platform-out", lopo), ("leave-one-scenario-out", loso)):
            for entry in results:
                if "note" in entry:
                    print(f"{title} ({entry['profile']}): {entry['note']}")
                    continue
                for fold in entry["folds"]:
                    consts = ", ".join(f"{k} {1e3 * v:.1f} ms" for k, v in fold["constants"].items())
                    errs = ", ".join(f"{r['id']} {pct(r['relative_error'])}" for r in fold["rows"])
                    print(f"{title} ({entry['profile']}): {fold['held_out']} predicted from the other "
                          f"{fold['trained_on']} rows, refitted ({consts}): {errs}"
                          + (f" [calibrate warned: {fold['warnings'][0]}]" if fold["warnings"] else ""))

    if a.check:
        failed = [i["id"] for i in skipped if i["status"] != "no profile"]
        unclassified = [i["id"] for i in table if i["status"] not in ("fitted", "predicted")]
        if failed or unclassified or not table:
            print(f"validate.py: check failed: {len(table)} rows in the table; commands failed for {failed}; "
                  f"neither fitted nor predicted: {unclassified}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
