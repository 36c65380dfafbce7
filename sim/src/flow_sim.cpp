// The flow-level simulator: validation, route classes, the event loop and the incremental
// max-min refill. The math is written on the types in flow_sim.hpp.
#include "reshard/sim/flow_sim.hpp"

#include "flow_quotient.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <functional>
#include <queue>
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

struct VectorHash {
  std::size_t operator()(const std::vector<std::int32_t>& v) const noexcept {
    std::size_t h = 0xcbf29ce484222325ull;
    for (auto x : v) h = (h ^ static_cast<std::uint32_t>(x)) * 0x100000001b3ull;
    return h;
  }
};

// Min-heap entry of the flow starts.
struct StartEvent {
  double time;
  std::int32_t flow;
  bool operator>(const StartEvent& o) const { return time > o.time; }
};

// The next finish time of every class with active flows: a binary min-heap indexed by class, so a
// rate change moves the class's one entry (no stale entries pile up: a refill changes thousands of
// rates at once, and a lazy queue would grow by all of them every time).
class FinishQueue {
 public:
  void resize(std::size_t classes) { pos_.assign(classes, -1); }
  bool empty() const { return heap_.empty(); }
  double top_time() const { return heap_.front().time; }
  std::int32_t top_class() const { return heap_.front().cls; }
  void set(std::int32_t c, double time) {
    std::int32_t i = pos_[c];
    if (i < 0) {
      i = static_cast<std::int32_t>(heap_.size());
      heap_.push_back({time, c});
      pos_[c] = i;
      up(i);
      return;
    }
    const double old = heap_[i].time;
    heap_[i].time = time;
    if (time < old) up(i);
    else down(i);
  }
  void erase(std::int32_t c) {
    const std::int32_t i = pos_[c];
    if (i < 0) return;
    pos_[c] = -1;
    const Entry last = heap_.back();
    heap_.pop_back();
    if (i == static_cast<std::int32_t>(heap_.size())) return;
    heap_[i] = last;
    pos_[last.cls] = i;
    up(i);
    down(pos_[last.cls]);
  }

 private:
  struct Entry {
    double time;
    std::int32_t cls;
  };
  // Ties go to the lower class index, so the order of simultaneous finishes is deterministic.
  bool less(const Entry& a, const Entry& b) const { return a.time < b.time || (a.time == b.time && a.cls < b.cls); }
  void place(std::int32_t i, const Entry& e) {
    heap_[i] = e;
    pos_[e.cls] = i;
  }
  void up(std::int32_t i) {
    const Entry e = heap_[i];
    while (i > 0) {
      const std::int32_t p = (i - 1) / 2;
      if (!less(e, heap_[p])) break;
      place(i, heap_[p]);
      i = p;
    }
    place(i, e);
  }
  void down(std::int32_t i) {
    const Entry e = heap_[i];
    const auto n = static_cast<std::int32_t>(heap_.size());
    while (true) {
      std::int32_t c = 2 * i + 1;
      if (c >= n) break;
      if (c + 1 < n && less(heap_[c + 1], heap_[c])) ++c;
      if (!less(heap_[c], e)) break;
      place(i, heap_[c]);
      i = c;
    }
    place(i, e);
  }
  std::vector<Entry> heap_;
  std::vector<std::int32_t> pos_;
};

// Min-heap entry of the progressive filling: a link's share when it was pushed (a lower bound).
struct ShareEntry {
  double share;
  std::int32_t link;
  bool operator>(const ShareEntry& o) const { return share > o.share; }
};

// Flows with identical (sorted) link lists. All active flows of a class get the same rate.
// `rate`, `bottleneck` and `committed` are what the link totals (LinkState::allocated,
// bottlenecked) hold for this class; `multiplicity` moves with starts and finishes before the
// refill that commits it.
struct alignas(64) RouteClass {
  // What a refill reads and writes, in the first cache line.
  std::int64_t multiplicity = 0;              // active flows
  std::int64_t committed = 0;                 // multiplicity as counted in the link totals
  double rate = 0;                            // per flow, bytes/s
  double new_rate = 0;                        // filling result
  std::int32_t bottleneck = -1;               // link at which the rate was fixed
  std::int32_t new_bottleneck = -1;
  std::int32_t link_begin = 0, link_end = 0;  // slice of Engine::class_slots_
  std::uint32_t in_refill = 0;  // member of the refilled set (stamp)
  std::uint32_t touched = 0;    // flows joined or left in this batch
  double served = 0;            // bytes served per flow at time `updated`
  // The rest.
  double updated = 0;
  double next_level = 0;        // finish_heap's smallest level (kept here: read at every rate change)
  std::uint32_t joined = 0;     // flows joined in this batch
  std::uint32_t left = 0;       // flows left in this batch
  double contribution = 0;      // multiplicity * rate, for the group timeline
  std::vector<std::pair<double, std::int32_t>> finish_heap;  // (served level at finish, flow), min-heap
};

