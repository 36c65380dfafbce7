// Property test over random layout pairs: random small models (dense or MoE, GQA, uneven
// vocabularies), random Megatron / vLLM / DTensor layouts with random sizes, on random (disjoint or
// overlapping) GPU sets of a 16-GPU cluster. For every pair, checked element by element:
//   - each side's shards cover every tensor exactly once;
//   - every destination rank receives every element it holds exactly once from the pieces;
//   - every holder of a piece really holds the piece's box;
//   - bytes_needed equals the destination's total held bytes;
//   - the lower bound is positive and finite when anything must move;
//   - a schedule of each strategy in turn (random parameters) validates and does not beat the bound.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "reshard/model/errors.hpp"
#include "reshard/model/cost.hpp"
#include "reshard/model/planner.hpp"

using namespace reshard::model;

namespace {

std::string random_model(std::mt19937& rng) {
  auto pick = [&](std::initializer_list<int> v) { return *(v.begin() + std::uniform_int_distribution<int>(0, static_cast<int>(v.size()) - 1)(rng)); };
  const int heads = pick({2, 4, 8});
  int kv = pick({1, 2, 4, 8});
  while (heads % kv) kv /= 2;
  const bool moe = rng() % 2;
  std::string y = "name: random\narchitecture: " + std::string(moe ? "qwen3_moe" : "qwen3") + "\n";
  y += "hidden_size: " + std::to_string(pick({8, 12, 16})) + "\n";
  y += "num_hidden_layers: " + std::to_string(pick({1, 2, 3, 4})) + "\n";
  y += "num_attention_heads: " + std::to_string(heads) + "\n";
  y += "num_key_value_heads: " + std::to_string(kv) + "\n";
  y += "head_dim: " + std::to_string(pick({2, 4})) + "\n";
  y += "vocab_size: " + std::to_string(std::uniform_int_distribution<int>(5, 40)(rng)) + "\n";
  y += std::string("tie_word_embeddings: ") + (rng() % 2 ? "true" : "false") + "\n";
  if (moe) {
    y += "moe_intermediate_size: " + std::to_string(pick({4, 8, 12})) + "\n";
    y += "num_experts: " + std::to_string(pick({2, 4, 8})) + "\nnum_experts_per_tok: 2\n";
  } else {
    y += "intermediate_size: " + std::to_string(pick({8, 12, 16, 24})) + "\n";
  }
  return y;
}

std::vector<GpuId> random_gpus(std::mt19937& rng, int n) {
  EXPECT_LE(n, 16);
  std::vector<GpuId> all(16);
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(static_cast<std::size_t>(n));
  return all;
}

LayoutSpec random_layout(std::mt19937& rng) {
  auto pick = [&](std::initializer_list<int> v) { return *(v.begin() + std::uniform_int_distribution<int>(0, static_cast<int>(v.size()) - 1)(rng)); };
  switch (rng() % 3) {
    case 0: {
      MegatronSpec m;
      m.tp = pick({1, 2, 4});
      m.pp = pick({1, 2});
      m.cp = pick({1, 1, 2});
      m.dp = pick({1, 2});
      m.ep = pick({1, 2, 4});
      m.etp = pick({1, 1, 2});
      m.vpp = pick({1, 1, 2});
      const int world = m.tp * m.pp * m.cp * m.dp;
      return {m, random_gpus(rng, std::min(world, 16))};
    }
    case 1: {
      VllmSpec v{.tp = pick({1, 2, 4, 8}), .pp = pick({1, 1, 2}), .dp = pick({1, 2, 3})};
      if (rng() % 2) v.ep = v.tp * pick({1, v.dp});
      if (v.ep && rng() % 2) v.redundant_experts = pick({1, 2, 4});
      return {v, random_gpus(rng, std::min(v.tp * v.pp * v.dp, 16))};
    }
    default: {
      DTensorSpec d;
      const int ndim = pick({1, 2, 3});
      int world = 1;
      do {  // a mesh that fits the 16 GPUs
        d.mesh_shape.clear();
        world = 1;
        for (int i = 0; i < ndim; ++i) {
          d.mesh_shape.push_back(pick({1, 2, 3}));
          world *= d.mesh_shape.back();
        }
      } while (world > 16);
      auto random_placements = [&](int max_dim) {
        std::vector<Placement> p;
        for (int i = 0; i < ndim; ++i)
          p.push_back(rng() % 3 == 0 ? Placement{} : Placement{Placement::Kind::Shard, std::uniform_int_distribution<int>(0, max_dim)(rng)});
        return p;
      };
      d.placements.push_back({"*norm*", std::vector<Placement>(static_cast<std::size_t>(ndim))});
      d.placements.insert(d.placements.begin(), {"default", random_placements(0)});
      d.placements.push_back({"*proj.weight", random_placements(1)});
      return {d, random_gpus(rng, world)};
    }
  }
}

// For one side: count, element by element, how often the shards cover each tensor element.
void expect_exact_cover(const Inventory& inv, const ShardMap& m) {
  for (const auto& t : inv.tensors()) {
    const Box full = full_box(t);
    std::vector<int> count(static_cast<std::size_t>(full.elements()), 0);
    for (const auto& s : m.shards(t.id)) {
      const auto& b = s.box;
      const std::int64_t cols = t.shape.size() > 1 ? t.shape[1] : 1;
      const Interval c = b.dims.size() > 1 ? b.dims[1] : Interval{0, 1};
      for (auto i = b.dims[0].lo; i < b.dims[0].hi; ++i)
        for (auto j = c.lo; j < c.hi; ++j) ++count[static_cast<std::size_t>(i * cols + j)];
    }
    for (std::size_t e = 0; e < count.size(); ++e)
      ASSERT_EQ(count[e], 1) << m.description() << " " << t.name << " element " << e;
  }
}

}  // namespace

