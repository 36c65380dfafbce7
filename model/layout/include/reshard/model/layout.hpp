// Layouts: how a parallel framework places every weight tensor on its ranks (docs/design.md §5).
//
// Logical coordinates are a tensor's global index space in HF naming. A Box is a product of
// half-open intervals in that space. A layout becomes a ShardMap: for every tensor, the distinct
// boxes ("shards") that ranks hold, each with the *set* of ranks holding it (replicas are kept as a
// set, never expanded). Rank sets are affine grids
//     { start + i_1 * stride_1 + ... + i_k * stride_k  :  0 <= i_j < count_j }
// because every framework numbers ranks as a mixed-radix product of its parallel dimensions, so the
// replicas of one shard (DP copies, replicated dimensions of a mesh) form one grid. Rank sets are
// interned in the ShardMap: a Shard refers to its set by id, and pieces of a plan carry those ids.
//
// A rank's local memory is an ordered list of buffers, each an ordered list of segments
// (tensor, box): a fused buffer (vLLM qkv_proj / gate_up_proj, Megatron linear_qkv with its
// per-query-group interleave, linear_fc1 = [gate; up]) is several segments.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

#include "reshard/model/inventory.hpp"
#include "reshard/model/topology.hpp"

namespace reshard::model {

using Rank = std::int32_t;

struct Interval {
  std::int64_t lo = 0;
  std::int64_t hi = 0;  // exclusive
  std::int64_t size() const { return hi > lo ? hi - lo : 0; }
  friend bool operator==(const Interval&, const Interval&) = default;
};

struct Box {
  std::vector<Interval> dims;
  std::int64_t elements() const;
  bool empty() const { return elements() == 0; }
  friend bool operator==(const Box&, const Box&) = default;
};
// The intersection of two boxes of the same rank (may be empty).
Box intersect(const Box& a, const Box& b);
Box full_box(const TensorInfo& t);
std::string to_string(const Box& b);  // "[0:128, 0:7168]"

struct RankGrid {
  Rank start = 0;
  struct Axis {
    std::int32_t count = 1;
    std::int32_t stride = 0;
    friend bool operator==(const Axis&, const Axis&) = default;
  };
  std::vector<Axis> axes;
  std::int64_t size() const;
  friend bool operator==(const RankGrid&, const RankGrid&) = default;
};

class RankSet {
 public:
  RankSet() = default;
  explicit RankSet(std::vector<RankGrid> grids) : grids_(std::move(grids)) {}
  static RankSet single(Rank r) { return RankSet({RankGrid{r, {}}}); }
  const std::vector<RankGrid>& grids() const { return grids_; }
  std::int64_t size() const;  // grids of one set never overlap
  bool contains(Rank r) const;
  void for_each(const std::function<void(Rank)>& f) const;
  std::vector<Rank> to_vector() const;  // sorted
  std::string to_string() const;        // "{0-7}", "{3,11,19,...} (8 ranks)"
  friend bool operator==(const RankSet&, const RankSet&) = default;

