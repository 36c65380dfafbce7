// Property test over random layout pairs: random small models (dense or MoE, GQA, uneven
// vocabularies, expert counts that EP does not divide; Qwen3, and the architectures with biases,
// sinks, gpt-oss's stacked experts, gated attention and gated DeltaNet layers, MLA with the DSA
// indexer and MTP layers, and Kimi K2.5's text_config nesting; a sixth of them moving only LoRA
// adapters), random Megatron (TP up to 8, ETP default or
// set, first/last stage sizes) / vLLM (engines or data parallel, EP on or off, linear or round-robin
// expert placement, redundant experts) / SGLang (with and without DP attention, EP, dense TP 1, DP
// lm_head, all-to-all backend) / DTensor layouts with random sizes, on random (disjoint or
// overlapping) GPU sets of a 16-GPU cluster. For every pair, checked element by element:
//   - each side's shards cover every tensor exactly once (each vLLM / SGLang convention above drawn
//     on at least 20 sides);
//   - on every Megatron rank, linear_qkv is that TP rank's slice of the per-query-group interleaved
//     rows, row by row, also with fewer KV heads than TP (at least 50 such sides);
//   - every destination rank receives every element it holds exactly once from the pieces;
//   - every holder of a piece really holds the piece's box;
//   - bytes_needed equals the destination's total held bytes;
//   - the lower bound is positive and finite when anything must move;
//   - a schedule of each strategy in turn (random parameters) validates and does not beat the bound.
// Then with random lost GPUs (RandomLostGpusReplanExactly): over the survivors (model/membership.hpp)
// every element some surviving source GPU holds reaches every destination rank of a still-served
// unit that holds it, exactly once, from surviving holders only; the ranks of a unit with a lost GPU
// receive nothing; the plan mapped from the full one equals a plan of the restricted layouts; a
// schedule over the survivors validates; and when a lost GPU was the last holder of some elements,
// the error names exactly the tensors and bytes of the elements no survivor holds.
// Then over random topologies (RandomTopologiesBoundNeverAboveAchievable): generated clusters of
// every template with random NIC speeds, host links (many NICs faster than their host link) and
// fabrics, and explicit clusters with 1:1 NICs, NICs shared behind PCIe switches, GPUs without NICs,
// PCIe-only GPUs and switches joined across nodes. For random layout pairs on each, the lower bound
// never exceeds the time of schedules constructed from the transfer set alone
// (tests/achievable_traffic.hpp), which do not depend on the strategies or the cost model; and a
// schedule of each strategy in turn validates and neither its estimate nor its simulation beats the
// bound.
#include <gtest/gtest.h>

#include <iostream>
#include <map>
#include <numeric>
#include <optional>
#include <random>

#include "reshard/model/errors.hpp"
#include "reshard/model/membership.hpp"
#include "reshard/model/cost.hpp"
#include "reshard/model/planner.hpp"
#include "reshard/model/strategies.hpp"
#include "reshard/sim/schedule_sim.hpp"
#include "achievable_traffic.hpp"

using namespace reshard::model;

