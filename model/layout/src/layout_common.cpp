#include <algorithm>
#include <set>
#include <stdexcept>

#include "layout_builders.hpp"
#include "layout_yaml.hpp"
#include "reshard/model/layout_reader.hpp"
#include "reshard/model/errors.hpp"

namespace reshard::model::layouts {

Interval even_split(std::int64_t n, std::int32_t k, std::int32_t i, const std::string& what) {
  if (k <= 0 || n % k != 0)
    throw PlanError(what + ": size " + std::to_string(n) + " is not divisible by " + std::to_string(k));
  const std::int64_t c = n / k;
  return {i * c, (i + 1) * c};
}

Interval chunk_split(std::int64_t n, std::int32_t k, std::int32_t i) {
  const std::int64_t c = (n + k - 1) / k;
  return {std::min(n, i * c), std::min(n, (i + 1) * c)};
}

std::vector<Box> tp_slice(const TensorInfo& t, std::int32_t tp, std::int32_t r, std::int64_t vocab_pad,
                          std::int64_t heads, const std::string& layout) {
  Box full = full_box(t);
  const std::string what = layout + ": '" + t.name + "' " + to_string(t.role);
  if (tp == 1 || t.role == ParallelRole::Replicated) return {full};
  if (t.tp_groups > 0) heads = t.tp_groups;  // the inventory's indivisible groups (key heads, pairs)
  if (heads > 0 && heads % tp != 0)
    throw PlanError(what + ": " + std::to_string(heads) + " heads are not divisible by TP " + std::to_string(tp));
  switch (t.role) {
    case ParallelRole::ColumnParallel: {
      if (t.column_parts.empty()) {
        full.dims[0] = even_split(t.shape[0], tp, r, what + " dim 0");
        return {full};
      }
      std::vector<Box> out;
      std::int64_t offset = 0;
      for (std::size_t p = 0; p < t.column_parts.size(); ++p) {
        Interval part = even_split(t.column_parts[p], tp, r, what + " part " + std::to_string(p) + " of dim 0");
        Box b = full;
        b.dims[0] = {offset + part.lo, offset + part.hi};
        out.push_back(b);
        offset += t.column_parts[p];
      }
      return out;
    }
    case ParallelRole::RowParallel:
      if (t.shape.size() < 2) throw PlanError(what + ": a row-parallel tensor needs two dimensions");
      full.dims[1] = even_split(t.shape[1], tp, r, what + " dim 1");
      return {full};
    case ParallelRole::VocabParallel: {
      const std::int64_t v = t.shape[0];
      const std::int64_t padded = (v + vocab_pad - 1) / vocab_pad * vocab_pad;
      const Interval rows = even_split(padded, tp, r, what + " padded vocabulary");
      full.dims[0] = {std::min(v, rows.lo), std::min(v, rows.hi)};
      return {full};
    }
    case ParallelRole::Replicated: break;
  }
  return {full};
}

std::vector<std::int32_t> split_layers(std::int32_t layers, std::int32_t chunks,
                                       const std::vector<std::int32_t>& explicit_counts, const std::string& layout) {
  std::vector<std::int32_t> counts;
  if (!explicit_counts.empty()) {
    if (static_cast<std::int32_t>(explicit_counts.size()) != chunks)
      throw PlanError(layout + ": layers_per_stage lists " + std::to_string(explicit_counts.size()) +
                      " stages, the layout has " + std::to_string(chunks));
    std::int64_t sum = 0;
    for (auto c : explicit_counts) sum += c;
    if (sum != layers)
      throw PlanError(layout + ": layers_per_stage adds up to " + std::to_string(sum) + " layers, the model has " +
                      std::to_string(layers));
    counts = explicit_counts;
  } else {
    if (chunks > layers)
      throw PlanError(layout + ": " + std::to_string(chunks) + " pipeline stages for " + std::to_string(layers) +
                      " layers");
    for (std::int32_t c = 0; c < chunks; ++c) counts.push_back(layers / chunks + (c < layers % chunks ? 1 : 0));
  }
  std::vector<std::int32_t> chunk_of_layer;
  for (std::int32_t c = 0; c < chunks; ++c)
    for (std::int32_t i = 0; i < counts[static_cast<std::size_t>(c)]; ++i) chunk_of_layer.push_back(c);
  return chunk_of_layer;
}

std::int32_t expert_slot_rank(std::int64_t s, std::int64_t slots, std::int32_t ep, ExpertPlacement placement) {
  if (placement == ExpertPlacement::RoundRobin) return static_cast<std::int32_t>(s % ep);
  const std::int64_t b = slots / ep, m = slots % ep;  // the first m ranks hold b + 1 slots
  if (s < m * (b + 1)) return static_cast<std::int32_t>(s / (b + 1));
  return static_cast<std::int32_t>(m + (s - m * (b + 1)) / b);
}

void add_tp_shards(ShardMap& map, const Inventory& inv, const TensorInfo& t, std::int32_t tp, Rank base,
                   const std::vector<RankGrid::Axis>& replicas, const std::string& layout) {
  const auto& cfg = inv.config();
  auto with = [&](Rank start, std::vector<RankGrid::Axis> inner) {
    inner.insert(inner.end(), replicas.begin(), replicas.end());
    return map.intern(grid(start, std::move(inner)));
  };
  if (t.role == ParallelRole::Replicated) {
    map.add_shard(t.id, full_box(t), with(base, {{tp, 1}}));
    return;
  }
  const std::int64_t kvh = cfg.num_key_value_heads;
  const bool kv = t.fused == FusedPart::K || t.fused == FusedPart::V;
  if (kv && kvh > 0 && kvh < tp) {
    if (tp % kvh != 0)
      throw PlanError(layout + ": TP " + std::to_string(tp) + " is not a multiple of the " + std::to_string(kvh) +
                      " KV heads of '" + t.name + "'");
    const auto copies = static_cast<std::int32_t>(tp / kvh);
    const std::int64_t head_dim = t.shape[0] / kvh;
    for (std::int32_t h = 0; h < kvh; ++h) {
      Box b = full_box(t);
      b.dims[0] = {h * head_dim, (h + 1) * head_dim};
      map.add_shard(t.id, b, with(base + h * copies, {{copies, 1}}));
    }
    return;
  }
  std::int64_t heads = 0;
  if (kv) heads = kvh;
  else if (t.cls == TensorClass::Attention) heads = cfg.num_attention_heads;
  for (std::int32_t r = 0; r < tp; ++r) {
    const auto set = with(base + r, {});
    for (auto& b : tp_slice(t, tp, r, 64, heads, layout)) map.add_shard(t.id, std::move(b), set);
  }
}

// A gpt-oss expert tensor under MoE tensor parallelism over n ranks, rank f, as vLLM's
// GptOssModel._load_weights_other (BF16, block 1) and _load_weights_mxfp4 (MXFP4 experts, block 32),
// and SGLang's GptOssForCausalLM._load_mxfp4_experts_weights (block 32) slice the stacked checkpoint
// tensors: c = ceil(I / block / n) * block intermediate rows per rank,
// rank f holding [f*c, min((f+1)*c, I)) -- the last ranks may hold fewer, or none. gate_up and its
// bias take rows 2x that range (interleaved gate/up pairs), down the columns; down_proj_bias is
// loaded on rank 0 only ("only load on rank 0 to avoid duplication"; the others hold zeros, which a
// refit does not send). Empty when the rank holds none of it.
Box gpt_oss_moe_tp_box(const TensorInfo& t, std::int64_t I, std::int32_t n, std::int32_t f, std::int64_t block) {
  Box b = full_box(t);
  if (t.role == ParallelRole::Replicated) {  // down_proj_bias
    if (f != 0) b.dims[0] = {0, 0};
    return b;
  }
  const std::int64_t c = (I / block + n - 1) / n * block;
  const std::int64_t lo = std::min(I, f * c), hi = std::min(I, (f + 1) * c);
  if (t.role == ParallelRole::RowParallel) b.dims[1] = {lo, hi};
  else b.dims[0] = {2 * lo, 2 * hi};
  return b;
}

RankSet grid(Rank start, std::vector<RankGrid::Axis> axes) {
  std::erase_if(axes, [](const RankGrid::Axis& a) { return a.count == 1; });
  return RankSet({RankGrid{start, std::move(axes)}});
}

std::int32_t small_int(const yaml::Node& n) {
  const auto v = n.positive_integer();
  if (v > 1'000'000) n.fail("parallel size " + std::to_string(v) + " is implausibly large");
  return static_cast<std::int32_t>(v);
}

void check_world(const yaml::Node& n, std::int64_t count, std::int64_t world, const std::string& what) {
  if (world != count)
    n.fail(what + " needs " + std::to_string(world) + " GPUs, but gpus lists " + std::to_string(count));
}

}  // namespace reshard::model::layouts

namespace reshard::model {

LayoutSpec parse_layout(const yaml::Node& n) {
  LayoutSpec spec;
  const std::string fw = n.at("framework").str();
  std::vector<std::string> gpu_items;
  const auto gpus_node = n.at("gpus");
  for (const auto& item : gpus_node.items()) gpu_items.push_back(item.str());
  try {
    spec.gpus = parse_gpu_list(gpu_items);
  } catch (const std::invalid_argument& e) {
    gpus_node.fail(e.what());
  }
  {
    std::set<GpuId> seen;
    for (auto g : spec.gpus)
      if (!seen.insert(g).second) gpus_node.fail("GPU " + std::to_string(g) + " is listed twice");
  }
  const auto count = static_cast<std::int64_t>(spec.gpus.size());
  if (fw == "megatron") spec.spec = layouts::read_megatron(n, count);
  else if (fw == "vllm") spec.spec = layouts::read_vllm(n, count);
  else if (fw == "sglang") spec.spec = layouts::read_sglang(n, count);
  else if (fw == "dtensor") spec.spec = layouts::read_dtensor(n, count);
  else n.at("framework").fail("unknown framework '" + fw + "'; expected megatron, vllm, sglang or dtensor");
  return spec;
}

}  // namespace reshard::model
