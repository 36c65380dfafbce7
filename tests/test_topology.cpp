// Topology: templates, generator, domains, routes, bisection, explicit form. Every expected number
// is worked out by hand in the comment next to it.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>

#include "reshard/model/errors.hpp"
#include "reshard/model/topology.hpp"

using namespace reshard::model;

namespace {

Topology shipped(const std::string& name) {
  return Topology::load(std::string(RESHARD_SOURCE_DIR) + "/topologies/" + name);
}

// The device names visited by a path, from the source GPU to the destination GPU.
std::vector<std::string> hops(const Topology& t, const Path& p) {
  std::vector<std::string> out;
  if (p.links.empty()) return out;
  out.push_back(t.device(t.link(p.links.front()).from).name);
  for (LinkId id : p.links) out.push_back(t.device(t.link(id).to).name);
  return out;
}

// Paths as comparable sets of link lists.
std::set<std::vector<LinkId>> path_set(const Route& r) {
  std::set<std::vector<LinkId>> s;
  for (const auto& p : r.paths) s.insert(p.links);
  return s;
}

const Device& far_end(const Topology& t, LinkId id) { return t.device(t.link(id).to); }

}  // namespace

// ---------------------------------------------------------------- templates and the generator

TEST(TopologyGenerator, DgxH100TwoNodesCountsAndBandwidths) {
  const auto t = shipped("dgx-h100-2n.yaml");
  EXPECT_EQ(t.name(), "dgx-h100-2n");
  EXPECT_TRUE(t.generated());
  // 2 nodes x 8 GPUs = 16 GPUs; one NVLink domain per DGX node.
  EXPECT_EQ(t.gpu_count(), 16);
  EXPECT_EQ(t.node_count(), 2);
  EXPECT_EQ(t.domain_count(), 2);
  EXPECT_EQ(t.rail_count(), 8);
  // Devices: 16 GPUs + 2 NVSwitch + 16 NICs + 8 rail leaves (1 group x 8 rails) + 4 spines = 46.
  EXPECT_EQ(t.device_count(), 46);
  // Directed links: per GPU 2 NVLink + 2 PCIe + 2 NIC-leaf = 6 -> 96; leaf-spine 8 x 4 x 2 = 64.
  EXPECT_EQ(t.link_count(), 96 + 64);
  for (GpuId g = 0; g < 16; ++g) {
    EXPECT_DOUBLE_EQ(t.gpu_nvlink_bandwidth(g).value, 450e9);  // 900 GB/s bidirectional / 2
    EXPECT_DOUBLE_EQ(t.gpu_nic_bandwidth(g).value, 50e9);      // 400 Gb/s / 8 bits
    EXPECT_EQ(t.node_of(g), g / 8);
    EXPECT_EQ(t.rail_of(g), g % 8);
    EXPECT_EQ(t.domain_of(g), g / 8);
  }
  // The GPU <-> NIC host link is PCIe Gen5 x16, 64 GB/s per direction.
  const Route r = t.route(0, 8);
  ASSERT_EQ(r.paths.size(), 1u);
  const Link& host = t.link(r.paths[0].links.front());
  EXPECT_EQ(host.kind, LinkKind::PCIe);
  EXPECT_DOUBLE_EQ(host.bandwidth.value, 64e9);
  // NIC links: egress leaves the GPU's NIC toward its leaf, ingress comes back.
  const Link& out = t.link(*t.nic_egress(3));
  const Link& in = t.link(*t.nic_ingress(3));
  EXPECT_EQ(t.device(out.from).name, "node0/nic3");
  EXPECT_EQ(t.device(out.to).name, "group0/leaf-rail3");
  EXPECT_EQ(in.from, out.to);
  EXPECT_EQ(in.to, out.from);
  EXPECT_EQ(*t.nic_of(3), out.from);
}

