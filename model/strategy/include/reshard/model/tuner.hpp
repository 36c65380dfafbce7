// The `auto` strategy: a deterministic search over strategies and their parameters, scored by the
// analytic estimate, the best few optionally confirmed by a slower judge (the simulator).
//
// Search, within a budget of schedule evaluations:
//   1. the seeds, and every named strategy with its defaults not among them, built here and, like
//      the seeds, not counted against the budgets; taken in strategy order (stable), so `auto` is
//      the same search whether compare passes its rows as seeds or plan and exec run it alone;
//   2. coordinate descent from the best two: relay_ingress, relay_egress and rail_aligned_ingress
//      toggled, then max_chain in {1, 2, 4, 8, 16, 64}, then the chunk in {512 KiB, 2, 8, 32 MiB}
//      (larger chunks: fewer calls for the engine to issue, more staging and fill); a move is kept
//      when it beats the current point (a lower estimate, or an equal one with fewer operations);
//      passes repeat, at most three, until one moves nothing.
//   3. the `confirm` judge (if given) re-scores the best `confirm_top` candidates; the estimate's
//      pick stays unless another is confirmed faster by more than confirm_margin, and then the
//      lowest confirmed time wins.
// Full ties keep the earlier candidate, so the result depends only on the inputs.
//
// Memory: every candidate is built within the basis's staging budgets (model/memory.hpp); one with
// a GPU over its budget (an operation larger than the budget alone: Prediction::over_budget), or
// over the cap on one GPU's staging (max_staging) when one is given, does not fit and is rejected
// (counted in over_staging): it ranks after every candidate that fits, and among those that do not,
// the one with fewer GPUs over budget, then the one that needs less, ranks first, so the descent
// moves towards fitting points. No candidate fitting is a PlanError naming the least staging
// memory found and its candidate.
//
// Threads: the named strategies are evaluated at once; in coordinate descent, when a candidate
// must be evaluated, the next untried moves of the pass from the same point are evaluated with it
// (up to `threads` at once), speculatively: a result is used, and counted against the budgets,
// only when the sequential search reaches that candidate, so the search, its evaluation order, its
// progress and its result are those of one thread. The confirmations run at once too.
//
// Processes (TuneOptions::processes, e.g. those of `mpirun -np N reshard compare`): every process
// runs the same search; each batch above (the named strategies, the candidates evaluated ahead,
// the confirmations) is spread over them, each process its share on its threads (so up to
// threads x processes candidates are evaluated ahead at once), and the results are exchanged as
// JSON, which holds every value exactly (params, Prediction, a candidate's error with its class),
// so every process continues with the values one process would have computed: the search and its
// result are those of one process with one thread.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "reshard/model/cost.hpp"
#include "reshard/model/progress.hpp"
#include "reshard/model/strategies.hpp"

namespace reshard::model {

class Processes;  // parallel.hpp

// The strategy a command that builds a schedule (`simulate SCENARIO`, `exec SCENARIO`) and the
// Python module (simulate, the refit plan, reshard.torch.Refit) take when none is given: `auto`,
// the tuner's choice under the cost profile. (`plan` builds a schedule only when given a strategy.)
inline constexpr char kDefaultStrategy[] = "auto";

struct TuneCandidate {
  StrategyParams params;
  Prediction prediction;
  std::optional<Seconds> confirmed;
};

struct TuneOptions {
  std::int32_t budget = 40;       // schedule evaluations
  // Work budget: no new schedule is built once the schedules built so far hold this many
  // operations (frontier-scale scenarios have ~10^7 per schedule). Deterministic, unlike a clock.
  std::int64_t operation_budget = 150'000'000;
  // Candidates evaluated elsewhere (e.g. every named strategy in `compare`): ranked with the rest,
  // so the result is never worse than any of them.
  std::vector<TuneCandidate> seeds;
  std::int32_t confirm_top = 3;   // candidates passed to `confirm`
  // A confirmed candidate replaces the estimate's pick only when it is faster than the pick's
  // confirmed time by more than this fraction: closer than that, the two models agree within
  // their tolerance and the estimate's ranking (fewer operations on ties) stands.
  double confirm_margin = 0.05;
  std::function<Seconds(const Schedule&)> confirm;  // e.g. the simulated makespan
  // After each candidate, in evaluation order, from the calling thread: stage "tune", candidates
  // built so far of at most `budget` + the named strategies it built as seeds, "PARAMS: ESTIMATE".
  ProgressFn progress;
  // Threads that build and estimate candidates (and confirm them) at once; 0: one per hardware
  // thread. Each holds one schedule while it works.
  int threads = 0;
  // The most staging memory one GPU may need (`--max-staging`); none: no cap.
  std::optional<Bytes> max_staging;
  // The processes that share the search (each calls tune with the same inputs; above); null: this
  // process alone.
  const Processes* processes = nullptr;
};

struct TuneResult {
  TuneCandidate best;
  std::vector<TuneCandidate> evaluated;  // in evaluation order
  std::int32_t built = 0;  // candidate schedules the search built and estimated (given seeds not among them)
  std::int32_t over_staging = 0;  // evaluated candidates (seeds included) that do not fit (budgets, max_staging)
};

TuneResult tune(const TransferSet& ts, const Inventory& inv, const ShardMap& src, const ShardMap& dst,
                const Topology& topo, const CostParams& cost, const TuneOptions& options = {});
// The same search on a schedule basis shared with other schedules of the plan.
TuneResult tune(const ScheduleBasis& basis, const CostParams& cost, const TuneOptions& options = {});

}  // namespace reshard::model
