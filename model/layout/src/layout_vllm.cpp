// vLLM layout.
//
//   world = TP x PP x DP, rank = tp + TP*(pp + PP*dp): vLLM orders ranks TP fastest, then PP, then DP,
//   so each DP rank is a contiguous block of TP*PP GPUs. Layers split contiguously over PP as vLLM's
//   get_pp_indices does (the remainder layers go to the stages before the last); embedding on the
//   first stage, norm and lm_head on the last.
//   Dense tensors (attention, dense FFN, shared experts, norms, routers, embedding, lm_head) of stage
//   p, TP index t: ranks { t + TP*p + TP*PP*d : d < DP }, split by role over TP. KV heads: with
//   KVH >= TP they split evenly; with KVH < TP (TP a multiple of KVH) TP index t holds KV head
//   t / (TP/KVH), replicated over TP/KVH neighbours. Vocabulary padded to a multiple of 64 before the
//   split (the padding rows exist only here).
//
//   `dp_mode` says what DP is.
//   engines (the default): DP independent engines, each a whole copy of the model.
//     Experts, EP off: split over TP like a dense FFN.
//     EP on (`ep` set, or enable_expert_parallel with ep = TP): the TP*DP ranks of a stage, numbered
//     i = t + TP*d, form TP*DP/EP expert groups of EP consecutive ranks (EP a multiple of TP dividing
//     TP*DP). A group is one engine of data_parallel_size EP/TP with expert parallelism (EP = TP: one
//     engine per DP copy); each group holds every expert.
//   data_parallel: one deployment started with --data-parallel-size DP. Attention and dense layers as
//     above (each DP rank a TP-split copy), but a stage's MoE layers span its TP*DP ranks in vLLM's
//     flattened order f = t + TP*d (FusedMoEParallelConfig.make), rank t + TP*p + TP*PP*d:
//     EP off: MoE tensor parallelism over TP*DP: rank f holds rows [f*I/(TP*DP), (f+1)*I/(TP*DP)) of
//       every expert's gate and up and those columns of its down (I the expert width).
//     enable_expert_parallel: EP = TP*DP, EP rank f, experts whole (one group). With TP > 1 and DP > 1
//       vLLM runs the MoE sequence parallel (use_sequence_parallel_moe with its default all2all
//       backend) and builds the shared experts unsplit (disable_tp): whole on every rank of the stage.
//   Expert placement (EP on): the S = E + R physical slots (R redundant copies for EPLB, slot s holds
//   expert s mod E) go to EP ranks as vLLM's determine_expert_map does:
//     linear:      b = S / EP, m = S mod EP; EP rank q holds slots [q*b + min(q, m), (q+1)*b + min(q+1, m))
//                  (the first m ranks one slot more);
//     round_robin: slot s on EP rank s mod EP (the first S mod EP ranks one slot more).
//   The placement is the one vLLM applies (determine_expert_placement_strategy): round_robin holds
//   only for a model with expert groups (num_expert_group > 1), no redundant experts (EPLB) and, in
//   an engine with data parallelism (EP > TP: all-to-all kernels), the DeepEP low-latency or NIXL EP
//   backend; otherwise linear, noted on the ShardMap (`plan` prints it). Redundant experts need S
//   divisible by EP (vLLM's EPLB asserts it). EP rank q of group k sits on rank
//     q%TP + TP*p + TP*PP*(q/TP + (EP/TP)*k),   k < TP*DP/EP,
//   so the ranks holding slot s are those of q over every group: one grid of TP*DP/EP ranks.
#include "layout_builders.hpp"
#include "layout_yaml.hpp"
#include "reshard/model/checked.hpp"
#include "reshard/model/scenario_keys.hpp"
#include "reshard/model/errors.hpp"