// One small cluster per template: GPUs per domain, NVLink and NIC speed per direction, HBM bandwidth
// and capacity per GPU.
TEST(TopologyGenerator, EveryTemplate) {
  struct Case {
    const char* tmpl;
    const char* size;
    int gpus, nodes, domains;
    double nvlink, nic, host;
    double hbm, memory;
  };
  const Case cases[] = {
      // DGX: 2 nodes x 8 GPUs; NVL72: 1 rack = 18 trays x 4 GPUs = 72 GPUs in one domain.
      {"dgx-h100", "nodes: 2", 16, 2, 2, 450e9, 50e9, 64e9, 3.35e12, 80e9},
      {"dgx-h200", "nodes: 2", 16, 2, 2, 450e9, 50e9, 64e9, 4.8e12, 141e9},
      {"dgx-b200", "nodes: 2", 16, 2, 2, 900e9, 50e9, 64e9, 8e12, 180e9},
      {"gb200-nvl72", "racks: 1", 72, 18, 1, 900e9, 50e9, 64e9, 8e12, 186e9},
      {"gb300-nvl72", "racks: 1", 72, 18, 1, 900e9, 100e9, 128e9, 8e12, 288e9},  // 800 Gb/s = 100 GB/s; PCIe Gen6
      // HGX: 2 nodes x 8 GPUs, one NVLink domain per node. NVIDIA H800 SXM datasheet: NVLink 400 GB/s
      // bidirectional = 200 GB/s per direction, HBM as H100 SXM (3.35 TB/s, 80 GB). NVIDIA H20
      // datasheet: NVLink 900 GB/s bidirectional = 450 GB/s per direction, HBM3 4.0 TB/s, 96 GB.
      // Neither datasheet sets the NICs: 400 Gb/s = 50 GB/s per GPU behind PCIe Gen5 x16 (64 GB/s),
      // as DGX H100 (the templates' assumption, docs/topology.md).
      {"hgx-h800", "nodes: 2", 16, 2, 2, 200e9, 50e9, 64e9, 3.35e12, 80e9},
      {"hgx-h20", "nodes: 2", 16, 2, 2, 450e9, 50e9, 64e9, 4.0e12, 96e9},
  };
  EXPECT_EQ(Topology::template_names().size(), std::size(cases));
  for (const auto& c : cases) {
    SCOPED_TRACE(c.tmpl);
    const auto t = Topology::parse(std::string("cluster:\n  template: ") + c.tmpl + "\n  " + c.size +
                                       "\nfabric:\n  spines: 2\n",
                                   "t.yaml");
    EXPECT_EQ(t.name(), "t");  // defaults to the file's stem
    EXPECT_EQ(t.gpu_count(), c.gpus);
    EXPECT_EQ(t.node_count(), c.nodes);
    EXPECT_EQ(t.domain_count(), c.domains);
    EXPECT_DOUBLE_EQ(t.gpu_nvlink_bandwidth(0).value, c.nvlink);
    EXPECT_DOUBLE_EQ(t.gpu_nic_bandwidth(c.gpus - 1).value, c.nic);
    // host link of the last GPU: the link into its NIC that is not a network link
    const Link& nic_in = t.link(*t.nic_ingress(c.gpus - 1));
    const DeviceId nic = nic_in.to;
    double host = 0;
    for (const auto& l : t.links())
      if (l.to == nic && l.kind == LinkKind::PCIe) host = l.bandwidth.value;
    EXPECT_DOUBLE_EQ(host, c.host);
    EXPECT_DOUBLE_EQ(t.gpu_memory_bandwidth(c.gpus - 1).value, c.hbm);
    EXPECT_DOUBLE_EQ(t.gpu_memory(c.gpus - 1).as_double(), c.memory);
  }
}

