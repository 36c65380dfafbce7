// `mpirun -np N reshard exec … --backend host`: every small scenario with auto and a named strategy
// in rotation verifies every byte, and each GPU's measured peak staging memory is within 10 % of the model's
// (model/memory.hpp, through `reshard check`); faults end the run with the right message; a schedule of another scenario
// is refused before anything runs; a measurement goes through `reshard check` and `reshard
// calibrate`; hand-made chain ops (a ring with a short last chunk, a tree with fan-outs, a part
// smaller than a chunk, two ops on one chain) deliver every byte, with GPUs folded into fewer
// processes too, and their faults (a corrupted forwarded chunk, a dead GPU inside the chain, a
// root that never sends) are named. N is what `reshard exec --dry-run` says the schedule needs
// (one process per GPU).
#include <gtest/gtest.h>

#include <set>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "chain_fixtures.hpp"
#include "reshard/exec/executor.hpp"
#include "reshard/model/host_cost.hpp"
#include "reshard/model/scenario.hpp"
#include "reshard/model/schedule.hpp"
#include "reshard/model/strategies.hpp"
#include "reshard/model/schedule_file.hpp"
#include "run_command.hpp"

namespace {

std::string run(const std::string& cmd, int* status) { return reshard::test::run_command(cmd + " 2>&1", status); }

std::string reshard() { return RESHARD_BINARY; }
std::string mpirun(int n) {
  // Tests may run as root in containers; more processes than cores on CI machines.
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  return std::string(RESHARD_MPIEXEC) + " --oversubscribe -np " + std::to_string(n) + " ";
}
std::string scenario(const std::string& name) { return std::string(RESHARD_SOURCE_DIR) + "/scenarios/" + name; }

nlohmann::json json_of(const std::string& out) {
  // The JSON object is the last '{' ... '}' block process 0 printed.
  const auto b = out.find('{');
  const auto e = out.rfind('}');
  if (b == std::string::npos || e == std::string::npos) return nullptr;
  return nlohmann::json::parse(out.substr(b, e - b + 1), nullptr, false);
}

int gpus_needed(const std::string& scen, const std::string& strategy) {
  int st = 0;
  const auto out = run(reshard() + " exec " + scen + " --strategy " + strategy + " --dry-run --json", &st);
  EXPECT_EQ(st, 0) << out;
  return json_of(out)["gpus"].get<int>();
}

// Every small scenario run over MPI by the host backend within `max_staging` ("": the scenario's
// default budgets, 3.2 GB per GPU), twice: with auto, and with one named strategy in rotation (the
// i-th scenario in name order with strategy (i + rotation) mod S, S named strategies), so each
// named strategy runs on two or three scenarios per budget. Every destination byte verified, and
// every GPU's staging high-water mark within 10 % of the prediction (model/memory.hpp) and within
// the cap. That every strategy delivers every byte of every small scenario within both budgets is
// asserted in one process by the loopback twin, which interprets the same per-GPU programs
// (tests/test_exec.cpp, Loopback.EveryStrategyDeliversEveryByteOfEverySmallScenario); these runs
// add what only a real run has: the MPI transport, the executor's own staging measurement and
// `reshard check` on it. (Every pair over MPI was 16-process mpirun x 210 runs: 13 min of the
// suite on a 2-core machine, for no property the twin and the rotation do not cover.)
void every_small_run_verifies(const std::string& max_staging, std::int64_t cap, std::size_t rotation) {
  const std::vector<std::string> named = reshard::model::strategy_names();
  const std::string staging = max_staging.empty() ? "" : " --max-staging " + max_staging;
  std::vector<std::filesystem::path> scenarios;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(RESHARD_SOURCE_DIR) + "/scenarios")) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("small-", 0) == 0 && entry.path().extension() == ".yaml") scenarios.push_back(entry.path());
  }
  std::sort(scenarios.begin(), scenarios.end());
  ASSERT_GE(scenarios.size(), named.size()) << "too few small scenarios for every strategy to run";
  std::set<std::string> ran;
  for (std::size_t i = 0; i < scenarios.size(); ++i) {
    const std::string name = scenarios[i].filename().string();
    int st = 0;
    const auto plan_out = run(reshard() + " plan " + scenarios[i].string() + " --json", &st);
    ASSERT_EQ(st, 0) << plan_out;
    const auto plan = json_of(plan_out);
    // Compared with bytes_needed: every destination shard is checked, including the parts a GPU
    // already held (bytes_needed - bytes_to_move, zero in these disaggregated scenarios).
    const std::int64_t needed = plan["bytes_needed"].get<std::int64_t>();
    for (const auto& strategy : {std::string("auto"), named[(i + rotation) % named.size()]}) {
      SCOPED_TRACE(name + " " + strategy + staging);
      ran.insert(strategy);
      const int n = gpus_needed(scenarios[i].string(), strategy);
      // Its own file per budget: the two tests of this helper may run at once.
      const auto measurement = std::filesystem::temp_directory_path() /
                               ("reshard_exec_mpi_" + name + (max_staging.empty() ? "" : "_" + max_staging) + ".json");
      const auto out = run(mpirun(n) + reshard() + " exec " + scenarios[i].string() + " --strategy " + strategy + staging +
                               " --backend host --json --timeout 60s -o " + measurement.string(),
                           &st);
      ASSERT_EQ(st, 0) << out;
      const auto j = json_of(out);
      ASSERT_TRUE(j.is_object()) << out;
      EXPECT_TRUE(j["verified"].get<bool>());
      EXPECT_EQ(j["bytes_verified"].get<std::int64_t>(), needed);
      EXPECT_EQ(j["ranks"].get<int>(), n);
      EXPECT_GT(j["measured_s"].get<double>(), 0);
      EXPECT_FALSE(j["steps"].empty());
      // Every GPU's staging high-water mark against the prediction.
      const auto checked = run(reshard() + " check " + measurement.string() + " --json", &st);
      ASSERT_EQ(st, 0) << checked;
      const auto staging_rows = json_of(checked)["staging"];
      ASSERT_EQ(staging_rows.size(), static_cast<std::size_t>(n));
      std::int64_t most = 0;
      for (const auto& g : staging_rows) {
        EXPECT_LE(std::abs(g["relative_error"].get<double>()), 0.10)
            << "GPU " << g["gpu"] << ": predicted " << g["peak_staging_bytes"] << ", measured " << g["measured_staging_bytes"];
        EXPECT_LE(g["measured_staging_bytes"].get<std::int64_t>(), cap) << "GPU " << g["gpu"];
        most = std::max(most, g["measured_staging_bytes"].get<std::int64_t>());
      }
      EXPECT_GT(most, 0);
      std::filesystem::remove(measurement);
    }
  }
  EXPECT_EQ(ran.size(), named.size() + 1) << "every named strategy and auto ran over MPI";
}

