"""reshard.torch over torch.distributed's gloo on CPU processes: every strategy on small-moe-ep and
`auto` on the other small scenarios, byte-exact against an independent slicing of full tensors made
here; three refits in a row on one Refit; the plan-file runner with the extension absent; a peer
that dies mid-run named within the timeout; a flipped byte caught by the digests, naming the piece.

    python3 python/test_torch_refit.py            (ctest: torch_refit, label python)
"""
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

from reshard.torch import Refit, RefitError  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def full_tensor(name, shape, dtype, seed):
    """A deterministic tensor per (name, seed): the reference every rank slices on its own."""
    g = torch.Generator().manual_seed((hash_name(name) * 1000003 + seed) % (2**63))
    return torch.randn(shape, generator=g, dtype=torch.float32).to(DTYPES[dtype])


def hash_name(name):
    h = 1469598103934665603
    for b in name.encode():
        h = ((h ^ b) * 1099511628211) % (2**64)
    return h


def slice_box(t, box):
    return t[tuple(slice(lo, hi) for lo, hi in box)]


def worker(rank, world, port, plan_files, seeds, faults, queue, hide_extension):
    """One process: for every plan (on the group of the plan's first ranks), for every seed, a
    refit of full tensors sliced here. A rank outside a plan's group skips it."""
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    try:
        dist.init_process_group("gloo", rank=rank, world_size=world)
        if hide_extension:
            import reshard
            assert reshard._reshard is None, "the extension should be absent in this process"
        results = []
        groups = {}
        for plan_file in plan_files:
            refit = Refit.load(plan_file)
            n = refit.world_size
            if n not in groups:  # every process creates every group, in the same order
                groups[n] = None if n >= world else dist.new_group(ranks=list(range(n)))
            if rank >= n:
                continue
            group = groups[n]
            # This process runs the plan's ranks r with r % processes == rank (several when the
            # world is smaller than the plan).
            mine = [r for r in range(n) if r % min(n, world) == rank]
            tensors = refit.tensors
            # The same tensors every run, their values changed in place (as a training loop's
            # parameters): the first run binds them, the next ones reuse that binding.
            sources = {r: {n: [torch.empty(tuple(hi - lo for lo, hi in b), dtype=DTYPES[tensors[n][1]]) for b in boxes]
                           for n, boxes in refit.source_boxes(r).items()} for r in mine}
            destinations = {r: {n: [torch.empty(tuple(hi - lo for lo, hi in b), dtype=DTYPES[tensors[n][1]]) for b in boxes]
                                for n, boxes in refit.destination_boxes(r).items()} for r in mine}
            for seed in seeds:
                full = {}

                def ref(name):
                    if name not in full:
                        shape, dtype = tensors[name]
                        full[name] = full_tensor(name, shape, dtype, seed)
                    return full[name]

                for r in mine:
                    for n, boxes in refit.source_boxes(r).items():
                        for b, t in zip(boxes, sources[r][n]):
                            t.copy_(slice_box(ref(n), b))
                    for ts in destinations[r].values():
                        for t in ts:
                            t.zero_()
                if len(mine) == 1:
                    stats = refit.run(group=group, sources=sources[mine[0]], destinations=destinations[mine[0]], timeout=20,
                                      _faults=faults)
                else:
                    stats = refit.run(group=group, sources=sources, destinations=destinations, timeout=20, _faults=faults)
                wrong = 0
                for r in mine:
                    for n, boxes in refit.destination_boxes(r).items():
                        for b, t in zip(boxes, destinations[r][n]):
                            if not torch.equal(t, slice_box(ref(n), b)):
                                wrong += 1
                results.append((plan_file, seed, wrong, stats))
        queue.put((rank, "ok", results))
    except RefitError as e:
        queue.put((rank, "RefitError", (str(e), e.rank, e.peer)))
    except Exception as e:  # noqa: BLE001 - reported to the test
        queue.put((rank, type(e).__name__, str(e)))
    finally:
        if dist.is_initialized():
            try:
                dist.destroy_process_group()
            except Exception:  # noqa: BLE001
                pass


_port = [29500 + os.getpid() % 2000]


def run_world(world, plan_files, seeds=(0,), faults=None, hide_extension=False, timeout=240):
    """Runs `world` processes; returns {rank: (status, payload)} for those that reported."""
    _port[0] += 1
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    env_before = os.environ.get("RESHARD_BUILD_DIR")
    if hide_extension:
        os.environ["RESHARD_BUILD_DIR"] = tempfile.mkdtemp()  # no extension there
    try:
        procs = [ctx.Process(target=worker, args=(r, world, _port[0], plan_files, list(seeds), faults or {}, queue, hide_extension))
                 for r in range(world)]
        for p in procs:
            p.start()
        out = {}
        import queue as q
        import time
        deadline = time.time() + timeout
        while len(out) < world and time.time() < deadline:
            alive = any(p.is_alive() for p in procs)
            try:
                rank, status, payload = queue.get(timeout=1)
                out[rank] = (status, payload)
            except q.Empty:
                if not alive:
                    break
        for p in procs:
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
        return out
    finally:
        if hide_extension:
            if env_before is None:
                os.environ.pop("RESHARD_BUILD_DIR", None)
            else:
                os.environ["RESHARD_BUILD_DIR"] = env_before


def make_plan(tmp, scenario, strategy, staging=None):
    path = tmp / f"{scenario}-{strategy.replace(' ', '_')}-{staging}.json"
    Refit(str(ROOT / "scenarios" / f"{scenario}.yaml"), strategy=strategy, staging=staging).save(path)
    return str(path)


