"""reshard.torch: refit a model's weights from its training layout to its inference layout, in an RL
loop, with torch.distributed (gloo on CPU, NCCL on GPUs).

    from reshard.torch import Refit
    refit = Refit("scenarios/small-moe-ep.yaml", strategy="auto", staging="64MiB")   # once
    refit.source_boxes(rank)       # {HF name: [(lo, hi), ...] per dimension}: what rank holds
    refit.destination_boxes(rank)  # what rank needs
    stats = refit.run(sources={name: tensor}, destinations={name: tensor})  # every training step

Every process of the group calls `run` with its own tensors: views of the trainer's parameters (as
sources) and of the server's (as destinations), each of its box's shape and the tensor's dtype. The
plan (every GPU's program: the regions it holds, the streams it sends and receives chunk by chunk
through rings of slots, docs/execution.md) is computed once in C++ -- by the `_reshard` extension,
or read from a refit plan file that `reshard plan --programs -o FILE` wrote (`Refit.load(FILE)`),
which needs no compiled reshard at all. Process rank r of the group runs GPU `gpus[r]` of the
plan; the group has exactly `world_size` processes.

Within a step, a stream moves chunk c over a hop of depth d in wave offset + c + d - 1; each wave
is one `batch_isend_irecv` of the rank's sends and receives, issued by every rank in (operation,
hop) order so that NCCL and gloo match them pair by pair. A chunk that is one contiguous run of a
source tensor is sent from the tensor itself, one that lands as one run in a destination tensor is
received into it; the others go through the bounded staging rings (at most the plan's budget).
"""

import datetime as _dt
import hashlib as _hashlib
import json as _json
import time as _time
from pathlib import Path as _Path

try:
    import torch
    import torch.distributed as dist
except ImportError as _e:
    raise ModuleNotFoundError(f"reshard.torch needs PyTorch ({_e}): apt-get install python3-torch (or pip install torch)",
                              name="torch") from _e

FORMAT = "reshard-refit-plan-1"

# The plan's dtype names; FP8 and E8M0 travel as raw bytes (uint8 tensors).
_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "fp8": torch.uint8,
           "e8m0": torch.uint8}


class RefitError(RuntimeError):
    """A refit that cannot run or did not deliver: `rank` (this process), `peer` (the process it
    waited for, or -1), and the message naming the operation, tensor or piece."""

    def __init__(self, message, rank=-1, peer=-1):
        super().__init__(message)
        self.rank = rank
        self.peer = peer


def _box(b):
    return tuple((int(lo), int(hi)) for lo, hi in b)


def _extent(box):
    return tuple(hi - lo for lo, hi in box)


def _global_rank(group, r):
    if group is None or group is dist.group.WORLD:
        return r
    if hasattr(dist, "get_global_rank"):
        return dist.get_global_rank(group, r)
    return dist.distributed_c10d._get_global_rank(group, r)


def _groups(runs):
    """Copy runs (region, region offset, chunk offset, bytes), in chunk order, as strided groups
    (region, offset, stride, count, length, chunk offset): `count` runs of `length` bytes, `stride`
    apart in the region and one after another in the chunk -- the rows of a box in its shard, copied
    with one strided copy instead of one per row."""
    out = []
    for region, off, at, n in runs:
        if out:
            g = out[-1]
            r0, o0, stride, count, length, a0 = g
            if region == r0 and n == length and at == a0 + count * length:
                if count == 1 and off > o0:
                    out[-1] = (r0, o0, off - o0, 2, length, a0)
                    continue
                if count > 1 and off == o0 + count * stride:
                    out[-1] = (r0, o0, stride, count + 1, length, a0)
                    continue
        out.append((region, off, n, 1, n, at))
    return out


_WORDS = ((8, torch.int64), (4, torch.int32), (2, torch.int16))


