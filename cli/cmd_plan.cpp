// reshard plan SCENARIO [--strategy S|auto [-o schedule.json|schedule.rsched]] [--profile P | --params FILE]
// [--json]: the exact transfer set and the lower bound; with a strategy, its validated schedule (auto
// tuned for the profile or parameters file), written as JSON or the compact binary format.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <iostream>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "reshard/exec/plan_file.hpp"
#include "reshard/model/defaults.hpp"
#include "reshard/model/planner.hpp"
#include "reshard/model/errors.hpp"
#include "reshard/model/memory.hpp"
#include "reshard/model/scenario.hpp"
#include "reshard/model/schedule.hpp"
#include "reshard/model/schedule_file.hpp"
#include "reshard/study/compare.hpp"
#include "reshard/study/plan_summary.hpp"
#include "inputs.hpp"
#include "progress.hpp"
#include "set_option.hpp"
#include "simulate_report.hpp"
#include "table.hpp"
#include "warnings.hpp"

namespace reshard::cli {

using namespace reshard::model;

namespace {

std::string fraction(double f) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", f);
  return buf;
}

// "staging 3.20 GB per GPU (default: 2 x min(2 % of GPU memory, 5 GiB)); weights + staging 47.1 GB
// of 72.0 GB (gpu_memory_utilization 0.9 x 80.0 GB) on GPU 300"
std::string memory_line(const LoadedScenario& sc, const study::SideMemory& m, bool destination) {
  const Scenario& s = sc.scenario;
  auto budget = [](Bytes b) { return b.value == 0 ? std::string("unbounded") : format(b); };
  const bool given = destination ? s.destination_refit_memory.has_value() : s.source_refit_memory.has_value();
  std::string out = "staging " + budget(m.budget_min) + (m.budget_min == m.budget_max ? "" : " to " + budget(m.budget_max)) +
                    " per GPU (" + (given ? std::string("refit_memory") : std::string("default: ") + kDefaultBudgetRule) +
                    (m.other_side ? "; the other side's on GPUs of both sides where smaller" : "") + "); ";
  const GpuMemoryUse& u = m.use;
  out += "weights + staging " + format(u.weights() + u.budget);
  if (u.limit.value == 0) return out + " on GPU " + std::to_string(m.gpu) + " (the topology gives no GPU memory: not checked)";
  out += " of " + format(u.limit);
  if (u.limit != u.capacity)
    out += " (" + s.memory_fraction_key + " " + fraction(s.memory_fraction) + " x " + format(u.capacity) + ")";
  return out + " on GPU " + std::to_string(m.gpu);
}

}  // namespace

struct PlanArgs {
  std::string path, strategy, output, profile = model::kDefaultProfile, params, max_staging, without, delta;
  std::vector<std::string> sets;
  bool json = false;
  bool programs = false;  // -o writes the refit plan file (every GPU's program), not the schedule
};

