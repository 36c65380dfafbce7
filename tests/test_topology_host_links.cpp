// GPU <-> NIC host links: the generator's keys, per-GPU usable network bandwidth, the network cuts
// of NVLink domains (closed form against maximum flow), and the warnings about NICs faster than
// their host links. Expected numbers are worked out in the comments.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "reshard/model/errors.hpp"
#include "reshard/model/topology.hpp"

using namespace reshard::model;

namespace {

Topology shipped(const std::string& name) {
  return Topology::load(std::string(RESHARD_SOURCE_DIR) + "/topologies/" + name);
}

const Device& device_named(const Topology& t, const std::string& name) {
  for (const auto& d : t.devices())
    if (d.name == name) return d;
  throw std::out_of_range(name);
}

void expect_same_cut(const NetworkCut& a, const NetworkCut& b) {
  EXPECT_NEAR(a.capacity.value, b.capacity.value, 1e-9 * a.capacity.value);
  EXPECT_EQ(a.links, b.links);
}

}  // namespace

// Template defaults: DGX H100 NICs are 400 Gb/s = 50 GB/s behind PCIe Gen5 x16 at 64 GB/s, so the
// NIC is the narrower side: 50 GB/s usable per GPU, 8 x 50 = 400 GB/s per domain, no warning.
TEST(TopologyHostLinks, TemplateDefaults) {
  const auto t = shipped("dgx-h100-2n.yaml");
  for (GpuId g = 0; g < t.gpu_count(); ++g) {
    const auto h = t.host_link(g);
    ASSERT_TRUE(h);
    EXPECT_EQ(h->kind, LinkKind::PCIe);
    EXPECT_DOUBLE_EQ(h->bandwidth.value, 64e9);
    EXPECT_DOUBLE_EQ(t.gpu_network_bandwidth(g).value, 50e9);
  }
  for (std::int32_t k = 0; k < t.domain_count(); ++k)
    for (auto dir : {CutDirection::Ingress, CutDirection::Egress}) {
      EXPECT_DOUBLE_EQ(t.domain_network_capacity(k, dir).value, 400e9);
      const auto cut = t.domain_network_cut(k, dir);
      ASSERT_EQ(cut.links.size(), 8u);
      for (LinkId l : cut.links) EXPECT_EQ(t.link(l).kind, LinkKind::Network);  // the NIC links
    }
  EXPECT_TRUE(t.warnings().empty());
  // No shipped topology draws a warning.
  for (const char* f : {"dgx-h100-32n.yaml", "dgx-h100-64n.yaml", "gb200-nvl72-2r.yaml", "gb200-nvl72-k3.yaml",
                        "irregular-example.yaml"})
    EXPECT_TRUE(shipped(f).warnings().empty()) << f;
}

// nic_speed: 1600Gbps = 200 GB/s on DGX H100: the 64 GB/s host link is narrower. Per GPU 64 GB/s
// usable; each domain's cut is its 8 host links, 8 x 64 = 512 GB/s, in both directions (ingress:
// NIC -> GPU links, egress: GPU -> NIC links). One warning, naming the file, line and key.
TEST(TopologyHostLinks, FastNicIsCappedByTheHostLink) {
  const auto t = Topology::parse(
      "name: fast\n"                // 1
      "cluster:\n"                  // 2
      "  template: dgx-h100\n"      // 3
      "  nodes: 2\n"                // 4
      "  nic_speed: 1600Gbps\n"     // 5
      "fabric:\n  spines: 4\n",
      "fast.yaml");
  for (GpuId g = 0; g < t.gpu_count(); ++g) {
    EXPECT_DOUBLE_EQ(t.gpu_nic_bandwidth(g).value, 200e9);
    EXPECT_DOUBLE_EQ(t.gpu_network_bandwidth(g).value, 64e9);
  }
  for (std::int32_t k = 0; k < 2; ++k) {
    const auto in = t.domain_network_cut(k, CutDirection::Ingress);
    const auto out = t.domain_network_cut(k, CutDirection::Egress);
    EXPECT_DOUBLE_EQ(in.capacity.value, 512e9);
    EXPECT_DOUBLE_EQ(out.capacity.value, 512e9);
    EXPECT_DOUBLE_EQ(t.domain_network_capacity(k, CutDirection::Ingress).value, 512e9);
    ASSERT_EQ(in.links.size(), 8u);
    for (LinkId l : in.links) {
      EXPECT_EQ(t.link(l).kind, LinkKind::PCIe);
      EXPECT_EQ(t.device(t.link(l).from).kind, DeviceKind::NIC);
      EXPECT_EQ(t.device(t.link(l).to).domain, k);
    }
    for (LinkId l : out.links) EXPECT_EQ(t.device(t.link(l).from).kind, DeviceKind::GPU);
  }
  ASSERT_EQ(t.warnings().size(), 1u);
  EXPECT_EQ(t.warnings()[0],
            "fast.yaml:5: cluster.nic_speed: 200 GB/s exceeds the GPU<->NIC host link (PCIe 64.0 GB/s of the "
            "dgx-h100 template): the host link caps each GPU's network bandwidth at 64.0 GB/s");
}

