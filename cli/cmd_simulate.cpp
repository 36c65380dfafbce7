// `reshard simulate`: the flow simulator (docs/design.md §9) in three modes.
//   simulate SCENARIO [--strategy S|auto] [--max-chain N] [--profile P | --params FILE]
//       builds the strategy's schedule for the scenario and simulates it (sim::simulate_schedule);
//   simulate SCHEDULE(.json|.rsched) [--scenario SCENARIO] [--profile P | --params FILE]
//       a schedule written by model::to_json, on the topology of the scenario it names or
//       --scenario gives (cli/inputs.hpp: schedule_scenario_file); refused when it was built
//       for another plan: piece_count differs, or model::validate rejects it);
//   simulate --topology T --flows F.csv
//       raw GPU-to-GPU traffic (sim::traffic_flows);
//   simulate --topology T --collective broadcast|all_gather --ranks GPUS --size S [--channels N] [--chunk C]
//       an NCCL ring collective (model/collective.hpp), reported as nccl-tests reports it.
// Each with --json, --trace F (Chrome trace) and --dump-flows F (every simulated flow with its times);
// schedule modes draw their progress on a terminal's stderr (cli/progress.hpp).
#include <fstream>
#include <iostream>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "reshard/model/defaults.hpp"
#include "reshard/model/collective.hpp"
#include "reshard/model/cost.hpp"
#include "reshard/model/errors.hpp"
#include "reshard/model/planner.hpp"
#include "reshard/model/memory.hpp"
#include "reshard/model/scenario.hpp"
#include "reshard/model/schedule.hpp"
#include "reshard/model/topology.hpp"
#include "reshard/model/tuner.hpp"
#include "reshard/sim/flow_io.hpp"
#include "reshard/sim/flow_sim.hpp"
#include "reshard/sim/schedule_sim.hpp"
#include "reshard/sim/simulate_json.hpp"
#include "reshard/sim/trace.hpp"
#include "reshard/sim/traffic.hpp"
#include "reshard/study/plan_summary.hpp"
#include "failure.hpp"
#include "inputs.hpp"
#include "progress.hpp"
#include "set_option.hpp"
#include "simulate_report.hpp"
#include "table.hpp"
#include "warnings.hpp"

