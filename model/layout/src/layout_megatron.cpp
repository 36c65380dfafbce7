// Megatron-Core layout.
//
//   world = TP x CP x DP x PP, rank = tp + TP*(cp + CP*(dp + DP*pp))     (tp fastest, then cp, dp, pp)
//   Decoder layers are split contiguously into PP*VPP chunks; chunk c lives on stage c mod PP.
//   Megatron splits evenly (layers % (PP*VPP) == 0) and refuses anything else unless told the
//   counts: `layers_per_stage` (every chunk), or the first and/or last stage's count with the
//   stages between sharing the rest evenly (each stage's count divided evenly over its VPP chunks,
//   chunk v*PP + p holding stage p's v-th share). MTP layers follow the decoder layers on the last
//   chunk (Megatron builds the MTP block on the last pipeline stage). The embedding is on the first
//   stage, the final norm and lm_head on the last.
//   Dense tensors of stage s: TP-split by role, replicated over CP x DP:
//       ranks of TP index t = { s*G + t + TP*k : k < CP*DP },  G = TP*CP*DP.
//   Fused QKV (linear_qkv) with fewer KV heads than TP (KVH < TP, TP a multiple of KVH): Megatron
//   keeps linear_qkv a column-parallel layer over its per-query-group interleaved rows
//   [q of group g (np/KVH heads); k of g; v of g] for g < KVH, each rank holding 1/TP of them, and
//   all-gathers the outputs in the forward pass. So the TP/KVH ranks of group g = t / (TP/KVH) hold
//   consecutive slices of g's R = (np/KVH + 2)*hd rows: rank t holds group rows
//   [j*R/(TP/KVH), (j+1)*R/(TP/KVH)), j = t mod (TP/KVH), which fall in q, k and v of group g.
//   No KV head is replicated; a slice may cut a head.
//   Experts (MoE parallel folding): inside a stage the G ranks are re-read as ETP x EP x EDP
//   (etp fastest), G = ETP*EP*EDP, ETP = TP unless set. Expert e lives on EP rank e / (E/EP), split
//   over ETP by role, replicated over EDP:
//       ranks of ETP index j = { s*G + j + ETP*(e / (E/EP)) + ETP*EP*k : k < EDP }.
//   Vocabulary padded to a multiple of 128*TP (make-vocab-size-divisible-by 128) before the split.
//   LoRA adapters (model/lora.hpp): A split along the rank (along its input under a row-parallel
//   base), B along its output, over TP, replicated over CP x DP.
#include <algorithm>

#include "layout_builders.hpp"
#include "layout_yaml.hpp"
#include "reshard/model/scenario_keys.hpp"
#include "reshard/model/errors.hpp"