def _copy_group(dst, dst_off, dst_stride, src, src_off, src_stride, count, length):
    """dst[count runs of length bytes, dst_stride apart] = src[the same, src_stride apart], both flat
    byte tensors: one strided copy, in the widest word that every offset, stride and length allows
    (a byte-wise strided copy is several times slower)."""
    for width, dtype in _WORDS:
        if (length | dst_off | src_off | dst_stride | src_stride | dst.storage_offset() | src.storage_offset()) % width == 0 \
                and dst.numel() % width == 0 and src.numel() % width == 0:
            d, s_, w = dst.view(dtype), src.view(dtype), width
            break
    else:
        d, s_, w = dst, src, 1
    d.as_strided((count, length // w), (dst_stride // w, 1), d.storage_offset() + dst_off // w).copy_(
        s_.as_strided((count, length // w), (src_stride // w, 1), s_.storage_offset() + src_off // w))


class _Chunk:
    """One chunk of one stream role at this rank: where its bytes are, and the copies around it."""
    __slots__ = ("index", "begin", "bytes", "runs", "groups", "direct")

    def __init__(self, index, begin, nbytes):
        self.index, self.begin, self.bytes = index, begin, nbytes
        self.runs = []      # (shard or kept region, its offset, chunk offset, bytes)
        self.groups = []    # the runs as strided groups (_groups)
        self.direct = None  # (region, offset): the chunk is this contiguous run of a shard, moved in place


class _Stream:
    """A send or a receive of this rank (a plan's stream entry), its chunks precomputed."""

    def __init__(self, entry, op, send, regions):
        self.coalesced = False  # set by Refit._prepare
        self.op = int(entry["op"])
        self.send = send
        self.region = int(entry["region"])
        self.peer = int(entry["peer"])
        self.chunk = int(entry["chunk"])
        self.bytes = int(entry["bytes"])
        self.slots = int(entry["slots"])
        self.children = [int(c) for c in entry["children"]]
        self.step = int(op["step"])
        self.offset = int(op["offset"])
        self.nchunks = int(op["chunks"])
        self.ring_bytes = int(regions[self.region]["bytes"])
        copies = [tuple(int(x) for x in c) for c in entry["copies"]]
        # Kept receives (slots 0) hold the whole part for a later send to pack from: never in place.
        self.chunks = []
        for k in range(self.nchunks):
            begin = k * self.chunk
            n = min(self.chunk, self.bytes - begin)
            ch = _Chunk(k, begin, n)
            for src, dst, so, do, b in copies:
                at = do if send else so  # stream coordinate of the run
                lo, hi = max(at, begin), min(at + b, begin + n)
                if lo >= hi:
                    continue
                shift = lo - at
                if send:
                    ch.runs.append((src, so + shift, lo - begin, hi - lo))   # shard region, its offset, chunk offset, bytes
                else:
                    ch.runs.append((dst, do + shift, lo - begin, hi - lo))
            if self.slots > 0 and len(ch.runs) == 1 and ch.runs[0][2] == 0 and ch.runs[0][3] == n:
                ch.direct = (ch.runs[0][0], ch.runs[0][1])
            ch.groups = _groups(ch.runs)
            self.chunks.append(ch)

    def slot_offset(self, k):
        """Where chunk k lies in the ring (or, kept, in the whole part)."""
        if self.slots == 0:
            return k * self.chunk
        return (k % self.slots) * self.chunk


class _RankRun:
    """One plan rank's part of a run: its shards' byte views, its staging arena and what it holds."""

    def __init__(self, refit, rank, sources, destinations, device):
        self.refit, self.rank = refit, rank
        self.plan = refit._plan
        self.prep = refit._prepare(rank)
        self.views, self.write_back, found = refit._bind(rank, self.plan["ranks"][rank]["regions"], sources, destinations)
        if found is not None and found != device:
            raise RefitError(f"rank {rank}: its tensors are on {found}, the other ranks' of this process on {device}", rank)
        self.device = device
        arena = refit._arenas.get(rank)
        if arena is None or arena.device != self.device or arena.numel() < self.prep["arena_bytes"]:
            arena = torch.empty(self.prep["arena_bytes"], dtype=torch.uint8, device=self.device)
            refit._arenas[rank] = arena
        self.arena = arena
        self.rings = {}  # region -> its staging bytes in the arena (rings, kept receives), while held
        self.now = self.peak = self.in_place = self.staged = 0
        self.messages = []

    def _hold(self, n):
        self.now += n
        self.peak = max(self.peak, self.now)

    def local_copies(self):
        for src, dst, so, do, n in self.plan["ranks"][self.rank]["local"]:  # (colocated scenarios)
            self.views[dst][do:do + n].copy_(self.views[src][so:so + n])

    def ring(self, s):
        t = self.rings.get(s.region)
        if t is None:
            at = self.prep["place"][("ring", s.region)]
            t = self.arena[at:at + s.ring_bytes]
            self.rings[s.region] = t
            self._hold(s.ring_bytes)
        return t

    def release(self, region):
        t = self.rings.pop(region, None)
        if t is not None:
            self.now -= t.numel()

    def data(self, region):
        """A region's bytes: a shard's view, or a staging region (a kept receive a send packs from)."""
        v = self.views[region]
        return v if v is not None else self.rings[region]

    def buffer(self, s, ch):
        """The bytes of chunk ch of stream s here: in place, or its slot."""
        if ch.direct is not None:
            region, off = ch.direct
            return self.data(region)[off:off + ch.bytes]
        at = s.slot_offset(ch.index)
        return self.ring(s)[at:at + ch.bytes]

    def pack(self, s, ch):
        if ch.direct is not None:
            self.in_place += 1
            return
        slot = self.buffer(s, ch)
        for region, off, stride, count, length, at in ch.groups:
            _copy_group(slot, at, length, self.data(region), off, stride, count, length)
        self.staged += 1

    def unpack(self, s, ch, corrupt_op=None):
        buf = self.buffer(s, ch)
        if corrupt_op == s.op and ch.index == 0 and ch.runs:  # test-only: a byte flipped on the way
            buf[ch.runs[0][2]] ^= 0x5a
        if ch.direct is not None:
            self.in_place += 1
            return
        for region, off, stride, count, length, at in ch.groups:
            _copy_group(self.views[region], off, stride, buf, at, length, count, length)
        self.staged += 1

    def pack_messages(self, k):
        """This rank's coalesced messages of step k, (from rank, to rank, buffer, places, incoming):
        the outgoing ones packed, the incoming ones empty; their bytes held until the step ends."""
        self.messages = []
        for (direction, peer), (size, places) in sorted(self.prep["coalesced"][k].items()):
            at = self.prep["place"][(k, direction, peer)]
            buf = self.arena[at:at + size]
            self._hold(size)
            if direction == "out":
                for m, base in places:
                    for ch in m.chunks:
                        for region, off, stride, count, length, a in ch.groups:
                            _copy_group(buf, base + ch.begin + a, length, self.data(region), off, stride, count, length)
                    self.staged += len(m.chunks)
            self.messages.append((self.rank, peer, buf, places, False) if direction == "out"
                                 else (peer, self.rank, buf, places, True))
        return list(self.messages)

    def unpack_message(self, buf, places, corrupt_op=None):
        for m, base in places:
            for ch in m.chunks:
                if corrupt_op == m.op and ch.index == 0 and ch.runs:  # test-only
                    buf[base + ch.begin + ch.runs[0][2]] ^= 0x5a
                for region, off, stride, count, length, a in ch.groups:
                    _copy_group(self.views[region], off, stride, buf, base + ch.begin + a, length, count, length)
            self.staged += len(m.chunks)

    def end_step(self, k):
        """The step's rings and messages are given back; kept receives once their last reader has packed."""
        for _, _, buf, _, _ in self.messages:
            self.now -= buf.numel()
        self.messages = []
        readers = self.prep["readers"]
        for s in self.prep["by_step"][k]:
            if s.slots > 0 or readers.get(s.region, -1) <= k:
                self.release(s.region)
        for region, last in readers.items():
            if last <= k:
                self.release(region)

    def finish(self):
        for tensor, flat in self.write_back:
            tensor.copy_(flat.view(tensor.dtype).view(tensor.shape))


class Refit:
    """A refit planned once (scenario, strategy, staging budget) and run every training step.

    strategy: None for reshard's default (reshard._reshard.DEFAULT_STRATEGY: "auto", the tuner's
    choice), or a strategy line as `reshard compare` prints it."""

    def __init__(self, scenario=None, strategy=None, staging=None, *, overrides=None, profile=None, plan=None):
        if plan is None:
            if scenario is None:
                raise ValueError("Refit: give a scenario (path or dict), or use Refit.load(plan_file)")
            import reshard
            reshard._need_extension()
            if strategy is None:
                strategy = reshard._reshard.DEFAULT_STRATEGY
            named = {} if profile is None else {"profile": profile}  # None: the module's default profile
            plan = _json.loads(reshard._reshard._refit_plan(scenario, strategy=strategy, staging=staging,
                                                            overrides=overrides, **named))
        if plan.get("format") != FORMAT:
            raise RefitError(f"not a refit plan: format {plan.get('format')!r}, expected {FORMAT!r}")
        self._plan = plan
        self._prepared = {}
        self._arenas = {}  # rank -> its staging arena, kept between runs
        self._bound = {}   # (rank, region) -> (tensor, its place, its flat byte view, staged): the last run's

    # ---- the plan

    @classmethod
    def load(cls, path):
        """A Refit from a plan file (`reshard plan SCENARIO --strategy S --programs -o FILE`)."""
        try:
            plan = _json.loads(_Path(path).read_text())
        except (OSError, ValueError) as e:
            raise RefitError(f"{path}: cannot read the refit plan: {e}") from None
        return cls(plan=plan)

    def release(self):
        """Gives back the staging memory the runs keep between them (the next run takes it again)."""
        self._arenas.clear()
        self._bound.clear()

    def save(self, path):
        """Writes the plan file, for a machine without the extension."""
        _Path(path).write_text(_json.dumps(self._plan))

    @property
    def world_size(self):
        """Processes (GPUs) the refit runs on: the group passed to run() has exactly this many."""
        return int(self._plan["world_size"])

    @property
    def strategy(self):
        return self._plan["strategy"]

    @property
    def scenario(self):
        return self._plan["scenario"]

    @property
    def tensors(self):
        """Per HF name: (shape, dtype name)."""
        return {t["name"]: (tuple(t["shape"]), t["dtype"]) for t in self._plan["tensors"]}

    def _boxes(self, rank, kind):
        self._check_rank(rank)
        out = {}
        for reg in self._plan["ranks"][rank]["regions"]:
            if reg["kind"] == kind:
                out.setdefault(self._plan["tensors"][reg["tensor"]]["name"], []).append(_box(reg["box"]))
        return out

    def source_boxes(self, rank):
        """{HF tensor name: [box, ...]}: the parts of each tensor process `rank` holds as a source,
        each box a tuple of (lo, hi) per dimension."""
        return self._boxes(rank, "source")

    def destination_boxes(self, rank):
        """{HF tensor name: [box, ...]}: the parts of each tensor process `rank` needs."""
        return self._boxes(rank, "destination")

    def _check_rank(self, rank):
        if not 0 <= rank < self.world_size:
            raise RefitError(f"rank {rank} is outside the refit's {self.world_size} processes")

    # ---- running

    def _prepare(self, rank):
        """This rank's streams, by step, their chunks' copy runs and in-place decisions (once)."""
        if rank in self._prepared:
            return self._prepared[rank]
        p = self._plan
        r = p["ranks"][rank]
        regions = r["regions"]
        ops = p["ops"]
        streams = [_Stream(e, ops[int(e["op"])], True, regions) for e in r["sends"]]
        streams += [_Stream(e, ops[int(e["op"])], False, regions) for e in r["receives"]]
        by_step = [[] for _ in range(int(p["steps"]))]
        for s in streams:
            by_step[s.step].append(s)
        # A kept receive is released after the last step of a send here that packs from it.
        readers = {}
        for s in streams:
            if s.send:
                for ch in s.chunks:
                    for region, _, _, _ in ch.runs:
                        if regions[region]["kind"] == "receive":
                            readers[region] = max(readers.get(region, -1), s.step)
        # Coalesced messages: a plain transfer whose ring holds its whole part (B <= S c) and whose
        # receive is not kept moves as part of one message per peer, direction and step, at wave 0:
        # the same staging (its ring is its place in the message), far fewer messages and waves.
        # Both ends decide it from the op alone, so they agree on every message.
        slots = int(p["slots"])
        coalesced = [{"out": {}, "in": {}} for _ in range(int(p["steps"]))]
        for s in streams:
            op = ops[s.op]
            s.coalesced = (len(op["hops"]) == 1 and s.nchunks > 0 and s.bytes <= slots * s.chunk and not op["kept"])
            if s.coalesced:
                frm, to = op["hops"][0]
                coalesced[s.step]["out" if s.send else "in"].setdefault(to if s.send else frm, []).append(s)
        layouts = []
        for c in coalesced:
            layout = {}
            for direction, peers in c.items():
                for peer, members in peers.items():
                    members.sort(key=lambda m: m.op)
                    at, places = 0, []
                    for m in members:
                        places.append((m, at))
                        at += (m.bytes + 7) // 8 * 8  # each part 8-byte aligned: the widest copies
                    layout[(direction, peer)] = (at, places)
            layouts.append(layout)
        # The staging arena, laid out once: per step, its messages and rings one after another from
        # offset 0 (a step's memory is the steps before it's, reused); kept receives in a part of their
        # own, each in its place for every step it lives. Allocated by the first run, kept by the
        # Refit for the next ones (Refit.release() gives it back): a run allocates nothing.
        place = {}
        step_bytes = [0] * int(p["steps"])
        for k in range(int(p["steps"])):
            at = 0
            for key, (size, _) in sorted(layouts[k].items()):
                place[(k,) + key] = at
                at += size
            for s in by_step[k]:
                if not s.coalesced and s.slots > 0 and ("ring", s.region) not in place:
                    place[("ring", s.region)] = at
                    at += (s.ring_bytes + 7) // 8 * 8
            step_bytes[k] = at
        kept_at = max(step_bytes, default=0)
        for s in streams:
            if not s.coalesced and s.slots == 0 and ("ring", s.region) not in place:
                place[("ring", s.region)] = kept_at
                kept_at += (s.ring_bytes + 7) // 8 * 8
        prepared = {"streams": streams, "by_step": by_step, "readers": readers, "coalesced": layouts, "place": place,
                    "arena_bytes": kept_at}
        self._prepared[rank] = prepared
        return prepared

    def run(self, group=None, sources=None, destinations=None, *, timeout=60.0, verify="digest", _faults=None):
        """Moves the sources' bytes into the destinations. Collective: every process of `group`
        (default: the world) calls it. Process p of a group of n runs the plan's ranks r with
        r % n == p: one each when the group has world_size processes (then `sources` and
        `destinations` are {HF name: tensor, or [tensor, ...] in the order of its boxes}), several
        otherwise (then {plan rank: {HF name: ...}}); bytes between two plan ranks of one process
        are copied, the others travel through the group. Each tensor has its box's shape and the
        tensor's dtype (views of a framework's parameters allowed). `verify`: "digest" (every
        piece's 64-bit digest at its holder and at every needer, compared across the group) or
        "none". Raises RefitError naming the plan rank and the peer it waited for when a peer does
        not answer within `timeout` seconds. Returns {"seconds", "bytes_sent", "bytes_received",
        "staging_peak_bytes" (the largest of this process's ranks), "steps", "waves", "messages",
        "in_place_chunks", "staged_chunks", "verified"}."""
        if group is None and not dist.is_initialized():
            raise RefitError("torch.distributed is not initialised: call dist.init_process_group first")
        me = dist.get_rank(group)
        size = dist.get_world_size(group)
        if size > self.world_size:
            raise RefitError(f"the refit runs on {self.world_size} ranks; the group has {size} processes", me)
        if verify not in ("digest", "none"):
            raise ValueError("verify: 'digest' or 'none'")
        local = [r for r in range(self.world_size) if r % size == me]
        if len(local) == 1:
            sources, destinations = {local[0]: sources or {}}, {local[0]: destinations or {}}
        else:
            sources, destinations = sources or {}, destinations or {}
            for what, given in (("sources", sources), ("destinations", destinations)):
                extra = [r for r in given if r not in local]
                if extra:
                    raise RefitError(f"process {me} of {size} runs the plan's ranks {local}; {what} names {extra}", me)
        faults = _faults or {}
        # Check-only: bytes between two ranks of this process through the group too (a send to
        # itself: NCCL at world size 1 on one GPU), not copied.
        self_send = bool(faults.get("self_send"))
        p = self._plan
        device = next((t.device for given in (sources, destinations) for per_rank in given.values()
                       for v in per_rank.values() for t in (v if isinstance(v, (list, tuple)) else [v])), torch.device("cpu"))
        runs = {r: _RankRun(self, r, sources.get(r, {}), destinations.get(r, {}), device) for r in local}
        timeout_td = _dt.timedelta(seconds=timeout)
        process_of = lambda r: _global_rank(group, r % size)  # noqa: E731
        stats = {"bytes_sent": 0, "bytes_received": 0, "steps": int(p["steps"]), "waves": 0, "messages": 0}
        t0 = _time.perf_counter()
        for run in runs.values():
            run.local_copies()
        corrupt_op, die_rank = faults.get("corrupt"), faults.get("die")
        for k in range(int(p["steps"])):
            # Every local rank's chunked streams of the step, by op; its coalesced messages, packed.
            op_streams = {}
            messages = []  # (from rank, to rank, buffer, places, incoming): each end's of a coalesced message
            for r, run in runs.items():
                for s in run.prep["by_step"][k]:
                    if not s.coalesced:
                        op_streams.setdefault(s.op, {})[(r, s.send)] = s
                messages += run.pack_messages(k)
            messages.sort(key=lambda m: (m[0], m[1], m[4]))
            order = sorted(op_streams)
            waves = max(int(p["step_waves"][k]), 1 if messages else 0)
            for w in range(waves):
                for op_id in order:  # packs of the chunks that leave in this wave
                    for (r, send), s in op_streams[op_id].items():
                        if send and 0 <= w - s.offset < s.nchunks:
                            runs[r].pack(s, s.chunks[w - s.offset])
                if die_rank in runs and w == 0 and k == 0:  # test-only: this process dies mid-run
                    import os
                    os._exit(17)
                p2p, what, arrived, copies = [], [], [], []
                if w == 0:
                    outgoing = {}
                    for frm, to, buf, places, incoming in messages:  # coalesced: sends, then receives, by (from, to)
                        if incoming:
                            continue
                        if to in runs and not self_send:
                            outgoing[(frm, to)] = buf
                        else:
                            p2p.append(dist.P2POp(dist.isend, buf, process_of(to), group, (1 << 28) + k))
                            what.append((frm, "send", to, f"{len(places)} coalesced ops", "all"))
                            stats["bytes_sent"] += buf.numel()
                    for frm, to, buf, places, incoming in messages:
                        if not incoming:
                            continue
                        if frm in runs and not self_send:
                            copies.append((outgoing[(frm, to)], buf))
                        else:
                            p2p.append(dist.P2POp(dist.irecv, buf, process_of(frm), group, (1 << 28) + k))
                            what.append((to, "receive", frm, f"{len(places)} coalesced ops", "all"))
                            stats["bytes_received"] += buf.numel()
                for op_id in order:
                    streams = op_streams[op_id]
                    op = p["ops"][op_id]
                    for h, (frm, to) in enumerate(op["hops"]):
                        c = w - int(op["offset"]) - (int(op["depth"][h]) - 1)
                        if not 0 <= c < int(op["chunks"]):
                            continue
                        if frm in runs:  # the sender, or an inner GPU forwarding what it received
                            s = streams.get((frm, True)) or streams[(frm, False)]
                            out = runs[frm].buffer(s, s.chunks[c])
                        if to in runs:
                            s_in = streams[(to, False)]
                            into = runs[to].buffer(s_in, s_in.chunks[c])
                            arrived.append((to, s_in, c))
                        if frm in runs and to in runs and not self_send:
                            copies.append((out, into))
                            continue
                        if frm in runs:
                            p2p.append(dist.P2POp(dist.isend, out, process_of(to), group, op_id))
                            what.append((frm, "send", to, op_id, c))
                            stats["bytes_sent"] += out.numel()
                        if to in runs:
                            p2p.append(dist.P2POp(dist.irecv, into, process_of(frm), group, op_id))
                            what.append((to, "receive", frm, op_id, c))
                            stats["bytes_received"] += into.numel()
                if p2p or copies:
                    stats["waves"] += 1
                stats["messages"] += len(p2p)
                works = dist.batch_isend_irecv(p2p) if p2p else []
                for out, into in copies:  # between ranks of this process
                    into.copy_(out)
                for work, (r, kind, peer, op_id, c) in zip(works, what):
                    try:
                        done = work.wait(timeout_td)
                    except RuntimeError as e:
                        raise RefitError(f"rank {r} waited for rank {peer}: operation {op_id} ({kind} of chunk {c}) "
                                         f"in step {k} failed or had no answer within {timeout:g} s: {e}", r, peer) from None
                    if done is False:
                        raise RefitError(f"rank {r} waited for rank {peer}: operation {op_id} ({kind} of chunk {c}) "
                                         f"in step {k} had no answer within {timeout:g} s", r, peer)
                if w == 0:
                    for frm, to, buf, places, incoming in messages:
                        if incoming:
                            runs[to].unpack_message(buf, places, corrupt_op)
                for r, s, c in arrived:  # unpacks of the chunks that arrived
                    runs[r].unpack(s, s.chunks[c], corrupt_op)
            for run in runs.values():
                run.end_step(k)
        for run in runs.values():
            run.finish()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        stats["seconds"] = _time.perf_counter() - t0
        stats["staging_peak_bytes"] = max(run.peak for run in runs.values())
        stats["in_place_chunks"] = sum(run.in_place for run in runs.values())
        stats["staged_chunks"] = sum(run.staged for run in runs.values())
        stats["verified"] = False
        if verify == "digest":
            self._verify(runs, group)
            stats["verified"] = True
        return stats

    # ---- binding and verification

    def _bind(self, rank, regions, sources, destinations):
        """A flat byte view of every shard region of this rank, from the caller's tensors."""
        p = self._plan
        views = [None] * len(regions)
        write_back = []
        device = None
        given = {"source": sources, "destination": destinations}
        seen = {"source": set(), "destination": set()}
        index = {}
        for i, reg in enumerate(regions):
            kind = reg["kind"]
            if kind not in given:
                continue
            t = p["tensors"][reg["tensor"]]
            name = t["name"]
            n = index.get((kind, name), 0)
            index[(kind, name)] = n + 1
            value = given[kind].get(name)
            if value is None:
                raise RefitError(f"rank {rank}: no {kind} tensor for '{name}' (box {_box(reg['box'])}); "
                                 f"{kind}_boxes({rank}) lists what this rank must pass", rank)
            tensors = value if isinstance(value, (list, tuple)) else [value]
            if n >= len(tensors):
                raise RefitError(f"rank {rank}: '{name}' has {n + 1} {kind} boxes here, {len(tensors)} tensors were given", rank)
            tensor = tensors[n]
            seen[kind].add(name)
            cached = self._bound.get((rank, i))
            if cached is not None and cached[0] is tensor and cached[1] == (tensor.data_ptr(), tensor.shape, tensor.stride()):
                views[i] = cached[2]  # the same tensor as the last run (an RL loop's parameters): checked then
                device = device or tensor.device
                if cached[3] and kind == "destination":
                    write_back.append((tensor, cached[2]))
                elif cached[3]:  # a source not contiguous: its contiguous copy taken again
                    cached[2].copy_(tensor.reshape(-1).view(torch.uint8))
                continue
            box = _box(reg["box"])
            if tuple(tensor.shape) != _extent(box):
                raise RefitError(f"rank {rank}: {kind} tensor '{name}' has shape {tuple(tensor.shape)}; its box {box} "
                                 f"needs {_extent(box)}", rank)
            if tensor.element_size() != int(t["element_size"]):
                raise RefitError(f"rank {rank}: {kind} tensor '{name}' is {tensor.dtype} ({tensor.element_size()} bytes "
                                 f"an element); the plan moves {t['dtype']} ({t['element_size']} bytes)", rank)
            if device is None:
                device = tensor.device
            elif tensor.device != device:
                raise RefitError(f"rank {rank}: '{name}' is on {tensor.device}, other tensors on {device}", rank)
            if tensor.is_contiguous():
                flat = tensor.reshape(-1).view(torch.uint8)
            else:  # staged through a contiguous copy (sources: now; destinations: written back at the end)
                flat = tensor.contiguous().reshape(-1).view(torch.uint8)
                if kind == "destination":
                    write_back.append((tensor, flat))
            if flat.numel() != int(reg["bytes"]):
                raise RefitError(f"rank {rank}: {kind} tensor '{name}' holds {flat.numel()} bytes, its box {reg['bytes']}", rank)
            views[i] = flat
            self._bound[(rank, i)] = (tensor, (tensor.data_ptr(), tensor.shape, tensor.stride()), flat,
                                      not tensor.is_contiguous())
        for kind in given:
            extra = set(given[kind]) - seen[kind]
            if extra:
                raise RefitError(f"rank {rank}: {kind} tensors this rank does not hold in the plan: {sorted(extra)[:5]}", rank)
        return views, write_back, device

    def _verify(self, runs, group):
        """Every piece's digest where it is held and where it is needed, compared across the group."""
        p = self._plan
        mine = []
        for r, run in runs.items():
            for piece, side, region, box_runs in p["ranks"][r]["pieces"]:
                h = _hashlib.blake2b(digest_size=8)
                v = run.views[region]
                for off, n in box_runs:
                    h.update(v[off:off + n].cpu().numpy().tobytes())
                mine.append((r, int(piece), side, int(region), h.hexdigest()))
        everyone = [None] * dist.get_world_size(group)
        dist.all_gather_object(everyone, mine, group=group)
        entries = [e for part in everyone for e in part]
        held, wrong = {}, None
        for r, piece, side, region, digest in sorted(entries):
            if side == "source":
                held.setdefault(piece, (digest, r))
        for r, piece, side, region, digest in sorted(entries):
            if side != "destination" or piece not in held or held[piece][0] == digest:
                continue
            reg = p["ranks"][r]["regions"][region]
            wrong = (f"verification failed: piece {piece} of '{p['tensors'][reg['tensor']]['name']}' in the "
                     f"destination box {_box(reg['box'])} at rank {r} (GPU {p['gpus'][r]}) has digest {digest}, "
                     f"its holder rank {held[piece][1]} has {held[piece][0]}", r)
            break
        if wrong:
            raise RefitError(wrong[0], wrong[1], wrong[1])
