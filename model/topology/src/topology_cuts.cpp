// Host links, the network cuts of NVLink domains, and the warnings about NICs faster than their
// host links.
//
// Host side. The host side of a set of GPUs is those GPUs and every device reachable from them
// over links that are not network links, in either direction, without entering another GPU: the
// NVSwitch of their domain, PCIe switches and CPUs, their NICs. Every byte a GPU exchanges with
// the network crosses the boundary of its host side.
//
// Domain network cut. For domain D with host side H, contract every device outside H into one
// vertex X. Ingress: the maximum flow from X to D's GPUs over the links inside H and the links
// from outside into H; egress: from D's GPUs to X. By max-flow = min-cut it is the least capacity
// of a set of links whose removal separates D's GPUs from X. Every GPU outside D lies in X, so such
// a set separates D from every other GPU in the real graph too: every byte entering D crosses it,
// and bytes / capacity is a lower bound on any schedule's time. Contracting X only removes cuts
// (those through the leaf/spine layers), so the capacity is at least the true minimum cut: a sound,
// possibly loose, estimate.
//
// Generated clusters: H is a domain's GPUs, its NVSwitch and the GPUs' own NICs; each NIC has one
// host link to its GPU and one network link to its leaf, so the minimum cut takes per GPU the
// narrower of the two: capacity = sum over the domain's GPUs of min(NIC, host link). That closed form
// is used for them (O(GPUs), no flow); tests check it against the flow.
//
// Fabric groups. Take out every switch of one tier and above (spines and cores: leaf groups;
// cores: pods) and join the devices left by their links (union-find, O(links)); each connected part
// holding GPUs, when there are two or more, is a group (the parts of one NVLink domain joined into
// one). A link between a kept device and a removed switch is the only kind that leaves a part
// (parts are maximal), so the group's cut is the links between it and the removed tier: any byte
// between its GPUs and the others crosses them.
//
// Flows are Boost.Graph Edmonds-Karp on integer capacities (bytes/s rounded to 1 B/s) over the
// host side alone, so their size is that of one domain. Among equal minimum cuts the one nearest
// the network is reported (NIC links rather than host links on a tie); its capacity is the exact
// sum of its links' bandwidths.
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/edmonds_karp_max_flow.hpp>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "reshard/model/errors.hpp"
#include "topology_impl.hpp"