 private:
  std::vector<RankGrid> grids_;
};

using RankSetId = std::int32_t;

struct Shard {
  Box box;
  RankSetId ranks = -1;
};

struct Segment {
  std::int32_t tensor = -1;
  Box box;
};

struct LocalBuffer {
  std::string name;  // framework-side name, e.g. "model.layers.3.self_attn.qkv_proj.weight"
  std::vector<Segment> segments;
};

// ---- Layout specifications (what a scenario file says) -------------------------------------------

struct MegatronSpec {
  std::int32_t tp = 1, pp = 1, cp = 1, dp = 0 /* 0: derived from the GPU count */, ep = 1;
  std::int32_t etp = 0;                        // expert tensor parallelism; 0: equal to tp (Megatron's default)
  std::int32_t vpp = 1;                        // virtual pipeline stages per rank
  // How the decoder layers split over the PP*VPP (virtual) stages. Megatron splits evenly and refuses
  // an uneven split unless told: either every count (`layers_per_stage`, in virtual-stage order, as
  // --pipeline-model-parallel-layout does), or the first and/or last stage's count
  // (--decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers), the stages between
  // sharing the rest evenly. MTP layers are not counted: they live on the last stage.
  std::vector<std::int32_t> layers_per_stage{};
  std::optional<std::int32_t> first_stage_layers{}, last_stage_layers{};
  std::int32_t expert_tp() const { return etp > 0 ? etp : tp; }
};

// Where expert parallelism puts the E + R physical expert slots (R redundant, EPLB) on the EP ranks
// (vLLM --expert-placement-strategy): `Linear` gives EP rank q the contiguous slots
// [q*b + min(q, m), (q+1)*b + min(q+1, m)), b = (E+R) / EP, m = (E+R) % EP (the first m ranks one
// more); `RoundRobin` gives slot s to EP rank s % EP.
enum class ExpertPlacement : std::uint8_t { Linear, RoundRobin };
const char* to_string(ExpertPlacement p);  // "linear", "round_robin"

// vLLM's --all2all-backend (the MoE all-to-all of an engine with data and expert parallelism): it
// decides whether round-robin expert placement survives (DeepEP low-latency and NIXL EP only) and
// whether the MoE runs sequence parallel with unsplit shared experts.
enum class VllmAll2All : std::uint8_t {
  AllgatherReducescatter,  // vLLM's default
  Naive,
  Pplx,
  DeepepHighThroughput,
  DeepepLowLatency,
  FlashinferAll2allv,
  NixlEp,
};
const char* to_string(VllmAll2All b);  // as vLLM spells it: "allgather_reducescatter", ...
std::optional<VllmAll2All> vllm_all2all_named(const std::string& name);
const std::vector<std::string>& vllm_all2all_names();

// What vLLM's `dp` means (see model/layout/src/layout_vllm.cpp for the sharding).
enum class VllmDpMode : std::uint8_t {
  Engines,       // dp independent engines, each a whole copy (EP groups of `ep` ranks when set)
  DataParallel,  // one deployment with --data-parallel-size dp: MoE layers span TP x DP
};
const char* to_string(VllmDpMode m);  // "engines", "data_parallel"

struct VllmSpec {
  std::int32_t tp = 1, pp = 1, dp = 1;
  // Engines mode: 0, or the size of an expert group (a multiple of tp dividing tp * dp; each group is
  // one engine of data_parallel_size ep / tp with expert parallelism). DataParallel mode: 0 or tp * dp.
  std::int32_t ep = 0;
  std::int32_t redundant_experts = 0;  // EPLB: extra expert replicas
  VllmDpMode dp_mode = VllmDpMode::Engines;
  bool enable_expert_parallel = false;  // --enable-expert-parallel (implied by ep > 0)
  ExpertPlacement expert_placement = ExpertPlacement::Linear;  // as asked (`expert_placement`)
  VllmAll2All all2all_backend = VllmAll2All::AllgatherReducescatter;
  // gpt-oss experts under MoE tensor parallelism: vLLM slices the intermediate dimension in chunks
  // of whole blocks of this many rows (32 when the experts are served in MXFP4, 1 in BF16); set by
  // the scenario from the destination precision (model/layout/src/layout_vllm.cpp).
  std::int32_t gpt_oss_expert_block = 1;
  // The EP size in effect: 0 when expert parallelism is off.
  std::int32_t expert_parallel_size() const;
  // The placement vLLM applies (determine_expert_placement_strategy): round_robin falls back to
  // linear for a model without expert groups (`expert_groups` <= 1: num_expert_group), with
  // redundant experts (EPLB), and in an engine with data parallelism (EP > TP: all-to-all kernels)
  // unless the all-to-all backend is DeepEP low-latency or NIXL EP. `why`, when given, gets the
  // reason of a fallback ("" when none).
  ExpertPlacement placement_applied(std::int64_t expert_groups, std::string* why = nullptr) const;
};

// SGLang (`python -m sglang.launch_server` arguments; see model/layout/src/layout_sglang.cpp).
struct SglangSpec {
  std::int32_t tp = 1;  // --tp-size
  std::int32_t dp = 1;  // --dp-size
  bool enable_dp_attention = false;     // --enable-dp-attention: attention TP = tp / dp, world = tp
  std::int32_t ep = 1;                  // --ep-size (MoE TP = tp / ep)
  std::int32_t moe_dense_tp = 0;        // --moe-dense-tp-size: 0 unset (= tp), or 1
  bool enable_dp_lm_head = false;       // --enable-dp-lm-head: lm_head over the attention TP group
  bool a2a_moe = false;                 // --moe-a2a-backend deepep / mooncake: shared experts unsplit
  std::int32_t redundant_experts = 0;   // --ep-num-redundant-experts
  // gpt-oss experts under MoE tensor parallelism: 1, an even split of the (gate, up) pairs (FusedMoE's
  // loader, BF16); 32 when served in MXFP4, ceil-sized chunks of whole blocks (set by the scenario).
  std::int32_t gpt_oss_expert_block = 1;
  // Independent servers, each launched with the arguments above, on consecutive GPU blocks (as
  // vLLM's dp_mode engines): eight TP16 servers with DP attention are servers: 8.
  std::int32_t servers = 1;
  std::int32_t attention_tp() const { return enable_dp_attention && dp > 0 ? tp / dp : tp; }
  std::int32_t server_world() const { return enable_dp_attention ? tp : tp * dp; }
  std::int32_t world() const { return server_world() * servers; }
};

struct Placement {
  enum class Kind : std::uint8_t { Replicate, Shard } kind = Kind::Replicate;
  std::int32_t dim = 0;
  friend bool operator==(const Placement&, const Placement&) = default;
};

struct DTensorSpec {
  std::vector<std::int32_t> mesh_shape;
  std::vector<std::string> mesh_names;
  // (glob, placements per mesh dimension), in file order; "default" applies to every tensor and
  // the last matching glob wins.
  std::vector<std::pair<std::string, std::vector<Placement>>> placements;
};

struct LayoutSpec {
  std::variant<MegatronSpec, VllmSpec, DTensorSpec, SglangSpec> spec;
  std::vector<GpuId> gpus;  // rank -> topology GPU
  std::string framework() const;
  // "megatron TP4 PP8 EP16 DP4", "vllm TP8 DP16", "vllm TP8 DP2 (data parallel, EP16)",
  // "sglang TP16 DP-attention 8 EP16"
  std::string describe() const;
};

// ---- The ShardMap -------------------------------------------------------------------------------

class ShardMap {
 public:
  std::int32_t world_size() const { return static_cast<std::int32_t>(gpus_.size()); }
  const std::vector<GpuId>& gpus() const { return gpus_; }
  GpuId gpu_of(Rank r) const { return gpus_[static_cast<std::size_t>(r)]; }
  const std::vector<Shard>& shards(std::int32_t tensor) const {
    return by_tensor_[static_cast<std::size_t>(tensor)];
  }
  std::int32_t tensor_count() const { return static_cast<std::int32_t>(by_tensor_.size()); }
  const RankSet& rank_set(RankSetId id) const { return rank_sets_[static_cast<std::size_t>(id)]; }
  std::int32_t rank_set_count() const { return static_cast<std::int32_t>(rank_sets_.size()); }
  // The GPUs of rank set id's ranks, sorted (a GPU twice when two of the ranks share it).
  std::vector<GpuId> gpus_of(RankSetId id) const;
  const std::string& description() const { return description_; }
  // How the builder applied a framework's convention where it departs from what the layout asked
  // (vLLM's round_robin expert placement falling back to linear, with the reason); `plan` prints
  // them.
  const std::vector<std::string>& conventions() const { return conventions_; }
  void add_convention(std::string note) { conventions_.push_back(std::move(note)); }
  // A rank's routed experts in the order of its physical slots (vLLM with expert parallelism: slot
  // s holds expert s mod E, EPLB's redundant copies included), which a framework's fused expert
  // tensor follows; empty where the layout keeps no such order (experts in ascending id).
  const std::vector<std::int64_t>& expert_slots(Rank r) const;
  void set_expert_slots(Rank r, std::vector<std::int64_t> experts);