// cluster.host_link and host_link_kind set the host link: C2C at 128 GB/s under 1600 Gb/s NICs caps
// each GPU at 128 GB/s (warning naming nic_speed and host_link); 256 GB/s leaves the 200 GB/s NIC
// the narrower side (no warning). A host link below the template's NIC names host_link.
TEST(TopologyHostLinks, HostLinkKeys) {
  const std::string head = "cluster:\n  template: dgx-h100\n  nodes: 2\n";
  const std::string tail = "fabric:\n  spines: 4\n";
  {
    const auto t = Topology::parse(head + "  nic_speed: 1600Gbps\n  host_link: 128GBps\n  host_link_kind: c2c\n" + tail,
                                   "c2c.yaml");
    const auto h = t.host_link(3);
    ASSERT_TRUE(h);
    EXPECT_EQ(h->kind, LinkKind::C2C);
    EXPECT_DOUBLE_EQ(h->bandwidth.value, 128e9);
    EXPECT_DOUBLE_EQ(t.gpu_network_bandwidth(3).value, 128e9);
    EXPECT_DOUBLE_EQ(t.domain_network_capacity(0, CutDirection::Egress).value, 8 * 128e9);
    // The route's first hop is the C2C link, with the C2C latency (0.3 us by default).
    const Link& first = t.link(t.route(0, 8).paths[0].links.front());
    EXPECT_EQ(first.kind, LinkKind::C2C);
    EXPECT_DOUBLE_EQ(first.latency.value, 0.3e-6);
    ASSERT_EQ(t.warnings().size(), 1u);
    EXPECT_EQ(t.warnings()[0],
              "c2c.yaml:4: cluster.nic_speed: 200 GB/s exceeds the GPU<->NIC host link (C2C 128 GB/s, "
              "cluster.host_link): the host link caps each GPU's network bandwidth at 128 GB/s");
  }
  {
    const auto t = Topology::parse(head + "  nic_speed: 1600Gbps\n  host_link: 256GBps\n" + tail, "wide.yaml");
    EXPECT_EQ(t.host_link(0)->kind, LinkKind::PCIe);
    EXPECT_DOUBLE_EQ(t.gpu_network_bandwidth(0).value, 200e9);
    EXPECT_DOUBLE_EQ(t.domain_network_capacity(1, CutDirection::Ingress).value, 8 * 200e9);
    EXPECT_TRUE(t.warnings().empty());
  }
  {
    const auto t = Topology::parse(head + "  host_link: 32GBps\n" + tail, "slow.yaml");
    EXPECT_DOUBLE_EQ(t.gpu_network_bandwidth(0).value, 32e9);
    ASSERT_EQ(t.warnings().size(), 1u);
    EXPECT_EQ(t.warnings()[0],
              "slow.yaml:4: cluster.host_link: the GPU<->NIC host link (PCIe 32.0 GB/s) is slower than the dgx-h100 "
              "template's NIC (50.0 GB/s): the host link caps each GPU's network bandwidth at 32.0 GB/s");
  }
  // A C2C host link takes latency.c2c.
  const auto t = Topology::parse(head + "  host_link_kind: c2c\n" + tail + "latency:\n  c2c: 1us\n", "lat.yaml");
  EXPECT_DOUBLE_EQ(t.link(t.route(0, 8).paths[0].links.front()).latency.value, 1e-6);
}

