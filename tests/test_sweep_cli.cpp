// `reshard sweep` and `--set` on the command line: the files a sweep writes, the same CSV from
// `mpirun -np 2` as from one process, errors naming the override.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "run_command.hpp"

namespace {

const std::string kSource = RESHARD_SOURCE_DIR;
const std::string kSpec = kSource + "/tests/sweep/small-moe-nic.yaml";

std::string run(const std::string& cmd, int* status) { return reshard::test::run_command(cmd + " 2>&1", status); }

std::string read(const std::filesystem::path& p) {
  std::stringstream s;
  s << std::ifstream(p).rdbuf();
  return s.str();
}

std::filesystem::path temp(const std::string& name) {
  return std::filesystem::temp_directory_path() / ("reshard_test_sweep_cli_" + std::to_string(getpid()) + "_" + name);
}

TEST(SweepCli, WritesCsvJsonLinesAndASummary) {
  const auto prefix = temp("serial");
  int st = 0;
  const auto out = run(std::string(RESHARD_BINARY) + " sweep " + kSpec + " -o " + prefix.string(), &st);
  ASSERT_EQ(st, 0) << out;
  // The golden CSV of tests/test_sweep.cpp (library) is what the command writes.
  EXPECT_EQ(read(prefix.string() + ".csv"), read(kSource + "/tests/sweep/small-moe-nic.csv"));
  std::istringstream jsonl(read(prefix.string() + ".jsonl"));
  int lines = 0;
  for (std::string line; std::getline(jsonl, line);) ++lines;
  EXPECT_EQ(lines, 4 * 4);  // 4 points x (3 strategies + auto)
  EXPECT_NE(out.find("host link"), std::string::npos) << out;
  EXPECT_NE(out.find("0 failed points"), std::string::npos) << out;
  std::filesystem::remove(prefix.string() + ".csv");
  std::filesystem::remove(prefix.string() + ".jsonl");
}

// A typo in an axis value (`400Gb`) is found before any point runs: exit 2, the point and the
// reader's error named, no file written. With --keep-going the other points run and the sweep
// exits 0; a point that fails while running (weights above a 1 KB GPU) exits 1 without it.
TEST(SweepCli, BadAxisValueStopsTheSweepBeforeItRuns) {
  const auto spec = temp("typo.yaml");
  std::ofstream(spec) << "name: typo\nscenario: " << kSource << "/scenarios/small-moe-ep.yaml\n"
                      << "axes:\n  - key: topology.cluster.nic_speed\n    values: [400Gbps, 400Gb, 800Gbps]\n"
                      << "strategies: [direct]\n";
  const auto prefix = temp("typo");
  int st = 0;
  auto out = run(std::string(RESHARD_BINARY) + " sweep " + spec.string() + " -o " + prefix.string(), &st);
  EXPECT_EQ(st, 2) << out;
  EXPECT_NE(out.find("reshard: error: " + spec.string() + ": point 1: --set topology.cluster.nic_speed=400Gb: "),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("cluster.nic_speed: unknown bandwidth unit 'Gb'"), std::string::npos) << out;
  EXPECT_NE(out.find("no point was run"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(prefix.string() + ".csv"));
  out = run(std::string(RESHARD_BINARY) + " sweep " + spec.string() + " --keep-going -o " + prefix.string(), &st);
  EXPECT_EQ(st, 0) << out;
  EXPECT_NE(out.find("3 rows; 1 failed point"), std::string::npos) << out;

  std::ofstream(spec) << "name: fit\nscenario: " << kSource << "/scenarios/small-moe-ep.yaml\n"
                      << "axes:\n  - key: topology.cluster.gpu_memory\n    values: [80GB, 1KB]\nstrategies: [direct]\n";
  out = run(std::string(RESHARD_BINARY) + " sweep " + spec.string() + " -o " + prefix.string(), &st);
  EXPECT_EQ(st, 1) << out;
  EXPECT_NE(out.find("1 point failed"), std::string::npos) << out;
  EXPECT_TRUE(std::filesystem::exists(prefix.string() + ".csv"));  // the rows are written all the same
  std::filesystem::remove(spec);
  std::filesystem::remove(prefix.string() + ".csv");
  std::filesystem::remove(prefix.string() + ".jsonl");
}

// A schedule written by `plan -o` records its scenario file relative to itself, so `simulate` finds
// it from any folder although the scenario's name differs from its file's; `simulate` names the
// bottleneck link of a bandwidth-bound op, as --trace does.
TEST(SweepCli, ScheduleFindsItsScenarioFromAnotherFolder) {
  const auto dir = temp("sched_dir");
  std::filesystem::create_directories(dir);
  const auto scen = dir / "renamed.yaml";
  std::string text = read(kSource + "/scenarios/small-gqa-megatron-tp8.yaml");
  for (const std::string from : {"../models/", "../topologies/"})
    for (auto at = text.find(from); at != std::string::npos; at = text.find(from))
      text.replace(at, from.size(), kSource + "/" + from.substr(3));
  std::ofstream(scen) << "name: not-the-file-name\n" << text.substr(text.find('\n', text.find("name:")) + 1);
  for (const char* ext : {".json", ".rsched"}) {
    const auto sched = dir / (std::string("s") + ext);
    int st = 0;
    auto out = run(std::string(RESHARD_BINARY) + " plan " + scen.string() + " --strategy domain_chain -o " + sched.string(), &st);
    ASSERT_EQ(st, 0) << out;
    out = run("cd / && " + std::string(RESHARD_BINARY) + " simulate " + sched.string(), &st);
    EXPECT_EQ(st, 0) << out;
    EXPECT_NE(out.find("critical path"), std::string::npos) << out;
    EXPECT_EQ(out.find("(latency only)"), std::string::npos) << out;
  }
  std::filesystem::remove_all(dir);
}

TEST(SweepCli, SetOnCompareNamesTheOverride) {
  int st = 0;
  const auto out = run(std::string(RESHARD_BINARY) + " compare " + kSource +
                           "/scenarios/small-moe-ep.yaml --set destination.tpp=16",
                       &st);
  EXPECT_EQ(st, 2) << out;
  EXPECT_NE(out.find("reshard: error: --set destination.tpp=16: "), std::string::npos) << out;
  EXPECT_NE(out.find("destination.tpp: unknown key"), std::string::npos) << out;
  const auto ok = run(std::string(RESHARD_BINARY) + " plan " + kSource +
                          "/scenarios/small-moe-ep.yaml --set topology.cluster.nic_speed=1600Gbps",
                      &st);
  EXPECT_EQ(st, 0) << ok;
  EXPECT_NE(ok.find("host links PCIe 64.0 GB/s per GPU"), std::string::npos) << ok;
}

#ifdef RESHARD_MPIEXEC
TEST(SweepCli, MpirunGivesTheSerialCsv) {
  // Tests may run as root in containers; more processes than cores on CI machines.
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  const auto serial = temp("serial_for_mpi"), parallel = temp("mpi");
  int st = 0;
  auto out = run(std::string(RESHARD_BINARY) + " sweep " + kSpec + " -j 1 -o " + serial.string(), &st);
  ASSERT_EQ(st, 0) << out;
  out = run(std::string(RESHARD_MPIEXEC) + " --oversubscribe -np 2 " + RESHARD_BINARY + " sweep " + kSpec + " -j 1 -o " +
                parallel.string(),
            &st);
  ASSERT_EQ(st, 0) << out;
  EXPECT_NE(out.find("(4 points, 2 processes)"), std::string::npos) << out;
  const std::string csv = read(serial.string() + ".csv");
  EXPECT_FALSE(csv.empty());
  EXPECT_EQ(read(parallel.string() + ".csv"), csv);
  EXPECT_EQ(read(parallel.string() + ".jsonl"), read(serial.string() + ".jsonl"));
  for (const auto& p : {serial, parallel})
    for (const char* ext : {".csv", ".jsonl"}) std::filesystem::remove(p.string() + ext);
}
#endif

}  // namespace
