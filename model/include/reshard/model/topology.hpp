// The cluster as a graph of devices and directed links (DESIGN.md §4).
//
// Vertices are GPUs, NVLink fabrics (one NVSwitch vertex per NVLink domain), NICs and network
// switches (leaf / spine / core). Edges are directed links; a full-duplex cable is two links, each
// with the per-direction bandwidth. Link kinds are ordered best to worst (NVLink < C2C < PCIe <
// Network) so the kind of a route is the worst kind among its hops.
//
// Routes:
//   same NVLink domain:  GPU -> fabric -> GPU                               (kind NVLink)
//   across domains:      GPU -> NIC -> leaf [-> spine [-> core -> spine]] -> leaf -> NIC -> GPU
// A GPU uses the NIC it is paired with (rail r = its index in the node). Rail-optimized fabrics put
// NIC r of every node on the leaf of rail r, so same-rail traffic turns around at the leaf. Where
// several equal-cost paths exist (one per spine), a Route holds all of them and the fluid model
// splits the flow evenly over them (ECMP).
//
// The graph itself (Boost.Graph) is an implementation detail of topology.cpp.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "reshard/model/units.hpp"

namespace reshard::model {

enum class LinkKind : std::uint8_t { NVLink = 0, C2C = 1, PCIe = 2, Network = 3 };
enum class DeviceKind : std::uint8_t { GPU, NVSwitch, NIC, Leaf, Spine, Core, CPU };

const char* to_string(LinkKind k);
const char* to_string(DeviceKind k);

using DeviceId = std::int32_t;
using LinkId = std::int32_t;
using GpuId = std::int32_t;  // dense index 0..gpu_count()-1, the numbering used by `gpus:` in scenarios

struct Device {
  DeviceId id = -1;
  DeviceKind kind = DeviceKind::GPU;
  std::string name;  // e.g. "node3/gpu5", "rack2/nvswitch", "leaf7"
  std::int32_t node = -1;    // node (server / compute tray) index; -1 for switches
  std::int32_t domain = -1;  // NVLink domain of a GPU or fabric; -1 otherwise
  std::int32_t rail = -1;    // rail of a GPU / NIC / leaf; -1 when not rail-bound
  GpuId gpu = -1;            // GPU index for GPU vertices
};

struct Link {
  LinkId id = -1;
  DeviceId from = -1;
  DeviceId to = -1;
  BytesPerSecond bandwidth;  // per direction
  Seconds latency;
  LinkKind kind = LinkKind::NVLink;
};

// One path: the links from source to destination in order.
struct Path {
  std::vector<LinkId> links;
};

// All equal-cost paths between two GPUs. A flow is split evenly over `paths` (ECMP).
struct Route {
  std::vector<Path> paths;
  LinkKind kind = LinkKind::NVLink;  // worst link kind on the route
  Seconds latency;                   // sum of link latencies along one path
  bool same_domain = false;
};

class Topology {
 public:
  // Reads a topology YAML file (template cluster, generated cluster or explicit form).
  // Throws ConfigError naming the file, line and key or device on any problem.
  static Topology load(const std::filesystem::path& path);
  static Topology parse(const std::string& yaml_text, const std::string& name);

  Topology(Topology&&) noexcept;
  Topology& operator=(Topology&&) noexcept;
  Topology(const Topology&);
  Topology& operator=(const Topology&);
  ~Topology();

  const std::string& name() const;

  std::int32_t gpu_count() const;
  std::int32_t node_count() const;
  std::int32_t domain_count() const;
  std::int32_t device_count() const;
  std::int32_t link_count() const;

  const Device& device(DeviceId id) const;
  const Link& link(LinkId id) const;
  const std::vector<Link>& links() const;

  DeviceId gpu_device(GpuId g) const;
  std::int32_t domain_of(GpuId g) const;
  std::int32_t node_of(GpuId g) const;
  std::int32_t rail_of(GpuId g) const;
  const std::vector<GpuId>& gpus_in_domain(std::int32_t domain) const;

  // The GPU's own links. NVLink: GPU -> fabric and fabric -> GPU. NIC: the network link leaving the
  // GPU's NIC (egress) and the one entering it (ingress). nullopt when the GPU has none.
  std::optional<LinkId> nvlink_egress(GpuId g) const;
  std::optional<LinkId> nvlink_ingress(GpuId g) const;
  std::optional<LinkId> nic_egress(GpuId g) const;
  std::optional<LinkId> nic_ingress(GpuId g) const;

  // Per-direction bandwidth of those links (0 when absent).
  BytesPerSecond gpu_nvlink_bandwidth(GpuId g) const;
  BytesPerSecond gpu_nic_bandwidth(GpuId g) const;

  // All equal-cost paths from GPU a to GPU b (a != b). Computed from the structure (NIC, leaf, the
  // cached set of equal switch paths between two leaves), so it is cheap; thread-safe.
  Route route(GpuId a, GpuId b) const;

  // Bisection bandwidth of the network (per direction): the least total capacity that must be cut to
  // split the GPUs into two halves, computed for the split that separates the first half of the
  // nodes from the second half (the worst case for rail-optimized leaf/spine fabrics).
  BytesPerSecond bisection_bandwidth() const;

 private:
  struct Impl;
  explicit Topology(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace reshard::model
