// Private representation of a Topology (not installed, not included by other folders' headers).
//
// A Topology is built in two steps:
//   1. a front end (topology_yaml.cpp: build_generated for template clusters, with the node
//      templates of topology_templates.cpp, and build_explicit for the explicit form) adds devices
//      and links to a TopologyData (add_device, add_link, add_duplex) and, for generated
//      clusters, records the fabric structure (leaves, spines, cores and their link ids);
//   2. derive_structure() builds the Boost.Graph graph, finds the NVLink domains (connected components over
//      NVLink links), pairs every GPU with its NIC, and checks that every GPU reaches every other.
//
// Routing is structural for generated clusters (a route's links are computed from the fabric's
// link tables, the kind and latencies of the switch paths between two leaves cached per leaf
// pair) and by breadth-first search over the Boost graph for explicit topologies (all equal-hop
// paths, cached per GPU pair).
#pragma once

#include <boost/graph/adjacency_list.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "reshard/model/topology.hpp"

namespace reshard::model::detail {

struct EdgeData {
  LinkId link = -1;
};
// Directed multigraph: vertex i is device i, edge data names the Link.
using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS, boost::no_property, EdgeData>;

// Structure of a generated rail-optimized leaf/spine(/core) fabric, for structural routing.
//   leaves:  L = groups x rails (rail-optimized) or L = groups (one leaf per group of nodes).
//   spines:  S per pod; leaf l connects to all S spines of its pod. Without a core layer there is
//            one pod holding every leaf.
//   cores:   C = S x K; spine s of every pod connects to the K cores of plane s.
// Link ids: leaf_up[l*S+s] (leaf l -> spine s of its pod), leaf_down[l*S+s] (back),
//           spine_up[(p*S+s)*K+k] (spine s of pod p -> core s*K+k), spine_down[...] (back).
struct Fabric {
  std::int32_t leaves = 0;
  std::int32_t spines_per_pod = 0;
  std::int32_t pods = 1;
  std::int32_t cores_per_plane = 0;  // K; 0 without a core layer
  std::vector<std::int32_t> leaf_pod;
  std::vector<LinkId> leaf_up, leaf_down, spine_up, spine_down;
  // Per GPU: its leaf and the four links between GPU, NIC and leaf.
  std::vector<std::int32_t> gpu_leaf;
  std::vector<LinkId> gpu_to_nic, nic_to_gpu, nic_to_leaf, leaf_to_nic;
};

// A directed graph for Boost's max-flow algorithms (push-relabel, Edmonds-Karp): every edge
// with its reverse edge of capacity 0, capacities in whole bytes per second.
struct MaxFlowGraph {
  using Traits = boost::adjacency_list_traits<boost::vecS, boost::vecS, boost::directedS>;
  using Graph = boost::adjacency_list<
      boost::vecS, boost::vecS, boost::directedS, boost::no_property,
      boost::property<boost::edge_capacity_t, std::int64_t,
                      boost::property<boost::edge_residual_capacity_t, std::int64_t,
                                      boost::property<boost::edge_reverse_t, Traits::edge_descriptor>>>>;
  using Edge = Graph::edge_descriptor;

  explicit MaxFlowGraph(std::size_t vertices) : g(vertices) {}
  // The edge u -> v of capacity cap (and its reverse).
  Edge add(std::size_t u, std::size_t v, std::int64_t cap) {
    auto capacity = boost::get(boost::edge_capacity, g);
    auto reverse = boost::get(boost::edge_reverse, g);
    const Edge e = boost::add_edge(u, v, g).first;
    const Edge back = boost::add_edge(v, u, g).first;
    capacity[e] = cap;
    capacity[back] = 0;
    reverse[e] = back;
    reverse[back] = e;
    return e;
  }

