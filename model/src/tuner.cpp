#include "reshard/model/tuner.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>

namespace reshard::model {

namespace {
bool same(const StrategyParams& a, const StrategyParams& b) { return describe(a) == describe(b); }
constexpr int kMaxPasses = 3;
// Where the search starts, with their defaults (the domain strategies and direct).
constexpr Strategy kStartingPoints[] = {Strategy::DomainChain, Strategy::DomainGrouped, Strategy::Hybrid, Strategy::Direct};
// The max_chain values coordinate descent tries (domains per chain).
constexpr int kChainLengths[] = {1, 2, 4, 8, 16, 64};
// Of the ranked starting points, how many coordinate descent starts from.
constexpr std::size_t kDescents = 2;

// a beats b: a clearly faster estimate, or the same within 10^-6 and fewer operations (less to
// run, simulate and execute for nothing).
bool better(const Prediction& a, const Prediction& b) {
  constexpr double kTie = 1e-6;
  if (a.time.value < b.time.value * (1 - kTie)) return true;
  return a.time.value <= b.time.value * (1 + kTie) && a.operations < b.operations;
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
    // The starting points always run, whatever the budgets.
    if (built >= static_cast<std::int32_t>(std::size(kStartingPoints)) && (built >= options.budget || operations >= options.operation_budget)) return nullptr;
    const Schedule s = build_schedule(ts, inv, src, dst, topo, p);
    ++built;
    operations += static_cast<std::int64_t>(s.ops.size());
    result.evaluated.push_back({s.params, estimate(s, ts, inv, topo, cost), std::nullopt});
    if (options.progress) options.progress(p, result.evaluated.back().prediction);
    return &result.evaluated.back();
  };
  std::vector<StrategyParams> starts;
  for (const auto& c : options.seeds) starts.push_back(c.params);
  for (Strategy strategy : kStartingPoints) {
    StrategyParams p;
    p.strategy = strategy;
    if (evaluate(p)) starts.push_back(p);
  }
  // Coordinate descent moves the parameters of the tuned strategies (direct has none).
  std::erase_if(starts, [](const StrategyParams& p) { return !traits(p.strategy).tuned; });
  for (std::size_t i = 0; i < starts.size(); ++i)  // drop repeats, keep the first
    for (std::size_t j = starts.size(); j-- > i + 1;)
      if (same(starts[i], starts[j])) starts.erase(starts.begin() + static_cast<std::ptrdiff_t>(j));
  std::stable_sort(starts.begin(), starts.end(), [&](const StrategyParams& a, const StrategyParams& b) {
    return better(evaluate(a)->prediction, evaluate(b)->prediction);
  });
  for (std::size_t s = 0; s < kDescents && s < starts.size(); ++s) {
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
    // worth changing (a relay changes which chain length balances the NICs).
    for (int pass = 0; moved && pass < kMaxPasses; ++pass) {
      moved = false;
      // The toggles first: balance (relays) decides which chain length pays off.
      StrategyParams n = cur;
      n.relay_ingress = !n.relay_ingress;
      try_move(n);
      n = cur;
      n.relay_egress = !n.relay_egress;
      try_move(n);
      n = cur;
      n.rail_aligned_ingress = !n.rail_aligned_ingress;
      try_move(n);
      if (traits(cur.strategy).max_chain)
        for (int chain : kChainLengths) {
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
    // The estimate's pick stays unless another candidate is confirmed clearly faster (by more than
    // confirm_margin of the pick's confirmed time); then the fastest confirmed one wins.
    std::optional<Seconds> best;
    for (std::size_t k = 0; k < order.size() && k < static_cast<std::size_t>(options.confirm_top); ++k) {
      auto& c = result.evaluated[order[k]];
      c.confirmed = options.confirm(build_schedule(ts, inv, src, dst, topo, c.params));
      const double bar = k == 0 ? INFINITY : best->value * (winner == order.front() ? 1 - options.confirm_margin : 1);
      if (c.confirmed->value < bar) {
        best = c.confirmed;
        winner = order[k];
      }
    }
  }
  result.best = result.evaluated[winner];
  return result;
}

}  // namespace reshard::model
