// SGLang layout: what `python -m sglang.launch_server` builds from --tp-size TP, --dp-size DP,
// --enable-dp-attention, --ep-size EP, --moe-dense-tp-size, --enable-dp-lm-head,
// --moe-a2a-backend and --ep-num-redundant-experts (no pipeline parallelism).
//
//   Ranks (of one server; `servers` independent servers sit on consecutive blocks of its world,
//   server k's rank r on rank r + k*world). Without DP attention, DP independent replicas (SGLang's data-parallel controller starts
//   one TP group per DP rank on consecutive GPUs): world = TP*DP, rank = t + TP*d (TP rank t,
//   replica d). With DP attention, one TP group (world = TP, DP dividing TP, d = 0) whose attention
//   runs data parallel: attention TP A = TP/DP, attention TP rank a = t mod A, attention DP rank
//   t / A (compute_dp_attention_world_info: TP rank fastest). Without DP attention A = TP.
//   Let split(n, i) be a tensor split by role over n ranks, part i, as vLLM's layers split it
//   (vocabulary padded to a multiple of 64, q by whole heads, KV heads fewer than n replicated over
//   n/KVH neighbours). Then:
//   attention tensors (q/k/v/o, the MLA projections and their norms): split(A, a) on the ranks
//       { a + A*j + TP*d : j < TP/A } (under DP attention the DP attention groups hold copies);
//   embedding (VocabParallelEmbedding, use_attn_tp_group under DP attention): as attention;
//   lm_head (ParallelLMHead, use_attn_tp_group = --enable-dp-lm-head, which needs DP attention):
//       as attention with --enable-dp-lm-head, else split(TP, t);
//   dense FFN layers of an MoE model (DeepSeek's first_k_dense_replace layers): whole on every rank
//       with --moe-dense-tp-size 1, else split(TP, t); MTP eh_proj whole (SGLang's NextN builds it
//       replicated);
//   shared experts: whole on every rank with an all-to-all MoE backend (deepep, mooncake: SGLang
//       builds them with tp_size 1), else split(TP, t) (shared-experts fusion runs them as one more
//       expert split over TP, which holds the same rows on the same ranks);
//   routed experts: MoE TP M = TP/EP, TP rank t = q*M + j (EP rank q = t / M, MoE TP rank
//       j = t mod M). The S = E + R physical slots (R redundant, slot s holds expert s mod E) split
//       evenly over EP (S divisible by EP): slot s on EP rank q = s / (S/EP), split(M, j) on the
//       ranks { q*M + j + TP*d };
//   norms, routers and other replicated tensors: whole on every rank.
#include "layout_builders.hpp"
#include "layout_yaml.hpp"
#include "reshard/model/checked.hpp"
#include "reshard/model/scenario_keys.hpp"
#include "reshard/model/errors.hpp"

