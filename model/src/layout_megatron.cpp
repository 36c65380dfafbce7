// Megatron-Core layout.
//
//   world = TP x CP x DP x PP, rank = tp + TP*(cp + CP*(dp + DP*pp))     (tp fastest, then cp, dp, pp)
//   Layers are split contiguously into PP*VPP chunks; chunk c lives on stage c mod PP. The embedding
//   is on the first stage, the final norm and lm_head on the last.
//   Dense tensors of stage s: TP-split by role, replicated over CP x DP:
//       ranks of TP index t = { s*G + t + TP*k : k < CP*DP },  G = TP*CP*DP.
//   Experts (MoE parallel folding): inside a stage the G ranks are re-read as ETP x EP x EDP
//   (etp fastest), G = ETP*EP*EDP. Expert e lives on EP rank e / (E/EP), split over ETP by role,
//   replicated over EDP:
//       ranks of ETP index j = { s*G + j + ETP*(e / (E/EP)) + ETP*EP*k : k < EDP }.
//   Vocabulary padded to a multiple of 128*TP (make-vocab-size-divisible-by 128) before the split.
#include "layout_builders.hpp"
#include "reshard/model/errors.hpp"

namespace reshard::model::layouts {

ShardMap build_megatron(const Inventory& inv, const MegatronSpec& m, const LayoutSpec& spec) {
  const auto& cfg = inv.config();
  const std::string name = spec.describe();
  const auto gpus = static_cast<std::int64_t>(spec.gpus.size());
  if (m.tp < 1 || m.pp < 1 || m.cp < 1 || m.ep < 1 || m.etp < 1 || m.vpp < 1 || m.dp < 0)
    throw PlanError(name + ": parallel sizes must be positive");
  std::int64_t dp = m.dp;
  const std::int64_t tcp = static_cast<std::int64_t>(m.tp) * m.cp * m.pp;
  if (dp == 0) {
    if (gpus % tcp != 0)
      throw PlanError(name + ": " + std::to_string(gpus) + " GPUs are not divisible by TP*CP*PP = " +
                      std::to_string(tcp));
    dp = gpus / tcp;
  }
  const std::int64_t world = tcp * dp;
  if (world != gpus)
    throw PlanError(name + ": the layout needs " + std::to_string(world) + " GPUs but its gpus list has " +
                    std::to_string(gpus));
  const auto G = static_cast<std::int32_t>(m.tp * m.cp * dp);
  const std::int64_t E = cfg.n_routed_experts;
  if (E > 0) {
    if (E % m.ep != 0)
      throw PlanError(name + ": " + std::to_string(E) + " experts are not divisible by EP " + std::to_string(m.ep));
    if (G % (m.ep * m.etp) != 0)
      throw PlanError(name + ": EP*ETP = " + std::to_string(m.ep * m.etp) + " does not divide TP*CP*DP = " +
                      std::to_string(G));
  }
  const std::int32_t edp = E > 0 ? G / (m.ep * m.etp) : 1;
  const std::int32_t chunks = m.pp * m.vpp;
  const auto chunk_of_layer = split_layers(inv.layer_count(), chunks, m.layers_per_stage, name);

  ShardMap map(static_cast<std::int32_t>(inv.tensors().size()), spec.gpus, name);
  for (const auto& t : inv.tensors()) {
    std::int32_t stage;
    if (t.layer >= 0) stage = chunk_of_layer.at(static_cast<std::size_t>(t.layer)) % m.pp;
    else stage = t.pre_layers ? 0 : m.pp - 1;
    const Rank base = stage * G;
    std::int64_t heads = 0;
    if (t.fused == FusedPart::K || t.fused == FusedPart::V) heads = cfg.num_key_value_heads;
    else if (t.cls == TensorClass::Attention && t.role != ParallelRole::Replicated) heads = cfg.num_attention_heads;
    if (t.expert >= 0) {
      const auto ep_rank = static_cast<std::int32_t>(t.expert / (E / m.ep));
      for (std::int32_t j = 0; j < m.etp; ++j) {
        const auto set = map.intern(grid(base + j + m.etp * ep_rank, {{edp, m.etp * m.ep}}));
        for (auto& b : tp_slice(t, m.etp, j, 128LL * m.etp, 0, name)) map.add_shard(t.id, std::move(b), set);
      }
      continue;
    }
    if (t.role == ParallelRole::Replicated) {
      map.add_shard(t.id, full_box(t), map.intern(grid(base, {{G, 1}})));
      continue;
    }
    for (std::int32_t r = 0; r < m.tp; ++r) {
      const auto set = map.intern(grid(base + r, {{static_cast<std::int32_t>(m.cp * dp), m.tp}}));
      for (auto& b : tp_slice(t, m.tp, r, 128LL * m.tp, heads, name)) map.add_shard(t.id, std::move(b), set);
    }
  }
  return map;
}

}  // namespace reshard::model::layouts
