// Adapter-only refit (LoRA): the inventory of a model's LoRA adapters, which a scenario's `lora:`
// key moves in place of the weights.
//
// For every linear weight W [out, in] whose module name (the name's last component before
// `.weight`: q_proj, o_proj, gate_proj, ...) is a target module, two tensors:
//   A  base_model.model.<module>.lora_A.weight  [rank, in]
//   B  base_model.model.<module>.lora_B.weight  [out, rank]
// in the model's dtype, with W's class, layer and fused part (B only), and W's role kept as
// TensorInfo::base_role. Each factor's `role` is the split vLLM and SGLang give it
// (vllm/lora/layers: ColumnParallelLinearWithLoRA.slice_lora_a returns A whole, slice_lora_b takes
// B's rows as the base layer's -- per q/k/v slice, the KV heads replicated with the base's;
// RowParallelLinearWithLoRA splits A's input columns as the base's and keeps B whole;
// ReplicatedLinearWithLoRA keeps both whole):
//   W column-parallel:  A replicated, B column (fused as W)
//   W row-parallel:     A row,        B replicated
//   W replicated:       A replicated, B replicated
// Megatron-Bridge splits them otherwise (model/layout/src/layout_megatron.cpp). Routed experts, the
// embedding and head, DeltaNet and Mamba mixers and the vision tower are not adapted here: a
// target naming only such weights is refused, as is a target that names no weight at all.
#pragma once

#include "reshard/model/inventory.hpp"

namespace reshard::model {

// The adapters of `base` (its config, MTP layers and dtype); ids in the order of the weights they
// adapt, A before B. Throws ConfigError (key lora.*) on a rank below 1, an empty target list, or a
// target that adapts no weight.
Inventory lora_adapters(const Inventory& base, const LoraSpec& spec);

}  // namespace reshard::model
