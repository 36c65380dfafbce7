// A Schedule (model/schedule.hpp) simulated with the flow engine (docs/simulator.md).
//
// The network: every topology link l is simulator link l with capacity
//     C_l = bandwidth(l) * CostParams::efficiency[kind(l)],
// followed by one memory resource per GPU that has a local copy (an op with src == dst), with
// capacity CostParams::memory_copy_rate, and by a link of its own for each chain whose chunks are
// too small to hide their latency (capacity: its slot rate, model/chain.hpp).
//
// Every Op becomes flows:
//   transfer (src != dst) over Topology::route(src, dst) with k equal paths: k equal sub-flows,
//       sub-flow p carrying bytes/k (a ByteAmount, fractional when k does not divide bytes) on
//       path p's links; latency = route latency + CostParams::per_op. Equal shares keep the
//       sub-flows of one op alike for the symmetry quotient.
//   local copy (src == dst): one flow over the GPU's memory resource; latency = per_op.
//   chain op (model::Chain, the math on model/chain.hpp): its *data flow*, carrying its bytes over
//       every link of its hops' (pinned) paths, each link listed as often as hops cross it, with
//       latency per_op; then its *tail*, a flow without bytes or links that waits for the data
//       flow, with the chain's latency and its pipeline and copy fill at its rate alone
//       (model/chain.hpp). The op starts with its data flow and finishes with its
//       tail. The data flow of the next op on the same chain waits for this data flow (chain ops
//       on one chain run in order), not for the tail.
//   after: for each op in Op::after, the flow that finishes it: its sub-flow or tail when it has
//       one, else its *join flow*: a flow without bytes, links or latency that waits for all of
//       that op's sub-flows, so it finishes when the last of them does (made once, when the first
//       successor needs it). Joining keeps the dependencies at (sub-flows + successors) instead of
//       their product (32-way ECMP ops waiting for 32-way ECMP ops would hold 1 024 each).
// Redundant links: a link that no allocation can saturate (its load is bounded below its capacity
// by the links that bound its flows' rates; the bound is written on drop_redundant_links in
// schedule_sim.cpp) is left out of the flow problem, which changes no rate and no time; its bytes
// and utilization are still reported (LinkStats::redundant; busy time is not tracked). Without it,
// a ring over thousands of GPUs would load every GPU's NVLink ports with hundreds of rings that
// never bind. A per-link-kind timeline (link_kind_timeline, for traces) keeps every link.
// Framework overheads (per tensor, per bucket, per stage: model/cost.hpp) are the estimate's own
// term, Prediction::overheads, given by the caller so that the two stay comparable; they are added
// as estimate() adds them, after the transfers: one more flow without links whose latency is the
// overheads, released when the last op finishes (it waits for every op that no other op waits
// for), so
//     makespan = (finish of the last op) + overheads + convert_source + convert_destination
// and a --dump-flows file of the simulation replays to the same makespan. A precision change's
// conversion times (Prediction::convert_source / convert_destination, model/precision.hpp) ride on
// that flow too: each side's conversion is a phase of its own, the source's before the first send
// and the destination's after the last receive, with no link shared with the transfers, so
// op times count from the end of the source's conversion. A delta refit's passes (Prediction::
// delta_source / delta_destination, model/delta.hpp) join the conversion phase of their side.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "reshard/model/cost.hpp"
#include "reshard/model/planner.hpp"
#include "reshard/model/schedule.hpp"
#include "reshard/model/topology.hpp"
#include "reshard/sim/flow_sim.hpp"
#include "reshard/sim/trace.hpp"

