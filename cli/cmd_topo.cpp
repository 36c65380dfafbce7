// `reshard topo FILE [--json]`: what a topology file describes (docs/design.md §11).
#include <algorithm>
#include <iostream>
#include <map>
#include <set>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>

#include "commands.hpp"
#include "reshard/model/topology.hpp"
#include "table.hpp"
#include "warnings.hpp"

namespace reshard::cli {

namespace {

using model::BytesPerSecond;
using model::DeviceKind;
using model::LinkKind;
using model::Topology;

struct Range {
  double min = 0;
  double max = 0;
};

// Smallest and largest per-GPU value over all GPUs.
template <class F>
Range over_gpus(const Topology& t, F value) {
  Range r;
  for (model::GpuId g = 0; g < t.gpu_count(); ++g) {
    const double v = value(g);
    if (g == 0 || v < r.min) r.min = v;
    if (g == 0 || v > r.max) r.max = v;
  }
  return r;
}

std::string show(Range r) {
  if (r.min == r.max) return model::format(BytesPerSecond{r.min});
  return model::format(BytesPerSecond{r.min}) + " to " + model::format(BytesPerSecond{r.max});
}

// The GPUs' memory capacities, each with its GPU count when they differ: "80.0 GB", "80.0 GB
// (256 GPUs), 186 GB (288 GPUs)"; a GPU without one is "not given".
std::string memory_line(const Topology& t) {
  std::map<std::int64_t, std::int32_t> gpus_with;  // capacity -> GPUs
  for (model::GpuId g = 0; g < t.gpu_count(); ++g) ++gpus_with[t.gpu_memory(g).value];
  auto shown = [](std::int64_t b) { return b > 0 ? model::format(model::Bytes{b}) : std::string("not given"); };
  if (gpus_with.size() == 1) return shown(gpus_with.begin()->first) + (gpus_with.begin()->first > 0 ? " per GPU" : "");
  std::string out;
  for (const auto& [bytes, count] : gpus_with)
    out += (out.empty() ? "" : ", ") + shown(bytes) + " (" + std::to_string(count) + " GPUs)";
  return out;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

void run_topo(const std::string& file, bool json) {
  const Topology t = Topology::load(file);
  print_warnings(t);
  const Range nvlink = over_gpus(t, [&](model::GpuId g) { return t.gpu_nvlink_bandwidth(g).value; });
  const Range nic = over_gpus(t, [&](model::GpuId g) { return t.gpu_nic_bandwidth(g).value; });
  // The GPU <-> NIC host link and what it leaves of the NIC: min(NIC, host link) per GPU.
  const Range host = over_gpus(t, [&](model::GpuId g) {
    const auto h = t.host_link(g);
    return h ? h->bandwidth.value : 0.0;
  });
  const Range network = over_gpus(t, [&](model::GpuId g) { return t.gpu_network_bandwidth(g).value; });
  const Range memory = over_gpus(t, [&](model::GpuId g) { return t.gpu_memory(g).as_double(); });
  std::set<LinkKind> host_kinds;
  bool capped = false;  // some GPU's host link is narrower than its NIC
  for (model::GpuId g = 0; g < t.gpu_count(); ++g)
    if (const auto h = t.host_link(g)) {
      host_kinds.insert(h->kind);
      capped = capped || t.gpu_network_bandwidth(g).value < t.gpu_nic_bandwidth(g).value;
    }
  std::string host_kind;
  for (auto k : host_kinds) host_kind += (host_kind.empty() ? "" : "/") + std::string(model::to_string(k));
  if (host_kind.empty()) host_kind = "none";
  const BytesPerSecond bisection = t.bisection_bandwidth();

  // Links by kind (count, total per-direction capacity), devices by kind, domain sizes.
  const LinkKind link_kinds[] = {LinkKind::NVLink, LinkKind::C2C, LinkKind::PCIe, LinkKind::Network};
  const DeviceKind device_kinds[] = {DeviceKind::GPU,  DeviceKind::NVSwitch, DeviceKind::NIC, DeviceKind::Leaf,
                                     DeviceKind::Spine, DeviceKind::Core,    DeviceKind::CPU};
  std::map<LinkKind, std::pair<std::int64_t, double>> links;
  for (const auto& l : t.links()) {
    links[l.kind].first += 1;
    links[l.kind].second += l.bandwidth.value;
  }
  std::map<DeviceKind, std::int64_t> devices;
  for (const auto& d : t.devices()) devices[d.kind] += 1;
  std::int32_t smallest_domain = 0, largest_domain = 0;
  for (std::int32_t k = 0; k < t.domain_count(); ++k) {
    const auto n = static_cast<std::int32_t>(t.gpus_in_domain(k).size());
    smallest_domain = k == 0 ? n : std::min(smallest_domain, n);
    largest_domain = std::max(largest_domain, n);
  }

  if (json) {
    nlohmann::json j;
    j["schema"] = "reshard-topo-1";
    j["topology"] = t.name();
    j["topology_file"] = file;
    j["form"] = t.generated() ? "generated" : "explicit";
    j["gpus"] = t.gpu_count();
    j["nodes"] = t.node_count();
    j["nvlink_domains"] = t.domain_count();
    j["gpus_per_domain_min"] = smallest_domain;
    j["gpus_per_domain_max"] = largest_domain;
    j["rails"] = t.rail_count();
    j["devices"] = t.device_count();
    j["links"] = t.link_count();
    j["gpu_nvlink_Bps"] = nvlink.min;
    j["gpu_nvlink_max_Bps"] = nvlink.max;
    j["gpu_nic_Bps"] = nic.min;
    j["gpu_nic_max_Bps"] = nic.max;
    j["gpu_host_link_Bps"] = host.min;
    j["gpu_host_link_max_Bps"] = host.max;
    j["host_link_kind"] = lower(host_kind);
    j["gpu_network_Bps"] = network.min;
    j["gpu_network_max_Bps"] = network.max;
    j["gpu_memory_bytes"] = static_cast<std::int64_t>(memory.min);  // 0 when some GPU's is not given
    j["gpu_memory_max_bytes"] = static_cast<std::int64_t>(memory.max);
    j["warnings"] = t.warnings();
    j["bisection_Bps"] = bisection.value;
    nlohmann::json lk = nlohmann::json::object();
    for (auto k : link_kinds)
      lk[lower(model::to_string(k))] = {{"count", links[k].first}, {"capacity_Bps", links[k].second}};
    j["links_by_kind"] = lk;
    nlohmann::json dk = nlohmann::json::object();
    for (auto k : device_kinds) dk[lower(model::to_string(k))] = devices[k];
    j["devices_by_kind"] = dk;
    nlohmann::json groups = nlohmann::json::array();
    for (const auto& f : t.fabric_groups())
      groups.push_back({{"kind", model::kind_name(f)},
                        {"index", f.index},
                        {"gpus", f.gpus},
                        {"domains", f.domains.size()},
                        {"ingress_Bps", f.ingress.value},
                        {"egress_Bps", f.egress.value}});
    j["fabric_groups"] = groups;
    nlohmann::json clusters = nlohmann::json::array();
    for (const auto& c : t.clusters())
      clusters.push_back({{"name", c.name},
                          {"template", c.node_template},
                          {"nodes", c.nodes},
                          {"first_gpu", c.first_gpu},
                          {"gpus", c.gpus}});
    j["clusters"] = clusters;
    std::cout << j.dump(2) << '\n';
    return;
  }

  const std::string domain_sizes = smallest_domain == largest_domain
                                       ? std::to_string(largest_domain) + " GPUs each"
                                       : std::to_string(smallest_domain) + " to " + std::to_string(largest_domain) + " GPUs";
  print_fields(std::cout, {
                              {"topology", t.name() + " (" + file + ", " + (t.generated() ? "generated" : "explicit") + ")"},
                              {"GPUs", std::to_string(t.gpu_count())},
                              {"nodes", std::to_string(t.node_count())},
                              {"NVLink domains", std::to_string(t.domain_count()) + " (" + domain_sizes + ")"},
                              {"rails", std::to_string(t.rail_count())},
                              {"GPU NVLink", show(nvlink) + " per direction"},
                              {"GPU NIC", show(nic) + " per direction" +
                                              (capped ? " (host link " + host_kind + " " + show(host) + ": " +
                                                            show(network) + " usable)"
                                                      : "")},
                              {"GPU host link", host_kind + (host_kinds.empty() ? "" : " " + show(host)) +
                                                    (host_kinds.empty() ? "" : " per direction")},
                              {"GPU memory", memory_line(t)},
                              {"bisection", model::format(bisection) + " per direction"},
                              {"devices", std::to_string(t.device_count())},
                              {"links", std::to_string(t.link_count()) + " (directed)"},
                          });
  std::cout << '\n';
  Table lt({"link kind", "directed links>", "capacity, all directed links>"});
  for (auto k : link_kinds)
    if (links[k].first > 0)
      lt.add({model::to_string(k), std::to_string(links[k].first), model::format(BytesPerSecond{links[k].second})});
  lt.print(std::cout);
  std::cout << '\n';
  Table dt({"device kind", "devices>"});
  for (auto k : device_kinds)
    if (devices[k] > 0) dt.add({model::to_string(k), std::to_string(devices[k])});
  dt.print(std::cout);
  // Which GPU numbers are which cluster's: what a scenario's `gpus:` lists.
  if (!t.clusters().empty()) {
    std::cout << '\n';
    Table ct({"cluster", "template", "nodes>", "GPUs>", "GPU numbers"});
    for (const auto& c : t.clusters())
      ct.add({c.name.empty() ? "(cluster)" : c.name, c.node_template, std::to_string(c.nodes), std::to_string(c.gpus),
              std::to_string(c.first_gpu) + "-" + std::to_string(c.first_gpu + c.gpus - 1)});
    ct.print(std::cout);
  }
  if (t.fabric_groups().empty()) return;
  // Fabric groups alike (kind, size, cut) on one row; per GPU is the cut over the group's GPUs, to
  // set against the GPUs' NICs.
  std::map<std::tuple<std::string, std::int32_t, double, double>, std::int32_t> alike;
  for (const auto& f : t.fabric_groups()) ++alike[{model::kind_name(f), f.gpus, f.ingress.value, f.egress.value}];
  std::cout << '\n';
  Table ft({"fabric group", "groups>", "GPUs each>", "into each>", "out of each>", "per GPU (in)>"});
  for (const auto& [key, count] : alike) {
    const auto& [kind, gpus, in, out] = key;
    ft.add({kind, std::to_string(count), std::to_string(gpus), model::format(BytesPerSecond{in}),
            model::format(BytesPerSecond{out}), model::format(BytesPerSecond{in / gpus})});
  }
  ft.print(std::cout);
}

}  // namespace

void add_topo_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("topo", "Describe a cluster topology: GPUs, domains, bandwidths, bisection, links");
  auto file = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  cmd->add_option("TOPOLOGY", *file, "Topology YAML file (see docs/topology.md)")->required();
  cmd->add_flag("--json", *json, "Print one JSON object");
  cmd->callback([file, json] { run_topo(*file, *json); });
}

}  // namespace reshard::cli
