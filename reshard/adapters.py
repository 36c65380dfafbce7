"""Adapters between the parameter names and fused layouts frameworks use and the HF-named boxes a
Refit moves (reshard.torch): Megatron-Core on the training side, vLLM on the inference side.

    from reshard.adapters import megatron_sources, vllm_destinations
    sources = megatron_sources(refit, rank, trainer.named_parameters())
    destinations, finish = vllm_destinations(refit, rank, llm_model.named_parameters())
    refit.run(sources=sources, destinations=destinations)
    finish()                                   # writes back what could not be a view

Each returns, per HF tensor name, one tensor per box of `refit.source_boxes(rank)` (or
`destination_boxes`): a view into the framework's parameter where the part is contiguous there,
else a packed copy (a source) or a staging tensor that `finish()` unpacks into the parameter (a
destination). The layouts, from the frameworks' sources (docs/execution.md, "Framework adapters"):

Megatron-Core (per TP rank; layer numbers local to the PP stage, experts local to the EP rank):
  self_attention.linear_qkv.weight   per query group g: [q heads of g (hpg*d rows); k_g (d); v_g (d)]
  self_attention.linear_proj.weight  o_proj
  self_attention.q_layernorm/k_layernorm.weight  q_norm / k_norm
  self_attention.linear_qkv.layer_norm_weight (or input_layernorm.weight)  input_layernorm
  mlp.linear_fc1.layer_norm_weight (or pre_mlp_layernorm.weight)           post_attention_layernorm
  mlp.linear_fc1.weight              [gate_shard; up_shard]; mlp.linear_fc2.weight: down_proj
  mlp.router.weight                  mlp.gate.weight (FP32 in Megatron: converted)
  mlp.experts.linear_fc1.weight{i} / mlp.experts.local_experts.{i}.linear_fc1.weight  expert i of this
                                     EP rank: [gate; up]; linear_fc2: down_proj
  mlp.shared_experts.linear_fc1/linear_fc2.weight   shared expert [gate; up] / down
  embedding.word_embeddings.weight, output_layer.weight, decoder.final_layernorm.weight
vLLM (per TP rank; layer numbers global):
  self_attn.qkv_proj.weight          [q_shard; k_shard; v_shard]
  mlp.gate_up_proj.weight            [gate_shard; up_shard]
  mlp.experts.w13_weight [E_local, 2I, H] ([gate; up] per expert), w2_weight [E_local, H, I]
  (also under mlp.experts.routed_experts.), shared_experts.gate_up_proj / down_proj, vocabulary
  rows padded (a view of the first rows).
A destination rank's local experts are in the order of its physical slots: the plan's
`expert_slots` (vLLM's placement, EPLB's redundant copies included), or `expert_order` (the logical
expert of each physical slot, after EPLB has rebalanced); a source rank's in ascending id.
"""

import re

try:
    import torch
except ImportError as _e:
    raise ModuleNotFoundError(f"reshard.adapters needs PyTorch ({_e}): apt-get install python3-torch "
                              "(or pip install torch)", name="torch") from _e

from .torch import RefitError

_LAYER = re.compile(r"^model\.layers\.(\d+)\.(.+)$")
_EXPERT = re.compile(r"^mlp\.experts\.(\d+)\.(gate_proj|up_proj|down_proj)\.weight$")


class AdapterError(RefitError):
    """A framework's parameters do not match the refit's boxes (missing, or another shape)."""


def _strip(name):
    while name.startswith("module."):
        name = name[len("module."):]
    return name


def _rows(box):
    return box[0][1] - box[0][0]


class _Plan:
    """The HF boxes of one rank and side, grouped by layer, and the rank's local numbering."""

    def __init__(self, refit, rank, side, expert_order):
        self.boxes = refit.source_boxes(rank) if side == "source" else refit.destination_boxes(rank)
        self.model = refit._plan.get("model", {})
        self.side = side
        self.rank = rank
        self.layers = sorted({int(m.group(1)) for n in self.boxes if (m := _LAYER.match(n))})
        experts = {}
        for n in self.boxes:
            m = _LAYER.match(n)
            if m and (e := _EXPERT.match(m.group(2))):
                experts.setdefault(int(m.group(1)), set()).add(int(e.group(1)))
        # A rank's physical expert slots in order: the caller's `expert_order`, else the plan's (vLLM
        # with EPLB: slot s holds expert s mod E, in the rank's slot order), else ascending ids.
        slots = refit._plan["ranks"][rank].get("expert_slots") if side == "destination" else None
        default = list(slots) if slots else None
        self.experts = {L: (list(expert_order) if expert_order is not None else default if default is not None else sorted(es))
                        for L, es in experts.items()}

    def box(self, name):
        b = self.boxes.get(name)
        if not b:
            return None
        if len(b) != 1:
            raise AdapterError(f"rank {self.rank}: '{name}' has {len(b)} {self.side} boxes here; the adapter maps one", self.rank)
        return b[0]


