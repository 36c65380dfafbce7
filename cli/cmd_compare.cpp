// reshard compare SCENARIO [--profile P] [--systems all] [--set KEY=VALUE]... [--json]: the main what-if.
// Every strategy's schedule, estimated; the auto tuner's choice; other systems' (study::compare; this
// file prints it). Under `mpirun -np N` every process loads the scenario, the rows and the tuner's
// candidates are spread over the processes (CompareOptions::processes), and process 0 prints the
// result, the same as one process's.
#include <chrono>
#include <iostream>
#include <thread>

#include "commands.hpp"
#include "inputs.hpp"
#include "progress.hpp"
#include "reshard/exec/processes.hpp"
#include "reshard/model/errors.hpp"
#include "reshard/model/defaults.hpp"
#include "reshard/model/scenario.hpp"
#include "reshard/study/compare.hpp"
#include "reshard/study/plan_summary.hpp"
#include "set_option.hpp"
#include "table.hpp"
#include "warnings.hpp"

namespace reshard::cli {

using namespace reshard::model;

namespace {
// "1.21 GB of 3.20 GB (GPU 17)": the peak staging of the GPU that needs the most, its budget, and
// which GPU; "OVER" where a GPU needs more than its budget.
std::string staging_cell(const Prediction& p, const study::CompareResult& r) {
  if (p.staging_gpu < 0) return "-";
  const Bytes budget = r.budget_of(p.staging_gpu);
  return format(p.staging_peak) + (budget.value > 0 ? " of " + format(budget) : "") + " (GPU " + std::to_string(p.staging_gpu) +
         ")" + (p.over_budget > 0 ? " OVER" : "");
}

// One side's staging budget: "3.20 GB per GPU (default: 2 x min(2 % of GPU memory, 5 GiB))".
std::string budget_text(const study::CompareResult::SideBudget& b, const std::optional<Bytes>& side_refit,
                        const std::optional<Bytes>& cap) {
  if (b.max.value == 0) return "unbounded (no refit_memory, and the topology gives no GPU memory)";
  std::string s = b.min == b.max ? format(b.min) : format(b.min) + " .. " + format(b.max);
  s += " per GPU (";
  if (cap && (!side_refit || *cap < *side_refit) && b.max == *cap) s += "--max-staging";
  else s += side_refit ? std::string("refit_memory") : std::string("default: ") + kDefaultBudgetRule;
  return s + ")";
}
// A delta refit against the same refit dense, row by row.
void print_dense_against_delta(const study::CompareResult& r) {
  std::cout << "\ndense against delta (the same strategies refit dense; the delta's encoded transfers and its passes):\n";
  Table t({"strategy", "dense>", "delta>", "dense / delta>", "dense network>", "delta network>", "encode + decode>", "delta limited by"});
  for (std::size_t i = 0; i < r.rows.size() && i < r.dense.size(); ++i) {
    const Prediction& d = r.dense[i].prediction;
    const Prediction& p = r.rows[i].prediction;
    t.add({r.rows[i].name, format(d.time), format(p.time), fixed(d.time.value / p.time.value, 2) + "x", format(d.network_bytes),
           format(p.network_bytes), format(p.delta_source) + " + " + format(p.delta_destination), r.rows[i].limited_by});
  }
  t.print(std::cout);
  std::cout << "dense / delta above 1: the delta refit pays. encode + decode: the source GPUs' diff against their snapshot "
               "and encode + the destination GPUs' decode (memory-bound, docs/design.md \"Delta refit\").\n";
}

// Other systems on the same cluster: each system's own schedule under its profile's cost terms.
void print_systems(const study::CompareResult& r) {
  const double best = r.rows[r.best].prediction.time.value;
  std::cout << "\nother systems on this cluster (implementation profiles; docs/validation.md):\n";
  Table t({"system", "estimate>", "x reshard>", "overheads>", "network>", "limited by", "schedule (reshard strategy)"});
  for (const auto& row : r.systems) {
    const Prediction& p = row.prediction;
    t.add({row.name, format(p.time), fixed(p.time.value / best, 2) + "x", format(p.overheads), format(p.network_bytes),
           row.limited_by, describe(row.params)});
  }
  t.print(std::cout);
  std::cout << "x reshard is the system's estimate over reshard's chosen schedule's; overheads are its per-call, "
               "per-tensor, barrier and copy terms. `reshard systems` lists each profile's constants.\n";
}
}  // namespace

void run_compare(const std::string& path, const std::vector<std::string>& sets, const std::string& without_gpus,
                 study::CompareOptions options, bool json, bool timings, const exec::ProcessGroup& processes) {
  const bool root = processes.rank() == 0;
  const auto start = std::chrono::steady_clock::now();
  std::optional<model::MembershipChange> change;
  const LoadedScenario sc = without(load_scenario(std::filesystem::path(path), model::parse_overrides(sets)), without_gpus, change);
  const Seconds loaded{std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()};
  if (root) print_warnings(sc);
  // Rows, tuner candidates, confirmations: process 0's view.
  auto progress = root ? ProgressLine::for_stderr(json) : ProgressLine(std::cerr, false);
  options.progress = progress.callback();
  options.processes = &processes;
  study::CompareResult r = study::compare(sc, options);
  r.wall.load = loaded;
  progress.clear();
  if (!root) return;
  if (json) {
    nlohmann::json j = study::to_json(r);
    if (timings) j["timings"] = study::timings_json(r.wall);
    if (change) j["membership"] = study::membership_json(*change);
    std::cout << j.dump(2) << '\n';
    return;
  }
  const LowerBound& lb = r.lower_bound;
  const bool converts = sc.scenario.precision.format != QuantFormat::None;
  std::vector<std::pair<std::string, std::string>> fields{
      {"scenario", r.scenario}, {"source", r.source}, {"destination", r.destination}, {"profile", r.profile},
      {"lower bound", format(lb.time) + " (" + lb.binding.cut + ", " + lb.binding.where + ")"},
      {"staging", "source " + budget_text(r.source_budget, sc.scenario.source_refit_memory, options.max_staging) + ", destination " +
                      budget_text(r.destination_budget, sc.scenario.destination_refit_memory, options.max_staging)}};
  if (converts) fields.insert(fields.begin() + 3, {"precision", precision_line(sc)});
  if (!r.delta.empty()) {
    Bytes snapshot{0};
    for (const auto& u : sc.memory) snapshot = std::max(snapshot, u.delta_snapshot);
    fields.insert(fields.begin() + 3, {"delta", r.delta + (snapshot.value > 0 ? " (" + format(snapshot) + " on the GPU that holds the most)" : "")});
  }
  if (change)
    for (auto& f : membership_fields(*change)) fields.push_back(std::move(f));
  print_fields(std::cout, fields);
  std::cout << '\n';
  const double baseline = r.rows.front().prediction.time.value;
  std::vector<std::string> headers = {"strategy", "estimate>", "simulated>", "x bound>", "speedup>", "overheads>", "network>", "NVLink>", "ops>", "staging/GPU>"};
  if (converts) headers.insert(headers.begin() + 3, "convert>");
  headers.insert(headers.end(), {"limited by", "bottleneck link"});
  Table t(headers);
  for (const auto& row : r.rows) {
    const Prediction& p = row.prediction;
    std::vector<std::string> cells = {row.name, format(p.time), row.simulated ? format(*row.simulated) : "-",
                                      fixed(p.time.value / lb.time.value, 2), fixed(baseline / p.time.value, 1) + "x",
                                      format(p.overheads), format(p.network_bytes), format(p.nvlink_bytes), std::to_string(p.operations), staging_cell(p, r)};
    if (converts) cells.insert(cells.begin() + 3, format(p.convert_source) + " + " + format(p.convert_destination));
    cells.insert(cells.end(), {row.limited_by, row.bottleneck});
    t.add(cells);
  }
  t.print(std::cout);
  if (converts)
    std::cout << "\nconvert: the precision change's conversion on the source GPUs + on the destination GPUs "
                 "(memory-bound, in the estimate and the simulation).";
  if (!r.dense.empty()) print_dense_against_delta(r);
  if (!r.systems.empty()) print_systems(r);
  const study::CompareRow& best = r.rows[r.best];
  std::cout << "\nauto chose: " << describe(best.params) << " (" << format(best.prediction.time) << "; "
            << r.candidates << " candidate schedules built and estimated"
            << (options.max_staging ? "; " + std::to_string(r.over_staging) + " rejected for needing more than --max-staging " +
                                          format(*options.max_staging) + " of staging memory on one GPU"
                                    : std::string())
            << ")\n"
            << "speedup is over " << r.rows.front().name << "; x bound is the ratio of the estimate to the lower bound; overheads are "
               "what the engine adds beyond the links (profile " << r.profile << ": `reshard systems " << r.profile << "`); staging/GPU is "
               "the staging memory the GPU that needs the most holds at once besides its shards, of its budget"
            << (options.simulate ? "; auto confirmed its best candidates by simulation.\n"
                                 : ". Add --simulate to simulate every schedule (flow-level max-min; auto's best candidates too).\n");
  if (timings) {
    const auto& w = r.wall;
    std::cout << "\nwall time: load " << format(w.load) << ", plan " << format(w.plan) << ", bound " << format(w.bound)
              << ", basis " << format(w.basis) << ", strategies " << format(w.strategies) << ", tune " << format(w.tune)
              << ", systems " << format(w.systems) << "\n";
  }
}

void add_compare_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("compare",
                                 "What if: every strategy on a scenario, estimated, and the tuner's choice (mpirun -np N "
                                 "spreads the rows and the tuner's candidates)");
  auto path = std::make_shared<std::string>();
  auto profile = std::make_shared<std::string>(model::kDefaultProfile);
  auto json = std::make_shared<bool>(false);
  auto params = std::make_shared<std::string>();
  auto simulate = std::make_shared<bool>(false);
  auto extra = std::make_shared<std::vector<std::string>>();
  auto sets = std::make_shared<std::vector<std::string>>();
  auto jobs = std::make_shared<int>(0);
  auto max_staging = std::make_shared<std::string>();
  auto systems = std::make_shared<std::vector<std::string>>();
  auto timings = std::make_shared<bool>(false);
  auto delta = std::make_shared<std::string>();
  cmd->add_flag("--simulate", *simulate, "Also simulate every schedule (and let auto confirm its best by simulation)");
  cmd->add_option("scenario", *path, "Scenario YAML file (default: the source tree's scenarios/deepseek-v3-h100.yaml, DeepSeek-V3 on 2 x 256 DGX H100)");
  cmd->add_option("--profile", *profile, "Cost profile: reshard (its engine; default), links (the schedules alone), nemo_rl, miles, nccl or a system's (reshard systems)");
  cmd->add_option("--params", *params, "Cost parameters file (as written by reshard calibrate); overrides --profile");
  cmd->add_flag("--json", *json, "Print one JSON object");
  cmd->add_option("--strategy", *extra,
                  "Also compare this configured strategy, written as auto prints it (\"domain_grouped relay_ingress\"); repeatable (auto is always compared)");
  cmd->add_option("-j,--jobs", *jobs, "Threads that build, estimate and simulate schedules at once, per process (default: every core)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--systems", *systems,
                  "Also estimate other refit systems on this cluster: a profile name (reshard systems lists them) or all; repeatable")
      ->delimiter(',');
  cmd->add_flag("--timings", *timings,
                "Also print the wall time of each phase (load, plan, bound, basis, strategies, tune, systems); with --json "
                "as \"timings\"");
  add_max_staging_option(cmd, *max_staging);
  auto without_gpus = std::make_shared<std::string>();
  add_without_option(cmd, *without_gpus);
  add_set_option(cmd, *sets);
  add_delta_option(cmd, *delta);
  cmd->callback([path, profile, params, simulate, json, extra, sets, jobs, max_staging, systems, timings, without_gpus, delta] {
    add_delta_override(*delta, *sets);
    study::CompareOptions options;
    options.profile = *profile;
    options.params_file = *params;
    options.simulate = *simulate;
    for (const auto& s : *extra)
      if (s != "auto") options.configured.push_back(s);  // auto is always the last row
    options.threads = *jobs;
    options.max_staging = parse_max_staging(*max_staging);
    options.systems = *systems;
    const exec::ProcessGroup processes;
    try {
      run_compare(path->empty() ? std::string(RESHARD_SOURCE_DIR) + "/scenarios/deepseek-v3-h100.yaml" : *path, *sets,
                  *without_gpus, options, *json, *timings, processes);
    } catch (const model::Error&) {
      // Every process meets the same error (the same input, the results exchanged): process 0 says it.
      if (processes.rank() == 0) throw;
      std::this_thread::sleep_for(std::chrono::seconds(1));
      throw ReportedByFirstProcess{2};
    }
  });
}

}  // namespace reshard::cli
