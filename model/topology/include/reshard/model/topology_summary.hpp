// What a topology file describes, as `reshard topo` prints it: counts, per-GPU bandwidth ranges,
// links and devices by kind, fabric groups and clusters (docs/topology.md). A value computed once
// from a loaded Topology; the CLI prints it as text or as the reshard-topo-1 JSON (to_json).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "reshard/model/topology.hpp"

namespace reshard::model {

struct TopologySummary {
  // The smallest and largest per-GPU value over all GPUs (0 and 0 without GPUs).
  struct Range {
    double min = 0;
    double max = 0;
  };
  struct LinkCount {
    LinkKind kind = LinkKind::NVLink;
    std::int64_t count = 0;  // directed links
    double capacity = 0;     // bytes/s, summed over them
  };
  struct DeviceCount {
    DeviceKind kind = DeviceKind::GPU;
    std::int64_t count = 0;
  };

  std::string name;
  std::string file;  // the topology file it was loaded from
  bool generated = false;
  std::int32_t gpus = 0, nodes = 0, domains = 0, rails = 0;
  std::int32_t gpus_per_domain_min = 0, gpus_per_domain_max = 0;
  std::int64_t devices = 0, links = 0;
  Range nvlink, nic, host_link, network, memory;  // per GPU: bytes/s (memory: bytes)
  // The kinds of the GPUs' host links, "/"-joined ("PCIe", "C2C/PCIe"); "none" when no GPU has one.
  std::string host_link_kind = "none";
  bool has_host_links = false;
  bool host_link_caps_nic = false;  // some GPU's host link is narrower than its NIC
  // GPUs per memory capacity (0: not given), by capacity.
  std::vector<std::pair<std::int64_t, std::int32_t>> gpus_by_memory;
  BytesPerSecond bisection;
  std::vector<LinkCount> links_by_kind;      // every link kind, NVLink, C2C, PCIe, Network
  std::vector<DeviceCount> devices_by_kind;  // every device kind, GPU first
  std::vector<FabricGroup> fabric_groups;
  std::vector<Topology::Cluster> clusters;
  std::vector<std::string> warnings;
};

TopologySummary summarize(const Topology& t, const std::string& file);

// Schema reshard-topo-1 (docs/json-schema.md).
nlohmann::json to_json(const TopologySummary& s);

}  // namespace reshard::model
