#!/usr/bin/env python3
"""Fitted vs predicted: reshard's refit predictions against published measurements.

For every row of params/published-refit.csv with a shipped scenario and an implementation profile
for its system (`reshard systems`, model/systems.hpp), runs `reshard compare SCENARIO --systems ...
--json` and takes the profile's estimate; prints measured, predicted and the error, each row marked
"fitted" (it is in the calibration subset of a fit the profile's constants come from: `reshard
systems --json`, `fits`) or "predicted" (it is not; "setup also fitted" when such a subset holds
another measurement of the same scenario and strategy). Then the median |error| of the predicted
rows, how many miss by more than 35 %, the errors per system, the ratios of variants one source
measured on one setup, and two kinds of folds:

- leave-one-platform-out: every fit is redone without the rows of one platform (a fit whose subset
  loses all its rows cannot be, and the rows whose constants come from it are not predicted in that
  fold), and that platform's rows are predicted with the refitted constants;
- leave-one-system-out: the same with the rows of one system (the CSV's `system`) held out: what a
  system's rows become when nothing of that system was fitted.

`--check` (the ctest `validate_published`) fails when the script cannot do its job (a command
fails, a printed row is neither fitted nor predicted), when a predicted row misses by more than
35 % without its explanation in EXPLAINED_MISSES (docs/validation.md, "Where the predictions miss"),
or an explained row no longer misses, and when a row's prediction is not the one docs/validation.md
prints for it (to the digits printed there): the 35 % band would absorb a profile's prediction
moving by 10 %, the published table does not. A change meant to move a prediction updates the
table. It also fails when a system of the CSV has no profile and docs/limitations.md
("Implementation profiles") does not name it with its reason. The shipped constants are the
calibration subsets' fits (tests/test_calibrate.cpp, CalibrateShipped).

    scripts/validate.py [--binary build/cli/reshard] [--csv params/published-refit.csv] [--json] [--check]
                        [--no-folds] [--plot docs/img/validation.png]

The reshard binary: --binary, else $RESHARD_BINARY, else build/cli/reshard. Python 3 standard
library only (matplotlib for --plot).
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

# The implementation profile (`reshard systems`, model/systems.hpp) that models each system (the
# `system` column). A system not listed has no profile: docs/limitations.md ("Implementation
# profiles") says why for each; its rows are reported as "no profile" and not predicted.
SYSTEM_MODELS = {
    "nemo_rl_broadcast": "nemo_rl_broadcast",          # NeMo RL's packed broadcast
    "nemo_rl_nccl_reshard": "nemo_rl_nccl_reshard",    # NeMo RL's nccl_reshard transport
    "nemo_rl_nccl_reshard_python_fallback": "nemo_rl_nccl_reshard_python_fallback",
    "nemo_rl_nixl": "nemo_rl_nixl",
    "nccl_m2n_direct": "nccl_m2n_direct",
    "nccl_m2n_hierarchical": "nccl_m2n_hierarchical",
    "slime": "slime",
    "slime_broadcast": "slime",                        # miles' NCCL path is slime's
    "mooncake_p2p": "mooncake_p2p",
    "verl_nccl_ckpt_engine": "verl",
    "verl_nixl_ckpt_engine": "verl_nixl",
    "verl_mooncake_ckpt_engine": "verl_mooncake",
    "checkpoint_engine": "checkpoint_engine",
    "checkpoint_engine_p2p": "checkpoint_engine_p2p",
    "nemo_rl_nccl_xfer_premerge": "nemo_rl_nccl_xfer_premerge",  # NeMo RL's pre-merge NCCL-Xfer refit, every tensor
}

# Rows whose published path is not the system column's, each with the evidence: the row is then
# predicted by this profile (docs/validation.md says so beside the row).
ROW_PROFILES = {
    # The design document's H100 ranges for these two mappings are, to the hundredth, the rows of
    # the same mappings in PR #2971's table 'DGX-H100 - xferdtensor_python_impl (fallback path)'.
    "nrl-dd-h100-q30b-bf16": "nemo_rl_nccl_reshard_python_fallback",
    "nrl-dd-h100-q30b-fp8": "nemo_rl_nccl_reshard_python_fallback",
}

# Predicted rows allowed beyond 35 %, each explained in docs/validation.md ("Where the predictions
# miss"). `--check` fails on a predicted row beyond 35 % that is not listed here, and on a listed
# row that no longer misses (the list must stay true).
EXPLAINED_MISSES = {
    "nrl-dd-h100-q4b": "a 4 B model: fixed per-refit costs the profile does not have; the same setup measured "
                       "0.075 s with the earlier NCCL transfer (nrl-pr2808-q4b)",
    "nrl-pr2808-q4b": "a 4 B model: per-refit costs (group setup, control RPCs) the profile does not have, as "
                      "nrl-dd-h100-q4b; the two constants fitted on Qwen3-30B-A3B and DeepSeek-V3 price only the calls",
    "nrl-dd-h100-q30b-fp8": "FP8 block weights on both sides: the Python fallback quantises each weight's blocks and "
                            "moves its scales as tensors of their own, per-tensor work the profile does not price",
    "nrl-dd-h100-q35-397b": "Qwen3.5's checkpoint stacks each layer's 512 experts into two tensors, one transfer call "
                            "each; the inventory lists them expert by expert, 92 400 calls at the per-call cost",
}

# What misses by more than this counts as "beyond" (the tolerance docs/validation.md states).
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


def profile_of(row):
    return ROW_PROFILES.get(row["id"]) or SYSTEM_MODELS.get(row["system"])


class Reshard:
    def __init__(self, binary):
        self.binary = binary
        self.cache = {}

    def run(self, args):
        p = subprocess.run([self.binary] + args, capture_output=True, text=True)
        return p.returncode, p.stdout, p.stderr

    def _cached(self, key, args, parse):
        if key not in self.cache:
            rc, out, err = self.run(args)
            if rc != 0:
                self.cache[key] = RuntimeError(err.strip().splitlines()[-1] if err.strip() else f"exit {rc}")
            else:
                self.cache[key] = parse(out)
        v = self.cache[key]
        if isinstance(v, Exception):
            raise v
        return v

    def systems(self, scenario, names):
        """Each named system profile's estimate on the scenario (compare --systems), or raises."""
        return self._cached((scenario, "systems"), ["compare", scenario, "--json", "--systems", ",".join(names)],
                            lambda out: {x["system"]: x["estimate_s"] for x in json.loads(out)["systems"]})

    def estimate(self, scenario, params, strategy):
        """The estimate of the configured strategy on the scenario under a parameters file."""
        args = ["compare", scenario, "--json", "--params", params]
        if " " in strategy:
            args += ["--strategy", strategy]
        return self._cached((scenario, params, strategy), args, lambda out: estimate_of(json.loads(out), strategy))

    def profiles(self):
        """`reshard systems --json`: the profiles and the fits."""
        rc, out, err = self.run(["systems", "--json"])
        if rc != 0:
            raise RuntimeError(f"reshard systems failed: {err.strip()}")
        return json.loads(out)