namespace reshard::model {

ExpertPlacement VllmSpec::placement_applied(std::int64_t expert_groups, std::string* why) const {
  std::string reason;
  if (expert_placement == ExpertPlacement::RoundRobin && expert_parallel_size() > 0) {
    if (expert_groups <= 1)
      reason = "the model has no expert groups (num_expert_group " + std::to_string(expert_groups) + ")";
    else if (redundant_experts > 0)
      reason = "redundant experts (EPLB) are placed linearly";
    else if (expert_parallel_size() > tp && all2all_backend != VllmAll2All::DeepepLowLatency &&
             all2all_backend != VllmAll2All::NixlEp)
      reason = std::string("an engine with data parallelism runs the all-to-all backend ") + to_string(all2all_backend) +
               ", and round-robin needs deepep_low_latency or nixl_ep";
  }
  if (why) *why = reason;
  return reason.empty() ? expert_placement : ExpertPlacement::Linear;
}

std::int32_t VllmSpec::expert_parallel_size() const {
  if (dp_mode == VllmDpMode::DataParallel) return enable_expert_parallel ? tp * dp : 0;
  if (ep > 0) return ep;
  return enable_expert_parallel ? tp : 0;
}

}  // namespace reshard::model

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
  const bool data_parallel = v.dp_mode == VllmDpMode::DataParallel;
  if (data_parallel && v.ep > 0 && (!v.enable_expert_parallel || v.ep != v.tp * v.dp))
    throw PlanError(name + ": with dp_mode data_parallel the EP size is TP*DP = " + std::to_string(v.tp * v.dp) +
                    " under enable_expert_parallel; ep " + std::to_string(v.ep) + " cannot be set");
  const std::int32_t ep = v.expert_parallel_size();
  const std::int64_t E = cfg.n_routed_experts;
  const std::int64_t slots = E + v.redundant_experts;
  if (ep > 0) {
    if ((v.tp * v.dp) % ep != 0 || ep % v.tp != 0)
      throw PlanError(name + ": ep " + std::to_string(ep) + " must divide TP*DP = " + std::to_string(v.tp * v.dp) +
                      " and be a multiple of TP " + std::to_string(v.tp));
    if (v.redundant_experts > E) throw PlanError(name + ": more redundant experts than experts");
    if (v.redundant_experts > 0 && slots % ep != 0)
      throw PlanError(name + ": with redundant experts (EPLB) vLLM needs the " + std::to_string(slots) +
                      " physical experts divisible by EP " + std::to_string(ep));
  } else if (v.redundant_experts > 0) {
    throw PlanError(name + ": redundant_experts needs expert parallelism (ep or enable_expert_parallel)");
  }
  // vLLM get_pp_indices: equal parts, the remainder to the stages before the last.
  const std::int32_t layers = inv.layer_count();
  std::vector<std::int32_t> counts(static_cast<std::size_t>(v.pp), layers / v.pp);
  if (v.pp > layers) throw PlanError(name + ": more pipeline stages than layers");
  for (std::int32_t i = 2; i < layers % v.pp + 2; ++i) counts[static_cast<std::size_t>(v.pp - i)] += 1;
  const auto stage_of_layer = split_layers(layers, v.pp, counts, name);

  // Sequence-parallel MoE (vllm/config/parallel.py, ParallelConfig.use_sequence_parallel_moe: these
  // backends only, nixl_ep among them in every vLLM that has it): shared experts unsplit.
  const bool sequence_parallel_backend =
      v.all2all_backend == VllmAll2All::AllgatherReducescatter || v.all2all_backend == VllmAll2All::Naive ||
      v.all2all_backend == VllmAll2All::DeepepHighThroughput || v.all2all_backend == VllmAll2All::DeepepLowLatency ||
      v.all2all_backend == VllmAll2All::NixlEp;
  const bool shared_unsplit = data_parallel && ep > 0 && v.tp > 1 && v.dp > 1 && sequence_parallel_backend;
  // gpt-oss: vLLM's own loader (GptOssModel.load_weights) slices the stacked experts, EP rank q
  // taking experts [q*E/EP, (q+1)*E/EP) whatever the placement strategy, without EPLB slots.
  const bool gpt_oss = cfg.architecture == "gpt_oss";
  if (gpt_oss && ep > 0) {
    if (v.redundant_experts > 0)
      throw PlanError(name + ": vLLM's gpt-oss loader slices experts [ep_rank*E/EP, (ep_rank+1)*E/EP) itself " +
                      "(GptOssModel.load_weights); redundant experts (EPLB) are not supported");
    if (E % ep != 0)
      throw PlanError(name + ": vLLM's gpt-oss loader gives each EP rank E/EP experts; " + std::to_string(E) +
                      " experts are not divisible by EP " + std::to_string(ep));
  }
  std::string why;
  const ExpertPlacement placement = v.placement_applied(cfg.n_group, &why);
  ShardMap map(static_cast<std::int32_t>(inv.tensors().size()), spec.gpus, name);
  if (!why.empty())
    map.add_convention("experts placed linearly, not round-robin: vLLM falls back because " + why +
                       " (determine_expert_placement_strategy)");
  const RankGrid::Axis replicas{v.dp, v.tp * v.pp};
  if (ep > 0) {  // every rank's experts in its slot order (the placement of the loop below)
    std::vector<std::vector<std::int64_t>> of_ep_rank(static_cast<std::size_t>(ep));
    for (std::int64_t s = 0; s < slots; ++s)
      of_ep_rank[static_cast<std::size_t>(expert_slot_rank(s, slots, ep, placement))].push_back(s % E);
    const std::int32_t groups = v.tp * v.dp / ep;
    for (std::int32_t stage = 0; stage < v.pp; ++stage)
      for (std::int32_t q = 0; q < ep; ++q)
        for (std::int32_t k = 0; k < groups; ++k)
          map.set_expert_slots(v.tp * stage + q % v.tp + v.tp * v.pp * (q / v.tp) + k * v.pp * ep,
                               of_ep_rank[static_cast<std::size_t>(q)]);
  }
  for (const auto& t : inv.tensors()) {
    std::int32_t stage;
    if (t.layer >= 0) stage = stage_of_layer.at(static_cast<std::size_t>(t.layer));
    else stage = t.pre_layers ? 0 : v.pp - 1;
    const Rank base = v.tp * stage;
    if (t.expert >= 0 && ep > 0) {
      const std::int32_t groups = v.tp * v.dp / ep;
      for (std::int64_t s = t.expert; s < slots; s += E) {
        const auto q = expert_slot_rank(s, slots, ep, placement);  // EP rank inside its group
        const Rank r = base + q % v.tp + v.tp * v.pp * (q / v.tp);
        map.add_shard(t.id, full_box(t), map.intern(grid(r, {{groups, v.pp * ep}})));
      }
      continue;
    }
    if (t.expert >= 0 && data_parallel) {  // MoE tensor parallelism flattened over TP x DP
      const std::int32_t moe_tp = v.tp * v.dp;
      for (std::int32_t f = 0; f < moe_tp; ++f) {
        const auto set = map.intern(RankSet::single(base + f % v.tp + v.tp * v.pp * (f / v.tp)));
        if (gpt_oss) {
          if (Box b = gpt_oss_moe_tp_box(t, cfg.intermediate_size, moe_tp, f, v.gpt_oss_expert_block); !b.empty())
            map.add_shard(t.id, std::move(b), set);
          continue;
        }
        for (auto& b : tp_slice(t, moe_tp, f, 64, 0, name)) map.add_shard(t.id, std::move(b), set);
      }
      continue;
    }
    if (t.expert >= 0 && gpt_oss) {  // engines without EP: MoE tensor parallelism over the engine's TP
      for (std::int32_t f = 0; f < v.tp; ++f)
        if (Box b = gpt_oss_moe_tp_box(t, cfg.intermediate_size, v.tp, f, v.gpt_oss_expert_block); !b.empty())
          map.add_shard(t.id, std::move(b), map.intern(grid(base + f, {replicas})));
      continue;
    }
    if (shared_unsplit && t.cls == TensorClass::SharedExpert) {
      map.add_shard(t.id, full_box(t), map.intern(grid(base, {{v.tp, 1}, replicas})));
      continue;
    }
    add_tp_shards(map, inv, t, v.tp, base, {replicas}, name);
  }
  return map;
}

