// Weight inventory: hand-worked small architectures (every count written out), the shipped models
// against the published totals (docs/models.md), structural properties of every
// tensor, bad input, and the `reshard model` command.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "reshard/model/errors.hpp"
#include "reshard/model/inventory.hpp"

using namespace reshard::model;

namespace {

std::filesystem::path model_file(const std::string& name) {
  return std::filesystem::path(RESHARD_SOURCE_DIR) / "models" / (name + ".yaml");
}

Inventory load(const std::string& name, bool mtp = false) {
  InventoryOptions o;
  o.include_mtp = mtp;
  return Inventory::load(model_file(name), o);
}

double share(const Inventory& inv, TensorClass c) {
  return static_cast<double>(inv.parameters(c)) / static_cast<double>(inv.parameters());
}

// |got / want - 1| <= 0.1 %
void expect_within_0_1_percent(double got, double want) {
  EXPECT_LE(std::abs(got / want - 1.0), 1e-3) << "got " << got << ", want " << want;
}

const TensorInfo& get(const Inventory& inv, const std::string& name) {
  const auto* t = inv.find(name);
  if (!t) throw std::runtime_error("no tensor " + name);
  return *t;
}

using Shape = std::vector<std::int64_t>;

}  // namespace

// ---------------------------------------------------------------- hand-worked small architectures

TEST(InventoryHand, Qwen3DenseEveryCount) {
  // H=16, 4 heads, 2 KV heads, head_dim 4, FFN 32, vocabulary 100, 2 layers, untied.
  ModelConfig c;
  c.name = "hand-qwen3";
  c.architecture = "qwen3";
  c.hidden_size = 16;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 4;
  c.intermediate_size = 32;
  c.vocab_size = 100;
  const auto inv = Inventory::build(c);
  // per layer: q 16*16=256, k 8*16=128, v 128, o 16*16=256 -> 768; q_norm + k_norm 4+4=8;
  // 2 layernorms 2*16=32; gate/up/down 3*32*16=1536.  768+8+32+1536 = 2344, x2 layers = 4688.
  // globals: embedding 100*16=1600, lm_head 1600, final norm 16 -> 3216.  total 7904.
  EXPECT_EQ(inv.parameters(), 7904);
  EXPECT_EQ(inv.active_parameters(), 7904);  // dense: every weight is active
  EXPECT_EQ(inv.bytes().value, 7904 * 2);
  // tensors: per layer 4 attention + 2 qk norms + 2 layernorms + 3 mlp = 11, x2, + 3 globals = 25.
  EXPECT_EQ(inv.tensors().size(), 25u);
  EXPECT_EQ(inv.parameters(TensorClass::Attention), 2 * 768);
  EXPECT_EQ(inv.parameters(TensorClass::Norm), 2 * 40 + 16);
  EXPECT_EQ(inv.parameters(TensorClass::DenseFFN), 2 * 1536);

  const auto& k = get(inv, "model.layers.1.self_attn.k_proj.weight");
  EXPECT_EQ(k.shape, (Shape{8, 16}));
  EXPECT_EQ(k.role, ParallelRole::ColumnParallel);
  EXPECT_EQ(k.fused, FusedPart::K);
  EXPECT_EQ(k.layer, 1);
  const auto& o = get(inv, "model.layers.0.self_attn.o_proj.weight");
  EXPECT_EQ(o.shape, (Shape{16, 16}));
  EXPECT_EQ(o.role, ParallelRole::RowParallel);
  EXPECT_EQ(get(inv, "model.layers.0.mlp.up_proj.weight").fused, FusedPart::Up);
  EXPECT_EQ(get(inv, "model.layers.0.mlp.down_proj.weight").shape, (Shape{16, 32}));
  EXPECT_EQ(get(inv, "model.layers.0.self_attn.q_norm.weight").cls, TensorClass::Norm);
  const auto& emb = inv.tensors().front();
  EXPECT_EQ(emb.name, "model.embed_tokens.weight");
  EXPECT_TRUE(emb.pre_layers);
  EXPECT_EQ(emb.layer, -1);
  EXPECT_EQ(emb.role, ParallelRole::VocabParallel);
  const auto& head = inv.tensors().back();
  EXPECT_EQ(head.name, "lm_head.weight");
  EXPECT_FALSE(head.pre_layers);
  EXPECT_EQ(head.layer, -1);
  EXPECT_EQ(inv.layer_count(), 2);

  c.tie_word_embeddings = true;  // tied: no lm_head tensor, 1600 fewer parameters
  const auto tied = Inventory::build(c);
  EXPECT_EQ(tied.find("lm_head.weight"), nullptr);
  EXPECT_EQ(tied.parameters(), 7904 - 1600);
}

namespace {
ModelConfig small_mla() {
  ModelConfig c;
  c.name = "hand-mla";
  c.architecture = "deepseek_v3";
  c.hidden_size = 32;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 2;
  c.q_lora_rank = 16;
  c.kv_lora_rank = 8;
  c.qk_nope_head_dim = 4;
  c.qk_rope_head_dim = 2;
  c.v_head_dim = 4;
  c.intermediate_size = 64;
  c.moe_intermediate_size = 8;
  c.n_routed_experts = 4;
  c.n_shared_experts = 1;
  c.num_experts_per_tok = 2;
  c.first_k_dense_replace = 1;
  c.vocab_size = 50;
  c.num_nextn_predict_layers = 1;
  return c;
}
}  // namespace

TEST(InventoryHand, DeepSeekMlaMoeWithAndWithoutMtp) {
  const auto c = small_mla();
  const auto inv = Inventory::build(c);
  // attention per layer: q_a 16*32=512, q_a_ln 16, q_b 2*(4+2)*16=192, kv_a (8+2)*32=320,
  // kv_a_ln 8, kv_b 2*(4+4)*8=128, o 32*(2*4)=256 -> 1432; + 2 layernorms 64 -> 1496.
  // layer 0 dense: 3*64*32 = 6144 -> 7640.
  // layer 1 MoE: router 4*32=128 + bias 4, experts 4*3*8*32=3072, shared 3*8*32=768 -> 3972 -> 5468.
  // globals: embedding 50*32=1600, norm 32, lm_head 1600 -> 3232.   total 7640+5468+3232 = 16340.
  EXPECT_EQ(inv.parameters(), 16340);
  // active: 2 of 4 experts of 768 each -> 16340 - 2*768 = 14804.
  EXPECT_EQ(inv.active_parameters(), 14804);
  EXPECT_EQ(inv.parameters(TensorClass::ExpertFFN), 3072);
  EXPECT_EQ(inv.parameters(TensorClass::SharedExpert), 768);
  EXPECT_EQ(inv.parameters(TensorClass::Router), 132);
  // tensors: embedding; layer 0: 7 attention-side + 2 layernorms + 3 MLP = 12; layer 1:
  // 9 + gate + bias + 4*3 experts + 3 shared = 26; norm, lm_head -> 41.
  EXPECT_EQ(inv.tensors().size(), 41u);
  EXPECT_EQ(inv.layer_count(), 2);

  EXPECT_EQ(get(inv, "model.layers.0.self_attn.q_a_proj.weight").role, ParallelRole::Replicated);
  EXPECT_EQ(get(inv, "model.layers.0.self_attn.kv_a_proj_with_mqa.weight").shape, (Shape{10, 32}));
  EXPECT_EQ(get(inv, "model.layers.0.self_attn.kv_a_proj_with_mqa.weight").role, ParallelRole::Replicated);
  EXPECT_EQ(get(inv, "model.layers.0.self_attn.q_b_proj.weight").role, ParallelRole::ColumnParallel);
  EXPECT_EQ(get(inv, "model.layers.0.self_attn.kv_b_proj.weight").shape, (Shape{16, 8}));
  EXPECT_EQ(get(inv, "model.layers.0.self_attn.kv_a_layernorm.weight").cls, TensorClass::Norm);
  const auto& bias = get(inv, "model.layers.1.mlp.gate.e_score_correction_bias");
  EXPECT_EQ(bias.dtype, DType::FP32);
  EXPECT_EQ(bias.cls, TensorClass::Router);
  const auto& e3 = get(inv, "model.layers.1.mlp.experts.3.gate_proj.weight");
  EXPECT_EQ(e3.expert, 3);
  EXPECT_EQ(e3.fused, FusedPart::Gate);
  EXPECT_EQ(e3.cls, TensorClass::ExpertFFN);
  EXPECT_EQ(get(inv, "model.layers.1.mlp.shared_experts.down_proj.weight").role, ParallelRole::RowParallel);
  EXPECT_EQ(inv.find("model.layers.2.eh_proj.weight"), nullptr);  // MTP left out by default

  // bytes: bf16 except the fp32 bias: (16340-4)*2 + 4*4 = 32688; fp8 override: 16336*1 + 16 = 16352.
  EXPECT_EQ(inv.bytes().value, 32688);
  InventoryOptions fp8;
  fp8.dtype = DType::FP8;
  EXPECT_EQ(Inventory::build(c, fp8).bytes().value, 16352);

  // MTP layer 2: embedding copy 1600, enorm + hnorm 64, eh_proj 32*64=2048, a MoE decoder layer
  // 1496+3972=5468, shared_head.norm 32, shared_head.head 1600 -> 10812.  16340+10812 = 27152.
  InventoryOptions mtp;
  mtp.include_mtp = true;
  const auto with = Inventory::build(c, mtp);
  EXPECT_EQ(with.parameters(), 27152);
  EXPECT_EQ(with.tensors().size(), 41u + 26u + 6u);
  EXPECT_EQ(with.layer_count(), 3);
  EXPECT_EQ(with.mtp_layers(), 1);
  const auto& eh = get(with, "model.layers.2.eh_proj.weight");
  EXPECT_EQ(eh.shape, (Shape{32, 64}));
  EXPECT_EQ(eh.layer, 2);
  EXPECT_TRUE(eh.mtp);
  EXPECT_EQ(get(with, "model.layers.2.shared_head.head.weight").cls, TensorClass::Head);
  EXPECT_EQ(get(with, "model.layers.2.embed_tokens.weight").pre_layers, false);
  // active with MTP: both MoE layers activate 2 of 4 experts -> 27152 - 2*1536 = 24080.
  EXPECT_EQ(with.active_parameters(), 24080);
}

