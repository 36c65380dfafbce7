// The planner's lower bound where the GPU <-> NIC host link binds, worked by hand. Each case states
// the cut, its capacity and the bound, and checks the bound against a constructed schedule that
// reaches it (tests/achievable_traffic.hpp): a lower bound must never exceed an achievable time.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <numeric>
#include <unistd.h>

#include "achievable_traffic.hpp"
#include "reshard/model/planner.hpp"
#include "reshard/model/scenario.hpp"

using namespace reshard::model;
using reshard::testing::achievable_time;

namespace {

const std::filesystem::path kRoot = RESHARD_SOURCE_DIR;

Inventory tiny() { return Inventory::load(kRoot / "models/tiny-gqa.yaml"); }

std::vector<GpuId> range(GpuId first, GpuId count) {
  std::vector<GpuId> v(static_cast<std::size_t>(count));
  std::iota(v.begin(), v.end(), first);
  return v;
}

// Every GPU of node 0 holds the whole model (Megatron DP8); every GPU of node 1 needs the whole
// model (vLLM DP8). B = the model's bytes.
struct Refit {
  Inventory inv = tiny();
  ShardMap src, dst;
  TransferSet ts;
  Refit()
      : src(build_shard_map(inv, {MegatronSpec{.tp = 1, .pp = 1, .cp = 1, .dp = 8}, range(0, 8)})),
        dst(build_shard_map(inv, {VllmSpec{.tp = 1, .pp = 1, .dp = 8}, range(8, 8)})),
        ts(plan(inv, src, dst)) {}
};

const CutBound* find_cut(const LowerBound& lb, const std::string& name) {
  for (const auto& c : lb.cuts)
    if (c.cut == name) return &c;
  return nullptr;
}

Topology two_dgx(const std::string& extra) {
  return Topology::parse("name: dgx2\ncluster:\n  template: dgx-h100\n  nodes: 2\n" + extra + "fabric:\n  spines: 4\n",
                         "dgx2.yaml");
}

}  // namespace

// 2 DGX H100 nodes, NICs at 1600 Gb/s = 200 GB/s behind the template's PCIe Gen5 x16, 64 GB/s.
// Node 1 (domain 1) holds none of the model and needs all of it: B bytes enter domain 1, each GPU's
// share crossing its NIC link (200 GB/s) and then its host link (64 GB/s):
//   dest_domain_ingress = B / (8 x min(200, 64) GB/s) = B / 512 GB/s          <- binding
//   dest_gpu_ingress    = B / (450 + 64 GB/s)        = B / 514 GB/s (every GPU needs B)
//   source_egress = source_domain_egress = B / 512 GB/s as well (tie; the first listed binds)
// Before the host link counted, the domain cut was B / (8 x 200 GB/s): 3.1 x too optimistic. The
// striped schedule reaches the bound: stripe k (B/8) from node0/gpuk to node1/gpuk over rail k
// (B/8 on each host link: B/512 GB/s), then forwarded over NVLink to the other 7 GPUs
// (7B/8 / 450 GB/s = B / 514 GB/s, below it).
TEST(LowerBound, HostLinkBindsTwoDgxH100WithFastNics) {
  const Refit r;
  const auto topo = two_dgx("  nic_speed: 1600Gbps\n");
  const double B = r.ts.logical_bytes.as_double();
  ASSERT_EQ(r.ts.bytes_to_move.as_double(), 8 * B);
  const LowerBound lb = lower_bound(r.ts, r.src, r.dst, topo);
  EXPECT_EQ(lb.binding.cut, "dest_domain_ingress");
  EXPECT_EQ(lb.binding.where, "domain 1: host links PCIe 64.0 GB/s per GPU");
  EXPECT_DOUBLE_EQ(lb.binding.capacity.value, 8 * 64e9);
  EXPECT_NEAR(lb.time.value, B / (8 * 64e9), 1e-12 * lb.time.value + 1e-15);
  const CutBound* gpu = find_cut(lb, "dest_gpu_ingress");
  ASSERT_NE(gpu, nullptr);
  EXPECT_DOUBLE_EQ(gpu->capacity.value, 450e9 + 64e9);
  const CutBound* side = find_cut(lb, "source_egress");
  ASSERT_NE(side, nullptr);
  EXPECT_EQ(side->where, "source side: host links PCIe 64.0 GB/s per GPU");
  EXPECT_DOUBLE_EQ(side->capacity.value, 8 * 64e9);
  // The bound is reached, never beaten.
  const double t = achievable_time(r.ts, r.src, r.dst, topo);
  EXPECT_GE(t, lb.time.value * (1 - 1e-9));
  EXPECT_NEAR(t, lb.time.value, 1e-9 * t);
}

