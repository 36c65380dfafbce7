#include "inputs.hpp"

#include <filesystem>
#include <vector>

#include "reshard/model/errors.hpp"
#include "reshard/model/schedule_file.hpp"

namespace reshard::cli {

using namespace reshard::model;

ScheduleRequest schedule_request(const std::string& strategy, const std::string& profile, const std::string& params,
                                 const std::string& max_staging, int max_chain, const ProgressFn& progress) {
  ScheduleRequest r;
  r.strategy = strategy;
  r.profile = profile;
  r.params_file = params;
  r.max_staging = parse_max_staging(max_staging);
  r.max_chain = max_chain;
  r.progress = progress;
  r.threads = 0;
  return r;
}

void add_max_staging_option(CLI::App* cmd, std::string& text) {
  cmd->add_option("--max-staging", text,
                  "The most extra (staging) memory one GPU may hold, e.g. 4GiB: every schedule is built within it "
                  "(below the scenario's refit_memory budgets)");
}

void add_without_option(CLI::App* cmd, std::string& text) {
  cmd->add_option("--without", text,
                  "Refit over the survivors of these lost GPUs (0-7,12): a lost source GPU's shards come from the other "
                  "holders, a lost destination GPU takes its serving unit out (docs/robustness.md)");
}

LoadedScenario without(LoadedScenario sc, const std::string& text, std::optional<MembershipChange>& change) {
  if (text.empty()) return sc;
  Survivors s = survivors(sc, parse_lost_gpus(text), "--without", text);
  sc.source = std::move(s.source);
  sc.destination = std::move(s.destination);
  change = std::move(s.change);
  return sc;
}

PlannedScenario without(PlannedScenario planned, const std::string& text, std::optional<MembershipChange>& change) {
  if (text.empty()) return planned;
  MembershipChange c;
  PlannedScenario out = planned.without(parse_lost_gpus(text), &c, "--without", text);
  change = std::move(c);
  return out;
}

namespace {
std::string units_text(const std::vector<std::int32_t>& units) {
  return units.empty() ? "none" : gpu_ranges(std::vector<GpuId>(units.begin(), units.end()));
}
}  // namespace

std::vector<std::pair<std::string, std::string>> membership_fields(const MembershipChange& c) {
  std::vector<std::pair<std::string, std::string>> f{
      {"without", gpu_ranges(c.lost) + " (source GPUs " + gpu_ranges(c.lost_source) + "; destination GPUs " +
                      gpu_ranges(c.lost_destination) + ")"}};
  if (!c.lost_source.empty())
    f.push_back({"lost shards", format(c.source_bytes_lost) + " the lost source GPUs held, all from surviving holders"});
  f.push_back({"serving", std::to_string(c.served.size()) + " of " + std::to_string(c.units()) + " destination units (" +
                              std::to_string(c.unit_ranks) + " ranks each): " + units_text(c.served) + "; out: " + units_text(c.dropped)});
  return f;
}

std::optional<Bytes> parse_max_staging(const std::string& text) {
  if (text.empty()) return std::nullopt;
  try {
    const Bytes b = parse_size(text);
    if (b.value <= 0) throw ConfigError("--max-staging", 0, text, "expected a positive size");
    return b;
  } catch (const ConfigError&) {
    throw;
  } catch (const std::exception& e) {
    throw ConfigError("--max-staging", 0, text, std::string("expected a size with its unit (4GiB, 512MB): ") + e.what());
  }
}

std::string schedule_scenario_file(const std::string& schedule_file, const std::string& scenario_name,
                                   const std::string& recorded, const std::string& given) {
  if (!given.empty()) return given;
  namespace fs = std::filesystem;
  const std::string file = scenario_name + ".yaml";
  std::vector<fs::path> places{fs::path(schedule_file).parent_path() / file, fs::path("scenarios") / file,
                               fs::path(RESHARD_SOURCE_DIR) / "scenarios" / file};
  if (!recorded.empty()) places.insert(places.begin(), (fs::path(schedule_file).parent_path() / recorded).lexically_normal());
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

void add_delta_option(CLI::App* cmd, std::string& text) {
  cmd->add_option("--delta", text,
                  "Refit only what changed: the share of every tensor's elements that changed in the step, in (0, 1] "
                  "(0.03 for 3 %); each transfer carries its encoded bytes (the scenario's delta: key, docs/scenario.md)");
}

void add_delta_override(const std::string& text, std::vector<std::string>& sets) {
  if (text.empty()) return;
  std::size_t used = 0;
  double d = 0;
  try {
    d = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || !(d > 0 && d <= 1))
    throw ConfigError("--delta", 0, text, "expected the share of elements that changed in the step, a number in (0, 1] (0.03 for 3 %)");
  sets.push_back("delta=" + text);
}

bool is_schedule_file(const std::string& path) {
  return (path.size() > 5 && path.compare(path.size() - 5, 5, ".json") == 0) || model::is_binary_schedule_file(path);
}

// "fp8_block 128x128, 1234 weights quantised at the source, 5 at the destination; 1.03 TB travel
// (2.05 TB in the model's dtype)".
std::string precision_line(const LoadedScenario& sc) {
  const PrecisionSpec& p = sc.scenario.precision;
  const PrecisionSummary s = summarize_precision(sc.inventory);
  std::string block = p.format == QuantFormat::Fp8Block
                          ? " " + std::to_string(p.block_rows) + "x" + std::to_string(p.block_cols)
                          : std::string(" 1x32");
  return std::string(to_string(p.format)) + block + ", " + std::to_string(s.at_source) + " weights quantised at the source, " +
         std::to_string(s.at_destination) + " at the destination; " + format(s.wire_bytes) + " travel (" +
         format(s.model_bytes) + " in the model's dtype)";
}

}  // namespace reshard::cli