struct alignas(64) LinkState {
  // Refill scratch, valid when stamp is the refill's stamp (the first cache line).
  std::uint32_t stamp = 0;
  double remaining = 0;          // capacity minus frozen classes and the refilled classes fixed so far
  std::int64_t unfixed = 0;      // refilled flows not yet fixed
  std::int64_t refilled_bottlenecked = 0;  // committed flows of refilled classes with this bottleneck
  std::vector<std::int32_t> members;  // the active refilled classes crossing it
  double fill_share = -1;        // share at which refilled classes were fixed here, -1 when none
  double capacity = 0;
  double from_fixed = 0;         // 1 / to_fixed
  // Totals over the committed classes: sum of committed * rate, the committed flows whose
  // bottleneck this is, and the rate they were given. The sum is kept in fixed point, in units of
  // 1 / to_fixed (a power of two near capacity * 2^-60), each term truncated to a whole unit: a
  // term added at one commit and removed at a later one is the same integer, so millions of
  // updates leave no drift at all, and the sum holds 8 times the capacity. (A long double sum
  // drifted by up to 1e-13 relative and took 10 % of the event loop.)
  std::int64_t allocated = 0;
  double to_fixed = 0;
  std::int64_t fixed(double load) const { return static_cast<std::int64_t>(load * to_fixed); }
  std::int64_t bottlenecked = 0;
  double level = 0;
  std::uint32_t level_kept = 0;  // pass stamp: frozen classes stayed bottlenecked here at `level`
  std::uint32_t scanned = 0;     // refill stamp: its bottlenecked classes were brought in
  std::int64_t flows = 0;             // active flows crossing the link
  std::vector<std::int32_t> classes;  // active classes crossing the link
  std::vector<std::int64_t> class_weights;  // per entry of `classes`: that class's weight here
  double busy_since = 0;
  double busy = 0;
};

class Engine {
 public:
  // `weights`: per flow and link (aligned with FlowTable::links), how many flows of the whole
  // problem one flow here stands for on that link, and per link how many links it stands for
  // (the symmetry quotient, flow_quotient.hpp); nullptr: every weight is 1.
  Engine(const FlowNetwork& net, const FlowTable& flows, FlowGraph graph, const SimOptions& opt,
         const QuotientWeights* weights)
      : net_(net), flows_(flows), weights_(weights), opt_(opt), succ_begin_(std::move(graph.succ_begin)),
        succ_(std::move(graph.succ)), waiting_(std::move(graph.waiting)) {}

  FlowSimResult run();

 private:
  void build_classes();
  void release(std::int32_t f, double t);
  void start(std::int32_t f, double t);
  void finish(std::int32_t f, double t);
  void class_finish_event(std::int32_t c, double t);
  void advance(RouteClass& c, double t) {
    c.served += c.rate * (t - c.updated);
    c.updated = t;
  }
  void join(std::int32_t c, double t);
  void leave(std::int32_t c, double t);
  void touch(std::int32_t c) {
    if (classes_[c].touched != batch_) {
      classes_[c].touched = batch_;
      touched_.push_back(c);
    }
  }
  void refill(double t);
  void fill_component(double t);
  template <class ForEachMember>
  void progressive_fill(std::size_t to_fix, ForEachMember&& for_each_member);
  static constexpr std::size_t kScanFillLinks = 128;  // up to this many links, fill by scans
  void push_share(std::int32_t l) {
    const LinkState& ls = links_[l];
    if (ls.unfixed > 0) fill_links_.push_back({std::max(0.0, ls.remaining) / static_cast<double>(ls.unfixed), l});
  }
  void add_to_refill(std::int32_t c, double t) {
    RouteClass& rc = classes_[c];
    if (rc.in_refill == refill_stamp_) return;
    rc.in_refill = refill_stamp_;
    advance(rc, t);
    refilled_.push_back(c);
  }
  void schedule_finish(std::int32_t c, double t);

  const FlowNetwork& net_;
  const FlowTable& flows_;
  const QuotientWeights* weights_;
  const SimOptions& opt_;

  std::vector<std::int32_t> succ_begin_, succ_;  // CSR successors
  std::vector<std::int32_t> waiting_;            // unfinished predecessors
  std::vector<std::int32_t> released_by_;        // predecessor that finished last, -1 when none
  std::vector<std::int32_t> class_of_;
  // A link slot of a class: the link, and how many flows of the whole problem one flow of the
  // class stands for there (1 unless a quotient is run). One array, so a class's slots are one
  // read.
  struct Slot {
    std::int32_t link;
    std::int32_t weight;
  };
  std::vector<Slot> class_slots_;
  std::vector<std::int32_t> class_link_pos_;  // per slot: the class's index in that link's list
  std::vector<RouteClass> classes_;
  std::vector<LinkState> links_;

  std::priority_queue<StartEvent, std::vector<StartEvent>, std::greater<>> starts_;
  // Flows sent and in their pipeline fill (FlowSpec::fill): finish time and flow.
  std::priority_queue<StartEvent, std::vector<StartEvent>, std::greater<>> drains_;
  FinishQueue finishes_;
  std::vector<std::int32_t> touched_;
  std::uint32_t batch_ = 0;
  double batch_window_ = 0;  // events up to this long after the batch time join the batch
  std::uint32_t refill_stamp_ = 0, pass_stamp_ = 0;
  std::vector<std::int32_t> refilled_;      // classes refilled in this refill
  std::vector<std::int32_t> refill_links_;  // links they cross
  std::vector<std::pair<double, std::int64_t>> pass_totals_;  // per refill link: remaining and unfixed before the filling
  std::vector<std::uint32_t> component_stamp_;  // per link: pass stamp of fill_component's scratch
  std::vector<std::int32_t> violated_;
  std::vector<std::int32_t> stack_;
  std::vector<ShareEntry> fill_links_;  // the filling's links, shares as pushed (a heap past kScanFillLinks)

  std::vector<double> group_rate_;
  std::vector<std::uint32_t> group_stamp_;
  std::vector<std::int32_t> groups_changed_;