TEST(InventoryHand, NemotronMambaAttentionLatentMoeMlp) {
  ModelConfig c;
  c.name = "hand-nemotron";
  c.architecture = "nemotron_h";
  c.hidden_size = 16;
  c.num_hidden_layers = 4;
  c.hybrid_override_pattern = "M*E-";
  c.num_attention_heads = 2;
  c.num_key_value_heads = 1;
  c.head_dim = 4;
  c.mamba_num_heads = 2;
  c.mamba_head_dim = 4;
  c.n_groups = 1;
  c.ssm_state_size = 4;
  c.conv_kernel = 3;
  c.n_routed_experts = 4;
  c.num_experts_per_tok = 2;
  c.moe_intermediate_size = 6;
  c.moe_latent_size = 8;
  c.n_shared_experts = 1;
  c.shared_expert_intermediate_size = 10;
  c.intermediate_size = 12;
  c.vocab_size = 20;
  c.num_nextn_predict_layers = 1;
  c.mtp_hybrid_override_pattern = "*E";
  const auto inv = Inventory::build(c);
  // Mamba (d = 2*4 = 8, gs = 1*4 = 4): in_proj (2*8+2*4+2)*16 = 26*16 = 416, conv1d (8+8)*1*3 = 48,
  // conv bias 16, A_log + D + dt_bias 6, norm 8, out_proj 16*8 = 128 -> 622; + layer norm 16 = 638.
  // attention: q 8*16=128, k 4*16=64, v 64, o 16*8=128 -> 384 + norm 16 = 400.
  // latent MoE: router 4*16=64 + bias 4, fc1_latent 8*16=128, fc2_latent 16*8=128,
  //   experts 4*(6*8 up + 8*6 down) = 384, shared 2*10*16 = 320 -> 1028 + norm 16 = 1044.
  // ReLU^2 MLP '-': up 12*16=192, down 192 -> 384 + norm 16 = 400.
  // globals: embeddings 20*16=320, norm_f 16, lm_head 320 -> 656.
  // total 638 + 400 + 1044 + 400 + 656 = 3138; active 3138 - 2*96 = 2946.
  EXPECT_EQ(inv.parameters(), 3138);
  EXPECT_EQ(inv.active_parameters(), 2946);
  EXPECT_EQ(inv.parameters(TensorClass::Mamba), 622);

  const auto& in = get(inv, "backbone.layers.0.mixer.in_proj.weight");
  EXPECT_EQ(in.shape, (Shape{26, 16}));
  EXPECT_EQ(in.column_parts, (Shape{8, 8, 4, 4, 2}));  // z, x, B, C, dt
  EXPECT_EQ(in.role, ParallelRole::ColumnParallel);
  const auto& conv = get(inv, "backbone.layers.0.mixer.conv1d.weight");
  EXPECT_EQ(conv.shape, (Shape{16, 1, 3}));
  EXPECT_EQ(conv.column_parts, (Shape{8, 4, 4}));  // x, B, C
  EXPECT_EQ(get(inv, "backbone.layers.0.mixer.conv1d.bias").column_parts, (Shape{8, 4, 4}));
  EXPECT_EQ(get(inv, "backbone.layers.0.mixer.A_log").role, ParallelRole::ColumnParallel);
  EXPECT_EQ(get(inv, "backbone.layers.0.mixer.norm.weight").cls, TensorClass::Mamba);
  EXPECT_EQ(get(inv, "backbone.layers.0.mixer.out_proj.weight").role, ParallelRole::RowParallel);
  EXPECT_EQ(get(inv, "backbone.layers.0.norm.weight").cls, TensorClass::Norm);
  EXPECT_EQ(get(inv, "backbone.layers.1.mixer.q_proj.weight").fused, FusedPart::Q);
  EXPECT_EQ(get(inv, "backbone.layers.2.mixer.experts.1.up_proj.weight").shape, (Shape{6, 8}));
  EXPECT_EQ(get(inv, "backbone.layers.2.mixer.experts.1.up_proj.weight").fused, FusedPart::Up);
  EXPECT_EQ(inv.find("backbone.layers.2.mixer.experts.1.gate_proj.weight"), nullptr);  // ReLU^2: no gate
  const auto& fc1 = get(inv, "backbone.layers.2.mixer.fc1_latent_proj.weight");
  EXPECT_EQ(fc1.role, ParallelRole::Replicated);
  EXPECT_EQ(fc1.cls, TensorClass::DenseFFN);
  EXPECT_EQ(fc1.expert, -1);
  EXPECT_EQ(get(inv, "backbone.layers.2.mixer.shared_experts.up_proj.weight").shape, (Shape{10, 16}));
  EXPECT_EQ(get(inv, "backbone.layers.3.mixer.up_proj.weight").cls, TensorClass::DenseFFN);

  // MTP step "*E": mtp.layers.0 = enorm + hnorm 32, eh_proj 16*32 = 512, norm 16, attention 384 -> 944;
  // mtp.layers.1 = norm 16 + latent MoE 1028 + final_layernorm 16 -> 1060.  3138 + 2004 = 5142.
  InventoryOptions mtp;
  mtp.include_mtp = true;
  const auto with = Inventory::build(c, mtp);
  EXPECT_EQ(with.parameters(), 5142);
  EXPECT_EQ(with.layer_count(), 6);
  EXPECT_EQ(get(with, "mtp.layers.0.eh_proj.weight").layer, 4);
  EXPECT_EQ(get(with, "mtp.layers.1.final_layernorm.weight").layer, 5);
  EXPECT_EQ(get(with, "mtp.layers.1.mixer.experts.0.down_proj.weight").expert, 0);
}

// ---------------------------------------------------------------- published totals (models.md)

