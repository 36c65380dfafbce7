"""reshard.adapters against modules with the frameworks' names and shapes, built here from full HF
tensors with layouts written out independently (Megatron-Core's per-group interleaved linear_qkv and
[gate; up] linear_fc1, grouped and sequential experts, the FP32 router; vLLM's [q; k; v] qkv_proj,
[gate; up] gate_up_proj, FusedMoE w13/w2): every rank of small-moe-ep and small-gqa-megatron-vllm;
an FP32 router, EPLB's physical expert order (expert_order), FusedMoE under routed_experts., names
under two DDP wrappers, and a DeepSeek-shaped layer's shared expert.
The packages themselves (Megatron-LM, vLLM) cannot be installed here (docs/limitations.md).

    python3 python/test_adapters.py            (ctest: adapters, label python)
"""
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))  # framework_layouts: the frameworks' parameter layouts

import torch  # noqa: E402

from framework_layouts import cut, full_tensors, megatron_module, vllm_module  # noqa: E402
from reshard.adapters import AdapterError, megatron_sources, vllm_destinations  # noqa: E402
from reshard.torch import Refit  # noqa: E402


class Adapters(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.refits = {s: Refit(str(ROOT / "scenarios" / f"{s}.yaml"), strategy="direct")
                      for s in ("small-moe-ep", "small-gqa-megatron-vllm")}

    def test_megatron_parts_are_the_hf_boxes(self):
        for scenario, refit in self.refits.items():
            full = full_tensors(refit)
            for variant in ({"grouped": True, "layer_norm_fused": True}, {"grouped": False, "layer_norm_fused": False}):
                for rank in range(refit.world_size):
                    if not refit.source_boxes(rank):
                        continue
                    with self.subTest(scenario=scenario, rank=rank, **variant):
                        mod = megatron_module(refit, rank, full, **variant)
                        got = megatron_sources(refit, rank, mod.named_parameters())
                        self.assertEqual(set(got), set(refit.source_boxes(rank)))
                        for n, boxes in refit.source_boxes(rank).items():
                            self.assertTrue(torch.equal(got[n][0], cut(full[n], boxes[0])), n)
                            self.assertEqual(got[n][0].dtype, torch.bfloat16, n)

    def test_vllm_views_fill_the_fused_parameters(self):
        for scenario, refit in self.refits.items():
            full = full_tensors(refit, seed=11)
            for rank in range(refit.world_size):
                if not refit.destination_boxes(rank):
                    continue
                with self.subTest(scenario=scenario, rank=rank):
                    mod = vllm_module(refit, rank)  # zeros
                    dests, finish = vllm_destinations(refit, rank, mod.named_parameters())
                    for n, boxes in refit.destination_boxes(rank).items():  # what the refit writes
                        dests[n][0].copy_(cut(full[n], boxes[0]))
                    finish()
                    want = dict(vllm_module(refit, rank, full).named_parameters())
                    for name, param in mod.named_parameters():
                        self.assertTrue(torch.equal(param, want[name]), name)
                    # Views, not copies: the fused parameters' own memory.
                    qkv = [n for n, _ in mod.named_parameters() if n.endswith("qkv_proj.weight")]
                    if qkv:
                        q = qkv[0].replace("qkv_proj", "q_proj")
                        self.assertEqual(dests[q][0].data_ptr(), dict(mod.named_parameters())[qkv[0]].data_ptr())

    def test_a_missing_or_misshapen_parameter_is_named(self):
        refit = self.refits["small-gqa-megatron-vllm"]
        rank = next(r for r in range(refit.world_size) if refit.source_boxes(r))
        params = dict(megatron_module(refit, rank, full_tensors(refit)).named_parameters())
        qkv = next(n for n in params if n.endswith("linear_qkv.weight"))
        del params[qkv]
        with self.assertRaises(AdapterError) as e:
            megatron_sources(refit, rank, params.items())
        self.assertIn(qkv.replace("module.", ""), str(e.exception))
        params = dict(megatron_module(refit, rank, full_tensors(refit)).named_parameters())
        params[qkv] = torch.nn.Parameter(params[qkv][:-1], requires_grad=False)
        with self.assertRaises(AdapterError) as e:
            megatron_sources(refit, rank, params.items())
        self.assertIn("rows", str(e.exception))

    def test_fp32_router_is_received_in_the_plans_dtype_and_converted(self):
        # A vLLM router kept in FP32 (the plan's is BF16): the adapter hands the refit a BF16 staging
        # tensor, not the parameter, and finish() converts it into the parameter. An adapter that
        # skips the conversion (tried) fails: the refit would write BF16 bytes into FP32 memory.
        refit = self.refits["small-moe-ep"]
        full = full_tensors(refit, seed=5)
        rank = next(r for r in range(refit.world_size) if refit.destination_boxes(r))
        mod = vllm_module(refit, rank, router_dtype=torch.float32)
        params = dict(mod.named_parameters())
        gates = [n for n in params if n.endswith("mlp.gate.weight")]
        self.assertTrue(gates)
        dests, finish = vllm_destinations(refit, rank, mod.named_parameters())
        for n, boxes in refit.destination_boxes(rank).items():
            dests[n][0].copy_(cut(full[n], boxes[0]))
        for g in gates:
            self.assertEqual(dests[g][0].dtype, torch.bfloat16, g)
            self.assertNotEqual(dests[g][0].data_ptr(), params[g].data_ptr(), g)
        finish()
        for g in gates:
            self.assertEqual(params[g].dtype, torch.float32, g)
            self.assertTrue(torch.equal(params[g], cut(full[g], refit.destination_boxes(rank)[g][0]).float()), g)
        # The Megatron side's FP32 router (framework_layouts: always FP32) arrives as a BF16 copy.
        src = next(r for r in range(refit.world_size) if refit.source_boxes(r))
        got = megatron_sources(refit, src, megatron_module(refit, src, full).named_parameters())
        routers = [n for n in got if n.endswith("mlp.gate.weight")]
        self.assertTrue(routers)
        for n in routers:
            self.assertEqual(got[n][0].dtype, torch.bfloat16, n)
            self.assertTrue(torch.equal(got[n][0], cut(full[n], refit.source_boxes(src)[n][0])), n)

    def test_expert_order_places_each_physical_slot(self):
        # small-moe-ep serves 16 experts + 8 redundant (EPLB) over EP 8, linear: EP rank q holds the
        # slots [3q, 3q + 3), slot s holding expert s mod 16, in that order in w13/w2. The rank with
        # slots 15, 16, 17 holds experts 15, 0, 1: its FusedMoE rows are [15, 0, 1], not ascending.
        # With expert_order, or by default the plan's expert_slots, the adapter's views land on those
        # rows; with ascending ids expert 15's weights land in expert 0's rows.
        refit = self.refits["small-moe-ep"]
        full = full_tensors(refit, seed=3)
        wrapped = 0
        for rank in range(refit.world_size):
            boxes = refit.destination_boxes(rank)
            local = sorted({int(n.split(".")[5]) for n in boxes if n.startswith("model.layers.0.mlp.experts.")})
            if not local:
                continue
            q = next(q for q in range(8) if sorted({(3 * q + i) % 16 for i in range(3)}) == local)
            order = [(3 * q + i) % 16 for i in range(3)]
            with self.subTest(rank=rank, order=order):
                mod = vllm_module(refit, rank, expert_order=order)
                dests, finish = vllm_destinations(refit, rank, mod.named_parameters(), expert_order=order)
                for n, b in boxes.items():
                    dests[n][0].copy_(cut(full[n], b[0]))
                finish()
                want = dict(vllm_module(refit, rank, full, expert_order=order).named_parameters())
                for name, param in mod.named_parameters():
                    self.assertTrue(torch.equal(param, want[name]), name)
            if order != local:
                wrapped += 1
                for given, right in ((None, True), (local, False)):  # the plan's slots by default; ascending: wrong
                    mod = vllm_module(refit, rank, expert_order=order)
                    dests, _ = vllm_destinations(refit, rank, mod.named_parameters(), expert_order=given)
                    for n, b in boxes.items():
                        dests[n][0].copy_(cut(full[n], b[0]))
                    w13 = dict(mod.named_parameters())["model.layers.0.mlp.experts.w13_weight"]
                    self.assertEqual(torch.equal(w13, want["model.layers.0.mlp.experts.w13_weight"]), right, given)
        self.assertGreater(wrapped, 0)

    def test_routed_experts_prefix_and_doubly_wrapped_names(self):
        # vLLM's FusedMoE under mlp.experts.routed_experts. (the adapter looks there too), and
        # Megatron's names under DDP over Float16Module ("module.module."): an adapter that strips
        # one "module." (tried) or looks under mlp.experts. only (tried) fails.
        refit = self.refits["small-moe-ep"]
        full = full_tensors(refit, seed=13)
        for rank in range(refit.world_size):
            if refit.destination_boxes(rank):
                with self.subTest(side="vllm", rank=rank):
                    mod = vllm_module(refit, rank, experts="mlp.experts.routed_experts.")
                    self.assertTrue(any(".routed_experts.w13_weight" in n for n, _ in mod.named_parameters()))
                    dests, finish = vllm_destinations(refit, rank, mod.named_parameters())
                    for n, b in refit.destination_boxes(rank).items():
                        dests[n][0].copy_(cut(full[n], b[0]))
                    finish()
                    want = dict(vllm_module(refit, rank, full, experts="mlp.experts.routed_experts.").named_parameters())
                    for name, param in mod.named_parameters():
                        self.assertTrue(torch.equal(param, want[name]), name)
            if refit.source_boxes(rank):
                with self.subTest(side="megatron", rank=rank):
                    mod = megatron_module(refit, rank, full, wrap="module.module.")
                    got = megatron_sources(refit, rank, mod.named_parameters())
                    for n, boxes in refit.source_boxes(rank).items():
                        self.assertTrue(torch.equal(got[n][0], cut(full[n], boxes[0])), n)

    def test_shared_experts_of_a_deepseek_shaped_layer(self):
        # A small DeepSeek-V3 (8 experts, one shared expert of width 16, layer 0 dense), Megatron TP2
        # EP2 -> vLLM TP2 DP2 engines with EP: the shared expert's [gate; up] is Megatron's
        # shared_experts.linear_fc1 and vLLM's shared_experts.gate_up_proj, split over TP like a dense
        # FFN. MLA attention and the router's e_score_correction_bias, which the adapters do not map
        # (docs/limitations.md), are left out of the boxes the adapters see (WithoutUnmapped). An
        # adapter that maps the shared expert's gate/up to the routed FFN's names (tried) fails.
        with tempfile.TemporaryDirectory() as d:
            (Path(d) / "ds.yaml").write_text(DEEPSEEK)
            (Path(d) / "s.yaml").write_text(
                f"name: ds-shared\nmodel: ds.yaml\ntopology: {ROOT}/topologies/dgx-h100-2n.yaml\n"
                "source: {framework: megatron, tp: 2, ep: 2, etp: 1, gpus: 0-3}\n"
                "destination: {framework: vllm, tp: 2, dp: 2, enable_expert_parallel: true, gpus: 8-11}\n")
            refit = WithoutUnmapped(Refit(str(Path(d) / "s.yaml"), strategy="direct"))
        full = full_tensors(refit, seed=17)
        shared = 0
        for rank in range(refit.world_size):
            if refit.source_boxes(rank):
                with self.subTest(side="megatron", rank=rank):
                    got = megatron_sources(refit, rank, megatron_module(refit, rank, full).named_parameters())
                    self.assertEqual(set(got), set(refit.source_boxes(rank)))
                    for n, boxes in refit.source_boxes(rank).items():
                        self.assertTrue(torch.equal(got[n][0], cut(full[n], boxes[0])), n)
                        shared += "shared_experts" in n
            if refit.destination_boxes(rank):
                with self.subTest(side="vllm", rank=rank):
                    mod = vllm_module(refit, rank)
                    dests, finish = vllm_destinations(refit, rank, mod.named_parameters())
                    for n, boxes in refit.destination_boxes(rank).items():
                        dests[n][0].copy_(cut(full[n], boxes[0]))
                    finish()
                    want = dict(vllm_module(refit, rank, full).named_parameters())
                    for name, param in mod.named_parameters():
                        self.assertTrue(torch.equal(param, want[name]), name)
                    self.assertTrue(any("shared_experts.gate_up_proj" in n for n, _ in mod.named_parameters()))
        self.assertGreater(shared, 0)


# hidden 32, 3 layers (layer 0 dense, FFN 64), MLA, 8 experts of width 16, one shared expert.
DEEPSEEK = """name: ds
architecture: deepseek_v3
hidden_size: 32
num_hidden_layers: 3
num_attention_heads: 4
num_key_value_heads: 4
q_lora_rank: 16
kv_lora_rank: 16
qk_nope_head_dim: 8
qk_rope_head_dim: 4
v_head_dim: 8
intermediate_size: 64
moe_intermediate_size: 16
n_routed_experts: 8
n_shared_experts: 1
num_experts_per_tok: 2
first_k_dense_replace: 1
vocab_size: 128
tie_word_embeddings: false
"""


class WithoutUnmapped:
    """A Refit's plan seen without the tensors the adapters do not map (MLA attention, the router's
    e_score_correction_bias), for testing the rest of a DeepSeek-shaped layer."""

    def __init__(self, refit):
        self._refit = refit
        self._plan = refit._plan
        self.world_size = refit.world_size
        self.tensors = {n: t for n, t in refit.tensors.items() if self._mapped(n)}

    @staticmethod
    def _mapped(name):
        return ".self_attn." not in name and not name.endswith("e_score_correction_bias")

    def source_boxes(self, rank):
        return {n: b for n, b in self._refit.source_boxes(rank).items() if self._mapped(n)}

    def destination_boxes(self, rank):
        return {n: b for n, b in self._refit.destination_boxes(rank).items() if self._mapped(n)}


if __name__ == "__main__":
    unittest.main()
