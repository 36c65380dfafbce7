// The executor tests' common ground: the small shipped scenarios (kB-scale fixtures that every
// backend can run in one process) and every named strategy's run plan on them.
#pragma once

#include "paths.hpp"

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "reshard/exec/executor.hpp"
#include "reshard/model/scenario.hpp"
#include "reshard/model/strategies.hpp"

namespace reshard::test {

inline std::string scenario_path(const std::string& name) {
  return source_dir() + "/scenarios/" + name;
}

// The staging budget of the tight runs: 1 MiB on every GPU (model/memory.hpp), two 512 KiB slots.
inline constexpr std::int64_t kTightBudget = 1 << 20;

// The small shipped scenarios (scenarios/small-*.yaml), file names in name order.
inline std::vector<std::string> small_scenarios() {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(source_dir() + "/scenarios")) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("small-", 0) == 0 && entry.path().extension() == ".yaml") names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

// Calls f(scenario file name, strategy, loaded scenario, plan, schedule, run plan) for every small
// shipped scenario and every named strategy with its defaults, built within the scenario's staging
// budgets and again within kTightBudget on every GPU (the name then ends in " (1 MiB)").
template <class F>
void for_each_small_run(F&& f) {
  for (const std::string& name : small_scenarios()) {
    const model::LoadedScenario sc = model::load_scenario(std::filesystem::path(scenario_path(name)));
    const model::TransferSet ts = model::plan(sc.inventory, sc.source, sc.destination);
    for (bool tight : {false, true}) {
      const std::vector<model::Bytes> budget =
          tight ? model::staging_budgets(sc, model::Bytes{kTightBudget}) : model::staging_budgets(sc);
      for (const auto& strategy : model::strategy_names()) {
        model::StrategyParams p;
        p.strategy = model::strategy_named(strategy);
        const model::Schedule s = model::build_schedule(ts, sc.inventory, sc.source, sc.destination, sc.topology, p, budget);
        const exec::RunPlan rp = exec::make_run_plan(sc, ts, s);
        f(std::string(name) + (tight ? " (1 MiB)" : ""), strategy, sc, ts, s, rp);
      }
    }
  }
}

}  // namespace reshard::test
