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

Within a step, each process walks its own ranks' programs: an op's part moves in windows (of
WINDOW_BYTES, within the staging budget), each one message per hop, pipelined along a chain; the
plain transfers between two ranks whose parts fit one window travel as one message per step. Every
process issues its sends and receives in one order it derives from the plan alone (so that gloo and
NCCL match them), waits only where it must forward a window or reuse a staging slot, and for the
rest at the step's end. A window that is one contiguous run of a shard is sent from (or received
into) the tensor itself; the others are packed with strided copies into staging rings.
"""

import datetime as _dt
import os as _os
import pickle as _pickle
import re as _re
import json as _json
import time as _time
from pathlib import Path as _Path

try:
    import torch
    import torch.distributed as dist
except ImportError as _e:
    raise ModuleNotFoundError(f"reshard.torch needs PyTorch ({_e}): apt-get install python3-torch (or pip install torch)",
                              name="torch") from _e

FORMAT = "reshard-refit-plan-2"
_FORMATS = (FORMAT, "reshard-refit-plan-1")  # plan-1: one JSON object, every rank inside (still read)

# The plan's dtype names; FP8 and E8M0 travel as raw bytes (uint8 tensors).
_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "fp8": torch.uint8,
           "e8m0": torch.uint8}


def _accepted_dtypes(name):
    """The torch dtypes a tensor of the plan's dtype `name` may have: its own, and for the raw-byte
    types (FP8 values, E8M0 scales) uint8 or torch's float8 types where this torch has them."""
    out = [_DTYPES[name]]
    if name == "fp8":
        out += [getattr(torch, n) for n in ("float8_e4m3fn", "float8_e5m2") if hasattr(torch, n)]
    if name == "e8m0" and hasattr(torch, "float8_e8m0fnu"):
        out.append(torch.float8_e8m0fnu)
    return out


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


def _runs(entries):
    """A plan's copy runs as (src, dst, src offset, dst offset, bytes) tuples: a strided entry
    [src, dst, so, do, bytes, count, src stride, dst stride] is its `count` runs."""
    out = []
    for e in entries:
        src, dst, so, do, n = (int(x) for x in e[:5])
        if len(e) == 5:
            out.append((src, dst, so, do, n))
        else:
            count, ss, ds = int(e[5]), int(e[6]), int(e[7])
            out.extend((src, dst, so + k * ss, do + k * ds, n) for k in range(count))
    return out


def _rank_program(entry):
    """A rank's program with its copy runs as tuples (_runs)."""
    entry["local"] = _runs(entry.get("local", []))
    for side in ("sends", "receives"):
        for st in entry.get(side, []):
            st["copies"] = _runs(st["copies"])
    return entry


class _Ranks:
    """A plan's `ranks`, read when asked for: a plan-2 file's rank r is its line 2 + r, found through
    the file's index, so that a process reads the header and its own program, never the others'."""

    def __init__(self, count, read_line):
        self._count, self._read_line, self._cache = count, read_line, {}

    def __len__(self):
        return self._count

    def __getitem__(self, r):
        if not 0 <= r < self._count:
            raise IndexError(r)
        if r not in self._cache:
            text = self._read_line(r)
            if not text.strip():
                raise RefitError(f"the refit plan has no program for rank {r} (it was made for other ranks)", r)
            self._cache[r] = _rank_program(_json.loads(text))
        return self._cache[r]


def _plan_from_text(data, where):
    """A plan from a plan file's bytes (plan-2 lines, or one plan-1 JSON object)."""
    try:
        head, _, rest = data.partition(b"\n")
        header = _json.loads(head)
        if header.get("format") == "reshard-refit-plan-1" or "ranks" in header:
            header["ranks"] = [_rank_program(r) for r in header.get("ranks", [])]
            return header
        tail = data.rstrip(b"\n").rsplit(b"\n", 1)[-1]
        index_at = int(tail)
        index = _json.loads(data[index_at:data.index(b"\n", index_at)])["ranks"]
    except (ValueError, KeyError, TypeError) as e:
        raise RefitError(f"{where}: not a readable refit plan ({e})") from None

    def read_line(r):
        at, n = index[r]
        return data[at:at + n]

    header["ranks"] = _Ranks(len(index), read_line)
    return header


