// The executor tests' common ground: the small shipped scenarios (kB-scale fixtures that every
// backend can run in one process) and every named strategy's run plan on them.
#pragma once

#include <filesystem>
#include <string>

#include "reshard/exec/executor.hpp"
#include "reshard/model/scenario.hpp"

namespace reshard::test {

inline std::string scenario_path(const std::string& name) {
  return std::string(RESHARD_SOURCE_DIR) + "/scenarios/" + name;
}

// Calls f(scenario file name, strategy, loaded scenario, plan, schedule, run plan) for every small
// shipped scenario and every named strategy with its defaults.
template <class F>
void for_each_small_run(F&& f) {
  for (const char* name : {"small-gqa-megatron-vllm.yaml", "small-moe-ep.yaml", "small-dtensor-uneven.yaml"}) {
    const model::LoadedScenario sc = model::load_scenario(std::filesystem::path(scenario_path(name)));
    const model::TransferSet ts = model::plan(sc.inventory, sc.source, sc.destination);
    for (const auto& strategy : model::strategy_names()) {
      model::StrategyParams p;
      p.strategy = model::strategy_named(strategy);
      const model::Schedule s = model::build_schedule(ts, sc.inventory, sc.source, sc.destination, sc.topology, p);
      const exec::RunPlan rp = exec::make_run_plan(sc, ts, s);
      f(std::string(name), strategy, sc, ts, s, rp);
    }
  }
}

}  // namespace reshard::test
