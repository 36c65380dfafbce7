// The flow simulator: hand-worked max-min cases (arithmetic in the comments), validation, a
// property test against a naive reference solver, and the dump round trip.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>
#include <set>

#include "reshard/sim/flow_io.hpp"
#include "reshard/sim/flow_sim.hpp"
#include "reshard/sim/trace.hpp"

namespace {

using namespace reshard::sim;
using reshard::model::Bytes;
using reshard::model::BytesPerSecond;
using reshard::model::Seconds;

FlowNetwork network(std::vector<double> caps) {
  FlowNetwork n;
  for (double c : caps) n.capacity.push_back(BytesPerSecond{c});
  return n;
}

FlowSpec flow(std::int64_t id, std::int64_t bytes, std::vector<std::int32_t> links, double latency = 0,
              std::vector<std::int64_t> after = {}) {
  return FlowSpec{id, Bytes{bytes}, std::move(links), Seconds{latency}, std::move(after), ""};
}

constexpr double kTol = 1e-12;
std::vector<double> reference_finish(const FlowNetwork& net, const std::vector<FlowSpec>& flows);  // below
// Both refill paths (SimOptions::local_refill_limit): widen locally without bound, or fall back to
// the level-cut component refill after the first failed pass.
constexpr std::size_t kRefillLimits[] = {0, std::size_t{1} << 30};

// Every way the rates are computed: the class engine with both refill paths, and the group engine.
std::vector<SimOptions> every_engine() {
  std::vector<SimOptions> out;
  for (const std::size_t limit : kRefillLimits) {
    SimOptions o;
    o.solver = RateSolver::Classes;
    o.local_refill_limit = limit;
    out.push_back(o);
  }
  SimOptions groups;
  groups.solver = RateSolver::Groups;
  out.push_back(groups);
  return out;
}
std::string engine_name(const SimOptions& o) {
  return std::string(to_string(o.solver)) + (o.solver == RateSolver::Classes ? " limit " + std::to_string(o.local_refill_limit) : "");
}

TEST(FlowSim, TwoFlowsShareOneLink) {
  // One link of 100 B/s; A = 100 B and B = 300 B both start at 0.
  // Max-min: 100/2 = 50 B/s each. A finishes at 100/50 = 2 s, B has sent 100 B by then.
  // From 2 s B alone gets 100 B/s: 200 B left -> 2 s more -> 4 s (= 400 B / 100 B/s, work conserving).
  const auto net = network({100});
  for (const SimOptions& o : every_engine()) {
    SCOPED_TRACE(engine_name(o));
    const auto r = simulate(net, {flow(1, 100, {0}), flow(2, 300, {0})}, o);
    EXPECT_NEAR(r.timing[0].finish.value, 2.0, kTol);
    EXPECT_NEAR(r.timing[1].finish.value, 4.0, kTol);
    EXPECT_NEAR(r.makespan.value, 4.0, kTol);
    EXPECT_EQ(r.timing[0].bottleneck, 0);
    EXPECT_EQ(r.links[0].bytes, Bytes{400});
    EXPECT_NEAR(r.links[0].busy.value, 4.0, kTol);
    EXPECT_NEAR(r.links[0].utilization, 1.0, kTol);  // 400 B / (100 B/s * 4 s)
    EXPECT_EQ(r.events, 4);                          // two starts, two finishes
  }
}

TEST(FlowSim, ThreeFlowsTwoBottlenecks) {
  // L0 = 10 B/s, L1 = 4 B/s. a crosses L0, b crosses L0 and L1, c crosses L1.
  // Filling at t=0: shares L0 10/2 = 5, L1 4/2 = 2 -> L1 saturates first: b = c = 2.
  //   L0 has 10 - 2 = 8 left for a alone: a = 8.  (max-min: raising a needs L0, where b has 2 < 8.)
  // Sizes a = 80, b = 40, c = 10. c finishes at 10/2 = 5 s; then a has 40 left, b has 30 left.
  // Refill at 5 s: L1 4/1 = 4, L0 10/2 = 5 -> L1 first: b = 4; a = 10 - 4 = 6.
  //   a: 40/6 = 6.667 s more -> 35/3 = 11.667 s.  b: 30/4 = 7.5 s more -> 12.5 s.
  // At 35/3 s a leaves; b stays at 4 (L1 still binds), so b still finishes at 12.5 s.
  const auto net = network({10, 4});
  for (const SimOptions& o : every_engine()) {
    SCOPED_TRACE(engine_name(o));
    const auto r = simulate(net, {flow(1, 80, {0}), flow(2, 40, {0, 1}), flow(3, 10, {1})}, o);
    EXPECT_NEAR(r.timing[2].finish.value, 5.0, kTol);
    EXPECT_NEAR(r.timing[0].finish.value, 35.0 / 3.0, kTol);
    EXPECT_NEAR(r.timing[1].finish.value, 12.5, kTol);
    EXPECT_EQ(r.timing[1].bottleneck, 1);
    EXPECT_EQ(r.timing[0].bottleneck, 0);
  }
}

TEST(FlowSim, ChainWithLatency) {
  // One link of 100 B/s.
  // f1: 200 B, latency 0.5 s: release 0, start 0.5, finish 0.5 + 200/100 = 2.5.
  // f2 after f1: 100 B, latency 0.25: release 2.5, start 2.75, finish 3.75.
  // f3 after f2: no links (a fixed overhead of 1 s): release 3.75, start = finish = 4.75.
  const auto net = network({100});
  const auto r = simulate(net, {flow(1, 200, {0}, 0.5), flow(2, 100, {0}, 0.25, {1}), flow(3, 0, {}, 1.0, {2})});
  EXPECT_NEAR(r.timing[0].start.value, 0.5, kTol);
  EXPECT_NEAR(r.timing[0].finish.value, 2.5, kTol);
  EXPECT_NEAR(r.timing[1].release.value, 2.5, kTol);
  EXPECT_NEAR(r.timing[1].start.value, 2.75, kTol);
  EXPECT_NEAR(r.timing[1].finish.value, 3.75, kTol);
  EXPECT_NEAR(r.timing[2].release.value, 3.75, kTol);
  EXPECT_NEAR(r.timing[2].finish.value, 4.75, kTol);
  EXPECT_EQ(r.timing[2].bottleneck, -1);
  ASSERT_EQ(r.critical_path.size(), 3u);
  EXPECT_EQ(r.critical_path[0].flow_id, 3);
  EXPECT_EQ(r.critical_path[1].flow_id, 2);
  EXPECT_EQ(r.critical_path[2].flow_id, 1);
  // The link carried bytes only while f1 or f2 was active: 2 s + 1 s.
  EXPECT_NEAR(r.links[0].busy.value, 3.0, kTol);
}

TEST(FlowSim, EcmpSplit) {
  // 400 B from a source to a destination over two equal-cost paths, split into two sub-flows of
  // 200 B each. Links: 0 source egress 100 B/s, 1 spine A 30 B/s, 2 spine B 100 B/s, 3 ingress 100 B/s.
  //   A-half crosses {0, 1, 3}, B-half crosses {0, 2, 3}.
  // Filling: shares 0: 100/2 = 50, 1: 30/1 = 30, 2: 100/1 = 100, 3: 50 -> spine A first: A-half = 30.
  //   Egress and ingress then have 70 left for the B-half alone: B-half = 70.
  // B-half finishes at 200/70 = 2.857 s; the A-half stays at 30 (spine A binds): 200/30 = 6.667 s.
  // Unsplit over spine A alone it would take 400/30 = 13.33 s.
  const auto net = network({100, 30, 100, 100});
  const auto r = simulate(net, {flow(10, 200, {0, 1, 3}), flow(11, 200, {0, 2, 3})});
  EXPECT_NEAR(r.timing[1].finish.value, 200.0 / 70.0, kTol);
  EXPECT_NEAR(r.timing[0].finish.value, 20.0 / 3.0, kTol);
  EXPECT_EQ(r.timing[0].bottleneck, 1);
}

TEST(FlowSim, DependencyDag) {
  // Diamond: A -> {B, C} -> D. Links L0 = L1 = 100 B/s.
  // A: 100 B on L0: 0..1 s.
  // B (after A): 200 B on L0; C (after A): 100 B on L0 and L1. Both start at 1 s and share L0: 50 each
  //   (L1 has only C, 100 free, not binding). C finishes at 1 + 100/50 = 3 s; B has 100 B left,
  //   then alone on L0 at 100 B/s -> 4 s.
  // D (after B, C): 50 B on L0 and L1: released at 4 s by B (the later one), finishes at 4.5 s.
  // Critical path: D <- B <- A.
  const auto net = network({100, 100});
  const auto r = simulate(net, {flow(1, 100, {0}), flow(2, 200, {0}, 0, {1}), flow(3, 100, {0, 1}, 0, {1}),
                                flow(4, 50, {0, 1}, 0, {2, 3})});
  EXPECT_NEAR(r.timing[0].finish.value, 1.0, kTol);
  EXPECT_NEAR(r.timing[2].finish.value, 3.0, kTol);
  EXPECT_NEAR(r.timing[1].finish.value, 4.0, kTol);
  EXPECT_NEAR(r.timing[3].release.value, 4.0, kTol);
  EXPECT_NEAR(r.timing[3].finish.value, 4.5, kTol);
  ASSERT_EQ(r.critical_path.size(), 3u);
  EXPECT_EQ(r.critical_path[0].flow_id, 4);
  EXPECT_EQ(r.critical_path[1].flow_id, 2);
  EXPECT_EQ(r.critical_path[2].flow_id, 1);
}

TEST(FlowSim, ZeroByteAndLinklessFlowsFinishAtStart) {
  // A 0-byte flow with links and a flow without links: both finish at release + latency and take
  // no bandwidth from the 1000 B flow (1000/100 = 10 s).
  const auto net = network({100});
  const auto r = simulate(net, {flow(1, 0, {0}, 0.3), flow(2, 500, {}, 0.7), flow(3, 1000, {0})});
  EXPECT_NEAR(r.timing[0].finish.value, 0.3, kTol);
  EXPECT_NEAR(r.timing[1].finish.value, 0.7, kTol);
  EXPECT_NEAR(r.timing[2].finish.value, 10.0, kTol);
}

TEST(FlowSim, RepeatedLinkCountsAsWeight) {
  // A link listed k times is loaded k times the flow's rate (flow_sim.hpp).
  // 1. One link of 90 B/s; a (60 B) lists it twice, b (150 B) once: 2 x_a + x_b <= 90, the
  //    unfixed weight is 3, so the link saturates at level 90/3 = 30: a = b = 30 (load 2*30 + 30).
  //    a finishes at 60/30 = 2 s; b has sent 60 B, then alone at 90: 90/90 = 1 s more -> 3 s.
  //    Link bytes 2*60 + 150 = 270 = 90 B/s * 3 s: utilization 1.
  for (const SimOptions& o : every_engine()) {
    SCOPED_TRACE(engine_name(o));
    const auto net = network({90});
    const auto r = simulate(net, {flow(1, 60, {0, 0}), flow(2, 150, {0})}, o);
    EXPECT_NEAR(r.timing[0].finish.value, 2.0, kTol);
    EXPECT_NEAR(r.timing[1].finish.value, 3.0, kTol);
    EXPECT_EQ(r.timing[0].bottleneck, 0);
    EXPECT_EQ(r.links[0].bytes, Bytes{270});
    EXPECT_NEAR(r.links[0].utilization, 1.0, kTol);
  }
  // 2. Link 0 = 90 B/s, link 1 = 20 B/s; a (100 B) lists {0, 1, 0}, b (400 B) lists {0}.
  //    Shares: link 0 90/3 = 30, link 1 20/1 = 20 -> link 1 first: a = 20, which takes 2*20 = 40
  //    of link 0; b gets the remaining 90 - 40 = 50 (weight 1).
  //    a finishes at 100/20 = 5 s; b has sent 250 B, then 150/90 s more -> 5 + 5/3 s.
  for (const SimOptions& o : every_engine()) {
    SCOPED_TRACE(engine_name(o));
    const auto net = network({90, 20});
    const auto r = simulate(net, {flow(1, 100, {0, 1, 0}), flow(2, 400, {0})}, o);
    EXPECT_NEAR(r.timing[0].finish.value, 5.0, kTol);
    EXPECT_EQ(r.timing[0].bottleneck, 1);
    EXPECT_NEAR(r.timing[1].finish.value, 5.0 + 5.0 / 3.0, kTol);
    EXPECT_EQ(r.timing[1].bottleneck, 0);
    EXPECT_EQ(r.links[0].bytes, Bytes{600});  // 2 * 100 + 400
    EXPECT_EQ(r.links[1].bytes, Bytes{100});
  }
}

TEST(FlowSim, ChainFlowWithFanOut) {
  // A chain's data flow: a network hop (link 1, 60 B/s) into a GPU whose NVLink port (link 0,
  // 90 B/s) carries two fan-out hops, so the flow lists {1, 0, 0}; 120 B. A plain flow y (150 B)
  // also crosses the port.
  //   Shares: link 0 90/(2 + 1) = 30, link 1 60/1 = 60 -> link 0 first: x = y = 30 (port load
  //   2*30 + 30 = 90; link 1 carries 30 of 60).
  //   x finishes at 120/30 = 4 s. y has sent 120 B by 4 s, then alone on the port: 30/90 s more
  //   -> 4 + 1/3 s.
  // Port bytes 2*120 + 150 = 390, network link 120; the port is busy until 4 + 1/3 s, the network
  // link until 4 s. x's successor z (60 B on link 1) starts at 4 s: 60/60 -> 5 s.
  const auto net = network({90, 60});
  const std::vector<FlowSpec> flows{flow(1, 120, {1, 0, 0}), flow(2, 150, {0}), flow(3, 60, {1}, 0, {1})};
  for (const bool quotient : {false, true}) {
    SimOptions options;
    options.symmetry_quotient = quotient;
    const auto r = simulate(net, flows, options);
    EXPECT_NEAR(r.timing[0].finish.value, 4.0, kTol);
    EXPECT_EQ(r.timing[0].bottleneck, 0);
    EXPECT_NEAR(r.timing[1].finish.value, 4.0 + 1.0 / 3.0, kTol);
    EXPECT_NEAR(r.timing[2].start.value, 4.0, kTol);
    EXPECT_NEAR(r.timing[2].finish.value, 5.0, kTol);
    EXPECT_EQ(r.links[0].bytes, Bytes{390});
    EXPECT_EQ(r.links[1].bytes, Bytes{180});
    EXPECT_NEAR(r.links[0].busy.value, 4.0 + 1.0 / 3.0, kTol);
    EXPECT_NEAR(r.links[1].busy.value, 5.0, kTol);  // x until 4 s, then z from 4 to 5 s
    ASSERT_EQ(r.critical_path.size(), 2u);
    EXPECT_EQ(r.critical_path[0].flow_id, 3);
    EXPECT_EQ(r.critical_path[1].flow_id, 1);
  }
}

TEST(FlowSim, AlikeChainsRunAsOneFlowPerClass) {
  // Four copies of ChainFlowWithFanOut, copy i on its own port (link 2i, 90 B/s) and network
  // link (2i + 1, 60 B/s). The copies are alike: the quotient runs 3 flows on 2 links, the chain
  // with weight 2 on the port cell (it lists its port twice), and every copy gets the times worked
  // out there: x finishes at 4 s, y at 4 + 1/3 s, z at 5 s.
  FlowNetwork net;
  std::vector<FlowSpec> flows;
  for (std::int32_t i = 0; i < 4; ++i) {
    net.capacity.push_back(BytesPerSecond{90});
    net.capacity.push_back(BytesPerSecond{60});
    flows.push_back(flow(3 * i, 120, {2 * i + 1, 2 * i, 2 * i}));
    flows.push_back(flow(3 * i + 1, 150, {2 * i}));
    flows.push_back(flow(3 * i + 2, 60, {2 * i + 1}, 0, {3 * i}));
  }
  const auto r = simulate(net, flows);
  EXPECT_EQ(r.simulated_flows, 3);
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_NEAR(r.timing[3 * i].finish.value, 4.0, kTol);
    EXPECT_EQ(r.timing[3 * i].bottleneck, static_cast<std::int32_t>(2 * i));
    EXPECT_NEAR(r.timing[3 * i + 1].finish.value, 4.0 + 1.0 / 3.0, kTol);
    EXPECT_NEAR(r.timing[3 * i + 2].finish.value, 5.0, kTol);
    EXPECT_EQ(r.links[2 * i].bytes, Bytes{390});  // 2 * 120 + 150
    EXPECT_EQ(r.links[2 * i + 1].bytes, Bytes{180});
  }
}

