// reshard plan SCENARIO [--strategy S|auto [-o schedule.json|schedule.rsched]] [--profile P | --params FILE]
// [--json]: the exact transfer set and the lower bound; with a strategy, its validated schedule (auto
// tuned for the profile or parameters file), written as JSON or the compact binary format.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>

#include "commands.hpp"
#include "reshard/exec/plan_file.hpp"
#include "reshard/model/planner.hpp"
#include "reshard/model/errors.hpp"
#include "reshard/model/memory.hpp"
#include "reshard/model/scenario.hpp"
#include "reshard/model/schedule.hpp"
#include "reshard/model/schedule_file.hpp"
#include "reshard/study/compare.hpp"
#include "inputs.hpp"
#include "progress.hpp"
#include "set_option.hpp"
#include "simulate_report.hpp"
#include "table.hpp"
#include "warnings.hpp"

namespace reshard::cli {

using namespace reshard::model;

namespace {

struct Stats {
  double max = 0, mean = 0;
  double imbalance() const { return mean > 0 ? max / mean : 0; }
};
Stats stats(const std::vector<Bytes>& v) {
  Stats s;
  if (v.empty()) return s;
  for (auto b : v) {
    s.max = std::max(s.max, b.as_double());
    s.mean += b.as_double();
  }
  s.mean /= static_cast<double>(v.size());
  return s;
}

// One side's GPU memory (LoadedScenario::memory) at its tightest GPU: the one whose weights +
// staging budget come nearest its limit, (weights + budget) / limit largest; where no GPU of the
// side has a known limit, the one with the most weights + budget. Ties: the lowest GPU.
struct SideMemory {
  GpuId gpu = -1;
  GpuMemoryUse use;                 // the tightest GPU's
  Bytes weights_max;                // the most weights any GPU of the side holds
  Bytes budget_min, budget_max;     // the side's staging budgets (0: unbounded)
  bool other_side = false;          // a GPU on both sides took the other side's smaller budget
};
SideMemory side_memory(const LoadedScenario& sc, const std::vector<GpuId>& gpus, const std::optional<Bytes>& refit) {
  SideMemory m;
  bool limited = false;
  double worst = -1;
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    const GpuId g = gpus[i];
    const GpuMemoryUse& u = sc.memory[static_cast<std::size_t>(g)];
    m.weights_max = std::max(m.weights_max, u.weights());
    m.budget_min = i == 0 ? u.budget : std::min(m.budget_min, u.budget);
    m.budget_max = std::max(m.budget_max, u.budget);
    m.other_side = m.other_side || u.budget != refit.value_or(default_refit_memory(u.capacity));
    const bool has_limit = u.limit.value > 0;
    const double need = (u.weights() + u.budget).as_double();
    const double score = has_limit ? need / u.limit.as_double() : need;
    if (has_limit < limited) continue;
    if (has_limit > limited || score > worst || (score == worst && g < m.gpu)) {
      limited = has_limit;
      worst = score;
      m.gpu = g;
      m.use = u;
    }
  }
  return m;
}

std::string fraction(double f) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", f);
  return buf;
}

// "staging 3.20 GB per GPU (default: 2 x min(2 % of GPU memory, 5 GiB)); weights + staging 47.1 GB
// of 72.0 GB (gpu_memory_utilization 0.9 x 80.0 GB) on GPU 300"
std::string memory_line(const LoadedScenario& sc, const SideMemory& m, bool destination) {
  const Scenario& s = sc.scenario;
  auto budget = [](Bytes b) { return b.value == 0 ? std::string("unbounded") : format(b); };
  const bool given = destination ? s.destination_refit_memory.has_value() : s.source_refit_memory.has_value();
  std::string out = "staging " + budget(m.budget_min) + (m.budget_min == m.budget_max ? "" : " to " + budget(m.budget_max)) +
                    " per GPU (" + (given ? "refit_memory" : "default: 2 x min(2 % of GPU memory, 5 GiB)") +
                    (m.other_side ? "; the other side's on GPUs of both sides where smaller" : "") + "); ";
  const GpuMemoryUse& u = m.use;
  out += "weights + staging " + format(u.weights() + u.budget);
  if (u.limit.value == 0) return out + " on GPU " + std::to_string(m.gpu) + " (the topology gives no GPU memory: not checked)";
  out += " of " + format(u.limit);
  if (u.limit != u.capacity)
    out += " (" + s.memory_fraction_key + " " + fraction(s.memory_fraction) + " x " + format(u.capacity) + ")";
  return out + " on GPU " + std::to_string(m.gpu);
}

nlohmann::json memory_json(const SideMemory& m) {
  return {{"gpu", m.gpu},
          {"weights_bytes", m.use.weights().value},
          {"budget_bytes", m.use.budget.value},
          {"limit_bytes", m.use.limit.value},
          {"weights_bytes_max", m.weights_max.value}};
}

}  // namespace

