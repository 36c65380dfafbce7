#include "reshard/model/memory.hpp"

#include <algorithm>
#include <map>
#include <tuple>

namespace reshard::model {

std::vector<std::int32_t> op_steps(const Schedule& s, std::int32_t& count) {
  std::vector<std::int32_t> step(s.ops.size(), 0);
  std::vector<std::int64_t> last_on_chain(s.chains.size(), -1);
  count = 0;
  for (std::size_t i = 0; i < s.ops.size(); ++i) {
    const Op& op = s.ops[i];
    for (auto a : s.after_of(op)) step[i] = std::max(step[i], step[static_cast<std::size_t>(a)] + 1);
    if (op.chain >= 0 && static_cast<std::size_t>(op.chain) < s.chains.size()) {
      auto& prev = last_on_chain[static_cast<std::size_t>(op.chain)];
      if (prev >= 0) step[i] = std::max(step[i], step[static_cast<std::size_t>(prev)]);
      prev = static_cast<std::int64_t>(i);
    }
    count = std::max(count, step[i] + 1);
  }
  return step;
}

namespace {

// Whether GPU g receives op o (a transfer's dst, a chain hop's `to`).
bool receives(const Schedule& s, const Op& o, GpuId g) {
  if (o.chain < 0) return o.dst == g;
  const auto& hops = s.chains[static_cast<std::size_t>(o.chain)].hops;
  return std::any_of(hops.begin(), hops.end(), [&](const ChainHop& h) { return h.to == g; });
}

}  // namespace

StagingMemory staging_memory(const Schedule& s) {
  StagingMemory out;
  std::int32_t steps = 0;
  const std::vector<std::int32_t> step = op_steps(s, steps);
  GpuId gpus = 0;
  for (const Op& op : s.ops) gpus = std::max({gpus, op.src + 1, op.dst + 1});
  for (const Chain& c : s.chains)
    for (const ChainHop& h : c.hops) gpus = std::max({gpus, h.from + 1, h.to + 1});
  const auto n = static_cast<std::size_t>(gpus);
  std::vector<std::int64_t> peak(n, 0), live(n, 0), kept(n, 0);
  std::vector<std::int32_t> peak_step(n, -1);

  // Receive regions kept for forwarding: (a, g) -> last(a, g); then as changes of kept(g) by step.
  std::map<std::pair<std::int64_t, GpuId>, std::int32_t> last;
  for (const Op& x : s.ops)
    for (auto a : s.after_of(x)) {
      const Op& in = s.ops[static_cast<std::size_t>(a)];
      if (!receives(s, in, x.src)) continue;
      auto [it, fresh] = last.try_emplace({a, x.src}, step[static_cast<std::size_t>(x.id)]);
      if (!fresh) it->second = std::max(it->second, step[static_cast<std::size_t>(x.id)]);
    }
  std::vector<std::tuple<std::int32_t, GpuId, std::int64_t>> changes;  // (step, GPU, bytes)
  for (const auto& [key, until] : last) {
    const auto a = static_cast<std::size_t>(key.first);
    if (until <= step[a]) continue;
    changes.emplace_back(step[a] + 1, key.second, s.ops[a].bytes.value);
    changes.emplace_back(until + 1, key.second, -s.ops[a].bytes.value);
  }
  std::sort(changes.begin(), changes.end());

  // The ops of each step, in id order.
  std::vector<std::size_t> first(static_cast<std::size_t>(steps) + 1, 0), order(s.ops.size());
  for (auto k : step) ++first[static_cast<std::size_t>(k) + 1];
  for (std::size_t k = 1; k < first.size(); ++k) first[k] += first[k - 1];
  {
    std::vector<std::size_t> at(first.begin(), first.end() - 1);
    for (std::size_t i = 0; i < s.ops.size(); ++i) order[at[static_cast<std::size_t>(step[i])]++] = i;
  }
  std::vector<std::int64_t> chain_max(s.chains.size(), -1);
  std::vector<std::int32_t> chains_here;
  std::vector<GpuId> touched;
  std::vector<char> is_touched(n, 0);
  auto add = [&](GpuId g, std::int64_t bytes) {
    const auto i = static_cast<std::size_t>(g);
    if (!is_touched[i]) touched.push_back(g);
    is_touched[i] = 1;
    live[i] += bytes;
  };
  std::size_t next_change = 0;
  for (std::int32_t k = 0; k < steps; ++k) {
    for (; next_change < changes.size() && std::get<0>(changes[next_change]) <= k; ++next_change)
      kept[static_cast<std::size_t>(std::get<1>(changes[next_change]))] += std::get<2>(changes[next_change]);
    for (std::size_t q = first[static_cast<std::size_t>(k)]; q < first[static_cast<std::size_t>(k) + 1]; ++q) {
      const Op& op = s.ops[order[q]];
      if (op.chain < 0) {
        add(op.src, op.bytes.value);
        add(op.dst, op.bytes.value);
        continue;
      }
      auto& m = chain_max[static_cast<std::size_t>(op.chain)];
      if (m < 0) chains_here.push_back(op.chain);
      m = std::max(m, op.bytes.value);
    }
    for (auto c : chains_here) {
      const std::int64_t bytes = chain_max[static_cast<std::size_t>(c)];
      const auto& hops = s.chains[static_cast<std::size_t>(c)].hops;
      if (!hops.empty()) add(hops.front().from, bytes);
      for (const ChainHop& h : hops) add(h.to, bytes);
      chain_max[static_cast<std::size_t>(c)] = -1;
    }
    chains_here.clear();
    for (GpuId g : touched) {
      const auto i = static_cast<std::size_t>(g);
      if (live[i] + kept[i] > peak[i] || peak_step[i] < 0) {
        peak[i] = live[i] + kept[i];
        peak_step[i] = k;
      }
      live[i] = 0;
      is_touched[i] = 0;
    }
    touched.clear();
  }
  out.per_gpu.reserve(n);
  for (std::size_t g = 0; g < n; ++g) {
    out.per_gpu.push_back(Bytes{peak[g]});
    if (peak_step[g] >= 0 && (out.gpu < 0 || peak[g] > out.peak.value)) {
      out.peak = Bytes{peak[g]};
      out.gpu = static_cast<GpuId>(g);
      out.step = peak_step[g];
    }
  }
  return out;
}

}  // namespace reshard::model
