// NCCL's ring collectives as chain-op schedules; the model is written on model/collective.hpp.
#include "reshard/model/collective.hpp"

#include <algorithm>
#include <map>

#include "reshard/model/errors.hpp"

namespace reshard::model {

const char* to_string(Collective c) { return c == Collective::Broadcast ? "broadcast" : "all_gather"; }

Collective parse_collective(const std::string& name) {
  if (name == "broadcast") return Collective::Broadcast;
  if (name == "all_gather") return Collective::AllGather;
  throw PlanError("unknown collective '" + name + "'; expected broadcast or all_gather");
}

double bus_bandwidth_factor(Collective c, std::int32_t ranks) {
  return c == Collective::Broadcast ? 1.0 : static_cast<double>(ranks - 1) / static_cast<double>(ranks);
}

Schedule collective_schedule(const CollectiveSpec& spec, const Topology& topo) {
  const auto n = static_cast<std::int32_t>(spec.gpus.size());
  if (n < 2) throw PlanError("a collective needs at least two ranks, got " + std::to_string(n));
  if (spec.size.value <= 0) throw PlanError("the collective's size must be positive");
  if (spec.chunk.value <= 0) throw PlanError("the collective's chunk must be positive");
  if (spec.channels < 1) throw PlanError("a collective needs at least one channel");
  std::vector<GpuId> sorted = spec.gpus;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
    throw PlanError("GPU " + std::to_string(*std::adjacent_find(sorted.begin(), sorted.end())) + " appears twice among the ranks");
  if (sorted.front() < 0 || sorted.back() >= topo.gpu_count())
    throw PlanError("GPU " + std::to_string(sorted.front() < 0 ? sorted.front() : sorted.back()) + " is not in topology " +
                    topo.name() + " (0.." + std::to_string(topo.gpu_count() - 1) + ")");
  std::map<std::int32_t, std::vector<GpuId>> domains;
  for (GpuId g : sorted) domains[topo.domain_of(g)].push_back(g);
  // The ring of channel c, as a GPU order.
  auto ring = [&](std::int32_t c) {
    std::vector<GpuId> order;
    std::int32_t k = 0;
    for (const auto& [d, v] : domains) {
      const auto m = static_cast<std::int32_t>(v.size());
      const std::int32_t e = (((c - k) % m) + m) % m;
      for (std::int32_t i = 0; i < m; ++i) order.push_back(v[static_cast<std::size_t>((e + i) % m)]);
      ++k;
    }
    return order;
  };
  Schedule s;
  s.scenario = std::string(to_string(spec.kind)) + " on " + std::to_string(n) + " GPUs of " + topo.name();
  // No named strategy built it: params keep the default strategy and say the chunk and channels.
  s.params.chunk = spec.chunk;
  s.params.channels = spec.channels;
  // Op bytes: part c of C of what a root sends, the parts differing by at most one byte.
  const std::int64_t per_root = spec.kind == Collective::Broadcast ? spec.size.value : spec.size.value / n;
  auto part = [&](std::int32_t c) { return per_root * (c + 1) / spec.channels - per_root * c / spec.channels; };
  for (std::int32_t c = 0; c < spec.channels; ++c) {
    const std::vector<GpuId> order = ring(c);
    for (std::int32_t r = 0; r < n; ++r) {
      if (spec.kind == Collective::Broadcast && r > 0) break;
      const GpuId root = spec.gpus[static_cast<std::size_t>(r)];
      const auto at = static_cast<std::size_t>(std::find(order.begin(), order.end(), root) - order.begin());
      Chain chain;
      chain.chunk = spec.chunk;
      for (std::int32_t h = 0; h + 1 < n; ++h)
        chain.hops.push_back({order[(at + static_cast<std::size_t>(h)) % order.size()],
                              order[(at + static_cast<std::size_t>(h) + 1) % order.size()]});
      s.chains.push_back(std::move(chain));
      s.buffers.push_back({{}, Bytes{part(c)}});
      Op op;
      op.src = root;
      op.dst = s.chains.back().hops.back().to;
      op.chain = static_cast<std::int32_t>(s.chains.size() - 1);
      op.buffer = static_cast<std::int32_t>(s.buffers.size() - 1);
      op.bytes = s.buffers.back().bytes;
      op.phase = OpPhase::Broadcast;
      s.add_op(op, {});
    }
  }
  return s;
}

}  // namespace reshard::model