// The readable plan; `written`: where the schedule went (", written to FILE"), empty when nowhere.
void print_plan(const LoadedScenario& sc, const TransferSet& ts, const LowerBound& lb, const study::PlanSummary& summary,
                const std::optional<Schedule>& schedule, const std::string& written) {
  const auto& cfg = sc.inventory.config();
  std::vector<std::pair<std::string, std::string>> fields{
                {"scenario", sc.scenario.name},
                {"model", cfg.name + ", " + format_count(sc.inventory.parameters()) + " parameters, " +
                              format(ts.logical_bytes) +
                              (sc.scenario.model_options.include_mtp ? " (MTP included)" : " (MTP excluded)")},
                {"topology", sc.topology.name() + ", " + std::to_string(sc.topology.gpu_count()) + " GPUs"},
                {"source", sc.source.description()},
                {"destination", sc.destination.description()},
                {"pieces", std::to_string(ts.pieces.size())},
                {"bytes needed", format(ts.bytes_needed) + " (" +
                                     fixed(ts.bytes_needed.as_double() / ts.logical_bytes.as_double(), 2) +
                                     " x the model)"},
                {"bytes to move", format(ts.bytes_to_move)},
                {"source memory", memory_line(sc, summary.source_memory, false)},
                {"destination memory",
                 memory_line(sc, summary.destination_memory, true)}};
  if (sc.scenario.precision.format != QuantFormat::None) {
    fields.insert(fields.begin() + 5, {"precision", precision_line(sc)});
    fields.push_back({"conversion", format(ts.conversion.source_bytes) + " read and written by the source GPUs, " +
                                        format(ts.conversion.destination_bytes) + " by the destination GPUs"});
  }
  if (sc.inventory.delta().active()) {
    const DeltaWork& d = ts.delta;
    fields.insert(fields.begin() + 5, {"delta", sc.inventory.delta().describe() + "; bytes needed and to move are encoded"});
    fields.push_back({"delta passes", format(d.source_bytes) + " read and written by the source GPUs' diff and encode, " +
                                          format(d.destination_bytes) + " by the destination GPUs' decode; snapshot " +
                                          format(d.snapshot_bytes) + " in all"});
  }
  if (const LoraSpec* l = sc.inventory.lora()) {
    std::string modules;
    for (const auto& m : l->target_modules) modules += (modules.empty() ? "" : ", ") + m;
    fields.insert(fields.begin() + 2,
                  {"adapters", "LoRA rank " + std::to_string(l->rank) + ", alpha " + fixed(l->alpha, 0) + " (scaling " +
                                   fixed(l->alpha / static_cast<double>(l->rank), 2) + ") on " + modules + ": " +
                                   std::to_string(sc.inventory.tensors().size()) + " tensors of " +
                                   format(Bytes{ts.logical_bytes.value / static_cast<std::int64_t>(sc.inventory.tensors().size())}) +
                                   " on average; the model's weights stay"});
  }
  for (const auto* side : {&sc.source, &sc.destination})
    for (const auto& note : side->conventions())
      fields.push_back({side == &sc.source ? "source convention" : "destination convention", note});
  if (sc.scenario.colocated) {
    const std::vector<GpuId> both = shared_gpus(sc.scenario);
    fields.insert(fields.begin() + 5, {"colocated", std::to_string(both.size()) + " GPUs hold both a source and a destination shard: " + gpu_ranges(both)});
  }
  print_fields(std::cout, fields);
  std::cout << '\n';
  Table by_class({"class", "logical>", "share>", "needed>", "pieces>"});
  for (int c = 0; c < kTensorClassCount; ++c) {
    const auto i = static_cast<std::size_t>(c);
    if (summary.by_class.logical[i] <= 0) continue;
    by_class.add({to_string(static_cast<TensorClass>(c)), format(Bytes{static_cast<std::int64_t>(summary.by_class.logical[i])}),
             fixed(100.0 * summary.by_class.logical[i] / ts.logical_bytes.as_double(), 1) + " %",
             format(Bytes{static_cast<std::int64_t>(summary.by_class.needed[i])}), std::to_string(summary.by_class.pieces[i])});
  }
  by_class.print(std::cout);
  std::cout << '\n';
  Table per_gpu({"per GPU", "max>", "mean>", "max/mean>"});
  per_gpu.add({"destination receives", format(Bytes{static_cast<std::int64_t>(summary.destination_received.max)}),
               format(Bytes{static_cast<std::int64_t>(summary.destination_received.mean)}), fixed(summary.destination_received.imbalance(), 2)});
  per_gpu.add({"source sends (even split over holders)", format(Bytes{static_cast<std::int64_t>(summary.source_sent.max)}),
               format(Bytes{static_cast<std::int64_t>(summary.source_sent.mean)}), fixed(summary.source_sent.imbalance(), 2)});
  per_gpu.print(std::cout);
  std::cout << '\n';
  Table cuts({"lower bound cut", "worst at", "bytes>", "capacity>", "time>", ""});
  for (const auto& c : lb.cuts)
    cuts.add({c.cut, c.where, format(c.bytes), format(c.capacity), format(c.time()),
              c.cut == lb.binding.cut && c.where == lb.binding.where ? "<- binding" : ""});
  cuts.print(std::cout);
  std::cout << "\nlower bound: " << format(lb.time) << " (" << lb.binding.cut << ", " << lb.binding.where << ")\n";
  if (schedule) {
    const StagingMemory memory = staging_memory(*schedule);
    std::cout << "schedule: " << describe(schedule->params) << ", " << schedule->ops.size() << " operations, "
              << schedule->buffers.size() << " buffers, validated" << written << "\nstaging: " << staging_text(memory.peak, memory.gpu, staging_budget(*schedule, memory.gpu)) << ", in step "
              << memory.step << " of "
              << memory.steps << (memory.over_budget > 0 ? "; " + std::to_string(memory.over_budget) + " GPU(s) OVER budget" : "")
              << "\n";
  }
}