TEST(InventoryModels, DeepSeekV3) {
  const auto inv = load("deepseek-v3");
  expect_within_0_1_percent(static_cast<double>(inv.parameters()), 671.03e9);
  EXPECT_EQ(inv.parameters(), 671'026'419'200);  // recomputed from the config, see models.md
  EXPECT_EQ(inv.layer_count(), 61);
  // Shares: routed experts 97.4 %, all FFN 98.0 %, attention 1.7 %, embeddings 0.3 % (to the digit).
  EXPECT_NEAR(share(inv, TensorClass::ExpertFFN), 0.974, 0.0005);
  EXPECT_NEAR(share(inv, TensorClass::ExpertFFN) + share(inv, TensorClass::SharedExpert) +
                  share(inv, TensorClass::DenseFFN),
              0.980, 0.0005);
  EXPECT_NEAR(share(inv, TensorClass::Attention), 0.017, 0.0005);
  EXPECT_NEAR(share(inv, TensorClass::Embedding) + share(inv, TensorClass::Head), 0.003, 0.0005);
  // Active: 37 B per token ("671B total, 37B activated").
  EXPECT_NEAR(static_cast<double>(inv.active_parameters()) / 1e9, 37.55, 0.01);
  // Tensors without MTP: 46 183 checkpoint weights - 788 of layer 61 (782 of a MoE layer + enorm,
  // hnorm, eh_proj, embed_tokens, shared_head.norm, shared_head.head).
  EXPECT_EQ(inv.tensors().size(), 46183u - 788u);
  EXPECT_EQ(inv.bytes().value, (inv.parameters() - 58 * 256) * 2 + 58 * 256 * 4);  // fp32 router bias
}

TEST(InventoryModels, DeepSeekV3WithMtp) {
  const auto base = load("deepseek-v3");
  const auto inv = load("deepseek-v3", true);
  // The checkpoint holds 46 183 weights (plus 45 808 FP8 scales), MTP layer included.
  EXPECT_EQ(inv.tensors().size(), 46183u);
  EXPECT_EQ(inv.layer_count(), 62);
  // The MTP layer's own weights are +11.6 B; its copies of the embedding and head (2 x 129280 x 7168)
  // come on top, giving the 684.5 B (published "685 B") of the Hugging Face checkpoint.
  std::int64_t own = 0;
  for (const auto& t : inv.tensors())
    if (t.mtp && t.cls != TensorClass::Embedding && t.cls != TensorClass::Head) own += t.elements();
  expect_within_0_1_percent(static_cast<double>(own), 11.6e9);
  EXPECT_EQ(inv.parameters() - base.parameters(), own + 2 * 129280LL * 7168);
  expect_within_0_1_percent(static_cast<double>(inv.parameters()), 684.49e9);
  EXPECT_EQ(get(inv, "model.layers.61.mlp.experts.255.down_proj.weight").layer, 61);
}

TEST(InventoryModels, KimiK2) {
  const auto inv = load("kimi-k2");
  expect_within_0_1_percent(static_cast<double>(inv.parameters()), 1026.4e9);
  EXPECT_NEAR(share(inv, TensorClass::ExpertFFN), 0.989, 0.0005);
  EXPECT_NEAR(share(inv, TensorClass::ExpertFFN) + share(inv, TensorClass::SharedExpert) +
                  share(inv, TensorClass::DenseFFN),
              0.992, 0.0005);
  EXPECT_EQ(get(inv, "model.layers.5.self_attn.q_b_proj.weight").shape, (Shape{12288, 1536}));
  EXPECT_EQ(get(inv, "model.layers.5.self_attn.kv_b_proj.weight").shape, (Shape{16384, 512}));
  EXPECT_EQ(get(inv, "model.layers.5.self_attn.o_proj.weight").shape, (Shape{7168, 8192}));
  EXPECT_EQ(inv.find("model.layers.1.mlp.gate_proj.weight"), nullptr);  // only layer 0 is dense
  EXPECT_NE(inv.find("model.layers.0.mlp.gate_proj.weight"), nullptr);
}

TEST(InventoryModels, Qwen3_235B_A22B) {
  const auto inv = load("qwen3-235b-a22b");
  expect_within_0_1_percent(static_cast<double>(inv.parameters()), 235.09e9);
  EXPECT_EQ(inv.tensors().size(), 36945u);
  // routed experts 94 * 128 * 3 * 1536 * 4096 = 226.99 B of 235.09 B = 96.55 %, published 96.6 %.
  EXPECT_EQ(inv.parameters(TensorClass::ExpertFFN), 94LL * 128 * 3 * 1536 * 4096);
  EXPECT_NEAR(share(inv, TensorClass::ExpertFFN), 0.966, 0.0006);
  // "A22B": 22.19 B active.
  EXPECT_NEAR(static_cast<double>(inv.active_parameters()) / 1e9, 22.19, 0.01);
  EXPECT_EQ(get(inv, "model.layers.0.self_attn.k_proj.weight").shape, (Shape{512, 4096}));
  EXPECT_EQ(get(inv, "model.layers.93.mlp.gate.weight").shape, (Shape{128, 4096}));
}

TEST(InventoryModels, Qwen3Dense) {
  // Published to two or three digits: 0.60 B, 8.19 B, 32.76 B. The exact counts follow from
  // L*(attention + qk norms + 2 norms + 3*I*H) + V*H*(tied ? 1 : 2) + H.
  const auto small = load("qwen3-0.6b");
  EXPECT_EQ(small.parameters(), 28LL * (2 * 2048 * 1024 + 2 * 1024 * 1024 + 256 + 2048 + 3 * 3072 * 1024) +
                                    151936LL * 1024 + 1024);  // 596 049 920
  EXPECT_NEAR(static_cast<double>(small.parameters()) / 1e9, 0.60, 0.005);
  EXPECT_EQ(small.find("lm_head.weight"), nullptr);  // tied
  expect_within_0_1_percent(static_cast<double>(load("qwen3-8b").parameters()), 8.19e9);
  expect_within_0_1_percent(static_cast<double>(load("qwen3-32b").parameters()), 32.76e9);
}

TEST(InventoryModels, Nemotron3Nano) {
  const auto inv = load("nemotron3-nano");
  expect_within_0_1_percent(static_cast<double>(inv.parameters()), 31.6e9);
  // tensors: 23 Mamba layers x 9 (norm, in_proj, conv w, conv b, A_log, D, dt_bias, mixer norm,
  // out_proj) + 6 attention x 5 + 23 MoE x (norm, gate, bias, 128*2 experts, 2 shared = 261) + 3.
  EXPECT_EQ(inv.tensors().size(), 23u * 9 + 6 * 5 + 23 * 261 + 3);
  EXPECT_GE(share(inv, TensorClass::Mamba), 0.028);
  EXPECT_LE(share(inv, TensorClass::Mamba), 0.037);
  EXPECT_EQ(get(inv, "backbone.layers.0.mixer.in_proj.weight").shape, (Shape{2 * 4096 + 2 * 1024 + 64, 2688}));
}

TEST(InventoryModels, Nemotron3Super) {
  const auto inv = load("nemotron3-super");
  expect_within_0_1_percent(static_cast<double>(inv.parameters()), 120.7e9);
  EXPECT_GE(share(inv, TensorClass::Mamba), 0.028);
  EXPECT_LE(share(inv, TensorClass::Mamba), 0.037);
  EXPECT_EQ(get(inv, "backbone.layers.1.mixer.experts.511.up_proj.weight").shape, (Shape{2688, 1024}));
  EXPECT_EQ(get(inv, "backbone.layers.1.mixer.fc2_latent_proj.weight").shape, (Shape{4096, 1024}));
  const auto with = load("nemotron3-super", true);
  EXPECT_EQ(with.layer_count(), 90);
  EXPECT_GT(with.parameters(), inv.parameters());
}

TEST(InventoryModels, Nemotron3Ultra) {
  const auto inv = load("nemotron3-ultra");
  expect_within_0_1_percent(static_cast<double>(inv.parameters()), 549.3e9);
  EXPECT_GE(share(inv, TensorClass::Mamba), 0.028);
  EXPECT_LE(share(inv, TensorClass::Mamba), 0.037);
  // Ultra's Mamba in_proj: [2*d_inner + 2*groups*state + heads, hidden] = [35072, 8192].
  const auto& in = get(inv, "backbone.layers.0.mixer.in_proj.weight");
  EXPECT_EQ(in.shape, (Shape{35072, 8192}));
  EXPECT_EQ(in.column_parts, (Shape{16384, 16384, 1024, 1024, 256}));
  std::map<char, int> kinds;
  for (const char k : inv.config().hybrid_override_pattern) ++kinds[k];
  EXPECT_EQ(kinds['M'], 48);
  EXPECT_EQ(kinds['E'], 48);
  EXPECT_EQ(kinds['*'], 12);
}

TEST(InventoryModels, KimiK3Synthetic) {
  const auto inv = load("kimi-k3-synthetic");
  EXPECT_TRUE(inv.config().synthetic);
  expect_within_0_1_percent(static_cast<double>(inv.parameters()), 2.8e12);
  expect_within_0_1_percent(static_cast<double>(inv.bytes().value), 5.6e12);  // 5.6 TB in BF16
}

TEST(InventoryModels, Qwen38Synthetic) {
  const auto inv = load("qwen3.8-synthetic");
  EXPECT_TRUE(inv.config().synthetic);
  expect_within_0_1_percent(static_cast<double>(inv.parameters()), 2.4e12);
  expect_within_0_1_percent(static_cast<double>(inv.active_parameters()), 95e9);
  expect_within_0_1_percent(static_cast<double>(inv.bytes().value), 4.8e12);
}

// ---------------------------------------------------------------- properties of every shipped model

TEST(InventoryProperties, EveryTensorOfEveryModelIsWellFormed) {
  int models = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::path(RESHARD_SOURCE_DIR) / "models")) {
    if (entry.path().extension() != ".yaml") continue;
    ++models;
    for (const bool mtp : {false, true}) {
      InventoryOptions o;
      o.include_mtp = mtp;
      const auto inv = Inventory::load(entry.path(), o);
      SCOPED_TRACE(entry.path().filename().string() + (mtp ? " with MTP" : ""));
      std::set<std::string> names;
      std::int64_t params = 0;
      std::int64_t class_sum = 0;
      for (std::size_t i = 0; i < inv.tensors().size(); ++i) {
        const auto& t = inv.tensors()[i];
        ASSERT_EQ(t.id, static_cast<std::int32_t>(i));
        ASSERT_TRUE(names.insert(t.name).second) << "duplicate " << t.name;
        ASSERT_EQ(inv.find(t.name), &t);
        ASSERT_FALSE(t.shape.empty());
        for (const auto d : t.shape) ASSERT_GT(d, 0) << t.name;
        ASSERT_GE(t.layer, -1);
        ASSERT_LT(t.layer, inv.layer_count());
        ASSERT_EQ(t.mtp, t.layer >= inv.decoder_layers()) << t.name;
        if (t.pre_layers) {
          ASSERT_EQ(t.layer, -1);
        }
        // Experts belong to a layer, and are exactly the expert_ffn tensors.
        ASSERT_EQ(t.expert >= 0, t.cls == TensorClass::ExpertFFN) << t.name;
        if (t.expert >= 0) {
          ASSERT_LT(t.expert, inv.config().n_routed_experts);
        }
        // Row-parallel and column-parallel weights are matrices (conv1d is [channels, 1, kernel]).
        if (t.role == ParallelRole::RowParallel) {
          ASSERT_EQ(t.shape.size(), 2u) << t.name;
        }
        if (t.fused != FusedPart::None) {
          ASSERT_EQ(t.role, ParallelRole::ColumnParallel) << t.name;
        }
        if (t.cls == TensorClass::Norm || t.cls == TensorClass::Router) {
          ASSERT_EQ(t.role, ParallelRole::Replicated);
        }
        if (t.cls == TensorClass::Embedding || t.cls == TensorClass::Head) {
          ASSERT_EQ(t.role, ParallelRole::VocabParallel);
        }
        if (!t.column_parts.empty()) {
          std::int64_t sum = 0;
          for (const auto p : t.column_parts) sum += p;
          ASSERT_EQ(sum, t.shape[0]) << t.name;
        }
        ASSERT_EQ(t.dtype == DType::FP32, t.name.ends_with("e_score_correction_bias")) << t.name;
        params += t.elements();
      }
      for (int c = 0; c < kTensorClassCount; ++c) class_sum += inv.parameters(static_cast<TensorClass>(c));
      EXPECT_EQ(params, inv.parameters());
      EXPECT_EQ(class_sum, inv.parameters());
      EXPECT_LE(inv.active_parameters(), inv.parameters());
      EXPECT_EQ(inv.active_parameters() == inv.parameters(), inv.config().n_routed_experts == 0);
      EXPECT_EQ(inv.find("lm_head.weight") == nullptr, inv.config().tie_word_embeddings);
    }
  }
  EXPECT_GE(models, 11);
}