class _Params(dict):
    """A framework's parameters by name, remembering which ones the adapter took: a parameter it
    never takes is one the refit would leave stale, and is named (_unused)."""

    def __init__(self, named_parameters):
        super().__init__((_strip(n), p.detach()) for n, p in named_parameters)
        self.used = set()

    def take(self, name):
        t = self.get(name)
        if t is not None:
            self.used.add(name)
        return t


def _unused(params, ignore, rank, framework):
    """AdapterError naming the parameters no box took, unless a pattern of `ignore` matches them."""
    left = sorted(n for n in params if n not in params.used and not any(re.search(p, n) for p in ignore))
    if left:
        raise AdapterError(f"rank {rank}: {len(left)} {framework} parameter(s) the refit plan does not move, e.g. "
                           f"{left[:4]}: a parameter of another architecture or a name this adapter does not know "
                           f"(pass ignore=[regex, ...] for parameters that are not refit on purpose)", rank)


def _need(params, name, rank, what):
    t = params.take(name)
    if t is None:
        raise AdapterError(f"rank {rank}: no parameter '{name}' for {what} (parameters here: "
                           f"{sorted(params)[:6]}{' ...' if len(params) > 6 else ''})", rank)
    return t


def _check(t, box, hf, rank, framework_name):
    want = tuple(hi - lo for lo, hi in box)
    if tuple(t.shape) != want:
        raise AdapterError(f"rank {rank}: '{framework_name}' gives '{hf}' a part of shape {tuple(t.shape)}; its box {box} "
                           f"needs {want}", rank)
    return t


def _split_rows(t, boxes, hf_names, rank, framework_name, padded=False):
    """t's rows are the boxes' rows one after another ([gate; up], [q; k; v]): one view each."""
    out, at = {}, 0
    for hf, box in zip(hf_names, boxes):
        n = _rows(box)
        out[hf] = _check(t[at:at + n], box, hf, rank, framework_name)
        at += n
    if at != t.shape[0] and not padded:
        raise AdapterError(f"rank {rank}: '{framework_name}' has {t.shape[0]} rows; the boxes of {hf_names} take {at}", rank)
    return out


def _qkv_interleaved(t, boxes, hf_names, head_dim, rank, framework_name):
    """Megatron's linear_qkv: per query group [q heads; k; v]; the q, k and v parts as packed copies
    (a rank's q rows are not contiguous in it)."""
    qb, kb, vb = boxes
    d = head_dim
    groups = _rows(kb) // d if d else 0
    if not d or groups * d != _rows(kb) or _rows(vb) != _rows(kb) or _rows(qb) % max(groups, 1):
        raise AdapterError(f"rank {rank}: '{framework_name}': the q/k/v boxes ({_rows(qb)}, {_rows(kb)}, {_rows(vb)} rows) "
                           f"are not whole query groups of head_dim {d} (TP larger than the KV heads is not supported)", rank)
    hpg_d = _rows(qb) // groups
    if t.shape[0] != groups * (hpg_d + 2 * d):
        raise AdapterError(f"rank {rank}: '{framework_name}' has {t.shape[0]} rows; {groups} query groups of "
                           f"{hpg_d} + 2 x {d} rows need {groups * (hpg_d + 2 * d)}", rank)
    g = t.reshape(groups, hpg_d + 2 * d, *t.shape[1:])
    parts = [g[:, :hpg_d], g[:, hpg_d:hpg_d + d], g[:, hpg_d + d:]]
    return {hf: _check(p.reshape(-1, *t.shape[1:]), box, hf, rank, framework_name)
            for hf, p, box in zip(hf_names, parts, boxes)}