def estimate_of(compare_json, strategy):
    """The estimate of the row that is `strategy` (a named strategy, or a configured line whose
    tokens the row's description holds)."""
    tokens = set(strategy.split())
    for s in compare_json["strategies"]:
        if s["strategy"] == strategy or (" " in strategy and tokens <= set(s["strategy"].split())):
            return s["estimate_s"]
    raise RuntimeError(f"compare has no strategy '{strategy}'")


def same_time(a, b):
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=0)


class Profiles:
    """The profiles and fits of `reshard systems --json`, and what depends on what."""

    def __init__(self, doc):
        self.by_name = {p["name"]: p for p in doc["systems"]}
        self.fits = doc["fits"]  # in order: a fit's base may carry an earlier fit's constants
        self.fit_by_name = {f["name"]: f for f in self.fits}

    def strategy(self, profile):
        return self.by_name[profile]["strategy"]

    def fits_of(self, profile):
        """The fits a profile's constants come from (fitted there or carried)."""
        return sorted({c["fit"] for c in self.by_name[profile]["constants"] if c["fit"]})

    def fit_rows(self, profile):
        return {r for f in self.fits_of(profile) for r in self.fit_by_name[f]["rows"]}


def params_yaml(cost, values, path):
    """Writes a profile's cost parameters (`cost` of reshard systems --json) as a parameters file,
    with `values` ({key: seconds or count}) in place of the constants they name."""
    c = dict(cost)
    c.update(values)
    dur = ("per_op", "per_tensor", "per_call_rank", "per_broadcast_tensor", "per_bucket", "per_stage",
           "load_per_tensor", "load_per_expert", "per_read", "per_refit")
    with open(path, "w") as f:
        f.write(f"profile: {c['profile']}\n")
        f.write("efficiency:\n" + "".join(f"  {k}: {v!r}\n" for k, v in c["efficiency"].items()))
        f.write("chain_hop_latency:\n" + "".join(f"  {k}: {v * 1e6!r}us\n" for k, v in c["chain_hop_latency"].items()))
        for k in dur:
            f.write(f"{k}: {c[k] * 1e6!r}us\n")
        for k in ("tensor_streams", "barriers_per_tensor", "copy_passes", "host_passes"):
            f.write(f"{k}: {c[k]!r}\n")
        for k in ("host_overlaps", "step_barriers"):
            f.write(f"{k}: {'true' if c[k] else 'false'}\n")