  Graph g;
};

// Route caches, shared by copies of one Topology (the topology is immutable once built, so a
// cached entry is valid for every copy). Guarded by a reader/writer lock: route() is thread-safe.
// What every route between two leaves shares (generated form): the kind and latencies of the
// switch paths between them, which RouteView reads its kind and latency from.
struct LeafPair {
  LinkKind kind = LinkKind::NVLink;  // the worst kind on the middles
  std::int32_t length = 0;           // links per middle
  // The middles' link latencies, `length` per middle, each distinct sequence once (in a generated
  // fabric usually one): a route's latency is the longest of head + sequence + tail, added link by
  // link as Route's.
  std::vector<double> latencies;
};

struct RouteCache {
  std::shared_mutex mutex;
  // L*L, generated form: read without the lock (an entry, once set, never changes); `owned` keeps
  // them, under the lock.
  std::unique_ptr<std::atomic<const LeafPair*>[]> leaf_pairs;
  std::vector<std::unique_ptr<const LeafPair>> owned;
  std::unordered_map<GpuPair, std::shared_ptr<const Route>> gpu_pairs;  // explicit form
};

struct TopologyData {
  std::string name;
  std::string file;  // the file name used in error messages
  std::vector<Device> devices;
  std::vector<Link> links;
  std::vector<int> device_line;  // YAML line that declared each device (0 when generated)
  std::int32_t node_count = 0;
  std::int32_t rail_count = 0;
  bool generated = false;
  Fabric fabric;  // generated form only

  // Filled by derive_structure().
  Graph graph;
  std::vector<DeviceId> gpu_devices;  // GpuId -> DeviceId
  std::vector<std::vector<GpuId>> domain_gpus;
  std::vector<LinkId> nvl_out, nvl_in, nic_out, nic_in;  // per GPU; -1 when absent
  std::vector<DeviceId> gpu_nic;                         // per GPU; -1 when it has none
  // Host links and network cuts (topology_cuts.cpp), filled by derive_structure() through compute_cuts().
  std::vector<double> host_bw;                           // per GPU, GPU -> NIC; 0 without a NIC
  std::vector<LinkKind> host_kind;                       // per GPU
  std::vector<double> domain_in_cap, domain_out_cap;     // per domain, see Topology::domain_network_cut
  std::vector<FabricGroup> fabric_groups;                // see Topology::fabric_groups
  std::vector<std::string> warnings;                     // see Topology::warnings
  std::vector<Topology::Cluster> clusters;               // see Topology::clusters
  std::shared_ptr<RouteCache> cache = std::make_shared<RouteCache>();
  // Generated form, per GPU, what its routes start and end with (structural_route reads one entry
  // per GPU): its domain and leaf, and the latency and kind of its NVLink links and of the links
  // between it and its leaf, up (GPU -> NIC -> leaf) and down (leaf -> NIC -> GPU).
  struct RouteEnds {
    std::int32_t domain = -1, leaf = -1;
    double nvlink_out = 0, nvlink_in = 0, up[2] = {0, 0}, down[2] = {0, 0};
    LinkKind nvlink_kind = LinkKind::NVLink, up_kind = LinkKind::NVLink, down_kind = LinkKind::NVLink;
  };
  std::vector<RouteEnds> route_ends;
  void index_route_ends();  // fills route_ends and the leaf pair table (generated form)

  // i as an index of a table of n entries; IndexError naming the topology and `what` ("GPU",
  // "NVLink domain", "device", "link") when it has no entry i (Topology's contract for indices:
  // its callers check what users give them).
  std::size_t checked_index(const char* what, std::int64_t i, std::size_t n) const;
  std::size_t checked_gpu(GpuId g) const { return checked_index("GPU", g, gpu_devices.size()); }
  std::size_t checked_domain(std::int32_t k) const { return checked_index("NVLink domain", k, domain_gpus.size()); }

  DeviceId add_device(DeviceKind kind, std::string name, std::int32_t node, std::int32_t rail, int line = 0);
  // A directed link; returns its id.
  LinkId add_link(DeviceId from, DeviceId to, BytesPerSecond bw, Seconds latency, LinkKind kind);
  // Two directed links, one per direction; returns the id of from -> to (the other is id + 1).
  LinkId add_duplex(DeviceId a, DeviceId b, BytesPerSecond bw, Seconds latency, LinkKind kind);

