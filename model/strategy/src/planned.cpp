#include "reshard/model/planned.hpp"

#include <map>
#include <mutex>

namespace reshard::model {

struct PlannedScenario::State {
  State(std::shared_ptr<const LoadedScenario> l, TransferSet ts) : loaded(std::move(l)), scenario(*loaded), transfers(std::move(ts)) {}
  std::shared_ptr<const LoadedScenario> loaded;
  const LoadedScenario& scenario;
  TransferSet transfers;
  // The bases built so far, one per budget vector (a basis refers to the fields above).
  mutable std::mutex mutex;
  mutable std::map<std::vector<std::int64_t>, std::unique_ptr<const ScheduleBasis>> bases;

  const ScheduleBasis& basis(const std::vector<Bytes>& budget) const {
    std::vector<std::int64_t> key;
    for (const Bytes& b : budget) key.push_back(b.value);
    std::lock_guard lock(mutex);
    auto& slot = bases[key];
    if (!slot)
      slot = std::make_unique<const ScheduleBasis>(transfers, scenario.inventory, scenario.source, scenario.destination,
                                                   scenario.topology, budget);
    return *slot;
  }
};

PlannedScenario::PlannedScenario(LoadedScenario scenario, int threads)
    : PlannedScenario(std::make_shared<const LoadedScenario>(std::move(scenario)), threads) {}

PlannedScenario::PlannedScenario(std::shared_ptr<const LoadedScenario> scenario, int threads) {
  TransferSet ts = plan(scenario->inventory, scenario->source, scenario->destination, threads);
  state_ = std::make_unique<State>(std::move(scenario), std::move(ts));
}

PlannedScenario::PlannedScenario(std::shared_ptr<const LoadedScenario> scenario, TransferSet transfers)
    : state_(std::make_unique<State>(std::move(scenario), std::move(transfers))) {}

PlannedScenario PlannedScenario::without(const std::vector<GpuId>& lost, MembershipChange* change, const std::string& option,
                                         const std::string& value) const {
  const LoadedScenario& full = state_->scenario;
  Survivors s = survivors(full, lost, option, value);
  TransferSet ts = restrict_transfers(state_->transfers, s.source_sets, s.destination_sets, full.inventory, s.source, s.destination);
  auto loaded = std::make_shared<LoadedScenario>(LoadedScenario{full.scenario, full.inventory, full.topology,
                                                                std::move(s.source), std::move(s.destination), full.memory});
  if (change) *change = std::move(s.change);
  return PlannedScenario(std::move(loaded), std::move(ts));
}

PlannedScenario::~PlannedScenario() = default;
PlannedScenario::PlannedScenario(PlannedScenario&&) noexcept = default;
PlannedScenario& PlannedScenario::operator=(PlannedScenario&&) noexcept = default;

const LoadedScenario& PlannedScenario::scenario() const { return state_->scenario; }
const TransferSet& PlannedScenario::transfers() const { return state_->transfers; }

std::vector<Bytes> PlannedScenario::budgets(const std::optional<Bytes>& max_staging) const {
  return staging_budgets(state_->scenario, max_staging);
}

StrategyParams PlannedScenario::params_for(const ScheduleRequest& request) const {
  const CostParams cost = CostParams::named_or_loaded(request.profile, request.params_file);  // refused if bad, auto or not
  StrategyParams p;
  if (request.strategy == "auto") {
    TuneOptions options;
    options.threads = request.threads;
    options.progress = request.progress;
    options.max_staging = request.max_staging;
    p = tune(state_->basis(budgets(request.max_staging)), cost, options).best.params;
  } else {
    p = parse_strategy(request.strategy);
  }
  if (request.max_chain > 0) p.max_chain = request.max_chain;
  return p;
}

Schedule PlannedScenario::schedule_for(const ScheduleRequest& request) const {
  return schedule_for(params_for(request), budgets(request.max_staging));
}

Schedule PlannedScenario::schedule_for(const StrategyParams& params, const std::vector<Bytes>& budget) const {
  Schedule s = build_schedule(state_->basis(budget), params);
  s.scenario = state_->scenario.scenario.name;
  return s;
}

}  // namespace reshard::model