namespace {

// A random small model: Qwen3 dense or MoE (half of them, as before), or one of the architectures
// with biases, sinks, stacked experts, gated attention and gated DeltaNet layers (qwen2, llama,
// glm4_moe, gpt_oss, qwen3_next, qwen3_5, qwen3_5_moe), or MLA with the DSA indexer (deepseek_v32)
// and Kimi K2.5 (a config.json: a DeepSeek-V3 text_config under a kimi_k25 wrapper, its tensors under
// language_model.model.), each with or without an MTP layer. YAML text, or JSON for kimi_k25 (read
// as a config.json: model_file).
std::string random_model(std::mt19937& rng) {
  auto pick = [&](std::initializer_list<int> v) { return *(v.begin() + std::uniform_int_distribution<int>(0, static_cast<int>(v.size()) - 1)(rng)); };
  auto flag = [&] { return std::string(rng() % 2 ? "true" : "false"); };
  const int heads = pick({2, 4, 8});
  int kv = pick({1, 2, 4, 8});
  while (heads % kv) kv /= 2;
  const int layers = pick({1, 2, 3, 4});
  static const char* const kArchitectures[] = {"qwen3", "qwen3_moe", "qwen3", "qwen3_moe", "qwen3", "qwen3_moe",
                                               "qwen2", "llama", "glm4_moe", "gpt_oss", "qwen3_next", "qwen3_5",
                                               "qwen3_5_moe", "deepseek_v32", "kimi_k25"};
  const std::string arch = kArchitectures[rng() % std::size(kArchitectures)];
  const std::string experts = std::to_string(pick({2, 3, 4, 6, 8}));
  if (arch == "deepseek_v32" || arch == "kimi_k25") {
    // MLA (q LoRA, kv LoRA, nope / rope / v head sizes), dense layers first, routed and shared
    // experts, an MTP layer or none; deepseek_v32 adds the indexer (index heads of index_head_dim).
    const bool json = arch == "kimi_k25";
    std::vector<std::pair<std::string, std::string>> f = {
        {"hidden_size", std::to_string(pick({8, 12, 16}))},
        {"num_hidden_layers", std::to_string(layers)},
        {"num_attention_heads", std::to_string(heads)},
        {"q_lora_rank", std::to_string(pick({json ? 0 : 4, 4, 6}))},
        {"kv_lora_rank", std::to_string(pick({2, 4}))},
        {"qk_nope_head_dim", std::to_string(pick({2, 4}))},
        {"qk_rope_head_dim", std::to_string(pick({1, 2}))},
        {"v_head_dim", std::to_string(pick({2, 3}))},
        {"intermediate_size", std::to_string(pick({8, 16}))},
        {"moe_intermediate_size", std::to_string(pick({4, 8}))},
        {"n_routed_experts", experts},
        {"n_shared_experts", std::to_string(pick({0, 1}))},
        {"num_experts_per_tok", "2"},
        {"first_k_dense_replace", std::to_string(std::uniform_int_distribution<int>(0, layers)(rng))},
        {"num_nextn_predict_layers", std::to_string(pick({0, 1}))},
        {"vocab_size", std::to_string(std::uniform_int_distribution<int>(5, 40)(rng))},
        {"tie_word_embeddings", rng() % 2 ? "true" : "false"}};
    if (!json) {
      f.insert(f.begin(), {{"name", "random"}, {"architecture", arch}});
      f.push_back({"index_n_heads", std::to_string(pick({1, 2, 4}))});
      f.push_back({"index_head_dim", std::to_string(pick({2, 4}))});
      std::string y;
      for (const auto& [k, v] : f) y += k + ": " + v + "\n";
      return y;
    }
    std::string t = R"({"model_type": "kimi_k25", "text_config": {"model_type": "kimi_k2")";
    for (const auto& [k, v] : f) t += ", \"" + k + "\": " + v;
    return t + R"(}, "vision_config": {"vt_hidden_size": 4, "vt_num_hidden_layers": 1}})";
  }
  std::string y = "name: random\narchitecture: " + arch + "\n";
  y += "hidden_size: " + std::to_string(pick({8, 12, 16})) + "\n";
  y += "num_hidden_layers: " + std::to_string(layers) + "\n";
  y += "num_attention_heads: " + std::to_string(heads) + "\n";
  y += "num_key_value_heads: " + std::to_string(kv) + "\n";
  y += "head_dim: " + std::to_string(pick({2, 4})) + "\n";
  y += "vocab_size: " + std::to_string(std::uniform_int_distribution<int>(5, 40)(rng)) + "\n";
  y += std::string("tie_word_embeddings: ") + (rng() % 2 ? "true" : "false") + "\n";
  if (arch == "llama") y += "attention_bias: " + flag() + "\nmlp_bias: " + flag() + "\n";
  if (arch == "glm4_moe" || arch == "gpt_oss") y += "attention_bias: " + flag() + "\n";
  if (arch == "qwen3_moe" || arch == "qwen3_next" || arch == "qwen3_5_moe") {
    y += "moe_intermediate_size: " + std::to_string(pick({4, 8, 12})) + "\n";
    y += "num_experts: " + experts + "\nnum_experts_per_tok: 2\n";
  } else if (arch == "glm4_moe") {
    y += "intermediate_size: " + std::to_string(pick({8, 16})) + "\nmoe_intermediate_size: " +
         std::to_string(pick({4, 8})) + "\nn_routed_experts: " + experts + "\nnum_experts_per_tok: 2\n";
    y += "n_shared_experts: " + std::to_string(pick({0, 1})) + "\nfirst_k_dense_replace: " +
         std::to_string(std::uniform_int_distribution<int>(0, layers)(rng)) + "\nuse_qk_norm: " + flag() + "\n";
  } else if (arch == "gpt_oss") {
    y += "intermediate_size: " + std::to_string(pick({4, 6, 8, 12})) + "\nnum_local_experts: " + experts +
         "\nnum_experts_per_tok: 2\n";
  } else {
    y += "intermediate_size: " + std::to_string(pick({8, 12, 16, 24})) + "\n";
  }
  if (arch == "qwen3_next" || arch == "qwen3_5" || arch == "qwen3_5_moe") {
    const int nk = pick({1, 2, 4, 8});
    y += "linear_num_key_heads: " + std::to_string(nk) + "\nlinear_num_value_heads: " +
         std::to_string(nk * pick({1, 2})) + "\nlinear_key_head_dim: " + std::to_string(pick({2, 4})) +
         "\nlinear_value_head_dim: " + std::to_string(pick({2, 3})) + "\nlinear_conv_kernel_dim: " +
         std::to_string(pick({2, 4})) + "\nlayer_types: [";
    for (int i = 0; i < layers; ++i) y += std::string(i ? ", " : "") + (rng() % 2 ? "linear_attention" : "full_attention");
    y += "]\n";
    if (arch != "qwen3_5") y += "shared_expert_intermediate_size: " + std::to_string(pick({4, 6})) + "\n";
  }
  return y;
}

// The file name random_model's text is read under: a config.json for JSON, else a models/*.yaml.
std::string model_file(const std::string& text) { return text.front() == '{' ? "random/config.json" : "random.yaml"; }

// n distinct GPUs out of the first `pool`.
std::vector<GpuId> random_gpus(std::mt19937& rng, int n, int pool = 16) {
  EXPECT_LE(n, pool);
  std::vector<GpuId> all(static_cast<std::size_t>(pool));
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(static_cast<std::size_t>(n));
  return all;
}

// A random layout on at most `pool` GPUs (the first `pool` of the topology). Megatron sizes reach
// TP 8 (more than the KV heads of most random models), ETP unset (= TP) or set, and, for a model
// of `layers` layers, sometimes a first/last stage size.
LayoutSpec random_layout(std::mt19937& rng, int pool = 16, int layers = 0) {
  auto pick = [&](std::initializer_list<int> v) { return *(v.begin() + std::uniform_int_distribution<int>(0, static_cast<int>(v.size()) - 1)(rng)); };
  switch (rng() % 4) {
    case 0: {
      MegatronSpec m;
      m.tp = pick({1, 2, 4, 8});
      m.pp = pick({1, 2});
      m.cp = pick({1, 1, 2});
      m.dp = pick({1, 2});
      m.ep = pick({1, 2, 4});
      m.etp = pick({0, 1, 1, 2});
      m.vpp = pick({1, 1, 2});
      if (layers > 0 && m.pp > 1 && rng() % 3 == 0) {
        const int first = std::uniform_int_distribution<int>(0, layers)(rng);
        if (rng() % 2) m.first_stage_layers = first;
        else m.last_stage_layers = first;
      }
      const int world = m.tp * m.pp * m.cp * m.dp;
      return {m, random_gpus(rng, std::min(world, pool), pool)};
    }
    case 1: {
      VllmSpec v{.tp = pick({1, 2, 4, 8}), .pp = pick({1, 1, 2}), .dp = pick({1, 2, 3})};
      if (rng() % 2) {
        v.dp_mode = VllmDpMode::DataParallel;
        v.enable_expert_parallel = rng() % 2;
      } else if (rng() % 3 == 0) {
        v.enable_expert_parallel = true;  // EP = TP per engine
      } else if (rng() % 2) {
        v.ep = v.tp * pick({1, v.dp});
      }
      if (v.expert_parallel_size() > 0) {
        if (rng() % 3 == 0) v.expert_placement = ExpertPlacement::RoundRobin;
        else if (rng() % 2) v.redundant_experts = pick({1, 2, 4});
      }
      return {v, random_gpus(rng, std::min(v.tp * v.pp * v.dp, pool), pool)};
    }
    case 2: {
      SglangSpec g{.tp = pick({1, 2, 4, 8}), .dp = pick({1, 2, 4}), .enable_dp_attention = rng() % 2 == 1};
      g.ep = pick({1, 1, 2, 4, 8});
      if (rng() % 4 == 0) g.moe_dense_tp = 1;
      if (g.enable_dp_attention && rng() % 2) g.enable_dp_lm_head = true;
      if (rng() % 4 == 0) {
        g.a2a_moe = true;
        g.ep = g.tp;
      }
      if (g.ep > 1 && rng() % 3 == 0) g.redundant_experts = pick({1, 2, 4});
      return {g, random_gpus(rng, std::min(g.world(), pool), pool)};
    }
    default: {
      DTensorSpec d;
      const int ndim = pick({1, 2, 3});
      int world = 1;
      do {  // a mesh that fits the pool
        d.mesh_shape.clear();
        world = 1;
        for (int i = 0; i < ndim; ++i) {
          d.mesh_shape.push_back(pick({1, 2, 3}));
          world *= d.mesh_shape.back();
        }
      } while (world > pool);
      auto random_placements = [&](int max_dim) {
        std::vector<Placement> p;
        for (int i = 0; i < ndim; ++i)
          p.push_back(rng() % 3 == 0 ? Placement{} : Placement{Placement::Kind::Shard, std::uniform_int_distribution<int>(0, max_dim)(rng)});
        return p;
      };
      d.placements.push_back({"*norm*", std::vector<Placement>(static_cast<std::size_t>(ndim))});
      d.placements.insert(d.placements.begin(), {"default", random_placements(0)});
      d.placements.push_back({"*proj.weight", random_placements(1)});
      return {d, random_gpus(rng, world, pool)};
    }
  }
}

// The vLLM and SGLang conventions a valid side exercises, counted by name.
void count_conventions(const Inventory& inv, const LayoutSpec& spec, std::map<std::string, int>& n) {
  const std::int64_t E = inv.config().n_routed_experts;
  if (const auto* v = std::get_if<VllmSpec>(&spec.spec)) {
    const auto ep = v->expert_parallel_size();
    if (v->dp_mode == VllmDpMode::DataParallel && v->dp > 1 && E > 0) ++n[ep > 0 ? "vllm dp+ep" : "vllm dp moe-tp"];
    if (v->dp_mode == VllmDpMode::Engines && v->ep == 0 && ep > 0 && E > 0) ++n["vllm engines enable_ep"];
    if (ep > 0 && E > 0 && (E + v->redundant_experts) % ep != 0) ++n["uneven expert map"];
    // Qwen3-MoE has no expert groups: vLLM (and reshard) fall back to linear (tests/test_layout.cpp
    // covers round-robin applied).
    if (ep > 0 && E > 0 && v->expert_placement == ExpertPlacement::RoundRobin) ++n["round robin asked"];
  } else if (const auto* g = std::get_if<SglangSpec>(&spec.spec)) {
    ++n[g->enable_dp_attention && g->dp > 1 ? "sglang dp-attention" : "sglang plain"];
    if (g->ep > 1 && E > 0) ++n["sglang ep"];
  }
}

// Calls f(row-major index) for every element of `box` in a tensor of `shape` (any rank).
template <class F>
void for_each_element(const std::vector<std::int64_t>& shape, const Box& box, F&& f) {
  if (box.empty()) return;
  std::vector<std::int64_t> at;
  for (const auto& d : box.dims) at.push_back(d.lo);
  for (;;) {
    std::int64_t index = 0;
    for (std::size_t k = 0; k < shape.size(); ++k) index = index * shape[k] + at[k];
    f(index);
    std::size_t k = shape.size();
    while (k > 0) {
      --k;
      if (++at[k] < box.dims[k].hi) break;
      at[k] = box.dims[k].lo;
      if (k == 0) return;
    }
  }
}

// For one side: count, element by element, how often the shards cover each tensor element.
void expect_exact_cover(const Inventory& inv, const ShardMap& m) {
  for (const auto& t : inv.tensors()) {
    std::vector<int> count(static_cast<std::size_t>(full_box(t).elements()), 0);
    for (const auto& s : m.shards(t.id)) for_each_element(t.shape, s.box, [&](std::int64_t e) { ++count[static_cast<std::size_t>(e)]; });
    for (std::size_t e = 0; e < count.size(); ++e)
      ASSERT_EQ(count[e], 1) << m.description() << " " << t.name << " element " << e;
  }
}

// Megatron's linear_qkv is one column-parallel layer over the per-query-group interleaved rows
// [q_g; k_g; v_g for g < KVH] (N rows): TP rank t holds rows [t*N/TP, (t+1)*N/TP), in order, with
// any TP, also above the KV head count. Checked row by row on every rank's local buffers (columns
// whole). Returns 1 when the layout has fewer KV heads than TP.
int expect_megatron_qkv_rows(const Inventory& inv, const LayoutSpec& spec, const ShardMap& map) {
  const auto* m = std::get_if<MegatronSpec>(&spec.spec);
  const auto& c = inv.config();
  if (!m || c.kv_lora_rank > 0) return 0;  // MLA has no linear_qkv
  const std::int64_t kvh = c.num_key_value_heads, hd = c.head_dim;
  // q rows of a group: its heads' rows of q_proj ([q; gate] per head with an output gate).
  const std::int64_t q_rows = c.num_attention_heads / kvh * c.q_head_rows(), group = q_rows + 2 * hd, n = kvh * group;
  for (Rank r = 0; r < map.world_size(); ++r)
    for (const auto& b : local_buffers(inv, spec, map, r)) {
      if (b.name.find(".linear_qkv.") == std::string::npos) continue;
      std::vector<std::int64_t> rows;
      for (const auto& seg : b.segments) {
        const auto& t = inv.tensor(seg.tensor);
        if (t.shape.size() > 1) {  // a bias has one dim
          EXPECT_EQ(seg.box.dims[1].size(), t.shape[1]) << b.name;
        }
        for (auto i = seg.box.dims[0].lo; i < seg.box.dims[0].hi; ++i) {
          if (t.fused == FusedPart::Q) rows.push_back(i / q_rows * group + i % q_rows);
          else if (t.fused == FusedPart::K) rows.push_back(i / hd * group + q_rows + i % hd);
          else rows.push_back(i / hd * group + q_rows + hd + i % hd);
        }
      }
      const std::int64_t per_rank = n / m->tp, first = (r % m->tp) * per_rank;
      EXPECT_EQ(static_cast<std::int64_t>(rows.size()), per_rank) << b.name << " rank " << r;
      for (std::size_t k = 0; k < rows.size(); ++k)
        if (rows[k] != first + static_cast<std::int64_t>(k)) {
          ADD_FAILURE() << b.name << " rank " << r << " row " << k << " is interleaved row " << rows[k]
                        << ", expected " << first + static_cast<std::int64_t>(k);
          break;
        }
    }
  return m->tp > kvh ? 1 : 0;
}

}  // namespace