  // Derives from the devices and links what the queries read: the GPU numbering, the graph, the
  // NVLink domains, each GPU's NVLink and NIC links, the NIC pairing and the cuts (compute_cuts);
  // checks reachability (explicit form). Throws ConfigError naming the file, the device's line and
  // the two devices when a GPU cannot reach another. Its steps, in order:
  void derive_structure();
  void number_gpus();             // GpuId i = the i-th GPU device, in device order (gpu_devices)
  void build_graph();             // the Boost graph: vertex i = device i, one edge per directed link
  void find_nvlink_domains();     // domain_gpus and Device::domain
  void find_gpu_nvlink_links();   // nvl_out, nvl_in
  void pair_gpus_with_nics();     // gpu_nic (and an explicit GPU's rail from its NIC)
  void find_nic_network_links();  // nic_out, nic_in
  // Explicit form: every GPU reaches every other (ConfigError otherwise, as derive_structure() says).
  void check_reachability() const;

  // Host links, domain network cuts, fabric groups and, for the explicit form, the warnings about
  // NICs faster than their host links (topology_cuts.cpp). Called by derive_structure().
  void compute_cuts();
  // The domain's network cut: closed form for generated clusters, maximum flow otherwise
  // (`search` forces the maximum flow).
  NetworkCut domain_cut(std::int32_t domain, CutDirection dir, bool search) const;
  // Leaf groups and pods with their cuts. Called by compute_cuts().
  void compute_fabric_groups();

  // Routes.
  Route search_route(GpuId a, GpuId b) const;  // BFS over the Boost graph; any topology
  void finalize_route(Route& r) const;         // kind and latency from the paths
  // The switch paths between leaves la != lb: S (one per spine, same pod) or S x K (spine x core),
  // path p = s (x K + k); `middle_link` is link i of path p.
  std::int32_t middle_count(std::int32_t la, std::int32_t lb) const;
  std::int32_t middle_length(std::int32_t la, std::int32_t lb) const;
  LinkId middle_link(std::int32_t la, std::int32_t lb, std::int32_t p, std::int32_t i) const;
  const LeafPair& leaf_pair(std::int32_t la, std::int32_t lb) const;  // cached
};

// The most equal-hop paths kept for one route of an explicit topology.
inline constexpr std::size_t kMaxSearchPaths = 64;

// Front ends (each returns a finished TopologyData).
struct NodeTemplate {
  const char* name;
  std::int32_t gpus_per_node;    // GPUs per server (DGX) or per compute tray (NVL72)
  std::int32_t nodes_per_domain; // 1 for DGX (the NVLink domain is the node), 18 trays for NVL72
  bool rack_scale;               // counted in racks (NVL72) rather than nodes
  BytesPerSecond gpu_nvlink;     // per GPU, per direction, to the domain's NVLink fabric
  BytesPerSecond nic;            // per NIC, per direction; one NIC per GPU
  BytesPerSecond gpu_nic_pcie;   // GPU <-> NIC host link, per direction
  LinkKind host_link_kind;       // kind of that host link (PCIe, or C2C)
  BytesPerSecond memory;         // per GPU: HBM bandwidth
  Bytes memory_capacity;         // per GPU: HBM capacity (datasheet GB, 10^9 bytes)
};
const std::vector<NodeTemplate>& node_templates();
const NodeTemplate* find_template(const std::string& name);
}  // namespace reshard::model::detail

namespace reshard::model::yaml {
class Node;
}

namespace reshard::model::detail {
TopologyData build_generated(const yaml::Node& root);
TopologyData build_generated_clusters(const yaml::Node& root);  // `clusters:`, several templates on one fabric
TopologyData build_explicit(const yaml::Node& root);
}  // namespace reshard::model::detail

// The Topology's private state (declared in topology.hpp; shared by the topology*.cpp files).
struct reshard::model::Topology::Impl {
  detail::TopologyData d;
};