// The two shipped HGX clusters of the checkpoint-engine benchmarks (MoonshotAI/checkpoint-engine
// README, 'Benchmark': 8 H800 in one node, 16 and 256 H20).
TEST(TopologyGenerator, ShippedHgxClusters) {
  const auto h800 = shipped("hgx-h800-1n.yaml");
  // One node: 8 GPUs in one NVLink domain, 200 GB/s per direction (400 GB/s bidirectional, H800
  // SXM datasheet), 3.35 TB/s and 80 GB of HBM each.
  EXPECT_EQ(h800.gpu_count(), 8);
  EXPECT_EQ(h800.node_count(), 1);
  EXPECT_EQ(h800.domain_count(), 1);
  for (GpuId g = 0; g < 8; ++g) {
    EXPECT_DOUBLE_EQ(h800.gpu_nvlink_bandwidth(g).value, 200e9);
    EXPECT_DOUBLE_EQ(h800.gpu_memory_bandwidth(g).value, 3.35e12);
    EXPECT_DOUBLE_EQ(h800.gpu_memory(g).as_double(), 80e9);
  }
  const auto h20 = shipped("hgx-h20-32n.yaml");
  // 32 nodes x 8 GPUs = 256 GPUs, a domain per node; 450 GB/s NVLink per direction (900 GB/s
  // bidirectional, H20 datasheet), 4.0 TB/s and 96 GB of HBM, NICs at 400 Gb/s = 50 GB/s (assumed).
  EXPECT_EQ(h20.gpu_count(), 256);
  EXPECT_EQ(h20.node_count(), 32);
  EXPECT_EQ(h20.domain_count(), 32);
  EXPECT_EQ(h20.rail_count(), 8);
  // The fabric of dgx-h100-2n with 32 nodes in its one leaf group: devices 256 GPUs + 32 NVSwitch +
  // 256 NICs + 8 rail leaves + 4 spines = 556; directed links per GPU 2 NVLink + 2 PCIe + 2
  // NIC-leaf = 6 -> 1 536, leaf-spine 8 x 4 x 2 = 64.
  EXPECT_EQ(h20.device_count(), 556);
  EXPECT_EQ(h20.link_count(), 1536 + 64);
  for (GpuId g : {0, 255}) {
    EXPECT_DOUBLE_EQ(h20.gpu_nvlink_bandwidth(g).value, 450e9);
    EXPECT_DOUBLE_EQ(h20.gpu_nic_bandwidth(g).value, 50e9);
    EXPECT_DOUBLE_EQ(h20.gpu_memory_bandwidth(g).value, 4.0e12);
    EXPECT_DOUBLE_EQ(h20.gpu_memory(g).as_double(), 96e9);
    EXPECT_EQ(h20.node_of(g), g / 8);
    EXPECT_EQ(h20.rail_of(g), g % 8);
  }
}

TEST(TopologyGenerator, NicSpeedOverrideAndOversubscription) {
  // 4 DGX H100 nodes, 2 per leaf group -> 2 groups x 8 rails = 16 leaves, 2 spines, NICs at
  // 200 Gb/s = 25 GB/s, oversubscription 2.
  //   leaf downlink total D = 2 NICs x 25 GB/s = 50 GB/s
  //   leaf uplink total    = D / 2 = 25 GB/s, per spine 25 / 2 = 12.5 GB/s
  const auto t = Topology::parse(
      "name: small\ncluster:\n  template: dgx-h100\n  nodes: 4\n  nic_speed: 200Gbps\n"
      "fabric:\n  nodes_per_leaf: 2\n  spines: 2\n  oversubscription: 2\n",
      "small.yaml");
  EXPECT_DOUBLE_EQ(t.gpu_nic_bandwidth(0).value, 25e9);
  int leaf_spine = 0;
  for (const auto& l : t.links())
    if (t.device(l.from).kind == DeviceKind::Leaf && t.device(l.to).kind == DeviceKind::Spine) {
      ++leaf_spine;
      EXPECT_DOUBLE_EQ(l.bandwidth.value, 12.5e9);
    }
  EXPECT_EQ(leaf_spine, 16 * 2);
}

TEST(TopologyGenerator, CoreLayerCapacities) {
  // 8 DGX H100 nodes, 2 per leaf group (4 groups x 8 rails = 32 leaves), 2 groups per pod (2 pods),
  // 2 spines per pod, 4 core switches (K = 4 / 2 = 2 per plane), core oversubscription 2.
  //   leaf uplink per spine  = 2 NICs x 50 GB/s / 1 / 2 = 50 GB/s
  //   spine downlink total   = 16 leaves of its pod x 50 GB/s = 800 GB/s
  //   spine uplink per core  = 800 / 2 / 2 = 200 GB/s
  const auto t = Topology::parse(
      "cluster: {template: dgx-h100, nodes: 8}\n"
      "fabric:\n  nodes_per_leaf: 2\n  spines: 2\n"
      "  core: {leaf_groups_per_pod: 2, switches: 4, oversubscription: 2}\n",
      "core.yaml");
  int spines = 0, cores = 0, up = 0;
  for (const auto& d : t.devices()) {
    spines += d.kind == DeviceKind::Spine;
    cores += d.kind == DeviceKind::Core;
  }
  EXPECT_EQ(spines, 4);  // 2 pods x 2
  EXPECT_EQ(cores, 4);
  for (const auto& l : t.links()) {
    if (t.device(l.from).kind == DeviceKind::Leaf && t.device(l.to).kind == DeviceKind::Spine) {
      EXPECT_DOUBLE_EQ(l.bandwidth.value, 50e9);
    }
    if (t.device(l.from).kind == DeviceKind::Spine && t.device(l.to).kind == DeviceKind::Core) {
      ++up;
      EXPECT_DOUBLE_EQ(l.bandwidth.value, 200e9);
    }
  }
  EXPECT_EQ(up, 4 * 2);  // every spine to the K = 2 cores of its plane
}