TEST(PlannerProperty, RandomLayoutPairsAreExact) {
  std::mt19937 rng(20261129);
  const auto topo = Topology::load(std::string(RESHARD_SOURCE_DIR) + "/topologies/dgx-h100-2n.yaml");
  int pairs = 0, attempts = 0;
  int tp_over_kv_heads = 0;         // Megatron sides with fewer KV heads than TP
  std::map<std::string, int> seen;  // framework pairs covered
  std::map<std::string, int> conventions;  // vLLM / SGLang conventions drawn (count_conventions)
  std::map<std::string, int> architectures;  // valid pairs per architecture
  int gated_tp_over_kv = 0;                  // Megatron sides slicing a gated attention's query group
  int lora_pairs = 0;  // adapter-only refits (LoRA on the attention, and the MLP of dense models)
  int mtp_pairs = 0;   // MLA models with their MTP layer (Megatron: on the last stage)
  while (pairs < 1000) {
    ASSERT_LT(++attempts, 200000) << "too few valid random layouts";
    InventoryOptions options;
    const std::string text = random_model(rng);
    const bool mla = text.find("kv_lora_rank") != std::string::npos;
    options.include_mtp = mla;
    if (rng() % 6 == 0) {
      LoraSpec l;
      l.rank = std::uniform_int_distribution<int>(1, 3)(rng) * 2;
      l.target_modules = {"q_proj", "v_proj", "o_proj"};
      if (mla) l.target_modules = {"kv_a_proj_with_mqa", "kv_b_proj", "o_proj"};  // replicated, column, row
      if (text.find("intermediate_size") != std::string::npos && text.find("moe_intermediate_size") == std::string::npos &&
          text.find("gpt_oss") == std::string::npos)
        l.target_modules.insert(l.target_modules.end(), {"gate_proj", "up_proj", "down_proj"});
      options.lora = l;
    }
    std::optional<Inventory> parsed;
    try {
      parsed.emplace(Inventory::parse(text, model_file(text), options));
    } catch (const ConfigError&) {  // adapters that adapt nothing (a hybrid of DeltaNet layers only)
      continue;
    }
    const Inventory& inv = *parsed;
    const int layers = inv.decoder_layers();
    const LayoutSpec a = random_layout(rng, 16, layers), b = random_layout(rng, 16, layers);
    ShardMap src = [&] {
      try {
        return build_shard_map(inv, a);
      } catch (const PlanError&) {
        return ShardMap(0, {}, "");
      }
    }();
    if (src.tensor_count() == 0) continue;
    ShardMap dst = [&] {
      try {
        return build_shard_map(inv, b);
      } catch (const PlanError&) {
        return ShardMap(0, {}, "");
      }
    }();
    if (dst.tensor_count() == 0) continue;
    ++pairs;
    ++seen[a.framework() + "->" + b.framework()];
    count_conventions(inv, a, conventions);
    count_conventions(inv, b, conventions);
    SCOPED_TRACE(a.describe() + " -> " + b.describe());
    expect_exact_cover(inv, src);
    expect_exact_cover(inv, dst);
    const int sliced = expect_megatron_qkv_rows(inv, a, src) + expect_megatron_qkv_rows(inv, b, dst);
    tp_over_kv_heads += sliced;
    if (inv.config().gated_attention()) gated_tp_over_kv += sliced;
    const bool kimi = inv.config().model_prefix.rfind("language_model.", 0) == 0;  // under text_config
    ++architectures[kimi ? "kimi_k25" : inv.config().architecture];
    lora_pairs += inv.lora() != nullptr;
    mtp_pairs += inv.mtp_layers() > 0;

    const TransferSet ts = plan(inv, src, dst);
    // Every destination rank receives each of its elements exactly once.
    for (const auto& t : inv.tensors()) {
      for (Rank r = 0; r < dst.world_size(); ++r) {
        std::vector<int> count(static_cast<std::size_t>(full_box(t).elements()), 0);
        auto add = [&](const Box& box, int d) {
          for_each_element(t.shape, box, [&](std::int64_t e) { count[static_cast<std::size_t>(e)] += d; });
        };
        for (const auto& s : dst.shards(t.id))
          if (dst.rank_set(s.ranks).contains(r)) add(s.box, -1);
        for (const auto& p : ts.pieces)
          if (p.tensor == t.id && dst.rank_set(p.needers).contains(r)) add(p.box, +1);
        for (auto c : count) ASSERT_EQ(c, 0) << t.name << " destination rank " << r;
      }
    }
    // Every holder holds its piece.
    for (const auto& p : ts.pieces)
      for (Rank h : src.rank_set(p.holders).to_vector()) {
        bool held = false;
        for (const auto& s : src.shards(p.tensor))
          if (src.rank_set(s.ranks).contains(h) && intersect(s.box, p.box) == p.box) held = true;
        ASSERT_TRUE(held) << inv.tensor(p.tensor).name << " " << to_string(p.box) << " rank " << h;
      }
    EXPECT_EQ(ts.bytes_needed, dst.total_bytes_held(inv));
    const LowerBound lb = lower_bound(ts, src, dst, topo);
    if (ts.bytes_to_move.value > 0) {
      EXPECT_GT(lb.time.value, 0);
      EXPECT_TRUE(std::isfinite(lb.time.value));
    }
    // A schedule of every strategy in turn, with random parameters, validates and never beats the
    // lower bound.
    StrategyParams sp;
    sp.strategy = all_strategies()[static_cast<std::size_t>(pairs) % all_strategies().size()];
    sp.chunk = Bytes{std::int64_t{1024} << (rng() % 12)};
    sp.channels = static_cast<std::int32_t>(rng() % 3);
    sp.max_chain = 1 + static_cast<std::int32_t>(rng() % 3);
    sp.relay_ingress = rng() % 2;
    sp.relay_egress = rng() % 2;
    sp.bucket = Bytes{256 + static_cast<std::int64_t>(rng() % 4096)};
    const Schedule sched = build_schedule(ts, inv, src, dst, topo, sp);
    ASSERT_NO_THROW(validate(sched, ts, inv, src, dst)) << sp.strategy;
    const auto pred = estimate(sched, ts, inv, topo, CostParams::profile_named("links"));
    EXPECT_GE(pred.time.value, lb.time.value * (1 - 1e-9)) << sp.strategy;
  }
  // The random pairs cover every framework combination, Megatron with fewer KV heads than TP, and
  // each vLLM / SGLang convention.
  EXPECT_EQ(seen.size(), 16u);
  EXPECT_GE(tp_over_kv_heads, 50);
  for (const char* c : {"vllm dp+ep", "vllm dp moe-tp", "vllm engines enable_ep", "uneven expert map", "round robin asked",
                        "sglang dp-attention", "sglang plain", "sglang ep"})
    EXPECT_GE(conventions[c], 20) << c;
  // Every architecture of random_model, and gated attention sliced inside a query group.
  for (const char* arch : {"qwen3", "qwen3_moe", "qwen2", "llama", "glm4_moe", "gpt_oss", "qwen3_next", "qwen3_5",
                           "qwen3_5_moe", "deepseek_v32", "kimi_k25"})
    EXPECT_GE(architectures[arch], 20) << arch;
  EXPECT_GE(gated_tp_over_kv, 5);
  EXPECT_GE(lora_pairs, 50);
  EXPECT_GE(mtp_pairs, 20);
  std::cout << pairs << " layout pairs:";
  for (const auto& [arch, n] : architectures) std::cout << " " << arch << " " << n;
  std::cout << "; " << lora_pairs << " LoRA, " << mtp_pairs << " with an MTP layer\n";
}