namespace reshard::model::detail {

namespace {

// The host side of `seeds` (device ids of GPUs): the seeds first, then the devices reached.
std::vector<DeviceId> host_side(const TopologyData& d, const std::vector<DeviceId>& seeds) {
  std::vector<DeviceId> side(seeds);
  std::vector<char> seen(d.devices.size(), 0);
  for (DeviceId s : seeds) seen[static_cast<std::size_t>(s)] = 1;
  auto visit = [&](const Link& l, DeviceId other) {
    const auto o = static_cast<std::size_t>(other);
    if (l.kind == LinkKind::Network || seen[o] || d.devices[o].kind == DeviceKind::GPU) return;
    seen[o] = 1;
    side.push_back(other);
  };
  for (std::size_t i = 0; i < side.size(); ++i) {
    const auto v = static_cast<Graph::vertex_descriptor>(side[i]);
    for (auto [e, end] = boost::out_edges(v, d.graph); e != end; ++e) {
      const auto& l = d.links[static_cast<std::size_t>(d.graph[*e].link)];
      visit(l, l.to);
    }
    for (auto [e, end] = boost::in_edges(v, d.graph); e != end; ++e) {
      const auto& l = d.links[static_cast<std::size_t>(d.graph[*e].link)];
      visit(l, l.from);
    }
  }
  return side;
}

enum class Outside : std::uint8_t { Ignored, Feeds, Drains };

// Maximum flow inside `region` from `sources` to `sinks` (both in the region, joined to a super
// source / super sink without limit). Outside::Feeds: every link entering the region also starts
// at the super source; Outside::Drains: every link leaving it also ends at the super sink. Returns
// the links of a minimum cut: the one nearest the super source (`near_sink` false) or the super
// sink, and its capacity as the sum of their bandwidths.
NetworkCut region_cut(const TopologyData& d, const std::vector<DeviceId>& region, const std::vector<DeviceId>& sources,
                      const std::vector<DeviceId>& sinks, Outside outside, bool near_sink) {
  using Edge = MaxFlowGraph::Edge;
  std::unordered_map<DeviceId, std::size_t> local;
  local.reserve(region.size());
  for (DeviceId v : region) local.emplace(v, local.size());
  const std::size_t n = region.size();
  const std::size_t S = n, T = n + 1;
  MaxFlowGraph fg(n + 2);
  auto residual = boost::get(boost::edge_residual_capacity, fg.g);
  auto reverse = boost::get(boost::edge_reverse, fg.g);
  std::vector<std::pair<Edge, LinkId>> link_edges;  // the forward edge of every link taken in
  auto add = [&](std::size_t u, std::size_t v, std::int64_t cap) { return fg.add(u, v, cap); };
  // Capacities in B/s as integers: a link holds at most 1 PB/s (parse_bandwidth), and their sum
  // must stay far below 2^63 for the flow's sums.
  constexpr std::int64_t kMostTotal = std::int64_t{1} << 60;
  std::int64_t total = 1;
  auto add_link = [&](std::size_t u, std::size_t v, const Link& l) {
    if (!(l.bandwidth.value <= static_cast<double>(kMostTotal - total)))
      throw ConfigError(d.file, 0, "links",
                        "the bandwidths of the links around '" + d.devices[static_cast<std::size_t>(l.from)].name +
                            "' add up to more than 10^18 B/s, beyond what the network cuts compute with");
    const auto cap = static_cast<std::int64_t>(std::llround(l.bandwidth.value));
    total += cap;
    link_edges.emplace_back(add(u, v, cap), l.id);
  };
  for (DeviceId v : region) {
    const std::size_t lv = local.at(v);
    const auto gv = static_cast<Graph::vertex_descriptor>(v);
    for (auto [e, end] = boost::out_edges(gv, d.graph); e != end; ++e) {
      const auto& l = d.links[static_cast<std::size_t>(d.graph[*e].link)];
      if (auto it = local.find(l.to); it != local.end()) add_link(lv, it->second, l);
      else if (outside == Outside::Drains) add_link(lv, T, l);
    }
    if (outside == Outside::Feeds)
      for (auto [e, end] = boost::in_edges(gv, d.graph); e != end; ++e) {
        const auto& l = d.links[static_cast<std::size_t>(d.graph[*e].link)];
        if (!local.count(l.from)) add_link(S, lv, l);
      }
  }
  for (DeviceId v : sources) add(S, local.at(v), total);  // more than every link together: never cut
  for (DeviceId v : sinks) add(local.at(v), T, total);
  boost::edmonds_karp_max_flow(fg.g, S, T);

  // The side of the cut: vertices reachable from S in the residual graph (near the source), or
  // the vertices that reach T in it (near the sink).
  std::vector<char> side(n + 2, 0);
  std::vector<std::size_t> stack{near_sink ? T : S};
  side[stack.front()] = 1;
  while (!stack.empty()) {
    const std::size_t u = stack.back();
    stack.pop_back();
    for (auto [e, end] = boost::out_edges(u, fg.g); e != end; ++e) {
      // Forward search: u -> w usable when its residual is positive. Backward search: w -> u is
      // the reverse of the out-edge u -> w, usable when its residual is positive.
      const Edge step = near_sink ? reverse[*e] : *e;
      const std::size_t w = boost::target(*e, fg.g);
      if (residual[step] > 0 && !side[w]) {
        side[w] = 1;
        stack.push_back(w);
      }
    }
  }
  NetworkCut cut;
  for (const auto& [e, id] : link_edges) {
    const bool from_in = side[boost::source(e, fg.g)], to_in = side[boost::target(e, fg.g)];
    if (near_sink ? (!from_in && to_in) : (from_in && !to_in)) {
      cut.links.push_back(id);
      cut.capacity.value += d.links[static_cast<std::size_t>(id)].bandwidth.value;
    }
  }
  std::sort(cut.links.begin(), cut.links.end());
  return cut;
}

std::string quoted_names(const TopologyData& d, const std::vector<DeviceId>& ids) {
  std::string s;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (i == 4 && ids.size() > 5) return s + " and " + std::to_string(ids.size() - 4) + " more";
    s += (i ? ", '" : "'") + d.devices[static_cast<std::size_t>(ids[i])].name + "'";
  }
  return s;
}

}  // namespace

