// Raw GPU-to-GPU traffic on a Topology turned into simulator flows (`reshard simulate --topology T
// --flows F.csv`, docs/design.md §9).
//
// A transfer (src GPU, dst GPU, bytes, after) follows Topology::route(src, dst). Over a route with k
// equal paths it becomes k sub-flows of bytes/k each (equal fractional shares, which add up to the
// transfer's bytes), each its own flow on its path's links, with the route's latency. A transfer that waits for transfer X waits for every sub-flow of X. The network is the
// topology's links (flow link i = topology link i) with capacity = bandwidth.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "reshard/model/topology.hpp"
#include "reshard/sim/flow_sim.hpp"
#include "reshard/sim/trace.hpp"

namespace reshard::sim {

struct Transfer {
  std::int64_t id = 0;
  model::GpuId src = 0, dst = 0;
  Bytes bytes;
  std::vector<std::int64_t> after;  // transfer ids
  int line = 0;                     // line in the CSV file (0 when not from a file)
};

// Reads `id,src,dst,bytes[,after]` with a header line; `after` is a ';'-separated list of ids,
// possibly empty. Bytes take an integer or a size with a unit ("64MiB"). Blank lines and lines
// starting with '#' are skipped. Throws model::ConfigError(file, line, column, what) on bad rows.
std::vector<Transfer> read_transfers_csv(const std::filesystem::path& path);

struct TrafficFlows {
  FlowNetwork network;
  std::vector<FlowSpec> flows;           // flow ids are 0..n-1 (sub-flows numbered consecutively)
  std::vector<std::size_t> transfer_of;  // per flow: index of its transfer
  std::vector<std::int32_t> link_group;  // per link: its LinkKind, for SimOptions / TraceLayout
  std::vector<std::string> group_names;  // per LinkKind
};

// Throws model::ConfigError (file and line of the transfer, when known) for unknown GPUs, src == dst,
// duplicate ids or unknown `after` ids.
TrafficFlows traffic_flows(const model::Topology& topology, const std::vector<Transfer>& transfers,
                           const std::string& source_name = "");

// Trace layout for traffic flows: one track per GPU, each flow on its sender's and receiver's track.
TraceLayout traffic_trace_layout(const model::Topology& topology, const std::vector<Transfer>& transfers,
                                 const TrafficFlows& traffic);

}  // namespace reshard::sim