def predict_rows(rows, reshard, profiles):
    """Each row with a scenario: its prediction and class, or why there is none."""
    out = []
    names = sorted(set(profiles.by_name))
    calib = {f["name"]: read_calibration(os.path.join(ROOT, f["calibration"])) for f in profiles.fits}
    for r in rows:
        if not r["scenario"]:
            continue
        item = {"id": r["id"], "system": r["system"], "platform": r["platform"], "scenario": r["scenario"],
                "measured_s": float(r["measured_s"])}
        profile = profile_of(r)
        if not profile or profile not in profiles.by_name:
            item["status"] = "no profile"
            out.append(item)
            continue
        strategy = profiles.strategy(profile)
        item.update(profile=profile, strategy=strategy)
        scenario = os.path.realpath(os.path.join(ROOT, r["scenario"]))
        try:
            item["predicted_s"] = reshard.systems(scenario, names)[profile]
        except RuntimeError as e:
            item["status"] = "error"
            item["error"] = str(e)
            out.append(item)
            continue
        item["relative_error"] = (item["predicted_s"] - item["measured_s"]) / item["measured_s"]
        item["status"] = "fitted" if r["id"] in profiles.fit_rows(profile) else "predicted"
        # A predicted row on a setup (scenario and strategy) a calibration subset of its constants
        # holds too is a second measurement of a fitted point, not a prediction somewhere new.
        item["setup_fitted"] = item["status"] == "predicted" and any(
            s == scenario and st == strategy for f in profiles.fits_of(profile) for s, st, _ in calib[f])
        out.append(item)
    return out


def refit_all(held_ids, reshard, profiles, tmp, tag):
    """Redoes every fit without the rows `held_ids`: per fit, the refitted values of its constants,
    or None where its subset lost every row (or no row informs a constant)."""
    refitted = {}
    for n, fit in enumerate(profiles.fits):
        calib_path = os.path.join(ROOT, fit["calibration"])
        lines = read_calibration(calib_path)
        if len(lines) != len(fit["rows"]):
            raise RuntimeError(f"{fit['calibration']} has {len(lines)} rows, reshard systems names {len(fit['rows'])}")
        keep = [line for line, rid in zip(lines, fit["rows"]) if rid not in held_ids]
        base = profiles.by_name[fit["base"]]
        carried = carried_values(base, refitted, own=fit["name"])
        unchanged = len(keep) == len(lines) and all(v is not None for v in carried.values()) and \
            not any(c["fit"] in refitted and refitted[c["fit"]] is not None for c in base["constants"]
                    if c["fit"] and c["fit"] != fit["name"])
        if unchanged:
            continue  # nothing it rests on was held out: the shipped values stand
        if not keep or any(v is None for v in carried.values()):
            refitted[fit["name"]] = None
            continue
        train = os.path.join(tmp, f"{tag}-{n}.csv")
        with open(train, "w") as f:
            f.write("scenario,strategy,measured_s\n")
            for scenario, strategy, measured in keep:
                f.write(f"{scenario},{strategy},{measured!r}\n")
        values = dict(carried)
        values.update({k: 0.0 for k in fit["constants"]})  # nothing of the held-out rows may stay in the base
        base_file = os.path.join(tmp, f"{tag}-{n}-base.yaml")
        params_yaml(base["cost"], values, base_file)
        rc, out, err = reshard.run(["calibrate", train, "--params", base_file, "--fit", ",".join(fit["constants"]),
                                    "--json"])
        if rc != 0:
            raise RuntimeError(f"calibrate {fit['name']} without {sorted(held_ids)} failed: {err.strip()}")
        cal = json.loads(out)
        got = {c["name"]: c["value"] for c in cal["constants"] if c["fitted"]}
        refitted[fit["name"]] = None if set(got) != set(fit["constants"]) else got
    return refitted