TEST(PlannerProperty, RandomLostGpusReplanExactly) {
  std::mt19937 rng(20261208);
  const auto topo = Topology::load(std::string(RESHARD_SOURCE_DIR) + "/topologies/dgx-h100-2n.yaml");
  int replanned = 0, unheld = 0, all_lost = 0, attempts = 0, from_replica = 0, units_dropped = 0;
  while (replanned < 1000) {
    ASSERT_LT(++attempts, 200000) << "too few valid random layouts";
    const std::string text = random_model(rng);
    InventoryOptions options;
    options.include_mtp = text.find("kv_lora_rank") != std::string::npos;
    const Inventory inv = Inventory::parse(text, model_file(text), options);
    LoadedScenario sc{Scenario{}, inv, topo, ShardMap(0, {}, ""), ShardMap(0, {}, ""), {}};
    sc.scenario.source = random_layout(rng, 16, inv.decoder_layers());
    sc.scenario.destination = random_layout(rng, 16, inv.decoder_layers());
    try {
      sc.source = build_shard_map(inv, sc.scenario.source);
      sc.destination = build_shard_map(inv, sc.scenario.destination);
    } catch (const PlanError&) {
      continue;
    }
    const ShardMap& src = sc.source;
    const ShardMap& dst = sc.destination;
    // 1 to 3 lost GPUs of either side.
    std::vector<GpuId> pool = src.gpus();
    pool.insert(pool.end(), dst.gpus().begin(), dst.gpus().end());
    std::sort(pool.begin(), pool.end());
    pool.erase(std::unique(pool.begin(), pool.end()), pool.end());
    std::shuffle(pool.begin(), pool.end(), rng);
    pool.resize(std::min<std::size_t>(pool.size(), 1 + rng() % 3));
    const std::vector<GpuId> lost = pool;
    auto is_lost = [&](GpuId g) { return std::find(lost.begin(), lost.end(), g) != lost.end(); };
    SCOPED_TRACE(sc.scenario.source.describe() + " -> " + sc.scenario.destination.describe() + " without " + gpu_ranges(lost));

    // The oracle, rank by rank and element by element. A destination unit is out when one of its
    // ranks' GPUs is lost.
    const std::int32_t unit = serving_unit_ranks(sc.scenario.destination, dst.world_size());
    std::vector<bool> served(static_cast<std::size_t>(dst.world_size()), true);
    bool any_served = false;
    for (Rank u0 = 0; u0 < dst.world_size(); u0 += unit) {
      bool whole = true;
      for (Rank r = u0; r < std::min(u0 + unit, dst.world_size()); ++r) whole = whole && !is_lost(dst.gpu_of(r));
      for (Rank r = u0; r < std::min(u0 + unit, dst.world_size()); ++r) served[static_cast<std::size_t>(r)] = whole;
      any_served = any_served || whole;
    }
    if (!any_served) {
      ++all_lost;
      try {
        survivors(sc, lost);
        ADD_FAILURE() << "every unit lost, no error";
      } catch (const UnheldError&) {
        ADD_FAILURE() << "every unit lost: expected the error about the units";
      } catch (const PlanError& e) {
        EXPECT_NE(std::string(e.what()).find("--without"), std::string::npos) << e.what();
      }
      continue;
    }
    // Bytes of each tensor no surviving source rank holds.
    std::vector<UnheldTensor> expect_unheld;
    for (const auto& t : inv.tensors()) {
      std::vector<char> held(static_cast<std::size_t>(full_box(t).elements()), 0);
      for (const auto& sh : src.shards(t.id)) {
        bool alive = false;
        for (Rank r : src.rank_set(sh.ranks).to_vector()) alive = alive || !is_lost(src.gpu_of(r));
        if (alive) for_each_element(t.shape, sh.box, [&](std::int64_t e) { held[static_cast<std::size_t>(e)] = 1; });
      }
      const auto missing = std::count(held.begin(), held.end(), 0);
      if (missing) expect_unheld.push_back({t.id, t.name, Bytes{missing * dtype_size(t.dtype)}});
    }
    if (!expect_unheld.empty()) {
      ++unheld;
      try {
        survivors(sc, lost);
        ADD_FAILURE() << "elements no survivor holds, no error";
      } catch (const UnheldError& e) {
        ASSERT_EQ(e.tensors().size(), expect_unheld.size());
        Bytes total{0};
        for (std::size_t i = 0; i < expect_unheld.size(); ++i) {
          EXPECT_EQ(e.tensors()[i].tensor, expect_unheld[i].tensor);
          EXPECT_EQ(e.tensors()[i].bytes, expect_unheld[i].bytes) << expect_unheld[i].name;
          total += expect_unheld[i].bytes;
        }
        EXPECT_EQ(e.total(), total);
        EXPECT_NE(std::string(e.what()).find(expect_unheld[0].name), std::string::npos) << e.what();
      }
      continue;
    }
    ++replanned;
    const Survivors s = survivors(sc, lost);
    units_dropped += !s.change.dropped.empty();
    from_replica += !s.change.lost_source.empty();
    const TransferSet full = plan(inv, src, dst);
    const TransferSet ts = restrict_transfers(full, s.source_sets, s.destination_sets, inv, s.source, s.destination);
    // The full plan mapped onto the survivors is the plan of the survivors' layouts.
    const TransferSet fresh = plan(inv, s.source, s.destination);
    ASSERT_EQ(ts.pieces.size(), fresh.pieces.size());
    for (std::size_t i = 0; i < ts.pieces.size(); ++i) {
      const Piece &a = ts.pieces[i], &b = fresh.pieces[i];
      ASSERT_TRUE(a.tensor == b.tensor && a.box == b.box && a.holders == b.holders && a.needers == b.needers && a.bytes == b.bytes)
          << "piece " << i;
    }
    EXPECT_EQ(ts.bytes_needed, fresh.bytes_needed);
    EXPECT_EQ(ts.bytes_to_move, fresh.bytes_to_move);
    // Every served destination rank receives each element it holds exactly once; the others nothing.
    Bytes needed{0};
    const std::vector<Bytes> held_by = dst.bytes_per_rank(inv);
    for (Rank r = 0; r < dst.world_size(); ++r)
      if (served[static_cast<std::size_t>(r)]) needed += held_by[static_cast<std::size_t>(r)];
    EXPECT_EQ(ts.bytes_needed, needed);
    for (const auto& t : inv.tensors())
      for (Rank r = 0; r < dst.world_size(); ++r) {
        std::vector<int> count(static_cast<std::size_t>(full_box(t).elements()), 0);
        auto add = [&](const Box& box, int d) {
          for_each_element(t.shape, box, [&](std::int64_t e) { count[static_cast<std::size_t>(e)] += d; });
        };
        if (served[static_cast<std::size_t>(r)])
          for (const auto& sh : dst.shards(t.id))
            if (dst.rank_set(sh.ranks).contains(r)) add(sh.box, -1);
        for (const auto& p : ts.pieces)
          if (p.tensor == t.id && s.destination.rank_set(p.needers).contains(r)) add(p.box, +1);
        for (auto c : count) ASSERT_EQ(c, 0) << t.name << " destination rank " << r;
      }
    // Every holder survives and holds its piece.
    for (const auto& p : ts.pieces)
      for (Rank h : s.source.rank_set(p.holders).to_vector()) {
        ASSERT_FALSE(is_lost(src.gpu_of(h))) << "rank " << h;
        bool held = false;
        for (const auto& sh : src.shards(p.tensor))
          if (src.rank_set(sh.ranks).contains(h) && intersect(sh.box, p.box) == p.box) held = true;
        ASSERT_TRUE(held) << inv.tensor(p.tensor).name << " " << to_string(p.box) << " rank " << h;
      }
    // A schedule over the survivors (each strategy in turn) moves every piece to each needer once.
    StrategyParams sp;
    sp.strategy = all_strategies()[static_cast<std::size_t>(replanned) % all_strategies().size()];
    const Schedule sched = build_schedule(ts, inv, s.source, s.destination, topo, sp);
    ASSERT_NO_THROW(validate(sched, ts, inv, s.source, s.destination)) << sp.strategy;
  }
  EXPECT_GE(from_replica, 100);   // lost source GPUs whose shards came from other holders
  EXPECT_GE(units_dropped, 100);  // served units left out
  EXPECT_GE(all_lost, 5);
  std::cout << replanned << " replanned, " << unheld << " with bytes no survivor holds, " << all_lost
            << " with every destination unit lost\n";
}

