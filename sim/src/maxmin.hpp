// Internal to the simulator: max-min fair rates of classes of flows over weighted links, kept up to
// date incrementally as flows come and go. The event loop (flow_sim.cpp) owns time, bytes and
// finishes; this owns the rates.
//
// The problem. Links l = 0..L-1 with capacities C_l > 0. A class c is a set of flows that cross the
// same links with the same weights: slot (l, w_cl) says that each active flow of c loads link l with
// w_cl times its rate (a flow listing l k times, FlowSpec::links, and/or standing for several
// flows of a symmetry quotient, flow_quotient.hpp). Class c has m_c active flows, all at rate x_c.
// Feasible: for every link, sum_c m_c w_cl x_c <= C_l. Max-min fair: no x_c can be raised without
// lowering some x_d <= x_c; equivalently every active class crosses a *bottleneck* link that is
// saturated and on which no class has a higher rate. The allocation is unique.
//
// Progressive filling computes it: raise every unfixed rate together; link l, with remaining
// capacity R_l (C_l minus the load of the classes already fixed) and unfixed weight
// W_l = sum over its unfixed classes of m_c w_cl, saturates at level R_l / W_l; the link with the
// smallest share saturates first and fixes its unfixed classes at that share (their load is taken
// off the other links they cross); repeat. Shares never decrease during the filling (a link losing
// weight m fixed at s <= R_l / W_l keeps (R_l - m s) / (W_l - m) >= R_l / W_l), so each step fixes
// at least one class at a level no lower than the previous one.
//
// Incremental solve (the proof is on MaxMinSolver::fill, maxmin.cpp): the classes whose flows
// changed since the last solve are refilled with every other class frozen at its rate, the result
// is checked against the max-min conditions on the links they cross, and a link that fails brings
// in the frozen classes that break it, until none fails. Once the refilled set passes
// `local_refill_limit` classes, the change's whole reach is refilled at once by level cut instead
// (fill_component). Both give the unique max-min allocation (to the rounding in tolerances.hpp).
//
// Use:
//   MaxMinSolver s(capacities, local_refill_limit);
//   const auto c = s.add_class(slots);           // distinct links, weights >= 1
//   s.add_flow(c, on_busy); s.remove_flow(c, on_idle); s.touch(c);
//   s.solve([&](const MaxMinSolver::Refilled& r) { ... r.cls, r.previous_rate, r.rate ... });
//   ... s.rate(c), s.bottleneck(c), s.load(l) ...
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "tolerances.hpp"

namespace reshard::sim {

class MaxMinSolver {
 public:
  // A link of a class and the class's weight there: each active flow of the class loads the link
  // with `weight` times its rate.
  struct Slot {
    std::int32_t link;
    std::int32_t weight;
  };

  // Links 0..capacity.size()-1 with these capacities (> 0, finite). `local_refill_limit`:
  // SimOptions::local_refill_limit (how far a local refill widens before the level cut).
  MaxMinSolver(const std::vector<double>& capacity, std::size_t local_refill_limit);

  // A new class over `slots` (distinct links in any order, weights >= 1), with no active flow.
  // Returns its index, 0, 1, ... in order of creation.
  std::int32_t add_class(std::span<const Slot> slots);

  // One more active flow in class c, or one less; the rates move at the next solve().
  // became_busy(l) / became_idle(l) are called for each link of c that gains its first active
  // class / loses its last one (c going 0 -> 1 / 1 -> 0 active flows).
  template <class OnLink>
  void add_flow(std::int32_t c, OnLink&& became_busy);
  template <class OnLink>
  void remove_flow(std::int32_t c, OnLink&& became_idle);
  // Refills class c at the next solve() though its flows did not change.
  void touch(std::int32_t c) {
    if (classes_[c].touched != pending_) {
      classes_[c].touched = pending_;
      touched_.push_back(c);
    }
  }
  // Whether a class was added, removed or touched since the last solve().
  bool pending() const { return !touched_.empty(); }
  // Whether class c's flows were added, removed or touched for the last solve().
  bool changed_flows(std::int32_t c) const { return classes_[c].touched + 1 == pending_; }

