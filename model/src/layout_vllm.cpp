// vLLM layout.
//
//   world = TP x PP x DP, rank = tp + TP*(pp + PP*dp): each DP replica is a contiguous block of
//   TP*PP GPUs. Layers split contiguously over PP as vLLM's get_pp_indices does (the remainder
//   layers go to the stages before the last); embedding on the first stage, norm and lm_head on
//   the last.
//   Dense tensors of stage p, TP index t: ranks { t + TP*p + TP*PP*d : d < DP }.
//   KV heads: with KVH >= TP they split evenly; with KVH < TP (TP a multiple of KVH) TP index t
//   holds KV head t / (TP/KVH), replicated over TP/KVH neighbours.
//   Experts, EP off: split over TP like dense FFN. EP on: the TP*DP ranks of a stage, numbered
//   i = t + TP*d, form TP*DP/EP expert groups of EP consecutive ranks (EP = TP*DP is one vLLM
//   instance with expert parallelism over all its GPUs; a smaller EP describes several such
//   instances side by side, each a whole copy of the experts; EP must be a multiple of TP). In each
//   group E + R physical slots (R redundant copies of experts 0..R-1, EPLB) spread evenly over the
//   EP ranks: slot s on EP rank q = s / ((E+R)/EP); each rank holds whole experts. The ranks holding
//   slot s are { q%TP + TP*p + TP*PP*(q/TP + (EP/TP)*k) : k < TP*DP/EP }.
//   Vocabulary padded to a multiple of 64 before the split (the padding rows exist only here).
#include "layout_builders.hpp"
#include "reshard/model/errors.hpp"

namespace reshard::model::layouts {

ShardMap build_vllm(const Inventory& inv, const VllmSpec& v, const LayoutSpec& spec) {
  const auto& cfg = inv.config();
  const std::string name = spec.describe();
  if (v.tp < 1 || v.pp < 1 || v.dp < 1 || v.ep < 0 || v.redundant_experts < 0)
    throw PlanError(name + ": parallel sizes must be positive");
  const std::int64_t world = static_cast<std::int64_t>(v.tp) * v.pp * v.dp;
  if (world != static_cast<std::int64_t>(spec.gpus.size()))
    throw PlanError(name + ": the layout needs " + std::to_string(world) + " GPUs but its gpus list has " +
                    std::to_string(spec.gpus.size()));
  const std::int64_t E = cfg.n_routed_experts;
  std::int64_t per_rank_slots = 0;
  if (v.ep > 0) {
    if ((v.tp * v.dp) % v.ep != 0 || v.ep % v.tp != 0)
      throw PlanError(name + ": ep " + std::to_string(v.ep) + " must divide TP*DP = " + std::to_string(v.tp * v.dp) +
                      " and be a multiple of TP " + std::to_string(v.tp));
    if ((E + v.redundant_experts) % v.ep != 0)
      throw PlanError(name + ": " + std::to_string(E + v.redundant_experts) +
                      " physical experts are not divisible by EP " + std::to_string(v.ep));
    if (v.redundant_experts > E) throw PlanError(name + ": more redundant experts than experts");
    per_rank_slots = (E + v.redundant_experts) / v.ep;
  } else if (v.redundant_experts > 0) {
    throw PlanError(name + ": redundant_experts needs expert parallelism (ep)");
  }
  // vLLM get_pp_indices: equal parts, the remainder to the stages before the last.
  const std::int32_t layers = inv.layer_count();
  std::vector<std::int32_t> counts(static_cast<std::size_t>(v.pp), layers / v.pp);
  if (v.pp > layers) throw PlanError(name + ": more pipeline stages than layers");
  for (std::int32_t i = 2; i < layers % v.pp + 2; ++i) counts[static_cast<std::size_t>(v.pp - i)] += 1;
  const auto stage_of_layer = split_layers(layers, v.pp, counts, name);

  const std::int64_t kvh = cfg.num_key_value_heads;
  ShardMap map(static_cast<std::int32_t>(inv.tensors().size()), spec.gpus, name);
  const RankGrid::Axis replicas{v.dp, v.tp * v.pp};
  for (const auto& t : inv.tensors()) {
    std::int32_t stage;
    if (t.layer >= 0) stage = stage_of_layer.at(static_cast<std::size_t>(t.layer));
    else stage = t.pre_layers ? 0 : v.pp - 1;
    const Rank base = v.tp * stage;
    if (t.expert >= 0 && v.ep > 0) {
      const std::int32_t groups = v.tp * v.dp / v.ep;
      for (std::int64_t s = t.expert; s < E + v.redundant_experts; s += E) {
        const auto q = static_cast<std::int32_t>(s / per_rank_slots);  // EP rank inside its group
        const Rank r = base + q % v.tp + v.tp * v.pp * (q / v.tp);
        map.add_shard(t.id, full_box(t), map.intern(grid(r, {{groups, v.pp * v.ep}})));
      }
      continue;
    }
    if (t.role == ParallelRole::Replicated) {
      map.add_shard(t.id, full_box(t), map.intern(grid(base, {{v.tp, 1}, replicas})));
      continue;
    }
    const bool kv = t.fused == FusedPart::K || t.fused == FusedPart::V;
    if (kv && kvh > 0 && kvh < v.tp) {
      if (v.tp % kvh != 0)
        throw PlanError(name + ": TP " + std::to_string(v.tp) + " is not a multiple of the " + std::to_string(kvh) +
                        " KV heads of '" + t.name + "'");
      const auto copies = static_cast<std::int32_t>(v.tp / kvh);
      const std::int64_t head_dim = t.shape[0] / kvh;
      for (std::int32_t h = 0; h < kvh; ++h) {
        Box b = full_box(t);
        b.dims[0] = {h * head_dim, (h + 1) * head_dim};
        map.add_shard(t.id, b, map.intern(grid(base + h * copies, {{copies, 1}, replicas})));
      }
      continue;
    }
    std::int64_t heads = 0;
    if (kv) heads = kvh;
    else if (t.cls == TensorClass::Attention) heads = cfg.num_attention_heads;
    for (std::int32_t r = 0; r < v.tp; ++r) {
      const auto set = map.intern(grid(base + r, {replicas}));
      for (auto& b : tp_slice(t, v.tp, r, 64, heads, name)) map.add_shard(t.id, std::move(b), set);
    }
  }
  return map;
}

}  // namespace reshard::model::layouts
