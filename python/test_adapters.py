"""reshard.adapters against modules with the frameworks' names and shapes, built here from full HF
tensors with layouts written out independently (Megatron-Core's per-group interleaved linear_qkv and
[gate; up] linear_fc1, grouped and sequential experts, the FP32 router; vLLM's [q; k; v] qkv_proj,
[gate; up] gate_up_proj, FusedMoE w13/w2): every rank of small-moe-ep and small-gqa-megatron-vllm.
The packages themselves (Megatron-LM, vLLM) cannot be installed here (docs/limitations.md).

    python3 python/test_adapters.py            (ctest: adapters, label python)
"""
import sys
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "python"))

import torch  # noqa: E402

from framework_fakes import cut, full_tensors, megatron_module, vllm_module  # noqa: E402
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


if __name__ == "__main__":
    unittest.main()