// The closed form of generated clusters (per GPU the narrower of NIC and host link, the NIC link on
// a tie) is the maximum flow's minimum cut, link for link, whatever the speeds and the fabric.
TEST(TopologyHostLinks, ClosedFormEqualsMaximumFlow) {
  std::mt19937 rng(7);
  const char* templates[] = {"dgx-h100", "dgx-b200", "gb200-nvl72", "gb300-nvl72"};
  const char* nics[] = {"200Gbps", "400Gbps", "512Gbps", "800Gbps", "1600Gbps"};
  const char* hosts[] = {"32GBps", "50GBps", "64GBps", "100GBps", "128GBps"};
  for (int i = 0; i < 24; ++i) {
    const std::string tmpl = templates[rng() % 4];
    const bool racks = tmpl.find("nvl72") != std::string::npos;
    std::string y = "cluster:\n  template: " + tmpl + (racks ? "\n  racks: 2\n" : "\n  nodes: 3\n");
    if (rng() % 4) y += std::string("  nic_speed: ") + nics[rng() % 5] + "\n";
    if (rng() % 4) y += std::string("  host_link: ") + hosts[rng() % 5] + "\n";
    y += "fabric:\n  spines: 2\n  nodes_per_leaf: " + std::to_string(1 + rng() % 3) + "\n";
    SCOPED_TRACE(y);
    const auto t = Topology::parse(y, "r.yaml");
    for (std::int32_t k = 0; k < t.domain_count(); ++k)
      for (auto dir : {CutDirection::Ingress, CutDirection::Egress}) {
        const auto closed = t.domain_network_cut(k, dir);
        expect_same_cut(closed, t.search_domain_network_cut(k, dir));
        EXPECT_DOUBLE_EQ(t.domain_network_capacity(k, dir).value, closed.capacity.value);
        double sum = 0;
        for (GpuId g : t.gpus_in_domain(k)) sum += t.gpu_network_bandwidth(g).value;
        EXPECT_NEAR(closed.capacity.value, sum, 1e-9 * sum);
      }
  }
}

// topologies/irregular-example.yaml, by hand.
//   big/gpu0-2: own NIC over PCIe 64 GB/s, NIC 400 Gb/s = 50 GB/s: 50 usable. big/gpu3: no NIC.
//   small/gpu0-1: PCIe 32 GB/s to a switch, switch -> NIC 32 GB/s, NIC 200 Gb/s = 25 GB/s. Host link
//   of one GPU alone: min(32, 32) = 32; usable min(25, 32) = 25.
// Domain cuts (maximum flow around the host side):
//   domain 0 (big): 3 NIC links of 50 GB/s = 150 GB/s (each narrower than its 64 GB/s PCIe link).
//   domain 1 (small/gpu0): its host side {gpu0, switch, NIC} is entered by leaf0 -> NIC (25) and by
//   small/gpu1 -> switch (32); everything reaches gpu0 through switch -> gpu0 (32): min(57, 32) = 32,
//   the PCIe link. Egress likewise gpu0 -> switch, 32.
TEST(TopologyHostLinks, ExplicitFormByMaximumFlow) {
  const auto t = shipped("irregular-example.yaml");
  for (GpuId g = 0; g < 3; ++g) {
    EXPECT_DOUBLE_EQ(t.host_link(g)->bandwidth.value, 64e9);
    EXPECT_DOUBLE_EQ(t.gpu_network_bandwidth(g).value, 50e9);
  }
  EXPECT_FALSE(t.host_link(3));
  EXPECT_DOUBLE_EQ(t.gpu_network_bandwidth(3).value, 0.0);
  for (GpuId g = 4; g < 6; ++g) {
    EXPECT_EQ(t.host_link(g)->kind, LinkKind::PCIe);
    EXPECT_DOUBLE_EQ(t.host_link(g)->bandwidth.value, 32e9);
    EXPECT_DOUBLE_EQ(t.gpu_network_bandwidth(g).value, 25e9);
  }
  const auto big = t.domain_network_cut(0, CutDirection::Ingress);
  EXPECT_DOUBLE_EQ(big.capacity.value, 150e9);
  ASSERT_EQ(big.links.size(), 3u);
  for (LinkId l : big.links) EXPECT_EQ(t.device(t.link(l).from).kind, DeviceKind::Leaf);
  const auto in = t.domain_network_cut(1, CutDirection::Ingress);
  ASSERT_EQ(in.links.size(), 1u);
  EXPECT_EQ(t.link(in.links[0]).from, device_named(t, "small/pcie").id);
  EXPECT_EQ(t.link(in.links[0]).to, device_named(t, "small/gpu0").id);
  EXPECT_DOUBLE_EQ(in.capacity.value, 32e9);
  const auto out = t.domain_network_cut(1, CutDirection::Egress);
  ASSERT_EQ(out.links.size(), 1u);
  EXPECT_EQ(t.link(out.links[0]).from, device_named(t, "small/gpu0").id);
  EXPECT_DOUBLE_EQ(t.domain_network_capacity(2, CutDirection::Egress).value, 32e9);
  EXPECT_THROW((void)t.domain_network_capacity(3, CutDirection::Ingress), IndexError);
  EXPECT_THROW((void)t.host_link(6), IndexError);
}