TEST(PlannerProperty, RandomLayoutPairsAreExact) {
  std::mt19937 rng(20261129);
  const auto topo = Topology::load(std::string(RESHARD_SOURCE_DIR) + "/topologies/dgx-h100-2n.yaml");
  int pairs = 0, attempts = 0;
  std::map<std::string, int> seen;  // framework pairs covered
  while (pairs < 1000) {
    ASSERT_LT(++attempts, 200000) << "too few valid random layouts";
    const auto inv = Inventory::parse(random_model(rng), "random.yaml");
    const LayoutSpec a = random_layout(rng), b = random_layout(rng);
    ShardMap src = [&] {
      try {
        return build_shard_map(inv, a);
      } catch (const PlanError&) {
        return ShardMap(0, {}, "");
      }
    }();
    if (src.tensor_count() == 0) continue;
    ShardMap dst = [&] {
      try {
        return build_shard_map(inv, b);
      } catch (const PlanError&) {
        return ShardMap(0, {}, "");
      }
    }();
    if (dst.tensor_count() == 0) continue;
    ++pairs;
    ++seen[a.framework() + "->" + b.framework()];
    SCOPED_TRACE(a.describe() + " -> " + b.describe());
    expect_exact_cover(inv, src);
    expect_exact_cover(inv, dst);

    const TransferSet ts = plan(inv, src, dst);
    // Every destination rank receives each of its elements exactly once.
    for (const auto& t : inv.tensors()) {
      const std::int64_t cols = t.shape.size() > 1 ? t.shape[1] : 1;
      for (Rank r = 0; r < dst.world_size(); ++r) {
        std::vector<int> count(static_cast<std::size_t>(full_box(t).elements()), 0);
        auto add = [&](const Box& box, int d) {
          const Interval c = box.dims.size() > 1 ? box.dims[1] : Interval{0, 1};
          for (auto i = box.dims[0].lo; i < box.dims[0].hi; ++i)
            for (auto j = c.lo; j < c.hi; ++j) count[static_cast<std::size_t>(i * cols + j)] += d;
        };
        for (const auto& s : dst.shards(t.id))
          if (dst.rank_set(s.ranks).contains(r)) add(s.box, -1);
        for (const auto& p : ts.pieces)
          if (p.tensor == t.id && dst.rank_set(p.needers).contains(r)) add(p.box, +1);
        for (auto c : count) ASSERT_EQ(c, 0) << t.name << " destination rank " << r;
      }
    }
    // Every holder holds its piece.
    for (const auto& p : ts.pieces)
      for (Rank h : src.rank_set(p.holders).to_vector()) {
        bool held = false;
        for (const auto& s : src.shards(p.tensor))
          if (src.rank_set(s.ranks).contains(h) && intersect(s.box, p.box) == p.box) held = true;
        ASSERT_TRUE(held) << inv.tensor(p.tensor).name << " " << to_string(p.box) << " rank " << h;
      }
    EXPECT_EQ(ts.bytes_needed, dst.total_bytes_held(inv));
    const LowerBound lb = lower_bound(ts, src, dst, topo);
    if (ts.bytes_to_move.value > 0) {
      EXPECT_GT(lb.time.value, 0);
      EXPECT_TRUE(std::isfinite(lb.time.value));
    }
    // A schedule of every strategy in turn, with random parameters, validates and never beats the
    // lower bound.
    StrategyParams sp;
    sp.strategy = strategy_names()[static_cast<std::size_t>(pairs) % strategy_names().size()];
    sp.chunk = Bytes{std::int64_t{1024} << (rng() % 12)};
    sp.channels = static_cast<std::int32_t>(rng() % 3);
    sp.max_chain = 1 + static_cast<std::int32_t>(rng() % 3);
    sp.relay_ingress = rng() % 2;
    sp.relay_egress = rng() % 2;
    sp.bucket = Bytes{256 + static_cast<std::int64_t>(rng() % 4096)};
    const Schedule sched = build_schedule(ts, inv, src, dst, topo, sp);
    ASSERT_NO_THROW(validate(sched, ts, inv, src, dst)) << sp.strategy;
    const auto pred = estimate(sched, ts, inv, topo, CostParams::profile_named("reshard"));
    EXPECT_GE(pred.time.value, lb.time.value * (1 - 1e-9)) << sp.strategy;
  }
  // The random pairs cover every framework combination.
  EXPECT_EQ(seen.size(), 9u);
}
