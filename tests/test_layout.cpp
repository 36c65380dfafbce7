// Hand-worked layouts: the boxes and rank sets written out for small cases.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "reshard/model/errors.hpp"
#include "reshard/model/layout.hpp"

using namespace reshard::model;

namespace {

const std::string kRoot = RESHARD_SOURCE_DIR;

// hidden 256, 4 layers, 8 heads of 32, 2 KV heads, FFN 768, vocabulary 1000.
const char* kGqa = R"(name: gqa
architecture: qwen3
hidden_size: 256
num_hidden_layers: 4
num_attention_heads: 8
num_key_value_heads: 2
head_dim: 32
intermediate_size: 768
vocab_size: 1000
tie_word_embeddings: false
)";

// The same with 8 experts of width 128 in every layer.
const char* kMoe = R"(name: moe
architecture: qwen3_moe
hidden_size: 256
num_hidden_layers: 4
num_attention_heads: 8
num_key_value_heads: 4
head_dim: 32
moe_intermediate_size: 128
num_experts: 8
num_experts_per_tok: 2
vocab_size: 1024
tie_word_embeddings: false
)";

std::vector<GpuId> iota(int n, int first = 0) {
  std::vector<GpuId> v;
  for (int i = 0; i < n; ++i) v.push_back(first + i);
  return v;
}

// The (box, sorted ranks) pairs of one tensor, for comparison.
std::vector<std::pair<std::string, std::vector<Rank>>> shards_of(const Inventory& inv, const ShardMap& m,
                                                                 const std::string& name) {
  const auto* t = inv.find(name);
  EXPECT_NE(t, nullptr) << name;
  std::vector<std::pair<std::string, std::vector<Rank>>> out;
  for (const auto& s : m.shards(t->id)) out.emplace_back(to_string(s.box), m.rank_set(s.ranks).to_vector());
  std::sort(out.begin(), out.end());
  return out;
}

using Shards = std::vector<std::pair<std::string, std::vector<Rank>>>;

}  // namespace

TEST(MegatronLayout, TensorAndPipelineParallel) {
  const auto inv = Inventory::parse(kGqa, "gqa.yaml");
  // TP2 x PP2 on 8 GPUs: DP = 8 / 4 = 2; rank = tp + 2*(dp + 2*pp).
  // Stage 0 (layers 0-1): ranks 0-3; stage 1 (layers 2-3): ranks 4-7.
  LayoutSpec spec{MegatronSpec{.tp = 2, .pp = 2}, iota(8)};
  const auto m = build_shard_map(inv, spec);
  // q_proj [256, 256] column-parallel: TP rank t holds rows [128t, 128t+128), replicated over DP
  // (ranks t and t+2 in stage 0).
  EXPECT_EQ(shards_of(inv, m, "model.layers.0.self_attn.q_proj.weight"),
            (Shards{{"[0:128, 0:256]", {0, 2}}, {"[128:256, 0:256]", {1, 3}}}));
  // k_proj [64, 256]: 2 KV heads of 32 rows, one per TP rank.
  EXPECT_EQ(shards_of(inv, m, "model.layers.1.self_attn.k_proj.weight"),
            (Shards{{"[0:32, 0:256]", {0, 2}}, {"[32:64, 0:256]", {1, 3}}}));
  // o_proj [256, 256] row-parallel on stage 1: columns split, ranks 4+t and 6+t.
  EXPECT_EQ(shards_of(inv, m, "model.layers.3.self_attn.o_proj.weight"),
            (Shards{{"[0:256, 0:128]", {4, 6}}, {"[0:256, 128:256]", {5, 7}}}));
  // Embedding on stage 0: vocabulary 1000 padded to a multiple of 128*TP = 256 -> 1024, 512 rows per
  // rank: rank 0 rows [0, 512), rank 1 rows [512, 1000) (24 padding rows exist only in memory).
  EXPECT_EQ(shards_of(inv, m, "model.embed_tokens.weight"),
            (Shards{{"[0:512, 0:256]", {0, 2}}, {"[512:1000, 0:256]", {1, 3}}}));
  // lm_head and the final norm on the last stage; the norm replicated on all 4 ranks of the stage.
  EXPECT_EQ(shards_of(inv, m, "lm_head.weight"), (Shards{{"[0:512, 0:256]", {4, 6}}, {"[512:1000, 0:256]", {5, 7}}}));
  EXPECT_EQ(shards_of(inv, m, "model.norm.weight"), (Shards{{"[0:256]", {4, 5, 6, 7}}}));
}

TEST(MegatronLayout, ExpertParallelFolding) {
  const auto inv = Inventory::parse(kMoe, "moe.yaml");
  // TP2 x PP1 x DP4 on 8 GPUs, EP4 x ETP1: per stage G = TP*CP*DP = 8 ranks re-read as ETP1 x EP4 x
  // EDP2 (etp fastest): EP rank q = local % 4, EDP index = local / 4. Expert e on EP rank e / (8/4).
  LayoutSpec spec{MegatronSpec{.tp = 2, .pp = 1, .ep = 4, .etp = 1}, iota(8)};
  const auto m = build_shard_map(inv, spec);
  // Expert 5 -> EP rank 2 -> ranks {2, 2 + 4} = {2, 6}, whole tensor.
  EXPECT_EQ(shards_of(inv, m, "model.layers.0.mlp.experts.5.up_proj.weight"), (Shards{{"[0:128, 0:256]", {2, 6}}}));
  // ETP2 instead: G = 8 = ETP2 x EP4 x EDP1, rank = etp + 2*ep. Expert 5 -> EP rank 2 -> ranks 4, 5,
  // down_proj [256, 128] split on dim 1 over ETP.
  LayoutSpec spec2{MegatronSpec{.tp = 2, .pp = 1, .ep = 4, .etp = 2}, iota(8)};
  const auto m2 = build_shard_map(inv, spec2);
  EXPECT_EQ(shards_of(inv, m2, "model.layers.0.mlp.experts.5.down_proj.weight"),
            (Shards{{"[0:256, 0:64]", {4}}, {"[0:256, 64:128]", {5}}}));
  // The router is replicated on every rank of the stage.
  EXPECT_EQ(shards_of(inv, m2, "model.layers.2.mlp.gate.weight"),
            (Shards{{"[0:8, 0:256]", {0, 1, 2, 3, 4, 5, 6, 7}}}));
}

TEST(MegatronLayout, LinearQkvInterleavesPerQueryGroup) {
  const auto inv = Inventory::parse(kGqa, "gqa.yaml");
  LayoutSpec spec{MegatronSpec{.tp = 1, .pp = 1}, iota(1)};
  const auto m = build_shard_map(inv, spec);
  const auto buffers = local_buffers(inv, spec, m, 0);
  const auto it = std::find_if(buffers.begin(), buffers.end(), [](const LocalBuffer& b) {
    return b.name == "model.layers.0.self_attn.linear_qkv.weight";
  });
  ASSERT_NE(it, buffers.end());
  // 2 groups of 4 query heads (128 rows) + 1 k head (32) + 1 v head (32): [q0; k0; v0; q1; k1; v1].
  ASSERT_EQ(it->segments.size(), 6u);
  const auto q = inv.find("model.layers.0.self_attn.q_proj.weight")->id;
  const auto k = inv.find("model.layers.0.self_attn.k_proj.weight")->id;
  EXPECT_EQ(it->segments[0].tensor, q);
  EXPECT_EQ(to_string(it->segments[0].box), "[0:128, 0:256]");
  EXPECT_EQ(it->segments[1].tensor, k);
  EXPECT_EQ(to_string(it->segments[1].box), "[0:32, 0:256]");
  EXPECT_EQ(to_string(it->segments[3].box), "[128:256, 0:256]");
  EXPECT_EQ(to_string(it->segments[4].box), "[32:64, 0:256]");
  // linear_fc1 = [gate; up].
  const auto fc1 = std::find_if(buffers.begin(), buffers.end(), [](const LocalBuffer& b) {
    return b.name == "model.layers.0.mlp.linear_fc1.weight";
  });
  ASSERT_NE(fc1, buffers.end());
  ASSERT_EQ(fc1->segments.size(), 2u);
  EXPECT_EQ(inv.tensor(fc1->segments[0].tensor).fused, FusedPart::Gate);
  EXPECT_EQ(inv.tensor(fc1->segments[1].tensor).fused, FusedPart::Up);
}

