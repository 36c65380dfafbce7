#include "staging.hpp"

#include <algorithm>
#include <map>
#include <numeric>

namespace reshard::exec::detail {

StagingPlan plan_staging(const std::vector<StagingRequest>& requests, std::int64_t budget, bool ordered) {
  StagingPlan out;
  out.offset.assign(requests.size(), 0);
  std::vector<std::size_t> order(requests.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return requests[a].first < requests[b].first; });
  std::multimap<std::int64_t, std::pair<std::int64_t, std::int64_t>> live;  // last position -> (offset, size)
  std::map<std::int64_t, std::int64_t> safe;                                // reusable now: offset -> size
  std::vector<std::pair<std::int64_t, std::int64_t>> pending;               // freed, reusable after a fence
  std::int64_t top = 0;
  auto add_safe = [&](std::int64_t off, std::int64_t size) {
    auto next = safe.lower_bound(off);
    if (next != safe.end() && off + size == next->first) {
      size += next->second;
      next = safe.erase(next);
    }
    if (next != safe.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == off) {
        prev->second += size;
        return;
      }
    }
    safe.emplace(off, size);
  };
  auto take = [&](std::int64_t size, std::int64_t& off) {
    for (auto it = safe.begin(); it != safe.end(); ++it)
      if (it->second >= size) {
        off = it->first;
        const std::int64_t rest = it->second - size;
        safe.erase(it);
        if (rest > 0) safe.emplace(off + size, rest);
        return true;
      }
    return false;
  };
  for (std::size_t idx : order) {
    const StagingRequest& r = requests[idx];
    while (!live.empty() && live.begin()->first < r.first) {
      const auto [off, size] = live.begin()->second;
      if (ordered) add_safe(off, size);
      else pending.emplace_back(off, size);
      live.erase(live.begin());
    }
    const std::int64_t size = (r.bytes + 255) / 256 * 256;
    if (size == 0) continue;
    std::int64_t off = 0;
    if (!take(size, off)) {
      if (top + size > budget && !pending.empty()) {
        // Every pending region was last used before r.first: after a fence there, it is free.
        if (out.fences.empty() || out.fences.back() != r.first) out.fences.push_back(r.first);
        for (const auto& [o, s] : pending) add_safe(o, s);
        pending.clear();
      }
      if (!take(size, off)) {
        off = top;
        top += size;
      }
    }
    out.offset[idx] = off;
    live.emplace(r.last, std::make_pair(off, size));
  }
  out.bytes = top;
  return out;
}

namespace {

// span(transfer, is_send) -> {first, last}: where the transfer's own op uses its region;
// pack_at(send transfer): where that send packs (reading receive regions of earlier ops).
template <class Span, class PackAt>
std::vector<StagingRequest> requests_of(const std::vector<GpuProgram>& progs, std::vector<std::vector<std::int64_t>>& request_of,
                                        Span&& span, PackAt&& pack_at) {
  std::vector<StagingRequest> requests;
  request_of.assign(progs.size(), {});
  for (std::size_t p = 0; p < progs.size(); ++p) {
    request_of[p].assign(progs[p].regions.size(), -1);
    for (bool send : {true, false})
      for (const Transfer& t : send ? progs[p].sends : progs[p].receives) {
        const auto [first, last] = span(t, send);
        request_of[p][static_cast<std::size_t>(t.region)] = static_cast<std::int64_t>(requests.size());
        requests.push_back({progs[p].regions[static_cast<std::size_t>(t.region)].bytes, first, last});
      }
    for (const Transfer& t : progs[p].sends)
      for (const CopyRun& c : t.copies)
        if (const std::int64_t q = request_of[p][static_cast<std::size_t>(c.src)]; q >= 0)
          requests[static_cast<std::size_t>(q)].last = std::max(requests[static_cast<std::size_t>(q)].last, pack_at(t));
  }
  return requests;
}

}  // namespace

std::vector<StagingRequest> staging_requests_by_op(const std::vector<GpuProgram>& progs,
                                                   std::vector<std::vector<std::int64_t>>& request_of) {
  return requests_of(
      progs, request_of, [](const Transfer& t, bool) { return std::make_pair(t.op, t.op); },
      [](const Transfer& t) { return t.op; });
}

std::vector<StagingRequest> staging_requests_in_waves(const RunPlan& plan, const std::vector<GpuProgram>& progs,
                                                      std::vector<std::vector<std::int64_t>>& request_of) {
  const model::Schedule& s = *plan.schedule;
  // The ops these programs take part in, per step, and each step's waves.
  std::vector<char> here(s.ops.size(), 0);
  for (const auto& p : progs)
    for (const auto* list : {&p.sends, &p.receives})
      for (const Transfer& t : *list) here[static_cast<std::size_t>(t.op)] = 1;
  std::vector<std::vector<std::int64_t>> step_ops(static_cast<std::size_t>(plan.steps));
  for (std::size_t i = 0; i < s.ops.size(); ++i)
    if (here[i]) step_ops[static_cast<std::size_t>(plan.step_of[i])].push_back(static_cast<std::int64_t>(i));
  std::vector<std::int64_t> base(s.ops.size(), 0);      // per op: its step's first wave
  std::vector<const ChainWaves*> waves_of(s.ops.size(), nullptr);
  std::vector<StepWaves> steps;
  steps.reserve(step_ops.size());
  std::int64_t first_wave = 0;
  for (const auto& ops : step_ops) {
    steps.push_back(step_waves(s, ops));
    for (auto op : ops) base[static_cast<std::size_t>(op)] = first_wave;
    for (const ChainWaves& cw : steps.back().chains) waves_of[static_cast<std::size_t>(cw.op)] = &cw;
    first_wave += steps.back().waves;
  }
  auto hop_into = [&](const Transfer& t, model::GpuId g) {
    const auto& hops = s.chains[static_cast<std::size_t>(t.chain)].hops;
    for (std::size_t h = 0; h < hops.size(); ++h)
      if (hops[h].to == g) return h;
    return std::size_t{0};
  };
  // The GPU of each transfer: the programs' GPUs, by transfer address.
  std::map<const Transfer*, model::GpuId> gpu_of;
  for (const auto& p : progs)
    for (const auto* list : {&p.sends, &p.receives})
      for (const Transfer& t : *list) gpu_of[&t] = p.gpu;
  auto pack_at = [&](const Transfer& t) {
    const auto op = static_cast<std::size_t>(t.op);
    return base[op] + (waves_of[op] ? waves_of[op]->wave_of(0, 0) : 0);
  };
  return requests_of(progs, request_of, [&](const Transfer& t, bool send) {
    const auto op = static_cast<std::size_t>(t.op);
    const ChainWaves* cw = waves_of[op];
    if (!cw) return std::make_pair(base[op], base[op]);
    const std::int64_t last_chunk = std::max<std::int64_t>(cw->chunks - 1, 0);
    if (send) return std::make_pair(base[op] + cw->wave_of(0, 0), base[op] + cw->wave_of(0, last_chunk));
    const std::size_t h = hop_into(t, gpu_of.at(&t));
    return std::make_pair(base[op] + cw->wave_of(h, 0), base[op] + cw->wave_of(h, last_chunk) + (t.children.empty() ? 0 : 1));
  }, pack_at);
}

}  // namespace reshard::exec::detail
