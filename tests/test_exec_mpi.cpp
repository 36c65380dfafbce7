// `mpirun -np N reshard exec … --backend host`: every small scenario with every strategy (and auto)
// verifies every byte; faults end the run with the right message; a schedule of another scenario
// is refused before anything runs; a measurement goes through `reshard check` and `reshard
// calibrate`. N is what `reshard exec --dry-run` says the schedule needs (one process per GPU).
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <string>

#include "reshard/model/scenario.hpp"
#include "reshard/model/schedule.hpp"

namespace {

std::string run(const std::string& cmd, int* status) {
  std::string out;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), buf.size(), p)) out += buf.data();
  const int s = pclose(p);
  *status = WIFEXITED(s) ? WEXITSTATUS(s) : 128 + WTERMSIG(s);
  return out;
}

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

TEST(ExecHost, EverySmallScenarioEveryStrategyVerifiesBytesNeeded) {
  std::vector<std::string> strategies = reshard::model::strategy_names();
  strategies.push_back("auto");
  for (const auto& entry : std::filesystem::directory_iterator(std::string(RESHARD_SOURCE_DIR) + "/scenarios")) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("small-", 0) != 0 || entry.path().extension() != ".yaml") continue;
    int st = 0;
    const auto plan_out = run(reshard() + " plan " + entry.path().string() + " --json", &st);
    ASSERT_EQ(st, 0) << plan_out;
    const auto plan = json_of(plan_out);
    // Compared with bytes_needed: every destination shard is checked, including the parts a GPU
    // already held (bytes_needed - bytes_to_move, zero in these disaggregated scenarios).
    const std::int64_t needed = plan["bytes_needed"].get<std::int64_t>();
    for (const auto& strategy : strategies) {
      const int n = gpus_needed(entry.path().string(), strategy);
      const auto out = run(mpirun(n) + reshard() + " exec " + entry.path().string() + " --strategy " + strategy +
                               " --backend host --json --timeout 60s",
                           &st);
      ASSERT_EQ(st, 0) << name << " " << strategy << "\n" << out;
      const auto j = json_of(out);
      ASSERT_TRUE(j.is_object()) << out;
      EXPECT_TRUE(j["verified"].get<bool>()) << name << " " << strategy;
      EXPECT_EQ(j["bytes_verified"].get<std::int64_t>(), needed) << name << " " << strategy;
      EXPECT_EQ(j["ranks"].get<int>(), n);
      EXPECT_GT(j["elapsed_s"].get<double>(), 0);
      EXPECT_FALSE(j["steps"].empty());
    }
  }
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

TEST(ExecHostFaults, MissingPeerTimesOutNamingRankAndPeer) {
  int st = 0;
  const auto out = run(mpirun(16) + reshard() + " exec " + kGqa + " --strategy direct --inject drop:5 --timeout 4s", &st);
  EXPECT_NE(st, 0) << out;
  EXPECT_NE(out.find("rank 9 (GPU 9) waited for rank 2 (GPU 2): operation 5"), std::string::npos) << out;
  EXPECT_NE(out.find("had no answer within 4"), std::string::npos) << out;
}

TEST(ExecHostFaults, SilentRankTimesOutNamingIt) {
  // Rank 3 (a source GPU) goes silent before its sends: its receivers time out naming it.
  int st = 0;
  const auto out = run(mpirun(16) + reshard() + " exec " + kGqa + " --strategy direct --inject die:3 --timeout 4s", &st);
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
    EXPECT_GT(row["predicted_s"].get<double>(), 0);
    EXPECT_GT(row["measured_s"].get<double>(), 0);
    EXPECT_NEAR(row["error"].get<double>(),
                (row["measured_s"].get<double>() - row["predicted_s"].get<double>()) / row["predicted_s"].get<double>(), 1e-9);
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

}  // namespace
