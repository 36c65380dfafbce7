// `reshard init`: the starter files it writes load (`plan` and `compare` run on them), list every
// key of the scenario and topology tables they use, and are never overwritten.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "paths.hpp"
#include "reshard/model/scenario_keys.hpp"
#include "run_command.hpp"

namespace {

namespace fs = std::filesystem;

std::string run(const std::string& args, int* status) {
  return reshard::test::run_command(reshard::test::reshard_binary() + " " + args + " 2>&1", status);
}

std::string read(const fs::path& p) {
  std::stringstream s;
  s << std::ifstream(p).rdbuf();
  return s.str();
}

fs::path temp(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / ("reshard_test_init_cli_" + std::to_string(getpid()) + "_" + name);
  fs::remove_all(p);
  return p;
}

// Every key of the tables appears in `text` as ` key:` or `# key:` at the start of a line (set or
// commented out).
void expect_every_key(const std::string& text, const std::vector<std::string>& keys, const std::string& table) {
  for (const auto& k : keys) {
    bool found = false;
    std::istringstream lines(text);
    for (std::string line; !found && std::getline(lines, line);) {
      const auto at = line.find_first_not_of("# ");
      found = at != std::string::npos && line.compare(at, k.size() + 1, k + ":") == 0;
    }
    EXPECT_TRUE(found) << "the starter file lacks '" << k << "' of " << table << ":\n" << text;
  }
}

// init, then plan and compare on what it wrote: every command exits 0. Returns what init printed.
std::string init_plan_compare(const std::string& name, const std::string& init_args) {
  const fs::path dir = temp(name);
  int st = -1;
  const std::string printed = run("init " + init_args + " -o " + dir.string(), &st);
  std::string out = printed;
  EXPECT_EQ(st, 0) << out;
  if (st != 0) return printed;
  const fs::path scenario = dir / "scenario.yaml", topology = dir / "topology.yaml";
  EXPECT_NE(out.find("wrote " + topology.string()), std::string::npos) << out;
  EXPECT_NE(out.find("wrote " + scenario.string()), std::string::npos) << out;
  EXPECT_NE(out.find("next: reshard compare " + scenario.string()), std::string::npos) << out;

  const std::string scen = read(scenario), topo = read(topology);
  using reshard::model::scenario_keys;
  using reshard::model::topology_keys;
  for (const char* t : {"root", "megatron", "vllm", "precision"}) expect_every_key(scen, scenario_keys(t), t);
  for (const char* t : {"root.cluster", "cluster", "fabric", "fabric.core", "latency"})
    expect_every_key(topo, topology_keys(t), t);

  out = run("plan " + scenario.string(), &st);
  EXPECT_EQ(st, 0) << out;
  out = run("compare " + scenario.string(), &st);
  EXPECT_EQ(st, 0) << out;
  out = run("topo " + topology.string(), &st);
  EXPECT_EQ(st, 0) << out;
  fs::remove_all(dir);
  return printed;
}

TEST(InitCli, DgxH100StarterLoads) {
  const std::string out = init_plan_compare("dgx", "");
  EXPECT_NE(out.find("qwen3-8b, megatron TP8 DP1 on GPUs 0-7 -> vllm TP1 DP8 on GPUs 8-15"), std::string::npos) << out;
}

TEST(InitCli, Gb200RackStarterWithAnotherModelLoads) {
  init_plan_compare("gb200", "--template gb200-nvl72 --nodes 1 --model " + reshard::test::source_dir() +
                                 "/models/tiny-moe.yaml");
}

// A model too large for one GPU gets the vLLM TP that fits, not an error: Qwen3-235B-A22B (470 GB
// in BF16) on two DGX H100 nodes, 59 GB per GPU at TP8.
TEST(InitCli, LargerModelGetsMoreSharding) {
  const std::string out =
      init_plan_compare("qwen235b", "--model " + reshard::test::source_dir() + "/models/qwen3-235b-a22b.yaml");
  EXPECT_NE(out.find("megatron TP8 DP1 on GPUs 0-7 -> vllm TP8 DP1 on GPUs 8-15"), std::string::npos) << out;
}

// Every architecture reshard reads gets a starter that plans and compares: the small test model of
// each new type, and released configs of the ones whose head or DeltaNet key heads limit TP
// (gpt-oss-120b, Qwen3-Next: vLLM TP4 fits 159 GB on 8 GPUs; Qwen3.5-35B-A3B).
TEST(InitCli, EveryNewArchitectureGetsAStarter) {
  const std::string models = reshard::test::source_dir() + "/models/";
  for (const char* m : {"tiny-qwen2.yaml", "tiny-llama.yaml", "tiny-glm4-moe.yaml", "tiny-gpt-oss.yaml",
                        "tiny-qwen3-next.yaml", "tiny-qwen3.5.yaml", "tiny-qwen3.5-moe.yaml", "tiny-deepseek-v32.yaml",
                        "tiny-kimi-k2.5", "hf/gpt-oss-120b", "hf/qwen3-next-80b-a3b-instruct", "hf/qwen3.5-35b-a3b"}) {
    SCOPED_TRACE(m);
    std::string name = m;
    std::replace(name.begin(), name.end(), '/', '-');
    init_plan_compare("arch-" + name, "--model " + models + m);
  }
}

// A model no layout of the GPUs holds is one error, and nothing is written: DeepSeek-V3 (1.34 TB
// in BF16) on the 4 + 4 GPUs of one DGX H100.
TEST(InitCli, ModelTooLargeForTheGpusIsOneError) {
  const fs::path dir = temp("too-large");
  int st = -1;
  const std::string out =
      run("init --nodes 1 --model " + reshard::test::source_dir() + "/models/deepseek-v3.yaml -o " + dir.string(), &st);
  EXPECT_EQ(st, 2) << out;
  EXPECT_NE(out.find("no starter layout of deepseek-v3 fits 4 GPUs per side of 1 dgx-h100 node"), std::string::npos)
      << out;
  EXPECT_NE(out.find("give more --nodes"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(dir));
}

TEST(InitCli, RefusesToOverwrite) {
  const fs::path dir = temp("overwrite");
  fs::create_directories(dir);
  std::ofstream(dir / "scenario.yaml") << "mine\n";
  int st = -1;
  const std::string out = run("init -o " + dir.string(), &st);
  EXPECT_NE(st, 0) << out;
  EXPECT_NE(out.find((dir / "scenario.yaml").string() + ": already exists"), std::string::npos) << out;
  EXPECT_EQ(read(dir / "scenario.yaml"), "mine\n");
  EXPECT_FALSE(fs::exists(dir / "topology.yaml")) << "nothing is written when one file exists";
  fs::remove_all(dir);
}

TEST(InitCli, UnknownTemplateListsTheKnown) {
  const fs::path dir = temp("unknown");
  int st = -1;
  const std::string out = run("init --template dgx-h9000 -o " + dir.string(), &st);
  EXPECT_NE(st, 0) << out;
  EXPECT_NE(out.find("unknown template 'dgx-h9000'; known templates: dgx-h100"), std::string::npos) << out;
  EXPECT_NE(out.find("gb200-nvl72"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(dir));
}

}  // namespace
