"""The GPU check's PyTorch part (scripts/gpu-check.sh runs it): reshard.torch on CUDA tensors, from
refit plan files alone (no compiled reshard), and the device's copy bandwidth.

    python3 gpu_check.py --plans DIR --out DIR [--device cuda|cpu] [--backend nccl|gloo] [--runs 3]

One process runs every rank of each plan (reshard.torch's ranks per process): the bytes between them
go through torch.distributed as sends to itself where the backend allows it (NCCL at world size 1:
`self_send`), else as copies. Every destination tensor is compared with a slicing of full tensors
made here, and the digests are verified. Then a plain device-to-device copy (`copy_`, a
cudaMemcpyAsync) of 512 KiB to 4 GiB, timed with CUDA events. Writes torch.json and copy.json to
--out and prints a line per result.
"""
import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the bundle's reshard package

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from reshard.torch import Refit  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def cut(t, box):
    return t[tuple(slice(lo, hi) for lo, hi in box)]


def refit_once(refit, device, seed, self_send):
    g = torch.Generator(device="cpu").manual_seed(seed)
    full = {n: torch.randn(shape, generator=g).to(DTYPES[dtype]).to(device) for n, (shape, dtype) in refit.tensors.items()}
    ranks = range(refit.world_size)
    sources = {r: {n: [cut(full[n], b).clone() for b in bs] for n, bs in refit.source_boxes(r).items()} for r in ranks}
    dests = {r: {n: [torch.zeros([hi - lo for lo, hi in b], dtype=DTYPES[refit.tensors[n][1]], device=device) for b in bs]
                 for n, bs in refit.destination_boxes(r).items()} for r in ranks}
    if refit.world_size == 1:
        sources, dests = sources[0], dests[0]
    stats = refit.run(sources=sources, destinations=dests, timeout=120, _faults={"self_send": self_send})
    if refit.world_size == 1:
        dests = {0: dests}
    wrong = sum(not torch.equal(t, cut(full[n], b)) for r in ranks for n, bs in refit.destination_boxes(r).items()
                for b, t in zip(bs, dests[r][n]))
    return stats, wrong


def copy_bandwidth(device):
    rows = []
    for mib in (0.5, 64, 256, 1024, 4096):
        n = int(mib * (1 << 20))
        src = torch.empty(n, dtype=torch.uint8, device=device)
        dst = torch.empty_like(src)
        dst.copy_(src)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        reps = 10 if n >= 64 << 20 else 1000
        for _ in range(reps):
            dst.copy_(src)
        end.record()
        torch.cuda.synchronize()
        seconds = start.elapsed_time(end) / 1e3 / reps
        rows.append({"bytes": n, "seconds": seconds, "copy_GBps": n / seconds / 1e9, "read_write_GBps": 2 * n / seconds / 1e9})
        print(f"copy_ {mib:g} MiB device to device: {n / seconds / 1e9:.0f} GB/s copied ({2 * n / seconds / 1e9:.0f} GB/s read + written)")
        del src, dst
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--plans", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--backend", default="nccl")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    device = torch.device(args.device)
    if device.type == "cuda":
        torch.cuda.set_device(0)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(29400 + os.getpid() % 1000))
    dist.init_process_group(args.backend, rank=0, world_size=1)
    results, failed = [], 0
    for plan in sorted(Path(args.plans).glob("*.json")):
        refit = Refit.load(plan)
        for self_send in ([True, False] if args.backend == "nccl" else [False]):
            row = {"plan": plan.name, "strategy": refit.strategy, "ranks": refit.world_size, "device": str(device),
                   "backend": args.backend, "self_send": self_send, "runs": []}
            try:
                for k in range(args.runs):
                    t0 = time.perf_counter()
                    stats, wrong = refit_once(refit, device, seed=k, self_send=self_send)
                    stats["wall_s"] = time.perf_counter() - t0
                    stats["wrong_tensors"] = wrong
                    row["runs"].append(stats)
                    failed += wrong != 0
                how = "NCCL sends to itself" if self_send else "copies between its ranks"
                last = row["runs"][-1]
                print(f"reshard.torch {plan.name} ({refit.strategy}), {refit.world_size} ranks in one process, {how}: "
                      f"{args.runs} refits, last {last['seconds'] * 1e3:.1f} ms, {last['messages']} messages, staging peak "
                      f"{last['staging_peak_bytes'] / 1e6:.2f} MB, wrong tensors {sum(r['wrong_tensors'] for r in row['runs'])}, "
                      f"digests {'verified' if last['verified'] else 'not checked'}")
            except Exception as e:  # noqa: BLE001 - reported, and the next case runs
                row["error"] = f"{type(e).__name__}: {e}"
                row["traceback"] = traceback.format_exc()
                print(f"reshard.torch {plan.name} self_send={self_send}: FAILED: {row['error']}")
                failed += 1
            results.append(row)
    (out / "torch.json").write_text(json.dumps(results, indent=1))
    if device.type == "cuda":
        (out / "copy.json").write_text(json.dumps(copy_bandwidth(device), indent=1))
    dist.destroy_process_group()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