TEST(MegatronLayout, FewerKvHeadsThanTpSliceEachQueryGroup) {
  const auto inv = Inventory::parse(kGqa, "gqa.yaml");
  // TP8 x DP2 on 16 GPUs, 2 KV heads < TP 8. linear_qkv stays column-parallel over its interleaved
  // rows [q0 (4 heads, 128 rows); k0 (32); v0 (32); q1; k1; v1]: each group has R = 192 rows shared
  // by TP/KVH = 4 ranks, 48 each. Group 0 on TP ranks 0-3: q0[0:48], q0[48:96], q0[96:128]+k0[0:16],
  // k0[16:32]+v0[0:32]; group 1 the same on ranks 4-7 (q rows +128, k and v rows +32). Rank t and
  // t + 8 (DP) hold the same.
  LayoutSpec spec{MegatronSpec{.tp = 8, .pp = 1}, iota(16)};
  const auto m = build_shard_map(inv, spec);
  EXPECT_EQ(shards_of(inv, m, "model.layers.1.self_attn.q_proj.weight"),
            (Shards{{"[0:48, 0:256]", {0, 8}},
                    {"[128:176, 0:256]", {4, 12}},
                    {"[176:224, 0:256]", {5, 13}},
                    {"[224:256, 0:256]", {6, 14}},
                    {"[48:96, 0:256]", {1, 9}},
                    {"[96:128, 0:256]", {2, 10}}}));
  EXPECT_EQ(shards_of(inv, m, "model.layers.1.self_attn.k_proj.weight"),
            (Shards{{"[0:16, 0:256]", {2, 10}},
                    {"[16:32, 0:256]", {3, 11}},
                    {"[32:48, 0:256]", {6, 14}},
                    {"[48:64, 0:256]", {7, 15}}}));
  EXPECT_EQ(shards_of(inv, m, "model.layers.1.self_attn.v_proj.weight"),
            (Shards{{"[0:32, 0:256]", {3, 11}}, {"[32:64, 0:256]", {7, 15}}}));
  // The local linear_qkv of rank 2 is its 48 rows in buffer order: q0[96:128] then k0[0:16].
  const auto buffers = local_buffers(inv, spec, m, 2);
  const auto qkv = std::find_if(buffers.begin(), buffers.end(), [](const LocalBuffer& b) {
    return b.name == "model.layers.1.self_attn.linear_qkv.weight";
  });
  ASSERT_NE(qkv, buffers.end());
  ASSERT_EQ(qkv->segments.size(), 2u);
  EXPECT_EQ(inv.tensor(qkv->segments[0].tensor).fused, FusedPart::Q);
  EXPECT_EQ(to_string(qkv->segments[0].box), "[96:128, 0:256]");
  EXPECT_EQ(inv.tensor(qkv->segments[1].tensor).fused, FusedPart::K);
  EXPECT_EQ(to_string(qkv->segments[1].box), "[0:16, 0:256]");
  // Rank 7: k1[16:32] of the tensor's group-1 rows = k rows [48:64], then v1 = v rows [32:64].
  const auto b7 = local_buffers(inv, spec, m, 7);
  const auto qkv7 = std::find_if(b7.begin(), b7.end(), [](const LocalBuffer& b) {
    return b.name == "model.layers.1.self_attn.linear_qkv.weight";
  });
  ASSERT_NE(qkv7, b7.end());
  ASSERT_EQ(qkv7->segments.size(), 2u);
  EXPECT_EQ(to_string(qkv7->segments[0].box), "[48:64, 0:256]");
  EXPECT_EQ(to_string(qkv7->segments[1].box), "[32:64, 0:256]");
  // TP must be a multiple of the KV heads: 2 KV heads under TP 8 yes, 4 KV heads under TP 8 yes,
  // 2 KV heads under TP 16 fails on the 8 query heads instead.
  EXPECT_THROW(build_shard_map(inv, LayoutSpec{MegatronSpec{.tp = 16}, iota(16)}), PlanError);
}

TEST(MegatronLayout, ExpertTensorParallelDefaultsToTp) {
  const auto inv = Inventory::parse(kMoe, "moe.yaml");
  // No etp: ETP = TP = 2, as Megatron's --expert-tensor-parallel-size defaults; the same map as
  // an explicit etp 2 (ExpertParallelFolding).
  const auto dflt = build_shard_map(inv, {MegatronSpec{.tp = 2, .pp = 1, .ep = 4}, iota(8)});
  EXPECT_EQ(shards_of(inv, dflt, "model.layers.0.mlp.experts.5.down_proj.weight"),
            (Shards{{"[0:256, 0:64]", {4}}, {"[0:256, 64:128]", {5}}}));
  EXPECT_EQ((LayoutSpec{MegatronSpec{.tp = 2, .ep = 4}, iota(8)}.describe()), "megatron TP2 PP1 DP0 EP4 on 8 GPUs");
  EXPECT_EQ((LayoutSpec{MegatronSpec{.tp = 2, .ep = 4, .etp = 1}, iota(8)}.describe()),
            "megatron TP2 PP1 DP0 EP4 ETP1 on 8 GPUs");
  // PP2 leaves 4 ranks per stage: EP4 x ETP2 does not fit, and the error says ETP came from TP.
  try {
    build_shard_map(inv, {MegatronSpec{.tp = 2, .pp = 2, .ep = 4}, iota(8)});
    FAIL();
  } catch (const PlanError& e) {
    EXPECT_NE(std::string(e.what()).find("ETP defaults to TP"), std::string::npos) << e.what();
  }
}

TEST(MegatronLayout, PipelineSplitsAsMegatronDoes) {
  const auto inv = Inventory::parse(kGqa, "gqa.yaml");
  // The stage of layer i: the ranks holding its (replicated) input_layernorm, divided by TP*DP.
  auto stage_of = [&](const ShardMap& m, int layer, int per_stage) {
    const auto* t = inv.find("model.layers." + std::to_string(layer) + ".input_layernorm.weight");
    return m.rank_set(m.shards(t->id).front().ranks).to_vector().front() / per_stage;
  };
  // 4 layers over PP3: Megatron refuses the uneven split.
  try {
    build_shard_map(inv, {MegatronSpec{.pp = 3}, iota(3)});
    FAIL();
  } catch (const PlanError& e) {
    EXPECT_NE(std::string(e.what()).find("do not split evenly"), std::string::npos) << e.what();
  }
  // First stage 2 layers: the 2 left share the 2 other stages -> [2, 1, 1].
  auto m = build_shard_map(inv, {MegatronSpec{.pp = 3, .first_stage_layers = 2}, iota(3)});
  EXPECT_EQ((std::vector<int>{stage_of(m, 0, 1), stage_of(m, 1, 1), stage_of(m, 2, 1), stage_of(m, 3, 1)}),
            (std::vector<int>{0, 0, 1, 2}));
  // Last stage 2 layers -> [1, 1, 2].
  m = build_shard_map(inv, {MegatronSpec{.pp = 3, .last_stage_layers = 2}, iota(3)});
  EXPECT_EQ((std::vector<int>{stage_of(m, 0, 1), stage_of(m, 1, 1), stage_of(m, 2, 1), stage_of(m, 3, 1)}),
            (std::vector<int>{0, 1, 2, 2}));
  // First 1 and last 1 leave 2 layers for 1 stage -> [1, 2, 1]; first 1 alone leaves 3 for 2: refused.
  m = build_shard_map(inv, {MegatronSpec{.pp = 3, .first_stage_layers = 1, .last_stage_layers = 1}, iota(3)});
  EXPECT_EQ((std::vector<int>{stage_of(m, 0, 1), stage_of(m, 1, 1), stage_of(m, 2, 1), stage_of(m, 3, 1)}),
            (std::vector<int>{0, 1, 1, 2}));
  EXPECT_THROW(build_shard_map(inv, {MegatronSpec{.pp = 3, .first_stage_layers = 1}, iota(3)}), PlanError);
  // PP2 x VPP2: chunk c = v*PP + p holds layer c; stage = c mod 2 -> [0, 1, 0, 1].
  m = build_shard_map(inv, {MegatronSpec{.pp = 2, .vpp = 2}, iota(2)});
  EXPECT_EQ((std::vector<int>{stage_of(m, 0, 1), stage_of(m, 1, 1), stage_of(m, 2, 1), stage_of(m, 3, 1)}),
            (std::vector<int>{0, 1, 0, 1}));
  // layers_per_stage spells any split out.
  m = build_shard_map(inv, {MegatronSpec{.pp = 2, .layers_per_stage = {3, 1}}, iota(2)});
  EXPECT_EQ((std::vector<int>{stage_of(m, 0, 1), stage_of(m, 1, 1), stage_of(m, 2, 1), stage_of(m, 3, 1)}),
            (std::vector<int>{0, 0, 0, 1}));
}