def _plan_from_file(path):
    """A plan from a file, reading the header, the index and (later) each rank asked for only."""
    try:
        with open(path, "rb") as f:
            header = _json.loads(f.readline())
            if header.get("format") == "reshard-refit-plan-1" or "ranks" in header:
                f.seek(0)
                return _plan_from_text(f.read(), path)
            f.seek(0, 2)
            f.seek(max(0, f.tell() - 21))
            index_at = int(f.read().rstrip(b"\n").rsplit(b"\n", 1)[-1])
            f.seek(index_at)
            index = _json.loads(f.readline())["ranks"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise RefitError(f"{path}: cannot read the refit plan: {e}") from None

    def read_line(r):
        at, n = index[r]
        try:
            with open(path, "rb") as g:
                g.seek(at)
                return g.read(n)
        except OSError as e:
            raise RefitError(f"{path}: cannot read rank {r}'s program: {e}") from None

    header["ranks"] = _Ranks(len(index), read_line)
    return header


def _fingerprint(plan):
    """The plan's fingerprint: the one `reshard plan --programs` wrote into it (a digest of the
    whole plan), or for an older file a digest of its outline."""
    if plan.get("fingerprint"):
        return str(plan["fingerprint"])
    outline = _json.dumps([plan.get(k) for k in ("scenario", "strategy", "world_size", "gpus", "steps", "slots")] +
                          [len(plan.get("ops", [])), len(plan.get("tensors", []))])
    h = 14695981039346656037
    for b in outline.encode():
        h = ((h ^ b) * 1099511628211) & _MASK64
    return f"{h:016x}"


def _sync(device, watch, timeout, rank):
    """Waits for the device's current stream (the run's copies and NCCL operations), polling, so
    that another rank's failure or the timeout ends the wait."""
    event = torch.cuda.Event()
    event.record(torch.cuda.current_stream(device))
    deadline = _time.monotonic() + timeout
    while not event.query():
        watch.check()
        if _time.monotonic() > deadline:
            message = f"rank {rank}: the device did not finish the run's transfers within {timeout:g} s"
            watch.post(message)
            raise RefitError(message, rank)
        _time.sleep(1e-4)


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


# The engine's message window: a chain op's part moves in windows of this many bytes (or the whole
# part, when smaller), each one message per hop, pipelined along the chain; a plain transfer whose
# part fits one window travels in its step's one message to its peer. Independent of the plan's
# chunk: what a window costs is one message and one pack and unpack (reshard.torch's Python work
# per step grows with windows, not chunks), and a window of a few hundred KiB keeps a chain's
# pipeline fill small. Smaller where a GPU's staging budget needs it (_windows).
WINDOW_BYTES = 1 << 20
# Windows a stream role holds at once: one in flight while the next is packed or received.
RING_WINDOWS = 2


class _Window:
    """One window of one stream role at this rank: where its bytes are, and the copies around it."""
    __slots__ = ("index", "begin", "bytes", "runs", "groups", "direct")

    def __init__(self, index, begin, nbytes):
        self.index, self.begin, self.bytes = index, begin, nbytes
        self.runs = []      # (shard or kept region, its offset, window offset, bytes)
        self.groups = []    # the runs as strided groups (_groups)
        self.direct = None  # (region, offset): the window is this contiguous run of a shard, moved in place


def _windows(plan):
    """Per op id: the window every GPU of it moves the op's part in (the same at both ends of every
    hop: computed from the plan alone). WINDOW_BYTES, at most what each of the op's GPUs can hold:
    its staging budget over the stream roles it has in the op's step, RING_WINDOWS windows each;
    never below the plan's chunk (which the plan fits S >= 2 times per role) nor above the part."""
    ops = plan["ops"]
    budget = plan.get("budgets") or [0] * int(plan["world_size"])
    roles = {}  # (rank, step) -> stream roles
    for op in ops:
        if op is None:
            continue
        k = int(op["step"])
        hops = op["hops"]
        for r in {int(hops[0][0])} | {int(t) for _, t in hops}:
            roles[(r, k)] = roles.get((r, k), 0) + 1
    out = {}
    for op in ops:
        if op is None:
            continue
        b, c, k = int(op["bytes"]), int(op["chunk"]), int(op["step"])
        w = WINDOW_BYTES
        for r in {int(op["hops"][0][0])} | {int(t) for _, t in op["hops"]}:
            if int(budget[r]) > 0:
                w = min(w, int(budget[r]) // (RING_WINDOWS * roles[(r, k)]))
        w = max(w // 4096 * 4096, c)
        out[int(op["id"])] = max(1, min(w, b))
    return out


class _Stream:
    """A send or a receive of this rank (a plan's stream entry), its windows precomputed."""

    def __init__(self, entry, op, send, regions, window):
        self.op = int(entry["op"])
        self.send = send
        self.region = int(entry["region"])
        self.peer = int(entry["peer"])
        self.bytes = int(entry["bytes"])
        self.kept = int(entry["slots"]) == 0  # a kept receive holds the whole part (a later send packs from it)
        self.children = [int(c) for c in entry["children"]]
        self.step = int(op["step"])
        self.hops = [(int(a), int(b)) for a, b in op["hops"]]
        self.window = window
        self.nwindows = (self.bytes + window - 1) // window if self.bytes > 0 else 0
        # A plain transfer whose part fits one window, not kept: part of its step's one message to
        # (or from) its peer. Both ends decide it from the op alone, so they agree on every message.
        self.coalesced = len(self.hops) == 1 and self.nwindows == 1 and not bool(op["kept"])
        self.ring_bytes = self.bytes if self.kept or self.coalesced else min(self.bytes, RING_WINDOWS * window)
        self.wave = 0  # set by Refit._prepare: the wave window 0 leaves the op's root in
        copies = [tuple(int(x) for x in c) for c in entry["copies"]]
        self.windows = []
        for j in range(self.nwindows):
            begin = j * window
            n = min(window, self.bytes - begin)
            win = _Window(j, begin, n)
            for src, dst, so, do, b in copies:
                at = do if send else so  # stream coordinate of the run
                lo, hi = max(at, begin), min(at + b, begin + n)
                if lo >= hi:
                    continue
                shift = lo - at
                if send:
                    win.runs.append((src, so + shift, lo - begin, hi - lo))   # shard region, its offset, window offset, bytes
                else:
                    win.runs.append((dst, do + shift, lo - begin, hi - lo))
            if (not self.kept and len(win.runs) == 1 and win.runs[0][2] == 0 and win.runs[0][3] == n
                    and regions[win.runs[0][0]]["kind"] in ("source", "destination")):  # a shard, not a kept receive
                win.direct = (win.runs[0][0], win.runs[0][1])
            win.groups = _groups(win.runs)
            self.windows.append(win)

    def depth_here(self, rank):
        """Hops from the root to `rank` (0 at the root)."""
        depth, frm = 0, {t: f for f, t in self.hops}
        while rank in frm:
            rank, depth = frm[rank], depth + 1
        return depth

    def slot_offset(self, j):
        """Where window j lies in the ring (or, kept, in the whole part)."""
        if self.kept:
            return j * self.window
        return (j % RING_WINDOWS) * self.window


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
        self.now = self.peak = self.in_place = self.staged = 0
        self.held = set()  # staging regions held now (rings, kept receives, messages)

    def hold(self, key, n):
        if key not in self.held:
            self.held.add(key)
            self.now += n
            self.peak = max(self.peak, self.now)

    def release(self, key, n):
        if key in self.held:
            self.held.discard(key)
            self.now -= n

    def local_copies(self):
        for src, dst, so, do, n in self.plan["ranks"][self.rank]["local"]:  # (colocated scenarios)
            self.views[dst][do:do + n].copy_(self.views[src][so:so + n])

    def data(self, region):
        """A region's bytes: a shard's view, or a kept receive's staging (a send packs from it)."""
        v = self.views[region]
        if v is not None:
            return v
        at = self.prep["place"][("ring", region)]
        return self.arena[at:at + self.prep["kept_bytes"][region]]

    def ring(self, s):
        at = self.prep["place"][("ring", s.region)]
        self.hold(("ring", s.region), s.ring_bytes)
        return self.arena[at:at + s.ring_bytes]

    def buffer(self, s, win):
        """The bytes of window win of stream s here: in place, or its slot."""
        if win.direct is not None:
            region, off = win.direct
            return self.views[region][off:off + win.bytes]
        at = s.slot_offset(win.index)
        return self.ring(s)[at:at + win.bytes]

    def pack(self, s, win):
        if win.direct is not None:
            self.in_place += 1
            return
        slot = self.buffer(s, win)
        for region, off, stride, count, length, at in win.groups:
            _copy_group(slot, at, length, self.data(region), off, stride, count, length)
        self.staged += 1

    def unpack(self, s, win, corrupt_op=None):
        buf = self.buffer(s, win)
        if corrupt_op == s.op and win.index == 0 and win.runs:  # test-only: a byte flipped on the way
            buf[win.runs[0][2]] ^= 0x5a
        if win.direct is not None:
            self.in_place += 1
            return
        for region, off, stride, count, length, at in win.groups:
            _copy_group(self.views[region], off, stride, buf, at, length, count, length)
        self.staged += 1

    def message(self, k, direction, peer):
        """This rank's coalesced message of step k to (or from) `peer`: its buffer and its members'
        places; an outgoing one packed."""
        size, places = self.prep["coalesced"][k][(direction, peer)]
        at = self.prep["place"][(k, direction, peer)]
        buf = self.arena[at:at + size]
        self.hold((k, direction, peer), size)
        if direction == "out":
            for m, base in places:
                for win in m.windows:
                    for region, off, stride, count, length, a in win.groups:
                        _copy_group(buf, base + win.begin + a, length, self.data(region), off, stride, count, length)
                self.staged += len(m.windows)
        return buf, places

    def unpack_message(self, buf, places, corrupt_op=None):
        for m, base in places:
            for win in m.windows:
                if corrupt_op == m.op and win.index == 0 and win.runs:  # test-only
                    buf[base + win.begin + win.runs[0][2]] ^= 0x5a
                for region, off, stride, count, length, a in win.groups:
                    _copy_group(self.views[region], off, stride, buf, base + win.begin + a, length, count, length)
            self.staged += len(m.windows)

    def end_step(self, k):
        """The step's rings and messages are given back; kept receives once their last reader has packed."""
        for key in [key for key in self.held if key[0] == k]:
            self.release(key, self.prep["coalesced"][k][key[1:]][0])
        readers = self.prep["readers"]
        for s in self.prep["by_step"][k]:
            if not s.kept or readers.get(s.region, -1) <= k:
                self.release(("ring", s.region), s.ring_bytes)
        for region, last in readers.items():
            if last <= k:
                self.release(("ring", region), self.prep["kept_bytes"][region])

    def finish(self):
        for tensor, flat in self.write_back:
            tensor.copy_(flat.view(tensor.dtype).view(tensor.shape))


class TorchGroup:
    """A torch.distributed process group as a refit's communicator (the default one).

    `group`: the group every process of the refit is in (default: the world) -- a trainer and a
    server that are separate jobs join one made for the refit (`dist.new_group` over both, as NeMo
    RL and verl build theirs). `rank_map`: plan rank -> rank in `group`, a list of world_size
    entries (default: plan rank r on group rank r % group size); a process runs the plan ranks
    mapped to it. Gloo waits on the host, NCCL in stream order (docs/execution.md)."""

    def __init__(self, group=None, rank_map=None):
        if group is None and not dist.is_initialized():
            raise RefitError("torch.distributed is not initialised: call dist.init_process_group first")
        self.group = group
        self.rank = dist.get_rank(group)
        self.size = dist.get_world_size(group)
        self.rank_map = None if rank_map is None else [int(r) for r in rank_map]
        self.host_waits = dist.get_backend(group) != "nccl"
        self.grouped = False  # works carry the order; no group per wave needed

    def process_of(self, plan_rank):
        return self.rank_map[plan_rank] if self.rank_map is not None else plan_rank % self.size

    def _peer(self, plan_rank):
        return _global_rank(self.group, self.process_of(plan_rank))

    def isend(self, buf, plan_rank, tag):
        return dist.isend(buf, self._peer(plan_rank), group=self.group, tag=tag)

    def irecv(self, buf, plan_rank, tag):
        return dist.irecv(buf, self._peer(plan_rank), group=self.group, tag=tag)

    def pair(self, send_buf, recv_buf, tag):
        """A message from this process to itself (check-only: NCCL at world size 1): both ends in
        one batch, as NCCL needs them at once."""
        me = _global_rank(self.group, self.rank)
        return dist.batch_isend_irecv([dist.P2POp(dist.isend, send_buf, me, self.group, tag),
                                       dist.P2POp(dist.irecv, recv_buf, me, self.group, tag)])

    def group_start(self):
        pass

    def group_end(self):
        pass

    def all_gather_object(self, obj):
        out = [None] * self.size
        dist.all_gather_object(out, obj, group=self.group)
        return out

    def store(self):
        try:
            return dist.distributed_c10d._get_default_store()
        except Exception:  # noqa: BLE001 - a group made without a store: no error relay
            return None


class PyNcclGroup:
    """vLLM's communicator shape as a refit's communicator: `communicator` with send(tensor, dst) and
    recv(tensor, src) that enqueue on the current CUDA stream, and group_start() / group_end()
    (vLLM's PyNcclCommunicator), `group` with rank, world_size, all_gather_obj(obj) and, optionally,
    a TCPStore `store` (vLLM's StatelessProcessGroup). NeMo RL and verl build such a pair across a
    trainer and a server for their weight updates; the refit then runs on it unchanged. `rank_map`:
    plan rank -> rank in `group` (default: plan rank r on rank r % world_size). Every wave's sends
    and receives go in one NCCL group; stream order carries the dependencies, the host waits once
    per step."""

    def __init__(self, communicator, group, rank_map=None):
        self.communicator, self.stateless = communicator, group
        self.rank, self.size = int(group.rank), int(group.world_size)
        self.rank_map = None if rank_map is None else [int(r) for r in rank_map]
        self.host_waits = False
        self.grouped = True

    def process_of(self, plan_rank):
        return self.rank_map[plan_rank] if self.rank_map is not None else plan_rank % self.size

    def isend(self, buf, plan_rank, tag):
        self.communicator.send(buf, self.process_of(plan_rank))

    def irecv(self, buf, plan_rank, tag):
        self.communicator.recv(buf, self.process_of(plan_rank))

    def pair(self, send_buf, recv_buf, tag):
        self.communicator.group_start()
        self.communicator.send(send_buf, self.rank)
        self.communicator.recv(recv_buf, self.rank)
        self.communicator.group_end()
        return None, None

    def group_start(self):
        self.communicator.group_start()

    def group_end(self):
        self.communicator.group_end()

    def all_gather_object(self, obj):
        return list(self.stateless.all_gather_obj(obj))

    def store(self):
        return getattr(self.stateless, "store", None)


class _Watch:
    """What a rank learns from the others while it waits: the first failure any rank of the run
    posted (its rank, what it did, why), through the communicator's store; and what it posts when
    it fails itself. Without a store, a rank learns of another's failure only as a timeout."""

    CHECK_SECONDS = 0.02  # how often a waiting rank asks the store
    GRACE_SECONDS = 1.0   # how long a rank with an error that names no peer waits for one that does
    LINGER_SECONDS = 10.0  # at most how long the store's process waits for every rank to read a failure

    def __init__(self, store, prefix, me):
        self.store, self.prefix, self.me = store, prefix, me
        self.next_check = 0.0

    def post(self, message):
        if self.store is None:
            return
        try:
            ticket = self.store.add(f"{self.prefix}/failures", 1)
            self.store.set(f"{self.prefix}/failure/{ticket}", message)
            self.store.set(f"{self.prefix}/total", "failed")  # wakes the ranks waiting in total()
        except Exception:  # noqa: BLE001 - the store's host may be what failed
            pass

    def total(self, comm, value, timeout):
        """The sum, mod 2^64, of every process's `value` (once per run): through the store where there
        is one -- each process adds its value's two 32-bit halves, counting itself in with the second
        (2 additions), the last one in writes the sum, the others wait for it and read it, and a failure
        any rank posts (post()) wakes them at once; the run's three keys stay (as its failure count
        does) -- else the communicator's all_gather_object."""
        value &= _MASK64
        if self.store is None:
            return sum(comm.all_gather_object(value)) & _MASK64
        key = f"{self.prefix}/total"
        try:
            # The high half first; the low half (under 2^32) with the count above bit 40: once the count
            # is every process, every high half is in.
            self.store.add(f"{key}/hi", value >> 32)
            arrived = self.store.add(f"{key}/lo", (value & 0xFFFFFFFF) + (1 << 40))
            if arrived >> 40 == comm.size:
                total = ((arrived & ((1 << 40) - 1)) + (self.store.add(f"{key}/hi", 0) << 32)) & _MASK64
                self.store.set(key, str(total))
            if hasattr(self.store, "wait"):
                self.store.wait([key], _dt.timedelta(seconds=timeout))
            else:  # a store without wait: polled
                deadline = _time.monotonic() + timeout
                while not self.store.check([key]):
                    if _time.monotonic() > deadline:
                        raise RuntimeError("timeout")
                    _time.sleep(self.CHECK_SECONDS / 4)
            answer = self.store.get(key).decode()
        except RuntimeError:  # the wait's timeout
            self.check(force=True)
            arrived = self.store.add(f"{key}/lo", 0) >> 40
            message = (f"rank {self.me}: {comm.size - arrived} of the {comm.size} processes did not send their "
                       f"digests within {timeout:g} s")
            self.post(message)
            raise RefitError(message, self.me) from None
        if answer == "failed":
            self.check(force=True)
            raise RefitError(f"rank {self.me}: a failure was posted but not found in the store", self.me)
        return int(answer)

    def exchange(self, comm, name, obj, timeout):
        """Every process's `obj`, in process order: through the store where there is one, waiting
        with the watch (a collective over gloo cannot be interrupted: a process in it would not learn
        of another's failure), else the communicator's all_gather_object. The last reader removes
        the keys."""
        if self.store is None:
            return comm.all_gather_object(obj)
        key = f"{self.prefix}/{name}"
        self.store.set(f"{key}/{comm.rank}", _pickle.dumps(obj))
        arrived = self.store.add(f"{key}/count", 1)
        deadline = _time.monotonic() + timeout
        while arrived < comm.size:
            self.check(force=True)
            if _time.monotonic() > deadline:
                message = (f"rank {self.me}: {comm.size - arrived} of the {comm.size} processes did not send their "
                           f"{name} within {timeout:g} s")
                self.post(message)
                raise RefitError(message, self.me)
            _time.sleep(self.CHECK_SECONDS / 4)
            arrived = self.store.add(f"{key}/count", 0)
        out = [_pickle.loads(self.store.get(f"{key}/{i}")) for i in range(comm.size)]
        if self.store.add(f"{key}/read", 1) == comm.size:
            for k in [f"{key}/{i}" for i in range(comm.size)] + [f"{key}/count", f"{key}/read"]:
                try:
                    self.store.delete_key(k)
                except Exception:  # noqa: BLE001 - a store without deletion keeps them
                    pass
        return out

    def linger(self, comm, timeout):
        """A failing rank's last act: counts itself as told; the communicator's rank 0, which holds
        the store (torch's default store, vLLM's StatelessProcessGroup), then waits until every
        process has (a dead one never does: at most LINGER_SECONDS or the timeout), so that its exit
        does not take the failure's message from those still to read it."""
        if self.store is None:
            return
        try:
            told = self.store.add(f"{self.prefix}/told", 1)
            if comm.rank != 0:
                return
            deadline = _time.monotonic() + min(timeout, self.LINGER_SECONDS)
            while told < comm.size and _time.monotonic() < deadline:
                _time.sleep(self.CHECK_SECONDS)
                told = self.store.add(f"{self.prefix}/told", 0)
        except Exception:  # noqa: BLE001 - the store is gone: nobody left to tell
            pass

    def check(self, force=False):
        """Raises the RefitError another rank posted, if any (asking the store at most every
        CHECK_SECONDS unless `force`)."""
        if self.store is None:
            return
        now = _time.monotonic()
        if not force and now < self.next_check:
            return
        self.next_check = now + self.CHECK_SECONDS
        try:
            posted = self.store.add(f"{self.prefix}/failures", 0)
            message = self.store.get(f"{self.prefix}/failure/1").decode() if posted > 0 else None
        except Exception as e:  # noqa: BLE001
            raise RefitError(f"rank {self.me}: the run's store is gone (the process that held it, usually rank 0, "
                             f"died?): {e}", self.me) from None
        if message:
            named = _re.match(r"rank (\d+)", message)
            failing = int(named.group(1)) if named else -1
            raise RefitError(message if failing == self.me else f"rank {failing} failed (seen by rank {self.me}): {message}",
                             failing, failing)


class _Step:
    """One step of a run on this process: every local rank's sends, receives, packs and unpacks in
    one order that every process derives alike (by wave, then operation, hop and window), issued
    without waiting for the group: a rank waits only for a window it must forward or whose slot it
    must reuse (gloo: on the host, bounded by the run's timeout, then naming another rank's posted
    failure if there is one; NCCL: the
    stream waits, the host does not), and for the rest at the step's end."""

    def __init__(self, refit, runs, k, comm, watch, self_send, timeout, corrupt_op, stats):
        self.refit, self.runs, self.k = refit, runs, k
        self.comm, self.watch, self.self_send = comm, watch, self_send
        self.timeout = timeout
        self.corrupt_op = corrupt_op
        self.stats = stats
        self.recv_work = {}   # (rank, op, window) -> (work or None, what, peer): a window that arrived or is arriving here
        self.send_work = {}   # (rank, op, window) -> [(work, what), ...]: its sends out of this rank
        self.unpacked = set()  # (rank, op, window)
        self.local = {}       # (to rank, op, window) -> the sender's buffer, for a hop inside this process
        self.messages = []    # (work or None, buffer, places, to rank, what): coalesced receives to unpack
        self.waited = {}      # id(work) -> work: the works waited for

    def remote(self, frm, to):
        """Whether a message between plan ranks frm and to goes through the communicator (else it
        is a copy inside this process)."""
        return not (frm in self.runs and to in self.runs)

    def fail(self, message, rank, peer):
        """Tells every rank of the run (the watch's store), then raises."""
        self.watch.post(message)
        raise RefitError(message, rank, peer)

    def pair(self, send_buf, recv_buf, tag):
        self.stats["bytes_sent"] += send_buf.numel()
        self.stats["bytes_received"] += recv_buf.numel()
        self.stats["messages"] += 2
        return self.comm.pair(send_buf, recv_buf, tag)

    def wait(self, work, rank, what, peer):
        """Waits for `work`, once (gloo's receive work would wait for another message if waited
        again). On the host (gloo), one wait bounded by the timeout (gloo's works complete only
        inside wait()); when it fails, a failure another rank posted is raised if there is one, else
        this rank's own, a RefitError; on the device (NCCL), the stream waits and the host goes on."""
        if work is None or id(work) in self.waited:
            return
        self.waited[id(work)] = work  # (kept alive while the step runs, so its id is not reused)
        # Gloo's works complete only inside wait() (is_completed() stays False until then), so the
        # host waits in one call bounded by the run's timeout; a peer that died ends it at once (its
        # connection closes), and on any end but success the watch names a failure another rank
        # posted before this rank reports its own. A failed rank posts, then drains its step's
        # sends (_Step.drain), so its peers finish the step and read the failure at the next one's
        # start (a store round trip per step, not per wait).
        self.watch.check()
        try:
            if self.comm.host_waits:
                work.wait(_dt.timedelta(seconds=self.timeout))
            else:
                work.wait()
        except RuntimeError as e:
            self.watch.check(force=True)  # another rank's failure is the likelier cause
            self.fail(f"rank {rank} waited for rank {peer}: {what} in step {self.k} had no answer within "
                      f"{self.timeout:g} s ({e})", rank, peer)

    def isend(self, buf, to, tag):
        self.stats["bytes_sent"] += buf.numel()
        self.stats["messages"] += 1
        return self.comm.isend(buf, to, tag)

    def irecv(self, buf, frm, tag):
        self.stats["bytes_received"] += buf.numel()
        self.stats["messages"] += 1
        return self.comm.irecv(buf, frm, tag)

    def actions(self):
        """This process's actions of the step, in the order every process derives alike: by wave
        (window j of an op crosses a hop of depth d in wave op.wave + j + d - 1), then sends before
        receives, then operation, hop and window; the coalesced messages first, in wave -1."""
        out = []
        k = self.k
        for r, run in self.runs.items():
            for (direction, peer) in sorted(run.prep["coalesced"][k]):
                out.append((-1, 0 if direction == "out" else 1, peer, 0, 0, r, "message", direction))
            for s in run.prep["by_step"][k]:
                if s.coalesced:
                    continue
                depth = s.depth_here(r)
                for j in range(s.nwindows):
                    if s.send:  # the root packs window j and sends it to its children
                        out.append((s.wave + j, 0, s.op, 0, j, r, "send", s))
                    else:
                        out.append((s.wave + j + depth - 1, 1, s.op, depth, j, r, "recv", s))
                        if s.children:  # then forwards it, one wave later
                            out.append((s.wave + j + depth, 0, s.op, depth, j, r, "send", s))
        out.sort(key=lambda a: a[:6])
        return out

    def slot_free(self, r, s, j):
        """Window j of s at rank r may take its slot: window j - RING_WINDOWS, which had it, has left
        for every child and (a receiver) is unpacked."""
        if s.kept or s.coalesced or j < RING_WINDOWS:
            return
        old = j - RING_WINDOWS
        for work, what in self.send_work.pop((r, s.op, old), []):
            self.wait(work, r, what, -1)
        if not s.send:
            self.finish_receive(r, s, s.windows[old])

    def finish_receive(self, r, s, win):
        key = (r, s.op, win.index)
        if key in self.unpacked:
            return
        work, what, peer = self.recv_work.pop(key)
        self.wait(work, r, what, peer)
        self.runs[r].unpack(s, win, self.corrupt_op)
        self.unpacked.add(key)

    def run(self):
        actions = self.actions()
        if self.k > 0:
            self.watch.check(force=True)  # a failure posted while this rank finished its last step
        self.stats["actions"] += len(actions)
        current = None  # the wave whose sends and receives are in the open group (grouped communicators)
        for i, (wave, _, peer, _, j, r, kind, x) in enumerate(actions):
            if self.comm.grouped and wave != current:
                if current is not None:
                    self.comm.group_end()
                self.comm.group_start()
                current = wave
            run = self.runs[r]
            try:
                if kind == "message":
                    self.message(r, run, x, peer)
                elif kind == "send":
                    self.send(r, run, x, x.windows[j])
                else:
                    self.receive(r, run, x, x.windows[j])
            except BaseException:
                self.refit._undrained = (self, actions[i:])  # drained once the failure is posted (Refit.run)
                raise
        if current is not None:
            self.comm.group_end()
        self.watch.check(force=True)
        # The step's end: every receive arrived and unpacked, every send left.
        for r, run in self.runs.items():
            for s in run.prep["by_step"][self.k]:
                if not s.send and not s.coalesced:
                    for win in s.windows:
                        self.finish_receive(r, s, win)
        for works in self.send_work.values():
            for work, what in works:
                self.wait(work, -1, what, -1)
        for work, buf, places, to, what in self.messages:
            self.wait(work, to, what, -1)
            self.runs[to].unpack_message(buf, places, self.corrupt_op)

    def drain(self, rest):
        """A failing rank's remaining sends of the step, issued with whatever their buffers hold and
        never waited for: a peer blocked in a gloo wait for this rank's bytes gets them, goes on,
        and at its next wait reads the failure from the watch, instead of staying blocked until this
        process exits (and with it, on rank 0, the store that holds the failure's message)."""
        if not self.comm.host_waits:
            return
        for _, _, peer, _, j, r, kind, x in rest:
            try:
                run = self.runs[r]
                if kind == "message" and x == "out" and self.remote(r, peer):
                    buf, _ = run.message(self.k, "out", peer)
                    self.comm.isend(buf, peer, _message_tag(self.k, r, peer, self.refit.world_size))
                elif kind == "send":
                    buf = run.buffer(x, x.windows[j])
                    for child in x.children:
                        if self.remote(r, child):
                            self.comm.isend(buf, child, _tag(x.op, j, r))
            except Exception:  # noqa: BLE001 - best effort: the run has failed already
                pass

    def message(self, r, run, direction, peer):
        """Rank r's coalesced message of the step to or from `peer`: the plain transfers between
        them whose parts fit one window, packed into one buffer, one message."""
        buf, places = run.message(self.k, direction, peer)
        what = f"the step's message {'to' if direction == 'out' else 'from'} rank {peer} ({len(places)} operations)"
        frm, to = (r, peer) if direction == "out" else (peer, r)
        tag = _message_tag(self.k, frm, to, self.refit.world_size)
        if direction == "out":
            if self.remote(r, peer):
                self.send_work.setdefault(("message", r, peer), []).append((self.isend(buf, peer, tag), what))
            else:
                self.local[("message", peer, r)] = buf
        elif self.remote(peer, r):
            self.messages.append((self.irecv(buf, peer, tag), buf, places, r, what))
        elif self.self_send:
            send_work, recv_work = self.pair(self.local.pop(("message", r, peer)), buf, tag)
            self.send_work.setdefault(("message", peer, r), []).append((send_work, what))
            self.messages.append((recv_work, buf, places, r, what))
        else:
            buf.copy_(self.local.pop(("message", r, peer)))
            self.messages.append((None, buf, places, r, what))

    def send(self, r, run, s, win):
        key = (r, s.op, win.index)
        if s.send:  # (a kept receive it packs from arrived in an earlier step: model::op_steps)
            self.slot_free(r, s, win.index)
            run.pack(s, win)
        else:  # a forward: the window must have arrived here (gloo: the host waits; NCCL: the stream)
            work, what, peer = self.recv_work[key]
            self.wait(work, r, what, peer)
        buf = run.buffer(s, win)
        for child in s.children:
            what = f"operation {s.op} (send of window {win.index} to rank {child})"
            if self.remote(r, child):
                work = self.isend(buf, child, _tag(s.op, win.index, r))
                self.send_work.setdefault(key, []).append((work, what))
            else:
                self.local[(child, s.op, win.index)] = buf

    def receive(self, r, run, s, win):
        self.slot_free(r, s, win.index)
        key = (r, s.op, win.index)
        into = run.buffer(s, win)
        what = f"operation {s.op} (receive of window {win.index} from rank {s.peer})"
        if self.remote(s.peer, r):
            self.recv_work[key] = (self.irecv(into, s.peer, _tag(s.op, win.index, s.peer)), what, s.peer)
        elif self.self_send:
            send_work, recv_work = self.pair(self.local.pop((r, s.op, win.index)), into, _tag(s.op, win.index, s.peer))
            self.send_work.setdefault((s.peer, s.op, win.index), []).append((send_work, what))
            self.recv_work[key] = (recv_work, what, s.peer)
        else:
            into.copy_(self.local.pop((r, s.op, win.index)))
            self.recv_work[key] = (None, what, s.peer)


def _tag(op, window, frm):
    """The tag of window `window` of operation `op` sent by plan rank `frm` (gloo matches a message by
    its pair of processes and its tag: with several plan ranks per process, two hops of one op may
    join the same pair of processes)."""
    return ((op * 4099 + window) * 8191 + frm) % (1 << 30) + 1


def _message_tag(k, frm, to, world):
    """The tag of step k's coalesced message from plan rank `frm` to `to`."""
    return (1 << 30) + 1 + ((k * world + frm) * world + to) % (1 << 29)


class Refit:
    """A refit planned once (scenario, strategy, staging budget) and run every training step.

    strategy: None for reshard's default (reshard._reshard.DEFAULT_STRATEGY: "auto", the tuner's
    choice), or a strategy line as `reshard compare` prints it."""

    def __init__(self, scenario=None, strategy=None, staging=None, *, overrides=None, profile=None, plan=None,
                 ranks=None):
        """`ranks`: the plan ranks whose programs this process builds (default: every rank's). A
        process of a large refit builds only its own (at frontier scale each program takes the
        extension a second or two, and the whole plan hundreds of MB); asking another rank's boxes,
        or running it, then raises RefitError."""
        if plan is None:
            if scenario is None:
                raise ValueError("Refit: give a scenario (path or dict), or use Refit.load(plan_file)")
            import reshard
            reshard._need_extension()
            if strategy is None:
                strategy = reshard._reshard.DEFAULT_STRATEGY
            named = {} if profile is None else {"profile": profile}  # None: the module's default profile
            only = [] if ranks is None else sorted({int(r) for r in ranks})
            plan = _plan_from_text(reshard._reshard._refit_plan(scenario, strategy=strategy, staging=staging,
                                                                overrides=overrides, ranks=only, **named),
                                   "the extension's plan")
        if plan.get("format") not in _FORMATS:
            raise RefitError(f"not a refit plan: format {plan.get('format')!r}, expected {FORMAT!r}")
        self._plan = plan
        self._prepared = {}
        self.fingerprint = _fingerprint(plan)  # 16 hex digits of the plan: every process must run the same
        self._window = None  # per op id: its window (_windows), once
        self._wave = None    # per op id: its first wave (_waves), once
        self._arenas = {}  # rank -> its staging arena, kept between runs
        self._checked = {}  # (communicator, its rank map, this process) -> [run id of its plan check, runs since]
        self._undrained = None  # a failed step and its actions not issued: drained once the failure is posted
        self._verify_cache = {}  # rank -> its pieces as verification reads them (_verify_entries)
        self._scratch = {}  # device -> the digests' matrix memory (_digests), kept between runs
        self._bound = {}   # (rank, region) -> (tensor, its place, its flat byte view, staged): the last run's

    # ---- the plan

    @classmethod
    def load(cls, path):
        """A Refit from a plan file (`reshard plan SCENARIO --strategy S --programs -o FILE`)."""
        return cls(plan=_plan_from_file(path))

    def release(self):
        """Gives back the staging and verification memory the runs keep between them (the next run
        takes it again)."""
        self._arenas.clear()
        self._bound.clear()
        self._scratch.clear()

    def save(self, path):
        """Writes the plan file (format FORMAT), for a machine without the extension."""
        header = {k: v for k, v in self._plan.items() if k != "ranks"}
        header["format"] = FORMAT
        lines, at = [_json.dumps(header)], 0
        for r in range(self.world_size):
            try:
                prog = dict(self._plan["ranks"][r])
            except RefitError:  # a rank this Refit was not made for: an empty line, as the extension writes
                lines.append("")
                continue
            prog["local"] = [list(c) for c in prog["local"]]
            for side in ("sends", "receives"):
                prog[side] = [dict(st, copies=[list(c) for c in st["copies"]]) for st in prog[side]]
            lines.append(_json.dumps(prog))
        index, at = [], len(lines[0]) + 1
        for line in lines[1:]:
            index.append([at, len(line)])
            at += len(line) + 1
        text = "\n".join(lines) + "\n" + _json.dumps({"ranks": index}) + "\n" + f"{at:020d}\n"
        _Path(path).write_text(text)

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
        """This rank's streams, by step, their windows' copy runs and in-place decisions, and its
        staging arena's layout (once)."""
        if rank in self._prepared:
            return self._prepared[rank]
        p = self._plan
        if self._window is None:
            self._window = _windows(p)
        r = p["ranks"][rank]
        regions = r["regions"]
        ops = p["ops"]
        steps = int(p["steps"])
        streams = [_Stream(e, ops[int(e["op"])], True, regions, self._window[int(e["op"])]) for e in r["sends"]]
        streams += [_Stream(e, ops[int(e["op"])], False, regions, self._window[int(e["op"])]) for e in r["receives"]]
        waves = self._waves()
        by_step = [[] for _ in range(steps)]
        for st in streams:
            st.wave = waves[st.op]
            by_step[st.step].append(st)
        # A kept receive is held until the last step of a send here that packs from it.
        readers, kept_bytes = {}, {}
        for st in streams:
            if not st.send and st.kept:
                kept_bytes[st.region] = st.bytes
        for st in streams:
            if st.send:
                for win in st.windows:
                    for region, _, _, _ in win.runs:
                        if regions[region]["kind"] == "receive":
                            readers[region] = max(readers.get(region, -1), st.step)
        # Coalesced messages: per step, per peer and direction, the plain transfers whose part fits
        # one window, in op order, each 8-byte aligned (the widest copies).
        coalesced = [{} for _ in range(steps)]
        for st in streams:
            if st.coalesced:
                frm, to = st.hops[0]
                key = ("out", to) if st.send else ("in", frm)
                coalesced[st.step].setdefault(key, []).append(st)
        layouts = []
        for c in coalesced:
            layout = {}
            for key, members in c.items():
                members.sort(key=lambda m: m.op)
                at, places = 0, []
                for m in members:
                    places.append((m, at))
                    at += (m.bytes + 7) // 8 * 8
                layout[key] = (at, places)
            layouts.append(layout)
        # The staging arena, laid out once: per step, its messages and rings one after another from
        # offset 0 (a step's memory is the steps before it's, reused); kept receives in a part of their
        # own, each in its place for every step it lives. Allocated by the first run, kept by the
        # Refit for the next ones (Refit.release() gives it back): a run allocates nothing.
        place = {}
        step_bytes = [0] * steps
        for k in range(steps):
            at = 0
            for key, (size, _) in sorted(layouts[k].items()):
                place[(k,) + key] = at
                at += size
            for st in by_step[k]:
                if not st.coalesced and not st.kept and ("ring", st.region) not in place:
                    place[("ring", st.region)] = at
                    at += (st.ring_bytes + 7) // 8 * 8
            step_bytes[k] = at
        kept_at = max(step_bytes, default=0)
        for st in streams:
            if st.kept and ("ring", st.region) not in place:
                place[("ring", st.region)] = kept_at
                kept_at += (st.ring_bytes + 7) // 8 * 8
        prepared = {"streams": streams, "by_step": by_step, "readers": readers, "kept_bytes": kept_bytes,
                    "coalesced": layouts, "place": place, "arena_bytes": kept_at}
        self._prepared[rank] = prepared
        return prepared

    def _waves(self):
        """Per op id: the wave its window 0 leaves the root in. Ops of one chain in one step follow
        each other (the next starts when the previous one's last window has left the root); every
        other op starts at wave 0. The same on every rank."""
        if self._wave is None:
            wave, end = {}, {}
            for op in self._plan["ops"]:
                if op is None:
                    continue
                i, chain = int(op["id"]), int(op.get("chain", -1))
                b, w = int(op["bytes"]), self._window[i]
                n = (b + w - 1) // w if b > 0 else 0
                key = (int(op["step"]), chain)
                wave[i] = end.get(key, 0) if chain >= 0 else 0
                if chain >= 0:
                    end[key] = wave[i] + n
            self._wave = wave
        return self._wave

    def run(self, group=None, sources=None, destinations=None, *, comm=None, rank_map=None, timeout=60.0, verify="digest",
            source_digests=None, _faults=None):
        """Moves the sources' bytes into the destinations. Collective: every process of the
        communicator calls it -- `comm` (TorchGroup, PyNcclGroup, or an object of their shape), else
        TorchGroup(group, rank_map) over `group` (default: the world). A process runs the plan's
        ranks the communicator maps to it (by default plan rank r on rank r % size): one each when
        the group has world_size processes (then `sources` and `destinations` are {HF name: tensor,
        or [tensor, ...] in the order of its boxes}), several otherwise (then {plan rank: {HF name:
        ...}}); bytes between two plan ranks of one process are copied, the others travel through
        the communicator. Each tensor has its box's shape and the plan's dtype (views of a
        framework's parameters allowed). `verify`: "digest" (every piece's 64-bit digest at each of
        its holders and needers, of the caller's tensors, checked across the group by one weighted
        sum; where it fails, the digests are exchanged to name the piece) or "none".
        `source_digests`: {HF name: tensor_digest of the whole weight} as the trainer knows it (the
        same on every process): with verify="digest", each weight's source boxes are checked against
        it, which catches a source tensor holding another box's slice where no replica could (the
        pieces' digests agree with each other then); a failure names the weight and, where two
        boxes hold the same bytes, the ranks and boxes.

        Every rank learns of a failure on any rank: the run begins by checking that every process
        runs the same plan (a different one is named at once); a rank that fails (an error of its
        own, a peer that died or did not answer within `timeout` seconds) posts what it did and why,
        and every other rank ends with a RefitError naming it (through the communicator's store;
        without one, by its own timeout).

        Returns {"seconds" (the transfer), "verify_seconds", "bytes_sent", "bytes_received",
        "staging_peak_bytes" (the largest of this process's ranks), "steps", "windows" (the
        windows this process's streams moved), "messages" (sent and received through the
        communicator), "actions" (the sends, receives and coalesced messages this process issued: its
        Python-level work, which grows with windows, never with the plan's chunks),
        "in_place_windows", "staged_windows", "verified"}."""
        if verify not in ("digest", "none"):
            raise ValueError("verify: 'digest' or 'none'")
        comm = comm if comm is not None else TorchGroup(group, rank_map)
        me, size = comm.rank, comm.size
        if comm.rank_map is not None and (len(comm.rank_map) != self.world_size or not all(0 <= r < size for r in comm.rank_map)):
            raise RefitError(f"rank_map has {len(comm.rank_map)} entries for the plan's {self.world_size} ranks, each a rank "
                             f"of the communicator's {size}", me)
        local = [r for r in range(self.world_size) if comm.process_of(r) == me]
        if size > self.world_size or not local:
            raise RefitError(f"the refit runs on {self.world_size} ranks; process {me} of the communicator's {size} runs none "
                             f"of them", me)
        # The plans are compared on a communicator's first run (all_gather_object: tens of ms among
        # many processes, more than a small refit); later runs count on from that run's id, alike in
        # every process. Keyed by the group or communicator object itself, held: a new one is checked.
        handle = comm.group if isinstance(comm, TorchGroup) else getattr(comm, "communicator", comm)
        key = (type(comm).__name__, "world" if handle is None else handle, tuple(comm.rank_map or ()), me, size)
        if key not in self._checked:
            self._checked[key] = [self._check_plans(comm, local), 0]
        self._checked[key][1] += 1
        run_id = f"{self._checked[key][0]}.{self._checked[key][1]}"
        watch = _Watch(comm.store(), f"reshard/{self.fingerprint}/{run_id}", me)
        if len(local) == 1 and not (set(sources or {}) | set(destinations or {})) <= set(local):
            sources, destinations = {local[0]: sources or {}}, {local[0]: destinations or {}}
        else:
            sources, destinations = sources or {}, destinations or {}
            for what, given in (("sources", sources), ("destinations", destinations)):
                extra = [r for r in given if r not in local]
                if extra:
                    raise RefitError(f"process {me} of {size} runs the plan's ranks {local}; {what} names {extra}", me)
        try:
            return self._run(comm, watch, local, sources, destinations, timeout, verify, source_digests or {},
                             _faults or {})
        except RefitError as e:
            watch.post(str(e) if str(e).startswith("rank ") else f"rank {e.rank if e.rank >= 0 else local[0]}: {e}")
            self._drain()
            watch.linger(comm, timeout)
            raise
        except Exception as e:  # noqa: BLE001 - every rank is told, then the caller sees it as a RefitError
            # An error that names no peer (a broken connection seen by a send): a failure another rank
            # posts naming its cause (the peer it waited for) is the likelier story; give it a moment.
            deadline = _time.monotonic() + _Watch.GRACE_SECONDS
            try:
                while watch.store is not None and _time.monotonic() < deadline:
                    watch.check(force=True)
                    _time.sleep(_Watch.CHECK_SECONDS)
            except RefitError:
                self._drain()
                watch.linger(comm, timeout)
                raise
            message = f"rank {local[0]}: {type(e).__name__}: {e}"
            watch.post(message)
            self._drain()
            watch.linger(comm, timeout)
            raise RefitError(message, local[0]) from e

    def _drain(self):
        """After a failure is posted: the failed step's remaining sends (_Step.drain)."""
        undrained, self._undrained = self._undrained, None
        if undrained is not None:
            undrained[0].drain(undrained[1])

    def _check_plans(self, comm, local):
        """Every process runs the same plan and the processes together run each plan rank once:
        else every process raises at once, naming the ranks that differ. Returns the run's id (the
        first process's random one: the store keys of this run, _Watch, are its own)."""
        everyone = comm.all_gather_object((self.fingerprint, local, _os.urandom(8).hex()))
        differ = [r for r, (f, _, _) in enumerate(everyone) if f != self.fingerprint]
        if differ:
            plans = {}
            for r, (f, _, _) in enumerate(everyone):
                plans.setdefault(f, []).append(r)
            raise RefitError(f"the processes run different refit plans: " +
                             "; ".join(f"plan {f} on process(es) {rs}" for f, rs in sorted(plans.items())) +
                             f" (this is process {comm.rank}, plan {self.fingerprint})", comm.rank, differ[0])
        ran = sorted(r for _, rs, _ in everyone for r in rs)
        if ran != list(range(self.world_size)):
            raise RefitError(f"the processes run plan ranks {ran}, not each of 0..{self.world_size - 1} once", comm.rank)
        return everyone[0][2]

    def _run(self, comm, watch, local, sources, destinations, timeout, verify, source_digests, faults):
        # Check-only: bytes between two ranks of this process through the communicator too (a send
        # to itself: NCCL at world size 1 on one GPU), not copied.
        self_send = bool(faults.get("self_send"))
        p = self._plan
        device = next((t.device for given in (sources, destinations) for per_rank in given.values()
                       for v in per_rank.values() for t in (v if isinstance(v, (list, tuple)) else [v])), torch.device("cpu"))
        runs = {r: _RankRun(self, r, sources.get(r, {}), destinations.get(r, {}), device) for r in local}
        stats = {"bytes_sent": 0, "bytes_received": 0, "steps": int(p["steps"]), "messages": 0, "actions": 0,
                 "windows": sum(st.nwindows for run in runs.values() for st in run.prep["streams"])}
        t0 = _time.perf_counter()
        for run in runs.values():
            run.local_copies()
        corrupt_op, die_rank, raise_rank = faults.get("corrupt"), faults.get("die"), faults.get("raise")
        for k in range(int(p["steps"])):
            if die_rank in runs and k == 0:  # test-only: this process dies mid-run
                import os
                os._exit(17)
            if raise_rank in runs and k == int(p["steps"]) - 1:  # test-only: an error on this rank mid-run
                raise ValueError(f"injected failure at step {k}")
            _Step(self, runs, k, comm, watch, self_send, timeout, corrupt_op, stats).run()
            for run in runs.values():
                run.end_step(k)
        for run in runs.values():
            run.finish()
        if device.type == "cuda":
            _sync(device, watch, timeout, local[0])
        stats["seconds"] = _time.perf_counter() - t0
        stats["staging_peak_bytes"] = max(run.peak for run in runs.values())
        stats["in_place_windows"] = sum(run.in_place for run in runs.values())
        stats["staged_windows"] = sum(run.staged for run in runs.values())
        stats["verified"] = False
        t1 = _time.perf_counter()
        if verify == "digest":
            self._verify(runs, comm, watch, timeout, source_digests)
            stats["verified"] = True
        stats["verify_seconds"] = _time.perf_counter() - t1
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
            if tensor.dtype not in _accepted_dtypes(t["dtype"]):
                raise RefitError(f"rank {rank}: {kind} tensor '{name}' is {tensor.dtype}; the plan moves {t['dtype']} "
                                 f"({', '.join(str(d) for d in _accepted_dtypes(t['dtype']))}): its bytes would be "
                                 f"another type's (convert it, or plan the refit in its dtype)", rank)
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

    def _verify(self, runs, comm, watch, timeout, source_digests):
        """Every piece's digest where it is held and where it is needed, checked across the group.
        Each digest is of the caller's tensor (the source as given, the destination as written),
        never of a staged copy: the digest of exec's piece_digest (_digests), computed with tensor
        operations on the tensors' device. One sum over the group checks them all: each piece's
        digests weighted by the plan's piece weights (which add up to 0 per piece) and a mix of the
        piece's id, and for each weight in `source_digests` its first holders' position digests
        (tensor_digest) less the trainer's, at the holder of the weight's first element. A sum of 0
        passes; any other sends every digest to every process (watch.exchange), which names what
        differs. A plan without weights (older files) is always checked that way."""
        p = self._plan
        entries, parts, check = [], [], 0
        for r in runs:
            for piece, side, region, where, span, box, weight, factor in self._verify_entries(r):
                tensor, _, flat, staged = self._bound[(r, region)]
                if box is None:  # an older plan without boxes: the piece's byte runs in the bound view
                    v = runs[r].views[region]
                    data = torch.cat([v[off:off + n] for off, n in where]) if where else v[:0]
                elif span is not None and not staged:  # a byte range of the caller's tensor itself
                    data = flat[span[0]:span[1]]
                else:  # the piece's part of the caller's tensor
                    data = tensor[where].contiguous().reshape(-1).view(torch.uint8)
                entries.append((r, piece, side, region, weight, factor, where, box))
                parts.append(data)
        weighted = all(e[4] is not None for e in entries)
        mine = []
        for (r, piece, side, region, weight, factor, where, box), digest in zip(entries, _digests(parts, self._scratch)):
            position = None
            if weighted:
                check += factor * digest
                index = p["ranks"][r]["regions"][region]["tensor"]
                name = p["tensors"][index]["name"]
                if side == "source" and weight < 0 and name in source_digests:  # its first holder
                    position = tensor_digest(self._bound[(r, region)][0][where], box, p["tensors"][index]["shape"])
                    check += _mix64(~index) * position
                    if all(d[0] == 0 for d in box):  # the weight's first element: the trainer's digest
                        check -= _mix64(~index) * int(source_digests[name])
            mine.append((r, piece, side, region, digest, weight, position))
        if weighted and watch.total(comm, check, timeout) == 0:
            return
        # Something differs (or the plan has no weights): every digest to every process, to name it.
        # The source regions' whole-box digests, for the weights in source_digests: which box's bytes
        # a misplaced one holds.
        listed = [(r, i) for r in runs for i, reg in enumerate(p["ranks"][r]["regions"])
                  if reg["kind"] == "source" and p["tensors"][reg["tensor"]]["name"] in source_digests]
        sourced = dict(zip(listed, _digests([runs[r].views[i] for r, i in listed])))
        everyone = watch.exchange(comm, "digests", (mine, sourced, dict(source_digests)), timeout)
        wrong = self._what_differs(everyone)
        if wrong is None and weighted:
            wrong = (f"verification failed: the run's digest sum is not 0, and no single piece differs (the processes "
                     f"were given different source_digests?)", -1)
        if wrong:
            raise RefitError(wrong[0], wrong[1], wrong[1])

    def _verify_entries(self, rank):
        """Rank's pieces as verification reads them, parsed once per rank: (piece, side, region,
        where -- the slices of the region's tensor the piece is, or an older plan's byte runs --,
        span -- its byte range in the region where it is one, else None --, box, weight in the digest
        sum (None: an older plan), weight x _mix64(piece))."""
        cached = self._verify_cache.get(rank)
        if cached is not None:
            return cached
        p = self._plan
        regions = p["ranks"][rank]["regions"]
        out = []
        for entry in p["ranks"][rank]["pieces"]:
            piece, side, region = int(entry[0]), entry[1], int(entry[2])
            if p["format"] == FORMAT:
                box, weight = entry[3], (int(entry[4]) if len(entry) > 4 else None)
            else:  # plan-1: [piece, side, region, runs] or [..., box]
                box, weight = (entry[4] if len(entry) > 4 else None), None
            span = None
            if box is None:
                where = entry[3]
            else:
                whole = regions[region]["box"]
                where = tuple(slice(a - o[0], b - o[0]) for (a, b), o in zip(box, whole))
                # A box that is its region's whole extent after its last partial dimension and one
                # element wide before it is one byte range of the region: read there, without a copy.
                partial = [d for d, ((a, b), o) in enumerate(zip(box, whole)) if (a, b) != tuple(o)]
                if not partial or all(box[d][1] - box[d][0] == 1 for d in range(partial[-1])):
                    size = p["tensors"][regions[region]["tensor"]]["element_size"]
                    start, inner = 0, size
                    for d in range(len(box) - 1, -1, -1):
                        start += (box[d][0] - whole[d][0]) * inner
                        inner *= whole[d][1] - whole[d][0]
                    n = size
                    for a, b in box:
                        n *= b - a
                    span = (start, start + n)
            out.append((piece, side, region, where, span, box, weight,
                        None if weight is None else weight * _mix64(piece)))
        self._verify_cache[rank] = out
        return out

    def _what_differs(self, everyone):
        """(message, rank) for the first piece whose digests differ, or the first weight whose source
        boxes do not add up to its source digest, from every process's (entries, source region
        digests, source_digests); None if nothing does."""
        p = self._plan
        entries = sorted(e for part in everyone for e in part[0])

        def where(r, region):
            reg = p["ranks"][r]["regions"][region]
            return f"'{p['tensors'][reg['tensor']]['name']}' in the {reg['kind']} box {_box(reg['box'])} at rank {r} (GPU {p['gpus'][r]})"

        held = {}  # piece -> (digest, rank) of its first holder (the lowest rank)
        for r, piece, side, region, digest, weight, _ in entries:
            if side == "source":
                held.setdefault(piece, (digest, r))
        for r, piece, side, region, digest, weight, _ in entries:
            if piece in held and held[piece][0] != digest and (side == "destination" or r != held[piece][1]):
                return (f"verification failed: piece {piece} of {where(r, region)} has digest {digest:016x}, its "
                        f"holder rank {held[piece][1]} has {held[piece][0]:016x}", r)
        expected = {}
        for part in everyone:
            for name, d in part[2].items():
                if expected.setdefault(name, int(d)) != int(d):
                    return f"verification failed: the processes were given different source_digests for '{name}'", -1
        totals = {}
        for r, piece, side, region, digest, weight, position in entries:
            if position is not None:
                name = p["tensors"][p["ranks"][r]["regions"][region]["tensor"]]["name"]
                totals[name] = (totals.get(name, 0) + position) & _MASK64
        boxes = {}  # (tensor, box shape, digest) -> the source regions with those bytes
        for part in everyone:
            for (r, i), digest in part[1].items():
                reg = p["ranks"][r]["regions"][i]
                boxes.setdefault((reg["tensor"], tuple(hi - lo for lo, hi in reg["box"]), digest), []).append((r, i))
        for name, want in sorted(expected.items()):
            got = totals.get(name, 0)
            if got == want:
                continue
            index = next(i for i, t in enumerate(p["tensors"]) if t["name"] == name)
            same = [(places, key) for key, places in boxes.items()
                    if key[0] == index and len({_box(p["ranks"][r]["regions"][i]["box"]) for r, i in places}) > 1]
            if same:  # one box's bytes at two boxes: one of them is the other's slice
                at = {}
                for r, i in sorted(same[0][0]):
                    at.setdefault(_box(p["ranks"][r]["regions"][i]["box"]), r)
                named = " and ".join(f"rank {r}'s box {b}" for b, r in sorted(at.items(), key=lambda x: x[1]))
                return (f"verification failed: the sources of '{name}' do not add up to its source digest "
                        f"{want:016x} (they give {got:016x}): {named} hold the same bytes (one of them is the other's "
                        f"slice, misplaced)", -1)
            holders = sorted({r for r, i in (k for places in boxes.values() for k in places)
                              if p["ranks"][r]["regions"][i]["tensor"] == index})
            return (f"verification failed: the sources of '{name}' do not add up to its source digest {want:016x} "
                    f"(they give {got:016x}): a source box holds other bytes than the trainer's (held at ranks "
                    f"{holders})", -1)
        return None


_DIGEST_ROW = 256         # words per row of the digest's matrix (2 KiB)
_DIGEST_BATCH = 1 << 28   # bytes of pieces per matrix (each copied into it once)


def _digests(parts, scratch=None):
    """exec's piece digest (exec/verify.hpp, PieceDigest) of each of `parts`, 1-D uint8 tensors of
    pieces' bytes in row-major order (on one device): h = n + sum_i w_i (2 i + 1) mod 2^64 over a
    piece's little-endian 64-bit words w_i (the last one zero-padded).

    The pieces, each zero-padded to whole rows, are laid end to end in a matrix of R = _DIGEST_ROW
    int64 columns (batches of at most _DIGEST_BATCH bytes, a larger piece alone). For the piece in
    rows a .. b-1, word i = (r - a) R + c, so sum_i w_i (2 i + 1) = 2 R sum_r (r - a) s_r +
    2 sum_r u_r + sum_r s_r, with s_r = sum_c w_rc and u_r = sum_c c w_rc: the matrix's
    row sums and column-weighted row sums (an int64 matrix-vector product), added up per piece -- the same
    dozen tensor operations however many pieces there are. int64 sums wrap, which is the mod 2^64.
    `scratch` ({device: uint8 tensor}, kept by the caller between calls) holds the matrix's memory,
    so that a verification in a loop does not fault in fresh pages every time."""
    R = _DIGEST_ROW
    out = []
    at = 0
    while at < len(parts):
        chunks, rows, size = [], [], 0
        while at < len(parts) and (not chunks or size + parts[at].numel() <= _DIGEST_BATCH):
            data = parts[at]
            n = data.numel()
            k = -(-n // (8 * R))
            chunks.append(data)
            if k * 8 * R > n:
                chunks.append(data.new_zeros(k * 8 * R - n))
            rows.append(k)
            size += n
            at += 1
        first = len(out)
        out += [p.numel() for p in parts[first:at]]  # n, each digest's first term
        if not any(rows):
            continue
        dev = chunks[0].device
        nbytes = sum(rows) * 8 * R
        if scratch is None:
            m = torch.cat(chunks)
        else:
            if dev not in scratch or scratch[dev].numel() < nbytes:
                scratch[dev] = torch.empty(nbytes, dtype=torch.uint8, device=dev)
            m = torch.cat(chunks, out=scratch[dev][:nbytes])
        m = m.view(torch.int64).view(-1, R)
        counts = torch.tensor(rows, dtype=torch.int64, device=dev)
        piece = torch.repeat_interleave(torch.arange(len(rows), dtype=torch.int64, device=dev), counts)
        starts = torch.cumsum(counts, 0) - counts
        local = torch.arange(m.shape[0], dtype=torch.int64, device=dev) - starts[piece]  # r - a
        cols = torch.arange(R, dtype=torch.int64, device=dev)
        row_sums = m.sum(1)
        # sum_c c w_rc: a matrix-vector product on the host (int64, exact); CUDA has none for int64
        weighted = torch.mv(m, cols) if m.device.type == "cpu" else (m * cols).sum(1)
        per_piece = torch.zeros((len(rows), 3), dtype=torch.int64, device=dev)
        per_piece.index_add_(0, piece, torch.stack([row_sums * local, weighted, row_sums], 1))
        h = 2 * R * per_piece[:, 0] + 2 * per_piece[:, 1] + per_piece[:, 2]
        for k, v in enumerate(h.tolist()):
            out[first + k] = (out[first + k] + v) & _MASK64
    return out


def _digest(data):
    """exec's piece digest of one piece's bytes (_digests)."""
    return _digests([data])[0]


_MASK64 = (1 << 64) - 1


def _mix64(x):
    """splitmix64's finaliser of x mod 2^64, made odd: a piece's (or weight's) factor in the run's
    digest sum, so that one differing digest always changes the sum."""
    x = (x * 0x9E3779B97F4A7C15) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return (x ^ (x >> 31)) | 1


def _signed(x):
    x &= _MASK64
    return x - (1 << 64) if x >> 63 else x


_ELEMENT_INT = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
_POSITION_BLOCK = 1 << 20  # elements per block of position digest work (its int64 temporaries)


def tensor_digest(tensor, box=None, shape=None):
    """A weight's position digest: sum over its elements of v_e m(g_e) mod 2^64, v_e the element's
    bits as an unsigned integer and m(g_e) an odd mix (splitmix64's finaliser) of its row-major index
    g_e in the whole weight. `tensor` is the whole weight, or with `box` ([(lo, hi), ...] per
    dimension) and `shape` (the whole weight's) the part of it in that box. Digests of boxes that
    tile a weight add up, mod 2^64, to the whole weight's, and a box's bytes placed at another box
    give another sum: a trainer computes each weight's digest once (from the full tensor, or as the
    sum of its shards' at their boxes), and Refit.run(..., source_digests={name: digest}) checks the
    refit's sources against it."""
    if box is None:
        box = [(0, n) for n in tensor.shape]
        shape = list(tensor.shape)
    if shape is None:
        raise ValueError("tensor_digest: a box needs the whole weight's shape")
    if tuple(tensor.shape) != tuple(hi - lo for lo, hi in box):
        raise ValueError(f"tensor_digest: a tensor of shape {tuple(tensor.shape)} for the box {box}")
    if tensor.numel() == 0:
        return 0
    es = tensor.element_size()
    bits = tensor.contiguous().view(-1).view(torch.uint8).view(_ELEMENT_INT[es]).to(torch.int64)
    if es < 8:
        bits &= (1 << (8 * es)) - 1
    # Each element's index in the whole weight: the first element of its row (every dimension but the
    # last) plus its column.
    dev = tensor.device
    if not box:  # a scalar: one element at index 0
        box, shape = [(0, 1)], [1]
    strides = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        strides[d] = strides[d + 1] * int(shape[d + 1])
    starts = torch.tensor([int(box[-1][0])], dtype=torch.int64, device=dev)
    for d in range(len(box) - 1):
        ids = torch.arange(int(box[d][0]), int(box[d][1]), dtype=torch.int64, device=dev) * strides[d]
        starts = (starts.unsqueeze(1) + ids.unsqueeze(0)).reshape(-1)
    row = int(box[-1][1] - box[-1][0])
    cols = torch.arange(row, dtype=torch.int64, device=dev)
    bits = bits.view(-1, row)
    c1, c2, c3 = (_signed(c) for c in (0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB))
    total = 0
    step = max(1, _POSITION_BLOCK // row)
    for at in range(0, bits.shape[0], step):
        g = starts[at:at + step].unsqueeze(1) + cols
        x = g * c1
        x = (x ^ ((x >> 30) & ((1 << 34) - 1))) * c2
        x = (x ^ ((x >> 27) & ((1 << 37) - 1))) * c3
        x = (x ^ ((x >> 31) & ((1 << 33) - 1))) | 1
        total += int((bits[at:at + step] * x).sum())
    return total & _MASK64
