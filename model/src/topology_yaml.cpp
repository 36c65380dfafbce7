// Topology files: the cluster generator (a node template on a rail-optimized leaf/spine(/core)
// fabric) and the explicit form (devices and links listed). Format reference: docs/topology.md.
//
// Generated fabric capacities (per direction):
//   GPU <-> NIC             the host link (template, or cluster.host_link; kind PCIe unless
//                           cluster.host_link_kind: c2c); a NIC faster than it draws a warning
//   NIC <-> leaf            the NIC speed (template, or cluster.nic_speed)
//   leaf <-> each spine     D_leaf / o / S,  D_leaf = NICs on the leaf x NIC speed (leaf downlink
//                           total), o = fabric.oversubscription, S = spines (per pod)
//   spine <-> each core     D_spine / o_core / K,  D_spine = sum of the spine's leaf links, K =
//                           cores per plane = core.switches / S
// so a leaf's uplink total is its downlink total divided by the oversubscription, and likewise for
// a spine with a core layer.
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <unordered_map>

#include "reshard/model/errors.hpp"
#include "topology_impl.hpp"
#include "yaml_reader.hpp"

namespace reshard::model::detail {

using namespace reshard::model::literals;

namespace {

// Default link latencies, one-way per link. Chosen so that whole routes match NCCL's LL-protocol
// latency model (NCCL src/graph/tuning.cc): one NVLink hop 0.6 us = 2 links x 0.3 us;
// one network hop 2.7 us ~ 2 x PCIe 0.25 us + 2 x NIC-leaf 1 us (+ switch hops). Switch
// port-to-port latency under 150 ns (Quantum-2 QM9700, a third-party figure) for leaf-spine and spine-core.
struct Latencies {
  Seconds nvlink{0.3e-6};
  Seconds c2c{0.3e-6};
  Seconds pcie{0.25e-6};
  Seconds nic_leaf{1.0e-6};
  Seconds leaf_spine{0.15e-6};
  Seconds spine_core{0.15e-6};
  Seconds network{1.0e-6};  // explicit form: any network link
};

Latencies read_generator_latencies(const yaml::Node& root) {
  Latencies lat;
  auto node = root.get("latency");
  if (!node) return lat;
  node->allow_only({"nvlink", "c2c", "pcie", "nic_leaf", "leaf_spine", "spine_core"});
  if (auto v = node->get("nvlink")) lat.nvlink = v->duration();
  if (auto v = node->get("c2c")) lat.c2c = v->duration();
  if (auto v = node->get("pcie")) lat.pcie = v->duration();
  if (auto v = node->get("nic_leaf")) lat.nic_leaf = v->duration();
  if (auto v = node->get("leaf_spine")) lat.leaf_spine = v->duration();
  if (auto v = node->get("spine_core")) lat.spine_core = v->duration();
  return lat;
}

BytesPerSecond positive_bandwidth(const yaml::Node& n) {
  const auto bw = n.bandwidth();
  if (!(bw.value > 0)) n.fail("bandwidth must be positive, got '" + n.str() + "'");
  return bw;
}

double positive_number(const yaml::Node& n) {
  const double v = n.number();
  if (!(v > 0)) n.fail("must be a positive number, got '" + n.str() + "'");
  return v;
}

std::int32_t positive_int32(const yaml::Node& n, std::int64_t max = 1'000'000) {
  const auto v = n.positive_integer();
  if (v > max) n.fail("must be at most " + std::to_string(max) + ", got " + std::to_string(v));
  return static_cast<std::int32_t>(v);
}

}  // namespace

namespace {

// cluster: the node template, the size, the NIC and host-link overrides.
struct ClusterSpec {
  const NodeTemplate* tmpl = nullptr;
  yaml::Node template_node;
  std::int32_t nodes = 0;
  std::optional<yaml::Node> nic_node, host_node;  // cluster.nic_speed, cluster.host_link when given
  BytesPerSecond nic_bw, host_bw;
  LinkKind host_kind = LinkKind::PCIe;
};

ClusterSpec read_cluster(const yaml::Node& cluster) {
  cluster.allow_only({"template", "nodes", "racks", "nic_speed", "host_link", "host_link_kind"});
  ClusterSpec c{nullptr, cluster.at("template")};
  const yaml::Node& tnode = c.template_node;
  c.tmpl = find_template(tnode.str());
  if (!c.tmpl) {
    std::string known;
    for (const auto& t : node_templates()) known += (known.empty() ? "" : ", ") + std::string(t.name);
    tnode.fail("unknown node template '" + tnode.str() + "'; known templates: " + known);
  }
  const NodeTemplate* tmpl = c.tmpl;
  if (tmpl->rack_scale) {
    if (auto n = cluster.get("nodes"))
      n->fail(std::string(tmpl->name) + " is counted in racks ('racks: N', " +
              std::to_string(tmpl->nodes_per_domain) + " compute trays of " + std::to_string(tmpl->gpus_per_node) +
              " GPUs each), not nodes");
    c.nodes = positive_int32(cluster.at("racks"), 100'000) * tmpl->nodes_per_domain;
  } else {
    if (auto n = cluster.get("racks"))
      n->fail(std::string(tmpl->name) + " is counted in nodes ('nodes: N'), not racks");
    c.nodes = positive_int32(cluster.at("nodes"), 1'000'000);
  }
  c.nic_node = cluster.get("nic_speed");
  c.nic_bw = c.nic_node ? positive_bandwidth(*c.nic_node) : tmpl->nic;
  // The GPU <-> NIC host link: the template's unless cluster.host_link / host_link_kind say otherwise.
  c.host_node = cluster.get("host_link");
  c.host_bw = c.host_node ? positive_bandwidth(*c.host_node) : tmpl->gpu_nic_pcie;
  c.host_kind = tmpl->host_link_kind;
  if (auto k = cluster.get("host_link_kind")) {
    const std::string v = k->str();
    if (v == "pcie") c.host_kind = LinkKind::PCIe;
    else if (v == "c2c") c.host_kind = LinkKind::C2C;
    else k->fail("unknown host link kind '" + v + "'; expected one of: pcie, c2c");
  }
  const std::int32_t G = tmpl->gpus_per_node;
  if (static_cast<std::int64_t>(c.nodes) * G > 4'000'000)
    cluster.fail("cluster too large: " + std::to_string(static_cast<std::int64_t>(c.nodes) * G) + " GPUs");
  return c;
}

// fabric: leaves, spines, the optional core layer, and the sizes they give.
struct FabricSpec {
  bool rail_optimized = true;
  std::int32_t nodes_per_leaf = 0;
  std::int32_t spines = 0;
  double oversub = 1.0;
  bool has_core = false;
  std::int32_t groups_per_pod = 0;
  std::int32_t core_switches = 0;
  double core_oversub = 1.0;
  std::int32_t groups = 0, leaves = 0, K = 0, pods = 1;
};

// R: rails (NICs per node).
FabricSpec read_fabric(const yaml::Node& root, const yaml::Node& cluster, std::int32_t nodes, std::int32_t R) {
  FabricSpec fs;
  fs.nodes_per_leaf = nodes;
  std::optional<yaml::Node> spines_node, core_switches_node;
  const auto fabric_node = root.get("fabric");
  if (fabric_node) {
    fabric_node->allow_only({"rail_optimized", "nodes_per_leaf", "spines", "oversubscription", "core"});
    if (auto v = fabric_node->get("rail_optimized")) fs.rail_optimized = v->boolean();
    if (auto v = fabric_node->get("nodes_per_leaf")) fs.nodes_per_leaf = positive_int32(*v);
    if ((spines_node = fabric_node->get("spines"))) fs.spines = positive_int32(*spines_node, 100'000);
    if (auto v = fabric_node->get("oversubscription")) fs.oversub = positive_number(*v);
    if (auto core = fabric_node->get("core")) {
      core->allow_only({"leaf_groups_per_pod", "switches", "oversubscription"});
      fs.has_core = true;
      fs.groups_per_pod = positive_int32(core->at("leaf_groups_per_pod"));
      core_switches_node = core->at("switches");
      fs.core_switches = positive_int32(*core_switches_node, 100'000);
      if (auto v = core->get("oversubscription")) fs.core_oversub = positive_number(*v);
    }
  }
  fs.groups = (nodes + fs.nodes_per_leaf - 1) / fs.nodes_per_leaf;
  fs.leaves = fs.rail_optimized ? fs.groups * R : fs.groups;
  if (fs.leaves > 1 && fs.spines == 0) {
    const std::string why = std::to_string(fs.leaves) + " leaf switches (" + std::to_string(fs.groups) +
                            " group(s) of nodes" + (fs.rail_optimized ? " x " + std::to_string(R) + " rails" : "") +
                            ") need spine switches to reach each other";
    if (fabric_node) throw ConfigError(root.file(), fabric_node->line(), "fabric.spines", "required key is missing: " + why);
    throw ConfigError(root.file(), cluster.line(), "fabric.spines", "required key is missing: " + why);
  }
  if (fs.has_core && fs.spines == 0)
    throw ConfigError(root.file(), fabric_node->line(), "fabric.spines", "a core layer needs spine switches");
  if (fs.has_core) {
    if (fs.core_switches % fs.spines != 0)
      core_switches_node->fail("the core switches must be a multiple of the spines per pod (" + std::to_string(fs.spines) +
                               "): spine s of every pod connects to the core switches of plane s");
    fs.K = fs.core_switches / fs.spines;
  }
  fs.pods = fs.has_core ? (fs.groups + fs.groups_per_pod - 1) / fs.groups_per_pod : 1;
  return fs;
}

// The devices of a generated cluster, by role.
struct GeneratedDevices {
  std::vector<DeviceId> fabric, nic, leaf, spine, core;  // NVSwitch per domain, NIC per GPU, ...
};

// GPUs first, so GPU g is device g (node-major, GPU index in the node minor).
GeneratedDevices add_devices(TopologyData& d, const ClusterSpec& c, const FabricSpec& fs) {
  const NodeTemplate* tmpl = c.tmpl;
  const std::int32_t nodes = c.nodes, G = tmpl->gpus_per_node, R = G;
  const bool racks = tmpl->rack_scale;
  const std::int32_t per_domain = tmpl->nodes_per_domain;
  auto node_prefix = [&](std::int32_t n) {
    return racks ? "rack" + std::to_string(n / per_domain) + "/tray" + std::to_string(n % per_domain)
                 : "node" + std::to_string(n);
  };
  const std::size_t gpu_total = static_cast<std::size_t>(nodes) * static_cast<std::size_t>(G);
  d.devices.reserve(gpu_total * 2 +
                    static_cast<std::size_t>(nodes / per_domain + fs.leaves + fs.pods * fs.spines + fs.core_switches + 1));
  for (std::int32_t n = 0; n < nodes; ++n) {
    const std::string prefix = node_prefix(n);
    for (std::int32_t i = 0; i < G; ++i) d.add_device(DeviceKind::GPU, prefix + "/gpu" + std::to_string(i), n, i);
  }
  GeneratedDevices dev;
  const std::int32_t domains = (nodes + per_domain - 1) / per_domain;
  dev.fabric.resize(static_cast<std::size_t>(domains));
  for (std::int32_t k = 0; k < domains; ++k)
    dev.fabric[static_cast<std::size_t>(k)] =
        d.add_device(DeviceKind::NVSwitch, (racks ? "rack" : "node") + std::to_string(k) + "/nvswitch",
                     racks ? -1 : k, -1);
  dev.nic.resize(gpu_total);
  for (std::int32_t n = 0; n < nodes; ++n) {
    const std::string prefix = node_prefix(n);
    for (std::int32_t i = 0; i < G; ++i)
      dev.nic[static_cast<std::size_t>(n * G + i)] = d.add_device(DeviceKind::NIC, prefix + "/nic" + std::to_string(i), n, i);
  }
  dev.leaf.resize(static_cast<std::size_t>(fs.leaves));
  for (std::int32_t l = 0; l < fs.leaves; ++l) {
    const std::int32_t g = fs.rail_optimized ? l / R : l;
    dev.leaf[static_cast<std::size_t>(l)] = d.add_device(
        DeviceKind::Leaf,
        "group" + std::to_string(g) + "/leaf" + (fs.rail_optimized ? "-rail" + std::to_string(l % R) : std::string()), -1,
        fs.rail_optimized ? l % R : -1);
  }
  dev.spine.resize(static_cast<std::size_t>(fs.pods * fs.spines));
  for (std::int32_t p = 0; p < fs.pods; ++p)
    for (std::int32_t s = 0; s < fs.spines; ++s)
      dev.spine[static_cast<std::size_t>(p * fs.spines + s)] = d.add_device(
          DeviceKind::Spine, (fs.has_core ? "pod" + std::to_string(p) + "/" : std::string()) + "spine" + std::to_string(s),
          -1, -1);
  dev.core.resize(static_cast<std::size_t>(fs.core_switches));
  for (std::int32_t i = 0; i < fs.core_switches; ++i)
    dev.core[static_cast<std::size_t>(i)] = d.add_device(DeviceKind::Core, "core" + std::to_string(i), -1, -1);
  return dev;
}

// The links, recorded in d.fabric for structural routing (Fabric, topology_impl.hpp).
void add_links(TopologyData& d, const ClusterSpec& c, const FabricSpec& fs, const GeneratedDevices& dev,
               const Latencies& lat) {
  const NodeTemplate* tmpl = c.tmpl;
  const std::int32_t nodes = c.nodes, G = tmpl->gpus_per_node, R = G, per_domain = tmpl->nodes_per_domain;
  const std::int32_t leaves = fs.leaves, spines = fs.spines, pods = fs.pods, K = fs.K;
  const std::size_t gpu_total = static_cast<std::size_t>(nodes) * static_cast<std::size_t>(G);
  auto& f = d.fabric;
  f.leaves = leaves;
  f.spines_per_pod = spines;
  f.pods = pods;
  f.cores_per_plane = K;
  f.gpu_leaf.resize(gpu_total);
  f.gpu_to_nic.resize(gpu_total);
  f.nic_to_gpu.resize(gpu_total);
  f.nic_to_leaf.resize(gpu_total);
  f.leaf_to_nic.resize(gpu_total);
  d.links.reserve(gpu_total * 6 + static_cast<std::size_t>(leaves * spines * 2 + pods * spines * K * 2));
  std::vector<std::int32_t> leaf_nics(static_cast<std::size_t>(leaves), 0);
  for (std::int32_t n = 0; n < nodes; ++n) {
    const std::int32_t group = n / fs.nodes_per_leaf;
    for (std::int32_t i = 0; i < G; ++i) {
      const auto g = static_cast<std::size_t>(n * G + i);
      const auto gpu = static_cast<DeviceId>(g);
      d.add_duplex(gpu, dev.fabric[static_cast<std::size_t>(n / per_domain)], tmpl->gpu_nvlink, lat.nvlink, LinkKind::NVLink);
      const std::int32_t leaf = fs.rail_optimized ? group * R + i : group;
      f.gpu_leaf[g] = leaf;
      ++leaf_nics[static_cast<std::size_t>(leaf)];
      f.gpu_to_nic[g] = d.add_duplex(gpu, dev.nic[g], c.host_bw, c.host_kind == LinkKind::C2C ? lat.c2c : lat.pcie,
                                     c.host_kind);
      f.nic_to_gpu[g] = f.gpu_to_nic[g] + 1;
      f.nic_to_leaf[g] = d.add_duplex(dev.nic[g], dev.leaf[static_cast<std::size_t>(leaf)], c.nic_bw, lat.nic_leaf,
                                      LinkKind::Network);
      f.leaf_to_nic[g] = f.nic_to_leaf[g] + 1;
    }
  }
  f.leaf_pod.resize(static_cast<std::size_t>(leaves));
  f.leaf_up.resize(static_cast<std::size_t>(leaves * spines));
  f.leaf_down.resize(static_cast<std::size_t>(leaves * spines));
  std::vector<double> spine_down_total(static_cast<std::size_t>(pods * spines), 0.0);
  for (std::int32_t l = 0; l < leaves; ++l) {
    const std::int32_t group = fs.rail_optimized ? l / R : l;
    const std::int32_t pod = fs.has_core ? group / fs.groups_per_pod : 0;
    f.leaf_pod[static_cast<std::size_t>(l)] = pod;
    // uplink per spine = D_leaf / o / S
    const BytesPerSecond up{leaf_nics[static_cast<std::size_t>(l)] * c.nic_bw.value / fs.oversub / std::max(spines, 1)};
    for (std::int32_t s = 0; s < spines; ++s) {
      const auto slot = static_cast<std::size_t>(l * spines + s);
      f.leaf_up[slot] = d.add_duplex(dev.leaf[static_cast<std::size_t>(l)],
                                     dev.spine[static_cast<std::size_t>(pod * spines + s)], up, lat.leaf_spine,
                                     LinkKind::Network);
      f.leaf_down[slot] = f.leaf_up[slot] + 1;
      spine_down_total[static_cast<std::size_t>(pod * spines + s)] += up.value;
    }
  }
  f.spine_up.resize(static_cast<std::size_t>(pods * spines * K));
  f.spine_down.resize(static_cast<std::size_t>(pods * spines * K));
  for (std::int32_t p = 0; p < pods; ++p)
    for (std::int32_t s = 0; s < spines; ++s) {
      // uplink per core = D_spine / o_core / K
      const BytesPerSecond up{spine_down_total[static_cast<std::size_t>(p * spines + s)] / fs.core_oversub / std::max(K, 1)};
      for (std::int32_t k = 0; k < K; ++k) {
        const auto slot = static_cast<std::size_t>((p * spines + s) * K + k);
        f.spine_up[slot] = d.add_duplex(dev.spine[static_cast<std::size_t>(p * spines + s)],
                                        dev.core[static_cast<std::size_t>(s * K + k)], up, lat.spine_core, LinkKind::Network);
        f.spine_down[slot] = f.spine_up[slot] + 1;
      }
    }
}

// A NIC faster than its host link cannot be filled: every byte a GPU sends or receives over the
// network crosses the host link first. Named after the key that set the faster side; empty when
// the host link keeps up.
std::string host_link_warning(const std::string& file, const ClusterSpec& c) {
  if (!(c.nic_bw.value > c.host_bw.value)) return {};
  const std::string host = std::string(to_string(c.host_kind)) + " " + format(c.host_bw);
  const std::string tmpl_name(c.tmpl->name);
  std::string where, what;
  if (c.nic_node) {
    where = file + ":" + std::to_string(c.nic_node->line()) + ": cluster.nic_speed: ";
    what = format(c.nic_bw) + " exceeds the GPU<->NIC host link (" + host +
           (c.host_node ? ", cluster.host_link" : " of the " + tmpl_name + " template") + ")";
  } else {
    where = file + ":" + std::to_string(c.host_node ? c.host_node->line() : c.template_node.line()) +
            (c.host_node ? ": cluster.host_link: " : ": cluster.template: ");
    what = "the GPU<->NIC host link (" + host + ") is slower than the " + tmpl_name + " template's NIC (" +
           format(c.nic_bw) + ")";
  }
  return where + what + ": the host link caps each GPU's network bandwidth at " + format(c.host_bw);
}

}  // namespace

TopologyData build_generated(const yaml::Node& root) {
  root.allow_only({"name", "description", "cluster", "fabric", "latency"});
  TopologyData d;
  d.file = root.file();
  d.generated = true;
  d.name = root.get("name") ? root.at("name").str() : std::filesystem::path(root.file()).stem().string();
  const auto cluster = root.at("cluster");
  const ClusterSpec c = read_cluster(cluster);
  const std::int32_t R = c.tmpl->gpus_per_node;  // one NIC per GPU: rail r = the r-th GPU/NIC of a node
  const FabricSpec fs = read_fabric(root, cluster, c.nodes, R);
  const Latencies lat = read_generator_latencies(root);
  const GeneratedDevices dev = add_devices(d, c, fs);
  add_links(d, c, fs, dev, lat);
  d.node_count = c.nodes;
  d.rail_count = fs.rail_optimized ? R : 1;
  d.finish();
  if (std::string w = host_link_warning(d.file, c); !w.empty()) d.warnings.push_back(std::move(w));
  return d;
}

// Several clusters on one fabric (docs/topology.md, "Several clusters"): each cluster is a node
// template with its own leaves (its own rails and leaf groups); the clusters' leaves share one
// spine layer, or, with fabric.core, each cluster is a pod with its own `spines` spines and the
// core switches join the pods. Capacities as in build_generated, per cluster:
//   NIC <-> leaf            the cluster's NIC speed
//   leaf <-> each spine     D_leaf / o / S   (D_leaf = the leaf's NICs x the cluster's NIC speed)
//   spine <-> each core     D_spine / o_core / K,  K = core.switches / S
// so traffic between clusters crosses the spines (shared) or the cores (one pod per cluster), and
// core.oversubscription sets how thin the join is. GPUs are numbered cluster by cluster, in file
// order, node-major within a cluster.
TopologyData build_generated_clusters(const yaml::Node& root) {
  root.allow_only({"name", "description", "clusters", "fabric", "latency"});
  TopologyData d;
  d.file = root.file();
  d.generated = true;
  d.name = root.get("name") ? root.at("name").str() : std::filesystem::path(root.file()).stem().string();

  struct Part {
    std::string name;
    const NodeTemplate* tmpl = nullptr;
    std::int32_t nodes = 0, first_node = 0, nodes_per_leaf = 0, leaves = 0, first_leaf = 0, first_domain = 0;
    BytesPerSecond nic, host;
    LinkKind host_kind = LinkKind::PCIe;
    std::optional<yaml::Node> template_node, nic_node, host_node;
  };
  bool rail_optimized = true;
  std::int32_t spines = 0;
  double oversub = 1.0;
  bool has_core = false;
  std::int32_t core_switches = 0;
  double core_oversub = 1.0;
  std::optional<yaml::Node> core_switches_node;
  const auto fabric_node = root.get("fabric");
  if (fabric_node) {
    fabric_node->allow_only({"rail_optimized", "spines", "oversubscription", "core"});
    if (auto v = fabric_node->get("rail_optimized")) rail_optimized = v->boolean();
    if (auto v = fabric_node->get("spines")) spines = positive_int32(*v, 100'000);
    if (auto v = fabric_node->get("oversubscription")) oversub = positive_number(*v);
    if (auto core = fabric_node->get("core")) {
      core->allow_only({"switches", "oversubscription"});
      has_core = true;
      core_switches_node = core->at("switches");
      core_switches = positive_int32(*core_switches_node, 100'000);
      if (auto v = core->get("oversubscription")) core_oversub = positive_number(*v);
    }
  }

  // ---- the clusters
  const auto list = root.at("clusters");
  if (list.size() == 0) list.fail("needs at least one cluster");
  std::vector<Part> parts;
  std::set<std::string> names;
  std::int64_t gpu_total64 = 0;
  std::int32_t total_nodes = 0, total_leaves = 0, total_domains = 0, max_rails = 0;
  for (const auto& c : list.items()) {
    c.allow_only({"name", "template", "nodes", "racks", "nic_speed", "host_link", "host_link_kind", "nodes_per_leaf"});
    Part p;
    const auto name_node = c.at("name");
    p.name = name_node.str();
    if (p.name.empty() || p.name.find('/') != std::string::npos)
      name_node.fail("a cluster name must be non-empty and without '/', got '" + p.name + "'");
    if (!names.insert(p.name).second) name_node.fail("duplicate cluster name '" + p.name + "'");
    const auto tnode = c.at("template");
    p.tmpl = find_template(tnode.str());
    p.template_node = tnode;
    if (!p.tmpl) {
      std::string known;
      for (const auto& t : node_templates()) known += (known.empty() ? "" : ", ") + std::string(t.name);
      tnode.fail("unknown node template '" + tnode.str() + "'; known templates: " + known);
    }
    if (p.tmpl->rack_scale) {
      if (auto n = c.get("nodes")) n->fail(std::string(p.tmpl->name) + " is counted in racks ('racks: N'), not nodes");
      p.nodes = positive_int32(c.at("racks"), 100'000) * p.tmpl->nodes_per_domain;
    } else {
      if (auto n = c.get("racks")) n->fail(std::string(p.tmpl->name) + " is counted in nodes ('nodes: N'), not racks");
      p.nodes = positive_int32(c.at("nodes"), 1'000'000);
    }
    p.nic_node = c.get("nic_speed");
    p.nic = p.nic_node ? positive_bandwidth(*p.nic_node) : p.tmpl->nic;
    p.host_node = c.get("host_link");
    p.host = p.host_node ? positive_bandwidth(*p.host_node) : p.tmpl->gpu_nic_pcie;
    p.host_kind = p.tmpl->host_link_kind;
    if (auto k = c.get("host_link_kind")) {
      const std::string v = k->str();
      if (v == "pcie") p.host_kind = LinkKind::PCIe;
      else if (v == "c2c") p.host_kind = LinkKind::C2C;
      else k->fail("unknown host link kind '" + v + "'; expected one of: pcie, c2c");
    }
    p.nodes_per_leaf = c.get("nodes_per_leaf") ? positive_int32(c.at("nodes_per_leaf")) : p.nodes;
    const std::int32_t R = p.tmpl->gpus_per_node;
    const std::int32_t groups = (p.nodes + p.nodes_per_leaf - 1) / p.nodes_per_leaf;
    p.leaves = rail_optimized ? groups * R : groups;
    p.first_node = total_nodes;
    p.first_leaf = total_leaves;
    p.first_domain = total_domains;
    total_nodes += p.nodes;
    total_leaves += p.leaves;
    total_domains += (p.nodes + p.tmpl->nodes_per_domain - 1) / p.tmpl->nodes_per_domain;
    max_rails = std::max(max_rails, R);
    gpu_total64 += static_cast<std::int64_t>(p.nodes) * R;
    if (gpu_total64 > 4'000'000) c.fail("clusters too large: more than 4000000 GPUs");
    parts.push_back(std::move(p));
  }
  if (total_leaves > 1 && spines == 0) {
    const std::string why = std::to_string(total_leaves) + " leaf switches over " + std::to_string(parts.size()) +
                            " cluster(s) need spine switches to reach each other";
    throw ConfigError(d.file, fabric_node ? fabric_node->line() : list.line(), "fabric.spines",
                      "required key is missing: " + why);
  }
  std::int32_t K = 0;
  if (has_core) {
    if (core_switches % spines != 0)
      core_switches_node->fail("the core switches must be a multiple of the spines per cluster (" +
                               std::to_string(spines) + "): spine s of every cluster connects to the core switches of plane s");
    K = core_switches / spines;
  }
  const std::int32_t pods = has_core ? static_cast<std::int32_t>(parts.size()) : 1;
  const Latencies lat = read_generator_latencies(root);

  // ---- devices: every cluster's GPUs first (GPU g is device g), then NVSwitches, NICs, leaves,
  // spines, cores.
  const auto gpu_total = static_cast<std::size_t>(gpu_total64);
  auto node_prefix = [](const Part& p, std::int32_t n) {  // n: node index within the cluster
    return p.name + "/" +
           (p.tmpl->rack_scale ? "rack" + std::to_string(n / p.tmpl->nodes_per_domain) + "/tray" +
                                     std::to_string(n % p.tmpl->nodes_per_domain)
                               : "node" + std::to_string(n));
  };
  for (const auto& p : parts)
    for (std::int32_t n = 0; n < p.nodes; ++n)
      for (std::int32_t i = 0; i < p.tmpl->gpus_per_node; ++i)
        d.add_device(DeviceKind::GPU, node_prefix(p, n) + "/gpu" + std::to_string(i), p.first_node + n, i);
  std::vector<DeviceId> fabric_dev;
  for (const auto& p : parts) {
    const std::int32_t per = p.tmpl->nodes_per_domain;
    for (std::int32_t k = 0; k < (p.nodes + per - 1) / per; ++k)
      fabric_dev.push_back(d.add_device(DeviceKind::NVSwitch,
                                        p.name + "/" + (p.tmpl->rack_scale ? "rack" : "node") + std::to_string(k) + "/nvswitch",
                                        p.tmpl->rack_scale ? -1 : p.first_node + k, -1));
  }
  std::vector<DeviceId> nic_dev;
  nic_dev.reserve(gpu_total);
  for (const auto& p : parts)
    for (std::int32_t n = 0; n < p.nodes; ++n)
      for (std::int32_t i = 0; i < p.tmpl->gpus_per_node; ++i)
        nic_dev.push_back(d.add_device(DeviceKind::NIC, node_prefix(p, n) + "/nic" + std::to_string(i), p.first_node + n, i));
  std::vector<DeviceId> leaf_dev;
  for (const auto& p : parts) {
    const std::int32_t R = p.tmpl->gpus_per_node;
    for (std::int32_t l = 0; l < p.leaves; ++l)
      leaf_dev.push_back(d.add_device(DeviceKind::Leaf,
                                      p.name + "/group" + std::to_string(rail_optimized ? l / R : l) + "/leaf" +
                                          (rail_optimized ? "-rail" + std::to_string(l % R) : std::string()),
                                      -1, rail_optimized ? l % R : -1));
  }
  std::vector<DeviceId> spine_dev;
  for (std::int32_t q = 0; q < pods; ++q)
    for (std::int32_t s = 0; s < spines; ++s)
      spine_dev.push_back(d.add_device(
          DeviceKind::Spine, (has_core ? parts[static_cast<std::size_t>(q)].name + "/" : std::string()) + "spine" + std::to_string(s),
          -1, -1));
  std::vector<DeviceId> core_dev;
  for (std::int32_t c = 0; c < core_switches; ++c)
    core_dev.push_back(d.add_device(DeviceKind::Core, "core" + std::to_string(c), -1, -1));

  // ---- links: per GPU (NVLink, host link, NIC <-> leaf), then leaf <-> spine, spine <-> core.
  auto& f = d.fabric;
  f.leaves = total_leaves;
  f.spines_per_pod = spines;
  f.pods = pods;
  f.cores_per_plane = K;
  f.gpu_leaf.resize(gpu_total);
  f.gpu_to_nic.resize(gpu_total);
  f.nic_to_gpu.resize(gpu_total);
  f.nic_to_leaf.resize(gpu_total);
  f.leaf_to_nic.resize(gpu_total);
  f.leaf_pod.resize(static_cast<std::size_t>(total_leaves));
  std::vector<double> leaf_down_total(static_cast<std::size_t>(total_leaves), 0.0);  // D_leaf
  std::size_t g = 0;
  for (std::size_t q = 0; q < parts.size(); ++q) {
    const auto& p = parts[q];
    const std::int32_t G = p.tmpl->gpus_per_node;
    for (std::int32_t n = 0; n < p.nodes; ++n) {
      const std::int32_t group = n / p.nodes_per_leaf;
      for (std::int32_t i = 0; i < G; ++i, ++g) {
        const auto gpu = static_cast<DeviceId>(g);
        d.add_duplex(gpu, fabric_dev[static_cast<std::size_t>(p.first_domain + n / p.tmpl->nodes_per_domain)],
                     p.tmpl->gpu_nvlink, lat.nvlink, LinkKind::NVLink);
        const std::int32_t leaf = p.first_leaf + (rail_optimized ? group * G + i : group);
        f.gpu_leaf[g] = leaf;
        leaf_down_total[static_cast<std::size_t>(leaf)] += p.nic.value;
        f.gpu_to_nic[g] = d.add_duplex(gpu, nic_dev[g], p.host, p.host_kind == LinkKind::C2C ? lat.c2c : lat.pcie, p.host_kind);
        f.nic_to_gpu[g] = f.gpu_to_nic[g] + 1;
        f.nic_to_leaf[g] = d.add_duplex(nic_dev[g], leaf_dev[static_cast<std::size_t>(leaf)], p.nic, lat.nic_leaf,
                                        LinkKind::Network);
        f.leaf_to_nic[g] = f.nic_to_leaf[g] + 1;
      }
    }
    for (std::int32_t l = 0; l < p.leaves; ++l)
      f.leaf_pod[static_cast<std::size_t>(p.first_leaf + l)] = has_core ? static_cast<std::int32_t>(q) : 0;
  }
  f.leaf_up.resize(static_cast<std::size_t>(total_leaves * spines));
  f.leaf_down.resize(static_cast<std::size_t>(total_leaves * spines));
  std::vector<double> spine_down_total(static_cast<std::size_t>(pods * spines), 0.0);
  for (std::int32_t l = 0; l < total_leaves; ++l) {
    const std::int32_t pod = f.leaf_pod[static_cast<std::size_t>(l)];
    const BytesPerSecond up{leaf_down_total[static_cast<std::size_t>(l)] / oversub / std::max(spines, 1)};
    for (std::int32_t s = 0; s < spines; ++s) {
      const auto slot = static_cast<std::size_t>(l * spines + s);
      f.leaf_up[slot] = d.add_duplex(leaf_dev[static_cast<std::size_t>(l)],
                                     spine_dev[static_cast<std::size_t>(pod * spines + s)], up, lat.leaf_spine,
                                     LinkKind::Network);
      f.leaf_down[slot] = f.leaf_up[slot] + 1;
      spine_down_total[static_cast<std::size_t>(pod * spines + s)] += up.value;
    }
  }
  f.spine_up.resize(static_cast<std::size_t>(pods * spines * K));
  f.spine_down.resize(static_cast<std::size_t>(pods * spines * K));
  for (std::int32_t q = 0; q < pods; ++q)
    for (std::int32_t s = 0; s < spines; ++s) {
      const BytesPerSecond up{spine_down_total[static_cast<std::size_t>(q * spines + s)] / core_oversub / std::max(K, 1)};
      for (std::int32_t k = 0; k < K; ++k) {
        const auto slot = static_cast<std::size_t>((q * spines + s) * K + k);
        f.spine_up[slot] = d.add_duplex(spine_dev[static_cast<std::size_t>(q * spines + s)],
                                        core_dev[static_cast<std::size_t>(s * K + k)], up, lat.spine_core, LinkKind::Network);
        f.spine_down[slot] = f.spine_up[slot] + 1;
      }
    }

  d.node_count = total_nodes;
  d.rail_count = rail_optimized ? max_rails : 1;
  d.finish();

  // A NIC faster than its host link, per cluster (as in build_generated).
  for (const auto& p : parts) {
    if (!(p.nic.value > p.host.value)) continue;
    const yaml::Node& at = p.nic_node ? *p.nic_node : p.host_node ? *p.host_node : *p.template_node;
    d.warnings.push_back(d.file + ":" + std::to_string(at.line()) + ": " + at.key() + ": cluster '" + p.name + "': the NIC (" +
                         format(p.nic) + ") is faster than the GPU<->NIC host link (" +
                         std::string(to_string(p.host_kind)) + " " + format(p.host) +
                         "): the host link caps each GPU's network bandwidth at " + format(p.host));
  }
  return d;
}

namespace {

DeviceKind parse_device_kind(const yaml::Node& n) {
  static const std::map<std::string, DeviceKind> kinds{
      {"gpu", DeviceKind::GPU},   {"nvswitch", DeviceKind::NVSwitch}, {"nic", DeviceKind::NIC}, {"leaf", DeviceKind::Leaf},
      {"spine", DeviceKind::Spine}, {"core", DeviceKind::Core},       {"cpu", DeviceKind::CPU}};
  const auto s = n.str();
  if (auto it = kinds.find(s); it != kinds.end()) return it->second;
  n.fail("unknown device kind '" + s + "'; expected one of: gpu, nvswitch, nic, leaf, spine, core, cpu");
}

LinkKind parse_link_kind(const yaml::Node& n) {
  static const std::map<std::string, LinkKind> kinds{
      {"nvlink", LinkKind::NVLink}, {"c2c", LinkKind::C2C}, {"pcie", LinkKind::PCIe}, {"network", LinkKind::Network}};
  const auto s = n.str();
  if (auto it = kinds.find(s); it != kinds.end()) return it->second;
  n.fail("unknown link kind '" + s + "'; expected one of: nvlink, c2c, pcie, network");
}

}  // namespace

TopologyData build_explicit(const yaml::Node& root) {
  root.allow_only({"name", "description", "devices", "links"});
  TopologyData d;
  d.file = root.file();
  d.generated = false;
  d.name = root.get("name") ? root.at("name").str() : std::filesystem::path(root.file()).stem().string();

  std::unordered_map<std::string, DeviceId> by_name;
  std::map<std::string, std::int32_t> node_index;
  std::vector<std::string> node_order;
  const auto devices = root.at("devices");
  if (devices.size() == 0) devices.fail("an explicit topology needs at least one device");
  for (const auto& item : devices.items()) {
    item.allow_only({"name", "kind", "node", "rail"});
    const auto name_node = item.at("name");
    const std::string name = name_node.str();
    if (name.empty()) name_node.fail("device name is empty");
    const DeviceKind kind = parse_device_kind(item.at("kind"));
    std::int32_t node = -1;
    if (auto n = item.get("node")) {
      const std::string label = n->str();
      auto [it, inserted] = node_index.emplace(label, static_cast<std::int32_t>(node_order.size()));
      if (inserted) node_order.push_back(label);
      node = it->second;
    } else if (kind == DeviceKind::GPU) {
      throw ConfigError(d.file, item.line(), item.key() + ".node",
                        "required key is missing: GPU '" + name + "' must name its node");
    }
    std::int32_t rail = -1;
    if (auto r = item.get("rail")) {
      const auto v = r->integer();
      if (v < 0 || v > 1'000'000) r->fail("rail must be a non-negative integer, got " + std::to_string(v));
      rail = static_cast<std::int32_t>(v);
    }
    if (by_name.count(name)) name_node.fail("duplicate device name '" + name + "'");
    by_name.emplace(name, d.add_device(kind, name, node, rail, item.line()));
  }
  d.node_count = static_cast<std::int32_t>(node_order.size());

  const Latencies defaults;
  for (const auto& item : root.at("links").items()) {
    item.allow_only({"from", "to", "kind", "bandwidth", "latency", "duplex"});
    auto end = [&](const char* key) {
      const auto n = item.at(key);
      const auto it = by_name.find(n.str());
      if (it == by_name.end()) n.fail("unknown device '" + n.str() + "' (not listed under 'devices')");
      return it->second;
    };
    const DeviceId from = end("from");
    const DeviceId to = end("to");
    if (from == to) item.at("to").fail("a link must join two different devices");
    const LinkKind kind = parse_link_kind(item.at("kind"));
    const BytesPerSecond bw = positive_bandwidth(item.at("bandwidth"));
    Seconds latency;
    if (auto l = item.get("latency")) latency = l->duration();
    else
      latency = kind == LinkKind::NVLink ? defaults.nvlink
                : kind == LinkKind::C2C  ? defaults.c2c
                : kind == LinkKind::PCIe ? defaults.pcie
                                         : defaults.network;
    const bool duplex = item.get("duplex") ? item.at("duplex").boolean() : true;
    if (duplex) d.add_duplex(from, to, bw, latency, kind);
    else d.add_link(from, to, bw, latency, kind);
  }
  d.finish();
  std::set<std::int32_t> rails;  // an explicit cluster has the rails its NICs name (none: 0)
  for (const auto& dev : d.devices)
    if (dev.kind == DeviceKind::NIC && dev.rail >= 0) rails.insert(dev.rail);
  d.rail_count = static_cast<std::int32_t>(rails.size());
  return d;
}

}  // namespace reshard::model::detail
