// The flow-level simulator: validation, route classes and the event loop; the rates come from the
// max-min solver (maxmin.hpp), the quotient runs through quotient_sim.hpp. The math is written on
// the types in flow_sim.hpp.
#include "reshard/sim/flow_sim.hpp"

#include "event_loop.hpp"
#include "flow_quotient.hpp"
#include "maxmin.hpp"
#include "quotient_sim.hpp"
#include "tolerances.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <functional>
#include <string>
#include <unordered_map>
#include <utility>

namespace reshard::sim {

std::string FlowNetwork::link_name(std::int32_t link) const {
  if (link >= 0 && static_cast<std::size_t>(link) < link_names.size() && !link_names[link].empty())
    return link_names[link];
  return "link " + std::to_string(link);
}

namespace {

// What the event loop keeps per class of flows (flows with identical link lists and weights, one
// class of the solver, whose rate it is served at): the bytes served per flow so far, and its
// flows' finish levels.
struct alignas(64) ClassState {
  double served = 0;            // bytes served per flow at time `updated`
  double updated = 0;
  double next_level = 0;        // finish_heap's smallest level (kept here: read at every rate change)
  double contribution = 0;      // flows * rate, for the group timeline
  std::vector<std::pair<double, std::int32_t>> finish_heap;  // (served level at finish, flow), min-heap
};

std::vector<double> capacities(const FlowNetwork& net) {
  std::vector<double> c(net.capacity.size());
  for (std::size_t l = 0; l < c.size(); ++l) c[l] = net.capacity[l].value;
  return c;
}

// The class engine: the rates come from the max-min solver over classes (maxmin.hpp), refilled
// once per batch; each class keeps the bytes served per flow and its flows' finish levels.
class Engine : public EventLoop {
 public:
  // `watch`: give up (run() returns nullopt) once the refills so far cost more than the group
  // engine's would have (run_engine says how that is counted and why).
  Engine(const FlowNetwork& net, const FlowTable& flows, FlowGraph graph, const SimOptions& opt,
         const QuotientWeights* weights, FlowClasses classes, bool watch = false)
      : EventLoop(net, flows, std::move(graph), opt, weights, std::move(classes)),
        solver_(capacities(net), opt.local_refill_limit), watch_(watch) {}

  // One step of the class solver's work (MaxMinSolver::work) counts as this many steps of the
  // group engine's (a loaded link in its queue, a column entry). Measured per step: 12-17 ns
  // against 3 ns, on whole runs of a 10 000-transfer burst and the tuned Kimi-K3 schedule on the
  // 2-core VM, which says 4-6; the tuned Kimi-K3 schedule would hand over (wrongly: 4x slower on
  // groups) from about 4.5, while bursts hand over as early from 2.3 to 4 (the same time), so 3.
  // (docs/performance.md, "Scaling to 100 000 GPUs").
  static constexpr double kClassWorkCost = 3;
  // The watch decides after this many refills and this much class work (about 0.15 s), so that
  // small problems, where either engine is quick, never pay for a second start.
  static constexpr std::int64_t kWatchRefills = 64;
  static constexpr std::int64_t kWatchMinWork = 10'000'000;

 private:
  void prepare() override;
  void start_active(std::int32_t f, double t) override;
  void finish_event(std::int32_t c, double t) override;
  bool pending() const override { return solver_.pending(); }
  void refill(double t) override;
  bool gave_up() const override { return gave_up_; }
  // Class c's bytes served per flow, brought up to t at `rate` (its rate since `updated`).
  void advance(ClassState& c, double rate, double t) {
    c.served += rate * (t - c.updated);
    c.updated = t;
  }
  // Class c's next finish event, at its rate with its flows (from the solver).
  void schedule_finish(std::int32_t c, double rate, std::int64_t flows, double t);

  MaxMinSolver solver_;
  std::vector<ClassState> classes_;  // per solver class
  bool watch_;
  bool gave_up_ = false;
  // The watch's counts: slots of the classes with active flows and links they load (now), and
  // over the refills so far the class solver's work and the group engine's estimated work.
  std::int64_t active_slots_ = 0, loaded_links_ = 0;
  std::int64_t class_work_ = 0, group_work_ = 0, work_before_ = 0;

