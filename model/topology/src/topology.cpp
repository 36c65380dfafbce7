// Topology: graph construction, NVLink domains, routes and bisection bandwidth.
//
// Domains. The NVLink subgraph (every device, only NVLink links, taken as undirected) is split into
// connected components with boost::connected_components; each component holding at least one GPU
// is an NVLink domain. Domains are numbered in the order of their lowest GPU index.
//
// Routes, generated clusters (structural, O(path length x ECMP width) per call):
//   same domain      GPU -> fabric -> GPU                                  one path, kind NVLink
//   same leaf        GPU -> NIC -> leaf -> NIC -> GPU                       one path (same rail)
//   same pod         GPU -> NIC -> leaf -> spine s -> leaf -> NIC -> GPU    S paths, one per spine
//   across pods      ... leaf -> spine s -> core (s,k) -> spine s -> leaf ...  S x K = C paths
// The switch part between two leaves depends only on the leaf pair and is cached per pair.
//
// Routes, explicit topologies: breadth-first search by hop count over the Boost graph from the
// source GPU (restricted to NVLink links when both GPUs share a domain; through other GPUs only
// when there is no path without them), then every equal-hop path
// is collected walking back from the destination along in-edges whose source is one hop closer
// (at most kMaxSearchPaths paths). Results are cached per GPU pair.
//
// Bisection bandwidth (per direction). Let A be the GPUs of nodes 0 .. floor(N/2)-1 and B the GPUs
// of the other nodes. The bisection bandwidth is the maximum flow from A to B over the directed
// links with their per-direction capacities, which by the max-flow/min-cut theorem equals the
// least total capacity of links whose removal disconnects A from B. It is computed with
// boost::push_relabel_max_flow on integer capacities (bytes/s rounded to the nearest integer), a
// super-source feeding every GPU of A and every GPU of B draining to a super-sink (those extra
// edges carry the GPU's own total link capacity, so they never form the minimum cut). With fewer
// than two nodes there is no cut and the bisection bandwidth is 0.
#include "reshard/model/topology.hpp"

#include <boost/graph/breadth_first_search.hpp>
#include <boost/graph/connected_components.hpp>
#include <boost/graph/filtered_graph.hpp>
#include <boost/graph/push_relabel_max_flow.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <stdexcept>

#include "reshard/model/errors.hpp"
#include "topology_impl.hpp"
#include "reshard/model/yaml_reader.hpp"