TEST(FlowSim, IdenticalRoutesAggregateExactly) {
  // 1000 flows of 1..1000 B on one 1000 B/s link, all at t=0 (one class of multiplicity 1000).
  // Processor sharing: flow k finishes when every flow still active has sent k bytes. Raising the
  // level from j-1 to j bytes moves 1 B for each of the 1000 - j + 1 flows still active, at 1000 B/s:
  //   finish_k = sum_{j=1..k} (1000 - j + 1) / 1000 s,  e.g. finish_1 = 1 s, finish_1000 = 500.5 s.
  const auto net = network({1000});
  std::vector<FlowSpec> flows;
  for (int k = 1; k <= 1000; ++k) flows.push_back(flow(k, k, {0}));
  const auto r = simulate(net, flows);
  double t = 0;
  for (int k = 1; k <= 1000; ++k) {
    t += (1000.0 - k + 1) / 1000.0;  // the k-th byte level: (active flows) * 1 B at 1000 B/s
    EXPECT_NEAR(r.timing[k - 1].finish.value, t, 1e-9 * t) << "flow " << k;
  }
}

TEST(FlowSim, RejectsBadInput) {
  const auto net = network({100});
  auto message = [&](std::vector<FlowSpec> flows) {
    try {
      simulate(net, flows);
    } catch (const FlowError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message({flow(7, 10, {3})}).find("flow 7: unknown link 3"), std::string::npos);
  EXPECT_NE(message({flow(7, 10, {0}, 0, {99})}).find("flow 7: 'after' names unknown flow id 99"), std::string::npos);
  EXPECT_NE(message({flow(7, -1, {0})}).find("flow 7: bytes must be >= 0 and finite, got -1"), std::string::npos);
  auto not_a_number = flow(7, 1, {0});
  not_a_number.bytes = ByteAmount{NAN};
  EXPECT_NE(message({not_a_number}).find("flow 7: bytes must be >= 0 and finite"), std::string::npos);
  EXPECT_NE(message({flow(7, 1, {0}), flow(7, 1, {0})}).find("duplicate flow id 7"), std::string::npos);
  EXPECT_EQ(message({flow(7, 1, {0, 0})}), "no error");  // a repeated link is a weight (flow_sim.hpp)
  const auto cycle = message({flow(1, 1, {0}), flow(2, 1, {0}, 0, {1, 4}), flow(3, 1, {0}, 0, {2}), flow(4, 1, {0}, 0, {3})});
  EXPECT_NE(cycle.find("dependency cycle"), std::string::npos) << cycle;
  EXPECT_EQ(cycle.find("flow 1:"), std::string::npos) << "flow 1 is not on the cycle: " << cycle;
  EXPECT_THROW(simulate(network({0}), {flow(1, 1, {0})}), reshard::model::ScheduleError);
}

// Naive reference: at every event, max-min over all active flows one by one (no classes, no
// components), then advance to the next start or finish. A link a flow lists k times counts k
// times (weight k, flow_sim.hpp).
std::vector<double> reference_finish(const FlowNetwork& net, const std::vector<FlowSpec>& flows) {
  const std::size_t n = flows.size(), nl = net.capacity.size();
  std::vector<double> start(n, -1), finish(n, -1), left(n);
  std::vector<int> waiting(n);
  for (std::size_t i = 0; i < n; ++i) {
    left[i] = static_cast<double>(flows[i].bytes.value);
    waiting[i] = static_cast<int>(flows[i].after.size());
    if (waiting[i] == 0) start[i] = flows[i].latency.value;
  }
  auto index_of = [&](std::int64_t id) {
    for (std::size_t i = 0; i < n; ++i)
      if (flows[i].id == id) return i;
    return n;
  };
  auto active = [&](std::size_t i, double t) { return finish[i] < 0 && start[i] >= 0 && start[i] <= t; };
  double t = 0;
  std::size_t done = 0;
  while (done < n) {
    // Finish everything due now.
    bool changed = true;
    while (changed) {
      changed = false;
      for (std::size_t i = 0; i < n; ++i)
        if (active(i, t) &&
            (flows[i].links.empty() || left[i] <= 1e-9 * static_cast<double>(flows[i].bytes.value) + 1e-6)) {
          finish[i] = t;
          ++done;
          changed = true;
          for (std::size_t j = 0; j < n; ++j)
            for (auto a : flows[j].after)
              if (index_of(a) == i && --waiting[j] == 0) start[j] = t + flows[j].latency.value;
        }
    }
    if (done == n) break;
    std::vector<double> rate(n, 0), rem(nl);
    std::vector<char> fixed(n, 1);
    for (std::size_t l = 0; l < nl; ++l) rem[l] = net.capacity[l].value;
    for (std::size_t i = 0; i < n; ++i)
      if (active(i, t)) fixed[i] = 0;
    while (true) {
      double best = INFINITY;
      int best_link = -1;
      for (std::size_t l = 0; l < nl; ++l) {
        std::ptrdiff_t weight = 0;  // unfixed flows on l, each counted as often as it lists l
        for (std::size_t i = 0; i < n; ++i)
          if (!fixed[i]) weight += std::count(flows[i].links.begin(), flows[i].links.end(), static_cast<int>(l));
        if (weight && rem[l] / static_cast<double>(weight) < best)
          best = rem[l] / static_cast<double>(weight), best_link = static_cast<int>(l);
      }
      if (best_link < 0) break;
      for (std::size_t i = 0; i < n; ++i)
        if (!fixed[i] && std::count(flows[i].links.begin(), flows[i].links.end(), best_link)) {
          fixed[i] = 1;
          rate[i] = best;
          for (auto l : flows[i].links) rem[l] -= best;  // once per entry: k times a repeated link
        }
    }
    double next = INFINITY;
    for (std::size_t i = 0; i < n; ++i) {
      if (finish[i] >= 0) continue;
      if (start[i] > t) next = std::min(next, start[i]);
      if (active(i, t) && rate[i] > 0) next = std::min(next, t + left[i] / rate[i]);
    }
    for (std::size_t i = 0; i < n; ++i)
      if (rate[i] > 0) left[i] -= rate[i] * (next - t);
    t = next;
  }
  return finish;
}

// Every finish time of both refill paths, with and without the symmetry quotient, equals the naive
// reference's, to 1e-9 relative.
void expect_matches_reference(const FlowNetwork& net, const std::vector<FlowSpec>& flows, int trial) {
  const auto ref = reference_finish(net, flows);
  for (SimOptions options : every_engine())
    for (const bool quotient : {false, true}) {
      options.symmetry_quotient = quotient;
      const auto r = simulate(net, flows, options);
      EXPECT_EQ(r.solver, options.solver);
      for (std::size_t i = 0; i < flows.size(); ++i)
        ASSERT_NEAR(r.timing[i].finish.value, ref[i], 1e-9 * std::max(1.0, ref[i]))
            << "trial " << trial << " flow " << i << " " << engine_name(options) << " quotient " << quotient;
    }
}

// Random networks, routes (shared, so classes have multiplicity), sizes, latencies and
// dependencies; with `chains`, routes list some links twice or three times (weights), as a
// chain's data flow lists the NVLink port its fan-out hops leave from.
void random_dag_trials(std::uint64_t seed, int trials, bool chains) {
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < trials; ++trial) {
    const int nl = 2 + static_cast<int>(rng() % 8);
    std::vector<double> caps;
    for (int l = 0; l < nl; ++l) caps.push_back(10.0 + static_cast<double>(rng() % 90));
    const auto net = network(caps);
    std::vector<std::vector<std::int32_t>> routes;
    for (int k = 0; k < 5; ++k) {
      std::vector<std::int32_t> r;
      for (int l = 0; l < nl; ++l)
        if (rng() % 3 == 0) r.push_back(l);
      if (r.empty()) r.push_back(static_cast<std::int32_t>(rng() % nl));
      if (chains)
        for (std::size_t j = 0, m = r.size(); j < m; ++j)
          for (std::uint64_t extra = rng() % 4; extra >= 2; --extra) r.push_back(r[j]);  // 0, 1 or 2 repeats
      if (chains) std::shuffle(r.begin(), r.end(), rng);
      routes.push_back(r);
    }
    std::vector<FlowSpec> flows;
    const int n = 5 + static_cast<int>(rng() % 40);
    for (int i = 0; i < n; ++i) {
      std::vector<std::int64_t> after;
      if (i > 0 && rng() % 2 == 0) after.push_back(100 + static_cast<std::int64_t>(rng() % i));
      if (i > 1 && rng() % 4 == 0) after.push_back(100 + static_cast<std::int64_t>(rng() % i));
      std::sort(after.begin(), after.end());
      after.erase(std::unique(after.begin(), after.end()), after.end());
      const double latency = rng() % 3 == 0 ? 0.0 : static_cast<double>(rng() % 100) / 37.0;
      flows.push_back(flow(100 + i, 1 + static_cast<std::int64_t>(rng() % 1000), routes[rng() % routes.size()],
                           latency, after));
    }
    expect_matches_reference(net, flows, trial);
  }
}

