// The flow-level discrete-event simulator (docs/design.md §9).
//
// Input: a network of capacitated resources ("links": network links, NVLink ports, a GPU's memory
// bandwidth, ...) and a set of flows, each with a size, the list of links it crosses, a fixed latency
// and the flows it must wait for. Output: when each flow was released, started and finished.
//
// Life of a flow (the contract other tools replay, see write_flow_dump):
//   released  when all flows in `after` have finished (release = 0 without predecessors);
//   started   = release + latency; from then on it is *active*;
//   active    it sends at the rate max-min fairness gives it on its links (below);
//   finished  when its bytes are sent; from then on it loads no link. A flow of 0 bytes, or with
//             no links (pure latency / overhead), finishes at its start.
// Successors are released at the finish. Rates are recomputed whenever a flow becomes active or
// finishes, and are constant in between, so the simulation is exact (piecewise linear), not
// time-stepped.
//
// Repeated links. A link listed k times in a flow's `links` carries that flow k times: the flow
// loads it with k x_f, and k * bytes cross it in the link statistics. A chain op's data flow
// (sim/src/schedule_sim.cpp) lists each link once per hop of the chain that crosses it: an ingress
// GPU's NVLink port once per fan-out hop that leaves it.
//
// Max-min fairness. Active flow f has rate x_f; k_fl is how many times f lists link l. Each link l
// has capacity C_l and the loads must fit: sum_f k_fl x_f <= C_l. An allocation is max-min fair when
// no x_f can be raised without lowering some x_g <= x_f; equivalently every flow crosses at least one
// *bottleneck* link that is saturated and on which no other flow gets more than it does.
// Progressive filling computes it: start every rate at 0 and raise all unfixed rates together. For
// link l with remaining capacity R_l (capacity minus the loads already fixed on it) and unfixed
// weight W_l = sum of k_fl over its unfixed flows, the common level at which l saturates is
// R_l / W_l. The link with the smallest such share saturates first: every unfixed flow on it is
// fixed at that share, and k_fg times the share is subtracted from the remaining capacity of every
// other link g those flows cross. Repeat with the next smallest share.
// Shares never decrease during the filling: if s = R_k/W_k is the smallest share and link l loses
// weight m of flows fixed at s, then (R_l - m s)/(W_l - m) >= R_l/W_l because s <= R_l/W_l. Each
// step fixes at least one flow, so the filling ends after at most (number of flows) steps; links
// without unfixed flows drop out. The result is unique, which is why an independent solver
// (SimGrid's lmm with equal weights) gives the same rates.
//
// Speed: flows with identical link lists (and weights) form one class with a multiplicity (they
// always get the same rate), so the filling runs over classes, weighted by multiplicity. The rates
// come from a max-min solver over classes and weighted links (sim/src/maxmin.hpp): a change (a
// flow starting or finishing) refills only the classes it reaches: the touched classes are
// refilled with every other class frozen at its rate, the result is checked against the max-min
// conditions on the links they cross, and a link that fails brings in the frozen classes that
// break it, until none fails (proof on MaxMinSolver::fill). A change that spreads past
// SimOptions::local_refill_limit classes is refilled over its whole reach at once, by level cut
// (MaxMinSolver::fill_component). The event loop (sim/src/flow_sim.cpp) keeps the bytes served
// per flow of a class as a function of time; its flows' finish points sit in a heap, so a class's
// next finish is one subtraction and one division, and only classes whose rate changed get a new
// finish event. Where many classes share each link (bursts of transfers all active at once), a
// second engine keeps one rate per bottleneck link instead and refills groups of classes
// (sim/src/group_engine.cpp; SimOptions::solver picks one, the answer is the same).
// Events of equal time (to 1e-12 relative, the batch window) are handled together with one refill
// (the rounding tolerances are in sim/src/tolerances.hpp).
// Before all this, flows the problem treats alike (same bytes, latency, kinds of links and of
// predecessors, found by colour refinement) are merged into one flow per class with per-link
// weights, and get their class's times back (SimOptions::symmetry_quotient; proof on
// sim/src/flow_quotient.hpp).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "reshard/model/errors.hpp"
#include "reshard/model/progress.hpp"
#include "reshard/model/units.hpp"