struct PlanArgs {
  std::string path, strategy, output, profile = "reshard", params, max_staging;
  std::vector<std::string> sets;
  bool json = false;
  bool programs = false;  // -o writes the refit plan file (every GPU's program), not the schedule
};

// Bytes per tensor class: logical, needed (summed over destination ranks), pieces.
struct ClassBytes {
  std::vector<double> logical = std::vector<double>(kTensorClassCount, 0), needed = logical;
  std::vector<std::int64_t> pieces = std::vector<std::int64_t>(kTensorClassCount, 0);
};

ClassBytes class_bytes(const LoadedScenario& sc, const TransferSet& ts) {
  ClassBytes cls;
  for (const auto& t : sc.inventory.tensors()) cls.logical[static_cast<std::size_t>(t.cls)] += t.bytes().as_double();
  for (const auto& p : ts.pieces) {
    const auto c = static_cast<std::size_t>(sc.inventory.tensor(p.tensor).cls);
    cls.needed[c] += p.bytes.as_double() * static_cast<double>(sc.destination.rank_set(p.needers).size());
    ++cls.pieces[c];
  }
  return cls;
}

// `plan --json`, schema reshard-plan-1 (docs/json-schema.md).
void print_plan_json(const LoadedScenario& sc, const TransferSet& ts, const LowerBound& lb, const ClassBytes& cls,
                     const Stats& recv, const Stats& sent, std::size_t world_size, const std::optional<Schedule>& schedule,
                     const std::string& output) {
  auto bytes = [](double b) { return static_cast<std::int64_t>(std::llround(b)); };
  auto spread = [&](const Stats& st) {
    return nlohmann::json{{"max", bytes(st.max)}, {"mean", bytes(st.mean)}, {"imbalance", st.imbalance()}};
  };
  nlohmann::json j;
  j["schema"] = "reshard-plan-1";
  j["scenario"] = sc.scenario.name;
  j["model"] = sc.inventory.config().name;
  j["parameters"] = sc.inventory.parameters();
  j.update(study::plan_json(ts, lb));
  j["source_gpus"] = sc.source.world_size();
  j["destination_gpus"] = sc.destination.world_size();
  j["colocated"] = sc.scenario.colocated;
  j["shared_gpus"] = shared_gpus(sc.scenario);
  j["conventions"] = {{"source", sc.source.conventions()}, {"destination", sc.destination.conventions()}};
  j["world_size"] = world_size;
  j["memory"] = {{"source", memory_json(side_memory(sc, sc.source.gpus(), sc.scenario.source_refit_memory))},
                 {"destination", memory_json(side_memory(sc, sc.destination.gpus(), sc.scenario.destination_refit_memory))}};
  nlohmann::json by_class = nlohmann::json::object();
  for (int c = 0; c < kTensorClassCount; ++c)
    if (cls.logical[static_cast<std::size_t>(c)] > 0)
      by_class[to_string(static_cast<TensorClass>(c))] = {{"logical_bytes", bytes(cls.logical[static_cast<std::size_t>(c)])},
                                                           {"bytes_needed", bytes(cls.needed[static_cast<std::size_t>(c)])},
                                                           {"pieces", cls.pieces[static_cast<std::size_t>(c)]}};
  j["by_class"] = by_class;
  if (schedule) {
    j["strategy"] = to_string(schedule->params.strategy);
    j["params"] = describe(schedule->params);
    j["operations"] = schedule->ops.size();
    j["buffers"] = schedule->buffers.size();
    const StagingMemory memory = staging_memory(*schedule);
    j["peak_staging_bytes"] = memory.peak.value;
    j["peak_staging_gpu"] = memory.gpu;
    if (!output.empty()) j["schedule_file"] = output;
  }
  j["destination_received_bytes"] = spread(recv);
  j["source_sent_bytes"] = spread(sent);
  std::cout << j.dump(2) << '\n';
}

