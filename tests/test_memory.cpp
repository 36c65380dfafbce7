// Staging memory (model/memory.hpp): a hand-worked schedule, bounds on every strategy of the small
// shipped scenarios, and the tuner's --max-staging cap.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "reshard/model/cost.hpp"
#include "reshard/model/errors.hpp"
#include "reshard/model/memory.hpp"
#include "reshard/model/scenario.hpp"
#include "reshard/model/tuner.hpp"

using namespace reshard::model;

namespace {

// Appends a transfer (on chain `chain` when >= 0) waiting for `after`.
void transfer(Schedule& s, GpuId src, GpuId dst, std::int64_t bytes, std::vector<std::int64_t> after = {},
              std::int32_t chain = -1) {
  Op op;
  op.src = src;
  op.dst = dst;
  op.chain = chain;
  op.bytes = Bytes{bytes};
  s.add_op(op, after);
}

// The schedule of the hand-worked case below; op2 waits for op0 when `forward`.
Schedule hand_worked(bool forward) {
  Schedule s;
  s.chains.push_back({{{1, 2}, {2, 3}}, Bytes{16}});
  transfer(s, 0, 1, 200);
  transfer(s, 2, 1, 50);
  transfer(s, 1, 3, 30, forward ? std::vector<std::int64_t>{0} : std::vector<std::int64_t>{}, 0);
  transfer(s, 1, 3, 40, {}, 0);
  transfer(s, 3, 0, 10, {1});
  transfer(s, 2, 1, 300, {1});
  return s;
}

LoadedScenario small(const std::string& name) {
  return load_scenario(std::string(RESHARD_SOURCE_DIR) + "/scenarios/" + name);
}

}  // namespace

// Four GPUs, two steps:
//   op0  0 -> 1  200 B                 step 0
//   op1  2 -> 1   50 B                 step 0
//   op2  chain 1 -> 2 -> 3, 30 B, after op0 (GPU 1 forwards what op0 brought)   step 1
//   op3  the same chain, 40 B          step 1 (no shallower than op2, its predecessor on the chain)
//   op4  3 -> 0   10 B, after op1      step 1
//   op5  2 -> 1  300 B, after op1      step 1
// live(g, 0): GPU 0 = 200 (send op0), GPU 1 = 200 + 50 (receives), GPU 2 = 50.
// live(g, 1): the chain holds max(30, 40) = 40 B on each of GPUs 1, 2, 3 (its ops run one after
//   the other); GPU 1 also keeps op0's 200 B for op2 and receives op5: 40 + 200 + 300 = 540;
//   GPU 2: 40 + 300 = 340; GPU 3: 40 + 10 = 50; GPU 0: 10.
// peak: GPU 0 200, GPU 1 540 (step 1), GPU 2 340, GPU 3 50.
TEST(StagingMemory, HandWorkedScheduleStepsChainsAndForwarding) {
  const Schedule s = hand_worked(true);
  std::int32_t steps = 0;
  EXPECT_EQ(op_steps(s, steps), (std::vector<std::int32_t>{0, 0, 1, 1, 1, 1}));
  EXPECT_EQ(steps, 2);
  const StagingMemory m = staging_memory(s);
  ASSERT_EQ(m.per_gpu.size(), 4u);
  EXPECT_EQ(m.per_gpu[0], Bytes{200});
  EXPECT_EQ(m.per_gpu[1], Bytes{540});
  EXPECT_EQ(m.per_gpu[2], Bytes{340});
  EXPECT_EQ(m.per_gpu[3], Bytes{50});
  EXPECT_EQ(m.peak, Bytes{540});
  EXPECT_EQ(m.gpu, 1);
  EXPECT_EQ(m.step, 1);
  // Without op0 in op2's `after`, the chain's ops move to step 0 and GPU 1 keeps nothing: 200 + 50 +
  // 40 = 290 in step 0, 300 (op5) in step 1.
  const Schedule alone = hand_worked(false);
  EXPECT_EQ(staging_memory(alone).per_gpu[1], Bytes{300});
  EXPECT_EQ(staging_memory(alone).step, 1);
}

TEST(StagingMemory, NoOperationsNeedNothing) {
  const StagingMemory m = staging_memory(Schedule{});
  EXPECT_EQ(m.peak, Bytes{0});
  EXPECT_EQ(m.gpu, -1);
}