namespace reshard::cli {

namespace {

struct SimulateOptions {
  std::string input;  // scenario YAML or schedule JSON
  std::string scenario;
  std::vector<std::string> sets;  // --set overrides of the scenario
  std::string delta;              // --delta: a delta refit's density
  std::string strategy = model::kDefaultStrategy;
  int max_chain = 0;  // 0: the default (8)
  std::string max_staging;  // --max-staging: auto's cap on one GPU's staging memory
  std::string without;      // --without: the lost GPUs
  FailureOptions failure;   // --fail, --detect
  std::string profile = model::kDefaultProfile;
  std::string params;  // cost parameters file (replaces the profile)
  std::string topology;
  std::string flows;
  std::string collective;
  std::string ranks;
  std::string size;
  int channels = 8;
  std::string chunk;  // empty: model::kDefaultChunk
  std::string trace;
  std::string dump_flows;
  bool json = false;
  bool no_symmetry = false;
  std::string rate_solver = "auto";  // a name of sim::kRateSolvers (checked by the option)
  double jitter = 0;
  std::uint64_t seed = 1;
};

sim::RateSolver rate_solver(const SimulateOptions& o) {
  for (const auto& s : sim::kRateSolvers)
    if (s.name == o.rate_solver) return s.solver;
  throw model::ConfigError("", 0, "--rate-solver", "unknown engine '" + o.rate_solver + "'");
}

void add_jitter(nlohmann::json& j, const SimulateOptions& o) {
  j["capacity_jitter"] = o.jitter;
  j["jitter_seed"] = o.seed;
}

void print_jitter(const SimulateOptions& o) {
  if (o.jitter > 0)
    std::cout << "\nlink capacities jittered by up to " << o.jitter << " relative (seed " << o.seed
              << "); other seeds give the spread\n";
}

void run_traffic(const SimulateOptions& o) {
  if (o.topology.empty() || o.flows.empty())
    throw model::ConfigError("", 0, "--flows", "raw traffic replay needs both --topology T and --flows F.csv");
  const auto topology = model::Topology::load(o.topology);
  print_warnings(topology);
  const auto transfers = sim::read_transfers_csv(o.flows);
  auto traffic = sim::traffic_flows(topology, transfers, o.flows);
  sim::jitter_capacities(traffic.network, o.jitter, o.seed);
  sim::SimOptions options;
  options.symmetry_quotient = !o.no_symmetry;
  options.solver = rate_solver(o);
  if (!o.trace.empty()) options.link_group = traffic.link_group;
  const auto result = sim::simulate(traffic.network, traffic.flows, options);
  if (!o.dump_flows.empty()) sim::write_flow_dump(o.dump_flows, traffic.network, traffic.flows, result);
  if (!o.trace.empty())
    sim::write_chrome_trace(o.trace, traffic.network, traffic.flows, result,
                            sim::traffic_trace_layout(topology, transfers, traffic));
  if (o.json) {
    auto j = sim::simulation_json(result, transfers.size(), traffic.flows.size());
    add_jitter(j, o);
    std::cout << j.dump(2) << '\n';
    return;
  }
  std::cout << "topology: " << topology.name() << " (" << topology.gpu_count() << " GPUs), flows from " << o.flows
            << "\n\n";
  print_simulation_report(std::cout, traffic.network, traffic.flows, result, transfers.size());
  print_jitter(o);
  if (!o.dump_flows.empty()) std::cout << "\nflows written to " << o.dump_flows << '\n';
  if (!o.trace.empty()) std::cout << "trace written to " << o.trace << " (open in https://ui.perfetto.dev)\n";
}

// An NCCL ring collective, with nccl-tests' algbw and busbw.
void run_collective(const SimulateOptions& o) {
  if (o.topology.empty() || o.ranks.empty() || o.size.empty())
    throw model::ConfigError("", 0, "--collective", "a collective needs --topology T, --ranks GPUS and --size S");
  const auto topology = model::Topology::load(o.topology);
  model::CollectiveSpec spec;
  spec.kind = model::parse_collective(o.collective);
  try {
    spec.gpus = model::parse_gpu_list(o.ranks);
    spec.size = model::parse_size(o.size);
    if (!o.chunk.empty()) spec.chunk = model::parse_size(o.chunk);
  } catch (const std::invalid_argument& e) {
    throw model::ConfigError("", 0, "--collective", e.what());
  }
  spec.channels = o.channels;
  const model::Schedule schedule = model::collective_schedule(spec, topology);
  const model::CostParams cost = model::CostParams::named_or_loaded(o.profile, o.params);
  const model::Prediction prediction = model::estimate(schedule, model::TransferSet{}, model::Inventory{}, topology, cost);
  sim::ScheduleSimOptions options;
  options.symmetry_quotient = !o.no_symmetry;
  options.rate_solver = rate_solver(o);
  options.capacity_jitter = o.jitter;
  options.jitter_seed = o.seed;
  const auto sim = sim::simulate_schedule(schedule, topology, cost, options);
  const auto n = static_cast<std::int32_t>(spec.gpus.size());
  const double factor = model::bus_bandwidth_factor(spec.kind, n);
  const double bytes = spec.size.as_double();
  auto algbw = [&](model::Seconds t) { return t.value > 0 ? bytes / t.value : 0.0; };
  if (o.json) {
    nlohmann::json j{{"schema", "reshard-simulate-collective-1"},
                     {"collective", model::to_string(spec.kind)},
                     {"topology", topology.name()},
                     {"gpus", n},
                     {"size_bytes", spec.size.value},
                     {"channels", spec.channels},
                     {"chunk_bytes", spec.chunk.value},
                     {"profile", cost.profile},
                     {"simulated_s", sim.makespan.value},
                     {"estimate_s", prediction.time.value},
                     {"algbw_Bps", algbw(sim.makespan)},
                     {"busbw_Bps", algbw(sim.makespan) * factor},
                     {"estimate_busbw_Bps", algbw(prediction.time) * factor},
                     {"operations", schedule.ops.size()},
                     {"events", sim.events},
                     {"wall_s", sim.wall.value}};
    add_jitter(j, o);
    std::cout << j.dump(2) << '\n';
    return;
  }
  std::cout << model::to_string(spec.kind) << " of " << model::format(spec.size) << " on " << n << " GPUs of "
            << topology.name() << ", " << spec.channels << " channels, " << model::format(spec.chunk)
            << " chunks, profile " << cost.profile << "\n"
            << "simulated: " << model::format(sim.makespan) << "  algbw " << model::format(model::BytesPerSecond{algbw(sim.makespan)})
            << "  busbw " << model::format(model::BytesPerSecond{algbw(sim.makespan) * factor}) << "\n"
            << "estimate:  " << model::format(prediction.time) << "  busbw "
            << model::format(model::BytesPerSecond{algbw(prediction.time) * factor}) << "\n";
  print_jitter(o);
}

void run_schedule(const SimulateOptions& o) {
  const bool from_file = is_schedule_file(o.input);
  if (!from_file && !o.scenario.empty())
    throw model::ConfigError(o.input, 0, "--scenario", "--scenario is for schedule files (.json or binary); the input is a scenario");
  if (!o.topology.empty())
    throw model::ConfigError(o.input, 0, "--topology", "--topology is for raw traffic (--flows); the scenario names its topology");
  auto progress = ProgressLine::for_stderr(o.json);
  const model::ScheduleRequest request = schedule_request(o.strategy, o.profile, o.params, o.max_staging, o.max_chain, progress.callback());
  model::Schedule schedule;
  if (from_file) {
    progress.stage("read schedule");
    schedule = model::read_schedule_file(o.input);
  }
  const std::string scenario_file = from_file ? schedule_scenario_file(o.input, schedule.scenario, schedule.scenario_file, o.scenario) : o.input;
  progress.stage("plan");
  model::LoadedScenario loaded = model::load_scenario(std::filesystem::path(scenario_file), model::parse_overrides(o.sets));
  progress.clear();  // warnings on lines of their own
  print_warnings(loaded);
  std::optional<model::MembershipChange> change;
  const model::PlannedScenario planned = without(model::PlannedScenario(std::move(loaded)), o.without, change);
  const model::LoadedScenario& sc = planned.scenario();
  const model::TransferSet& ts = planned.transfers();
  const model::CostParams cost = model::CostParams::named_or_loaded(o.profile, o.params);
  if (from_file) {
    if (schedule.piece_count != static_cast<std::int32_t>(ts.pieces.size()))
      throw model::ConfigError(o.input, 0, "piece_count",
                               "the schedule was built for " + std::to_string(schedule.piece_count) +
                                   " pieces, but scenario " + scenario_file + " plans " + std::to_string(ts.pieces.size()) +
                                   "; it belongs to another scenario");
    try {
      model::check_schedule_gpus(schedule, sc.topology.gpu_count());
      model::validate(schedule, ts, sc.inventory, sc.source, sc.destination);
    } catch (const model::ScheduleError& e) {
      throw model::ConfigError(o.input, 0, "ops", "not a valid schedule for " + scenario_file + ": " + e.what());
    }
  } else {
    const model::StrategyParams params = planned.params_for(request);
    progress.stage("build schedule");
    schedule = planned.schedule_for(params, planned.budgets(request.max_staging));
  }
  progress.stage("estimate");
  const model::Prediction prediction = model::estimate(schedule, ts, sc.inventory, sc.topology, cost);
  sim::ScheduleSimOptions options = sim::closing_terms(prediction);
  options.link_kind_timeline = !o.trace.empty();
  options.symmetry_quotient = !o.no_symmetry;
  options.rate_solver = rate_solver(o);
  options.capacity_jitter = o.jitter;
  options.jitter_seed = o.seed;
  options.keep_flows = !o.dump_flows.empty() || !o.trace.empty();
  progress.stage("build flows");
  options.progress = progress.callback();
  const auto sim = sim::simulate_schedule(schedule, sc.topology, cost, options);
  progress.stage("price the failure");
  const std::optional<FailureReport> failure = price_failure_option(o.failure, planned, schedule, sim, cost);
  progress.clear();

  sim::ScheduleReference ref;
  ref.scenario = sc.scenario.name;
  ref.strategy = model::describe(schedule.params) + (from_file ? " (from " + o.input + ")" : "");
  if (from_file) ref.schedule_file = o.input;
  ref.profile = cost.profile;
  ref.estimate = prediction.time;
  ref.staging_peak = prediction.staging_peak;
  ref.staging_gpu = prediction.staging_gpu;
  ref.staging_budget = model::staging_budget(schedule, prediction.staging_gpu);
  ref.lower_bound = model::lower_bound(ts, sc.source, sc.destination, sc.topology);
  if (sc.scenario.precision.format != model::QuantFormat::None) ref.precision = precision_line(sc);
  if (sc.inventory.delta().active()) ref.delta = sc.inventory.delta().describe();

  if (!o.dump_flows.empty()) sim::write_flow_dump(o.dump_flows, sim.network, sim.flows, sim.result);
  if (!o.trace.empty())
    sim::write_chrome_trace(o.trace, sim.network, sim.flows, sim.result, sim::schedule_trace_layout(schedule, sim));
  if (o.json) {
    auto j = sim::schedule_simulation_json(schedule, sim, ref);
    add_jitter(j, o);
    if (change) j["membership"] = study::membership_json(*change);
    if (failure) j["failure"] = failure_json(*failure);
    std::cout << j.dump(2) << '\n';
    return;
  }
  if (change) {
    print_fields(std::cout, membership_fields(*change));
    std::cout << '\n';
  }
  print_schedule_report(std::cout, schedule, sim, ref);
  if (failure) print_failure(std::cout, *failure);
  print_jitter(o);
  if (!o.dump_flows.empty()) std::cout << "\nflows written to " << o.dump_flows << '\n';
  if (!o.trace.empty()) std::cout << "trace written to " << o.trace << " (open in https://ui.perfetto.dev)\n";
}

void run_simulate(const SimulateOptions& o) {
  if (!o.collective.empty()) {
    if (!o.input.empty() || !o.flows.empty())
      throw model::ConfigError(o.input, 0, "--collective", "a collective takes no scenario, schedule or --flows");
    run_collective(o);
    return;
  }
  if (!o.flows.empty() || (o.input.empty() && !o.topology.empty())) {
    if (!o.input.empty())
      throw model::ConfigError(o.input, 0, "--flows", "raw traffic replay (--flows) takes no scenario or schedule argument");
    run_traffic(o);
    return;
  }
  if (o.input.empty())
    throw model::ConfigError("", 0, "simulate",
                             "give a scenario (simulate SCENARIO --strategy S), a schedule (simulate SCHEDULE.json "
                             "[--scenario SCENARIO]) or raw traffic (simulate --topology T --flows F.csv)");
  run_schedule(o);
}

}  // namespace

void add_simulate_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("simulate", "Flow-level discrete-event simulation (max-min fair sharing)");
  auto o = std::make_shared<SimulateOptions>();
  cmd->add_option("input", o->input, "Scenario YAML (with --strategy) or schedule JSON");
  cmd->add_option("--scenario", o->scenario,
                  "Scenario YAML a schedule JSON was built for (default: the scenario the schedule names, as "
                  "NAME.yaml next to it, in ./scenarios or the shipped scenarios)");
  add_set_option(cmd, o->sets);
  add_delta_option(cmd, o->delta);
  cmd->add_option("--strategy", o->strategy, "Strategy to build and simulate: auto (the tuner's choice; the default), or a name with parameters as compare prints them: \"domain_grouped relay_ingress\"");
  cmd->add_option("--max-chain", o->max_chain, "Domains per chain for domain_chain / hybrid (default 8)")
      ->check(CLI::PositiveNumber);
  add_max_staging_option(cmd, o->max_staging);
  add_without_option(cmd, o->without);
  add_failure_options(cmd, o->failure);
  cmd->add_option("--profile", o->profile, "Cost profile for efficiencies and overheads: reshard (its engine; default), links (the schedules alone), nemo_rl, miles, nccl or a system's");
  cmd->add_option("--params", o->params, "Cost parameters file (as written by reshard calibrate); overrides --profile");
  cmd->add_option("--topology", o->topology, "Topology YAML (raw traffic replay)");
  cmd->add_option("--flows", o->flows, "Traffic CSV: id,src,dst,bytes[,after] with GPU indices; after = ids joined by ';'");
  cmd->add_option("--collective", o->collective, "Simulate an NCCL ring collective: broadcast or all_gather (with --topology, --ranks, --size)");
  cmd->add_option("--ranks", o->ranks, "The collective's GPUs in rank order, e.g. 0-15 or 0-7,16-23 (the first is a broadcast's root)");
  cmd->add_option("--size", o->size, "The collective's size as nccl-tests counts it, e.g. 1GiB (all_gather: the gathered output)");
  cmd->add_option("--channels", o->channels, "The collective's rings (NCCL channels; default 8)")->check(CLI::PositiveNumber);
  cmd->add_option("--chunk", o->chunk, "The chunk the rings pipeline in (default 512KiB)");
  cmd->add_option("--trace", o->trace, "Write a Chrome trace (Perfetto) to this file");
  cmd->add_option("--dump-flows", o->dump_flows, "Write every simulated flow with its times as JSON to this file");
  cmd->add_flag("--json", o->json, "Print one JSON object");
  cmd->add_option("--jitter", o->jitter,
                  "Multiply every link capacity by 1 + J*u, u uniform in [-1, 1] per link (J < 0.5): how much the "
                  "time depends on exact ties; run several --seed values for a range")
      ->check(CLI::Range(0.0, 0.4999999));
  cmd->add_option("--seed", o->seed, "Seed of --jitter (default 1)");
  cmd->add_flag("--no-symmetry", o->no_symmetry,
                "Simulate every flow, not one per class of alike flows (same answer, slower; a cross-check)");
  std::vector<std::string> solvers;
  for (const auto& s : sim::kRateSolvers) solvers.emplace_back(s.name);
  cmd->add_option("--rate-solver", o->rate_solver,
                  "Engine of the max-min rates: auto, classes (per class of flows) or groups (per bottleneck link); "
                  "the same answer, at different cost (a cross-check; docs/simulator.md)")
      ->check(CLI::IsMember(solvers));
  cmd->callback([o] {
    add_delta_override(o->delta, o->sets);
    run_simulate(*o);
  });
}

}  // namespace reshard::cli
