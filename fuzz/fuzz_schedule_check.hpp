// What simulate, exec and check do with a schedule read from a file, for the schedule readers'
// targets: when it claims small-moe-ep's piece count, it is checked against that scenario (its
// GPUs, full validation) and estimated.
#pragma once

#include "fuzz_common.hpp"
#include "reshard/model/cost.hpp"
#include "reshard/model/scenario.hpp"
#include "reshard/model/schedule.hpp"

namespace reshard::fuzz {

inline void check_against_small_moe_ep(const model::Schedule& s) {
  using namespace reshard::model;
  static const LoadedScenario sc = load_scenario(std::filesystem::path(source_path("scenarios/small-moe-ep.yaml")));
  static const TransferSet ts = plan(sc.inventory, sc.source, sc.destination);
  if (s.piece_count != static_cast<std::int32_t>(ts.pieces.size())) return;
  check_schedule_gpus(s, sc.topology.gpu_count());
  validate(s, ts, sc.inventory, sc.source, sc.destination);
  estimate(s, ts, sc.inventory, sc.topology, CostParams{});
}

}  // namespace reshard::fuzz