TEST(FlowSim, MatchesNaiveReferenceOnRandomDags) {
  // Property: the class/component/event-queue engine gives the same finish times as recomputing
  // max-min over every flow at every event.
  random_dag_trials(12345, 30, false);
}

TEST(FlowSim, MatchesNaiveReferenceWithRepeatedLinks) {
  // The same property with chains' data flows: repeated links (weights).
  random_dag_trials(8086, 40, true);
}

TEST(FlowSim, LocalRefillMatchesNaiveReferenceWithStaggeredJoins) {
  // Property for the local refill (maxmin.cpp, MaxMinSolver::solve): flows join
  // while others are active (random start times through latency, including ties) and leave in any
  // order, on many classes with multiplicity; every finish equals the naive recomputation. Ids are
  // 0..n-1 here (the engine's dense-id path; the test above uses ids from 100).
  std::mt19937_64 rng(777);
  for (int trial = 0; trial < 60; ++trial) {
    const int nl = 3 + static_cast<int>(rng() % 10);
    std::vector<double> caps;
    for (int l = 0; l < nl; ++l) caps.push_back(5.0 + static_cast<double>(rng() % 200));
    const auto net = network(caps);
    std::vector<std::vector<std::int32_t>> routes;
    for (int k = 0; k < 12; ++k) {
      std::vector<std::int32_t> r;
      for (int l = 0; l < nl; ++l)
        if (rng() % 4 == 0) r.push_back(l);
      if (r.empty()) r.push_back(static_cast<std::int32_t>(rng() % nl));
      routes.push_back(r);
    }
    std::vector<FlowSpec> flows;
    const int n = 20 + static_cast<int>(rng() % 100);
    for (int i = 0; i < n; ++i) {
      const double latency = static_cast<double>(rng() % 8) * 0.75;  // ties on purpose
      flows.push_back(flow(i, 1 + static_cast<std::int64_t>(rng() % 500), routes[rng() % routes.size()], latency, {}));
    }
    expect_matches_reference(net, flows, trial);
  }
}