// ---------------------------------------------------------------- bad input

namespace {
const char* kGood =
    "architecture: qwen3\n"      // 1
    "hidden_size: 16\n"          // 2
    "num_hidden_layers: 2\n"     // 3
    "num_attention_heads: 4\n"   // 4
    "num_key_value_heads: 2\n"   // 5
    "head_dim: 4\n"              // 6
    "intermediate_size: 32\n"    // 7
    "vocab_size: 100\n";         // 8

ConfigError parse_error(const std::string& text) {
  try {
    (void)Inventory::parse(text, "bad.yaml");
  } catch (const ConfigError& e) {
    return e;
  }
  ADD_FAILURE() << "expected a ConfigError for:\n" << text;
  return ConfigError("", 0, "", "");
}

std::string replace(std::string s, const std::string& from, const std::string& to) {
  const auto at = s.find(from);
  if (at == std::string::npos) throw std::runtime_error("no " + from);
  return s.replace(at, from.size(), to);
}
}  // namespace

TEST(InventoryErrors, GoodTextParsesAndNamesFromTheFile) {
  const auto inv = Inventory::parse(kGood, "hand.yaml");
  EXPECT_EQ(inv.parameters(), 7904);  // the same config as InventoryHand.Qwen3DenseEveryCount
  EXPECT_EQ(inv.config().name, "hand");
}

TEST(InventoryErrors, MissingRequiredField) {
  const auto e = parse_error(replace(kGood, "head_dim: 4\n", ""));
  EXPECT_EQ(e.file(), "bad.yaml");
  EXPECT_EQ(e.key(), "head_dim");
  EXPECT_EQ(e.line(), 1);  // reported at the `architecture` line that requires it
  EXPECT_NE(std::string(e.what()).find("missing"), std::string::npos);
  EXPECT_NE(std::string(e.what()).find("qwen3"), std::string::npos);
  EXPECT_EQ(parse_error(replace(kGood, "architecture: qwen3\n", "")).key(), "architecture");
}

TEST(InventoryErrors, UnknownKeyIncludingAnotherArchitecturesField) {
  auto e = parse_error(std::string(kGood) + "colour: red\n");
  EXPECT_EQ(e.key(), "colour");
  EXPECT_EQ(e.line(), 9);
  e = parse_error(replace(kGood, "head_dim: 4\n", "head_dim: 4\nkv_lora_rank: 8\n"));  // MLA field in qwen3
  EXPECT_EQ(e.key(), "kv_lora_rank");
  EXPECT_EQ(e.line(), 7);
}

TEST(InventoryErrors, NonPositiveSizes) {
  auto e = parse_error(replace(kGood, "hidden_size: 16", "hidden_size: 0"));
  EXPECT_EQ(e.key(), "hidden_size");
  EXPECT_EQ(e.line(), 2);
  e = parse_error(replace(kGood, "intermediate_size: 32", "intermediate_size: -32"));
  EXPECT_EQ(e.key(), "intermediate_size");
  EXPECT_EQ(e.line(), 7);
  e = parse_error(replace(kGood, "vocab_size: 100", "vocab_size: many"));
  EXPECT_EQ(e.key(), "vocab_size");
  EXPECT_EQ(e.line(), 8);
}

TEST(InventoryErrors, HybridPatternLengthAndKinds) {
  const std::string nemotron =
      "architecture: nemotron_h\n"          // 1
      "hidden_size: 16\n"                   // 2
      "num_hidden_layers: 3\n"              // 3
      "hybrid_override_pattern: \"M*\"\n"   // 4
      "num_attention_heads: 2\n"            // 5
      "num_key_value_heads: 1\n"            // 6
      "head_dim: 4\n"                       // 7
      "mamba_num_heads: 2\n"                // 8
      "mamba_head_dim: 4\n"                 // 9
      "n_groups: 1\n"                       // 10
      "ssm_state_size: 4\n"                 // 11
      "conv_kernel: 3\n"                    // 12
      "vocab_size: 20\n";                   // 13
  auto e = parse_error(nemotron);
  EXPECT_EQ(e.key(), "hybrid_override_pattern");
  EXPECT_EQ(e.line(), 4);
  EXPECT_NE(std::string(e.what()).find("num_hidden_layers is 3"), std::string::npos);
  e = parse_error(replace(nemotron, "\"M*\"", "\"M*X\""));
  EXPECT_EQ(e.key(), "hybrid_override_pattern");
  // Valid length, but 'E' needs the MoE fields.
  e = parse_error(replace(nemotron, "\"M*\"", "\"M*E\""));
  EXPECT_EQ(e.key(), "n_routed_experts");
  EXPECT_NE(std::string(e.what()).find("'E'"), std::string::npos);
  // A Mamba layer without its sizes.
  e = parse_error(replace(replace(nemotron, "\"M*\"", "\"M**\""), "n_groups: 1\n", ""));
  EXPECT_EQ(e.key(), "n_groups");
  EXPECT_EQ(Inventory::parse(replace(nemotron, "\"M*\"", "\"M**\""), "ok.yaml").layer_count(), 3);
}

TEST(InventoryErrors, UnknownArchitectureAndDtype) {
  auto e = parse_error(replace(kGood, "qwen3", "mistral"));
  EXPECT_EQ(e.key(), "architecture");
  EXPECT_EQ(e.line(), 1);
  e = parse_error(std::string(kGood) + "dtype: int4\n");
  EXPECT_EQ(e.key(), "dtype");
  EXPECT_EQ(e.line(), 9);
  e = parse_error(replace(kGood, "num_key_value_heads: 2", "num_key_value_heads: 3"));
  EXPECT_EQ(e.key(), "num_key_value_heads");
  EXPECT_THROW(Inventory::load("/nonexistent/model.yaml"), ConfigError);
}

// ---------------------------------------------------------------- the command

namespace {
struct Run {
  int status;
  std::string out;
};
Run run(const std::string& args) {
  const std::string cmd = std::string(RESHARD_BINARY) + " " + args + " 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
  std::string out;
  std::array<char, 65536> buf{};
  std::size_t n = 0;
  while ((n = fread(buf.data(), 1, buf.size(), pipe.get())) > 0) out.append(buf.data(), n);
  const int status = pclose(pipe.release());
  return {WEXITSTATUS(status), out};
}
}  // namespace

TEST(ModelCommand, JsonMatchesTheLibrary) {
  const auto file = model_file("qwen3-8b").string();
  const auto r = run("model " + file + " --json");
  ASSERT_EQ(r.status, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  const auto inv = Inventory::load(file);
  EXPECT_EQ(j.at("parameters").get<std::int64_t>(), inv.parameters());
  EXPECT_EQ(j.at("bytes").get<std::int64_t>(), inv.bytes().value);
  EXPECT_EQ(j.at("active_parameters").get<std::int64_t>(), inv.active_parameters());
  ASSERT_EQ(j.at("tensors").size(), inv.tensors().size());
  const auto& t0 = j.at("tensors").at(0);
  EXPECT_EQ(t0.at("name"), "model.embed_tokens.weight");
  EXPECT_EQ(t0.at("shape"), (nlohmann::json{151936, 4096}));
  EXPECT_EQ(t0.at("dtype"), "bf16");
  EXPECT_EQ(t0.at("class"), "embedding");
  EXPECT_EQ(j.at("by_class").at("dense_ffn").at("parameters").get<std::int64_t>(),
            inv.parameters(TensorClass::DenseFFN));
}

TEST(ModelCommand, DtypeAndMtpOptionsAndReadableTable) {
  const auto file = model_file("deepseek-v3").string();
  auto j = nlohmann::json::parse(run("model " + file + " --json --dtype fp8 --mtp").out);
  EXPECT_EQ(j.at("tensors").size(), 46183u);
  // fp8: one byte per weight except 59 MoE layers' fp32 router biases (256 x 4 bytes each).
  const std::int64_t p = j.at("parameters");
  EXPECT_EQ(j.at("bytes").get<std::int64_t>(), (p - 59 * 256) + 59 * 256 * 4);
  const auto r = run("model " + file);
  ASSERT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("671.03 B"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("expert_ffn"), std::string::npos);
  EXPECT_NE(r.out.find("97.45 %"), std::string::npos);
}

TEST(ModelCommand, BadFileIsOneErrorWithExitCode2) {
  const auto r = run("model /nonexistent/model.yaml");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("reshard: error: /nonexistent/model.yaml"), std::string::npos) << r.out;
  EXPECT_EQ(run("model " + model_file("qwen3-8b").string() + " --dtype int4").status, 2);
}