TEST(ExecHost, EverySmallScenarioVerifiesBytesNeededWithAutoAndARotatingStrategy) {
  every_small_run_verifies("", 3'200'000'000, 0);
}

// The same within 1 MiB of staging per GPU: two slots of 512 KiB, many steps, buckets of a few
// hundred KiB; the same bytes arrive, and no GPU holds more than 1 MiB. The rotation is shifted by
// half the strategies, so each scenario meets another strategy than in the default budget.
TEST(ExecHost, EverySmallScenarioVerifiesWithinOneMiBOfStagingWithAutoAndARotatingStrategy) {
  every_small_run_verifies("1MiB", 1 << 20, reshard::model::strategy_names().size() / 2);
}

const std::string kGqa = scenario("small-gqa-megatron-vllm.yaml");

TEST(ExecHostFaults, CorruptedByteIsCaughtAndNamed) {
  // direct on small-gqa: operation 5 goes GPU 2 -> GPU 9 (a k_proj piece); its receiver sees the flip.
  int st = 0;
  const auto out = run(mpirun(16) + reshard() + " exec " + kGqa + " --strategy direct --inject corrupt:5", &st);
  EXPECT_NE(st, 0) << out;
  EXPECT_NE(out.find("verification failed: rank 9 (GPU 9): tensor 'model.layers."), std::string::npos) << out;
  EXPECT_NE(out.find("box ["), std::string::npos) << out;
  EXPECT_NE(out.find("wrong value at element offset"), std::string::npos) << out;
}

TEST(ExecHostFaults, CorruptedFirstMiddleAndLastBytesAreCaughtEachAtItsOwnElement) {
  // The same operation, its byte flipped at the start, in the middle and at the end of what GPU 9
  // unpacks: each is caught, and each names another element (a check of the first bytes alone
  // would miss the last two).
  std::set<std::string> named;
  for (const char* where : {"first", "middle", "last"}) {
    int st = 0;
    const auto out = run(mpirun(16) + reshard() + " exec " + kGqa + " --strategy direct --inject corrupt:5@" + where, &st);
    EXPECT_NE(st, 0) << where << ": " << out;
    const auto at = out.find("verification failed: rank 9 (GPU 9): tensor 'model.layers.");
    ASSERT_NE(at, std::string::npos) << where << ": " << out;
    named.insert(out.substr(at, out.find(": got", at) - at));
  }
  EXPECT_EQ(named.size(), 3u);
}

TEST(ExecHostFaults, RankStoppedBeforeSetupIsNamedWithinTheTimeout) {
  // Rank 6 stops (SIGSTOP) right after MPI_Init: rank 0 names it once the timeout has passed, and
  // the run ends (the timing itself is checked by scripts/exec_stop_check.sh, not here).
  int st = 0;
  const auto out = run(mpirun(16) + reshard() + " exec " + kGqa + " --strategy direct --inject stop:6 --timeout 8s", &st);
  EXPECT_NE(st, 0) << out;
  EXPECT_NE(out.find("rank 0 waited for rank 6: it never arrived at the run's setup within 8"), std::string::npos) << out;
}

TEST(ExecHostFaults, RankStoppedBeforeMpiInitIsNamedByItsMissingArrivalMark) {
  // Rank 6 stops before it calls MPI_Init: the others block inside MPI_Init, where MPI cannot say
  // who is missing; rank 0's watchdog fires and names rank 6 from the arrival marks of the node.
  int st = 0;
  const auto out = run(mpirun(16) + reshard() + " exec " + kGqa + " --strategy direct --inject stop:6@init --timeout 3s", &st);
  EXPECT_NE(st, 0) << out;
  EXPECT_NE(out.find("the run's setup (MPI_Init) did not finish within 3.00 s: rank 6 never reached MPI_Init"), std::string::npos)
      << out;
}

TEST(ExecHostFaults, BadInputIsReportedOnceNotByEveryRank) {
  int st = 0;
  const auto out = run(mpirun(4) + reshard() + " exec " + kGqa + " --strategy no_such_strategy", &st);
  EXPECT_NE(st, 0) << out;
  std::size_t n = 0;
  for (auto at = out.find("unknown strategy"); at != std::string::npos; at = out.find("unknown strategy", at + 1)) ++n;
  EXPECT_EQ(n, 1u) << out;
}

TEST(ExecHostFaults, MissingPeerTimesOutNamingRankAndPeer) {
  int st = 0;
  const auto out = run(mpirun(16) + reshard() + " exec " + kGqa + " --strategy direct --inject drop:5 --timeout 8s", &st);
  EXPECT_NE(st, 0) << out;
  EXPECT_NE(out.find("rank 9 (GPU 9) waited for rank 2 (GPU 2): operation 5"), std::string::npos) << out;
  EXPECT_NE(out.find("had no answer within 8"), std::string::npos) << out;
}

TEST(ExecHostFaults, SilentRankTimesOutNamingIt) {
  // Rank 3 (a source GPU) goes silent before its sends: its receivers time out naming it.
  int st = 0;
  const auto out = run(mpirun(16) + reshard() + " exec " + kGqa + " --strategy direct --inject die:3 --timeout 8s", &st);
  EXPECT_NE(st, 0) << out;
  EXPECT_NE(out.find("waited for rank 3 (GPU 3)"), std::string::npos) << out;
}

TEST(ExecHostFaults, KilledRankEndsTheRun) {
  // Rank 3 is killed (SIGKILL): mpirun notices, names it and ends the job with a non-zero status.
  int st = 0;
  const auto out = run(mpirun(16) + reshard() + " exec " + kGqa + " --strategy direct --inject kill:3 --timeout 20s", &st);
  EXPECT_NE(st, 0) << out;
  EXPECT_NE(out.find("rank 3"), std::string::npos) << out;
}

// small-gqa-fp8 (run over MPI with auto and a rotating strategy above, with every strategy by the
// loopback twin) in its
// other forms: MX FP8 (all seven weights quantised at the source: 4 137 984 B per destination GPU),
// and every weight sent in BF16 and quantised by the destination (the BF16 model, 7 058 432 B per
// destination GPU; test_precision.cpp works both out).
TEST(ExecHostPrecision, Mxfp8AndQuantizeAtTheDestinationVerify) {
  const std::string fp8 = scenario("small-gqa-fp8.yaml");
  for (const auto& [sets, bytes] : std::vector<std::pair<std::string, std::int64_t>>{
           {"--set destination.precision.format=mxfp8", 2 * 4'137'984},
           {"--set destination.precision.quantize_at=destination", 2 * 7'058'432},
           {"--set destination.precision.format=mxfp8 --set destination.precision.quantize_at=destination",
            2 * 7'058'432}}) {
    int st = 0;
    const auto out = run(mpirun(10) + reshard() + " exec " + fp8 + " --strategy domain_chain --backend host --json " +
                             sets + " --timeout 60s",
                         &st);
    ASSERT_EQ(st, 0) << sets << "\n" << out;
    const auto j = json_of(out);
    EXPECT_TRUE(j["verified"].get<bool>()) << sets;
    EXPECT_EQ(j["bytes_verified"].get<std::int64_t>(), bytes) << sets;
  }
}

TEST(ExecHostPrecision, FlippedFp8ByteAndFlippedScaleAreCaught) {
  // Direct on small-gqa-fp8: an operation whose first slice is FP8 payload, one whose last slice is
  // a FP32 scale; corrupting the first or last byte its receiver unpacks must name that tensor.
  using namespace reshard::model;
  const std::string fp8 = scenario("small-gqa-fp8.yaml");
  const LoadedScenario sc = load_scenario(std::filesystem::path(fp8));
  const TransferSet ts = plan(sc.inventory, sc.source, sc.destination);
  StrategyParams p;
  p.strategy = Strategy::Direct;
  const Schedule s = build_schedule(ts, sc.inventory, sc.source, sc.destination, sc.topology, p);
  auto find = [&](bool first, DType dtype) -> std::pair<std::int64_t, std::string> {
    for (const Op& op : s.ops) {
      const auto& slices = s.buffers[static_cast<std::size_t>(op.buffer)].slices;
      if (op.parts != 1 || slices.empty()) continue;
      const auto& t = sc.inventory.tensor(ts.pieces[static_cast<std::size_t>((first ? slices.front() : slices.back()).piece)].tensor);
      if (t.dtype == dtype && t.quant.format != QuantFormat::None) return {op.id, t.name};
    }
    return {-1, ""};
  };
  const auto [payload_op, payload_tensor] = find(true, DType::FP8);
  const auto [scale_op, scale_tensor] = find(false, DType::FP32);
  ASSERT_GE(payload_op, 0);
  ASSERT_GE(scale_op, 0);
  for (const auto& [fault, tensor] : {std::pair{"corrupt:" + std::to_string(payload_op) + "@first", payload_tensor},
                                      std::pair{"corrupt:" + std::to_string(scale_op) + "@last", scale_tensor}}) {
    int st = 0;
    const auto out = run(mpirun(10) + reshard() + " exec " + fp8 + " --strategy direct --inject " + fault, &st);
    EXPECT_NE(st, 0) << out;
    EXPECT_NE(out.find("verification failed: rank"), std::string::npos) << out;
    EXPECT_NE(out.find("tensor '" + tensor + "'"), std::string::npos) << fault << "\n" << out;
  }
}

TEST(ExecHostPrecision, GpuBackendsRefuseAPrecisionChange) {
  int st = 0;
  const auto out = run(reshard() + " exec " + scenario("small-gqa-fp8.yaml") + " --strategy direct --backend cuda", &st);
  EXPECT_NE(st, 0) << out;
  EXPECT_NE(out.find("the cuda backend does not convert precision"), std::string::npos) << out;
}

TEST(ExecHost, ScheduleOfAnotherScenarioIsRefusedBeforeAnythingRuns) {
  using namespace reshard::model;
  const LoadedScenario moe = load_scenario(std::filesystem::path(scenario("small-moe-ep.yaml")));
  const TransferSet ts = plan(moe.inventory, moe.source, moe.destination);
  const Schedule s = build_schedule(ts, moe.inventory, moe.source, moe.destination, moe.topology, StrategyParams{});
  const auto file = std::filesystem::temp_directory_path() / "reshard_test_exec_moe_schedule.json";
  std::ofstream(file) << to_json(s).dump();
  int st = 0;
  const auto out = run(mpirun(2) + reshard() + " exec " + file.string() + " --scenario " + kGqa + " --json", &st);
  EXPECT_EQ(st, 2) << out;
  EXPECT_NE(out.find("a schedule that does not match its scenario is refused"), std::string::npos) << out;
  EXPECT_EQ(out.find("verified"), std::string::npos) << out;  // nothing ran
  // The same schedule on its own scenario runs.
  const auto ok = run(mpirun(16) + reshard() + " exec " + file.string() + " --scenario " + scenario("small-moe-ep.yaml") +
                          " --json",
                      &st);
  EXPECT_EQ(st, 0) << ok;
  EXPECT_TRUE(json_of(ok)["verified"].get<bool>());
}

// A binary schedule file is not read by the processes of a run: each rebuilds the schedule from its
// scenario and the strategy and staging budgets in the header (144 bytes, then the budget runs: one
// here, 16 bytes) and runs it when its digest is the file's (so a process reads the header, the
// scenario's name and the budget runs). A file whose schedule the header's strategy
// does not give (here: built with 1 MiB chunks, the header saying 256 KiB) is read whole, and runs.
TEST(ExecHost, BinaryScheduleIsRebuiltFromItsHeaderOrReadWhole) {
  using namespace reshard::model;
  const std::string scen = scenario("small-gqa-megatron-vllm.yaml");
  const auto dir = std::filesystem::temp_directory_path();
  const std::string rebuilt = (dir / "reshard_test_exec_rebuilt.rsched").string();
  int st = 0;
  const auto planned = run(reshard() + " plan " + scen + " --strategy \"hybrid max_chain=2\" -o " + rebuilt, &st);
  ASSERT_EQ(st, 0) << planned;
  const auto dry = json_of(run(reshard() + " exec " + rebuilt + " --dry-run --json", &st));
  ASSERT_EQ(st, 0) << dry;
  const auto file_bytes = static_cast<std::int64_t>(std::filesystem::file_size(rebuilt));
  EXPECT_TRUE(dry["schedule_file"]["rebuilt"].get<bool>());
  EXPECT_EQ(dry["schedule_file"]["bytes"].get<std::int64_t>(), file_bytes);
  EXPECT_EQ(dry["schedule_file"]["bytes_read_per_process"].get<std::int64_t>(),
            144 + static_cast<std::int64_t>(std::string("small-gqa-megatron-vllm").size()) + 1 +
                static_cast<std::int64_t>(std::filesystem::absolute(scen).lexically_relative(std::filesystem::absolute(dir)).generic_string().size()) + 16);
  const auto ran = run(mpirun(16) + reshard() + " exec " + rebuilt + " --json", &st);
  ASSERT_EQ(st, 0) << ran;
  EXPECT_TRUE(json_of(ran)["verified"].get<bool>());
  EXPECT_TRUE(json_of(ran)["schedule_file"]["rebuilt"].get<bool>());

  const LoadedScenario sc = load_scenario(std::filesystem::path(scen));
  const TransferSet ts = plan(sc.inventory, sc.source, sc.destination);
  Schedule s = build_schedule(ts, sc.inventory, sc.source, sc.destination, sc.topology,
                              parse_strategy("domain_chain chunk=1MiB"));
  s.scenario = sc.scenario.name;
  s.params.chunk = Bytes{256 * 1024};
  const std::string other = (dir / "reshard_test_exec_read_whole.rsched").string();
  write_schedule_file(other, s);
  const auto whole = run(mpirun(16) + reshard() + " exec " + other + " --json", &st);
  ASSERT_EQ(st, 0) << whole;
  const auto w = json_of(whole);
  EXPECT_TRUE(w["verified"].get<bool>());
  EXPECT_FALSE(w["schedule_file"]["rebuilt"].get<bool>());
  EXPECT_EQ(w["schedule_file"]["bytes_read_per_process"].get<std::int64_t>(),
            static_cast<std::int64_t>(std::filesystem::file_size(other)));
  const auto note = run(reshard() + " exec " + other + " --dry-run", &st);
  EXPECT_NE(note.find("the scenario and strategy give another schedule than the file's"), std::string::npos) << note;
}

// `--params FILE` on exec: auto tunes with the file's cost parameters (the strategy compare
// --params picks), the Measurement records the file, and check predicts with it (params/nemo_rl.yaml
// adds per-bucket and per-stage overheads, so its prediction is above the built-in profile's).
TEST(ExecHost, ParametersFileTunesAutoAndPredictsInCheck) {
  const std::string params = std::string(RESHARD_SOURCE_DIR) + "/params/nemo_rl.yaml";
  int st = 0;
  const auto best = json_of(run(reshard() + " compare " + kGqa + " --params " + params + " --json", &st));
  ASSERT_EQ(st, 0);
  const auto dry = json_of(run(reshard() + " exec " + kGqa + " --strategy auto --params " + params + " --dry-run --json", &st));
  ASSERT_EQ(st, 0) << dry;
  EXPECT_EQ(dry["params"], best["best_params"]);
  const auto dir = std::filesystem::temp_directory_path();
  const auto with_file = dir / "reshard_test_exec_params_file.json", without = dir / "reshard_test_exec_profile.json";
  for (const auto& [m, extra] : {std::pair{with_file, " --params " + params}, std::pair{without, std::string()}}) {
    const auto out = run(mpirun(16) + reshard() + " exec " + kGqa + " --strategy gather_broadcast" + extra + " -o " + m.string(), &st);
    ASSERT_EQ(st, 0) << out;
  }
  const auto a = json_of(run(reshard() + " check " + with_file.string() + " --json", &st));
  ASSERT_EQ(st, 0) << a;
  const auto b = json_of(run(reshard() + " check " + without.string() + " --json", &st));
  ASSERT_EQ(st, 0) << b;
  EXPECT_EQ(a["params_file"], params);
  EXPECT_FALSE(b.contains("params_file"));
  EXPECT_GT(a["total"]["estimate_s"].get<double>(), b["total"]["estimate_s"].get<double>());
}

TEST(ExecHost, MeasurementGoesThroughCheckAndCalibrate) {
  const auto dir = std::filesystem::temp_directory_path();
  const auto m = dir / "reshard_test_exec_measurement_host.json";
  int st = 0;
  const auto out = run(mpirun(16) + reshard() + " exec " + kGqa + " --strategy domain_chain -o " + m.string(), &st);
  ASSERT_EQ(st, 0) << out;
  const auto check = run(reshard() + " check " + m.string() + " --json", &st);
  ASSERT_EQ(st, 0) << check;
  const auto j = json_of(check);
  ASSERT_FALSE(j["steps"].empty());
  for (const auto& row : j["steps"]) {
    EXPECT_GT(row["estimate_s"].get<double>(), 0);
    EXPECT_GT(row["measured_s"].get<double>(), 0);
    EXPECT_NEAR(row["relative_error"].get<double>(),
                (row["measured_s"].get<double>() - row["estimate_s"].get<double>()) / row["estimate_s"].get<double>(), 1e-9);
  }
  EXPECT_GT(j["total"]["measured_s"].get<double>(), 0);
  // calibrate reads measured refit times as CSV rows (scenario,strategy,measured_s): the
  // measurement's scenario, strategy and elapsed time are exactly such a row.
  const auto mj = nlohmann::json::parse(std::ifstream(m));
  const auto csv = dir / "reshard_test_exec_measurements.csv";
  std::ofstream(csv) << std::setprecision(17) << "scenario,strategy,measured_s\n"
                     << mj["scenario"].get<std::string>() << ',' << mj["params"]["strategy"].get<std::string>() << ','
                     << mj["elapsed_s"].get<double>() << '\n';
  const auto cal = run(reshard() + " calibrate " + csv.string() + " --json", &st);
  ASSERT_EQ(st, 0) << cal;
  const auto cj = json_of(cal);
  ASSERT_EQ(cj["rows"].size(), 1u);
  EXPECT_NEAR(cj["rows"][0]["measured_s"].get<double>(), mj["elapsed_s"].get<double>(), 1e-12);
}

// The host profile (reshard bench-host) predicts a host run with the host model (model/host_cost.hpp),
// per step and in total, and says so; a measurement of another backend is refused naming the file
// and its key; calibrate still takes the host measurement.
TEST(ExecHost, HostProfilePredictsHostRunsAndRefusesOtherBackends) {
  const auto dir = std::filesystem::temp_directory_path();
  const auto profile = dir / "reshard_test_host_profile_bench.yaml";
  int st = 0;
  const auto bench = run(mpirun(4) + reshard() + " bench-host --seconds 0.05 -o " + profile.string(), &st);
  ASSERT_EQ(st, 0) << bench;
  EXPECT_NE(bench.find("message latency"), std::string::npos) << bench;
  const reshard::model::HostProfile p = reshard::model::HostProfile::load(profile);
  EXPECT_EQ(p.processes, 4);
  EXPECT_GT(p.transport_rate_all.value, 0);
  const std::string fp8 = scenario("small-gqa-fp8.yaml");
  const auto m = dir / "reshard_test_exec_host_model.json";
  const auto out = run(mpirun(10) + reshard() + " exec " + fp8 + " --strategy gather_broadcast -o " + m.string(), &st);
  ASSERT_EQ(st, 0) << out;
  const auto j = json_of(run(reshard() + " check " + m.string() + " --params " + profile.string() + " --json", &st));
  ASSERT_EQ(st, 0) << j;
  EXPECT_EQ(j["profile"], "host");
  EXPECT_EQ(j["host_profile_file"], profile.string());
  ASSERT_EQ(j["steps"].size(), 2u);  // gather, then broadcast
  for (const auto& row : j["steps"]) {
    EXPECT_GT(row["estimate_s"].get<double>(), 0);
    EXPECT_TRUE(row.contains("host_terms")) << row;
  }
  EXPECT_TRUE(std::isfinite(j["total"]["relative_error"].get<double>()));
  // The host model predicts far closer than the cluster's topology (tens of microseconds).
  const auto cluster = json_of(run(reshard() + " check " + m.string() + " --json", &st));
  EXPECT_GT(j["total"]["estimate_s"].get<double>(), 10 * cluster["total"]["estimate_s"].get<double>());
  const auto text = run(reshard() + " check " + m.string() + " --params " + profile.string(), &st);
  EXPECT_NE(text.find("predicted by the host model with the profile of " + profile.string()), std::string::npos) << text;
  // Another backend's measurement.
  auto other = nlohmann::json::parse(std::ifstream(m));
  other["backend"] = "nccl";
  const auto nccl = dir / "reshard_test_exec_nccl_as_host.json";
  std::ofstream(nccl) << other.dump();
  const auto refused = run(reshard() + " check " + nccl.string() + " --accept-unverified --params " + profile.string(), &st);
  EXPECT_NE(st, 0);
  EXPECT_NE(refused.find(nccl.string() + ": backend: 'nccl': the host profile predicts runs of the host backend"),
            std::string::npos)
      << refused;
  const auto cal = json_of(run(reshard() + " calibrate " + m.string() + " --json", &st));
  ASSERT_EQ(st, 0) << cal;
  EXPECT_EQ(cal["rows"].size(), 1u);
}

// A hand-made chain schedule (chain_fixtures.hpp) as a file, with its scenario file and what it
// must deliver.
struct ChainRun {
  std::string schedule, scenario;
  std::int64_t needed = 0;
  ChainRun(const std::string& name, int dp, std::vector<reshard::model::ChainHop> hops, std::int64_t chunk, int parts = 1) {
    using namespace reshard::model;
    const LoadedScenario sc = reshard::test::chain_scenario(dp);
    const TransferSet ts = plan(sc.inventory, sc.source, sc.destination);
    const Schedule s = reshard::test::chain_schedule(sc, ts, std::move(hops), chunk, parts);
    schedule = (std::filesystem::temp_directory_path() / ("reshard_test_chain_" + name + ".json")).string();
    std::ofstream(schedule) << to_json(s).dump();
    scenario = reshard::test::chain_scenario_file(dp);
    needed = ts.bytes_needed.value;
  }
  std::string command(int processes, const std::string& extra) const {
    return mpirun(processes) + reshard() + " exec " + schedule + " --scenario " + scenario + " --backend host " + extra;
  }
};

// Runs `chain` on `processes` processes; expects every byte verified; returns the measurement.
nlohmann::json expect_verified(const ChainRun& chain, int processes, const std::string& what) {
  const auto m = std::filesystem::temp_directory_path() / "reshard_test_chain_measurement.json";
  int st = 0;
  const auto out = run(chain.command(processes, "--json --timeout 60s -o " + m.string()), &st);
  EXPECT_EQ(st, 0) << what << "\n" << out;
  const auto j = json_of(out);
  EXPECT_TRUE(j.is_object()) << what << "\n" << out;
  if (!j.is_object()) return nullptr;
  EXPECT_TRUE(j["verified"].get<bool>()) << what << "\n" << out;
  EXPECT_EQ(j["bytes_verified"].get<std::int64_t>(), chain.needed) << what;
  EXPECT_EQ(j["ranks"].get<int>(), processes) << what;
  const auto mj = nlohmann::json::parse(std::ifstream(m));
  for (const auto& o : mj["ops"]) {  // the root's first send, the last GPU's last chunk
    EXPECT_GE(o["start_s"].get<double>(), 0) << what;
    EXPECT_GT(o["end_s"].get<double>(), o["start_s"].get<double>()) << what;
  }
  return mj;
}

TEST(ExecHostChain, RingOfFourGpusWithAShortLastChunk) {
  // 7 MB in chunks of 10007 bytes (the last one short), more chunks than a hop keeps in flight; on
  // 4 processes (one per GPU), on 2 (GPUs 0 and 2 share one, 1 and 3 the other: every hop crosses
  // between them) and on 1 (every hop a message to itself).
  const ChainRun chain("ring", 2, reshard::test::ring4(), 10007);
  for (int processes : {4, 2, 1}) expect_verified(chain, processes, "ring on " + std::to_string(processes) + " processes");
}

TEST(ExecHostChain, TreeWithFanOuts) {
  const ChainRun chain("tree", 3, reshard::test::fan_out_tree6(), 64 << 10);
  for (int processes : {6, 4}) expect_verified(chain, processes, "tree on " + std::to_string(processes) + " processes");
}

TEST(ExecHostChain, PartSmallerThanOneChunk) {
  const ChainRun chain("one_chunk", 2, reshard::test::ring4(), 64 << 20);
  expect_verified(chain, 4, "one chunk");
}

TEST(ExecHostChain, TwoOpsOnOneChainRunInOrder) {
  const ChainRun chain("two_ops", 2, reshard::test::ring4(), 100003, 2);
  const auto m = expect_verified(chain, 4, "two ops");
  ASSERT_TRUE(m.is_object());
  // Op 1 leaves the root after op 0 has, and every GPU has all of op 0 before any of op 1.
  EXPECT_GE(m["ops"][1]["start_s"].get<double>(), m["ops"][0]["start_s"].get<double>());
  EXPECT_GE(m["ops"][1]["end_s"].get<double>(), m["ops"][0]["end_s"].get<double>());
  EXPECT_EQ(m["ops"][1]["step"].get<int>(), 0);  // one step: the chain orders them
}

TEST(ExecHostChainFaults, CorruptedByteInAForwardedChunkIsNamed) {
  // corrupt:0 flips, at op 0's dst (GPU 3, the end of the ring), the first byte GPU 3 keeps, as
  // its chunk arrives through GPUs 1 and 2.
  using namespace reshard::model;
  const ChainRun chain("corrupt", 2, reshard::test::ring4(), 10007);
  const LoadedScenario sc = reshard::test::chain_scenario(2);
  const TransferSet ts = plan(sc.inventory, sc.source, sc.destination);
  const Schedule s = reshard::test::chain_schedule(sc, ts, reshard::test::ring4(), 10007);
  const reshard::exec::RunPlan rp = reshard::exec::make_run_plan(sc, ts, s);
  const reshard::exec::GpuProgram victim = reshard::exec::build_program(rp, 3);
  const auto& first = victim.receives.at(0).copies.at(0);
  const auto& shard = victim.regions.at(static_cast<std::size_t>(first.dst));
  const std::string expected = "verification failed: rank 3 (GPU 3): tensor '" + sc.inventory.tensor(shard.tensor).name +
                               "' box " + to_string(shard.box) + ": wrong value at element offset " +
                               std::to_string(first.dst_offset / dtype_size(sc.inventory.tensor(shard.tensor).dtype)) + " ";
  int st = 0;
  const auto out = run(chain.command(4, "--inject corrupt:0"), &st);
  EXPECT_NE(st, 0) << out;
  EXPECT_NE(out.find(expected), std::string::npos) << expected << "\n" << out;
  EXPECT_EQ(out.find("more ranks found wrong bytes"), std::string::npos) << out;  // GPU 3 ends the ring
}

TEST(ExecHostChainFaults, DeadGpuInsideAChainIsReportedWithTimeout) {
  // GPU 2 (rank 2) goes silent: GPU 1 cannot hand it chunks, GPU 3 gets none; both name rank 2.
  const ChainRun chain("dead", 2, reshard::test::ring4(), 10007);
  int st = 0;
  const auto out = run(chain.command(4, "--inject die:2 --timeout 4s"), &st);
  EXPECT_NE(st, 0) << out;
  EXPECT_NE(out.find("waited for rank 2 (GPU 2): operation 0 (chain "), std::string::npos) << out;
  EXPECT_NE(out.find("within 4"), std::string::npos) << out;
}

TEST(ExecHostChainFaults, DroppedChainNeverLeavesItsRoot) {
  // drop:0: no chunk of op 0 leaves GPU 0; GPU 1 waits for it, GPU 2 for GPU 1, GPU 3 for GPU 2.
  const ChainRun chain("drop", 2, reshard::test::ring4(), 10007);
  int st = 0;
  const auto out = run(chain.command(4, "--inject drop:0 --timeout 4s"), &st);
  EXPECT_NE(st, 0) << out;
  // Every GPU of the ring waits for its parent's chunk 0; whichever times out first names it.
  const std::regex waited(R"(rank ([0-3]) \(GPU \1\) waited for rank ([0-3]) \(GPU \2\): operation 0 \(chain receive of [^,]*, chunk 0 of 706\) had no answer within 4)");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m, waited)) << out;
  EXPECT_EQ(std::stoi(m[2].str()), std::stoi(m[1].str()) - 1) << out;
}

}  // namespace
