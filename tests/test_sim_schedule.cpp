// Schedules simulated with the flow engine (sim/schedule_sim.hpp): hand-worked cases on a shipped
// topology, ECMP sub-flows, local copies, overheads, the lower-bound / estimate properties on every
// strategy and shipped scenario, the dump replay, and the `reshard simulate` schedule modes.
#include <gtest/gtest.h>

#include <array>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <ostream>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include "reshard/model/collective.hpp"
#include "reshard/model/cost.hpp"
#include "reshard/model/errors.hpp"
#include "reshard/model/scenario.hpp"
#include "reshard/model/schedule.hpp"
#include "reshard/model/tuner.hpp"
#include "reshard/sim/flow_io.hpp"
#include "reshard/sim/schedule_sim.hpp"

#include "op_quotient.hpp"  // sim/src: the quotient found on ops, run on pipelined chains below
#include "run_command.hpp"

#include <random>

using namespace reshard;
using model::Bytes;
using model::Op;
using model::OpPhase;
using model::Seconds;

namespace {
// The estimate's fluid terms without its pipeline-fill heuristic: the bandwidth bound and the
// uncontended critical path, plus overheads. No max-min simulation can beat it.
double fluid_bound(const reshard::model::Prediction& p) {
  return std::max(p.bandwidth_bound.value, p.critical_path.value) + p.overheads.value;
}
}  // namespace

namespace {

const std::string kRoot = RESHARD_SOURCE_DIR;

const model::Topology& two_nodes() {
  static const model::Topology t = model::Topology::load(kRoot + "/topologies/dgx-h100-2n.yaml");
  return t;
}

// Appends to `s` an op moving `bytes` from `src` to `dst` (along chain `chain` when >= 0) once the
// ops `after` have finished.
void add_op(model::Schedule& s, model::GpuId src, model::GpuId dst, std::int64_t bytes, std::vector<std::int64_t> after = {},
            OpPhase phase = OpPhase::Direct, std::int32_t buffer = 0, std::int32_t chain = -1) {
  Op op;
  op.src = src;
  op.dst = dst;
  op.bytes = Bytes{bytes};
  op.phase = phase;
  op.buffer = buffer;
  op.chain = chain;
  s.add_op(op, after);
}

double route_latency(model::GpuId a, model::GpuId b) { return two_nodes().route(a, b).latency.value; }

std::string run_cli(const std::string& args, int* status) {
  return reshard::test::run_command(std::string(RESHARD_BINARY) + " " + args + " 2>&1", status);
}

}  // namespace