namespace {

template <class T>
const T& pick_of(std::mt19937& rng, std::initializer_list<T> v) {
  return *(v.begin() + std::uniform_int_distribution<int>(0, static_cast<int>(v.size()) - 1)(rng));
}

// A generated cluster: any template, 2-4 nodes (2 racks for NVL72), random NIC speed and host link
// (either may be the template's), random fabric shape and oversubscription, and in a third of them
// a core layer (pods of 1-2 leaf groups) at a random oversubscription of its own.
std::string random_generated(std::mt19937& rng) {
  const std::string tmpl = pick_of<const char*>(rng, {"dgx-h100", "dgx-h200", "dgx-b200", "gb200-nvl72", "gb300-nvl72"});
  const bool racks = tmpl.find("nvl72") != std::string::npos;
  const int nodes = racks ? 36 : 2 + static_cast<int>(rng() % 3);
  std::string y = "name: random\ncluster:\n  template: " + tmpl + "\n";
  y += racks ? "  racks: 2\n" : "  nodes: " + std::to_string(nodes) + "\n";
  if (rng() % 4) y += std::string("  nic_speed: ") + pick_of<const char*>(rng, {"200Gbps", "400Gbps", "800Gbps", "1600Gbps", "3200Gbps"}) + "\n";
  if (rng() % 4) y += std::string("  host_link: ") + pick_of<const char*>(rng, {"16GBps", "32GBps", "64GBps", "128GBps", "256GBps"}) + "\n";
  if (rng() % 3 == 0) y += std::string("  host_link_kind: ") + pick_of<const char*>(rng, {"pcie", "c2c"}) + "\n";
  y += std::string("fabric:\n  rail_optimized: ") + (rng() % 3 ? "true" : "false") + "\n";
  y += "  nodes_per_leaf: " + std::to_string(1 + rng() % static_cast<unsigned>(nodes)) + "\n";
  const int spines = 1 + static_cast<int>(rng() % 4);
  y += "  spines: " + std::to_string(spines) + "\n";
  y += std::string("  oversubscription: ") + pick_of<const char*>(rng, {"1", "1", "2", "4"}) + "\n";
  if (rng() % 3 == 0)
    y += "  core: {leaf_groups_per_pod: " + std::to_string(1 + rng() % 2) +
         ", switches: " + std::to_string(spines * static_cast<int>(1 + rng() % 2)) +
         ", oversubscription: " + pick_of<const char*>(rng, {"1", "2", "8"}) + "}\n";
  return y;
}

// An explicit cluster of 2-4 nodes of 1-4 GPUs. A node has NVLink (an NVSwitch) or not (every GPU
// its own domain), and either one NIC per GPU over its own PCIe link (one GPU of an NVLink node may
// go without and reach the network through a peer) or 1-2 NICs shared behind a PCIe switch (kind
// cpu), which may also be joined to the next node's switch. NICs hang off one leaf, or one leaf per
// rail joined by 1-2 spines. Every bandwidth is random.
std::string random_explicit(std::mt19937& rng) {
  const int nodes = 2 + static_cast<int>(rng() % 3);
  struct Node {
    int gpus;
    bool nvlink, shared;
    int nics;
  };
  std::vector<Node> ns;
  int rails = 1;
  for (int n = 0; n < nodes; ++n) {
    Node x{1 + static_cast<int>(rng() % 4), false, rng() % 2 == 0, 0};
    x.nvlink = x.gpus > 1 && rng() % 4 != 0;
    x.nics = x.shared ? 1 + static_cast<int>(rng() % 2) : x.gpus;
    ns.push_back(x);
    rails = std::max(rails, x.nics);
  }
  auto bw = [&](std::initializer_list<const char*> v) { return std::string(pick_of<const char*>(rng, v)); };
  std::string dev = "devices:\n", links = "links:\n";
  auto name = [](int n, const std::string& what) { return "n" + std::to_string(n) + "/" + what; };
  for (int n = 0; n < nodes; ++n)
    for (int i = 0; i < ns[static_cast<std::size_t>(n)].gpus; ++i)
      dev += "  - {name: " + name(n, "gpu" + std::to_string(i)) + ", kind: gpu, node: n" + std::to_string(n) + "}\n";
  const bool per_rail = rng() % 2 == 0;
  const int leaves = per_rail ? rails : 1;
  for (int l = 0; l < leaves; ++l) dev += "  - {name: leaf" + std::to_string(l) + ", kind: leaf}\n";
  const int spines = leaves > 1 ? 1 + static_cast<int>(rng() % 2) : 0;
  for (int s = 0; s < spines; ++s) {
    dev += "  - {name: spine" + std::to_string(s) + ", kind: spine}\n";
    for (int l = 0; l < leaves; ++l)
      links += "  - {from: leaf" + std::to_string(l) + ", to: spine" + std::to_string(s) +
               ", kind: network, bandwidth: " + bw({"50GBps", "100GBps", "400GBps"}) + "}\n";
  }
  auto nic_link = [&](int n, int r) {
    const int leaf = per_rail ? r : 0;
    links += "  - {from: " + name(n, "nic" + std::to_string(r)) + ", to: leaf" + std::to_string(leaf) +
             ", kind: network, bandwidth: " + bw({"12.5GBps", "25GBps", "50GBps", "100GBps", "200GBps"}) + "}\n";
  };
  for (int n = 0; n < nodes; ++n) {
    const auto& x = ns[static_cast<std::size_t>(n)];
    if (x.nvlink) {
      dev += "  - {name: " + name(n, "nvswitch") + ", kind: nvswitch}\n";
      for (int i = 0; i < x.gpus; ++i)
        links += "  - {from: " + name(n, "gpu" + std::to_string(i)) + ", to: " + name(n, "nvswitch") +
                 ", kind: nvlink, bandwidth: " + bw({"100GBps", "450GBps", "900GBps"}) + "}\n";
    }
    if (x.shared) {
      dev += "  - {name: " + name(n, "pcie") + ", kind: cpu, node: n" + std::to_string(n) + "}\n";
      for (int i = 0; i < x.gpus; ++i)
        links += "  - {from: " + name(n, "gpu" + std::to_string(i)) + ", to: " + name(n, "pcie") +
                 ", kind: pcie, bandwidth: " + bw({"16GBps", "32GBps", "64GBps"}) + "}\n";
      for (int r = 0; r < x.nics; ++r) {
        dev += "  - {name: " + name(n, "nic" + std::to_string(r)) + ", kind: nic, node: n" + std::to_string(n) +
               ", rail: " + std::to_string(r) + "}\n";
        links += "  - {from: " + name(n, "pcie") + ", to: " + name(n, "nic" + std::to_string(r)) +
                 ", kind: pcie, bandwidth: " + bw({"16GBps", "32GBps", "64GBps", "128GBps"}) + "}\n";
        nic_link(n, r);
      }
      if (n > 0 && ns[static_cast<std::size_t>(n - 1)].shared && rng() % 3 == 0)  // switches joined across nodes
        links += "  - {from: " + name(n - 1, "pcie") + ", to: " + name(n, "pcie") + ", kind: pcie, bandwidth: " +
                 bw({"16GBps", "64GBps"}) + "}\n";
    } else {
      const int without = x.nvlink && rng() % 4 == 0 ? static_cast<int>(rng() % static_cast<unsigned>(x.gpus)) : -1;
      for (int r = 0; r < x.gpus; ++r) {
        if (r == without) continue;
        dev += "  - {name: " + name(n, "nic" + std::to_string(r)) + ", kind: nic, node: n" + std::to_string(n) +
               ", rail: " + std::to_string(r) + "}\n";
        links += "  - {from: " + name(n, "gpu" + std::to_string(r)) + ", to: " + name(n, "nic" + std::to_string(r)) +
                 ", kind: " + bw({"pcie", "pcie", "c2c"}) + ", bandwidth: " +
                 bw({"16GBps", "32GBps", "64GBps", "128GBps"}) + "}\n";
        nic_link(n, r);
      }
    }
  }
  return "name: random\n" + dev + links;
}

}  // namespace