// ---- Hugging Face config.json -------------------------------------------------------------------

namespace {

std::filesystem::path hf_folder(const std::string& name) {
  return std::filesystem::path(RESHARD_SOURCE_DIR) / "models" / "hf" / name;
}

// kGood as a config.json: the same model (7904 parameters) plus keys reshard does not use.
const char* kHfGood = R"({
  "architectures": ["Qwen3ForCausalLM"],
  "attention_bias": false,
  "head_dim": 4,
  "hidden_size": 16,
  "intermediate_size": 32,
  "model_type": "qwen3",
  "num_attention_heads": 4,
  "num_hidden_layers": 2,
  "num_key_value_heads": 2,
  "rope_scaling": null,
  "rope_theta": 1000000,
  "torch_dtype": "bfloat16",
  "vocab_size": 100
})";

ConfigError hf_error(const std::string& text) {
  try {
    (void)Inventory::parse(text, "bad/config.json");
  } catch (const ConfigError& e) {
    return e;
  }
  ADD_FAILURE() << "expected a ConfigError for:\n" << text;
  return ConfigError("", 0, "", "");
}

}  // namespace

// The published config.json files (models/hf/NAME/config.json) give the inventory of
// models/NAME.yaml tensor by tensor (name, shape, dtype, class, role), so the same bytes and tensor
// counts, with and without the MTP layers; the folder reads the same as the file.
TEST(InventoryHuggingFace, PublishedConfigsGiveTheYamlInventories) {
  for (const std::string name : {"deepseek-v3", "kimi-k2", "qwen3-235b-a22b", "qwen3-8b", "nemotron3-nano"}) {
    for (const bool mtp : {false, true}) {
      SCOPED_TRACE(name + (mtp ? " with MTP" : ""));
      InventoryOptions o;
      o.include_mtp = mtp;
      const auto yaml = Inventory::load(model_file(name), o);
      const auto hf = Inventory::load(hf_folder(name) / "config.json", o);
      EXPECT_EQ(hf.config().name, name);
      EXPECT_EQ(hf.config().architecture, yaml.config().architecture);
      EXPECT_EQ(hf.parameters(), yaml.parameters());
      EXPECT_EQ(hf.bytes(), yaml.bytes());
      EXPECT_EQ(hf.active_parameters(), yaml.active_parameters());
      ASSERT_EQ(hf.tensors().size(), yaml.tensors().size());
      for (std::size_t i = 0; i < hf.tensors().size(); ++i) {
        const auto& a = hf.tensors()[i];
        const auto& b = yaml.tensors()[i];
        ASSERT_EQ(a.name, b.name);
        ASSERT_EQ(a.shape, b.shape) << a.name;
        ASSERT_EQ(a.dtype, b.dtype) << a.name;
        ASSERT_EQ(a.cls, b.cls) << a.name;
        ASSERT_EQ(a.role, b.role) << a.name;
      }
      const auto folder = Inventory::load(hf_folder(name), o);
      EXPECT_EQ(folder.bytes(), hf.bytes());
      EXPECT_EQ(folder.tensors().size(), hf.tensors().size());
      EXPECT_TRUE(yaml.config().ignored_keys.empty());
    }
  }
  // Kimi K2 says model_type kimi_k2: the DeepSeek-V3 architecture, 1026.4 B as published.
  const auto k2 = Inventory::load(hf_folder("kimi-k2"));
  EXPECT_EQ(k2.config().architecture, "deepseek_v3");
  expect_within_0_1_percent(static_cast<double>(k2.parameters()), 1026.4e9);
}

TEST(InventoryHuggingFace, UnusedKeysAreListedNotRefused) {
  const auto inv = Inventory::parse(kHfGood, "hand/config.json");
  EXPECT_EQ(inv.parameters(), 7904);  // the same model as kGood
  EXPECT_EQ(inv.config().name, "config");
  EXPECT_EQ(inv.config().ignored_keys, (std::vector<std::string>{"attention_bias", "rope_scaling", "rope_theta"}));
  const auto v3 = Inventory::load(hf_folder("deepseek-v3")).config().ignored_keys;
  for (const char* used : {"hidden_size", "model_type", "torch_dtype", "n_routed_experts", "q_lora_rank"})
    EXPECT_EQ(std::count(v3.begin(), v3.end(), used), 0) << used;
  for (const char* unused : {"quantization_config", "rope_scaling", "topk_group", "routed_scaling_factor"})
    EXPECT_EQ(std::count(v3.begin(), v3.end(), unused), 1) << unused;
  // architectures alone selects the architecture; torch_dtype (or dtype) sets the weights' dtype.
  const auto only_class = Inventory::parse(replace(kHfGood, "\"model_type\": \"qwen3\",", ""), "x.json");
  EXPECT_EQ(only_class.config().architecture, "qwen3");
  const auto fp32 = Inventory::parse(replace(kHfGood, "\"bfloat16\"", "\"float32\""), "x.json");
  EXPECT_EQ(fp32.bytes().value, 7904 * 4);
}

TEST(InventoryHuggingFace, BadConfigIsOneErrorNamingFileAndKey) {
  auto e = hf_error(replace(kHfGood, "\"hidden_size\": 16,", ""));
  EXPECT_EQ(e.file(), "bad/config.json");
  EXPECT_EQ(e.key(), "hidden_size");
  EXPECT_NE(std::string(e.what()).find("missing"), std::string::npos) << e.what();
  e = hf_error(replace(kHfGood, "\"head_dim\": 4,", ""));
  EXPECT_EQ(e.key(), "head_dim");
  e = hf_error(replace(replace(kHfGood, "\"qwen3\"", "\"mistral\""), "\"Qwen3ForCausalLM\"", "\"MistralForCausalLM\""));
  EXPECT_EQ(e.key(), "model_type");
  EXPECT_NE(std::string(e.what()).find("kimi_k2"), std::string::npos) << e.what();  // lists the known ones
  e = hf_error(replace(replace(kHfGood, "\"model_type\": \"qwen3\",", ""), "[\"Qwen3ForCausalLM\"],", "[],"));
  EXPECT_EQ(e.key(), "architectures");
  e = hf_error(replace(kHfGood, "\"attention_bias\": false", "\"attention_bias\": true"));
  EXPECT_EQ(e.key(), "attention_bias");
  EXPECT_NE(std::string(e.what()).find("not modelled"), std::string::npos) << e.what();
  e = hf_error(replace(kHfGood, "\"bfloat16\"", "\"int8\""));
  EXPECT_EQ(e.key(), "torch_dtype");
  e = hf_error(replace(kHfGood, "\"hidden_size\": 16", "\"hidden_size\": -16"));
  EXPECT_EQ(e.key(), "hidden_size");
  // A Qwen3-MoE config with dense layers among the MoE layers is refused, not misread.
  std::ifstream in(hf_folder("qwen3-235b-a22b") / "config.json");
  const std::string moe((std::istreambuf_iterator<char>(in)), {});
  e = hf_error(replace(moe, "\"mlp_only_layers\": []", "\"mlp_only_layers\": [0, 1]"));
  EXPECT_EQ(e.key(), "mlp_only_layers");
  e = hf_error(replace(moe, "\"decoder_sparse_step\": 1", "\"decoder_sparse_step\": 2"));
  EXPECT_EQ(e.key(), "decoder_sparse_step");
  // A folder without a config.json.
  try {
    (void)Inventory::load(std::filesystem::path(RESHARD_SOURCE_DIR) / "models");
    ADD_FAILURE();
  } catch (const ConfigError& err) {
    EXPECT_NE(std::string(err.what()).find("config.json"), std::string::npos) << err.what();
  }
}

