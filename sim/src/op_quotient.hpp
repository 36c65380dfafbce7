// Internal to the simulator: the symmetry quotient of a schedule found on its operations instead of
// its flows, and the simulation through it (simulate_schedule without ScheduleSimOptions::keep_flows).
//
// simulate_schedule turns op i into k_i equal sub-flows, one per path of its route, plus a join flow
// when k_i > 1 and another op waits for it (schedule_sim.hpp). The sub-flows of one op share bytes,
// latency and predecessors and differ only in their paths, and a route is shared by every op
// between one pair of GPUs. So the coarsest equitable partition of the flows (flow_quotient.hpp)
// can be refined on ops, paths and routes:
//   - op colour: (bytes per sub-flow, latency, multiset of its predecessors' colours as
//     predecessors), where op a as a predecessor is its sub-flow (colour(a), colour of its path)
//     when k_a = 1, and its join flow (colour(a), colour of its route) when k_a > 1;
//   - path colour: the multiset of its links' colours (a link a path lists k times counts k
//     times: FlowSpec::links); route colour: the multiset of its paths' colours;
//   - link colour: (capacity, group), then the multiset of (colour(i), colour(p)) over the
//     sub-flows (i, p) crossing it.
// Sub-flow (i, p) is in flow cell (colour(i), colour(p)), join(i) in (colour(i), colour(route(i))).
// Once nothing splits, the flow-level conditions hold (equal bytes, latency, link cell counts and
// predecessor cell counts within a flow cell; equal capacity and flow cell counts within a link
// cell): the same refinement as find_quotient's, on the same information, so the same partition,
// numbered the same way (cells in order of their first flow, link cells of their first link).
//
// Link multisets by route. A link's multiset is hashed as the sum, over the sub-flows (i, p)
// crossing it, of A(colour(i)) * B(colour(p)) (mod 2^64; two independent pairs of hashes). Grouped
// by route r, that is the sum over the paths p of r through the link of B(p) * C_r, with C_r the
// sum of A(colour(i)) over the ops i on r. An op changing colour changes C_r; a path changing
// colour changes B(p): either costs the links of a route's paths, never the sub-flows of its ops.
// Two different multisets collide only where a random bilinear form vanishes on their difference
// (about 2^-60 per pair and hash; both must collide).
//
// Cost per round: the ops whose predecessors or colour changed, and the paths of the routes
// touched; find_quotient's is per flow and per flow-link incidence (several flows per op, several
// links per flow).
#pragma once

#include <cstdint>
#include <vector>

#include "reshard/sim/schedule_sim.hpp"

namespace reshard::sim {

// A schedule's ops as the quotient sees them.
struct OpProblem {
  // Route r's paths are [route_path_begin[r], route_path_begin[r + 1]); path p's links are
  // path_links[path_link_begin[p] .. path_link_begin[p + 1]), where a link may repeat (a sub-flow
  // loads a link it lists k times with k times its rate, FlowSpec::links).
  std::vector<std::int32_t> route_path_begin{0};
  std::vector<std::int64_t> path_link_begin{0};
  std::vector<std::int32_t> path_links;
  // Op i: its route, the bytes and latency of each of its sub-flows, and the ops it waits for
  // (earlier ops, by index) in after[after_begin[i] .. after_begin[i + 1]).
  std::vector<std::int32_t> route;
  std::vector<ByteAmount> share;
  std::vector<Seconds> latency;
  std::vector<std::int64_t> after_begin{0};
  std::vector<std::int32_t> after;
  Seconds overheads;  // > 0: one more flow, after every op that no op waits for

  std::size_t ops() const { return route.size(); }
  std::int32_t sub_flows(std::size_t i) const { return route_path_begin[route[i] + 1] - route_path_begin[route[i]]; }
};

enum class OpQuotientOutcome {
  simulated,   // `out` holds the result
  not_paying,  // more cells than half the flows, or too many rounds: simulate every flow instead
  unchecked,   // input the flow path's validation must name (a non-positive capacity, ...)
};

// Simulates `ops` (which make `flow_count` flows) on `net` through the quotient described above
// and fills out.result, out.ops, out.op_of_flow and out.join_flows as simulate_schedule's flow path
// would, with result.timing one row per flow cell. Changes nothing unless it returns `simulated`.
OpQuotientOutcome simulate_op_quotient(const FlowNetwork& net, const OpProblem& ops, const SimOptions& options,
                                       std::size_t flow_count, ScheduleSimulation& out);

}  // namespace reshard::sim
