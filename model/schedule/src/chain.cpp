// The pipelined chain on a topology; the math is written on model/chain.hpp.
#include "reshard/model/chain.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <unordered_map>

#include "reshard/model/errors.hpp"

namespace reshard::model {

namespace {
// A value per GPU a chain reaches. Most chains reach a few GPUs (a stripe's ingress and fan-out),
// kept in a list; rings over many GPUs in a table indexed by GPU (a hash map where the chain names
// GPUs outside 0..kMaxGpus, which its checks then refuse).
template <class T>
class ByGpu {
 public:
  explicit ByGpu(const Chain& chain) : small_(chain.hops.size() + 1 <= kListed) {
    if (small_) {
      listed_.reserve(chain.hops.size() + 1);
      return;
    }
    GpuId top = 0;
    for (const ChainHop& h : chain.hops) {
      if (std::min(h.from, h.to) < 0 || std::max(h.from, h.to) >= kMaxGpus) {
        hashed_.emplace();
        return;
      }
      top = std::max({top, h.from, h.to});
    }
    table_.assign(static_cast<std::size_t>(top) + 1, std::nullopt);
  }
  const T* find(GpuId g) const {
    if (small_) {
      for (const auto& [gpu, value] : listed_)
        if (gpu == g) return &value;
      return nullptr;
    }
    if (hashed_) {
      const auto it = hashed_->find(g);
      return it == hashed_->end() ? nullptr : &it->second;
    }
    if (g < 0 || static_cast<std::size_t>(g) >= table_.size()) return nullptr;
    const auto& v = table_[static_cast<std::size_t>(g)];
    return v ? &*v : nullptr;
  }
  void add(GpuId g, T value) {  // g not added before
    if (small_) listed_.push_back({g, value});
    else if (hashed_) hashed_->emplace(g, value);
    else table_[static_cast<std::size_t>(g)] = value;
  }