namespace reshard::model {

const char* to_string(LinkKind k) {
  switch (k) {
    case LinkKind::NVLink: return "NVLink";
    case LinkKind::C2C: return "C2C";
    case LinkKind::PCIe: return "PCIe";
    case LinkKind::Network: return "network";
  }
  return "?";
}

const char* to_string(DeviceKind k) {
  switch (k) {
    case DeviceKind::GPU: return "GPU";
    case DeviceKind::NVSwitch: return "NVSwitch";
    case DeviceKind::NIC: return "NIC";
    case DeviceKind::Leaf: return "leaf";
    case DeviceKind::Spine: return "spine";
    case DeviceKind::Core: return "core";
    case DeviceKind::CPU: return "CPU";
  }
  return "?";
}

namespace detail {

std::size_t TopologyData::checked_index(const char* what, std::int64_t i, std::size_t n) const {
  if (i < 0 || static_cast<std::size_t>(i) >= n)
    throw IndexError(std::string(what) + " index " + std::to_string(i) + " out of range (topology '" + name +
                     "' has " + std::to_string(n) + ")");
  return static_cast<std::size_t>(i);
}

DeviceId TopologyData::add_device(DeviceKind kind, std::string dev_name, std::int32_t node, std::int32_t rail,
                                  int line) {
  Device d;
  d.id = static_cast<DeviceId>(devices.size());
  d.kind = kind;
  d.name = std::move(dev_name);
  d.node = node;
  d.rail = rail;
  devices.push_back(std::move(d));
  device_line.push_back(line);
  return devices.back().id;
}

LinkId TopologyData::add_link(DeviceId from, DeviceId to, BytesPerSecond bw, Seconds latency, LinkKind kind) {
  Link l;
  l.id = static_cast<LinkId>(links.size());
  l.from = from;
  l.to = to;
  l.bandwidth = bw;
  l.latency = latency;
  l.kind = kind;
  links.push_back(l);
  return l.id;
}

LinkId TopologyData::add_duplex(DeviceId a, DeviceId b, BytesPerSecond bw, Seconds latency, LinkKind kind) {
  const LinkId id = add_link(a, b, bw, latency, kind);
  add_link(b, a, bw, latency, kind);
  return id;
}

namespace {

// Edge filter for boost::filtered_graph: keeps the links of one kind, or all links.
struct KindFilter {
  const TopologyData* data = nullptr;
  std::optional<LinkKind> only;
  bool operator()(const Graph::edge_descriptor& e) const {
    return !only || data->links[static_cast<std::size_t>(data->graph[e].link)].kind == *only;
  }
};

// Vertex filter: without GPU transit, the only GPUs a path may touch are its two ends.
struct TransitFilter {
  const TopologyData* data = nullptr;
  bool gpu_transit = true;
  DeviceId source = -1;
  DeviceId target = -1;
  bool operator()(Graph::vertex_descriptor v) const {
    const auto id = static_cast<DeviceId>(v);
    return gpu_transit || id == source || id == target ||
           data->devices[static_cast<std::size_t>(v)].kind != DeviceKind::GPU;
  }
};

// Hop distances from `source` over the links the filter keeps (-1 = unreachable). Without
// `gpu_transit`, GPUs other than source and target are not entered.
std::vector<std::int32_t> bfs_distances(const TopologyData& d, DeviceId source, std::optional<LinkKind> only,
                                        bool gpu_transit = true, DeviceId target = -1) {
  const std::size_t n = d.devices.size();
  std::vector<std::int32_t> dist(n, -1);
  dist[static_cast<std::size_t>(source)] = 0;
  boost::filtered_graph<Graph, KindFilter, TransitFilter> fg(d.graph, KindFilter{&d, only},
                                                             TransitFilter{&d, gpu_transit, source, target});
  std::vector<boost::default_color_type> color(n);
  auto dist_map = boost::make_iterator_property_map(dist.begin(), boost::get(boost::vertex_index, d.graph));
  boost::breadth_first_search(
      fg, static_cast<Graph::vertex_descriptor>(source),
      boost::visitor(boost::make_bfs_visitor(boost::record_distances(dist_map, boost::on_tree_edge())))
          .color_map(boost::make_iterator_property_map(color.begin(), boost::get(boost::vertex_index, d.graph))));
  return dist;
}

}  // namespace

void TopologyData::derive_structure() {
  number_gpus();
  build_graph();
  find_nvlink_domains();
  find_gpu_nvlink_links();
  pair_gpus_with_nics();
  find_nic_network_links();
  if (generated) {
    index_route_ends();
    compute_cuts();
    return;
  }

  // Explicit form: every GPU must reach every other. GPU 0 reaching all and all reaching GPU 0
  // (a forward and a backward search) is equivalent to that.
  if (gpu_devices.size() >= 2) check_reachability();
  compute_cuts();
}

// GPU numbering: GPU vertices in device order.
void TopologyData::number_gpus() {
  gpu_devices.clear();
  for (auto& dev : devices)
    if (dev.kind == DeviceKind::GPU) {
      dev.gpu = static_cast<GpuId>(gpu_devices.size());
      gpu_devices.push_back(dev.id);
    }
}

// The Boost graph: vertex i = device i, one edge per directed link.
void TopologyData::build_graph() {
  const std::size_t n = devices.size();
  graph = Graph(n);
  for (const auto& l : links)
    boost::add_edge(static_cast<Graph::vertex_descriptor>(l.from), static_cast<Graph::vertex_descriptor>(l.to),
                    EdgeData{l.id}, graph);
}

// NVLink domains: connected components of the undirected NVLink subgraph.
void TopologyData::find_nvlink_domains() {
  const std::size_t n = devices.size();
  const std::size_t gpus = gpu_devices.size();
  using Undirected = boost::adjacency_list<boost::vecS, boost::vecS, boost::undirectedS>;
  Undirected ug(n);
  for (const auto& l : links)
    if (l.kind == LinkKind::NVLink) boost::add_edge(static_cast<std::size_t>(l.from), static_cast<std::size_t>(l.to), ug);
  std::vector<int> component(n, -1);
  if (n > 0) boost::connected_components(ug, component.data());
  std::vector<std::int32_t> domain_of_component(n, -1);
  domain_gpus.clear();
  for (std::size_t g = 0; g < gpus; ++g) {
    const auto c = static_cast<std::size_t>(component[static_cast<std::size_t>(gpu_devices[g])]);
    if (domain_of_component[c] < 0) {
      domain_of_component[c] = static_cast<std::int32_t>(domain_gpus.size());
      domain_gpus.emplace_back();
    }
    domain_gpus[static_cast<std::size_t>(domain_of_component[c])].push_back(static_cast<GpuId>(g));
  }
  for (std::size_t v = 0; v < n; ++v) {
    auto& dev = devices[v];
    dev.domain = (dev.kind == DeviceKind::GPU || dev.kind == DeviceKind::NVSwitch)
                     ? domain_of_component[static_cast<std::size_t>(component[v])]
                     : -1;
  }
}

// Each GPU's own NVLink links (first NVLink link out of / into the GPU).
void TopologyData::find_gpu_nvlink_links() {
  const std::size_t gpus = gpu_devices.size();
  nvl_out.assign(gpus, -1);
  nvl_in.assign(gpus, -1);
  for (std::size_t g = 0; g < gpus; ++g) {
    const auto v = static_cast<Graph::vertex_descriptor>(gpu_devices[g]);
    for (auto [e, end] = boost::out_edges(v, graph); e != end; ++e) {
      const auto& l = links[static_cast<std::size_t>(graph[*e].link)];
      if (l.kind == LinkKind::NVLink && nvl_out[g] < 0) nvl_out[g] = l.id;
    }
    for (auto [e, end] = boost::in_edges(v, graph); e != end; ++e) {
      const auto& l = links[static_cast<std::size_t>(graph[*e].link)];
      if (l.kind == LinkKind::NVLink && nvl_in[g] < 0) nvl_in[g] = l.id;
    }
  }
}

// NIC pairing: generated clusters know it; explicit ones take the nearest NIC over host links
// (PCIe or C2C) without passing through another GPU.
void TopologyData::pair_gpus_with_nics() {
  const std::size_t n = devices.size();
  const std::size_t gpus = gpu_devices.size();
  gpu_nic.assign(gpus, -1);
  if (generated) {
    for (std::size_t g = 0; g < gpus; ++g) gpu_nic[g] = links[static_cast<std::size_t>(fabric.gpu_to_nic[g])].to;
  } else {
    for (std::size_t g = 0; g < gpus; ++g) {
      std::vector<DeviceId> frontier{gpu_devices[g]};
      std::vector<char> seen(n, 0);
      seen[static_cast<std::size_t>(gpu_devices[g])] = 1;
      while (!frontier.empty() && gpu_nic[g] < 0) {
        std::vector<DeviceId> next;
        for (DeviceId u : frontier) {
          for (auto [e, end] = boost::out_edges(static_cast<Graph::vertex_descriptor>(u), graph); e != end; ++e) {
            const auto& l = links[static_cast<std::size_t>(graph[*e].link)];
            if (l.kind != LinkKind::PCIe && l.kind != LinkKind::C2C) continue;
            const auto w = static_cast<std::size_t>(l.to);
            if (seen[w]) continue;
            seen[w] = 1;
            if (devices[w].kind == DeviceKind::NIC) {
              if (gpu_nic[g] < 0) gpu_nic[g] = l.to;
            } else if (devices[w].kind != DeviceKind::GPU) {
              next.push_back(l.to);
            }
          }
        }
        frontier = std::move(next);
      }
      auto& gpu_dev = devices[static_cast<std::size_t>(gpu_devices[g])];
      if (gpu_dev.rail < 0 && gpu_nic[g] >= 0) gpu_dev.rail = devices[static_cast<std::size_t>(gpu_nic[g])].rail;
    }
  }
}

// Each GPU's NIC's network links (first network link out of / into the NIC).
void TopologyData::find_nic_network_links() {
  const std::size_t gpus = gpu_devices.size();
  nic_out.assign(gpus, -1);
  nic_in.assign(gpus, -1);
  for (std::size_t g = 0; g < gpus; ++g) {
    if (gpu_nic[g] < 0) continue;
    const auto v = static_cast<Graph::vertex_descriptor>(gpu_nic[g]);
    for (auto [e, end] = boost::out_edges(v, graph); e != end; ++e) {
      const auto& l = links[static_cast<std::size_t>(graph[*e].link)];
      if (l.kind == LinkKind::Network && nic_out[g] < 0) nic_out[g] = l.id;
    }
    for (auto [e, end] = boost::in_edges(v, graph); e != end; ++e) {
      const auto& l = links[static_cast<std::size_t>(graph[*e].link)];
      if (l.kind == LinkKind::Network && nic_in[g] < 0) nic_in[g] = l.id;
    }
  }
}

void TopologyData::check_reachability() const {
  const std::size_t gpus = gpu_devices.size();
  const auto fwd = bfs_distances(*this, gpu_devices[0], std::nullopt);
  for (std::size_t g = 1; g < gpus; ++g)
    if (fwd[static_cast<std::size_t>(gpu_devices[g])] < 0) {
      const auto& from = devices[static_cast<std::size_t>(gpu_devices[0])];
      const auto& to = devices[static_cast<std::size_t>(gpu_devices[g])];
      throw ConfigError(file, device_line[static_cast<std::size_t>(to.id)], to.name,
                        "GPU '" + from.name + "' cannot reach GPU '" + to.name + "' over any link");
    }
  for (std::size_t g = 1; g < gpus; ++g) {
    const auto d = bfs_distances(*this, gpu_devices[g], std::nullopt);
    // Only the distance to GPU 0 matters; stop early for large graphs is not needed (explicit
    // topologies are hand-written, small).
    if (d[static_cast<std::size_t>(gpu_devices[0])] < 0) {
      const auto& from = devices[static_cast<std::size_t>(gpu_devices[g])];
      const auto& to = devices[static_cast<std::size_t>(gpu_devices[0])];
      throw ConfigError(file, device_line[static_cast<std::size_t>(from.id)], from.name,
                        "GPU '" + from.name + "' cannot reach GPU '" + to.name + "' over any link");
    }
  }
}

void TopologyData::finalize_route(Route& r) const {
  r.kind = LinkKind::NVLink;
  double latency = 0;
  for (const auto& p : r.paths) {
    double sum = 0;
    for (LinkId id : p.links) {
      const auto& l = links[static_cast<std::size_t>(id)];
      sum += l.latency.value;
      r.kind = std::max(r.kind, l.kind);
    }
    latency = std::max(latency, sum);
  }
  r.latency = Seconds{latency};
}

std::int32_t TopologyData::middle_count(std::int32_t la, std::int32_t lb) const {
  const auto& f = fabric;
  const bool same_pod = f.leaf_pod[static_cast<std::size_t>(la)] == f.leaf_pod[static_cast<std::size_t>(lb)];
  return f.spines_per_pod * (same_pod ? 1 : f.cores_per_plane);
}

std::int32_t TopologyData::middle_length(std::int32_t la, std::int32_t lb) const {
  const auto& f = fabric;
  return f.leaf_pod[static_cast<std::size_t>(la)] == f.leaf_pod[static_cast<std::size_t>(lb)] ? 2 : 4;
}

LinkId TopologyData::middle_link(std::int32_t la, std::int32_t lb, std::int32_t p, std::int32_t i) const {
  const auto& f = fabric;
  const std::size_t S = static_cast<std::size_t>(f.spines_per_pod);
  const auto a = static_cast<std::size_t>(la);
  const auto b = static_cast<std::size_t>(lb);
  const auto pa = static_cast<std::size_t>(f.leaf_pod[a]);
  const auto pb = static_cast<std::size_t>(f.leaf_pod[b]);
  if (pa == pb) {
    const auto s = static_cast<std::size_t>(p);
    return i == 0 ? f.leaf_up[a * S + s] : f.leaf_down[b * S + s];
  }
  const std::size_t K = static_cast<std::size_t>(f.cores_per_plane);
  const std::size_t s = static_cast<std::size_t>(p) / K, k = static_cast<std::size_t>(p) % K;
  switch (i) {
    case 0: return f.leaf_up[a * S + s];
    case 1: return f.spine_up[(pa * S + s) * K + k];
    case 2: return f.spine_down[(pb * S + s) * K + k];
    default: return f.leaf_down[b * S + s];
  }
}

void TopologyData::index_route_ends() {
  const std::size_t leaf_pairs = static_cast<std::size_t>(fabric.leaves) * static_cast<std::size_t>(fabric.leaves);
  cache->leaf_pairs = std::make_unique<std::atomic<const LeafPair*>[]>(leaf_pairs);
  for (std::size_t i = 0; i < leaf_pairs; ++i) cache->leaf_pairs[i].store(nullptr, std::memory_order_relaxed);
  route_ends.assign(gpu_devices.size(), RouteEnds{});
  auto of = [&](LinkId id, double& latency, LinkKind& kind) {
    if (id < 0) return;
    const auto& l = links[static_cast<std::size_t>(id)];
    latency = l.latency.value;
    kind = std::max(kind, l.kind);
  };
  for (std::size_t g = 0; g < gpu_devices.size(); ++g) {
    RouteEnds& e = route_ends[g];
    e.domain = devices[static_cast<std::size_t>(gpu_devices[g])].domain;
    e.leaf = fabric.gpu_leaf[g];
    of(nvl_out[g], e.nvlink_out, e.nvlink_kind);
    of(nvl_in[g], e.nvlink_in, e.nvlink_kind);
    of(fabric.gpu_to_nic[g], e.up[0], e.up_kind);
    of(fabric.nic_to_leaf[g], e.up[1], e.up_kind);
    of(fabric.leaf_to_nic[g], e.down[0], e.down_kind);
    of(fabric.nic_to_gpu[g], e.down[1], e.down_kind);
  }
}

const LeafPair& TopologyData::leaf_pair(std::int32_t la, std::int32_t lb) const {
  const std::size_t slot = static_cast<std::size_t>(la) * static_cast<std::size_t>(fabric.leaves) +
                           static_cast<std::size_t>(lb);
  if (const LeafPair* p = cache->leaf_pairs[slot].load(std::memory_order_acquire)) return *p;
  auto pair = std::make_unique<LeafPair>();
  pair->length = middle_length(la, lb);
  const std::int32_t count = middle_count(la, lb);
  std::vector<double> sequence(static_cast<std::size_t>(pair->length));
  for (std::int32_t p = 0; p < count; ++p) {
    for (std::int32_t i = 0; i < pair->length; ++i) {
      const auto& l = links[static_cast<std::size_t>(middle_link(la, lb, p, i))];
      sequence[static_cast<std::size_t>(i)] = l.latency.value;
      pair->kind = std::max(pair->kind, l.kind);
    }
    bool known = false;
    for (std::size_t q = 0; q < pair->latencies.size() && !known; q += sequence.size())
      known = std::equal(sequence.begin(), sequence.end(), pair->latencies.begin() + static_cast<std::ptrdiff_t>(q));
    if (!known) pair->latencies.insert(pair->latencies.end(), sequence.begin(), sequence.end());
  }
  std::unique_lock lock(cache->mutex);
  auto& entry = cache->leaf_pairs[slot];
  if (const LeafPair* p = entry.load(std::memory_order_acquire)) return *p;  // another thread's
  entry.store(pair.get(), std::memory_order_release);
  cache->owned.push_back(std::move(pair));
  return *cache->owned.back();
}

Route TopologyData::search_route(GpuId a, GpuId b) const {
  const DeviceId src = gpu_devices[static_cast<std::size_t>(a)];
  const DeviceId dst = gpu_devices[static_cast<std::size_t>(b)];
  Route r;
  r.same_domain = devices[static_cast<std::size_t>(src)].domain == devices[static_cast<std::size_t>(dst)].domain;
  // Searches in order of preference: NVLink only (same domain), then every link without passing
  // through another GPU, then every link with GPUs forwarding (a GPU without a NIC of its own
  // reaches the network through a peer, as NCCL's PXN does).
  std::optional<LinkKind> only;
  if (r.same_domain) only = LinkKind::NVLink;
  auto dist = bfs_distances(*this, src, only, false, dst);
  if (dist[static_cast<std::size_t>(dst)] < 0 && only) {  // one-way NVLink links: fall back to every link
    only.reset();
    dist = bfs_distances(*this, src, only, false, dst);
  }
  if (dist[static_cast<std::size_t>(dst)] < 0) dist = bfs_distances(*this, src, only, true, dst);
  if (dist[static_cast<std::size_t>(dst)] < 0) {
    const auto& from = devices[static_cast<std::size_t>(src)];
    const auto& to = devices[static_cast<std::size_t>(dst)];
    throw ConfigError(file, device_line[static_cast<std::size_t>(src)], from.name,
                      "GPU '" + from.name + "' cannot reach GPU '" + to.name + "' over any link");
  }
  // Walk back from dst along in-edges whose source is one hop closer to src.
  std::vector<LinkId> reversed;
  std::function<void(DeviceId)> walk = [&](DeviceId v) {
    if (r.paths.size() >= kMaxSearchPaths) return;
    if (v == src) {
      Path p;
      p.links.assign(reversed.rbegin(), reversed.rend());
      r.paths.push_back(std::move(p));
      return;
    }
    const std::int32_t dv = dist[static_cast<std::size_t>(v)];
    for (auto [e, end] = boost::in_edges(static_cast<Graph::vertex_descriptor>(v), graph); e != end; ++e) {
      const auto& l = links[static_cast<std::size_t>(graph[*e].link)];
      if (only && l.kind != *only) continue;
      if (dist[static_cast<std::size_t>(l.from)] != dv - 1) continue;
      reversed.push_back(l.id);
      walk(l.from);
      reversed.pop_back();
    }
  };
  walk(dst);
  finalize_route(r);
  return r;
}

}  // namespace detail

Topology::Topology(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Topology::Topology(Topology&&) noexcept = default;
Topology& Topology::operator=(Topology&&) noexcept = default;
Topology::Topology(const Topology& o) : impl_(std::make_unique<Impl>(*o.impl_)) {}
Topology& Topology::operator=(const Topology& o) {
  if (this != &o) impl_ = std::make_unique<Impl>(*o.impl_);
  return *this;
}
Topology::~Topology() = default;

namespace {
Topology::Impl* build(const yaml::Node& root, const std::string& file) {
  auto impl = std::make_unique<Topology::Impl>();
  if (root.has("cluster") && root.has("devices"))
    root.at("devices").fail("a topology is either generated ('cluster') or explicit ('devices'), not both");
  if (root.has("cluster") && root.has("clusters"))
    root.at("clusters").fail("a generated topology has either one 'cluster' or a list of 'clusters', not both (with "
                            "'clusters', fabric.nic_speed and fabric.host_link set every cluster's; "
                            "clusters.N.KEY one cluster's)");
  if (root.has("clusters") && root.has("devices"))
    root.at("devices").fail("a topology is either generated ('clusters') or explicit ('devices'), not both");
  if (root.has("cluster")) impl->d = detail::build_generated(root);
  else if (root.has("clusters")) impl->d = detail::build_generated_clusters(root);
  else if (root.has("devices")) impl->d = detail::build_explicit(root);
  else
    throw ConfigError(file, 1, "cluster",
                      "required key is missing: a topology needs 'cluster' (a generated cluster of a node "
                      "template), 'clusters' (several) or 'devices' and 'links' (the explicit form)");
  return impl.release();
}
}  // namespace

Topology Topology::load(const std::filesystem::path& path) { return load(path, {}); }

Topology Topology::load(const std::filesystem::path& path, const std::vector<Override>& overrides) {
  const auto root = yaml::load_file(path, overrides);
  return yaml::naming_overrides(overrides, [&] { return Topology(std::unique_ptr<Impl>(build(root, path.string()))); });
}

Topology Topology::parse(const std::string& yaml_text, const std::string& name) {
  const auto root = yaml::load_string(yaml_text, name);
  return Topology(std::unique_ptr<Impl>(build(root, name)));
}

const std::string& Topology::name() const { return impl_->d.name; }
std::int32_t Topology::gpu_count() const { return static_cast<std::int32_t>(impl_->d.gpu_devices.size()); }
std::int32_t Topology::node_count() const { return impl_->d.node_count; }
std::int32_t Topology::domain_count() const { return static_cast<std::int32_t>(impl_->d.domain_gpus.size()); }
std::int32_t Topology::device_count() const { return static_cast<std::int32_t>(impl_->d.devices.size()); }
std::int32_t Topology::link_count() const { return static_cast<std::int32_t>(impl_->d.links.size()); }
std::int32_t Topology::rail_count() const { return impl_->d.rail_count; }
bool Topology::generated() const { return impl_->d.generated; }
const std::vector<Topology::Cluster>& Topology::clusters() const { return impl_->d.clusters; }

const Device& Topology::device(DeviceId id) const {
  return impl_->d.devices[impl_->d.checked_index("device", id, impl_->d.devices.size())];
}
const Link& Topology::link(LinkId id) const {
  return impl_->d.links[impl_->d.checked_index("link", id, impl_->d.links.size())];
}
const std::vector<Link>& Topology::links() const { return impl_->d.links; }
const std::vector<Device>& Topology::devices() const { return impl_->d.devices; }

namespace {
std::optional<LinkId> opt(LinkId id) { return id < 0 ? std::nullopt : std::optional<LinkId>(id); }
}  // namespace

DeviceId Topology::gpu_device(GpuId g) const { return impl_->d.gpu_devices[impl_->d.checked_gpu(g)]; }
std::int32_t Topology::domain_of(GpuId g) const { return device(gpu_device(g)).domain; }
std::int32_t Topology::node_of(GpuId g) const { return device(gpu_device(g)).node; }
std::int32_t Topology::rail_of(GpuId g) const { return device(gpu_device(g)).rail; }
const std::vector<GpuId>& Topology::gpus_in_domain(std::int32_t domain) const {
  return impl_->d.domain_gpus[impl_->d.checked_domain(domain)];
}
std::optional<DeviceId> Topology::nic_of(GpuId g) const {
  const DeviceId nic = impl_->d.gpu_nic[impl_->d.checked_gpu(g)];
  return nic < 0 ? std::nullopt : std::optional<DeviceId>(nic);
}

std::optional<LinkId> Topology::nvlink_egress(GpuId g) const { return opt(impl_->d.nvl_out[impl_->d.checked_gpu(g)]); }
std::optional<LinkId> Topology::nvlink_ingress(GpuId g) const { return opt(impl_->d.nvl_in[impl_->d.checked_gpu(g)]); }
std::optional<LinkId> Topology::nic_egress(GpuId g) const { return opt(impl_->d.nic_out[impl_->d.checked_gpu(g)]); }
std::optional<LinkId> Topology::nic_ingress(GpuId g) const { return opt(impl_->d.nic_in[impl_->d.checked_gpu(g)]); }

BytesPerSecond Topology::gpu_memory_bandwidth(GpuId g) const { return device(gpu_device(g)).memory_bandwidth; }
Bytes Topology::gpu_memory(GpuId g) const { return device(gpu_device(g)).memory; }
BytesPerSecond Topology::gpu_nvlink_bandwidth(GpuId g) const {
  const auto l = nvlink_egress(g);
  return l ? link(*l).bandwidth : BytesPerSecond{0};
}
BytesPerSecond Topology::gpu_nic_bandwidth(GpuId g) const {
  const auto l = nic_egress(g);
  return l ? link(*l).bandwidth : BytesPerSecond{0};
}

RouteView Topology::route_view(GpuId a, GpuId b) const {
  const auto& d = impl_->d;
  const auto ga = d.checked_gpu(a);
  const auto gb = d.checked_gpu(b);
  RouteView r;
  if (a == b) {
    r.same_domain = true;
    return r;
  }
  r.paths = 1;
  if (!d.generated) {  // explicit form: the cached search, its paths the middles
    const GpuPair key{a, b};
    std::shared_ptr<const Route> route;
    {
      std::shared_lock lock(d.cache->mutex);
      if (auto it = d.cache->gpu_pairs.find(key); it != d.cache->gpu_pairs.end()) route = it->second;
    }
    if (!route) {
      auto found = std::make_shared<const Route>(d.search_route(a, b));
      std::unique_lock lock(d.cache->mutex);
      route = d.cache->gpu_pairs.emplace(key, std::move(found)).first->second;  // another thread's, if first
    }
    r.kind = route->kind;
    r.latency = route->latency;
    r.same_domain = route->same_domain;
    r.paths = static_cast<std::int32_t>(route->paths.size());
    r.search_paths_ = &route->paths;  // the cache keeps it
    r.key_ = static_cast<std::int64_t>(a) * gpu_count() + b;
    return r;
  }
  // Generated form, from the structure. Kind and latency as finalize_route: the worst kind of
  // every link, the longest path's latency added link by link from the GPU that sends.
  const auto& ea = d.route_ends[ga];
  const auto& eb = d.route_ends[gb];
  if (ea.domain == eb.domain) {
    r.same_domain = true;
    r.head_ = {d.nvl_out[ga], d.nvl_in[gb]};
    r.head_n_ = 2;
    r.kind = std::max(ea.nvlink_kind, eb.nvlink_kind);
    r.latency = Seconds{0.0 + ea.nvlink_out + eb.nvlink_in};
    return r;
  }
  const auto& f = d.fabric;
  r.head_ = {f.gpu_to_nic[ga], f.nic_to_leaf[ga]};
  r.tail_ = {f.leaf_to_nic[gb], f.nic_to_gpu[gb]};
  r.head_n_ = r.tail_n_ = 2;
  r.kind = std::max(ea.up_kind, eb.down_kind);
  const double head = 0.0 + ea.up[0] + ea.up[1];
  if (ea.leaf == eb.leaf) {
    r.latency = Seconds{head + eb.down[0] + eb.down[1]};
    return r;
  }
  r.topology_ = impl_.get();
  r.la_ = ea.leaf;
  r.lb_ = eb.leaf;
  r.key_ = static_cast<std::int64_t>(ea.leaf) * f.leaves + eb.leaf;
  r.paths = d.middle_count(ea.leaf, eb.leaf);
  const detail::LeafPair& pair = d.leaf_pair(ea.leaf, eb.leaf);
  r.kind = std::max(r.kind, pair.kind);
  double latency = 0;
  const auto n = static_cast<std::size_t>(pair.length);
  for (std::size_t q = 0; q < pair.latencies.size(); q += n) {
    double sum = head;
    for (std::size_t i = 0; i < n; ++i) sum += pair.latencies[q + i];
    latency = std::max(latency, sum + eb.down[0] + eb.down[1]);
  }
  r.latency = Seconds{latency};
  return r;
}

Route Topology::route(GpuId a, GpuId b) const {
  const RouteView v = route_view(a, b);
  Route r;
  r.kind = v.kind;
  r.latency = v.latency;
  r.same_domain = v.same_domain;
  r.paths.resize(static_cast<std::size_t>(v.paths));
  for (std::int32_t p = 0; p < v.paths; ++p) v.path_links(p, r.paths[static_cast<std::size_t>(p)].links);
  return r;
}

void RouteView::path_links(std::int32_t p, std::vector<LinkId>& out) const {
  out.clear();
  if (search_paths_) {
    const auto& links = (*search_paths_)[static_cast<std::size_t>(p)].links;
    out.assign(links.begin(), links.end());
    return;
  }
  out.insert(out.end(), head_.begin(), head_.begin() + head_n_);
  if (topology_) {
    const std::int32_t n = topology_->d.middle_length(la_, lb_);
    for (std::int32_t i = 0; i < n; ++i) out.push_back(topology_->d.middle_link(la_, lb_, p, i));
  }
  out.insert(out.end(), tail_.begin(), tail_.begin() + tail_n_);
}

void RouteView::path_sums(const std::vector<double>& per_link, std::vector<double>& out) const {
  out.assign(static_cast<std::size_t>(paths), 0.0);
  auto at = [&](LinkId l) { return per_link[static_cast<std::size_t>(l)]; };
  if (search_paths_ || !topology_) {
    std::vector<LinkId> links;
    for (std::int32_t p = 0; p < paths; ++p) {
      path_links(p, links);
      double sum = 0;
      for (LinkId l : links) sum += at(l);
      out[static_cast<std::size_t>(p)] = sum;
    }
    return;
  }
  const auto& f = topology_->d.fabric;
  const auto S = static_cast<std::size_t>(f.spines_per_pod);
  const auto a = static_cast<std::size_t>(la_), b = static_cast<std::size_t>(lb_);
  const auto pa = static_cast<std::size_t>(f.leaf_pod[a]), pb = static_cast<std::size_t>(f.leaf_pod[b]);
  const double head = 0.0 + at(head_[0]) + at(head_[1]);
  const double t0 = at(tail_[0]), t1 = at(tail_[1]);
  if (pa == pb) {  // path s: leaf_up, leaf_down
    for (std::size_t s = 0; s < S; ++s) out[s] = head + at(f.leaf_up[a * S + s]) + at(f.leaf_down[b * S + s]) + t0 + t1;
    return;
  }
  const auto K = static_cast<std::size_t>(f.cores_per_plane);  // path s x K + k: leaf_up, spine_up, spine_down, leaf_down
  for (std::size_t s = 0; s < S; ++s) {
    const double up = head + at(f.leaf_up[a * S + s]), down = at(f.leaf_down[b * S + s]);
    for (std::size_t k = 0; k < K; ++k)
      out[s * K + k] = up + at(f.spine_up[(pa * S + s) * K + k]) + at(f.spine_down[(pb * S + s) * K + k]) + down + t0 + t1;
  }
}

void RouteView::middle_shares(std::vector<std::pair<LinkId, double>>& out) const {
  out.clear();
  const double one = 1.0 / static_cast<double>(paths);
  if (search_paths_) {  // any paths: each link found where a path first reaches it
    for (const auto& path : *search_paths_)
      for (LinkId l : path.links) {
        auto it = std::find_if(out.begin(), out.end(), [&](const auto& sh) { return sh.first == l; });
        if (it == out.end()) out.push_back({l, one});
        else it->second += one;
      }
    return;
  }
  if (!topology_) return;
  // Between leaves: path s (x K + k) crosses leaf_up[s] and leaf_down[s], and (across pods) spine
  // link pair s, k of its own; a leaf link is on the K paths of its spine.
  const std::int32_t length = topology_->d.middle_length(la_, lb_);
  const std::int32_t per_spine = length == 2 ? 1 : topology_->d.fabric.cores_per_plane;
  double leaf_share = 0;
  for (std::int32_t k = 0; k < per_spine; ++k) leaf_share += one;
  for (std::int32_t p = 0; p < paths; ++p) {
    const bool first = p % per_spine == 0;
    if (first) out.push_back({topology_->d.middle_link(la_, lb_, p, 0), leaf_share});
    for (std::int32_t i = 1; i + 1 < length; ++i) out.push_back({topology_->d.middle_link(la_, lb_, p, i), one});
    if (first) out.push_back({topology_->d.middle_link(la_, lb_, p, length - 1), leaf_share});
  }
}

double RouteView::end_share() const {
  const double one = 1.0 / static_cast<double>(paths);
  double share = 0;
  for (std::int32_t p = 0; p < paths; ++p) share += one;
  return share;
}

Route Topology::search_route(GpuId a, GpuId b) const {
  impl_->d.checked_gpu(a);
  impl_->d.checked_gpu(b);
  if (a == b) {
    Route r;
    r.same_domain = true;
    return r;
  }
  return impl_->d.search_route(a, b);
}

BytesPerSecond Topology::bisection_bandwidth() const {
  const auto& d = impl_->d;
  if (d.node_count < 2) return BytesPerSecond{0};
  const std::size_t n = d.devices.size();
  detail::MaxFlowGraph fg(n + 2);
  const std::size_t source = n;
  const std::size_t sink = n + 1;
  std::vector<std::int64_t> out_cap(n, 0), in_cap(n, 0);
  // Integer capacities in units of `unit` B/s (1 unless every link together passes 2^60 B/s), so
  // no sum of the flow overflows.
  double sum = 0;
  for (const auto& l : d.links) sum += l.bandwidth.value;
  const double unit = std::max(1.0, std::ceil(sum / std::ldexp(1.0, 60)));
  for (const auto& l : d.links) {
    const auto cap = static_cast<std::int64_t>(std::llround(l.bandwidth.value / unit));
    fg.add(static_cast<std::size_t>(l.from), static_cast<std::size_t>(l.to), cap);
    out_cap[static_cast<std::size_t>(l.from)] += cap;
    in_cap[static_cast<std::size_t>(l.to)] += cap;
  }
  const std::int32_t half = d.node_count / 2;
  for (DeviceId v : d.gpu_devices) {
    const auto& dev = d.devices[static_cast<std::size_t>(v)];
    const auto u = static_cast<std::size_t>(v);
    if (dev.node < half) fg.add(source, u, out_cap[u]);
    else fg.add(u, sink, in_cap[u]);
  }
  const std::int64_t flow = boost::push_relabel_max_flow(fg.g, source, sink);
  return BytesPerSecond{static_cast<double>(flow) * unit};
}

std::vector<std::string> Topology::template_names() {
  std::vector<std::string> out;
  for (const auto& t : detail::node_templates()) out.emplace_back(t.name);
  return out;
}

}  // namespace reshard::model
