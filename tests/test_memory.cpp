// Staging memory (model/memory.hpp): a hand-worked schedule, bounds on every strategy of the small
// shipped scenarios, and the tuner's --max-staging cap.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
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

// Four GPUs, two steps. Every op streams through a ring of S = 8 chunks (model/memory.hpp): the
// transfers' chunk is params.chunk (512 KiB) and the chain's 16 B, so each role holds min(B, S c) =
// B here (30 and 40 B are under 8 x 16 B).
//   op0  0 -> 1  200 B                 step 0
//   op1  2 -> 1   50 B                 step 0
//   op2  chain 1 -> 2 -> 3, 30 B, after op0 (GPU 1 forwards what op0 brought)   step 1
//   op3  the same chain, 40 B          step 1 (no shallower than op2, its predecessor on the chain)
//   op4  3 -> 0   10 B, after op1      step 1
//   op5  2 -> 1  300 B, after op1      step 1
// op0's receive at GPU 1 is kept (op2 packs from it): GPU 1 holds all 200 B of it from step 0 to
// step 1.
// live(g, 0): GPU 0 = 200 (send op0), GPU 1 = 200 + 50 (receives), GPU 2 = 50.
// live(g, 1): each chain op holds its own ring on GPUs 1, 2, 3 (30 + 40 B); GPU 1 also keeps op0's
//   200 B for op2 and receives op5: 70 + 200 + 300 = 570; GPU 2: 70 + 300 = 370; GPU 3: 70 + 10 =
//   80; GPU 0: 10.
// peak: GPU 0 200, GPU 1 570 (step 1), GPU 2 370, GPU 3 80.
TEST(StagingMemory, HandWorkedScheduleStepsChainsAndForwarding) {
  const Schedule s = hand_worked(true);
  std::int32_t steps = 0;
  EXPECT_EQ(op_steps(s, steps), (std::vector<std::int32_t>{0, 0, 1, 1, 1, 1}));
  EXPECT_EQ(steps, 2);
  const StagingMemory m = staging_memory(s);
  ASSERT_EQ(m.per_gpu.size(), 4u);
  EXPECT_EQ(m.per_gpu[0], Bytes{200});
  EXPECT_EQ(m.per_gpu[1], Bytes{570});
  EXPECT_EQ(m.per_gpu[2], Bytes{370});
  EXPECT_EQ(m.per_gpu[3], Bytes{80});
  EXPECT_EQ(m.peak, Bytes{570});
  EXPECT_EQ(m.gpu, 1);
  EXPECT_EQ(m.step, 1);
  EXPECT_EQ(m.over_budget, 0);  // no budget: unbounded
  // Without op0 in op2's `after`, the chain's ops move to step 0 and GPU 1 keeps nothing: 200 + 50 +
  // 30 + 40 = 320 in step 0, 300 (op5) in step 1.
  const Schedule alone = hand_worked(false);
  EXPECT_EQ(staging_memory(alone).per_gpu[1], Bytes{320});
  EXPECT_EQ(staging_memory(alone).step, 0);
}

// The same schedule within 300 B on every GPU. op_steps places the ops in id order, each in the
// first step from its base where every GPU it touches has room, counting at a GPU that keeps a
// receive the kept bytes (open) in every step until their last forwarder is placed, and starting
// past the steps where a GPU has no room left for its largest ring (room_from: GPU 1's and GPU 2's
// is op5's 300 B):
//   op0  step 0: GPU 1 holds 200 (kept); no 300 B ring fits beside it there: GPU 1 from step 1.
//   op1  from step 1: 50 <= 300 - open(1) = 100 at GPU 1: step 1 (GPU 1 from step 2).
//   op2  from step 2 (base 1, after op0): step 2. It is op0's last forwarder: the 200 kept bytes now
//        count in GPU 1's steps 1 and 2 instead (250 in step 1, 230 in step 2).
//   op3  base 2 (the chain), from step 3: step 3.
//   op4  base 2 (after op1); GPUs 0 and 3 can hold everything they ever take: step 2.
//   op5  base 2, from step 4 (GPU 1 and GPU 2 hold op3's ring in step 3): step 4.
// Peaks: GPU 0 200 (step 0), GPU 1 300 (step 4), GPU 2 300, GPU 3 40 (step 2: 30 + 10); all within
// 300. Within 250 B, op5 fits no step even alone: GPUs 1 and 2 are over budget.
TEST(StagingMemory, HandWorkedBudgetSpreadsTheSteps) {
  Schedule s = hand_worked(true);
  s.budget.assign(4, Bytes{300});
  std::int32_t steps = 0;
  EXPECT_EQ(op_steps(s, steps), (std::vector<std::int32_t>{0, 1, 2, 3, 2, 4}));
  EXPECT_EQ(steps, 5);
  const StagingMemory m = staging_memory(s);
  EXPECT_EQ(m.per_gpu, (std::vector<Bytes>{Bytes{200}, Bytes{300}, Bytes{300}, Bytes{40}}));
  EXPECT_EQ(m.peak, Bytes{300});
  EXPECT_EQ(m.over_budget, 0);
  EXPECT_EQ(m.worst_over, -1);
  s.budget.assign(4, Bytes{250});
  const StagingMemory over = staging_memory(s);
  EXPECT_EQ(over.over_budget, 2);
  EXPECT_GE(over.worst_over, 1);
  EXPECT_LE(over.worst_over, 2);
  EXPECT_EQ(over.peak, Bytes{300});
}