// ---------------------------------------------------------------- domains

TEST(TopologyDomains, Nvl72RackIsOneDomainOfEighteenTrays) {
  const auto t = shipped("gb200-nvl72-2r.yaml");
  // 2 racks x 72 = 144 GPUs; a node is a tray of 4 GPUs: 36 trays.
  EXPECT_EQ(t.gpu_count(), 144);
  EXPECT_EQ(t.node_count(), 36);
  ASSERT_EQ(t.domain_count(), 2);
  EXPECT_EQ(t.rail_count(), 4);
  for (int k = 0; k < 2; ++k) {
    const auto& gpus = t.gpus_in_domain(k);
    ASSERT_EQ(gpus.size(), 72u);
    EXPECT_EQ(gpus.front(), 72 * k);
    EXPECT_EQ(gpus.back(), 72 * k + 71);
  }
  // GPU 71 is rack 0, tray 17, GPU 3 -> node 17, rail 3; GPU 72 starts rack 1.
  EXPECT_EQ(t.node_of(71), 17);
  EXPECT_EQ(t.rail_of(71), 3);
  EXPECT_EQ(t.device(t.gpu_device(71)).name, "rack0/tray17/gpu3");
  EXPECT_EQ(t.domain_of(72), 1);
}

TEST(TopologyDomains, ShippedClustersMatchTheirNames) {
  struct Case {
    const char* file;
    int gpus, domains;
    double nvlink;
  };
  for (const auto& c : {Case{"dgx-h100-2n.yaml", 16, 2, 450e9}, Case{"dgx-h100-32n.yaml", 256, 32, 450e9},
                        Case{"dgx-h100-64n.yaml", 512, 64, 450e9}, Case{"gb200-nvl72-2r.yaml", 144, 2, 900e9},
                        Case{"gb200-nvl72-8r.yaml", 576, 8, 900e9}, Case{"gb200-nvl72-16r.yaml", 1152, 16, 900e9},
                        Case{"gb200-nvl72-k3.yaml", 9216, 128, 900e9}}) {
    SCOPED_TRACE(c.file);
    const auto t = shipped(c.file);
    EXPECT_EQ(t.gpu_count(), c.gpus);
    EXPECT_EQ(t.domain_count(), c.domains);
    EXPECT_DOUBLE_EQ(t.gpu_nvlink_bandwidth(c.gpus - 1).value, c.nvlink);
    EXPECT_DOUBLE_EQ(t.gpu_nic_bandwidth(c.gpus - 1).value, 50e9);
  }
}

// ---------------------------------------------------------------- routes

TEST(TopologyRoutes, DgxH100HopsRailsAndEcmp) {
  const auto t = shipped("dgx-h100-2n.yaml");
  // Same node: GPU -> NVSwitch -> GPU, latency 2 x 0.3 us.
  Route r = t.route(0, 5);
  EXPECT_TRUE(r.same_domain);
  EXPECT_EQ(r.kind, LinkKind::NVLink);
  ASSERT_EQ(r.paths.size(), 1u);
  EXPECT_EQ(hops(t, r.paths[0]), (std::vector<std::string>{"node0/gpu0", "node0/nvswitch", "node0/gpu5"}));
  EXPECT_EQ(r.paths[0].links, (std::vector<LinkId>{*t.nvlink_egress(0), *t.nvlink_ingress(5)}));
  EXPECT_NEAR(r.latency.value, 0.6e-6, 1e-15);

  // Same rail (GPU 3 of both nodes): turns around at the rail-3 leaf, one path.
  // Latency: PCIe 0.25 + NIC-leaf 1 + leaf-NIC 1 + PCIe 0.25 = 2.5 us.
  r = t.route(3, 11);
  EXPECT_FALSE(r.same_domain);
  EXPECT_EQ(r.kind, LinkKind::Network);
  ASSERT_EQ(r.paths.size(), 1u);
  EXPECT_EQ(hops(t, r.paths[0]), (std::vector<std::string>{"node0/gpu3", "node0/nic3", "group0/leaf-rail3",
                                                           "node1/nic3", "node1/gpu3"}));
  EXPECT_NEAR(r.latency.value, 2.5e-6, 1e-15);

  // Cross rail (rail 3 -> rail 4): through every one of the 4 spines (ECMP width 4), 6 links each.
  // Latency 2.5 us + 2 x 0.15 us (leaf-spine, spine-leaf) = 2.8 us.
  r = t.route(3, 12);
  ASSERT_EQ(r.paths.size(), 4u);
  EXPECT_NEAR(r.latency.value, 2.8e-6, 1e-15);
  std::set<std::string> spines;
  for (const auto& p : r.paths) {
    const auto h = hops(t, p);
    ASSERT_EQ(h.size(), 7u);
    EXPECT_EQ(h[2], "group0/leaf-rail3");
    EXPECT_EQ(h[4], "group0/leaf-rail4");
    EXPECT_EQ(h[6], "node1/gpu4");
    spines.insert(h[3]);
  }
  EXPECT_EQ(spines, (std::set<std::string>{"spine0", "spine1", "spine2", "spine3"}));
  // Every GPU sends through its own rail's leaf.
  for (GpuId g = 0; g < t.gpu_count(); ++g) EXPECT_EQ(far_end(t, *t.nic_egress(g)).rail, t.rail_of(g));
}

