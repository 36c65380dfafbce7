// Several clusters on one fabric (`clusters:`): counts, capacities worked by hand, structural routes
// against graph search, the one-cluster list against the `cluster:` form, errors and warnings.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "reshard/model/errors.hpp"
#include "reshard/model/topology.hpp"

using namespace reshard::model;

namespace {

std::set<std::vector<LinkId>> path_set(const Route& r) {
  std::set<std::vector<LinkId>> s;
  for (const auto& p : r.paths) s.insert(p.links);
  return s;
}

int count_kind(const Topology& t, DeviceKind k) {
  int n = 0;
  for (const auto& d : t.devices()) n += d.kind == k;
  return n;
}

std::string load_error(const std::string& text) {
  try {
    Topology::parse(text, "two.yaml");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

// The shipped DGX H100 training + GB200 NVL72 inference cluster, joined by a core at 2:1.
TEST(TopologyClusters, ShippedTrainInferCountsAndCapacities) {
  const auto t = Topology::load(std::string(RESHARD_SOURCE_DIR) + "/topologies/h100-train-gb200-infer.yaml");
  // train: 32 nodes x 8 = 256 GPUs, 32 domains; infer: 4 racks x 18 trays x 4 = 288 GPUs, 4 domains.
  EXPECT_EQ(t.gpu_count(), 544);
  EXPECT_EQ(t.node_count(), 32 + 72);
  EXPECT_EQ(t.domain_count(), 36);
  EXPECT_EQ(t.rail_count(), 8);
  EXPECT_EQ(t.device(t.gpu_device(0)).name, "train/node0/gpu0");
  EXPECT_EQ(t.device(t.gpu_device(255)).name, "train/node31/gpu7");
  EXPECT_EQ(t.device(t.gpu_device(256)).name, "infer/rack0/tray0/gpu0");
  EXPECT_EQ(t.device(t.gpu_device(543)).name, "infer/rack3/tray17/gpu3");
  EXPECT_EQ(t.gpus_in_domain(t.domain_of(256)).size(), 72u);
  // Leaves: one group per cluster, a leaf per rail: 8 + 4. Spines: 8 per cluster. Cores: 16.
  EXPECT_EQ(count_kind(t, DeviceKind::Leaf), 12);
  EXPECT_EQ(count_kind(t, DeviceKind::Spine), 16);
  EXPECT_EQ(count_kind(t, DeviceKind::Core), 16);
  // leaf -> spine, per spine: D_leaf / o / S
  //   train leaf: 32 NICs x 50 GB/s / 1 / 8 = 200 GB/s;  infer leaf: 72 NICs x 50 GB/s / 8 = 450 GB/s
  // spine -> core, per core: D_spine / o_core / K, K = 16 / 8 = 2
  //   train spine: 8 leaves x 200 = 1600 GB/s -> 1600 / 2 / 2 = 400 GB/s
  //   infer spine: 4 leaves x 450 = 1800 GB/s -> 1800 / 2 / 2 = 450 GB/s
  for (const auto& l : t.links()) {
    const auto& a = t.device(l.from);
    const auto& b = t.device(l.to);
    const bool train = a.name.rfind("train/", 0) == 0;
    if (a.kind == DeviceKind::Leaf && b.kind == DeviceKind::Spine) {
      EXPECT_DOUBLE_EQ(l.bandwidth.value, train ? 200e9 : 450e9) << a.name;
      EXPECT_EQ(b.name.substr(0, 6), a.name.substr(0, 6));  // a cluster's leaves reach its own spines
    }
    if (a.kind == DeviceKind::Spine && b.kind == DeviceKind::Core) {
      EXPECT_DOUBLE_EQ(l.bandwidth.value, train ? 400e9 : 450e9);
    }
  }
  // Per GPU: the template's NVLink; both templates' NIC and host link.
  EXPECT_DOUBLE_EQ(t.gpu_nvlink_bandwidth(0).value, 450e9);
  EXPECT_DOUBLE_EQ(t.gpu_nvlink_bandwidth(256).value, 900e9);
  // Between the clusters: GPU -> NIC -> leaf -> spine s -> core (s, k) -> spine s -> leaf -> NIC -> GPU,
  // S x K = 8 x 2 = 16 equal paths of 8 links.
  const Route r = t.route(0, 256);
  EXPECT_EQ(r.kind, LinkKind::Network);
  ASSERT_EQ(r.paths.size(), 16u);
  for (const auto& p : r.paths) EXPECT_EQ(p.links.size(), 8u);
  // Inside the training cluster, GPU 0 (rail 0 of node 0) -> GPU 8 (rail 0 of node 1): one leaf.
  EXPECT_EQ(t.route(0, 8).paths.size(), 1u);
  EXPECT_TRUE(t.warnings().empty());
}

// Fabric groups of the same cluster. Leaf groups (spines and cores taken out): one per cluster,
// cut = its leaves' spine links: train 8 leaves x 8 spines x 200 = 12.8 TB/s, infer 4 x 8 x 450 =
// 14.4 TB/s. Pods (cores taken out): one per cluster, cut = its spines' core links: train 8 spines
// x 2 cores x 400 = 6.40 TB/s, infer 8 x 2 x 450 = 7.20 TB/s (half: the core's 2:1). Per direction.
TEST(TopologyClusters, FabricGroupsOfTheShippedTrainInfer) {
  const auto t = Topology::load(std::string(RESHARD_SOURCE_DIR) + "/topologies/h100-train-gb200-infer.yaml");
  const auto& g = t.fabric_groups();
  ASSERT_EQ(g.size(), 4u);
  const struct {
    DeviceKind above;
    std::int32_t gpus;
    std::size_t domains;
    double cut;
    const char* name;
  } want[] = {{DeviceKind::Spine, 256, 32, 12.8e12, "leaf group 0: 256 GPUs"},
              {DeviceKind::Spine, 288, 4, 14.4e12, "leaf group 1: 288 GPUs"},
              {DeviceKind::Core, 256, 32, 6.4e12, "pod 0: 256 GPUs"},
              {DeviceKind::Core, 288, 4, 7.2e12, "pod 1: 288 GPUs"}};
  for (std::size_t i = 0; i < 4; ++i) {
    SCOPED_TRACE(want[i].name);
    EXPECT_EQ(g[i].above, want[i].above);
    EXPECT_EQ(g[i].gpus, want[i].gpus);
    EXPECT_EQ(g[i].domains.size(), want[i].domains);
    EXPECT_NEAR(g[i].ingress.value, want[i].cut, 1e-6 * want[i].cut);
    EXPECT_NEAR(g[i].egress.value, want[i].cut, 1e-6 * want[i].cut);
    EXPECT_EQ(to_string(g[i]), want[i].name);
  }
  EXPECT_EQ(g[0].domains.front(), 0);
  EXPECT_EQ(g[1].domains.front(), 32);
  // One leaf group and no core: no part of the cluster is cut off by its switches.
  EXPECT_TRUE(Topology::load(std::string(RESHARD_SOURCE_DIR) + "/topologies/dgx-h100-2n.yaml").fabric_groups().empty());
}

// An explicit cluster whose NVLink runs through a switch of kind spine: g0 and g1 form one domain
// through spine0, g2 is a domain of its own, each GPU with its own NIC and leaf under spine0. Taken
// out, spine0 would split g0 from g1; the domain stays whole, so leaf group 0 is {g0, g1} with every
// link from spine0 into it as its cut: 2 leaf links x 50 + 2 NVLink links x 450 = 1 000 GB/s.
TEST(TopologyClusters, FabricGroupKeepsAnNvlinkDomainWhole) {
  std::string y = "name: nvl-through-spine\ndevices:\n  - {name: spine0, kind: spine}\n";
  std::string links = "links:\n";
  for (int i = 0; i < 3; ++i) {
    const std::string n = std::to_string(i);
    y += "  - {name: g" + n + ", kind: gpu, node: n" + n + "}\n  - {name: nic" + n + ", kind: nic, node: n" + n +
         ", rail: 0}\n  - {name: leaf" + n + ", kind: leaf}\n";
    links += "  - {from: g" + n + ", to: nic" + n + ", kind: pcie, bandwidth: 64GBps}\n  - {from: nic" + n +
             ", to: leaf" + n + ", kind: network, bandwidth: 50GBps}\n  - {from: leaf" + n +
             ", to: spine0, kind: network, bandwidth: 50GBps}\n";
    if (i < 2) links += "  - {from: g" + n + ", to: spine0, kind: nvlink, bandwidth: 450GBps}\n";
  }
  const Topology t = Topology::parse(y + links, "nvl-through-spine.yaml");
  ASSERT_EQ(t.domain_count(), 2);
  ASSERT_EQ(t.fabric_groups().size(), 2u);
  const auto& g = t.fabric_groups()[0];
  EXPECT_EQ(g.gpus, 2);
  EXPECT_EQ(g.domains, std::vector<std::int32_t>{t.domain_of(0)});
  EXPECT_DOUBLE_EQ(g.ingress.value, 2 * 50e9 + 2 * 450e9);
  EXPECT_DOUBLE_EQ(g.egress.value, 2 * 50e9 + 2 * 450e9);
  EXPECT_DOUBLE_EQ(t.fabric_groups()[1].ingress.value, 50e9);
}

// Property: the structural routes equal a breadth-first search over the graph, for every GPU pair,
// with a shared spine layer and with one pod per cluster under a core layer.
TEST(TopologyClusters, StructuralRoutesEqualGraphSearch) {
  for (const std::string fabric : {"fabric: {spines: 2, oversubscription: 2}\n",
                                   "fabric: {spines: 2, core: {switches: 4, oversubscription: 3}}\n"}) {
    SCOPED_TRACE(fabric);
    const auto t = Topology::parse(
        "clusters:\n"
        "  - {name: a, template: dgx-h100, nodes: 3, nodes_per_leaf: 2}\n"
        "  - {name: b, template: gb200-nvl72, racks: 1, nodes_per_leaf: 9}\n" +
            fabric,
        "prop.yaml");
    ASSERT_EQ(t.gpu_count(), 24 + 72);
    for (GpuId a = 0; a < t.gpu_count(); a += 1)
      for (GpuId b = 0; b < t.gpu_count(); b += 5) {
        if (a == b) continue;
        const Route s = t.route(a, b);
        const Route q = t.search_route(a, b);
        ASSERT_EQ(path_set(s), path_set(q)) << a << " -> " << b;
        EXPECT_EQ(s.kind, q.kind);
        EXPECT_NEAR(s.latency.value, q.latency.value, 1e-15);
      }
  }
}

// A list of one cluster is the `cluster:` form with the cluster's name in front of its device names
// (the spine layer without a core is shared, unprefixed).
TEST(TopologyClusters, OneClusterListEqualsTheClusterForm) {
  const auto one = Topology::parse(
      "cluster: {template: dgx-h100, nodes: 4, nic_speed: 200Gbps}\n"
      "fabric: {nodes_per_leaf: 2, spines: 2, oversubscription: 2}\n",
      "one.yaml");
  const auto list = Topology::parse(
      "clusters: [{name: x, template: dgx-h100, nodes: 4, nic_speed: 200Gbps, nodes_per_leaf: 2}]\n"
      "fabric: {spines: 2, oversubscription: 2}\n",
      "list.yaml");
  ASSERT_EQ(one.devices().size(), list.devices().size());
  ASSERT_EQ(one.links().size(), list.links().size());
  for (std::size_t i = 0; i < one.links().size(); ++i) {
    const auto& a = one.links()[i];
    const auto& b = list.links()[i];
    EXPECT_EQ(a.kind, b.kind);
    EXPECT_DOUBLE_EQ(a.bandwidth.value, b.bandwidth.value);
    const auto& d = one.device(a.from);
    const bool shared = d.kind == DeviceKind::Spine || d.kind == DeviceKind::Core;  // not a cluster's own
    EXPECT_EQ((shared ? "" : "x/") + d.name, list.device(b.from).name);
  }
  EXPECT_DOUBLE_EQ(one.bisection_bandwidth().value, list.bisection_bandwidth().value);
  for (GpuId g = 0; g < one.gpu_count(); g += 3) EXPECT_EQ(path_set(one.route(0, g)), path_set(list.route(0, g)));
}

TEST(TopologyClusters, ErrorsNameTheLineAndKey) {
  const std::string two =
      "clusters:\n"                                           // 1
      "  - {name: a, template: dgx-h100, nodes: 2}\n";        // 2
  EXPECT_EQ(load_error(two + "  - {name: a, template: dgx-h100, nodes: 2}\nfabric: {spines: 1}\n"),
            "two.yaml:3: clusters[1].name: duplicate cluster name 'a'");
  EXPECT_NE(load_error(two + "  - {name: b, template: dgx-h999, nodes: 2}\nfabric: {spines: 1}\n")
                .find("two.yaml:3: clusters[1].template: unknown node template 'dgx-h999'"),
            std::string::npos);
  EXPECT_NE(load_error(two + "  - {name: b, template: gb200-nvl72, nodes: 2}\nfabric: {spines: 1}\n")
                .find("two.yaml:3: clusters[1].nodes: gb200-nvl72 is counted in racks"),
            std::string::npos);
  EXPECT_NE(load_error(two + "  - {name: b, template: dgx-h100, nodes: 1}\nfabric: {spines: 3, core: {switches: 4}}\n")
                .find("fabric.core.switches: the core switches must be a multiple of the spines per cluster (3)"),
            std::string::npos);
  EXPECT_NE(load_error(two + "fabric: {spines: 1, nodes_per_leaf: 1}\n").find("two.yaml:3: fabric.nodes_per_leaf"),
            std::string::npos);
  EXPECT_NE(load_error(two + "cluster: {template: dgx-h100, nodes: 1}\n").find("not both"), std::string::npos);
  EXPECT_NE(load_error("clusters: []\n").find("clusters: needs at least one cluster"), std::string::npos);
}

TEST(TopologyClusters, FastNicWarningNamesTheCluster) {
  const auto t = Topology::parse(
      "clusters:\n"
      "  - {name: a, template: dgx-h100, nodes: 1}\n"
      "  - {name: b, template: dgx-h100, nodes: 1, nic_speed: 1600Gbps}\n"
      "fabric: {spines: 1}\n",
      "fast.yaml");
  ASSERT_EQ(t.warnings().size(), 1u);
  EXPECT_EQ(t.warnings()[0],
            "fast.yaml:3: clusters[1].nic_speed: cluster 'b': the NIC (200 GB/s) is faster than the GPU<->NIC host "
            "link (PCIe 64.0 GB/s): the host link caps each GPU's network bandwidth at 64.0 GB/s");
  // 8 GPUs of b: each capped by its 64 GB/s host link; a's by its 50 GB/s NIC.
  EXPECT_DOUBLE_EQ(t.host_link(8)->bandwidth.value, 64e9);
}
