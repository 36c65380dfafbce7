// Achievable refit times built from a transfer set alone (no strategy, estimate or simulator), to
// hold the planner's lower bound against: a lower bound must never exceed any of them.
//
// A constructed schedule is a list of transfers (from GPU, to GPU, bytes), each over its route
// with its bytes split evenly over the route's paths (ECMP), as the topology routes it. Run all at
// once, each at the constant rate bytes / T, they fit every link as long as
//   T >= max over links e of load(e) / bandwidth(e),   load(e) = the bytes crossing e,
// so that T is achievable in the fluid link model the bound is stated in (a relayed stripe is
// forwarded as it arrives; latencies are left out, as the bound leaves them out).
//
// Policies (each a valid schedule; the achievable time is the best of them):
//   direct        every needer GPU gets each piece it lacks straight from one holder: a holder in
//                 its own NVLink domain when there is one, else the holders in turn;
//   striped       a piece a destination domain lacks enters it once, cut into stripes, one per GPU
//                 of the domain with a network path (sized by its usable network bandwidth
//                 min(NIC, host link)), sent by the holders in turn; each stripe is then forwarded
//                 on to every needer of the domain;
//   striped_relay the same, with each stripe first handed over, inside the sender's domain, to the
//                 GPU whose NIC sends it (the GPUs of the sender's domain with a NIC, in turn).
#pragma once

#include <algorithm>
#include <map>
#include <vector>

#include "reshard/model/planner.hpp"
#include "reshard/model/topology.hpp"

namespace reshard::testing {

using namespace reshard::model;

class LinkLoads {
 public:
  explicit LinkLoads(const Topology& t) : topo_(t), load_(static_cast<std::size_t>(t.link_count()), 0.0) {}

  void send(GpuId from, GpuId to, double bytes) {
    if (from == to || bytes <= 0) return;
    const Route r = topo_.route(from, to);
    const double share = bytes / static_cast<double>(r.paths.size());
    for (const auto& p : r.paths)
      for (LinkId l : p.links) load_[static_cast<std::size_t>(l)] += share;
  }
  // max over links of load / bandwidth: the time of running every transfer at once.
  double time() const {
    double t = 0;
    for (std::size_t l = 0; l < load_.size(); ++l)
      t = std::max(t, load_[l] / topo_.link(static_cast<LinkId>(l)).bandwidth.value);
    return t;
  }

 private:
  const Topology& topo_;
  std::vector<double> load_;
};

enum class Policy { Direct, Striped, StripedRelay };

inline std::vector<GpuId> set_gpus(const ShardMap& m, RankSetId s) {
  std::vector<GpuId> g;
  m.rank_set(s).for_each([&](Rank r) { g.push_back(m.gpu_of(r)); });
  std::sort(g.begin(), g.end());
  g.erase(std::unique(g.begin(), g.end()), g.end());
  return g;
}

// GPUs of a domain that reach the network through a NIC of their own, with their usable bandwidth
// as weights; all the domain's GPUs with equal weights when none has one.
inline std::vector<std::pair<GpuId, double>> network_gpus(const Topology& t, std::int32_t domain) {
  std::vector<std::pair<GpuId, double>> out;
  double total = 0;
  for (GpuId g : t.gpus_in_domain(domain))
    if (const double bw = t.gpu_network_bandwidth(g).value; bw > 0) {
      out.emplace_back(g, bw);
      total += bw;
    }
  if (out.empty()) {
    for (GpuId g : t.gpus_in_domain(domain)) out.emplace_back(g, 1.0);
    total = static_cast<double>(out.size());
  }
  for (auto& [g, w] : out) w /= total;
  return out;
}

inline double constructed_time(const TransferSet& ts, const ShardMap& src, const ShardMap& dst, const Topology& topo,
                               Policy policy) {
  LinkLoads loads(topo);
  std::size_t turn = 0, relay = 0;  // rotate senders and relays over pieces and stripes
  std::map<std::int32_t, std::vector<std::pair<GpuId, double>>> ports;
  auto ports_of = [&](std::int32_t d) -> const std::vector<std::pair<GpuId, double>>& {
    auto it = ports.find(d);
    if (it == ports.end()) it = ports.emplace(d, network_gpus(topo, d)).first;
    return it->second;
  };
  for (const auto& p : ts.pieces) {
    const auto holders = set_gpus(src, p.holders);
    const double b = p.bytes.as_double();
    std::map<std::int32_t, std::vector<GpuId>> lacking;  // domain -> needer GPUs without the piece
    for (GpuId n : set_gpus(dst, p.needers))
      if (!std::binary_search(holders.begin(), holders.end(), n)) lacking[topo.domain_of(n)].push_back(n);
    for (const auto& [domain, needers] : lacking) {
      const auto local = std::find_if(holders.begin(), holders.end(), [&, domain = domain](GpuId h) { return topo.domain_of(h) == domain; });
      if (local != holders.end()) {  // the domain holds it: NVLink (or the domain's own links) only
        for (GpuId n : needers) loads.send(*local, n, b);
        continue;
      }
      if (policy == Policy::Direct) {
        for (GpuId n : needers) loads.send(holders[turn++ % holders.size()], n, b);
        continue;
      }
      for (const auto& [in, share] : ports_of(domain)) {
        const GpuId h = holders[turn++ % holders.size()];
        const double stripe = b * share;
        if (policy == Policy::StripedRelay) {
          const auto& outs = ports_of(topo.domain_of(h));
          const GpuId out = outs[relay++ % outs.size()].first;
          loads.send(h, out, stripe);
          loads.send(out, in, stripe);
        } else {
          loads.send(h, in, stripe);
        }
        for (GpuId n : needers) loads.send(in, n, stripe);
      }
    }
  }
  return loads.time();
}

// The best of the three policies.
inline double achievable_time(const TransferSet& ts, const ShardMap& src, const ShardMap& dst, const Topology& topo) {
  double best = constructed_time(ts, src, dst, topo, Policy::Direct);
  best = std::min(best, constructed_time(ts, src, dst, topo, Policy::Striped));
  best = std::min(best, constructed_time(ts, src, dst, topo, Policy::StripedRelay));
  return best;
}

}  // namespace reshard::testing