TEST(MegatronLayout, MtpLayersOnTheLastStage) {
  // Two decoder layers and one MTP layer over PP2: the decoder layers split 1 + 1 and the MTP
  // layer (layer 2) joins the last stage, as Megatron builds the MTP block there.
  const char* ds = R"(name: ds
architecture: deepseek_v3
hidden_size: 16
num_hidden_layers: 2
num_attention_heads: 2
num_key_value_heads: 2
q_lora_rank: 8
kv_lora_rank: 8
qk_nope_head_dim: 4
qk_rope_head_dim: 2
v_head_dim: 4
intermediate_size: 16
moe_intermediate_size: 8
n_routed_experts: 4
n_shared_experts: 1
num_experts_per_tok: 2
first_k_dense_replace: 1
vocab_size: 32
num_nextn_predict_layers: 1
)";
  InventoryOptions o;
  o.include_mtp = true;
  const auto inv = Inventory::parse(ds, "ds.yaml", o);
  ASSERT_EQ(inv.layer_count(), 3);
  const auto m = build_shard_map(inv, {MegatronSpec{.pp = 2, .etp = 1}, iota(2)});
  for (const auto& [layer, stage] : std::vector<std::pair<int, Rank>>{{0, 0}, {1, 1}, {2, 1}}) {
    const auto* t = inv.find("model.layers." + std::to_string(layer) + ".input_layernorm.weight");
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(m.rank_set(m.shards(t->id).front().ranks).to_vector(), (std::vector<Rank>{stage})) << layer;
  }
}

TEST(VllmLayout, ReplicatedKvHeadsAndFusedQkv) {
  const auto inv = Inventory::parse(kGqa, "gqa.yaml");
  // TP8 x DP2 on 16 GPUs: rank = tp + 8*dp. 2 KV heads < TP 8: TP ranks 0-3 hold KV head 0, 4-7 head 1.
  LayoutSpec spec{VllmSpec{.tp = 8, .pp = 1, .dp = 2}, iota(16)};
  const auto m = build_shard_map(inv, spec);
  EXPECT_EQ(shards_of(inv, m, "model.layers.0.self_attn.v_proj.weight"),
            (Shards{{"[0:32, 0:256]", {0, 1, 2, 3, 8, 9, 10, 11}}, {"[32:64, 0:256]", {4, 5, 6, 7, 12, 13, 14, 15}}}));
  // q_proj: one head (32 rows) per TP rank, replicated over DP.
  const auto q = shards_of(inv, m, "model.layers.0.self_attn.q_proj.weight");
  ASSERT_EQ(q.size(), 8u);
  EXPECT_EQ(q[0], (std::pair<std::string, std::vector<Rank>>{"[0:32, 0:256]", {0, 8}}));
  // Vocabulary 1000 padded to a multiple of 64 -> 1024, 128 rows per rank; rank 7 holds [896, 1000).
  const auto e = shards_of(inv, m, "model.embed_tokens.weight");
  EXPECT_EQ(e.back(), (std::pair<std::string, std::vector<Rank>>{"[896:1000, 0:256]", {7, 15}}));
  // qkv_proj of rank 5 = [q head 5; k head 1; v head 1].
  const auto buffers = local_buffers(inv, spec, m, 5);
  const auto it = std::find_if(buffers.begin(), buffers.end(), [](const LocalBuffer& b) {
    return b.name == "model.layers.0.self_attn.qkv_proj.weight";
  });
  ASSERT_NE(it, buffers.end());
  ASSERT_EQ(it->segments.size(), 3u);
  EXPECT_EQ(to_string(it->segments[0].box), "[160:192, 0:256]");
  EXPECT_EQ(to_string(it->segments[1].box), "[32:64, 0:256]");
}

// Layers that PP does not divide: vLLM's get_pp_indices (vllm/distributed/utils.py, without
// VLLM_PP_LAYER_PARTITION) gives every stage L // PP layers, then
//     for i in range(2, L % PP + 2): partitions[-i] += 1
// so the remainder goes one layer each to the stages before the last, from the second-to-last
// backwards; the last stage never gets one (it holds the norm and lm_head), the first only when
// L % PP = PP - 1. Stages (rank = stage with TP1 DP1):
//   7 layers over PP3:  2 each, remainder 1 -> stage 1        -> [2, 3, 2]
//  10 layers over PP4:  2 each, remainder 2 -> stages 2, 1     -> [2, 3, 3, 2]
//  11 layers over PP4:  2 each, remainder 3 -> stages 2, 1, 0  -> [3, 3, 3, 2]
//  61 layers over PP4: 15 each, remainder 1 -> stage 2         -> [15, 15, 16, 15] (DeepSeek-V3's 61)
TEST(VllmLayout, UnevenPipelineSplitAsGetPpIndices) {
  auto stages = [](int layers, int pp) {
    std::string config = kGqa;
    const std::string key = "num_hidden_layers: 4";
    config.replace(config.find(key), key.size(), "num_hidden_layers: " + std::to_string(layers));
    const auto inv = Inventory::parse(config, "gqa.yaml");
    const auto m = build_shard_map(inv, {VllmSpec{.tp = 1, .pp = pp, .dp = 1}, iota(pp)});
    std::vector<int> count(static_cast<std::size_t>(pp), 0);
    int previous = 0;
    for (int layer = 0; layer < layers; ++layer) {
      const auto* t = inv.find("model.layers." + std::to_string(layer) + ".input_layernorm.weight");
      const auto ranks = m.rank_set(m.shards(t->id).front().ranks).to_vector();
      EXPECT_EQ(ranks.size(), 1u);
      EXPECT_GE(ranks.front(), previous) << "layers split contiguously";
      previous = ranks.front();
      ++count[static_cast<std::size_t>(ranks.front())];
    }
    // The embedding on the first stage, the final norm and lm_head on the last.
    EXPECT_EQ(shards_of(inv, m, "model.embed_tokens.weight").front().second, (std::vector<Rank>{0}));
    EXPECT_EQ(shards_of(inv, m, "model.norm.weight").front().second, (std::vector<Rank>{pp - 1}));
    EXPECT_EQ(shards_of(inv, m, "lm_head.weight").front().second, (std::vector<Rank>{pp - 1}));
    return count;
  };
  EXPECT_EQ(stages(7, 3), (std::vector<int>{2, 3, 2}));
  EXPECT_EQ(stages(10, 4), (std::vector<int>{2, 3, 3, 2}));
  EXPECT_EQ(stages(11, 4), (std::vector<int>{3, 3, 3, 2}));
  EXPECT_EQ(stages(61, 4), (std::vector<int>{15, 15, 16, 15}));
  EXPECT_EQ(stages(8, 4), (std::vector<int>{2, 2, 2, 2}));
}

TEST(VllmLayout, ExpertParallelWithRedundantExperts) {
  const auto inv = Inventory::parse(kMoe, "moe.yaml");
  // TP2 x DP2, EP4 over all 4 ranks, 4 redundant experts: 12 slots, 3 per EP rank. Slot s on EP rank
  // s / 3; redundant slots 8..11 copy experts 0..3. Expert 1: slots 1 (EP rank 0) and 9 (EP rank 3).
  // EP rank q = tp + 2*dp = global rank here (PP1).
  LayoutSpec spec{VllmSpec{.tp = 2, .pp = 1, .dp = 2, .ep = 4, .redundant_experts = 4}, iota(4)};
  const auto m = build_shard_map(inv, spec);
  EXPECT_EQ(shards_of(inv, m, "model.layers.0.mlp.experts.1.gate_proj.weight"), (Shards{{"[0:128, 0:256]", {0, 3}}}));
  EXPECT_EQ(shards_of(inv, m, "model.layers.0.mlp.experts.7.gate_proj.weight"), (Shards{{"[0:128, 0:256]", {2}}}));
  // EP2 on TP2 x DP2: two expert groups {0,1} and {2,3}, each a whole copy. Expert 5 (4 per rank)
  // -> EP rank 1 -> ranks 1 and 3.
  LayoutSpec spec2{VllmSpec{.tp = 2, .pp = 1, .dp = 2, .ep = 2}, iota(4)};
  const auto m2 = build_shard_map(inv, spec2);
  EXPECT_EQ(shards_of(inv, m2, "model.layers.0.mlp.experts.5.down_proj.weight"), (Shards{{"[0:256, 0:128]", {1, 3}}}));
}