class TorchRefit(unittest.TestCase):
    """One launch runs every plan below, three refits each, in processes where the extension is
    absent (the plan files were written here with it): the torch engine and the plan-file runner."""

    @classmethod
    def setUpClass(cls):
        import reshard
        cls.tmp = Path(tempfile.mkdtemp())
        # small-moe-ep: every named strategy and auto, and auto within 1 MiB per GPU (many steps).
        cls.moe = [make_plan(cls.tmp, "small-moe-ep", s) for s in reshard.strategy_names() + ["auto"]]
        cls.moe_tight = make_plan(cls.tmp, "small-moe-ep", "auto", "1MiB")
        cls.others = {s: make_plan(cls.tmp, s, "auto") for s in ("small-gqa-megatron-vllm", "small-dtensor-uneven",
                                                                   "small-gqa-megatron-tp8")}
        cls.plans = cls.moe + [cls.moe_tight] + list(cls.others.values())
        cls.world = max(Refit.load(p).world_size for p in cls.plans)
        cls.seeds = (1, 2, 3)
        cls.out = run_world(cls.world, cls.plans, seeds=cls.seeds, hide_extension=True, timeout=600)

    def results(self, plan_file):
        """Every (rank, seed, wrong, stats) of one plan."""
        world = Refit.load(plan_file).world_size
        self.assertEqual(len(self.out), self.world, self.out)
        rows = []
        for rank, (status, payload) in sorted(self.out.items()):
            self.assertEqual(status, "ok", f"rank {rank}: {payload}")
            mine = [(rank, seed, wrong, stats) for f, seed, wrong, stats in payload if f == plan_file]
            self.assertEqual(len(mine), len(self.seeds) if rank < world else 0, f"rank {rank}")
            rows += mine
        return rows

    def expect_exact(self, plan_file):
        rows = self.results(plan_file)
        self.assertTrue(rows)
        for rank, seed, wrong, stats in rows:
            self.assertEqual(wrong, 0, f"rank {rank} {Path(plan_file).name} seed {seed}: {wrong} wrong tensors")
            self.assertTrue(stats["verified"])
        return rows

    def test_every_strategy_on_small_moe_ep_three_refits_in_a_row(self):
        for plan in self.moe:
            with self.subTest(plan=Path(plan).name):
                self.expect_exact(plan)

    def test_within_one_mib_of_staging_per_gpu(self):
        for rank, seed, wrong, stats in self.expect_exact(self.moe_tight):
            self.assertLessEqual(stats["staging_peak_bytes"], 1 << 20, f"rank {rank}")
            self.assertGreater(stats["waves"], 0)

    def test_auto_on_the_other_small_scenarios(self):
        for scenario, plan in self.others.items():
            with self.subTest(scenario=scenario):
                self.expect_exact(plan)

    def test_several_plan_ranks_per_process(self):
        # 16 plan ranks on 3 processes (6, 5, 5): between ranks of one process the bytes are
        # copied, between processes sent; and all 16 in one process, where nothing is sent.
        plans = [self.moe[0], self.moe[-1], self.moe_tight]  # gather_broadcast, auto, auto within 1 MiB
        for processes in (3, 1):
            with self.subTest(processes=processes):
                out = run_world(processes, plans, seeds=(5,), hide_extension=True)
                self.assertEqual(len(out), processes, out)
                for rank, (status, payload) in out.items():
                    self.assertEqual(status, "ok", f"process {rank}: {payload}")
                    self.assertEqual(len(payload), len(plans))
                    for plan_file, seed, wrong, stats in payload:
                        self.assertEqual(wrong, 0, f"process {rank} {Path(plan_file).name}: {wrong} wrong tensors")
                        self.assertTrue(stats["verified"])
                        if processes == 1:
                            self.assertEqual(stats["messages"], 0)

    def test_the_extension_was_absent_in_the_workers(self):
        # worker() asserts it; a rank that found it would have reported an AssertionError.
        self.assertTrue(all(status == "ok" for status, _ in self.out.values()), self.out)

    def test_a_flipped_byte_is_caught_naming_the_piece(self):
        plan = make_plan(self.tmp, "small-moe-ep", "direct")
        world = Refit.load(plan).world_size
        out = run_world(world, [plan], faults={"corrupt": 5})
        errors = [payload for status, payload in out.values() if status == "RefitError"]
        self.assertEqual(len(errors), world, out)
        for message, rank, peer in errors:
            self.assertIn("verification failed: piece", message)
            self.assertIn("destination box", message)

    def test_a_peer_that_dies_is_named_within_the_timeout(self):
        plan = make_plan(self.tmp, "small-gqa-megatron-vllm", "direct")
        world = Refit.load(plan).world_size
        import time
        t0 = time.time()
        out = run_world(world, [plan], faults={"die": 3}, timeout=120)
        self.assertLess(time.time() - t0, 100)
        errors = [payload for status, payload in out.values() if status == "RefitError"]
        self.assertTrue(errors, out)
        named = [e for e in errors if e[2] == 3]
        self.assertTrue(named, errors)
        self.assertIn("waited for rank 3", named[0][0])

    def test_bad_tensors_are_refused_naming_rank_and_tensor(self):
        plan = Refit.load(make_plan(self.tmp, "small-gqa-megatron-vllm", "direct"))
        with self.assertRaises(RefitError):
            plan._check_rank(99)
        boxes = plan.source_boxes(0)
        self.assertTrue(boxes)
        name, (box,) = next(iter(boxes.items()))
        self.assertEqual(len(box), len(plan.tensors[name][0]))


if __name__ == "__main__":
    unittest.main()
