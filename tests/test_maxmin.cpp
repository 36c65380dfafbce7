// The max-min solver (sim/src/maxmin.hpp) on its own: small systems whose answer is worked out in
// the comment, weighted links, incremental changes against a from-scratch solve and a naive
// progressive filling, and the link callbacks the event loop's busy times come from.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "maxmin.hpp"

namespace {

using reshard::sim::MaxMinSolver;
using Slot = MaxMinSolver::Slot;

constexpr double kTol = 1e-12;
constexpr std::size_t kRefillLimits[] = {0, std::size_t{1} << 30};  // level cut at once, or local only

void nothing(std::int32_t) {}

// Adds `n` flows to class c.
void add(MaxMinSolver& s, std::int32_t c, int n = 1) {
  for (int i = 0; i < n; ++i) s.add_flow(c, nothing);
}

TEST(MaxMin, OneLinkSharedEqually) {
  // One link of 12 B/s; class a has 1 flow, class b 2 flows: 3 flows, 12/3 = 4 B/s each, the link
  // is the bottleneck of both and carries 12.
  for (const auto limit : kRefillLimits) {
    MaxMinSolver s({12.0}, limit);
    const auto a = s.add_class(std::vector<Slot>{{0, 1}});
    const auto b = s.add_class(std::vector<Slot>{{0, 1}});
    add(s, a);
    add(s, b, 2);
    const auto& refilled = s.solve();
    EXPECT_EQ(refilled.size(), 2u);
    EXPECT_NEAR(s.rate(a), 4.0, kTol);
    EXPECT_NEAR(s.rate(b), 4.0, kTol);
    EXPECT_EQ(s.bottleneck(a), 0);
    EXPECT_EQ(s.bottleneck(b), 0);
    EXPECT_NEAR(s.load(0), 12.0, 1e-9);
    EXPECT_EQ(s.flows(b), 2);
  }
}

TEST(MaxMin, TwoLinksInSeries) {
  // L0 = 10 B/s, L1 = 4 B/s. `through` crosses both, s0 only L0, s1 only L1.
  // Shares: L0 10/2 = 5, L1 4/2 = 2 -> L1 saturates first: through = s1 = 2 (bottleneck L1).
  // L0 then has 10 - 2 = 8 for s0 alone: s0 = 8 (bottleneck L0). Both links full.
  for (const auto limit : kRefillLimits) {
    MaxMinSolver s({10.0, 4.0}, limit);
    const auto through = s.add_class(std::vector<Slot>{{0, 1}, {1, 1}});
    const auto s0 = s.add_class(std::vector<Slot>{{0, 1}});
    const auto s1 = s.add_class(std::vector<Slot>{{1, 1}});
    add(s, through);
    add(s, s0);
    add(s, s1);
    s.solve();
    EXPECT_NEAR(s.rate(through), 2.0, kTol);
    EXPECT_NEAR(s.rate(s1), 2.0, kTol);
    EXPECT_NEAR(s.rate(s0), 8.0, kTol);
    EXPECT_EQ(s.bottleneck(through), 1);
    EXPECT_EQ(s.bottleneck(s0), 0);
    EXPECT_NEAR(s.load(0), 10.0, 1e-9);
    EXPECT_NEAR(s.load(1), 4.0, 1e-9);
  }
}

TEST(MaxMin, ParkingLot) {
  // The parking lot: links 0..3 in a row with capacities 1, 2, 3, 4; the long flow crosses all of
  // them, short flow i crosses link i only. Every link has two flows; link 0's share 1/2 is the
  // smallest, so long = short0 = 1/2 (bottleneck link 0). Then link i (i > 0) gives its short
  // flow C_i - 1/2: 1.5, 2.5, 3.5. Every link is full.
  // With equal capacities (all 1) every link saturates at 1/2 together: all flows get 1/2.
  for (const auto limit : kRefillLimits) {
    MaxMinSolver s({1.0, 2.0, 3.0, 4.0}, limit);
    const auto long_flow = s.add_class(std::vector<Slot>{{0, 1}, {1, 1}, {2, 1}, {3, 1}});
    std::int32_t shorts[4];
    for (std::int32_t i = 0; i < 4; ++i) shorts[i] = s.add_class(std::vector<Slot>{{i, 1}});
    add(s, long_flow);
    for (auto c : shorts) add(s, c);
    s.solve();
    EXPECT_NEAR(s.rate(long_flow), 0.5, kTol);
    EXPECT_EQ(s.bottleneck(long_flow), 0);
    for (std::int32_t i = 0; i < 4; ++i) {
      EXPECT_NEAR(s.rate(shorts[i]), i + 0.5, kTol) << i;  // 0.5, 1.5, 2.5, 3.5
      EXPECT_EQ(s.bottleneck(shorts[i]), i);
      EXPECT_NEAR(s.load(i), i + 1.0, 1e-9);
    }
    MaxMinSolver equal({1.0, 1.0, 1.0, 1.0}, limit);
    const auto l2 = equal.add_class(std::vector<Slot>{{0, 1}, {1, 1}, {2, 1}, {3, 1}});
    add(equal, l2);
    for (std::int32_t i = 0; i < 4; ++i) add(equal, equal.add_class(std::vector<Slot>{{i, 1}}));
    equal.solve();
    for (std::int32_t c = 0; c < 5; ++c) EXPECT_NEAR(equal.rate(c), 0.5, kTol) << c;
  }
}

TEST(MaxMin, WeightedLinks) {
  // A weight w: each flow of the class loads the link with w times its rate.
  // 1. One link of 9 B/s; a (weight 2) and b (weight 1), one flow each: 2x + x = 9 -> 3 each
  //    (a loads 6, b 3). With a second flow in a: 2*2x + x = 9 -> 1.8 each.
  // 2. L0 = 10, L1 = 3; c crosses L0 with weight 2 and L1 with weight 1, d crosses L0 (weight 1).
  //    Shares: L0 10/(2 + 1) = 3.33, L1 3/1 = 3 -> L1 first: c = 3, taking 2*3 = 6 of L0;
  //    d gets 10 - 6 = 4 (bottleneck L0).
  for (const auto limit : kRefillLimits) {
    MaxMinSolver s({9.0}, limit);
    const auto a = s.add_class(std::vector<Slot>{{0, 2}});
    const auto b = s.add_class(std::vector<Slot>{{0, 1}});
    add(s, a);
    add(s, b);
    s.solve();
    EXPECT_NEAR(s.rate(a), 3.0, kTol);
    EXPECT_NEAR(s.rate(b), 3.0, kTol);
    EXPECT_NEAR(s.load(0), 9.0, 1e-9);
    add(s, a);
    s.solve();
    EXPECT_NEAR(s.rate(a), 1.8, kTol);
    EXPECT_NEAR(s.rate(b), 1.8, kTol);
    EXPECT_NEAR(s.load(0), 9.0, 1e-9);

    MaxMinSolver t({10.0, 3.0}, limit);
    const auto c = t.add_class(std::vector<Slot>{{1, 1}, {0, 2}});  // any order of slots
    const auto d = t.add_class(std::vector<Slot>{{0, 1}});
    add(t, c);
    add(t, d);
    t.solve();
    EXPECT_NEAR(t.rate(c), 3.0, kTol);
    EXPECT_EQ(t.bottleneck(c), 1);
    EXPECT_NEAR(t.rate(d), 4.0, kTol);
    EXPECT_EQ(t.bottleneck(d), 0);
    EXPECT_NEAR(t.load(0), 10.0, 1e-9);
  }
}

TEST(MaxMin, RemovalMovesARateTwoLinksAway) {
  // A = 6, B = 10, C = 14 B/s. a1 crosses A; a2 crosses A and B; b1 crosses B and C; c1 crosses C.
  // Shares A 6/2 = 3, B 10/2 = 5, C 14/2 = 7: A fixes a1 = a2 = 3; then B offers (10 - 3)/1 = 7
  // and C 14/2 = 7: b1 = 7, c1 = 14 - 7 = 7.
  // a1 leaves: A offers 6 to a2 alone, B 10/2 = 5: B fixes a2 = b1 = 5, and C gives c1 14 - 5 = 9.
  // c1 shares no link with a1, yet its rate moves: the solve returns it.
  for (const auto limit : kRefillLimits) {
    MaxMinSolver s({6.0, 10.0, 14.0}, limit);
    const auto a1 = s.add_class(std::vector<Slot>{{0, 1}});
    const auto a2 = s.add_class(std::vector<Slot>{{0, 1}, {1, 1}});
    const auto b1 = s.add_class(std::vector<Slot>{{1, 1}, {2, 1}});
    const auto c1 = s.add_class(std::vector<Slot>{{2, 1}});
    for (auto c : {a1, a2, b1, c1}) add(s, c);
    s.solve();
    EXPECT_NEAR(s.rate(a1), 3.0, kTol);
    EXPECT_NEAR(s.rate(a2), 3.0, kTol);
    EXPECT_NEAR(s.rate(b1), 7.0, kTol);
    EXPECT_NEAR(s.rate(c1), 7.0, kTol);
    s.remove_flow(a1, nothing);
    EXPECT_TRUE(s.pending());
    const auto& refilled = s.solve();
    EXPECT_FALSE(s.pending());
    EXPECT_NE(std::find(refilled.begin(), refilled.end(), c1), refilled.end());
    EXPECT_EQ(refilled.front(), a1);  // the changed class first
    EXPECT_TRUE(s.changed_flows(a1));
    EXPECT_FALSE(s.changed_flows(c1));
    EXPECT_EQ(s.flows(a1), 0);
    EXPECT_EQ(s.bottleneck(a1), -1);
    EXPECT_NEAR(s.rate(a2), 5.0, kTol);
    EXPECT_NEAR(s.rate(b1), 5.0, kTol);
    EXPECT_EQ(s.bottleneck(a2), 1);
    EXPECT_NEAR(s.rate(c1), 9.0, kTol);
    EXPECT_EQ(s.bottleneck(c1), 2);
  }
}

TEST(MaxMin, TouchRefillsWithoutChange) {
  // A touched class is refilled and reported although nothing changed; its rate stays.
  MaxMinSolver s({8.0}, 16384);
  const auto a = s.add_class(std::vector<Slot>{{0, 1}});
  add(s, a, 2);
  s.solve();
  EXPECT_NEAR(s.rate(a), 4.0, kTol);
  EXPECT_FALSE(s.pending());
  s.touch(a);
  EXPECT_TRUE(s.pending());
  const auto& refilled = s.solve();
  ASSERT_EQ(refilled.size(), 1u);
  EXPECT_EQ(refilled[0], a);
  EXPECT_TRUE(s.changed_flows(a));
  EXPECT_NEAR(s.rate(a), 4.0, kTol);
}

TEST(MaxMin, LinkCallbacksWhenALinkGainsItsFirstOrLosesItsLastClass) {
  // a crosses links 0 and 1, b crosses 1: busy(0), busy(1) when a's first flow comes, nothing for
  // a's second flow or for b; idle(0) when a's last flow goes, idle(1) once b's goes too.
  MaxMinSolver s({1.0, 1.0}, 16384);
  const auto a = s.add_class(std::vector<Slot>{{0, 1}, {1, 1}});
  const auto b = s.add_class(std::vector<Slot>{{1, 1}});
  std::vector<std::int32_t> busy, idle;
  auto on_busy = [&](std::int32_t l) { busy.push_back(l); };
  auto on_idle = [&](std::int32_t l) { idle.push_back(l); };
  s.add_flow(a, on_busy);
  EXPECT_EQ(busy, (std::vector<std::int32_t>{0, 1}));
  s.add_flow(a, on_busy);
  s.add_flow(b, on_busy);
  EXPECT_EQ(busy.size(), 2u);
  s.solve();
  s.remove_flow(a, on_idle);
  EXPECT_TRUE(idle.empty());
  s.remove_flow(a, on_idle);
  EXPECT_EQ(idle, (std::vector<std::int32_t>{0}));
  s.remove_flow(b, on_idle);
  EXPECT_EQ(idle, (std::vector<std::int32_t>{0, 1}));
  s.solve();
  EXPECT_NEAR(s.load(0), 0.0, kTol);
  EXPECT_NEAR(s.load(1), 0.0, kTol);
}

// Naive weighted progressive filling over classes with `count` active flows each.
std::vector<double> naive_rates(const std::vector<double>& caps, const std::vector<std::vector<Slot>>& classes,
                                const std::vector<int>& count) {
  std::vector<double> rate(classes.size(), 0), remaining = caps;
  std::vector<char> fixed(classes.size());
  for (std::size_t c = 0; c < classes.size(); ++c) fixed[c] = count[c] == 0;
  while (true) {
    double best = INFINITY;
    int best_link = -1;
    for (std::size_t l = 0; l < caps.size(); ++l) {
      double weight = 0;
      for (std::size_t c = 0; c < classes.size(); ++c)
        if (!fixed[c])
          for (const auto& slot : classes[c])
            if (slot.link == static_cast<std::int32_t>(l)) weight += count[c] * slot.weight;
      if (weight > 0 && remaining[l] / weight < best) best = remaining[l] / weight, best_link = static_cast<int>(l);
    }
    if (best_link < 0) break;
    for (std::size_t c = 0; c < classes.size(); ++c) {
      if (fixed[c]) continue;
      bool on = false;
      for (const auto& slot : classes[c]) on = on || slot.link == best_link;
      if (!on) continue;
      fixed[c] = 1;
      rate[c] = best;
      for (const auto& slot : classes[c]) remaining[slot.link] -= count[c] * slot.weight * best;
    }
  }
  return rate;
}

TEST(MaxMin, IncrementalChangesMatchAFromScratchSolve) {
  // Random weighted systems changed a few flows at a time: after every solve, each active class's
  // rate equals that of a fresh solver given the same flows and solved once, and the naive
  // filling's, to 1e-9 relative; each link's load fits its capacity.
  std::mt19937_64 rng(5150);
  for (int trial = 0; trial < 40; ++trial) {
    const int nl = 2 + static_cast<int>(rng() % 10), nc = 3 + static_cast<int>(rng() % 25);
    std::vector<double> caps;
    for (int l = 0; l < nl; ++l) caps.push_back(5.0 + static_cast<double>(rng() % 100));
    std::vector<std::vector<Slot>> classes;
    for (int c = 0; c < nc; ++c) {
      std::vector<Slot> slots;
      for (std::int32_t l = 0; l < nl; ++l)
        if (rng() % 3 == 0) slots.push_back({l, 1 + static_cast<std::int32_t>(rng() % 3)});
      if (slots.empty()) slots.push_back({static_cast<std::int32_t>(rng() % nl), 1});
      classes.push_back(slots);
    }
    for (const auto limit : kRefillLimits) {
      MaxMinSolver s(caps, limit);
      for (const auto& slots : classes) s.add_class(slots);
      std::vector<int> count(classes.size(), 0);
      for (int step = 0; step < 30; ++step) {
        const int changes = 1 + static_cast<int>(rng() % 4);
        for (int k = 0; k < changes; ++k) {
          const auto c = static_cast<std::int32_t>(rng() % nc);
          if (count[c] > 0 && rng() % 2 == 0) {
            s.remove_flow(c, nothing);
            --count[c];
          } else {
            s.add_flow(c, nothing);
            ++count[c];
          }
        }
        s.solve();
        MaxMinSolver fresh(caps, limit);
        for (const auto& slots : classes) fresh.add_class(slots);
        for (std::int32_t c = 0; c < nc; ++c) add(fresh, c, count[c]);
        fresh.solve();
        const auto naive = naive_rates(caps, classes, count);
        for (std::int32_t c = 0; c < nc; ++c) {
          if (count[c] == 0) continue;
          ASSERT_NEAR(s.rate(c), fresh.rate(c), 1e-9 * fresh.rate(c)) << "trial " << trial << " step " << step << " class " << c;
          ASSERT_NEAR(s.rate(c), naive[c], 1e-9 * naive[c]) << "trial " << trial << " step " << step << " class " << c;
        }
        for (std::int32_t l = 0; l < nl; ++l) ASSERT_LE(s.load(l), caps[l] * (1 + 1e-9)) << "link " << l;
      }
    }
  }
}

}  // namespace