def megatron_sources(refit, rank, named_parameters, *, expert_order=None, ignore=()):
    """{HF name: [tensor per box]} for process `rank` of the refit's training side, from a
    Megatron-Core model's named parameters (GPTModel; TE or local specs; grouped or sequential
    experts). Packed copies where Megatron fuses what HF keeps apart, views elsewhere."""
    params = _Params(named_parameters)
    plan = _Plan(refit, rank, "source", expert_order)
    d = int(plan.model.get("head_dim") or 0)
    out = {}

    def put(hf, t):
        out[hf] = [t]

    for local, L in enumerate(plan.layers):
        pre, hp = f"decoder.layers.{local}.", f"model.layers.{L}."
        q, k, v = (plan.box(hp + f"self_attn.{x}_proj.weight") for x in "qkv")
        if q and k and v:
            name = pre + "self_attention.linear_qkv.weight"
            for hf, t in _qkv_interleaved(_need(params, name, rank, "q/k/v"), (q, k, v),
                                          [hp + f"self_attn.{x}_proj.weight" for x in "qkv"], d, rank, name).items():
                put(hf, t)
        for hf_suffix, candidates in (("self_attn.o_proj.weight", ["self_attention.linear_proj.weight"]),
                                      ("self_attn.q_norm.weight", ["self_attention.q_layernorm.weight"]),
                                      ("self_attn.k_norm.weight", ["self_attention.k_layernorm.weight"]),
                                      ("input_layernorm.weight", ["self_attention.linear_qkv.layer_norm_weight",
                                                                  "input_layernorm.weight"]),
                                      ("post_attention_layernorm.weight", ["mlp.linear_fc1.layer_norm_weight",
                                                                           "pre_mlp_layernorm.weight"]),
                                      ("mlp.down_proj.weight", ["mlp.linear_fc2.weight"]),
                                      ("mlp.gate.weight", ["mlp.router.weight"]),
                                      ("mlp.shared_experts.down_proj.weight", ["mlp.shared_experts.linear_fc2.weight"])):
            box = plan.box(hp + hf_suffix)
            if box is None:
                continue
            name = next((pre + c for c in candidates if pre + c in params), pre + candidates[0])
            t = _need(params, name, rank, hp + hf_suffix)
            put(hp + hf_suffix, _check(t, box, hp + hf_suffix, rank, name))
        for fused, hf_prefix in (("mlp.linear_fc1.weight", "mlp."), ("mlp.shared_experts.linear_fc1.weight", "mlp.shared_experts.")):
            g, u = plan.box(hp + hf_prefix + "gate_proj.weight"), plan.box(hp + hf_prefix + "up_proj.weight")
            if g and u:
                name = pre + fused
                for hf, t in _split_rows(_need(params, name, rank, "gate/up"), (g, u),
                                         [hp + hf_prefix + "gate_proj.weight", hp + hf_prefix + "up_proj.weight"], rank, name).items():
                    put(hf, t)
        for i, e in enumerate(plan.experts.get(L, [])):
            he = hp + f"mlp.experts.{e}."
            grouped = pre + f"mlp.experts.linear_fc1.weight{i}"
            fc1 = grouped if grouped in params else pre + f"mlp.experts.local_experts.{i}.linear_fc1.weight"
            fc2 = (pre + f"mlp.experts.linear_fc2.weight{i}" if grouped in params
                   else pre + f"mlp.experts.local_experts.{i}.linear_fc2.weight")
            g, u, dn = plan.box(he + "gate_proj.weight"), plan.box(he + "up_proj.weight"), plan.box(he + "down_proj.weight")
            if g and u:
                for hf, t in _split_rows(_need(params, fc1, rank, f"expert {e}"), (g, u),
                                         [he + "gate_proj.weight", he + "up_proj.weight"], rank, fc1).items():
                    put(hf, t)
            if dn:
                put(he + "down_proj.weight", _check(_need(params, fc2, rank, f"expert {e}"), dn, he + "down_proj.weight", rank, fc2))
    for hf, name in (("model.embed_tokens.weight", "embedding.word_embeddings.weight"),
                     ("lm_head.weight", "output_layer.weight"), ("model.norm.weight", "decoder.final_layernorm.weight")):
        box = plan.box(hf)
        if box is not None:
            t = _need(params, name, rank, hf)
            put(hf, _check(t[:_rows(box)] if t.dim() == 2 else t, box, hf, rank, name))
    _unused(params, ignore, rank, "Megatron-Core")
    return _convert(out, refit, rank, "source")


def _convert(out, refit, rank, side):
    """A part in another dtype than the plan's (Megatron's FP32 router) becomes a converted copy."""
    tensors = refit.tensors
    from .torch import _DTYPES
    for hf, ts in out.items():
        want = _DTYPES.get(tensors[hf][1])
        out[hf] = [t.to(want) if want is not None and t.dtype != want else t for t in ts]
    missing = set((refit.source_boxes(rank) if side == "source" else refit.destination_boxes(rank))) - set(out)
    if missing:
        raise AdapterError(f"rank {rank}: the adapter found no parameter for {len(missing)} {side} tensors, e.g. "
                           f"{sorted(missing)[:3]}", rank)
    return out