NetworkCut TopologyData::domain_cut(std::int32_t domain, CutDirection dir, bool search) const {
  const auto& gpus = domain_gpus[checked_domain(domain)];
  const bool in = dir == CutDirection::Ingress;
  if (generated && !search) {
    NetworkCut cut;
    for (GpuId g : gpus) {
      const auto i = static_cast<std::size_t>(g);
      const Link& nic = links[static_cast<std::size_t>(in ? fabric.leaf_to_nic[i] : fabric.nic_to_leaf[i])];
      const Link& host = links[static_cast<std::size_t>(in ? fabric.nic_to_gpu[i] : fabric.gpu_to_nic[i])];
      const Link& narrow = host.bandwidth.value < nic.bandwidth.value ? host : nic;
      cut.links.push_back(narrow.id);
      cut.capacity.value += narrow.bandwidth.value;
    }
    std::sort(cut.links.begin(), cut.links.end());
    return cut;
  }
  std::vector<DeviceId> seeds;
  for (GpuId g : gpus) seeds.push_back(gpu_devices[static_cast<std::size_t>(g)]);
  const auto side = host_side(*this, seeds);
  // Ingress: from outside to the GPUs, the cut nearest the outside; egress: from the GPUs to the
  // outside, the cut nearest the outside again (the sink).
  if (in) return region_cut(*this, side, {}, seeds, Outside::Feeds, false);
  return region_cut(*this, side, seeds, {}, Outside::Drains, true);
}

