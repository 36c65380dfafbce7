// Schedules turned into flows and simulated; the mapping is written on schedule_sim.hpp.
#include "reshard/sim/schedule_sim.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <unordered_map>

#include "reshard/model/chain.hpp"
#include "reshard/model/errors.hpp"
#include "reshard/model/memory.hpp"

#include "flow_table.hpp"
#include "op_quotient.hpp"

namespace reshard::sim {

namespace {

// Link kinds of the simulated network past the topology's (ScheduleSimulation::link_kind): a GPU's
// memory (local copies), and a chain's own link at its slot rate (model/chain.hpp).
constexpr auto kMemoryKind = static_cast<std::int32_t>(model::kLinkKinds);
constexpr std::int32_t kSlotKind = kMemoryKind + 1;

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
  for (const SimulatedOpTiming& t : out.ops) out.ops_makespan = std::max(out.ops_makespan, t.finish);
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

// Links no allocation can saturate, taken out of the flow problem before it is simulated.
//
// Every path p of the problem loads link l with w_pl times the rate of each of its flows (w: how
// often p lists l). Let m(p) be a link of p with the least capacity per weight, C_m / w_pm (among
// ties the one that is such a link for the most paths). The flows of the paths with m(p) = m all
// load m, so together they load l with at most max_{p: m(p) = m} (w_pl / w_pm) * C_m. Summed over
// the groups m, that bounds l's load in every feasible allocation; where the bound stays below C_l
// (by kRedundantMargin), l is redundant: the feasible allocations, hence the max-min ones, are the
// same without it, and dropping it from every path changes no rate and no time. A ring broadcast
// over thousands of GPUs loads each GPU's NVLink ports with hundreds of rings, but the rings of one
// head share its NIC, so the ports (a few NICs' worth of load, against 738 GB/s) drop out and each
// ring keeps its network links: the kimi-k3 rings go from about 9 500 links to a few hundred.
struct RedundantLinks {
  std::vector<char> dropped;                  // per link
  std::vector<double> path_bytes;             // per path: bytes its flows carried (filled later)
  std::vector<std::int64_t> dropped_begin{0};  // per path: its dropped links in dropped_links
  std::vector<std::int32_t> dropped_links;
};
constexpr double kRedundantMargin = 1e-6;

RedundantLinks drop_redundant_links(const FlowNetwork& network, OpProblem& problem) {
  const std::size_t nl = network.capacity.size(), np = problem.path_link_begin.size() - 1;
  RedundantLinks out;
  out.dropped.assign(nl, 0);
  out.dropped_begin.assign(np + 1, 0);
  auto weights = [&](std::size_t p, auto&& f) {  // f(link, weight) per distinct link of path p
    const auto first = problem.path_links.begin() + problem.path_link_begin[p],
               last = problem.path_links.begin() + problem.path_link_begin[p + 1];
    std::vector<std::int32_t> sorted(first, last);
    std::sort(sorted.begin(), sorted.end());
    for (std::size_t i = 0; i < sorted.size();) {
      std::size_t j = i;
      while (j < sorted.size() && sorted[j] == sorted[i]) ++j;
      f(sorted[i], static_cast<double>(j - i));
      i = j;
    }
  };
  auto per_weight = [&](std::int32_t l, double w) { return network.capacity[static_cast<std::size_t>(l)].value / w; };
  // How many paths each link is a tightest link of.
  std::vector<std::int32_t> tightest_of(nl, 0);
  std::vector<double> least(np, INFINITY);
  for (std::size_t p = 0; p < np; ++p) {
    weights(p, [&](std::int32_t l, double w) { least[p] = std::min(least[p], per_weight(l, w)); });
    weights(p, [&](std::int32_t l, double w) {
      if (per_weight(l, w) <= least[p]) ++tightest_of[static_cast<std::size_t>(l)];
    });
  }
  std::vector<std::int32_t> m(np, -1);
  std::vector<double> w_m(np, 0);
  for (std::size_t p = 0; p < np; ++p)
    weights(p, [&](std::int32_t l, double w) {
      if (per_weight(l, w) <= least[p] &&
          (m[p] < 0 || tightest_of[static_cast<std::size_t>(l)] > tightest_of[static_cast<std::size_t>(m[p])])) {
        m[p] = l;
        w_m[p] = w;
      }
    });
  // Per link, the largest ratio w_pl / w_pm of each group m crossing it; then the bound.
  std::vector<std::unordered_map<std::int32_t, double>> ratio(nl);
  for (std::size_t p = 0; p < np; ++p)
    weights(p, [&](std::int32_t l, double w) {
      double& r = ratio[static_cast<std::size_t>(l)][m[p]];
      r = std::max(r, w / w_m[p]);
    });
  for (std::size_t l = 0; l < nl; ++l) {
    double bound = 0;
    for (const auto& [group, r] : ratio[l]) bound += r * network.capacity[static_cast<std::size_t>(group)].value;
    out.dropped[l] = !ratio[l].empty() && bound < network.capacity[l].value * (1 - kRedundantMargin);
  }
  // The paths without their dropped links (kept aside for the link statistics).
  std::vector<std::int32_t> kept;
  std::vector<std::int64_t> kept_begin{0};
  for (std::size_t p = 0; p < np; ++p) {
    for (auto k = problem.path_link_begin[p]; k < problem.path_link_begin[p + 1]; ++k) {
      const auto l = problem.path_links[static_cast<std::size_t>(k)];
      (out.dropped[static_cast<std::size_t>(l)] ? out.dropped_links : kept).push_back(l);
    }
    kept_begin.push_back(static_cast<std::int64_t>(kept.size()));
    out.dropped_begin[p + 1] = static_cast<std::int64_t>(out.dropped_links.size());
  }
  problem.path_links = std::move(kept);
  problem.path_link_begin = std::move(kept_begin);
  out.path_bytes.assign(np, 0);
  for (std::size_t f = 0; f < problem.ops(); ++f)
    for (auto p = problem.route_path_begin[static_cast<std::size_t>(problem.route[f])];
         p < problem.route_path_begin[static_cast<std::size_t>(problem.route[f]) + 1]; ++p)
      out.path_bytes[static_cast<std::size_t>(p)] += problem.share[f].value;
  return out;
}

// The bytes over the dropped links (the simulation saw none), their utilization; their busy time
// is not tracked (LinkStats::redundant).
void add_redundant_link_stats(FlowSimResult& result, const FlowNetwork& network, const RedundantLinks& redundant) {
  if (redundant.dropped.empty()) return;
  for (std::size_t p = 0; p + 1 < redundant.dropped_begin.size(); ++p)
    for (auto k = redundant.dropped_begin[p]; k < redundant.dropped_begin[p + 1]; ++k)
      result.links[static_cast<std::size_t>(redundant.dropped_links[static_cast<std::size_t>(k)])].bytes +=
          ByteAmount{redundant.path_bytes[p]};
  for (std::size_t l = 0; l < result.links.size(); ++l) {
    if (!redundant.dropped[l]) continue;
    LinkStats& s = result.links[l];
    s.redundant = true;
    s.utilization = result.makespan.value > 0 ? s.bytes.as_double() / (network.capacity[l].value * result.makespan.value) : 0.0;
  }
}

// The schedule's ops as flow ops, and the way back.
struct FlowOps {
  OpProblem problem;
  std::vector<std::int64_t> op_of;               // per flow op: its schedule op
  std::vector<std::int32_t> data_of, finish_of;  // per schedule op: its data flow op and its last one
};

// First pass: checks every op and turns it into flow ops (schedule_sim.hpp): a transfer or local
// copy is one flow op over its route; a chain op is its data flow op over the chain's links and
// its tail, a flow op without links that waits for it. Both ways of simulating (the quotient on
// ops, the flow table) read the flow ops, `problem`. Routes: one per GPU pair (looked up once
// per pair, not per op; a local copy's is one path over GPU g's memory resource, no latency),
// one per chain (one path listing each link as often as the chain's hops cross it), and one
// route of one empty path for every tail.
// The memory resources and chain slot links it needs join out.network (and out.link_kind).
// Stays whole: one pass over the ops in step order whose route, chain and per-GPU-part tables each
// op's flows both read and extend (a flow op refers to routes and joins made for earlier ops).
FlowOps build_flow_ops(const model::Schedule& schedule, const model::Topology& topology, const model::CostParams& params,
                       ScheduleSimulation& out) {
  const std::size_t n_ops = schedule.ops.size();
  const auto gpus = topology.gpu_count();
  FlowOps fo;
  OpProblem& problem = fo.problem;
  std::vector<std::int64_t>& op_of = fo.op_of;
  std::vector<std::int32_t>& data_of = fo.data_of;
  std::vector<std::int32_t>& finish_of = fo.finish_of;
  data_of.resize(n_ops);
  finish_of.resize(n_ops);
  std::unordered_map<model::GpuPair, std::int32_t> pair_route;
  struct ChainFlows {
    std::int32_t route = -1;      // its links (with repeats), made for the first op on it
    std::int32_t last_data = -1;  // the data flow op of the latest op on it
    Seconds latency;              // L
    std::int32_t depth = 0;       // H
    double alone = 0;             // its rate alone, B/s
  };
  std::vector<ChainFlows> chain_flows(schedule.chains.size());
  std::vector<Seconds> route_latency;
  auto add_route = [&](const std::vector<const std::vector<model::LinkId>*>& paths, Seconds latency) {
    for (const auto* links : paths) {
      problem.path_links.insert(problem.path_links.end(), links->begin(), links->end());
      problem.path_link_begin.push_back(static_cast<std::int64_t>(problem.path_links.size()));
    }
    problem.route_path_begin.push_back(static_cast<std::int32_t>(problem.path_link_begin.size() - 1));
    route_latency.push_back(latency);
    return static_cast<std::int32_t>(route_latency.size() - 1);
  };
  const std::vector<model::LinkId> no_links;
  const std::int32_t tail_route = add_route({&no_links}, Seconds{0});
  std::vector<std::int32_t> after;
  auto add_flow_op = [&](std::int32_t route, ByteAmount share, Seconds latency, std::size_t sched_op) {
    problem.route.push_back(route);
    problem.share.push_back(share);
    problem.latency.push_back(latency);
    problem.after.insert(problem.after.end(), after.begin(), after.end());
    problem.after_begin.push_back(static_cast<std::int64_t>(problem.after.size()));
    op_of.push_back(static_cast<std::int64_t>(sched_op));
    return static_cast<std::int32_t>(op_of.size() - 1);
  };
  // The ops in the executors' steps (model/memory.hpp), by (step, id); with more than one step, an
  // op also waits for its sender's part (and a plain transfer's receiver's) in the ops of the
  // earlier steps: a join flow op per GPU and step change, over those parts (a chain root's part
  // is its data flow, sent; a plain transfer's its flow, arrived), as the estimate's critical
  // path takes them (model/cost.hpp).
  std::int32_t steps = 0;
  const std::vector<std::int32_t> step = model::op_steps(schedule, steps);
  std::vector<std::size_t> order(n_ops);
  for (std::size_t i = 0; i < n_ops; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return step[a] < step[b]; });
  struct GpuParts {
    std::int32_t step = -1;
    std::int32_t joined = -1;                 // the join of every part before `earlier`'s
    std::vector<std::int32_t> earlier, current;  // flow ops of its parts: earlier steps, this step
  };
  std::vector<GpuParts> parts(steps > 1 && params.step_barriers ? static_cast<std::size_t>(gpus) : 0);
  auto at_step = [&](model::GpuId g, std::int32_t k) -> GpuParts& {
    GpuParts& p = parts[static_cast<std::size_t>(g)];
    if (p.step < k) {
      p.earlier.insert(p.earlier.end(), p.current.begin(), p.current.end());
      p.current.clear();
      p.step = k;
    }
    return p;
  };
  // GPU g's parts before step k, for op sched_op: nothing to add when they are all ops sched_op
  // waits for anyway (its `after`) and no join of older parts is pending.
  auto wait_for_parts = [&](model::GpuId g, std::int32_t k, std::size_t sched_op) {
    GpuParts& p = at_step(g, k);
    const auto waits = schedule.after_of(schedule.ops[sched_op]);
    constexpr std::size_t kChecked = 64;  // more parts than this: joined without looking
    const bool implied = p.joined < 0 && p.earlier.size() <= kChecked && std::all_of(p.earlier.begin(), p.earlier.end(), [&](std::int32_t f) {
      return std::find(waits.begin(), waits.end(), op_of[static_cast<std::size_t>(f)]) != waits.end();
    });
    if (implied) return;
    if (!p.earlier.empty()) {
      const std::vector<std::int32_t> keep = after;
      after = p.earlier;
      if (p.joined >= 0) after.push_back(p.joined);
      p.joined = add_flow_op(tail_route, ByteAmount{}, Seconds{0}, sched_op);
      p.earlier.clear();
      after = keep;
    }
    if (p.joined >= 0) after.push_back(p.joined);
  };
  const BytesPerSecond copy_rate = params.memory_copy_rate;
  for (std::size_t i : order) {
    const model::Op& op = schedule.ops[i];
    auto where = [&] { return "schedule op " + std::to_string(op.id) + " (index " + std::to_string(i) + ")"; };
    if (const std::string wrong = model::op_problem(schedule, i, gpus, false); !wrong.empty())
      throw model::ScheduleError(where() + " on topology " + topology.name() + ": " + wrong);
    after.clear();
    for (auto a : schedule.after_of(op)) after.push_back(finish_of[static_cast<std::size_t>(a)]);
    const std::int32_t k = step[i];
    const bool barriers = steps > 1 && params.step_barriers;
    if (barriers) {
      wait_for_parts(op.src, k, i);
      if (op.chain < 0 && op.dst != op.src) wait_for_parts(op.dst, k, i);
    }
    // A stream's copies not overlapped with its transfer; a local copy moves shard to shard, unstaged.
    const Seconds copies = op.src == op.dst ? Seconds{0} : model::copy_fill(model::stream_chunk(schedule, op), op.bytes, copy_rate);
    if (op.chain >= 0) {
      const model::Chain& chain = schedule.chains[static_cast<std::size_t>(op.chain)];
      ChainFlows& cf = chain_flows[static_cast<std::size_t>(op.chain)];
      if (cf.route < 0) {
        // Each link as often as hops cross it; a chain whose chunks are too small to hide their
        // latency behind Schedule::slots in flight gets a link of its own at its slot rate
        // (model/chain.hpp). The rate alone sets the fill, as in the estimate.
        const model::ChainRoute cr = model::chain_route(chain, op.src, topology, where(), params.chain_hop_latency);
        std::vector<model::LinkId> links;
        cf.alone = INFINITY;
        for (std::size_t k = 0; k < cr.links.size(); ++k) {
          links.insert(links.end(), static_cast<std::size_t>(cr.weights[k]), cr.links[k]);
          cf.alone = std::min(cf.alone, out.network.capacity[static_cast<std::size_t>(cr.links[k])].value / cr.weights[k]);
        }
        const double slots = model::slot_rate(chain.chunk, schedule.slots, cr.hop_latency).value;
        if (slots < cf.alone) {
          links.push_back(static_cast<model::LinkId>(out.network.capacity.size()));
          out.network.capacity.push_back(BytesPerSecond{slots});
          out.network.link_names.push_back("chain " + std::to_string(op.chain) + " slots");
          out.link_kind.push_back(kSlotKind);
          cf.alone = slots;
        }
        cf.route = add_route({&links}, cr.latency);
        cf.latency = cr.latency;
        cf.depth = cr.depth;
      } else if (chain.hops.front().from != op.src) {
        model::chain_depths(chain, op.src, where());  // throws: the chain is rooted elsewhere
      }
      const Seconds fill = model::chain_fill(chain, cf.depth, op.bytes) / BytesPerSecond{cf.alone};
      // In order on its chain: after the previous op on it has been sent.
      if (cf.last_data >= 0) after.push_back(cf.last_data);
      data_of[i] = cf.last_data = add_flow_op(cf.route, ByteAmount{op.bytes.as_double()}, params.per_op, i);
      after.assign(1, data_of[i]);
      finish_of[i] = add_flow_op(tail_route, ByteAmount{}, cf.latency + fill + copies, i);
      if (barriers) at_step(op.src, k).current.push_back(data_of[i]);
      continue;
    }
    const model::GpuPair pair{op.src, op.dst};
    auto found = pair_route.find(pair);
    if (found == pair_route.end()) {
      model::Route r;
      if (op.src == op.dst) {  // the GPU's memory resource, a link after the topology's
        r.paths.push_back(model::Path{{static_cast<model::LinkId>(out.network.capacity.size())}});
        out.network.capacity.push_back(params.memory_copy_rate);
        out.network.link_names.push_back(topology.device(topology.gpu_device(op.src)).name + " memory");
        out.link_kind.push_back(kMemoryKind);
      } else {
        r = topology.route(op.src, op.dst);
        if (r.paths.empty())
          throw model::ScheduleError(where() + ": no route from GPU " + std::to_string(op.src) + " to GPU " +
                                     std::to_string(op.dst) + " in topology " + topology.name());
        // A stream whose chunks cannot hide the route's latency behind its slots: a link of the
        // pair's own at its slot rate, on every path (model/chain.hpp).
        std::unordered_map<model::LinkId, double> share;
        for (const auto& path : r.paths)
          for (auto l : path.links) share[l] += 1.0 / static_cast<double>(r.paths.size());
        double alone = INFINITY;
        for (const auto& [l, w] : share) alone = std::min(alone, out.network.capacity[static_cast<std::size_t>(l)].value / w);
        const double slots = model::slot_rate(schedule.params.chunk, schedule.slots, r.latency).value;
        if (slots < alone) {
          const auto link = static_cast<model::LinkId>(out.network.capacity.size());
          out.network.capacity.push_back(BytesPerSecond{slots});
          out.network.link_names.push_back("gpu" + std::to_string(op.src) + "->gpu" + std::to_string(op.dst) + " slots");
          out.link_kind.push_back(kSlotKind);
          for (auto& path : r.paths) path.links.push_back(link);
        }
      }
      std::vector<const std::vector<model::LinkId>*> paths;
      for (const auto& path : r.paths) paths.push_back(&path.links);
      found = pair_route.emplace(pair, add_route(paths, r.latency)).first;
    }
    const std::int32_t route = found->second;
    const auto paths_k = problem.route_path_begin[static_cast<std::size_t>(route) + 1] - problem.route_path_begin[static_cast<std::size_t>(route)];
    data_of[i] = finish_of[i] = add_flow_op(route, ByteAmount{op.bytes.as_double() / static_cast<double>(paths_k)},
                                            route_latency[static_cast<std::size_t>(route)] + params.per_op + copies, i);
    if (barriers) {
      at_step(op.src, k).current.push_back(data_of[i]);
      if (op.dst != op.src) at_step(op.dst, k).current.push_back(data_of[i]);
    }
  }
  return fo;
}

// Sizes of the flow arrays: sub-flows, their link entries and `after` entries, and a join flow
// for each flow op with several sub-flows that another waits for (and the overheads flow).
struct FlowCounts {
  std::vector<char> waited_for;  // per flow op: another waits for it
  std::size_t flows = 0, links = 0, after = 0;
};
FlowCounts count_flows(const OpProblem& problem, bool overheads) {
  const std::size_t n_flow_ops = problem.ops();
  FlowCounts c;
  c.waited_for.assign(n_flow_ops, 0);
  for (auto a : problem.after) c.waited_for[static_cast<std::size_t>(a)] = 1;
  std::size_t n_terminal_flows = 0;
  for (std::size_t f = 0; f < n_flow_ops; ++f) {
    const auto r = static_cast<std::size_t>(problem.route[f]);
    const std::size_t k = static_cast<std::size_t>(problem.sub_flows(f));
    c.flows += k;
    c.links += static_cast<std::size_t>(problem.path_link_begin[static_cast<std::size_t>(problem.route_path_begin[r + 1])] -
                                        problem.path_link_begin[static_cast<std::size_t>(problem.route_path_begin[r])]);
    c.after += static_cast<std::size_t>(problem.after_begin[f + 1] - problem.after_begin[f]) * k;
    if (c.waited_for[f] && k > 1) {
      c.flows += 1;
      c.after += k;
    }
    if (!c.waited_for[f]) n_terminal_flows += k;
  }
  if (overheads) {
    c.flows += 1;
    c.after += n_terminal_flows;
  }
  return c;
}

// Second pass: the flows, the sub-flows of each flow op in order, a join flow where a successor
// waits for several sub-flows, the overheads flow last (schedule_sim.hpp).
struct FlowLayout {
  FlowTable flows;  // turned into FlowSpecs only when asked (ScheduleSimOptions::keep_flows)
  std::vector<std::int64_t> first_flow;  // flow op f's sub-flows: [first_flow[f], first_flow[f] + sub_flows(f))
};
FlowLayout build_flow_table(const OpProblem& problem, const std::vector<std::int64_t>& op_of, const FlowCounts& counts,
                            ScheduleSimulation& out) {
  const std::size_t n_flow_ops = problem.ops();
  FlowLayout layout;
  FlowTable& flows = layout.flows;
  flows.reserve(counts.flows, counts.links, counts.after);
  out.op_of_flow.reserve(counts.flows);
  std::vector<std::int64_t>& first_flow = layout.first_flow;
  first_flow.assign(n_flow_ops, 0);
  auto end_flow = [&](std::size_t f) { return first_flow[f] + problem.sub_flows(f); };
  std::vector<std::int64_t> join_of(n_flow_ops, -1);  // flow op f's join flow, made when a successor needs it
  std::vector<std::int64_t> flow_after;
  for (std::size_t f = 0; f < n_flow_ops; ++f) {
    flow_after.clear();
    for (auto k = problem.after_begin[f]; k < problem.after_begin[f + 1]; ++k) {
      const auto a = static_cast<std::size_t>(problem.after[static_cast<std::size_t>(k)]);
      if (problem.sub_flows(a) == 1) {
        flow_after.push_back(first_flow[a]);
        continue;
      }
      if (join_of[a] < 0) {  // the predecessor's sub-flows joined into one flow (schedule_sim.hpp)
        join_of[a] = static_cast<std::int64_t>(flows.size());
        flows.begin_flow(Bytes{0}, Seconds{0});
        for (auto g = first_flow[a]; g < end_flow(a); ++g) flows.after.push_back(g);
        flows.end_flow();
        out.op_of_flow.push_back(-1);
        ++out.join_flows;
      }
      flow_after.push_back(join_of[a]);
    }
    first_flow[f] = static_cast<std::int64_t>(flows.size());
    const auto r = static_cast<std::size_t>(problem.route[f]);
    for (auto p = problem.route_path_begin[r]; p < problem.route_path_begin[r + 1]; ++p) {
      flows.begin_flow(problem.share[f], problem.latency[f]);
      flows.links.insert(flows.links.end(), problem.path_links.begin() + problem.path_link_begin[static_cast<std::size_t>(p)],
                         problem.path_links.begin() + problem.path_link_begin[static_cast<std::size_t>(p) + 1]);
      flows.after.insert(flows.after.end(), flow_after.begin(), flow_after.end());
      flows.end_flow();
      out.op_of_flow.push_back(op_of[f]);
    }
  }

  // Framework overheads and weight conversion, after the last op (see schedule_sim.hpp).
  if (out.closing().value > 0) {
    flows.begin_flow(Bytes{0}, out.closing());
    for (std::size_t f = 0; f < n_flow_ops; ++f)
      if (!counts.waited_for[f])
        for (auto g = first_flow[f]; g < end_flow(f); ++g) flows.after.push_back(g);
    flows.end_flow();
    out.op_of_flow.push_back(-1);
  }
  return layout;
}

// The flows as FlowSpecs (ScheduleSimOptions::keep_flows), which the table then names its flows by.
void keep_flow_specs(FlowTable& flows, ScheduleSimulation& out) {
  out.flows.resize(flows.size());
  for (std::size_t i = 0; i < flows.size(); ++i) {
    FlowSpec& f = out.flows[i];
    f.id = static_cast<std::int64_t>(i);
    f.bytes = flows.bytes[i];
    f.latency = flows.latency[i];
    f.links.assign(flows.links.begin() + flows.link_begin[i], flows.links.begin() + flows.link_begin[i + 1]);
    f.after.assign(flows.after.begin() + flows.after_begin[i], flows.after.begin() + flows.after_begin[i + 1]);
  }
  if (out.closing().value > 0)
    out.flows.back().label = out.closing() > out.overheads ? "framework overheads and weight conversion" : "framework overheads";
  flows.specs = &out.flows;
}

// Per flow op: release and start of its sub-flows (equal), finish of the last one. A flow's timing
// is row row_of_flow[g] of the result, or row g when row_of_flow is empty.
std::vector<SimulatedOpTiming> flow_op_timings(const OpProblem& problem, const std::vector<std::int64_t>& first_flow,
                                      const FlowSimResult& result, const std::vector<std::int32_t>& row_of_flow) {
  const std::size_t n_flow_ops = problem.ops();
  std::vector<SimulatedOpTiming> ops(n_flow_ops, SimulatedOpTiming{});
  for (std::size_t f = 0; f < n_flow_ops; ++f) {
    SimulatedOpTiming& t = ops[f];
    const std::int64_t end = first_flow[f] + problem.sub_flows(f);
    for (auto g = first_flow[f]; g < end; ++g) {
      const FlowTiming& ft =
          result.timing[row_of_flow.empty() ? static_cast<std::size_t>(g) : static_cast<std::size_t>(row_of_flow[g])];
      if (g == first_flow[f]) {
        t.release = ft.release;
        t.start = ft.start;
      }
      t.finish = std::max(t.finish, ft.finish);
    }
  }
  return ops;
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
  for (std::size_t k = 0; k < model::kLinkKinds; ++k)
    out.link_kind_names.push_back(model::to_string(static_cast<model::LinkKind>(k)));
  out.link_kind_names.push_back("memory");
  out.link_kind_names.push_back("slots");

  const std::size_t n_ops = schedule.ops.size();
  for (const Seconds t : {options.overheads, options.convert_source, options.convert_destination})
    if (!(t.value >= 0) || !std::isfinite(t.value))
      throw model::ScheduleError("overheads and conversion times must be >= 0 and finite, got " + model::format(t));
  out.overheads = options.overheads;
  out.convert_source = options.convert_source;
  out.convert_destination = options.convert_destination;

  FlowOps fo = build_flow_ops(schedule, topology, params, out);
  OpProblem& problem = fo.problem;
  const std::vector<std::int64_t>& op_of = fo.op_of;
  const std::vector<std::int32_t>& data_of = fo.data_of;
  const std::vector<std::int32_t>& finish_of = fo.finish_of;
  problem.overheads = out.closing();
  jitter_capacities(out.network, options.capacity_jitter, options.jitter_seed);
  // Redundant links are left out, unless a per-link-kind timeline is wanted (a trace): it counts
  // every link's load.
  const RedundantLinks redundant =
      options.link_kind_timeline ? RedundantLinks{} : drop_redundant_links(out.network, problem);
  const FlowCounts counts = count_flows(problem, out.closing().value > 0);

  SimOptions sim_options;
  sim_options.symmetry_quotient = options.symmetry_quotient;
  sim_options.solver = options.rate_solver;
  sim_options.progress = options.progress;
  if (options.link_kind_timeline) sim_options.link_group = out.link_kind;

  // Flow op times to schedule op times: release and start of its data, finish of its last flow op;
  // the dropped links' statistics.
  auto schedule_times = [&] {
    add_redundant_link_stats(out.result, out.network, redundant);
    std::vector<SimulatedOpTiming> per_flow_op = std::move(out.ops);
    out.ops.assign(n_ops, SimulatedOpTiming{});
    for (std::size_t i = 0; i < n_ops; ++i)
      out.ops[i] = {per_flow_op[static_cast<std::size_t>(data_of[i])].release,
                    per_flow_op[static_cast<std::size_t>(data_of[i])].start,
                    per_flow_op[static_cast<std::size_t>(finish_of[i])].finish};
  };

  // Without per-flow answers, the quotient found on the ops (op_quotient.hpp): no flow is built.
  bool quotient_pays = true;
  if (options.symmetry_quotient && !options.keep_flows) {
    out.build_wall = Seconds{std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count()};
    switch (simulate_op_quotient(out.network, problem, sim_options, counts.flows, out)) {
      case OpQuotientOutcome::simulated:
        for (auto& o : out.op_of_flow)
          if (o >= 0) o = op_of[static_cast<std::size_t>(o)];
        schedule_times();
        return finish_schedule_simulation(out, wall_start);
      case OpQuotientOutcome::not_paying:
        quotient_pays = false;
        break;
      case OpQuotientOutcome::unchecked:
        break;
    }
  }

  // Second pass: the flows.
  FlowLayout layout = build_flow_table(problem, op_of, counts, out);
  FlowTable& flows = layout.flows;
  if (options.keep_flows) keep_flow_specs(flows, out);

  sim_options.symmetry_quotient = options.symmetry_quotient && quotient_pays;
  out.build_wall = Seconds{std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count()};
  // Per-flow timing only where the flows are kept; otherwise one row per cell of alike flows.
  std::vector<std::int32_t> row_of_flow;
  out.result = simulate_table(out.network, flows, sim_options, options.keep_flows ? nullptr : &row_of_flow);
  out.ops = flow_op_timings(problem, layout.first_flow, out.result, row_of_flow);
  schedule_times();
  return finish_schedule_simulation(out, wall_start);
}

double work_done_by(const model::Schedule& schedule, const ScheduleSimulation& sim, model::Seconds t) {
  double done = 0, all = 0;
  for (std::size_t i = 0; i < schedule.ops.size(); ++i) {
    const double bytes = schedule.ops[i].bytes.as_double();
    const SimulatedOpTiming& op = sim.ops[i];
    all += bytes;
    if (op.finish <= t) done += bytes;
    else if (op.start < t) done += bytes * ((t - op.start) / (op.finish - op.start));
  }
  return all > 0 ? done / all : 1.0;
}

ScheduleSimOptions closing_terms(const model::Prediction& p) {
  ScheduleSimOptions options;
  options.overheads = p.overheads;
  // A delta refit's encode and decode passes ride with the conversions, on the same sides.
  options.convert_source = p.convert_source + p.delta_source;
  options.convert_destination = p.convert_destination + p.delta_destination;
  return options;
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
  return simulate_schedule(schedule, topology, params,
                           closing_terms(model::estimate(schedule, ts, inventory, topology, params)))
      .makespan;
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