TEST(StagingMemory, NoOperationsNeedNothing) {
  const StagingMemory m = staging_memory(Schedule{});
  EXPECT_EQ(m.peak, Bytes{0});
  EXPECT_EQ(m.gpu, -1);
}

// Every strategy on the small scenarios: a GPU's peak is at least its largest ring (min(B, S c), the
// least a role holds) and at most every part it sends or receives at once; the estimate reports the largest peak and its GPU.
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
        largest[static_cast<std::size_t>(g)] = std::max(largest[static_cast<std::size_t>(g)], ring_bytes(s, op).value);
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

namespace {

// An independent count of model/memory.hpp's peaks, from its steps (op_steps) and kept receives
// (kept_receives) alone: per GPU and step, every role's ring (a kept receive: its whole part, from
// its step to the last step of an op at that GPU that forwards from it), summed.
std::vector<std::int64_t> naive_peaks(const Schedule& s) {
  std::int32_t count = 0;
  const std::vector<std::int32_t> step = op_steps(s, count);
  const auto kept = kept_receives(s);
  std::map<std::pair<std::int64_t, GpuId>, std::int32_t> last;  // (op, GPU) -> last step forwarded from
  for (const Op& x : s.ops)
    for (auto a : s.after_of(x))
      if (receives(s, s.ops[static_cast<std::size_t>(a)], x.src)) {
        auto [it, fresh] = last.try_emplace({a, x.src}, step[static_cast<std::size_t>(x.id)]);
        it->second = std::max(it->second, step[static_cast<std::size_t>(x.id)]);
      }
  std::map<std::pair<GpuId, std::int32_t>, std::int64_t> live;
  GpuId gpus = 0;
  for (const Op& op : s.ops) {
    const std::int32_t k = step[static_cast<std::size_t>(op.id)];
    const std::int64_t ring = ring_bytes(s, op).value;
    std::vector<GpuId> receivers;
    if (op.chain < 0) receivers.push_back(op.dst);
    else
      for (const ChainHop& h : s.chains[static_cast<std::size_t>(op.chain)].hops) receivers.push_back(h.to);
    live[{op.src, k}] += ring;
    gpus = std::max(gpus, op.src + 1);
    for (GpuId g : receivers) {
      gpus = std::max(gpus, g + 1);
      const auto& kg = kept[static_cast<std::size_t>(op.id)];
      if (!std::binary_search(kg.begin(), kg.end(), g)) {
        live[{g, k}] += ring;
        continue;
      }
      const std::int32_t until = std::max(k, last.at({op.id, g}));
      for (std::int32_t j = k; j <= until; ++j) live[{g, j}] += op.bytes.value;
    }
  }
  std::vector<std::int64_t> peak(static_cast<std::size_t>(gpus), 0);
  for (const auto& [key, bytes] : live) peak[static_cast<std::size_t>(key.first)] = std::max(peak[static_cast<std::size_t>(key.first)], bytes);
  return peak;
}

}  // namespace

