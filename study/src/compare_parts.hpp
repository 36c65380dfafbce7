// compare() on a scenario whose parts were loaded elsewhere: a sweep shares topologies,
// inventories and transfer sets between the points that have them in common.
#pragma once

#include "reshard/study/compare.hpp"

namespace reshard::study::detail {

struct ScenarioParts {
  const model::Scenario& scenario;
  const model::Inventory& inventory;
  const model::Topology& topology;
  const model::ShardMap& source;
  const model::ShardMap& destination;
  const model::TransferSet& transfers;
};

CompareResult compare(const ScenarioParts& parts, const CompareOptions& options);

}  // namespace reshard::study::detail
