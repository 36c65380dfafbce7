#include "reshard/model/planner.hpp"

#include <algorithm>
#include <array>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <unordered_map>

#include "reshard/model/errors.hpp"
#include "reshard/model/parallel.hpp"

namespace reshard::model {

namespace {

// Sweep over dimension 0: both sides' shards sorted by start; when a shard starts, it is compared
// with the shards of the other side that are still open (end past its start).
void intersect_tensor(const TensorInfo& info, const std::vector<Shard>& src, const std::vector<Shard>& dst,
                      std::vector<Piece>& out) {
  struct Entry {
    const Shard* shard;
    bool source;
  };
  std::vector<Entry> order;
  order.reserve(src.size() + dst.size());
  for (const auto& s : src) order.push_back({&s, true});
  for (const auto& d : dst) order.push_back({&d, false});
  std::sort(order.begin(), order.end(), [](const Entry& a, const Entry& b) {
    return a.shard->box.dims[0].lo < b.shard->box.dims[0].lo;
  });
  std::vector<const Shard*> open_src, open_dst;
  const std::int64_t es = dtype_size(info.dtype);
  for (const auto& e : order) {
    const std::int64_t lo = e.shard->box.dims[0].lo;
    auto& mine = e.source ? open_src : open_dst;
    auto& other = e.source ? open_dst : open_src;
    std::erase_if(other, [&](const Shard* s) { return s->box.dims[0].hi <= lo; });
    for (const Shard* o : other) {
      Box b = intersect(e.shard->box, o->box);
      const std::int64_t n = b.elements();
      if (n == 0) continue;
      const Shard* s = e.source ? e.shard : o;
      const Shard* d = e.source ? o : e.shard;
      out.push_back({info.id, std::move(b), Bytes{n * es}, s->ranks, d->ranks, n});
    }
    mine.push_back(e.shard);
  }
}

void sort_unique(std::vector<std::int32_t>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}

// Per interned rank set: its GPUs, the sorted distinct NVLink domains of those GPUs and the sorted
// distinct fabric groups (indices into Topology::fabric_groups) holding them.
struct SetGeometry {
  std::vector<GpuId> gpus;
  std::vector<std::int32_t> domains;
  std::vector<std::int32_t> groups;
};
std::vector<SetGeometry> geometry(const ShardMap& map, const Topology& topo,
                                  const std::vector<std::vector<std::int32_t>>& groups_of_domain) {
  std::vector<SetGeometry> g(static_cast<std::size_t>(map.rank_set_count()));
  for (RankSetId s = 0; s < map.rank_set_count(); ++s) {
    auto& sg = g[static_cast<std::size_t>(s)];
    sg.gpus = map.gpus_of(s);
    for (auto gpu : sg.gpus) sg.domains.push_back(topo.domain_of(gpu));
    sort_unique(sg.domains);
    for (auto d : sg.domains)
      for (auto f : groups_of_domain[static_cast<std::size_t>(d)]) sg.groups.push_back(f);
    sort_unique(sg.groups);
  }
  return g;
}

// What a network cut of `gpus` GPUs is made of, for the `where` of a domain or side cut: nothing
// when it is the NIC links alone (the usual case), otherwise the links that bind, e.g.
// ": host links PCIe 64 GB/s per GPU" or ": cut 2 x PCIe 32 GB/s + 3 x network 50 GB/s".
std::string cut_links(const Topology& topo, const std::vector<LinkId>& cut, std::size_t gpus) {
  std::map<std::pair<LinkKind, double>, std::size_t> groups;  // (kind, bandwidth) -> links
  bool host_only = true, network_only = true;
  for (LinkId id : cut) {
    const auto& l = topo.link(id);
    ++groups[{l.kind, l.bandwidth.value}];
    host_only = host_only && (l.kind == LinkKind::PCIe || l.kind == LinkKind::C2C);
    network_only = network_only && l.kind == LinkKind::Network;
  }
  if (network_only) return "";
  if (host_only && groups.size() == 1 && cut.size() == gpus) {
    const auto& [kind, bw] = groups.begin()->first;
    return std::string(": host links ") + to_string(kind) + " " + format(BytesPerSecond{bw}) + " per GPU";
  }
  std::string s = host_only ? ": host links " : ": cut ";
  bool first = true;
  for (const auto& [key, count] : groups) {
    s += (first ? "" : " + ") + std::to_string(count) + " x " + to_string(key.first) + " " +
         format(BytesPerSecond{key.second});
    first = false;
  }
  return s;
}

// The bytes every cut of the lower bound must carry, from one pass over the pieces; each cut below
// divides its own by its capacity.
struct CutDemand {
  std::vector<double> gpu_in, gpu_out;        // per GPU: bytes it must receive / only it holds
  std::vector<double> domain_in, domain_out;  // per NVLink domain: bytes that must enter / only it holds
  std::vector<double> group_in, group_out;    // per fabric group (Topology::fabric_groups)
  double side_out = 0;                        // bytes that must leave the source side
  std::vector<char> in_source_side;           // per domain: does it hold a source GPU?
};

CutDemand cut_demand(const TransferSet& ts, const ShardMap& src, const ShardMap& dst, const Topology& topo) {
  const auto domains = static_cast<std::size_t>(topo.domain_count());
  const auto gpus = static_cast<std::size_t>(topo.gpu_count());
  // Fabric groups: those of one tier are consecutive and split the domains between them.
  const auto& fabric = topo.fabric_groups();
  std::vector<std::vector<std::int32_t>> groups_of_domain(domains);
  for (std::size_t f = 0; f < fabric.size(); ++f)
    for (auto d : fabric[f].domains)
      groups_of_domain[static_cast<std::size_t>(d)].push_back(static_cast<std::int32_t>(f));
  const auto hg = geometry(src, topo, groups_of_domain);
  const auto ng = geometry(dst, topo, groups_of_domain);
  // The tier of group f: a sorted group list holds a tier's groups next to each other.
  auto tier_of = [&](std::int32_t f) { return fabric[static_cast<std::size_t>(f)].above; };

  CutDemand c;
  // The source side: the union of the domains holding source GPUs.
  c.in_source_side.assign(domains, 0);
  for (auto g : src.gpus()) c.in_source_side[static_cast<std::size_t>(topo.domain_of(g))] = 1;

  c.gpu_in.assign(gpus, 0);
  c.domain_in.assign(domains, 0);
  c.domain_out.assign(domains, 0);
  c.gpu_out.assign(gpus, 0);
  c.group_in.assign(fabric.size(), 0);
  c.group_out.assign(fabric.size(), 0);
  // Per needer set: does it reach outside the source side?
  std::vector<int> leaves_side(ng.size(), -1);
  // Per (holders, needers): bytes for each needer GPU that is not a holder GPU.
  std::map<std::pair<RankSetId, RankSetId>, double> per_pair;
  for (const auto& p : ts.pieces) {
    const auto& h = hg[static_cast<std::size_t>(p.holders)];
    const auto& n = ng[static_cast<std::size_t>(p.needers)];
    const double b = p.bytes.as_double();
    per_pair[{p.holders, p.needers}] += b;
    for (auto d : n.domains)
      if (!std::binary_search(h.domains.begin(), h.domains.end(), d)) c.domain_in[static_cast<std::size_t>(d)] += b;
    auto& leaves = leaves_side[static_cast<std::size_t>(p.needers)];
    if (leaves < 0) {
      leaves = 0;
      for (auto d : n.domains)
        if (!c.in_source_side[static_cast<std::size_t>(d)]) leaves = 1;
    }
    if (leaves) c.side_out += b;
    if (h.domains.size() == 1 && (n.domains.size() > 1 || n.domains[0] != h.domains[0]))
      c.domain_out[static_cast<std::size_t>(h.domains[0])] += b;
    if (h.gpus.size() == 1 && (n.gpus.size() > 1 || n.gpus[0] != h.gpus[0]))
      c.gpu_out[static_cast<std::size_t>(h.gpus[0])] += b;
  }
  for (const auto& [key, b] : per_pair) {
    const auto& h = hg[static_cast<std::size_t>(key.first)];
    const auto& n = ng[static_cast<std::size_t>(key.second)];
    for (auto g : n.gpus)
      if (!std::binary_search(h.gpus.begin(), h.gpus.end(), g)) c.gpu_in[static_cast<std::size_t>(g)] += b;
    // Fabric groups: needed inside a group that holds none of it (enters it once); held only
    // inside one group of a tier and needed in another group of that tier (leaves it once).
    for (auto f : n.groups)
      if (!std::binary_search(h.groups.begin(), h.groups.end(), f)) c.group_in[static_cast<std::size_t>(f)] += b;
    for (std::size_t i = 0; i < h.groups.size(); ++i) {
      const auto f = h.groups[i];
      const bool alone = (i == 0 || tier_of(h.groups[i - 1]) != tier_of(f)) &&
                         (i + 1 == h.groups.size() || tier_of(h.groups[i + 1]) != tier_of(f));
      if (alone && std::any_of(n.groups.begin(), n.groups.end(),
                               [&](std::int32_t o) { return o != f && tier_of(o) == tier_of(f); }))
        c.group_out[static_cast<std::size_t>(f)] += b;
    }
  }
  return c;
}

// The worst instance i of a cut kind (the largest bytes[i] / cap[i]), named by where(i); none when
// no instance carries bytes.
template <typename Where>
std::optional<CutBound> worst_instance(const char* cut, const std::vector<double>& bytes, const std::vector<double>& cap,
                                       Where&& where) {
  double worst = -1;
  std::size_t at = 0;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (bytes[i] <= 0) continue;
    const double t = cap[i] > 0 ? bytes[i] / cap[i] : std::numeric_limits<double>::infinity();
    if (t > worst) {
      worst = t;
      at = i;
    }
  }
  if (worst < 0) return std::nullopt;
  return CutBound{cut, where(at), Bytes{static_cast<std::int64_t>(bytes[at])}, BytesPerSecond{cap[at]}};
}

// GPU cuts: every link into (ingress) or out of the GPU, per GPU.
std::vector<double> gpu_cut_capacity(const Topology& topo, bool ingress) {
  std::vector<double> cap(static_cast<std::size_t>(topo.gpu_count()), 0);
  for (const auto& l : topo.links()) {
    const auto& end = topo.device(ingress ? l.to : l.from);
    if (end.kind == DeviceKind::GPU) cap[static_cast<std::size_t>(end.gpu)] += l.bandwidth.value;
  }
  return cap;
}

// A GPU cut named with its links by kind, "gpu 4: NVLink 450 GB/s + PCIe 64.0 GB/s", so its
// capacity reads as the sum it is.
std::string gpu_cut_name(const Topology& topo, std::size_t g, bool ingress) {
  std::map<LinkKind, double> by_kind;
  for (const auto& l : topo.links()) {
    const auto& end = topo.device(ingress ? l.to : l.from);
    if (end.kind == DeviceKind::GPU && static_cast<std::size_t>(end.gpu) == g) by_kind[l.kind] += l.bandwidth.value;
  }
  std::string links;
  for (const auto& [kind, bw] : by_kind)
    links += (links.empty() ? ": " : " + ") + std::string(to_string(kind)) + " " + format(BytesPerSecond{bw});
  return "gpu " + std::to_string(g) + links;
}

// Domain cuts: the domain's network cut (Topology::domain_network_capacity: per GPU the narrower of
// its NIC link and its host link, or the minimum cut around the domain's host side in an explicit
// topology), per domain.
std::vector<double> domain_cut_capacity(const Topology& topo, CutDirection dir) {
  std::vector<double> cap(static_cast<std::size_t>(topo.domain_count()), 0);
  for (std::size_t d = 0; d < cap.size(); ++d) cap[d] = topo.domain_network_capacity(static_cast<std::int32_t>(d), dir).value;
  return cap;
}

// "domain 9", with the links of its cut when they are not NIC links alone.
std::string domain_cut_name(const Topology& topo, std::size_t d, CutDirection dir) {
  const auto k = static_cast<std::int32_t>(d);
  return "domain " + std::to_string(d) + cut_links(topo, topo.domain_network_cut(k, dir).links, topo.gpus_in_domain(k).size());
}

// The cuts of planner.hpp, one function each.
using CutFunction = std::optional<CutBound> (*)(const CutDemand&, const Topology&);

std::optional<CutBound> dest_gpu_ingress(const CutDemand& c, const Topology& topo) {
  return worst_instance("dest_gpu_ingress", c.gpu_in, gpu_cut_capacity(topo, true),
                        [&](std::size_t g) { return gpu_cut_name(topo, g, true); });
}

std::optional<CutBound> dest_domain_ingress(const CutDemand& c, const Topology& topo) {
  return worst_instance("dest_domain_ingress", c.domain_in, domain_cut_capacity(topo, CutDirection::Ingress),
                        [&](std::size_t d) { return domain_cut_name(topo, d, CutDirection::Ingress); });
}

// The source side: the sum of its domains' egress cuts, whose union is a cut around the side.
std::optional<CutBound> source_egress(const CutDemand& c, const Topology& topo) {
  if (c.side_out <= 0) return std::nullopt;
  double side_net_out = 0;
  std::vector<LinkId> side_cut;
  std::size_t side_gpus = 0;
  for (std::size_t d = 0; d < c.in_source_side.size(); ++d) {
    if (!c.in_source_side[d]) continue;
    const auto k = static_cast<std::int32_t>(d);
    side_net_out += topo.domain_network_capacity(k, CutDirection::Egress).value;
    const auto cut = topo.domain_network_cut(k, CutDirection::Egress);
    side_cut.insert(side_cut.end(), cut.links.begin(), cut.links.end());
    side_gpus += topo.gpus_in_domain(k).size();
  }
  return CutBound{"source_egress", "source side" + cut_links(topo, side_cut, side_gpus),
                  Bytes{static_cast<std::int64_t>(c.side_out)}, BytesPerSecond{side_net_out}};
}

std::optional<CutBound> source_domain_egress(const CutDemand& c, const Topology& topo) {
  return worst_instance("source_domain_egress", c.domain_out, domain_cut_capacity(topo, CutDirection::Egress),
                        [&](std::size_t d) { return domain_cut_name(topo, d, CutDirection::Egress); });
}

std::optional<CutBound> source_gpu_egress(const CutDemand& c, const Topology& topo) {
  return worst_instance("source_gpu_egress", c.gpu_out, gpu_cut_capacity(topo, false),
                        [&](std::size_t g) { return gpu_cut_name(topo, g, false); });
}

// Fabric groups: the links between the group and the switch tier above it.
std::optional<CutBound> dest_fabric_ingress(const CutDemand& c, const Topology& topo) {
  const auto& fabric = topo.fabric_groups();
  std::vector<double> cap;
  for (const auto& f : fabric) cap.push_back(f.ingress.value);
  return worst_instance("dest_fabric_ingress", c.group_in, cap, [&](std::size_t f) { return to_string(fabric[f]); });
}

std::optional<CutBound> source_fabric_egress(const CutDemand& c, const Topology& topo) {
  const auto& fabric = topo.fabric_groups();
  std::vector<double> cap;
  for (const auto& f : fabric) cap.push_back(f.egress.value);
  return worst_instance("source_fabric_egress", c.group_out, cap, [&](std::size_t f) { return to_string(fabric[f]); });
}

// The byte totals and conversion work of a transfer set's pieces (plan() and restrict_transfers()).
void count_totals(TransferSet& ts, const Inventory& inv, const ShardMap& src, const ShardMap& dst) {
  std::vector<std::int64_t> needer_count(static_cast<std::size_t>(dst.rank_set_count()), -1);
  // Needers that also hold the piece on the same GPU (colocated layouts) need no transfer.
  std::map<std::pair<RankSetId, RankSetId>, std::int64_t> local_holders;
  for (const auto& p : ts.pieces) {
    auto& n = needer_count[static_cast<std::size_t>(p.needers)];
    if (n < 0) n = dst.rank_set(p.needers).size();
    ts.bytes_needed += p.bytes * n;
    auto key = std::make_pair(p.holders, p.needers);
    auto it = local_holders.find(key);
    if (it == local_holders.end()) {
      const std::vector<GpuId> hold = src.gpus_of(p.holders);
      std::int64_t local = 0;
      dst.rank_set(p.needers).for_each([&](Rank r) {
        if (std::binary_search(hold.begin(), hold.end(), dst.gpu_of(r))) ++local;
      });
      it = local_holders.emplace(key, local).first;
    }
    ts.bytes_to_move += p.bytes * (n - it->second);
  }
  ts.conversion = conversion_work(inv, src, dst);
  ts.delta = delta_work(inv, src, dst);
}
}  // namespace

