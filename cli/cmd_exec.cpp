// reshard exec SCENARIO|SCHEDULE.json [--scenario S] [--strategy S] [--backend host|cuda|nccl] [--json]
//   [--timeout 30s] [-o measurement.json] [--inject corrupt:OP|die:RANK|drop:OP]
// reshard check MEASUREMENT [--params FILE] [--scenario FILE] [--json]
//
// exec runs a schedule for real (docs/design.md §10): under mpirun for host and nccl (one process per GPU
// of the scenario), in one process for cuda. Process 0 prints and writes the measurement; the other
// processes stay quiet. check compares a measurement with the cost model's prediction, step by step.
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <optional>
#include <thread>
#include <algorithm>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "reshard/exec/executor.hpp"
#include "reshard/exec/measurement.hpp"
#include "reshard/model/defaults.hpp"
#include "reshard/model/cost.hpp"
#include "reshard/model/device_cost.hpp"
#include "reshard/model/host_cost.hpp"
#include "reshard/model/scenario.hpp"
#include "reshard/model/schedule.hpp"
#include "reshard/model/schedule_file.hpp"
#include "reshard/model/tuner.hpp"
#include "reshard/model/schedule_rebuild.hpp"
#include "inputs.hpp"
#include "set_option.hpp"
#include "table.hpp"
#include "warnings.hpp"