TEST(ScheduleSim, SharedNvlinkThenDependentHopAndLocalCopy) {
  // dgx-h100-2n, profile reshard: NVLink 450 GB/s per direction x efficiency 0.82 = 369 GB/s;
  // per_op = 8.4 us; memory copy rate 2.15 TB/s.
  //   op 0, op 1: GPU 0 -> GPU 1, 369 MB each, no predecessors. Both cross GPU 0's NVLink egress and
  //     GPU 1's ingress and share them: 184.5 GB/s each, so both need 369e6 / 184.5e9 = 2 ms after
  //     starting at L01 = route latency(0,1) + per_op:  finish = L01 + 2 ms.
  //   op 2: GPU 1 -> GPU 2, 369 MB, after op 0: released at L01 + 2 ms, alone on its links:
  //     finish = L01 + 2 ms + L12 + 1 ms.
  //   op 3: local copy on GPU 5, 2.15 GB, no predecessors: per_op + 2.15e9 / 2.15e12 = per_op + 1 ms.
  // Every transfer streams through its ring (model/memory.hpp) and also pays its copy fill,
  // cp = 2 c / m: the pack of its first 512 KiB chunk and the unpack of its last at m = 2.15 TB/s,
  // taken with its latency before its bytes flow (model/chain.hpp); a local copy is unstaged.
  // Op 2 is in step 1 (it waits for op 0): the executors start it once GPU 1 has finished its part
  // in step 0, ops 0 and 1, which end together.
  model::Schedule s;
  add_op(s, 0, 1, 369'000'000);
  add_op(s, 0, 1, 369'000'000);
  add_op(s, 1, 2, 369'000'000, {0});
  add_op(s, 5, 5, 2'150'000'000);
  const auto cost = model::CostParams::profile_named("reshard");
  sim::ScheduleSimOptions keep;
  keep.keep_flows = true;
  const auto r = sim::simulate_schedule(s, two_nodes(), cost, keep);
  const double per_op = cost.per_op.value;
  const double cp = 2.0 * (512 << 10) / 2.15e12;
  const double l01 = route_latency(0, 1) + per_op + cp, l12 = route_latency(1, 2) + per_op + cp;
  EXPECT_NEAR(r.ops[0].start.value, l01, 1e-15);
  EXPECT_NEAR(r.ops[0].finish.value, l01 + 2e-3, 1e-12);
  EXPECT_NEAR(r.ops[1].finish.value, l01 + 2e-3, 1e-12);
  EXPECT_NEAR(r.ops[2].release.value, l01 + 2e-3, 1e-12);
  EXPECT_NEAR(r.ops[2].finish.value, l01 + 2e-3 + l12 + 1e-3, 1e-12);
  EXPECT_NEAR(r.ops[3].finish.value, per_op + 1e-3, 1e-12);
  EXPECT_DOUBLE_EQ(r.makespan.value, r.ops[2].finish.value);
  EXPECT_EQ(r.overheads.value, 0.0);
  // The critical path is op 2 after op 0 or op 1 (they finish together; both hold op 2's step back).
  ASSERT_EQ(r.critical_ops.size(), 2u);
  EXPECT_EQ(r.critical_ops[0], 2u);
  EXPECT_LE(r.critical_ops[1], 1u);
  // The local copy ran on GPU 5's memory resource, a link after the topology's.
  std::size_t copy_flow = 0;
  while (copy_flow < r.flows.size() && r.op_of_flow[copy_flow] != 3) ++copy_flow;
  ASSERT_LT(copy_flow, r.flows.size());
  ASSERT_EQ(r.flows[copy_flow].links.size(), 1u);
  const auto mem = r.flows[copy_flow].links[0];
  EXPECT_EQ(mem, two_nodes().link_count());
  EXPECT_EQ(r.link_kind[static_cast<std::size_t>(mem)], 4);
  EXPECT_DOUBLE_EQ(r.network.capacity[static_cast<std::size_t>(mem)].value, 2.15e12);
  EXPECT_EQ(r.result.links[static_cast<std::size_t>(mem)].bytes.value, 2'150'000'000);
}

TEST(ScheduleSim, EcmpSubFlowsCarryTheOpTogether) {
  // GPU 0 (node 0, rail 0) -> GPU 9 (node 1, rail 1): a cross-rail route with several equal paths.
  // An op of B bytes becomes k equal sub-flows of B/k (fractional here: k does not divide B) on the
  // k paths, all with the same double, so the symmetry quotient sees them alike; the
  // successor's sub-flows wait for them through one join flow (no bytes, links or latency); the op
  // finishes with its last sub-flow.
  const auto route = two_nodes().route(0, 9);
  const auto k = static_cast<std::int64_t>(route.paths.size());
  ASSERT_GT(k, 1);
  model::Schedule s;
  const std::int64_t b = 1'000'000'007;
  add_op(s, 0, 9, b);
  add_op(s, 9, 0, b, {0});
  const auto cost = model::CostParams::profile_named("reshard");
  sim::ScheduleSimOptions keep;
  keep.keep_flows = true;
  const auto r = sim::simulate_schedule(s, two_nodes(), cost, keep);
  ASSERT_EQ(static_cast<std::int64_t>(r.flows.size()), 2 * k + 1);
  EXPECT_EQ(r.flow_count(), r.flows.size());
  ASSERT_EQ(r.join_flows, 1u);
  const auto& join = r.flows[static_cast<std::size_t>(k)];
  EXPECT_EQ(r.op_of_flow[static_cast<std::size_t>(k)], -1);
  EXPECT_EQ(join.bytes.value, 0);
  EXPECT_TRUE(join.links.empty());
  EXPECT_EQ(join.latency.value, 0.0);
  EXPECT_EQ(join.after.size(), static_cast<std::size_t>(k));
  ASSERT_NE(b % k, 0);
  double sum = 0;
  double last = 0;
  for (std::int64_t p = 0; p < k; ++p) {
    const auto& f = r.flows[static_cast<std::size_t>(p)];
    EXPECT_EQ(r.op_of_flow[static_cast<std::size_t>(p)], 0);
    EXPECT_EQ(f.links, route.paths[static_cast<std::size_t>(p)].links);
    EXPECT_EQ(f.bytes.value, static_cast<double>(b) / static_cast<double>(k));  // bitwise equal shares
    // Its latency holds the op's copy fill too: 2 x 512 KiB at 2.15 TB/s (model/chain.hpp).
    EXPECT_DOUBLE_EQ(f.latency.value, route.latency.value + cost.per_op.value + 2.0 * (512 << 10) / 2.15e12);
    sum += f.bytes.value;
    last = std::max(last, r.result.timing[static_cast<std::size_t>(p)].finish.value);
    // Every sub-flow of op 1 waits for every sub-flow of op 0, through the join.
    EXPECT_EQ(join.after[static_cast<std::size_t>(p)], p);
    EXPECT_EQ(r.flows[static_cast<std::size_t>(k + 1 + p)].after, (std::vector<std::int64_t>{k}));
    EXPECT_EQ(r.op_of_flow[static_cast<std::size_t>(k + 1 + p)], 1);
  }
  EXPECT_NEAR(sum, static_cast<double>(b), 1e-15 * static_cast<double>(k * b));  // k roundings of B/k
  EXPECT_DOUBLE_EQ(r.ops[0].finish.value, last);
  EXPECT_DOUBLE_EQ(r.result.timing[static_cast<std::size_t>(k)].finish.value, last);
  EXPECT_DOUBLE_EQ(r.ops[1].release.value, last);
  // Alone in the network, op 0 cannot beat latency + per_op + B / (k x the slowest path's capacity),
  // the critical-path term of the estimate (model/cost.hpp): the k sub-flows together get at most
  // k times the rate of the slowest path.
  double slowest = INFINITY;
  for (const auto& path : route.paths)
    for (auto l : path.links) slowest = std::min(slowest, r.network.capacity[static_cast<std::size_t>(l)].value);
  EXPECT_GE(r.ops[0].finish.value,
            (route.latency.value + cost.per_op.value + static_cast<double>(b) / (static_cast<double>(k) * slowest)) *
                (1 - 1e-12));
}

TEST(ScheduleSim, OverheadsAddedAfterTheLastOp) {
  // Overheads of 10.18 ms (as the estimate would give them) are added after the last op finishes:
  // the overhead flow has no links, that latency, and waits for the ops nobody waits for (1 and 2).
  model::Schedule s;
  add_op(s, 0, 1, 1'000'000, {}, OpPhase::Broadcast, 7);
  add_op(s, 1, 2, 1'000'000, {0}, OpPhase::Broadcast, 7);
  add_op(s, 0, 3, 1'000'000, {}, OpPhase::Broadcast, 8);
  const auto cost = model::CostParams::profile_named("nemo_rl");
  sim::ScheduleSimOptions options;
  options.overheads = Seconds{10.18e-3};
  options.keep_flows = true;
  const auto r = sim::simulate_schedule(s, two_nodes(), cost, options);
  EXPECT_EQ(r.overheads.value, 10.18e-3);
  EXPECT_DOUBLE_EQ(r.makespan.value, r.ops_makespan.value + r.overheads.value);
  const auto& overhead = r.flows.back();
  EXPECT_EQ(r.op_of_flow.back(), -1);
  EXPECT_TRUE(overhead.links.empty());
  EXPECT_EQ(overhead.after, (std::vector<std::int64_t>{1, 2}));
}

TEST(ScheduleSim, BadOpsAreRefusedNamingTheOp) {
  model::Schedule s;
  add_op(s, 0, 99, 10);
  try {
    sim::simulate_schedule(s, two_nodes(), model::CostParams{});
    FAIL() << "expected a ScheduleError";
  } catch (const model::ScheduleError& e) {
    EXPECT_NE(std::string(e.what()).find("op 0"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("GPU 99"), std::string::npos) << e.what();
  }
  s = {};
  add_op(s, 0, 1, 10, {0});
  EXPECT_THROW(sim::simulate_schedule(s, two_nodes(), model::CostParams{}), model::ScheduleError);
  // A zero efficiency makes a zero capacity: refused naming the link, with or without kept flows
  // (without, the quotient on the ops would pay here: four alike ops; it leaves the refusal to
  // the flows' validation).
  s = {};
  for (int k = 0; k < 4; ++k) add_op(s, 0, 1, 10);
  model::CostParams cost;
  cost.efficiency[static_cast<int>(model::LinkKind::NVLink)] = 0;
  for (bool keep : {false, true}) {
    sim::ScheduleSimOptions options;
    options.keep_flows = keep;
    try {
      sim::simulate_schedule(s, two_nodes(), cost, options);
      FAIL() << "expected a FlowError";
    } catch (const sim::FlowError& e) {
      EXPECT_NE(std::string(e.what()).find("capacity must be positive"), std::string::npos) << e.what();
    }
  }
  cost.efficiency[static_cast<int>(model::LinkKind::NVLink)] = 0.82;
  const auto alike = sim::simulate_schedule(s, two_nodes(), cost);
  EXPECT_EQ(alike.result.simulated_flows, 1);  // the four ops are one class
}

namespace {

// A schedule of chain ops built by hand on two_nodes(): chain k carries ops[k] bytes along `hops[k]`
// in chunks of `chunk`, all released at once, each on its own chain.
model::Schedule hand_chains(const std::vector<std::vector<model::ChainHop>>& hops, const std::vector<std::int64_t>& bytes,
                            std::int64_t chunk) {
  model::Schedule s;
  for (std::size_t k = 0; k < hops.size(); ++k) {
    s.buffers.push_back({{}, Bytes{bytes[k]}});
    s.chains.push_back({hops[k], Bytes{chunk}});
    add_op(s, hops[k].front().from, hops[k].back().to, bytes[k], {}, OpPhase::Broadcast, static_cast<std::int32_t>(k),
           static_cast<std::int32_t>(k));
  }
  return s;
}

}  // namespace

TEST(ChainSim, IdleRingBroadcastIsItsBytesPlusTheFill) {
  // A ring broadcast over the 8 GPUs of node 0: chain 0 -> 1 -> ... -> 7 (depth H = 7), M = 64 MiB
  // in chunks of c = 1 MiB. Every hop is NVLink: each GPU's port carries the ring once, r = 450e9
  // x 0.82 = 369e9, and a hop's route latency is 2 x 0.3 us. Alone the ring is sent after
  // per_op + M / r, and its last chunk reaches GPU 7 L + (H - 1) c / r later (model/chain.hpp):
  //     T = per_op + M / r + 7 x 0.6 us + 6 c / r + 2 c / m = 2.4 us + 181.9 us + 4.2 us + 17.0 us + 1.0 us,
  // the last term the copy fill: GPU 0 packs its first chunk, GPU 7 unpacks its last, at the memory
  // copy rate m = 2.15 TB/s (model/chain.hpp). The estimate gives the same by construction.
  std::vector<model::ChainHop> ring;
  for (model::GpuId g = 0; g < 7; ++g) ring.push_back({g, g + 1});
  const double M = 64 << 20, c = 1 << 20, r = 450e9 * 0.82;
  const auto s = hand_chains({ring}, {64 << 20}, 1 << 20);
  const auto cost = model::CostParams::profile_named("links");
  const auto sim = sim::simulate_schedule(s, two_nodes(), cost);
  const double m = 2.15e12;
  const double expected = cost.per_op.value + M / r + 7 * 0.6e-6 + 6 * c / r + 2 * c / m;
  EXPECT_NEAR(sim.makespan.value, expected, 1e-12);
  EXPECT_NEAR(sim.ops[0].start.value, cost.per_op.value, 1e-15);  // its data starts after per_op
  EXPECT_NEAR(model::estimate(s, model::TransferSet{}, model::Inventory{}, two_nodes(), cost).time.value, expected, 1e-12);
  // A finer chunk only shortens the fills: c = 64 KiB.
  const auto fine = sim::simulate_schedule(hand_chains({ring}, {64 << 20}, 64 << 10), two_nodes(), cost);
  EXPECT_NEAR(fine.makespan.value, cost.per_op.value + M / r + 7 * 0.6e-6 + 6 * 65536.0 / r + 2 * 65536.0 / m, 1e-12);
}

TEST(ChainSim, TwoRingsSharingALinkShareItMaxMin) {
  // Ring A: 0 -> 1 -> 2 -> 3 carries M; ring B: 4 -> 5 -> 2 -> 6 carries 3M (node 0, NVLink). Both
  // reach GPU 2 over the fabric: the link nvswitch -> gpu2 carries both, every other link one ring.
  // Max-min: both rings run at r / 2 until A is sent at 2M / r; B, M of its 3M sent, then runs alone
  // at r and is sent at 2M / r + 2M / r = 4M / r. Each then adds L = 3 x 0.6 us and its fill 2c / r
  // (depth 3, at its rate alone) and its copy fill cp = 2c / m (m = 2.15 TB/s, model/chain.hpp):
  //     A: per_op + 2M / r + L + 2c / r + cp;   B: per_op + 4M / r + L + 2c / r + cp.
  // The estimate: T_bw = 4M / r (the shared link carries 4M), T_fill = 2c / r, T_latency =
  // per_op + L, so T_pipeline = B's simulated finish.
  const double M = 16 << 20, c = 512 << 10, r = 450e9 * 0.82, L = 3 * 0.6e-6, cp = 2 * c / 2.15e12;
  const auto s = hand_chains({{{0, 1}, {1, 2}, {2, 3}}, {{4, 5}, {5, 2}, {2, 6}}}, {16 << 20, 48 << 20}, 512 << 10);
  const auto cost = model::CostParams::profile_named("links");
  const auto sim = sim::simulate_schedule(s, two_nodes(), cost);
  EXPECT_NEAR(sim.ops[0].finish.value, cost.per_op.value + 2 * M / r + L + 2 * c / r + cp, 1e-12);
  EXPECT_NEAR(sim.ops[1].finish.value, cost.per_op.value + 4 * M / r + L + 2 * c / r + cp, 1e-12);
  EXPECT_NEAR(model::estimate(s, model::TransferSet{}, model::Inventory{}, two_nodes(), cost).time.value,
              sim.makespan.value, 1e-12);
}

TEST(ChainSim, MiddleHopBottleneckSetsTheChainsRate) {
  // Chain 0 -> 1 (NVLink, node 0) -> 9 (network: rail 1 to rail 1, one leaf) -> 10 (NVLink, node
  // 1). The network hop crosses GPU 1's PCIe link to its NIC (64e9 x 0.85 = 54.4e9) and the NIC
  // links (50e9 x 0.94 = 47e9): the middle hop sets the rate of the whole chain, r = 47e9. With L
  // the sum of the three hops' route latencies and depth 3:
  //     T = per_op + M / 47e9 + L + 2 c / 47e9 + 2 c / m   (the copy fill, m = 2.15 TB/s).
  // A plain transfer 0 -> 1 of M bytes released with it shares GPU 0's NVLink port and GPU 1's
  // with the chain: max-min fixes the chain at its bottleneck's 47e9 and gives the transfer the
  // rest of the port, 369e9 - 47e9 = 322e9 (more than an equal share): the chain's time is
  // unchanged, and the transfer ends at per_op + its route latency + M / 322e9 + its copy fill.
  const double M = 256 << 20, c = 512 << 10, r = 47e9, cp = 2 * c / 2.15e12;
  const double L = route_latency(0, 1) + route_latency(1, 9) + route_latency(9, 10);
  auto s = hand_chains({{{0, 1}, {1, 9}, {9, 10}}}, {256 << 20}, 512 << 10);
  const auto cost = model::CostParams::profile_named("links");
  const double expected = cost.per_op.value + M / r + L + 2 * c / r + cp;
  EXPECT_NEAR(sim::simulate_schedule(s, two_nodes(), cost).makespan.value, expected, 1e-12);
  EXPECT_NEAR(model::estimate(s, model::TransferSet{}, model::Inventory{}, two_nodes(), cost).time.value, expected, 1e-12);
  s.buffers.push_back({{}, Bytes{256 << 20}});
  add_op(s, 0, 1, 256 << 20, {}, OpPhase::Direct, 1);
  const auto shared = sim::simulate_schedule(s, two_nodes(), cost);
  EXPECT_NEAR(shared.ops[0].finish.value, expected, 1e-12);
  EXPECT_NEAR(shared.ops[1].finish.value, cost.per_op.value + route_latency(0, 1) + M / (450e9 * 0.82 - r) + cp, 1e-12);
}

TEST(ChainSim, OpsOnOneChainRunInOrder) {
  // Two ops of M on one ring 0 -> 1 -> 2 (node 0), released together: the second leaves the root
  // once the first has been sent (it queues behind it, as a second collective on a communicator),
  // pays its per_op, and is sent M / r later; each ends L + c / r after it was sent:
  //     first:  per_op + M / r + L + c / r + cp;   second: 2 per_op + 2M / r + L + c / r + cp,
  // cp = 2c / m the copy fill of each (m = 2.15 TB/s, model/chain.hpp).
  const double M = 32 << 20, c = 512 << 10, r = 450e9 * 0.82, L = 2 * 0.6e-6, cp = 2 * c / 2.15e12;
  auto s = hand_chains({{{0, 1}, {1, 2}}}, {32 << 20}, 512 << 10);
  s.add_op(s.ops[0], {});
  const auto cost = model::CostParams::profile_named("links");
  const auto sim = sim::simulate_schedule(s, two_nodes(), cost);
  EXPECT_NEAR(sim.ops[0].finish.value, cost.per_op.value + M / r + L + c / r + cp, 1e-12);
  EXPECT_NEAR(sim.ops[1].start.value, cost.per_op.value + M / r + cost.per_op.value, 1e-12);
  EXPECT_NEAR(sim.ops[1].finish.value, 2 * cost.per_op.value + 2 * M / r + L + c / r + cp, 1e-12);
  EXPECT_NEAR(model::estimate(s, model::TransferSet{}, model::Inventory{}, two_nodes(), cost).time.value,
              sim.makespan.value, 1e-12);
}

// Two simulations of one schedule give the same answer, bit for bit: op times, the critical path,
// link statistics and counts (a link one of them left out as redundant has no busy time there).
void expect_same_answer(const sim::ScheduleSimulation& a, const sim::ScheduleSimulation& b) {
  ASSERT_EQ(a.ops.size(), b.ops.size());
  for (std::size_t i = 0; i < a.ops.size(); ++i) {
    EXPECT_EQ(a.ops[i].release.value, b.ops[i].release.value) << "op " << i;
    EXPECT_EQ(a.ops[i].start.value, b.ops[i].start.value) << "op " << i;
    EXPECT_EQ(a.ops[i].finish.value, b.ops[i].finish.value) << "op " << i;
  }
  EXPECT_EQ(a.critical_ops, b.critical_ops);
  EXPECT_EQ(a.makespan.value, b.makespan.value);
  EXPECT_EQ(a.result.simulated_flows, b.result.simulated_flows);
  EXPECT_EQ(a.result.rate_updates, b.result.rate_updates);
  EXPECT_EQ(a.events, b.events);
  EXPECT_EQ(a.op_of_flow, b.op_of_flow);
  EXPECT_EQ(a.join_flows, b.join_flows);
  ASSERT_EQ(a.result.critical_path.size(), b.result.critical_path.size());
  for (std::size_t i = 0; i < a.result.critical_path.size(); ++i) {
    const auto &x = a.result.critical_path[i], &y = b.result.critical_path[i];
    EXPECT_EQ(x.flow_index, y.flow_index) << "step " << i;
    EXPECT_EQ(x.release.value, y.release.value) << "step " << i;
    EXPECT_EQ(x.finish.value, y.finish.value) << "step " << i;
    EXPECT_EQ(x.bottleneck, y.bottleneck) << "step " << i;
  }
  ASSERT_EQ(a.result.links.size(), b.result.links.size());
  for (std::size_t l = 0; l < a.result.links.size(); ++l) {
    EXPECT_EQ(a.result.links[l].bytes.value, b.result.links[l].bytes.value) << "link " << l;
    if (!a.result.links[l].redundant && !b.result.links[l].redundant) {
      EXPECT_EQ(a.result.links[l].busy.value, b.result.links[l].busy.value) << "link " << l;
    }
    EXPECT_EQ(a.result.links[l].utilization, b.result.links[l].utilization) << "link " << l;
  }
}

// Every strategy on the small shipped scenarios, qwen3-8b-colocated and gpu-check-qwen3-8b:
//  - the simulated makespan is never below the planner's lower bound (raw bandwidths, the sim uses
//    efficiency <= 1 of them);
//  - nor below the estimate: the estimate's bandwidth term is the fluid bound of the same capacities
//    and its critical path gives each op its whole route alone, both lower bounds of the simulation,
//    and the overheads are the same;
//  - a dump of the simulated flows replays to the same times bit for bit.
class EveryStrategySimulated : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryStrategySimulated, NeverBelowBoundsAndReplays) {
  for (const char* file : {"small-gqa-megatron-vllm.yaml", "small-dtensor-uneven.yaml", "small-moe-ep.yaml",
                           "qwen3-8b-colocated.yaml", "gpu-check-qwen3-8b.yaml"}) {
    SCOPED_TRACE(file);
    const auto sc = model::load_scenario(kRoot + "/scenarios/" + file);
    const auto ts = model::plan(sc.inventory, sc.source, sc.destination);
    model::StrategyParams p;
    p.strategy = model::strategy_named(GetParam());
    const auto s = model::build_schedule(ts, sc.inventory, sc.source, sc.destination, sc.topology, p);
    const auto lb = model::lower_bound(ts, sc.source, sc.destination, sc.topology);
    for (const char* profile : {"reshard", "nemo_rl"}) {
      SCOPED_TRACE(profile);
      const auto cost = model::CostParams::profile_named(profile);
      const auto pred = model::estimate(s, ts, sc.inventory, sc.topology, cost);
      sim::ScheduleSimOptions options;
      options.overheads = pred.overheads;
      options.keep_flows = true;
      const auto r = sim::simulate_schedule(s, sc.topology, cost, options);
      EXPECT_GE(r.makespan.value, lb.time.value);
      EXPECT_GE(r.makespan.value, fluid_bound(pred) * (1 - 1e-9));
      EXPECT_DOUBLE_EQ(r.makespan.value, r.ops_makespan.value + pred.overheads.value);
      EXPECT_DOUBLE_EQ(sim::simulated_makespan(s, ts, sc.inventory, sc.topology, cost).value, r.makespan.value);

      const auto dump = sim::flow_dump_from_json(sim::flows_to_json(r.network, r.flows, r.result), "dump");
      const auto again = sim::simulate(dump.network, dump.flows);
      ASSERT_EQ(again.timing.size(), r.result.timing.size());
      for (std::size_t i = 0; i < again.timing.size(); ++i) {
        EXPECT_EQ(again.timing[i].finish.value, r.result.timing[i].finish.value) << "flow " << i;
        EXPECT_EQ(dump.recorded[i].finish.value, r.result.timing[i].finish.value) << "flow " << i;
      }
      EXPECT_EQ(again.makespan.value, r.makespan.value);

      // Without keep_flows no flow is built: the quotient is found on the ops (op_quotient.hpp).
      // It is the flows' quotient, numbered the same way, so every answer is the same bit for bit:
      // op times, the critical path, link statistics, counts.
      options.keep_flows = false;
      const auto compact = sim::simulate_schedule(s, sc.topology, cost, options);
      EXPECT_TRUE(compact.flows.empty());
      ASSERT_EQ(compact.ops.size(), r.ops.size());
      for (std::size_t i = 0; i < r.ops.size(); ++i) {
        EXPECT_EQ(compact.ops[i].release.value, r.ops[i].release.value) << "op " << i;
        EXPECT_EQ(compact.ops[i].start.value, r.ops[i].start.value) << "op " << i;
        EXPECT_EQ(compact.ops[i].finish.value, r.ops[i].finish.value) << "op " << i;
      }
      expect_same_answer(compact, r);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Strategies, EveryStrategySimulated, ::testing::ValuesIn(model::strategy_names()));

// The same property on the production-scale scenarios, for every strategy and the tuned schedule
// (what `auto` picks, with and without --simulate): qwen3-235b-h100 (32 DGX H100 nodes),
// deepseek-v3-h100 (64) and kimi-k3-gb200 (2 x 4 608 GB200 GPUs; gather_broadcast there is 264 678
// chain ops over rings of 4 608 GPUs, about 5 s). The simulation never beats the lower bound or the
// estimate's fluid terms, and agrees with the estimate within 15 %.
struct ScenarioStrategy {
  const char* scenario;
  const char* strategy;
};

void PrintTo(const ScenarioStrategy& p, std::ostream* out) { *out << p.scenario << " " << p.strategy; }

class ProductionScenarioSimulated : public ::testing::TestWithParam<ScenarioStrategy> {};

TEST_P(ProductionScenarioSimulated, NeverBelowTheLowerBound) {
  const auto [file, strategy] = GetParam();
  const auto sc = model::load_scenario(kRoot + "/scenarios/" + file);
  const auto ts = model::plan(sc.inventory, sc.source, sc.destination);
  const auto lb = model::lower_bound(ts, sc.source, sc.destination, sc.topology);
  const auto cost = model::CostParams::profile_named("reshard");
  const model::StrategyParams p = model::parse_strategy(strategy);
  const auto s = model::build_schedule(ts, sc.inventory, sc.source, sc.destination, sc.topology, p);
  const auto pred = model::estimate(s, ts, sc.inventory, sc.topology, cost);
  const double simulated = sim::simulated_makespan(s, sc.topology, cost, pred.overheads).value;
  EXPECT_GE(simulated, lb.time.value);
  EXPECT_GE(simulated, fluid_bound(pred) * (1 - 1e-9));
  // One prediction, not two: the simulation (max-min sharing, chains pipelined chunk by chunk) and
  // the estimate agree within 15 % on every strategy (docs/simulator.md has the table).
  EXPECT_LT(std::abs(simulated / pred.time.value - 1), 0.15) << simulated << " vs " << pred.time.value;
}

INSTANTIATE_TEST_SUITE_P(
    Shipped, ProductionScenarioSimulated,
    ::testing::Values(ScenarioStrategy{"qwen3-235b-h100.yaml", "domain_chain"},
                      ScenarioStrategy{"qwen3-235b-h100.yaml", "gather_broadcast"},
                      ScenarioStrategy{"qwen3-235b-h100.yaml", "hybrid"},
                      ScenarioStrategy{"qwen3-235b-h100.yaml", "nemo_rl_reshard"},
                      ScenarioStrategy{"qwen3-235b-h100.yaml", "direct"},
                      ScenarioStrategy{"qwen3-235b-h100.yaml", "domain_grouped"},
                      ScenarioStrategy{"deepseek-v3-h100.yaml", "domain_chain"},
                      ScenarioStrategy{"deepseek-v3-h100.yaml", "gather_broadcast"},
                      ScenarioStrategy{"deepseek-v3-h100.yaml", "hybrid"},
                      ScenarioStrategy{"deepseek-v3-h100.yaml", "nemo_rl_reshard"},
                      ScenarioStrategy{"deepseek-v3-h100.yaml", "direct"},
                      ScenarioStrategy{"deepseek-v3-h100.yaml", "domain_grouped"},
                      ScenarioStrategy{"deepseek-v3-h100.yaml", "hybrid max_chain=2"},
                      ScenarioStrategy{"qwen3-235b-h100.yaml", "hybrid max_chain=2 rail_blind"},
                      ScenarioStrategy{"kimi-k3-gb200.yaml", "domain_chain"},
                      ScenarioStrategy{"kimi-k3-gb200.yaml", "gather_broadcast"},
                      ScenarioStrategy{"kimi-k3-gb200.yaml", "hybrid"},
                      ScenarioStrategy{"kimi-k3-gb200.yaml", "direct"},
                      ScenarioStrategy{"kimi-k3-gb200.yaml", "nemo_rl_reshard"},
                      ScenarioStrategy{"kimi-k3-gb200.yaml", "domain_grouped"},
                      ScenarioStrategy{"kimi-k3-gb200.yaml", "hybrid max_chain=2 relay_ingress rail_blind"}),
    [](const ::testing::TestParamInfo<ScenarioStrategy>& info) {
      std::string n = std::string(info.param.scenario) + "_" + info.param.strategy;
      for (auto& ch : n)
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return n;
    });

// Published nccl-tests ring all-gather runs (params/nccl-tests-published.csv, sources in its header
// and docs/validation.md), simulated as NCCL runs them (model/collective.hpp) with NCCL's latency
// model (profile nccl): busbw within 15 % of every published figure, but for the rows with a known,
// explained gap (docs/validation.md), within 25 %: on 4-16 B200 nodes the runs reach 38-43 GB/s
// per NIC where the fluid model gives every NIC its 47 GB/s; the 10-node H100 run at 134 MB is out
// of line with its own neighbours (above its 268 MB figure). The estimate agrees with the
// simulation (the rings are symmetric).
TEST(Validation, NcclTestsAllGatherBusBandwidth) {
  std::ifstream csv(kRoot + "/params/nccl-tests-published.csv");
  ASSERT_TRUE(csv);
  const auto cost = model::CostParams::profile_named("nccl");
  std::map<std::string, model::Topology> topologies;
  int rows = 0;
  for (std::string line; std::getline(csv, line);) {
    if (line.empty() || line[0] == '#' || line.rfind("source,", 0) == 0) continue;
    std::vector<std::string> cell;
    for (std::size_t at = 0; at <= line.size();) {
      const auto comma = std::min(line.find(',', at), line.size());
      cell.push_back(line.substr(at, comma - at));
      at = comma + 1;
    }
    ASSERT_EQ(cell.size(), 8u) << line;
    const std::string& source = cell[0];
    const std::string& system = cell[1];
    const int gpus = std::stoi(cell[3]) * std::stoi(cell[4]);
    const std::int64_t size = std::stoll(cell[5]);
    const double published = std::stod(cell[7]) * 1e9;
    SCOPED_TRACE(source + " " + std::to_string(gpus) + " GPUs " + std::to_string(size) + " B");
    auto topo = topologies.find(system);
    if (topo == topologies.end())
      topo = topologies.emplace(system, model::Topology::load(kRoot + "/topologies/" + system + "-32n.yaml")).first;
    model::CollectiveSpec spec;
    spec.kind = model::parse_collective(cell[2]);
    for (int g = 0; g < gpus; ++g) spec.gpus.push_back(g);
    spec.size = Bytes{size};
    const auto s = model::collective_schedule(spec, topo->second);
    const double t = sim::simulate_schedule(s, topo->second, cost).makespan.value;
    const double busbw = static_cast<double>(size) / t * model::bus_bandwidth_factor(spec.kind, gpus);
    const bool known_gap = (source == "together-b200" && gpus >= 32 && gpus <= 128) ||
                           (source == "xxrjun-h100-10n" && size == 134216960);
    EXPECT_NEAR(busbw / published, 1.0, known_gap ? 0.25 : 0.15) << busbw / 1e9 << " GB/s simulated";
    EXPECT_NEAR(model::estimate(s, model::TransferSet{}, model::Inventory{}, topo->second, cost).time.value / t, 1.0, 1e-9);
    ++rows;
  }
  EXPECT_EQ(rows, 29);
}

// deepseek-v3-h100 on 64 DGX H100 nodes whose NICs (1600 Gb/s = 200 GB/s) are faster than their
// PCIe host links (64 GB/s): the lower bound is the host links' cut (658 ms, tests/test_lower_bound),
// and the tuner's schedule, simulated, lands within 1.2 x of it (1.18 x).
TEST(ScheduleSim, HostLinkBoundIsApproachedByTheTunedSchedule) {
  const auto dir = std::filesystem::temp_directory_path() / ("reshard-host-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  {
    std::ifstream in(kRoot + "/topologies/dgx-h100-64n.yaml");
    std::ofstream out(dir / "fast.yaml");
    for (std::string line; std::getline(in, line);) {
      out << line << '\n';
      if (line == "  nodes: 64") out << "  nic_speed: 1600Gbps\n";
    }
  }
  model::Scenario scenario = model::Scenario::load(kRoot + "/scenarios/deepseek-v3-h100.yaml");
  scenario.topology_path = dir / "fast.yaml";
  const auto sc = model::load_scenario(scenario);
  std::filesystem::remove_all(dir);
  const auto ts = model::plan(sc.inventory, sc.source, sc.destination);
  const auto lb = model::lower_bound(ts, sc.source, sc.destination, sc.topology);
  EXPECT_NE(lb.binding.where.find("host links"), std::string::npos) << lb.binding.where;
  const auto cost = model::CostParams::profile_named("links");
  const auto best = model::tune(ts, sc.inventory, sc.source, sc.destination, sc.topology, cost).best;
  const auto s = model::build_schedule(ts, sc.inventory, sc.source, sc.destination, sc.topology, best.params);
  const double simulated = sim::simulated_makespan(s, sc.topology, cost, best.prediction.overheads).value;
  EXPECT_GE(simulated, lb.time.value);
  EXPECT_LE(simulated, 1.2 * lb.time.value) << model::describe(best.params);
}

// NVIDIA's published DGX H100 refit times (params/nemo_rl-published.csv): the nemo_rl profile's
// *simulated* times land within 25 % of each (its fit is within 21.3 %, in-sample), as its estimates
// do (test_calibrate).
TEST(ScheduleSim, NemoRlProfileSimulatesThePublishedRefitTimes) {
  std::ifstream csv(kRoot + "/params/nemo_rl-published.csv");
  ASSERT_TRUE(csv);
  const auto cost = model::CostParams::profile_named("nemo_rl");
  int rows = 0;
  for (std::string line; std::getline(csv, line);) {
    if (line.empty() || line[0] == '#' || line.rfind("scenario,", 0) == 0) continue;
    const auto c1 = line.find(','), c2 = line.find(',', c1 + 1);
    const std::string scenario = line.substr(0, c1), strategy = line.substr(c1 + 1, c2 - c1 - 1);
    const double measured = std::stod(line.substr(c2 + 1));
    SCOPED_TRACE(scenario + " " + strategy);
    const auto sc = model::load_scenario(kRoot + "/params/" + scenario);
    const auto ts = model::plan(sc.inventory, sc.source, sc.destination);
    const auto s = model::build_schedule(ts, sc.inventory, sc.source, sc.destination, sc.topology,
                                         model::parse_strategy(strategy));
    const auto pred = model::estimate(s, ts, sc.inventory, sc.topology, cost);
    const double simulated = sim::simulated_makespan(s, sc.topology, cost, pred.overheads).value;
    EXPECT_NEAR(simulated / measured, 1.0, 0.25) << simulated << " s simulated, " << measured << " s measured";
    EXPECT_NEAR(simulated / pred.time.value, 1.0, 0.05) << simulated << " s simulated, " << pred.time.value << " s estimated";
    ++rows;
  }
  EXPECT_EQ(rows, 4);
}

// The quotient found on the ops is the flows' quotient at production scale too: the same answer,
// bit for bit, as the flow-level refinement of the kept flows (flow_quotient.hpp), with the quotient
// paying in both. The schedules are built within the scenarios' staging budgets, as compare builds
// them (a step barrier per GPU breaks the symmetry of some unbudgeted ones, whose gathers share
// holders unevenly: the quotient then stops paying and every flow is simulated).
TEST(ScheduleSim, OpQuotientIsTheFlowQuotient) {
  for (const auto& [file, strategy] : {ScenarioStrategy{"deepseek-v3-h100.yaml", "gather_broadcast"},
                                       ScenarioStrategy{"qwen3-235b-h100.yaml", "direct"}}) {
    SCOPED_TRACE(std::string(file) + " " + strategy);
    const auto sc = model::load_scenario(kRoot + "/scenarios/" + file);
    const auto ts = model::plan(sc.inventory, sc.source, sc.destination);
    const auto s = model::build_schedule(ts, sc.inventory, sc.source, sc.destination, sc.topology,
                                         model::parse_strategy(strategy), model::staging_budgets(sc));
    const auto cost = model::CostParams::profile_named("reshard");
    sim::ScheduleSimOptions options;
    options.overheads = model::estimate(s, ts, sc.inventory, sc.topology, cost).overheads;
    options.link_kind_timeline = true;  // link groups take part in the refinement, and the timeline must match
    const auto on_ops = sim::simulate_schedule(s, sc.topology, cost, options);
    options.keep_flows = true;
    const auto on_flows = sim::simulate_schedule(s, sc.topology, cost, options);
    EXPECT_LT(on_ops.result.simulated_flows * 2, static_cast<std::int64_t>(on_ops.flow_count()));
    expect_same_answer(on_ops, on_flows);
    const auto &a = on_ops.result.group_timeline, &b = on_flows.result.group_timeline;
    ASSERT_EQ(a.size(), b.size());
    ASSERT_FALSE(a.empty());
    for (std::size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].time.value, b[i].time.value) << "sample " << i;
      EXPECT_EQ(a[i].group, b[i].group) << "sample " << i;
      EXPECT_EQ(a[i].rate.value, b[i].rate.value) << "sample " << i;
    }
  }
}

// The quotient found on ops (sim/src/op_quotient.hpp) with chains' data flows: paths that list a
// link twice. A random op problem is replicated on its own links (all copies also crossing shared
// links), so the quotient pays; its flows are written out as simulate_schedule writes them
// (sub-flows per path, a join flow made when the first successor needs it, the overhead flow
// last), and the op quotient's answer must be the flow quotient's bit for bit, and the plain
// engine's to 1e-9.
// Stays whole: one randomised property, its generator and its three-way comparison in one place.
TEST(ScheduleSim, OpQuotientOfChainsIsTheFlowQuotient) {
  std::mt19937_64 rng(1618);
  for (int trial = 0; trial < 30; ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial));
    const int own = 3 + static_cast<int>(rng() % 4), shared = 1 + static_cast<int>(rng() % 2);
    const int copies = 3 + static_cast<int>(rng() % 3);  // 2 copies and the overhead flow: more cells than half the flows
    sim::FlowNetwork net;
    std::vector<double> own_caps;
    for (int l = 0; l < own; ++l) own_caps.push_back(10.0 + static_cast<double>(rng() % 90));
    for (int k = 0; k < copies; ++k)
      for (double c : own_caps) net.capacity.push_back(model::BytesPerSecond{c});
    for (int l = 0; l < shared; ++l) net.capacity.push_back(model::BytesPerSecond{20.0 + static_cast<double>(rng() % 200)});
    // Base routes: 1-3 paths, each a few own links (some twice) and maybe a shared link.
    struct BaseRoute {
      std::vector<std::vector<std::int32_t>> own_paths, shared_paths;
    };
    std::vector<BaseRoute> base_routes(2 + rng() % 3);
    for (auto& r : base_routes) {
      const int paths = 1 + static_cast<int>(rng() % 3);
      for (int p = 0; p < paths; ++p) {
        std::vector<std::int32_t> o, sh;
        for (int l = 0; l < own; ++l)
          if (rng() % 3 == 0) o.push_back(l);
        if (o.empty()) o.push_back(static_cast<std::int32_t>(rng() % own));
        if (rng() % 2 == 0) o.push_back(o[rng() % o.size()]);  // a fan-out: the link twice
        if (rng() % 2 == 0) sh.push_back(static_cast<std::int32_t>(rng() % shared));
        r.own_paths.push_back(o);
        r.shared_paths.push_back(sh);
      }
    }
    struct BaseOp {
      std::int32_t route;
      double share, latency;
      std::vector<std::int32_t> after;
    };
    std::vector<BaseOp> base_ops;
    const int n = 3 + static_cast<int>(rng() % 10);
    for (int i = 0; i < n; ++i) {
      BaseOp b{static_cast<std::int32_t>(rng() % base_routes.size()), 100.0 * static_cast<double>(1 + rng() % 3),
               static_cast<double>(rng() % 2), {}};
      if (i > 0 && rng() % 2 == 0) b.after.push_back(static_cast<std::int32_t>(rng() % i));
      base_ops.push_back(b);
    }
    // The op problem: route (copy k, base route r) is k * routes + r; op (copy k, base op i) is
    // op k * n + i, so every op waits only for earlier ones.
    sim::OpProblem ops;
    const auto nr = static_cast<std::int32_t>(base_routes.size());
    for (int k = 0; k < copies; ++k)
      for (const auto& r : base_routes) {
        for (std::size_t p = 0; p < r.own_paths.size(); ++p) {
          for (auto l : r.own_paths[p]) ops.path_links.push_back(k * own + l);
          for (auto l : r.shared_paths[p]) ops.path_links.push_back(copies * own + l);
          ops.path_link_begin.push_back(static_cast<std::int64_t>(ops.path_links.size()));
        }
        ops.route_path_begin.push_back(static_cast<std::int32_t>(ops.path_link_begin.size() - 1));
      }
    for (int k = 0; k < copies; ++k)
      for (const auto& b : base_ops) {
        ops.route.push_back(k * nr + b.route);
        ops.share.push_back(model::ByteAmount{b.share});
        ops.latency.push_back(Seconds{b.latency});
        for (auto a : b.after) ops.after.push_back(k * n + a);
        ops.after_begin.push_back(static_cast<std::int64_t>(ops.after.size()));
      }
    ops.overheads = Seconds{0.5};
    // The same problem as flows, in simulate_schedule's order.
    std::vector<sim::FlowSpec> flows;
    const std::size_t n_ops = ops.ops();
    std::vector<std::int64_t> first_flow(n_ops), join_of(n_ops, -1);
    std::vector<char> has_successor(n_ops, 0);
    for (std::size_t i = 0; i < n_ops; ++i) {
      std::vector<std::int64_t> after;
      for (auto k = ops.after_begin[i]; k < ops.after_begin[i + 1]; ++k) {
        const auto a = static_cast<std::size_t>(ops.after[k]);
        has_successor[a] = 1;
        if (ops.sub_flows(a) == 1) {
          after.push_back(first_flow[a]);
          continue;
        }
        if (join_of[a] < 0) {
          join_of[a] = static_cast<std::int64_t>(flows.size());
          sim::FlowSpec j;
          j.id = join_of[a];
          for (std::int32_t p = 0; p < ops.sub_flows(a); ++p) j.after.push_back(first_flow[a] + p);
          flows.push_back(j);
        }
        after.push_back(join_of[a]);
      }
      first_flow[i] = static_cast<std::int64_t>(flows.size());
      for (auto p = ops.route_path_begin[ops.route[i]]; p < ops.route_path_begin[ops.route[i] + 1]; ++p) {
        sim::FlowSpec f;
        f.id = static_cast<std::int64_t>(flows.size());
        f.bytes = ops.share[i];
        f.latency = ops.latency[i];
        f.links.assign(ops.path_links.begin() + ops.path_link_begin[p], ops.path_links.begin() + ops.path_link_begin[p + 1]);
        f.after = after;
        flows.push_back(f);
      }
    }
    sim::FlowSpec overhead;
    overhead.id = static_cast<std::int64_t>(flows.size());
    overhead.latency = ops.overheads;
    for (std::size_t i = 0; i < n_ops; ++i)
      if (!has_successor[i])
        for (std::int32_t p = 0; p < ops.sub_flows(i); ++p) overhead.after.push_back(first_flow[i] + p);
    flows.push_back(overhead);

    sim::ScheduleSimulation on_ops;
    ASSERT_EQ(sim::simulate_op_quotient(net, ops, {}, flows.size(), on_ops), sim::OpQuotientOutcome::simulated);
    const auto on_flows = sim::simulate(net, flows);
    sim::SimOptions plain_options;
    plain_options.symmetry_quotient = false;
    const auto plain = sim::simulate(net, flows, plain_options);
    EXPECT_EQ(on_ops.result.simulated_flows, on_flows.simulated_flows);
    // At most one cell per flow of a copy, and the overhead flow's.
    EXPECT_LE((on_ops.result.simulated_flows - 1) * copies, static_cast<std::int64_t>(flows.size()) - 1);
    EXPECT_EQ(on_ops.result.makespan.value, on_flows.makespan.value);
    EXPECT_NEAR(on_ops.result.makespan.value, plain.makespan.value, 1e-9 * plain.makespan.value);
    for (std::size_t i = 0; i < n_ops; ++i) {
      double finish = 0;
      for (std::int32_t p = 0; p < ops.sub_flows(i); ++p)
        finish = std::max(finish, on_flows.timing[static_cast<std::size_t>(first_flow[i] + p)].finish.value);
      EXPECT_EQ(on_ops.ops[i].finish.value, finish) << "op " << i;
      EXPECT_EQ(on_ops.ops[i].start.value, on_flows.timing[static_cast<std::size_t>(first_flow[i])].start.value) << "op " << i;
      double plain_finish = 0;
      for (std::int32_t p = 0; p < ops.sub_flows(i); ++p)
        plain_finish = std::max(plain_finish, plain.timing[static_cast<std::size_t>(first_flow[i] + p)].finish.value);
      EXPECT_NEAR(on_ops.ops[i].finish.value, plain_finish, 1e-9 * plain_finish) << "op " << i;
    }
    ASSERT_EQ(on_ops.result.critical_path.size(), on_flows.critical_path.size());
    for (std::size_t k = 0; k < on_flows.critical_path.size(); ++k) {
      EXPECT_EQ(on_ops.result.critical_path[k].flow_index, on_flows.critical_path[k].flow_index) << "step " << k;
      EXPECT_EQ(on_ops.result.critical_path[k].bottleneck, on_flows.critical_path[k].bottleneck) << "step " << k;
    }
    for (std::size_t l = 0; l < net.capacity.size(); ++l) {
      EXPECT_EQ(on_ops.result.links[l].bytes.value, on_flows.links[l].bytes.value) << "link " << l;
      EXPECT_EQ(on_ops.result.links[l].busy.value, on_flows.links[l].busy.value) << "link " << l;
    }
  }
}

