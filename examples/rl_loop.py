"""An RL-style loop: train a tiny MoE model a few steps on some processes, refit its weights after
every step into an inference layout on other processes, and check them there.

    python3 examples/rl_loop.py [--steps 3] [--strategy auto] [--staging 8MiB]

The scenario is `scenarios/small-moe-ep.yaml`: a four-layer Qwen3-MoE-shaped model (16 experts,
top-4, about 7 M parameters) trained as Megatron-Core TP2 x PP2 x EP4 on 8 CPU processes and served
as vLLM TP2 x DP4 with expert parallelism over 8 more (16 processes, gloo). Per step:

  trainer ranks  a forward and backward pass of the whole model on synthetic tokens
                 (one batch, the same on every trainer rank: the model is small, and this example is
                 about the refit, not about tensor parallelism), an Adam step on the FP32 master
                 weights, then each rank's Megatron-layout BF16 parameters (fused linear_qkv per
                 query group, [gate; up] linear_fc1, grouped experts) made from them;
  all ranks      reshard.adapters turns them, and the server's vLLM-layout parameters (qkv_proj,
                 gate_up_proj, FusedMoE w13/w2), into the boxes one Refit moves every step
                 (planned once; digest verification on);
  server ranks   every parameter compared with the trainer's weights of this step, which trainer
                 rank 0 saved before the refit: byte-exact, or the loop stops.

Prints one line per step (loss, refit time, bytes, staging) and exits non-zero on any mismatch.
"""
import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

# The frameworks' parameter layouts, stand-ins for a Megatron-Core trainer's and a vLLM server's modules.
from framework_layouts import megatron_module, vllm_module  # noqa: E402
from reshard.adapters import megatron_sources, vllm_destinations  # noqa: E402
from reshard.torch import Refit  # noqa: E402

SCENARIO = ROOT / "scenarios" / "small-moe-ep.yaml"