TEST(PlannerProperty, RandomTopologiesBoundNeverAboveAchievable) {
  std::mt19937 rng(20261130);
  int topologies = 0, explicit_ones = 0, warned = 0, cases = 0, host_bound = 0, fabric_bound = 0, tight = 0,
      simulated_cases = 0;
  while (topologies < 240) {
    const bool explicit_form = topologies % 2 == 1;
    const std::string yaml = explicit_form ? random_explicit(rng) : random_generated(rng);
    SCOPED_TRACE(yaml);
    const Topology topo = Topology::parse(yaml, "random.yaml");
    ++topologies;
    explicit_ones += explicit_form;
    warned += !topo.warnings().empty();
    const int pool = topo.gpu_count();
    for (int pairs = 0, attempts = 0; pairs < 3 && attempts < 200; ++attempts) {
      const std::string text = random_model(rng);
      const auto inv = Inventory::parse(text, model_file(text));
      const LayoutSpec a = random_layout(rng, pool), b = random_layout(rng, pool);
      std::optional<ShardMap> src, dst;
      try {
        src.emplace(build_shard_map(inv, a));
        dst.emplace(build_shard_map(inv, b));
      } catch (const PlanError&) {
        continue;
      }
      ++pairs;
      ++cases;
      SCOPED_TRACE(a.describe() + " -> " + b.describe());
      const TransferSet ts = plan(inv, *src, *dst);
      const LowerBound lb = lower_bound(ts, *src, *dst, topo);
      if (ts.bytes_to_move.value > 0) {
        EXPECT_GT(lb.time.value, 0);
        EXPECT_TRUE(std::isfinite(lb.time.value));
      }
      const double achievable = reshard::testing::achievable_time(ts, *src, *dst, topo);
      ASSERT_LE(lb.time.value, achievable * (1 + 1e-9))
          << "bound " << lb.time.value << " s (" << lb.binding.cut << ", " << lb.binding.where << ") above an achievable "
          << achievable << " s";
      host_bound += lb.binding.where.find("host links") != std::string::npos;
      fabric_bound += lb.binding.cut.find("fabric") != std::string::npos;
      tight += achievable <= lb.time.value * 1.01;
      // Every strategy in turn: its schedule validates, and neither its estimate nor its
      // simulation beats the bound.
      StrategyParams sp;
      sp.strategy = all_strategies()[static_cast<std::size_t>(cases) % all_strategies().size()];
      const Schedule sched = build_schedule(ts, inv, *src, *dst, topo, sp);
      ASSERT_NO_THROW(validate(sched, ts, inv, *src, *dst)) << sp.strategy;
      const auto cost = CostParams::profile_named("links");
      const auto pred = estimate(sched, ts, inv, topo, cost);
      EXPECT_GE(pred.time.value, lb.time.value * (1 - 1e-9)) << sp.strategy;
      const double simulated = reshard::sim::simulated_makespan(sched, topo, cost, pred.overheads).value;
      EXPECT_GE(simulated, lb.time.value * (1 - 1e-9)) << sp.strategy;
      ++simulated_cases;
    }
  }
  // Coverage: explicit and generated alike, many NICs faster than their host links, host links and
  // the switch tiers above leaf groups and pods (fabric cuts) setting the bound, and cases where
  // the constructed schedule meets the bound (so the check is sharp there: a bound a little too
  // high would fail).
  EXPECT_EQ(explicit_ones, 120);
  EXPECT_GE(warned, 60);
  EXPECT_GE(cases, 600);
  EXPECT_GE(host_bound, 20);
  EXPECT_GE(fabric_bound, 20);
  EXPECT_GE(tight, 20);
  EXPECT_EQ(simulated_cases, cases);
  std::cout << topologies << " topologies (" << warned << " with a NIC faster than its host link), " << cases
            << " layout pairs; host links bind in " << host_bound << ", fabric cuts in " << fabric_bound
            << "; the constructed schedule meets the bound in " << tight << "\n";
}