TEST(ModelCommand, HuggingFaceFolderAndVerboseListsUnusedKeys) {
  const auto r = run("model " + hf_folder("qwen3-8b").string() + " --verbose");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("qwen3-8b"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("8.19 B"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("config.json keys not used"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rope_theta"), std::string::npos) << r.out;
  EXPECT_EQ(run("model " + hf_folder("qwen3-8b").string()).out.find("rope_theta"), std::string::npos);
}

// ---- The architectures of 2026's RL runs: hand-worked small configs ------------------------------

namespace {
Inventory hf(const std::string& json, bool mtp = false, bool vision = false) {
  InventoryOptions o;
  o.include_mtp = mtp;
  o.include_vision = vision;
  return Inventory::parse(json, "hand/config.json", o);
}
}  // namespace

TEST(InventoryHand, LlamaAndQwen2Biases) {
  // H 16, 4 heads of 4 (head_dim from hidden_size / heads), 2 KV heads, FFN 32, vocabulary 100.
  const std::string llama = R"({"model_type": "llama", "hidden_size": 16, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 32, "vocab_size": 100,
    "attention_bias": true, "mlp_bias": true})";
  const auto inv = hf(llama);
  // per layer: q 16*16 + 16, k 8*16 + 8, v 8*16 + 8, o 16*16 + 16 = 816; 2 norms 32;
  // gate/up/down 3*32*16 = 1536 + biases 32 + 32 + 16 = 1616 -> 2464, x2 = 4928;
  // globals: embedding 1600, lm_head 1600, norm 16 -> 8144.
  EXPECT_EQ(inv.parameters(), 8144);
  EXPECT_EQ(inv.config().head_dim, 4);
  EXPECT_EQ(get(inv, "model.layers.0.self_attn.k_proj.bias").fused, FusedPart::K);
  EXPECT_EQ(get(inv, "model.layers.0.self_attn.k_proj.bias").role, ParallelRole::ColumnParallel);
  EXPECT_EQ(get(inv, "model.layers.0.self_attn.o_proj.bias").role, ParallelRole::Replicated);
  EXPECT_EQ(get(inv, "model.layers.1.mlp.up_proj.bias").fused, FusedPart::Up);
  EXPECT_EQ(get(inv, "model.layers.1.mlp.down_proj.bias").shape, (Shape{16}));
  EXPECT_EQ(get(inv, "model.layers.1.mlp.down_proj.bias").role, ParallelRole::Replicated);
  // Without biases it is the Qwen3 hand model less its QK norms: 7904 - 2*8 = 7888.
  std::string plain = replace(replace(llama, "\"attention_bias\": true", "\"attention_bias\": false"),
                              "\"mlp_bias\": true", "\"mlp_bias\": false");
  EXPECT_EQ(hf(plain).parameters(), 7888);
  // Qwen2: q/k/v biases always (16 + 8 + 8 per layer), no o or MLP bias: 7888 + 64 = 7952.
  const auto qwen2 = hf(replace(replace(plain, "\"llama\"", "\"qwen2\""), ", \"mlp_bias\": false", ""));
  EXPECT_EQ(qwen2.parameters(), 7952);
  EXPECT_NE(qwen2.find("model.layers.1.self_attn.v_proj.bias"), nullptr);
  EXPECT_EQ(qwen2.find("model.layers.1.self_attn.o_proj.bias"), nullptr);
  // mlp_bias is Llama's: refused for Qwen2, whose MLP has none.
  EXPECT_EQ(hf_error(replace(llama, "\"llama\"", "\"qwen2\"")).key(), "mlp_bias");
}

TEST(InventoryHand, Glm4MoeBiasesQkNormsSharedExpertsMtp) {
  const std::string glm = R"({"model_type": "glm4_moe", "hidden_size": 16, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8, "intermediate_size": 32,
    "moe_intermediate_size": 8, "n_routed_experts": 4, "n_shared_experts": 1, "num_experts_per_tok": 2,
    "first_k_dense_replace": 1, "vocab_size": 50, "attention_bias": true, "use_qk_norm": true,
    "num_nextn_predict_layers": 1, "partial_rotary_factor": 0.5})";
  const auto inv = hf(glm);
  // attention: q 32*16 + 32, k 16*16 + 16, v 16*16 + 16, o 16*32, q_norm + k_norm 16 = 1616; norms 32.
  // layer 0 dense: 1616 + 32 + 3*32*16 = 3184. layer 1 MoE: 1616 + 32 + router 4*16 + fp32 bias 4
  // + experts 4*3*8*16 = 1536 + shared 3*8*16 = 384 -> 3636. globals 800 + 800 + 16 -> 8436.
  EXPECT_EQ(inv.parameters(), 8436);
  EXPECT_EQ(inv.active_parameters(), 8436 - 2 * 384);  // 2 of 4 experts of 384
  EXPECT_EQ(inv.find("model.layers.0.self_attn.o_proj.bias"), nullptr);  // GLM: q/k/v biases only
  EXPECT_EQ(get(inv, "model.layers.1.mlp.gate.e_score_correction_bias").dtype, DType::FP32);
  EXPECT_EQ(get(inv, "model.layers.1.self_attn.q_norm.weight").shape, (Shape{8}));
  // MTP layer 2: embedding copy 800, enorm + hnorm 32, eh_proj 16*32 = 512, a MoE layer 3636,
  // shared_head.norm 16, shared_head.head 800 -> 5796.
  EXPECT_EQ(hf(glm, true).parameters(), 8436 + 5796);
  EXPECT_EQ(get(hf(glm, true), "model.layers.2.shared_head.head.weight").cls, TensorClass::Head);
}

TEST(InventoryHand, GptOssSinksBiasesAndStackedExperts) {
  const std::string oss = R"({"model_type": "gpt_oss", "hidden_size": 8, "num_hidden_layers": 1,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 4, "intermediate_size": 6,
    "num_local_experts": 3, "num_experts_per_tok": 2, "vocab_size": 20, "swiglu_limit": 7.0})";
  const auto inv = hf(oss);
  // attention: q 16*8 + 16, k 8*8 + 8, v 8*8 + 8, o 8*16 + 8, sinks 4 = 428; norms 16;
  // router 3*8 + 3 = 27; expert: gate_up 12*8 + 12, down 8*6 + 8 = 164, x3 = 492 -> 963;
  // globals 160 + 160 + 8 -> 1291; active 1291 - 164.
  EXPECT_EQ(inv.parameters(), 1291);
  EXPECT_EQ(inv.active_parameters(), 1291 - 164);
  const auto& sinks = get(inv, "model.layers.0.self_attn.sinks");
  EXPECT_EQ(sinks.shape, (Shape{4}));
  EXPECT_EQ(sinks.role, ParallelRole::ColumnParallel);
  const auto& gu = get(inv, "model.layers.0.mlp.experts.2.gate_up_proj");
  EXPECT_EQ(gu.shape, (Shape{12, 8}));  // [2I, H], gate and up interleaved by row
  EXPECT_EQ(gu.expert, 2);
  EXPECT_EQ(gu.tp_groups, 6);  // I (gate, up) pairs a split may not cut
  EXPECT_EQ(get(inv, "model.layers.0.mlp.experts.1.down_proj").shape, (Shape{8, 6}));
  EXPECT_EQ(get(inv, "model.layers.0.mlp.experts.1.down_proj_bias").role, ParallelRole::Replicated);
  EXPECT_EQ(get(inv, "model.layers.0.mlp.router.bias").dtype, DType::BF16);
  EXPECT_EQ(get(inv, "model.layers.0.self_attn.o_proj.bias").role, ParallelRole::Replicated);
  // gpt-oss takes head_dim from its config (2880 / 64 is not 64): a missing one is an error.
  EXPECT_EQ(hf_error(replace(oss, "\"head_dim\": 4,", "")).key(), "head_dim");
}

TEST(InventoryHand, Qwen3NextGatedDeltaNetAndGatedAttention) {
  // 4 layers, full attention every 2nd (L F L F); DeltaNet 2 key heads of 2, 4 value heads of 3.
  const std::string next = R"({"model_type": "qwen3_next", "hidden_size": 8, "num_hidden_layers": 4,
    "full_attention_interval": 2, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 4,
    "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 2,
    "linear_value_head_dim": 3, "linear_conv_kernel_dim": 3, "intermediate_size": 10,
    "moe_intermediate_size": 6, "num_experts": 4, "num_experts_per_tok": 2,
    "shared_expert_intermediate_size": 5, "vocab_size": 20, "decoder_sparse_step": 1, "mlp_only_layers": []})";
  const auto inv = hf(next);
  EXPECT_EQ(inv.config().layer_types, "LFLF");
  // DeltaNet (kd 4, vd 12): conv1d (8+12)*3 = 60, in_proj_qkvz (8+24)*8 = 256, in_proj_ba 8*8 = 64,
  // dt_bias 4, A_log 4, norm 3, out_proj 8*12 = 96 -> 487.
  // gated attention: q 2*4*2*8 = 128, k 32, v 32, o 8*8 = 64, QK norms 8 -> 264.
  // MoE: router 4*8 = 32, experts 4*3*6*8 = 576, shared 3*5*8 = 120, shared gate 8 -> 736; norms 16.
  // 2*(487+16+736) + 2*(264+16+736) = 4510; globals 160 + 160 + 8 -> 4838.
  EXPECT_EQ(inv.parameters(), 4838);
  EXPECT_EQ(inv.active_parameters(), 4838 - 4 * 2 * 144);  // per layer 2 idle experts of 144
  EXPECT_EQ(inv.parameters(TensorClass::LinearAttention), 2 * 487);
  const auto& qkvz = get(inv, "model.layers.0.linear_attn.in_proj_qkvz.weight");
  EXPECT_EQ(qkvz.shape, (Shape{32, 8}));
  EXPECT_EQ(qkvz.tp_groups, 2);         // per key-head group [q; k; v; z]: split by whole groups
  EXPECT_TRUE(qkvz.column_parts.empty());
  const auto& conv = get(inv, "model.layers.0.linear_attn.conv1d.weight");
  EXPECT_EQ(conv.shape, (Shape{20, 1, 3}));
  EXPECT_EQ(conv.column_parts, (Shape{4, 4, 12}));  // [q; k; v] channels
  EXPECT_EQ(get(inv, "model.layers.0.linear_attn.norm.weight").role, ParallelRole::Replicated);
  EXPECT_EQ(get(inv, "model.layers.1.self_attn.q_proj.weight").shape, (Shape{16, 8}));  // [q; gate] per head
  EXPECT_EQ(get(inv, "model.layers.3.mlp.shared_expert_gate.weight").shape, (Shape{1, 8}));
  EXPECT_EQ(get(inv, "model.layers.3.mlp.shared_expert.up_proj.weight").cls, TensorClass::SharedExpert);
  // No MTP key: vLLM's default of one MTP layer (qwen3_next_mtp): fc 8*16 = 128, two norms 16, a full
  // attention MoE layer 1016, norm 8 -> 1168.
  const auto with = hf(next, true);
  EXPECT_EQ(with.parameters(), 4838 + 1168);
  EXPECT_EQ(get(with, "mtp.layers.0.self_attn.q_proj.weight").layer, 4);
  EXPECT_EQ(get(with, "mtp.fc.weight").shape, (Shape{8, 16}));
  // layer_types wins over the interval, and must list every layer.
  const auto listed = hf(replace(next, "\"full_attention_interval\": 2,",
                                 "\"layer_types\": [\"full_attention\", \"linear_attention\", \"linear_attention\", "
                                 "\"full_attention\"],"));
  EXPECT_EQ(listed.config().layer_types, "FLLF");
  EXPECT_EQ(hf_error(replace(next, "\"full_attention_interval\": 2,", "\"layer_types\": [\"full_attention\"],")).key(),
            "layer_types");
  EXPECT_EQ(hf_error(replace(next, "\"full_attention_interval\": 2,", "")).key(), "layer_types");
}