def carried_values(profile, refitted, own=None):
    """The values a profile's constants take from refitted fits (key: the profile's constant name),
    None for one whose fit could not be redone; `own`: a fit whose constants are left out."""
    values = {}
    for c in profile["constants"]:
        if not c["fit"] or c["fit"] == own or c["fit"] not in refitted:
            continue
        got = refitted[c["fit"]]
        values[c["name"]] = None if got is None else got[c["fit_constant"]]
    return values


def folds(items, reshard, profiles, key):
    """One fold per value of `key` (platform, system): every fit redone without that value's rows,
    which are then predicted."""
    rows = [i for i in items if i["status"] in ("fitted", "predicted")]
    out = []
    with tempfile.TemporaryDirectory(prefix="reshard-validate-") as tmp:
        for n, held in enumerate(sorted({i[key] for i in rows})):
            test = [i for i in rows if i[key] == held]
            refitted = refit_all({i["id"] for i in test}, reshard, profiles, tmp, f"{key}-{n}")
            fold = {"held_out": held, "refitted": {k: v for k, v in refitted.items()}, "rows": []}
            for i in test:
                profile = profiles.by_name[i["profile"]]
                values = carried_values(profile, refitted)
                entry = {"id": i["id"], "system": i["system"], "measured_s": i["measured_s"]}
                if any(v is None for v in values.values()):
                    lost = sorted({c["fit"] for c in profile["constants"] if c["name"] in values and values[c["name"]] is None})
                    entry["status"] = f"not predictable: the fit {', '.join(lost)} has no rows left"
                elif not values:
                    entry.update(status="no refitted constant", predicted_s=i["predicted_s"],
                                 relative_error=i["relative_error"])
                else:
                    path = os.path.join(tmp, f"{key}-{n}-{i['id']}.yaml")
                    params_yaml(profile["cost"], values, path)
                    scenario = os.path.realpath(os.path.join(ROOT, i["scenario"]))
                    p = reshard.estimate(scenario, path, i["strategy"])
                    entry.update(status="refitted", predicted_s=p, relative_error=(p - i["measured_s"]) / i["measured_s"])
                fold["rows"].append(entry)
            out.append(fold)
    return out


def fold_summary(results):
    errs = [abs(r["relative_error"]) for f in results for r in f["rows"] if "relative_error" in r]
    refit = [abs(r["relative_error"]) for f in results for r in f["rows"] if r.get("status") == "refitted"]
    lost = sum(1 for f in results for r in f["rows"] if r["status"].startswith("not predictable"))
    return {"rows": len(errs), "median_abs_error": statistics.median(errs) if errs else None,
            "beyond_35": sum(1 for e in errs if e > BEYOND), "refitted_rows": len(refit),
            "refitted_median_abs_error": statistics.median(refit) if refit else None, "not_predictable": lost}


def variant_ratios(items):
    """Two systems measured on one setup (scenario) by one source: the measured ratio of their times
    and the predicted one."""
    out = []
    table = [i for i in items if "predicted_s" in i]
    for n, a in enumerate(table):
        for b in table[n + 1:]:
            if a["scenario"] != b["scenario"] or a["system"] == b["system"] or a["platform"] != b["platform"]:
                continue
            measured = a["measured_s"] / b["measured_s"]
            predicted = a["predicted_s"] / b["predicted_s"]
            out.append({"rows": [a["id"], b["id"]], "measured_ratio": measured, "predicted_ratio": predicted,
                        "relative_error": predicted / measured - 1,
                        "fitted": a["status"] == "fitted" and b["status"] == "fitted"})
    return out