  std::vector<double> group_rate_;
  std::vector<std::uint32_t> group_stamp_;
  std::vector<std::int32_t> groups_changed_;
};

}  // namespace

std::string FlowTable::name(std::size_t i) const {
  std::string s = "flow " + std::to_string(id_of(i));
  if (specs && !(*specs)[i].label.empty()) s += " (" + (*specs)[i].label + ")";
  return s;
}

FlowTable flow_table(const std::vector<FlowSpec>& flows) {
  FlowTable t;
  t.specs = &flows;
  const std::size_t n = flows.size();
  bool dense = true;
  for (std::size_t i = 0; i < n && dense; ++i) dense = flows[i].id == static_cast<std::int64_t>(i);
  std::size_t links = 0, after = 0;
  for (const auto& f : flows) {
    links += f.links.size();
    after += f.after.size();
  }
  t.reserve(n, links, after);
  if (!dense) t.id.reserve(n);
  for (const auto& f : flows) {
    if (!dense) t.id.push_back(f.id);
    t.begin_flow(f.bytes, f.latency);
    t.links.insert(t.links.end(), f.links.begin(), f.links.end());
    t.after.insert(t.after.end(), f.after.begin(), f.after.end());
    t.end_flow();
  }
  return t;
}

FlowGraph validate_and_index(const FlowNetwork& net, const FlowTable& flows) {
  FlowGraph graph;
  auto& waiting = graph.waiting;
  auto& succ_begin = graph.succ_begin;
  auto& succ = graph.succ;
  const std::size_t n = flows.size();
  const std::size_t nl = net.capacity.size();
  if (n > kMaxFlows) throw FlowError(std::to_string(n) + " flows: at most " + std::to_string(kMaxFlows) + " are supported");
  for (std::size_t l = 0; l < nl; ++l)
    if (!valid_capacity(net.capacity[l]))
      throw FlowError(net.link_name(static_cast<std::int32_t>(l)) + ": capacity must be positive and finite, got " +
                      std::to_string(net.capacity[l].value) + " B/s");
  // Flow ids are usually 0..n-1 in order (traffic_flows, simulate_schedule): then the index is the id.
  const bool dense = flows.id.empty();  // flow_table() leaves it empty when the ids are the indices
  graph.dense_ids = dense;
  std::unordered_map<std::int64_t, std::int32_t> index;
  if (!dense) index.reserve(n * 2);
  auto find_index = [&](std::int64_t id) -> std::int32_t {
    if (dense) return id >= 0 && id < static_cast<std::int64_t>(n) ? static_cast<std::int32_t>(id) : -1;
    auto it = index.find(id);
    return it == index.end() ? -1 : it->second;
  };
  for (std::size_t i = 0; i < n; ++i) {
    if (!dense && !index.emplace(flows.id_of(i), static_cast<std::int32_t>(i)).second)
      throw FlowError(flows.name(i) + ": duplicate flow id " + std::to_string(flows.id_of(i)));
    if (!valid_amount(flows.bytes[i].value))
      throw FlowError(flows.name(i) + ": bytes must be >= 0 and finite, got " + std::to_string(flows.bytes[i].value));
    if (!valid_amount(flows.latency[i].value))
      throw FlowError(flows.name(i) + ": latency must be >= 0 and finite, got " + std::to_string(flows.latency[i].value) +
                      " s");
    for (auto k = flows.link_begin[i]; k < flows.link_begin[i + 1]; ++k) {
      const std::int32_t l = flows.links[k];
      if (l < 0 || static_cast<std::size_t>(l) >= nl)
        throw FlowError(flows.name(i) + ": unknown link " + std::to_string(l) + " (the network has " +
                        std::to_string(nl) + " links)");
    }
  }
  // Dependencies as CSR, then Kahn's algorithm to reject cycles, unless every flow waits only for
  // flows before it (simulate_schedule, traffic_flows): then the order of the flows is a
  // topological order and there is no cycle.
  std::vector<std::int32_t> count(n + 1, 0);
  waiting.assign(n, 0);
  bool backward = true;
  for (std::size_t i = 0; i < n; ++i) {
    for (auto k = flows.after_begin[i]; k < flows.after_begin[i + 1]; ++k) {
      const std::int64_t a = flows.after[k];
      const std::int32_t p = find_index(a);
      if (p < 0) throw FlowError(flows.name(i) + ": 'after' names unknown flow id " + std::to_string(a));
      if (p == static_cast<std::int32_t>(i)) throw FlowError(flows.name(i) + ": waits for itself");
      if (p > static_cast<std::int32_t>(i)) backward = false;
      ++count[p + 1];
      ++waiting[i];
    }
  }
  // count[p + 1] = successors of p -> count[p] = where p's slice starts; filling moves count[p] to
  // the end of p's slice, which is where p + 1's starts: shifted by one, count is succ_begin.
  for (std::size_t i = 0; i < n; ++i) count[i + 1] += count[i];
  succ.assign(count[n], 0);
  for (std::size_t i = 0; i < n; ++i)
    for (auto k = flows.after_begin[i]; k < flows.after_begin[i + 1]; ++k)
      succ[count[find_index(flows.after[k])]++] = static_cast<std::int32_t>(i);
  for (std::size_t i = n; i > 0; --i) count[i] = count[i - 1];
  count[0] = 0;
  succ_begin = std::move(count);
  if (backward) return graph;

  std::vector<std::int32_t> indeg = waiting, queue;
  queue.reserve(n);
  for (std::size_t i = 0; i < n; ++i)
    if (indeg[i] == 0) queue.push_back(static_cast<std::int32_t>(i));
  for (std::size_t q = 0; q < queue.size(); ++q)
    for (auto s = succ_begin[queue[q]]; s < succ_begin[queue[q] + 1]; ++s)
      if (--indeg[succ[s]] == 0) queue.push_back(succ[s]);
  if (queue.size() != n) {
    // Walk predecessors that are still blocked until one repeats: that flow is on a cycle.
    std::int32_t f = 0;
    while (indeg[f] == 0) ++f;
    std::vector<char> on_walk(n, 0);
    while (!on_walk[f]) {
      on_walk[f] = 1;
      for (auto k = flows.after_begin[f]; k < flows.after_begin[f + 1]; ++k) {
        auto p = find_index(flows.after[k]);
        if (indeg[p] > 0) {
          f = p;
          break;
        }
      }
    }
    throw FlowError(flows.name(static_cast<std::size_t>(f)) + ": dependency cycle through its 'after' list");
  }
  graph.order = std::move(queue);
  return graph;
}


namespace {

void Engine::prepare() {
  const FlowClasses& fc = classes_of_flows_;
  std::vector<MaxMinSolver::Slot> slots;
  for (std::size_t c = 0; c < fc.size(); ++c) {
    slots.clear();
    for (auto k = fc.begin[c]; k < fc.begin[c + 1]; ++k) slots.push_back({fc.links[k], fc.weight[k]});
    solver_.add_class(slots);
  }
  classes_.resize(solver_.class_count());
  finishes_.resize(classes_.size());
  if (!opt_.link_group.empty()) {
    std::int32_t groups = 0;
    for (auto g : opt_.link_group) groups = std::max(groups, g + 1);
    group_rate_.assign(groups, 0.0);
    group_stamp_.assign(groups, 0);
  }
}

void Engine::start_active(std::int32_t f, double t) {
  const std::int32_t c = classes_of_flows_.class_of[f];
  ClassState& rc = classes_[c];
  if (solver_.flows(c) == 0) {
    rc.served = 0;
    rc.updated = t;
    active_slots_ += static_cast<std::int64_t>(solver_.slots(c).size());
  } else {
    advance(rc, solver_.rate(c), t);
  }
  rc.finish_heap.emplace_back(rc.served + flows_.bytes[f].as_double(), f);
  std::push_heap(rc.finish_heap.begin(), rc.finish_heap.end(), std::greater<>());
  rc.next_level = rc.finish_heap.front().first;
  solver_.add_flow(c, [&](std::int32_t l) {
    became_busy(l, t);
    ++loaded_links_;
  });
}

void Engine::finish_event(std::int32_t c, double t) {
  ClassState& rc = classes_[c];
  const double rate = solver_.rate(c);
  advance(rc, rate, t);
  // The event was computed for the moment the first flow's level is reached; rounding may leave a
  // few ulps, so flows within tolerance::kFinishRelative of their size (plus kFinishBytes) count
  // as finished, and so do the flows that finish within the batch window (run()).
  while (!rc.finish_heap.empty()) {
    auto [level, f] = rc.finish_heap.front();
    const double slack = finish_slack(f, rate);
    if (level > rc.served + slack) break;
    std::pop_heap(rc.finish_heap.begin(), rc.finish_heap.end(), std::greater<>());
    rc.finish_heap.pop_back();
    if (level > rc.served) rc.served = level;
    solver_.remove_flow(c, [&](std::int32_t l) {
      became_idle(l, t);
      --loaded_links_;
    });
    if (solver_.flows(c) == 0) active_slots_ -= static_cast<std::int64_t>(solver_.slots(c).size());
    result_.timing[f].bottleneck = solver_.bottleneck(c);  // the link that set its last rate
    finish(f, t);
  }
  if (!rc.finish_heap.empty()) rc.next_level = rc.finish_heap.front().first;
  solver_.touch(c);  // its next finish level moved: a new finish event at the refill
}

void Engine::schedule_finish(std::int32_t c, double rate, std::int64_t flows, double t) {
  const ClassState& rc = classes_[c];
  if (flows == 0 || !(rate > 0)) {  // no flows: finish_heap is empty too
    finishes_.erase(c);
    return;
  }
  const double remaining = std::max(0.0, rc.next_level - rc.served);
  finishes_.set(c, t + remaining / rate);
}

// New rates after the starts and finishes of one batch: the solver refills the classes the
// changes reach; each of them is brought up to t at its old rate, and those whose rate or flows
// changed get a new finish event.
void Engine::refill(double t) {
  ++result_.rate_updates;
  work_before_ = solver_.work();
  const auto& refilled = solver_.solve([this, t](const MaxMinSolver::Refilled& r) {
    advance(classes_[r.cls], r.previous_rate, t);
    result_.rate_changes += r.rate != r.previous_rate;
    if (r.rate != r.previous_rate || r.flows_changed) schedule_finish(r.cls, r.rate, r.flows, t);
  });
  if (watch_ && result_.rate_updates > 1) {
    // What this refill cost, and what the group engine's refill would have: its queue holds the
    // loaded links and its filling reads the groups' columns (at most the active classes' slots).
    // The first refill, a whole filling in both engines, is left out.
    class_work_ += solver_.work() - work_before_;
    group_work_ += loaded_links_ + active_slots_;
    gave_up_ = result_.rate_updates >= kWatchRefills && class_work_ >= kWatchMinWork &&
               static_cast<double>(class_work_) * kClassWorkCost >= static_cast<double>(group_work_);
  }

  if (!opt_.link_group.empty()) {
    const auto stamp = static_cast<std::uint32_t>(result_.rate_updates);
    for (auto c : refilled) {
      ClassState& rc = classes_[c];
      const double now = static_cast<double>(solver_.flows(c)) * solver_.rate(c);
      const double delta = now - rc.contribution;
      rc.contribution = now;
      if (delta == 0) continue;
      for (const auto& slot : solver_.slots(c)) {
        const std::int32_t g = opt_.link_group[slot.link];
        if (g < 0) continue;
        group_rate_[g] += delta * static_cast<double>(slot.weight * (weights_ ? weights_->link_replicas[slot.link] : 1));
        if (group_stamp_[g] != stamp) {
          group_stamp_[g] = stamp;
          groups_changed_.push_back(g);
        }
      }
    }
    std::sort(groups_changed_.begin(), groups_changed_.end());
    for (auto g : groups_changed_)
      result_.group_timeline.push_back({Seconds{t}, g, BytesPerSecond{std::max(0.0, group_rate_[g])}});
    groups_changed_.clear();
  }
}

// The engine SimOptions::solver names. Auto: the class engine, watched; once its refills have cost
// more than the group engine's would have (and enough to matter), it gives way and the group
// engine runs afresh. A link-group timeline keeps the class engine (only it records one).
//
// Why: a class refill costs the classes whose rate moves (the local refill's passes and checks:
// MaxMinSolver::work counts them); a group refill costs every loaded link and every group's
// column, however few rates move. Which is cheaper shows only as the run goes: in a burst of
// random transfers the refills widen as it runs (over the first 64 refills the class engine
// costs a quarter of what the groups would, over the whole run 5.6 times as much, at 10 000
// transfers), while the tuned Kimi-K3 schedule costs a fifth of it over the whole run (more
// early on). Restarting only when the class engine has already spent as much as the whole group
// run up to then would have (rent, then buy) costs at most that much again. The counts are
// steps, not clocks, so the same input always gets the same engine.
FlowSimResult run_engine(const FlowNetwork& net, const FlowTable& flows, FlowGraph graph, const SimOptions& options,
                         const QuotientWeights* weights) {
  FlowClasses classes = flow_classes(flows, weights);
  if (options.solver == RateSolver::Classes || !options.link_group.empty()) {
    if (options.solver == RateSolver::Groups)
      throw FlowError("the group engine records no link-group timeline: use the class engine for it");
    return *Engine(net, flows, std::move(graph), options, weights, std::move(classes)).run();
  }
  if (options.solver == RateSolver::Auto) {
    auto watched = Engine(net, flows, graph, options, weights, classes, true).run();
    if (watched) return std::move(*watched);
  }
  FlowClasses binding = binding_classes(classes, net);
  return run_group_engine(net, flows, std::move(graph), options, weights, std::move(classes), std::move(binding));
}

// A flow table as the quotient's reduction and expansion read it (quotient_sim.hpp).
class TableView {
 public:
  using Ref = std::int32_t;
  TableView(const FlowTable& flows, const FlowGraph& graph, const FlowQuotient& q) : flows_(flows), q_(q) {
    first_flow_.assign(static_cast<std::size_t>(q.flow_cells), -1);
    for (std::size_t f = 0; f < flows.size(); ++f)
      if (first_flow_[q.flow_cell[f]] < 0) first_flow_[q.flow_cell[f]] = static_cast<std::int32_t>(f);
    // `after` names ids: they are the indices when they are 0..n-1, else looked up.
    if (!graph.dense_ids)
      for (std::size_t i = 0; i < flows.size(); ++i) index_of_id_.emplace(flows.id_of(i), static_cast<std::int32_t>(i));
  }
  std::size_t flow_count() const { return flows_.size(); }
  Ref stand_in(std::int32_t cell) const { return first_flow_[cell]; }
  std::int32_t cell_of(Ref f) const { return q_.flow_cell[f]; }
  std::size_t index(Ref f) const { return static_cast<std::size_t>(f); }
  std::int64_t id(Ref f) const { return flows_.id_of(index(f)); }
  ByteAmount bytes(Ref f) const { return flows_.bytes[f]; }
  Seconds latency(Ref f) const { return flows_.latency[f]; }
  template <class F>
  void for_each_link(Ref f, F&& fn) const {
    for (auto k = flows_.link_begin[f]; k < flows_.link_begin[f + 1]; ++k) fn(flows_.links[k]);
  }
  template <class F>
  bool for_each_predecessor(Ref f, F&& fn) const {
    for (auto k = flows_.after_begin[f]; k < flows_.after_begin[f + 1]; ++k) {
      const std::int64_t id = flows_.after[k];
      if (fn(index_of_id_.empty() ? static_cast<Ref>(id) : index_of_id_.at(id))) return true;
    }
    return false;
  }

