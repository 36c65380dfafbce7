// The event loop both engines share (event_loop.hpp).
#include "event_loop.hpp"

#include <cmath>
#include <string>
#include <unordered_map>

namespace reshard::sim {

void FinishQueue::set(std::int32_t c, double time) {
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

void FinishQueue::erase(std::int32_t c) {
  const std::int32_t i = pos_[c];
  if (i < 0) return;
  pos_[c] = -1;
  const Entry last = heap_.back();
  heap_.pop_back();
  if (i == static_cast<std::int32_t>(heap_.size())) return;
  heap_[i] = last;
  pos_[last.entry] = i;
  up(i);
  down(pos_[last.entry]);
}

void FinishQueue::up(std::int32_t i) {
  const Entry e = heap_[i];
  while (i > 0) {
    const std::int32_t p = (i - 1) / 2;
    if (!less(e, heap_[p])) break;
    place(i, heap_[p]);
    i = p;
  }
  place(i, e);
}

void FinishQueue::down(std::int32_t i) {
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

namespace {

struct VectorHash {
  std::size_t operator()(const std::vector<std::int32_t>& v) const noexcept {
    std::size_t h = 0xcbf29ce484222325ull;
    for (auto x : v) h = (h ^ static_cast<std::uint32_t>(x)) * 0x100000001b3ull;
    return h;
  }
};

}  // namespace

FlowClasses flow_classes(const FlowTable& flows, const QuotientWeights* weights) {
  FlowClasses out;
  std::unordered_map<std::vector<std::int32_t>, std::int32_t, VectorHash> by_links;
  out.class_of.assign(flows.size(), -1);
  // The key: the sorted links, each followed by minus the flow's weight there where it is not 1
  // (links are >= 0, so the encoding is unambiguous). A link listed k times is one slot of weight
  // k (times the quotient's weight, which counts flows of the whole problem).
  std::vector<std::pair<std::int32_t, std::int64_t>> slots;
  std::vector<std::int32_t> key;
  for (std::size_t i = 0; i < flows.size(); ++i) {
    const auto first = flows.link_begin[i], last = flows.link_begin[i + 1];
    if (first == last || flows.bytes[i].value == 0) continue;  // finishes at its start, never active
    slots.clear();
    // A weight counts entries of the whole problem's link lists on one link: flows (fewer than
    // INT32_MAX, validate_and_index and simulate_op_quotient refuse more) times their repeats of
    // it, which would need link lists of gigabytes to pass INT32_MAX; so it fits an int32.
    for (auto k = first; k < last; ++k) slots.emplace_back(flows.links[k], weights ? weights->flow_link[k] : 1);
    std::sort(slots.begin(), slots.end());
    key.clear();
    const std::size_t mark = out.links.size();
    for (std::size_t k = 0; k < slots.size();) {  // equal links merged: their weights add up
      const std::int32_t l = slots[k].first;
      std::int64_t w = slots[k].second;
      while (++k < slots.size() && slots[k].first == l) w += slots[k].second;
      key.push_back(l);
      if (w != 1) key.push_back(static_cast<std::int32_t>(-w));
      out.links.push_back(l);
      out.weight.push_back(static_cast<std::int32_t>(w));
    }
    auto [it, fresh] = by_links.emplace(key, static_cast<std::int32_t>(out.size()));
    if (fresh) {
      out.begin.push_back(static_cast<std::int32_t>(out.links.size()));
    } else {
      out.links.resize(mark);
      out.weight.resize(mark);
    }
    out.class_of[i] = it->second;
  }
  return out;
}

void EventLoop::release(std::int32_t f, double t) {
  FlowTiming& ft = result_.timing[f];
  ft.release = Seconds{t};
  ft.start = Seconds{t + flows_.latency[f].value};
  starts_.push({ft.start.value, f});
}

void EventLoop::start(std::int32_t f, double t) {
  ++result_.events;
  if (classes_of_flows_.class_of[f] < 0) finish(f, t);
  else start_active(f, t);
}

void EventLoop::finish(std::int32_t f, double t) {
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

std::optional<FlowSimResult> EventLoop::run() {
  const auto loop_start = std::chrono::steady_clock::now();
  busy_since_.assign(net_.capacity.size(), 0.0);
  busy_.assign(net_.capacity.size(), 0.0);
  prepare();
  const std::size_t n = flows_.size();
  result_.timing.assign(n, FlowTiming{});
  released_by_.assign(n, -1);
  for (std::size_t i = 0; i < n; ++i)
    if (waiting_[i] == 0) release(static_cast<std::int32_t>(i), 0.0);

  // One batch per time: every start and finish at that time, then one refill. Starts of equal
  // time come before finishes, as a flow that starts and one that ends at the same instant never
  // share a rate. "Equal" is to tolerance::kBatchWindow relative (tolerances.hpp says why).
  constexpr double kBatchWindow = tolerance::kBatchWindow;
  const auto total_events = static_cast<std::int64_t>(2 * n);
  std::int64_t reported = 0;  // events at the last progress report
  while (!starts_.empty() || !finishes_.empty()) {
    if (opt_.progress && result_.events - reported >= 65536) {
      reported = result_.events;
      opt_.progress({"simulate", reported, total_events, ""});
    }
    const double t = std::min(starts_.empty() ? INFINITY : starts_.top().time,
                              finishes_.empty() ? INFINITY : finishes_.top_time());
    const double horizon = t * (1 + kBatchWindow);
    batch_window_ = horizon - t;
    while (true) {
      if (!starts_.empty() && starts_.top().time <= horizon) {
        const std::int32_t f = starts_.top().flow;
        starts_.pop();
        start(f, t);
      } else if (!finishes_.empty() && finishes_.top_time() <= horizon) {
        const std::int32_t e = finishes_.top_entry();
        finishes_.erase(e);
        finish_event(e, t);
      } else {
        break;
      }
    }
    if (pending()) refill(t);
    if (gave_up()) return std::nullopt;
  }
  if (opt_.progress) opt_.progress({"simulate", result_.events, total_events, ""});

  result_.event_loop_wall = Seconds{std::chrono::duration<double>(std::chrono::steady_clock::now() - loop_start).count()};
  // Busy time per link; bytes and utilization come from the caller's flows (add_link_traffic).
  result_.links.assign(busy_.size(), LinkStats{});
  for (std::size_t l = 0; l < busy_.size(); ++l) result_.links[l].busy = Seconds{busy_[l]};

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

}  // namespace reshard::sim