namespace reshard::sim {

struct ScheduleSimOptions {
  // Framework overheads added after the last op: model::estimate(...).overheads for this schedule.
  Seconds overheads;
  // A precision change's conversion phases: model::estimate(...).convert_source / convert_destination.
  Seconds convert_source, convert_destination;
  // Record the per-link-kind utilization timeline (FlowSimResult::group_timeline), for traces.
  bool link_kind_timeline = false;
  // SimOptions::symmetry_quotient.
  bool symmetry_quotient = true;
  // SimOptions::solver (which engine computes the rates; the same answer either way).
  RateSolver rate_solver = RateSolver::Auto;
  // Every link capacity jittered by up to this fraction (jitter_capacities, flow_sim.hpp).
  double capacity_jitter = 0;
  std::uint64_t jitter_seed = 1;
  // Fill ScheduleSimulation::flows (--dump-flows, traces). Off, no flow is built where the
  // symmetry quotient pays (it is found on the ops, sim/src/op_quotient.hpp), and elsewhere the
  // flows exist only in the simulator's flat arrays: a FlowSpec per flow is two heap vectors and a
  // string, gigabytes for a tuned Kimi-K3 schedule (docs/performance.md). Where both ways use the
  // quotient, the answer is the same bit for bit (tested).
  bool keep_flows = false;
  // SimOptions::progress.
  model::ProgressFn progress;
};

struct SimulatedOpTiming {
  Seconds release, start, finish;
};

struct ScheduleSimulation {
  Seconds makespan;         // last op finish + closing()
  Seconds ops_makespan;     // last op finish
  Seconds overheads;        // ScheduleSimOptions::overheads
  Seconds convert_source, convert_destination;  // ScheduleSimOptions' conversion phases
  Seconds closing() const { return overheads + convert_source + convert_destination; }
  std::vector<SimulatedOpTiming> ops;            // per op, in Schedule::ops order
  std::vector<std::size_t> critical_ops;  // op indices, the op that finished last first
  std::int64_t events = 0;
  Seconds wall;             // building the flows plus simulating
  Seconds build_wall;       // of `wall`: checking the ops and building their routes (and flows)

  // The flow problem and its answer (for --dump-flows, traces and link statistics).
  FlowNetwork network;
  std::vector<FlowSpec> flows;           // with keep_flows: ids 0..n-1; sub-flows of an op are consecutive
  std::vector<std::int64_t> op_of_flow;  // per flow: index into Schedule::ops, -1 for join and overhead flows
  // Flows simulated (sub-flows, joins and the overhead flow), kept or not.
  std::size_t flow_count() const { return op_of_flow.size(); }
  std::size_t join_flows = 0;            // flows that join an op's sub-flows for its successors
  std::vector<std::int32_t> link_kind;   // per link: LinkKind index, 4 for a GPU memory resource, 5 for a chain's slots
  std::vector<std::string> link_kind_names;  // nvlink, c2c, pcie, network, memory, slots
  // result.timing is per flow with keep_flows; without, it may hold one row per cell of alike flows
  // (the symmetry quotient): `ops` has every op's times either way.
  FlowSimResult result;
};

// Throws model::ScheduleError for an op naming a GPU outside the topology, an `after` id that is
// not an earlier op, or a pair of GPUs without a route.
ScheduleSimulation simulate_schedule(const model::Schedule& schedule, const model::Topology& topology,
                                     const model::CostParams& params, const ScheduleSimOptions& options = {});

// The share of the schedule's operation bytes moved by time `t` of its simulation: an op finished by
// t counts whole, one running at t by the part of its time elapsed (its bytes taken as moving at an
// even rate), one not started not at all. 0 at t = 0, 1 from the last op's finish.
double work_done_by(const model::Schedule& schedule, const ScheduleSimulation& sim, model::Seconds t);

// The options that add a prediction's overheads and conversion phases to a simulation.
ScheduleSimOptions closing_terms(const model::Prediction& p);

// The simulated makespan with `overheads` (Prediction::overheads of the same schedule) added:
// comparable to estimate(...).time without a precision change. The second form adds the estimate's
// overheads and conversion phases itself.
model::Seconds simulated_makespan(const model::Schedule& schedule, const model::Topology& topology,
                                  const model::CostParams& params, model::Seconds overheads);
model::Seconds simulated_makespan(const model::Schedule& schedule, const model::TransferSet& ts,
                                  const model::Inventory& inventory, const model::Topology& topology,
                                  const model::CostParams& params);

// Trace layout: per GPU that appears, a track of the ops it sends, one of those it receives and one
// of its local copies; link-kind utilization counters (needs options.link_kind_timeline).
TraceLayout schedule_trace_layout(const model::Schedule& schedule, const ScheduleSimulation& sim);

}  // namespace reshard::sim