TransferSet plan(const Inventory& inv, const ShardMap& src, const ShardMap& dst, int threads) {
  TransferSet ts;
  ts.logical_bytes = inv.bytes();
  const auto& tensors = inv.tensors();
  // Tensors in blocks, a block's pieces in a list of its own, the lists joined in tensor order.
  constexpr std::size_t kBlock = 64;
  std::vector<std::vector<Piece>> blocks((tensors.size() + kBlock - 1) / kBlock);
  parallel_for(blocks.size(), thread_count(threads), [&](std::size_t b) {
    for (std::size_t k = b * kBlock; k < std::min(tensors.size(), (b + 1) * kBlock); ++k) {
      const auto& t = tensors[k];
      auto& pieces = blocks[b];
      const auto before = pieces.size();
      intersect_tensor(t, src.shards(t.id), dst.shards(t.id), pieces);
      // Exactness: the pieces of each destination shard add up to it (shards of one side are
      // disjoint and cover the tensor, so a shortfall means a destination element nobody holds).
      std::int64_t covered = 0, wanted = 0;
      for (auto i = before; i < pieces.size(); ++i) covered += pieces[i].box.elements();
      for (const auto& d : dst.shards(t.id)) wanted += d.box.elements();
      if (covered != wanted)
        throw PlanError("tensor '" + t.name + "': the source covers " + std::to_string(covered) + " of the " +
                        std::to_string(wanted) + " elements the destination needs");
    }
  });
  std::size_t count = 0;
  for (const auto& b : blocks) count += b.size();
  ts.pieces.reserve(count);
  for (auto& b : blocks) {
    std::move(b.begin(), b.end(), std::back_inserter(ts.pieces));
    std::vector<Piece>().swap(b);
  }
  // A delta refit: each piece's bytes are what it travels as (model/delta.hpp), for the bounds too.
  if (inv.delta().active())
    for (auto& p : ts.pieces) p.bytes = inv.wire_bytes(inv.tensor(p.tensor), p.elements);
  count_totals(ts, inv, src, dst);
  return ts;
}

