#include "reshard/exec/staging.hpp"

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

std::vector<StagingRequest> staging_requests(const RunPlan& plan, const std::vector<GpuProgram>& progs,
                                             std::vector<std::vector<std::int64_t>>& request_of) {
  std::vector<StagingRequest> requests;
  request_of.assign(progs.size(), {});
  auto step = [&](std::int64_t op) { return static_cast<std::int64_t>(plan.step_of[static_cast<std::size_t>(op)]); };
  for (std::size_t p = 0; p < progs.size(); ++p) {
    request_of[p].assign(progs[p].regions.size(), -1);
    for (const auto* list : {&progs[p].sends, &progs[p].receives})
      for (const OpStream& t : *list) {
        request_of[p][static_cast<std::size_t>(t.region)] = static_cast<std::int64_t>(requests.size());
        requests.push_back({progs[p].regions[static_cast<std::size_t>(t.region)].bytes, step(t.op), step(t.op)});
      }
    for (const OpStream& t : progs[p].sends)
      for (const CopyRun& c : t.copies)
        if (const std::int64_t q = request_of[p][static_cast<std::size_t>(c.src)]; q >= 0)
          requests[static_cast<std::size_t>(q)].last = std::max(requests[static_cast<std::size_t>(q)].last, step(t.op));
  }
  return requests;
}

std::vector<std::int64_t> staging_per_program(const std::vector<StagingRequest>& requests,
                                              const std::vector<std::vector<std::int64_t>>& request_of) {
  std::vector<std::int64_t> out(request_of.size(), 0);
  for (std::size_t p = 0; p < request_of.size(); ++p) {
    std::map<std::int64_t, std::int64_t> change;  // step -> bytes taken (+) or given back (-)
    for (const auto q : request_of[p]) {
      if (q < 0) continue;
      const StagingRequest& r = requests[static_cast<std::size_t>(q)];
      const std::int64_t size = (r.bytes + 255) / 256 * 256;
      change[r.first] += size;
      change[r.last + 1] -= size;
    }
    std::int64_t now = 0;
    for (const auto& [k, d] : change) out[p] = std::max(out[p], now += d);
  }
  return out;
}

}  // namespace reshard::exec::detail
