// `reshard simulate --topology T --flows F.csv`: JSON keys, a hand-checked makespan, bad rows.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "run_command.hpp"

namespace {

std::string run(const std::string& args, int* status) {
  return reshard::test::run_command(std::string(RESHARD_BINARY) + " " + args + " 2>&1", status);
}

TEST(SimulateCli, RawTrafficJsonAndDump) {
  // GPU 0 -> GPU 1 inside one DGX H100 node: NVLink 450 GB/s per direction. Two transfers of 900 MB
  // on the same GPU pair share it: 1.8 GB / 450 GB/s = 4 ms (+ route latency, microseconds), then a
  // third one after both: 450 MB alone -> 1 ms more. Makespan about 5 ms.
  const auto dir = std::filesystem::temp_directory_path();
  const auto csv = dir / "reshard_test_sim_cli.csv";
  const auto dump = dir / "reshard_test_sim_cli_dump.json";
  std::ofstream(csv) << "id,src,dst,bytes,after\n1,0,1,900MB,\n2,0,1,900000000,\n3,0,1,450MB,1;2\n";
  int status = 0;
  const auto out = run("simulate --topology " RESHARD_SOURCE_DIR "/topologies/dgx-h100-2n.yaml --flows " +
                           csv.string() + " --json --dump-flows " + dump.string(),
                       &status);
  ASSERT_EQ(status, 0) << out;
  const auto j = nlohmann::json::parse(out);
  for (const char* key : {"simulated_s", "transfers", "events", "wall_s", "wall_classes_s", "wall_event_loop_s"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_LE(j["wall_classes_s"].get<double>() + j["wall_event_loop_s"].get<double>(), j["wall_s"].get<double>());
  EXPECT_EQ(j["transfers"], 3);
  EXPECT_NEAR(j["simulated_s"].get<double>(), 5e-3, 2e-5);
  const auto d = nlohmann::json::parse(std::ifstream(dump));
  ASSERT_EQ(d["flows"].size(), 3u);
  EXPECT_NEAR(d["flows"][2]["release_s"].get<double>(), d["flows"][0]["finish_s"].get<double>(), 1e-15);
  std::filesystem::remove(csv);
  std::filesystem::remove(dump);
}

TEST(SimulateCli, JitterAndNoSymmetry) {
  // The traffic above with capacities jittered by up to 1 %: the makespan stays within 1 % (all
  // three transfers use the same links, so it scales with one link's capacity, about 5 ms), is the
  // same for the same seed, and --no-symmetry gives the same answer as the default.
  const auto csv = std::filesystem::temp_directory_path() / "reshard_test_sim_cli_jitter.csv";
  std::ofstream(csv) << "id,src,dst,bytes,after\n1,0,1,900MB,\n2,0,1,900MB,\n3,0,1,450MB,1;2\n";
  const std::string base =
      "simulate --topology " RESHARD_SOURCE_DIR "/topologies/dgx-h100-2n.yaml --flows " + csv.string() + " --json";
  auto makespan = [&](const std::string& extra) {
    int status = 0;
    const auto out = run(base + extra, &status);
    EXPECT_EQ(status, 0) << out;
    const auto j = nlohmann::json::parse(out);
    return std::make_pair(j["simulated_s"].get<double>(), j);
  };
  const auto [plain, plain_json] = makespan("");
  EXPECT_EQ(plain_json["capacity_jitter"], 0.0);
  const auto [jittered, j] = makespan(" --jitter 0.01 --seed 3");
  EXPECT_EQ(j["capacity_jitter"], 0.01);
  EXPECT_EQ(j["jitter_seed"], 3);
  EXPECT_NE(jittered, plain);
  EXPECT_NEAR(jittered, plain, 0.011 * plain);
  EXPECT_EQ(makespan(" --jitter 0.01 --seed 3").first, jittered);
  EXPECT_EQ(makespan(" --no-symmetry").first, plain);
  int status = 0;
  const auto out = run(base + " --jitter 0.7", &status);
  EXPECT_NE(status, 0);
  EXPECT_NE(out.find("--jitter"), std::string::npos) << out;
  std::filesystem::remove(csv);
}

TEST(SimulateCli, BadRowNamesFileAndLine) {
  const auto csv = std::filesystem::temp_directory_path() / "reshard_test_sim_cli_bad.csv";
  std::ofstream(csv) << "id,src,dst,bytes\n1,0,1,10MB\n2,0,x,10MB\n";
  int status = 0;
  const auto out = run("simulate --topology " RESHARD_SOURCE_DIR "/topologies/dgx-h100-2n.yaml --flows " + csv.string(),
                       &status);
  EXPECT_NE(status, 0);
  EXPECT_NE(out.find(csv.string() + ":3: dst: expected an integer"), std::string::npos) << out;
  std::filesystem::remove(csv);
}

}  // namespace
