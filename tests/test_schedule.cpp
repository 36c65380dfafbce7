// Schedules: every strategy's schedule passes the validator on the small shipped scenarios, a
// broken schedule is rejected naming the piece, JSON round-trips, and hand-worked estimates.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "reshard/model/cost.hpp"
#include "reshard/model/errors.hpp"
#include "reshard/model/scenario.hpp"
#include "reshard/model/schedule.hpp"

using namespace reshard::model;

namespace {
const std::string kRoot = RESHARD_SOURCE_DIR;
}

class EveryStrategy : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryStrategy, ValidOnSmallScenarios) {
  for (const char* file : {"small-gqa-megatron-vllm.yaml", "small-dtensor-uneven.yaml", "small-moe-ep.yaml",
                           "qwen3-8b-colocated.yaml"}) {
    SCOPED_TRACE(file);
    const auto sc = load_scenario(kRoot + "/scenarios/" + file);
    const auto ts = plan(sc.inventory, sc.source, sc.destination);
    StrategyParams p;
    p.strategy = GetParam();
    const auto s = build_schedule(ts, sc.inventory, sc.source, sc.destination, sc.topology, p);
    EXPECT_NO_THROW(validate(s, ts, sc.inventory, sc.source, sc.destination));
    // The JSON round trip is lossless: the replayed schedule validates and serialises identically.
    const auto back = schedule_from_json(to_json(s));
    EXPECT_EQ(to_json(back), to_json(s));
    // No strategy beats the lower bound.
    const auto lb = lower_bound(ts, sc.source, sc.destination, sc.topology);
    const auto pred = estimate(s, ts, sc.inventory, sc.topology, CostParams::profile_named("reshard"));
    EXPECT_GE(pred.time.value, lb.time.value * (1 - 1e-9));
  }
}

INSTANTIATE_TEST_SUITE_P(Strategies, EveryStrategy, ::testing::ValuesIn(strategy_names()));

TEST(Schedule, BrokenScheduleIsRejectedNamingThePiece) {
  const auto sc = load_scenario(kRoot + "/scenarios/small-gqa-megatron-vllm.yaml");
  const auto ts = plan(sc.inventory, sc.source, sc.destination);
  StrategyParams p;
  p.strategy = "domain_grouped";
  auto s = build_schedule(ts, sc.inventory, sc.source, sc.destination, sc.topology, p);
  // Drop one operation's delivery: redirect it to its own sender.
  auto broken = s;
  broken.ops.back().dst = broken.ops.back().src;
  try {
    validate(broken, ts, sc.inventory, sc.source, sc.destination);
    FAIL() << "accepted";
  } catch (const ScheduleError& e) {
    EXPECT_NE(std::string(e.what()).find("piece"), std::string::npos) << e.what();
  }
  // Forwarding before receiving: a fan-out that no longer waits for its ingress.
  auto early = s;
  for (auto& op : early.ops)
    if (op.phase == OpPhase::FanOut && !op.after.empty()) {
      op.after.clear();
      break;
    }
  EXPECT_THROW(validate(early, ts, sc.inventory, sc.source, sc.destination), ScheduleError);
  // An operation whose byte count disagrees with the part it carries.
  auto miscounted = s;
  miscounted.ops.front().bytes += Bytes{1};
  try {
    validate(miscounted, ts, sc.inventory, sc.source, sc.destination);
    FAIL() << "accepted";
  } catch (const ScheduleError& e) {
    EXPECT_NE(std::string(e.what()).find("bytes"), std::string::npos) << e.what();
  }
}