TEST(VllmLayout, ExpertParallelAcrossReplicasWithPipelineStages) {
  const auto inv = Inventory::parse(kMoe, "moe.yaml");
  // TP2 x PP2 x DP2 on 8 GPUs: rank = 4 dp + 2 pp + tp (each replica's ranks together, TP fastest);
  // stage 0 holds layers 0-1, stage 1 layers 2-3. EP4 spans TP x DP: EP rank q = tp + 2 dp, 8
  // experts / 4 = 2 per EP rank, so expert e sits on q = e / 2, in every stage at that stage's
  // ranks: GPU 4 (q / 2) + 2 pp + q % 2.
  //   expert 5 (q 2: tp 0, dp 1): layer 0 -> GPU 4, layer 3 -> GPU 6
  //   expert 3 (q 1: tp 1, dp 0): layer 2 -> GPU 3
  LayoutSpec spec{VllmSpec{.tp = 2, .pp = 2, .dp = 2, .ep = 4}, iota(8)};
  const auto m = build_shard_map(inv, spec);
  EXPECT_EQ(shards_of(inv, m, "model.layers.0.mlp.experts.5.gate_proj.weight"), (Shards{{"[0:128, 0:256]", {4}}}));
  EXPECT_EQ(shards_of(inv, m, "model.layers.3.mlp.experts.5.gate_proj.weight"), (Shards{{"[0:128, 0:256]", {6}}}));
  EXPECT_EQ(shards_of(inv, m, "model.layers.2.mlp.experts.3.down_proj.weight"), (Shards{{"[0:256, 0:128]", {3}}}));
}

// A small DeepSeek-V3: 3 layers (layer 0 dense, FFN 64), MLA, 8 experts of width 16, one shared
// expert (width 16), vocabulary 100, hidden 32.
const char* kDs = R"(name: ds
architecture: deepseek_v3
hidden_size: 32
num_hidden_layers: 3
num_attention_heads: 4
num_key_value_heads: 4
q_lora_rank: 16
kv_lora_rank: 16
qk_nope_head_dim: 8
qk_rope_head_dim: 4
v_head_dim: 8
intermediate_size: 64
moe_intermediate_size: 16
n_routed_experts: 8
n_shared_experts: 1
num_experts_per_tok: 2
first_k_dense_replace: 1
vocab_size: 100
tie_word_embeddings: false
)";

TEST(VllmLayout, DataParallelMoeTensorParallelOverTpTimesDp) {
  const auto inv = Inventory::parse(kMoe, "moe.yaml");
  // dp_mode data_parallel, EP off, TP2 x PP2 x DP2 on 8 GPUs: rank = t + 2p + 4d. The MoE layers
  // of a stage are split over TP*DP = 4 flattened ranks f = t + 2d (rank t + 2p + 4d): expert width
  // 128 / 4 = 32 rows of gate/up (columns of down) each. Layer 2 is on stage 1.
  //   f = 3 (t 1, d 1): rows [96, 128) on rank 1 + 2 + 4 = 7;  f = 1 (t 1, d 0): [32, 64) on rank 3.
  LayoutSpec spec{VllmSpec{.tp = 2, .pp = 2, .dp = 2, .dp_mode = VllmDpMode::DataParallel}, iota(8)};
  EXPECT_EQ(spec.describe(), "vllm TP2 PP2 DP2 (data parallel) on 8 GPUs");
  const auto m = build_shard_map(inv, spec);
  EXPECT_EQ(shards_of(inv, m, "model.layers.2.mlp.experts.3.gate_proj.weight"),
            (Shards{{"[0:32, 0:256]", {2}}, {"[32:64, 0:256]", {3}}, {"[64:96, 0:256]", {6}}, {"[96:128, 0:256]", {7}}}));
  EXPECT_EQ(shards_of(inv, m, "model.layers.0.mlp.experts.3.down_proj.weight").back(),
            (std::pair<std::string, std::vector<Rank>>{"[0:256, 96:128]", {5}}));
  // Attention stays TP-split per DP copy: q_proj (8 heads of 32) halves on {t + 4d}.
  EXPECT_EQ(shards_of(inv, m, "model.layers.0.self_attn.q_proj.weight"),
            (Shards{{"[0:128, 0:256]", {0, 4}}, {"[128:256, 0:256]", {1, 5}}}));
  // Engines mode (the default) keeps the experts split over TP only, replicated over DP.
  const auto e = build_shard_map(inv, {VllmSpec{.tp = 2, .pp = 2, .dp = 2}, iota(8)});
  EXPECT_EQ(shards_of(inv, e, "model.layers.2.mlp.experts.3.gate_proj.weight"),
            (Shards{{"[0:64, 0:256]", {2, 6}}, {"[64:128, 0:256]", {3, 7}}}));
}

TEST(VllmLayout, DataParallelExpertParallelAndPlacement) {
  const auto inv = Inventory::parse(kMoe, "moe.yaml");
  // enable_expert_parallel with DP2 x TP2: EP = 4, EP rank f = t + 2d = rank. 8 experts linear:
  // b = 8 / 4 = 2 -> expert 5 on EP rank 2. round_robin: 5 mod 4 = 1.
  VllmSpec v{.tp = 2, .dp = 2, .dp_mode = VllmDpMode::DataParallel, .enable_expert_parallel = true};
  const LayoutSpec linear{v, iota(4)};
  EXPECT_EQ(linear.describe(), "vllm TP2 DP2 (data parallel, EP4) on 4 GPUs");
  EXPECT_EQ(shards_of(inv, build_shard_map(inv, linear), "model.layers.0.mlp.experts.5.up_proj.weight"),
            (Shards{{"[0:128, 0:256]", {2}}}));
  // E not divisible by EP: TP1 x DP3, EP 3. linear: b = 8 / 3 = 2, m = 8 mod 3 = 2, so EP ranks 0
  // and 1 hold 3 slots ([0,3), [3,6)), rank 2 holds [6, 8).
  VllmSpec u{.tp = 1, .dp = 3, .dp_mode = VllmDpMode::DataParallel, .enable_expert_parallel = true};
  const auto mu = build_shard_map(inv, {u, iota(3)});
  for (const auto& [e, r] : std::vector<std::pair<int, Rank>>{{0, 0}, {2, 0}, {3, 1}, {5, 1}, {6, 2}, {7, 2}})
    EXPECT_EQ(shards_of(inv, mu, "model.layers.1.mlp.experts." + std::to_string(e) + ".down_proj.weight"),
              (Shards{{"[0:256, 0:128]", {r}}}))
        << e;
  // Redundant experts (EPLB): 8 + 4 = 12 slots over EP 3 -> 4 per rank; slot 9 (expert 1) on rank 2.
  u.redundant_experts = 4;
  EXPECT_EQ(shards_of(inv, build_shard_map(inv, {u, iota(3)}), "model.layers.1.mlp.experts.1.down_proj.weight"),
            (Shards{{"[0:256, 0:128]", {0, 2}}}));
  // EPLB needs the slots divisible by EP (8 + 2 = 10 over 3).
  u.redundant_experts = 2;
  EXPECT_THROW(build_shard_map(inv, {u, iota(3)}), PlanError);
  // In data_parallel mode the EP size is TP*DP; a separate ep is refused.
  EXPECT_THROW(build_shard_map(inv, {VllmSpec{.tp = 1, .dp = 4, .ep = 2, .dp_mode = VllmDpMode::DataParallel,
                                              .enable_expert_parallel = true},
                                     iota(4)}),
               PlanError);
}

