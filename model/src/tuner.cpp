#include "reshard/model/tuner.hpp"

#include <algorithm>

namespace reshard::model {

namespace {
bool same(const StrategyParams& a, const StrategyParams& b) {
  if (a.strategy == "direct" && b.strategy == "direct") return true;  // direct has no parameters
  return a.strategy == b.strategy && a.chunks == b.chunks && a.max_chain == b.max_chain &&
         a.relay_ingress == b.relay_ingress && a.relay_egress == b.relay_egress && a.rail_aligned_ingress == b.rail_aligned_ingress &&
         a.bucket == b.bucket;
}
}  // namespace

TuneResult tune(const TransferSet& ts, const Inventory& inv, const ShardMap& src, const ShardMap& dst,
                const Topology& topo, const CostParams& cost, const TuneOptions& options) {
  TuneResult result;
  result.evaluated = options.seeds;
  std::int32_t built = 0;
  std::int64_t operations = 0;
  auto evaluate = [&](const StrategyParams& p) -> const TuneCandidate* {
    for (const auto& c : result.evaluated)
      if (same(c.params, p)) return &c;
    // The four starting points always run, whatever the budgets.
    if (built >= 4 && (built >= options.budget || operations >= options.operation_budget)) return nullptr;
    const Schedule s = build_schedule(ts, inv, src, dst, topo, p);
    ++built;
    operations += static_cast<std::int64_t>(s.ops.size());
    result.evaluated.push_back({s.params, estimate(s, ts, inv, topo, cost), std::nullopt});
    if (options.progress) options.progress(p, result.evaluated.back().prediction);
    return &result.evaluated.back();
  };
  std::vector<StrategyParams> starts;
  for (const auto& c : options.seeds) starts.push_back(c.params);
  for (const char* name : {"domain_chain", "domain_grouped", "hybrid", "direct"}) {
    StrategyParams p;
    p.strategy = name;
    if (evaluate(p)) starts.push_back(p);
  }
  // Coordinate descent moves the parameters of the domain strategies (direct has none).
  std::erase_if(starts, [](const StrategyParams& p) {
    return p.strategy == "gather_broadcast" || p.strategy == "nemo_rl_reshard" || p.strategy == "direct";
  });
  for (std::size_t i = 0; i < starts.size(); ++i)  // drop repeats, keep the first
    for (std::size_t j = starts.size(); j-- > i + 1;)
      if (same(starts[i], starts[j])) starts.erase(starts.begin() + static_cast<std::ptrdiff_t>(j));
  std::sort(starts.begin(), starts.end(), [&](const StrategyParams& a, const StrategyParams& b) {
    return evaluate(a)->prediction.time < evaluate(b)->prediction.time;
  });
  for (std::size_t s = 0; s < 2 && s < starts.size(); ++s) {
    StrategyParams cur = starts[s];
    Seconds best = evaluate(cur)->prediction.time;
    auto try_move = [&](StrategyParams next) {
      const auto* c = evaluate(next);
      if (c && c->prediction.time < best) {
        best = c->prediction.time;
        cur = next;
      }
    };
    for (int chunks : {1, 2, 4, 8, 16}) {
      if (cur.strategy == "direct") break;  // direct sends whole buffers
      StrategyParams n = cur;
      n.chunks = chunks;
      try_move(n);
    }
    if (cur.strategy == "domain_chain" || cur.strategy == "hybrid")
      for (int chain : {1, 2, 4, 8, 16, 64}) {
        StrategyParams n = cur;
        n.max_chain = chain;
        try_move(n);
      }
    // Ingress relays stripe every buffer over all GPUs of a domain: operations grow with the
    // domain size (72 on NVL72), so they are tried only where the schedule can afford it.
    constexpr std::int64_t kRelayMaxOperations = 1'000'000;
    const auto* current = evaluate(cur);
    if (cur.strategy != "direct" && current) {
      StrategyParams n = cur;
      if (current->prediction.operations <= kRelayMaxOperations) {
        n.relay_ingress = !n.relay_ingress;
        try_move(n);
      }
      n = cur;
      n.relay_egress = !n.relay_egress;  // one hand-off per part: affordable at any size
      try_move(n);
      n = cur;
      n.rail_aligned_ingress = !n.rail_aligned_ingress;
      try_move(n);
    }
  }
  std::vector<std::size_t> order(result.evaluated.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return result.evaluated[a].prediction.time < result.evaluated[b].prediction.time;
  });
  std::size_t winner = order.front();
  if (options.confirm) {
    std::optional<Seconds> best;
    for (std::size_t k = 0; k < order.size() && k < static_cast<std::size_t>(options.confirm_top); ++k) {
      auto& c = result.evaluated[order[k]];
      c.confirmed = options.confirm(build_schedule(ts, inv, src, dst, topo, c.params));
      if (!best || *c.confirmed < *best) {
        best = c.confirmed;
        winner = order[k];
      }
    }
  }
  result.best = result.evaluated[winner];
  return result;
}

}  // namespace reshard::model
