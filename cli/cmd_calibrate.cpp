// reshard calibrate MEASUREMENTS... [--profile P] -o params.yaml [--json]: least-squares fit of a
// profile's overhead parameters to measured refit times, with the points each constant rests on and
// a warning when the fit has as many constants as points.
#include <iostream>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "reshard/study/calibrate.hpp"
#include "reshard/model/defaults.hpp"
#include "table.hpp"

namespace reshard::cli {

using namespace reshard::model;
using namespace reshard::study;

namespace {
// per_call_rank is shown only where the profile has it or the fit chose it: most profiles have none.
bool shown(const Calibration& c, int k) { return k != 5 || c.fitted[k] || overhead_value(c.params, k) != 0; }
}  // namespace

void run_calibrate(const std::vector<std::string>& files, const std::string& profile, const std::string& params,
                   const std::vector<std::string>& fit, const std::string& name, const std::string& out, bool json,
                   bool accept_unverified) {
  CostParams base = CostParams::named_or_loaded(profile, params);
  std::vector<Observation> obs;
  for (const auto& f : files) {
    if (!json) std::cerr << "  planning the measurements of " << f << "\n";
    const auto more = observations_from_csv(f, base, accept_unverified);
    obs.insert(obs.end(), more.begin(), more.end());
  }
  Calibration c = calibrate(obs, base, fit);
  if (!name.empty()) c.params.profile = name;
  if (!out.empty()) write_params(out, c, "Base profile: " + (params.empty() ? profile : params) + ".");
  // A fit with as many constants as points matches them by construction: said on stderr (and in
  // the JSON), not left to the rms error to hide.
  for (const auto& w : c.warnings) std::cerr << "reshard: warning: " << w << '\n';
  if (json) {
    nlohmann::json j;
    j["schema"] = "reshard-calibrate-1";
    j["cost_params"] = {{"profile", c.params.profile},
                   {"per_op_s", c.params.per_op.value},
                   {"per_tensor_s", c.params.per_tensor.value},
                   {"per_broadcast_tensor_s", c.params.per_broadcast_tensor.value},
                   {"per_bucket_s", c.params.per_bucket.value},
                   {"per_stage_s", c.params.per_stage.value},
                   {"copy_passes", c.params.copy_passes},
                   {"tensor_streams", c.params.tensor_streams},
                   {"barriers_per_tensor", c.params.barriers_per_tensor}};
    auto& rows = j["rows"] = nlohmann::json::array();
    for (const auto& r : c.rows)
      rows.push_back({{"label", r.label}, {"measured_s", r.measured.value}, {"estimate_s", r.predicted.value},
                      {"relative_error", r.relative_error}});
    j["rms_relative_error"] = c.rms_relative_error;
    auto& constants = j["constants"] = nlohmann::json::array();
    for (int k = 0; k < kOverheadParams; ++k)
      if (shown(c, k))
        constants.push_back({{"name", kOverheadNames[k]}, {"value", overhead_value(c.params, k)},
                           {"unit", k == 4 ? "passes" : "s"}, {"fitted", c.fitted[k]},
                           {"points", c.points[k]}});
    j["points"] = c.rows.size();
    j["fitted_constants"] = c.fitted_constants;
    j["warnings"] = c.warnings;
    std::cout << j.dump(2) << '\n';
    return;
  }
  // Each constant with the points it rests on: "12.9 ms  (fitted on 4 of 4 points)", or "0 s  (not
  // fitted: the base profile's; its term in 2 of 4 points)".
  std::vector<std::pair<std::string, std::string>> fields{{"profile", c.params.profile}};
  const std::string of = " of " + std::to_string(c.rows.size()) + (c.rows.size() == 1 ? " point" : " points");
  for (int k = 0; k < kOverheadParams; ++k) {
    if (!shown(c, k)) continue;
    fields.push_back({kOverheadNames[k], format_overhead(k, overhead_value(c.params, k)) + "  (" +
                                             (c.fitted[k] ? "fitted on " + std::to_string(c.points[k]) + of
                                                          : "not fitted: the base profile's; its term in " +
                                                                std::to_string(c.points[k]) + of) +
                                             ")"});
  }
  fields.push_back({"rms relative error", fixed(100 * c.rms_relative_error, 1) + " %"});
  print_fields(std::cout, fields);
  std::cout << '\n';
  Table t({"measurement", "measured>", "predicted>", "error>"});
  for (const auto& r : c.rows)
    t.add({r.label, format(r.measured), format(r.predicted), fixed(100 * r.relative_error, 1) + " %"});
  t.print(std::cout);
  if (!out.empty()) std::cout << "\nwrote " << out << "\n";
}

void add_calibrate_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("calibrate", "Fit a profile's overhead parameters to measured refit times");
  auto files = std::make_shared<std::vector<std::string>>();
  auto profile = std::make_shared<std::string>(model::kDefaultProfile);
  auto out = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  auto fit = std::make_shared<std::vector<std::string>>();
  auto name = std::make_shared<std::string>();
  auto accept = std::make_shared<bool>(false);
  cmd->add_option("--name", *name, "Profile name written to the output (default: the base profile's)");
  cmd->add_option("--fit", *fit, "Parameters to fit (default all): per_tensor per_broadcast_tensor per_bucket per_stage")
      ->delimiter(',');
  cmd->add_option("measurements", *files, "CSV files: scenario,strategy,measured_s")->required();
  cmd->add_option("--profile", *profile, "Base profile whose hardware parameters stay fixed: reshard, links, nemo_rl or a system's");
  auto params = std::make_shared<std::string>();
  cmd->add_option("--params", *params, "Base parameters file (as compare --params reads) instead of --profile");
  cmd->add_option("-o,--output", *out, "Write the fitted parameters (YAML, read by compare --params)");
  cmd->add_flag("--json", *json, "Print one JSON object");
  cmd->add_flag("--accept-unverified", *accept,
                "Use Measurements whose digest does not match their content or scenario, or whose run was not verified");
  cmd->callback([files, profile, params, fit, name, out, json, accept] {
    run_calibrate(*files, *profile, *params, *fit, *name, *out, *json, *accept);
  });
}

}  // namespace reshard::cli
