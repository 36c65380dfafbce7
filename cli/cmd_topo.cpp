// `reshard topo FILE [--json]`: what a topology file describes (docs/design.md §11).
#include <iostream>
#include <map>
#include <string>
#include <tuple>

#include "commands.hpp"
#include "reshard/model/topology.hpp"
#include "reshard/model/topology_summary.hpp"
#include "table.hpp"
#include "warnings.hpp"

namespace reshard::cli {

namespace {

using model::BytesPerSecond;
using model::Topology;

using Range = model::TopologySummary::Range;

std::string show(Range r) {
  if (r.min == r.max) return model::format(BytesPerSecond{r.min});
  return model::format(BytesPerSecond{r.min}) + " to " + model::format(BytesPerSecond{r.max});
}

// The GPUs' memory capacities, each with its GPU count when they differ: "80.0 GB", "80.0 GB
// (256 GPUs), 186 GB (288 GPUs)"; a GPU without one is "not given".
std::string memory_line(const model::TopologySummary& s) {
  const auto& gpus_with = s.gpus_by_memory;  // capacity -> GPUs
  auto shown = [](std::int64_t b) { return b > 0 ? model::format(model::Bytes{b}) : std::string("not given"); };
  if (gpus_with.size() == 1) return shown(gpus_with.begin()->first) + (gpus_with.begin()->first > 0 ? " per GPU" : "");
  std::string out;
  for (const auto& [bytes, count] : gpus_with)
    out += (out.empty() ? "" : ", ") + shown(bytes) + " (" + std::to_string(count) + " GPUs)";
  return out;
}

void print_topology(const model::TopologySummary& s) {
  const std::string domain_sizes = s.gpus_per_domain_min == s.gpus_per_domain_max
                                       ? std::to_string(s.gpus_per_domain_max) + " GPUs each"
                                       : std::to_string(s.gpus_per_domain_min) + " to " + std::to_string(s.gpus_per_domain_max) + " GPUs";
  print_fields(std::cout, {
                              {"topology", s.name + " (" + s.file + ", " + (s.generated ? "generated" : "explicit") + ")"},
                              {"GPUs", std::to_string(s.gpus)},
                              {"nodes", std::to_string(s.nodes)},
                              {"NVLink domains", std::to_string(s.domains) + " (" + domain_sizes + ")"},
                              {"rails", std::to_string(s.rails)},
                              {"GPU NVLink", show(s.nvlink) + " per direction"},
                              {"GPU NIC", show(s.nic) + " per direction" +
                                              (s.host_link_caps_nic ? " (host link " + s.host_link_kind + " " + show(s.host_link) + ": " +
                                                                          show(s.network) + " usable)"
                                                                    : "")},
                              {"GPU host link", s.host_link_kind + (s.has_host_links ? " " + show(s.host_link) : "") +
                                                    (s.has_host_links ? " per direction" : "")},
                              {"GPU memory", memory_line(s)},
                              {"bisection", model::format(s.bisection) + " per direction"},
                              {"devices", std::to_string(s.devices)},
                              {"links", std::to_string(s.links) + " (directed)"},
                          });
  std::cout << '\n';
  Table lt({"link kind", "directed links>", "capacity, all directed links>"});
  for (const auto& c : s.links_by_kind)
    if (c.count > 0) lt.add({model::to_string(c.kind), std::to_string(c.count), model::format(BytesPerSecond{c.capacity})});
  lt.print(std::cout);
  std::cout << '\n';
  Table dt({"device kind", "devices>"});
  for (const auto& c : s.devices_by_kind)
    if (c.count > 0) dt.add({model::to_string(c.kind), std::to_string(c.count)});
  dt.print(std::cout);
  // Which GPU numbers are which cluster's: what a scenario's `gpus:` lists.
  if (!s.clusters.empty()) {
    std::cout << '\n';
    Table ct({"cluster", "template", "nodes>", "GPUs>", "GPU numbers"});
    for (const auto& c : s.clusters)
      ct.add({c.name.empty() ? "(cluster)" : c.name, c.node_template, std::to_string(c.nodes), std::to_string(c.gpus),
              std::to_string(c.first_gpu) + "-" + std::to_string(c.first_gpu + c.gpus - 1)});
    ct.print(std::cout);
  }
  if (s.fabric_groups.empty()) return;
  // Fabric groups alike (kind, size, cut) on one row; per GPU is the cut over the group's GPUs, to
  // set against the GPUs' NICs.
  std::map<std::tuple<std::string, std::int32_t, double, double>, std::int32_t> alike;
  for (const auto& f : s.fabric_groups) ++alike[{model::kind_name(f), f.gpus, f.ingress.value, f.egress.value}];
  std::cout << '\n';
  Table ft({"fabric group", "groups>", "GPUs each>", "into each>", "out of each>", "per GPU (in)>"});
  for (const auto& [key, count] : alike) {
    const auto& [kind, gpus, in, out] = key;
    ft.add({kind, std::to_string(count), std::to_string(gpus), model::format(BytesPerSecond{in}),
            model::format(BytesPerSecond{out}), model::format(BytesPerSecond{in / gpus})});
  }
  ft.print(std::cout);
}

void run_topo(const std::string& file, bool json) {
  const Topology t = Topology::load(file);
  print_warnings(t);
  const model::TopologySummary s = model::summarize(t, file);
  if (json) std::cout << model::to_json(s).dump(2) << '\n';
  else print_topology(s);
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
