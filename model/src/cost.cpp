#include "reshard/model/cost.hpp"

#include <Eigen/SparseCore>
#include <algorithm>
#include <limits>

#include "reshard/model/errors.hpp"
#include "yaml_reader.hpp"

namespace reshard::model {

namespace {
// GPU pair -> column of the routing matrix: open addressing with linear probing over a power-of-two
// table kept at most half full (one probe on average; estimate() looks a pair up per operation).
class PairIndex {
 public:
  // The column of (src, dst), or `fresh` (the next column) when the pair is new.
  std::int32_t find_or_add(GpuId src, GpuId dst, std::int32_t fresh, bool& added) {
    if (2 * (used_ + 1) > slots_.size()) grow();
    const std::uint64_t key = (static_cast<std::uint64_t>(static_cast<std::uint32_t>(src)) << 32) | static_cast<std::uint32_t>(dst);
    for (std::size_t i = hash(key);; i = (i + 1) & (slots_.size() - 1)) {
      Slot& sl = slots_[i];
      if (sl.column < 0) {
        sl = {key, fresh};
        ++used_;
        added = true;
        return fresh;
      }
      if (sl.key == key) {
        added = false;
        return sl.column;
      }
    }
  }

 private:
  struct Slot {
    std::uint64_t key = 0;
    std::int32_t column = -1;
  };
  std::size_t hash(std::uint64_t key) const { return static_cast<std::size_t>((key * 0x9e3779b97f4a7c15ull) >> 20) & (slots_.size() - 1); }
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(std::max<std::size_t>(1024, 2 * old.size()), Slot{});
    for (const auto& sl : old)
      if (sl.column >= 0)
        for (std::size_t i = hash(sl.key);; i = (i + 1) & (slots_.size() - 1))
          if (slots_[i].column < 0) {
            slots_[i] = sl;
            break;
          }
  }
  std::vector<Slot> slots_;
  std::size_t used_ = 0;
};
}  // namespace

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
  root.allow_only({"profile", "efficiency", "per_op", "per_tensor", "per_broadcast_tensor", "per_bucket", "per_stage",
                   "ring_chunk"});
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
  if (auto n = root.get("ring_chunk")) {
    p.ring_chunk = n->size_bytes();
    if (p.ring_chunk.value <= 0) n->fail("ring_chunk must be positive");
  }
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
  auto route_info = [&](GpuId a, GpuId b) {
    RouteInfo ri;
    const Route r = topo.route(a, b);
    const double k = static_cast<double>(r.paths.size());
    ri.latency = r.latency.value;
    ri.network = r.kind == LinkKind::Network;
    // Share of the op's bytes on each link: 1/k per path through it (a GPU's NIC link is on all k
    // paths, a spine link on one). Alone on its route the op runs at min over links of cap / share.
    for (const auto& p : r.paths)
      for (auto l : p.links) {
        auto it = std::find_if(ri.shares.begin(), ri.shares.end(), [&](const auto& sh) { return sh.first == l; });
        if (it == ri.shares.end()) ri.shares.push_back({l, 1.0 / k});
        else it->second += 1.0 / k;
      }
    ri.rate = std::numeric_limits<double>::infinity();
    for (const auto& [l, share] : ri.shares) ri.rate = std::min(ri.rate, cap[static_cast<std::size_t>(l)] / share);
    return ri;
  };

  // Link loads = R * b, with R the routing matrix (links x GPU pairs; share 1/k on each of k ECMP
  // paths) and b the bytes each ordered pair exchanges: operations between one pair share a column.
  // One pass over the operations also gives the critical path and what the overheads count.
  PairIndex pair_index;
  std::vector<RouteInfo> pair_route;
  std::vector<double> pair_bytes;
  // finish: when an op's last byte has arrived; first_chunk: when its first ring_chunk has (what a
  // ring hop that follows it waits for).
  std::vector<double> finish(s.ops.size(), 0), first_chunk(s.ops.size(), 0), latency_path(s.ops.size(), 0);
  std::vector<char> buffer_path(s.buffers.size(), 0);  // bit 1: reshard op, bit 2: gather/broadcast op
  std::vector<char> bucket(s.buffers.size(), 0);  // buffers that travel a broadcast ring
  std::vector<char> ring_member(static_cast<std::size_t>(topo.gpu_count()), 0), ring_sender(ring_member);
  for (std::size_t i = 0; i < s.ops.size(); ++i) {
    const auto& op = s.ops[i];
    const bool bcast = op.phase == OpPhase::Broadcast || op.phase == OpPhase::Gather;
    buffer_path[static_cast<std::size_t>(op.buffer)] |= bcast ? 2 : 1;
    if (op.phase == OpPhase::Broadcast) {
      bucket[static_cast<std::size_t>(op.buffer)] = 1;
      ring_member[static_cast<std::size_t>(op.dst)] = 1;
      ring_sender[static_cast<std::size_t>(op.src)] = 1;
    }
    if (op.src == op.dst) continue;
    bool added = false;
    const auto column = static_cast<std::size_t>(
        pair_index.find_or_add(op.src, op.dst, static_cast<std::int32_t>(pair_route.size()), added));
    if (added) {
      pair_route.push_back(route_info(op.src, op.dst));
      pair_bytes.push_back(0);
    }
    const RouteInfo& ri = pair_route[column];
    pair_bytes[column] += op.bytes.as_double();
    (ri.network ? pr.network_bytes : pr.nvlink_bytes) += op.bytes;
    double start = 0, latency_start = 0;
    for (auto a : op.after) {
      start = std::max(start, finish[static_cast<std::size_t>(a)]);
      latency_start = std::max(latency_start, latency_path[static_cast<std::size_t>(a)]);
    }
    const double hop = ri.latency + params.per_op.value, bytes = op.bytes.as_double();
    const double chunk = std::min(bytes, params.ring_chunk.as_double());
    finish[i] = start + hop + bytes / ri.rate;
    first_chunk[i] = start + hop + chunk / ri.rate;
    if (op.phase == OpPhase::Broadcast && op.after.size() == 1) {
      const auto prev = static_cast<std::size_t>(op.after.front());
      const Op& a = s.ops[prev];
      if (a.phase == OpPhase::Broadcast && a.buffer == op.buffer && a.part == op.part && a.dst == op.src) {
        first_chunk[i] = first_chunk[prev] + hop + chunk / ri.rate;
        finish[i] = std::max(first_chunk[prev] + hop + bytes / ri.rate, finish[prev] + chunk / ri.rate);
      }
    }
    latency_path[i] = latency_start + hop;
    pr.critical_path = Seconds{std::max(pr.critical_path.value, finish[i])};
    pr.latency_path = Seconds{std::max(pr.latency_path.value, latency_path[i])};
  }
  std::vector<Eigen::Triplet<double>> triplets;
  for (std::size_t p = 0; p < pair_route.size(); ++p)
    for (const auto& [l, share] : pair_route[p].shares) triplets.emplace_back(l, static_cast<int>(p), share);
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
  for (std::size_t g = 0; g < ring_sender.size(); ++g)
    if (ring_sender[g] && !ring_member[g]) ++pr.broadcast_stages;
  pr.broadcast_buckets = std::count(bucket.begin(), bucket.end(), 1);
  pr.overheads = params.per_tensor * static_cast<double>(pr.reshard_tensors) +
                 params.per_broadcast_tensor * static_cast<double>(pr.broadcast_tensors) +
                 params.per_bucket * static_cast<double>(pr.broadcast_buckets) +
                 params.per_stage * static_cast<double>(pr.broadcast_stages);
  pr.chain_hops = std::max(1, s.chain_hops);
  pr.chain_parts = std::max(1, s.chain_parts);
  const double hops = pr.chain_hops, parts = pr.chain_parts;
  pr.pipeline = pr.bandwidth_bound * ((parts + hops - 1) / parts) + pr.latency_path;
  pr.time = Seconds{std::max(pr.pipeline.value, pr.critical_path.value)} + pr.overheads;
  return pr;
}

}  // namespace reshard::model
