// reshard plan SCENARIO [--strategy S [-o schedule.json|schedule.rsched]] [--json]: the exact transfer set and the
// lower bound; with a strategy, its validated schedule.
#include <algorithm>
#include <fstream>
#include <optional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>

#include "commands.hpp"
#include "reshard/model/planner.hpp"
#include "reshard/model/errors.hpp"
#include "reshard/model/scenario.hpp"
#include "reshard/model/schedule.hpp"
#include "reshard/model/schedule_file.hpp"
#include "reshard/model/tuner.hpp"
#include "set_option.hpp"
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

}  // namespace

void run_plan(const std::string& path, const std::vector<std::string>& sets, const std::string& strategy,
              const std::string& output, bool json) {
  const LoadedScenario sc = load_scenario(std::filesystem::path(path), parse_sets(sets));
  print_warnings(sc.topology);
  const TransferSet ts = plan(sc.inventory, sc.source, sc.destination);
  const LowerBound lb = lower_bound(ts, sc.source, sc.destination, sc.topology);
  const GpuTraffic traffic = gpu_traffic(ts, sc.source, sc.destination);

  // With --strategy: the schedule, validated, written for simulate / exec to replay unchanged.
  std::optional<Schedule> schedule;
  if (!strategy.empty()) {
    StrategyParams params;
    if (strategy == "auto") {
      params = tune(ts, sc.inventory, sc.source, sc.destination, sc.topology, CostParams::profile_named("reshard")).best.params;
    } else {
      params = parse_strategy(strategy);
    }
    schedule = build_schedule(ts, sc.inventory, sc.source, sc.destination, sc.topology, params);
    schedule->scenario = sc.scenario.name;
    validate(*schedule, ts, sc.inventory, sc.source, sc.destination);
    if (!output.empty()) write_schedule_file(output, *schedule);
  }

  std::set<GpuId> all(sc.source.gpus().begin(), sc.source.gpus().end());
  all.insert(sc.destination.gpus().begin(), sc.destination.gpus().end());

  // Bytes per tensor class: logical, needed (summed over destination ranks), pieces.
  std::vector<double> cls_logical(kTensorClassCount, 0), cls_needed(kTensorClassCount, 0);
  std::vector<std::int64_t> cls_pieces(kTensorClassCount, 0);
  for (const auto& t : sc.inventory.tensors()) cls_logical[static_cast<std::size_t>(t.cls)] += t.bytes().as_double();
  for (const auto& p : ts.pieces) {
    const auto c = static_cast<std::size_t>(sc.inventory.tensor(p.tensor).cls);
    cls_needed[c] += p.bytes.as_double() * static_cast<double>(sc.destination.rank_set(p.needers).size());
    ++cls_pieces[c];
  }
  const Stats recv = stats(traffic.dest_received), sent = stats(traffic.source_sent);

  if (json) {
    nlohmann::json j;
    j["scenario"] = sc.scenario.name;
    j["parameters"] = sc.inventory.parameters();
    j["logical_bytes"] = ts.logical_bytes.value;
    j["source_gpus"] = sc.source.world_size();
    j["dest_gpus"] = sc.destination.world_size();
    j["world_size"] = all.size();
    j["pieces"] = ts.pieces.size();
    j["bytes_needed"] = ts.bytes_needed.value;
    j["bytes_to_move"] = ts.bytes_to_move.value;
    j["lower_bound_s"] = lb.time.value;
    j["lower_bound_cut"] = {{"cut", lb.binding.cut}, {"where", lb.binding.where}};
    nlohmann::json cuts = nlohmann::json::array();
    for (const auto& c : lb.cuts)
      cuts.push_back({{"cut", c.cut}, {"where", c.where}, {"bytes", c.bytes.value},
                      {"capacity_Bps", c.capacity.value}, {"time_s", c.time().value}});
    j["cuts"] = cuts;
    nlohmann::json by_class = nlohmann::json::object();
    for (int c = 0; c < kTensorClassCount; ++c)
      if (cls_logical[static_cast<std::size_t>(c)] > 0)
        by_class[to_string(static_cast<TensorClass>(c))] = {{"logical_bytes", cls_logical[static_cast<std::size_t>(c)]},
                                                             {"bytes_needed", cls_needed[static_cast<std::size_t>(c)]},
                                                             {"pieces", cls_pieces[static_cast<std::size_t>(c)]}};
    j["by_class"] = by_class;
    if (schedule) {
      j["strategy"] = schedule->params.strategy;
      j["operations"] = schedule->ops.size();
      j["buffers"] = schedule->buffers.size();
      if (!output.empty()) j["schedule_file"] = output;
    }
    j["dest_received_bytes"] = {{"max", recv.max}, {"mean", recv.mean}, {"imbalance", recv.imbalance()}};
    j["source_sent_bytes"] = {{"max", sent.max}, {"mean", sent.mean}, {"imbalance", sent.imbalance()}};
    std::cout << j.dump(2) << '\n';
    return;
  }

  const auto& cfg = sc.inventory.config();
  print_fields(std::cout,
               {{"scenario", sc.scenario.name},
                {"model", cfg.name + ", " + fixed(static_cast<double>(sc.inventory.parameters()) / 1e9, 2) +
                              " B parameters, " + format(ts.logical_bytes) +
                              (sc.scenario.model_options.include_mtp ? " (MTP included)" : " (MTP excluded)")},
                {"topology", sc.topology.name() + ", " + std::to_string(sc.topology.gpu_count()) + " GPUs"},
                {"source", sc.source.description()},
                {"destination", sc.destination.description()},
                {"pieces", std::to_string(ts.pieces.size())},
                {"bytes needed", format(ts.bytes_needed) + " (" +
                                     fixed(ts.bytes_needed.as_double() / ts.logical_bytes.as_double(), 2) +
                                     " x the model)"},
                {"bytes to move", format(ts.bytes_to_move)}});
  std::cout << '\n';
  Table cls({"class", "logical>", "share>", "needed>", "pieces>"});
  for (int c = 0; c < kTensorClassCount; ++c) {
    const auto i = static_cast<std::size_t>(c);
    if (cls_logical[i] <= 0) continue;
    cls.add({to_string(static_cast<TensorClass>(c)), format(Bytes{static_cast<std::int64_t>(cls_logical[i])}),
             fixed(100.0 * cls_logical[i] / ts.logical_bytes.as_double(), 1) + " %",
             format(Bytes{static_cast<std::int64_t>(cls_needed[i])}), std::to_string(cls_pieces[i])});
  }
  cls.print(std::cout);
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
  if (schedule)
    std::cout << "schedule: " << describe(schedule->params) << ", " << schedule->ops.size() << " operations, "
              << schedule->buffers.size() << " buffers, validated" << (output.empty() ? "" : ", written to " + output)
              << "\n";
}

void add_plan_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("plan", "Plan the exact transfer set of a scenario and its lower bound");
  auto path = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  auto strategy = std::make_shared<std::string>();
  auto output = std::make_shared<std::string>();
  cmd->add_option("scenario", *path, "Scenario YAML file")->required();
  cmd->add_option("--strategy", *strategy, "Also build, validate and keep this strategy's schedule: auto, or a name with parameters as compare prints them (\"domain_grouped relay_ingress\")");
  cmd->add_option("-o,--output", *output, "Write the schedule (with --strategy): JSON when FILE ends in .json, else the compact binary format");
  cmd->add_flag("--json", *json, "Print one JSON object");
  auto sets = std::make_shared<std::vector<std::string>>();
  add_set_option(cmd, *sets);
  cmd->callback([path, sets, strategy, output, json] {
    if (!output->empty() && strategy->empty()) throw CLI::ValidationError("--output", "needs --strategy");
    run_plan(*path, *sets, *strategy, *output, *json);
  });
}

}  // namespace reshard::cli
