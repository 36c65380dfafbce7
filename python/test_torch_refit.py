"""reshard.torch over torch.distributed's gloo on CPU processes: every strategy on small-moe-ep and
`auto` on the other small scenarios, byte-exact against an independent slicing of full tensors made
here; three refits in a row on one Refit; the plan-file runner with the extension absent; a peer
that dies mid-run named within the timeout; a flipped byte caught by the digests, naming the piece;
a source slice misplaced where no replica exists, named through the trainer's weight digests.

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

from reshard.torch import PyNcclGroup, Refit, RefitError, TorchGroup, tensor_digest  # noqa: E402

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


class StandInPyNccl:
    """vLLM's PyNcclCommunicator shape over gloo, for the tests: send(tensor, dst) and recv(tensor, src)
    between group_start() and group_end() are issued together at group_end and completed before it
    returns (NCCL launches a group on the stream, which the next calls wait for); outside a group
    each is one such group."""

    def __init__(self):
        self.pending = None
        self.calls = 0

    def group_start(self):
        self.pending = []

    def group_end(self):
        ops, self.pending = self.pending, None
        if ops:
            for w in dist.batch_isend_irecv(ops):
                w.wait()

    def _issue(self, op):
        self.calls += 1
        if self.pending is None:
            self.pending = [op]
            self.group_end()
        else:
            self.pending.append(op)

    def send(self, tensor, dst):
        self._issue(dist.P2POp(dist.isend, tensor, dst))

    def recv(self, tensor, src):
        self._issue(dist.P2POp(dist.irecv, tensor, src))


class StandInStatelessGroup:
    """vLLM's StatelessProcessGroup shape (rank, world_size, all_gather_obj, store) over the world."""

    def __init__(self):
        self.rank, self.world_size = dist.get_rank(), dist.get_world_size()
        self.store = dist.distributed_c10d._get_default_store()

    def all_gather_obj(self, obj):
        out = [None] * self.world_size
        dist.all_gather_object(out, obj)
        return out


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
            # test-only: this rank runs another plan than the others ({"other_plan": (rank, file)})
            other = faults.get("other_plan")
            refit = Refit.load(other[1] if other and other[0] == rank else plan_file)
            n = refit.world_size
            if n not in groups:  # every process creates every group, in the same order
                groups[n] = None if n >= world else dist.new_group(ranks=list(range(n)))
            if rank >= n:
                continue
            group = groups[n]
            # This process runs the plan's ranks r with r % processes == rank (several when the
            # world is smaller than the plan); with {"rank_map": "reversed"} plan rank r runs on
            # process n - 1 - r; with {"comm": "pynccl"} on the stand-in of vLLM's communicator.
            rank_map = list(reversed(range(n))) if faults.get("rank_map") == "reversed" else None
            if faults.get("comm") == "pynccl":
                comm = PyNcclGroup(StandInPyNccl(), StandInStatelessGroup(), rank_map)
            else:
                comm = TorchGroup(group, rank_map)
            mine = [r for r in range(n) if comm.process_of(r) == rank]
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
                    if faults.get("misplace") == r:  # test-only: one source tensor holds another box's slice
                        n, i, other = misplaced_box(refit, r)
                        sources[r][n][i].copy_(slice_box(ref(n), other))
                    for ts in destinations[r].values():
                        for t in ts:
                            t.zero_()
                # test-only: the trainer's digests of its whole weights ({"source_digests": True})
                digests = {n: tensor_digest(ref(n)) for n in tensors} if faults.get("source_digests") else None
                if len(mine) == 1:
                    stats = refit.run(comm=comm, sources=sources[mine[0]], destinations=destinations[mine[0]],
                                      timeout=faults.get("timeout", 20), source_digests=digests, _faults=faults)
                else:
                    stats = refit.run(comm=comm, sources=sources, destinations=destinations, timeout=faults.get("timeout", 20),
                                      source_digests=digests, _faults=faults)
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


