// reshard systems [NAME] [--json]: the implementation profiles of other refit systems
// (model/systems.hpp): each one's schedule and every constant with its unit, meaning and source.
#include <iostream>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "reshard/model/errors.hpp"
#include "reshard/model/systems.hpp"
#include "table.hpp"

namespace reshard::cli {

using namespace reshard::model;

namespace {
void run_systems(const std::string& name, bool json) {
  std::vector<const SystemProfile*> chosen;
  for (const auto& p : system_profiles())
    if (name.empty() || p.name == name) chosen.push_back(&p);
  if (chosen.empty()) throw ConfigError("", 0, "system", "unknown system '" + name + "'; known: " + system_profile_names());
  if (json) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto* p : chosen) {
      nlohmann::json c = nlohmann::json::array();
      for (const auto& k : p->constants)
        c.push_back({{"name", k.name}, {"value", k.value}, {"meaning", k.meaning}, {"source", k.source}, {"fitted", k.fitted}});
      j.push_back({{"name", p->name}, {"system", p->system}, {"strategy", p->strategy}, {"schedule", p->schedule}, {"constants", c}});
    }
    std::cout << nlohmann::json{{"schema", "reshard-systems-1"}, {"systems", j}}.dump(2) << '\n';
    return;
  }
  Table t({"profile", "system", "schedule (reshard strategy)"});
  for (const auto* p : chosen) t.add({p->name, p->system, p->strategy});
  t.print(std::cout);
  for (const auto* p : chosen) {
    std::cout << '\n' << p->name << ": " << p->schedule << '\n';
    Table c({"constant", "value>", "fitted", "meaning", "source"});
    for (const auto& k : p->constants) c.add({k.name, k.value, k.fitted ? "fitted" : "-", k.meaning, k.source});
    c.print(std::cout);
  }
  std::cout << "\nfitted: on the calibration subset (NeMo RL's published DGX H100 refit times); every other published "
               "measurement is a prediction (scripts/validate.py, docs/validation.md).\n";
}
}  // namespace

void add_systems_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("systems", "The implementation profiles of other refit systems, with their constants");
  auto name = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  cmd->add_option("name", *name, "One profile (default: every one)");
  cmd->add_flag("--json", *json, "Print one JSON object");
  cmd->callback([name, json] { run_systems(*name, *json); });
}

}  // namespace reshard::cli
