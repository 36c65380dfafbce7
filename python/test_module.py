"""Tests of the Python module against the `reshard` command (same library, same numbers) and of its
own behaviour: scenario inputs, errors, timelines. Run by ctest (python_module) with PYTHONPATH at
the source tree and RESHARD_BUILD_DIR at the build folder."""

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
        "source": {"framework": "megatron", "tp": 2, "pp": 2, "ep": 4, "gpus": "0-7"},
        "destination": {"framework": "vllm", "tp": 2, "dp": 4, "ep": 8, "redundant_experts": 8, "gpus": "8-15"},
    }


class Plan(unittest.TestCase):
    def test_plan_matches_the_command(self):
        py = reshard.plan(SMALL)
        cli = cli_json("plan", SMALL)
        for key in ("bytes_needed", "bytes_to_move", "logical_bytes", "pieces", "lower_bound_s"):
            self.assertEqual(py[key], cli[key], key)
        self.assertEqual(py["lower_bound_cut"], cli["lower_bound_cut"])
        # The lower bound is the largest cut bound.
        self.assertAlmostEqual(py["lower_bound_s"], max(c["time_s"] for c in py["cuts"]), places=15)

    def test_strategy_estimate_is_above_the_lower_bound(self):
        for strategy in reshard.strategy_names() + ["auto"]:
            p = reshard.plan(SMALL, strategy=strategy)
            self.assertGreaterEqual(p["estimate"]["estimate_s"], p["lower_bound_s"], strategy)
            self.assertGreater(p["estimate"]["operations"], 0)

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


class Simulate(unittest.TestCase):
    def test_simulation_matches_the_command(self):
        py = reshard.simulate(SMALL, strategy="domain_chain")
        cli = cli_json("simulate", SMALL, "--strategy", "domain_chain")
        self.assertAlmostEqual(py["makespan_s"], cli["makespan_s"], delta=1e-12 * cli["makespan_s"])
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
        self.assertAlmostEqual(r["makespan_s"], r["ops_makespan_s"] + r["overheads_s"], delta=1e-12)
        tl = r["link_timeline"]
        self.assertGreater(len(tl["time_s"]), 0)
        self.assertLessEqual(set(tl["kind"]), set(r["link_capacity_Bps"]))
        self.assertIn("NVLink", r["link_capacity_Bps"])
        self.assertTrue(all(0 <= u <= 1 + 1e-9 for u in tl["utilization"]))
        self.assertTrue(all(t <= r["ops_makespan_s"] + 1e-12 for t in tl["time_s"]))


if __name__ == "__main__":
    unittest.main(verbosity=2)