// The same refit with the template's 400 Gb/s = 50 GB/s NICs: the NIC links are the narrower side,
// so the cut is B / (8 x 50 GB/s) and names no host link. With cluster.host_link: 256GBps and
// 1600 Gb/s NICs the NICs are narrower again: B / (8 x 200 GB/s).
TEST(LowerBound, NicLinksBindWhenNarrowerThanTheHostLink) {
  const Refit r;
  const double B = r.ts.logical_bytes.as_double();
  {
    const auto topo = two_dgx("");
    const LowerBound lb = lower_bound(r.ts, r.src, r.dst, topo);
    EXPECT_EQ(lb.binding.cut, "dest_domain_ingress");
    EXPECT_EQ(lb.binding.where, "domain 1");
    EXPECT_NEAR(lb.time.value, B / (8 * 50e9), 1e-12 * lb.time.value);
    EXPECT_NEAR(achievable_time(r.ts, r.src, r.dst, topo), lb.time.value, 1e-9 * lb.time.value);
  }
  {
    const auto topo = two_dgx("  nic_speed: 1600Gbps\n  host_link: 256GBps\n");
    const LowerBound lb = lower_bound(r.ts, r.src, r.dst, topo);
    const CutBound* dom = find_cut(lb, "dest_domain_ingress");
    ASSERT_NE(dom, nullptr);
    EXPECT_EQ(dom->where, "domain 1");
    EXPECT_DOUBLE_EQ(dom->capacity.value, 8 * 200e9);
    // Now NVLink fan-out and the GPU's own links matter more: dest_gpu_ingress B / (450 + 256) GB/s.
    EXPECT_EQ(lb.binding.cut, "dest_gpu_ingress");
    EXPECT_NEAR(lb.time.value, B / (450e9 + 256e9), 1e-12 * lb.time.value);
    EXPECT_GE(achievable_time(r.ts, r.src, r.dst, topo), lb.time.value * (1 - 1e-9));
  }
}

// topologies/irregular-example.yaml: small/gpu0 (GPU 4, domain 1) and small/gpu1 (GPU 5, domain 2)
// sit behind one PCIe switch (32 GB/s links) that also carries their shared 200 Gb/s = 25 GB/s NIC.
// GPU 5 holds the model, GPU 4 needs it. The bytes need not touch the network: GPU 5 -> switch ->
// GPU 4 moves them at 32 GB/s, in B / 32 GB/s. The domain cut counted only the NIC (B / 25 GB/s, a
// "bound" above what is achievable); the minimum cut around domain 1's host side {GPU 4, switch,
// NIC} is min(25 + 32, 32) = 32 GB/s: the switch -> GPU 4 link.
TEST(LowerBound, ExplicitSharedPcieSwitchIsNotAboveTheAchievable) {
  const auto topo = Topology::load(kRoot / "topologies/irregular-example.yaml");
  const auto inv = tiny();
  const ShardMap src = build_shard_map(inv, {MegatronSpec{.tp = 1}, {5}});
  const ShardMap dst = build_shard_map(inv, {VllmSpec{.tp = 1}, {4}});
  const TransferSet ts = plan(inv, src, dst);
  const double B = ts.logical_bytes.as_double();
  const LowerBound lb = lower_bound(ts, src, dst, topo);
  const CutBound* dom = find_cut(lb, "dest_domain_ingress");
  ASSERT_NE(dom, nullptr);
  EXPECT_EQ(dom->where, "domain 1: host links PCIe 32.0 GB/s per GPU");
  EXPECT_DOUBLE_EQ(dom->capacity.value, 32e9);
  EXPECT_NEAR(lb.time.value, B / 32e9, 1e-12 * lb.time.value);
  const double t = achievable_time(ts, src, dst, topo);
  EXPECT_NEAR(t, B / 32e9, 1e-9 * t);
  EXPECT_LE(lb.time.value, t * (1 + 1e-9));
}

// The shipped DeepSeek-V3 refit (vLLM TP32 x DP8 on nodes 32-63) on dgx-h100-64n with 1600 Gb/s
// NICs. A destination domain must take in its 337 GB through 8 host links of 64 GB/s:
//   337 GB / 512 GB/s = 658 ms   (the NICs alone would allow 337 GB / (8 x 200 GB/s) = 211 ms)
TEST(LowerBound, DeepSeekV3On64DgxWithFastNics) {
  const auto dir = std::filesystem::temp_directory_path() / ("reshard-lb-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  {
    std::ifstream in(kRoot / "topologies/dgx-h100-64n.yaml");
    std::ofstream out(dir / "fast.yaml");
    for (std::string line; std::getline(in, line);) {
      out << line << '\n';
      if (line == "  nodes: 64") out << "  nic_speed: 1600Gbps\n";
    }
  }
  Scenario s = Scenario::load(kRoot / "scenarios/deepseek-v3-h100.yaml");
  s.topology_path = dir / "fast.yaml";
  const auto sc = load_scenario(s);
  ASSERT_EQ(sc.topology.warnings().size(), 1u);
  const auto ts = plan(sc.inventory, sc.source, sc.destination);
  const auto lb = lower_bound(ts, sc.source, sc.destination, sc.topology);
  EXPECT_EQ(lb.binding.cut, "dest_domain_ingress");
  EXPECT_EQ(lb.binding.where, "domain 32: host links PCIe 64.0 GB/s per GPU");
  EXPECT_DOUBLE_EQ(lb.binding.capacity.value, 512e9);
  EXPECT_NEAR(lb.time.value, lb.binding.bytes.as_double() / 512e9, 1e-9);
  EXPECT_NEAR(lb.time.value, 0.658, 0.001);
  std::filesystem::remove_all(dir);
}