VllmSpec read_vllm(const yaml::Node& n, std::int64_t count) {
  n.allow_only(scenario_keys("vllm"));
  VllmSpec v;
  if (auto x = n.get("tp")) v.tp = small_int(*x);
  if (auto x = n.get("pp")) v.pp = small_int(*x);
  if (auto x = n.get("dp")) v.dp = small_int(*x);
  if (auto x = n.get("dp_mode")) {
    const std::string m = x->str();
    if (m == "data_parallel") v.dp_mode = VllmDpMode::DataParallel;
    else if (m != "engines") x->fail("expected engines or data_parallel, got " + checked::quote(m));
  }
  const auto enable = n.get("enable_expert_parallel");
  if (enable) v.enable_expert_parallel = enable->boolean();
  if (auto x = n.get("ep")) {
    v.ep = small_int(*x);
    if (enable && !v.enable_expert_parallel)
      x->fail("ep " + std::to_string(v.ep) + " turns expert parallelism on, but enable_expert_parallel is false");
    if (v.dp_mode == VllmDpMode::DataParallel && v.ep != v.tp * v.dp)
      x->fail("with dp_mode data_parallel vLLM's EP size is TP*DP = " + std::to_string(v.tp * v.dp) +
              "; leave ep out and set enable_expert_parallel: true");
    v.enable_expert_parallel = true;
  }
  if (auto x = n.get("expert_placement")) {
    const std::string p = x->str();
    if (p == "round_robin") v.expert_placement = ExpertPlacement::RoundRobin;
    else if (p != "linear") x->fail("expected linear or round_robin, got " + checked::quote(p));
    if (v.expert_parallel_size() == 0) x->fail("expert_placement needs expert parallelism (enable_expert_parallel or ep)");
  }
  if (auto x = n.get("redundant_experts")) {
    v.redundant_experts = static_cast<std::int32_t>(x->integer_in(0, 1'000'000));
    if (v.redundant_experts > 0 && v.expert_parallel_size() == 0)
      x->fail("redundant experts (EPLB) need expert parallelism (enable_expert_parallel or ep)");
  }
  if (auto x = n.get("all2all_backend")) {
    const auto b = vllm_all2all_named(x->str());
    if (!b) {
      std::string known;
      for (const auto& k : vllm_all2all_names()) known += (known.empty() ? "" : ", ") + k;
      x->fail("unknown all-to-all backend " + checked::quote(x->str()) + "; vLLM's --all2all-backend takes: " + known);
    }
    v.all2all_backend = *b;
  }
  check_world(n, count, static_cast<std::int64_t>(v.tp) * v.pp * v.dp, "vllm TP*PP*DP");
  return v;
}

}  // namespace reshard::model::layouts