TEST(TopologyRoutes, FrontierPodsAndCore) {
  const auto t = shipped("gb200-nvl72-k3.yaml");
  // Leaf groups of 144 trays = 8 racks = 576 GPUs; pods of 4 groups = 2304 GPUs.
  // GPU 0 (rack 0) -> GPU 4 (rack 0, next tray, same rail 0): same NVLink domain.
  EXPECT_TRUE(t.route(0, 4).same_domain);
  // GPU 0 -> GPU 72 (rack 1, tray 0, GPU 0): other domain, same group and rail -> one leaf.
  Route r = t.route(0, 72);
  ASSERT_EQ(r.paths.size(), 1u);
  EXPECT_EQ(r.paths[0].links.size(), 4u);
  // GPU 0 -> GPU 576 (group 1, pod 0, rail 0): other leaf of the same pod -> 16 spines.
  r = t.route(0, 576);
  ASSERT_EQ(r.paths.size(), 16u);
  for (const auto& p : r.paths) EXPECT_EQ(p.links.size(), 6u);
  EXPECT_EQ(path_set(r).size(), 16u);
  // GPU 0 -> GPU 2305 (group 4 -> pod 1, rail 1): spine s x 2 cores of plane s = 32 paths of 8 links.
  r = t.route(0, 2305);
  ASSERT_EQ(r.paths.size(), 32u);
  EXPECT_EQ(path_set(r).size(), 32u);
  std::set<DeviceId> cores;
  for (const auto& p : r.paths) {
    ASSERT_EQ(p.links.size(), 8u);
    EXPECT_EQ(t.link(p.links[0]).kind, LinkKind::PCIe);
    EXPECT_EQ(far_end(t, p.links[3]).kind, DeviceKind::Core);
    cores.insert(t.link(p.links[3]).to);
    EXPECT_EQ(t.device(t.link(p.links.back()).to).gpu, 2305);
  }
  EXPECT_EQ(cores.size(), 32u);
  // Latency: 2.5 us + 4 switch links x 0.15 us = 3.1 us.
  EXPECT_NEAR(r.latency.value, 3.1e-6, 1e-15);
}

// Property: on a generated cluster with a core layer, the structural routes equal the routes a
// breadth-first search over the graph finds (same set of fewest-hop paths), for every GPU pair.
TEST(TopologyRoutes, StructuralRoutesEqualGraphSearch) {
  const auto t = Topology::parse(
      "cluster: {template: dgx-h100, nodes: 6}\n"
      "fabric:\n  nodes_per_leaf: 2\n  spines: 2\n"
      "  core: {leaf_groups_per_pod: 2, switches: 4}\n",
      "prop.yaml");
  for (GpuId a = 0; a < t.gpu_count(); ++a)
    for (GpuId b = 0; b < t.gpu_count(); ++b) {
      if (a == b) continue;
      const Route s = t.route(a, b);
      const Route q = t.search_route(a, b);
      ASSERT_EQ(path_set(s), path_set(q)) << a << " -> " << b;
      EXPECT_EQ(s.kind, q.kind);
      EXPECT_EQ(s.same_domain, q.same_domain);
      EXPECT_NEAR(s.latency.value, q.latency.value, 1e-15);
    }
}

