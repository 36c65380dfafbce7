// Shipped scenarios: golden byte counts worked out from the architectures, bad scenario files.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "reshard/model/errors.hpp"
#include "reshard/model/planner.hpp"
#include "reshard/model/scenario.hpp"

using namespace reshard::model;

namespace {
const std::filesystem::path kRoot = RESHARD_SOURCE_DIR;

// Bytes of tensors that each vLLM TP rank holds whole (replicated over TP).
std::int64_t replicated_bytes(const Inventory& inv) {
  std::int64_t b = 0;
  for (const auto& t : inv.tensors())
    if (t.role == ParallelRole::Replicated && t.expert < 0) b += t.bytes().value;
  return b;
}
}  // namespace

TEST(Scenarios, DeepSeekV3H100) {
  const auto sc = load_scenario(kRoot / "scenarios/deepseek-v3-h100.yaml");
  const auto ts = plan(sc.inventory, sc.source, sc.destination);
  // 671.03 B parameters in BF16, MTP layer excluded: 1.342e12 bytes.
  EXPECT_EQ(sc.inventory.parameters(), 671'026'419'200);
  // BF16 everywhere except the fp32 router bias e_score_correction_bias [256] of the 58 MoE layers.
  EXPECT_EQ(ts.logical_bytes.value, 2 * 671'026'419'200 + 2 * 256 * 58);
  // vLLM TP32 x DP8: each of the 8 replicas holds the model once, except the tensors vLLM keeps
  // whole on every TP rank (MLA q_a/kv_a down-projections, norms, routers), held 32 x 8 = 256 times:
  //   bytes_needed = 8 * (logical - R) + 256 * R  ( = 8.38 x logical; 8 x for the sharded part).
  const std::int64_t R = replicated_bytes(sc.inventory);
  EXPECT_EQ(ts.bytes_needed.value, 8 * (ts.logical_bytes.value - R) + 256 * R);
  EXPECT_EQ(ts.bytes_to_move, ts.bytes_needed);  // disaggregated: nothing is already in place
  // The physical bound of docs/design.md §1: 1.342 TB into each 4-node TP32 replica through 32 NICs of
  // 50 GB/s (1.6e12 B/s) is 0.84 s; the replicated tensors need to enter each domain too, so the
  // binding cut is a destination domain's NIC ingress: (logical/4 sharded share + R) / (8 x 50 GB/s).
  const auto lb = lower_bound(ts, sc.source, sc.destination, sc.topology);
  EXPECT_EQ(lb.binding.cut, "dest_domain_ingress");
  EXPECT_NEAR(lb.time.value, 0.84, 0.01);
}

TEST(Scenarios, Qwen3_235bH100) {
  const auto sc = load_scenario(kRoot / "scenarios/qwen3-235b-h100.yaml");
  const auto ts = plan(sc.inventory, sc.source, sc.destination);
  EXPECT_NEAR(static_cast<double>(sc.inventory.parameters()), 235.09e9, 0.001 * 235.09e9);
  // vLLM TP8 x DP16: 16 copies; replicated tensors (norms, routers) on all 128 ranks; 4 KV heads on
  // TP8: each k/v row held by 2 TP ranks x 16 replicas = 32 ranks.
  const std::int64_t R = replicated_bytes(sc.inventory);
  std::int64_t kv = 0;
  for (const auto& t : sc.inventory.tensors())
    if (t.fused == FusedPart::K || t.fused == FusedPart::V) kv += t.bytes().value;
  EXPECT_EQ(ts.bytes_needed.value, 16 * (ts.logical_bytes.value - R - kv) + 128 * R + 32 * kv);
}

TEST(Scenarios, EveryShippedScenarioPlans) {
  int count = 0;
  for (const auto& e : std::filesystem::directory_iterator(kRoot / "scenarios")) {
    if (e.path().extension() != ".yaml") continue;
    SCOPED_TRACE(e.path().string());
    const auto sc = load_scenario(e.path());
    const auto ts = plan(sc.inventory, sc.source, sc.destination);
    EXPECT_EQ(ts.bytes_needed, sc.destination.total_bytes_held(sc.inventory));
    const auto lb = lower_bound(ts, sc.source, sc.destination, sc.topology);
    EXPECT_GT(lb.time.value, 0);
    // On every shipped scenario a GPU, domain or side cut binds; the leaf groups' and pods' cuts
    // stay below it (the 2:1 join of two clusters included).
    EXPECT_EQ(lb.binding.cut.find("fabric"), std::string::npos) << lb.binding.cut << " " << lb.binding.where;
    ++count;
  }
  EXPECT_GE(count, 7);
}

TEST(Scenarios, ColocatedMovesLessThanItNeeds) {
  const auto sc = load_scenario(kRoot / "scenarios/qwen3-8b-colocated.yaml");
  const auto ts = plan(sc.inventory, sc.source, sc.destination);
  EXPECT_LT(ts.bytes_to_move, ts.bytes_needed);
  EXPECT_GT(ts.bytes_to_move.value, 0);
}

// ---- Bad scenario files: one ConfigError naming the file, the line and the key -----------------

namespace {
struct BadCase {
  const char* name;
  std::string yaml;
  int line;
  const char* key;
  const char* message;
};

std::string scenario(const std::string& source, const std::string& destination, const std::string& extra = "") {
  return "model: " + (kRoot / "models/tiny-gqa.yaml").string() + "\ntopology: " +
         (kRoot / "topologies/dgx-h100-2n.yaml").string() + "\n" + extra + "source:\n" + source + "destination:\n" +
         destination;
}
const std::string kGoodSrc = "  framework: megatron\n  tp: 2\n  gpus: 0-3\n";
const std::string kGoodDst = "  framework: vllm\n  tp: 2\n  dp: 2\n  gpus: 8-11\n";
}  // namespace

TEST(Scenarios, BadInputIsOneClearError) {
  const std::vector<BadCase> cases = {
      {"dp does not divide", scenario("  framework: megatron\n  tp: 2\n  pp: 2\n  gpus: 0-5\n", kGoodDst), 3, "source",
       "not divisible by TP*CP*PP"},
      {"layout larger than its gpus", scenario(kGoodSrc, "  framework: vllm\n  tp: 2\n  dp: 4\n  gpus: 8-11\n"), 7,
       "destination", "needs 8 GPUs"},
      {"gpu outside the topology", scenario(kGoodSrc, "  framework: vllm\n  tp: 2\n  dp: 2\n  gpus: 14-17\n"), 11,
       "destination.gpus", "outside the topology"},
      {"tensor not divisible", scenario(kGoodSrc, "  framework: vllm\n  tp: 3\n  gpus: 8-10\n"), 7, "destination",
       "not divisible by 3"},
      {"placement on a missing dimension",
       scenario(kGoodSrc, "  framework: dtensor\n  mesh: {shape: [2]}\n  placements: {default: [Shard(3)]}\n  gpus: 8-9\n"),
       7, "destination", "Shard(3)"},
      {"unknown key", scenario(kGoodSrc, kGoodDst, "colour: blue\n"), 3, "colour", "unknown key"},
      {"unknown framework", scenario(kGoodSrc, "  framework: tensorrt_llm\n  gpus: 8-11\n"), 8, "destination.framework",
       "unknown framework"},
      {"bad gpu range", scenario(kGoodSrc, "  framework: vllm\n  tp: 2\n  dp: 2\n  gpus: 11-8\n"), 11,
       "destination.gpus", "backwards"},
  };
  const auto dir = std::filesystem::temp_directory_path() / "reshard-bad-scenarios";
  std::filesystem::create_directories(dir);
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const auto path = dir / (std::string(c.name) + ".yaml");
    std::ofstream(path) << c.yaml;
    try {
      (void)load_scenario(path);
      ADD_FAILURE() << "accepted";
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.file(), path.string());
      EXPECT_EQ(e.line(), c.line) << e.what();
      EXPECT_EQ(e.key(), c.key) << e.what();
      EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << e.what();
    }
  }
}

TEST(Scenarios, PlanCommandJson) {
  const std::string cmd = std::string(RESHARD_BINARY) + " plan " + (kRoot / "scenarios/small-moe-ep.yaml").string() +
                          " --json";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  while (auto n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  ASSERT_EQ(pclose(p), 0);
  for (const char* key : {"\"parameters\"", "\"logical_bytes\"", "\"source_gpus\"", "\"destination_gpus\"", "\"world_size\"",
                          "\"pieces\"", "\"bytes_needed\"", "\"lower_bound_s\""})
    EXPECT_NE(out.find(key), std::string::npos) << key;
}
