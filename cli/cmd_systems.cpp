// reshard systems [NAME] [--json]: the implementation profiles of other refit systems
// (model/systems.hpp): each one's schedule and every constant with its unit, meaning and source;
// `reshard systems reshard`: the constants of reshard's own engine.
#include <iostream>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "reshard/model/errors.hpp"
#include "reshard/model/systems.hpp"
#include "table.hpp"

namespace reshard::cli {

using namespace reshard::model;

namespace {
// Every cost parameter of a profile, durations in seconds, under the keys a parameters file takes
// (CostParams::load): what a caller needs to write the profile as a file and change a constant.
nlohmann::json cost_json(const CostParams& p) {
  nlohmann::json eff = nlohmann::json::object(), hop = nlohmann::json::object();
  for (std::size_t k = 0; k < kLinkKinds; ++k) {
    eff[kLinkKindKeys[k]] = p.efficiency[k];
    hop[kLinkKindKeys[k]] = p.chain_hop_latency[k].value;
  }
  return {{"profile", p.profile},
          {"efficiency", eff},
          {"chain_hop_latency", hop},
          {"per_op", p.per_op.value},
          {"per_tensor", p.per_tensor.value},
          {"per_call_rank", p.per_call_rank.value},
          {"per_broadcast_tensor", p.per_broadcast_tensor.value},
          {"per_bucket", p.per_bucket.value},
          {"per_stage", p.per_stage.value},
          {"load_per_tensor", p.load_per_tensor.value},
          {"load_per_expert", p.load_per_expert.value},
          {"per_read", p.per_read.value},
          {"per_refit", p.per_refit.value},
          {"engine_call", p.engine_call.value},
          {"tensor_streams", p.tensor_streams},
          {"barriers_per_tensor", p.barriers_per_tensor},
          {"copy_passes", p.copy_passes},
          {"host_passes", p.host_passes},
          {"host_overlaps", p.host_overlaps},
          {"step_barriers", p.step_barriers}};
}

nlohmann::json constant_json(const ProfileConstant& k) {
  const ProfileFit* fit = k.fit.empty() ? nullptr : find_profile_fit(k.fit);
  return {{"name", k.name},
          {"value", k.value},
          {"meaning", k.meaning},
          {"source", k.source},
          {"fitted", k.fitted},
          {"fit", fit ? nlohmann::json(fit->name) : nlohmann::json(nullptr)},
          {"fit_constant", fit ? (k.fit_constant.empty() ? k.name : k.fit_constant) : ""},
          {"fitted_to", fit ? nlohmann::json(fit->rows) : nlohmann::json::array()}};
}

void print_constants(const std::vector<ProfileConstant>& constants) {
  Table c({"constant", "value>", "fitted", "meaning", "source"});
  for (const auto& k : constants) c.add({k.name, k.value, k.fitted ? "fitted" : "-", k.meaning, k.source});
  c.print(std::cout);
}

// reshard's own engine (a cost profile with its constants, model/systems.hpp): what its rows in
// `compare` pay beyond the links.
void run_engine(const CostProfile& p, bool json) {
  const auto constants = p.constants();
  if (json) {
    nlohmann::json c = nlohmann::json::array();
    for (const auto& k : constants) c.push_back(constant_json(k));
    std::cout << nlohmann::json{{"schema", "reshard-systems-1"},
                                {"systems", nlohmann::json::array({{{"name", p.name}, {"system", p.models}, {"strategy", "auto"},
                                                                    {"schedule", "the strategy compare or auto chooses"},
                                                                    {"constants", c}, {"cost", cost_json(p.make())}}})},
                                {"fits", nlohmann::json::array()}}
                     .dump(2)
              << '\n';
    return;
  }
  std::cout << p.name << ": " << p.models << '\n';
  print_constants(constants);
}

void run_systems(const std::string& name, bool json) {
  if (const CostProfile* engine = find_cost_profile(name); engine && !engine->constants().empty()) return run_engine(*engine, json);
  std::vector<const SystemProfile*> chosen;
  for (const auto& p : system_profiles())
    if (name.empty() || p.name == name) chosen.push_back(&p);
  if (chosen.empty())
    throw ConfigError("", 0, "system", "unknown system '" + name + "'; known: reshard (this project's engine), " + system_profile_names());
  if (json) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto* p : chosen) {
      nlohmann::json c = nlohmann::json::array();
      for (const auto& k : p->constants) c.push_back(constant_json(k));
      j.push_back({{"name", p->name}, {"system", p->system}, {"strategy", p->strategy}, {"schedule", p->schedule},
                   {"constants", c}, {"cost", cost_json(p->cost)}});
    }
    nlohmann::json fits = nlohmann::json::array();
    for (const auto& f : profile_fits())
      fits.push_back({{"name", f.name}, {"calibration", f.calibration}, {"base", f.base}, {"constants", f.constants},
                      {"rows", f.rows}});
    std::cout << nlohmann::json{{"schema", "reshard-systems-1"}, {"systems", j}, {"fits", fits}}.dump(2) << '\n';
    return;
  }
  Table t({"profile", "system", "schedule (reshard strategy)"});
  for (const auto* p : chosen) t.add({p->name, p->system, p->strategy});
  t.print(std::cout);
  for (const auto* p : chosen) {
    std::cout << '\n' << p->name << ": " << p->schedule << '\n';
    print_constants(p->constants);
  }
  std::cout << "\nfitted: on a calibration subset of params/published-refit.csv, one per fit (a constant another profile's "
               "fit gave is carried, not fitted); every other published measurement is a prediction (scripts/validate.py, "
               "docs/validation.md):\n";
  Table f({"fit", "calibration subset", "constants", "rows"});
  for (const auto& fit : profile_fits()) {
    std::string constants, rows;
    for (const auto& c : fit.constants) constants += (constants.empty() ? "" : ", ") + c;
    for (const auto& r : fit.rows) rows += (rows.empty() ? "" : ", ") + r;
    f.add({fit.name, fit.calibration, constants, rows});
  }
  f.print(std::cout);
  if (name.empty()) std::cout << "\nreshard's own engine, whose costs its rows in `compare` pay: `reshard systems reshard`.\n";
}
}  // namespace

void add_systems_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("systems", "The implementation profiles of other refit systems, with their constants");
  auto name = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  cmd->add_option("name", *name, "One profile, or reshard for this project's own engine (default: every other system)");
  cmd->add_flag("--json", *json, "Print one JSON object");
  cmd->callback([name, json] { run_systems(*name, *json); });
}

}  // namespace reshard::cli
