// reshard compare SCENARIO [--profile P] [--json]: the main what-if. Every strategy's schedule,
// estimated; the auto tuner's choice.
#include <optional>
#include <iostream>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "reshard/model/cost.hpp"
#include "reshard/model/scenario.hpp"
#include "reshard/model/schedule.hpp"
#include "reshard/model/tuner.hpp"
#include "reshard/sim/schedule_sim.hpp"
#include "table.hpp"
#include "warnings.hpp"

namespace reshard::cli {

using namespace reshard::model;

namespace {

struct Row {
  std::string name;
  StrategyParams params;
  Prediction pred;
  std::optional<Seconds> simulated;
};

// What sets an estimate: the largest of its terms.
std::string limited_by(const Prediction& p) {
  const double hw = std::max(p.pipeline.value, p.critical_path.value);
  if (p.overheads.value > hw) return "overheads";
  if (p.critical_path > p.pipeline) return "dependencies";
  const double filled = p.pipeline.value - p.latency_path.value;  // bandwidth bound times the fill
  if (p.latency_path.value > filled) return "latency";
  std::string s = "bandwidth";
  if (filled > p.bandwidth_bound.value * 1.001) s += "+fill";
  if (p.latency_path.value > 0.01 * p.pipeline.value) s += "+latency";
  return s;
}

std::string link_name(const Topology& topo, LinkId l) {
  if (l < 0) return "-";
  const auto& k = topo.link(l);
  return std::string(to_string(k.kind)) + " " + topo.device(k.from).name + " -> " + topo.device(k.to).name;
}

}  // namespace

void run_compare(const std::string& path, const std::string& profile, const std::string& params_file, bool simulate,
                 bool json, const std::vector<std::string>& extra) {
  const LoadedScenario sc = load_scenario(std::filesystem::path(path));
  print_warnings(sc.topology);
  const TransferSet ts = plan(sc.inventory, sc.source, sc.destination);
  const LowerBound lb = lower_bound(ts, sc.source, sc.destination, sc.topology);
  const CostParams cost = params_file.empty() ? CostParams::profile_named(profile) : CostParams::load(params_file);
  // Progress on stderr: the estimate as soon as it is known, then the simulation (seconds to
  // minutes at scale) with its size and wall time. `described`: named by its full description.
  auto evaluate = [&](const StrategyParams& p, bool described) {
    Schedule s = build_schedule(ts, sc.inventory, sc.source, sc.destination, sc.topology, p);
    Row r{described ? describe(s.params) : std::string(to_string(p.strategy)), s.params, estimate(s, ts, sc.inventory, sc.topology, cost),
          std::nullopt};
    if (!json) std::cerr << "  " << r.name << ": " << format(r.pred.time) << (simulate ? ", simulating..." : "") << "\n";
    if (simulate) {
      sim::ScheduleSimOptions options;
      options.overheads = r.pred.overheads;
      const auto result = sim::simulate_schedule(s, sc.topology, cost, options);
      r.simulated = result.makespan;
      if (!json)
        std::cerr << "  " << r.name << ": simulated " << format(result.makespan) << " (" << result.flow_count()
                  << " flows, " << result.result.simulated_flows << " simulated) in " << format(result.wall) << "\n";
    }
    return r;
  };
  std::vector<Row> rows;
  for (Strategy strategy : all_strategies()) {
    StrategyParams p;
    p.strategy = strategy;
    rows.push_back(evaluate(p, false));
  }
  for (const auto& spec : extra)  // configured strategies the user asked about, by their description
    rows.push_back(evaluate(parse_strategy(spec), true));
  // auto: the tuner's deterministic search, scored by the estimate.
  TuneOptions topts;
  for (const auto& r : rows) topts.seeds.push_back({r.params, r.pred, r.simulated});
  if (simulate)  // confirm the best candidates by simulation
    topts.confirm = [&](const Schedule& s) {
      return sim::simulated_makespan(s, sc.topology, cost, estimate(s, ts, sc.inventory, sc.topology, cost).overheads);
    };
  if (!json)
    topts.progress = [&](const StrategyParams& p, const Prediction& pr) {
      std::cerr << "  auto: " << describe(p) << " -> " << format(pr.time) << "\n";
    };
  const TuneResult tuned = tune(ts, sc.inventory, sc.source, sc.destination, sc.topology, cost, topts);
  Row best{"auto", tuned.best.params, tuned.best.prediction, tuned.best.confirmed};
  rows.push_back(best);
  const double baseline = rows.front().pred.time.value;

  if (json) {
    nlohmann::json j;
    j["scenario"] = sc.scenario.name;
    j["profile"] = profile;
    j["lower_bound_s"] = lb.time.value;
    auto& arr = j["strategies"] = nlohmann::json::array();
    for (const auto& r : rows)
      arr.push_back({{"name", r.name}, {"params", describe(r.params)}, {"estimate_s", r.pred.time.value},
                     {"simulated_s", r.simulated ? nlohmann::json(r.simulated->value) : nlohmann::json(nullptr)}, {"network_bytes", r.pred.network_bytes.value},
                     {"nvlink_bytes", r.pred.nvlink_bytes.value}, {"bottleneck", link_name(sc.topology, r.pred.bottleneck)},
                     {"bandwidth_bound_s", r.pred.bandwidth_bound.value}, {"critical_path_s", r.pred.critical_path.value},
                     {"latency_path_s", r.pred.latency_path.value},
                     {"overheads_s", r.pred.overheads.value}, {"operations", r.pred.operations}});
    j["best"] = describe(best.params);
    std::cout << j.dump(2) << '\n';
    return;
  }
  print_fields(std::cout, {{"scenario", sc.scenario.name},
                           {"source", sc.source.description()},
                           {"destination", sc.destination.description()},
                           {"profile", profile},
                           {"lower bound", format(lb.time) + " (" + lb.binding.cut + ", " + lb.binding.where + ")"}});
  std::cout << '\n';
  Table t({"strategy", "estimate>", "simulated>", "x bound>", "speedup>", "network>", "NVLink>", "ops>", "limited by", "bottleneck link"});
  for (const auto& r : rows)
    t.add({r.name, format(r.pred.time), r.simulated ? format(*r.simulated) : "-", fixed(r.pred.time.value / lb.time.value, 2), fixed(baseline / r.pred.time.value, 1) + "x",
           format(r.pred.network_bytes), format(r.pred.nvlink_bytes), std::to_string(r.pred.operations),
           limited_by(r.pred),
           link_name(sc.topology, r.pred.bottleneck)});
  t.print(std::cout);
  std::cout << "\nauto chose: " << describe(best.params) << " (" << format(best.pred.time) << ")\n"
            << "speedup is over gather_broadcast; x bound is the ratio of the estimate to the lower bound"
            << (simulate ? "; auto confirmed its best candidates by simulation.\n"
                         : ". Add --simulate to simulate every schedule (flow-level max-min; auto's best candidates too).\n");
}

void add_compare_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("compare", "What if: every strategy on a scenario, estimated, and the tuner's choice");
  auto path = std::make_shared<std::string>();
  auto profile = std::make_shared<std::string>("reshard");
  auto json = std::make_shared<bool>(false);
  auto params = std::make_shared<std::string>();
  auto simulate = std::make_shared<bool>(false);
  auto extra = std::make_shared<std::vector<std::string>>();
  cmd->add_flag("--simulate", *simulate, "Also simulate every schedule (and let auto confirm its best by simulation)");
  cmd->add_option("scenario", *path, "Scenario YAML file (default: the embedded DeepSeek-V3 on DGX H100)");
  cmd->add_option("--profile", *profile, "Implementation profile: reshard or nemo_rl");
  cmd->add_option("--params", *params, "Cost parameters file (as written by reshard calibrate); overrides --profile");
  cmd->add_flag("--json", *json, "Print one JSON object");
  cmd->add_option("--strategy", *extra,
                  "Also compare this configured strategy, written as auto prints it (\"domain_grouped relay_ingress\"); repeatable");
  cmd->callback([path, profile, params, simulate, json, extra] {
    run_compare(path->empty() ? std::string(RESHARD_SOURCE_DIR) + "/scenarios/deepseek-v3-h100.yaml" : *path, *profile,
                *params, *simulate, *json, *extra);
  });
}

}  // namespace reshard::cli
