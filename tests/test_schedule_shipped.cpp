// Every strategy on every shipped scenario, built within the scenario's staging budgets (each
// side's refit_memory, by default NeMo RL's two buffers of min(2 % of the GPU's memory, 5 GiB)):
// the schedule validates (every needer gets every element exactly once, nobody forwards what it
// lacks), the estimate never beats the lower bound, every GPU's peak staging memory (model/memory.hpp)
// is within its budget and at least its largest ring, the GPU's weights and staging together fit
// its memory, `auto` is never worse than the best named strategy, and the best strategy of each
// bandwidth-bound disaggregated scenario stays within 1.2x of the lower bound.
#include <gtest/gtest.h>

#include <filesystem>

#include "reshard/model/cost.hpp"
#include "reshard/model/memory.hpp"
#include "reshard/model/scenario.hpp"
#include "reshard/model/strategies.hpp"
#include "reshard/model/tuner.hpp"

using namespace reshard::model;

class ShippedScenario : public ::testing::TestWithParam<std::string> {};

TEST_P(ShippedScenario, EveryStrategyValidatesAndRespectsTheBound) {
  const auto sc = load_scenario(std::string(RESHARD_SOURCE_DIR) + "/scenarios/" + GetParam());
  const auto ts = plan(sc.inventory, sc.source, sc.destination);
  const auto lb = lower_bound(ts, sc.source, sc.destination, sc.topology);
  // The schedules' own quality: the links and the step barriers, no engine cost (the `links`
  // profile; what reshard's engine adds is priced and tested apart, test_calibrate's ReshardEngine).
  const auto cost = CostParams::profile_named("links");
  const std::vector<Bytes> budget = staging_budgets(sc);
  const ScheduleBasis basis(ts, sc.inventory, sc.source, sc.destination, sc.topology, budget);
  TuneOptions opts;
  auto check_memory_of = [&](const Schedule& s) -> StagingMemory {
    const StagingMemory m = staging_memory(s);
    EXPECT_EQ(m.over_budget, 0);
    for (std::size_t g = 0; g < m.per_gpu.size(); ++g) {
      const Bytes b = staging_budget(s, static_cast<GpuId>(g));
      EXPECT_GT(b.value, 0) << "GPU " << g << ": every shipped topology gives its GPUs' memory";
      EXPECT_LE(m.per_gpu[g], b) << "GPU " << g;
      const GpuMemoryUse& u = sc.memory[g];
      EXPECT_LE((u.weights() + m.per_gpu[g]).value, u.capacity.value) << "GPU " << g;
    }
    return m;
  };
  for (const auto& name : strategy_names()) {
    SCOPED_TRACE(name);
    StrategyParams p;
    p.strategy = strategy_named(name);
    const Schedule s = build_schedule(basis, p);
    EXPECT_EQ(s.budget, budget);
    EXPECT_NO_THROW(validate(s, ts, sc.inventory, sc.source, sc.destination));
    const auto pred = estimate(s, ts, sc.inventory, sc.topology, cost);
    EXPECT_GE(pred.time.value, lb.time.value * (1 - 1e-9));
    // Its peak staging memory is reported, on a GPU of the topology, within that GPU's budget, and
    // no GPU holds less than the largest ring of an operation it takes part in (its sender holds
    // that while it runs).
    const StagingMemory m = check_memory_of(s);
    EXPECT_EQ(pred.staging_peak, m.peak);
    std::int64_t largest = 0;
    for (const Op& op : s.ops) largest = std::max(largest, ring_bytes(s, op).value);
    EXPECT_GE(pred.staging_gpu, 0);
    EXPECT_LT(pred.staging_gpu, sc.topology.gpu_count());
    EXPECT_GE(pred.staging_peak.value, largest);
    EXPECT_GT(pred.staging_peak.value, 0);
    RecordProperty(name + "_peak_staging_bytes", std::to_string(pred.staging_peak.value));
    opts.seeds.push_back({p, pred, std::nullopt});
  }
  Seconds best_named = opts.seeds.front().prediction.time;
  for (const auto& c : opts.seeds) best_named = std::min(best_named, c.prediction.time);
  const auto tuned = tune(basis, cost, opts);
  EXPECT_LE(tuned.best.prediction.time, best_named);
  const Schedule best = build_schedule(basis, tuned.best.params);
  EXPECT_NO_THROW(validate(best, ts, sc.inventory, sc.source, sc.destination));
  check_memory_of(best);
  bool disaggregated = true;
  for (auto g : sc.source.gpus())
    if (std::find(sc.destination.gpus().begin(), sc.destination.gpus().end(), g) != sc.destination.gpus().end())
      disaggregated = false;
  // Within 1.2x of the bound where bandwidth sets the time. The kB-scale test fixtures
  // (small-*, bounds of tens of microseconds) are latency-bound: one transfer's route latency and
  // per-operation cost are a quarter of their bound, and the estimate counts them (it agrees with
  // the simulation within 10 % there, docs/simulator.md), so no schedule comes near 1.2x.
  constexpr double kWithin = 1.2;
  constexpr double kBandwidthBound = 1e-3;  // s: a bound this long is bandwidth, not latency
  if (disaggregated && lb.time.value >= kBandwidthBound) {
    EXPECT_LE(tuned.best.prediction.time.value, kWithin * lb.time.value) << describe(tuned.best.params);
  }
  RecordProperty("auto_x_bound", std::to_string(tuned.best.prediction.time.value / lb.time.value));
}

namespace {
std::string test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string n = info.param.substr(0, info.param.size() - 5);
  std::replace(n.begin(), n.end(), '-', '_');
  std::replace(n.begin(), n.end(), '.', '_');
  return n;
}
}  // namespace

#ifdef RESHARD_FRONTIER_SCALE
// 2 x 4608 GB200: about 45 s and 0.6 GB (a 2-core VM, Release).
INSTANTIATE_TEST_SUITE_P(Frontier, ShippedScenario, ::testing::Values("kimi-k3-gb200.yaml"), test_name);
#else
INSTANTIATE_TEST_SUITE_P(All, ShippedScenario,
                         ::testing::Values("small-gqa-megatron-vllm.yaml", "small-gqa-megatron-tp8.yaml",
                                           "small-dtensor-uneven.yaml", "small-gqa-fp8.yaml", "small-moe-ep.yaml",
                                           "gpu-check-qwen3-8b.yaml", "qwen3-8b-colocated.yaml", "qwen3-235b-h100.yaml",
                                           "deepseek-v3-h100.yaml", "deepseek-v3-h100-to-gb200.yaml",
                                           "deepseek-v3-sglang-dp-attention.yaml", "deepseek-v3-vllm-dp-ep.yaml",
                                           "kimi-k2-fp8-h100-to-gb200.yaml", "nemotron-3-ultra-h100.yaml"),
                         test_name);
#endif
