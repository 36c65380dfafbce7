"""Modules with the frameworks' parameter names and fused layouts, built from full HF tensors for
one rank of a Refit, the layouts written out here independently of reshard.adapters: Megatron-Core
(per query group interleaved linear_qkv, [gate; up] linear_fc1, grouped or sequential experts, the
FP32 router, DDP's `module.` prefix) and vLLM (qkv_proj [q; k; v], gate_up_proj, FusedMoE w13/w2,
padded vocabulary rows). The RL loop example's trainer and server hold these in place of
Megatron-LM's and vLLM's modules (which cannot be installed here); a real loop passes its own
modules to reshard.adapters instead. python/test_adapters.py tests the adapters against them."""
import torch


def module_with(params):
    """An nn.Module whose named_parameters() are exactly `params` ({dotted name: tensor})."""
    root = torch.nn.Module()
    for name, t in params.items():
        *path, leaf = name.split(".")
        m = root
        for part in path:
            if not hasattr(m, part):
                m.add_module(part, torch.nn.Module())
            m = getattr(m, part)
        m.register_parameter(leaf, torch.nn.Parameter(t, requires_grad=False))
    return root


def full_tensors(refit, seed=7):
    """One random BF16 tensor per HF name of the refit, the same for a seed."""
    g = torch.Generator().manual_seed(seed)
    return {n: torch.randn(shape, generator=g).to(torch.bfloat16) for n, (shape, _) in refit.tensors.items()}


def cut(t, box):
    return t[tuple(slice(lo, hi) for lo, hi in box)]


def rows(box):
    return slice(box[0][0], box[0][1])


def megatron_module(refit, rank, full, grouped=True, layer_norm_fused=True, wrap="module."):
    """The training rank's parameters as Megatron-Core names and lays them out, every name under
    `wrap` (DDP's "module.", or "module.module." for DDP over Float16Module)."""
    boxes = refit.source_boxes(rank)
    one = {n: b[0] for n, b in boxes.items()}
    d = refit._plan["model"]["head_dim"]
    layers = sorted({int(n.split(".")[2]) for n in one if n.startswith("model.layers.")})
    p = {}
    for local, L in enumerate(layers):
        h, m = f"model.layers.{L}.", f"decoder.layers.{local}."
        if h + "self_attn.q_proj.weight" in one:
            qb, kb = one[h + "self_attn.q_proj.weight"], one[h + "self_attn.k_proj.weight"]
            groups = (kb[0][1] - kb[0][0]) // d
            hpg = (qb[0][1] - qb[0][0]) // groups // d
            q0, k0 = qb[0][0] // (hpg * d), kb[0][0] // d  # first query group of this TP rank
            assert q0 == k0
            blocks = []
            for gi in range(k0, k0 + groups):  # per query group: its q heads, then k, then v
                blocks += [full[h + "self_attn.q_proj.weight"][gi * hpg * d:(gi + 1) * hpg * d],
                           full[h + "self_attn.k_proj.weight"][gi * d:(gi + 1) * d],
                           full[h + "self_attn.v_proj.weight"][gi * d:(gi + 1) * d]]
            p[m + "self_attention.linear_qkv.weight"] = torch.cat(blocks)
        for hf, mg in (("self_attn.o_proj.weight", "self_attention.linear_proj.weight"),
                       ("self_attn.q_norm.weight", "self_attention.q_layernorm.weight"),
                       ("self_attn.k_norm.weight", "self_attention.k_layernorm.weight"),
                       ("input_layernorm.weight", "self_attention.linear_qkv.layer_norm_weight" if layer_norm_fused
                        else "input_layernorm.weight"),
                       ("post_attention_layernorm.weight", "mlp.linear_fc1.layer_norm_weight" if layer_norm_fused
                        else "pre_mlp_layernorm.weight"),
                       ("mlp.down_proj.weight", "mlp.linear_fc2.weight")):
            if h + hf in one:
                p[m + mg] = cut(full[h + hf], one[h + hf]).clone()
        if h + "mlp.gate.weight" in one:  # Megatron keeps the router in FP32
            p[m + "mlp.router.weight"] = cut(full[h + "mlp.gate.weight"], one[h + "mlp.gate.weight"]).float()
        for hf, mg in (("mlp.", "mlp."), ("mlp.shared_experts.", "mlp.shared_experts.")):
            if h + hf + "gate_proj.weight" in one:  # [gate; up]
                p[m + mg + "linear_fc1.weight"] = torch.cat([cut(full[h + hf + "gate_proj.weight"], one[h + hf + "gate_proj.weight"]),
                                                             cut(full[h + hf + "up_proj.weight"], one[h + hf + "up_proj.weight"])])
        if h + "mlp.shared_experts.down_proj.weight" in one:
            p[m + "mlp.shared_experts.linear_fc2.weight"] = cut(full[h + "mlp.shared_experts.down_proj.weight"],
                                                                one[h + "mlp.shared_experts.down_proj.weight"]).clone()
        experts = sorted({int(n.split(".")[5]) for n in one if n.startswith(h + "mlp.experts.")})
        for i, e in enumerate(experts):
            he = h + f"mlp.experts.{e}."
            fc1 = torch.cat([cut(full[he + "gate_proj.weight"], one[he + "gate_proj.weight"]),
                             cut(full[he + "up_proj.weight"], one[he + "up_proj.weight"])])
            fc2 = cut(full[he + "down_proj.weight"], one[he + "down_proj.weight"]).clone()
            if grouped:
                p[m + f"mlp.experts.linear_fc1.weight{i}"], p[m + f"mlp.experts.linear_fc2.weight{i}"] = fc1, fc2
            else:
                p[m + f"mlp.experts.local_experts.{i}.linear_fc1.weight"] = fc1
                p[m + f"mlp.experts.local_experts.{i}.linear_fc2.weight"] = fc2
    for hf, mg in (("model.embed_tokens.weight", "embedding.word_embeddings.weight"), ("lm_head.weight", "output_layer.weight"),
                   ("model.norm.weight", "decoder.final_layernorm.weight")):
        if hf in one:
            p[mg] = cut(full[hf], one[hf]).clone()
    return module_with({wrap + k: v for k, v in p.items()})  # wrapped, as DDP does