namespace reshard::sim {

using model::ByteAmount;
using model::Bytes;
using model::BytesPerSecond;
using model::Seconds;

// A flow, as given to the simulator.
struct FlowSpec {
  std::int64_t id = 0;                // unique among the flows
  ByteAmount bytes;                   // >= 0; fractional for an equal ECMP share
  std::vector<std::int32_t> links;    // indices into FlowNetwork::capacity; may be empty; a link
                                      // listed k times is loaded k times the flow's rate
  Seconds latency;                    // >= 0: wait between release and start
  std::vector<std::int64_t> after;    // ids of flows that must finish before this one is released
  std::string label;                  // free text for reports and traces
};

// The shared resources. Link i has capacity[i] (> 0); link_names is empty or one name per link.
struct FlowNetwork {
  std::vector<BytesPerSecond> capacity;
  std::vector<std::string> link_names;
  std::string link_name(std::int32_t link) const;  // the name, or "link <i>"
};

struct FlowTiming {
  Seconds release, start, finish;
  std::int32_t bottleneck = -1;  // link whose saturation set the flow's last rate; -1 when none
};

// One step of the critical path: the flow that finished last, then the predecessor that released
// it, and so on back to a flow without predecessors.
struct CriticalStep {
  std::int64_t flow_id = 0;
  std::size_t flow_index = 0;   // index into the input vector
  Seconds release, start, finish;
  std::int32_t bottleneck = -1;  // as FlowTiming::bottleneck
};

struct LinkStats {
  ByteAmount bytes;    // total bytes that crossed the link
  Seconds busy;        // time during which at least one active flow crossed it
  double utilization;  // bytes / (capacity * makespan); 0 when the makespan is 0
  // simulate_schedule only: the link can never be saturated (its load is bounded below its
  // capacity by the links that bound its flows, schedule_sim.hpp), so it was left out of the
  // simulation; bytes and utilization are counted, busy is not tracked (0).
  bool redundant = false;
};

// Allocated rate of one link group at a time (only when SimOptions::link_group is given): from
// `time` on, the flows on the group's links together carry `rate` (summed over the group's links).
struct GroupSample {
  Seconds time;
  std::int32_t group = 0;
  BytesPerSecond rate;
};

// Which engine computes the rates (both give the max-min allocation; docs/simulator.md, "How it is fast"):
// Classes refills the classes of flows a change reaches (maxmin.hpp); Groups keeps one rate per
// bottleneck link and refills the groups (sim/src/group_engine.cpp); Auto runs Classes, watched,
// and hands the problem to Groups once the class refills cost more steps than the group refills
// would (docs/simulator.md, "Which engine runs"); a link-kind timeline keeps Classes.
enum class RateSolver { Auto, Classes, Groups };
struct RateSolverName {
  RateSolver solver;
  std::string_view name;
};
inline constexpr std::array<RateSolverName, 3> kRateSolvers{
    {{RateSolver::Auto, "auto"}, {RateSolver::Classes, "classes"}, {RateSolver::Groups, "groups"}}};
inline std::string_view to_string(RateSolver s) {
  for (const auto& e : kRateSolvers)
    if (e.solver == s) return e.name;
  return "?";
}

struct SimOptions {
  // Optional: group index per link (size = number of links; -1 for "no group"), for the
  // utilization timeline in FlowSimResult::group_timeline. Empty: no timeline is recorded.
  std::vector<std::int32_t> link_group;
  // A refill checks its local result and widens to the frozen classes that break it, one pass per
  // widening; once more classes than this are in, it refills the whole reach of the change by
  // level cut in one pass instead (MaxMinSolver::fill_component). Both are exact; this only moves cost.
  std::size_t local_refill_limit = 16384;
  RateSolver solver = RateSolver::Auto;
  // Simulate one flow per class of alike flows (the symmetry quotient, written on
  // sim/src/flow_quotient.hpp; simulate_schedule finds it on the ops, sim/src/op_quotient.hpp).
  // Exact: every flow gets the times of its class. Used when the classes are at most half the
  // flows and the colour refinement that finds them settles within 48 rounds (the schedules where
  // it pays settle in 3-8). Serial schedules (gather_broadcast), whose flows differ by their place
  // on long dependency chains, have about as many classes as flows: the refinement's first pass, a
  // hash along the dependency chains, shows it, and the plain engine runs.
  bool symmetry_quotient = true;
  // Optional: stage "simulate", events processed of 2 per simulated flow (a start and a finish),
  // reported every 65536 events and once at the end.
  model::ProgressFn progress;
};

struct FlowSimResult {
  Seconds makespan;                     // latest finish (0 without flows)
  std::vector<FlowTiming> timing;       // same order as the input flows
  std::int64_t events = 0;              // flow starts and finishes processed
  std::int64_t rate_updates = 0;        // refills of a component
  // Over every rate update: the classes of flows (simulated flows) whose rate changed (the group
  // engine: the classes of the groups whose rate changed). Each costs the class engine work, so
  // this bounds its event loop from below; the group engine pays per group (docs/simulator.md).
  std::int64_t rate_changes = 0;
  std::int64_t simulated_flows = 0;     // flows the event loop ran: one per symmetry class, or all
  RateSolver solver = RateSolver::Classes;  // the engine that ran (Classes or Groups)
  std::vector<LinkStats> links;         // one per link
  std::vector<CriticalStep> critical_path;  // last flow first
  std::vector<GroupSample> group_timeline;  // see SimOptions::link_group
  Seconds wall;                         // wall-clock time spent in simulate()
  // Of `wall`: finding the symmetry classes (0 without a quotient), and the event loop.
  Seconds classes_wall, event_loop_wall;
};

// Invalid input: an unknown link or `after` id, a duplicate flow id, bytes or latency negative or
// not finite, a dependency cycle, a non-positive capacity. The message names the flow.
class FlowError : public model::ScheduleError {
 public:
  using model::ScheduleError::ScheduleError;
};

FlowSimResult simulate(const FlowNetwork& network, const std::vector<FlowSpec>& flows,
                       const SimOptions& options = {});

// The `n` links with the largest utilization (then bytes), busiest first; links with no bytes left out.
std::vector<std::int32_t> busiest_links(const FlowSimResult& result, std::size_t n);

// Capacity jitter, for schedules whose simulated time depends on exact ties (docs/simulator.md,
// "Sensitivity: --jitter"): link l's capacity becomes C_l * (1 + amplitude * u_l), u_l uniform in [-1, 1]
// from a hash of (seed, l), so a seed always gives the same network. amplitude in [0, 0.5);
// throws FlowError otherwise. 0 leaves the network as it is.
void jitter_capacities(FlowNetwork& network, double amplitude, std::uint64_t seed);

}  // namespace reshard::sim