// Explicit form: a NIC faster than what its GPUs' host links can bring it draws one warning,
// naming the file, the NIC's line and the GPUs. Two GPUs behind a switch with a 64 GB/s uplink
// fill a 50 GB/s NIC (no warning); with a 32 GB/s uplink they cannot (warning: 32 GB/s in all).
TEST(TopologyHostLinks, ExplicitWarnings) {
  auto topo = [](const std::string& own_pcie, const std::string& uplink) {
    return "devices:\n"                                    // 1
           "  - {name: a/gpu0, kind: gpu, node: a}\n"      // 2
           "  - {name: b/gpu0, kind: gpu, node: b}\n"      // 3
           "  - {name: b/gpu1, kind: gpu, node: b}\n"      // 4
           "  - {name: a/nic0, kind: nic, node: a}\n"      // 5
           "  - {name: b/sw, kind: cpu, node: b}\n"        // 6
           "  - {name: b/nic0, kind: nic, node: b}\n"      // 7
           "  - {name: leaf0, kind: leaf}\n"               // 8
           "links:\n"
           "  - {from: a/gpu0, to: a/nic0, kind: pcie, bandwidth: " + own_pcie + "}\n"
           "  - {from: b/gpu0, to: b/sw, kind: pcie, bandwidth: 32GBps}\n"
           "  - {from: b/gpu1, to: b/sw, kind: pcie, bandwidth: 32GBps}\n"
           "  - {from: b/sw, to: b/nic0, kind: pcie, bandwidth: " + uplink + "}\n"
           "  - {from: a/nic0, to: leaf0, kind: network, bandwidth: 400Gbps}\n"
           "  - {from: b/nic0, to: leaf0, kind: network, bandwidth: 400Gbps}\n";
  };
  EXPECT_TRUE(Topology::parse(topo("64GBps", "64GBps"), "x.yaml").warnings().empty());
  const auto t = Topology::parse(topo("16GBps", "32GBps"), "x.yaml");
  ASSERT_EQ(t.warnings().size(), 2u);
  EXPECT_EQ(t.warnings()[0],
            "x.yaml:5: a/nic0: the NIC (50.0 GB/s) is faster than its host link from GPU 'a/gpu0' (PCIe 16.0 GB/s): "
            "the host link caps the GPU's network bandwidth at 16.0 GB/s");
  EXPECT_EQ(t.warnings()[1],
            "x.yaml:7: b/nic0: the NIC (50.0 GB/s) is faster than its host links from GPUs 'b/gpu0', 'b/gpu1' "
            "(PCIe 32.0 GB/s in all): the host links cap those GPUs' network bandwidth together at 32.0 GB/s");
  // Domain b/gpu0 (domain 1, no NVLink): its host side {b/gpu0, switch, NIC} is entered by
  // leaf0 -> NIC (50) and b/gpu1 -> switch (32), and everything reaches b/gpu0 through
  // switch -> b/gpu0 (32): the cut is min(50 + 32, 32) = 32.
  EXPECT_DOUBLE_EQ(t.domain_network_capacity(1, CutDirection::Ingress).value, 32e9);
  // Domain a/gpu0: min(NIC 50, PCIe 16) = 16.
  EXPECT_DOUBLE_EQ(t.domain_network_capacity(0, CutDirection::Egress).value, 16e9);
}

TEST(TopologyHostLinks, KeyErrors) {
  const std::string head = "cluster:\n  template: dgx-h100\n  nodes: 2\n";
  auto expect_error = [&](const std::string& line, const std::string& key, const std::string& says) {
    try {
      (void)Topology::parse(head + line + "fabric:\n  spines: 4\n", "bad.yaml");
      ADD_FAILURE() << "no error for " << line;
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.file(), "bad.yaml");
      EXPECT_EQ(e.line(), 4) << e.what();
      EXPECT_EQ(e.key(), key) << e.what();
      EXPECT_NE(e.reason().find(says), std::string::npos) << e.what();
    }
  };
  expect_error("  host_link: 64\n", "cluster.host_link", "no unit");
  expect_error("  host_link: 0GBps\n", "cluster.host_link", "must be positive");
  expect_error("  host_link: -64GBps\n", "cluster.host_link", "negative bandwidth");
  expect_error("  host_link_kind: nvlink\n", "cluster.host_link_kind",
               "unknown host link kind 'nvlink'; expected one of: pcie, c2c");
}