def vllm_module(refit, rank, full=None, pad_vocab=64, expert_order=None, experts="mlp.experts.", router_dtype=None):
    """The inference rank's parameters as vLLM names and lays them out (zeros when full is None).
    expert_order: the logical expert of each local slot of w13/w2 (vLLM with EPLB), else ascending;
    experts: where FusedMoE's w13/w2 live ("mlp.experts." or "mlp.experts.routed_experts.");
    router_dtype: the router's dtype when it is not the model's (an FP32 gate)."""
    one = {n: b[0] for n, b in refit.destination_boxes(rank).items()}

    def part(n):
        t = cut(full[n], one[n]) if full is not None else torch.zeros([hi - lo for lo, hi in one[n]], dtype=torch.bfloat16)
        return t.clone()

    layers = sorted({int(n.split(".")[2]) for n in one if n.startswith("model.layers.")})
    p = {}
    for L in layers:
        h = f"model.layers.{L}."
        if h + "self_attn.q_proj.weight" in one:
            p[h + "self_attn.qkv_proj.weight"] = torch.cat([part(h + f"self_attn.{x}_proj.weight") for x in "qkv"])
        for prefix in ("mlp.", "mlp.shared_experts."):
            if h + prefix + "gate_proj.weight" in one:
                p[h + prefix + "gate_up_proj.weight"] = torch.cat([part(h + prefix + "gate_proj.weight"),
                                                                   part(h + prefix + "up_proj.weight")])
        for s in ("self_attn.o_proj.weight", "self_attn.q_norm.weight", "self_attn.k_norm.weight", "input_layernorm.weight",
                  "post_attention_layernorm.weight", "mlp.down_proj.weight", "mlp.gate.weight",
                  "mlp.shared_experts.down_proj.weight"):
            if h + s in one:
                p[h + s] = part(h + s)
        if router_dtype is not None and h + "mlp.gate.weight" in p:
            p[h + "mlp.gate.weight"] = p[h + "mlp.gate.weight"].to(router_dtype)
        local = sorted({int(n.split(".")[5]) for n in one if n.startswith(h + "mlp.experts.")})
        if local:
            slots = refit._plan["ranks"][rank].get("expert_slots")  # vLLM's physical slots (EPLB copies)
            order = list(expert_order) if expert_order is not None else list(slots) if slots else local
            assert sorted(set(order)) == local
            p[h + experts + "w13_weight"] = torch.stack(
                [torch.cat([part(h + f"mlp.experts.{e}.gate_proj.weight"), part(h + f"mlp.experts.{e}.up_proj.weight")])
                 for e in order])
            p[h + experts + "w2_weight"] = torch.stack([part(h + f"mlp.experts.{e}.down_proj.weight") for e in order])
    for n in ("model.embed_tokens.weight", "lm_head.weight", "model.norm.weight"):
        if n in one:
            t = part(n)
            if t.dim() == 2 and pad_vocab:  # VocabParallelEmbedding pads its rows
                t = torch.cat([t, torch.zeros(pad_vocab, t.shape[1], dtype=t.dtype)])
            p[n] = t
    return module_with(p)