  FlowSimResult result_;
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
    t.begin_flow(f.bytes, f.latency, f.fill);
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
  if (n >= static_cast<std::size_t>(INT32_MAX))
    throw FlowError(std::to_string(n) + " flows: at most " + std::to_string(INT32_MAX - 1) + " are supported");
  for (std::size_t l = 0; l < nl; ++l)
    if (!(net.capacity[l].value > 0) || !std::isfinite(net.capacity[l].value))
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
    if (!(flows.bytes[i].value >= 0) || !std::isfinite(flows.bytes[i].value))
      throw FlowError(flows.name(i) + ": bytes must be >= 0 and finite, got " + std::to_string(flows.bytes[i].value));
    if (!(flows.latency[i].value >= 0) || !std::isfinite(flows.latency[i].value))
      throw FlowError(flows.name(i) + ": latency must be >= 0 and finite, got " + std::to_string(flows.latency[i].value) +
                      " s");
    if (const double fill = flows.fill_of(i).value; !(fill >= 0) || !std::isfinite(fill))
      throw FlowError(flows.name(i) + ": fill must be >= 0 and finite, got " + std::to_string(fill));
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

void Engine::build_classes() {
  std::unordered_map<std::vector<std::int32_t>, std::int32_t, VectorHash> by_links;
  class_of_.assign(flows_.size(), -1);
  // The key: the sorted links, each followed by minus the flow's weight there where it is not 1
  // (links are >= 0, so the encoding is unambiguous). A link listed k times is one slot of weight
  // k (times the quotient's weight, which counts flows of the whole problem).
  std::vector<std::pair<std::int32_t, std::int64_t>> slots;
  std::vector<std::int32_t> key;
  for (std::size_t i = 0; i < flows_.size(); ++i) {
    const auto first = flows_.link_begin[i], last = flows_.link_begin[i + 1];
    if (first == last || flows_.bytes[i].value == 0) continue;  // finishes at its start, never active
    slots.clear();
    // A weight counts entries of the whole problem's link lists on one link: flows (fewer than
    // INT32_MAX, validate_and_index and simulate_op_quotient refuse more) times their repeats of
    // it, which would need link lists of gigabytes to pass INT32_MAX; so it fits a Slot's int32.
    for (auto k = first; k < last; ++k) slots.emplace_back(flows_.links[k], weights_ ? weights_->flow_link[k] : 1);
    std::sort(slots.begin(), slots.end());
    std::size_t merged = 0;
    for (std::size_t k = 1; k < slots.size(); ++k) {
      if (slots[k].first == slots[merged].first) slots[merged].second += slots[k].second;
      else slots[++merged] = slots[k];
    }
    slots.resize(merged + 1);
    key.clear();
    for (const auto& [l, w] : slots) {
      key.push_back(l);
      if (w != 1) key.push_back(static_cast<std::int32_t>(-w));
    }
    auto it = by_links.find(key);
    const bool inserted = it == by_links.end();
    if (inserted) it = by_links.emplace(key, static_cast<std::int32_t>(classes_.size())).first;
    if (inserted) {
      RouteClass c;
      c.link_begin = static_cast<std::int32_t>(class_slots_.size());
      for (const auto& [l, w] : slots) class_slots_.push_back({l, static_cast<std::int32_t>(w)});
      c.link_end = static_cast<std::int32_t>(class_slots_.size());
      classes_.push_back(std::move(c));
    }
    class_of_[i] = it->second;
  }
  class_link_pos_.assign(class_slots_.size(), -1);
  links_.resize(net_.capacity.size());
  component_stamp_.assign(net_.capacity.size(), 0);
  for (std::size_t l = 0; l < links_.size(); ++l) {
    links_[l].capacity = net_.capacity[l].value;
    int exponent = 0;  // capacity < 2^exponent
    std::frexp(links_[l].capacity, &exponent);
    links_[l].to_fixed = std::ldexp(1.0, 60 - exponent);
    links_[l].from_fixed = std::ldexp(1.0, exponent - 60);
  }
}

void Engine::release(std::int32_t f, double t) {
  FlowTiming& ft = result_.timing[f];
  ft.release = Seconds{t};
  ft.start = Seconds{t + flows_.latency[f].value};
  starts_.push({ft.start.value, f});
}

void Engine::start(std::int32_t f, double t) {
  ++result_.events;
  const std::int32_t c = class_of_[f];
  if (c < 0) {
    finish(f, t);
    return;
  }
  RouteClass& rc = classes_[c];
  if (rc.multiplicity == 0) {
    rc.served = 0;
    rc.updated = t;
  } else {
    advance(rc, t);
  }
  rc.finish_heap.emplace_back(rc.served + flows_.bytes[f].as_double(), f);
  std::push_heap(rc.finish_heap.begin(), rc.finish_heap.end(), std::greater<>());
  rc.next_level = rc.finish_heap.front().first;
  if (rc.multiplicity++ == 0) join(c, t);
  for (auto k = rc.link_begin; k < rc.link_end; ++k) links_[class_slots_[k].link].flows += class_slots_[k].weight;
  rc.joined = batch_;
  touch(c);
}

void Engine::finish(std::int32_t f, double t) {
  ++result_.events;
  FlowTiming& ft = result_.timing[f];
  ft.finish = Seconds{t};
  result_.makespan = std::max(result_.makespan, ft.finish);
  for (auto s = succ_begin_[f]; s < succ_begin_[f + 1]; ++s) {
    const std::int32_t g = succ_[s];
    if (--waiting_[g] == 0) {
      released_by_[g] = f;
      release(g, t);
    }
  }
}

// Adds an active class to the lists of its links (multiplicity went 0 -> 1).
void Engine::join(std::int32_t c, double t) {
  const RouteClass& rc = classes_[c];
  for (auto k = rc.link_begin; k < rc.link_end; ++k) {
    LinkState& ls = links_[class_slots_[k].link];
    if (ls.classes.empty()) ls.busy_since = t;
    class_link_pos_[k] = static_cast<std::int32_t>(ls.classes.size());
    ls.classes.push_back(c);
    ls.class_weights.push_back(class_slots_[k].weight);
  }
}

// Removes a class from its links' lists (multiplicity went 1 -> 0), swapping the last entry in.
void Engine::leave(std::int32_t c, double t) {
  const RouteClass& rc = classes_[c];
  for (auto k = rc.link_begin; k < rc.link_end; ++k) {
    const std::int32_t l = class_slots_[k].link;
    LinkState& ls = links_[l];
    const std::int32_t pos = class_link_pos_[k];
    const std::int32_t moved = ls.classes.back();
    ls.classes[pos] = moved;
    ls.classes.pop_back();
    ls.class_weights[pos] = ls.class_weights.back();
    ls.class_weights.pop_back();
    if (moved != c) {
      const RouteClass& mc = classes_[moved];
      for (auto j = mc.link_begin; j < mc.link_end; ++j)
        if (class_slots_[j].link == l) {
          class_link_pos_[j] = pos;
          break;
        }
    }
    class_link_pos_[k] = -1;
    if (ls.classes.empty()) ls.busy += t - ls.busy_since;
  }
}

void Engine::class_finish_event(std::int32_t c, double t) {
  RouteClass& rc = classes_[c];
  advance(rc, t);
  // The event was computed for the moment the first flow's level is reached; rounding may leave a
  // few ulps, so flows within 1e-9 of their size (plus a micro-byte) count as done, and so do the
  // flows that finish within the batch window (run()).
  while (!rc.finish_heap.empty()) {
    auto [level, f] = rc.finish_heap.front();
    const double slack = std::max(1e-9 * flows_.bytes[f].as_double() + 1e-6, rc.rate * batch_window_);
    if (level > rc.served + slack) break;
    std::pop_heap(rc.finish_heap.begin(), rc.finish_heap.end(), std::greater<>());
    rc.finish_heap.pop_back();
    if (level > rc.served) rc.served = level;
    for (auto k = rc.link_begin; k < rc.link_end; ++k) links_[class_slots_[k].link].flows -= class_slots_[k].weight;
    rc.left = batch_;
    if (--rc.multiplicity == 0) leave(c, t);
    touch(c);
    // Sent: its bottleneck is the one of its last rate; with a fill it finishes fill / rate later,
    // loading no link meanwhile (flow_sim.hpp).
    result_.timing[f].bottleneck = rc.bottleneck;
    if (const double fill = flows_.fill_of(static_cast<std::size_t>(f)).value; fill > 0)
      drains_.push({t + fill / rc.rate, f});
    else
      finish(f, t);
  }
  if (!rc.finish_heap.empty()) rc.next_level = rc.finish_heap.front().first;
  touch(c);
}

void Engine::schedule_finish(std::int32_t c, double t) {
  RouteClass& rc = classes_[c];
  if (rc.multiplicity == 0 || !(rc.rate > 0)) {  // no flows: finish_heap is empty too
    finishes_.erase(c);
    return;
  }
  const double remaining = std::max(0.0, rc.next_level - rc.served);
  finishes_.set(c, t + remaining / rc.rate);
}

// Progressive filling (flow_sim.hpp) over the links in fill_links_, whose remaining capacity and
// unfixed count are set: the link with the smallest share fixes its unfixed members at that share.
// for_each_member(link, fix) calls fix(c) for the refilled classes on the link; `to_fix` counts
// the active ones, and the filling stops once all are fixed (the links left then have no unfixed
// member: fixing at them would change nothing). Up to kScanFillLinks links the smallest share is
// found by a scan; past that fill_links_ is a heap whose keys are lower bounds: a link's share
// only grows while the filling runs, so a popped link whose share has grown is pushed back with
// its current share, and a popped key equal to the current share is the minimum. (In a local
// refill most links empty or grow before they would be popped: on the tuned deepseek-v3 schedule
// a 64-link heap popped 26 keys for 8 links that fixed classes.)
template <class ForEachMember>
void Engine::progressive_fill(std::size_t to_fix, ForEachMember&& for_each_member) {
  auto fix_at = [&](std::int32_t link, double share) {
    links_[link].fill_share = share;
    for_each_member(links_[link], [&](std::int32_t c) {
      RouteClass& rc = classes_[c];
      if (rc.new_bottleneck >= 0) return;
      --to_fix;
      rc.new_rate = share;
      rc.new_bottleneck = link;
      for (auto k = rc.link_begin; k < rc.link_end; ++k) {
        LinkState& other = links_[class_slots_[k].link];
        const std::int64_t flows = rc.multiplicity * class_slots_[k].weight;
        other.remaining -= static_cast<double>(flows) * share;
        other.unfixed -= flows;
      }
    });
  };
  if (fill_links_.size() <= kScanFillLinks) {
    // Few links (a local refill): the smallest share by a scan, the links left without unfixed
    // flows dropped as it goes; cheaper than a heap whose pops are mostly such links or stale.
    while (to_fix > 0 && !fill_links_.empty()) {
      std::size_t best = 0;
      double best_share = INFINITY;
      for (std::size_t i = 0; i < fill_links_.size();) {
        const LinkState& ls = links_[fill_links_[i].link];
        if (ls.unfixed == 0) {
          fill_links_[i] = fill_links_.back();
          fill_links_.pop_back();
          continue;
        }
        const double share = std::max(0.0, ls.remaining) / static_cast<double>(ls.unfixed);
        if (share < best_share) {
          best_share = share;
          best = i;
        }
        ++i;
      }
      if (fill_links_.empty()) break;
      const std::int32_t link = fill_links_[best].link;
      fill_links_[best] = fill_links_.back();
      fill_links_.pop_back();
      fix_at(link, best_share);
    }
    return;
  }
  std::make_heap(fill_links_.begin(), fill_links_.end(), std::greater<>());
  while (to_fix > 0 && !fill_links_.empty()) {
    const ShareEntry top = fill_links_.front();
    std::pop_heap(fill_links_.begin(), fill_links_.end(), std::greater<>());
    fill_links_.pop_back();
    LinkState& ls = links_[top.link];
    if (ls.unfixed == 0) continue;
    const double share = std::max(0.0, ls.remaining) / static_cast<double>(ls.unfixed);
    if (share > top.share) {
      fill_links_.push_back({share, top.link});
      std::push_heap(fill_links_.begin(), fill_links_.end(), std::greater<>());
      continue;
    }
    fix_at(top.link, share);
  }
}

// Recomputes max-min rates after the starts and finishes of one batch (the touched classes).
//
// Local refill, verified. The allocation before the batch was max-min fair: every active class had
// a bottleneck link, saturated, on which no class had a higher rate (the characterization in
// flow_sim.hpp). The refill recomputes the rates of a set Q of classes by progressive filling,
// with every other ("frozen") class keeping its rate, whose load is subtracted from each link's
// capacity up front. The result is the max-min fair allocation of the whole network once these
// hold on every link l crossed by a class of Q (links crossed by none are unchanged, so their
// frozen classes keep valid bottlenecks):
//   (a) feasible: the frozen load plus the refilled load fits C_l;
//   (b) when frozen classes have l as their bottleneck (at rate level_l): l stays saturated, no
//       refilled class on l gets more than level_l, and a refilled class fixed at l is fixed at
//       level_l (not below a frozen class there);
//   (c) when refilled classes are fixed at l at share s and no frozen class is bottlenecked there:
//       no frozen class on l has a rate above s.
// Then every class has a bottleneck (refilled classes the link they were fixed at, frozen ones
// their old one) and the allocation is feasible, which makes it the max-min fair one. A link that
// breaks a condition brings the frozen classes that break it into Q (those bottlenecked there for
// (b), those above s for (c), all for (a)), and the filling runs again; Q grows by at least one
// class per pass, so this ends. The conditions are checked to a relative tolerance of 1e-10 of the
// link capacity or rate: exact arithmetic would see no violation where rounding leaves a few ulps.
//
// Q starts as the touched classes plus the classes bottlenecked on their links (a load change
// there moves them, so the first pass would bring them in anyway). The cost is the classes whose
// rates move and their links; when the change spreads past SimOptions::local_refill_limit classes,
// Engine::fill_component refills its whole reach in one pass instead.
void Engine::refill(double t) {
  constexpr double kTolerance = 1e-10;
  ++result_.rate_updates;
  ++refill_stamp_;
  refilled_.clear();
  for (auto c : touched_) add_to_refill(c, t);
  // A flow that joins or leaves a link where frozen classes are bottlenecked moves them (the link's
  // load changed): bring them in now rather than after a failed pass.
  for (std::size_t i = 0, n = refilled_.size(); i < n; ++i) {
    const RouteClass& rc = classes_[refilled_[i]];
    for (auto k = rc.link_begin; k < rc.link_end; ++k) {
      const std::int32_t l = class_slots_[k].link;
      if (links_[l].bottlenecked == 0 || links_[l].scanned == refill_stamp_) continue;
      links_[l].scanned = refill_stamp_;  // once per link, however many touched classes cross it
      for (auto c : links_[l].classes)
        if (classes_[c].bottleneck == l) add_to_refill(c, t);
    }
  }

  // Link totals: capacity minus frozen load, refilled flows, and the active refilled classes
  // (LinkState::members, in the order of refilled_). A pass after a failed one adds the classes
  // that failure brought in to the totals the failed pass started from (pass_totals_): the same
  // sums in the same order as adding every class again, at the cost of the new classes only.
  refill_links_.clear();
  std::size_t counted = 0, active = 0;  // classes of refilled_ in the totals, and the active ones
  while (true) {
    ++pass_stamp_;
    for (std::size_t j = 0; j < refill_links_.size(); ++j) {
      LinkState& ls = links_[refill_links_[j]];
      ls.remaining = pass_totals_[j].first;
      ls.unfixed = pass_totals_[j].second;
      ls.fill_share = -1;
    }
    for (std::size_t i = 0; i < counted; ++i) {
      classes_[refilled_[i]].new_rate = 0;
      classes_[refilled_[i]].new_bottleneck = -1;
    }
    for (std::size_t i = counted, n = refilled_.size(); i < n; ++i) {
      if (i + 8 < n) __builtin_prefetch(&classes_[refilled_[i + 8]]);
      if (i + 4 < n) __builtin_prefetch(&class_slots_[classes_[refilled_[i + 4]].link_begin]);
      const std::int32_t c = refilled_[i];
      RouteClass& rc = classes_[c];
      rc.new_rate = 0;
      rc.new_bottleneck = -1;
      if (rc.multiplicity > 0) ++active;
      for (auto k = rc.link_begin; k < rc.link_end; ++k) {
        const std::int32_t l = class_slots_[k].link;
        LinkState& ls = links_[l];
        if (ls.stamp != refill_stamp_) {
          ls.stamp = refill_stamp_;
          ls.remaining = ls.capacity - static_cast<double>(ls.allocated) * ls.from_fixed;
          ls.unfixed = 0;
          ls.refilled_bottlenecked = 0;
          ls.members.clear();
          ls.fill_share = -1;
          refill_links_.push_back(l);
        }
        const std::int64_t w = class_slots_[k].weight;
        ls.remaining += static_cast<double>(rc.committed * w) * rc.rate;
        if (rc.bottleneck == l) ls.refilled_bottlenecked += rc.committed * w;
        if (rc.multiplicity > 0) {
          ls.unfixed += rc.multiplicity * w;
          ls.members.push_back(c);
        }
      }
    }
    counted = refilled_.size();
    pass_totals_.resize(refill_links_.size());
    for (std::size_t j = 0; j < refill_links_.size(); ++j)
      pass_totals_[j] = {links_[refill_links_[j]].remaining, links_[refill_links_[j]].unfixed};

    fill_links_.clear();
    for (auto l : refill_links_) push_share(l);
    progressive_fill(active, [&](const LinkState& ls, auto&& fix) {
      for (auto c : ls.members) fix(c);
    });

    // Conditions (a)-(c) on every link the refilled classes cross.
    violated_.clear();
    for (auto l : refill_links_) {
      LinkState& ls = links_[l];
      if (ls.classes.size() == ls.members.size()) continue;  // nothing frozen
      const double slack = kTolerance * ls.capacity;
      bool ok = ls.remaining >= -slack;  // (a)
      if (ok && ls.bottlenecked > ls.refilled_bottlenecked) {  // (b)
        const double high = ls.level * (1 + kTolerance), low = ls.level * (1 - kTolerance);
        ok = ls.remaining <= slack && (ls.fill_share < 0 || ls.fill_share >= low);
        for (std::size_t i = 0; ok && i < ls.members.size(); ++i) ok = classes_[ls.members[i]].new_rate <= high;
        ls.level_kept = pass_stamp_;
      } else if (ok && ls.fill_share >= 0) {  // (c)
        const double high = ls.fill_share * (1 + kTolerance);
        for (auto c : ls.classes)
          if (classes_[c].in_refill != refill_stamp_ && classes_[c].rate > high) {
            ok = false;
            break;
          }
      }
      if (!ok) violated_.push_back(l);
    }
    if (violated_.empty()) break;
    // A violated link brings in the frozen classes that break its condition: those bottlenecked
    // there (b), or with a rate above the share of the refilled classes fixed there (c); an
    // overloaded link (a) brings all of them.
    for (auto l : violated_) {
      const LinkState& ls = links_[l];
      const bool overloaded = ls.remaining < -kTolerance * ls.capacity;
      const double high = ls.fill_share * (1 + kTolerance);
      for (auto c : ls.classes) {
        const RouteClass& rc = classes_[c];
        if (overloaded || rc.bottleneck == l || (ls.fill_share >= 0 && rc.rate > high)) add_to_refill(c, t);
      }
    }
    // The change spreads: one filling over its whole reach is cheaper than a pass per hop.
    if (refilled_.size() > opt_.local_refill_limit) {
      fill_component(t);
      break;
    }
  }

  // Commit: link totals, rates, finish events.
  // Where frozen classes stay bottlenecked, a link's `level` stays their rate: the refilled ones
  // are within the tolerance of it, and moving it would let that tolerance add up over refills.
  for (auto c : refilled_) {
    RouteClass& rc = classes_[c];
    if (rc.new_rate == rc.rate && rc.new_bottleneck == rc.bottleneck && rc.multiplicity == rc.committed) {
      // Nothing moves on its links (about a third of the refilled classes on a tuned schedule).
      if (rc.bottleneck >= 0 && links_[rc.bottleneck].level_kept != pass_stamp_) links_[rc.bottleneck].level = rc.rate;
    } else {
      for (auto k = rc.link_begin; k < rc.link_end; ++k) {
        const std::int32_t l = class_slots_[k].link;
        const std::int64_t w = class_slots_[k].weight;
        LinkState& ls = links_[l];
        ls.allocated += ls.fixed(static_cast<double>(rc.multiplicity * w) * rc.new_rate) -
                        ls.fixed(static_cast<double>(rc.committed * w) * rc.rate);
        if (rc.bottleneck == l) ls.bottlenecked -= rc.committed * w;
        if (rc.new_bottleneck == l) {
          ls.bottlenecked += rc.multiplicity * w;
          if (ls.level_kept != pass_stamp_) ls.level = rc.new_rate;
        }
      }
    }
    const bool changed = rc.new_rate != rc.rate || rc.touched == batch_;
    rc.rate = rc.new_rate;
    rc.bottleneck = rc.new_bottleneck;
    rc.committed = rc.multiplicity;
    if (changed) schedule_finish(c, t);
  }

  if (!opt_.link_group.empty()) {
    for (auto c : refilled_) {
      RouteClass& rc = classes_[c];
      const double now = static_cast<double>(rc.multiplicity) * rc.rate;
      const double delta = now - rc.contribution;
      rc.contribution = now;
      if (delta == 0) continue;
      for (auto k = rc.link_begin; k < rc.link_end; ++k) {
        const std::int32_t l = class_slots_[k].link;
        const std::int32_t g = opt_.link_group[l];
        if (g < 0) continue;
        group_rate_[g] += delta * static_cast<double>(class_slots_[k].weight * (weights_ ? weights_->link_replicas[l] : 1));
        if (group_stamp_[g] != refill_stamp_) {
          group_stamp_[g] = refill_stamp_;
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

// The fallback of Engine::refill when a change spreads, by level cut: a start or finish can only
// move rates at or above theta, the smallest of
//   - the old rate of each class that lost flows: at every level x below it the load of every link
//     is unchanged or lower (the leaving flows were still unfixed there), and a link that saturated
//     below it carried none of them, so the filling fixes the same classes at the same levels;
//   - for each class that gained flows, min over its links l of C_l / n_l (n_l: active flows on l
//     after the batch): a new flow gets at least that rate (at level x <= C_l / n_l no link of it
//     can be full), so below it the new flows only add load on links that cannot saturate there.
// The classes refilled are the ones already in the refilled set plus every active class with rate
// >= theta reachable from their links through links and such classes (a change can only travel
// through a class whose rate moves); the others keep their rate, their load subtracted up front.
// Refilling more classes than needed is exact too: max-min rates of a subset, with the rest at
// their max-min rates, are the max-min rates of the subset on the capacity the rest leaves.
void Engine::fill_component(double t) {
  double theta = INFINITY;
  for (auto c : touched_) {
    const RouteClass& rc = classes_[c];
    if (rc.left == batch_) theta = std::min(theta, rc.rate);
    if (rc.joined == batch_)
      for (auto k = rc.link_begin; k < rc.link_end; ++k) {
        const LinkState& ls = links_[class_slots_[k].link];
        theta = std::min(theta, ls.capacity / static_cast<double>(std::max<std::int64_t>(1, ls.flows)));
      }
  }
  // Rates equal to theta in exact arithmetic may differ in the last bits (two links saturating at
  // the same level), and such classes can change, so theta keeps a relative margin of 1e-9.
  theta *= 1.0 - 1e-9;
  ++pass_stamp_;
  stack_.clear();
  auto visit_links = [&](std::int32_t c) {
    const RouteClass& rc = classes_[c];
    for (auto k = rc.link_begin; k < rc.link_end; ++k) {
      LinkState& ls = links_[class_slots_[k].link];
      if (component_stamp_[class_slots_[k].link] != pass_stamp_) {
        component_stamp_[class_slots_[k].link] = pass_stamp_;
        ls.remaining = ls.capacity;
        ls.unfixed = 0;
        stack_.push_back(class_slots_[k].link);
      }
    }
  };
  for (auto c : refilled_) visit_links(c);
  // One pass per link: every member on a visited link is reached from it, so the remaining
  // capacity and the unfixed count are complete when the link is scanned.
  fill_links_.clear();
  while (!stack_.empty()) {
    const std::int32_t l = stack_.back();
    stack_.pop_back();
    LinkState& ls = links_[l];
    for (std::size_t i = 0; i < ls.classes.size(); ++i) {
      const std::int32_t c = ls.classes[i];
      const RouteClass& rc = classes_[c];
      const std::int64_t flows = rc.multiplicity * ls.class_weights[i];
      if (rc.in_refill == refill_stamp_ || !(rc.rate < theta)) {
        ls.unfixed += flows;
        if (rc.in_refill != refill_stamp_) {
          add_to_refill(c, t);
          visit_links(c);
        }
      } else {
        ls.remaining -= static_cast<double>(flows) * rc.rate;
      }
    }
    push_share(l);
  }
  std::size_t active = 0;
  for (auto c : refilled_) {
    classes_[c].new_rate = 0;
    classes_[c].new_bottleneck = -1;
    if (classes_[c].multiplicity > 0) ++active;
  }
  progressive_fill(active, [&](const LinkState& ls, auto&& fix) {
    for (auto c : ls.classes)
      if (classes_[c].in_refill == refill_stamp_) fix(c);
  });
}

FlowSimResult Engine::run() {
  const auto loop_start = std::chrono::steady_clock::now();
  build_classes();
  finishes_.resize(classes_.size());
  if (!opt_.link_group.empty()) {
    std::int32_t groups = 0;
    for (auto g : opt_.link_group) groups = std::max(groups, g + 1);
    group_rate_.assign(groups, 0.0);
    group_stamp_.assign(groups, 0);
  }
  const std::size_t n = flows_.size();
  result_.timing.assign(n, FlowTiming{});
  released_by_.assign(n, -1);
  for (std::size_t i = 0; i < n; ++i)
    if (waiting_[i] == 0) release(static_cast<std::int32_t>(i), 0.0);

  // One batch per time: every start, every flow sent, and every end of a pipeline fill at that
  // time, then one refill. Starts of equal time come before the flows sent, as a flow that starts
  // and one that ends at the same instant never share a rate; an end of fill moves no rate (the
  // flow left its links when it was sent) but may release flows that start in the batch. "Equal" is to 1e-12 relative (the batch window): flows the schedule treats alike
  // finish at times that differ by the rounding of their different arithmetic paths (a few
  // hundred ulps), and one refill for them all instead of one each halves the refills of a tuned
  // schedule (qwen3-235b, docs/performance.md) while moving no time by more than 1e-12 relative.
  constexpr double kBatchWindow = 1e-12;
  while (!starts_.empty() || !finishes_.empty() || !drains_.empty()) {
    const double t = std::min({starts_.empty() ? INFINITY : starts_.top().time,
                               finishes_.empty() ? INFINITY : finishes_.top_time(),
                               drains_.empty() ? INFINITY : drains_.top().time});
    const double horizon = t * (1 + kBatchWindow);
    batch_window_ = horizon - t;
    ++batch_;
    touched_.clear();
    while (true) {
      if (!starts_.empty() && starts_.top().time <= horizon) {
        const std::int32_t f = starts_.top().flow;
        starts_.pop();
        start(f, t);
      } else if (!finishes_.empty() && finishes_.top_time() <= horizon) {
        const std::int32_t c = finishes_.top_class();
        finishes_.erase(c);
        class_finish_event(c, t);
      } else if (!drains_.empty() && drains_.top().time <= horizon) {
        const std::int32_t f = drains_.top().flow;
        drains_.pop();
        finish(f, t);
      } else {
        break;
      }
    }
    if (!touched_.empty()) refill(t);
  }

  result_.event_loop_wall = Seconds{std::chrono::duration<double>(std::chrono::steady_clock::now() - loop_start).count()};
  // Busy time per link; bytes and utilization come from the caller's flows (add_link_traffic).
  result_.links.assign(links_.size(), LinkStats{});
  for (std::size_t l = 0; l < links_.size(); ++l) result_.links[l].busy = Seconds{links_[l].busy};

  // Critical path: from the flow that finished last back through the predecessors that released it.
  if (n > 0) {
    std::size_t last = 0;
    for (std::size_t i = 1; i < n; ++i)
      if (result_.timing[i].finish > result_.timing[last].finish) last = i;
    for (std::int32_t f = static_cast<std::int32_t>(last); f >= 0; f = released_by_[f]) {
      const FlowTiming& ft = result_.timing[f];
      result_.critical_path.push_back(
          {flows_.id_of(static_cast<std::size_t>(f)), static_cast<std::size_t>(f), ft.release, ft.start, ft.finish, ft.bottleneck});
    }
  }
  result_.simulated_flows = static_cast<std::int64_t>(n);
  return std::move(result_);
}

// Runs the engine on one flow per cell of `q` (flow_quotient.hpp) and gives every flow its cell's
// times. The flows of a cell are alike, so which one stands for it does not matter: the first.
FlowSimResult simulate_quotient(const FlowNetwork& net, const FlowTable& flows, const FlowGraph& graph,
                                FlowQuotient& q, const SimOptions& options, std::vector<std::int32_t>* row_of_flow) {
  const std::size_t n = flows.size(), nl = net.capacity.size();
  std::vector<std::int32_t> first_flow(q.flow_cells, -1);
  std::vector<std::int64_t> flow_cell_size(q.flow_cells, 0);
  for (std::size_t f = 0; f < n; ++f) {
    if (first_flow[q.flow_cell[f]] < 0) first_flow[q.flow_cell[f]] = static_cast<std::int32_t>(f);
    ++flow_cell_size[q.flow_cell[f]];
  }
  // Flow cell c waits for the cells of its first flow's predecessors (found through `after`: ids
  // are indices when they are 0..n-1, else looked up once).
  std::unordered_map<std::int64_t, std::int32_t> index_of_id;
  if (!graph.dense_ids)
    for (std::size_t i = 0; i < n; ++i) index_of_id.emplace(flows.id_of(i), static_cast<std::int32_t>(i));
  auto index_of = [&](std::int64_t id) {
    return graph.dense_ids ? static_cast<std::int32_t>(id) : index_of_id.at(id);
  };
  QuotientProblem problem(net, q.link_cell, q.link_cells, options);
  std::vector<std::int32_t> cells, preds;
  for (std::int32_t c = 0; c < q.flow_cells; ++c) {
    const auto f = static_cast<std::size_t>(first_flow[c]);
    cells.clear();
    for (auto k = flows.link_begin[f]; k < flows.link_begin[f + 1]; ++k) cells.push_back(q.link_cell[flows.links[k]]);
    preds.clear();
    for (auto k = flows.after_begin[f]; k < flows.after_begin[f + 1]; ++k) preds.push_back(q.flow_cell[index_of(flows.after[k])]);
    problem.add_cell(flows.bytes[f], flows.latency[f], flows.fill_of(f), flow_cell_size[c], cells, preds);
  }
  FlowSimResult qr = problem.run();

  // A flow's times are its cell's; its bottleneck is its own link in the cell's bottleneck cell.
  auto timing_of = [&](std::size_t f) {
    const FlowTiming& t = qr.timing[q.flow_cell[f]];
    FlowTiming ft{t.release, t.start, t.finish, -1};
    if (t.bottleneck >= 0)
      for (auto k = flows.link_begin[f]; k < flows.link_begin[f + 1]; ++k)
        if (q.link_cell[flows.links[k]] == t.bottleneck) {
          ft.bottleneck = flows.links[k];
          break;
        }
    return ft;
  };
  FlowSimResult out;
  out.makespan = qr.makespan;
  out.rate_updates = qr.rate_updates;
  out.event_loop_wall = qr.event_loop_wall;
  out.simulated_flows = q.flow_cells;
  out.group_timeline = std::move(qr.group_timeline);
  // Every flow starts and finishes once; the quotient counted one start and one finish per cell.
  out.events = 2 * static_cast<std::int64_t>(n);
  out.links.assign(nl, LinkStats{});
  for (std::size_t l = 0; l < nl; ++l) out.links[l].busy = qr.links[q.link_cell[l]].busy;
  // Critical path: the quotient's, each cell's step taken by a predecessor of the flow after it.
  std::int32_t f = -1;
  for (const CriticalStep& step : qr.critical_path) {
    const auto cell = static_cast<std::int32_t>(step.flow_index);
    if (f < 0) {
      f = first_flow[cell];
    } else {
      std::int32_t from = -1;
      for (auto k = flows.after_begin[f]; k < flows.after_begin[f + 1] && from < 0; ++k)
        if (const std::int32_t p = index_of(flows.after[k]); q.flow_cell[p] == cell) from = p;
      f = from;
    }
    const FlowTiming ft = timing_of(static_cast<std::size_t>(f));
    out.critical_path.push_back(
        {flows.id_of(static_cast<std::size_t>(f)), static_cast<std::size_t>(f), ft.release, ft.start, ft.finish, ft.bottleneck});
  }
  if (row_of_flow) {  // one row per cell, its bottleneck a link cell: not a link, so none
    out.timing = std::move(qr.timing);
    for (auto& t : out.timing) t.bottleneck = -1;
    *row_of_flow = std::move(q.flow_cell);
  } else {
    out.timing.resize(n);
    for (std::size_t g = 0; g < n; ++g) out.timing[g] = timing_of(g);
  }
  return out;
}

}  // namespace

FlowSimResult QuotientProblem::run() const {
  return Engine(net, flows, validate_and_index(net, flows), options, &weights).run();
}

namespace {

// Bytes over each link and its utilization (bytes / (capacity * makespan)), from the flows given.
void add_link_traffic(FlowSimResult& result, const FlowNetwork& net, const FlowTable& flows) {
  for (std::size_t f = 0; f < flows.size(); ++f)
    for (auto k = flows.link_begin[f]; k < flows.link_begin[f + 1]; ++k) result.links[flows.links[k]].bytes += flows.bytes[f];
  for (std::size_t l = 0; l < result.links.size(); ++l) {
    LinkStats& s = result.links[l];
    s.utilization =
        result.makespan.value > 0 ? s.bytes.as_double() / (net.capacity[l].value * result.makespan.value) : 0.0;
  }
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
      FlowQuotient q = find_quotient(network, flows, graph, options.link_group, flows.size() / 2, 48);
      classes_wall = Seconds{std::chrono::duration<double>(std::chrono::steady_clock::now() - classes_start).count()};
      if (q.flow_cells >= 0) return simulate_quotient(network, flows, graph, q, options, row_of_flow);
    }
    return Engine(network, flows, std::move(graph), options, nullptr).run();
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