TEST(InventoryHand, Qwen35TextConfigBesideAVisionTower) {
  const std::string q35 = R"({"model_type": "qwen3_5", "architectures": ["Qwen3_5ForConditionalGeneration"],
    "image_token_id": 7, "tie_word_embeddings": true,
    "text_config": {"model_type": "qwen3_5_text", "hidden_size": 8, "num_hidden_layers": 2,
      "layer_types": ["linear_attention", "full_attention"], "num_attention_heads": 2, "num_key_value_heads": 1,
      "head_dim": 4, "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 2,
      "linear_value_head_dim": 3, "linear_conv_kernel_dim": 3, "intermediate_size": 10, "vocab_size": 20,
      "attn_output_gate": true, "dtype": "bfloat16"},
    "vision_config": {"depth": 1, "hidden_size": 4, "intermediate_size": 6, "num_heads": 2, "patch_size": 2,
      "temporal_patch_size": 2, "in_channels": 3, "spatial_merge_size": 2, "out_hidden_size": 8,
      "num_position_embeddings": 5, "deepstack_visual_indexes": []}})";
  const auto inv = hf(q35);
  // DeltaNet with split projections: conv1d 60, in_proj_qkv (8+12)*8 = 160, in_proj_z 12*8 = 96,
  // in_proj_b 32, in_proj_a 32, dt_bias 4, A_log 4, norm 3, out_proj 96 -> 487; attention 264; dense
  // MLP 3*10*8 = 240; norms 16 -> (487+16+240) + (264+16+240) = 1263; embedding 160 (tied), norm 8.
  EXPECT_EQ(inv.parameters(), 1431);
  EXPECT_EQ(inv.config().architecture, "qwen3_5");
  EXPECT_FALSE(inv.includes_vision());
  EXPECT_EQ(inv.find(inv.config().head_name), nullptr);  // tied by the wrapper's tie_word_embeddings
  const auto& qkv = get(inv, "model.language_model.layers.0.linear_attn.in_proj_qkv.weight");
  EXPECT_EQ(qkv.column_parts, (Shape{4, 4, 12}));
  EXPECT_EQ(get(inv, "model.language_model.layers.0.linear_attn.in_proj_z.weight").shape, (Shape{12, 8}));
  EXPECT_NE(inv.find("model.language_model.embed_tokens.weight"), nullptr);
  // The vision tower, counted on request: patch_embed 4*3*2*2*2 + 4 = 100, pos_embed 5*4 = 20;
  // block: norms 16, qkv 12*4 + 12, proj 4*4 + 4, fc1 6*4 + 6, fc2 4*6 + 4 = 154; merger (4*2*2 = 16):
  // norm 8, fc1 16*16 + 16, fc2 8*16 + 8 = 416 -> 690.
  const auto with = hf(q35, false, true);
  EXPECT_EQ(with.parameters(), 1431 + 690);
  EXPECT_EQ(with.parameters(TensorClass::Vision), 690);
  EXPECT_EQ(get(with, "model.visual.blocks.0.attn.qkv.weight").column_parts, (Shape{4, 4, 4}));
  EXPECT_TRUE(get(with, "model.visual.pos_embed.weight").pre_layers);
  // Asking for a tower the config lacks, or a field the tower needs, is an error naming the key.
  try {
    (void)hf(replace(q35, "\"depth\": 1,", ""), false, true);
    ADD_FAILURE();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "vision_config.depth");
  }
  EXPECT_THROW((void)hf(kHfGood, false, true), ConfigError);
  // A wrapper without its text_config.
  EXPECT_EQ(hf_error(R"({"model_type": "qwen3_5", "tie_word_embeddings": false})").key(), "model_type");
}

TEST(InventoryHand, DeepSeekV32Indexer) {
  auto c = small_mla();
  c.architecture = "deepseek_v32";
  c.index_n_heads = 2;
  c.index_head_dim = 4;
  const auto inv = Inventory::build(c);
  // Per layer: wq_b 8*16 = 128, wk 4*32 = 128, k_norm weight + bias 8, weights_proj 2*32 = 64 -> 328;
  // the DeepSeek hand model is 16340, two layers -> 16996.
  EXPECT_EQ(inv.parameters(), 16340 + 2 * 328);
  const auto& wq = get(inv, "model.layers.1.self_attn.indexer.wq_b.weight");
  EXPECT_EQ(wq.shape, (Shape{8, 16}));
  EXPECT_EQ(wq.role, ParallelRole::Replicated);
  EXPECT_EQ(get(inv, "model.layers.0.self_attn.indexer.k_norm.bias").cls, TensorClass::Norm);
  c.index_head_dim = 0;
  EXPECT_THROW((void)Inventory::build(c), ConfigError);
}

// ---- The released configs against their published totals ---------------------------------------

namespace {
Inventory released(const std::string& name, bool mtp = false, bool vision = false) {
  InventoryOptions o;
  o.include_mtp = mtp;
  o.include_vision = vision;
  return Inventory::load(hf_folder(name), o);
}
// A published count given to `digits` decimals of a billion (7.61 B: 2): the exact count must round
// (or, where the publisher truncates, floor) to it.
void expect_published(std::int64_t got, double billions, int digits) {
  const double unit = std::pow(10.0, 9 - digits);
  const double g = static_cast<double>(got) / unit, p = billions * std::pow(10.0, digits);
  EXPECT_TRUE(std::llround(g) == std::llround(p) || static_cast<std::int64_t>(g) == std::llround(p))
      << got << " is not " << billions << " B to " << digits << " decimals";
}
std::int64_t embeddings(const Inventory& inv) {
  return inv.parameters(TensorClass::Embedding) + inv.parameters(TensorClass::Head);
}
}  // namespace