def misplaced_box(refit, rank):
    """(name, index, box): rank's first source box (in name order) that has a box of the same shape
    beside it along some dimension, and that neighbour -- another rank's slice in a sharded weight."""
    for name, boxes in sorted(refit.source_boxes(rank).items()):
        shape = refit.tensors[name][0]
        for i, box in enumerate(boxes):
            for d, (lo, hi) in enumerate(box):
                n = hi - lo
                at = lo + n if hi + n <= shape[d] else lo - n
                if n < shape[d] and at >= 0:
                    return name, i, [(at, at + n) if k == d else b for k, b in enumerate(box)]
    raise AssertionError(f"rank {rank} holds no sharded weight")


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
            self.assertGreater(stats["windows"], 0)

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

    def test_a_peer_that_dies_is_named_by_every_survivor_within_the_timeout(self):
        plan = make_plan(self.tmp, "small-gqa-megatron-vllm", "direct")
        world = Refit.load(plan).world_size
        import time
        t0 = time.time()
        out = run_world(world, [plan], faults={"die": 3, "timeout": 20}, timeout=120)
        self.assertLess(time.time() - t0, 100)
        self.assertNotIn(3, out)  # it died before reporting
        self.assertEqual(len(out), world - 1, out)
        for rank, (status, payload) in out.items():
            self.assertEqual(status, "RefitError", f"rank {rank}: {payload}")
            self.assertIn("rank 3", payload[0], f"rank {rank}")

    def test_a_rank_that_fails_mid_run_is_named_by_every_rank_at_once(self):
        # Rank 5 raises in the run's last step (an error of its own, not a peer's): every rank ends
        # with a RefitError naming rank 5 and what failed. Only the relayed failure carries rank 5's
        # own message ("injected failure"); a rank that reached the 60 s timeout instead would name
        # a peer that did not answer. (No wall-clock bound: on a loaded machine the processes' start
        # alone varies by tens of seconds.)
        plan = make_plan(self.tmp, "small-moe-ep", "gather_broadcast")
        world = Refit.load(plan).world_size
        out = run_world(world, [plan], faults={"raise": 5, "timeout": 60}, timeout=120)
        self.assertEqual(len(out), world, out)
        for rank, (status, payload) in out.items():
            self.assertEqual(status, "RefitError", f"rank {rank}: {payload}")
            message, failing, _ = payload
            self.assertEqual(failing, 5, f"rank {rank}: {message}")
            self.assertIn("injected failure", message, f"rank {rank}")

    def test_a_rank_running_another_plan_is_named_by_every_rank_at_once(self):
        plan = make_plan(self.tmp, "small-moe-ep", "direct")
        other = make_plan(self.tmp, "small-moe-ep", "domain_chain")
        world = Refit.load(plan).world_size
        # Every rank names the plan mismatch and the odd process (the plan check, before any
        # transfer), not a peer that went silent at the 60 s timeout.
        out = run_world(world, [plan], faults={"other_plan": (7, other), "timeout": 60}, timeout=120)
        self.assertEqual(len(out), world, out)
        for rank, (status, payload) in out.items():
            self.assertEqual(status, "RefitError", f"rank {rank}: {payload}")
            self.assertIn("different refit plans", payload[0])
            self.assertIn("[7]", payload[0], f"rank {rank}: the odd process is named")

    def test_python_work_does_not_grow_with_the_chunk_count(self):
        # The same strategy in 64 KiB and in 1 MiB chunks (4.5 times as many chunks: 242 and 54; an op
        # smaller than 64 KiB is one chunk at either size): the engine moves
        # windows of its own (reshard.torch WINDOW_BYTES), so every rank issues the same sends,
        # receives and messages, counted by the run.
        plans = [make_plan(self.tmp, "small-moe-ep", f"domain_chain chunk={c}") for c in ("64KiB", "1MiB")]
        world = Refit.load(plans[0]).world_size
        out = run_world(world, plans, seeds=(1,))
        self.assertEqual(len(out), world, out)
        chunks = [sum(int(op["chunks"]) for op in Refit.load(p)._plan["ops"] if op) for p in plans]
        self.assertGreaterEqual(chunks[0], 4 * chunks[1], chunks)
        for rank, (status, payload) in out.items():
            self.assertEqual(status, "ok", f"rank {rank}: {payload}")
            small, large = (next(st for f, _, w, st in payload if f == p) for p in plans)
            for key in ("actions", "messages", "windows"):
                self.assertEqual(small[key], large[key], f"rank {rank}: {key}")

    def test_a_group_whose_ranks_are_not_the_plans(self):
        # Plan rank r on process 15 - r (rank_map): a trainer and a server joined in one group in
        # another order than the plan's GPUs. Every byte exact.
        plans = [make_plan(self.tmp, "small-moe-ep", s) for s in ("direct", "gather_broadcast", "auto")]
        world = Refit.load(plans[0]).world_size
        out = run_world(world, plans, seeds=(4,), faults={"rank_map": "reversed"})
        self.assertEqual(len(out), world, out)
        for rank, (status, payload) in out.items():
            self.assertEqual(status, "ok", f"process {rank}: {payload}")
            for plan_file, seed, wrong, stats in payload:
                self.assertEqual(wrong, 0, f"process {rank} {Path(plan_file).name}")
                self.assertTrue(stats["verified"])

    def test_vllms_communicator_shape(self):
        # PyNcclGroup over a stand-in of vLLM's PyNcclCommunicator and StatelessProcessGroup (each
        # wave's sends and receives one group): every strategy exact, and with a reversed rank map.
        plans = [make_plan(self.tmp, "small-moe-ep", s) for s in ("direct", "domain_chain", "gather_broadcast")]
        world = Refit.load(plans[0]).world_size
        for faults in ({"comm": "pynccl"}, {"comm": "pynccl", "rank_map": "reversed"}):
            with self.subTest(**faults):
                out = run_world(world, plans, seeds=(6,), faults=faults)
                self.assertEqual(len(out), world, out)
                for rank, (status, payload) in out.items():
                    self.assertEqual(status, "ok", f"process {rank}: {payload}")
                    for plan_file, seed, wrong, stats in payload:
                        self.assertEqual(wrong, 0, f"process {rank} {Path(plan_file).name}")

    def test_a_tensor_of_another_dtype_is_refused(self):
        # The plan moves bfloat16; a float16 tensor of the same size would receive raw bf16 bits.
        refit = Refit.load(make_plan(self.tmp, "small-gqa-megatron-vllm", "direct"))
        rank = refit.world_size - 1
        regions = refit._plan["ranks"][rank]["regions"]
        dtypes = {"fp16": torch.bfloat16, "bf16": torch.float16, "fp32": torch.float16}
        destinations = {n: [torch.empty([hi - lo for lo, hi in b], dtype=dtypes[refit.tensors[n][1]]) for b in bs]
                        for n, bs in refit.destination_boxes(rank).items()}
        with self.assertRaises(RefitError) as e:
            refit._bind(rank, regions, {}, destinations)
        self.assertIn("the plan moves", str(e.exception))

    def test_the_digest_is_execs(self):
        # reshard.torch's vectorised digest gives exec's piece digest (exec/verify.hpp) on any
        # length and alignment: hand-worked, then against the extension on random bytes, one at a
        # time and all in one batch (_digests: the pieces end to end in one matrix).
        from reshard.torch import _digest, _digests
        # 9 bytes 01 00 .. 00 | 02: w0 = 1, w1 = 2 -> 9 + 1*1 + 2*3 = 16.
        self.assertEqual(_digest(torch.tensor([1, 0, 0, 0, 0, 0, 0, 0, 2], dtype=torch.uint8)), 16)
        self.assertEqual(_digest(torch.zeros(0, dtype=torch.uint8)), 0)
        import reshard
        if reshard._reshard is None:
            self.skipTest("the extension is not built")
        g = torch.Generator().manual_seed(7)
        pieces = []
        for n in (1, 7, 8, 9, 0, 2047, 2048, 2049, 4095, 4096 * 8 + 3, 1 << 20):
            data = torch.randint(0, 256, (n,), dtype=torch.uint8, generator=g)
            self.assertEqual(_digest(data), reshard._reshard._piece_digest(bytes(data.numpy())), n)
            pieces.append(data)
        self.assertEqual(_digests(pieces, {}), [reshard._reshard._piece_digest(bytes(d.numpy())) for d in pieces])

    def test_a_process_builds_only_its_ranks_programs(self):
        # Refit(..., ranks=[r]) asks the extension for rank r's program alone (the plan file's other
        # lines empty): the same boxes and streams as the whole plan's, and another rank is refused;
        # saved and loaded back, the same.
        import reshard
        if reshard._reshard is None:
            self.skipTest("the extension is not built")
        scenario = str(ROOT / "scenarios" / "small-moe-ep.yaml")
        whole = Refit(scenario, strategy="hybrid")
        one = Refit(scenario, strategy="hybrid", ranks=[5])
        self.assertEqual(one.fingerprint, whole.fingerprint)
        self.assertEqual(one._plan["ranks"][5], whole._plan["ranks"][5])
        self.assertEqual(one.destination_boxes(5), whole.destination_boxes(5))
        with self.assertRaises(RefitError) as e:
            one.source_boxes(4)
        self.assertIn("rank 4", str(e.exception))
        path = os.path.join(self.tmp, "one-rank.jsonl")
        one.save(path)
        again = Refit.load(path)
        self.assertEqual(again._plan["ranks"][5], whole._plan["ranks"][5])
        with self.assertRaises(RefitError):
            again.source_boxes(4)

    def test_bad_tensors_are_refused_naming_rank_and_tensor(self):
        plan = Refit.load(make_plan(self.tmp, "small-gqa-megatron-vllm", "direct"))
        with self.assertRaises(RefitError):
            plan._check_rank(99)
        boxes = plan.source_boxes(0)
        self.assertTrue(boxes)
        name, (box,) = next(iter(boxes.items()))
        self.assertEqual(len(box), len(plan.tensors[name][0]))