// Bytes needed = the destination's bytes, counted by hand, for one small config of each new
// architecture on vLLM TP2 (one engine on GPUs 8-9) from Megatron TP1 (GPU 0): every column- and
// row-parallel tensor once, every replicated one (norms, routers, biases of row-parallel layers,
// KV heads fewer than TP, MLA's down-projections, the DSA indexer) twice, gpt-oss's expert
// down_proj_bias on MoE TP rank 0 only. The parameter count is the hand count of each config.
TEST(PlannerProperty, NewArchitecturesBytesNeededByHand) {
  struct Case {
    const char* name;
    const char* json;
    std::int64_t parameters;
    std::int64_t bytes;
  };
  const Case cases[] = {
      // The llama hand model below without its o / MLP biases, q/k/v biases always: 7952 parameters
      // (tests/test_inventory.cpp); twice: norms 2 x 2 x 16 + 16 = 80 (2 KV heads = TP: none
      // replicated) -> 8032.
      {"qwen2", R"({"model_type": "qwen2", "hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 4,
         "num_key_value_heads": 2, "intermediate_size": 32, "vocab_size": 100})",
       7952, 8032 * 2},
      // 8144 parameters; twice: 2 layers x 2 norms x 16 + final norm 16 = 80, o_proj.bias 2 x 16,
      // down_proj.bias 2 x 16 -> 8288 elements of 2 bytes.
      {"llama", R"({"model_type": "llama", "hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 4,
         "num_key_value_heads": 2, "intermediate_size": 32, "vocab_size": 100, "attention_bias": true,
         "mlp_bias": true})",
       8144, 8288 * 2},
      // 8436 parameters; twice: norms 2 x 32 + 16 = 80, QK norms 2 x 16, router 4 x 16 + fp32 bias 4
      // -> 8616 elements, 8 of them the fp32 bias (4 bytes).
      {"glm4_moe", R"({"model_type": "glm4_moe", "hidden_size": 16, "num_hidden_layers": 2,
         "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8, "intermediate_size": 32,
         "moe_intermediate_size": 8, "n_routed_experts": 4, "n_shared_experts": 1, "num_experts_per_tok": 2,
         "first_k_dense_replace": 1, "vocab_size": 50, "attention_bias": true, "use_qk_norm": true})",
       8436, (8616 - 8) * 2 + 8 * 4},
      // 1291 parameters; twice: norms 2 x 8 + 8 = 24, o_proj.bias 8, router 24 + 3 -> 1350; the three
      // experts' down_proj_bias once (rank 0), their gate_up / down split 3 + 3 rows of I = 6.
      {"gpt_oss", R"({"model_type": "gpt_oss", "hidden_size": 8, "num_hidden_layers": 1,
         "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 4, "intermediate_size": 6,
         "num_local_experts": 3, "num_experts_per_tok": 2, "vocab_size": 20})",
       1291, 1350 * 2},
      // 4934 parameters (the hand model of test_inventory.cpp with a shared expert of width 6);
      // twice: norms 4 x 16 + 8 = 72, DeltaNet norms 2 x 3, the single KV head's k and v (2 layers x
      // 64), QK norms 2 x 8, routers 4 x 32, shared expert gates 4 x 8 -> 5316.
      {"qwen3_next", R"({"model_type": "qwen3_next", "hidden_size": 8, "num_hidden_layers": 4,
         "full_attention_interval": 2, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 4,
         "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 2,
         "linear_value_head_dim": 3, "linear_conv_kernel_dim": 3, "moe_intermediate_size": 6,
         "num_experts": 4, "num_experts_per_tok": 2, "shared_expert_intermediate_size": 6, "vocab_size": 20})",
       4934, 5316 * 2},
      // 1431 parameters; twice: norms 2 x 16 + 8 = 40, DeltaNet norm 3, k and v of the single KV head
      // 64, QK norms 8 -> 1546.
      {"qwen3_5", R"({"model_type": "qwen3_5", "tie_word_embeddings": true, "text_config": {
         "hidden_size": 8, "num_hidden_layers": 2, "layer_types": ["linear_attention", "full_attention"],
         "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 4, "linear_num_key_heads": 2,
         "linear_num_value_heads": 4, "linear_key_head_dim": 2, "linear_value_head_dim": 3,
         "linear_conv_kernel_dim": 3, "intermediate_size": 10, "vocab_size": 20}})",
       1431, 1546 * 2},
      // The qwen3_5 model with a MoE in each layer: router 4 x 8 = 32, experts 4 x 3 x 6 x 8 = 576,
      // shared expert 3 x 6 x 8 = 144, its gate 8 -> 760 per layer; DeltaNet layer 487 + 16 + 760 =
      // 1263, attention layer 264 + 16 + 760 = 1040; embedding 160 (tied), norm 8 -> 2471. Twice:
      // norms 40, DeltaNet norm 3, k and v of the single KV head 64, QK norms 8, routers 2 x 32,
      // shared expert gates 2 x 8 -> 2666.
      {"qwen3_5_moe", R"({"model_type": "qwen3_5_moe", "tie_word_embeddings": true, "text_config": {
         "hidden_size": 8, "num_hidden_layers": 2, "layer_types": ["linear_attention", "full_attention"],
         "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 4, "linear_num_key_heads": 2,
         "linear_num_value_heads": 4, "linear_key_head_dim": 2, "linear_value_head_dim": 3,
         "linear_conv_kernel_dim": 3, "moe_intermediate_size": 6, "num_experts": 4, "num_experts_per_tok": 2,
         "shared_expert_intermediate_size": 6, "vocab_size": 20}})",
       2471, 2666 * 2},
      // 16996 parameters (the MLA hand model, 16340, with two indexers of 328); twice per layer:
      // q_a 512, q_a_layernorm 16, kv_a 320, kv_a_layernorm 8, 2 norms 64, the indexer 328; final
      // norm 32, router 128 + fp32 bias 4 -> 16996 + 2 x 1248 + 32 + 132 = 19656 elements, 8 fp32.
      {"deepseek_v32", R"({"model_type": "deepseek_v32", "hidden_size": 32, "num_hidden_layers": 2,
         "num_attention_heads": 2, "q_lora_rank": 16, "kv_lora_rank": 8, "qk_nope_head_dim": 4,
         "qk_rope_head_dim": 2, "v_head_dim": 4, "intermediate_size": 64, "moe_intermediate_size": 8,
         "n_routed_experts": 4, "n_shared_experts": 1, "num_experts_per_tok": 2, "first_k_dense_replace": 1,
         "vocab_size": 50, "index_n_heads": 2, "index_head_dim": 4})",
       16996, (19656 - 8) * 2 + 8 * 4},
      // The MLA hand model (16340) as Kimi K2.5's text_config, its tensors under language_model.;
      // twice per layer q_a 512, q_a_layernorm 16, kv_a 320, kv_a_layernorm 8, 2 norms 64 -> 920;
      // final norm 32, router 128 + fp32 bias 4 -> 16340 + 2 x 920 + 164 = 18344 elements, 8 fp32.
      {"kimi_k25", R"({"model_type": "kimi_k25", "text_config": {"model_type": "kimi_k2", "hidden_size": 32,
         "num_hidden_layers": 2, "num_attention_heads": 2, "q_lora_rank": 16, "kv_lora_rank": 8,
         "qk_nope_head_dim": 4, "qk_rope_head_dim": 2, "v_head_dim": 4, "intermediate_size": 64,
         "moe_intermediate_size": 8, "n_routed_experts": 4, "n_shared_experts": 1, "num_experts_per_tok": 2,
         "first_k_dense_replace": 1, "vocab_size": 50, "tie_word_embeddings": false}})",
       16340, (18344 - 8) * 2 + 8 * 4},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const auto inv = Inventory::parse(c.json, std::string(c.name) + "/config.json");
    EXPECT_EQ(inv.parameters(), c.parameters);
    const LayoutSpec src{MegatronSpec{}, {0}};
    const LayoutSpec dst{VllmSpec{.tp = 2}, {8, 9}};
    const auto s = build_shard_map(inv, src), d = build_shard_map(inv, dst);
    expect_exact_cover(inv, d);
    const TransferSet ts = plan(inv, s, d);
    EXPECT_EQ(ts.bytes_needed.value, c.bytes);
    EXPECT_EQ(d.total_bytes_held(inv).value, c.bytes);
  }
}