  // Sum over ranks of the bytes each holds.
  Bytes total_bytes_held(const Inventory& inv) const;
  // Bytes each rank holds.
  std::vector<Bytes> bytes_per_rank(const Inventory& inv) const;

  // Mutation while building (used by the layout builders).
  RankSetId intern(const RankSet& s);
  void add_shard(std::int32_t tensor, Box box, RankSetId ranks);
  void add_tensors(std::int32_t count);  // `count` more tensors, without shards yet
  // Replaces every shard box of `tensor` by f(box) (a precision change packing a weight's elements).
  void map_boxes(std::int32_t tensor, const std::function<Box(const Box&)>& f);
  // The same layout without the ranks `lost` (sorted): every rank set less those ranks, a shard left
  // with no rank dropped; the world, its GPUs and the ranks' expert slots unchanged. `remap`
  // receives, per rank set id of this map, its id in the new one (-1: no rank left). A set that
  // loses no rank keeps its grids; one that does becomes its surviving ranks in runs.
  ShardMap restricted_to(const std::vector<Rank>& lost, std::vector<RankSetId>& remap) const;
  ShardMap(std::int32_t tensors, std::vector<GpuId> gpus, std::string description);

 private:
  std::vector<GpuId> gpus_;
  std::vector<std::vector<Shard>> by_tensor_;
  std::vector<RankSet> rank_sets_;
  std::unordered_multimap<std::size_t, RankSetId> intern_index_;  // hash of a set -> its ids
  std::string description_;
  std::vector<std::string> conventions_;
  std::vector<std::vector<std::int64_t>> expert_slots_;  // per rank (may be shorter: none past its end)
};

// Builds the ShardMap of a layout over an inventory. Throws PlanError when the sizes do not fit
// (do not divide the GPU count or a tensor dimension where evenness is required, a layout larger
// than its GPU set, a placement on a dimension the tensor lacks).
ShardMap build_shard_map(const Inventory& inv, const LayoutSpec& spec);

// Checks that the shards of every tensor are disjoint and cover it exactly (throws PlanError naming
// the tensor otherwise). build_shard_map calls it.
void verify_coverage(const Inventory& inv, const ShardMap& map);

// A rank's memory as the framework lays it out: ordered buffers of ordered segments.
std::vector<LocalBuffer> local_buffers(const Inventory& inv, const LayoutSpec& spec, const ShardMap& map, Rank r);

}  // namespace reshard::model