def rmsnorm(x, w, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def forward(W, tokens, cfg, layers, experts, top_k):
    """The tiny Qwen3-MoE model on HF-named FP32 weights: GQA attention with q/k norms, top-k MoE."""
    heads, kv, d = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    x = W["model.embed_tokens.weight"][tokens]
    b, t, _ = x.shape
    mask = torch.full((t, t), float("-inf")).triu(1)
    for L in range(layers):
        p = f"model.layers.{L}."
        h = rmsnorm(x, W[p + "input_layernorm.weight"])
        q = rmsnorm((h @ W[p + "self_attn.q_proj.weight"].T).view(b, t, heads, d), W[p + "self_attn.q_norm.weight"])
        k = rmsnorm((h @ W[p + "self_attn.k_proj.weight"].T).view(b, t, kv, d), W[p + "self_attn.k_norm.weight"])
        v = (h @ W[p + "self_attn.v_proj.weight"].T).view(b, t, kv, d)
        k, v = (z.repeat_interleave(heads // kv, dim=2) for z in (k, v))
        att = torch.softmax(torch.einsum("bqhd,bkhd->bhqk", q, k) / d ** 0.5 + mask, dim=-1)
        x = x + torch.einsum("bhqk,bkhd->bqhd", att, v).reshape(b, t, heads * d) @ W[p + "self_attn.o_proj.weight"].T
        h = rmsnorm(x, W[p + "post_attention_layernorm.weight"])
        weights, chosen = torch.softmax(h @ W[p + "mlp.gate.weight"].T, dim=-1).topk(top_k, dim=-1)
        moe = torch.zeros_like(h)
        for e in range(experts):
            e_w = (weights * (chosen == e)).sum(-1, keepdim=True)
            g = h @ W[p + f"mlp.experts.{e}.gate_proj.weight"].T
            u = h @ W[p + f"mlp.experts.{e}.up_proj.weight"].T
            moe = moe + e_w * ((torch.nn.functional.silu(g) * u) @ W[p + f"mlp.experts.{e}.down_proj.weight"].T)
        x = x + moe
    logits = rmsnorm(x, W["model.norm.weight"]) @ W["lm_head.weight"].T
    return torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))


def worker(rank, world, port, plan_file, steps, folder, queue):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        refit = Refit.load(plan_file)
        cfg = refit._plan["model"]
        trainer = bool(refit.source_boxes(rank))
        server = bool(refit.destination_boxes(rank))
        layers = 1 + max(int(n.split(".")[2]) for n in refit.tensors if n.startswith("model.layers."))
        torch.manual_seed(0)  # every trainer rank starts from the same weights and draws the same batches
        master = {n: (torch.randn(shape) * 0.02 if len(shape) == 2 else torch.ones(shape)).requires_grad_()
                  for n, (shape, _) in refit.tensors.items()} if trainer else {}
        served = vllm_module(refit, rank) if server else None
        tokens = torch.randint(0, refit.tensors["lm_head.weight"][0][0], (4, 32))  # one batch, learnt step by step
        optimizer = torch.optim.Adam(master.values(), lr=1e-2) if trainer else None
        lines = []
        for step in range(steps):
            loss = torch.tensor(0.0)
            sources, destinations, finish = {}, {}, None
            if trainer:
                loss = forward(master, tokens, cfg, layers, cfg["num_experts"], top_k=4)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                bf16 = {n: w.detach().to(torch.bfloat16) for n, w in master.items()}
                if rank == 0:
                    torch.save(bf16, Path(folder) / f"step{step}.pt")
                sources = megatron_sources(refit, rank, megatron_module(refit, rank, bf16).named_parameters())
            if server:
                destinations, finish = vllm_destinations(refit, rank, served.named_parameters())
            dist.barrier()  # trainer rank 0 saved this step's weights
            stats = refit.run(sources=sources, destinations=destinations, timeout=60)
            wrong = []
            if server:
                finish()
                reference = torch.load(Path(folder) / f"step{step}.pt")
                want = dict(vllm_module(refit, rank, reference).named_parameters())
                wrong = [n for n, p in served.named_parameters() if not torch.equal(p, want[n])]
            lines.append((step, float(loss), stats, wrong))
        queue.put((rank, "ok", lines))
    except Exception as e:  # noqa: BLE001
        queue.put((rank, type(e).__name__, str(e)))
    finally:
        dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--strategy", default="auto")
    ap.add_argument("--staging", default="8MiB", help="the most staging one GPU may hold")
    args = ap.parse_args()
    folder = tempfile.mkdtemp(prefix="reshard_rl_")
    plan_file = str(Path(folder) / "plan.json")
    t0 = time.time()
    refit = Refit(str(SCENARIO), strategy=args.strategy, staging=args.staging)  # planned once
    refit.save(plan_file)
    print(f"{refit.scenario}: {refit.strategy}, {refit.world_size} processes, planned in {time.time() - t0:.1f} s")
    # A fork server that has imported torch: each process starts in milliseconds instead of importing
    # torch again (seconds of CPU each).
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(["torch", "torch.distributed"])
    queue = ctx.Queue()
    port = 29500 + os.getpid() % 3000
    procs = [ctx.Process(target=worker, args=(r, refit.world_size, port, plan_file, args.steps, folder, queue))
             for r in range(refit.world_size)]
    for p in procs:
        p.start()
    results = dict((r, (s, x)) for r, s, x in (queue.get(timeout=600) for _ in procs))
    for p in procs:
        p.join()
    failed = {r: x for r, (s, x) in results.items() if s != "ok"}
    if failed:
        for r, x in sorted(failed.items()):
            print(f"rank {r}: {x}", file=sys.stderr)
        return 1
    bad = 0
    for step in range(args.steps):
        rows = [results[r][1][step] for r in sorted(results)]
        loss = rows[0][1]
        seconds = max(s["seconds"] for _, _, s, _ in rows)
        sent = sum(s["bytes_sent"] for _, _, s, _ in rows)
        staging = max(s["staging_peak_bytes"] for _, _, s, _ in rows)
        wrong = sum(len(w) for _, _, _, w in rows)
        bad += wrong
        print(f"step {step}: loss {loss:.4f}, refit {seconds * 1e3:.1f} ms, {sent / 1e6:.2f} MB sent, staging peak "
              f"{staging / 1e6:.2f} MB/GPU, digests verified, server parameters "
              f"{'all equal to the trainer' if not wrong else f'{wrong} WRONG'}")
    print(f"{args.steps} steps in {time.time() - t0:.1f} s")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
