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

// ------------------------------------------------- one hand-worked case per cut kind, each binding
//
// tiny-gqa, worked by hand (bf16, 2 bytes per parameter; hidden 256, 8 query heads and 2 KV heads
// of 32, FFN 768, vocabulary 1000, untied):
//   a layer: q, o 256 x 256 = 65 536 each; k, v 64 x 256 = 16 384 each; gate, up, down
//            768 x 256 = 196 608 each; q_norm, k_norm 32 each; two layer norms 256 each
//            = 131 072 + 32 768 + 589 824 + 64 + 512 = 754 240 parameters
//   embedding 256 000, lm_head 256 000, final norm 256
//   B = 2 x (4 x 754 240 + 512 256) = 2 x 3 529 216 = 7 058 432 bytes
// DGX H100 per GPU: NVLink 450 GB/s each way; NIC 400 Gb/s = 50 GB/s behind PCIe 64 GB/s, so the
// usable network bandwidth is 50 GB/s per GPU and a domain's network cut 8 x 50 = 400 GB/s; the
// links entering (leaving) a GPU: NVLink 450 + PCIe 64 = 514 GB/s.
namespace {

constexpr double kTinyLayer = 754'240, kTinyB = 2 * (4 * kTinyLayer + 512'256);

Topology dgx_nodes(int nodes) {
  return Topology::parse("name: dgx\ncluster:\n  template: dgx-h100\n  nodes: " + std::to_string(nodes) +
                             "\nfabric:\n  spines: 4\n",
                         "dgx.yaml");
}

// One GPU on each of nodes first..first+7: a vLLM TP8 replica with one rank per NVLink domain, so
// every destination domain needs only its rank's shard (about B / 8).
std::vector<GpuId> one_gpu_per_node(GpuId first_node) {
  std::vector<GpuId> v;
  for (GpuId n = 0; n < 8; ++n) v.push_back((first_node + n) * 8);
  return v;
}

void expect_binds(const LowerBound& lb, const std::string& cut, const std::string& where, double bytes,
                  double capacity) {
  EXPECT_EQ(lb.binding.cut, cut);
  EXPECT_EQ(lb.binding.where, where);
  EXPECT_DOUBLE_EQ(lb.binding.bytes.as_double(), bytes);
  EXPECT_DOUBLE_EQ(lb.binding.capacity.value, capacity);
  EXPECT_NEAR(lb.time.value, bytes / capacity, 1e-12 * lb.time.value);
  // Every other cut kind with bytes to move is reported, below the binding one.
  for (const auto& c : lb.cuts) {
    if (c.cut != cut) {
      EXPECT_LT(c.time().value, lb.time.value) << c.cut << " " << c.where;
    }
  }
}

}  // namespace

TEST(LowerBoundCuts, TinyGqaBytesByHand) { EXPECT_DOUBLE_EQ(tiny().bytes().as_double(), kTinyB); }

// dest_gpu_ingress: node 0, Megatron TP2 x DP2 on GPUs 0-3, vLLM DP4 on GPUs 4-7. Every destination
// GPU needs all of B and holds none of it; the domain already holds everything (no network cut), so
//   dest_gpu_ingress = B / 514 GB/s   at the first destination GPU, gpu 4.
// (Megatron refuses TP above the 2 KV heads; vLLM replicates them.)
TEST(LowerBoundCuts, DestinationGpuIngressBinds) {
  const auto inv = tiny();
  const auto src = build_shard_map(inv, {MegatronSpec{.tp = 2, .dp = 2}, range(0, 4)});
  const auto dst = build_shard_map(inv, {VllmSpec{.tp = 1, .dp = 4}, range(4, 4)});
  const auto lb = lower_bound(plan(inv, src, dst), src, dst, dgx_nodes(2));
  expect_binds(lb, "dest_gpu_ingress", "gpu 4: NVLink 450 GB/s + PCIe 64.0 GB/s", kTinyB, 514e9);
}

