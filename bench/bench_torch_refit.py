"""Refit.run against the same bytes sent as one message per peer pair, between the same processes, in
one run: the engine's overhead (steps, windowed messages, rings, packing) over the least any
torch.distributed transfer of these bytes costs.

    python3 bench/bench_torch_refit.py [--rounds 20] [SCENARIO:STRATEGY ...]

For each scenario and strategy, world_size gloo processes on this machine alternate, `rounds` times
each after a warm-up:
  (a) refit.run, verification off (as a training loop would run it);
  (b) per peer, one isend and one irecv of every byte this rank sends to it and receives from it
      in the refit, all in one batch_isend_irecv, with the same packing into the messages and
      unpacking out of them that the refit's copy runs do (the bytes a box does not hold
      contiguously must be gathered and scattered by any transfer);
  (c) the same messages without packing or unpacking: the transfer alone.
Each timed from a barrier to the slowest rank's end. Prints the medians and a / b, a / c
(docs/performance.md, "reshard.torch"). With --verify, the rounds alternate (a) with digest
verification and without, and the table is verification's cost: the verified refit's wall time over
the unverified one's (slowest rank, medians), and rank 0's verify_seconds against its transfer's
seconds (medians).
"""
import argparse
import os
import statistics
import sys
import tempfile
import time
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

from reshard.torch import Refit, _copy_group  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def pair_messages(refit, rank):
    """Per peer, the (stream, chunk) pairs this rank sends to it and receives from it in the refit
    (every chunk of every hop, in op, hop, chunk order: the same on both ends) and their bytes."""
    p = refit._plan
    streams = refit._prepare(rank)["streams"]
    by_op = {}
    for s in streams:
        by_op.setdefault(s.op, [None, None])[0 if s.send else 1] = s
    send, recv = {}, {}
    for op in p["ops"]:
        mine = by_op.get(int(op["id"]))
        for frm, to in op["hops"]:
            if frm == rank and frm != to:
                s = mine[0] if mine[0] is not None else mine[1]
                send.setdefault(to, []).extend((s, c) for c in range(s.nwindows))
            if to == rank and frm != to:
                recv.setdefault(frm, []).extend((mine[1], c) for c in range(mine[1].nwindows))
    return send, recv


def timed(fn):
    dist.barrier()
    t0 = time.perf_counter()
    fn()
    t = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t)