TEST(Estimate, HandWorkedTwoDomains) {
  // One piece: 1 GiB held on GPU 0 (node 0), needed by GPUs 8..15 (node 1) on dgx-h100-2n.
  // direct:          8 transfers over the network; GPU 0's NIC egress (50 GB/s x 0.94) carries
  //                  8 GiB -> 8 * 2^30 / 47e9 = 0.1828 s.
  // domain_grouped:  the piece crosses the network once, cut into 8 stripes (one per needer of the
  //                  destination domain), stripe s entering at GPU 8+s and fanned out over NVLink
  //                  to the 7 others. GPU 0's NIC still carries all B bytes: bandwidth bound
  //                  B / 47e9 (the NVLink egress of each ingress GPU carries 7B/8 at 369e9: less).
  //                  Network bytes B, NVLink bytes 7B. Critical path: with 4 parts per stripe sent
  //                  in order over the network hop, the last part (B/32 each) arrives after
  //                  4 x B/32/47e9, then its NVLink hop: 4 x B/32/47e9 + B/32/369e9 (+ route
  //                  latencies and per-op overheads, tens of microseconds over 4 serial parts).
  //                  Estimate: the bandwidth bound plus the latency path, the 4 network parts in
  //                  order then one NVLink fan-out: 4 (lat_net + per_op) + (lat_nvl + per_op).
  const auto topo = Topology::load(kRoot + "/topologies/dgx-h100-2n.yaml");
  const auto inv = Inventory::parse(R"(name: one
architecture: qwen3
hidden_size: 32768
num_hidden_layers: 1
num_attention_heads: 1
num_key_value_heads: 1
head_dim: 8
intermediate_size: 16384
vocab_size: 8
tie_word_embeddings: true
)", "one.yaml");
  // Source dtensor on GPU 0 only; destination replicated on GPUs 8..15.
  DTensorSpec one{{1}, {"x"}, {{"default", {Placement{}}}}};
  DTensorSpec eight{{8}, {"x"}, {{"default", {Placement{}}}}};
  const auto src = build_shard_map(inv, LayoutSpec{one, {0}});
  const auto dst = build_shard_map(inv, LayoutSpec{eight, {8, 9, 10, 11, 12, 13, 14, 15}});
  const auto ts = plan(inv, src, dst);
  const auto cost = CostParams::profile_named("reshard");
  StrategyParams p;
  p.strategy = "direct";
  p.chunks = 1;
  const auto direct = estimate(build_schedule(ts, inv, src, dst, topo, p), ts, inv, topo, cost);
  const double model_bytes = static_cast<double>(inv.bytes().value);
  EXPECT_NEAR(direct.bandwidth_bound.value, 8 * model_bytes / 47e9, 1e-6);
  p.strategy = "domain_grouped";
  p.chunks = 4;
  const auto grouped = estimate(build_schedule(ts, inv, src, dst, topo, p), ts, inv, topo, cost);
  EXPECT_NEAR(grouped.bandwidth_bound.value, model_bytes / 47e9, 1e-6);
  EXPECT_EQ(grouped.network_bytes.value, inv.bytes().value);
  EXPECT_EQ(grouped.nvlink_bytes.value, 7 * inv.bytes().value);
  const double net = 4 * model_bytes / 32 / 47e9, nvl = model_bytes / 32 / (450e9 * 0.82);
  EXPECT_NEAR(grouped.critical_path.value, net + nvl, 60e-6);
  // The longest latency path is the stripe whose ingress is farthest from GPU 0 (another rail:
  // through a spine, 2 x 0.15 us more than GPU 8 on GPU 0's rail).
  double slowest_ingress = 0;
  for (GpuId g = 8; g < 16; ++g) slowest_ingress = std::max(slowest_ingress, topo.route(0, g).latency.value);
  EXPECT_NEAR(slowest_ingress - topo.route(0, 8).latency.value, 0.3e-6, 1e-12);
  const double latency_path = 4 * (slowest_ingress + cost.per_op.value) + topo.route(8, 9).latency.value + cost.per_op.value;
  EXPECT_NEAR(grouped.latency_path.value, latency_path, 1e-12);
  EXPECT_NEAR(grouped.time.value, model_bytes / 47e9 + latency_path, 1e-9);
  EXPECT_LT(grouped.time, direct.time);
}

