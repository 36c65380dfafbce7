// Adapter-only refit (model/lora.hpp): the adapters' shapes, names and roles by hand on the tiny
// Qwen3-shaped model, each framework's split of A and B, the bytes a destination needs counted by
// hand, the refusals, and per-operation costs ruling the adapters' refit where bandwidth rules the
// weights'.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "reshard/model/cost.hpp"
#include "reshard/model/errors.hpp"
#include "reshard/model/lora.hpp"
#include "reshard/model/planner.hpp"
#include "reshard/model/scenario.hpp"
#include "reshard/model/strategies.hpp"

using namespace reshard::model;

namespace {

const std::filesystem::path kRoot = RESHARD_SOURCE_DIR;
const std::filesystem::path kScenario = kRoot / "scenarios/small-lora-qwen3.yaml";
Override set(const std::string& key, const std::string& value) { return Override{key, value, key + "=" + value}; }

const TensorInfo& get(const Inventory& inv, const std::string& name) {
  const auto* t = inv.find(name);
  if (!t) throw std::runtime_error("no tensor " + name);
  return *t;
}

ConfigError load_error(const std::vector<Override>& sets) {
  try {
    (void)load_scenario(kScenario, sets);
  } catch (const ConfigError& e) {
    return e;
  }
  ADD_FAILURE() << "expected a ConfigError";
  return ConfigError("", 0, "", "");
}

}  // namespace