// Every strategy on the small scenarios: a GPU's peak is at least its largest single region and at
// most all its regions at once; the estimate reports the largest peak and its GPU.
TEST(StagingMemory, BetweenTheLargestRegionAndAllRegionsOnEveryStrategy) {
  const CostParams cost = CostParams::profile_named("reshard");
  for (const char* name : {"small-gqa-megatron-vllm.yaml", "small-moe-ep.yaml", "small-dtensor-uneven.yaml"}) {
    const LoadedScenario sc = small(name);
    const TransferSet ts = plan(sc.inventory, sc.source, sc.destination);
    for (Strategy strategy : all_strategies()) {
      SCOPED_TRACE(std::string(name) + " " + to_string(strategy));
      StrategyParams p;
      p.strategy = strategy;
      const Schedule s = build_schedule(ts, sc.inventory, sc.source, sc.destination, sc.topology, p);
      const StagingMemory m = staging_memory(s);
      std::vector<std::int64_t> largest(m.per_gpu.size(), 0), total(m.per_gpu.size(), 0);
      auto region = [&](GpuId g, const Op& op) {
        largest[static_cast<std::size_t>(g)] = std::max(largest[static_cast<std::size_t>(g)], op.bytes.value);
        total[static_cast<std::size_t>(g)] += op.bytes.value;
      };
      for (const Op& op : s.ops) {
        region(op.src, op);
        if (op.chain < 0) region(op.dst, op);
        else
          for (const ChainHop& h : s.chains[static_cast<std::size_t>(op.chain)].hops) region(h.to, op);
      }
      for (std::size_t g = 0; g < m.per_gpu.size(); ++g) {
        EXPECT_GE(m.per_gpu[g].value, largest[g]) << "GPU " << g;
        EXPECT_LE(m.per_gpu[g].value, total[g]) << "GPU " << g;
      }
      ASSERT_GE(m.gpu, 0);
      EXPECT_EQ(m.peak, *std::max_element(m.per_gpu.begin(), m.per_gpu.end()));
      EXPECT_EQ(m.peak, m.per_gpu[static_cast<std::size_t>(m.gpu)]);
      const Prediction pred = estimate(s, ts, sc.inventory, sc.topology, cost);
      EXPECT_EQ(pred.staging_peak, m.peak);
      EXPECT_EQ(pred.staging_gpu, m.gpu);
    }
  }
}

// small-moe-ep: the uncapped tuner picks a schedule that needs more than 4 MiB on one GPU (hybrid
// with relay_ingress, 5.3 MB); under a 4 MiB cap it picks another that fits and counts the ones it
// rejected; under a cap below every candidate's peak it refuses, naming the least it found.
TEST(StagingMemory, TunerHonoursTheCap) {
  const LoadedScenario sc = small("small-moe-ep.yaml");
  const TransferSet ts = plan(sc.inventory, sc.source, sc.destination);
  const CostParams cost = CostParams::profile_named("reshard");
  TuneOptions options;
  options.threads = 1;
  const TuneResult free = tune(ts, sc.inventory, sc.source, sc.destination, sc.topology, cost, options);
  const Bytes cap{4 << 20};
  ASSERT_GT(free.best.prediction.staging_peak, cap) << describe(free.best.params);
  EXPECT_EQ(free.over_staging, 0);

  options.max_staging = cap;
  const TuneResult capped = tune(ts, sc.inventory, sc.source, sc.destination, sc.topology, cost, options);
  EXPECT_LE(capped.best.prediction.staging_peak, cap);
  EXPECT_NE(describe(capped.best.params), describe(free.best.params));
  EXPECT_GT(capped.over_staging, 0);
  EXPECT_GE(capped.best.prediction.time, free.best.prediction.time);
  // The fastest of the candidates that fit.
  for (const auto& c : capped.evaluated)
    if (c.prediction.staging_peak <= cap) {
      EXPECT_LE(capped.best.prediction.time.value, c.prediction.time.value * (1 + 1e-6));
    }
  std::int32_t over = 0;
  for (const auto& c : capped.evaluated) over += c.prediction.staging_peak > cap;
  EXPECT_EQ(capped.over_staging, over);

  Bytes least = capped.evaluated.front().prediction.staging_peak;
  for (const auto& c : capped.evaluated) least = std::min(least, c.prediction.staging_peak);
  options.max_staging = Bytes{least.value - 1};
  try {
    tune(ts, sc.inventory, sc.source, sc.destination, sc.topology, cost, options);
    ADD_FAILURE() << "a cap below every candidate's peak was accepted";
  } catch (const PlanError& e) {
    EXPECT_NE(std::string(e.what()).find("no candidate schedule fits --max-staging"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("at least " + format(least)), std::string::npos) << e.what();
  }
}