void TopologyData::compute_cuts() {
  compute_fabric_groups();
  const std::size_t gpus = gpu_devices.size();
  host_bw.assign(gpus, 0.0);
  host_kind.assign(gpus, LinkKind::PCIe);
  for (std::size_t g = 0; g < gpus; ++g) {
    if (gpu_nic[g] < 0) continue;
    if (generated) {
      const Link& l = links[static_cast<std::size_t>(fabric.gpu_to_nic[g])];
      host_bw[g] = l.bandwidth.value;
      host_kind[g] = l.kind;
      continue;
    }
    const DeviceId gpu = gpu_devices[g];
    const auto cut = region_cut(*this, host_side(*this, {gpu}), {gpu}, {gpu_nic[g]}, Outside::Ignored, true);
    host_bw[g] = cut.capacity.value;
    LinkKind worst = LinkKind::NVLink;
    for (LinkId id : cut.links) worst = std::max(worst, links[static_cast<std::size_t>(id)].kind);
    if (!cut.links.empty()) host_kind[g] = worst;
  }

  const std::size_t domains = domain_gpus.size();
  domain_in_cap.assign(domains, 0.0);
  domain_out_cap.assign(domains, 0.0);
  if (generated) {
    // The closed form of domain_cut, summed without building link lists.
    for (std::size_t g = 0; g < gpus; ++g) {
      const auto k = static_cast<std::size_t>(devices[static_cast<std::size_t>(gpu_devices[g])].domain);
      auto bw = [&](LinkId id) { return links[static_cast<std::size_t>(id)].bandwidth.value; };
      domain_in_cap[k] += std::min(bw(fabric.leaf_to_nic[g]), bw(fabric.nic_to_gpu[g]));
      domain_out_cap[k] += std::min(bw(fabric.nic_to_leaf[g]), bw(fabric.gpu_to_nic[g]));
    }
    return;  // the generator words its own warning, naming the keys
  }
  for (std::size_t k = 0; k < domains; ++k) {
    domain_in_cap[k] = domain_cut(static_cast<std::int32_t>(k), CutDirection::Ingress, true).capacity.value;
    domain_out_cap[k] = domain_cut(static_cast<std::int32_t>(k), CutDirection::Egress, true).capacity.value;
  }

  // NICs faster than their host links: the NIC's network links out against the maximum flow from
  // the GPUs that send through it to the NIC over their host sides.
  std::vector<std::vector<DeviceId>> users(devices.size());
  for (std::size_t g = 0; g < gpus; ++g)
    if (gpu_nic[g] >= 0) users[static_cast<std::size_t>(gpu_nic[g])].push_back(gpu_devices[g]);
  constexpr std::size_t kMaxNicWarnings = 8;
  std::size_t slow = 0;
  for (std::size_t v = 0; v < devices.size(); ++v) {
    if (users[v].empty()) continue;
    double network = 0;
    for (auto [e, end] = boost::out_edges(static_cast<Graph::vertex_descriptor>(v), graph); e != end; ++e) {
      const auto& l = links[static_cast<std::size_t>(graph[*e].link)];
      if (l.kind == LinkKind::Network) network += l.bandwidth.value;
    }
    const auto nic = static_cast<DeviceId>(v);
    const auto cut = region_cut(*this, host_side(*this, users[v]), users[v], {nic}, Outside::Ignored, true);
    if (!(network > cut.capacity.value * (1 + 1e-9))) continue;
    if (++slow > kMaxNicWarnings) continue;
    LinkKind worst = LinkKind::NVLink;
    for (LinkId id : cut.links) worst = std::max(worst, links[static_cast<std::size_t>(id)].kind);
    const bool one = users[v].size() == 1;
    const std::string host = std::string(to_string(worst)) + " " + format(cut.capacity) + (one ? "" : " in all");
    warnings.push_back(file + ":" + std::to_string(device_line[v]) + ": " + devices[v].name + ": the NIC (" +
                       format(BytesPerSecond{network}) + ") is faster than its host link" + (one ? "" : "s") +
                       (one ? " from GPU " : " from GPUs ") + quoted_names(*this, users[v]) + " (" + host + "): " +
                       (one ? "the host link caps the GPU's network bandwidth at "
                            : "the host links cap those GPUs' network bandwidth together at ") +
                       format(cut.capacity));
  }
  if (slow > kMaxNicWarnings)
    warnings.push_back(file + ": " + std::to_string(slow - kMaxNicWarnings) +
                       " more NICs are faster than their host links");
}