TEST(FlowSim, SlackLinkThatSaturatesInARefillIsRefilledExactly) {
  // A slack link X becomes the bottleneck after a finish: an incremental refill that looked only
  // at the links saturated before the change would miss it.
  // A = 10 B/s, B = 10 B/s, X = 12 B/s. f1 (100 B) crosses A and X, f2 (20 B) crosses A,
  // f3 (100 B) crosses B and X, f4 (1000 B) crosses B.
  // t = 0: A 10/2 = 5, B 10/2 = 5, X 12/2 = 6 -> all four get 5; X carries 10 < 12 (slack).
  //   f2 finishes at 20/5 = 4 s; by then f1, f3, f4 have sent 20 B each.
  // t = 4: f2 leaves A; the new allocation: B 10/2 = 5, X 12/2 = 6, A 10/1 = 10 -> B fixes
  //   f3 = f4 = 5; X then offers (12 - 5)/1 = 7 -> f1 = 7, bottlenecked at X (had the refill kept
  //   X out as slack, f1 would get A's 10 and X would carry 15 > 12).
  //   f1: 80 B left / 7 -> finishes at 4 + 80/7 = 15.428571... s.
  // f3 and f4 keep 5 B/s throughout (B binds): f3 finishes at 100/5 = 20 s, when f4 has sent
  //   100 B too; then f4 alone on B at 10 B/s: 900/10 = 90 s more -> 110 s.
  const auto net = network({10, 10, 12});
  const std::vector<FlowSpec> flows{flow(1, 100, {0, 2}), flow(2, 20, {0}), flow(3, 100, {1, 2}),
                                    flow(4, 1000, {1})};
  const auto r = simulate(net, flows);
  EXPECT_NEAR(r.timing[1].finish.value, 4.0, kTol);
  EXPECT_NEAR(r.timing[0].finish.value, 4.0 + 80.0 / 7.0, kTol);
  EXPECT_EQ(r.timing[0].bottleneck, 2);  // X set f1's last rate
  EXPECT_NEAR(r.timing[2].finish.value, 20.0, kTol);
  EXPECT_NEAR(r.timing[3].finish.value, 110.0, kTol);
  const auto ref = reference_finish(net, flows);
  for (std::size_t i = 0; i < flows.size(); ++i) EXPECT_NEAR(r.timing[i].finish.value, ref[i], kTol) << "flow " << i;
}

