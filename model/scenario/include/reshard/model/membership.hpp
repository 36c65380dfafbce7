// A refit over a changed membership: some GPUs lost (docs/robustness.md, "Losing GPUs").
//
// A lost source GPU holds nothing any more: every shard it held comes from the other ranks of its
// rank set (DP replicas, replicated tensors), and a shard no surviving rank holds is named, with its
// bytes, in one UnheldError. A lost destination GPU takes its serving unit out (serving_unit_ranks):
// the engine it belonged to stops serving, and none of that unit's ranks needs anything; the other
// units are still served. The survivors' layouts are the scenario's ShardMaps restricted to the
// surviving ranks (ShardMap::restricted_to), so every later stage (plan, lower bound, schedules,
// simulation) runs on them unchanged; restrict_transfers (model/planner.hpp) maps an existing plan
// onto them without intersecting again.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "reshard/model/errors.hpp"
#include "reshard/model/scenario.hpp"

namespace reshard::model {

// The destination's serving units: consecutive blocks of this many ranks that a framework runs as
// one engine, so that losing one GPU stops the whole block:
//   vllm engines: TP x PP ranks, or EP x PP with expert parallelism (one engine of
//     data_parallel_size EP/TP, its ranks numbered contiguously: model/layout/src/layout_vllm.cpp);
//   vllm data_parallel: the whole deployment (its MoE layers span TP x DP);
//   sglang: one server (SglangSpec::server_world);
//   megatron, dtensor: the whole world (one job).
std::int32_t serving_unit_ranks(const LayoutSpec& spec, std::int32_t world);

// What a changed membership does to a scenario.
struct MembershipChange {
  std::vector<GpuId> lost;              // sorted, distinct
  std::vector<GpuId> lost_source;       // those that hold a source rank
  std::vector<GpuId> lost_destination;  // those that hold a destination rank
  std::int32_t unit_ranks = 0;          // ranks per destination serving unit
  std::vector<std::int32_t> served;     // destination units still served (index = rank / unit_ranks)
  std::vector<std::int32_t> dropped;    // units a lost GPU took out
  Bytes source_bytes_lost;              // bytes the lost source ranks held, every one still held elsewhere
  std::int32_t units() const { return static_cast<std::int32_t>(served.size() + dropped.size()); }
};

// A tensor's bytes that no surviving source GPU holds, though a surviving destination needs them.
struct UnheldTensor {
  std::int32_t tensor = -1;
  std::string name;
  Bytes bytes;
};

// Losing every holder of some shard: the tensors and bytes no survivor holds (all of them, in
// tensor order); the message names the option, its value, the total and the first few tensors.
class UnheldError : public PlanError {
 public:
  UnheldError(const std::string& message, std::vector<UnheldTensor> tensors, Bytes total)
      : PlanError(message), tensors_(std::move(tensors)), total_(total) {}
  const std::vector<UnheldTensor>& tensors() const { return tensors_; }
  Bytes total() const { return total_; }

 private:
  std::vector<UnheldTensor> tensors_;
  Bytes total_;
};

// The scenario's layouts over the survivors, and how the full plan's rank sets map onto them.
struct Survivors {
  MembershipChange change;
  ShardMap source, destination;
  std::vector<RankSetId> source_sets, destination_sets;  // rank set id of the full maps -> id here (-1: none left)
};

// `lost` as `option` gave it (its text `value`): ConfigError naming the option and value for a GPU
// the topology does not have or that neither layout uses, or an empty list; PlanError (same names)
// when every destination serving unit is lost; UnheldError when a shard keeps no surviving holder.
Survivors survivors(const LoadedScenario& sc, std::vector<GpuId> lost, const std::string& option = "--without",
                    const std::string& value = "");
// `text` ("0-7,12") read as GPU indices: ConfigError naming `option` for text that is not a list.
std::vector<GpuId> parse_lost_gpus(const std::string& text, const std::string& option = "--without");

}  // namespace reshard::model