// round_robin as vLLM applies it (determine_expert_placement_strategy): only for a model with expert
// groups (num_expert_group > 1), without redundant experts, and -- in an engine with data
// parallelism (EP > TP, all-to-all kernels) -- with the DeepEP low-latency or NIXL EP backend;
// otherwise vLLM falls back to linear and so does reshard, saying why on the ShardMap.
TEST(VllmLayout, RoundRobinAsVllmAppliesItFallbacksIncluded) {
  const auto rank_of = [](const Inventory& inv, const ShardMap& m, int expert) {
    const auto shards = shards_of(inv, m, "model.layers.1.mlp.experts." + std::to_string(expert) + ".up_proj.weight");
    return shards.size() == 1 ? shards[0].second : std::vector<Rank>{};
  };
  // Qwen3-MoE has no expert groups: TP2 x DP2 data parallel, EP 4, round_robin asked -> linear,
  // b = 8 / 4 = 2, expert 5 on EP rank 2 (round-robin would put it on 5 mod 4 = 1).
  const auto qwen = Inventory::parse(kMoe, "moe.yaml");
  VllmSpec v{.tp = 2, .dp = 2, .dp_mode = VllmDpMode::DataParallel, .enable_expert_parallel = true};
  v.expert_placement = ExpertPlacement::RoundRobin;
  const LayoutSpec asked{v, iota(4)};
  EXPECT_EQ(asked.describe(), "vllm TP2 DP2 (data parallel, EP4) round-robin on 4 GPUs");
  const ShardMap fell = build_shard_map(qwen, asked);
  EXPECT_EQ(rank_of(qwen, fell, 5), std::vector<Rank>{2});
  ASSERT_EQ(fell.conventions().size(), 1u);
  EXPECT_NE(fell.conventions()[0].find("no expert groups (num_expert_group 0)"), std::string::npos) << fell.conventions()[0];

  // DeepSeek-shaped, 2 expert groups, 8 experts. The default all-to-all backend with DP (EP 4 > TP 2)
  // -> linear; DeepEP low-latency -> round-robin: expert 5 on EP rank 1 = rank 1.
  const auto ds = Inventory::parse(std::string(kDs) + "n_group: 2\n", "ds.yaml");
  const ShardMap backend = build_shard_map(ds, asked);
  EXPECT_EQ(rank_of(ds, backend, 5), std::vector<Rank>{2});
  ASSERT_EQ(backend.conventions().size(), 1u);
  EXPECT_NE(backend.conventions()[0].find("all-to-all backend allgather_reducescatter"), std::string::npos);
  for (VllmAll2All b : {VllmAll2All::DeepepLowLatency, VllmAll2All::NixlEp}) {
    v.all2all_backend = b;
    const ShardMap rr = build_shard_map(ds, {v, iota(4)});
    EXPECT_EQ(rank_of(ds, rr, 5), std::vector<Rank>{1}) << to_string(b);
    EXPECT_TRUE(rr.conventions().empty());
  }
  // TP1 x DP3, EP 3 (8 experts not divisible): round-robin e mod 3 with DeepEP LL.
  VllmSpec u{.tp = 1, .dp = 3, .dp_mode = VllmDpMode::DataParallel, .enable_expert_parallel = true,
             .expert_placement = ExpertPlacement::RoundRobin, .all2all_backend = VllmAll2All::DeepepLowLatency};
  const ShardMap three = build_shard_map(ds, {u, iota(3)});
  for (const auto& [e, r] : std::vector<std::pair<int, Rank>>{{0, 0}, {4, 1}, {5, 2}, {7, 1}})
    EXPECT_EQ(rank_of(ds, three, e), std::vector<Rank>{r}) << e;
  // Redundant experts (EPLB): linear whatever the backend (8 + 4 = 12 slots, slot 9 = expert 1 on rank 2).
  u.redundant_experts = 4;
  const ShardMap eplb = build_shard_map(ds, {u, iota(3)});
  EXPECT_EQ(rank_of(ds, eplb, 1), (std::vector<Rank>{0, 2}));
  ASSERT_EQ(eplb.conventions().size(), 1u);
  EXPECT_NE(eplb.conventions()[0].find("redundant experts"), std::string::npos);
  // Engines of EP = TP (no data parallelism inside an engine, no all-to-all kernels): round-robin
  // holds with the default backend. TP4 x DP2 engines, EP 4: expert 5 on EP rank 1 of each engine.
  VllmSpec e{.tp = 4, .dp = 2, .ep = 4, .enable_expert_parallel = true, .expert_placement = ExpertPlacement::RoundRobin};
  const ShardMap engines = build_shard_map(ds, {e, iota(8)});
  EXPECT_EQ(rank_of(ds, engines, 5), (std::vector<Rank>{1, 5}));
  EXPECT_TRUE(engines.conventions().empty());
}

TEST(VllmLayout, EnginesWithExpertParallelAndUnevenGroups) {
  const auto inv = Inventory::parse(kMoe, "moe.yaml");
  // Engines mode, enable_expert_parallel without ep: EP = TP per engine. TP2 x DP2: groups {0,1},
  // {2,3}; 8 experts / 2 = 4 per EP rank: expert 5 on EP rank 1 -> ranks 1 and 3.
  const LayoutSpec spec{VllmSpec{.tp = 2, .dp = 2, .enable_expert_parallel = true}, iota(4)};
  EXPECT_EQ(spec.describe(), "vllm TP2 DP2 EP2 on 4 GPUs");
  EXPECT_EQ(shards_of(inv, build_shard_map(inv, spec), "model.layers.0.mlp.experts.5.down_proj.weight"),
            (Shards{{"[0:256, 0:128]", {1, 3}}}));
  // TP1 x DP6 with ep 3: two engines of data_parallel_size 3, groups {0,1,2} and {3,4,5}; 8 experts
  // over EP 3 linear: 3, 3, 2 ([0,3), [3,6), [6,8)). Expert 7 on EP rank 2 -> ranks 2 and 5; expert
  // 3 on EP rank 1 -> ranks 1 and 4.
  const LayoutSpec g{VllmSpec{.tp = 1, .dp = 6, .ep = 3}, iota(6)};
  EXPECT_EQ(shards_of(inv, build_shard_map(inv, g), "model.layers.0.mlp.experts.7.down_proj.weight"),
            (Shards{{"[0:256, 0:128]", {2, 5}}}));
  EXPECT_EQ(shards_of(inv, build_shard_map(inv, g), "model.layers.0.mlp.experts.3.down_proj.weight"),
            (Shards{{"[0:256, 0:128]", {1, 4}}}));
}

TEST(VllmLayout, SequenceParallelMoeKeepsSharedExpertsWhole) {
  const auto inv = Inventory::parse(kDs, "ds.yaml");
  // data_parallel + EP with TP2 x DP2: the shared expert (width 16) whole on all 4 ranks.
  const auto m = build_shard_map(
      inv, {VllmSpec{.tp = 2, .dp = 2, .dp_mode = VllmDpMode::DataParallel, .enable_expert_parallel = true}, iota(4)});
  EXPECT_EQ(shards_of(inv, m, "model.layers.1.mlp.shared_experts.gate_proj.weight"),
            (Shards{{"[0:16, 0:32]", {0, 1, 2, 3}}}));
  // The dense layer 0 FFN (64 wide) stays TP-split per DP copy: rank t holds rows [32t, 32t + 32).
  EXPECT_EQ(shards_of(inv, m, "model.layers.0.mlp.gate_proj.weight"),
            (Shards{{"[0:32, 0:32]", {0, 2}}, {"[32:64, 0:32]", {1, 3}}}));
  // Without EP the shared expert is TP-split: rank t rows [8t, 8t + 8) on {t, t + 2}.
  const auto n = build_shard_map(inv, {VllmSpec{.tp = 2, .dp = 2, .dp_mode = VllmDpMode::DataParallel}, iota(4)});
  EXPECT_EQ(shards_of(inv, n, "model.layers.1.mlp.shared_experts.gate_proj.weight"),
            (Shards{{"[0:8, 0:32]", {0, 2}}, {"[8:16, 0:32]", {1, 3}}}));
}

