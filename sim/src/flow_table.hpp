// Internal to the simulator: a flow problem in flat arrays, and its validated dependency graph.
//
// What validation, the symmetry quotient and the engine read. simulate() builds one from its
// FlowSpecs; simulate_schedule() builds one straight from the ops, so that schedules of tens of
// millions of flows never hold a FlowSpec (two heap vectors and a string each) per flow.
#pragma once

#include <climits>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "reshard/sim/flow_sim.hpp"

namespace reshard::sim {

// Flow i: id id_of(i), bytes[i], latency[i], the links links[link_begin[i] .. link_begin[i + 1])
// (a link may repeat: FlowSpec::links), and it waits for the flows whose ids are
// after[after_begin[i] .. after_begin[i + 1]).
struct FlowTable {
  std::vector<std::int64_t> id;  // empty: flow i has id i
  std::vector<ByteAmount> bytes;
  std::vector<Seconds> latency;
  std::vector<std::int64_t> link_begin{0};
  std::vector<std::int32_t> links;
  std::vector<std::int64_t> after_begin{0};
  std::vector<std::int64_t> after;
  const std::vector<FlowSpec>* specs = nullptr;  // where the flows came from, for their labels

  std::size_t size() const { return bytes.size(); }
  // Room for `flows` flows with `links` link entries and `after` entries in all.
  void reserve(std::size_t flows, std::size_t links_total, std::size_t after_total) {
    bytes.reserve(flows);
    latency.reserve(flows);
    link_begin.reserve(flows + 1);
    after_begin.reserve(flows + 1);
    links.reserve(links_total);
    after.reserve(after_total);
  }
  std::int64_t id_of(std::size_t i) const { return id.empty() ? static_cast<std::int64_t>(i) : id[i]; }
  // Appends a flow: begin_flow, then its links and `after` entries pushed onto `links` and
  // `after`, then end_flow. Its id is its index unless `id` is filled alongside.
  void begin_flow(ByteAmount flow_bytes, Seconds flow_latency) {
    bytes.push_back(flow_bytes);
    latency.push_back(flow_latency);
  }
  void end_flow() {
    link_begin.push_back(static_cast<std::int64_t>(links.size()));
    after_begin.push_back(static_cast<std::int64_t>(after.size()));
  }
  std::string name(std::size_t i) const;  // "flow <id>", with the label when there is one
};

FlowTable flow_table(const std::vector<FlowSpec>& flows);

// Dependencies by flow index (validated: ids known, no cycles).
struct FlowGraph {
  std::vector<std::int32_t> succ_begin, succ;  // CSR: successors of flow i in succ[succ_begin[i], succ_begin[i+1])
  std::vector<std::int32_t> waiting;           // number of predecessors per flow
  bool dense_ids = true;                       // flow i has id i
  // A topological order of the flows (predecessors first); empty when the flows' own order is one
  // (every flow waits only for flows before it, as simulate_schedule and traffic_flows make them).
  std::vector<std::int32_t> order;
};

// Throws FlowError on invalid input (flow_sim.hpp): what the predicates below refuse, unknown
// links and ids, duplicate ids, cycles.
FlowGraph validate_and_index(const FlowNetwork& net, const FlowTable& flows);

// What validate_and_index accepts, for code that checks before it builds a table (the op
// quotient, op_quotient.hpp): at most kMaxFlows flows (indices are int32), capacities > 0 and
// finite, and bytes and latencies >= 0 and finite.
inline constexpr std::size_t kMaxFlows = INT32_MAX - 1;
inline bool valid_capacity(BytesPerSecond c) { return c.value > 0 && std::isfinite(c.value); }
inline bool valid_amount(double x) { return x >= 0 && std::isfinite(x); }

// simulate() on a table (flow_sim.hpp). With `row_of_flow`, a run on the symmetry quotient keeps
// FlowSimResult::timing compact: one row per cell of alike flows (equal times; bottleneck -1), and
// (*row_of_flow)[f] the row of flow f; it stays empty when timing is per flow. (Per-flow timing of
// the tuned kimi-k3 schedule is 1.6 GB written and read once.)
FlowSimResult simulate_table(const FlowNetwork& network, const FlowTable& flows, const SimOptions& options,
                             std::vector<std::int32_t>* row_of_flow = nullptr);

}  // namespace reshard::sim
