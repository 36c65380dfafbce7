#include "inputs.hpp"

#include <filesystem>
#include <vector>

#include "reshard/model/errors.hpp"
#include "reshard/model/schedule_file.hpp"
#include "reshard/model/tuner.hpp"

namespace reshard::cli {

using namespace reshard::model;

StrategyParams strategy_params(const std::string& spec, const LoadedScenario& sc, const TransferSet& ts,
                               const CostParams& cost, int max_chain, const ProgressFn& progress) {
  StrategyParams p;
  if (spec == "auto") {
    TuneOptions options;
    options.progress = progress;
    p = tune(ts, sc.inventory, sc.source, sc.destination, sc.topology, cost, options).best.params;
  } else {
    p = parse_strategy(spec);
  }
  if (max_chain > 0) p.max_chain = max_chain;
  return p;
}

std::string schedule_scenario_file(const std::string& schedule_file, const std::string& scenario_name,
                                   const std::string& scenario_file) {
  if (!scenario_file.empty()) return scenario_file;
  namespace fs = std::filesystem;
  const std::string file = scenario_name + ".yaml";
  const std::vector<fs::path> places{fs::path(schedule_file).parent_path() / file, fs::path("scenarios") / file,
                                     fs::path(RESHARD_SOURCE_DIR) / "scenarios" / file};
  std::string looked;
  for (const auto& p : places) {
    looked += (looked.empty() ? "" : ", ") + p.string();
    std::error_code ec;
    if (scenario_name.empty() || !fs::is_regular_file(p, ec)) continue;
    if (Scenario::load(p).name == scenario_name) return p.string();
  }
  throw ConfigError(schedule_file, 0, "scenario",
                    "the schedule was built for scenario '" + scenario_name + "', which is none of " + looked +
                        "; pass --scenario SCENARIO.yaml");
}

bool is_schedule_file(const std::string& path) {
  return (path.size() > 5 && path.compare(path.size() - 5, 5, ".json") == 0) || model::is_binary_schedule_file(path);
}

}  // namespace reshard::cli