// vLLM runs the MoE sequence parallel (use_sequence_parallel_moe, vllm/config/parallel.py) only with
// the backends allgather_reducescatter, naive, deepep_high_throughput, deepep_low_latency and
// nixl_ep, and only with TP > 1 and DP > 1; then the shared experts are built unsplit. Every backend
// reshard reads, at TP2 x DP2 (data parallel, EP 4): the shared expert (width 16) whole on the 4
// ranks, or TP-split (rows [8t, 8t + 8) on {t, t + 2}) for pplx and flashinfer_all2allv. At TP2 x DP1
// (EP 2) it is TP-split whatever the backend. Wrong lists this catches (tried): naive left out,
// nixl_ep left out, the DP > 1 condition dropped.
TEST(VllmLayout, SequenceParallelMoeBackendsAsVllmListsThem) {
  const auto inv = Inventory::parse(kDs, "ds.yaml");
  const Shards whole{{"[0:16, 0:32]", {0, 1, 2, 3}}};
  const Shards split{{"[0:8, 0:32]", {0, 2}}, {"[8:16, 0:32]", {1, 3}}};
  const std::set<std::string> sequence_parallel{"allgather_reducescatter", "naive", "deepep_high_throughput",
                                                "deepep_low_latency", "nixl_ep"};
  ASSERT_EQ(vllm_all2all_names().size(), 7u) << "a new backend: say here whether vLLM runs it sequence parallel";
  for (const auto& name : vllm_all2all_names()) {
    SCOPED_TRACE(name);
    VllmSpec v{.tp = 2, .dp = 2, .dp_mode = VllmDpMode::DataParallel, .enable_expert_parallel = true};
    v.all2all_backend = *vllm_all2all_named(name);
    const auto m = build_shard_map(inv, {v, iota(4)});
    EXPECT_EQ(shards_of(inv, m, "model.layers.1.mlp.shared_experts.gate_proj.weight"),
              sequence_parallel.count(name) ? whole : split);
    v.dp = 1;
    const auto one = build_shard_map(inv, {v, iota(2)});
    EXPECT_EQ(shards_of(inv, one, "model.layers.1.mlp.shared_experts.gate_proj.weight"),
              (Shards{{"[0:8, 0:32]", {0}}, {"[8:16, 0:32]", {1}}}));
  }
}

// Kimi-K2 ships `n_group: 1` (models/kimi-k2.yaml): one expert group is no grouping, and vLLM's
// determine_expert_placement_strategy keeps round_robin only for num_expert_group > 1, whatever the
// backend. TP8 x DP2 data parallel, EP 16, DeepEP low-latency, round_robin asked -> linear: 384 / 16
// = 24 experts per EP rank, expert 25 on EP rank 1 = rank 1 (round-robin would put it on 25 mod 16 =
// 9). The DeepSeek-shaped model with n_group 1 falls back the same way (expert 5 on 8 / 4 = 2 per
// rank: EP rank 2; round-robin 5 mod 4 = 1). A test of n_group 0 and 2 alone cannot tell "> 1" from
// ">= 1" (tried: the fallback taken only for n_group 0).
TEST(VllmLayout, RoundRobinFallsBackWithOneExpertGroupAsKimiK2Ships) {
  const auto kimi = Inventory::load(kRoot + "/models/kimi-k2.yaml");
  ASSERT_EQ(kimi.config().n_group, 1);
  const VllmSpec v{.tp = 8, .dp = 2, .dp_mode = VllmDpMode::DataParallel, .enable_expert_parallel = true,
                   .expert_placement = ExpertPlacement::RoundRobin, .all2all_backend = VllmAll2All::DeepepLowLatency};
  const ShardMap k = build_shard_map(kimi, {v, iota(16)});
  EXPECT_EQ(shards_of(kimi, k, "model.layers.1.mlp.experts.25.up_proj.weight").front().second, std::vector<Rank>{1});
  ASSERT_EQ(k.conventions().size(), 1u);
  EXPECT_NE(k.conventions()[0].find("no expert groups (num_expert_group 1)"), std::string::npos) << k.conventions()[0];

  const auto ds = Inventory::parse(std::string(kDs) + "n_group: 1\n", "ds.yaml");
  VllmSpec d = v;
  d.tp = 2;
  const ShardMap m = build_shard_map(ds, {d, iota(4)});
  EXPECT_EQ(shards_of(ds, m, "model.layers.1.mlp.experts.5.up_proj.weight").front().second, std::vector<Rank>{2});
  ASSERT_EQ(m.conventions().size(), 1u);
}

TEST(SglangLayout, DpAttentionSplitsAttentionOverTpOverDp) {
  const auto inv = Inventory::parse(kMoe, "moe.yaml");
  // --tp-size 4 --dp-size 2 --enable-dp-attention --ep-size 4: world 4, attention TP A = 4/2 = 2,
  // attention TP rank a = t mod 2, the two attention groups {0,1}, {2,3} hold copies.
  SglangSpec s{.tp = 4, .dp = 2, .enable_dp_attention = true, .ep = 4};
  const LayoutSpec spec{s, iota(4)};
  EXPECT_EQ(spec.describe(), "sglang TP4 DP-attention 2 EP4 on 4 GPUs");
  const auto m = build_shard_map(inv, spec);
  // q_proj 8 heads of 32 over A = 2: [0,128) on a = 0 -> {0, 2}.
  EXPECT_EQ(shards_of(inv, m, "model.layers.0.self_attn.q_proj.weight"),
            (Shards{{"[0:128, 0:256]", {0, 2}}, {"[128:256, 0:256]", {1, 3}}}));
  // Embedding (1024 rows) over the attention TP group: 512 each.
  EXPECT_EQ(shards_of(inv, m, "model.embed_tokens.weight"),
            (Shards{{"[0:512, 0:256]", {0, 2}}, {"[512:1024, 0:256]", {1, 3}}}));
  // lm_head over all TP 4 ranks (no enable_dp_lm_head): 256 rows each.
  EXPECT_EQ(shards_of(inv, m, "lm_head.weight").front(), (std::pair<std::string, std::vector<Rank>>{"[0:256, 0:256]", {0}}));
  // Experts: MoE TP = 4/4 = 1, 8 experts / EP 4 = 2 per rank: expert 5 on rank 2, whole.
  EXPECT_EQ(shards_of(inv, m, "model.layers.0.mlp.experts.5.gate_proj.weight"), (Shards{{"[0:128, 0:256]", {2}}}));
  // enable_dp_lm_head: lm_head over A = 2 as well.
  s.enable_dp_lm_head = true;
  const auto h = build_shard_map(inv, {s, iota(4)});
  EXPECT_EQ(shards_of(inv, h, "lm_head.weight"), (Shards{{"[0:512, 0:256]", {0, 2}}, {"[512:1024, 0:256]", {1, 3}}}));
  // ep_size 2: MoE TP M = 2, TP rank t = q*2 + j; expert 5 on EP rank 5 / 4 = 1 -> ranks 2 (rows
  // [0,64)) and 3 ([64,128)).
  const auto e2 = build_shard_map(inv, {SglangSpec{.tp = 4, .dp = 2, .enable_dp_attention = true, .ep = 2}, iota(4)});
  EXPECT_EQ(shards_of(inv, e2, "model.layers.0.mlp.experts.5.gate_proj.weight"),
            (Shards{{"[0:64, 0:256]", {2}}, {"[64:128, 0:256]", {3}}}));
  // Redundant experts: 8 + 4 = 12 slots over EP 4, 3 each: expert 1 in slots 1 (rank 0) and 9 (rank 3).
  const auto r = build_shard_map(
      inv, {SglangSpec{.tp = 4, .dp = 2, .enable_dp_attention = true, .ep = 4, .redundant_experts = 4}, iota(4)});
  EXPECT_EQ(shards_of(inv, r, "model.layers.0.mlp.experts.1.gate_proj.weight"), (Shards{{"[0:128, 0:256]", {0, 3}}}));
}

TEST(SglangLayout, PlainDataParallelReplicas) {
  const auto inv = Inventory::parse(kMoe, "moe.yaml");
  // --tp-size 2 --dp-size 2 --ep-size 2, no DP attention: two replicas on GPUs {0,1} and {2,3},
  // rank = t + 2d. q_proj halves on {t, t + 2}; expert 5 (4 per EP rank) on EP rank 1 -> {1, 3}.
  const LayoutSpec spec{SglangSpec{.tp = 2, .dp = 2, .ep = 2}, iota(4)};
  EXPECT_EQ(spec.describe(), "sglang TP2 DP2 EP2 on 4 GPUs");
  const auto m = build_shard_map(inv, spec);
  EXPECT_EQ(shards_of(inv, m, "model.layers.0.self_attn.q_proj.weight"),
            (Shards{{"[0:128, 0:256]", {0, 2}}, {"[128:256, 0:256]", {1, 3}}}));
  EXPECT_EQ(shards_of(inv, m, "model.layers.0.mlp.experts.5.gate_proj.weight"), (Shards{{"[0:128, 0:256]", {1, 3}}}));
  EXPECT_EQ(shards_of(inv, m, "model.embed_tokens.weight"),
            (Shards{{"[0:512, 0:256]", {0, 2}}, {"[512:1024, 0:256]", {1, 3}}}));
}