 private:
  const FlowTable& flows_;
  const FlowQuotient& q_;
  std::vector<std::int32_t> first_flow_;
  std::unordered_map<std::int64_t, std::int32_t> index_of_id_;
};

// Runs the engine on one flow per cell of `q` (flow_quotient.hpp) and gives every flow its cell's
// times (quotient_sim.hpp): one row per cell with `row_of_flow`, else one per flow, its bottleneck
// its own link in its cell's bottleneck link cell.
FlowSimResult simulate_quotient(const FlowNetwork& net, const FlowTable& flows, const FlowGraph& graph,
                                FlowQuotient& q, const SimOptions& options, std::vector<std::int32_t>* row_of_flow) {
  const TableView view(flows, graph, q);
  std::vector<std::int64_t> cell_size(static_cast<std::size_t>(q.flow_cells), 0);
  for (auto c : q.flow_cell) ++cell_size[c];
  FlowSimResult qr = reduce_to_quotient(net, view, q.link_cell, q.link_cells, cell_size, options).run();
  std::vector<std::int32_t> bottleneck_cell;
  if (!row_of_flow)
    for (const auto& t : qr.timing) bottleneck_cell.push_back(t.bottleneck);
  FlowSimResult out = expand_quotient(view, std::move(qr), q.link_cell, q.flow_cells);
  if (row_of_flow) {
    *row_of_flow = std::move(q.flow_cell);
  } else {
    std::vector<FlowTiming> rows = std::move(out.timing);
    out.timing.resize(flows.size());
    for (std::size_t g = 0; g < flows.size(); ++g) {
      const auto cell = q.flow_cell[g];
      out.timing[g] = rows[cell];
      out.timing[g].bottleneck = link_in_cell(view, static_cast<std::int32_t>(g), bottleneck_cell[cell], q.link_cell);
    }
  }
  return out;
}

}  // namespace

FlowSimResult QuotientProblem::run() const {
  return run_engine(net, flows, validate_and_index(net, flows), options, &weights);
}

namespace {

// Bytes over each link (a flow's bytes once per entry of its link list: k times a link it lists k
// times) and its utilization, from the flows given.
void add_link_traffic(FlowSimResult& result, const FlowNetwork& net, const FlowTable& flows) {
  for (std::size_t f = 0; f < flows.size(); ++f)
    for (auto k = flows.link_begin[f]; k < flows.link_begin[f + 1]; ++k) result.links[flows.links[k]].bytes += flows.bytes[f];
  finish_link_stats(result, net);
}

}  // namespace

FlowSimResult simulate_table(const FlowNetwork& network, const FlowTable& flows, const SimOptions& options,
                             std::vector<std::int32_t>* row_of_flow) {
  if (row_of_flow) row_of_flow->clear();
  const auto wall_start = std::chrono::steady_clock::now();
  if (!network.link_names.empty() && network.link_names.size() != network.capacity.size())
    throw FlowError("the network has " + std::to_string(network.capacity.size()) + " links but " +
                    std::to_string(network.link_names.size()) + " link names");
  if (!options.link_group.empty() && options.link_group.size() != network.capacity.size())
    throw FlowError("link_group has " + std::to_string(options.link_group.size()) + " entries for " +
                    std::to_string(network.capacity.size()) + " links");
  FlowGraph graph = validate_and_index(network, flows);
  Seconds classes_wall;
  FlowSimResult result = [&] {
    if (options.symmetry_quotient) {
      // The refinement gives up past half as many cells as flows, or past 48 rounds
      // (SimOptions::symmetry_quotient says why).
      const auto classes_start = std::chrono::steady_clock::now();
      FlowQuotient q =
          find_quotient(network, flows, graph, options.link_group, quotient_max_cells(flows.size()), kQuotientMaxRounds);
      classes_wall = Seconds{std::chrono::duration<double>(std::chrono::steady_clock::now() - classes_start).count()};
      if (q.flow_cells >= 0) return simulate_quotient(network, flows, graph, q, options, row_of_flow);
    }
    return run_engine(network, flows, std::move(graph), options, nullptr);
  }();
  result.classes_wall = classes_wall;
  add_link_traffic(result, network, flows);
  result.wall = Seconds{std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count()};
  return result;
}

FlowSimResult simulate(const FlowNetwork& network, const std::vector<FlowSpec>& flows, const SimOptions& options) {
  return simulate_table(network, flow_table(flows), options);
}

void jitter_capacities(FlowNetwork& network, double amplitude, std::uint64_t seed) {
  if (!(amplitude >= 0 && amplitude < 0.5))
    throw FlowError("capacity jitter must be in [0, 0.5), got " + std::to_string(amplitude));
  if (amplitude == 0) return;
  for (std::size_t l = 0; l < network.capacity.size(); ++l) {
    std::uint64_t x = seed * 0x9e3779b97f4a7c15ull + l + 1;  // splitmix64's finalizer of (seed, l)
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    x ^= x >> 31;
    const double u = static_cast<double>(x >> 11) * 0x1.0p-53 * 2 - 1;  // [-1, 1)
    network.capacity[l].value *= 1 + amplitude * u;
  }
}

std::vector<std::int32_t> busiest_links(const FlowSimResult& result, std::size_t n) {
  std::vector<std::int32_t> ids;
  for (std::size_t l = 0; l < result.links.size(); ++l)
    if (result.links[l].bytes.value > 0) ids.push_back(static_cast<std::int32_t>(l));
  std::sort(ids.begin(), ids.end(), [&](std::int32_t a, std::int32_t b) {
    const auto& x = result.links[a];
    const auto& y = result.links[b];
    if (x.utilization != y.utilization) return x.utilization > y.utilization;
    if (x.bytes != y.bytes) return x.bytes > y.bytes;
    return a < b;
  });
  if (ids.size() > n) ids.resize(n);
  return ids;
}

}  // namespace reshard::sim
