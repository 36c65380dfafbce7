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
constexpr int kMaxPasses = 3;

// a beats b: a clearly faster estimate, or the same within 10^-6 and fewer operations (less to
// run, simulate and execute for nothing).
bool better(const Prediction& a, const Prediction& b) {
  constexpr double kTie = 1e-6;
  if (a.time.value < b.time.value * (1 - kTie)) return true;
  return a.time.value <= b.time.value * (1 + kTie) && a.operations < b.operations;
}
// Whether the domain strategy at `current` (cut into `from` parts) could be beaten by the same
// strategy cut into `to` parts, judged without building it. Parts change neither the bytes on any
// link (stripes, senders and ingress GPUs are chosen per stripe, before it is cut) nor the chain
// length nor the overheads, so the candidate's estimate is at least
//     bandwidth_bound * (to + H - 1) / to + overheads;
// when that already exceeds the current estimate, or equals it while `to` means more operations,
// the candidate cannot win and is skipped.
bool chunks_can_beat(const TuneCandidate& current, std::int32_t from, std::int32_t to) {
  const Prediction& p = current.prediction;
  const double hops = p.chain_hops;
  if (hops > 1 && p.chain_parts != from) return true;  // parts set otherwise (a ring chunk): build it
  const double bound = p.bandwidth_bound.value * (to + hops - 1) / to + p.overheads.value;
  constexpr double kTie = 1e-6;
  if (bound > p.time.value * (1 + kTie)) return false;
  return !(bound >= p.time.value * (1 - kTie) && to > from);
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
  std::stable_sort(starts.begin(), starts.end(), [&](const StrategyParams& a, const StrategyParams& b) {
    return better(evaluate(a)->prediction, evaluate(b)->prediction);
  });
  for (std::size_t s = 0; s < 2 && s < starts.size(); ++s) {
    StrategyParams cur = starts[s];
    bool moved = true;
    auto try_move = [&](StrategyParams next) {
      const auto* c = evaluate(next);
      if (c && better(c->prediction, evaluate(cur)->prediction)) {
        cur = next;
        moved = true;
      }
    };
    // Passes over every coordinate until none improves: a move on one coordinate can make another
    // worth changing (more chunks make longer chains affordable).
    for (int pass = 0; moved && pass < kMaxPasses; ++pass) {
      moved = false;
      // The toggles first: balance (relays) decides which chunking and chain length pay off.
      StrategyParams n = cur;
      n.relay_ingress = !n.relay_ingress;
      try_move(n);
      n = cur;
      n.relay_egress = !n.relay_egress;
      try_move(n);
      n = cur;
      n.rail_aligned_ingress = !n.rail_aligned_ingress;
      try_move(n);
      for (int chunks : {1, 2, 4, 8, 16}) {
        StrategyParams n = cur;
        n.chunks = chunks;
        if (!chunks_can_beat(*evaluate(cur), cur.chunks, chunks)) continue;
        try_move(n);
      }
      if (cur.strategy == "domain_chain" || cur.strategy == "hybrid")
        for (int chain : {1, 2, 4, 8, 16, 64}) {
          StrategyParams n = cur;
          n.max_chain = chain;
          try_move(n);
        }
    }
  }
  std::vector<std::size_t> order(result.evaluated.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return better(result.evaluated[a].prediction, result.evaluated[b].prediction);
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