  // What solve() tells about a refilled class once its new rate and bottleneck are in.
  struct Refilled {
    std::int32_t cls;
    double previous_rate, rate;  // per flow, before and after
    std::int64_t flows;          // active flows
    bool flows_changed;          // flows added, removed or touched since the previous solve
  };
  // Recomputes the max-min allocation after the changes since the last solve(). Returns the
  // classes refilled: the changed ones first, then those their change reached. Every class whose
  // rate or bottleneck moved is in it; the others kept theirs. on_refilled(const Refilled&) is
  // called for each, in the order of the list, so that the caller's own per-class work needs no
  // second pass.
  template <class OnRefilled>
  const std::vector<std::int32_t>& solve(OnRefilled&& on_refilled);
  const std::vector<std::int32_t>& solve() {
    return solve([](const Refilled&) {});
  }

  // Class c: active flows, rate per flow (bytes/s) and the link its rate was fixed at (-1 when it
  // has no active flow), as of the last solve() (flows(c): now).
  std::int64_t flows(std::int32_t c) const { return classes_[c].multiplicity; }
  double rate(std::int32_t c) const { return classes_[c].rate; }
  std::int32_t bottleneck(std::int32_t c) const { return classes_[c].bottleneck; }
  std::span<const Slot> slots(std::int32_t c) const {
    return {slots_.data() + classes_[c].slot_begin, slots_.data() + classes_[c].slot_end};
  }
  std::size_t class_count() const { return classes_.size(); }

  // Link l: its capacity and the load of the last solve(), sum_c m_c w_cl x_c (to 2^-60 of the
  // capacity, the fixed point of the totals).
  std::size_t link_count() const { return links_.size(); }
  double capacity(std::int32_t l) const { return links_[l].capacity; }
  double load(std::int32_t l) const { return static_cast<double>(links_[l].allocated) * links_[l].from_fixed; }

  // Work done so far, in steps of the refills' loops (a class's slots, a link's classes scanned, a
  // heap pop): a count that does not depend on the clock, for the engine choice (flow_sim.cpp).
  std::int64_t work() const { return work_; }

 private:
  // Classes: `rate`, `bottleneck` and `committed` are what the link totals (LinkState::allocated,
  // bottlenecked) hold for this class; `multiplicity` moves with add_flow / remove_flow before the
  // solve that commits it. What a refill reads and writes fits one cache line.
  struct alignas(64) Class {
    std::int64_t multiplicity = 0;              // active flows
    std::int64_t committed = 0;                 // multiplicity as counted in the link totals
    double rate = 0;                            // per flow, bytes/s
    double new_rate = 0;                        // filling result
    std::int32_t bottleneck = -1;               // link at which the rate was fixed
    std::int32_t new_bottleneck = -1;
    std::int32_t slot_begin = 0, slot_end = 0;  // slice of slots_
    std::uint32_t in_refill = 0;                // member of the refilled set (refill stamp)
    std::uint32_t touched = 0;                  // changed for the pending solve (its stamp)
    std::uint32_t joined = 0;                   // flows added for the pending solve
    std::uint32_t left = 0;                     // flows removed for the pending solve
  };

