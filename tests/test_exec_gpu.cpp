// The GPU backends (label gpu). Without a GPU every test skips with a message saying so.
//   cuda: every small scenario, every strategy (chain ops in all but direct), in this process on
//         device 0 (virtual ranks); the hand-made chains (a ring with a short last chunk, a tree
//         with fan-outs, a part smaller than a chunk, two ops on one chain); a corrupted byte is
//         named, on a plain op and in a forwarded chunk; a dropped chain fails verification.
//   nccl: `reshard exec --backend nccl` at world size 1 (every GPU of the scenario a virtual GPU
//         of the one NCCL rank; operations are NCCL sends to itself, chain ops in waves of
//         chunks): chain strategies, the hand-made chains, a corrupted forwarded chunk.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include <sys/wait.h>

#include "chain_fixtures.hpp"
#include "reshard/exec/executor.hpp"
#include "reshard/model/scenario.hpp"
#include "reshard/model/strategies.hpp"
#include "small_runs.hpp"

namespace {

using namespace reshard::model;
using namespace reshard::exec;

using reshard::test::scenario_path;

#define REQUIRE_GPU()                                                                              \
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU visible to the CUDA runtime (or built without CUDA): " \
                                                "the cuda and nccl backends are not exercised here"

TEST(ExecCuda, EverySmallScenarioEveryStrategy) {
  REQUIRE_GPU();
  reshard::test::for_each_small_run([](const std::string& name, const std::string& strategy, const LoadedScenario&,
                                       const TransferSet& ts, const Schedule& s, const RunPlan& rp) {
    ExecOptions o;
    o.backend = "cuda";
    o.scenario_path = scenario_path(name);
    const RunResult r = execute(rp, o);
    EXPECT_TRUE(r.measurement.verified) << name << " " << strategy;
    EXPECT_EQ(r.measurement.bytes_verified, ts.bytes_needed.value) << name << " " << strategy;
    for (std::size_t i = 0; i < s.ops.size(); ++i) EXPECT_GE(r.measurement.ops[i].end_s, r.measurement.ops[i].start_s);
  });
}

TEST(ExecCuda, CorruptedByteIsNamed) {
  REQUIRE_GPU();
  const LoadedScenario sc = load_scenario(std::filesystem::path(scenario_path("small-gqa-megatron-vllm.yaml")));
  const TransferSet ts = plan(sc.inventory, sc.source, sc.destination);
  StrategyParams p;
  p.strategy = Strategy::Direct;
  const Schedule s = build_schedule(ts, sc.inventory, sc.source, sc.destination, sc.topology, p);
  const RunPlan rp = make_run_plan(sc, ts, s);
  ExecOptions o;
  o.backend = "cuda";
  o.faults.push_back(parse_fault("corrupt:5"));
  try {
    execute(rp, o);
    FAIL() << "a corrupted byte went unnoticed";
  } catch (const ExecError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("(GPU 9): tensor 'model.layers."), std::string::npos) << m;
    EXPECT_NE(m.find("wrong value at element offset"), std::string::npos) << m;
  }
}

// A hand-made chain run (chain_fixtures.hpp) in this process.
struct HandMade {
  LoadedScenario sc;
  TransferSet ts;
  Schedule s;
  RunPlan rp;
  HandMade(int dp, std::vector<ChainHop> hops, std::int64_t chunk, std::int32_t parts = 1)
      : sc(reshard::test::chain_scenario(dp)), ts(plan(sc.inventory, sc.source, sc.destination)) {
    s = reshard::test::chain_schedule(sc, ts, std::move(hops), chunk, parts);
    rp = make_run_plan(sc, ts, s);
  }
  HandMade(const HandMade&) = delete;
};

TEST(ExecCuda, HandMadeChains) {
  REQUIRE_GPU();
  struct Case {
    const char* what;
    int dp;
    std::vector<ChainHop> hops;
    std::int64_t chunk;
    std::int32_t parts;
  };
  for (const Case& c : {Case{"ring, short last chunk", 2, reshard::test::ring4(), 10007, 1},
                        Case{"tree with fan-outs", 3, reshard::test::fan_out_tree6(), 64 << 10, 1},
                        Case{"part smaller than a chunk", 2, reshard::test::ring4(), 64 << 20, 1},
                        Case{"two ops on one chain", 2, reshard::test::ring4(), 100003, 2}}) {
    HandMade h(c.dp, c.hops, c.chunk, c.parts);
    ExecOptions o;
    o.backend = "cuda";
    const RunResult r = execute(h.rp, o);
    EXPECT_TRUE(r.measurement.verified) << c.what;
    EXPECT_EQ(r.measurement.bytes_verified, h.ts.bytes_needed.value) << c.what;
    for (const auto& t : r.measurement.ops) {
      EXPECT_GE(t.start_s, 0) << c.what;
      EXPECT_GT(t.end_s, t.start_s) << c.what;
    }
    if (c.parts == 2) {
      EXPECT_GE(r.measurement.ops[1].end_s, r.measurement.ops[0].end_s) << c.what;
    }
  }
}

