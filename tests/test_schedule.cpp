// Schedules: every strategy's schedule passes the validator on the small shipped scenarios, a
// broken schedule is rejected naming the piece, JSON round-trips, and hand-worked estimates.
#include <gtest/gtest.h>

#include <fstream>
#include <limits>
#include <set>
#include <nlohmann/json.hpp>

#include "reshard/model/cost.hpp"
#include "reshard/model/errors.hpp"
#include "reshard/model/scenario.hpp"
#include "reshard/model/schedule.hpp"
#include "reshard/model/strategies.hpp"

using namespace reshard::model;

namespace {
const std::string kRoot = RESHARD_SOURCE_DIR;
// dgx-h100-2n with one spine: a leaf-spine link (2 nodes x 50 GB/s) is wider than a NIC, so a chain
// hop pinned to its one path across the spine is limited by the NICs (model/chain.hpp).
// A one-layer dense model of about 100 MB (bf16), replicated whole by the ring tests.
Inventory ring_model() {
  return Inventory::parse(R"(name: ring
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
}
// A one-layer dense model of about 3.2 GB (bf16), mostly its three 32768 x 16384 MLP weights.
Inventory one_layer_model() {
  return Inventory::parse(R"(name: one
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
}
Topology two_nodes_one_spine() {
  return Topology::parse(R"(name: dgx-h100-2n-1spine
cluster:
  template: dgx-h100
  nodes: 2
fabric:
  rail_optimized: true
  nodes_per_leaf: 32
  spines: 1
latency:
  nvlink: 0.3us
  pcie: 0.25us
  nic_leaf: 1us
  leaf_spine: 0.15us
)", "two-nodes.yaml");
}
}

class EveryStrategy : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryStrategy, ValidOnSmallScenarios) {
  for (const char* file : {"small-gqa-megatron-vllm.yaml", "small-dtensor-uneven.yaml", "small-moe-ep.yaml",
                           "qwen3-8b-colocated.yaml"}) {
    SCOPED_TRACE(file);
    const auto sc = load_scenario(kRoot + "/scenarios/" + file);
    const auto ts = plan(sc.inventory, sc.source, sc.destination);
    StrategyParams p;
    p.strategy = strategy_named(GetParam());
    const auto s = build_schedule(ts, sc.inventory, sc.source, sc.destination, sc.topology, p);
    EXPECT_NO_THROW(validate(s, ts, sc.inventory, sc.source, sc.destination));
    // The ops' `after` ids lie in the pool op by op, in op order (so equal schedules are equal).
    std::int64_t at = 0;
    for (const Op& op : s.ops) {
      EXPECT_EQ(op.after_begin, at) << "operation " << op.id;
      at += op.after_count;
    }
    EXPECT_EQ(at, static_cast<std::int64_t>(s.after.size()));
    // The JSON round trip is lossless: the replayed schedule validates and serialises identically.
    const auto back = schedule_from_json(to_json(s));
    EXPECT_EQ(back, s);
    EXPECT_EQ(to_json(back), to_json(s));
    // No strategy beats the lower bound.
    const auto lb = lower_bound(ts, sc.source, sc.destination, sc.topology);
    const auto pred = estimate(s, ts, sc.inventory, sc.topology, CostParams::profile_named("reshard"));
    EXPECT_GE(pred.time.value, lb.time.value * (1 - 1e-9));
  }
}

INSTANTIATE_TEST_SUITE_P(Strategies, EveryStrategy, ::testing::ValuesIn(strategy_names()));

// add_op appends each op's ids to the pool in op order; op_problem refuses an op whose range leaves
// the pool (as a reader would get from a hand-edited schedule) or names an op that does not precede
// it, and the estimate, which runs op_problem first, refuses the schedule naming the op.
TEST(Schedule, AfterRangesLieInThePool) {
  Schedule s;
  s.buffers.push_back({{}, Bytes{0}});
  Op op;
  op.src = 0;
  op.dst = 1;
  op.buffer = 0;
  EXPECT_EQ(s.add_op(op, {}), 0);
  EXPECT_EQ(s.add_op(op, std::vector<std::int64_t>{0}), 1);
  EXPECT_EQ(s.add_op(op, std::vector<std::int64_t>{0, 1}), 2);
  EXPECT_EQ(s.after, (std::vector<std::int64_t>{0, 0, 1}));
  EXPECT_EQ(s.ops[2].after_begin, 1);
  EXPECT_EQ(s.ops[2].after_count, 2);
  EXPECT_EQ(std::vector<std::int64_t>(s.after_of(s.ops[2]).begin(), s.after_of(s.ops[2]).end()),
            (std::vector<std::int64_t>{0, 1}));
  for (std::size_t i = 0; i < s.ops.size(); ++i) EXPECT_EQ(op_problem(s, i, 2, true), "") << i;
  auto problem = [&](std::int64_t begin, std::int32_t count) {
    Schedule t = s;
    t.ops[2].after_begin = begin;
    t.ops[2].after_count = count;
    return op_problem(t, 2, 2, true);
  };
  EXPECT_EQ(problem(3, 0), "");  // empty, at the pool's end
  EXPECT_EQ(problem(2, 2), "its `after` entries 2+2 lie outside the 3 of the schedule's pool");
  EXPECT_EQ(problem(-1, 1), "its `after` entries -1+1 lie outside the 3 of the schedule's pool");
  EXPECT_EQ(problem(0, -1), "its `after` entries 0+-1 lie outside the 3 of the schedule's pool");
  EXPECT_EQ(problem(std::numeric_limits<std::int64_t>::max(), 1),
            "its `after` entries 9223372036854775807+1 lie outside the 3 of the schedule's pool");
  Schedule self = s;
  self.ops[1].after_begin = 2;  // op 1 would wait for [1]: itself
  EXPECT_EQ(op_problem(self, 1, 2, true), "waits for operation 1, which does not precede it");
  Schedule outside = s;
  outside.ops[2].after_count = 3;
  const auto topo = Topology::load(kRoot + "/topologies/dgx-h100-2n.yaml");
  try {
    estimate(outside, TransferSet{}, Inventory{}, topo, CostParams::profile_named("reshard"));
    ADD_FAILURE() << "the estimate accepted an `after` range outside the pool";
  } catch (const ScheduleError& e) {
    EXPECT_EQ(std::string(e.what()), "operation 2: its `after` entries 1+3 lie outside the 3 of the schedule's pool");
  }
}

TEST(Schedule, BrokenScheduleIsRejectedNamingThePiece) {
  const auto sc = load_scenario(kRoot + "/scenarios/small-gqa-megatron-vllm.yaml");
  const auto ts = plan(sc.inventory, sc.source, sc.destination);
  StrategyParams p;
  p.strategy = Strategy::DomainGrouped;
  auto s = build_schedule(ts, sc.inventory, sc.source, sc.destination, sc.topology, p);
  auto error_of = [&](const Schedule& broken) {
    try {
      validate(broken, ts, sc.inventory, sc.source, sc.destination);
    } catch (const ScheduleError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  // A chain op with a fan-out hop (the ingress forwarding to another needer of its domain).
  std::size_t k = 0;
  while (k < s.ops.size() && (s.ops[k].chain < 0 || s.chains[static_cast<std::size_t>(s.ops[k].chain)].hops.size() < 2)) ++k;
  ASSERT_LT(k, s.ops.size());
  const auto chain = static_cast<std::size_t>(s.ops[k].chain);
  // Drop the chain's last hop: a needer never gets the piece.
  auto dropped = s;
  dropped.chains[chain].hops.pop_back();
  dropped.ops[k].dst = dropped.chains[chain].hops.back().to;
  EXPECT_NE(error_of(dropped).find("never delivered"), std::string::npos) << error_of(dropped);
  // Forwarding before receiving: a fan-out hop leaving a GPU that only a later hop reaches.
  ASSERT_GE(s.chains[chain].hops.size(), 3u);
  auto reordered = s;
  reordered.chains[chain].hops[1].from = reordered.chains[chain].hops[2].to;
  EXPECT_NE(error_of(reordered).find("has not reached yet"), std::string::npos) << error_of(reordered);
  // A root that holds nothing: the chain moved to start at one of its own receivers' peers.
  auto rootless = s;
  const GpuId other = rootless.chains[chain].hops[1].to;  // a needer that is not a holder
  rootless.chains[chain].hops.erase(rootless.chains[chain].hops.begin() + 1);
  rootless.chains[chain].hops.front().from = other;
  rootless.ops[k].src = other;
  rootless.ops[k].dst = rootless.chains[chain].hops.back().to;
  EXPECT_NE(error_of(rootless).find("neither holds nor received"), std::string::npos) << error_of(rootless);
  // A chain op whose dst is not its last receiver.
  auto misaddressed = s;
  misaddressed.ops[k].dst = misaddressed.ops[k].src;
  EXPECT_NE(error_of(misaddressed).find("last hop's receiver"), std::string::npos) << error_of(misaddressed);
  // An operation whose byte count disagrees with the part it carries.
  auto miscounted = s;
  miscounted.ops.front().bytes += Bytes{1};
  EXPECT_NE(error_of(miscounted).find("bytes"), std::string::npos) << error_of(miscounted);
  // The chain op sent twice: every GPU it reaches gets every element of its part twice.
  auto twice = s;
  twice.add_op(s.ops[k], {});
  EXPECT_NE(error_of(twice).find("delivered twice"), std::string::npos) << error_of(twice);
  // Losing only the tail of a piece: the last element of a buffer's last slice (one that ends where
  // its piece ends) cut off, its bytes
  // and those of every op carrying it adjusted to match, so everything but that one element of one
  // piece still arrives.
  auto tailless = s;
  std::size_t b = 0;
  auto whole_ops_only = [&](std::size_t buf) {  // carried by ops, each moving the whole buffer
    int carried = 0;
    for (const auto& o : s.ops)
      if (o.buffer == static_cast<std::int32_t>(buf)) {
        if (o.parts != 1) return false;
        ++carried;
      }
    const auto& last = s.buffers[buf].slices.back();  // ends where its piece ends
    return carried > 0 && last.count >= 2 &&
           last.offset + last.count == ts.pieces[static_cast<std::size_t>(last.piece)].box.elements();
  };
  while (b < s.buffers.size() && !whole_ops_only(b)) ++b;
  ASSERT_LT(b, s.buffers.size());
  std::int64_t elements = 0;
  for (const auto& sl : s.buffers[b].slices) elements += sl.count;
  const Bytes element{s.buffers[b].bytes.value / elements};
  tailless.buffers[b].slices.back().count -= 1;
  tailless.buffers[b].bytes -= element;
  for (auto& o : tailless.ops)
    if (o.buffer == static_cast<std::int32_t>(b)) o.bytes -= element;
  const std::string tail_error = error_of(tailless);
  EXPECT_NE(tail_error.find("piece " + std::to_string(s.buffers[b].slices.back().piece)), std::string::npos)
      << tail_error;
  EXPECT_NE(tail_error.find("never delivered"), std::string::npos) << tail_error;
}

TEST(Estimate, HandWorkedTwoDomains) {
  // One piece: 1 GiB held on GPU 0 (node 0), needed by GPUs 8..15 (node 1) on two DGX H100 nodes
  // (two_nodes_one_spine).
  // direct:          8 transfers over the network; GPU 0's NIC egress (50 GB/s x 0.94) carries
  //                  8 GiB -> 8 * 2^30 / 47e9 = 0.1828 s.
  // domain_grouped:  the piece crosses the network once, cut into 8 stripes (one per needer of the
  //                  destination domain); stripe s is one chain op: GPU 0 -> ingress GPU 8+s, which
  //                  fans it out over NVLink to the 7 others, chunk by chunk (depth H = 2, chunk c =
  //                  512 KiB). GPU 0's NIC carries all B bytes: bandwidth bound B / 47e9 (each
  //                  ingress's NVLink egress carries 7 fan-out hops of B/8: 7B/8 at 369e9, less).
  //                  Network bytes B (one network hop per stripe), NVLink bytes 7B.
  //                  A stripe alone runs at r = min(47e9 (NIC), 369e9 / 7 (the ingress's NVLink
  //                  port, weight 7)) = 47e9, so t = per_op + L + (B/8 + (H - 1) c) / r, L = its
  //                  network route's latency + the NVLink route's.
  //                  Every stream also pays its copy fill, the pack of its first chunk and the
  //                  unpack of its last at the memory copy rate m (2.15e12): 2 c / m.
  //                  Estimate: T_bw + T_fill + T_latency = B / 47e9 + c / 47e9 + 2 c / m + per_op + max L.
  const auto topo = two_nodes_one_spine();
  const auto inv = one_layer_model();
  // Source dtensor on GPU 0 only; destination replicated on GPUs 8..15.
  DTensorSpec one{{1}, {"x"}, {{"default", {Placement{}}}}};
  DTensorSpec eight{{8}, {"x"}, {{"default", {Placement{}}}}};
  const auto src = build_shard_map(inv, LayoutSpec{one, {0}});
  const auto dst = build_shard_map(inv, LayoutSpec{eight, {8, 9, 10, 11, 12, 13, 14, 15}});
  const auto ts = plan(inv, src, dst);
  const auto cost = CostParams::profile_named("links");
  StrategyParams p;
  p.strategy = Strategy::Direct;
  const auto direct = estimate(build_schedule(ts, inv, src, dst, topo, p), ts, inv, topo, cost);
  const double model_bytes = static_cast<double>(inv.bytes().value);
  EXPECT_NEAR(direct.bandwidth_bound.value, 8 * model_bytes / 47e9, 1e-6);
  // The 8 transfers are independent: the latency path is one transfer's, per_op + the latency of
  // the slowest of the routes 0 -> g (an ingress on another rail crosses the spine).
  double slowest_route = 0;
  for (GpuId g = 8; g < 16; ++g) slowest_route = std::max(slowest_route, topo.route(0, g).latency.value);
  EXPECT_GT(slowest_route, 0);
  EXPECT_NEAR(direct.latency_path.value, cost.per_op.value + slowest_route, 1e-12);
  p.strategy = Strategy::DomainGrouped;
  const auto schedule = build_schedule(ts, inv, src, dst, topo, p);
  ASSERT_EQ(schedule.ops.size(), 8u);  // one chain op per stripe
  for (const auto& op : schedule.ops) {
    ASSERT_GE(op.chain, 0);
    EXPECT_EQ(schedule.chains[static_cast<std::size_t>(op.chain)].hops.size(), 8u);  // ingress + 7 fan-outs
  }
  const auto grouped = estimate(schedule, ts, inv, topo, cost);
  EXPECT_NEAR(grouped.bandwidth_bound.value, model_bytes / 47e9, 1e-6);
  EXPECT_EQ(grouped.network_bytes.value, inv.bytes().value);
  EXPECT_EQ(grouped.nvlink_bytes.value, 7 * inv.bytes().value);
  EXPECT_EQ(grouped.chain_depth, 2);
  const double c = 512 << 10, copies = 2 * c / 2.15e12;
  EXPECT_NEAR(grouped.fill.value, c / 47e9 + copies, 1e-12);
  // The slowest root-to-leaf path: an ingress on another rail than GPU 0 (through the spine,
  // 2 x 0.15 us more than GPU 8 on GPU 0's rail), then an NVLink hop.
  double slowest_ingress = 0;
  for (GpuId g = 8; g < 16; ++g) slowest_ingress = std::max(slowest_ingress, topo.route(0, g).latency.value);
  EXPECT_NEAR(slowest_ingress - topo.route(0, 8).latency.value, 0.3e-6, 1e-12);
  const double latency_path = slowest_ingress + topo.route(8, 9).latency.value + cost.per_op.value;
  EXPECT_NEAR(grouped.latency_path.value, latency_path, 1e-12);
  EXPECT_NEAR(grouped.critical_path.value, latency_path + (model_bytes / 8 + c) / 47e9 + copies, 1e-9);
  EXPECT_NEAR(grouped.time.value, (model_bytes + c) / 47e9 + copies + latency_path, 1e-9);
  EXPECT_LT(grouped.time, direct.time);
}

TEST(Estimate, HandWorkedBroadcastRing) {
  // gather_broadcast of one replicated model (B bytes) held on GPU 0 (node 0) to GPUs 8 and 9
  // (node 1) of two DGX H100 nodes (two_nodes_one_spine), in one bucket over 2 channels (one per destination GPU of the
  // domain). Channel c carries half the bucket along its own ring, one chain op each:
  // 0 -> 8 -> 9 for c = 0, 0 -> 9 -> 8 for c = 1 (each ring enters the domain on another GPU and
  // rail). So:
  //   network: GPU 0's NIC sends both halves: B bytes at 50e9 x 0.94 -> T_bw = B / 47e9; GPU 8's
  //            and 9's NICs each receive B/2;
  //   NVLink:  each ring makes one NVLink hop: B bytes in all;
  //   alone, a ring runs at r = 47e9 (its NIC hop), depth H = 2, so it takes
  //            per_op + L_c + (B/2 + c) / r, L_c its network route's latency + the NVLink one's;
  //   each also pays its copy fill 2 c / m (m = 2.15e12, model/chain.hpp);
  //   estimate: T_bw + T_fill + T_latency = B / 47e9 + c / 47e9 + 2 c / m + per_op + max_c L_c.
  const auto topo = two_nodes_one_spine();
  const auto inv = ring_model();
  DTensorSpec one{{1}, {"x"}, {{"default", {Placement{}}}}};
  DTensorSpec two{{2}, {"x"}, {{"default", {Placement{}}}}};
  const auto src = build_shard_map(inv, LayoutSpec{one, {0}});
  const auto dst = build_shard_map(inv, LayoutSpec{two, {8, 9}});
  const auto ts = plan(inv, src, dst);
  StrategyParams p;
  p.strategy = Strategy::GatherBroadcast;
  p.bucket = Bytes{1LL << 40};
  const auto s = build_schedule(ts, inv, src, dst, topo, p);
  EXPECT_NO_THROW(validate(s, ts, inv, src, dst));
  ASSERT_EQ(s.ops.size(), 2u);  // 2 channels, one chain op each
  ASSERT_EQ(s.chains.size(), 2u);
  EXPECT_EQ(s.chains[0].hops, (std::vector<ChainHop>{{0, 8}, {8, 9}}));
  EXPECT_EQ(s.chains[1].hops, (std::vector<ChainHop>{{0, 9}, {9, 8}}));
  const double B = static_cast<double>(inv.bytes().value);
  const auto cost = CostParams::profile_named("links");
  const auto pr = estimate(s, ts, inv, topo, cost);
  EXPECT_EQ(pr.network_bytes.value, inv.bytes().value);
  EXPECT_EQ(pr.nvlink_bytes.value, inv.bytes().value);
  EXPECT_NEAR(pr.bandwidth_bound.value, B / 47e9, 1e-9);
  const double c = 512 << 10, copies = 2 * c / 2.15e12;
  // Channel 1 enters at GPU 9, on another rail than GPU 0 (through the spine): the longer path.
  const double L = std::max(topo.route(0, 8).latency.value + topo.route(8, 9).latency.value,
                            topo.route(0, 9).latency.value + topo.route(9, 8).latency.value);
  EXPECT_NEAR(pr.latency_path.value, L + cost.per_op.value, 1e-12);
  EXPECT_NEAR(pr.critical_path.value, cost.per_op.value + L + (B / 2 + c) / 47e9 + copies, 1e-9);
  EXPECT_NEAR(pr.time.value, (B + c) / 47e9 + copies + L + cost.per_op.value, 1e-9);
  EXPECT_EQ(pr.broadcast_buckets, 1);
}

TEST(Estimate, HandWorkedImplementationTerms) {
  // The direct schedule of HandWorkedTwoDomains (the model's n tensors, B bytes, from GPU 0 to GPUs
  // 8..15; hardware time T_gpu) under an implementation profile's terms (cost.hpp):
  //   calls     = reshard tensors / tensor_streams = n / 2
  //   T_barrier = the largest route latency from GPU 0 to another GPU of the schedule (one round of
  //               a GIN barrier): max over g of route(0, g)
  //   T_copy    = copy_passes x (2 x bytes through the slowest GPU) / its memory bandwidth: GPU 0
  //               sends 8 B, so 3 x 2 x 8 B / 3.35e12 (H100 HBM3)
  //   T_host    = per_tensor x calls = 1 ms x n / 2
  //   additive: overheads = T_host + 2 barriers x calls x T_barrier + T_copy
  //   overlapping: overheads = T_device + max(0, T_host - T_gpu - T_device)
  const auto topo = two_nodes_one_spine();
  const auto inv = one_layer_model();
  DTensorSpec one{{1}, {"x"}, {{"default", {Placement{}}}}};
  DTensorSpec eight{{8}, {"x"}, {{"default", {Placement{}}}}};
  const auto src = build_shard_map(inv, LayoutSpec{one, {0}});
  const auto dst = build_shard_map(inv, LayoutSpec{eight, {8, 9, 10, 11, 12, 13, 14, 15}});
  const auto ts = plan(inv, src, dst);
  StrategyParams p;
  p.strategy = Strategy::Direct;
  const auto s = build_schedule(ts, inv, src, dst, topo, p);
  CostParams cost = CostParams::profile_named("links");
  cost.step_barriers = false;
  const auto plain = estimate(s, ts, inv, topo, cost);
  EXPECT_EQ(plain.overheads.value, 0);
  const double calls = static_cast<double>(plain.reshard_tensors) / 2;
  ASSERT_GT(calls, 0);
  const double gpu_time = plain.time.value;
  cost.per_tensor = Seconds{1e-3};
  cost.tensor_streams = 2;
  cost.barriers_per_tensor = 2;
  cost.copy_passes = 3;
  double barrier = 0;
  for (GpuId g = 8; g < 16; ++g) barrier = std::max(barrier, topo.route(0, g).latency.value);
  const double B = static_cast<double>(inv.bytes().value);
  const double copies = 3 * 2 * 8 * B / 3.35e12;
  ASSERT_EQ(topo.gpu_memory_bandwidth(0).value, 3.35e12);
  const auto additive = estimate(s, ts, inv, topo, cost);
  EXPECT_NEAR(additive.barrier.value, barrier, 1e-15);
  EXPECT_NEAR(additive.copies.value, copies, 1e-12);
  EXPECT_NEAR(additive.host.value, 1e-3 * calls, 1e-15);
  EXPECT_NEAR(additive.device.value, 2 * calls * barrier + copies, 1e-12);
  EXPECT_NEAR(additive.overheads.value, 1e-3 * calls + 2 * calls * barrier + copies, 1e-12);
  EXPECT_NEAR(additive.time.value, gpu_time + additive.overheads.value, 1e-12);
  // Overlapping: the host's n / 2 ms is less than the GPUs' time (8 B over a 47 GB/s NIC): hidden;
  // a host time of n / 2 x 1 s is not: the part beyond T_gpu + T_device adds.
  cost.host_overlaps = true;
  const auto hidden = estimate(s, ts, inv, topo, cost);
  ASSERT_GT(gpu_time, 1e-3 * calls);
  EXPECT_NEAR(hidden.time.value, gpu_time + hidden.device.value, 1e-12);
  cost.per_tensor = Seconds{1.0};
  const auto host_bound = estimate(s, ts, inv, topo, cost);
  ASSERT_GT(calls, gpu_time + hidden.device.value);
  EXPECT_NEAR(host_bound.time.value, calls, 1e-9);  // max(T_gpu + T_device, T_host) = T_host
}

namespace {
// A ring over the 8 GPUs of node 0 of dgx-h100-2n, written by hand: chain 0 -> 1 -> ... -> 7 (depth
// H = 7, every hop over NVLink, 0.3 us per link, so 0.6 us per hop; each GPU's NVLink port carries
// the chain once at 450e9 x 0.82 = 369e9), one op of M = 64 MiB in chunks of c = 1 MiB.
Schedule hand_ring(std::int32_t ops, std::int32_t piece_count) {
  Schedule s;
  s.piece_count = piece_count;
  s.buffers.push_back({{}, Bytes{64 << 20}});
  Chain ring;
  for (GpuId g = 0; g < 7; ++g) ring.hops.push_back({g, g + 1});
  ring.chunk = Bytes{1 << 20};
  s.chains.push_back(ring);
  for (std::int32_t i = 0; i < ops; ++i) {
    Op op;
    op.src = 0;
    op.dst = 7;
    op.chain = 0;
    op.buffer = 0;
    op.bytes = Bytes{64 << 20};
    s.add_op(op, {});
  }
  return s;
}
}  // namespace

TEST(Estimate, HandWorkedIdleRingAndChainOrder) {
  // Alone:  t = per_op + M / r + L + 6 c / r + 2 c / m, r = 369e9, L = 7 x 0.6 us, m = 2.15e12 (the
  // copy fill: the root packs its first chunk, the last GPU unpacks its last, model/chain.hpp).
  // A second op on the same chain, waiting for nothing, leaves the root once the first has been
  // sent (chain ops on one chain run in order): it starts at per_op + M / r, pays its own per_op,
  // is sent M / r later and ends L + 6 c / r + 2 c / m after that: 2 per_op + 2 M / r + L + 6 c / r
  // + 2 c / m (the critical path). T_pipeline = T_bw + T_fill + T_latency = 2 M / r + 6 c / r +
  // 2 c / m + per_op + L is one per_op less, so the critical path is the estimate.
  const auto topo = Topology::load(kRoot + "/topologies/dgx-h100-2n.yaml");
  const auto inv = ring_model();
  const DTensorSpec one{{1}, {"x"}, {{"default", {Placement{}}}}};
  const auto ts = plan(inv, build_shard_map(inv, LayoutSpec{one, {0}}), build_shard_map(inv, LayoutSpec{one, {1}}));
  const double M = 64 << 20, c = 1 << 20, r = 450e9 * 0.82, L = 7 * 0.6e-6, copies = 2 * c / 2.15e12;
  const auto cost = CostParams::profile_named("links");
  const auto piece_count = static_cast<std::int32_t>(ts.pieces.size());
  const auto one_op = estimate(hand_ring(1, piece_count), ts, inv, topo, cost);
  EXPECT_NEAR(one_op.latency_path.value, cost.per_op.value + L, 1e-12);
  EXPECT_NEAR(one_op.critical_path.value, cost.per_op.value + L + (M + 6 * c) / r + copies, 1e-12);
  EXPECT_NEAR(one_op.time.value, cost.per_op.value + L + (M + 6 * c) / r + copies, 1e-12);
  EXPECT_EQ(one_op.chain_depth, 7);
  EXPECT_EQ(one_op.nvlink_bytes.value, 7 * static_cast<std::int64_t>(M));
  const auto two_ops = estimate(hand_ring(2, piece_count), ts, inv, topo, cost);
  EXPECT_NEAR(two_ops.bandwidth_bound.value, 2 * M / r, 1e-12);
  EXPECT_NEAR(two_ops.critical_path.value, 2 * cost.per_op.value + L + (2 * M + 6 * c) / r + copies, 1e-12);
  EXPECT_NEAR(two_ops.pipeline.value, cost.per_op.value + L + (2 * M + 6 * c) / r + copies, 1e-12);
  EXPECT_NEAR(two_ops.time.value, 2 * cost.per_op.value + L + (2 * M + 6 * c) / r + copies, 1e-12);
}

// T_barrier counts every GPU a chain op reaches, not only its root and last GPU. A chain 0 -> 8 -> 1
// on dgx-h100-2n: root 0 and last GPU 1 share node 0 (route 0 -> 1: NVLink, 2 x 0.3 us = 0.6 us),
// the GPU it passes through, 8, is on node 1 (route 0 -> 8: 2 x PCIe 0.25 us + 2 x NIC-leaf 1 us =
// 2.5 us). Every GPU of the chain waits in the barrier (nccl_m2n: world-wide GIN barriers), so
//   T_barrier = max(route(0, 1), route(0, 8)) = 2.5 us,
// where a barrier over the ops' src and dst alone (tried) gives 0.6 us.
TEST(Estimate, BarrierCountsTheGpusAChainPassesThrough) {
  const auto topo = Topology::load(kRoot + "/topologies/dgx-h100-2n.yaml");
  ASSERT_NEAR(topo.route(0, 1).latency.value, 0.6e-6, 1e-15);
  ASSERT_NEAR(topo.route(0, 8).latency.value, 2.5e-6, 1e-15);
  const auto inv = ring_model();
  const DTensorSpec one{{1}, {"x"}, {{"default", {Placement{}}}}};
  const auto ts = plan(inv, build_shard_map(inv, LayoutSpec{one, {0}}), build_shard_map(inv, LayoutSpec{one, {1}}));
  Schedule s;
  s.piece_count = static_cast<std::int32_t>(ts.pieces.size());
  s.buffers.push_back({{}, Bytes{1 << 20}});
  s.chains.push_back(Chain{{{0, 8}, {8, 1}}, Bytes{512 << 10}});
  Op op;
  op.src = 0;
  op.dst = 1;
  op.chain = 0;
  op.buffer = 0;
  op.bytes = Bytes{1 << 20};
  s.add_op(op, {});
  CostParams cost = CostParams::profile_named("reshard");
  cost.barriers_per_tensor = 2;
  EXPECT_NEAR(estimate(s, ts, inv, topo, cost).barrier.value, 2.5e-6, 1e-15);
  // A plain transfer 0 -> 1 touches node 0 alone: one NVLink route.
  Schedule plain = s;
  plain.chains.clear();
  plain.ops[0].chain = -1;
  EXPECT_NEAR(estimate(plain, ts, inv, topo, cost).barrier.value, 0.6e-6, 1e-15);
}

// The middles of a route (RouteView::middle_shares) where the leaf uplinks bind. Eight DGX H100 nodes,
// two per leaf group, two groups per pod (two pods), 2 spines per pod, 6 cores (K = 3 per spine),
// leaves oversubscribed 4:1:
//   leaf -> spine   D_leaf / 4 / 2 = (2 NICs x 50 GB/s) / 8 = 12.5 GB/s each
//   spine -> core   D_spine / 1 / 3 = (16 leaves x 12.5 GB/s) / 3 = 66.7 GB/s each
// GPU 0 (node 0, pod 0) -> GPU 32 (node 4, pod 1), both on rail 0: 2 x 3 = 6 ECMP paths; each leaf
// uplink is on the 3 paths of its spine, so it carries 3/6 = 1/2 of the bytes B:
//   leaf uplink     (B / 2) / (12.5e9 x 0.94) = B / 23.5e9      <- binds
//   NIC             B / (50e9 x 0.94) = B / 47e9
//   spine -> core   (B / 6) / (66.7e9 x 0.94)
// so T_bandwidth = B / 23.5e9 for the direct schedule (its ops all on the one pair); the destination
// leaf's downlinks carry the same. A leaf link given one path's share, 1/6 (tried), leaves the NIC
// binding: B / 47e9.
TEST(Estimate, HandWorkedLeafUplinksBind) {
  const auto topo = Topology::parse(
      "cluster: {template: dgx-h100, nodes: 8}\n"
      "fabric:\n  nodes_per_leaf: 2\n  spines: 2\n  oversubscription: 4\n"
      "  core: {leaf_groups_per_pod: 2, switches: 6}\n",
      "pods.yaml");
  ASSERT_EQ(topo.route(0, 32).paths.size(), 6u);
  const auto inv = ring_model();
  const DTensorSpec one{{1}, {"x"}, {{"default", {Placement{}}}}};
  const auto src = build_shard_map(inv, LayoutSpec{one, {0}});
  const auto dst = build_shard_map(inv, LayoutSpec{one, {32}});
  const auto ts = plan(inv, src, dst);
  StrategyParams p;
  p.strategy = Strategy::Direct;
  const auto s = build_schedule(ts, inv, src, dst, topo, p);
  const double B = static_cast<double>(inv.bytes().value);
  const auto pr = estimate(s, ts, inv, topo, CostParams::profile_named("reshard"));
  EXPECT_NEAR(pr.bandwidth_bound.value, B / 23.5e9, 1e-12);
  EXPECT_GE(pr.critical_path.value, B / 23.5e9);
  EXPECT_EQ(pr.network_bytes.value, inv.bytes().value);
}

TEST(Estimate, HandWorkedSlotRateCapBinds) {
  // The chain's slot-rate cap (model/chain.hpp, docs/strategies.md "Chain ops"):
  //   r = min( min over l of C_l / w_l ,  r_slots ),   r_slots = (S - 1) c / (largest hop latency).
  // A chain 1 -> 0 -> 8 on dgx-h100-2n (reshard profile: no per-hop latency floor), one op of
  // M = 64 MiB, with S = 2 slots and chunks of c = 64 KiB:
  //   hop 1 -> 0: NVLink, 2 x 0.3 us = 0.6 us;
  //   hop 0 -> 8: the network on rail 0 (no spine), 2 x PCIe 0.25 us + 2 x NIC-leaf 1 us = 2.5 us;
  //   largest hop latency 2.5 us (not the first hop's 0.6 us, nor the path's L = 3.1 us);
  //   r_slots = (2 - 1) x 65536 / 2.5e-6 = 26.2144e9 B/s, below the links: GPU 0's NIC 50e9 x 0.94
  //   = 47e9 and the NVLink ports 450e9 x 0.82 = 369e9. So r = r_slots.
  // With H = 2 and m = 2.15e12 (the copy fill, 2 c / m):
  //   fill          = (H - 1) c / r + 2 c / m
  //   critical path = per_op + M / r + L + fill
  //   T_pipeline    = M / 47e9 + fill + per_op + L (the links alone bound the bandwidth term) < critical
  //   estimate      = the critical path.
  // With S = 8 the cap is 7 x 65536 / 2.5e-6 = 183.5e9 B/s, above the NIC: r = 47e9 again.
  const auto topo = Topology::load(kRoot + "/topologies/dgx-h100-2n.yaml");
  EXPECT_NEAR(topo.route(1, 0).latency.value, 0.6e-6, 1e-15);
  EXPECT_NEAR(topo.route(0, 8).latency.value, 2.5e-6, 1e-15);
  const auto inv = ring_model();
  const DTensorSpec one{{1}, {"x"}, {{"default", {Placement{}}}}};
  const auto ts = plan(inv, build_shard_map(inv, LayoutSpec{one, {1}}), build_shard_map(inv, LayoutSpec{one, {8}}));
  const double M = 64 << 20, c = 64 << 10, L = 0.6e-6 + 2.5e-6, copies = 2 * c / 2.15e12;
  auto chain_1_0_8 = [&](std::int32_t slots) {
    Schedule s;
    s.piece_count = static_cast<std::int32_t>(ts.pieces.size());
    s.slots = slots;
    s.buffers.push_back({{}, Bytes{64 << 20}});
    Chain chain;
    chain.hops = {{1, 0}, {0, 8}};
    chain.chunk = Bytes{64 << 10};
    s.chains.push_back(chain);
    Op op;
    op.src = 1;
    op.dst = 8;
    op.chain = 0;
    op.buffer = 0;
    op.bytes = Bytes{64 << 20};
    s.add_op(op, {});
    return s;
  };
  const auto cost = CostParams::profile_named("links");
  const double r = 65536 / 2.5e-6;
  const auto two = estimate(chain_1_0_8(2), ts, inv, topo, cost);
  EXPECT_EQ(two.chain_depth, 2);
  EXPECT_NEAR(two.bandwidth_bound.value, M / 47e9, 1e-12);
  EXPECT_NEAR(two.fill.value, c / r + copies, 1e-12);
  EXPECT_NEAR(two.critical_path.value, cost.per_op.value + M / r + L + c / r + copies, 1e-12);
  EXPECT_NEAR(two.time.value, cost.per_op.value + (M + c) / r + L + copies, 1e-12);
  // Eight slots: the NIC binds.
  const auto eight = estimate(chain_1_0_8(8), ts, inv, topo, cost);
  EXPECT_NEAR(eight.time.value, cost.per_op.value + (M + c) / 47e9 + L + copies, 1e-12);
}

// The parameter table of docs/strategies.md ("Writing a configured strategy") has one row per
// parameter of kParameters, and no other: the table a user reads is the one parse_strategy reads.
TEST(StrategySpec, EveryParameterIsInTheDocs) {
  std::ifstream in(kRoot + "/docs/strategies.md");
  ASSERT_TRUE(in) << "docs/strategies.md";
  std::set<std::string> rows;
  for (std::string line; std::getline(in, line);)
    if (line.rfind("| `", 0) == 0) rows.insert(line.substr(3, line.find('`', 3) - 3));
  std::set<std::string> keys;
  for (const StrategyParameter& q : strategy_parameters()) keys.insert(q.key);
  for (const auto& k : keys) EXPECT_TRUE(rows.count(k)) << "docs/strategies.md has no row for `" << k << "`";
  // Every documented key parses for some strategy, so the docs list no parameter the line refuses.
  for (const auto& r : rows) EXPECT_TRUE(keys.count(r)) << "docs/strategies.md documents `" << r << "`, which no strategy takes";
}

TEST(StrategySpec, DescribeAndParseRoundTripAndBadTokensAreNamed) {
  // What the tuner prints is what every command reads back.
  for (const char* spec : {"direct", "domain_grouped chunk=512KiB relay_ingress", "domain_chain chunk=256KiB max_chain=2",
                           "hybrid chunk=1MiB max_chain=4 relay_ingress relay_egress rail_blind",
                           "gather_broadcast chunk=512KiB channels=4 bucket=1600MB", "gather_broadcast chunk=512KiB",
                           "nemo_rl_reshard chunk=512KiB bucket=5GB"})
    EXPECT_EQ(describe(parse_strategy(spec)), spec);
  const StrategyParams p = parse_strategy("domain_chain max_chain=2 relay_egress");
  EXPECT_EQ(p.chunk, Bytes{512 << 10});  // defaults for what the line leaves out
  EXPECT_EQ(p.max_chain, 2);
  EXPECT_TRUE(p.relay_egress);
  EXPECT_FALSE(p.relay_ingress);
  EXPECT_EQ(describe(parse_strategy("gather_broadcast bucket=1.6GB")), "gather_broadcast chunk=512KiB bucket=1600MB");
  // A size's unit may stand apart, as the docs write sizes ("1.6 GB"); a flag after a size stays a flag.
  EXPECT_EQ(describe(parse_strategy("gather_broadcast bucket=1.6 GB")), "gather_broadcast chunk=512KiB bucket=1600MB");
  EXPECT_EQ(describe(parse_strategy("hybrid chunk=1 MiB relay_ingress")), "hybrid chunk=1MiB max_chain=8 relay_ingress");
  auto error_of = [](const std::string& spec) {
    try {
      parse_strategy(spec);
    } catch (const PlanError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(error_of("domain_chain max_chain=0").find("'max_chain=0' needs an integer in 1.."), std::string::npos);
  EXPECT_NE(error_of("domain_chain max_chain=4x").find("'max_chain=4x'"), std::string::npos);
  EXPECT_NE(error_of("domain_chain chunk=4").find("'chunk=4'"), std::string::npos);
  EXPECT_NE(error_of("domain_chain chunk=4 relay_ingress").find("'chunk=4': '4' has no unit"), std::string::npos);
  EXPECT_NE(error_of("domain_chain chunk=4 XB").find("'chunk=4XB'"), std::string::npos);
  EXPECT_NE(error_of("domain_chain chunks=4").find("'chunks' is gone"), std::string::npos);
  EXPECT_NE(error_of("domain_chain depth=2").find("unknown parameter 'depth'"), std::string::npos);
  EXPECT_NE(error_of("domain_chain relay").find("unknown flag 'relay'"), std::string::npos);
  EXPECT_NE(error_of("direct chunk=1MiB").find("direct takes no 'chunk'"), std::string::npos);
  EXPECT_NE(error_of("domain_chain channels=2").find("domain_chain takes chunk=SIZE, max_chain=N"), std::string::npos);
  EXPECT_NE(error_of("ring").find("unknown strategy 'ring'"), std::string::npos);
  EXPECT_NE(error_of("  ").find("empty strategy"), std::string::npos);
}
