// Schedules turned into flows and simulated; the mapping is written on schedule_sim.hpp.
#include "reshard/sim/schedule_sim.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <unordered_map>

#include "reshard/model/errors.hpp"

#include "flow_table.hpp"
#include "op_quotient.hpp"

namespace reshard::sim {

namespace {

constexpr std::int32_t kMemoryKind = 4;

std::string op_label(const model::Op& op) {
  std::string s = "op " + std::to_string(op.id) + " " + model::to_string(op.phase) + " gpu" + std::to_string(op.src);
  if (op.src == op.dst) return s + " copy";
  return s + "->gpu" + std::to_string(op.dst);
}

// What both ways of simulating share once every op has its times: makespans, events, the
// critical path by op, the wall time.
ScheduleSimulation finish_schedule_simulation(ScheduleSimulation& out,
                                              std::chrono::steady_clock::time_point wall_start) {
  out.events = out.result.events;
  out.makespan = out.result.makespan;
  for (const OpTiming& t : out.ops) out.ops_makespan = std::max(out.ops_makespan, t.finish);
  // An empty schedule without overheads has makespan 0; with overheads only, the overhead flow.
  // Flows carry no labels (millions of strings at scale) but the overhead flow's; schedule_trace_layout
  // names them by op.
  for (const auto& step : out.result.critical_path) {
    const auto op = out.op_of_flow[step.flow_index];
    if (op < 0) continue;
    if (out.critical_ops.empty() || out.critical_ops.back() != static_cast<std::size_t>(op))
      out.critical_ops.push_back(static_cast<std::size_t>(op));
  }
  out.wall = Seconds{std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count()};
  return std::move(out);
}

}  // namespace

ScheduleSimulation simulate_schedule(const model::Schedule& schedule, const model::Topology& topology,
                                     const model::CostParams& params, const ScheduleSimOptions& options) {
  const auto wall_start = std::chrono::steady_clock::now();
  ScheduleSimulation out;
  const auto& links = topology.links();
  for (const auto& l : links) {
    out.network.capacity.push_back(
        BytesPerSecond{l.bandwidth.value * params.efficiency[static_cast<int>(l.kind)]});
    out.network.link_names.push_back(topology.device(l.from).name + "->" + topology.device(l.to).name);
    out.link_kind.push_back(static_cast<std::int32_t>(l.kind));
  }
  for (auto k : {model::LinkKind::NVLink, model::LinkKind::C2C, model::LinkKind::PCIe, model::LinkKind::Network})
    out.link_kind_names.push_back(model::to_string(k));
  out.link_kind_names.push_back("memory");

  const std::size_t n_ops = schedule.ops.size();
  const auto gpus = topology.gpu_count();

  // First pass: check every op, find its route and count what the flow arrays will hold, so that
  // they are allocated once (growing them by doubling touched twice the memory and copied it:
  // a third of the page faults of the tuned kimi-k3 schedule, docs/performance.md).
  // Routes by GPU pair: an op's route is looked up once per pair, not built once per op. A local
  // copy's route is the pair (g, g): one path over GPU g's memory resource, no latency.
  struct IndexedRoute {
    model::Route route;
    std::int32_t index;
  };
  std::unordered_map<std::uint64_t, IndexedRoute> routes;
  std::vector<const IndexedRoute*> route_by_index;
  std::vector<const IndexedRoute*> route_of(n_ops, nullptr);
  std::vector<char> has_successor(n_ops, 0);
  std::size_t n_flows = 0, n_links = 0, n_after = 0;
  auto sub_flows = [&](std::size_t i) { return route_of[i]->route.paths.size(); };
  for (std::size_t i = 0; i < n_ops; ++i) {
    const model::Op& op = schedule.ops[i];
    auto where = [&] { return "schedule op " + std::to_string(op.id) + " (index " + std::to_string(i) + ")"; };
    if (op.src < 0 || op.src >= gpus || op.dst < 0 || op.dst >= gpus)
      throw model::ScheduleError(where() + ": GPU " + std::to_string(op.src < 0 || op.src >= gpus ? op.src : op.dst) +
                                 " is not in topology " + topology.name() + " (0.." + std::to_string(gpus - 1) + ")");
    if (op.bytes.value < 0) throw model::ScheduleError(where() + ": negative bytes");
    for (auto a : op.after) {
      // Ids are dense and point backwards (model/schedule.hpp); position == id for built schedules.
      if (a < 0 || static_cast<std::size_t>(a) >= i || schedule.ops[static_cast<std::size_t>(a)].id != a)
        throw model::ScheduleError(where() + ": 'after' names " + std::to_string(a) +
                                   ", which is not the id of an earlier op");
      has_successor[static_cast<std::size_t>(a)] = 1;
    }
    const std::uint64_t pair = static_cast<std::uint64_t>(static_cast<std::uint32_t>(op.src)) << 32 |
                               static_cast<std::uint32_t>(op.dst);
    auto found = routes.find(pair);
    if (found == routes.end()) {
      IndexedRoute r{{}, static_cast<std::int32_t>(route_by_index.size())};
      if (op.src == op.dst) {  // the GPU's memory resource, a link after the topology's
        r.route.paths.push_back(model::Path{{static_cast<model::LinkId>(out.network.capacity.size())}});
        out.network.capacity.push_back(params.memory_copy_rate);
        out.network.link_names.push_back(topology.device(topology.gpu_device(op.src)).name + " memory");
        out.link_kind.push_back(kMemoryKind);
      } else {
        r.route = topology.route(op.src, op.dst);
        if (r.route.paths.empty())
          throw model::ScheduleError(where() + ": no route from GPU " + std::to_string(op.src) + " to GPU " +
                                     std::to_string(op.dst) + " in topology " + topology.name());
      }
      found = routes.emplace(pair, std::move(r)).first;
      route_by_index.push_back(&found->second);
    }
    route_of[i] = &found->second;
    n_flows += found->second.route.paths.size();
    for (const auto& path : found->second.route.paths) n_links += path.links.size();
    n_after += op.after.size() * sub_flows(i);
  }
  std::size_t n_terminal_flows = 0;  // sub-flows of the ops nothing waits for (the overhead flow's `after`)
  for (std::size_t i = 0; i < n_ops; ++i) {
    if (has_successor[i] && sub_flows(i) > 1) {  // its join flow
      n_flows += 1;
      n_after += sub_flows(i);
    }
    if (!has_successor[i]) n_terminal_flows += sub_flows(i);
  }
  if (!(options.overheads.value >= 0) || !std::isfinite(options.overheads.value))
    throw model::ScheduleError("overheads must be >= 0 and finite, got " + model::format(options.overheads));
  if (options.overheads.value > 0) {
    n_flows += 1;
    n_after += n_terminal_flows;
  }

  jitter_capacities(out.network, options.capacity_jitter, options.jitter_seed);
  SimOptions sim_options;
  sim_options.symmetry_quotient = options.symmetry_quotient;
  if (options.link_kind_timeline) sim_options.link_group = out.link_kind;
  out.overheads = options.overheads;

  // Without per-flow answers, the quotient found on the ops (op_quotient.hpp): no flow is built.
  bool quotient_pays = true;
  if (options.symmetry_quotient && !options.keep_flows) {
    OpProblem problem;
    for (const IndexedRoute* r : route_by_index) {
      for (const auto& path : r->route.paths) {
        problem.path_links.insert(problem.path_links.end(), path.links.begin(), path.links.end());
        problem.path_link_begin.push_back(static_cast<std::int64_t>(problem.path_links.size()));
      }
      problem.route_path_begin.push_back(static_cast<std::int32_t>(problem.path_link_begin.size() - 1));
    }
    problem.route.reserve(n_ops);
    problem.share.reserve(n_ops);
    problem.latency.reserve(n_ops);
    problem.after_begin.reserve(n_ops + 1);
    for (std::size_t i = 0; i < n_ops; ++i) {
      const model::Op& op = schedule.ops[i];
      problem.route.push_back(route_of[i]->index);
      problem.share.push_back(ByteAmount{op.bytes.as_double() / static_cast<double>(sub_flows(i))});
      problem.latency.push_back(route_of[i]->route.latency + params.per_op);
      for (auto a : op.after) problem.after.push_back(static_cast<std::int32_t>(a));
      problem.after_begin.push_back(static_cast<std::int64_t>(problem.after.size()));
    }
    problem.overheads = out.overheads;
    out.build_wall = Seconds{std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count()};
    switch (simulate_op_quotient(out.network, problem, sim_options, n_flows, out)) {
      case OpQuotientOutcome::simulated:
        return finish_schedule_simulation(out, wall_start);
      case OpQuotientOutcome::not_paying:
        quotient_pays = false;
        break;
      case OpQuotientOutcome::unchecked:
        break;
    }
  }

  FlowTable flows;  // built here, turned into FlowSpecs only when asked (ScheduleSimOptions::keep_flows)
  flows.reserve(n_flows, n_links, n_after);
  out.op_of_flow.reserve(n_flows);

  // Second pass: the flows.
  std::vector<std::int64_t> first_flow(n_ops, 0);  // op i's sub-flows: [first_flow[i], end_flow(i))
  auto end_flow = [&](std::size_t i) { return first_flow[i] + static_cast<std::int64_t>(sub_flows(i)); };
  std::vector<std::int64_t> join_of(n_ops, -1);  // op i's join flow, made when a successor needs it
  std::vector<std::int64_t> after;
  for (std::size_t i = 0; i < n_ops; ++i) {
    const model::Op& op = schedule.ops[i];
    after.clear();
    for (auto a : op.after) {
      if (sub_flows(static_cast<std::size_t>(a)) == 1) {
        after.push_back(first_flow[a]);
        continue;
      }
      if (join_of[a] < 0) {  // the predecessor's sub-flows joined into one flow (schedule_sim.hpp)
        join_of[a] = static_cast<std::int64_t>(flows.size());
        flows.begin_flow(Bytes{0}, Seconds{0});
        for (auto f = first_flow[a]; f < end_flow(static_cast<std::size_t>(a)); ++f) flows.after.push_back(f);
        flows.end_flow();
        out.op_of_flow.push_back(-1);
        ++out.join_flows;
      }
      after.push_back(join_of[a]);
    }
    first_flow[i] = static_cast<std::int64_t>(flows.size());
    const model::Route& route = route_of[i]->route;
    const double share = op.bytes.as_double() / static_cast<double>(route.paths.size());
    for (const auto& path : route.paths) {
      flows.begin_flow(ByteAmount{share}, route.latency + params.per_op);
      flows.links.insert(flows.links.end(), path.links.begin(), path.links.end());
      flows.after.insert(flows.after.end(), after.begin(), after.end());
      flows.end_flow();
      out.op_of_flow.push_back(static_cast<std::int64_t>(i));
    }
  }

  // Framework overheads, after the last op (see schedule_sim.hpp).
  if (out.overheads.value > 0) {
    flows.begin_flow(Bytes{0}, out.overheads);
    for (std::size_t i = 0; i < n_ops; ++i)
      if (!has_successor[i])
        for (auto g = first_flow[i]; g < end_flow(i); ++g) flows.after.push_back(g);
    flows.end_flow();
    out.op_of_flow.push_back(-1);
  }
  if (options.keep_flows) {
    out.flows.resize(flows.size());
    for (std::size_t i = 0; i < flows.size(); ++i) {
      FlowSpec& f = out.flows[i];
      f.id = static_cast<std::int64_t>(i);
      f.bytes = flows.bytes[i];
      f.latency = flows.latency[i];
      f.fill = flows.fill_of(i);
      f.links.assign(flows.links.begin() + flows.link_begin[i], flows.links.begin() + flows.link_begin[i + 1]);
      f.after.assign(flows.after.begin() + flows.after_begin[i], flows.after.begin() + flows.after_begin[i + 1]);
    }
    if (out.overheads.value > 0) out.flows.back().label = "framework overheads";
    flows.specs = &out.flows;
  }

  sim_options.symmetry_quotient = options.symmetry_quotient && quotient_pays;
  out.build_wall = Seconds{std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count()};
  // Per-flow timing only where the flows are kept; otherwise one row per cell of alike flows.
  std::vector<std::int32_t> row_of_flow;
  out.result = simulate_table(out.network, flows, sim_options, options.keep_flows ? nullptr : &row_of_flow);
  // Per op: release and start of its sub-flows (equal), finish of the last one.
  out.ops.assign(n_ops, OpTiming{});
  for (std::size_t i = 0; i < n_ops; ++i) {
    OpTiming& t = out.ops[i];
    for (auto f = first_flow[i]; f < end_flow(i); ++f) {
      const FlowTiming& ft =
          out.result.timing[row_of_flow.empty() ? static_cast<std::size_t>(f) : static_cast<std::size_t>(row_of_flow[f])];
      if (f == first_flow[i]) {
        t.release = ft.release;
        t.start = ft.start;
      }
      t.finish = std::max(t.finish, ft.finish);
    }
  }
  return finish_schedule_simulation(out, wall_start);
}

model::Seconds simulated_makespan(const model::Schedule& schedule, const model::Topology& topology,
                                  const model::CostParams& params, model::Seconds overheads) {
  ScheduleSimOptions options;
  options.overheads = overheads;
  return simulate_schedule(schedule, topology, params, options).makespan;
}

model::Seconds simulated_makespan(const model::Schedule& schedule, const model::TransferSet& ts,
                                  const model::Inventory& inventory, const model::Topology& topology,
                                  const model::CostParams& params) {
  return simulated_makespan(schedule, topology, params,
                            model::estimate(schedule, ts, inventory, topology, params).overheads);
}

TraceLayout schedule_trace_layout(const model::Schedule& schedule, const ScheduleSimulation& sim) {
  TraceLayout layout;
  // Tracks 3g, 3g+1, 3g+2 of GPU g (sends, receives, copies), renumbered over the tracks in use.
  std::unordered_map<std::int64_t, std::int32_t> track_of;
  std::vector<std::int64_t> used;
  for (const auto& op : schedule.ops) {
    if (op.src == op.dst) {
      used.push_back(3LL * op.src + 2);
    } else {
      used.push_back(3LL * op.src);
      used.push_back(3LL * op.dst + 1);
    }
  }
  std::sort(used.begin(), used.end());
  used.erase(std::unique(used.begin(), used.end()), used.end());
  static const char* kRole[] = {"sends", "receives", "copies"};
  for (auto key : used) {
    track_of.emplace(key, static_cast<std::int32_t>(layout.track_names.size()));
    layout.track_names.push_back("gpu " + std::to_string(key / 3) + " " + kRole[key % 3]);
  }
  layout.flow_tracks.resize(sim.flow_count());
  layout.flow_names.resize(sim.flow_count());
  for (std::size_t f = 0; f < sim.flow_count(); ++f) {
    const auto i = sim.op_of_flow[f];
    if (i < 0) continue;
    const model::Op& op = schedule.ops[static_cast<std::size_t>(i)];
    layout.flow_names[f] = op_label(op);
    if (op.src == op.dst)
      layout.flow_tracks[f] = {track_of.at(3LL * op.src + 2)};
    else
      layout.flow_tracks[f] = {track_of.at(3LL * op.src), track_of.at(3LL * op.dst + 1)};
  }
  layout.link_group = sim.link_kind;
  layout.group_names = sim.link_kind_names;
  return layout;
}

}  // namespace reshard::sim