TEST(Estimate, HandWorkedBroadcastRing) {
  // gather_broadcast of one replicated model (B bytes) held on GPU 0 (node 0) to GPUs 8 and 9
  // (node 1) of dgx-h100-2n, in one bucket cut into 4 parts (chunks 4 >= 2 rings). Part c travels
  // its own ring: 0 -> 8 -> 9 for even c, 0 -> 9 -> 8 for odd c (each ring enters the domain on
  // another GPU and rail). So:
  //   network: GPU 0's NIC sends all 4 parts: B bytes at 50e9 x 0.94 -> T_bw = B / 47e9;
  //            GPU 8's and 9's NICs each receive 2 parts (B/2);
  //   NVLink:  each part makes one NVLink hop: B bytes in all;
  //   critical path: one part, B/4 over the network, and the NVLink hop cuts through: it starts
  //            when the first 512 KiB chunk has arrived and ends one chunk after the network hop,
  //            so lat_net + per_op + B/4/47e9 + 512 KiB/369e9 (the NVLink hop's own B/4/369e9
  //            after the first chunk is shorter) < T_bw;
  //   latency path: one network hop then one NVLink hop, each with its route latency and per_op
  //            (the longer of the two rings);
  //   so the estimate is T_bw + latency path.
  const auto topo = Topology::load(kRoot + "/topologies/dgx-h100-2n.yaml");
  const auto inv = Inventory::parse(R"(name: ring
architecture: qwen3
hidden_size: 4096
num_hidden_layers: 1
num_attention_heads: 32
num_key_value_heads: 8
head_dim: 128
intermediate_size: 12288
vocab_size: 1024
tie_word_embeddings: true
)", "ring.yaml");
  DTensorSpec one{{1}, {"x"}, {{"default", {Placement{}}}}};
  DTensorSpec two{{2}, {"x"}, {{"default", {Placement{}}}}};
  const auto src = build_shard_map(inv, LayoutSpec{one, {0}});
  const auto dst = build_shard_map(inv, LayoutSpec{two, {8, 9}});
  const auto ts = plan(inv, src, dst);
  StrategyParams p;
  p.strategy = "gather_broadcast";
  p.chunks = 4;
  p.bucket = Bytes{1LL << 40};
  const auto s = build_schedule(ts, inv, src, dst, topo, p);
  EXPECT_NO_THROW(validate(s, ts, inv, src, dst));
  ASSERT_EQ(s.ops.size(), 8u);  // 4 parts x 2 hops
  const double B = static_cast<double>(inv.bytes().value);
  const auto pr = estimate(s, ts, inv, topo, CostParams::profile_named("reshard"));
  EXPECT_EQ(pr.network_bytes.value, inv.bytes().value);
  EXPECT_EQ(pr.nvlink_bytes.value, inv.bytes().value);
  EXPECT_NEAR(pr.bandwidth_bound.value, B / 47e9, 1e-9);
  const double chunk = 512 << 10;
  const double network_hop = std::max(topo.route(0, 8).latency.value, topo.route(0, 9).latency.value) + 2.4e-6;
  EXPECT_NEAR(pr.critical_path.value, network_hop + B / 4 / 47e9 + chunk / (450e9 * 0.82), 0.1e-6);
  const auto cost = CostParams::profile_named("reshard");
  // Odd parts enter at GPU 9, on another rail than GPU 0 (through a spine): the longer path.
  const double hops = std::max(topo.route(0, 8).latency.value + topo.route(8, 9).latency.value,
                               topo.route(0, 9).latency.value + topo.route(9, 8).latency.value) +
                      2 * cost.per_op.value;
  EXPECT_NEAR(pr.latency_path.value, hops, 1e-12);
  EXPECT_NEAR(pr.time.value, B / 47e9 + hops, 1e-9);
  EXPECT_EQ(pr.broadcast_buckets, 1);
}

TEST(StrategySpec, DescribeAndParseRoundTripAndBadTokensAreNamed) {
  // What the tuner prints is what every command reads back.
  for (const char* spec : {"direct", "domain_grouped chunks=1 relay_ingress", "domain_chain chunks=16 max_chain=2",
                           "hybrid chunks=8 max_chain=4 relay_ingress relay_egress rail_blind",
                           "gather_broadcast chunks=4 bucket=1600000000", "nemo_rl_reshard chunks=16 bucket=5000000000"})
    EXPECT_EQ(describe(parse_strategy(spec)), spec);
  const StrategyParams p = parse_strategy("domain_chain max_chain=2 relay_egress");
  EXPECT_EQ(p.chunks, 4);  // defaults for what the line leaves out
  EXPECT_EQ(p.max_chain, 2);
  EXPECT_TRUE(p.relay_egress);
  EXPECT_FALSE(p.relay_ingress);
  EXPECT_EQ(parse_strategy("direct").chunks, 1);
  auto error_of = [](const std::string& spec) {
    try {
      parse_strategy(spec);
    } catch (const PlanError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(error_of("domain_chain chunks=0").find("'chunks=0' needs a positive integer"), std::string::npos);
  EXPECT_NE(error_of("domain_chain chunks=4x").find("'chunks=4x'"), std::string::npos);
  EXPECT_NE(error_of("domain_chain depth=2").find("unknown parameter 'depth'"), std::string::npos);
  EXPECT_NE(error_of("domain_chain relay").find("unknown flag 'relay'"), std::string::npos);
  EXPECT_NE(error_of("  ").find("empty strategy"), std::string::npos);
}
