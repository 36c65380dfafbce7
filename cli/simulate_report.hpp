// Output of `reshard simulate`, shared by its modes (raw traffic, and schedules converted to flows):
// the readable report (makespan, critical path, busiest links) and the --json object.
#pragma once

#include <cstddef>
#include <iosfwd>
#include <vector>

#include <nlohmann/json.hpp>

#include "reshard/sim/flow_sim.hpp"

namespace reshard::cli {

// {"makespan_s", "transfers", "flows", "events", "wall_s"}.
nlohmann::json simulation_json(const sim::FlowSimResult& result, std::size_t transfers, std::size_t flows);

// Summary fields, the critical path (at most `path_rows` steps) and the `top_links` busiest links.
void print_simulation_report(std::ostream& out, const sim::FlowNetwork& network, const std::vector<sim::FlowSpec>& flows,
                             const sim::FlowSimResult& result, std::size_t transfers, std::size_t path_rows = 12,
                             std::size_t top_links = 10);

}  // namespace reshard::cli