namespace reshard::cli {

using namespace reshard::model;
using reshard::exec::ExecError;

namespace {

struct ExecArgs {
  std::string input, scenario, strategy = model::kDefaultStrategy, backend = "host", timeout = "30s", output, profile = model::kDefaultProfile, params;
  int max_chain = 0;  // 0: the strategy's own
  std::string max_staging;  // --max-staging: every GPU's staging budget held to at most this
  std::string device_profile;  // --device-profile: a dry run predicts a cuda-backend run with it
  bool json = false, dry_run = false;
  std::vector<std::string> inject;
  std::vector<std::string> sets;  // --set overrides of the scenario
};

// Whether this is process 0 of an MPI launch (or not under MPI at all), read from the launcher's
// environment before MPI starts: warnings are printed by one process, not once per rank.
bool first_process() {
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"})
    if (const char* v = std::getenv(var)) return std::string(v) == "0";
  return true;
}

// What a run executes, resolved before any process moves a byte: the scenario (the input, or the
// one a schedule file names), its transfer set, and the schedule (built, read, or rebuilt from a
// binary file's header) with what each process read of a schedule file.
struct ExecInput {
  PlannedScenario planned;
  RebuiltSchedule read;  // read.schedule: the schedule, however it was got
  bool from_schedule = false, binary = false;
};

ExecInput load_exec_input(const ExecArgs& a, exec::ExecOptions& opt) {
  // Everything below up to execute() is checked before any process moves a byte.
  const bool from_schedule = is_schedule_file(a.input);
  const bool binary = from_schedule && is_binary_schedule_file(a.input);
  ScheduleFileHeader header;
  Schedule schedule;
  if (binary) header = read_schedule_header(a.input);
  else if (from_schedule) schedule = read_schedule_file(a.input);
  const std::string scenario_path = std::filesystem::absolute(
      from_schedule ? schedule_scenario_file(a.input, binary ? header.scenario : schedule.scenario,
                                                    binary ? header.scenario_file : schedule.scenario_file, a.scenario) : a.input)
                                        .string();
  opt.scenario_path = scenario_path;
  const std::vector<Override> overrides = model::parse_overrides(a.sets);
  for (const auto& o : overrides) opt.scenario_sets.push_back(o.key + "=" + o.value);  // paths made absolute
  LoadedScenario sc = load_scenario(std::filesystem::path(scenario_path), overrides);
  if (a.dry_run || first_process()) print_warnings(sc);  // once per run, not once per rank
  PlannedScenario planned(std::move(sc));
  RebuiltSchedule read;
  if (binary) {
    read = rebuild_or_read(a.input, header, planned);
  } else if (!from_schedule) {
    read.schedule = planned.schedule_for(schedule_request(a.strategy, a.profile, a.params, a.max_staging, a.max_chain));
  } else {
    read.schedule = std::move(schedule);
    read.file_bytes = read.bytes_read = static_cast<std::int64_t>(std::filesystem::file_size(a.input));
  }
  return ExecInput{std::move(planned), std::move(read), from_schedule, binary};
}

void run_exec(const ExecArgs& a) {
  exec::ExecOptions opt;
  opt.backend = a.backend;
  opt.profile = a.profile;
  opt.timeout_s = parse_duration(a.timeout).value;
  for (const auto& f : a.inject) opt.faults.push_back(exec::parse_fault(f));
  // An unknown profile or a bad parameters file is refused before anything runs.
  CostParams::named_or_loaded(a.profile, a.params);
  if (!a.params.empty()) opt.params_file = std::filesystem::absolute(a.params).string();

  const ExecInput in = load_exec_input(a, opt);
  const LoadedScenario& sc = in.planned.scenario();
  const TransferSet& ts = in.planned.transfers();
  const Schedule& schedule = in.read.schedule;
  const RebuiltSchedule& read = in.read;
  const bool from_schedule = in.from_schedule, binary = in.binary;
  const exec::RunPlan rp = exec::make_run_plan(sc, ts, schedule);
  std::int64_t moved = 0;
  for (const auto& o : schedule.ops) moved += o.bytes.value;
  nlohmann::json common{{"scenario", sc.scenario.name},
                        {"strategy", to_string(schedule.params.strategy)},
                        {"params", describe(schedule.params)},
                        {"gpus", rp.gpus.size()},
                        {"operations", schedule.ops.size()},
                        {"bytes_moved", moved}};
  std::string read_line;  // what each process read of a schedule file
  if (from_schedule) {
    common["schedule_file"] = {{"path", a.input}, {"bytes", read.file_bytes}, {"bytes_read_per_process", read.bytes_read},
                               {"rebuilt", read.rebuilt}};
    const std::string share = format(Bytes{read.bytes_read}) + " of " + format(Bytes{read.file_bytes});
    read_line = read.rebuilt ? "rebuilt from its scenario and strategy (the digest matches): each process reads " + share
                             : "each process reads it whole (" + share + ")" + (read.why_whole.empty() ? "" : ": " + read.why_whole);
    if (!read.rebuilt && binary && !a.json && (a.dry_run || first_process()))
      std::cerr << "reshard: note: " << a.input << ": " << read_line << '\n';
  }
  if (a.dry_run) {  // what a run needs, without starting one (no MPI, no GPU)
    std::optional<DevicePrediction> device;  // the cuda backend's model (model/device_cost.hpp)
    if (!a.device_profile.empty()) device = estimate_device(schedule, DeviceProfile::load(a.device_profile));
    if (a.json) {
      nlohmann::json j{{"schema", "reshard-exec-dry-run-1"}};
      j.update(common);
      j["processes"] = rp.gpus.size();
      j["steps"] = rp.steps;
      j["bytes_needed"] = ts.bytes_needed.value;
      if (device)
        j["device_prediction"] = {{"device_profile_file", a.device_profile}, {"time_s", device->time.value},
                                  {"calls", device->calls}, {"copied_bytes", device->copied.value}};
      std::cout << j.dump(2) << '\n';
    } else {
      std::vector<std::pair<std::string, std::string>> fields{
          {"scenario", sc.scenario.name},
          {"strategy", describe(schedule.params)},
          {"GPUs", std::to_string(rp.gpus.size()) + " (mpirun -np " + std::to_string(rp.gpus.size()) + ")"},
          {"operations", std::to_string(schedule.ops.size()) + " in " + std::to_string(rp.steps) + (rp.steps == 1 ? " step" : " steps")},
          {"bytes moved", format(Bytes{moved})}};
      if (from_schedule) fields.emplace_back("schedule file", a.input + ": " + read_line);
      if (device)
        fields.emplace_back("cuda backend", "predicted " + format(device->time) + " on one device (" + std::to_string(device->calls) +
                                                " CUDA calls, " + format(device->copied) + " copied; model/device_cost.hpp with " +
                                                a.device_profile + ")");
      print_fields(std::cout, fields);
    }
    return;
  }

  exec::RunResult res;
  try {
    res = exec::execute(rp, opt);
  } catch (const ExecError& e) {
    if (!e.fatal()) throw;
    std::cerr << "reshard: error: " << e.what() << '\n' << std::flush;
    exec::abandon_run(3);            // ends every process of an MPI launch; returns where there is none
    throw ReportedByFirstProcess{2};  // reported above, once
  }
  if (!res.reporter) return;
  const exec::Measurement& m = res.measurement;
  nlohmann::json mj = exec::to_json(m, rp);
  if (!a.output.empty()) {
    std::ofstream out(a.output);
    if (!out) throw ConfigError(a.output, 0, "-o", "cannot write the measurement file");
    out << mj.dump(1) << '\n';
  }
  if (a.json) {
    nlohmann::json j{{"schema", "reshard-exec-1"}};
    j.update(common);
    j["backend"] = m.backend;
    j["ranks"] = m.ranks;
    j["verified"] = m.verified;
    j["bytes_verified"] = m.bytes_verified;
    j["measured_s"] = m.elapsed_s;
    auto& steps = j["steps"] = nlohmann::json::array();
    for (const auto& st : mj["steps"])
      steps.push_back({{"step", st["step"]}, {"operations", st["ops"]}, {"bytes", st["bytes"]}, {"measured_s", st["seconds"]}});
    if (!a.output.empty()) j["measurement_file"] = a.output;
    std::cout << j.dump(2) << '\n';
    return;
  }
  print_fields(std::cout, {{"scenario", sc.scenario.name},
                           {"strategy", describe(schedule.params)},
                           {"backend", m.backend + " (" + std::to_string(m.ranks) + " processes, " +
                                           std::to_string(rp.gpus.size()) + " GPUs)"},
                           {"operations", std::to_string(schedule.ops.size()) + " in " + std::to_string(rp.steps) + (rp.steps == 1 ? " step" : " steps")},
                           {"bytes moved", format(Bytes{moved})},
                           {"elapsed", format(Seconds{m.elapsed_s})},
                           {"rate", format(BytesPerSecond{m.elapsed_s > 0 ? moved / m.elapsed_s : 0})},
                           {"verified", std::string(m.verified ? "yes, " : "NO, ") + format(Bytes{m.bytes_verified}) +
                                            " of destination shards"}});
  std::cout << '\n';
  Table t({"step", "ops>", "bytes>", "time>", "rate>"});
  for (const auto& st : mj["steps"]) {
    const double sec = st["seconds"].get<double>();
    const auto bytes = st["bytes"].get<std::int64_t>();
    t.add({std::to_string(st["step"].get<int>()), std::to_string(st["ops"].get<std::int64_t>()), format(Bytes{bytes}),
           format(Seconds{sec}), format(BytesPerSecond{sec > 0 ? static_cast<double>(bytes) / sec : 0})});
  }
  t.print(std::cout);
  if (!a.output.empty()) std::cout << "measurement written to " << a.output << '\n';
}

// Peak extra (staging) memory per GPU, measured against model::staging_memory: the GPUs by predicted
// peak, at most kRows of them, and the largest of each.
void print_staging(const std::vector<exec::StagingComparison>& staging) {
  constexpr std::size_t kRows = 16;
  std::vector<exec::StagingComparison> rows = staging;
  std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.predicted_bytes > b.predicted_bytes; });
  std::cout << '\n';
  Table t({"GPU>", "peak extra predicted>", "measured>", "error>"});
  for (std::size_t i = 0; i < rows.size() && i < kRows; ++i)
    t.add({std::to_string(rows[i].gpu), format(Bytes{rows[i].predicted_bytes}), format(Bytes{rows[i].measured_bytes}),
           fixed(100 * rows[i].error(), 1) + " %"});
  t.print(std::cout);
  if (rows.size() > kRows) std::cout << "  ... " << rows.size() - kRows << " more GPUs\n";
  auto most = [&](auto field) {
    return *std::max_element(rows.begin(), rows.end(), [&](const auto& a, const auto& b) { return a.*field < b.*field; });
  };
  const auto p = most(&exec::StagingComparison::predicted_bytes), q = most(&exec::StagingComparison::measured_bytes);
  std::cout << "peak extra memory per GPU (staging, besides the shards): predicted " << format(Bytes{p.predicted_bytes})
            << " (GPU " << p.gpu << "), measured " << format(Bytes{q.measured_bytes}) << " (GPU " << q.gpu << ")\n";
}