  struct alignas(64) LinkState {
    // Refill scratch, valid when stamp is the refill's stamp (the first cache line).
    std::uint32_t stamp = 0;
    double remaining = 0;          // capacity minus frozen classes and the refilled classes fixed so far
    std::int64_t unfixed = 0;      // refilled weight not yet fixed
    std::int64_t refilled_bottlenecked = 0;  // committed weight of refilled classes with this bottleneck
    std::vector<std::int32_t> members;  // the active refilled classes crossing it
    double fill_share = -1;        // share at which refilled classes were fixed here, -1 when none
    double capacity = 0;
    double from_fixed = 0;         // 1 / to_fixed
    // Totals over the committed classes: sum of committed * weight * rate, the committed weight
    // whose bottleneck this is, and the rate it was given. The sum is kept in fixed point, in
    // units of 1 / to_fixed (tolerance::kFixedPointBits), each term truncated to a whole unit: a
    // term added at one commit and removed at a later one is the same integer, so millions of
    // updates leave no drift at all. (A long double sum drifted by up to 1e-13 relative and took
    // 10 % of the event loop.)
    std::int64_t allocated = 0;
    double to_fixed = 0;
    std::int64_t fixed(double load) const { return static_cast<std::int64_t>(load * to_fixed); }
    std::int64_t bottlenecked = 0;
    double level = 0;
    std::uint32_t level_kept = 0;  // pass stamp: frozen classes stayed bottlenecked here at `level`
    std::uint32_t scanned = 0;     // refill stamp: its bottlenecked classes were brought in
    std::int64_t flows = 0;             // active weight crossing the link (sum of m_c w_cl)
    std::vector<std::int32_t> classes;  // active classes crossing the link
    std::vector<std::int64_t> class_weights;  // per entry of `classes`: that class's weight here
  };

  // Min-heap entry of the progressive filling: a link's share when it was pushed (a lower bound).
  struct ShareEntry {
    double share;
    std::int32_t link;
    bool operator>(const ShareEntry& o) const { return share > o.share; }
  };

  void fill();  // the new rates of the refilled classes (maxmin.cpp); solve() commits them
  template <class OnLink>
  void join(std::int32_t c, OnLink&& became_busy);
  template <class OnLink>
  void leave(std::int32_t c, OnLink&& became_idle);
  void fill_component();
  template <class ForEachMember>
  void progressive_fill(std::size_t to_fix, ForEachMember&& for_each_member);
  static constexpr std::size_t kScanFillLinks = 128;  // up to this many links, fill by scans
  void push_share(std::int32_t l) {
    const LinkState& ls = links_[l];
    if (ls.unfixed > 0) fill_links_.push_back({std::max(0.0, ls.remaining) / static_cast<double>(ls.unfixed), l});
  }
  void add_to_refill(std::int32_t c) {
    Class& rc = classes_[c];
    if (rc.in_refill == refill_stamp_) return;
    rc.in_refill = refill_stamp_;
    refilled_.push_back(c);
  }

  std::size_t local_refill_limit_;
  std::int64_t work_ = 0;
  std::vector<Slot> slots_;
  std::vector<std::int32_t> slot_link_pos_;  // per slot: the class's index in that link's list
  std::vector<Class> classes_;
  std::vector<LinkState> links_;