 private:
  static constexpr std::size_t kListed = 32;
  bool small_;
  std::vector<std::pair<GpuId, T>> listed_;
  std::vector<std::optional<T>> table_;
  std::optional<std::unordered_map<GpuId, T>> hashed_;
};
}  // namespace

std::vector<std::int32_t> chain_depths(const Chain& chain, GpuId root, const std::string& where) {
  if (chain.hops.empty()) throw ScheduleError(where + ": the chain has no hop");
  if (chain.chunk.value <= 0) throw ScheduleError(where + ": the chain's chunk must be positive");
  if (chain.hops.front().from != root)
    throw ScheduleError(where + ": the chain's first hop leaves GPU " + std::to_string(chain.hops.front().from) +
                        ", not its root GPU " + std::to_string(root));
  // Depth by GPU: the root at 0, each `to` one more than its `from`.
  ByGpu<std::int32_t> depth_of(chain);
  depth_of.add(root, 0);
  std::vector<std::int32_t> depths;
  depths.reserve(chain.hops.size());
  for (std::size_t k = 0; k < chain.hops.size(); ++k) {
    const ChainHop& h = chain.hops[k];
    auto hop = [&] {
      return where + ": chain hop " + std::to_string(k) + " (GPU " + std::to_string(h.from) + " -> " + std::to_string(h.to) + ")";
    };
    if (h.path < -1) throw ScheduleError(where + ": chain hop " + std::to_string(k) + ": path must be -1 or a path index");
    const std::int32_t* from = depth_of.find(h.from);
    if (!from) throw ScheduleError(hop() + ": leaves a GPU the chain has not reached yet");
    if (h.from == h.to) throw ScheduleError(hop() + ": stays on one GPU");
    const std::int32_t d = *from + 1;
    if (depth_of.find(h.to)) throw ScheduleError(hop() + ": GPU " + std::to_string(h.to) + " is reached twice");
    depth_of.add(h.to, d);
    depths.push_back(d);
  }
  return depths;
}

namespace {
// The path a hop is pinned to among k equal ones: (a + b) mod k, which spreads the hops between
// one GPU and consecutive GPUs of another node over consecutive paths.
std::size_t pinned_path(GpuId a, GpuId b, std::size_t k) {
  return static_cast<std::size_t>(static_cast<std::int64_t>(a) + b) % k;
}
}  // namespace

ChainRoute chain_route(const Chain& chain, GpuId root, const Topology& topo, const std::string& where,
                       const std::array<Seconds, kLinkKinds>& min_hop_latency) {
  const std::vector<std::int32_t> depths = chain_depths(chain, root, where);
  ChainRoute out;
  std::vector<std::pair<LinkId, std::int32_t>> crossings;
  std::vector<LinkId> path_links;
  // Latency of the path from the root to each GPU reached.
  ByGpu<double> reached(chain);
  reached.add(root, 0.0);
  double slowest = 0, slowest_hop = 0;
  for (std::size_t k = 0; k < chain.hops.size(); ++k) {
    const ChainHop& h = chain.hops[k];
    for (GpuId g : {h.from, h.to})
      if (g < 0 || g >= topo.gpu_count())
        throw ScheduleError(where + ": chain hop " + std::to_string(k) + ": GPU " + std::to_string(g) +
                            " is not in topology " + topo.name() + " (0.." + std::to_string(topo.gpu_count() - 1) + ")");
    const RouteView r = topo.route_view(h.from, h.to);
    if (r.paths == 0)
      throw ScheduleError(where + ": chain hop " + std::to_string(k) + ": no route from GPU " + std::to_string(h.from) +
                          " to GPU " + std::to_string(h.to) + " in topology " + topo.name());
    if (h.path >= r.paths)
      throw ScheduleError(where + ": chain hop " + std::to_string(k) + " names path " + std::to_string(h.path) + " of GPU " +
                          std::to_string(h.from) + " -> " + std::to_string(h.to) + ", which has " +
                          std::to_string(r.paths) + " paths");
    const auto path = h.path >= 0 ? h.path : static_cast<std::int32_t>(pinned_path(h.from, h.to, static_cast<std::size_t>(r.paths)));
    r.path_links(path, path_links);
    for (LinkId l : path_links) crossings.push_back({l, 1});
    (r.kind == LinkKind::Network ? out.network_hops : out.local_hops) += 1;
    const double latency = std::max(r.latency.value, min_hop_latency[static_cast<std::size_t>(r.kind)].value);
    const double at = *reached.find(h.from) + latency;  // chain_depths: reached before, once
    reached.add(h.to, at);
    slowest = std::max(slowest, at);
    slowest_hop = std::max(slowest_hop, latency);
    out.depth = std::max(out.depth, depths[k]);
  }
  std::sort(crossings.begin(), crossings.end());
  for (const auto& [l, one] : crossings) {
    if (!out.links.empty() && out.links.back() == l) {
      ++out.weights.back();
    } else {
      out.links.push_back(l);
      out.weights.push_back(one);
    }
  }
  out.latency = Seconds{slowest};
  out.hop_latency = Seconds{slowest_hop};
  return out;
}

Bytes chain_fill(const Chain& chain, std::int32_t depth, Bytes part_bytes) {
  return std::min(chain.chunk, part_bytes) * std::max<std::int64_t>(0, depth - 1);
}

BytesPerSecond slot_rate(Bytes chunk, std::int32_t slots, Seconds hop_latency) {
  if (!(hop_latency.value > 0)) return BytesPerSecond{std::numeric_limits<double>::infinity()};
  return BytesPerSecond{static_cast<double>(std::max(slots, kMinSlots) - 1) * chunk.as_double() / hop_latency.value};
}

Seconds copy_fill(Bytes chunk, Bytes part_bytes, BytesPerSecond copy_rate) {
  if (!(copy_rate.value > 0)) return Seconds{0};
  return Seconds{2.0 * std::min(chunk, part_bytes).as_double() / copy_rate.value};
}

}  // namespace reshard::model