namespace reshard::model::layouts {

namespace {

// The chunk (virtual stage) of every layer: decoder layers by Megatron's rules, MTP layers last.
std::vector<std::int32_t> megatron_chunks(const Inventory& inv, const MegatronSpec& m, const std::string& name) {
  const std::int32_t layers = inv.decoder_layers();
  const std::int32_t chunks = m.pp * m.vpp;
  const bool first_last = m.first_stage_layers.has_value() || m.last_stage_layers.has_value();
  std::vector<std::int32_t> counts;
  if (!m.layers_per_stage.empty()) {
    if (first_last) throw PlanError(name + ": give layers_per_stage or first/last_stage_layers, not both");
    counts = m.layers_per_stage;
  } else if (first_last) {
    if (m.pp < 2) throw PlanError(name + ": first_stage_layers / last_stage_layers need PP of 2 or more");
    std::int64_t rest = layers;
    std::int32_t middle_stages = m.pp;
    for (const auto& given : {m.first_stage_layers, m.last_stage_layers})
      if (given) {
        if (*given < 0) throw PlanError(name + ": a stage cannot hold a negative number of layers");
        rest -= *given;
        --middle_stages;
      }
    if (rest < 0 || (middle_stages == 0 && rest != 0) || (middle_stages > 0 && rest % middle_stages != 0))
      throw PlanError(name + ": the " + std::to_string(rest) + " layers left after the first/last stage do not split " +
                      "evenly over the " + std::to_string(middle_stages) + " stages between (the model has " +
                      std::to_string(layers) + " decoder layers)");
    const std::int64_t middle = middle_stages > 0 ? rest / middle_stages : 0;
    std::vector<std::int64_t> stage(static_cast<std::size_t>(m.pp), middle);
    if (m.first_stage_layers) stage.front() = *m.first_stage_layers;
    if (m.last_stage_layers) stage.back() = *m.last_stage_layers;
    counts.assign(static_cast<std::size_t>(chunks), 0);
    for (std::int32_t p = 0; p < m.pp; ++p) {
      const auto n = stage[static_cast<std::size_t>(p)];
      if (n % m.vpp != 0)
        throw PlanError(name + ": stage " + std::to_string(p) + "'s " + std::to_string(n) +
                        " layers do not split evenly over VPP " + std::to_string(m.vpp));
      for (std::int32_t v = 0; v < m.vpp; ++v)
        counts[static_cast<std::size_t>(v * m.pp + p)] = static_cast<std::int32_t>(n / m.vpp);
    }
  } else if (m.pp > 1 && layers % chunks != 0) {
    throw PlanError(name + ": " + std::to_string(layers) + " decoder layers do not split evenly over PP*VPP = " +
                    std::to_string(chunks) + " (Megatron refuses an uneven split); give layers_per_stage, or " +
                    "first_stage_layers / last_stage_layers");
  }
  auto chunk_of_layer = split_layers(layers, chunks, counts, name);
  chunk_of_layer.insert(chunk_of_layer.end(), static_cast<std::size_t>(inv.mtp_layers()), chunks - 1);
  return chunk_of_layer;
}

// The boxes of q, k or v that TP rank r holds when the KV heads are fewer than TP (see the top).
Box qkv_slice(const TensorInfo& t, const ModelConfig& cfg, std::int32_t tp, std::int32_t r, const std::string& name) {
  const std::int64_t kvh = cfg.num_key_value_heads;
  const std::string what = name + ": '" + t.name + "'";
  if (tp % kvh != 0)
    throw PlanError(what + ": TP " + std::to_string(tp) + " is not a multiple of the " + std::to_string(kvh) +
                    " KV heads");
  if (cfg.num_attention_heads % tp != 0)
    throw PlanError(what + ": " + std::to_string(cfg.num_attention_heads) + " query heads are not divisible by TP " +
                    std::to_string(tp));
  const std::int64_t per_group = tp / kvh;  // ranks sharing one query group
  const std::int64_t hd = cfg.head_dim;
  // q rows of one group: its heads' q rows, or with an output gate their [q; gate] rows in the HF
  // per-head order (ms-swift's Megatron bridge, gpt_bridge.py: q_proj reshaped by query groups, q_dim
  // doubled under attention_output_gate, concatenated with k and v per group).
  const std::int64_t q_rows = cfg.num_attention_heads / kvh * cfg.q_head_rows();
  const std::int64_t group_rows = q_rows + 2 * hd;
  if (group_rows % per_group != 0)
    throw PlanError(what + ": linear_qkv's " + std::to_string(group_rows * kvh) + " rows are not divisible by TP " +
                    std::to_string(tp));
  const std::int64_t g = r / per_group, slice = group_rows / per_group;
  const std::int64_t lo = (r % per_group) * slice, hi = lo + slice;
  // The part's place inside the group's rows, and its rows per group in the tensor.
  std::int64_t part_lo = 0, part_rows = q_rows;
  if (t.fused == FusedPart::K) part_lo = q_rows, part_rows = hd;
  if (t.fused == FusedPart::V) part_lo = q_rows + hd, part_rows = hd;
  Box b = full_box(t);
  const std::int64_t a = std::clamp(lo - part_lo, std::int64_t{0}, part_rows);
  const std::int64_t z = std::clamp(hi - part_lo, std::int64_t{0}, part_rows);
  b.dims[0] = {g * part_rows + a, g * part_rows + z};
  return b;
}

}  // namespace

ShardMap build_megatron(const Inventory& inv, const MegatronSpec& m, const LayoutSpec& spec) {
  const auto& cfg = inv.config();
  const std::string name = spec.describe();
  const auto gpus = static_cast<std::int64_t>(spec.gpus.size());
  if (m.tp < 1 || m.pp < 1 || m.cp < 1 || m.ep < 1 || m.etp < 0 || m.vpp < 1 || m.dp < 0)
    throw PlanError(name + ": parallel sizes must be positive");
  const std::int32_t etp = m.expert_tp();
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
    if (G % (m.ep * etp) != 0)
      throw PlanError(name + ": EP*ETP = " + std::to_string(m.ep * etp) + " does not divide TP*CP*DP = " +
                      std::to_string(G) + (m.etp == 0 ? " (ETP defaults to TP; set etp)" : ""));
  }
  const std::int32_t edp = E > 0 ? G / (m.ep * etp) : 1;
  const auto chunk_of_layer = megatron_chunks(inv, m, name);

