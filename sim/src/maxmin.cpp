// The max-min solver; the math is written on maxmin.hpp, the proofs on fill() (the refill solve()
// runs) and fill_component().
#include "maxmin.hpp"

#include <algorithm>
#include <cmath>
#include <functional>

namespace reshard::sim {

MaxMinSolver::MaxMinSolver(const std::vector<double>& capacity, std::size_t local_refill_limit)
    : local_refill_limit_(local_refill_limit), links_(capacity.size()), component_stamp_(capacity.size(), 0) {
  for (std::size_t l = 0; l < links_.size(); ++l) {
    links_[l].capacity = capacity[l];
    int exponent = 0;  // capacity < 2^exponent
    std::frexp(links_[l].capacity, &exponent);
    links_[l].to_fixed = std::ldexp(1.0, tolerance::kFixedPointBits - exponent);
    links_[l].from_fixed = std::ldexp(1.0, exponent - tolerance::kFixedPointBits);
  }
}

std::int32_t MaxMinSolver::add_class(std::span<const Slot> slots) {
  Class c;
  c.slot_begin = static_cast<std::int32_t>(slots_.size());
  slots_.insert(slots_.end(), slots.begin(), slots.end());
  c.slot_end = static_cast<std::int32_t>(slots_.size());
  slot_link_pos_.resize(slots_.size(), -1);
  classes_.push_back(c);
  return static_cast<std::int32_t>(classes_.size() - 1);
}

// Progressive filling (maxmin.hpp) over the links in fill_links_, whose remaining capacity and
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
void MaxMinSolver::progressive_fill(std::size_t to_fix, ForEachMember&& for_each_member) {
  auto fix_at = [&](std::int32_t link, double share) {
    links_[link].fill_share = share;
    for_each_member(links_[link], [&](std::int32_t c) {
      Class& rc = classes_[c];
      if (rc.new_bottleneck >= 0) return;
      --to_fix;
      rc.new_rate = share;
      rc.new_bottleneck = link;
      work_ += rc.slot_end - rc.slot_begin;
      for (auto k = rc.slot_begin; k < rc.slot_end; ++k) {
        LinkState& other = links_[slots_[k].link];
        const std::int64_t flows = rc.multiplicity * slots_[k].weight;
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
      work_ += static_cast<std::int64_t>(fill_links_.size());
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
    ++work_;
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

// Recomputes max-min rates after the changes since the last solve (the touched classes): the new
// rates and bottlenecks of the refilled classes, which solve() then commits (maxmin.hpp).
//
// Local refill, verified. The allocation before the changes was max-min fair: every active class
// had a bottleneck link, saturated, on which no class had a higher rate (the characterization in
// maxmin.hpp). The refill recomputes the rates of a set Q of classes by progressive filling,
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
// class per pass, so this ends. The conditions are checked to a relative tolerance
// (tolerance::kRefillCheck) of the link capacity or rate: exact arithmetic would see no violation
// where rounding leaves a few ulps.
//
// Q starts as the touched classes plus the classes bottlenecked on their links (a load change
// there moves them, so the first pass would bring them in anyway). The cost is the classes whose
// rates move and their links; when the change spreads past SimOptions::local_refill_limit classes,
// MaxMinSolver::fill_component refills its whole reach in one pass instead.
void MaxMinSolver::fill() {
  constexpr double kTolerance = tolerance::kRefillCheck;
  ++refill_stamp_;
  refilled_.clear();
  for (auto c : touched_) add_to_refill(c);
  // A flow that joins or leaves a link where frozen classes are bottlenecked moves them (the link's
  // load changed): bring them in now rather than after a failed pass.
  for (std::size_t i = 0, n = refilled_.size(); i < n; ++i) {
    const Class& rc = classes_[refilled_[i]];
    for (auto k = rc.slot_begin; k < rc.slot_end; ++k) {
      const std::int32_t l = slots_[k].link;
      if (links_[l].bottlenecked == 0 || links_[l].scanned == refill_stamp_) continue;
      links_[l].scanned = refill_stamp_;  // once per link, however many touched classes cross it
      for (auto c : links_[l].classes)
        if (classes_[c].bottleneck == l) add_to_refill(c);
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
      if (i + 4 < n) __builtin_prefetch(&slots_[classes_[refilled_[i + 4]].slot_begin]);
      const std::int32_t c = refilled_[i];
      Class& rc = classes_[c];
      rc.new_rate = 0;
      rc.new_bottleneck = -1;
      if (rc.multiplicity > 0) ++active;
      work_ += rc.slot_end - rc.slot_begin;
      for (auto k = rc.slot_begin; k < rc.slot_end; ++k) {
        const std::int32_t l = slots_[k].link;
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
        const std::int64_t w = slots_[k].weight;
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
        work_ += static_cast<std::int64_t>(ls.classes.size());
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
      work_ += static_cast<std::int64_t>(ls.classes.size());
      for (auto c : ls.classes) {
        const Class& rc = classes_[c];
        if (overloaded || rc.bottleneck == l || (ls.fill_share >= 0 && rc.rate > high)) add_to_refill(c);
      }
    }
    // The change spreads: one filling over its whole reach is cheaper than a pass per hop.
    if (refilled_.size() > local_refill_limit_) {
      fill_component();
      break;
    }
  }
}

// The fallback of MaxMinSolver::solve when a change spreads, by level cut: flows added or removed
// can only move rates at or above theta, the smallest of
//   - the old rate of each class that lost flows: at every level x below it the load of every link
//     is unchanged or lower (the leaving flows were still unfixed there), and a link that saturated
//     below it carried none of them, so the filling fixes the same classes at the same levels;
//   - for each class that gained flows, min over its links l of C_l / W_l (W_l: the active weight
//     on l after the changes, sum of m_c w_cl): a new flow gets at least that rate (at level
//     x <= C_l / W_l the load of l is at most W_l x <= C_l, so no link of it can be full), so below
//     it the new flows only add load on links that cannot saturate there.
// The classes refilled are the ones already in the refilled set plus every active class with rate
// >= theta reachable from their links through links and such classes (a change can only travel
// through a class whose rate moves); the others keep their rate, their load subtracted up front.
// Refilling more classes than needed is exact too: max-min rates of a subset, with the rest at
// their max-min rates, are the max-min rates of the subset on the capacity the rest leaves.
void MaxMinSolver::fill_component() {
  double theta = INFINITY;
  for (auto c : touched_) {
    const Class& rc = classes_[c];
    if (rc.left == pending_) theta = std::min(theta, rc.rate);
    if (rc.joined == pending_)
      for (auto k = rc.slot_begin; k < rc.slot_end; ++k) {
        const LinkState& ls = links_[slots_[k].link];
        theta = std::min(theta, ls.capacity / static_cast<double>(std::max<std::int64_t>(1, ls.flows)));
      }
  }
  // Rates equal to theta in exact arithmetic may differ in the last bits (two links saturating at
  // the same level), and such classes can change, so theta keeps a relative margin of 1e-9.
  theta *= 1.0 - tolerance::kThetaMargin;
  ++pass_stamp_;
  stack_.clear();
  auto visit_links = [&](std::int32_t c) {
    const Class& rc = classes_[c];
    for (auto k = rc.slot_begin; k < rc.slot_end; ++k) {
      LinkState& ls = links_[slots_[k].link];
      if (component_stamp_[slots_[k].link] != pass_stamp_) {
        component_stamp_[slots_[k].link] = pass_stamp_;
        ls.remaining = ls.capacity;
        ls.unfixed = 0;
        stack_.push_back(slots_[k].link);
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
    work_ += static_cast<std::int64_t>(ls.classes.size());
    for (std::size_t i = 0; i < ls.classes.size(); ++i) {
      const std::int32_t c = ls.classes[i];
      const Class& rc = classes_[c];
      const std::int64_t flows = rc.multiplicity * ls.class_weights[i];
      if (rc.in_refill == refill_stamp_ || !(rc.rate < theta)) {
        ls.unfixed += flows;
        if (rc.in_refill != refill_stamp_) {
          add_to_refill(c);
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
    work_ += static_cast<std::int64_t>(ls.classes.size());
    for (auto c : ls.classes)
      if (classes_[c].in_refill == refill_stamp_) fix(c);
  });
}


}  // namespace reshard::sim