TransferSet restrict_transfers(const TransferSet& full, const std::vector<RankSetId>& holders,
                               const std::vector<RankSetId>& needers, const Inventory& inv, const ShardMap& src,
                               const ShardMap& dst) {
  TransferSet ts;
  ts.logical_bytes = full.logical_bytes;
  ts.pieces.reserve(full.pieces.size());
  for (const Piece& p : full.pieces) {
    const RankSetId n = needers.at(static_cast<std::size_t>(p.needers));
    if (n < 0) continue;
    const RankSetId h = holders.at(static_cast<std::size_t>(p.holders));
    if (h < 0)
      throw PlanError("tensor '" + inv.tensor(p.tensor).name + "' " + to_string(p.box) + ": no surviving GPU holds it");
    Piece q = p;
    q.holders = h;
    q.needers = n;
    ts.pieces.push_back(std::move(q));
  }
  count_totals(ts, inv, src, dst);
  return ts;
}

GpuTraffic gpu_traffic(const TransferSet& ts, const ShardMap& src, const ShardMap& dst) {
  GpuTraffic g;
  g.dest_received.assign(static_cast<std::size_t>(dst.world_size()), Bytes{0});
  g.source_sent.assign(static_cast<std::size_t>(src.world_size()), Bytes{0});
  // Accumulate per rank set, expand once per set.
  std::vector<double> recv(static_cast<std::size_t>(dst.rank_set_count()), 0);
  std::vector<double> sent(static_cast<std::size_t>(src.rank_set_count()), 0);
  std::vector<std::int64_t> holders(static_cast<std::size_t>(src.rank_set_count()), -1);
  std::vector<std::int64_t> needers(static_cast<std::size_t>(dst.rank_set_count()), -1);
  for (const auto& p : ts.pieces) {
    auto& h = holders[static_cast<std::size_t>(p.holders)];
    if (h < 0) h = src.rank_set(p.holders).size();
    auto& n = needers[static_cast<std::size_t>(p.needers)];
    if (n < 0) n = dst.rank_set(p.needers).size();
    recv[static_cast<std::size_t>(p.needers)] += p.bytes.as_double();
    sent[static_cast<std::size_t>(p.holders)] += p.bytes.as_double() * static_cast<double>(n) / static_cast<double>(h);
  }
  for (RankSetId s = 0; s < dst.rank_set_count(); ++s)
    if (recv[static_cast<std::size_t>(s)] > 0)
      dst.rank_set(s).for_each([&](Rank r) {
        g.dest_received[static_cast<std::size_t>(r)] += Bytes{static_cast<std::int64_t>(recv[static_cast<std::size_t>(s)])};
      });
  for (RankSetId s = 0; s < src.rank_set_count(); ++s)
    if (sent[static_cast<std::size_t>(s)] > 0)
      src.rank_set(s).for_each([&](Rank r) {
        g.source_sent[static_cast<std::size_t>(r)] += Bytes{static_cast<std::int64_t>(sent[static_cast<std::size_t>(s)])};
      });
  return g;
}

LowerBound lower_bound(const TransferSet& ts, const ShardMap& src, const ShardMap& dst, const Topology& topo) {
  const CutDemand demand = cut_demand(ts, src, dst, topo);
  // Fabric cuts last: where one ties with an earlier cut, the earlier one binds (it names the
  // links that bind, host links included).
  constexpr std::array<CutFunction, 7> kCuts{dest_gpu_ingress,     dest_domain_ingress, source_egress,
                                             source_domain_egress, source_gpu_egress,   dest_fabric_ingress,
                                             source_fabric_egress};
  LowerBound lb;
  for (CutFunction cut : kCuts)
    if (auto c = cut(demand, topo)) lb.cuts.push_back(std::move(*c));
  for (const auto& c : lb.cuts) {
    const Seconds t = c.capacity.value > 0 ? c.time() : Seconds{std::numeric_limits<double>::infinity()};
    if (t > lb.time) {
      lb.time = t;
      lb.binding = c;
    }
  }
  return lb;
}

}  // namespace reshard::model