TEST(ScheduleSim, ChainOpsPipelineTheFanOutAsTheEstimateSays) {
  // qwen3-8b-colocated (dgx-h100-2n): every stripe is one chain op, holder -> ingress -> NVLink
  // fan-out, pipelined in 512 KiB chunks. The network ingress saturates the NICs for the whole
  // bandwidth-bound phase and the fan-out follows chunk by chunk, so the last stripe ends one
  // tail (its chain's latency and fill) after the bandwidth term, as the estimate says:
  // simulation and estimate agree (within 0.1 %), and the op that ends last is a chain op.
  const auto sc = model::load_scenario(kRoot + "/scenarios/qwen3-8b-colocated.yaml");
  const auto ts = model::plan(sc.inventory, sc.source, sc.destination);
  const auto cost = model::CostParams::profile_named("reshard");
  for (const char* strategy : {"domain_grouped", "domain_chain"}) {
    SCOPED_TRACE(strategy);
    model::StrategyParams p;
    p.strategy = model::strategy_named(strategy);
    const auto s = model::build_schedule(ts, sc.inventory, sc.source, sc.destination, sc.topology, p);
    const auto pred = model::estimate(s, ts, sc.inventory, sc.topology, cost);
    sim::ScheduleSimOptions options;
    options.overheads = pred.overheads;
    const auto r = sim::simulate_schedule(s, sc.topology, cost, options);
    EXPECT_TRUE(r.flows.empty());  // not kept unless asked (ScheduleSimOptions::keep_flows)
    EXPECT_EQ(r.flow_count(), r.op_of_flow.size());
    ASSERT_GE(r.critical_ops.size(), 1u);
    EXPECT_GE(s.ops[r.critical_ops[0]].chain, 0);
    EXPECT_NEAR(r.makespan.value / pred.time.value, 1.0, 1e-3);
    EXPECT_GE(r.makespan.value, fluid_bound(pred) * (1 - 1e-9));
  }
}

