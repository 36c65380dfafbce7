// The cluster as a graph of devices and directed links (docs/design.md §4).
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
// The graph itself (Boost.Graph) is an implementation detail of model/topology/src/topology*.cpp.
// The file format (node templates, the cluster generator, the explicit form) is described in
// docs/topology.md.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "reshard/model/overrides.hpp"
#include "reshard/model/units.hpp"

namespace reshard::model {

enum class LinkKind : std::uint8_t { NVLink = 0, C2C = 1, PCIe = 2, Network = 3 };
inline constexpr std::size_t kLinkKinds = 4;  // the LinkKind values, for tables indexed by kind
enum class DeviceKind : std::uint8_t { GPU, NVSwitch, NIC, Leaf, Spine, Core, CPU };

const char* to_string(LinkKind k);
const char* to_string(DeviceKind k);

using DeviceId = std::int32_t;
using LinkId = std::int32_t;
using GpuId = std::int32_t;  // dense index 0..gpu_count()-1, the numbering used by `gpus:` in scenarios
// The most GPUs a topology or a scenario's GPU list may name: inputs are refused against it before
// anything is expanded or allocated.
inline constexpr GpuId kMaxGpus = 1 << 22;

// Parses "0-255", "7", or a list of those, into GPU indices (std::invalid_argument on bad text).
std::vector<GpuId> parse_gpu_list(const std::vector<std::string>& items);
// The same for one comma-separated line: "0-255,300".
std::vector<GpuId> parse_gpu_list(const std::string& text);
// The other way: sorted, runs as ranges, "0-15, 20, 24-31" ("none" for an empty list).
std::string gpu_ranges(std::vector<GpuId> gpus);

// An ordered pair of GPUs (a transfer's source and destination), the key of per-pair tables
// (std::hash below).
struct GpuPair {
  GpuId src = -1;
  GpuId dst = -1;
  bool operator==(const GpuPair&) const = default;
};

// The most memory a GPU may be given (`gpu_memory`, `memory`): 100 TB, some 350 times a GB300's
// 288 GB; more is a slip of the unit.
inline constexpr Bytes kMostGpuMemory{100'000'000'000'000};

struct Device {
  DeviceId id = -1;
  DeviceKind kind = DeviceKind::GPU;
  std::string name;  // e.g. "node3/gpu5", "rack2/nvswitch", "leaf7"
  std::int32_t node = -1;    // node (server / compute tray) index; -1 for switches
  std::int32_t domain = -1;  // NVLink domain of a GPU or fabric; -1 otherwise
  std::int32_t rail = -1;    // rail of a GPU / NIC / leaf; -1 when not rail-bound
  GpuId gpu = -1;            // GPU index for GPU vertices
  // A GPU's memory (HBM) bandwidth, what a weight conversion reads and writes at: the template's
  // figure, or an explicit device's `memory_bandwidth`; 0 when the topology does not say.
  BytesPerSecond memory_bandwidth{};
  // A GPU's memory (HBM) capacity, what its resident weights and refit staging must fit in
  // (LoadedScenario::memory): the template's datasheet figure in GB of 10^9 bytes, the cluster's
  // `gpu_memory`, or an explicit device's `memory`; 0 when the topology does not say.
  Bytes memory{};
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

// A GPU's host link to its NIC: the PCIe (or C2C) connection every byte it sends to or receives
// from the network crosses. Per direction, GPU -> NIC.
struct HostLink {
  LinkKind kind = LinkKind::PCIe;  // the worst kind among the links of its narrowest cut
  BytesPerSecond bandwidth;        // per direction
};

enum class CutDirection : std::uint8_t { Ingress, Egress };

// The links separating an NVLink domain from the rest of the cluster (see domain_network_cut).
struct NetworkCut {
  BytesPerSecond capacity;    // total per-direction bandwidth of `links`
  std::vector<LinkId> links;  // the cut: links entering (ingress) or leaving (egress) the domain's side
};

// A part of the cluster that reaches the rest only through the switches above one tier: a leaf
// group (a part that stays connected when every spine and core switch is taken out) or a pod (when
// the core switches are); an NVLink domain is never split between parts. Only parts holding some
// but not all of the GPUs are groups. The links between a group and the switches above it are a
// cut around its GPUs: every byte entering (leaving) them from (to) a GPU outside crosses those
// links, whatever the schedule, so bytes / capacity bounds any refit. Where the fabric above is
// thinner than the NICs below (oversubscription), this cut is narrower than the sum of the group's
// domain cuts.
struct FabricGroup {
  DeviceKind above = DeviceKind::Spine;  // the tier taken out: Spine for a leaf group, Core for a pod
  std::int32_t index = 0;                // among the groups of its tier, in order of their first domain
  std::vector<std::int32_t> domains;     // the NVLink domains inside, sorted
  std::int32_t gpus = 0;
  BytesPerSecond ingress, egress;        // total bandwidth of the links into / out of the group
};
const char* kind_name(const FabricGroup& g);   // "leaf group" or "pod"
std::string to_string(const FabricGroup& g);  // "pod 1: 288 GPUs", "leaf group 3: 16 GPUs"

// All equal-cost paths between two GPUs. A flow is split evenly over `paths` (ECMP).
struct Route {
  std::vector<Path> paths;
  LinkKind kind = LinkKind::NVLink;  // worst link kind on the route
  Seconds latency;                   // sum of link latencies along a path (the longest one if they differ)
  bool same_domain = false;
};

class RouteView;

class Topology {
 public:
  // Reads a topology YAML file (template cluster, generated cluster or explicit form).
  // Throws ConfigError naming the file, line and key or device on any problem.
  static Topology load(const std::filesystem::path& path);
  // The file with `overrides` (keys from its root: cluster.nic_speed) applied before it is read.
  static Topology load(const std::filesystem::path& path, const std::vector<Override>& overrides);
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
  // Rails of a generated fabric (NICs per node; 1 when not rail-optimized); 0 for explicit topologies.
  std::int32_t rail_count() const;
  bool generated() const;           // true for a template cluster, false for the explicit form
  // A generated topology's clusters in file order (one for `cluster:`, its name ""), each with its
  // node template and its GPUs [first_gpu, first_gpu + gpus); empty for the explicit form.
  struct Cluster {
    std::string name, node_template;
    std::int32_t nodes = 0;
    GpuId first_gpu = 0;
    std::int32_t gpus = 0;
  };
  const std::vector<Cluster>& clusters() const;

