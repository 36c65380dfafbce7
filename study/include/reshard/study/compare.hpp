// What if: every strategy on one scenario, estimated (and optionally simulated), with the lower
// bound and the tuner's choice, as one value (`reshard compare` prints it; sweeps collect it).
//
// Per strategy s: estimate_s = model::estimate(schedule(s)).time; simulated_s = the flow-level
// simulation's makespan plus the same overheads (sim::simulate_schedule). What limits a row is the
// estimate's largest term (limited_by) and, when that is bandwidth, the kind of its bottleneck link
// (limit): the GPU <-> NIC host link, the NIC link, a switch-to-switch fabric link or NVLink.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "reshard/model/cost.hpp"
#include "reshard/model/parallel.hpp"
#include "reshard/model/defaults.hpp"
#include "reshard/model/planner.hpp"
#include "reshard/model/progress.hpp"
#include "reshard/model/scenario.hpp"
#include "reshard/model/schedule.hpp"

namespace reshard::study {

struct CompareOptions {
  std::string profile = model::kDefaultProfile;  // implementation profile (model::CostParams::profile_named)
  std::string params_file;                // cost parameters file; replaces the profile when set
  bool simulate = false;                  // simulate every schedule; auto confirms its best by simulation
  bool tune = true;                       // add the tuner's choice as a last row named "auto"
  std::vector<std::string> strategies = model::strategy_names();  // named strategies, in order
  std::vector<std::string> configured;    // configured strategies, as describe() writes them
  // Implementation profiles of other systems (model/systems.hpp) to estimate on the same scenario,
  // each with its own schedule and cost terms: CompareResult::systems. "all": every profile.
  std::vector<std::string> systems;
  // Stages "strategies" (rows estimated, and simulated, of the named and configured strategies,
  // said in row order whatever the threads), "tune" (candidates evaluated of at most
  // TuneOptions::budget) and "confirm" (simulations); called from one thread at a time.
  model::ProgressFn progress;
  // Threads that build, estimate and simulate schedules at once (the named strategies, the tuner's
  // candidates); 0: one per hardware thread. The result is the same for any number.
  int threads = 0;
  // The most staging memory one GPU may hold (`--max-staging`): every schedule is built within the
  // scenario's budgets lowered to it, and the tuner rejects a candidate over it
  // (TuneOptions::max_staging).
  std::optional<model::Bytes> max_staging;
  // The processes that share the work (`mpirun -np N reshard compare`: exec::ProcessGroup), each
  // calling compare with the same scenario and options: process r of N builds, estimates (and
  // simulates) the rows i with i % N == r and the systems' likewise, on its threads, and they
  // share the tuner's batches (model/tuner.hpp); every process returns the whole result, the same
  // as one process's. Null: this process alone.
  const model::Processes* processes = nullptr;
};

struct CompareRow {
  std::string name;  // the strategy's name, a configured strategy's description, or "auto"
  model::StrategyParams params;
  model::Prediction prediction;
  std::optional<model::Seconds> simulated;
  std::string limited_by;  // the estimate's largest term: bandwidth[+fill][+latency], latency, dependencies,
                           // overheads, conversion
  std::string limit;       // bandwidth: "host link", "NIC link", "fabric", "NVLink", "C2C"; else limited_by's term
  std::string bottleneck;  // the most loaded link, "KIND FROM -> TO" ("-": none)
};

struct CompareResult {
  std::string scenario, source, destination, profile;
  model::LowerBound lower_bound;
  std::string lower_bound_limit;  // what forms the binding cut: "host link", "NIC link", "GPU links", "mixed cut"
  std::vector<CompareRow> rows;   // the named strategies, the configured ones, then auto
  // One row per CompareOptions::systems entry, in its order: name is the profile's, params its
  // strategy, prediction its schedule under its cost terms.
  std::vector<CompareRow> systems;
  // The best row: auto when tuned, otherwise the lowest simulated time (with `simulate`) or estimate;
  // ties keep the earlier row.
  std::size_t best = 0;
  // A delta refit (model/delta.hpp): the same rows refit dense (the scenario's inventory without its
  // delta: same strategies, tuner and profile, no systems), in the same order; empty without a delta.
  std::vector<CompareRow> dense;
  std::string delta;  // DeltaSpec::describe() of a delta refit; empty without one
  std::int32_t candidates = 0;  // schedules the tuner built and estimated besides the rows (0: not tuned)
  std::int32_t over_staging = 0;  // candidates and rows the tuner rejected for needing more than max_staging
  // Every GPU's staging budget the schedules were built within (the scenario's, at most
  // max_staging; index GpuId, 0: unbounded), and its smallest and largest over each side's GPUs.
  std::vector<model::Bytes> budget;
  struct SideBudget {
    model::Bytes min, max;
  };
  SideBudget source_budget, destination_budget;
  // Wall time of each phase (`compare --timings`): a profile of the planning cost, not part of the
  // answer (to_json leaves it out; timings_json gives it). load: set by whoever loaded the scenario.
  struct Phases {
    model::Seconds load, plan, bound, basis, strategies, tune, systems;
  };
  Phases wall;
  // The budget of GPU g (0: unbounded).
  model::Bytes budget_of(model::GpuId g) const {
    return g >= 0 && static_cast<std::size_t>(g) < budget.size() ? budget[static_cast<std::size_t>(g)] : model::Bytes{0};
  }
};

// Plans the scenario's transfer set and compares every strategy on it; for a delta refit also the
// dense one (CompareResult::dense). Throws model::Error
// (PlanError, ConfigError for an unknown profile, system or a bad strategy).
CompareResult compare(const model::LoadedScenario& scenario, const CompareOptions& options);

// `compare --json`, schema reshard-compare-1 (docs/json-schema.md): the scenario, the lower bound
// and its binding cut, one entry per row under "strategies", the best row, and one entry per
// system under "systems" (when asked for).
nlohmann::json to_json(const CompareResult& result);
// The phases' wall times: load_s, plan_s, bound_s, basis_s, strategies_s, tune_s, systems_s
// (`compare --timings --json` adds it as "timings").
nlohmann::json timings_json(const CompareResult::Phases& wall);

// The transfer set and its lower bound as `plan --json` and Python's plan() give them
// (reshard-plan-1): logical_bytes, pieces, bytes_needed, bytes_to_move, lower_bound_s, bound_cut,
// bound_where and every cut.
nlohmann::json plan_json(const model::TransferSet& ts, const model::LowerBound& lb);

// model::load_scenario with `--set KEY=VALUE` texts (model/overrides.hpp); relative `model` and
// `topology` values resolve against `base_dir` (empty: the current directory).
model::LoadedScenario load_scenario_with_overrides(const std::filesystem::path& path, const std::vector<std::string>& sets,
                                                   const std::filesystem::path& base_dir = {});

}  // namespace reshard::study