TEST(FlowSim, FinishMovesARateTwoLinksAway) {
  // The local refill starts from the finished flow's class and must follow the change through
  // two saturated links to a flow that shares no link with it.
  // A = 6, B = 10, C = 14 B/s. a1 (3 B) crosses A; a2 (100 B) crosses A and B; b1 (100 B) crosses
  // B and C; c1 (100 B) crosses C.
  // t = 0: shares A 6/2 = 3, B 10/2 = 5, C 14/2 = 7. A fixes a1 = a2 = 3; then B offers
  //   (10 - 3)/1 = 7 and C 14/2 = 7: b1 = 7, c1 = 14 - 7 = 7.
  //   a1 finishes at 3/3 = 1 s; by then a2 has sent 3 B, b1 and c1 7 B each.
  // t = 1: A offers 6 to a2 alone, B 10/2 = 5: B fixes a2 = b1 = 5, and C gives c1 14 - 5 = 9.
  //   c1 (a finish two links from a1) moves 7 -> 9: 93 B / 9 -> finishes at 1 + 93/9 = 11.333 s.
  // t = 11.33: C has b1 alone (14), B still binds: nothing moves. b1: 93 / 5 -> 1 + 18.6 = 19.6 s.
  // t = 19.6: a2 has 97 - 5 * 18.6 = 4 B left, alone on A (6) and B (10): 4/6 -> 20.2667 s.
  const auto net = network({6, 10, 14});
  const std::vector<FlowSpec> flows{flow(1, 3, {0}), flow(2, 100, {0, 1}), flow(3, 100, {1, 2}), flow(4, 100, {2})};
  for (const SimOptions& options : every_engine()) {
    SCOPED_TRACE(engine_name(options));
    const auto r = simulate(net, flows, options);
    EXPECT_NEAR(r.timing[0].finish.value, 1.0, kTol);
    EXPECT_NEAR(r.timing[3].finish.value, 1.0 + 93.0 / 9.0, kTol);
    EXPECT_NEAR(r.timing[2].finish.value, 19.6, kTol);
    EXPECT_NEAR(r.timing[1].finish.value, 19.6 + 4.0 / 6.0, kTol);
    EXPECT_EQ(r.timing[1].bottleneck, 0);  // a2's last rate: A alone
  }
}

TEST(FlowSim, LocalRefillMatchesNaiveReferenceOnFatTrees) {
  // Property for the incremental refill on small fat trees: every route crosses a source NIC, a
  // destination NIC and one of two core links whose capacity is near the NIC total, so the core
  // links switch between slack and saturated as flows come and go. Every finish equals the naive
  // recomputation.
  std::mt19937_64 rng(4242);
  for (int trial = 0; trial < 60; ++trial) {
    const int nics = 4 + static_cast<int>(rng() % 5);
    std::vector<double> caps;
    double nic_total = 0;
    for (int l = 0; l < 2 * nics; ++l) {
      caps.push_back(10.0 + static_cast<double>(rng() % 40));
      if (l < nics) nic_total += caps.back();
    }
    for (int k = 0; k < 2; ++k) caps.push_back(nic_total * (0.2 + 0.1 * static_cast<double>(rng() % 5)));
    const auto net = network(caps);
    std::vector<FlowSpec> flows;
    const int n = 30 + static_cast<int>(rng() % 90);
    for (int i = 0; i < n; ++i) {
      const auto src = static_cast<std::int32_t>(rng() % nics);
      const auto dst = static_cast<std::int32_t>(nics + rng() % nics);
      const auto core = static_cast<std::int32_t>(2 * nics + rng() % 2);
      std::vector<std::int32_t> route{src, dst};
      if (rng() % 4 != 0) route.push_back(core);  // some flows stay below the core
      const double latency = static_cast<double>(rng() % 10) * 0.5;  // ties on purpose
      flows.push_back(flow(i, 1 + static_cast<std::int64_t>(rng() % 400), route, latency, {}));
    }
    expect_matches_reference(net, flows, trial);
  }
}

TEST(FlowSim, GroupEngineLeavesDominatedLinksOutAndTracksThem) {
  // Link 0 (64 B/s, a GPU's PCIe link) is crossed only by a, which also crosses link 1 (50 B/s,
  // its NIC): 64 > 1 x 50, so link 0 never saturates and the group engine leaves it out of the
  // filling. Link 1 also carries b. Max-min: a = b = 25 on link 1.
  //   a (50 B) finishes at 50/25 = 2 s; b (150 B) has 100 B left, alone at 50: 2 + 2 = 4 s.
  // Link 0 is still busy while a runs (0-2 s), and its bytes count.
  // Then the same with link 0 at exactly 50 B/s: not dominated (a tie, 50 > 50 fails), it stays
  // in and both links saturate at 25 together; the times are the same.
  for (const double pcie : {64.0, 50.0})
    for (const SimOptions& o : every_engine()) {
      SCOPED_TRACE(engine_name(o) + " pcie " + std::to_string(pcie));
      const auto net = network({pcie, 50});
      const auto r = simulate(net, {flow(1, 50, {0, 1}), flow(2, 150, {1})}, o);
      EXPECT_NEAR(r.timing[0].finish.value, 2.0, kTol);
      EXPECT_NEAR(r.timing[1].finish.value, 4.0, kTol);
      EXPECT_EQ(r.timing[1].bottleneck, 1);
      if (pcie > 50) EXPECT_EQ(r.timing[0].bottleneck, 1);
      EXPECT_NEAR(r.links[0].busy.value, 2.0, kTol);
      EXPECT_NEAR(r.links[1].busy.value, 4.0, kTol);
      EXPECT_EQ(r.links[0].bytes, Bytes{50});
    }
}

TEST(FlowSim, GroupEngineSplitsAGroupWhenALinkBindsPartOfIt) {
  // A class changes its bottleneck twice. Links 0 = 12 B/s, 1 = 6 B/s; a (10 B) crosses {0, 1},
  // b (20 B) and c (40 B) cross {0}, e (3 B, starts at 1 s) crosses {1}.
  // t = 0: shares 0: 12/3 = 4, 1: 6/1 = 6 -> link 0 binds a, b, c at 4 (one group).
  // t = 1: e joins: link 1 6/2 = 3 < link 0 12/3 = 4 -> link 1 binds e and a at 3 (a leaves link
  //   0's group for link 1's: a split); link 0 gives b and c (12 - 3)/2 = 4.5.
  // t = 2: e is done (3 B at 3 B/s). a has 3 B left, b 11.5 B, c 31.5 B. Link 1 would give a 6,
  //   link 0 12/3 = 4 -> a moves back to link 0: all three at 4. a done at 2 + 3/4 = 2.75 s.
  // t = 2.75: b 8.5 B, c 28.5 B left, 6 each: b done at 2.75 + 8.5/6 = 25/6 s; c then alone at 12
  //   with 20 B left: 25/6 + 20/12 = 35/6 s.
  for (const SimOptions& o : every_engine()) {
    SCOPED_TRACE(engine_name(o));
    const auto net = network({12, 6});
    const auto r = simulate(net, {flow(1, 10, {0, 1}), flow(2, 20, {0}), flow(3, 40, {0}), flow(4, 3, {1}, 1.0)}, o);
    EXPECT_NEAR(r.timing[3].finish.value, 2.0, kTol);
    EXPECT_NEAR(r.timing[0].finish.value, 2.75, kTol);
    EXPECT_NEAR(r.timing[1].finish.value, 25.0 / 6.0, kTol);
    EXPECT_NEAR(r.timing[2].finish.value, 35.0 / 6.0, kTol);
    EXPECT_EQ(r.timing[0].bottleneck, 0);
    EXPECT_EQ(r.timing[3].bottleneck, 1);
  }
}