void run_check(const std::string& path, bool json, bool accept_unverified, const std::string& params,
               const std::string& scenario) {
  exec::Measurement m = exec::load_measurement(path, accept_unverified, scenario);
  // --params: a host profile (reshard bench-host) predicts with the host model; any other parameters
  // file replaces the one (or the profile) the measurement recorded.
  // A device profile predicts a cuda-backend run with the cuda backend's model.
  const bool host = !params.empty() && HostProfile::is_host_profile(params);
  const bool device = !params.empty() && !host && DeviceProfile::is_device_profile(params);
  HostPrediction terms;
  DevicePrediction device_terms;
  if (!params.empty() && !host && !device) m.params_file = std::filesystem::absolute(params).string();
  const auto rows = [&] {
    try {
      if (host) return exec::compare_with_host_model(m, HostProfile::load(params), path, &terms);
      if (device) return exec::compare_with_device_model(m, DeviceProfile::load(params), path, &device_terms);
      return exec::compare_with_prediction(m);
    } catch (const model::ScheduleError& e) {
      throw model::ConfigError(path, 0, "schedule", e.what());
    }
  }();
  const std::string predictor = host     ? "the host model with the profile of " + params
                                : device ? "the cuda backend's model with the device profile of " + params
                                : m.params_file.empty() ? "profile '" + m.profile + "'"
                                                        : "the cost parameters of " + m.params_file;
  const std::vector<exec::StagingComparison> staging = exec::compare_staging(m);
  if (json) {
    nlohmann::json j;
    j["schema"] = "reshard-check-1";
    j["measurement_file"] = path;
    j["scenario"] = m.schedule.scenario;
    j["scenario_file"] = m.scenario_path;
    j["strategy"] = to_string(m.schedule.params.strategy);
    j["params"] = describe(m.schedule.params);
    j["profile"] = host ? std::string("host") : device ? std::string("device") : m.profile;
    if (host) j["host_profile_file"] = params;
    else if (device) j["device_profile_file"] = params;
    else if (!m.params_file.empty()) j["params_file"] = m.params_file;
    j["predicted_by"] = predictor;
    j["backend"] = m.backend;
    j["verified"] = m.verified;
    auto& steps = j["steps"] = nlohmann::json::array();
    for (const auto& r : rows) {
      nlohmann::json row = {{"operations", r.ops}, {"bytes", r.bytes}, {"estimate_s", r.predicted_s},
                            {"measured_s", r.measured_s}, {"relative_error", r.error()}};
      if (r.step < 0) {
        j["total"] = row;
      } else {
        row["step"] = r.step;
        if (host) {  // the host model's terms (model/host_cost.hpp)
          const HostStep& t = terms.steps[static_cast<std::size_t>(r.step)];
          row["host_terms"] = {{"machine_s", t.machine.value}, {"process_s", t.process.value}, {"path_s", t.path.value}, {"open_s", t.open.value},
                               {"transported_bytes", t.transported.value}, {"copied_bytes", t.copied.value},
                               {"touched_bytes", t.touched.value}, {"messages", t.messages}, {"pairs", t.pairs}};
        }
        if (device) {  // the cuda backend's model's terms (model/device_cost.hpp)
          const DeviceStep& t = device_terms.steps[static_cast<std::size_t>(r.step)];
          row["device_terms"] = {{"issue_s", t.issue.value}, {"copy_s", t.copy.value}, {"calls", t.calls},
                                 {"copied_bytes", t.copied.value}};
        }
        steps.push_back(row);
      }
    }
    if (!staging.empty()) {
      auto& gpus = j["staging"] = nlohmann::json::array();
      for (const auto& g : staging)
        gpus.push_back({{"gpu", g.gpu}, {"peak_staging_bytes", g.predicted_bytes},
                        {"measured_staging_bytes", g.measured_bytes}, {"relative_error", g.error()}});
    }
    std::cout << j.dump(2) << '\n';
    return;
  }
  print_fields(std::cout, {{"measurement", path}, {"scenario", m.schedule.scenario + " (" + m.scenario_path + ")"},
                           {"strategy", describe(m.schedule.params)}, {"backend", m.backend},
                           {"profile", host     ? "host (" + params + ")"
                                       : device ? "device (" + params + ")"
                                       : m.params_file.empty() ? m.profile : m.params_file},
                           {"verified", m.verified ? "yes" : "no"}});
  std::cout << '\n';
  Table t({"step", "ops>", "bytes>", "predicted>", "measured>", "error>"});
  for (const auto& r : rows)
    t.add({r.step < 0 ? "total" : std::to_string(r.step), std::to_string(r.ops), format(Bytes{r.bytes}),
           format(Seconds{r.predicted_s}), format(Seconds{r.measured_s}), fixed(100 * r.error(), 1) + " %"});
  t.print(std::cout);
  if (host) {
    std::cout << "error is (measured - predicted) / predicted; predicted by " << predictor
              << " (model/host_cost.hpp): this machine's host backend, " << m.ranks << " processes.\n";
  } else if (device) {
    std::cout << "error is (measured - predicted) / predicted; predicted by " << predictor
              << " (model/device_cost.hpp): " << device_terms.calls << " CUDA calls issued, "
              << format(device_terms.copied) << " copied on the one device.\n";
  } else {
    std::cout << "error is (measured - predicted) / predicted; the prediction is the cost model of the scenario's "
                 "topology with " << predictor << ".\n";
  }
  if (!host && (m.backend == "host" || m.backend == "cuda"))
    std::cout << "note: the " << m.backend << " backend moves every byte through "
              << (m.backend == "host" ? "MPI in host memory" : "one GPU's memory (virtual ranks)")
              << ", not over the topology's NVLink and network links: its times measure the executor on this "
                 "machine, not the cluster, so a large error is expected. The prediction is for an nccl run on "
                 "the cluster itself."
              << (m.backend == "host" ? " To predict the host run itself: reshard check " + path +
                                            " --params host.yaml, with a profile from mpirun -np N reshard bench-host -o host.yaml."
                                      : std::string())
              << "\n";
  if (!staging.empty()) print_staging(staging);
}

}  // namespace