TEST(SglangLayout, DenseAndSharedExpertsUnderDpAttention) {
  const auto inv = Inventory::parse(kDs, "ds.yaml");
  // TP4 DP-attention 4 (A = 1): MLA attention whole on every rank; the dense layer-0 FFN (64 wide)
  // split over TP 4 (16 rows each) unless moe_dense_tp_size 1 keeps it whole; the shared expert
  // (16 wide) split over TP (4 rows each) unless an all-to-all backend keeps it whole.
  const SglangSpec base{.tp = 4, .dp = 4, .enable_dp_attention = true, .ep = 4};
  const auto m = build_shard_map(inv, {base, iota(4)});
  EXPECT_EQ(shards_of(inv, m, "model.layers.1.self_attn.q_b_proj.weight"),
            (Shards{{"[0:48, 0:16]", {0, 1, 2, 3}}}));
  EXPECT_EQ(shards_of(inv, m, "model.layers.0.mlp.gate_proj.weight").front(),
            (std::pair<std::string, std::vector<Rank>>{"[0:16, 0:32]", {0}}));
  EXPECT_EQ(shards_of(inv, m, "model.layers.1.mlp.shared_experts.up_proj.weight"),
            (Shards{{"[0:4, 0:32]", {0}}, {"[12:16, 0:32]", {3}}, {"[4:8, 0:32]", {1}}, {"[8:12, 0:32]", {2}}}));
  SglangSpec dense1 = base;
  dense1.moe_dense_tp = 1;
  dense1.a2a_moe = true;
  const LayoutSpec d1{dense1, iota(4)};
  EXPECT_EQ(d1.describe(), "sglang TP4 DP-attention 4 EP4 dense-TP1 a2a on 4 GPUs");
  const auto w = build_shard_map(inv, d1);
  EXPECT_EQ(shards_of(inv, w, "model.layers.0.mlp.gate_proj.weight"), (Shards{{"[0:64, 0:32]", {0, 1, 2, 3}}}));
  EXPECT_EQ(shards_of(inv, w, "model.layers.1.mlp.shared_experts.up_proj.weight"),
            (Shards{{"[0:16, 0:32]", {0, 1, 2, 3}}}));
}

TEST(SglangLayout, BadCombinations) {
  const auto inv = Inventory::parse(kMoe, "moe.yaml");
  auto fails = [&](const SglangSpec& s, int gpus) {
    EXPECT_THROW(build_shard_map(inv, LayoutSpec{s, iota(gpus)}), PlanError) << LayoutSpec{s, iota(gpus)}.describe();
  };
  fails({.tp = 4, .dp = 3, .enable_dp_attention = true}, 4);    // dp does not divide tp
  fails({.tp = 4, .dp = 2, .enable_dp_lm_head = true}, 8);      // DP lm_head without DP attention
  fails({.tp = 4, .ep = 3}, 4);                                 // ep does not divide tp
  fails({.tp = 4, .ep = 2, .a2a_moe = true}, 4);                // all-to-all backend needs EP = TP
  fails({.tp = 4, .ep = 4, .redundant_experts = 2}, 4);         // 10 slots over EP 4
  fails({.tp = 4, .dp = 2}, 4);                                 // TP*DP = 8 GPUs needed
  const auto dense = Inventory::parse(kGqa, "gqa.yaml");
  EXPECT_THROW(build_shard_map(dense, LayoutSpec{SglangSpec{.tp = 2, .moe_dense_tp = 1}, iota(2)}), PlanError);
}

TEST(DTensorLayout, UnevenChunksAndNestedSharding) {
  const auto inv = Inventory::parse(kGqa, "gqa.yaml");
  // Mesh [4] Shard(0): torch.chunk of 1000 vocabulary rows into 4 -> chunk 250 each (even); of the
  // 64-row k_proj -> 16 each. Use mesh [3]: 1000 -> ceil(1000/3) = 334: 334, 334, 332.
  DTensorSpec d3{{3}, {"tp"}, {{"default", {Placement{Placement::Kind::Shard, 0}}}}};
  const auto m3 = build_shard_map(inv, LayoutSpec{d3, iota(3)});
  EXPECT_EQ(shards_of(inv, m3, "model.embed_tokens.weight"),
            (Shards{{"[0:334, 0:256]", {0}}, {"[334:668, 0:256]", {1}}, {"[668:1000, 0:256]", {2}}}));
  // 10 rows over 4 ranks -> 3, 3, 3, 1 (torch.chunk): a [10]-sized slice is not in this model, so
  // check the rule on 1000 rows over mesh [3, 4] nested on dim 0, outer first: the outer chunk 0 is
  // [0, 334); its 4 inner chunks of ceil(334/4) = 84 rows: 84, 84, 84, 82.
  DTensorSpec d34{{3, 4}, {"a", "b"}, {{"default", {Placement{Placement::Kind::Shard, 0}, Placement{Placement::Kind::Shard, 0}}}}};
  const auto m34 = build_shard_map(inv, LayoutSpec{d34, iota(12)});
  const auto e = shards_of(inv, m34, "model.embed_tokens.weight");
  ASSERT_EQ(e.size(), 12u);
  auto has = [&](const char* box, Rank r) {
    return std::find(e.begin(), e.end(), std::pair<std::string, std::vector<Rank>>{box, {r}}) != e.end();
  };
  EXPECT_TRUE(has("[0:84, 0:256]", 0));
  EXPECT_TRUE(has("[252:334, 0:256]", 3));
  // Outer chunk 2 is [668, 1000) (332 rows): inner chunks of 83 rows, rank 2*4 + 3 = 11 the last.
  EXPECT_TRUE(has("[917:1000, 0:256]", 11));
  // A replicated mesh dimension: [2, 2] with [Replicate, Shard(1)] on o_proj: column halves held by
  // ranks {0, 2} and {1, 3} (mesh row-major, last dimension fastest).
  DTensorSpec d22{{2, 2}, {"dp", "tp"},
                  {{"default", {Placement{}, Placement{}}},
                   {"*.o_proj.weight", {Placement{}, Placement{Placement::Kind::Shard, 1}}}}};
  const auto m22 = build_shard_map(inv, LayoutSpec{d22, iota(4)});
  EXPECT_EQ(shards_of(inv, m22, "model.layers.0.self_attn.o_proj.weight"),
            (Shards{{"[0:256, 0:128]", {0, 2}}, {"[0:256, 128:256]", {1, 3}}}));
  EXPECT_EQ(shards_of(inv, m22, "model.layers.0.self_attn.q_proj.weight"), (Shards{{"[0:256, 0:256]", {0, 1, 2, 3}}}));
}

TEST(DTensorLayout, TorchChunkSemantics) {
  // 10 rows over 4 ranks -> 3, 3, 3, 1; 5 over 4 -> 2, 2, 1, 0.
  const auto inv = Inventory::parse(R"(name: t
architecture: qwen3
hidden_size: 16
num_hidden_layers: 1
num_attention_heads: 2
num_key_value_heads: 1
head_dim: 8
intermediate_size: 32
vocab_size: 10
tie_word_embeddings: true
)", "t.yaml");
  DTensorSpec d{{4}, {"tp"}, {{"default", {Placement{Placement::Kind::Shard, 0}}}}};
  const auto m = build_shard_map(inv, LayoutSpec{d, iota(4)});
  EXPECT_EQ(shards_of(inv, m, "model.embed_tokens.weight"),
            (Shards{{"[0:3, 0:16]", {0}}, {"[3:6, 0:16]", {1}}, {"[6:9, 0:16]", {2}}, {"[9:10, 0:16]", {3}}}));
}

TEST(LayoutErrors, SizesThatDoNotFit) {
  const auto inv = Inventory::parse(kGqa, "gqa.yaml");
  // 8 heads over TP 3 cannot split.
  EXPECT_THROW(build_shard_map(inv, LayoutSpec{VllmSpec{.tp = 3}, iota(3)}), PlanError);
  // Megatron needs the query heads (8) divisible by TP (16), also with fewer KV heads than TP.
  EXPECT_THROW(build_shard_map(inv, LayoutSpec{MegatronSpec{.tp = 16}, iota(16)}), PlanError);
  // A layout larger than its GPU set.
  EXPECT_THROW(build_shard_map(inv, LayoutSpec{VllmSpec{.tp = 2, .dp = 4}, iota(4)}), PlanError);
  // Shard(2) on two-dimensional weights.
  DTensorSpec d{{2}, {"tp"}, {{"default", {Placement{Placement::Kind::Shard, 2}}}}};
  try {
    build_shard_map(inv, LayoutSpec{d, iota(2)});
    FAIL();
  } catch (const PlanError& e) {
    EXPECT_NE(std::string(e.what()).find("Shard(2)"), std::string::npos) << e.what();
  }
}