TEST(FlowSim, BurstsOnSharedNicsMatchNaiveReference) {
  // Property for bursts where many classes share each link, as random transfers between GPUs do:
  // each source GPU has a NIC (egress link) and lanes to it (faster links crossed only by its own
  // flows, so dominated), each destination a NIC (ingress); a flow crosses a lane, its source NIC
  // and its destination NIC. Everything starts at once (a few staggered), so a finish moves rates
  // through every NIC. Every engine equals the naive recomputation, and `auto` picks the groups
  // (classes = lanes x destinations, at least 8 per NIC that can saturate).
  std::mt19937_64 rng(2027);
  for (int trial = 0; trial < 12; ++trial) {
    const int sources = 3 + static_cast<int>(rng() % 3), destinations = 3 + static_cast<int>(rng() % 3);
    const int lanes = 6;
    std::vector<double> caps;
    for (int s = 0; s < sources; ++s) caps.push_back(20.0 + static_cast<double>(rng() % 30));       // egress NICs
    for (int d = 0; d < destinations; ++d) caps.push_back(20.0 + static_cast<double>(rng() % 30));  // ingress NICs
    for (int s = 0; s < sources; ++s)
      for (int k = 0; k < lanes; ++k) caps.push_back(caps[s] * 1.5);  // lanes: faster than their NIC
    const auto net = network(caps);
    std::vector<FlowSpec> flows;
    for (int s = 0; s < sources; ++s)
      for (int k = 0; k < lanes; ++k)
        for (int d = 0; d < destinations; ++d) {
          const auto lane = static_cast<std::int32_t>(sources + destinations + s * lanes + k);
          const double latency = rng() % 5 == 0 ? static_cast<double>(rng() % 4) : 0.0;
          flows.push_back(flow(static_cast<std::int64_t>(flows.size()), 1 + static_cast<std::int64_t>(rng() % 300),
                               {lane, s, static_cast<std::int32_t>(sources + d)}, latency));
        }
    expect_matches_reference(net, flows, trial);
  }
}

TEST(FlowSim, AutoHandsAWideningBurstToTheGroupEngine) {
  // 6 000 random transfers between 96 source and 96 destination NICs, all at once: each finish
  // moves the rates of a growing share of the others, so the watched class engine gives way
  // (run_engine) and the answer is the group engine's, equal to the class engine's to 1e-9. A
  // permutation (each NIC sends once) moves few rates per finish: `auto` keeps the classes.
  std::mt19937_64 rng(99);
  const int nics = 96;
  const auto net = network(std::vector<double>(2 * nics, 50.0));
  std::vector<FlowSpec> burst, permutation;
  for (int i = 0; i < 6000; ++i)
    burst.push_back(flow(i, 1000 + static_cast<std::int64_t>(rng() % 64000),
                         {static_cast<std::int32_t>(rng() % nics), static_cast<std::int32_t>(nics + rng() % nics)}));
  for (int i = 0; i < nics; ++i)
    permutation.push_back(flow(i, 1000 + static_cast<std::int64_t>(rng() % 64000),
                               {i, static_cast<std::int32_t>(nics + (i * 7 + 3) % nics)}));
  SimOptions automatic, classes;
  automatic.symmetry_quotient = classes.symmetry_quotient = false;
  classes.solver = RateSolver::Classes;
  const auto a = simulate(net, burst, automatic);
  const auto c = simulate(net, burst, classes);
  EXPECT_EQ(a.solver, RateSolver::Groups);
  EXPECT_EQ(c.solver, RateSolver::Classes);
  for (std::size_t i = 0; i < burst.size(); ++i)
    ASSERT_NEAR(a.timing[i].finish.value, c.timing[i].finish.value, 1e-9 * c.timing[i].finish.value) << "flow " << i;
  EXPECT_EQ(simulate(net, permutation, automatic).solver, RateSolver::Classes);
}

TEST(FlowSim, SymmetricFlowsRunAsOneFlowPerClass) {
  // Four NICs (links 0-3, 10 B/s each) and one core link (4, 16 B/s). For each i: a_i (40 B) crosses
  // NIC i and the core; b_i (30 B) crosses NIC i; c_i (8 B) crosses the core after b_i. The three
  // kinds are alike across i: the quotient has 3 flows and 2 links (NICs, core), with weights
  // n(NIC, a) = n(NIC, b) = 1 and n(core, a) = n(core, c) = 4.
  //   t = 0: core share 16/4 = 4 < NIC share 10/2 = 5, so a_i = 4 (core-bound), b_i = 10 - 4 = 6.
  //   b_i finishes at 30/6 = 5 s; c_i starts. Core: 8 flows, 16/8 = 2; NIC i: a_i alone. a = c = 2.
  //   c_i finishes at 5 + 8/2 = 9 s; a_i has sent 5*4 + 4*2 = 28 B. Then a = 4: 12/4 = 3 s -> 12 s.
  // Core bytes 4*40 + 4*8 = 192 = 16 B/s * 12 s: utilization 1; each NIC 40 + 30 = 70 B.
  const auto net = network({10, 10, 10, 10, 16});
  std::vector<FlowSpec> flows;
  for (std::int32_t i = 0; i < 4; ++i) {
    flows.push_back(flow(3 * i, 40, {i, 4}));
    flows.push_back(flow(3 * i + 1, 30, {i}));
    flows.push_back(flow(3 * i + 2, 8, {4}, 0, {3 * i + 1}));
  }
  SimOptions options;
  options.link_group = {0, 0, 0, 0, 1};
  for (const bool quotient : {true, false}) {
    options.symmetry_quotient = quotient;
    const auto r = simulate(net, flows, options);
    EXPECT_EQ(r.simulated_flows, quotient ? 3 : 12);
    EXPECT_EQ(r.events, 24);  // every flow starts and finishes once, quotient or not
    for (std::size_t i = 0; i < 4; ++i) {
      EXPECT_NEAR(r.timing[3 * i].finish.value, 12.0, kTol);
      EXPECT_EQ(r.timing[3 * i].bottleneck, 4);
      EXPECT_NEAR(r.timing[3 * i + 1].finish.value, 5.0, kTol);
      EXPECT_EQ(r.timing[3 * i + 1].bottleneck, static_cast<std::int32_t>(i));
      EXPECT_NEAR(r.timing[3 * i + 2].release.value, 5.0, kTol);
      EXPECT_NEAR(r.timing[3 * i + 2].finish.value, 9.0, kTol);
      EXPECT_EQ(r.links[i].bytes, Bytes{70});
      EXPECT_NEAR(r.links[i].busy.value, 12.0, kTol);
    }
    EXPECT_EQ(r.links[4].bytes, Bytes{192});
    EXPECT_NEAR(r.links[4].utilization, 1.0, kTol);
    // Group rates from t = 0: NICs 4 * (4 + 6) = 40 B/s, core 16 B/s; from 5 s: NICs 4 * 2 = 8.
    ASSERT_GE(r.group_timeline.size(), 4u);
    EXPECT_EQ(r.group_timeline[0].group, 0);
    EXPECT_NEAR(r.group_timeline[0].rate.value, 40.0, kTol);
    EXPECT_NEAR(r.group_timeline[1].rate.value, 16.0, kTol);
    EXPECT_NEAR(r.group_timeline[2].time.value, 5.0, kTol);
    EXPECT_NEAR(r.group_timeline[2].rate.value, 8.0, kTol);
    // The last finish is a_0 (the first of the equal ones), which waits for nothing.
    ASSERT_EQ(r.critical_path.size(), 1u);
    EXPECT_EQ(r.critical_path[0].flow_index, 0u);
    EXPECT_EQ(r.critical_path[0].bottleneck, 4);
  }
}

