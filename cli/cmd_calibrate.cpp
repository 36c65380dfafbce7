// reshard calibrate MEASUREMENTS... [--profile P] -o params.yaml [--json]: least-squares fit of a
// profile's overhead parameters to measured refit times.
#include <iostream>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "reshard/model/calibrate.hpp"
#include "table.hpp"

namespace reshard::cli {

using namespace reshard::model;

void run_calibrate(const std::vector<std::string>& files, const std::string& profile, const std::vector<std::string>& fit,
                   const std::string& name, const std::string& out, bool json, bool accept_unverified) {
  CostParams base = CostParams::profile_named(profile);
  std::vector<Observation> obs;
  for (const auto& f : files) {
    if (!json) std::cerr << "  planning the measurements of " << f << "\n";
    const auto more = observations_from_csv(f, base, accept_unverified);
    obs.insert(obs.end(), more.begin(), more.end());
  }
  Calibration c = calibrate(obs, base, fit);
  if (!name.empty()) c.params.profile = name;
  if (!out.empty()) write_params(out, c, "Base profile: " + profile + ".");
  if (json) {
    nlohmann::json j;
    j["schema"] = "reshard-calibrate-1";
    j["cost_params"] = {{"profile", c.params.profile},
                   {"per_op_s", c.params.per_op.value},
                   {"per_tensor_s", c.params.per_tensor.value},
                   {"per_broadcast_tensor_s", c.params.per_broadcast_tensor.value},
                   {"per_bucket_s", c.params.per_bucket.value},
                   {"per_stage_s", c.params.per_stage.value}};
    auto& rows = j["rows"] = nlohmann::json::array();
    for (const auto& r : c.rows)
      rows.push_back({{"label", r.label}, {"measured_s", r.measured.value}, {"estimate_s", r.predicted.value},
                      {"relative_error", r.relative_error}});
    j["rms_relative_error"] = c.rms_relative_error;
    std::cout << j.dump(2) << '\n';
    return;
  }
  print_fields(std::cout, {{"profile", c.params.profile},
                           {"per_tensor", format(c.params.per_tensor)},
                           {"per_broadcast_tensor", format(c.params.per_broadcast_tensor)},
                           {"per_bucket", format(c.params.per_bucket)},
                           {"per_stage", format(c.params.per_stage)},
                           {"rms relative error", fixed(100 * c.rms_relative_error, 1) + " %"}});
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
  auto profile = std::make_shared<std::string>("reshard");
  auto out = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  auto fit = std::make_shared<std::vector<std::string>>();
  auto name = std::make_shared<std::string>();
  auto accept = std::make_shared<bool>(false);
  cmd->add_option("--name", *name, "Profile name written to the output (default: the base profile's)");
  cmd->add_option("--fit", *fit, "Parameters to fit (default all): per_tensor per_broadcast_tensor per_bucket per_stage")
      ->delimiter(',');
  cmd->add_option("measurements", *files, "CSV files: scenario,strategy,measured_s")->required();
  cmd->add_option("--profile", *profile, "Base profile whose hardware parameters stay fixed: reshard or nemo_rl");
  cmd->add_option("-o,--output", *out, "Write the fitted parameters (YAML, read by compare --params)");
  cmd->add_flag("--json", *json, "Print one JSON object");
  cmd->add_flag("--accept-unverified", *accept,
                "Use Measurements whose digest does not match their content or scenario, or whose run was not verified");
  cmd->callback([files, profile, fit, name, out, json, accept] {
    run_calibrate(*files, *profile, *fit, *name, *out, *json, *accept);
  });
}

}  // namespace reshard::cli