// staging_memory (which packs GPUs with alike histories into shared profiles) gives every GPU the
// peak an independent sum over its ops gives, and within a budget no GPU exceeds it unless it is
// counted over budget: every strategy of the small scenarios, each within its default budgets and
// within 4 MiB, 1 MiB and 256 KiB per GPU, and the large bandwidth-bound ones of DeepSeek-V3 within
// 256 MiB.
TEST(StagingMemory, PeaksAgreeWithAnIndependentSumAndStayWithinTheBudget) {
  struct Case {
    const char* scenario;
    std::vector<std::int64_t> caps;  // 0: the scenario's budgets
    std::vector<const char*> strategies;  // empty: every named strategy
  };
  const std::vector<Case> cases = {
      {"small-gqa-megatron-vllm.yaml", {0, 4 << 20, 1 << 20, 256 << 10}, {}},
      {"small-moe-ep.yaml", {0, 4 << 20, 1 << 20, 256 << 10}, {}},
      {"small-dtensor-uneven.yaml", {0, 4 << 20, 1 << 20, 256 << 10}, {}},
      {"deepseek-v3-h100.yaml", {256 << 20}, {"gather_broadcast", "domain_chain", "nemo_rl_reshard"}},
  };
  for (const Case& c : cases) {
    const LoadedScenario sc = small(c.scenario);
    const TransferSet ts = plan(sc.inventory, sc.source, sc.destination);
    std::vector<std::string> names(c.strategies.begin(), c.strategies.end());
    if (names.empty()) names = strategy_names();
    for (std::int64_t cap : c.caps)
      for (const std::string& name : names) {
        SCOPED_TRACE(std::string(c.scenario) + " " + name + " cap " + std::to_string(cap));
        StrategyParams p;
        p.strategy = strategy_named(name);
        const auto budget = cap > 0 ? staging_budgets(sc, Bytes{cap}) : staging_budgets(sc);
        const Schedule s = build_schedule(ts, sc.inventory, sc.source, sc.destination, sc.topology, p, budget);
        const StagingMemory m = staging_memory(s);
        const std::vector<std::int64_t> naive = naive_peaks(s);
        ASSERT_EQ(m.per_gpu.size(), naive.size());
        std::int32_t over = 0;
        for (std::size_t g = 0; g < naive.size(); ++g) {
          EXPECT_EQ(m.per_gpu[g].value, naive[g]) << "GPU " << g;
          over += naive[g] > staging_budget(s, static_cast<GpuId>(g)).value;
        }
        EXPECT_EQ(m.over_budget, over);
        EXPECT_EQ(over, 0);  // every strategy fits even 256 KiB (two slots of at most 128 KiB)
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

// The cap at exactly a candidate's peak. model/tuner.hpp: a candidate "over the cap on one GPU's
// staging (max_staging) ... does not fit"; tuner.cpp's fits() keeps a peak "within the cap"
// (staging_peak <= max_staging). So a peak equal to the cap fits, one byte less does not.
// A model small enough that every ring holds a whole part: hidden 64, one layer, bf16, tied
// embedding, 13 tensors of
//   embed 64 x 64 = 4096; q_proj 64 x 64 = 4096, k_proj and v_proj 32 x 64 = 2048 each, o_proj
//   4096, q_norm and k_norm 32 each, two layer norms 64 each; gate, up 128 x 64 and down 64 x 128 =
//   8192 each; the final norm 64
//   = 41 216 elements, B = 82 432 bytes < S c = 8 x 512 KiB.
// GPU 0 holds it (Megatron TP1), GPU 8 on the other node needs it (vLLM TP1): every candidate sends
// all B out of GPU 0 in one step, in parts whose rings are each the part (min(B_op, S c) = B_op),
// so GPU 0's peak is B for every candidate (relays spread only what node 1 receives).
//   max_staging = B:     every candidate fits; the tuner picks what it picks uncapped, none rejected;
//   max_staging = B - 1: none fits: the PlanError names at least B.
TEST(StagingMemory, TunerCapEqualToThePeakFits) {
  const auto inv = Inventory::parse(R"(name: small
architecture: qwen3
hidden_size: 64
num_hidden_layers: 1
num_attention_heads: 2
num_key_value_heads: 1
head_dim: 32
intermediate_size: 128
vocab_size: 64
tie_word_embeddings: true
)", "small.yaml");
  const Bytes B{2 * 41'216};
  ASSERT_EQ(inv.bytes(), B);
  ASSERT_EQ(inv.tensors().size(), 13u);
  const auto topo = Topology::load(std::string(RESHARD_SOURCE_DIR) + "/topologies/dgx-h100-2n.yaml");
  const auto src = build_shard_map(inv, {MegatronSpec{.tp = 1}, {0}});
  const auto dst = build_shard_map(inv, {VllmSpec{.tp = 1, .dp = 1}, {8}});
  const TransferSet ts = plan(inv, src, dst);
  const CostParams cost = CostParams::profile_named("reshard");
  TuneOptions options;
  options.threads = 1;
  const TuneResult free = tune(ts, inv, src, dst, topo, cost, options);
  ASSERT_GT(free.evaluated.size(), 1u);
  for (const auto& c : free.evaluated) {
    EXPECT_EQ(c.prediction.staging_peak, B) << describe(c.params);
    EXPECT_EQ(c.prediction.staging_gpu, 0) << describe(c.params);
  }

  options.max_staging = B;
  const TuneResult at_peak = tune(ts, inv, src, dst, topo, cost, options);
  EXPECT_EQ(at_peak.over_staging, 0);
  EXPECT_EQ(describe(at_peak.best.params), describe(free.best.params));
  EXPECT_EQ(at_peak.best.prediction.staging_peak, B);

  options.max_staging = Bytes{B.value - 1};
  try {
    tune(ts, inv, src, dst, topo, cost, options);
    ADD_FAILURE() << "a cap one byte below every candidate's peak was accepted";
  } catch (const PlanError& e) {
    EXPECT_NE(std::string(e.what()).find("no candidate schedule fits --max-staging"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("at least " + format(B)), std::string::npos) << e.what();
  }
}
