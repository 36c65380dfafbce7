// `simulate --fail GPUS@TIME [--detect TIME]`: what losing those GPUs at that time of the refit
// costs, by abort + rebuild and by revoke + shrink + resume (model/recovery.hpp).
#pragma once

#include <iosfwd>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "reshard/model/planned.hpp"
#include "reshard/model/recovery.hpp"
#include "reshard/sim/schedule_sim.hpp"

namespace reshard::cli {

struct FailureOptions {
  std::string fail;    // GPUS@TIME
  std::string detect;  // a duration; empty: RecoveryTerms' default
  std::string init;    // a duration replacing the init term (a measured init); empty: the model's
};
void add_failure_options(CLI::App* cmd, FailureOptions& o);

struct FailureReport {
  std::string value;  // --fail as given
  model::MembershipChange change;
  model::FailureInputs inputs;
  model::RecoveryTerms terms;
  model::FailureCost cost;
};

// The failure `o.fail` names, priced for `schedule` (simulated as `sim`) of `planned`: the
// survivors' refit is the same strategy over planned.without(...), simulated under `cost`.
// ConfigError naming --fail, --detect or --init for text that is not GPUS@TIME or a duration, a time
// outside the refit; survivors()'s errors (a GPU the layouts do not use, losing every holder).
// nullopt when --fail is not given.
std::optional<FailureReport> price_failure_option(const FailureOptions& o, const model::PlannedScenario& planned,
                                                  const model::Schedule& schedule, const sim::ScheduleSimulation& sim,
                                                  const model::CostParams& cost);
void print_failure(std::ostream& out, const FailureReport& r);
nlohmann::json failure_json(const FailureReport& r);

}  // namespace reshard::cli