  std::uint32_t pending_ = 1;                // stamp of the solve to come
  std::vector<std::int32_t> touched_;        // classes changed for it
  std::uint32_t refill_stamp_ = 0, pass_stamp_ = 0;
  std::vector<std::int32_t> refilled_;       // classes refilled in this solve
  std::vector<std::int32_t> refill_links_;   // links they cross
  std::vector<std::pair<double, std::int64_t>> pass_totals_;  // per refill link: remaining and unfixed before the filling
  std::vector<std::uint32_t> component_stamp_;  // per link: pass stamp of fill_component's scratch
  std::vector<std::int32_t> violated_;
  std::vector<std::int32_t> stack_;
  std::vector<ShareEntry> fill_links_;  // the filling's links, shares as pushed (a heap past kScanFillLinks)
};

template <class OnRefilled>
const std::vector<std::int32_t>& MaxMinSolver::solve(OnRefilled&& on_refilled) {
  fill();
  // Commit: link totals, rates.
  // Where frozen classes stay bottlenecked, a link's `level` stays their rate: the refilled ones
  // are within the tolerance of it, and moving it would let that tolerance add up over refills.
  for (auto c : refilled_) {
    Class& rc = classes_[c];
    const double rate = rc.rate, new_rate = rc.new_rate;
    const std::int32_t bottleneck = rc.bottleneck, new_bottleneck = rc.new_bottleneck;
    const std::int64_t flows = rc.multiplicity, committed = rc.committed;
    if (new_rate == rate && new_bottleneck == bottleneck && flows == committed) {
      // Nothing moves on its links (about a third of the refilled classes on a tuned schedule).
      if (bottleneck >= 0 && links_[bottleneck].level_kept != pass_stamp_) links_[bottleneck].level = rate;
    } else {
      work_ += rc.slot_end - rc.slot_begin;
      for (auto k = rc.slot_begin, end = rc.slot_end; k < end; ++k) {
        const std::int32_t l = slots_[k].link;
        const std::int64_t w = slots_[k].weight;
        LinkState& ls = links_[l];
        ls.allocated += ls.fixed(static_cast<double>(flows * w) * new_rate) - ls.fixed(static_cast<double>(committed * w) * rate);
        if (bottleneck == l) ls.bottlenecked -= committed * w;
        if (new_bottleneck == l) {
          ls.bottlenecked += flows * w;
          if (ls.level_kept != pass_stamp_) ls.level = new_rate;
        }
      }
    }
    rc.rate = new_rate;
    rc.bottleneck = new_bottleneck;
    rc.committed = flows;
    on_refilled(Refilled{c, rate, new_rate, flows, rc.touched == pending_});
  }

  touched_.clear();
  ++pending_;
  return refilled_;
}

template <class OnLink>
void MaxMinSolver::add_flow(std::int32_t c, OnLink&& became_busy) {
  Class& rc = classes_[c];
  if (rc.multiplicity++ == 0) join(c, became_busy);
  for (auto k = rc.slot_begin; k < rc.slot_end; ++k) links_[slots_[k].link].flows += slots_[k].weight;
  rc.joined = pending_;
  touch(c);
}

template <class OnLink>
void MaxMinSolver::remove_flow(std::int32_t c, OnLink&& became_idle) {
  Class& rc = classes_[c];
  for (auto k = rc.slot_begin; k < rc.slot_end; ++k) links_[slots_[k].link].flows -= slots_[k].weight;
  rc.left = pending_;
  if (--rc.multiplicity == 0) leave(c, became_idle);
  touch(c);
}

// Adds an active class to the lists of its links (multiplicity went 0 -> 1).
template <class OnLink>
void MaxMinSolver::join(std::int32_t c, OnLink&& became_busy) {
  const Class& rc = classes_[c];
  for (auto k = rc.slot_begin; k < rc.slot_end; ++k) {
    const std::int32_t l = slots_[k].link;
    LinkState& ls = links_[l];
    if (ls.classes.empty()) became_busy(l);
    slot_link_pos_[k] = static_cast<std::int32_t>(ls.classes.size());
    ls.classes.push_back(c);
    ls.class_weights.push_back(slots_[k].weight);
  }
}

// Removes a class from its links' lists (multiplicity went 1 -> 0), swapping the last entry in.
template <class OnLink>
void MaxMinSolver::leave(std::int32_t c, OnLink&& became_idle) {
  const Class& rc = classes_[c];
  for (auto k = rc.slot_begin; k < rc.slot_end; ++k) {
    const std::int32_t l = slots_[k].link;
    LinkState& ls = links_[l];
    const std::int32_t pos = slot_link_pos_[k];
    const std::int32_t moved = ls.classes.back();
    ls.classes[pos] = moved;
    ls.classes.pop_back();
    ls.class_weights[pos] = ls.class_weights.back();
    ls.class_weights.pop_back();
    if (moved != c) {
      const Class& mc = classes_[moved];
      for (auto j = mc.slot_begin; j < mc.slot_end; ++j)
        if (slots_[j].link == l) {
          slot_link_pos_[j] = pos;
          break;
        }
    }
    slot_link_pos_[k] = -1;
    if (ls.classes.empty()) became_idle(l);
  }
}

}  // namespace reshard::sim