TEST(Lora, AdaptersOfTheTinyModelByHand) {
  // tiny-gqa: H 256, q 8 heads and k/v 2 heads of 32, FFN 768, 4 layers. Rank 16, per layer:
  //   q  A [16, 256] 4096 + B [256, 16] 4096     o     A [16, 256] 4096 + B [256, 16] 4096
  //   k  A 4096 + B [64, 16] 1024 (v the same)   gate  A 4096 + B [768, 16] 12288 (up the same)
  //   down A [16, 768] 12288 + B [256, 16] 4096
  // = 8192 + 2 * 5120 + 8192 + 3 * 16384 = 75 776, x4 layers = 303 104 parameters, 56 tensors.
  const auto sc = load_scenario(kScenario);
  const Inventory& inv = sc.inventory;
  EXPECT_EQ(inv.parameters(), 303'104);
  EXPECT_EQ(inv.tensors().size(), 56u);
  ASSERT_NE(inv.lora(), nullptr);
  EXPECT_EQ(inv.lora()->rank, 16);
  EXPECT_EQ(inv.lora()->alpha, 32);
  const auto& qa = get(inv, "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight");
  EXPECT_EQ(qa.shape, (std::vector<std::int64_t>{16, 256}));
  EXPECT_EQ(qa.role, ParallelRole::Replicated);       // vLLM: A whole under a column-parallel layer
  EXPECT_EQ(qa.base_role, ParallelRole::ColumnParallel);
  const auto& kb = get(inv, "base_model.model.model.layers.0.self_attn.k_proj.lora_B.weight");
  EXPECT_EQ(kb.shape, (std::vector<std::int64_t>{64, 16}));
  EXPECT_EQ(kb.role, ParallelRole::ColumnParallel);   // B's rows split as k_proj's
  EXPECT_EQ(kb.fused, FusedPart::K);
  const auto& da = get(inv, "base_model.model.model.layers.3.mlp.down_proj.lora_A.weight");
  EXPECT_EQ(da.shape, (std::vector<std::int64_t>{16, 768}));
  EXPECT_EQ(da.role, ParallelRole::RowParallel);      // A's columns split as down_proj's
  EXPECT_EQ(get(inv, "base_model.model.model.layers.3.mlp.down_proj.lora_B.weight").role, ParallelRole::Replicated);
  EXPECT_EQ(inv.find("model.layers.0.self_attn.q_proj.weight"), nullptr);  // the weights stay
}

TEST(Lora, EachFrameworkSplitsAAndBItsOwnWay) {
  const auto sc = load_scenario(kScenario);
  const Inventory& inv = sc.inventory;
  auto boxes = [&](const ShardMap& m, const std::string& name) {
    std::vector<std::string> out;
    for (const auto& s : m.shards(get(inv, name).id)) out.push_back(to_string(s.box));
    return out;
  };
  const std::string p = "base_model.model.model.layers.0.";
  using V = std::vector<std::string>;
  // Megatron TP2: A along the rank under q_proj, along its input under o_proj; B along its output,
  // k's 64 rows in two plain halves (CanonicalLoRA: the k adapter apart from q's).
  EXPECT_EQ(boxes(sc.source, p + "self_attn.q_proj.lora_A.weight"), (V{"[0:8, 0:256]", "[8:16, 0:256]"}));
  EXPECT_EQ(boxes(sc.source, p + "self_attn.o_proj.lora_A.weight"), (V{"[0:16, 0:128]", "[0:16, 128:256]"}));
  EXPECT_EQ(boxes(sc.source, p + "self_attn.k_proj.lora_B.weight"), (V{"[0:32, 0:16]", "[32:64, 0:16]"}));
  EXPECT_EQ(boxes(sc.source, p + "self_attn.o_proj.lora_B.weight"), (V{"[0:128, 0:16]", "[128:256, 0:16]"}));
  // vLLM TP8: q's A whole on the 8 ranks, o's A in 8 column slices, o's B whole, k's B one KV head
  // (32 rows) on each of 4 neighbouring ranks.
  const auto& q_a = sc.destination.shards(get(inv, p + "self_attn.q_proj.lora_A.weight").id);
  ASSERT_EQ(q_a.size(), 1u);
  EXPECT_EQ(sc.destination.rank_set(q_a[0].ranks).size(), 8);
  EXPECT_EQ(boxes(sc.destination, p + "self_attn.o_proj.lora_A.weight").size(), 8u);
  EXPECT_EQ(boxes(sc.destination, p + "self_attn.k_proj.lora_B.weight"), (V{"[0:32, 0:16]", "[32:64, 0:16]"}));
  const auto& k_b = sc.destination.shards(get(inv, p + "self_attn.k_proj.lora_B.weight").id);
  EXPECT_EQ(sc.destination.rank_set(k_b[0].ranks).size(), 4);
}

TEST(Lora, BytesNeededByHand) {
  // vLLM TP8, per layer (elements): A whole on 8 ranks under q, k, v, gate, up (5 x 8 x 4096),
  // their B once each (4096 + 4 x 1024 for k + 4 x 1024 for v + 12288 + 12288: k and v's 2 KV heads
  // on 4 ranks each), o's and down's A once (4096 + 12288) and their B on 8 ranks (2 x 8 x 4096):
  //   163 840 + 36 864 + 16 384 + 65 536 = 282 624; x4 layers x 2 bytes = 2 260 992.
  const auto sc = load_scenario(kScenario);
  const TransferSet ts = plan(sc.inventory, sc.source, sc.destination);
  EXPECT_EQ(ts.bytes_needed.value, 2'260'992);
  EXPECT_EQ(ts.logical_bytes.value, 2 * 303'104);
  // Megatron TP2 x PP2 x DP2 holds every element twice (DP).
  EXPECT_EQ(sc.source.total_bytes_held(sc.inventory).value, 2 * 2 * 303'104);
  // The memory check counts the model's weights too (7.06 MB of tiny-gqa in BF16 on each vLLM GPU
  // at TP8 is 1/8 plus its replicated parts).
  Bytes adapters_only;
  for (GpuId g = 8; g < 16; ++g) adapters_only += sc.memory[static_cast<std::size_t>(g)].destination_weights;
  EXPECT_GT(adapters_only.value, ts.bytes_needed.value);
}

TEST(Lora, RefusalsNameTheKey) {
  auto e = load_error({set("lora.target_modules", "[q_proj, qkv_proj]")});
  EXPECT_EQ(e.key(), "lora.target_modules");
  EXPECT_NE(std::string(e.what()).find("'qkv_proj' names no linear layer"), std::string::npos) << e.what();
  EXPECT_NE(e.file().find("small-lora-qwen3.yaml"), std::string::npos) << e.file();
  e = load_error({set("lora.target_modules", "[lm_head]")});
  EXPECT_NE(std::string(e.what()).find("the embedding and the output head"), std::string::npos) << e.what();
  EXPECT_EQ(load_error({set("lora.rank", "0")}).key(), "lora.rank");
  EXPECT_EQ(load_error({set("lora.target_modules", "[]")}).key(), "lora.target_modules");
  EXPECT_EQ(load_error({set("lora.target_modules", "[q_proj, q_proj]")}).key(), "lora.target_modules[1]");
  // Megatron splits A along the rank: TP2 cannot split a rank of 3.
  e = load_error({set("lora.rank", "3")});
  EXPECT_EQ(e.key(), "source");
  EXPECT_NE(std::string(e.what()).find("LoRA rank"), std::string::npos) << e.what();
  // No precision change on adapters.
  EXPECT_EQ(load_error({set("destination.precision", "{format: fp8_block, classes: [attention]}")}).key(),
            "destination.precision");
}

TEST(Lora, RoutedExpertsAreRefusedSharedOnesAdapted) {
  // tiny-moe's MLPs are all routed experts: gate_proj adapts only them.
  const auto e = load_error({set("model", (kRoot / "models/tiny-moe.yaml").string()), set("lora.target_modules", "[gate_proj]")});
  EXPECT_EQ(e.key(), "lora.target_modules");
  EXPECT_NE(std::string(e.what()).find("routed experts"), std::string::npos) << e.what();
}

// Per-operation costs rule an adapter refit where bandwidth rules the weights' (the LoRA compare's
// "limited by: latency"): on small-lora-qwen3's layouts, the domain-grouped schedules' latency path
// (route latency and per-operation cost along the DAG's longest path) exceeds their bandwidth bound
// for the 56 adapters (606 kB), and falls below it for the tiny model's 7 MB of weights.
TEST(Lora, PerOperationCostsRuleTheAdaptersBandwidthTheWeights) {
  Scenario weights = Scenario::load(kScenario);
  weights.model_options.lora.reset();
  const auto cost = CostParams::profile_named("reshard");
  for (const bool lora : {true, false}) {
    const LoadedScenario sc = lora ? load_scenario(kScenario) : load_scenario(weights);
    ASSERT_EQ(sc.inventory.lora() != nullptr, lora);
    const TransferSet ts = plan(sc.inventory, sc.source, sc.destination);
    for (const Strategy s : {Strategy::DomainGrouped, Strategy::DomainChain, Strategy::Hybrid}) {
      SCOPED_TRACE(std::string(lora ? "adapters " : "weights ") + to_string(s));
      StrategyParams sp;
      sp.strategy = s;
      const Schedule sched = build_schedule(ts, sc.inventory, sc.source, sc.destination, sc.topology, sp);
      const Prediction p = estimate(sched, ts, sc.inventory, sc.topology, cost);
      if (lora) EXPECT_GT(p.latency_path.value, p.bandwidth_bound.value);
      else EXPECT_LT(p.latency_path.value, p.bandwidth_bound.value);
    }
  }
}
