#include "reshard/model/tuner.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <string>

#include "reshard/model/errors.hpp"
#include "reshard/model/parallel.hpp"

namespace reshard::model {

namespace {
bool same(const StrategyParams& a, const StrategyParams& b) { return describe(a) == describe(b); }
constexpr int kMaxPasses = 3;
// The max_chain values coordinate descent tries (domains per chain).
constexpr int kChainLengths[] = {1, 2, 4, 8, 16, 64};
// The chunk sizes it tries: fewer, larger chunks cut what the engine issues per byte (T_issue,
// model/cost.hpp) and cost staging memory and pipeline fill.
constexpr std::int64_t kChunkSizes[] = {512 << 10, 2 << 20, 8 << 20, 32 << 20};
// Of the ranked starting points, how many coordinate descent starts from.
constexpr std::size_t kDescents = 2;

// Whether a candidate fits: no GPU over its staging budget (Prediction::over_budget), and its peak
// within the cap (TuneOptions::max_staging) when one is given.
bool fits(const Prediction& p, const std::optional<Bytes>& cap) { return p.over_budget == 0 && (!cap || p.staging_peak <= *cap); }

// a beats b: a fits and b does not, or neither fits and a has fewer GPUs over budget, or as many
// and needs less; otherwise a clearly faster estimate, or the same within 10^-6 and fewer
// operations (less to run, simulate and execute for nothing).
bool better(const Prediction& a, const Prediction& b, const std::optional<Bytes>& cap) {
  const bool fa = fits(a, cap), fb = fits(b, cap);
  if (fa != fb) return fa;
  if (!fa) return a.over_budget != b.over_budget ? a.over_budget < b.over_budget : a.staging_peak < b.staging_peak;
  constexpr double kTie = 1e-6;
  if (a.time.value < b.time.value * (1 - kTie)) return true;
  return a.time.value <= b.time.value * (1 + kTie) && a.operations < b.operations;
}

const Processes& processes_of(const TuneOptions& options) { return options.processes ? *options.processes : one_process(); }

// A candidate as it crosses between processes (TuneOptions::processes): its params and prediction.
nlohmann::json candidate_json(const StrategyParams& params, const Prediction& prediction) {
  return {{"params", to_json(params)}, {"prediction", to_json(prediction)}};
}

// The candidate the search returns, by index: the estimate's pick, unless confirmation (options.
// confirm, on the confirm_top best by the estimate, at once) finds another clearly faster; sets
// the confirmed times.
std::size_t choose(std::vector<TuneCandidate>& evaluated, const ScheduleBasis& basis, const TuneOptions& options,
                   int threads) {
  std::vector<std::size_t> order(evaluated.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return better(evaluated[a].prediction, evaluated[b].prediction, options.max_staging);
  });
  // The candidates that do not fit are out; none left is an error.
  if (const auto& least = evaluated[order.front()]; !fits(least.prediction, options.max_staging)) {
    if (least.prediction.over_budget > 0)
      throw PlanError("no candidate schedule fits the staging budgets: the " + std::to_string(evaluated.size()) +
                      " evaluated each have an operation larger than a GPU's budget alone (" + describe(least.params) +
                      ": " + std::to_string(least.prediction.over_budget) + " GPU(s) over, GPU " +
                      std::to_string(least.prediction.staging_gpu) + " needs " + format(least.prediction.staging_peak) +
                      "); raise refit_memory or --max-staging");
    throw PlanError("no candidate schedule fits --max-staging " + format(*options.max_staging) + ": the " +
                    std::to_string(evaluated.size()) + " evaluated need at least " + format(least.prediction.staging_peak) +
                    " of staging memory on one GPU (" + describe(least.params) + ", GPU " +
                    std::to_string(least.prediction.staging_gpu) + ")");
  }
  std::erase_if(order, [&](std::size_t i) { return !fits(evaluated[i].prediction, options.max_staging); });
  std::size_t winner = order.front();
  if (options.confirm) {
    // The estimate's pick stays unless another candidate is confirmed clearly faster (by more than
    // confirm_margin of the pick's confirmed time); then the fastest confirmed one wins.
    const std::size_t top = std::min(order.size(), static_cast<std::size_t>(std::max(0, options.confirm_top)));
    parallel_for(
        processes_of(options), top, threads,
        [&](std::size_t k) {
          auto& c = evaluated[order[k]];
          c.confirmed = options.confirm(build_schedule(basis, c.params));
        },
        [&](std::size_t k) { return time_json(*evaluated[order[k]].confirmed); },
        [&](std::size_t k, const nlohmann::json& j) { evaluated[order[k]].confirmed = time_from_json(j); });
    std::optional<Seconds> best;
    for (std::size_t k = 0; k < top; ++k) {
      const auto& c = evaluated[order[k]];
      const double bar = k == 0 ? INFINITY : best->value * (winner == order.front() ? 1 - options.confirm_margin : 1);
      if (c.confirmed->value < bar) {
        best = c.confirmed;
        winner = order[k];
      }
    }
  }
  return winner;
}

// Adds to `evaluated` every named strategy at its defaults that is not among it, built and
// estimated at once (one that does not build on this plan is left out), then orders `evaluated` by
// strategy (stable), reporting each one built as a "tune" step. Returns how many it built.
std::int32_t add_named_seeds(std::vector<TuneCandidate>& evaluated, const ScheduleBasis& basis, const CostParams& cost,
                             const TuneOptions& options, int threads) {
  std::vector<StrategyParams> missing;
  for (Strategy strategy : all_strategies()) {
    StrategyParams p;
    p.strategy = strategy;
    if (std::none_of(evaluated.begin(), evaluated.end(), [&](const TuneCandidate& c) { return same(c.params, p); }))
      missing.push_back(p);
  }
  std::vector<std::optional<TuneCandidate>> built(missing.size());
  parallel_for(
      processes_of(options), missing.size(), threads,
      [&](std::size_t i) {
        try {
          const Schedule s = build_schedule(basis, missing[i]);
          built[i] = TuneCandidate{s.params, estimate(s, basis.transfers(), basis.inventory(), basis.topology(), cost), std::nullopt};
        } catch (const Error&) {
        }
      },
      [&](std::size_t i) { return built[i] ? candidate_json(built[i]->params, built[i]->prediction) : nlohmann::json(); },
      [&](std::size_t i, const nlohmann::json& j) {
        if (!j.is_null())
          built[i] = TuneCandidate{strategy_params_from_json(j.at("params")), prediction_from_json(j.at("prediction")), std::nullopt};
      });
  const auto count = static_cast<std::int32_t>(std::count_if(built.begin(), built.end(), [](const auto& c) { return c.has_value(); }));
  std::int32_t done = 0;
  for (auto& c : built)
    if (c) {
      if (options.progress)
        options.progress({"tune", ++done, options.budget + count, describe(c->params) + ": " + format(c->prediction.time)});
      evaluated.push_back(std::move(*c));
    }
  std::stable_sort(evaluated.begin(), evaluated.end(),
                   [](const TuneCandidate& a, const TuneCandidate& b) { return a.params.strategy < b.params.strategy; });
  return count;
}

}  // namespace

