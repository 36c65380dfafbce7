// compare() on a scenario whose parts were loaded elsewhere: a sweep shares topologies,
// inventories and transfer sets between the points that have them in common.
#pragma once

#include <functional>
#include <memory>

#include "reshard/study/compare.hpp"

namespace reshard::study::detail {

struct ScenarioParts {
  const model::Scenario& scenario;
  const model::Inventory& inventory;
  const model::Topology& topology;
  const model::ShardMap& source;
  const model::ShardMap& destination;
  const model::TransferSet& transfers;
  // Every GPU's staging budget (model::staging_budgets), before CompareOptions::max_staging.
  const std::vector<model::Bytes>& budget;
  // Where the schedules built on these parts are kept: called with a strategy and the way to build
  // its schedule, returns the schedule (a sweep shares them between points whose schedules are the
  // same, see sweep.cpp); empty: each is built when needed.
  using Build = std::function<model::Schedule()>;
  std::function<std::shared_ptr<const model::Schedule>(const model::StrategyParams&, const Build&)> cache = {};
};

CompareResult compare(const ScenarioParts& parts, const CompareOptions& options);

}  // namespace reshard::study::detail