def vllm_destinations(refit, rank, named_parameters, *, expert_order=None, ignore=()):
    """({HF name: [tensor per box]}, finish) for process `rank` of the refit's inference side, from
    a vLLM model's named parameters. Views into the fused parameters (qkv_proj, gate_up_proj,
    FusedMoE w13/w2) where a part is contiguous; `finish()` copies the others (a part in another
    dtype) into their parameters after the run."""
    params = _Params(named_parameters)
    plan = _Plan(refit, rank, "destination", expert_order)
    out, pending = {}, []
    tensors = refit.tensors
    from .torch import _DTYPES

    def put(hf, t):
        want = _DTYPES.get(tensors[hf][1])
        if want is not None and t.dtype != want:  # received in the plan's dtype, converted after the run
            staged = torch.empty(t.shape, dtype=want, device=t.device)
            pending.append((t, staged))
            t = staged
        out[hf] = [t]

    for L in plan.layers:
        hp = f"model.layers.{L}."
        q, k, v = (plan.box(hp + f"self_attn.{x}_proj.weight") for x in "qkv")
        if q and k and v:
            name = hp + "self_attn.qkv_proj.weight"
            for hf, t in _split_rows(_need(params, name, rank, "q/k/v"), (q, k, v),
                                     [hp + f"self_attn.{x}_proj.weight" for x in "qkv"], rank, name).items():
                put(hf, t)
        for prefix in ("mlp.", "mlp.shared_experts."):
            g, u = plan.box(hp + prefix + "gate_proj.weight"), plan.box(hp + prefix + "up_proj.weight")
            if g and u:
                name = hp + prefix + "gate_up_proj.weight"
                for hf, t in _split_rows(_need(params, name, rank, "gate/up"), (g, u),
                                         [hp + prefix + "gate_proj.weight", hp + prefix + "up_proj.weight"], rank, name).items():
                    put(hf, t)
        for suffix in ("self_attn.o_proj.weight", "self_attn.q_norm.weight", "self_attn.k_norm.weight",
                       "input_layernorm.weight", "post_attention_layernorm.weight", "mlp.down_proj.weight",
                       "mlp.gate.weight", "mlp.shared_experts.down_proj.weight"):
            box = plan.box(hp + suffix)
            if box is not None:
                put(hp + suffix, _check(_need(params, hp + suffix, rank, hp + suffix), box, hp + suffix, rank, hp + suffix))
        experts = plan.experts.get(L, [])
        if experts:
            base = next((hp + p for p in ("mlp.experts.", "mlp.experts.routed_experts.") if hp + p + "w13_weight" in params),
                        hp + "mlp.experts.")
            w13 = _need(params, base + "w13_weight", rank, "routed experts")
            w2 = _need(params, base + "w2_weight", rank, "routed experts")
            if w13.shape[0] != len(experts) or w2.shape[0] != len(experts):
                raise AdapterError(f"rank {rank}: '{base}w13_weight' holds {w13.shape[0]} experts; this rank's boxes name "
                                   f"{len(experts)} of layer {L} ({experts[:8]}...)", rank)
            for i, e in enumerate(experts):
                he = hp + f"mlp.experts.{e}."
                g, u, dn = plan.box(he + "gate_proj.weight"), plan.box(he + "up_proj.weight"), plan.box(he + "down_proj.weight")
                if g and u:
                    for hf, t in _split_rows(w13[i], (g, u), [he + "gate_proj.weight", he + "up_proj.weight"], rank,
                                             base + "w13_weight").items():
                        put(hf, t)
                if dn:
                    put(he + "down_proj.weight", _check(w2[i], dn, he + "down_proj.weight", rank, base + "w2_weight"))
    for hf in ("model.embed_tokens.weight", "lm_head.weight", "model.norm.weight"):
        box = plan.box(hf)
        if box is not None:
            t = _need(params, hf, rank, hf)
            put(hf, _check(t[:_rows(box)] if t.dim() == 2 else t, box, hf, rank, hf))  # vocabulary rows padded
    missing = set(plan.boxes) - set(out)
    if missing:
        raise AdapterError(f"rank {rank}: the adapter found no parameter for {len(missing)} destination tensors, e.g. "
                           f"{sorted(missing)[:3]}", rank)
    _unused(params, ignore, rank, "vLLM")

    def finish():
        for param_view, staged in pending:
            param_view.copy_(staged.to(param_view.dtype))

    return out, finish
