// The --dump-flows file (docs/design.md §9): one JSON object that any max-min simulator can replay.
//
//   {"links": [{"id": 0, "capacity_Bps": 5e10}, ...],
//    "flows": [{"id": 7, "bytes": 1048576, "links": [0, 3], "latency_s": 1.5e-6, "after": [2, 5],
//               "release_s": ..., "start_s": ..., "finish_s": ...}, ...]}
//
// Link ids are the indices of FlowNetwork::capacity (the file lists them 0..n-1); a link listed k
// times in "links" is loaded k times (FlowSpec::links). release_s is when the last predecessor
// finished (0 without one) and start_s = release_s + latency_s. Numbers are written with 17
// significant digits, so reading a dump back and simulating it reproduces the same times bit for
// bit. No other key is part of the format.
#pragma once

#include <filesystem>
#include <iosfwd>
#include <vector>

#include <nlohmann/json.hpp>

#include "reshard/sim/flow_sim.hpp"

namespace reshard::sim {

// A flow's bytes in JSON: whole counts as integers, an ECMP share that is not whole as a number
// that reads back to the same double (the dump and the trace).
nlohmann::json bytes_json(ByteAmount b);

// The dump as a JSON value; `result` must come from simulate(network, flows).
nlohmann::json flows_to_json(const FlowNetwork& network, const std::vector<FlowSpec>& flows,
                             const FlowSimResult& result);
void write_flow_dump(const std::filesystem::path& path, const FlowNetwork& network,
                     const std::vector<FlowSpec>& flows, const FlowSimResult& result);

// A dump read back: the network, the flows and the times recorded in it (release, start, finish).
struct FlowDump {
  FlowNetwork network;
  std::vector<FlowSpec> flows;
  std::vector<FlowTiming> recorded;  // bottleneck is -1 (not part of the file)
};

// Reads a dump. The timing keys are optional (a hand-written flow set may leave them out; they are
// then 0), and so are latency_s (0) and after (none). Throws model::ConfigError naming the file and
// the key (e.g. "flows[3].links") on bad input: missing, mistyped or unknown keys (an unknown one
// could change what the flows mean), link ids that are not 0..n-1 in order.
FlowDump read_flow_dump(const std::filesystem::path& path);
FlowDump flow_dump_from_json(const nlohmann::json& j, const std::string& source_name);

}  // namespace reshard::sim