  const std::int64_t kvh = cfg.num_key_value_heads;
  ShardMap map(static_cast<std::int32_t>(inv.tensors().size()), spec.gpus, name);
  for (const auto& t : inv.tensors()) {
    std::int32_t stage;
    if (t.layer >= 0) stage = chunk_of_layer.at(static_cast<std::size_t>(t.layer)) % m.pp;
    else stage = t.pre_layers ? 0 : m.pp - 1;
    const Rank base = stage * G;
    const RankGrid::Axis replicas{static_cast<std::int32_t>(m.cp * dp), m.tp};
    std::int64_t heads = 0;
    const bool kv = t.fused == FusedPart::K || t.fused == FusedPart::V;
    if (kv) heads = kvh;
    else if (t.cls == TensorClass::Attention && t.role != ParallelRole::Replicated) heads = cfg.num_attention_heads;
    if (t.lora != LoraPart::None) {
      // Megatron-Bridge's ParallelLinearAdapter (peft/utils.py), one per Hugging Face module
      // (CanonicalLoRA): linear_in is a ColumnParallelLinear (gather_output) unless the base layer's
      // input is parallel, then a RowParallelLinear; linear_out a ColumnParallelLinear. So A [r, in]
      // splits along r (along in under a row-parallel base), B [out, r] along out, every TP rank a
      // contiguous part (no per-query-group interleave: the q, k and v adapters are apart).
      const bool by_input = t.lora == LoraPart::A && t.base_role == ParallelRole::RowParallel;
      const std::size_t dim = by_input ? 1 : 0;
      for (std::int32_t r = 0; r < m.tp; ++r) {
        Box b = full_box(t);
        const std::string what = t.lora == LoraPart::A && !by_input ? "LoRA rank" : "dim " + std::to_string(dim);
        b.dims[dim] = even_split(t.shape[dim], m.tp, r, name + ": '" + t.name + "' " + what);
        map.add_shard(t.id, std::move(b), map.intern(grid(base + r, {replicas})));
      }
      continue;
    }
    if (t.expert >= 0) {
      const auto ep_rank = static_cast<std::int32_t>(t.expert / (E / m.ep));
      if (t.role == ParallelRole::Replicated) {  // gpt-oss's down_proj_bias: linear_fc2's bias, whole on each ETP rank
        map.add_shard(t.id, full_box(t), map.intern(grid(base + etp * ep_rank, {{etp, 1}, {edp, etp * m.ep}})));
        continue;
      }
      for (std::int32_t j = 0; j < etp; ++j) {
        const auto set = map.intern(grid(base + j + etp * ep_rank, {{edp, etp * m.ep}}));
        for (auto& b : tp_slice(t, etp, j, 128LL * etp, 0, name)) map.add_shard(t.id, std::move(b), set);
      }
      continue;
    }
    if (t.role == ParallelRole::Replicated) {
      map.add_shard(t.id, full_box(t), map.intern(grid(base, {{G, 1}})));
      continue;
    }
    if ((kv || t.fused == FusedPart::Q) && kvh > 0 && kvh < m.tp) {
      for (std::int32_t r = 0; r < m.tp; ++r) {
        Box b = qkv_slice(t, cfg, m.tp, r, name);
        if (!b.empty()) map.add_shard(t.id, std::move(b), map.intern(grid(base + r, {replicas})));
      }
      continue;
    }
    for (std::int32_t r = 0; r < m.tp; ++r) {
      const auto set = map.intern(grid(base + r, {replicas}));
      for (auto& b : tp_slice(t, m.tp, r, 128LL * m.tp, heads, name)) map.add_shard(t.id, std::move(b), set);
    }
  }
  return map;
}

MegatronSpec read_megatron(const yaml::Node& n, std::int64_t count) {
  n.allow_only(scenario_keys("megatron"));
  MegatronSpec m;
  if (auto v = n.get("tp")) m.tp = small_int(*v);
  if (auto v = n.get("pp")) m.pp = small_int(*v);
  if (auto v = n.get("cp")) m.cp = small_int(*v);
  if (auto v = n.get("ep")) m.ep = small_int(*v);
  if (auto v = n.get("etp")) m.etp = small_int(*v);
  if (auto v = n.get("vpp")) m.vpp = small_int(*v);
  if (auto v = n.get("layers_per_stage"))
    for (auto x : v->items()) m.layers_per_stage.push_back(static_cast<std::int32_t>(x.integer_in(0, kMaxDimension)));
  if (auto v = n.get("first_stage_layers")) m.first_stage_layers = static_cast<std::int32_t>(v->integer_in(0, kMaxDimension));
  if (auto v = n.get("last_stage_layers")) m.last_stage_layers = static_cast<std::int32_t>(v->integer_in(0, kMaxDimension));
  if (!m.layers_per_stage.empty() && (m.first_stage_layers || m.last_stage_layers))
    n.at("layers_per_stage").fail("give either layers_per_stage or first_stage_layers / last_stage_layers");
  const std::int64_t tcp = static_cast<std::int64_t>(m.tp) * m.cp * m.pp;
  if (auto v = n.get("dp")) {
    m.dp = small_int(*v);
  } else {
    if (count % tcp != 0)
      n.fail(std::to_string(count) + " GPUs are not divisible by TP*CP*PP = " + std::to_string(tcp) +
             " (dp is derived from the GPU count)");
    m.dp = static_cast<std::int32_t>(count / tcp);
  }
  check_world(n, count, tcp * m.dp, "megatron TP*CP*PP*DP");
  return m;
}

}  // namespace reshard::model::layouts