namespace reshard::model::layouts {

ShardMap build_sglang(const Inventory& inv, const SglangSpec& s, const LayoutSpec& spec) {
  const auto& cfg = inv.config();
  const std::string name = spec.describe();
  if (s.tp < 1 || s.dp < 1 || s.ep < 1 || s.moe_dense_tp < 0 || s.redundant_experts < 0 || s.servers < 1)
    throw PlanError(name + ": parallel sizes must be positive");
  if (s.enable_dp_attention && s.tp % s.dp != 0)
    throw PlanError(name + ": DP attention needs dp " + std::to_string(s.dp) + " to divide tp " + std::to_string(s.tp));
  if (s.enable_dp_lm_head && !s.enable_dp_attention)
    throw PlanError(name + ": enable_dp_lm_head needs enable_dp_attention");
  if (s.moe_dense_tp > 1) throw PlanError(name + ": moe_dense_tp_size must be 1 or unset");
  if (s.tp % s.ep != 0)
    throw PlanError(name + ": ep " + std::to_string(s.ep) + " does not divide tp " + std::to_string(s.tp));
  if (s.a2a_moe && s.ep != s.tp)
    throw PlanError(name + ": an all-to-all MoE backend runs EP = TP = " + std::to_string(s.tp) + ", not ep " +
                    std::to_string(s.ep));
  const std::int64_t world = s.world();
  if (world != static_cast<std::int64_t>(spec.gpus.size()))
    throw PlanError(name + ": the layout needs " + std::to_string(world) + " GPUs but its gpus list has " +
                    std::to_string(spec.gpus.size()));
  const std::int64_t E = cfg.n_routed_experts;
  const std::int64_t slots = E + s.redundant_experts;
  if (E == 0 && (s.moe_dense_tp > 0 || s.redundant_experts > 0))
    throw PlanError(name + ": moe_dense_tp_size and ep_num_redundant_experts apply to MoE models; '" + cfg.name +
                    "' has no routed experts");
  if (s.redundant_experts > 0 && s.ep < 2)
    throw PlanError(name + ": ep_num_redundant_experts needs expert parallelism (ep > 1)");
  if (s.redundant_experts > E) throw PlanError(name + ": more redundant experts than experts");
  if (E > 0 && slots % s.ep != 0)
    throw PlanError(name + ": SGLang needs the " + std::to_string(slots) + " physical experts divisible by EP " +
                    std::to_string(s.ep));
  if (s.enable_dp_attention && !cfg.hybrid_override_pattern.empty())
    throw PlanError(name + ": DP attention with Mamba layers ('" + cfg.name + "') is not modelled");
  if (s.enable_dp_attention && cfg.layer_types.find('L') != std::string::npos)
    throw PlanError(name + ": DP attention with gated DeltaNet layers ('" + cfg.name + "') is not modelled");

  const std::int32_t A = s.attention_tp();
  // Independent replicas: the DP copies of a server (without DP attention) times the servers, each
  // a block of tp GPUs after the last (server k's ranks follow server k-1's).
  const std::int32_t copies = (s.enable_dp_attention ? 1 : s.dp) * s.servers;
  const RankGrid::Axis replicas{copies, s.tp};
  const RankGrid::Axis attention_groups{s.tp / A, A};
  const std::int32_t moe_tp = s.tp / s.ep;
  ShardMap map(static_cast<std::int32_t>(inv.tensors().size()), spec.gpus, name);
  auto whole = [&](const TensorInfo& t) {
    map.add_shard(t.id, full_box(t), map.intern(grid(0, {{s.tp, 1}, replicas})));
  };
  for (const auto& t : inv.tensors()) {
    if (t.expert >= 0) {
      for (std::int64_t slot = t.expert; slot < slots; slot += E) {
        const std::int32_t q = expert_slot_rank(slot, slots, s.ep, ExpertPlacement::Linear);
        for (std::int32_t j = 0; j < moe_tp; ++j) {
          // gpt-oss's down_proj_bias: loaded on MoE TP rank 0 only, zeros elsewhere (gpt_oss.py
          // _load_normal_weights, "w2_weight_bias" with get_moe_tensor_parallel_rank() != 0).
          if (t.role == ParallelRole::Replicated && j > 0) break;
          const auto set = map.intern(grid(q * moe_tp + j, {replicas}));
          if (cfg.architecture == "gpt_oss" && s.gpt_oss_expert_block > 1) {  // MXFP4 experts: whole blocks
            if (Box b = gpt_oss_moe_tp_box(t, cfg.intermediate_size, moe_tp, j, s.gpt_oss_expert_block); !b.empty())
              map.add_shard(t.id, std::move(b), set);
            continue;
          }
          for (auto& b : tp_slice(t, moe_tp, j, 64, 0, name)) map.add_shard(t.id, std::move(b), set);
        }
      }
      continue;
    }
    const bool attention_group =
        t.cls == TensorClass::Attention || t.cls == TensorClass::Embedding ||
        (t.cls == TensorClass::Head && s.enable_dp_lm_head);
    if (attention_group) {
      add_tp_shards(map, inv, t, A, 0, {attention_groups, replicas}, name);
    } else if ((t.cls == TensorClass::DenseFFN && t.mtp) || (t.cls == TensorClass::DenseFFN && s.moe_dense_tp == 1) ||
               (t.cls == TensorClass::SharedExpert && s.a2a_moe)) {
      whole(t);
    } else {
      add_tp_shards(map, inv, t, s.tp, 0, {replicas}, name);
    }
  }
  return map;
}

SglangSpec read_sglang(const yaml::Node& n, std::int64_t count) {
  n.allow_only(scenario_keys("sglang"));
  SglangSpec g;
  if (auto x = n.get("tp_size")) g.tp = small_int(*x);
  if (auto x = n.get("dp_size")) g.dp = small_int(*x);
  if (auto x = n.get("enable_dp_attention")) {
    g.enable_dp_attention = x->boolean();
    if (g.enable_dp_attention && g.tp % g.dp != 0)
      x->fail("DP attention splits the tp_size " + std::to_string(g.tp) + " GPUs into dp_size " +
              std::to_string(g.dp) + " attention groups; dp_size must divide tp_size");
  }
  if (auto x = n.get("moe_a2a_backend")) {
    const std::string b = x->str();
    if (b == "deepep" || b == "mooncake") g.a2a_moe = true;
    else if (b != "none") x->fail("expected none, deepep or mooncake, got " + checked::quote(b));
  }
  if (auto x = n.get("ep_size")) {
    g.ep = small_int(*x);
    if (g.tp % g.ep != 0)
      x->fail("ep_size " + std::to_string(g.ep) + " must divide tp_size " + std::to_string(g.tp) +
              " (MoE TP = tp_size / ep_size)");
    if (g.a2a_moe && g.ep != g.tp)
      x->fail("an all-to-all MoE backend runs ep_size = tp_size = " + std::to_string(g.tp));
  } else if (g.a2a_moe) {
    g.ep = g.tp;  // SGLang sets ep_size to tp_size for an all-to-all backend
  }
  if (auto x = n.get("moe_dense_tp_size")) {
    const auto d = small_int(*x);
    if (d != 1 && d != g.tp)
      x->fail("SGLang accepts moe_dense_tp_size 1 or tp_size (" + std::to_string(g.tp) + "), got " + std::to_string(d));
    g.moe_dense_tp = d == 1 ? 1 : 0;
  }
  if (auto x = n.get("enable_dp_lm_head")) {
    g.enable_dp_lm_head = x->boolean();
    if (g.enable_dp_lm_head && !g.enable_dp_attention) x->fail("enable_dp_lm_head needs enable_dp_attention: true");
  }
  if (auto x = n.get("ep_num_redundant_experts")) {
    g.redundant_experts = static_cast<std::int32_t>(x->integer_in(0, 1'000'000));
    if (g.redundant_experts > 0 && g.ep < 2) x->fail("redundant experts need expert parallelism (ep_size > 1)");
  }
  if (auto x = n.get("servers")) g.servers = small_int(*x);
  check_world(n, count, g.world(), g.enable_dp_attention
                             ? (g.servers > 1 ? "sglang with DP attention (world = tp_size x servers)"
                                              : "sglang with DP attention (world = tp_size)")
                             : (g.servers > 1 ? "sglang TP*DP x servers" : "sglang TP*DP"));
  return g;
}

}  // namespace reshard::model::layouts
