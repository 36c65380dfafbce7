// Chrome trace (chrome://tracing, Perfetto) of a simulation: one process per track (a GPU, or any
// resource the caller names) with every flow on it as a complete event ("ph": "X"), spread over as
// many thread lanes as needed so that events of a lane never overlap; and, per link group, a counter
// ("ph": "C") with the group's utilization in percent over time. Times are in microseconds.
#pragma once

#include <filesystem>
#include <iosfwd>
#include <string>
#include <vector>

#include "reshard/sim/flow_sim.hpp"

namespace reshard::sim {

struct TraceLayout {
  std::vector<std::string> track_names;              // e.g. "gpu 0", "gpu 1", ...
  std::vector<std::vector<std::int32_t>> flow_tracks;  // per flow: the tracks it appears on (sender, receiver)
  std::vector<std::string> flow_names;               // per flow, optional: event name (default: label or "flow <id>")
  // Link groups for the utilization counters: the same grouping as SimOptions::link_group (the result
  // must have been simulated with it), with one name per group.
  std::vector<std::int32_t> link_group;
  std::vector<std::string> group_names;
};

void write_chrome_trace(std::ostream& out, const FlowNetwork& network, const std::vector<FlowSpec>& flows,
                        const FlowSimResult& result, const TraceLayout& layout);
void write_chrome_trace(const std::filesystem::path& path, const FlowNetwork& network,
                        const std::vector<FlowSpec>& flows, const FlowSimResult& result, const TraceLayout& layout);

}  // namespace reshard::sim