TEST(SimulateScheduleCli, ScenarioModeJson) {
  int status = 0;
  const auto out = run_cli("simulate " + kRoot + "/scenarios/small-moe-ep.yaml --strategy domain_grouped --json", &status);
  ASSERT_EQ(status, 0) << out;
  const auto j = nlohmann::json::parse(out);
  for (const char* key : {"simulated_s", "operations", "events", "wall_s", "estimate_s", "lower_bound_s",
                          "simulated_flows", "capacity_jitter", "wall_build_s", "wall_classes_s", "wall_event_loop_s"})
    EXPECT_TRUE(j.contains(key)) << key;
  // The wall time's split: parts of it, each measured.
  for (const char* part : {"wall_build_s", "wall_classes_s", "wall_event_loop_s"})
    EXPECT_GE(j[part].get<double>(), 0.0) << part;
  EXPECT_LE(j["wall_build_s"].get<double>() + j["wall_classes_s"].get<double>() + j["wall_event_loop_s"].get<double>(),
            j["wall_s"].get<double>());
  EXPECT_GE(j["simulated_s"].get<double>(), j["lower_bound_s"].get<double>());
  EXPECT_LE(j["simulated_flows"].get<std::int64_t>(), j["flows"].get<std::int64_t>());
  // Every flow simulated, without the quotient: the same makespan (to rounding).
  const auto plain = nlohmann::json::parse(run_cli(
      "simulate " + kRoot + "/scenarios/small-moe-ep.yaml --strategy domain_grouped --json --no-symmetry", &status));
  EXPECT_EQ(plain["simulated_flows"], plain["flows"]);
  EXPECT_NEAR(plain["simulated_s"].get<double>(), j["simulated_s"].get<double>(), 1e-12 * j["simulated_s"].get<double>());
}

