"""Tests of the Python module against the `reshard` command (same library, same numbers) and of its
own behaviour: scenario inputs, errors, timelines. Run by ctest (python_module) with PYTHONPATH at
the source tree and RESHARD_BUILD_DIR at the build folder."""

import importlib.util
import json
import os
import subprocess
import sys
import unittest
from pathlib import Path

import reshard

ROOT = Path(__file__).resolve().parent.parent
BUILD = Path(os.environ.get("RESHARD_BUILD_DIR", ROOT / "build"))
CLI = BUILD / "cli" / "reshard"
SMALL = str(ROOT / "scenarios" / "small-moe-ep.yaml")
DSV3 = str(ROOT / "scenarios" / "deepseek-v3-h100.yaml")


def cli_json(*args):
    out = subprocess.run([str(CLI), *args, "--json"], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def small_dict():
    """small-moe-ep.yaml as a dict, its paths made absolute."""
    return {
        "name": "small-moe-ep-dict",
        "model": str(ROOT / "models" / "tiny-moe.yaml"),
        "topology": str(ROOT / "topologies" / "dgx-h100-2n.yaml"),
        "source": {"framework": "megatron", "tp": 2, "pp": 2, "ep": 4, "etp": 1, "gpus": "0-7"},
        "destination": {"framework": "vllm", "tp": 2, "dp": 4, "ep": 8, "redundant_experts": 8, "gpus": "8-15"},
    }


class Plan(unittest.TestCase):
    def test_plan_matches_the_command(self):
        py = reshard.plan(SMALL)
        cli = cli_json("plan", SMALL)
        for key in ("bytes_needed", "bytes_to_move", "logical_bytes", "pieces", "lower_bound_s"):
            self.assertEqual(py[key], cli[key], key)
        for key in ("bound_cut", "bound_where", "destination_gpus"):
            self.assertEqual(py[key], cli[key], key)
        # The lower bound is the largest cut bound.
        self.assertAlmostEqual(py["lower_bound_s"], max(c["time_s"] for c in py["cuts"]), places=15)

    def test_strategy_estimate_is_above_the_lower_bound(self):
        for strategy in reshard.strategy_names() + ["auto"]:
            p = reshard.plan(SMALL, strategy=strategy)
            self.assertGreaterEqual(p["estimate"]["estimate_s"], p["lower_bound_s"], strategy)
            self.assertGreater(p["estimate"]["operations"], 0)
            self.assertGreater(p["estimate"]["peak_staging_bytes"], 0)
            self.assertGreaterEqual(p["estimate"]["peak_staging_gpu"], 0)

    def test_path_objects_and_loaded_scenarios_are_the_same_scenario(self):
        by_str = reshard.plan(SMALL)
        self.assertEqual(reshard.plan(Path(SMALL)), by_str)
        loaded = reshard.load(SMALL)
        self.assertEqual(loaded.name, "small-moe-ep")
        self.assertEqual(reshard.plan(loaded), by_str)

    def test_dict_scenario_equals_its_file(self):
        from_dict = reshard.plan(small_dict())
        from_file = reshard.plan(SMALL)
        self.assertEqual(from_dict["scenario"], "small-moe-ep-dict")
        for key in ("bytes_needed", "pieces", "lower_bound_s", "source", "destination"):
            self.assertEqual(from_dict[key], from_file[key], key)

    def test_errors_name_the_key(self):
        bad = small_dict()
        bad["destination"]["tp"] = 3  # 8 GPUs are not a multiple of TP 3
        with self.assertRaises(reshard.ConfigError) as e:
            reshard.plan(bad)
        self.assertIn("<dict>", str(e.exception))
        self.assertIn("destination", str(e.exception))
        self.assertTrue(issubclass(reshard.ConfigError, ValueError))
        with self.assertRaises(reshard.ConfigError):
            reshard.plan(str(ROOT / "scenarios" / "no-such-file.yaml"))
        with self.assertRaises(TypeError):
            reshard.plan(42)
        with self.assertRaises(reshard.PlanError) as e:
            reshard.plan(SMALL, strategy="no_such_strategy")
        self.assertIn("unknown strategy 'no_such_strategy'", str(e.exception))
        self.assertTrue(issubclass(reshard.PlanError, reshard.Error))

    def test_without_matches_the_command(self):
        gqa = str(ROOT / "scenarios" / "small-gqa-megatron-vllm.yaml")
        loaded = reshard.load(gqa)
        survivors = loaded.without([0])
        py = reshard.plan(survivors)
        cli = cli_json("plan", gqa, "--without", "0")
        for key in ("bytes_needed", "bytes_to_move", "pieces", "lower_bound_s", "bound_where"):
            self.assertEqual(py[key], cli[key], key)
        self.assertEqual(loaded.membership([0]), cli["membership"])
        self.assertEqual(reshard.simulate(survivors, strategy="direct")["simulated_s"],
                         cli_json("simulate", gqa, "--strategy", "direct", "--without", "0")["simulated_s"])
        with self.assertRaises(reshard.PlanError) as e:
            loaded.without(list(range(8)))  # every source GPU
        self.assertIn("no surviving GPU holds", str(e.exception))
        with self.assertRaises(reshard.ConfigError) as e:
            loaded.without([99])
        self.assertIn("GPU 99 is not in topology", str(e.exception))


class Compare(unittest.TestCase):
    def test_compare_matches_the_command(self):
        py = reshard.compare(SMALL)
        cli = cli_json("compare", SMALL)
        self.assertEqual((py["best"], py["best_params"]), (cli["best"], cli["best_params"]))
        self.assertEqual(py["lower_bound_s"], cli["lower_bound_s"])
        self.assertEqual([r["strategy"] for r in py["strategies"]], [r["strategy"] for r in cli["strategies"]])
        for a, b in zip(py["strategies"], cli["strategies"]):
            self.assertEqual(a["estimate_s"], b["estimate_s"], a["strategy"])
            self.assertIn(a["limit"], ("host link", "NIC link", "fabric", "NVLink", "C2C", "PCIe") + (a["limited_by"],))
        self.assertEqual(py["bound_cut"], reshard.plan(SMALL)["bound_cut"])

    def test_other_systems_match_the_command(self):
        # compare --systems all and systems=["all"]: the same profiles, in the same order, the same
        # estimates; an unknown name is one error naming the known ones.
        py = reshard.compare(SMALL, tune=False, systems=["all"])
        cli = cli_json("compare", SMALL, "--systems", "all")
        self.assertEqual([(s["system"], s["estimate_s"]) for s in py["systems"]],
                         [(s["system"], s["estimate_s"]) for s in cli["systems"]])
        self.assertIn("nccl_m2n_hierarchical", [s["system"] for s in py["systems"]])
        with self.assertRaises(reshard.Error) as e:
            reshard.compare(SMALL, tune=False, systems=["no_such_system"])
        self.assertIn("unknown system 'no_such_system'", str(e.exception))

    def test_overrides_equal_the_edited_scenario(self):
        edited = small_dict()
        edited["destination"].update({"tp": 4, "dp": 2})
        by_dict = reshard.compare(edited, tune=False)
        by_override = reshard.compare(small_dict(), tune=False, overrides={"destination.tp": 4, "destination.dp": 2})
        by_file = reshard.compare(SMALL, tune=False, overrides={"destination.tp": 4, "destination.dp": 2})
        for other in (by_override, by_file):
            self.assertEqual([r["estimate_s"] for r in other["strategies"]], [r["estimate_s"] for r in by_dict["strategies"]])
        self.assertEqual(reshard.load(SMALL, overrides={"destination.tp": 4, "destination.dp": 2}).summary()["destination"],
                         "vllm TP4 DP2 EP8 +8 redundant experts on 8 GPUs")
        # A topology key: a slower NIC can only make the lower bound longer (here the network binds).
        slow = reshard.plan(SMALL, overrides={"topology.cluster.nic_speed": "100Gbps"})
        self.assertGreater(slow["lower_bound_s"], reshard.plan(SMALL)["lower_bound_s"])

    def test_override_errors_name_the_override(self):
        with self.assertRaises(reshard.ConfigError) as e:
            reshard.plan(SMALL, overrides={"destination.tp": "three"})
        self.assertIn("--set destination.tp=three", str(e.exception))
        with self.assertRaises(TypeError):
            reshard.plan(SMALL, overrides=["destination.tp=4"])

    def test_only_named_strategies_without_the_tuner(self):
        r = reshard.compare(SMALL, strategies=["direct", "domain_chain"], tune=False)
        self.assertEqual([row["strategy"] for row in r["strategies"]], ["direct", "domain_chain"])

    def test_readme_command(self):
        """The README's command, run as written from the top of the source tree."""
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        out = subprocess.run([sys.executable, "-c",
                              "import reshard; print(reshard.compare('scenarios/deepseek-v3-h100.yaml')['best_params'])"],
                             cwd=ROOT, env=env, check=True, capture_output=True, text=True).stdout.strip()
        self.assertIn(out.split()[0], reshard.strategy_names())


@unittest.skipUnless(importlib.util.find_spec("pandas"), "pandas is not installed")
class Sweep(unittest.TestCase):
    def test_points(self):
        keys, points = reshard._points({"a": [1, 2], "b": ["x", "y", "z"]})
        self.assertEqual(keys, ["a", "b"])
        self.assertEqual(points, [(1, "x"), (1, "y"), (1, "z"), (2, "x"), (2, "y"), (2, "z")])
        keys, points = reshard._points([{"a": [1, 2], "b": [3, 4]}, {"c": [5]}])
        self.assertEqual((keys, points), (["a", "b", "c"], [(1, 3, 5), (2, 4, 5)]))
        with self.assertRaises(ValueError):
            reshard._points([{"a": [1, 2], "b": [3]}])
        with self.assertRaises(ValueError):
            reshard._points([{"a": [1]}, {"a": [2]}])

    def test_rows_are_compare_at_each_point(self):
        axes = [{"destination.tp": [2, 4], "destination.dp": [4, 2]}, {"topology.cluster.nic_speed": ["200Gbps", "400Gbps"]}]
        strategies = ["direct", "domain_chain"]
        frame = reshard.sweep(SMALL, axes, strategies=strategies, threads=2)
        self.assertEqual(len(frame), 4 * len(strategies))
        self.assertEqual(list(frame.columns[:3]), ["destination.tp", "destination.dp", "topology.cluster.nic_speed"])
        self.assertEqual(list(frame["destination.tp"]), [2, 2, 2, 2, 4, 4, 4, 4])
        self.assertTrue((frame.error == "").all())
        for point in (1, 2):  # (2, 4, 400Gbps) and (4, 2, 200Gbps)
            rows = frame[frame.point == point]
            tp, dp, nic = rows.iloc[0][["destination.tp", "destination.dp", "topology.cluster.nic_speed"]]
            c = reshard.compare(SMALL, strategies=strategies, tune=False,
                                overrides={"destination.tp": tp, "destination.dp": dp, "topology.cluster.nic_speed": nic})
            self.assertEqual(list(rows.estimate_s), [r["estimate_s"] for r in c["strategies"]])
            self.assertEqual(rows.iloc[0].lower_bound_s, c["lower_bound_s"])

    def test_a_dict_scenario_sweeps_as_its_file(self):
        axes = {"topology.cluster.nic_speed": ["200Gbps", "400Gbps"]}
        from_dict = reshard.sweep(small_dict(), axes, strategies=["direct"])
        from_file = reshard.sweep(SMALL, axes, strategies=["direct"])
        self.assertEqual(list(from_dict.estimate_s), list(from_file.estimate_s))
        self.assertTrue((from_dict.error == "").all())

    def test_a_failing_point_is_a_row_with_its_error(self):
        frame = reshard.sweep(SMALL, {"destination.tp": [2, 3]}, strategies=["direct"])
        self.assertEqual(list(frame.error == ""), [True, False])
        self.assertIn("destination", frame.error.iloc[1])


class Simulate(unittest.TestCase):
    def test_simulation_matches_the_command(self):
        py = reshard.simulate(SMALL, strategy="domain_chain")
        cli = cli_json("simulate", SMALL, "--strategy", "domain_chain")
        self.assertAlmostEqual(py["simulated_s"], cli["simulated_s"], delta=1e-12 * cli["simulated_s"])
        self.assertAlmostEqual(py["estimate_s"], cli["estimate_s"], delta=1e-12 * cli["estimate_s"])

    def test_timeline(self):
        r = reshard.simulate(SMALL, strategy="auto", timeline=True)
        ops = r["ops"]
        n = r["operations"]
        for column in ops.values():
            self.assertEqual(len(column), n)
        self.assertTrue(all(f >= s >= 0 for s, f in zip(ops["start_s"], ops["finish_s"])))
        # The last op finishes at ops_makespan; the makespan adds the overheads after it.
        self.assertAlmostEqual(max(ops["finish_s"]), r["ops_makespan_s"], delta=1e-15)
        self.assertAlmostEqual(r["simulated_s"], r["ops_makespan_s"] + r["overheads_s"], delta=1e-12)
        tl = r["link_timeline"]
        self.assertGreater(len(tl["time_s"]), 0)
        self.assertLessEqual(set(tl["kind"]), set(r["link_capacity_Bps"]))
        self.assertIn("NVLink", r["link_capacity_Bps"])
        self.assertTrue(all(0 <= u <= 1 + 1e-9 for u in tl["utilization"]))
        self.assertTrue(all(t <= r["ops_makespan_s"] + 1e-12 for t in tl["time_s"]))


if __name__ == "__main__":
    unittest.main(verbosity=2)
