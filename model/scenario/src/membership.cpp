#include "reshard/model/membership.hpp"

#include <algorithm>

#include "reshard/model/checked.hpp"

namespace reshard::model {

std::int32_t serving_unit_ranks(const LayoutSpec& spec, std::int32_t world) {
  if (const auto* v = std::get_if<VllmSpec>(&spec.spec)) {
    if (v->dp_mode == VllmDpMode::DataParallel) return world;
    const std::int32_t ep = v->expert_parallel_size();
    return (ep > 0 ? ep : v->tp) * v->pp;
  }
  if (const auto* s = std::get_if<SglangSpec>(&spec.spec)) return s->server_world();
  return world;
}

std::vector<GpuId> parse_lost_gpus(const std::string& text, const std::string& option) {
  try {
    return parse_gpu_list(text);
  } catch (const std::invalid_argument& e) {
    throw ConfigError(option, 0, text, std::string("expected GPU indices like 0-7,12: ") + e.what());
  }
}

namespace {

// The ranks of `map` on a GPU `lost` (sorted) lists, in order.
std::vector<Rank> ranks_on(const ShardMap& map, const std::vector<GpuId>& lost) {
  std::vector<Rank> out;
  for (Rank r = 0; r < map.world_size(); ++r)
    if (std::binary_search(lost.begin(), lost.end(), map.gpu_of(r))) out.push_back(r);
  return out;
}

std::vector<GpuId> lost_in(const std::vector<GpuId>& lost, const std::vector<GpuId>& side) {
  std::vector<GpuId> sorted = side, out;
  std::sort(sorted.begin(), sorted.end());
  std::set_intersection(lost.begin(), lost.end(), sorted.begin(), sorted.end(), std::back_inserter(out));
  return out;
}

}  // namespace

Survivors survivors(const LoadedScenario& sc, std::vector<GpuId> lost, const std::string& option, const std::string& value) {
  std::sort(lost.begin(), lost.end());
  lost.erase(std::unique(lost.begin(), lost.end()), lost.end());
  const std::string text = value.empty() ? gpu_ranges(lost) : value;
  if (lost.empty()) throw ConfigError(option, 0, text, "expected at least one GPU");
  const std::int32_t gpus = sc.topology.gpu_count();
  if (lost.back() >= gpus)
    throw ConfigError(option, 0, text, "GPU " + std::to_string(lost.back()) + " is not in topology " +
                                           checked::quote(sc.topology.name()) + ", which has GPUs 0-" + std::to_string(gpus - 1));
  MembershipChange c;
  c.lost = lost;
  c.lost_source = lost_in(lost, sc.source.gpus());
  c.lost_destination = lost_in(lost, sc.destination.gpus());
  for (GpuId g : lost)
    if (!std::binary_search(c.lost_source.begin(), c.lost_source.end(), g) &&
        !std::binary_search(c.lost_destination.begin(), c.lost_destination.end(), g))
      throw ConfigError(option, 0, text, "GPU " + std::to_string(g) + " is in neither layout (source GPUs " +
                                             gpu_ranges(sc.source.gpus()) + "; destination GPUs " +
                                             gpu_ranges(sc.destination.gpus()) + ")");

  // The destination: a serving unit with a lost GPU needs nothing any more.
  const std::int32_t world = sc.destination.world_size();
  c.unit_ranks = serving_unit_ranks(sc.scenario.destination, world);
  const std::vector<Rank> dst_lost = ranks_on(sc.destination, lost);
  std::vector<Rank> dst_out;  // every rank of a unit with a lost rank
  for (std::int32_t u = 0; u * c.unit_ranks < world; ++u) {
    const Rank first = u * c.unit_ranks, last = std::min(first + c.unit_ranks, world);
    const auto hit = std::lower_bound(dst_lost.begin(), dst_lost.end(), first);
    const bool whole = hit == dst_lost.end() || *hit >= last;
    (whole ? c.served : c.dropped).push_back(u);
    if (!whole)
      for (Rank r = first; r < last; ++r) dst_out.push_back(r);
  }
  if (c.served.empty())
    throw PlanError(option + " " + text + ": every destination serving unit (" + std::to_string(c.units()) + " of " +
                    std::to_string(c.unit_ranks) + " ranks each) has a lost GPU; nothing is left to refit");

  // The source: a shard whose every rank is lost is held by no survivor; every surviving unit
  // needs all of every tensor, so its bytes are missing.
  const std::vector<Rank> src_lost = ranks_on(sc.source, lost);
  std::vector<RankSetId> source_sets, destination_sets;
  ShardMap source = sc.source.restricted_to(src_lost, source_sets);
  ShardMap destination = sc.destination.restricted_to(dst_out, destination_sets);
  std::vector<UnheldTensor> unheld;
  Bytes total{0};
  // Per source rank set, how many of its ranks are lost (those that lose none are the most).
  std::vector<std::int64_t> lost_in_set(static_cast<std::size_t>(sc.source.rank_set_count()), 0);
  for (RankSetId id = 0; id < sc.source.rank_set_count(); ++id)
    for (Rank r : src_lost) lost_in_set[static_cast<std::size_t>(id)] += sc.source.rank_set(id).contains(r);
  for (const TensorInfo& t : sc.inventory.tensors()) {
    Bytes bytes{0};
    for (const Shard& sh : sc.source.shards(t.id)) {
      const Bytes b{sh.box.elements() * dtype_size(t.dtype)};
      c.source_bytes_lost += b * lost_in_set[static_cast<std::size_t>(sh.ranks)];
      if (source_sets[static_cast<std::size_t>(sh.ranks)] < 0) bytes += b;
    }
    if (bytes.value == 0) continue;
    unheld.push_back({t.id, t.name, bytes});
    total += bytes;
  }
  if (!unheld.empty()) {
    std::string names;
    constexpr std::size_t kNamed = 6;
    for (std::size_t i = 0; i < std::min(unheld.size(), kNamed); ++i)
      names += (i ? ", " : "") + checked::quote(unheld[i].name) + " " + format(unheld[i].bytes);
    if (unheld.size() > kNamed) names += " and " + std::to_string(unheld.size() - kNamed) + " more";
    const std::size_t count = unheld.size();
    throw UnheldError(option + " " + text + ": no surviving GPU holds " + format(total) + " of " +
                          std::to_string(count) + " tensor(s) the destination needs (every source rank holding them is lost): " + names,
                      std::move(unheld), total);
  }
  return Survivors{std::move(c), std::move(source), std::move(destination), std::move(source_sets), std::move(destination_sets)};
}

}  // namespace reshard::model