void TopologyData::compute_fabric_groups() {
  fabric_groups.clear();
  const std::size_t n = devices.size();
  for (const DeviceKind above : {DeviceKind::Spine, DeviceKind::Core}) {
    auto removed = [&](DeviceId v) {
      const DeviceKind k = devices[static_cast<std::size_t>(v)].kind;
      return k == DeviceKind::Core || (above == DeviceKind::Spine && k == DeviceKind::Spine);
    };
    if (std::none_of(devices.begin(), devices.end(), [&](const Device& v) { return v.kind == above; })) continue;
    std::vector<DeviceId> parent(n);
    for (std::size_t v = 0; v < n; ++v) parent[v] = static_cast<DeviceId>(v);
    auto find = [&](DeviceId v) {
      while (parent[static_cast<std::size_t>(v)] != v) {
        auto& p = parent[static_cast<std::size_t>(v)];
        p = parent[static_cast<std::size_t>(p)];
        v = p;
      }
      return v;
    };
    for (const Link& l : links)
      if (!removed(l.from) && !removed(l.to)) parent[static_cast<std::size_t>(find(l.from))] = find(l.to);
    // A domain stays whole even where its NVLink runs through a switch taken out (an explicit
    // topology may say so): a union of parts is still cut off by the links to the tier above.
    for (const auto& gpus_of_domain : domain_gpus)
      for (const GpuId g : gpus_of_domain)
        parent[static_cast<std::size_t>(find(gpu_devices[static_cast<std::size_t>(g)]))] =
            find(gpu_devices[static_cast<std::size_t>(gpus_of_domain[0])]);

    // Groups in order of their first domain.
    std::vector<std::int32_t> group_of(n, -1);  // per part's root
    const std::size_t first = fabric_groups.size();
    for (std::size_t k = 0; k < domain_gpus.size(); ++k) {
      const auto root = static_cast<std::size_t>(find(gpu_devices[static_cast<std::size_t>(domain_gpus[k][0])]));
      if (group_of[root] < 0) {
        group_of[root] = static_cast<std::int32_t>(fabric_groups.size() - first);
        fabric_groups.push_back({above, group_of[root], {}, 0, {}, {}});
      }
      auto& g = fabric_groups[first + static_cast<std::size_t>(group_of[root])];
      g.domains.push_back(static_cast<std::int32_t>(k));
      g.gpus += static_cast<std::int32_t>(domain_gpus[k].size());
    }
    if (fabric_groups.size() - first < 2) {
      fabric_groups.resize(first);  // one part holds every GPU: no cut
      continue;
    }
    auto group = [&](DeviceId v) -> FabricGroup* {
      if (removed(v)) return nullptr;
      const auto i = group_of[static_cast<std::size_t>(find(v))];
      return i < 0 ? nullptr : &fabric_groups[first + static_cast<std::size_t>(i)];
    };
    for (const Link& l : links) {
      FabricGroup* from = group(l.from);
      FabricGroup* to = group(l.to);
      if (from == to) continue;  // inside one part, or between removed switches
      if (to) to->ingress.value += l.bandwidth.value;
      if (from) from->egress.value += l.bandwidth.value;
    }
  }
}

}  // namespace reshard::model::detail

namespace reshard::model {

const char* kind_name(const FabricGroup& g) { return g.above == DeviceKind::Core ? "pod" : "leaf group"; }

std::string to_string(const FabricGroup& g) {
  return std::string(kind_name(g)) + " " + std::to_string(g.index) + ": " + std::to_string(g.gpus) + " GPUs";
}

const std::vector<FabricGroup>& Topology::fabric_groups() const { return impl_->d.fabric_groups; }

std::optional<HostLink> Topology::host_link(GpuId g) const {
  const auto& d = impl_->d;
  const auto i = d.checked_gpu(g);
  if (d.gpu_nic[i] < 0) return std::nullopt;
  return HostLink{d.host_kind[i], BytesPerSecond{d.host_bw[i]}};
}

BytesPerSecond Topology::gpu_network_bandwidth(GpuId g) const {
  const auto h = host_link(g);
  if (!h) return BytesPerSecond{0};
  return BytesPerSecond{std::min(gpu_nic_bandwidth(g).value, h->bandwidth.value)};
}

BytesPerSecond Topology::domain_network_capacity(std::int32_t domain, CutDirection dir) const {
  const auto& d = impl_->d;
  const auto k = d.checked_domain(domain);
  return BytesPerSecond{dir == CutDirection::Ingress ? d.domain_in_cap[k] : d.domain_out_cap[k]};
}

NetworkCut Topology::domain_network_cut(std::int32_t domain, CutDirection dir) const {
  return impl_->d.domain_cut(domain, dir, false);
}

NetworkCut Topology::search_domain_network_cut(std::int32_t domain, CutDirection dir) const {
  return impl_->d.domain_cut(domain, dir, true);
}

const std::vector<std::string>& Topology::warnings() const { return impl_->d.warnings; }

}  // namespace reshard::model
