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
    // NeMo RL's refit runs in Python: per-tensor name mapping and dtype handling, per-bucket packing
    // and a synchronising broadcast. Fitted by least squares to the four published DGX H100 refit
    // times (docs/calibration.md).
    p.profile = "nemo_rl";
    p.per_tensor = Seconds{60e-6};
    p.per_bucket = Seconds{5e-3};
    return p;
  }
  throw ConfigError("", 0, "profile", "unknown profile '" + name + "'; expected reshard or nemo_rl");
}

CostParams CostParams::load(const std::filesystem::path& path) {
  const auto root = yaml::load_file(path);
  root.allow_only({"profile", "efficiency", "per_op", "per_tensor", "per_bucket"});
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
  if (auto n = root.get("per_bucket")) p.per_bucket = n->duration();
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

  // Routing matrix R (links x operations) times the byte vector.
  std::vector<Eigen::Triplet<double>> triplets;
  Eigen::VectorXd bytes(static_cast<Eigen::Index>(s.ops.size()));
  std::vector<double> finish(s.ops.size(), 0);
  for (std::size_t i = 0; i < s.ops.size(); ++i) {
    const auto& op = s.ops[i];
    bytes[static_cast<Eigen::Index>(i)] = op.bytes.as_double();
    if (op.src == op.dst) continue;
    const auto& ri = route_of(op.src, op.dst);
    for (const auto& [l, share] : ri.shares) triplets.emplace_back(l, static_cast<int>(i), share);
    (ri.network ? pr.network_bytes : pr.nvlink_bytes) += op.bytes;
    double start = 0;
    for (auto a : op.after) start = std::max(start, finish[static_cast<std::size_t>(a)]);
    finish[i] = start + ri.latency + params.per_op.value + op.bytes.as_double() / ri.rate;
    pr.critical_path = Seconds{std::max(pr.critical_path.value, finish[i])};
  }
  Eigen::SparseMatrix<double> R(static_cast<Eigen::Index>(links.size()), static_cast<Eigen::Index>(s.ops.size()));
  R.setFromTriplets(triplets.begin(), triplets.end());
  const Eigen::VectorXd load = R * bytes;
  for (Eigen::Index l = 0; l < load.size(); ++l) {
    const double t = load[l] / cap[static_cast<std::size_t>(l)];
    if (t > pr.bandwidth_bound.value) {
      pr.bandwidth_bound = Seconds{t};
      pr.bottleneck = static_cast<LinkId>(l);
    }
  }
  // Framework overheads: tensors touched, broadcast buckets.
  std::unordered_set<std::int32_t> tensors;
  for (const auto& p : ts.pieces) tensors.insert(p.tensor);
  std::unordered_set<std::int32_t> broadcast_buffers;
  for (const auto& op : s.ops)
    if (op.phase == OpPhase::Broadcast) broadcast_buffers.insert(op.buffer);
  (void)inv;
  pr.overheads = params.per_tensor * static_cast<double>(tensors.size()) +
                 params.per_bucket * static_cast<double>(broadcast_buffers.size());
  pr.time = Seconds{std::max(pr.bandwidth_bound.value, pr.critical_path.value)} + pr.overheads;
  return pr;
}

}  // namespace reshard::model
