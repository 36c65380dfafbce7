// Internal to the simulator: what the two event loops share (flow_sim.cpp's class engine, whose
// rates come from the max-min solver of maxmin.hpp, and group_engine.cpp's bottleneck-group
// engine): releases, starts and finishes in batches of equal time, the finish queue, the classes
// of flows, the critical path. A loop supplies four steps: start(flow), a finish event of one
// entry of the finish queue, whether a refill is pending, and the refill.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <queue>
#include <span>
#include <utility>
#include <vector>

#include "flow_quotient.hpp"
#include "flow_table.hpp"
#include "tolerances.hpp"

namespace reshard::sim {

// The next finish time of every entry (a class, or a bottleneck group) with active flows: a
// binary min-heap indexed by entry, so a rate change moves the entry's one slot (no stale entries
// pile up: a refill changes thousands of rates at once, and a lazy queue would grow by all of
// them every time). Ties go to the lower index, so simultaneous finishes come in a fixed order.
class FinishQueue {
 public:
  void resize(std::size_t entries) { pos_.assign(entries, -1); }
  bool empty() const { return heap_.empty(); }
  double top_time() const { return heap_.front().time; }
  std::int32_t top_entry() const { return heap_.front().entry; }
  void set(std::int32_t c, double time);
  void erase(std::int32_t c);

 private:
  struct Entry {
    double time;
    std::int32_t entry;
  };
  bool less(const Entry& a, const Entry& b) const {
    return a.time < b.time || (a.time == b.time && a.entry < b.entry);
  }
  void place(std::int32_t i, const Entry& e) {
    heap_[i] = e;
    pos_[e.entry] = i;
  }
  void up(std::int32_t i);
  void down(std::int32_t i);
  std::vector<Entry> heap_;
  std::vector<std::int32_t> pos_;
};

// Classes of flows: flows with identical link lists and weights always get the same rate. Flow i
// is in class class_of[i] (-1: no link or no bytes, it finishes at its start); class c crosses
// links[begin[c] .. begin[c + 1]) with weight[k] on link links[k] (distinct links, sorted; a link
// listed k times is one slot of weight k, times the quotient's weight).
struct FlowClasses {
  std::vector<std::int32_t> class_of;
  std::vector<std::int32_t> begin{0};
  std::vector<std::int32_t> links;
  std::vector<std::int32_t> weight;
  std::size_t size() const { return begin.size() - 1; }
};
FlowClasses flow_classes(const FlowTable& flows, const QuotientWeights* weights);

// The event loop: one batch per time (every start and finish within tolerance::kBatchWindow
// relative of it, starts first), then one refill. Derived loops supply the four steps.
class EventLoop {
 public:
  // `weights`: per flow and link (aligned with FlowTable::links), how many flows of the whole
  // problem one flow here stands for on that link, and per link how many links it stands for
  // (the symmetry quotient, flow_quotient.hpp); nullptr: every weight is 1.
  // `classes`: flow_classes(flows, weights).
  EventLoop(const FlowNetwork& net, const FlowTable& flows, FlowGraph graph, const SimOptions& opt,
            const QuotientWeights* weights, FlowClasses classes)
      : net_(net), flows_(flows), weights_(weights), opt_(opt), classes_of_flows_(std::move(classes)),
        succ_begin_(std::move(graph.succ_begin)), succ_(std::move(graph.succ)), waiting_(std::move(graph.waiting)) {}
  virtual ~EventLoop() = default;

  // The simulation; std::nullopt when the loop gave up (gave_up(), below) before the end.
  std::optional<FlowSimResult> run();

 protected:
  // Sizes the loop's own state: the finish queue's entries (resize) and the classes.
  virtual void prepare() = 0;
  // Flow f (in a class) becomes active at t.
  virtual void start_active(std::int32_t f, double t) = 0;
  // Entry e of the finish queue is due at t (it was taken off the queue).
  virtual void finish_event(std::int32_t e, double t) = 0;
  virtual bool pending() const = 0;
  virtual void refill(double t) = 0;
  // Whether the loop stops here, its answer unfinished (the class engine's probe, flow_sim.cpp).
  virtual bool gave_up() const { return false; }

  void finish(std::int32_t f, double t);  // flow f is done: its successors may be released
  // Flow f's bytes count as sent once within this of them, or within what `rate` sends in the
  // batch window: a finish event was computed for the moment its level is reached, and the
  // subtraction and division that computed it leave a few ulps.
  double finish_slack(std::int32_t f, double rate) const {
    return std::max(tolerance::kFinishRelative * flows_.bytes[f].as_double() + tolerance::kFinishBytes,
                    rate * batch_window_);
  }
  void became_busy(std::int32_t l, double t) { busy_since_[l] = t; }
  void became_idle(std::int32_t l, double t) { busy_[l] += t - busy_since_[l]; }

  const FlowNetwork& net_;
  const FlowTable& flows_;
  const QuotientWeights* weights_;
  const SimOptions& opt_;
  FlowClasses classes_of_flows_;
  FinishQueue finishes_;
  FlowSimResult result_;

 private:
  struct StartEvent {
    double time;
    std::int32_t flow;
    bool operator>(const StartEvent& o) const { return time > o.time; }
  };
  void release(std::int32_t f, double t);
  void start(std::int32_t f, double t);

  std::vector<std::int32_t> succ_begin_, succ_;  // CSR successors
  std::vector<std::int32_t> waiting_;            // unfinished predecessors
  std::vector<std::int32_t> released_by_;        // predecessor that finished last, -1 when none
  std::vector<double> busy_since_, busy_;        // per link: busy time (an active class crosses it)
  std::priority_queue<StartEvent, std::vector<StartEvent>, std::greater<>> starts_;
  double batch_window_ = 0;  // events up to this long after the batch time join the batch
};

// The classes' slots on the links that can saturate: without those another link of the same
// classes dominates (group_engine.cpp says when), which no allocation fills. Its class_of is empty.
FlowClasses binding_classes(const FlowClasses& classes, const FlowNetwork& net);

// The bottleneck-group engine (group_engine.cpp): the same answer as the class engine, its cost
// per bottleneck link rather than per class whose rate moves (SimOptions::solver says when it
// runs). `binding`: binding_classes(classes, net).
FlowSimResult run_group_engine(const FlowNetwork& net, const FlowTable& flows, FlowGraph graph,
                               const SimOptions& opt, const QuotientWeights* weights, FlowClasses classes,
                               FlowClasses binding);

}  // namespace reshard::sim
