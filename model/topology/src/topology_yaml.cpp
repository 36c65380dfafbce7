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

#include "reshard/model/checked.hpp"
#include "reshard/model/errors.hpp"
#include "reshard/model/scenario_keys.hpp"
#include "topology_impl.hpp"
#include "reshard/model/yaml_reader.hpp"

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
  node->allow_only(topology_keys("latency"));
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

// What a bandwidth is, for the range no datacenter hardware falls outside of.
enum class BandwidthOf { NetworkLink, OtherLink, GpuMemory };

// A legal but implausible bandwidth (a NIC below 10 Gb/s, a link above 10 TB/s, a GPU memory
// bandwidth outside 100 GB/s - 50 TB/s): read as written, with a warning naming file, line and key
// ("" when plausible). The usual cause is a unit off by 1000 (`400Mbps` for `400Gbps`).
std::string implausible_bandwidth(const yaml::Node& n, BytesPerSecond bw, BandwidthOf what) {
  const double lo = what == BandwidthOf::NetworkLink ? 10e9 / 8 : what == BandwidthOf::GpuMemory ? 100e9 : 0;
  const double hi = what == BandwidthOf::GpuMemory ? 50e12 : 10e12;
  const char* name = what == BandwidthOf::NetworkLink ? "a network link" : what == BandwidthOf::GpuMemory
                                                                                 ? "a GPU's memory"
                                                                                 : "a link";
  std::string why;
  if (bw.value < lo)
    why = "is below " + std::string(what == BandwidthOf::NetworkLink ? "10 Gb/s" : "100 GB/s") +
          ", slower than any datacenter hardware for " + name;
  else if (bw.value > hi)
    why = "is above " + std::string(what == BandwidthOf::GpuMemory ? "50 TB/s" : "10 TB/s") + ", faster than " + name +
          " of any GPU cluster";
  if (why.empty()) return {};
  return n.file() + ":" + std::to_string(n.line()) + ": " + n.key() + ": " + checked::quote(n.str()) + " (" +
         format(bw) + ") " + why + "; read as written (check the unit: Mbps vs Gbps, GBps vs Gbps)";
}

BytesPerSecond checked_bandwidth(const yaml::Node& n, BandwidthOf what, std::vector<std::string>& warnings) {
  const BytesPerSecond bw = positive_bandwidth(n);
  if (std::string w = implausible_bandwidth(n, bw, what); !w.empty()) warnings.push_back(std::move(w));
  return bw;
}

double positive_number(const yaml::Node& n) {
  const double v = n.number();
  if (!(v > 0)) n.fail("must be a positive number, got '" + n.str() + "'");
  return v;
}

// A GPU's memory capacity (cluster `gpu_memory`, an explicit GPU's `memory`): a size with its
// unit, more than 0 and at most kMostGpuMemory.
Bytes gpu_memory_size(const yaml::Node& n) {
  const Bytes b = n.size_bytes();
  if (b.value <= 0) n.fail("a GPU's memory must be positive, got " + checked::quote(n.str()));
  if (b > kMostGpuMemory)
    n.fail(checked::quote(n.str()) + " is more than " + format(kMostGpuMemory) + "; no GPU has that much memory");
  return b;
}

std::int32_t positive_int32(const yaml::Node& n, std::int64_t max = 1'000'000) {
  const auto v = n.positive_integer();
  if (v > max) n.fail("must be at most " + std::to_string(max) + ", got " + std::to_string(v));
  return static_cast<std::int32_t>(v);
}

}  // namespace