TEST(FlowSim, QuotientKeepsFlowsWithDifferentPredecessorsApart) {
  // Two copies of: p (10 B) on its own 10 B/s link, q (20 B) on another; x waits for p, y for q;
  // x and y carry nothing and take 1 s of latency. x and y differ only in what they wait for:
  //   p finishes at 10/10 = 1 s, q at 20/10 = 2 s; x at 1 + 1 = 2 s, y at 2 + 1 = 3 s.
  const auto net = network({10, 10, 10, 10});
  std::vector<FlowSpec> flows;
  for (std::int32_t k = 0; k < 2; ++k) {
    flows.push_back(flow(4 * k, 10, {2 * k}));
    flows.push_back(flow(4 * k + 1, 20, {2 * k + 1}));
    flows.push_back(flow(4 * k + 2, 0, {}, 1.0, {4 * k}));
    flows.push_back(flow(4 * k + 3, 0, {}, 1.0, {4 * k + 1}));
  }
  const auto r = simulate(net, flows);
  EXPECT_EQ(r.simulated_flows, 4);
  for (std::size_t k = 0; k < 2; ++k) {
    EXPECT_NEAR(r.timing[4 * k].finish.value, 1.0, kTol);
    EXPECT_NEAR(r.timing[4 * k + 1].finish.value, 2.0, kTol);
    EXPECT_NEAR(r.timing[4 * k + 2].finish.value, 2.0, kTol);
    EXPECT_NEAR(r.timing[4 * k + 3].finish.value, 3.0, kTol);
  }
}

// A random problem (links, routes, sizes, latencies, dependencies) copied k times onto its own
// links, every copy also crossing shared links, the flows shuffled and renumbered. With `chains`,
// flows list some of their links twice (weights).
void replicated_quotient_trials(std::uint64_t seed, int trials, bool chains) {
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < trials; ++trial) {
    const int own = 2 + static_cast<int>(rng() % 4), shared = 1 + static_cast<int>(rng() % 2);
    const int copies = 2 + static_cast<int>(rng() % 3);
    std::vector<double> own_caps, caps;
    for (int l = 0; l < own; ++l) own_caps.push_back(10.0 + static_cast<double>(rng() % 90));
    for (int k = 0; k < copies; ++k) caps.insert(caps.end(), own_caps.begin(), own_caps.end());
    for (int l = 0; l < shared; ++l) caps.push_back(20.0 + static_cast<double>(rng() % 200));
    const auto net = network(caps);
    struct Base {
      std::int64_t bytes;
      std::vector<std::int32_t> own, shared;
      double latency;
      std::vector<int> after;
    };
    std::vector<Base> base;
    const int n = 3 + static_cast<int>(rng() % 12);
    for (int i = 0; i < n; ++i) {
      // Few distinct sizes and latencies, so that flows told apart only by their links or their
      // predecessors are common.
      Base b{100 * (1 + static_cast<std::int64_t>(rng() % 3)), {}, {}, static_cast<double>(rng() % 2), {}};
      for (int l = 0; l < own; ++l)
        if (rng() % 3 == 0) b.own.push_back(l);
      for (int l = 0; l < shared; ++l)
        if (rng() % 2 == 0) b.shared.push_back(l);
      if (b.own.empty() && b.shared.empty()) b.own.push_back(static_cast<std::int32_t>(rng() % own));
      if (i > 0 && rng() % 2 == 0) b.after.push_back(static_cast<int>(rng() % i));
      if (chains) {
        if (!b.own.empty() && rng() % 2 == 0) b.own.push_back(b.own[rng() % b.own.size()]);
        if (!b.shared.empty() && rng() % 3 == 0) b.shared.push_back(b.shared[rng() % b.shared.size()]);
      }
      base.push_back(b);
    }
    // Flow (copy k, base i) gets a shuffled position; ids are 1000 + position.
    std::vector<int> position(static_cast<std::size_t>(copies * n));
    std::iota(position.begin(), position.end(), 0);
    std::shuffle(position.begin(), position.end(), rng);
    std::vector<FlowSpec> flows(position.size());
    for (int k = 0; k < copies; ++k)
      for (int i = 0; i < n; ++i) {
        const Base& b = base[i];
        std::vector<std::int32_t> links;
        for (auto l : b.own) links.push_back(k * own + l);
        for (auto l : b.shared) links.push_back(copies * own + l);
        std::vector<std::int64_t> after;
        for (auto a : b.after) after.push_back(1000 + position[k * n + a]);
        const int at = position[k * n + i];
        flows[at] = flow(1000 + at, b.bytes, links, b.latency, after);
      }
    expect_matches_reference(net, flows, trial);
    const auto r = simulate(net, flows);
    EXPECT_LE(r.simulated_flows * copies, static_cast<std::int64_t>(flows.size())) << "trial " << trial;
    SimOptions plain;
    plain.symmetry_quotient = false;
    const auto p = simulate(net, flows, plain);
    EXPECT_NEAR(r.makespan.value, p.makespan.value, 1e-12 * p.makespan.value) << "trial " << trial;
    for (std::size_t l = 0; l < caps.size(); ++l) {
      EXPECT_EQ(r.links[l].bytes, p.links[l].bytes);
      EXPECT_NEAR(r.links[l].busy.value, p.links[l].busy.value, 1e-9 * std::max(1.0, p.makespan.value));
    }
    ASSERT_FALSE(r.critical_path.empty());
    EXPECT_NEAR(r.critical_path.front().finish.value, p.makespan.value, 1e-9 * p.makespan.value);
    for (std::size_t s = 1; s < r.critical_path.size(); ++s)  // each step released the one before it
      EXPECT_NEAR(r.critical_path[s].finish.value, r.critical_path[s - 1].release.value, 1e-12);
  }
}

TEST(FlowSim, QuotientOfReplicatedProblemsMatchesNaiveReference) {
  // Property for the symmetry quotient: the copies are alike, so the quotient runs at most 1/k of
  // the flows, and every finish time (and the critical path's end) equals the naive recomputation
  // and the run without the quotient.
  replicated_quotient_trials(2718, 25, false);
}

TEST(FlowSim, QuotientOfReplicatedChainsMatchesNaiveReference) {
  // The same with repeated links: link colour sums and the quotient's weights n(L, F) count
  // repeats.
  replicated_quotient_trials(31415, 40, true);
}

TEST(FlowSim, CapacityJitterIsBoundedAndSeeded) {
  // jitter_capacities: C_l * (1 + J u_l) with u_l in [-1, 1], the same for the same seed.
  FlowNetwork base = network(std::vector<double>(64, 1000.0));
  FlowNetwork a = base, b = base, c = base;
  jitter_capacities(a, 0.01, 7);
  jitter_capacities(b, 0.01, 7);
  jitter_capacities(c, 0.01, 8);
  double lowest = INFINITY, highest = 0;
  bool seeds_differ = false;
  for (std::size_t l = 0; l < 64; ++l) {
    EXPECT_EQ(a.capacity[l].value, b.capacity[l].value);
    seeds_differ = seeds_differ || a.capacity[l].value != c.capacity[l].value;
    lowest = std::min(lowest, a.capacity[l].value);
    highest = std::max(highest, a.capacity[l].value);
  }
  EXPECT_TRUE(seeds_differ);
  EXPECT_GE(lowest, 990.0);
  EXPECT_LE(highest, 1010.0);
  EXPECT_LT(lowest, 999.0);  // 64 draws spread over the range
  EXPECT_GT(highest, 1001.0);
  // One 1000 B flow alone on link 3 finishes at 1000 / C_3.
  const auto r = simulate(a, {flow(0, 1000, {3})});
  EXPECT_NEAR(r.makespan.value, 1000.0 / a.capacity[3].value, kTol);
  FlowNetwork unchanged = base;
  jitter_capacities(unchanged, 0.0, 7);
  EXPECT_EQ(unchanged.capacity[5].value, 1000.0);
  EXPECT_THROW(jitter_capacities(unchanged, 0.5, 1), FlowError);
  EXPECT_THROW(jitter_capacities(unchanged, -1e-9, 1), FlowError);
}