void run_plan(const PlanArgs& a) {
  const std::string& output = a.output;
  auto progress = ProgressLine::for_stderr(a.json);
  const ScheduleRequest request = schedule_request(a.strategy, a.profile, a.params, a.max_staging, 0, progress.callback());
  progress.stage("load scenario");
  LoadedScenario loaded = load_scenario(std::filesystem::path(a.path), model::parse_overrides(a.sets));
  progress.clear();  // warnings on lines of their own
  print_warnings(loaded);
  progress.stage("plan");
  std::optional<MembershipChange> change;
  const PlannedScenario planned = without(PlannedScenario(std::move(loaded)), a.without, change);
  const LoadedScenario& sc = planned.scenario();
  const TransferSet& ts = planned.transfers();
  progress.stage("lower bound");
  const LowerBound lb = lower_bound(ts, sc.source, sc.destination, sc.topology);

  // With --strategy: the schedule, validated, written for simulate / exec to replay unchanged.
  std::optional<Schedule> schedule;
  if (!a.strategy.empty()) {
    const StrategyParams params = planned.params_for(request);
    progress.stage("build schedule");
    schedule = planned.schedule_for(params, planned.budgets(request.max_staging));
    progress.stage("validate");
    validate(*schedule, ts, sc.inventory, sc.source, sc.destination);
    if (!output.empty()) {
      progress.stage("write " + output);
      if (a.programs) {
        progress.stage("programs");
        const exec::RunPlan rp = exec::make_run_plan(sc, ts, *schedule);
        exec::write_refit_plan(rp, output);
      } else {
        // The scenario file relative to the schedule's folder, so the schedule finds it from anywhere.
        const auto folder = std::filesystem::absolute(output).parent_path();
        schedule->scenario_file = std::filesystem::absolute(sc.scenario.file).lexically_relative(folder).generic_string();
        write_schedule_file(output, *schedule);
      }
    }
  }

  const study::PlanSummary summary = study::summarize_plan(sc, ts);
  progress.clear();

  if (a.json) {
    nlohmann::json j = study::plan_report_json(sc, ts, lb, summary, schedule, output);
    if (change) j["membership"] = study::membership_json(*change);
    std::cout << j.dump(2) << '\n';
    return;
  }
  if (change) {
    print_fields(std::cout, membership_fields(*change));
    std::cout << '\n';
  }
  print_plan(sc, ts, lb, summary, schedule, output.empty() ? "" : std::string(a.programs ? ", every GPU's program written to " : ", written to ") + output);
}

void add_plan_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("plan", "Plan the exact transfer set of a scenario and its lower bound");
  auto a = std::make_shared<PlanArgs>();
  cmd->add_option("scenario", a->path, "Scenario YAML file")->required();
  cmd->add_option("--strategy", a->strategy, "Also build, validate and keep this strategy's schedule: auto, or a name with parameters as compare prints them (\"domain_grouped relay_ingress\")");
  cmd->add_option("-o,--output", a->output, "Write the schedule (with --strategy): JSON when FILE ends in .json, else the compact binary format");
  cmd->add_flag("--programs", a->programs,
                "With -o: write the refit plan file instead, every GPU's program expanded (JSON), which reshard.torch runs "
                "without the extension (docs/execution.md)");
  cmd->add_option("--profile", a->profile, "Cost profile auto tunes for: reshard (its engine; default), links (the schedules alone), nemo_rl, miles or a system's");
  cmd->add_option("--params", a->params, "Cost parameters file (as written by reshard calibrate); overrides --profile");
  add_max_staging_option(cmd, a->max_staging);
  add_without_option(cmd, a->without);
  cmd->add_flag("--json", a->json, "Print one JSON object");
  add_set_option(cmd, a->sets);
  add_delta_option(cmd, a->delta);
  cmd->callback([a] {
    add_delta_override(a->delta, a->sets);
    if (!a->output.empty() && a->strategy.empty()) throw CLI::ValidationError("--output", "needs --strategy");
    if (a->programs && a->output.empty()) throw CLI::ValidationError("--programs", "needs -o FILE");
    if (!a->output.empty() && !a->without.empty())
      throw CLI::ValidationError("--without", "cannot go with -o: a schedule file does not record the lost GPUs");
    run_plan(*a);
  });
}

}  // namespace reshard::cli