// source_gpu_egress: GPU 0 alone holds the model (Megatron on one GPU); vLLM TP4 on GPUs 4-7 of the
// same node needs all of it, about B / 4 per GPU. GPU 0 must send all B out of its links:
//   source_gpu_egress = B / 514 GB/s   at gpu 0
// against about (B / 4) / 514 GB/s into each destination GPU; no network cut (one domain).
TEST(LowerBoundCuts, SourceGpuEgressBinds) {
  const auto inv = tiny();
  const auto src = build_shard_map(inv, {MegatronSpec{.tp = 1}, {0}});
  const auto dst = build_shard_map(inv, {VllmSpec{.tp = 4, .dp = 1}, range(4, 4)});
  const auto lb = lower_bound(plan(inv, src, dst), src, dst, dgx_nodes(2));
  expect_binds(lb, "source_gpu_egress", "gpu 0: NVLink 450 GB/s + PCIe 64.0 GB/s", kTinyB, 514e9);
}

// source_domain_egress: Megatron TP2 x DP4 x PP2 on nodes 0 and 1 with layers_per_stage [3, 1]
// (GPUs 0-7 stage 0, 8-15 stage 1): domain 0
// alone holds stage 0 (3 layers and the embedding), domain 1 stage 1 (a layer, the final norm and
// lm_head). The destination, vLLM TP8 with one rank on each of nodes 2-9, needs everything, but
// each of its domains only one rank's shard. Stage 0 must leave domain 0 through its 8 NICs:
//   S0 = 2 x (3 x 754 240 + 256 000) = 5 037 440 bytes,   S0 / 400 GB/s = 12.6 us
// while the source side as a whole sends B through 16 NICs, B / 800 GB/s = 8.8 us.
TEST(LowerBoundCuts, SourceDomainEgressBinds) {
  const auto inv = tiny();
  const auto src = build_shard_map(inv, {MegatronSpec{.tp = 2, .pp = 2, .dp = 4, .layers_per_stage = {3, 1}}, range(0, 16)});
  const auto dst = build_shard_map(inv, {VllmSpec{.tp = 8, .dp = 1}, one_gpu_per_node(2)});
  const auto lb = lower_bound(plan(inv, src, dst), src, dst, dgx_nodes(10));
  expect_binds(lb, "source_domain_egress", "domain 0", 2 * (3 * kTinyLayer + 256'000), 400e9);
}

// source_egress: Megatron TP2 x DP8 on nodes 0 and 1: each domain holds whole replicas, so no
// domain alone holds anything (source_domain_egress 0), but all of B must leave the two domains
// through their 16 NICs:
//   source_egress = B / 800 GB/s = 8.8 us   at the source side
// The destination is spread as above (one TP8 rank per node on nodes 2-9), about B / 8 per domain.
TEST(LowerBoundCuts, SourceEgressBinds) {
  const auto inv = tiny();
  const auto src = build_shard_map(inv, {MegatronSpec{.tp = 2, .dp = 8}, range(0, 16)});
  const auto dst = build_shard_map(inv, {VllmSpec{.tp = 8, .dp = 1}, one_gpu_per_node(2)});
  const auto lb = lower_bound(plan(inv, src, dst), src, dst, dgx_nodes(10));
  expect_binds(lb, "source_egress", "source side", kTinyB, 800e9);
  EXPECT_EQ(find_cut(lb, "source_domain_egress"), nullptr);  // no bytes: not listed
}

// dest_domain_ingress: the usual disaggregated case, node 0 holds the model (Megatron TP2 x DP4), node 1
// needs it (vLLM TP8): all of B enters domain 1 through its 8 NICs, B / 400 GB/s at domain 1. The
// source side sends the same B through the same 400 GB/s (a tie, reported below it: the
// destination cut is listed, and wins, first).
TEST(LowerBoundCuts, DestinationDomainIngressBinds) {
  const auto inv = tiny();
  const auto src = build_shard_map(inv, {MegatronSpec{.tp = 2, .dp = 4}, range(0, 8)});
  const auto dst = build_shard_map(inv, {VllmSpec{.tp = 8, .dp = 1}, range(8, 8)});
  const auto lb = lower_bound(plan(inv, src, dst), src, dst, dgx_nodes(2));
  EXPECT_EQ(lb.binding.cut, "dest_domain_ingress");
  EXPECT_EQ(lb.binding.where, "domain 1");
  EXPECT_DOUBLE_EQ(lb.binding.bytes.as_double(), kTinyB);
  EXPECT_NEAR(lb.time.value, kTinyB / 400e9, 1e-12 * lb.time.value);
  const CutBound* side = find_cut(lb, "source_egress");
  ASSERT_NE(side, nullptr);
  EXPECT_NEAR(side->time().value, lb.time.value, 1e-12 * lb.time.value);
}

// ------------------------------------------------------- the fabric above the NICs (FabricGroup)
//
// DGX H100 nodes as above (8 GPUs, 8 rails, NICs 50 GB/s). Generated fabric capacities
// (topology_yaml.cpp), per direction:
//   leaf <-> each spine   D_leaf / o / S       D_leaf = NICs on the leaf x 50 GB/s
//   spine <-> each core   D_spine / o_c / K    D_spine = the spine's leaf links, K = cores / S
namespace {

Topology dgx_fabric(int nodes, const std::string& fabric) {
  return Topology::parse("name: dgxf\ncluster:\n  template: dgx-h100\n  nodes: " + std::to_string(nodes) +
                             "\nfabric:\n" + fabric,
                         "dgxf.yaml");
}

std::vector<GpuId> join(std::vector<GpuId> a, const std::vector<GpuId>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

// dest_fabric_ingress at a leaf group: 6 nodes, 2 per leaf group (3 groups), 4 spines, 4:1
// oversubscribed. A rail leaf has 2 NICs, 100 GB/s down and 100 / 4 = 25 GB/s up (4 links of
// 6.25 GB/s); a group has 8 rail leaves: 8 x 25 = 200 GB/s into it from the spines.
// Source Megatron TP2 x DP8 on nodes 0 and 2 (whole replicas in groups 0 and 1, so no group alone
// holds anything: source_fabric_egress has no bytes); destination vLLM TP8 on node 4 (group 2),
// which needs all of B and holds none of it:
//   dest_fabric_ingress  = B / 200 GB/s                 <- binding, at leaf group 2
//   dest_domain_ingress  = B / (8 x 50 GB/s) = B / 400 GB/s
//   source_egress        = B / (16 x 50 GB/s) = B / 800 GB/s
// Without the fabric cut the bound read B / 400 GB/s: half the time any schedule needs. The striped
// schedule reaches B / 200 GB/s: B / 8 per rail through each leaf's 25 GB/s of uplinks.
TEST(LowerBoundCuts, DestinationFabricIngressBindsAtAnOversubscribedLeafGroup) {
  const auto inv = tiny();
  const auto topo = dgx_fabric(6, "  nodes_per_leaf: 2\n  spines: 4\n  oversubscription: 4\n");
  ASSERT_EQ(topo.fabric_groups().size(), 3u);  // three leaf groups, no core layer
  EXPECT_DOUBLE_EQ(topo.fabric_groups()[2].ingress.value, 200e9);
  const auto src = build_shard_map(inv, {MegatronSpec{.tp = 2, .dp = 8}, join(range(0, 8), range(16, 8))});
  const auto dst = build_shard_map(inv, {VllmSpec{.tp = 8, .dp = 1}, range(32, 8)});
  const auto ts = plan(inv, src, dst);
  const auto lb = lower_bound(ts, src, dst, topo);
  expect_binds(lb, "dest_fabric_ingress", "leaf group 2: 16 GPUs", kTinyB, 200e9);
  EXPECT_EQ(find_cut(lb, "source_fabric_egress"), nullptr);
  EXPECT_DOUBLE_EQ(find_cut(lb, "dest_domain_ingress")->capacity.value, 400e9);
  EXPECT_DOUBLE_EQ(find_cut(lb, "source_egress")->capacity.value, 800e9);
  const double t = achievable_time(ts, src, dst, topo);
  EXPECT_GE(t, lb.time.value * (1 - 1e-9));
  EXPECT_NEAR(t, lb.time.value, 1e-9 * t);
}

// source_fabric_egress at a pod: 6 nodes, one per leaf group, 2 leaf groups per pod (3 pods), 4
// spines per pod, 4 cores (K = 1) at 8:1. A spine's leaf links: 16 leaves x 50 / 4 = 12.5 GB/s =
// 200 GB/s; its one core link 200 / 8 = 25 GB/s; a pod's 4 spines: 100 GB/s out to the cores.
// Source Megatron TP2 x DP8 on nodes 0-1 (pod 0 alone holds the model); destination vLLM TP8 with
// two ranks on each of nodes 2-5 (pods 1 and 2 each need about half of B):
//   source_fabric_egress = B / 100 GB/s                 <- binding, at pod 0
//   dest_fabric_ingress  about (B / 2) / 100 GB/s
//   source_egress        = B / 800 GB/s (16 NICs); leaf groups hold whole replicas (no bytes)
TEST(LowerBoundCuts, SourceFabricEgressBindsAtAnOversubscribedPod) {
  const auto inv = tiny();
  const auto topo = dgx_fabric(6, "  nodes_per_leaf: 1\n  spines: 4\n  core: {leaf_groups_per_pod: 2, switches: 4, "
                                  "oversubscription: 8}\n");
  ASSERT_EQ(topo.fabric_groups().size(), 9u);  // six leaf groups, three pods
  EXPECT_EQ(topo.fabric_groups()[6].above, DeviceKind::Core);
  EXPECT_DOUBLE_EQ(topo.fabric_groups()[6].egress.value, 100e9);
  std::vector<GpuId> two_per_node;
  for (GpuId n = 2; n < 6; ++n) two_per_node = join(two_per_node, range(n * 8, 2));
  const auto src = build_shard_map(inv, {MegatronSpec{.tp = 2, .dp = 8}, range(0, 16)});
  const auto dst = build_shard_map(inv, {VllmSpec{.tp = 8, .dp = 1}, two_per_node});
  const auto ts = plan(inv, src, dst);
  const auto lb = lower_bound(ts, src, dst, topo);
  expect_binds(lb, "source_fabric_egress", "pod 0: 16 GPUs", kTinyB, 100e9);
  const CutBound* in = find_cut(lb, "dest_fabric_ingress");
  ASSERT_NE(in, nullptr);
  EXPECT_EQ(in->where.rfind("pod ", 0), 0u);
  EXPECT_GT(in->bytes.as_double(), kTinyB / 2);  // vLLM TP replicates the norms
  EXPECT_LT(in->bytes.as_double(), kTinyB * 0.51);
  EXPECT_GE(achievable_time(ts, src, dst, topo), lb.time.value * (1 - 1e-9));
}

// A fabric whose uplinks and downlinks differ (explicit form, `duplex: false` links; every
// generated fabric is symmetric). Two nodes, a and b, of 2 GPUs on one NVSwitch, each GPU with its
// own NIC (PCIe 64 GB/s, NIC 50 GB/s) on its node's leaf; the two leaves join one spine:
//   leaf_a -> spine 10 GB/s (up),  spine -> leaf_a 30 GB/s (down)
//   leaf_b -> spine 40 GB/s (up),  spine -> leaf_b 20 GB/s (down)
// Taking the spine out leaves two leaf groups: group 0 (node a) with 30 GB/s into it and 10 GB/s
// out of it, group 1 (node b) with 20 in and 40 out: a group's ingress is the links from the tier
// above into it, its egress the links out of it to that tier.
// Megatron DP2 on one node (each GPU a whole copy), vLLM DP2 on the other: B = the tiny model's
// bytes must leave the source group and enter the destination group.
//   a -> b: source_fabric_egress = B / 10 GB/s (leaf_a's uplink)  <- binding, at leaf group 0
//           dest_fabric_ingress  = B / 20 GB/s (leaf_b's downlink)
//   b -> a: source_fabric_egress = B / 40 GB/s (leaf_b's uplink)
//           dest_fabric_ingress  = B / 30 GB/s (leaf_a's downlink) <- binding, at leaf group 0
// The domain cuts are looser: 2 GPUs x min(50, 64) GB/s = B / 100 GB/s each way. Sending the whole
// model from one GPU over its node's leaf (direct) reaches the bound: B through the binding link.
TEST(LowerBoundCuts, FabricGroupCutsFollowTheDirectionOfAsymmetricLinks) {
  const auto topo = Topology::parse(R"(name: asymmetric
devices:
  - {name: a/gpu0, kind: gpu, node: a}
  - {name: a/gpu1, kind: gpu, node: a}
  - {name: b/gpu0, kind: gpu, node: b}
  - {name: b/gpu1, kind: gpu, node: b}
  - {name: a/nvswitch, kind: nvswitch}
  - {name: b/nvswitch, kind: nvswitch}
  - {name: a/nic0, kind: nic, node: a, rail: 0}
  - {name: a/nic1, kind: nic, node: a, rail: 1}
  - {name: b/nic0, kind: nic, node: b, rail: 0}
  - {name: b/nic1, kind: nic, node: b, rail: 1}
  - {name: leaf_a, kind: leaf}
  - {name: leaf_b, kind: leaf}
  - {name: spine, kind: spine}
links:
  - {from: a/gpu0, to: a/nvswitch, kind: nvlink, bandwidth: 450GBps}
  - {from: a/gpu1, to: a/nvswitch, kind: nvlink, bandwidth: 450GBps}
  - {from: b/gpu0, to: b/nvswitch, kind: nvlink, bandwidth: 450GBps}
  - {from: b/gpu1, to: b/nvswitch, kind: nvlink, bandwidth: 450GBps}
  - {from: a/gpu0, to: a/nic0, kind: pcie, bandwidth: 64GBps}
  - {from: a/gpu1, to: a/nic1, kind: pcie, bandwidth: 64GBps}
  - {from: b/gpu0, to: b/nic0, kind: pcie, bandwidth: 64GBps}
  - {from: b/gpu1, to: b/nic1, kind: pcie, bandwidth: 64GBps}
  - {from: a/nic0, to: leaf_a, kind: network, bandwidth: 50GBps}
  - {from: a/nic1, to: leaf_a, kind: network, bandwidth: 50GBps}
  - {from: b/nic0, to: leaf_b, kind: network, bandwidth: 50GBps}
  - {from: b/nic1, to: leaf_b, kind: network, bandwidth: 50GBps}
  - {from: leaf_a, to: spine, kind: network, bandwidth: 10GBps, duplex: false}
  - {from: spine, to: leaf_a, kind: network, bandwidth: 30GBps, duplex: false}
  - {from: leaf_b, to: spine, kind: network, bandwidth: 40GBps, duplex: false}
  - {from: spine, to: leaf_b, kind: network, bandwidth: 20GBps, duplex: false}
)", "asymmetric.yaml");
  ASSERT_EQ(topo.fabric_groups().size(), 2u);
  EXPECT_DOUBLE_EQ(topo.fabric_groups()[0].ingress.value, 30e9);
  EXPECT_DOUBLE_EQ(topo.fabric_groups()[0].egress.value, 10e9);
  EXPECT_DOUBLE_EQ(topo.fabric_groups()[1].ingress.value, 20e9);
  EXPECT_DOUBLE_EQ(topo.fabric_groups()[1].egress.value, 40e9);
  const auto inv = tiny();
  auto bound = [&](GpuId from, GpuId to) {
    const auto src = build_shard_map(inv, {MegatronSpec{.dp = 2}, range(from, 2)});
    const auto dst = build_shard_map(inv, {VllmSpec{.tp = 1, .dp = 2}, range(to, 2)});
    const auto ts = plan(inv, src, dst);
    const auto lb = lower_bound(ts, src, dst, topo);
    EXPECT_NEAR(achievable_time(ts, src, dst, topo), lb.time.value, 1e-9 * lb.time.value);
    return lb;
  };
  const auto a_to_b = bound(0, 2);
  expect_binds(a_to_b, "source_fabric_egress", "leaf group 0: 2 GPUs", kTinyB, 10e9);
  const CutBound* in = find_cut(a_to_b, "dest_fabric_ingress");
  ASSERT_NE(in, nullptr);
  EXPECT_EQ(in->where, "leaf group 1: 2 GPUs");
  EXPECT_DOUBLE_EQ(in->capacity.value, 20e9);
  const auto b_to_a = bound(2, 0);
  expect_binds(b_to_a, "dest_fabric_ingress", "leaf group 0: 2 GPUs", kTinyB, 30e9);
  const CutBound* out = find_cut(b_to_a, "source_fabric_egress");
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(out->where, "leaf group 1: 2 GPUs");
  EXPECT_DOUBLE_EQ(out->capacity.value, 40e9);
}
