#include "reshard/model/topology_summary.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

namespace reshard::model {

namespace {

// Smallest and largest per-GPU value over all GPUs.
template <class F>
TopologySummary::Range over_gpus(const Topology& t, F value) {
  TopologySummary::Range r;
  for (GpuId g = 0; g < t.gpu_count(); ++g) {
    const double v = value(g);
    if (g == 0 || v < r.min) r.min = v;
    if (g == 0 || v > r.max) r.max = v;
  }
  return r;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

}  // namespace

TopologySummary summarize(const Topology& t, const std::string& file) {
  TopologySummary s;
  s.name = t.name();
  s.file = file;
  s.generated = t.generated();
  s.gpus = t.gpu_count();
  s.nodes = t.node_count();
  s.domains = t.domain_count();
  s.rails = t.rail_count();
  s.devices = t.device_count();
  s.links = t.link_count();
  s.nvlink = over_gpus(t, [&](GpuId g) { return t.gpu_nvlink_bandwidth(g).value; });
  s.nic = over_gpus(t, [&](GpuId g) { return t.gpu_nic_bandwidth(g).value; });
  // The GPU <-> NIC host link and what it leaves of the NIC: min(NIC, host link) per GPU.
  s.host_link = over_gpus(t, [&](GpuId g) {
    const auto h = t.host_link(g);
    return h ? h->bandwidth.value : 0.0;
  });
  s.network = over_gpus(t, [&](GpuId g) { return t.gpu_network_bandwidth(g).value; });
  s.memory = over_gpus(t, [&](GpuId g) { return t.gpu_memory(g).as_double(); });
  std::set<LinkKind> host_kinds;
  for (GpuId g = 0; g < t.gpu_count(); ++g)
    if (const auto h = t.host_link(g)) {
      host_kinds.insert(h->kind);
      s.host_link_caps_nic = s.host_link_caps_nic || t.gpu_network_bandwidth(g).value < t.gpu_nic_bandwidth(g).value;
    }
  std::string host_kind;
  for (auto k : host_kinds) host_kind += (host_kind.empty() ? "" : "/") + std::string(to_string(k));
  if (!host_kind.empty()) s.host_link_kind = host_kind;
  s.has_host_links = !host_kinds.empty();
  std::map<std::int64_t, std::int32_t> gpus_with;  // capacity -> GPUs
  for (GpuId g = 0; g < t.gpu_count(); ++g) ++gpus_with[t.gpu_memory(g).value];
  s.gpus_by_memory.assign(gpus_with.begin(), gpus_with.end());
  s.bisection = t.bisection_bandwidth();

  // Links by kind (count, total per-direction capacity), devices by kind, domain sizes.
  for (auto k : {LinkKind::NVLink, LinkKind::C2C, LinkKind::PCIe, LinkKind::Network}) s.links_by_kind.push_back({k, 0, 0});
  for (const auto& l : t.links())
    for (auto& c : s.links_by_kind)
      if (c.kind == l.kind) {
        c.count += 1;
        c.capacity += l.bandwidth.value;
      }
  for (auto k : {DeviceKind::GPU, DeviceKind::NVSwitch, DeviceKind::NIC, DeviceKind::Leaf, DeviceKind::Spine, DeviceKind::Core,
                 DeviceKind::CPU})
    s.devices_by_kind.push_back({k, 0});
  for (const auto& d : t.devices())
    for (auto& c : s.devices_by_kind)
      if (c.kind == d.kind) c.count += 1;
  for (std::int32_t k = 0; k < t.domain_count(); ++k) {
    const auto n = static_cast<std::int32_t>(t.gpus_in_domain(k).size());
    s.gpus_per_domain_min = k == 0 ? n : std::min(s.gpus_per_domain_min, n);
    s.gpus_per_domain_max = std::max(s.gpus_per_domain_max, n);
  }
  s.fabric_groups = t.fabric_groups();
  s.clusters = t.clusters();
  s.warnings = t.warnings();
  return s;
}

nlohmann::json to_json(const TopologySummary& s) {
  nlohmann::json j;
  j["schema"] = "reshard-topo-1";
  j["topology"] = s.name;
  j["topology_file"] = s.file;
  j["form"] = s.generated ? "generated" : "explicit";
  j["gpus"] = s.gpus;
  j["nodes"] = s.nodes;
  j["nvlink_domains"] = s.domains;
  j["gpus_per_domain_min"] = s.gpus_per_domain_min;
  j["gpus_per_domain_max"] = s.gpus_per_domain_max;
  j["rails"] = s.rails;
  j["devices"] = s.devices;
  j["links"] = s.links;
  j["gpu_nvlink_Bps"] = s.nvlink.min;
  j["gpu_nvlink_max_Bps"] = s.nvlink.max;
  j["gpu_nic_Bps"] = s.nic.min;
  j["gpu_nic_max_Bps"] = s.nic.max;
  j["gpu_host_link_Bps"] = s.host_link.min;
  j["gpu_host_link_max_Bps"] = s.host_link.max;
  j["host_link_kind"] = lower(s.host_link_kind);
  j["gpu_network_Bps"] = s.network.min;
  j["gpu_network_max_Bps"] = s.network.max;
  j["gpu_memory_bytes"] = static_cast<std::int64_t>(s.memory.min);  // 0 when some GPU's is not given
  j["gpu_memory_max_bytes"] = static_cast<std::int64_t>(s.memory.max);
  j["warnings"] = s.warnings;
  j["bisection_Bps"] = s.bisection.value;
  nlohmann::json lk = nlohmann::json::object();
  for (const auto& c : s.links_by_kind) lk[lower(to_string(c.kind))] = {{"count", c.count}, {"capacity_Bps", c.capacity}};
  j["links_by_kind"] = lk;
  nlohmann::json dk = nlohmann::json::object();
  for (const auto& c : s.devices_by_kind) dk[lower(to_string(c.kind))] = c.count;
  j["devices_by_kind"] = dk;
  nlohmann::json groups = nlohmann::json::array();
  for (const auto& f : s.fabric_groups)
    groups.push_back({{"kind", kind_name(f)},
                      {"index", f.index},
                      {"gpus", f.gpus},
                      {"domains", f.domains.size()},
                      {"ingress_Bps", f.ingress.value},
                      {"egress_Bps", f.egress.value}});
  j["fabric_groups"] = groups;
  nlohmann::json clusters = nlohmann::json::array();
  for (const auto& c : s.clusters)
    clusters.push_back({{"name", c.name},
                        {"template", c.node_template},
                        {"nodes", c.nodes},
                        {"first_gpu", c.first_gpu},
                        {"gpus", c.gpus}});
  j["clusters"] = clusters;
  return j;
}

}  // namespace reshard::model