TEST(ExecCuda, CorruptedByteInAForwardedChunkIsNamed) {
  REQUIRE_GPU();
  HandMade h(2, reshard::test::ring4(), 10007);
  const GpuProgram victim = build_program(h.rp, 3);
  const auto& first = victim.receives.at(0).copies.at(0);
  const auto& shard = victim.regions.at(static_cast<std::size_t>(first.dst));
  ExecOptions o;
  o.backend = "cuda";
  o.faults.push_back(parse_fault("corrupt:0"));
  try {
    execute(h.rp, o);
    FAIL() << "a corrupted byte went unnoticed";
  } catch (const ExecError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("(GPU 3): tensor '" + h.sc.inventory.tensor(shard.tensor).name + "' box " + to_string(shard.box) +
                     ": wrong value at element offset " +
                     std::to_string(first.dst_offset / dtype_size(h.sc.inventory.tensor(shard.tensor).dtype)) + " "),
              std::string::npos)
        << m;
  }
}

TEST(ExecCuda, DroppedChainFailsVerification) {
  REQUIRE_GPU();
  HandMade h(2, reshard::test::ring4(), 10007);
  ExecOptions o;
  o.backend = "cuda";
  o.faults.push_back(parse_fault("drop:0"));
  try {
    execute(h.rp, o);
    FAIL() << "a dropped chain op went unnoticed";
  } catch (const ExecError& e) {
    EXPECT_NE(std::string(e.what()).find("verification failed: rank 0 (GPU 1): tensor '"), std::string::npos) << e.what();
  }
}

std::string nccl_exec(const std::string& args, int* status) {
#ifdef RESHARD_MPIEXEC
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  const std::string launcher = std::string(RESHARD_MPIEXEC) + " -np 1 ";
#else
  const std::string launcher;
#endif
  std::string out;
  FILE* f = popen((launcher + reshard::test::reshard_binary() + " exec " + args + " --backend nccl 2>&1").c_str(), "r");
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), buf.size(), f)) out += buf.data();
  const int st = pclose(f);
  *status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return out;
}

TEST(ExecNccl, ChainOpsAtWorldSizeOne) {
  REQUIRE_GPU();
  // Strategies of chain ops: rings per channel (gather_broadcast), domain trees in 256 KiB chunks
  // (nemo_rl_reshard); every hop a send to this rank, chunk by chunk in waves.
  for (const char* strategy : {"gather_broadcast", "nemo_rl_reshard", "hybrid"}) {
    int st = 0;
    const auto out = nccl_exec(scenario_path("small-moe-ep.yaml") + " --strategy " + strategy + " --json", &st);
    ASSERT_EQ(st, 0) << strategy << "\n" << out;
    const auto j = nlohmann::json::parse(out.substr(out.find('{')));
    EXPECT_TRUE(j["verified"].get<bool>()) << strategy;
  }
  // The hand-made ring (short last chunk) and tree, from schedule files.
  for (int dp : {2, 3}) {
    const LoadedScenario sc = reshard::test::chain_scenario(dp);
    const TransferSet ts = plan(sc.inventory, sc.source, sc.destination);
    const Schedule s = reshard::test::chain_schedule(sc, ts, dp == 2 ? reshard::test::ring4() : reshard::test::fan_out_tree6(),
                                                     dp == 2 ? 10007 : 64 << 10, dp == 2 ? 2 : 1);
    const auto file = std::filesystem::temp_directory_path() / ("reshard_test_gpu_chain_dp" + std::to_string(dp) + ".json");
    std::ofstream(file) << to_json(s).dump();
    int st = 0;
    const auto out = nccl_exec(file.string() + " --scenario " + reshard::test::chain_scenario_file(dp) + " --json", &st);
    ASSERT_EQ(st, 0) << out;
    const auto j = nlohmann::json::parse(out.substr(out.find('{')));
    EXPECT_TRUE(j["verified"].get<bool>());
    EXPECT_EQ(j["bytes_verified"].get<std::int64_t>(), ts.bytes_needed.value);
    if (dp == 2) {  // corrupt:0 is flipped at GPU 3 as its chunk arrives
      const auto bad = nccl_exec(file.string() + " --scenario " + reshard::test::chain_scenario_file(dp) + " --inject corrupt:0", &st);
      EXPECT_NE(st, 0) << bad;
      EXPECT_NE(bad.find("verification failed: rank 0 (GPU 3): tensor '"), std::string::npos) << bad;
    }
  }
}

TEST(ExecNccl, WorldSizeOne) {
  REQUIRE_GPU();
  std::string out;
#ifdef RESHARD_MPIEXEC
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  const std::string launcher = std::string(RESHARD_MPIEXEC) + " -np 1 ";
#else
  const std::string launcher;
#endif
  FILE* f = popen((launcher + reshard::test::reshard_binary() + " exec " + scenario_path("small-moe-ep.yaml") +
                   " --strategy domain_chain --backend nccl --json 2>&1")
                      .c_str(),
                  "r");
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), buf.size(), f)) out += buf.data();
  ASSERT_EQ(pclose(f), 0) << out;
  const auto j = nlohmann::json::parse(out.substr(out.find('{')));
  EXPECT_TRUE(j["verified"].get<bool>());
  EXPECT_EQ(j["ranks"].get<int>(), 1);
}

}  // namespace