// The new architectures' framework conventions, hand-worked on a one-layer gpt-oss (4 heads of 4,
// 2 KV heads, 4 experts of width I = 6): vLLM's own loader gives MoE TP rank f the intermediate rows
// [f*c, min((f+1)*c, I)), c = ceil(I / TP) (GptOssModel.load_weights), so over TP4 c = 2 and rank 3
// holds none; gate_up's rows are the (gate, up) pairs, twice that range; down_proj_bias on rank 0
// only; the sinks one head per rank. Then the refusals, each with its reason.
TEST(NewArchitectureLayout, GptOssExpertsSinksAndRefusals) {
  const char* oss = R"({"model_type": "gpt_oss", "hidden_size": 8, "num_hidden_layers": 1,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 4, "intermediate_size": 6,
    "num_local_experts": 4, "num_experts_per_tok": 2, "vocab_size": 20})";
  const auto inv = Inventory::parse(oss, "oss/config.json");
  const auto m = build_shard_map(inv, LayoutSpec{VllmSpec{.tp = 4}, iota(4)});
  EXPECT_EQ(shards_of(inv, m, "model.layers.0.mlp.experts.1.gate_up_proj"),
            (Shards{{"[0:4, 0:8]", {0}}, {"[4:8, 0:8]", {1}}, {"[8:12, 0:8]", {2}}}));
  EXPECT_EQ(shards_of(inv, m, "model.layers.0.mlp.experts.1.down_proj"),
            (Shards{{"[0:8, 0:2]", {0}}, {"[0:8, 2:4]", {1}}, {"[0:8, 4:6]", {2}}}));
  EXPECT_EQ(shards_of(inv, m, "model.layers.0.mlp.experts.3.down_proj_bias"), (Shards{{"[0:8]", {0}}}));
  EXPECT_EQ(shards_of(inv, m, "model.layers.0.self_attn.sinks"),
            (Shards{{"[0:1]", {0}}, {"[1:2]", {1}}, {"[2:3]", {2}}, {"[3:4]", {3}}}));
  // SGLang's FusedMoE loader over MoE TP 2: whole pairs, down_proj_bias on MoE TP rank 0 only.
  const auto g = build_shard_map(inv, LayoutSpec{SglangSpec{.tp = 2}, iota(2)});
  EXPECT_EQ(shards_of(inv, g, "model.layers.0.mlp.experts.0.gate_up_proj_bias"),
            (Shards{{"[0:6]", {0}}, {"[6:12]", {1}}}));
  EXPECT_EQ(shards_of(inv, g, "model.layers.0.mlp.experts.0.down_proj_bias"), (Shards{{"[0:8]", {0}}}));
  auto refused = [&](const Inventory& model, const LayoutSpec& spec) {
    try {
      (void)build_shard_map(model, spec);
    } catch (const PlanError& e) {
      return std::string(e.what());
    }
    ADD_FAILURE() << spec.describe() << " was not refused";
    return std::string();
  };
  // vLLM's gpt-oss loader slices E/EP experts per EP rank itself: no EPLB slots, E divisible by EP.
  EXPECT_NE(refused(inv, LayoutSpec{VllmSpec{.tp = 2, .redundant_experts = 2, .enable_expert_parallel = true}, iota(2)})
                .find("redundant experts (EPLB) are not supported"),
            std::string::npos);
  EXPECT_NE(refused(inv, LayoutSpec{VllmSpec{.tp = 1, .dp = 3, .ep = 3}, iota(3)}).find("not divisible by EP 3"),
            std::string::npos);
  // SGLang's DP attention with gated DeltaNet layers is not modelled.
  const auto next = Inventory::load(kRoot + "/models/tiny-qwen3-next.yaml");
  EXPECT_NE(refused(next, LayoutSpec{SglangSpec{.tp = 2, .dp = 2, .enable_dp_attention = true}, iota(2)})
                .find("DP attention with gated DeltaNet layers"),
            std::string::npos);
}

// Qwen3.5's gated DeltaNet (2 key heads of 2, 4 value heads of 3: kd 4, vd 12) over vLLM TP2: conv1d
// and in_proj_qkv split each of their [q; k; v] parts (mamba_v2_sharded_weight_loader, the merged
// in_proj_qkvz's parts), in_proj_z / b / a, A_log and out_proj by whole key-head groups, the gated
// norm whole; the gated q_proj ([q; gate] per head) by heads, the single KV head on both ranks. And
// DeepSeek-V3.2's indexer whole on every rank.
TEST(NewArchitectureLayout, GatedDeltaNetByPartsAndKeyHeadsIndexerWhole) {
  const char* q35 = R"({"model_type": "qwen3_5", "tie_word_embeddings": true, "text_config": {
    "hidden_size": 8, "num_hidden_layers": 2, "layer_types": ["linear_attention", "full_attention"],
    "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 4, "linear_num_key_heads": 2,
    "linear_num_value_heads": 4, "linear_key_head_dim": 2, "linear_value_head_dim": 3,
    "linear_conv_kernel_dim": 3, "intermediate_size": 10, "vocab_size": 20}})";
  const auto inv = Inventory::parse(q35, "q35/config.json");
  const auto m = build_shard_map(inv, LayoutSpec{VllmSpec{.tp = 2}, iota(2)});
  const std::string p = "model.language_model.layers.0.linear_attn.";
  EXPECT_EQ(shards_of(inv, m, p + "conv1d.weight"),
            (Shards{{"[0:2, 0:1, 0:3]", {0}}, {"[14:20, 0:1, 0:3]", {1}}, {"[2:4, 0:1, 0:3]", {1}},
                    {"[4:6, 0:1, 0:3]", {0}}, {"[6:8, 0:1, 0:3]", {1}}, {"[8:14, 0:1, 0:3]", {0}}}));
  EXPECT_EQ(shards_of(inv, m, p + "in_proj_qkv.weight"),
            (Shards{{"[0:2, 0:8]", {0}}, {"[14:20, 0:8]", {1}}, {"[2:4, 0:8]", {1}}, {"[4:6, 0:8]", {0}},
                    {"[6:8, 0:8]", {1}}, {"[8:14, 0:8]", {0}}}));
  EXPECT_EQ(shards_of(inv, m, p + "in_proj_z.weight"), (Shards{{"[0:6, 0:8]", {0}}, {"[6:12, 0:8]", {1}}}));
  EXPECT_EQ(shards_of(inv, m, p + "in_proj_a.weight"), (Shards{{"[0:2, 0:8]", {0}}, {"[2:4, 0:8]", {1}}}));
  EXPECT_EQ(shards_of(inv, m, p + "A_log"), (Shards{{"[0:2]", {0}}, {"[2:4]", {1}}}));
  EXPECT_EQ(shards_of(inv, m, p + "norm.weight"), (Shards{{"[0:3]", {0, 1}}}));
  EXPECT_EQ(shards_of(inv, m, p + "out_proj.weight"), (Shards{{"[0:8, 0:6]", {0}}, {"[0:8, 6:12]", {1}}}));
  const std::string a = "model.language_model.layers.1.self_attn.";
  EXPECT_EQ(shards_of(inv, m, a + "q_proj.weight"), (Shards{{"[0:8, 0:8]", {0}}, {"[8:16, 0:8]", {1}}}));
  EXPECT_EQ(shards_of(inv, m, a + "k_proj.weight"), (Shards{{"[0:4, 0:8]", {0, 1}}}));
  // TP4 would cut a key head: refused, naming the two heads.
  try {
    (void)build_shard_map(inv, LayoutSpec{VllmSpec{.tp = 4}, iota(4)});
    ADD_FAILURE() << "TP4 over 2 key heads was not refused";
  } catch (const PlanError& e) {
    EXPECT_NE(std::string(e.what()).find("2 heads are not divisible by TP 4"), std::string::npos) << e.what();
  }
  const auto v32 = Inventory::load(kRoot + "/models/tiny-deepseek-v32.yaml");
  const auto d = build_shard_map(v32, LayoutSpec{VllmSpec{.tp = 2}, iota(2)});
  for (const char* t : {"wq_b.weight", "wk.weight", "k_norm.bias", "weights_proj.weight"}) {
    const auto* w = v32.find(std::string("model.layers.2.self_attn.indexer.") + t);
    ASSERT_NE(w, nullptr) << t;
    EXPECT_EQ(shards_of(v32, d, w->name), (Shards{{to_string(full_box(*w)), {0, 1}}})) << t;
  }
}