TEST(InventoryReleased, Qwen25_7B) {
  // Qwen/Qwen2.5-7B-Instruct model card: "Number of Parameters: 7.61B; Number of Paramaters
  // (Non-Embedding): 6.53B".
  const auto inv = released("qwen2.5-7b-instruct");
  EXPECT_EQ(inv.parameters(), 7'615'616'512);
  expect_published(inv.parameters(), 7.61, 2);
  expect_published(inv.parameters() - embeddings(inv), 6.53, 2);
  EXPECT_EQ(get(inv, "model.layers.27.self_attn.q_proj.bias").shape, (Shape{3584}));
}

TEST(InventoryReleased, Llama3) {
  // The Hugging Face pages of meta-llama/Llama-3.1-8B-Instruct and Llama-3.3-70B-Instruct: "Model
  // size 8.03B params", "70.6B params" (the safetensors total).
  const auto l8 = released("llama-3.1-8b-instruct");
  EXPECT_EQ(l8.parameters(), 8'030'261'248);
  expect_published(l8.parameters(), 8.03, 2);
  EXPECT_EQ(l8.config().head_dim, 128);  // hidden_size / heads: the config has no head_dim
  expect_published(released("llama-3.3-70b-instruct").parameters(), 70.6, 1);
}

TEST(InventoryReleased, Glm45Family) {
  // GLM-4.5 technical report (arXiv 2508.06471), table 1: GLM-4.5 355B total / 32B activated,
  // GLM-4.5-Air 106B / 12B. The report counts GLM-4.5 without its embedding and output head but
  // with its MTP layer (352.80 B + 3.99 B - 1.55 B = 355.24 B) and the activated parameters without
  // embedding and head; Air's 106 B is its total without MTP (106.85 B, floored). The Hugging Face
  // pages give the safetensors totals, MTP layer and its embedding / head copies included: 358B, 110B.
  const auto g = released("glm-4.5"), g_mtp = released("glm-4.5", true);
  EXPECT_EQ(g.parameters(), 352'797'829'024);
  expect_published(g_mtp.parameters(), 358, 0);
  std::int64_t mtp_copies = 0;
  for (const auto& t : g_mtp.tensors())
    if (t.mtp && (t.cls == TensorClass::Embedding || t.cls == TensorClass::Head)) mtp_copies += t.elements();
  expect_published(g_mtp.parameters() - mtp_copies - embeddings(g), 355, 0);
  expect_published(g.active_parameters() - embeddings(g), 32, 0);
  const auto air = released("glm-4.5-air");
  expect_published(air.parameters(), 106, 0);
  expect_published(air.active_parameters() - embeddings(air), 12, 0);
  expect_published(released("glm-4.5-air", true).parameters(), 110, 0);
  EXPECT_EQ(air.find("model.layers.0.self_attn.q_norm.weight"), nullptr);  // Air: use_qk_norm false
  // GLM-4.6 and GLM-4.7 keep GLM-4.5's weights (only the context length changes).
  for (const char* name : {"glm-4.6", "glm-4.7"}) EXPECT_EQ(released(name).parameters(), g.parameters()) << name;
}

TEST(InventoryReleased, GptOss) {
  // gpt-oss model card (OpenAI, 2025-08-05), table 1: gpt-oss-120b 116.83B total, 5.13B active;
  // gpt-oss-20b 20.91B, 3.61B. The card's active count leaves the unembedding out.
  const auto big = released("gpt-oss-120b"), small = released("gpt-oss-20b");
  EXPECT_EQ(big.parameters(), 116'829'156'672);
  expect_published(big.parameters(), 116.83, 2);
  expect_published(big.active_parameters() - big.parameters(TensorClass::Head), 5.13, 2);
  expect_published(small.parameters(), 20.91, 2);
  expect_published(small.active_parameters() - small.parameters(TensorClass::Head), 3.61, 2);
  // per layer: q/k/v/o weights and biases 8, sinks, 2 norms, router weight and bias, 128 x 4 expert
  // tensors -> 525; embedding, final norm, lm_head.
  EXPECT_EQ(big.tensors().size(), 36u * 525 + 3);
}

TEST(InventoryReleased, Qwen3Next) {
  // Qwen/Qwen3-Next-80B-A3B-Instruct model card: "80B in total and 3B activated"; the Hugging Face
  // page's safetensors total, MTP layer included: 81.3B.
  const auto inv = released("qwen3-next-80b-a3b-instruct");
  expect_published(inv.parameters(), 80, 0);
  expect_published(inv.active_parameters() - embeddings(inv), 3, 0);
  expect_published(released("qwen3-next-80b-a3b-instruct", true).parameters(), 81.3, 1);
  std::string every_fourth;
  for (int i = 0; i < 12; ++i) every_fourth += "LLLF";  // full_attention_interval 4
  EXPECT_EQ(inv.config().layer_types, every_fourth);
}

TEST(InventoryReleased, Qwen35) {
  // Model cards: Qwen3.5-397B-A17B "397B in total and 17B activated", Qwen3.5-35B-A3B 35B / 3B,
  // Qwen3.5-27B 27B; each count includes the vision encoder.
  const auto big = released("qwen3.5-397b-a17b", false, true);
  expect_published(big.parameters(), 397, 0);
  expect_published(big.active_parameters(), 17, 0);
  EXPECT_EQ(big.parameters(TensorClass::Vision), 456'010'480);
  expect_published(released("qwen3.5-35b-a3b", false, true).parameters(), 35, 0);
  expect_published(released("qwen3.5-27b", false, true).parameters(), 27, 0);
  const auto text = released("qwen3.5-397b-a17b");
  EXPECT_EQ(text.parameters(), big.parameters() - 456'010'480);
  EXPECT_NE(text.find("model.language_model.layers.59.mlp.experts.511.down_proj.weight"), nullptr);
  EXPECT_NE(text.find("lm_head.weight"), nullptr);
}

TEST(InventoryReleased, DeepSeekV32) {
  // deepseek-ai/DeepSeek-V3.2 on Hugging Face: 685B params (safetensors, MTP layer included). The
  // indexer adds 61 x 13 959 424 to DeepSeek-V3's 671.03 B.
  const auto v3 = load("deepseek-v3"), inv = released("deepseek-v3.2");
  EXPECT_EQ(inv.parameters() - v3.parameters(), 61LL * (64 * 128 * 1536 + 128 * 7168 + 2 * 128 + 64 * 7168));
  expect_published(released("deepseek-v3.2", true).parameters(), 685, 0);
}

TEST(InventoryReleased, KimiK25) {
  // moonshotai/Kimi-K2.5 model card: 1T total, 32B activated, a 400M MoonViT vision encoder. Its
  // text_config is Kimi K2's: the same weights under language_model.
  const auto inv = released("kimi-k2.5"), k2 = Inventory::load(hf_folder("kimi-k2"));
  EXPECT_EQ(inv.parameters(), k2.parameters());
  expect_published(inv.parameters(), 1000, -3);  // 1026.41 B: "1T"
  expect_published(inv.active_parameters(), 32, 0);
  EXPECT_NE(inv.find("language_model.model.layers.60.mlp.experts.383.up_proj.weight"), nullptr);
  EXPECT_NE(inv.find("language_model.lm_head.weight"), nullptr);
  try {
    (void)released("kimi-k2.5", false, true);
    ADD_FAILURE();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("MoonViT"), std::string::npos) << e.what();
  }
}

TEST(InventoryReleased, EveryReleasedConfigIsWellFormed) {
  int configs = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::path(RESHARD_SOURCE_DIR) / "models" / "hf")) {
    ++configs;
    for (const bool mtp : {false, true}) {
      SCOPED_TRACE(entry.path().filename().string() + (mtp ? " with MTP" : ""));
      InventoryOptions o;
      o.include_mtp = mtp;
      const auto inv = Inventory::load(entry.path(), o);
      EXPECT_TRUE(inv.config().warnings.empty()) << inv.config().warnings.front();
      std::int64_t params = 0;
      for (std::size_t i = 0; i < inv.tensors().size(); ++i) {
        const auto& t = inv.tensors()[i];
        ASSERT_EQ(inv.find(t.name), &t);
        ASSERT_EQ(t.expert >= 0, t.cls == TensorClass::ExpertFFN) << t.name;
        ASSERT_EQ(t.mtp, t.layer >= inv.decoder_layers()) << t.name;
        if (t.fused != FusedPart::None) {
          ASSERT_EQ(t.role, ParallelRole::ColumnParallel) << t.name;
        }
        if (t.cls == TensorClass::Norm || t.cls == TensorClass::Router) {
          ASSERT_EQ(t.role, ParallelRole::Replicated) << t.name;
        }
        if (!t.column_parts.empty()) {
          std::int64_t sum = 0;
          for (const auto p : t.column_parts) sum += p;
          ASSERT_EQ(sum, t.shape[0]) << t.name;
        }
        if (t.tp_groups > 0) {
          ASSERT_EQ((t.role == ParallelRole::RowParallel ? t.shape[1] : t.shape[0]) % t.tp_groups, 0) << t.name;
        }
        params += t.elements();
      }
      EXPECT_EQ(params, inv.parameters());
      EXPECT_EQ(inv.find(inv.config().head_name) == nullptr, inv.config().tie_word_embeddings);
      EXPECT_EQ(inv.mtp_layers() > 0, mtp && inv.config().num_nextn_predict_layers > 0);
    }
  }
  EXPECT_GE(configs, 22);
}

TEST(InventoryErrors, UnknownModelTypeListsEveryKnownOne) {
  auto e = hf_error(replace(replace(kHfGood, "\"qwen3\"", "\"mistral\""), "\"Qwen3ForCausalLM\"", "\"MistralForCausalLM\""));
  EXPECT_EQ(e.key(), "model_type");
  for (const char* known : {"qwen2", "llama", "glm4_moe", "gpt_oss", "qwen3_next", "qwen3_5", "qwen3_5_moe",
                            "deepseek_v32", "kimi_k25", "nemotron_h"})
    EXPECT_NE(std::string(e.what()).find(known), std::string::npos) << known << " in " << e.what();
}

// `reshard model` on the released config.json of each new architecture prints the library's count,
// which is the published figure its InventoryReleased test above cites (the card's total, to the
// digits published; the flags are those the publisher counts with).
TEST(ModelCommand, ReleasedConfigOfEachNewArchitectureGivesItsPublishedTotal) {
  struct Row {
    const char* folder;
    const char* flags;
    double billions;
    int digits;  // decimals of a billion: 2 for 7.61B, 0 for 106B, -3 for 1T
  };
  const Row rows[] = {
      {"qwen2.5-7b-instruct", "", 7.61, 2},           // qwen2: Qwen2.5-7B-Instruct model card
      {"llama-3.1-8b-instruct", "", 8.03, 2},         // llama: Hugging Face page, safetensors total
      {"glm-4.5-air", "", 106, 0},                    // glm4_moe: GLM-4.5 report (arXiv 2508.06471), table 1
      {"gpt-oss-20b", "", 20.91, 2},                  // gpt_oss: gpt-oss model card, table 1
      {"qwen3-next-80b-a3b-instruct", "", 80, 0},     // qwen3_next: model card
      {"qwen3.5-27b", " --vision", 27, 0},            // qwen3_5: model card, vision encoder included
      {"qwen3.5-35b-a3b", " --vision", 35, 0},        // qwen3_5_moe: model card, vision encoder included
      {"deepseek-v3.2", " --mtp", 685, 0},            // deepseek_v32: Hugging Face page, MTP layer included
      {"kimi-k2.5", "", 1000, -3},                    // kimi_k25: model card, 1T
  };
  for (const auto& row : rows) {
    SCOPED_TRACE(row.folder);
    const auto r = run("model " + hf_folder(row.folder).string() + row.flags + " --json");
    ASSERT_EQ(r.status, 0) << r.out;
    const std::int64_t printed = nlohmann::json::parse(r.out).at("parameters");
    InventoryOptions o;
    o.include_mtp = std::string(row.flags).find("--mtp") != std::string::npos;
    o.include_vision = std::string(row.flags).find("--vision") != std::string::npos;
    EXPECT_EQ(printed, Inventory::load(hf_folder(row.folder), o).parameters());
    expect_published(printed, row.billions, row.digits);
  }
}