def position_digest(tensor, box, shape):
    """tensor_digest written out element by element (an independent re-implementation): sum of the
    element's bits times splitmix64's finaliser (made odd) of its row-major index in the weight."""
    import itertools
    mask = (1 << 64) - 1

    def mix(x):
        x = (x * 0x9E3779B97F4A7C15) & mask
        x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & mask
        x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & mask
        return (x ^ (x >> 31)) | 1

    strides = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        strides[d] = strides[d + 1] * shape[d + 1]
    es = tensor.element_size()
    raw = bytes(tensor.contiguous().view(-1).view(torch.uint8).tolist())
    total = 0
    for k, idx in enumerate(itertools.product(*[range(lo, hi) for lo, hi in box])):
        g = sum(i * s for i, s in zip(idx, strides))
        total += int.from_bytes(raw[k * es:(k + 1) * es], "little") * mix(g)
    return total & mask


class Digests(unittest.TestCase):
    """What verification reads, and the trainer's whole-weight digests (tensor_digest) against the
    refit's source boxes."""

    def test_verification_reads_each_piece_where_it_lies(self):
        # A piece read as a byte range of its region (no copy) is exactly its box's elements: on every
        # rank of five small scenarios, the range of a tensor numbered element by element equals the
        # box sliced out of it.
        import reshard
        if reshard._reshard is None:
            self.skipTest("the extension is not built")
        ranges = 0
        for scenario in ("small-gqa-megatron-vllm", "small-moe-ep", "small-dtensor-uneven", "small-gqa-megatron-tp8",
                         "small-qwen3-next"):
            refit = Refit(str(ROOT / "scenarios" / f"{scenario}.yaml"), strategy="auto")
            p = refit._plan
            for r in range(refit.world_size):
                regions = p["ranks"][r]["regions"]
                for piece, side, region, where, span, box, weight, factor in refit._verify_entries(r):
                    if span is None:
                        continue
                    shape = [hi - lo for lo, hi in regions[region]["box"]]
                    size = p["tensors"][regions[region]["tensor"]]["element_size"]
                    numbered = torch.arange(size * int(torch.tensor(shape).prod()), dtype=torch.int64).view(*shape, size)
                    self.assertTrue(torch.equal(numbered.reshape(-1)[span[0]:span[1]], numbered[where].reshape(-1)),
                                    f"{scenario} rank {r} piece {piece} box {box} in {regions[region]['box']}")
                    ranges += 1
        self.assertGreater(ranges, 1000)

    def test_box_digests_add_up_to_the_weights(self):
        # Against the element-by-element re-implementation, on each dtype's size and on boxes of a
        # 3-D weight; the boxes of a tiling add up (mod 2^64) to the whole weight's digest, and a
        # box's bytes at its neighbour's box do not.
        g = torch.Generator().manual_seed(48)
        full = torch.randn((6, 5, 7), generator=g)
        mask = (1 << 64) - 1
        for dtype in (torch.bfloat16, torch.float16, torch.float32, torch.float64, torch.uint8):
            w = full.to(dtype) if dtype != torch.uint8 else torch.randint(0, 256, (6, 5, 7), dtype=dtype, generator=g)
            self.assertEqual(tensor_digest(w), position_digest(w, [(0, 6), (0, 5), (0, 7)], [6, 5, 7]), dtype)
            box = [(1, 4), (0, 5), (2, 6)]
            part = w[1:4, :, 2:6]
            self.assertEqual(tensor_digest(part, box, [6, 5, 7]), position_digest(part, box, [6, 5, 7]), dtype)
            tiles = [[(0, 3), (0, 5), (0, 7)], [(3, 6), (0, 5), (0, 4)], [(3, 6), (0, 5), (4, 7)]]
            parts = [w[tuple(slice(lo, hi) for lo, hi in b)] for b in tiles]
            self.assertEqual(sum(tensor_digest(p, b, [6, 5, 7]) for p, b in zip(parts, tiles)) & mask, tensor_digest(w))
            halves = [[(0, 3), (0, 5), (0, 7)], [(3, 6), (0, 5), (0, 7)]]
            swapped = tensor_digest(w[3:], halves[0], [6, 5, 7]) + tensor_digest(w[:3], halves[1], [6, 5, 7])
            self.assertNotEqual(swapped & mask, tensor_digest(w), dtype)
        self.assertEqual(tensor_digest(torch.tensor(2.5)), position_digest(torch.tensor([2.5]), [(0, 1)], [1]))

    def test_a_misplaced_source_slice_without_a_replica_is_named(self):
        # small-gqa-megatron-tp8 trains with TP 8 and no data parallelism: no source box has a replica.
        # Rank 2's first sharded weight holds its neighbour's slice: its pieces' digests agree with
        # what the needers receive, so only the trainer's weight digests can tell; every rank names the
        # weight and the two boxes that hold the same bytes.
        tmp = Path(tempfile.mkdtemp())
        plan = make_plan(tmp, "small-gqa-megatron-tp8", "direct")
        refit = Refit.load(plan)
        from reshard.torch import _box
        name, i, other = misplaced_box(refit, 2)
        mine = refit.source_boxes(2)[name][i]
        out = run_world(refit.world_size, [plan], faults={"misplace": 2, "source_digests": True})
        self.assertEqual(len(out), refit.world_size, out)
        for rank, (status, payload) in out.items():
            self.assertEqual(status, "RefitError", f"rank {rank}: {payload}")
            message = payload[0]
            self.assertIn(f"the sources of '{name}' do not add up to its source digest", message, f"rank {rank}")
            self.assertIn(f"rank 2's box {_box(mine)}", message, f"rank {rank}")
            self.assertIn(f"'s box {_box(other)}", message, f"rank {rank}")  # the neighbour's, whose bytes rank 2 holds
            self.assertIn("hold the same bytes", message, f"rank {rank}")

    def test_the_right_slices_pass_with_the_source_digests(self):
        tmp = Path(tempfile.mkdtemp())
        plan = make_plan(tmp, "small-gqa-megatron-tp8", "direct")
        out = run_world(Refit.load(plan).world_size, [plan], seeds=(1, 2), faults={"source_digests": True})
        for rank, (status, payload) in out.items():
            self.assertEqual(status, "ok", f"rank {rank}: {payload}")
            for _, seed, wrong, stats in payload:
                self.assertEqual(wrong, 0)
                self.assertTrue(stats["verified"])


if __name__ == "__main__":
    unittest.main()
