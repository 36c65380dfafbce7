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
  // The schedule of a strategy on these parts; empty: model::build_schedule (a sweep shares them
  // between points whose schedules are the same, see sweep.cpp).
  std::function<std::shared_ptr<const model::Schedule>(const model::StrategyParams&)> schedule = {};
};

CompareResult compare(const ScenarioParts& parts, const CompareOptions& options);

}  // namespace reshard::study::detail