def per_system(items):
    """Per system (the CSV's column): its predicted rows' median and largest |error|, and its fitted rows."""
    out = []
    for system in sorted({i["system"] for i in items if "predicted_s" in i}):
        mine = [i for i in items if i["system"] == system and "predicted_s" in i]
        pred = [abs(i["relative_error"]) for i in mine if i["status"] == "predicted"]
        out.append({"system": system, "profile": mine[0]["profile"], "fitted": sum(1 for i in mine if i["status"] == "fitted"),
                    "predicted": len(pred), "median_abs_error": statistics.median(pred) if pred else None,
                    "max_abs_error": max(pred) if pred else None, "beyond_35": sum(1 for e in pred if e > BEYOND)})
    return out


def plot(items, path):
    """Measured against predicted, log-log: the calibration subsets (fitted, in-sample) and the
    predictions apart, the explained misses marked, the 35 % band shaded."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    table = [i for i in items if "predicted_s" in i]
    fig, ax = plt.subplots(figsize=(8.5, 7))
    lo = min(min(i["measured_s"], i["predicted_s"]) for i in table) / 1.5
    hi = max(max(i["measured_s"], i["predicted_s"]) for i in table) * 1.5
    xs = [lo, hi]
    ax.fill_between(xs, [x / 1.35 for x in xs], [x * 1.35 for x in xs], color="0.92", label="within 35 %")
    ax.plot(xs, xs, color="0.5", linewidth=0.8)
    fams = sorted({family(i["system"]) for i in table})
    colors = {f: f"C{n % 10}" for n, f in enumerate(fams)}
    for f in fams:
        for label, keep, marker, filled in (
                ("fitted", lambda i: i["status"] == "fitted", "s", False),
                ("predicted", lambda i: i["status"] == "predicted" and i["id"] not in EXPLAINED_MISSES, "o", True),
                ("explained miss", lambda i: i["status"] == "predicted" and i["id"] in EXPLAINED_MISSES, "x", True)):
            sel = [i for i in table if family(i["system"]) == f and keep(i)]
            if not sel:
                continue
            ax.scatter([i["measured_s"] for i in sel], [i["predicted_s"] for i in sel], marker=marker, zorder=3,
                       facecolors=colors[f] if filled else "none", edgecolors=colors[f],
                       label=f"{f}: {len(sel)} {label}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("published refit time (s)")
    ax.set_ylabel("reshard's prediction (s)")
    pred = [i for i in table if i["status"] == "predicted"]
    med = statistics.median(abs(i["relative_error"]) for i in pred) if pred else float("nan")
    ax.set_title(f"Published refit times: {len(pred)} predicted (median |error| {100 * med:.1f} %), "
                 f"{len(table) - len(pred)} fitted\n(params/published-refit.csv, scripts/validate.py; "
                 f"squares: calibration subsets, x: explained misses)", fontsize=9)
    ax.legend(loc="upper left", fontsize=7, ncol=1)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


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


def print_table(head, body, right):
    widths = [max(len(str(x[c])) for x in [head] + body) for c in range(len(head))]
    for line in [head, ["-" * w for w in widths]] + body:
        print("  ".join(str(v).rjust(w) if c in right else str(v).ljust(w)
                        for c, (v, w) in enumerate(zip(line, widths))).rstrip())


VALIDATION_DOC = os.path.join(ROOT, "docs", "validation.md")
LIMITATIONS_DOC = os.path.join(ROOT, "docs", "limitations.md")


def systems_without_reason(systems, path=LIMITATIONS_DOC):
    """The systems without a profile that docs/limitations.md's section "Implementation profiles"
    does not name (as `name`): each must have its reason there."""
    section, named = False, set()
    with open(path) as f:
        for line in f:
            if line.startswith("## "):
                section = line.startswith("## Implementation profiles")
            elif section:
                named.update(line.split("`")[1::2])
    return sorted(set(systems) - named)


def documented_predictions(path=VALIDATION_DOC):
    """{row id: (predicted seconds, the half-unit of its last printed digit)} from the table of
    docs/validation.md (| id | system | platform | measured | predicted | error | class |)."""
    out = {}
    header = ["id", "system", "platform", "measured", "predicted", "error", "class"]
    in_table = False  # only that table's rows: the document has other tables of seven columns
    with open(path) as f:
        for line in f:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if cells == header:
                in_table = True
                continue
            if not line.startswith("|"):
                in_table = False
            if not in_table or len(cells) != 7 or not cells[4].endswith(" s"):
                continue
            number = cells[4][:-2]
            try:
                value = float(number)
            except ValueError:
                continue
            decimals = len(number.split(".")[1]) if "." in number else 0
            out[cells[0]] = (value, 0.5 * 10 ** -decimals)
    return out


def undocumented_predictions(table, documented):
    """The rows whose prediction is not the documented one to its printed digits, and the rows the
    table and the document do not share, each as a line."""
    problems = []
    for i in table:
        if i["id"] not in documented:
            problems.append(f"{i['id']}: predicted {fmt_s(i['predicted_s'])}, not in docs/validation.md's table")
            continue
        value, half = documented[i["id"]]
        if abs(i["predicted_s"] - value) > half * (1 + 1e-9):
            problems.append(f"{i['id']}: predicted {i['predicted_s']:.4g} s, docs/validation.md prints {value:g} s")
    problems += [f"{d}: in docs/validation.md's table, not predicted" for d in sorted(set(documented) - {i["id"] for i in table})]
    return problems


def median_text(s, key="median_abs_error"):
    return "-" if s[key] is None else f"{100 * s[key]:.1f} %"


def print_report(a, data, items, summ, ratios, systems, lopo, loso):
    table = [i for i in items if "predicted_s" in i]
    skipped = [i for i in items if "predicted_s" not in i]
    print(f"{os.path.relpath(a.csv, ROOT)}: {data['rows']} published measurements, {data['systems']} systems "
          f"from {len(data['implementations'])} implementations, {len(data['generations'])} accelerator generations "
          f"({', '.join(data['generations'])}); {data['with_scenario']} rows with a shipped scenario")
    print()
    print_table(["id", "system", "platform", "measured", "predicted", "error", "class", "note"],
                [[i["id"], i["system"], i["platform"], fmt_s(i["measured_s"]), fmt_s(i["predicted_s"]),
                  pct(i["relative_error"]), i["status"],
                  "; ".join(x for x in ("setup also fitted" if i.get("setup_fitted") else "",
                                        f"profile {i['profile']}" if i["id"] in ROW_PROFILES else "",
                                        "explained miss" if i["id"] in EXPLAINED_MISSES else "") if x)]
                 for i in table], {3, 4, 5})
    print()
    f, p = summ["fitted"], summ["predicted"]
    print(f"fitted rows (the calibration subsets, in-sample): {f['rows']}, median |error| {median_text(f)}")
    print(f"predicted rows (not fitted): {p['rows']}, median |error| {median_text(p)}, "
          f"{p['beyond_35']} of {p['rows']} beyond {100 * BEYOND:.0f} %; "
          f"{summ['predicted_on_new_setups']} on a setup (scenario and strategy) no calibration subset holds")
    print()
    print("per system (predicted rows):")
    print_table(["system", "profile", "fitted", "predicted", "median |error|", "largest |error|", "beyond 35 %"],
                [[s["system"], s["profile"], s["fitted"], s["predicted"], median_text(s),
                  median_text(s, "max_abs_error"), s["beyond_35"]] for s in systems], {2, 3, 4, 5, 6})
    print()
    for r in ratios:
        print(f"variants on one setup: {r['rows'][0]} / {r['rows'][1]}: measured {r['measured_ratio']:.2f}, "
              f"predicted {r['predicted_ratio']:.2f} ({pct(r['relative_error'])}"
              + (", both rows fitted)" if r["fitted"] else ")"))
    for i in skipped:
        print(f"skipped {i['id']} ({i['system']}, {i['scenario']}): {i['status']}"
              + (f": {i['error']}" if i.get("error") else ""))
    print(f"rows without a shipped scenario (not predicted): {data['rows'] - data['with_scenario']}")
    print(f"systems without a profile: {len(data['without_profile'])} ({', '.join(data['without_profile'])})")
    for title, results in (("leave-one-platform-out", lopo), ("leave-one-system-out", loso)):
        if not results:
            continue
        print()
        s = fold_summary(results)
        print(f"{title}: {s['rows']} rows predicted with every fit redone without their {title.split('-')[2]}: "
              f"median |error| {median_text(s)}, {s['beyond_35']} beyond 35 %; the {s['refitted_rows']} whose "
              f"constants were refitted: median |error| {median_text(s, 'refitted_median_abs_error')}; "
              f"{s['not_predictable']} not predictable (their fit had no rows left)")
        for fold in results:
            errs = ", ".join(f"{r['id']} {pct(r['relative_error'])}" if "relative_error" in r else f"{r['id']} -"
                             for r in fold["rows"])
            print(f"  {fold['held_out']}: {errs}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--csv", default=os.path.join(ROOT, "params", "published-refit.csv"))
    ap.add_argument("--binary", default=os.environ.get("RESHARD_BINARY") or os.path.join(ROOT, "build", "cli", "reshard"))
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--plot", metavar="PNG", help="also draw measured against predicted (matplotlib)")
    ap.add_argument("--no-folds", action="store_true",
                    help="skip the leave-one-platform-out and leave-one-system-out refits (minutes)")
    ap.add_argument("--check", action="store_true",
                    help="exit 1 when a command fails, a printed row is neither fitted nor predicted, a predicted row "
                         "misses unexplained, a prediction is not docs/validation.md's, or a system without a profile "
                         "has no reason in docs/limitations.md")
    a = ap.parse_args()
    if not os.access(a.binary, os.X_OK):
        raise SystemExit(f"validate.py: no reshard binary at {a.binary} (--binary or RESHARD_BINARY)")

    rows = read_rows(a.csv)
    reshard = Reshard(a.binary)
    profiles = Profiles(reshard.profiles())
    items = predict_rows(rows, reshard, profiles)
    lopo = [] if a.no_folds else folds(items, reshard, profiles, "platform")
    loso = [] if a.no_folds else folds(items, reshard, profiles, "system")
    data = dataset_summary(rows)
    summ = summary(items)
    ratios = variant_ratios(items)
    systems = per_system(items)
    table = [i for i in items if "predicted_s" in i]
    skipped = [i for i in items if "predicted_s" not in i]
    if a.plot:
        plot(items, a.plot)
    if a.json:
        print(json.dumps({"schema": "reshard-validate-2", "csv": os.path.relpath(a.csv, ROOT), "dataset": data,
                          "rows": table, "skipped": skipped, "summary": summ, "per_system": systems,
                          "variant_ratios": ratios,
                          "leave_one_platform_out": {"summary": fold_summary(lopo), "folds": lopo} if lopo else None,
                          "leave_one_system_out": {"summary": fold_summary(loso), "folds": loso} if loso else None},
                         indent=2))
    else:
        print_report(a, data, items, summ, ratios, systems, lopo, loso)

    if a.check:
        failed = [i["id"] for i in skipped if i["status"] != "no profile"]
        unclassified = [i["id"] for i in table if i["status"] not in ("fitted", "predicted")]
        beyond = {i["id"] for i in table if i["status"] == "predicted" and abs(i["relative_error"]) > BEYOND}
        unexplained = sorted(beyond - set(EXPLAINED_MISSES))
        stale = sorted(set(EXPLAINED_MISSES) - beyond)
        moved = undocumented_predictions(table, documented_predictions())
        unreasoned = systems_without_reason(data["without_profile"])
        if failed or unclassified or not table or unexplained or stale or moved or unreasoned:
            print(f"validate.py: check failed: {len(table)} rows in the table; commands failed for {failed}; "
                  f"neither fitted nor predicted: {unclassified}; predicted beyond {100 * BEYOND:.0f} % and not "
                  f"explained (EXPLAINED_MISSES, docs/validation.md): {unexplained}; explained but no longer "
                  f"beyond: {stale}; predictions other than docs/validation.md's: {moved}; systems without a "
                  f"profile and without their reason in docs/limitations.md: {unreasoned}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