void add_exec_command(CLI::App& app) {
  auto a = std::make_shared<ExecArgs>();
  auto* cmd = app.add_subcommand("exec", "Run a schedule for real and verify every destination byte (under mpirun for host/nccl)");
  cmd->add_option("input", a->input, "Scenario YAML file, or a schedule file (JSON or binary)")->required();
  cmd->add_option("--scenario", a->scenario,
                  "The scenario a schedule file was built for (default: the scenario the schedule names, as NAME.yaml "
                  "next to it, in ./scenarios or the shipped scenarios)");
  add_set_option(cmd, a->sets);
  cmd->add_option("--strategy", a->strategy, "Strategy as compare prints it (\"domain_grouped relay_ingress\") or auto (the tuner's choice; the default)");
  cmd->add_option("--max-chain", a->max_chain, "Domains per chain (overrides the strategy's)")->check(CLI::PositiveNumber);
  add_max_staging_option(cmd, a->max_staging);
  cmd->add_option("--backend", a->backend, "host (MPI), cuda (one GPU, virtual ranks), nccl (one process per GPU)");
  cmd->add_option("--timeout", a->timeout, "A peer that does not answer within this ends the run (e.g. 30s)");
  cmd->add_option("-o,--output", a->output, "Write the Measurement JSON here");
  cmd->add_option("--profile", a->profile, "Cost profile auto tunes for and reshard check predicts with (reshard, links, nemo_rl, ...)");
  cmd->add_option("--params", a->params, "Cost parameters file (as written by reshard calibrate); overrides --profile");
  cmd->add_option("--inject", a->inject, "Test-only fault: corrupt:OP[@middle|@last], die:RANK, kill:RANK, stop:RANK[@init], drop:OP");
  cmd->add_flag("--json", a->json, "Print one JSON object (process 0)");
  cmd->add_flag("--dry-run", a->dry_run, "Build and check the schedule, print the process count it needs, run nothing");
  cmd->add_option("--device-profile", a->device_profile,
                  "With --dry-run: predict the run of the cuda backend (every GPU a virtual rank on one device) with this "
                  "device profile (profile: device; params/gpu-check-h200.yaml)");
  cmd->callback([a] {
    try {
      run_exec(*a);
    } catch (const ExecError&) {
      throw;  // a run's failure: each process's own (the fatal ones are printed where they happen)
    } catch (const model::Error&) {
      if (first_process()) throw;
      std::this_thread::sleep_for(std::chrono::seconds(1));
      throw ReportedByFirstProcess{2};
    }
  });
}

void add_check_command(CLI::App& app) {
  auto path = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  auto accept = std::make_shared<bool>(false);
  auto params = std::make_shared<std::string>();
  auto scenario = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("check", "Compare a Measurement with the cost model's prediction, step by step");
  cmd->add_option("measurement", *path, "Measurement JSON written by reshard exec -o")->required();
  cmd->add_flag("--json", *json, "Print one JSON object");
  cmd->add_flag("--accept-unverified", *accept,
                "Use a Measurement whose digest does not match its content or scenario, or whose run was not verified");
  cmd->add_option("--params", *params,
                  "Predict with this file: a host profile (reshard bench-host -o host.yaml) predicts a host-backend run "
                  "with the host model, a device profile (profile: device) a cuda-backend run with the cuda backend's "
                  "model; other cost parameters replace the measurement's profile");
  cmd->add_option("--scenario", *scenario,
                  "The scenario file the run used, where the path the measurement records is not on this machine "
                  "(its digest is checked all the same)");
  cmd->callback([path, json, accept, params, scenario] { run_check(*path, *json, *accept, *params, *scenario); });
}

}  // namespace reshard::cli