TEST(FlowSim, DumpRoundTripReproducesTimes) {
  // Write the --dump-flows object, read it back, simulate again: identical times (17 digits).
  // Every third flow carries a fractional amount (an ECMP share of bytes / 3): it must come back
  // bit for bit; whole amounts are written as JSON integers.
  std::mt19937_64 rng(7);
  const auto net = network({1e9, 3.7e9, 5e10, 123456789.0});
  std::vector<FlowSpec> flows;
  for (int i = 0; i < 50; ++i) {
    std::vector<std::int32_t> links;
    for (int l = 0; l < 4; ++l)
      if (rng() % 2) links.push_back(l);
    std::vector<std::int64_t> after;
    if (i > 3) after.push_back(static_cast<std::int64_t>(rng() % i));
    flows.push_back(flow(i, static_cast<std::int64_t>(rng() % 1000000000), links, 1e-6 * (rng() % 10), after));
    if (i % 3 == 0) flows.back().bytes = ByteAmount{flows.back().bytes.value / 3};
  }
  const auto r = simulate(net, flows);
  const auto path = std::filesystem::temp_directory_path() / "reshard_test_sim_dump.json";
  write_flow_dump(path, net, flows, r);
  const auto dump = read_flow_dump(path);
  std::filesystem::remove(path);
  ASSERT_EQ(dump.flows.size(), flows.size());
  const auto again = simulate(dump.network, dump.flows);
  for (std::size_t i = 0; i < flows.size(); ++i) {
    EXPECT_EQ(dump.flows[i].bytes, flows[i].bytes);
    EXPECT_EQ(dump.recorded[i].finish.value, r.timing[i].finish.value);
    EXPECT_EQ(dump.recorded[i].start.value, r.timing[i].release.value + flows[i].latency.value);
    EXPECT_EQ(again.timing[i].finish.value, r.timing[i].finish.value);
    EXPECT_EQ(again.timing[i].release.value, r.timing[i].release.value);
  }
  const auto j = flows_to_json(net, flows, r);
  for (const char* key : {"id", "bytes", "links", "latency_s", "after", "release_s", "start_s", "finish_s"})
    EXPECT_TRUE(j["flows"][0].contains(key)) << key;
  EXPECT_TRUE(j["links"][0].contains("capacity_Bps"));
  for (std::size_t i = 0; i < flows.size(); ++i)
    EXPECT_EQ(j["flows"][i]["bytes"].is_number_integer(), flows[i].bytes.value == std::round(flows[i].bytes.value)) << i;
}

TEST(FlowSim, DumpRoundTripWithRepeatedLinks) {
  // Repeated link ids in the dump (a weight, as a chain's data flow lists the NVLink port its
  // fan-out hops leave from) come back as written, and the replay gives the same times bit for
  // bit.
  std::mt19937_64 rng(99);
  const auto net = network({1e9, 3.7e9, 5e10, 123456789.0});
  std::vector<FlowSpec> flows;
  for (int i = 0; i < 60; ++i) {
    std::vector<std::int32_t> links;
    for (int l = 0; l < 4; ++l)
      if (rng() % 2) links.push_back(l);
    if (!links.empty() && rng() % 2) links.push_back(links[rng() % links.size()]);
    std::vector<std::int64_t> after;
    if (i > 3) after.push_back(static_cast<std::int64_t>(rng() % i));
    flows.push_back(flow(i, static_cast<std::int64_t>(rng() % 1000000000), links, 1e-6 * (rng() % 10), after));
  }
  const auto r = simulate(net, flows);
  const auto j = flows_to_json(net, flows, r);
  const auto dump = flow_dump_from_json(nlohmann::json::parse(j.dump()), "memory");
  ASSERT_EQ(dump.flows.size(), flows.size());
  const auto again = simulate(dump.network, dump.flows);
  bool repeats = false;
  for (std::size_t i = 0; i < flows.size(); ++i) {
    EXPECT_EQ(dump.flows[i].links, flows[i].links) << i;
    EXPECT_EQ(dump.recorded[i].finish.value, r.timing[i].finish.value) << i;
    EXPECT_EQ(again.timing[i].finish.value, r.timing[i].finish.value) << i;
    EXPECT_EQ(again.timing[i].release.value, r.timing[i].release.value) << i;
    repeats = repeats || std::set<std::int32_t>(flows[i].links.begin(), flows[i].links.end()).size() < flows[i].links.size();
  }
  EXPECT_TRUE(repeats);
  EXPECT_EQ(again.makespan.value, r.makespan.value);
  for (std::size_t l = 0; l < 4; ++l) EXPECT_EQ(again.links[l].bytes, r.links[l].bytes);
}

TEST(FlowSim, DumpReaderNamesTheKey) {
  const auto path = std::filesystem::temp_directory_path() / "reshard_test_sim_bad_dump.json";
  {
    std::ofstream(path) << R"({"links": [{"id": 0, "capacity_Bps": 1e9}], "flows": [{"id": 1, "bytes": "x", "links": [0]}]})";
  }
  try {
    read_flow_dump(path);
    FAIL() << "no error";
  } catch (const reshard::model::ConfigError& e) {
    EXPECT_EQ(e.key(), "flows[0].bytes");
  }
  std::filesystem::remove(path);
}

TEST(FlowSim, DumpReaderRefusesUnknownKeys) {
  // A key the format does not have is an error naming it, at every level: it could change what
  // the flows mean (a pipeline fill's "fill_bytes" would change the times of a replay).
  auto key_of = [](const char* text) -> std::string {
    try {
      flow_dump_from_json(nlohmann::json::parse(text), "memory");
    } catch (const reshard::model::ConfigError& e) {
      EXPECT_NE(e.reason().find("unknown key"), std::string::npos) << e.reason();
      return e.key();
    }
    return "no error";
  };
  EXPECT_EQ(key_of(R"({"links": [{"id": 0, "capacity_Bps": 1e9}],
                       "flows": [{"id": 1, "bytes": 10, "links": [0]}, {"id": 2, "bytes": 10, "links": [0, 0], "fill_bytes": 5}]})"),
            "flows[1].fill_bytes");
  EXPECT_EQ(key_of(R"({"links": [{"id": 0, "capacity_Bps": 1e9, "name": "nic"}], "flows": []})"), "links[0].name");
  EXPECT_EQ(key_of(R"({"links": [], "flows": [], "version": 2})"), "version");
  EXPECT_EQ(key_of(R"({"links": [{"id": 0, "capacity_Bps": 1e9}],
                       "flows": [{"id": 1, "bytes": 10, "links": [0], "latency_s": 0, "after": [],
                                  "release_s": 0, "start_s": 0, "finish_s": 1e-8}]})"),
            "no error");
}

TEST(FlowSim, GroupTimelineAndTrace) {
  // Two-flow case above with link 0 in group 0: 100 B/s allocated from 0 s, 0 from 4 s.
  const auto net = network({100});
  const std::vector<FlowSpec> flows{flow(1, 100, {0}), flow(2, 300, {0})};
  SimOptions opt;
  opt.link_group = {0};
  const auto r = simulate(net, flows, opt);
  ASSERT_GE(r.group_timeline.size(), 2u);
  EXPECT_NEAR(r.group_timeline.front().rate.value, 100.0, kTol);
  EXPECT_NEAR(r.group_timeline.back().time.value, 4.0, kTol);
  EXPECT_NEAR(r.group_timeline.back().rate.value, 0.0, kTol);
  TraceLayout layout;
  layout.track_names = {"gpu 0", "gpu 1"};
  layout.flow_tracks = {{0, 1}, {0, 1}};
  layout.link_group = {0};
  layout.group_names = {"network"};
  std::ostringstream out;
  write_chrome_trace(out, net, flows, r, layout);
  const auto j = nlohmann::json::parse(out.str());
  int complete = 0, counters = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "X") {
      ++complete;
      EXPECT_GE(e["dur"].get<double>(), 0.0);
    }
    if (e["ph"] == "C") ++counters;
  }
  EXPECT_EQ(complete, 4);  // two flows on two tracks each
  EXPECT_GE(counters, 2);
}

}  // namespace