namespace {

// One cluster of a generated topology: its node template, size, NIC and host-link overrides, and
// where its nodes, leaves and NVLink domains start in the topology's numbering. A one-cluster
// topology (`cluster:`) is one part without a name; with `clusters:` each part's name prefixes
// its devices' names.
struct ClusterPart {
  explicit ClusterPart(yaml::Node template_key) : template_node(std::move(template_key)) {}
  std::string name;
  const NodeTemplate* tmpl = nullptr;
  yaml::Node template_node;
  std::int32_t nodes = 0;
  std::optional<yaml::Node> nic_node, host_node;  // nic_speed, host_link when given
  BytesPerSecond nic_bw, host_bw;
  std::vector<std::string> warnings;  // implausible values read
  Bytes gpu_memory;  // per GPU: the template's capacity, or gpu_memory
  LinkKind host_kind = LinkKind::PCIe;
  std::int32_t nodes_per_leaf = 0, leaves = 0;
  std::int32_t first_node = 0, first_leaf = 0, first_domain = 0;

  std::string prefix() const { return name.empty() ? std::string() : name + "/"; }
  std::int32_t gpus_per_node() const { return tmpl->gpus_per_node; }
  std::int32_t domains() const { return (nodes + tmpl->nodes_per_domain - 1) / tmpl->nodes_per_domain; }
  // "node3" or "rack0/tray3", n counted within the cluster.
  std::string node_label(std::int32_t n) const {
    const std::int32_t per = tmpl->nodes_per_domain;
    return prefix() + (tmpl->rack_scale ? "rack" + std::to_string(n / per) + "/tray" + std::to_string(n % per)
                                        : "node" + std::to_string(n));
  }
};

// A cluster's own keys: template, size, NIC, host link and GPU memory (`named`: an item of
// `clusters:`, which also carries a name).
ClusterPart read_cluster(const yaml::Node& cluster, bool named) {
  cluster.allow_only(topology_keys(named ? "clusters[]" : "cluster"));
  ClusterPart c(cluster.at("template"));
  if (named) {
    const auto name_node = cluster.at("name");
    c.name = name_node.str();
    if (c.name.empty() || c.name.find('/') != std::string::npos)
      name_node.fail("a cluster name must be non-empty and without '/', got '" + c.name + "'");
  }
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
  c.nic_bw = c.nic_node ? checked_bandwidth(*c.nic_node, BandwidthOf::NetworkLink, c.warnings) : tmpl->nic;
  // The GPU <-> NIC host link: the template's unless host_link / host_link_kind say otherwise.
  c.host_node = cluster.get("host_link");
  c.host_bw = c.host_node ? checked_bandwidth(*c.host_node, BandwidthOf::OtherLink, c.warnings) : tmpl->gpu_nic_pcie;
  c.host_kind = tmpl->host_link_kind;
  if (auto k = cluster.get("host_link_kind")) {
    const std::string v = k->str();
    if (v == "pcie") c.host_kind = LinkKind::PCIe;
    else if (v == "c2c") c.host_kind = LinkKind::C2C;
    else k->fail("unknown host link kind '" + v + "'; expected one of: pcie, c2c");
  }
  const auto memory_node = cluster.get("gpu_memory");
  c.gpu_memory = memory_node ? gpu_memory_size(*memory_node) : tmpl->memory_capacity;
  c.nodes_per_leaf = cluster.get("nodes_per_leaf") ? positive_int32(cluster.at("nodes_per_leaf")) : c.nodes;
  return c;
}

// fabric: the rails, the spine layer and the optional core layer shared by every cluster, and the
// pod of each leaf.
struct FabricSpec {
  std::optional<yaml::Node> node;  // the fabric mapping, when given
  bool rail_optimized = true;
  std::int32_t nodes_per_leaf = 0;  // fabric.nodes_per_leaf (one cluster); 0 when not given
  std::int32_t spines = 0;
  std::optional<yaml::Node> spines_node;
  double oversub = 1.0;
  bool has_core = false;
  std::int32_t groups_per_pod = 0;  // core.leaf_groups_per_pod (one cluster)
  std::int32_t core_switches = 0;
  std::optional<yaml::Node> core_switches_node;
  double core_oversub = 1.0;
  std::int32_t K = 0, pods = 1;         // cores per plane; pods (spine layers)
  std::int32_t leaves = 0;              // over every cluster
  std::optional<yaml::Node> nic_node, host_node;  // fabric.nic_speed, fabric.host_link: every cluster's
  std::vector<std::int32_t> leaf_pod;   // per leaf
  std::vector<std::string> pod_prefix;  // per pod: what names its spines ("" without a core layer)
};

// The fabric keys (`one_cluster`: a `cluster:` topology, whose fabric also groups leaves by
// nodes_per_leaf and pods by core.leaf_groups_per_pod).
FabricSpec read_fabric_keys(const yaml::Node& root, bool one_cluster) {
  FabricSpec fs;
  fs.node = root.get("fabric");
  if (!fs.node) return fs;
  const yaml::Node& f = *fs.node;
  f.allow_only(topology_keys(one_cluster ? "fabric" : "clusters.fabric"));
  if (auto v = f.get("rail_optimized")) fs.rail_optimized = v->boolean();
  if (auto v = f.get("nodes_per_leaf")) fs.nodes_per_leaf = positive_int32(*v);
  if ((fs.spines_node = f.get("spines"))) fs.spines = positive_int32(*fs.spines_node, 100'000);
  if (auto v = f.get("oversubscription")) fs.oversub = positive_number(*v);
  fs.nic_node = f.get("nic_speed");
  fs.host_node = f.get("host_link");
  if (auto core = f.get("core")) {
    core->allow_only(topology_keys(one_cluster ? "fabric.core" : "clusters.fabric.core"));
    fs.has_core = true;
    if (one_cluster) fs.groups_per_pod = positive_int32(core->at("leaf_groups_per_pod"));
    fs.core_switches_node = core->at("switches");
    fs.core_switches = positive_int32(*fs.core_switches_node, 100'000);
    if (auto v = core->get("oversubscription")) fs.core_oversub = positive_number(*v);
  }
  return fs;
}

// fabric.nic_speed and fabric.host_link set every cluster's NIC speed and host link (one knob for
// a sweep over a several-cluster topology); a cluster that sets its own as well is refused, so
// neither silently wins.
void apply_fabric_speeds(const FabricSpec& fs, std::vector<ClusterPart>& parts) {
  for (auto& p : parts) {
    if (fs.nic_node) {
      if (p.nic_node) p.nic_node->fail("given here and as fabric.nic_speed (every cluster's); keep one");
      p.nic_node = fs.nic_node;
      p.nic_bw = checked_bandwidth(*fs.nic_node, BandwidthOf::NetworkLink, p.warnings);
    }
    if (fs.host_node) {
      if (p.host_node) p.host_node->fail("given here and as fabric.host_link (every cluster's); keep one");
      p.host_node = fs.host_node;
      p.host_bw = checked_bandwidth(*fs.host_node, BandwidthOf::OtherLink, p.warnings);
    }
  }
}

// Leaves per cluster (a leaf per group of nodes_per_leaf nodes, per rail when rail-optimized),
// their numbering over the clusters, and the core layer's planes. `pod_of_leaf_group(part, group)`
// gives a leaf group's pod; `unit`: what shares the spines of one pod, in error messages.
template <class PodOf>
void lay_out_fabric(FabricSpec& fs, std::vector<ClusterPart>& parts, std::int32_t pods, const std::string& unit,
                    const std::string& file, PodOf pod_of_leaf_group) {
  std::int32_t nodes = 0, domains = 0;
  for (auto& p : parts) {
    const std::int32_t groups = (p.nodes + p.nodes_per_leaf - 1) / p.nodes_per_leaf;
    p.leaves = fs.rail_optimized ? groups * p.gpus_per_node() : groups;
    p.first_node = nodes;
    p.first_leaf = fs.leaves;
    p.first_domain = domains;
    nodes += p.nodes;
    fs.leaves += p.leaves;
    domains += p.domains();
  }
  // Without a core layer the spines default to one per rail (the most rails of any cluster): a
  // leaf's uplink total is its downlink total / oversubscription whatever the count, which only
  // sets how that total is split over links.
  if (fs.leaves > 1 && fs.spines == 0 && !fs.has_core)
    for (const auto& p : parts) fs.spines = std::max(fs.spines, p.gpus_per_node());
  if (fs.has_core && fs.spines == 0)
    throw ConfigError(file, fs.node->line(), "fabric.spines", "a core layer needs spine switches");
  if (fs.has_core) {
    if (fs.core_switches % fs.spines != 0)
      fs.core_switches_node->fail("the core switches must be a multiple of the spines per " + unit + " (" +
                                  std::to_string(fs.spines) + "): spine s of every " + unit +
                                  " connects to the core switches of plane s");
    fs.K = fs.core_switches / fs.spines;
  }
  fs.pods = fs.has_core ? pods : 1;
  fs.leaf_pod.reserve(static_cast<std::size_t>(fs.leaves));
  for (std::size_t q = 0; q < parts.size(); ++q) {
    const std::int32_t R = parts[q].gpus_per_node();
    for (std::int32_t l = 0; l < parts[q].leaves; ++l)
      fs.leaf_pod.push_back(fs.has_core ? pod_of_leaf_group(q, fs.rail_optimized ? l / R : l) : 0);
  }
}

// The devices of a generated topology, by role.
struct GeneratedDevices {
  std::vector<DeviceId> fabric, nic, leaf, spine, core;  // NVSwitch per domain, NIC per GPU, ...
};

// Every cluster's GPUs first, so GPU g is device g (cluster by cluster, node-major, GPU index in
// the node minor); then NVSwitches, NICs, leaves, spines, cores.
GeneratedDevices add_devices(TopologyData& d, const std::vector<ClusterPart>& parts, const FabricSpec& fs) {
  std::size_t gpu_total = 0, domains = 0;
  for (const auto& p : parts) {
    gpu_total += static_cast<std::size_t>(p.nodes) * static_cast<std::size_t>(p.gpus_per_node());
    domains += static_cast<std::size_t>(p.domains());
  }
  d.devices.reserve(gpu_total * 2 + domains +
                    static_cast<std::size_t>(fs.leaves + fs.pods * fs.spines + fs.core_switches));
  for (const auto& p : parts)
    for (std::int32_t n = 0; n < p.nodes; ++n)
      for (std::int32_t i = 0; i < p.gpus_per_node(); ++i) {
        Device& gpu = d.devices[static_cast<std::size_t>(
            d.add_device(DeviceKind::GPU, p.node_label(n) + "/gpu" + std::to_string(i), p.first_node + n, i))];
        gpu.memory_bandwidth = p.tmpl->memory;
        gpu.memory = p.gpu_memory;
      }
  GeneratedDevices dev;
  for (const auto& p : parts) {
    const bool racks = p.tmpl->rack_scale;
    for (std::int32_t k = 0; k < p.domains(); ++k)
      dev.fabric.push_back(d.add_device(DeviceKind::NVSwitch,
                                        p.prefix() + (racks ? "rack" : "node") + std::to_string(k) + "/nvswitch",
                                        racks ? -1 : p.first_node + k, -1));
  }
  dev.nic.reserve(gpu_total);
  for (const auto& p : parts)
    for (std::int32_t n = 0; n < p.nodes; ++n)
      for (std::int32_t i = 0; i < p.gpus_per_node(); ++i)
        dev.nic.push_back(d.add_device(DeviceKind::NIC, p.node_label(n) + "/nic" + std::to_string(i), p.first_node + n, i));
  for (const auto& p : parts) {
    const std::int32_t R = p.gpus_per_node();
    for (std::int32_t l = 0; l < p.leaves; ++l)
      dev.leaf.push_back(d.add_device(DeviceKind::Leaf,
                                      p.prefix() + "group" + std::to_string(fs.rail_optimized ? l / R : l) + "/leaf" +
                                          (fs.rail_optimized ? "-rail" + std::to_string(l % R) : std::string()),
                                      -1, fs.rail_optimized ? l % R : -1));
  }
  for (std::int32_t q = 0; q < fs.pods; ++q)
    for (std::int32_t s = 0; s < fs.spines; ++s)
      dev.spine.push_back(
          d.add_device(DeviceKind::Spine, fs.pod_prefix[static_cast<std::size_t>(q)] + "spine" + std::to_string(s), -1, -1));
  for (std::int32_t c = 0; c < fs.core_switches; ++c)
    dev.core.push_back(d.add_device(DeviceKind::Core, "core" + std::to_string(c), -1, -1));
  return dev;
}

// The links, recorded in d.fabric for structural routing (Fabric, topology_impl.hpp): per GPU
// (NVLink, host link, NIC <-> leaf), then leaf <-> spine, spine <-> core.
void add_links(TopologyData& d, const std::vector<ClusterPart>& parts, const FabricSpec& fs, const GeneratedDevices& dev,
               const Latencies& lat) {
  const std::int32_t leaves = fs.leaves, spines = fs.spines, pods = fs.pods, K = fs.K;
  const std::size_t gpu_total = dev.nic.size();
  auto& f = d.fabric;
  f.leaves = leaves;
  f.spines_per_pod = spines;
  f.pods = pods;
  f.cores_per_plane = K;
  f.leaf_pod = fs.leaf_pod;
  f.gpu_leaf.resize(gpu_total);
  f.gpu_to_nic.resize(gpu_total);
  f.nic_to_gpu.resize(gpu_total);
  f.nic_to_leaf.resize(gpu_total);
  f.leaf_to_nic.resize(gpu_total);
  d.links.reserve(gpu_total * 6 + static_cast<std::size_t>(leaves * spines * 2 + pods * spines * K * 2));
  std::vector<std::int32_t> leaf_nics(static_cast<std::size_t>(leaves), 0);
  std::vector<BytesPerSecond> leaf_nic_bw(static_cast<std::size_t>(leaves));  // a leaf serves one cluster
  std::size_t g = 0;
  for (const auto& p : parts) {
    const std::int32_t G = p.gpus_per_node();
    for (std::int32_t n = 0; n < p.nodes; ++n) {
      const std::int32_t group = n / p.nodes_per_leaf;
      for (std::int32_t i = 0; i < G; ++i, ++g) {
        const auto gpu = static_cast<DeviceId>(g);
        d.add_duplex(gpu, dev.fabric[static_cast<std::size_t>(p.first_domain + n / p.tmpl->nodes_per_domain)],
                     p.tmpl->gpu_nvlink, lat.nvlink, LinkKind::NVLink);
        const std::int32_t leaf = p.first_leaf + (fs.rail_optimized ? group * G + i : group);
        f.gpu_leaf[g] = leaf;
        ++leaf_nics[static_cast<std::size_t>(leaf)];
        leaf_nic_bw[static_cast<std::size_t>(leaf)] = p.nic_bw;
        f.gpu_to_nic[g] = d.add_duplex(gpu, dev.nic[g], p.host_bw, p.host_kind == LinkKind::C2C ? lat.c2c : lat.pcie,
                                       p.host_kind);
        f.nic_to_gpu[g] = f.gpu_to_nic[g] + 1;
        f.nic_to_leaf[g] = d.add_duplex(dev.nic[g], dev.leaf[static_cast<std::size_t>(leaf)], p.nic_bw, lat.nic_leaf,
                                        LinkKind::Network);
        f.leaf_to_nic[g] = f.nic_to_leaf[g] + 1;
      }
    }
  }
  f.leaf_up.resize(static_cast<std::size_t>(leaves * spines));
  f.leaf_down.resize(static_cast<std::size_t>(leaves * spines));
  std::vector<double> spine_down_total(static_cast<std::size_t>(pods * spines), 0.0);
  for (std::int32_t l = 0; l < leaves; ++l) {
    const auto li = static_cast<std::size_t>(l);
    const std::int32_t pod = f.leaf_pod[li];
    // uplink per spine = D_leaf / o / S
    const BytesPerSecond up{leaf_nics[li] * leaf_nic_bw[li].value / fs.oversub / std::max(spines, 1)};
    for (std::int32_t s = 0; s < spines; ++s) {
      const auto slot = static_cast<std::size_t>(l * spines + s);
      f.leaf_up[slot] = d.add_duplex(dev.leaf[li], dev.spine[static_cast<std::size_t>(pod * spines + s)], up,
                                     lat.leaf_spine, LinkKind::Network);
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
std::string host_link_warning(const std::string& file, const ClusterPart& c) {
  if (!(c.nic_bw.value > c.host_bw.value)) return {};
  const std::string host = std::string(to_string(c.host_kind)) + " " + format(c.host_bw);
  const std::string caps = ": the host link caps each GPU's network bandwidth at " + format(c.host_bw);
  if (!c.name.empty()) {  // an item of `clusters:`
    const yaml::Node& at = c.nic_node ? *c.nic_node : c.host_node ? *c.host_node : c.template_node;
    return file + ":" + std::to_string(at.line()) + ": " + at.key() + ": cluster '" + c.name + "': the NIC (" +
           format(c.nic_bw) + ") is faster than the GPU<->NIC host link (" + host + ")" + caps;
  }
  const std::string tmpl_name(c.tmpl->name);
  std::string where, what;
  if (c.nic_node) {
    where = file + ":" + std::to_string(c.nic_node->line()) + ": " + c.nic_node->key() + ": ";
    what = format(c.nic_bw) + " exceeds the GPU<->NIC host link (" + host +
           (c.host_node ? ", " + c.host_node->key() : " of the " + tmpl_name + " template") + ")";
  } else {
    where = file + ":" + std::to_string(c.host_node ? c.host_node->line() : c.template_node.line()) +
            (c.host_node ? ": " + c.host_node->key() + ": " : ": cluster.template: ");
    what = "the GPU<->NIC host link (" + host + ") is slower than the " + tmpl_name + " template's NIC (" +
           format(c.nic_bw) + ")";
  }
  return where + what + caps;
}

TopologyData generated_topology(const yaml::Node& root, std::vector<ClusterPart> parts, FabricSpec fs) {
  TopologyData d;
  d.file = root.file();
  d.generated = true;
  d.name = root.get("name") ? root.at("name").str() : std::filesystem::path(root.file()).stem().string();
  const Latencies lat = read_generator_latencies(root);
  const GeneratedDevices dev = add_devices(d, parts, fs);
  add_links(d, parts, fs, dev, lat);
  std::int32_t max_rails = 0;
  for (const auto& p : parts) {
    d.node_count += p.nodes;
    max_rails = std::max(max_rails, p.gpus_per_node());  // one NIC per GPU: rail r = the r-th GPU/NIC of a node
  }
  d.rail_count = fs.rail_optimized ? max_rails : 1;
  d.derive_structure();
  GpuId first = 0;
  for (const auto& p : parts) {
    const std::int32_t gpus = p.nodes * p.gpus_per_node();
    d.clusters.push_back({p.name, p.tmpl->name, p.nodes, first, gpus});
    first += gpus;
  }
  for (const auto& p : parts) {
    d.warnings.insert(d.warnings.end(), p.warnings.begin(), p.warnings.end());
    if (std::string w = host_link_warning(d.file, p); !w.empty()) d.warnings.push_back(std::move(w));
  }
  return d;
}

}  // namespace

TopologyData build_generated(const yaml::Node& root) {
  root.allow_only(topology_keys("root.cluster"));
  const auto cluster = root.at("cluster");
  std::vector<ClusterPart> parts{read_cluster(cluster, false)};
  ClusterPart& c = parts[0];
  const std::int64_t most = checked::read_limits().gpus;
  if (const std::int64_t gpus = static_cast<std::int64_t>(c.nodes) * c.gpus_per_node(); gpus > most)
    cluster.fail("cluster too large: " + std::to_string(gpus) + " GPUs, more than " + std::to_string(most) + ", the most reshard reads");
  FabricSpec fs = read_fabric_keys(root, true);
  apply_fabric_speeds(fs, parts);
  // nodes_per_leaf under `cluster:` (as in each item of `clusters:`) or, as before, under `fabric:`.
  if (fs.nodes_per_leaf > 0) {
    if (cluster.get("nodes_per_leaf"))
      cluster.at("nodes_per_leaf").fail("given twice: here and as fabric.nodes_per_leaf; keep one");
    c.nodes_per_leaf = fs.nodes_per_leaf;
  }
  const std::int32_t groups = (c.nodes + c.nodes_per_leaf - 1) / c.nodes_per_leaf;
  const std::int32_t pods = fs.has_core ? (groups + fs.groups_per_pod - 1) / fs.groups_per_pod : 1;
  lay_out_fabric(fs, parts, pods, "pod", root.file(), [&](std::size_t, std::int32_t group) { return group / std::max(fs.groups_per_pod, 1); });
  for (std::int32_t p = 0; p < fs.pods; ++p) fs.pod_prefix.push_back(fs.has_core ? "pod" + std::to_string(p) + "/" : "");
  return generated_topology(root, std::move(parts), std::move(fs));
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
  root.allow_only(topology_keys("root.clusters"));
  FabricSpec fs = read_fabric_keys(root, false);
  const auto list = root.at("clusters");
  if (list.size() == 0) list.fail("needs at least one cluster");
  std::vector<ClusterPart> parts;
  std::set<std::string> names;
  std::int64_t gpus = 0;
  const std::int64_t most = checked::read_limits().gpus;
  for (const auto& c : list.items()) {
    ClusterPart p = read_cluster(c, true);
    if (!names.insert(p.name).second) c.at("name").fail("duplicate cluster name '" + p.name + "'");
    gpus += static_cast<std::int64_t>(p.nodes) * p.gpus_per_node();
    if (gpus > most) c.fail("clusters too large: more than " + std::to_string(most) + " GPUs, the most reshard reads");
    parts.push_back(std::move(p));
  }
  apply_fabric_speeds(fs, parts);
  const auto n = static_cast<std::int32_t>(parts.size());
  lay_out_fabric(fs, parts, n, "cluster", root.file(), [](std::size_t cluster, std::int32_t) { return static_cast<std::int32_t>(cluster); });
  for (std::int32_t p = 0; p < fs.pods; ++p)
    fs.pod_prefix.push_back(fs.has_core ? parts[static_cast<std::size_t>(p)].name + "/" : "");
  return generated_topology(root, std::move(parts), std::move(fs));
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
  root.allow_only(topology_keys("root.explicit"));
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
    item.allow_only(topology_keys("devices[]"));
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
    const DeviceId id = d.add_device(kind, name, node, rail, item.line());
    if (auto m = item.get("memory_bandwidth")) {
      if (kind != DeviceKind::GPU) m->fail("memory_bandwidth is a GPU's; '" + name + "' is not a GPU");
      d.devices[static_cast<std::size_t>(id)].memory_bandwidth = checked_bandwidth(*m, BandwidthOf::GpuMemory, d.warnings);
    }
    if (auto m = item.get("memory")) {
      if (kind != DeviceKind::GPU) m->fail("memory is a GPU's; '" + name + "' is not a GPU");
      d.devices[static_cast<std::size_t>(id)].memory = gpu_memory_size(*m);
    }
    by_name.emplace(name, id);
  }
  d.node_count = static_cast<std::int32_t>(node_order.size());

  const Latencies defaults;
  for (const auto& item : root.at("links").items()) {
    item.allow_only(topology_keys("links[]"));
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
    const BytesPerSecond bw = checked_bandwidth(
        item.at("bandwidth"), kind == LinkKind::Network ? BandwidthOf::NetworkLink : BandwidthOf::OtherLink, d.warnings);
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
  d.derive_structure();
  std::set<std::int32_t> rails;  // an explicit cluster has the rails its NICs name (none: 0)
  for (const auto& dev : d.devices)
    if (dev.kind == DeviceKind::NIC && dev.rail >= 0) rails.insert(dev.rail);
  d.rail_count = static_cast<std::int32_t>(rails.size());
  return d;
}

}  // namespace reshard::model::detail