void run_plan(const PlanArgs& a) {
  const std::string& output = a.output;
  const auto max_staging = parse_max_staging(a.max_staging);
  auto progress = ProgressLine::for_stderr(a.json);
  progress.stage("load scenario");
  const LoadedScenario sc = load_scenario(std::filesystem::path(a.path), parse_sets(a.sets));
  progress.clear();  // warnings on lines of their own
  print_warnings(sc);
  progress.stage("plan");
  const TransferSet ts = plan(sc.inventory, sc.source, sc.destination);
  progress.stage("lower bound");
  const LowerBound lb = lower_bound(ts, sc.source, sc.destination, sc.topology);
  const GpuTraffic traffic = gpu_traffic(ts, sc.source, sc.destination);

  // With --strategy: the schedule, validated, written for simulate / exec to replay unchanged.
  std::optional<Schedule> schedule;
  if (!a.strategy.empty()) {
    const CostParams cost = CostParams::named_or_loaded(a.profile, a.params);  // what auto is tuned for
    const StrategyParams params = strategy_params(a.strategy, sc, ts, cost, 0, progress.callback(), max_staging);
    progress.stage("build schedule");
    schedule = build_schedule(ts, sc.inventory, sc.source, sc.destination, sc.topology, params, staging_budgets(sc, max_staging));
    schedule->scenario = sc.scenario.name;
    progress.stage("validate");
    validate(*schedule, ts, sc.inventory, sc.source, sc.destination);
    if (!output.empty()) {
      progress.stage("write " + output);
      if (a.programs) {
        progress.stage("programs");
        const exec::RunPlan rp = exec::make_run_plan(sc, ts, *schedule);
        std::ofstream out(output, std::ios::binary);
        out << exec::refit_plan_json(rp);
        if (!out) throw ConfigError(output, 0, "-o", "cannot write the refit plan file");
      } else {
        // The scenario file relative to the schedule's folder, so the schedule finds it from anywhere.
        const auto folder = std::filesystem::absolute(output).parent_path();
        schedule->scenario_file = std::filesystem::absolute(sc.scenario.file).lexically_relative(folder).generic_string();
        write_schedule_file(output, *schedule);
      }
    }
  }

  std::set<GpuId> all(sc.source.gpus().begin(), sc.source.gpus().end());
  all.insert(sc.destination.gpus().begin(), sc.destination.gpus().end());

  const ClassBytes cls = class_bytes(sc, ts);
  const Stats recv = stats(traffic.dest_received), sent = stats(traffic.source_sent);
  progress.clear();

  if (a.json) {
    print_plan_json(sc, ts, lb, cls, recv, sent, all.size(), schedule, output);
    return;
  }

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
                {"source memory", memory_line(sc, side_memory(sc, sc.source.gpus(), sc.scenario.source_refit_memory), false)},
                {"destination memory",
                 memory_line(sc, side_memory(sc, sc.destination.gpus(), sc.scenario.destination_refit_memory), true)}};
  if (sc.scenario.precision.format != QuantFormat::None) {
    fields.insert(fields.begin() + 5, {"precision", precision_line(sc)});
    fields.push_back({"conversion", format(ts.conversion.source_bytes) + " read and written by the source GPUs, " +
                                        format(ts.conversion.destination_bytes) + " by the destination GPUs"});
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
    if (cls.logical[i] <= 0) continue;
    by_class.add({to_string(static_cast<TensorClass>(c)), format(Bytes{static_cast<std::int64_t>(cls.logical[i])}),
             fixed(100.0 * cls.logical[i] / ts.logical_bytes.as_double(), 1) + " %",
             format(Bytes{static_cast<std::int64_t>(cls.needed[i])}), std::to_string(cls.pieces[i])});
  }
  by_class.print(std::cout);
  std::cout << '\n';
  Table per_gpu({"per GPU", "max>", "mean>", "max/mean>"});
  per_gpu.add({"destination receives", format(Bytes{static_cast<std::int64_t>(recv.max)}),
               format(Bytes{static_cast<std::int64_t>(recv.mean)}), fixed(recv.imbalance(), 2)});
  per_gpu.add({"source sends (even split over holders)", format(Bytes{static_cast<std::int64_t>(sent.max)}),
               format(Bytes{static_cast<std::int64_t>(sent.mean)}), fixed(sent.imbalance(), 2)});
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
              << schedule->buffers.size() << " buffers, validated"
              << (output.empty() ? "" : std::string(a.programs ? ", every GPU's program written to " : ", written to ") + output)
              << "\nstaging: " << staging_text(memory.peak, memory.gpu, staging_budget(*schedule, memory.gpu)) << ", in step "
              << memory.step << " of "
              << memory.steps << (memory.over_budget > 0 ? "; " + std::to_string(memory.over_budget) + " GPU(s) OVER budget" : "")
              << "\n";
  }
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
  cmd->add_option("--profile", a->profile, "Implementation profile auto tunes for: reshard or nemo_rl");
  cmd->add_option("--params", a->params, "Cost parameters file (as written by reshard calibrate); overrides --profile");
  add_max_staging_option(cmd, a->max_staging);
  cmd->add_flag("--json", a->json, "Print one JSON object");
  add_set_option(cmd, a->sets);
  cmd->callback([a] {
    if (!a->output.empty() && a->strategy.empty()) throw CLI::ValidationError("--output", "needs --strategy");
    if (a->programs && a->output.empty()) throw CLI::ValidationError("--programs", "needs -o FILE");
    run_plan(*a);
  });
}

}  // namespace reshard::cli