// Property: RouteView::path_sums and middle_shares, which the schedule builders and the estimate read
// instead of listing paths, agree with the paths themselves on every route kind: an NVLink domain,
// two nodes on one leaf, leaves of one pod (a path per spine), two pods (a path per spine and core
// of its plane: S x K = 2 x 3) and an explicit topology's searched paths. With every link's load
// different (random), for every GPU pair:
//   path_sums[p]       = the loads of path_links(p) added in path order (exactly), and the sorted
//                        sums equal those of the breadth-first search's paths (search_route);
//   middle_shares      = per link off the head and tail, (paths through it) / paths, from path_links.
// Wrong views this catches (tried): the core paths numbered k x S + s instead of s x K + k (the sums
// of other paths than path_links gives), a leaf link given one path's share instead of its K
// paths' (middle_shares).
TEST(TopologyRoutes, RouteViewSumsAndSharesMatchThePathsOnEveryRouteKind) {
  const Topology pods = Topology::parse(
      "cluster: {template: dgx-h100, nodes: 8}\n"
      "fabric:\n  nodes_per_leaf: 2\n  spines: 2\n"
      "  core: {leaf_groups_per_pod: 2, switches: 6}\n",
      "pods.yaml");
  const Topology irregular = shipped("irregular-example.yaml");
  std::mt19937_64 rng(51);
  std::map<std::string, int> kinds;
  for (const Topology* t : {&pods, &irregular}) {
    std::vector<double> load(t->links().size());
    for (auto& x : load) x = 0.5 + static_cast<double>(rng() % 1000003) / 1000003.0;
    std::vector<double> sums;
    std::vector<LinkId> links;
    std::vector<std::pair<LinkId, double>> shares;
    for (GpuId a = 0; a < t->gpu_count(); ++a)
      for (GpuId b = 0; b < t->gpu_count(); ++b) {
        if (a == b) continue;
        const RouteView v = t->route_view(a, b);
        const bool searched = t == &irregular;
        ++kinds[searched ? "explicit" : v.same_domain ? "nvlink" : v.paths == 1 ? "one leaf" : v.paths == 2 ? "spines" : "cores"];
        v.path_sums(load, sums);
        ASSERT_EQ(sums.size(), static_cast<std::size_t>(v.paths));
        std::map<LinkId, double> expected_share;
        std::set<LinkId> ends;
        for (LinkId l : v.head()) ends.insert(l);
        for (LinkId l : v.tail()) ends.insert(l);
        for (std::int32_t p = 0; p < v.paths; ++p) {
          v.path_links(p, links);
          double sum = 0;
          for (LinkId l : links) {
            sum += load[static_cast<std::size_t>(l)];
            if (!ends.count(l)) expected_share[l] += 1.0 / v.paths;
          }
          ASSERT_EQ(sums[static_cast<std::size_t>(p)], sum) << a << " -> " << b << " path " << p;
        }
        const Route q = t->search_route(a, b);
        std::vector<double> searched_sums;
        for (const Path& path : q.paths) {
          double sum = 0;
          for (LinkId l : path.links) sum += load[static_cast<std::size_t>(l)];
          searched_sums.push_back(sum);
        }
        std::sort(searched_sums.begin(), searched_sums.end());
        std::vector<double> sorted = sums;
        std::sort(sorted.begin(), sorted.end());
        ASSERT_EQ(sorted.size(), searched_sums.size()) << a << " -> " << b;
        for (std::size_t k = 0; k < sorted.size(); ++k) ASSERT_NEAR(sorted[k], searched_sums[k], 1e-12) << a << " -> " << b;
        v.middle_shares(shares);
        std::map<LinkId, double> got;
        for (const auto& [l, share] : shares) got[l] += share;
        ASSERT_EQ(got.size(), expected_share.size()) << a << " -> " << b;
        for (const auto& [l, share] : expected_share) ASSERT_NEAR(got[l], share, 1e-15) << a << " -> " << b << " link " << l;
        EXPECT_EQ(v.middle_key() >= 0, !expected_share.empty());
      }
  }
  for (const char* k : {"nvlink", "one leaf", "spines", "cores", "explicit"}) EXPECT_GT(kinds[k], 0) << k;
}

