#include "reshard/model/cost.hpp"

#include <Eigen/SparseCore>
#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "reshard/model/errors.hpp"
#include "yaml_reader.hpp"

namespace reshard::model {

CostParams CostParams::profile_named(const std::string& name) {
  CostParams p;
  if (name == "reshard") {
    // NVLink: NCCL's usable 20.6 GB/s x 18 links = 371 of 450 GB/s (src/graph/topo.h) -> 0.82.
    // Network: 47 of 50 GB/s measured per NDR NIC (nccl-tests, hardware.md) -> 0.94.
    return p;
  }
  if (name == "nemo_rl") {
    // NeMo RL's refit runs in Python around NCCL: each broadcast bucket is packed, launched and
    // synchronised, and each training PP stage's broadcast group is served in turn. Two parameters,
    // fitted by `reshard calibrate params/nemo_rl-published.csv --profile reshard --fit
    // per_bucket,per_stage` to NVIDIA's four published DGX H100 refit times (params/nemo_rl.yaml,
    // docs/calibration.md): every fitted time within 9.3 % of the measurement
    // (-8.7, +9.2, +6.7, -5.7 %).
    p.profile = "nemo_rl";
    p.per_bucket = Seconds{13.0895e-3};
    p.per_stage = Seconds{77.1878e-3};
    return p;
  }
  throw ConfigError("", 0, "profile", "unknown profile '" + name + "'; expected reshard or nemo_rl");
}

CostParams CostParams::load(const std::filesystem::path& path) {
  const auto root = yaml::load_file(path);
  root.allow_only({"profile", "efficiency", "per_op", "per_tensor", "per_broadcast_tensor", "per_bucket", "per_stage"});
  CostParams p;
  if (auto n = root.get("profile")) p.profile = n->str();
  if (auto e = root.get("efficiency")) {
    e->allow_only({"nvlink", "c2c", "pcie", "network"});
    const char* keys[] = {"nvlink", "c2c", "pcie", "network"};
    for (int k = 0; k < 4; ++k)
      if (auto v = e->get(keys[k])) {
        const double x = v->number();
        if (x <= 0 || x > 1) v->fail("efficiency must be in (0, 1]");
        p.efficiency[k] = x;
      }
  }
  if (auto n = root.get("per_op")) p.per_op = n->duration();
  if (auto n = root.get("per_tensor")) p.per_tensor = n->duration();
  if (auto n = root.get("per_broadcast_tensor")) p.per_broadcast_tensor = n->duration();
  if (auto n = root.get("per_bucket")) p.per_bucket = n->duration();
  if (auto n = root.get("per_stage")) p.per_stage = n->duration();
  return p;
}

Prediction estimate(const Schedule& s, const TransferSet& ts, const Inventory& inv, const Topology& topo,
                    const CostParams& params) {
  Prediction pr;
  pr.operations = static_cast<std::int64_t>(s.ops.size());
  const auto& links = topo.links();
  std::vector<double> cap(links.size());
  for (std::size_t l = 0; l < links.size(); ++l)
    cap[l] = links[l].bandwidth.value * params.efficiency[static_cast<int>(links[l].kind)];

  struct RouteInfo {
    std::vector<std::pair<LinkId, double>> shares;
    double latency = 0, rate = 0;
    bool network = false;
  };
  std::unordered_map<std::int64_t, RouteInfo> routes;
  auto route_of = [&](GpuId a, GpuId b) -> const RouteInfo& {
    const std::int64_t key = (static_cast<std::int64_t>(a) << 32) | static_cast<std::uint32_t>(b);
    auto it = routes.find(key);
    if (it != routes.end()) return it->second;
    RouteInfo ri;
    const Route r = topo.route(a, b);
    const double k = static_cast<double>(r.paths.size());
    ri.latency = r.latency.value;
    ri.network = r.kind == LinkKind::Network;
    ri.rate = std::numeric_limits<double>::infinity();
    for (const auto& p : r.paths) {
      double path_rate = std::numeric_limits<double>::infinity();
      for (auto l : p.links) {
        ri.shares.push_back({l, 1.0 / k});
        path_rate = std::min(path_rate, cap[static_cast<std::size_t>(l)]);
      }
      ri.rate = std::min(ri.rate, path_rate * k);  // k equal paths carry k shares in parallel
    }
    return routes.emplace(key, std::move(ri)).first->second;
  };

  // Link loads = R * b, with R the routing matrix (links x GPU pairs; share 1/k on each of k ECMP
  // paths) and b the bytes each ordered pair exchanges: operations between one pair share a column.
  std::unordered_map<std::int64_t, std::int32_t> pair_index;
  std::vector<const RouteInfo*> pair_route;
  std::vector<double> pair_bytes;
  std::vector<double> finish(s.ops.size(), 0);
  for (std::size_t i = 0; i < s.ops.size(); ++i) {
    const auto& op = s.ops[i];
    if (op.src == op.dst) continue;
    const std::int64_t key = (static_cast<std::int64_t>(op.src) << 32) | static_cast<std::uint32_t>(op.dst);
    auto [it, fresh] = pair_index.try_emplace(key, static_cast<std::int32_t>(pair_route.size()));
    if (fresh) {
      pair_route.push_back(&route_of(op.src, op.dst));
      pair_bytes.push_back(0);
    }
    const RouteInfo& ri = *pair_route[static_cast<std::size_t>(it->second)];
    pair_bytes[static_cast<std::size_t>(it->second)] += op.bytes.as_double();
    (ri.network ? pr.network_bytes : pr.nvlink_bytes) += op.bytes;
    double start = 0;
    for (auto a : op.after) start = std::max(start, finish[static_cast<std::size_t>(a)]);
    finish[i] = start + ri.latency + params.per_op.value + op.bytes.as_double() / ri.rate;
    pr.critical_path = Seconds{std::max(pr.critical_path.value, finish[i])};
  }
  std::vector<Eigen::Triplet<double>> triplets;
  for (std::size_t p = 0; p < pair_route.size(); ++p)
    for (const auto& [l, share] : pair_route[p]->shares) triplets.emplace_back(l, static_cast<int>(p), share);
  Eigen::SparseMatrix<double> R(static_cast<Eigen::Index>(links.size()), static_cast<Eigen::Index>(pair_route.size()));
  R.setFromTriplets(triplets.begin(), triplets.end());
  const Eigen::VectorXd load = R * Eigen::Map<const Eigen::VectorXd>(pair_bytes.data(), static_cast<Eigen::Index>(pair_bytes.size()));
  for (Eigen::Index l = 0; l < load.size(); ++l) {
    const double t = load[l] / cap[static_cast<std::size_t>(l)];
    if (t > pr.bandwidth_bound.value) {
      pr.bandwidth_bound = Seconds{t};
      pr.bottleneck = static_cast<LinkId>(l);
    }
  }
  // Framework overheads: tensors moved by each path, broadcast buckets (each buffer walked once).
  std::vector<char> buffer_path(s.buffers.size(), 0);  // bit 1: reshard op, bit 2: gather/broadcast op
  for (const auto& op : s.ops) {
    const bool bcast = op.phase == OpPhase::Broadcast || op.phase == OpPhase::Gather;
    buffer_path[static_cast<std::size_t>(op.buffer)] |= bcast ? 2 : 1;
  }
  std::vector<char> tensor_path(inv.tensors().size(), 0);
  for (std::size_t b = 0; b < s.buffers.size(); ++b) {
    if (!buffer_path[b]) continue;
    for (const auto& sl : s.buffers[b].slices)
      tensor_path[static_cast<std::size_t>(ts.pieces[static_cast<std::size_t>(sl.piece)].tensor)] |= buffer_path[b];
  }
  for (char t : tensor_path) {
    pr.reshard_tensors += (t & 1) ? 1 : 0;
    pr.broadcast_tensors += (t & 2) ? 1 : 0;
  }
  std::unordered_set<std::int32_t> buckets;
  std::unordered_set<GpuId> ring_members, ring_senders;
  for (const auto& op : s.ops)
    if (op.phase == OpPhase::Broadcast) {
      buckets.insert(op.buffer);
      ring_members.insert(op.dst);
      ring_senders.insert(op.src);
    }
  for (auto g : ring_senders)
    if (!ring_members.count(g)) ++pr.broadcast_stages;
  pr.broadcast_buckets = static_cast<std::int64_t>(buckets.size());
  pr.overheads = params.per_tensor * static_cast<double>(pr.reshard_tensors) +
                 params.per_broadcast_tensor * static_cast<double>(pr.broadcast_tensors) +
                 params.per_bucket * static_cast<double>(pr.broadcast_buckets) +
                 params.per_stage * static_cast<double>(pr.broadcast_stages);
  const double hops = std::max(1, s.chain_hops), parts = std::max(1, s.chain_parts);
  pr.pipeline = pr.bandwidth_bound * ((parts + hops - 1) / parts);
  pr.time = Seconds{std::max(pr.pipeline.value, pr.critical_path.value)} + pr.overheads;
  return pr;
}

}  // namespace reshard::model