TEST(SimulateScheduleCli, ScheduleFileModeMatchesScenarioModeAndRefusesAnotherPlan) {
  const auto sc = model::load_scenario(kRoot + "/scenarios/small-gqa-megatron-vllm.yaml");
  const auto ts = model::plan(sc.inventory, sc.source, sc.destination);
  model::StrategyParams p;
  p.strategy = model::Strategy::Hybrid;
  const auto s = model::build_schedule(ts, sc.inventory, sc.source, sc.destination, sc.topology, p);
  const auto file = std::filesystem::temp_directory_path() / "reshard_test_sim_schedule.json";
  const auto dump = std::filesystem::temp_directory_path() / "reshard_test_sim_schedule_dump.json";
  const auto trace = std::filesystem::temp_directory_path() / "reshard_test_sim_schedule_trace.json";
  std::ofstream(file) << model::to_json(s).dump();
  int status = 0;
  const auto out = run_cli("simulate " + file.string() + " --scenario " + kRoot +
                               "/scenarios/small-gqa-megatron-vllm.yaml --json --dump-flows " + dump.string() +
                               " --trace " + trace.string(),
                           &status);
  ASSERT_EQ(status, 0) << out;
  const auto j = nlohmann::json::parse(out);
  const double expected = sim::simulated_makespan(s, ts, sc.inventory, sc.topology, model::CostParams::profile_named("reshard")).value;
  EXPECT_DOUBLE_EQ(j["simulated_s"].get<double>(), expected);
  EXPECT_EQ(j["operations"].get<std::size_t>(), s.ops.size());
  // The dump holds every flow; its last finish is the makespan.
  const auto d = sim::read_flow_dump(dump);
  double last = 0;
  for (const auto& t : d.recorded) last = std::max(last, t.finish.value);
  EXPECT_DOUBLE_EQ(last, expected);
  // The trace is one JSON object with complete events on GPU tracks.
  const auto tr = nlohmann::json::parse(std::ifstream(trace));
  EXPECT_GT(tr["traceEvents"].size(), s.ops.size());

  // The binary file `plan -o` writes for any name but *.json (docs/schedule-format.md): the same
  // simulation.
  const auto bin = std::filesystem::temp_directory_path() / "reshard_test_sim_schedule.rsched";
  const auto planned = run_cli("plan " + kRoot + "/scenarios/small-gqa-megatron-vllm.yaml --strategy hybrid -o " + bin.string(), &status);
  ASSERT_EQ(status, 0) << planned;
  const auto from_bin = run_cli("simulate " + bin.string() + " --scenario " + kRoot + "/scenarios/small-gqa-megatron-vllm.yaml --json", &status);
  ASSERT_EQ(status, 0) << from_bin;
  EXPECT_DOUBLE_EQ(nlohmann::json::parse(from_bin)["simulated_s"].get<double>(), expected);
  std::filesystem::remove(bin);

  // The same schedule against a scenario with another plan is refused, naming the file and key.
  const auto bad = run_cli("simulate " + file.string() + " --scenario " + kRoot + "/scenarios/small-moe-ep.yaml", &status);
  EXPECT_NE(status, 0);
  EXPECT_NE(bad.find(file.string()), std::string::npos) << bad;
  EXPECT_NE(bad.find("piece_count"), std::string::npos) << bad;
  std::filesystem::remove(file);
  std::filesystem::remove(dump);
  std::filesystem::remove(trace);
}