TuneResult tune(const TransferSet& ts, const Inventory& inv, const ShardMap& src, const ShardMap& dst,
                const Topology& topo, const CostParams& cost, const TuneOptions& options) {
  return tune(ScheduleBasis(ts, inv, src, dst, topo), cost, options);
}

// Stays whole: the starting points, the descent and the evaluations ahead of it share the
// candidates evaluated so far, those evaluated ahead and the budgets' counters, which the lambdas
// below read and update; split, each phase would take all of them.
TuneResult tune(const ScheduleBasis& basis, const CostParams& cost, const TuneOptions& options) {
  const int threads = thread_count(options.threads);
  const int workers = threads * processes_of(options).size();  // candidates evaluated at once
  TuneResult result;
  result.evaluated = options.seeds;
  // Seeds this search built itself: counted as built, not against the budgets (as given seeds).
  const std::int32_t seeded = add_named_seeds(result.evaluated, basis, cost, options, threads);
  result.built = seeded;
  std::int64_t operations = 0;
  // Candidates evaluated ahead of the search (speculatively), by description: used, and counted,
  // when the search reaches them; a failure is rethrown then.
  struct Ahead {
    StrategyParams params;
    Prediction prediction;
    std::exception_ptr error;
  };
  std::map<std::string, Ahead> ahead;
  auto known = [&](const StrategyParams& p) -> const TuneCandidate* {
    for (const auto& c : result.evaluated)
      if (same(c.params, p)) return &c;
    return nullptr;
  };
  // Builds and estimates the candidates of `batch` not known yet, at once (one schedule per thread
  // alive at a time).
  auto evaluate_ahead = [&](const std::vector<StrategyParams>& batch) {
    std::vector<StrategyParams> unknown;
    for (const auto& p : batch)
      if (!known(p) && !ahead.contains(describe(p)) &&
          std::none_of(unknown.begin(), unknown.end(), [&](const StrategyParams& q) { return same(p, q); }))
        unknown.push_back(p);
    std::vector<Ahead> done(unknown.size());
    parallel_for(
        processes_of(options), unknown.size(), threads,
        [&](std::size_t i) {
          done[i].params = unknown[i];
          try {
            const Schedule s = build_schedule(basis, unknown[i]);
            done[i].params = s.params;
            done[i].prediction = estimate(s, basis.transfers(), basis.inventory(), basis.topology(), cost);
          } catch (...) {
            done[i].error = std::current_exception();
          }
        },
        [&](std::size_t i) {
          nlohmann::json j = candidate_json(done[i].params, done[i].prediction);
          if (done[i].error) j["error"] = error_json(done[i].error);
          return j;
        },
        [&](std::size_t i, const nlohmann::json& j) {
          done[i] = {strategy_params_from_json(j.at("params")), prediction_from_json(j.at("prediction")),
                     j.contains("error") ? error_from_json(j.at("error")) : nullptr};
        });
    for (std::size_t i = 0; i < unknown.size(); ++i) ahead.emplace(describe(unknown[i]), std::move(done[i]));
  };
  // `upcoming`: the candidates the search tries after p if it moves nothing, evaluated with p.
  auto evaluate = [&](const StrategyParams& p, const std::vector<StrategyParams>& upcoming = {}) -> const TuneCandidate* {
    if (const auto* c = known(p)) return c;
    if (result.built - seeded >= options.budget || operations >= options.operation_budget) return nullptr;
    auto it = ahead.find(describe(p));
    if (it == ahead.end()) {
      // Ahead only as far as the budgets probably reach (the operations of a schedule taken as
      // those of the average one so far): past them the search stops.
      std::vector<StrategyParams> batch{p};
      const std::int64_t per_schedule = result.built > seeded ? operations / (result.built - seeded) : 0;
      for (const auto& q : upcoming)
        if (static_cast<int>(batch.size()) < workers &&
            result.built - seeded + static_cast<std::int32_t>(batch.size()) < options.budget &&
            operations + per_schedule * static_cast<std::int64_t>(batch.size()) < options.operation_budget)
          batch.push_back(q);
      evaluate_ahead(batch);
      it = ahead.find(describe(p));
    }
    const Ahead a = std::move(it->second);
    ahead.erase(it);
    if (a.error) std::rethrow_exception(a.error);
    ++result.built;
    operations += a.prediction.operations;
    result.evaluated.push_back({a.params, a.prediction, std::nullopt});
    if (options.progress)
      options.progress({"tune", result.built, options.budget + seeded, describe(p) + ": " + format(a.prediction.time)});
    return &result.evaluated.back();
  };
  std::vector<StrategyParams> starts;
  for (const auto& c : result.evaluated) starts.push_back(c.params);
  // Coordinate descent moves the parameters of the tuned strategies (direct has none).
  std::erase_if(starts, [](const StrategyParams& p) { return !traits(p.strategy).tuned; });
  for (std::size_t i = 0; i < starts.size(); ++i)  // drop repeats, keep the first
    for (std::size_t j = starts.size(); j-- > i + 1;)
      if (same(starts[i], starts[j])) starts.erase(starts.begin() + static_cast<std::ptrdiff_t>(j));
  std::stable_sort(starts.begin(), starts.end(), [&](const StrategyParams& a, const StrategyParams& b) {
    return better(evaluate(a)->prediction, evaluate(b)->prediction, options.max_staging);
  });
  // The moves of a pass from `cur`, in order: the toggles first (balance, from relays, decides
  // which chain length pays off), then the chain lengths, then the chunk sizes.
  auto moves = [](const StrategyParams& cur) {
    std::vector<StrategyParams> out(3, cur);
    out[0].relay_ingress = !cur.relay_ingress;
    out[1].relay_egress = !cur.relay_egress;
    out[2].rail_aligned_ingress = !cur.rail_aligned_ingress;
    if (traits(cur.strategy).max_chain)
      for (int chain : kChainLengths) {
        out.push_back(cur);
        out.back().max_chain = chain;
      }
    for (std::int64_t chunk : kChunkSizes) {
      out.push_back(cur);
      out.back().chunk = Bytes{chunk};
    }
    return out;
  };
  for (std::size_t s = 0; s < kDescents && s < starts.size(); ++s) {
    StrategyParams cur = starts[s];
    bool moved = true;
    // Passes over every coordinate until none improves: a move on one coordinate can make another
    // worth changing (a relay changes which chain length balances the NICs). Move k of a pass is
    // taken from the point reached so far (a move kept changes `cur`).
    for (int pass = 0; moved && pass < kMaxPasses; ++pass) {
      moved = false;
      const std::size_t count = moves(cur).size();
      for (std::size_t k = 0; k < count; ++k) {
        const std::vector<StrategyParams> next = moves(cur);
        const auto* c = evaluate(next[k], std::vector<StrategyParams>(next.begin() + static_cast<std::ptrdiff_t>(k) + 1, next.end()));
        if (c && better(c->prediction, evaluate(cur)->prediction, options.max_staging)) {
          cur = next[k];
          moved = true;
        }
      }
    }
  }
  for (const auto& c : result.evaluated) result.over_staging += !fits(c.prediction, options.max_staging);
  const std::size_t winner = choose(result.evaluated, basis, options, threads);
  result.best = result.evaluated[winner];
  return result;
}

}  // namespace reshard::model