  // Names of the node templates a generated cluster may use ("dgx-h100", "gb200-nvl72", ...).
  static std::vector<std::string> template_names();

  const Device& device(DeviceId id) const;
  const Link& link(LinkId id) const;
  const std::vector<Link>& links() const;
  const std::vector<Device>& devices() const;  // indexed by DeviceId

  DeviceId gpu_device(GpuId g) const;
  std::int32_t domain_of(GpuId g) const;
  std::int32_t node_of(GpuId g) const;
  std::int32_t rail_of(GpuId g) const;
  const std::vector<GpuId>& gpus_in_domain(std::int32_t domain) const;
  // The NIC the GPU sends through (its 1:1 partner; in an explicit topology the nearest NIC over
  // PCIe/C2C links, possibly shared). nullopt when the GPU has none.
  std::optional<DeviceId> nic_of(GpuId g) const;

  // The GPU's own links. NVLink: GPU -> fabric and fabric -> GPU. NIC: the network link leaving the
  // GPU's NIC (egress) and the one entering it (ingress). nullopt when the GPU has none.
  std::optional<LinkId> nvlink_egress(GpuId g) const;
  std::optional<LinkId> nvlink_ingress(GpuId g) const;
  std::optional<LinkId> nic_egress(GpuId g) const;
  std::optional<LinkId> nic_ingress(GpuId g) const;

  // Per-direction bandwidth of those links (0 when absent).
  BytesPerSecond gpu_nvlink_bandwidth(GpuId g) const;
  BytesPerSecond gpu_nic_bandwidth(GpuId g) const;
  BytesPerSecond gpu_memory_bandwidth(GpuId g) const;  // Device::memory_bandwidth
  Bytes gpu_memory(GpuId g) const;                     // Device::memory: HBM capacity, 0 when not given

  // The GPU's host link to its NIC, GPU -> NIC. Generated clusters: the GPU -> NIC link (the
  // template's, or cluster.host_link / host_link_kind). Explicit topologies: the maximum flow from
  // the GPU alone to its NIC over the links of its host side (not through other GPUs, no network
  // links), with the worst link kind of the narrowest cut. nullopt when the GPU has no NIC.
  std::optional<HostLink> host_link(GpuId g) const;
  // What the GPU can put on the network through its own NIC, per direction:
  // min(gpu_nic_bandwidth, host link bandwidth); 0 when it has no NIC.
  BytesPerSecond gpu_network_bandwidth(GpuId g) const;

  // The network boundary of NVLink domain `domain`: a set of links whose removal separates the
  // domain's GPUs from every other GPU (ingress: the links into the domain's side; egress: the links
  // out of it), of least total capacity among the cuts around the domain's host side. The host
  // side is the domain's GPUs and every device they reach over non-network links without entering
  // another GPU (NVSwitch, PCIe switches and CPUs, NICs). The cut is the minimum cut between the
  // domain's GPUs and everything outside its host side taken as one vertex, so it never exceeds
  // a cut that the whole cluster needs (every byte entering the domain crosses it), yet it is at
  // least the true minimum cut (a leaf or spine layer thinner than the domain's NICs is not seen).
  // Generated clusters: per GPU the narrower of its NIC link and its host link (the NIC link on a
  // tie), i.e. capacity = sum over the domain's GPUs of min(NIC, host link). Explicit topologies:
  // a maximum flow over the host side (Boost.Graph), the cut taken nearest the network.
  // domain_network_capacity is the capacity alone, precomputed (O(1)).
  BytesPerSecond domain_network_capacity(std::int32_t domain, CutDirection dir) const;
  NetworkCut domain_network_cut(std::int32_t domain, CutDirection dir) const;
  // The same by maximum flow on any topology, uncached (tests compare it with the closed form of
  // generated clusters).
  NetworkCut search_domain_network_cut(std::int32_t domain, CutDirection dir) const;