// Property: route() is thread-safe. Four threads filling the leaf-pair cache of one fresh
// topology concurrently get exactly the paths a single thread gets on another fresh copy.
TEST(TopologyRoutes, ConcurrentRoutesMatchSequential) {
  const auto shared = shipped("gb200-nvl72-k3.yaml");
  const auto reference = shipped("gb200-nvl72-k3.yaml");
  const GpuId n = shared.gpu_count();
  auto pair_of = [n](int i) { return std::pair<GpuId, GpuId>{(i * 7919) % n, (i * 104729 + 13) % n}; };
  std::vector<std::set<std::vector<LinkId>>> expected;
  for (int i = 0; i < 4000; ++i) expected.push_back(path_set(reference.route(pair_of(i).first, pair_of(i).second)));
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int w = 0; w < 4; ++w)
    threads.emplace_back([&, w] {
      for (int i = w; i < 4000; i += 4) {
        const auto [a, b] = pair_of(i);
        if (path_set(shared.route(a, b)) != expected[static_cast<std::size_t>(i)]) ++mismatches[static_cast<std::size_t>(w)];
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(mismatches, (std::vector<int>{0, 0, 0, 0}));
}

// ---------------------------------------------------------------- bisection

TEST(TopologyBisection, WorkedByHand) {
  // dgx-h100-2n: halves = node 0 | node 1. Every cut must separate node 0's 8 NICs from node 1's;
  // the cheapest cut is the 8 NIC links (PCIe 64 GB/s and NVLink are on one side only):
  //   8 x 50 GB/s = 400 GB/s.
  EXPECT_DOUBLE_EQ(shipped("dgx-h100-2n.yaml").bisection_bandwidth().value, 400e9);
  // gb200-nvl72-2r: halves = rack 0 | rack 1 (18 trays each): 72 NICs x 50 GB/s = 3.6 TB/s.
  EXPECT_DOUBLE_EQ(shipped("gb200-nvl72-2r.yaml").bisection_bandwidth().value, 3.6e12);
  // 4 nodes, 2 per leaf group, oversubscription 2, 2 spines: halves = group 0 | group 1.
  //   NIC cut:   16 NICs x 50 GB/s = 800 GB/s
  //   uplinks:   8 leaves x 2 spines x (2 x 50 / 2 / 2 = 25 GB/s) = 400 GB/s  <- the minimum
  const char* text =
      "cluster: {template: dgx-h100, nodes: 4}\nfabric: {nodes_per_leaf: 2, spines: 2, oversubscription: %s}\n";
  char buf[256];
  std::snprintf(buf, sizeof buf, text, "2");
  EXPECT_DOUBLE_EQ(Topology::parse(buf, "o2.yaml").bisection_bandwidth().value, 400e9);
  // Non-blocking (oversubscription 1): uplinks 8 x 2 x 50 = 800 GB/s = the NIC cut: 800 GB/s.
  std::snprintf(buf, sizeof buf, text, "1");
  EXPECT_DOUBLE_EQ(Topology::parse(buf, "o1.yaml").bisection_bandwidth().value, 800e9);
  // Links adding up past 2^60 B/s (32 nodes, NICs and host links of 1 PB/s: about 1.5e18 B/s in
  // all) run the flow in coarser integer units; the cut is still the exact one: ten times that of
  // the same cluster at a tenth of the speeds, whose links stay under 2^60 (integer B/s).
  const char* fast = "cluster: {template: dgx-h100, nodes: 32, nic_speed: %s, host_link: %s}\nfabric: {spines: 2}\n";
  std::snprintf(buf, sizeof buf, fast, "8000Tbps", "1000TBps");
  const double at_1pbps = Topology::parse(buf, "fast.yaml").bisection_bandwidth().value;
  std::snprintf(buf, sizeof buf, fast, "800Tbps", "100TBps");
  const double at_100tbps = Topology::parse(buf, "tenth.yaml").bisection_bandwidth().value;
  EXPECT_GT(at_100tbps, 0);
  EXPECT_NEAR(at_1pbps, 10 * at_100tbps, 10 * at_100tbps * 1e-12);
  // One node: no cut.
  EXPECT_DOUBLE_EQ(Topology::parse("cluster: {template: dgx-h100, nodes: 1}\nfabric: {spines: 1}\n", "one.yaml")
                       .bisection_bandwidth()
                       .value,
                   0.0);
}

// ---------------------------------------------------------------- explicit form

TEST(TopologyExplicit, IrregularExample) {
  const auto t = shipped("irregular-example.yaml");
  EXPECT_FALSE(t.generated());
  EXPECT_EQ(t.gpu_count(), 6);
  EXPECT_EQ(t.node_count(), 2);
  EXPECT_EQ(t.rail_count(), 3);  // its NICs name rails 0, 1, 2 (big/nic0-2, small/nic0 on rail 0)
  // Domains: {big/gpu0..3} (one NVSwitch), {small/gpu0}, {small/gpu1} (no NVLink).
  ASSERT_EQ(t.domain_count(), 3);
  EXPECT_EQ(t.gpus_in_domain(0), (std::vector<GpuId>{0, 1, 2, 3}));
  EXPECT_EQ(t.gpus_in_domain(1), (std::vector<GpuId>{4}));
  EXPECT_EQ(t.gpus_in_domain(2), (std::vector<GpuId>{5}));
  EXPECT_DOUBLE_EQ(t.gpu_nvlink_bandwidth(0).value, 450e9);
  EXPECT_DOUBLE_EQ(t.gpu_nvlink_bandwidth(4).value, 0.0);
  EXPECT_FALSE(t.nvlink_egress(4));
  // big/gpu3 has no NIC; the small GPUs share one 200 Gb/s = 25 GB/s NIC behind the PCIe switch.
  EXPECT_FALSE(t.nic_of(3));
  EXPECT_DOUBLE_EQ(t.gpu_nic_bandwidth(3).value, 0.0);
  ASSERT_TRUE(t.nic_of(4) && t.nic_of(5));
  EXPECT_EQ(*t.nic_of(4), *t.nic_of(5));
  EXPECT_DOUBLE_EQ(t.gpu_nic_bandwidth(5).value, 25e9);
  EXPECT_EQ(t.rail_of(1), 1);  // from its NIC

  // small/gpu0 -> small/gpu1: over the PCIe switch, 2 hops, not one domain.
  Route r = t.route(4, 5);
  EXPECT_FALSE(r.same_domain);
  EXPECT_EQ(r.kind, LinkKind::PCIe);
  ASSERT_EQ(r.paths.size(), 1u);
  EXPECT_EQ(hops(t, r.paths[0]), (std::vector<std::string>{"small/gpu0", "small/pcie", "small/gpu1"}));
  // big/gpu1 (rail 1) -> small/gpu1 (rail 0): 8 hops, one path per spine.
  r = t.route(1, 5);
  ASSERT_EQ(r.paths.size(), 2u);
  EXPECT_EQ(hops(t, r.paths[0]), (std::vector<std::string>{"big/gpu1", "big/nic1", "leaf1", "spine0", "leaf0",
                                                           "small/nic0", "small/pcie", "small/gpu1"}));
  EXPECT_EQ(hops(t, r.paths[1])[3], "spine1");
  // Latency: PCIe 0.25 + net 1 + 0.15 + 0.15 + net 1 + PCIe 0.25 + PCIe 0.25 = 3.05 us.
  EXPECT_NEAR(r.latency.value, 3.05e-6, 1e-15);
  // big/gpu3 has no NIC: it forwards through big/gpu0, whose NIC is on the small node's leaf
  // (7 hops; via gpu1/gpu2 and a spine it would be 9).
  r = t.route(3, 4);
  ASSERT_EQ(r.paths.size(), 1u);
  EXPECT_EQ(hops(t, r.paths[0]), (std::vector<std::string>{"big/gpu3", "big/nvswitch", "big/gpu0", "big/nic0",
                                                           "leaf0", "small/nic0", "small/pcie", "small/gpu0"}));
  // Cached: asking again gives the same paths.
  EXPECT_EQ(path_set(t.route(3, 4)), path_set(r));
  // Bisection: halves big | small. Everything into node small enters through its one NIC:
  // 200 Gb/s = 25 GB/s.
  EXPECT_DOUBLE_EQ(t.bisection_bandwidth().value, 25e9);
}

TEST(TopologyExplicit, CopiesShareNothingObservable) {
  const auto a = shipped("irregular-example.yaml");
  Topology b = a;
  EXPECT_EQ(path_set(a.route(1, 5)), path_set(b.route(1, 5)));
  Topology c = std::move(b);
  EXPECT_EQ(c.gpu_count(), 6);
  EXPECT_THROW((void)c.route(0, 6), IndexError);
  EXPECT_TRUE(c.route(2, 2).paths.empty());
}