def worker(rank, world, port, plan_file, rounds, queue, verify):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    refit = Refit.load(plan_file)
    tensors = refit.tensors
    def values(name, box):  # the same on every rank that holds a replica of the box's elements
        shape, dtype = tensors[name]
        full = torch.randn(shape, generator=torch.Generator().manual_seed(zlib.crc32(name.encode())))
        return full[tuple(slice(lo, hi) for lo, hi in box)].to(DTYPES[dtype]).contiguous()

    sources = {n: [values(n, b) for b in boxes] for n, boxes in refit.source_boxes(rank).items()}
    destinations = {n: [torch.empty([hi - lo for lo, hi in b], dtype=DTYPES[tensors[n][1]]) for b in boxes]
                    for n, boxes in refit.destination_boxes(rank).items()}
    send, recv = pair_messages(refit, rank)
    size = lambda chunks: sum(s.windows[c].bytes for s, c in chunks)  # noqa: E731
    out_bufs = {peer: torch.empty(size(v), dtype=torch.uint8) for peer, v in send.items()}
    in_bufs = {peer: torch.empty(size(v), dtype=torch.uint8) for peer, v in recv.items()}
    views = refit._bind(rank, refit._plan["ranks"][rank]["regions"], sources, destinations)[0]

    def packed(pack):
        if pack:  # the refit's packing of every chunk this rank sends into the peer's message
            for peer, chunks in send.items():
                at = 0
                for s, c in chunks:
                    ch = s.windows[c]
                    for region, off, stride, count, length, a in ch.groups if s.send else ():
                        if views[region] is not None:
                            _copy_group(out_bufs[peer], at + a, length, views[region], off, stride, count, length)
                    at += ch.bytes
        ops = [dist.P2POp(dist.isend, out_bufs[p], p) for p in sorted(out_bufs)]
        ops += [dist.P2POp(dist.irecv, in_bufs[p], p) for p in sorted(in_bufs)]
        if ops:
            for w in dist.batch_isend_irecv(ops):
                w.wait()
        if pack:  # and its unpacking of every chunk received into the destination shards
            for peer, chunks in recv.items():
                at = 0
                for s, c in chunks:
                    ch = s.windows[c]
                    for region, off, stride, count, length, a in ch.groups:
                        _copy_group(views[region], off, stride, in_bufs[peer], at + a, length, count, length)
                    at += ch.bytes

    def baseline():
        packed(True)

    def transfer_only():
        packed(False)

    stats = []

    def engine():
        refit.run(sources=sources, destinations=destinations, verify="none")

    def verified():
        stats.append(refit.run(sources=sources, destinations=destinations, verify="digest"))

    if verify:  # (a) verified against (a) unverified
        timed(verified), timed(engine)  # warm-up
        a, b = [], []
        for _ in range(rounds):
            a.append(timed(verified))
            b.append(timed(engine))
        if rank == 0:
            queue.put((a, b, None, stats[1:]))
        dist.destroy_process_group()
        return
    timed(engine), timed(baseline), timed(transfer_only)  # warm-up
    a, b, c = [], [], []
    for _ in range(rounds):
        a.append(timed(engine))
        b.append(timed(baseline))
        c.append(timed(transfer_only))
    if rank == 0:
        queue.put((a, b, c, stats))
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("rows", nargs="*", default=["small-moe-ep:auto", "small-moe-ep:direct", "small-moe-ep:gather_broadcast",
                                                 "small-gqa-megatron-vllm:auto", "small-dtensor-uneven:auto",
                                                 "small-gqa-megatron-tp8:auto"])
    ap.add_argument("--verify", action="store_true",
                    help="alternate (a) with and without digest verification and report its cost: the verified "
                         "refit's wall time over the unverified one's, and rank 0's verify_seconds")
    args = ap.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="reshard_bench_"))
    if args.verify:
        print("| scenario | strategy | processes | Refit.run, verify=\"none\" | Refit.run, verify=\"digest\" "
              "| verification's cost | rank 0: transfer (`seconds`) | rank 0: `verify_seconds` |")
        print("|---|---|---:|---:|---:|---:|---:|---:|")
    else:
        print("| scenario | strategy | processes | messages of rank 0 | Refit.run (a) | one message per pair, packed (b) "
              "| the same, transfer only (c) | a / b | a / c |")
        print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for row in args.rows:
        scenario, strategy = row.split(":", 1)
        refit = Refit(str(ROOT / "scenarios" / f"{scenario}.yaml"), strategy=strategy)
        plan_file = folder / f"{scenario}-{strategy}.json"
        refit.save(plan_file)
        ctx = mp.get_context("spawn")
        queue = ctx.Queue()
        port = 29500 + (os.getpid() + hash(row)) % 3000
        procs = [ctx.Process(target=worker, args=(r, refit.world_size, port, str(plan_file), args.rounds, queue,
                                                           args.verify))
                 for r in range(refit.world_size)]
        for p in procs:
            p.start()
        a, b, c, stats = queue.get(timeout=900)
        for p in procs:
            p.join()
        if args.verify:
            mv, mu = statistics.median(a), statistics.median(b)
            mt = statistics.median(st["seconds"] for st in stats)
            ms = statistics.median(st["verify_seconds"] for st in stats)
            print(f"| {scenario} | {refit.strategy} | {refit.world_size} | {mu * 1e3:.2f} ms | {mv * 1e3:.2f} ms | "
                  f"{(mv / mu - 1) * 100:+.0f} % | {mt * 1e3:.2f} ms | {ms * 1e3:.2f} ms |", flush=True)
            continue
        ma, mb, mc = statistics.median(a), statistics.median(b), statistics.median(c)
        print(f"| {scenario} | {refit.strategy} | {refit.world_size} | {stats[-1]['messages']} | {ma * 1e3:.2f} ms | "
              f"{mb * 1e3:.2f} ms | {mc * 1e3:.2f} ms | {ma / mb:.2f} | {ma / mc:.2f} |", flush=True)


if __name__ == "__main__":
    main()