  // Every leaf group, then every pod (see FabricGroup); empty without spine or core switches or
  // where one part holds every GPU. Precomputed.
  const std::vector<FabricGroup>& fabric_groups() const;

  // Warnings about the file that do not stop it loading, each a full sentence starting with
  // "FILE:LINE: key:" like an error; for now: a NIC faster than its GPU <-> NIC host link. The
  // library never prints them; the command line prints each once on stderr.
  const std::vector<std::string>& warnings() const;

  // All equal-cost paths from GPU a to GPU b. Computed from the structure (NIC, leaf, the equal
  // switch paths between two leaves), so it is cheap; thread-safe. For explicit
  // topologies: every path of the fewest hops (breadth-first search over the graph, NVLink links
  // only when a and b share a domain, through other GPUs only when there is no path without them;
  // at most 64 paths), cached per GPU pair. a == b gives a route
  // without paths. GPU indices out of range throw IndexError.
  Route route(GpuId a, GpuId b) const;
  // The same route read in place, without copying its paths (RouteView): what the cost model and
  // the schedule builders use for every pair they route.
  RouteView route_view(GpuId a, GpuId b) const;
  // The same search as for explicit topologies, on any topology, uncached (tests compare it with
  // the structural routes of generated clusters).
  Route search_route(GpuId a, GpuId b) const;

  // Bisection bandwidth of the network (per direction): the least total capacity that must be cut to
  // split the GPUs into two halves, computed for the split that separates the first half of the
  // nodes from the second half (the worst case for rail-optimized leaf/spine fabrics).
  // Method: the maximum flow from the GPUs of nodes [0, N/2) to the GPUs of nodes [N/2, N) over
  // every directed link (max-flow = min-cut); 0 with fewer than two nodes. Not cached.
  BytesPerSecond bisection_bandwidth() const;

  struct Impl;  // private: wraps detail::TopologyData (model/topology/src/topology_impl.hpp)

 private:
  explicit Topology(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// A route read in place (Topology::route_view), without copying its paths as Route does: path p
// (0 <= p < paths) is head(), then the p-th middle, then tail(). Routes between GPUs of the same
// two leaves share their middles (the switch paths between the leaves): middle_key() names them, so
// a caller that adds the loads of many routes adds each middle once. The kind, latency and paths
// are Route's (Topology::route builds its paths from the view). Valid while the topology it came
// from lives.
class RouteView {
 public:
  LinkKind kind = LinkKind::NVLink;  // worst link kind on the route
  Seconds latency;                   // as Route::latency
  bool same_domain = false;
  std::int32_t paths = 0;            // 0: a == b

  std::span<const LinkId> head() const { return {head_.data(), static_cast<std::size_t>(head_n_)}; }
  std::span<const LinkId> tail() const { return {tail_.data(), static_cast<std::size_t>(tail_n_)}; }
  // Path p's links, in order, into `out` (cleared first).
  void path_links(std::int32_t p, std::vector<LinkId>& out) const;
  // Per path, the sum of `per_link` over its links, added link by link in path order, into `out`
  // (resized to `paths`): what path_links and a loop give, without listing the links.
  void path_sums(const std::vector<double>& per_link, std::vector<double>& out) const;
  // The middles' key: equal for routes with the same middles, unique otherwise; -1 without middle
  // links (one path: head and tail).
  std::int64_t middle_key() const { return key_; }
  // Every middle link with its share of the route's bytes, (paths through it) / paths added path by
  // path, in the order the paths first reach them (what splitting the bytes evenly over the paths
  // puts on each).
  void middle_shares(std::vector<std::pair<LinkId, double>>& out) const;
  // The share on the head and tail links, which every path crosses: 1/paths added `paths` times.
  double end_share() const;

 private:
  friend class Topology;
  std::array<LinkId, 2> head_{}, tail_{};
  std::int8_t head_n_ = 0, tail_n_ = 0;
  const Topology::Impl* topology_ = nullptr;  // generated form: the middles between leaves la_ and lb_
  std::int32_t la_ = -1, lb_ = -1;
  const std::vector<Path>* search_paths_ = nullptr;  // explicit form: the cached route's paths are the middles
  std::int64_t key_ = -1;
};

}  // namespace reshard::model

// The two 32-bit indices side by side in one 64-bit word, hashed as that word.
template <>
struct std::hash<reshard::model::GpuPair> {
  std::size_t operator()(const reshard::model::GpuPair& p) const noexcept {
    return std::hash<std::uint64_t>{}((static_cast<std::uint64_t>(static_cast<std::uint32_t>(p.src)) << 32) |
                                      static_cast<std::uint32_t>(p.dst));
  }
};
