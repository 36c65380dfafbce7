// One way from a scenario to a schedule. A PlannedScenario is a loaded scenario with its exact
// transfer set (model::plan), planned once; schedule_for turns a strategy line, or "auto" (the
// tuner's choice under a cost profile), into the validated-by-construction schedule within the
// scenario's staging budgets (each at most --max-staging when given). The CLI, the Python module,
// the Refit engine, calibration and the rebuild of a binary schedule file all take this path, so
// a strategy means the same schedule everywhere.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "reshard/model/cost.hpp"
#include "reshard/model/membership.hpp"
#include "reshard/model/progress.hpp"
#include "reshard/model/scenario.hpp"
#include "reshard/model/strategies.hpp"
#include "reshard/model/tuner.hpp"

namespace reshard::model {

// What to build.
struct ScheduleRequest {
  std::string strategy = kDefaultStrategy;  // a strategy line (describe()'s form) or "auto"
  std::string profile = kDefaultProfile;    // the cost profile "auto" tunes against ...
  std::string params_file;                  // ... or a parameters file that replaces it (`--params`)
  std::optional<Bytes> max_staging;         // every GPU's staging budget at most this (`--max-staging`)
  std::int32_t max_chain = 0;               // > 0: replaces the strategy's max_chain (`--max-chain`)
  int threads = 0;                          // the tuner's threads (0: every core)
  ProgressFn progress;                      // the tuner's candidates (stage "tune")
};

class PlannedScenario {
 public:
  // Plans the scenario's transfer set (model::plan on `threads` threads; 0: every core).
  explicit PlannedScenario(LoadedScenario scenario, int threads = 1);
  // The same on a scenario shared with its other users (the Python module's loaded Scenario).
  explicit PlannedScenario(std::shared_ptr<const LoadedScenario> scenario, int threads = 1);
  ~PlannedScenario();
  PlannedScenario(PlannedScenario&&) noexcept;
  PlannedScenario& operator=(PlannedScenario&&) noexcept;

  const LoadedScenario& scenario() const;
  const TransferSet& transfers() const;
  // Every GPU's staging budget (staging_budgets), each at most `max_staging` when given.
  std::vector<Bytes> budgets(const std::optional<Bytes>& max_staging = std::nullopt) const;

  // The strategy the request names: its line parsed, or the tuner's choice; max_chain applied.
  // PlanError for a line parse_strategy refuses or when no candidate fits; ConfigError for an
  // unknown profile or a bad parameters file (auto or not).
  StrategyParams params_for(const ScheduleRequest& request) const;
  // The schedule of params_for(request) within budgets(request.max_staging), named after the scenario.
  Schedule schedule_for(const ScheduleRequest& request) const;
  // The schedule of `params` within `budget` (a binary schedule file's header: its own budgets).
  Schedule schedule_for(const StrategyParams& params, const std::vector<Bytes>& budget) const;

  // The same scenario with the GPUs `lost` gone (model/membership.hpp): its layouts restricted to
  // the survivors and this transfer set mapped onto them (restrict_transfers), not planned again.
  // `change` receives what changed; the errors are survivors()'s, naming `option` and `value`.
  PlannedScenario without(const std::vector<GpuId>& lost, MembershipChange* change = nullptr,
                          const std::string& option = "--without", const std::string& value = "") const;

 private:
  PlannedScenario(std::shared_ptr<const LoadedScenario> scenario, TransferSet transfers);
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace reshard::model
