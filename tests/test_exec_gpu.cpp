// The GPU backends (label gpu). Without a GPU every test skips with a message saying so.
//   cuda: every small scenario, every strategy, in this process on device 0 (virtual ranks);
//         a corrupted byte is named; the fill/check kernels agree with the host pattern.
//   nccl: `reshard exec --backend nccl` at world size 1 (every GPU of the scenario a virtual GPU
//         of the one NCCL rank; operations are NCCL sends to itself).
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "reshard/exec/executor.hpp"
#include "reshard/model/scenario.hpp"
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
  p.strategy = "direct";
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
  FILE* f = popen((launcher + RESHARD_BINARY + " exec " + scenario_path("small-moe-ep.yaml") +
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
