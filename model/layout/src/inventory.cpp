// Weight inventory: every tensor of an architecture, with its HF name, shape [out, in], dtype,
// class, tensor-parallel role, fusion part, layer and expert (see inventory.hpp for the parameter
// equations and docs/models.md for the tables and sources).
#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

#include "reshard/model/errors.hpp"
#include "reshard/model/inventory.hpp"
#include "reshard/model/lora.hpp"

#include "reshard/model/checked.hpp"

namespace reshard::model {

std::int64_t dtype_size(DType d) {
  switch (d) {
    case DType::BF16: return 2;
    case DType::FP16: return 2;
    case DType::FP32: return 4;
    case DType::FP8: return 1;
    case DType::E8M0: return 1;
    case DType::FP4x2: return 1;
  }
  return 2;
}

const char* to_string(DType d) {
  switch (d) {
    case DType::BF16: return "bf16";
    case DType::FP16: return "fp16";
    case DType::FP32: return "fp32";
    case DType::FP8: return "fp8";
    case DType::E8M0: return "e8m0";
    case DType::FP4x2: return "fp4x2";
  }
  return "?";
}

DType parse_dtype(const std::string& s) {
  if (s == "bf16" || s == "bfloat16") return DType::BF16;
  if (s == "fp16" || s == "float16") return DType::FP16;
  if (s == "fp32" || s == "float32") return DType::FP32;
  if (s == "fp8" || s == "fp8_e4m3" || s == "e4m3") return DType::FP8;
  throw std::invalid_argument("unknown dtype '" + s + "'; expected one of bf16, fp16, fp32, fp8");
}

const char* to_string(TensorClass c) {
  switch (c) {
    case TensorClass::Embedding: return "embedding";
    case TensorClass::Attention: return "attention";
    case TensorClass::DenseFFN: return "dense_ffn";
    case TensorClass::ExpertFFN: return "expert_ffn";
    case TensorClass::SharedExpert: return "shared_expert";
    case TensorClass::Router: return "router";
    case TensorClass::Norm: return "norm";
    case TensorClass::Mamba: return "mamba";
    case TensorClass::Head: return "head";
    case TensorClass::LinearAttention: return "linear_attention";
    case TensorClass::Vision: return "vision";
  }
  return "?";
}

std::optional<TensorClass> parse_tensor_class(const std::string& s) {
  for (int i = 0; i < kTensorClassCount; ++i) {
    const auto c = static_cast<TensorClass>(i);
    if (s == to_string(c)) return c;
  }
  return std::nullopt;
}

const char* to_string(ParallelRole r) {
  switch (r) {
    case ParallelRole::Replicated: return "replicated";
    case ParallelRole::ColumnParallel: return "column";
    case ParallelRole::RowParallel: return "row";
    case ParallelRole::VocabParallel: return "vocab";
  }
  return "?";
}

const char* to_string(FusedPart f) {
  switch (f) {
    case FusedPart::None: return "";
    case FusedPart::Q: return "q";
    case FusedPart::K: return "k";
    case FusedPart::V: return "v";
    case FusedPart::Gate: return "gate";
    case FusedPart::Up: return "up";
  }
  return "";
}

std::int64_t TensorInfo::elements() const {
  std::int64_t n = 1;
  for (const auto d : shape) n *= d;
  return n;
}

Bytes TensorInfo::bytes() const { return Bytes{elements() * dtype_size(dtype)}; }

Bytes Inventory::wire_bytes(const TensorInfo& t, std::int64_t elements) const {
  return delta_.encoded(elements, dtype_size(t.dtype), t.cls);
}

namespace {

using TC = TensorClass;
using PR = ParallelRole;
using FP = FusedPart;

// Appends tensors in model order. `dtype` is the weights' dtype (file or override); tensors that
// are fp32 by nature (router score-correction bias) pass their own.
class Builder {
 public:
  Builder(const ModelConfig& c, DType dtype, std::vector<TensorInfo>& out) : c_(c), dtype_(dtype), out_(out) {}

  TensorInfo& add(std::string name, std::vector<std::int64_t> shape, TC cls, PR role, std::int32_t layer,
                  FP fused = FP::None, std::int32_t expert = -1) {
    TensorInfo t;
    t.id = static_cast<std::int32_t>(out_.size());
    t.name = std::move(name);
    t.shape = std::move(shape);
    t.dtype = dtype_;
    t.cls = cls;
    t.role = role;
    t.fused = fused;
    t.layer = layer;
    t.expert = expert;
    t.mtp = mtp_;
    out_.push_back(std::move(t));
    return out_.back();
  }
  void norm(const std::string& name, std::int64_t n, std::int32_t layer) {
    add(name, {n}, TC::Norm, PR::Replicated, layer);
  }
  void set_mtp(bool m) { mtp_ = m; }

  // What a GQA attention block carries besides q/k/v/o (see ModelConfig and docs/models.md).
  //   q/k/v biases split as their rows: vLLM loads them into qkv_proj.bias by the same shard offsets
  //     as the weight rows (vllm/model_executor/layers/linear.py, QKVParallelLinear.weight_loader,
  //     replicating a KV head's bias with the head); Megatron-Core's linear_qkv is a
  //     ColumnParallelLinear whose bias splits with its output rows (megatron/core/tensor_parallel/
  //     layers.py, ColumnParallelLinear.__init__).
  //   o_proj bias whole on every TP rank: a RowParallelLinear's bias has the full output size and is
  //     added after the reduction (megatron/core/tensor_parallel/layers.py and vLLM's linear.py,
  //     RowParallelLinear.__init__ / forward).
  //   sinks split by heads: Megatron-Bridge maps them onto core_attention.softmax_offset
  //     (src/megatron/bridge/models/gpt_oss/gpt_oss_bridge.py, GPTOSSBridge.mapping_registry), which
  //     holds num_attention_heads / TP (megatron/core/transformer/dot_product_attention.py,
  //     DotProductAttention.__init__, softmax_type "learnable"); vLLM's OAIAttention.__init__ holds
  //     heads / TP and its loader narrows the checkpoint's sinks to the TP rank's heads
  //     (vllm/model_executor/models/gpt_oss.py, GptOssModel.load_weights); SGLang splits them by the
  //     attention TP rank (python/sglang/srt/models/gpt_oss.py, GptOssAttention.__init__).
  struct Attn {
    bool qkv_bias = false;  // q/k/v biases, split as their rows
    bool o_bias = false;    // o_proj bias [H]: whole on every TP rank (a row-parallel layer's bias)
    bool qk_norm = false;   // q_norm, k_norm [head_dim]
    bool gated = false;     // q_proj [2 * heads * hd, H]: per head [q; gate] (qwen3_next, qwen3_5)
    bool sinks = false;     // gpt_oss: one learned sink logit per head, [heads], split by heads
  };

  // GQA attention: q/k/v [heads*hd | kv*hd, H] column-parallel parts of the fused qkv buffer,
  // o [H, heads*hd] row-parallel.
  void gqa(const std::string& p, std::int32_t layer, bool qk_norm) {
    Attn a;
    a.qk_norm = qk_norm;
    gqa(p, layer, a);
  }
  void gqa(const std::string& p, std::int32_t layer, const Attn& a) {
    const auto H = c_.hidden_size, hd = c_.head_dim;
    const auto q_rows = c_.num_attention_heads * hd * (a.gated ? 2 : 1), kv_rows = c_.num_key_value_heads * hd;
    if (a.gated != c_.gated_attention()) throw std::logic_error("gated attention outside a gated architecture");
    add(p + "q_proj.weight", {q_rows, H}, TC::Attention, PR::ColumnParallel, layer, FP::Q);
    if (a.qkv_bias) add(p + "q_proj.bias", {q_rows}, TC::Attention, PR::ColumnParallel, layer, FP::Q);
    add(p + "k_proj.weight", {kv_rows, H}, TC::Attention, PR::ColumnParallel, layer, FP::K);
    if (a.qkv_bias) add(p + "k_proj.bias", {kv_rows}, TC::Attention, PR::ColumnParallel, layer, FP::K);
    add(p + "v_proj.weight", {kv_rows, H}, TC::Attention, PR::ColumnParallel, layer, FP::V);
    if (a.qkv_bias) add(p + "v_proj.bias", {kv_rows}, TC::Attention, PR::ColumnParallel, layer, FP::V);
    add(p + "o_proj.weight", {H, c_.num_attention_heads * hd}, TC::Attention, PR::RowParallel, layer);
    if (a.o_bias) add(p + "o_proj.bias", {H}, TC::Attention, PR::Replicated, layer);
    if (a.sinks) add(p + "sinks", {c_.num_attention_heads}, TC::Attention, PR::ColumnParallel, layer);
    if (a.qk_norm) {
      norm(p + "q_norm.weight", hd, layer);
      norm(p + "k_norm.weight", hd, layer);
    }
  }

  // DeepSeek MLA. The down-projections q_a and kv_a (kv_a also carries the shared rope key) are
  // replicated (vLLM ReplicatedLinear, Megatron builds them as plain linears with TP off); the
  // up-projections q_b, kv_b are column-parallel by heads; o row-parallel.
  void mla(const std::string& p, std::int32_t layer) {
    const auto H = c_.hidden_size, heads = c_.num_attention_heads;
    const auto qk = c_.qk_nope_head_dim + c_.qk_rope_head_dim;
    if (c_.q_lora_rank > 0) {
      add(p + "q_a_proj.weight", {c_.q_lora_rank, H}, TC::Attention, PR::Replicated, layer);
      norm(p + "q_a_layernorm.weight", c_.q_lora_rank, layer);
      add(p + "q_b_proj.weight", {heads * qk, c_.q_lora_rank}, TC::Attention, PR::ColumnParallel, layer);
    } else {
      add(p + "q_proj.weight", {heads * qk, H}, TC::Attention, PR::ColumnParallel, layer);
    }
    add(p + "kv_a_proj_with_mqa.weight", {c_.kv_lora_rank + c_.qk_rope_head_dim, H}, TC::Attention,
        PR::Replicated, layer);
    norm(p + "kv_a_layernorm.weight", c_.kv_lora_rank, layer);
    add(p + "kv_b_proj.weight", {heads * (c_.qk_nope_head_dim + c_.v_head_dim), c_.kv_lora_rank}, TC::Attention,
        PR::ColumnParallel, layer);
    add(p + "o_proj.weight", {H, heads * c_.v_head_dim}, TC::Attention, PR::RowParallel, layer);
  }

  // SwiGLU FFN [gate; up] column-parallel, down row-parallel. With `bias` (llama mlp_bias): gate and
  // up biases split as their rows, the down bias [in] whole on every TP rank.
  void swiglu(const std::string& p, std::int64_t in, std::int64_t width, TC cls, std::int32_t layer,
              std::int32_t expert = -1, bool bias = false) {
    add(p + "gate_proj.weight", {width, in}, cls, PR::ColumnParallel, layer, FP::Gate, expert);
    if (bias) add(p + "gate_proj.bias", {width}, cls, PR::ColumnParallel, layer, FP::Gate, expert);
    add(p + "up_proj.weight", {width, in}, cls, PR::ColumnParallel, layer, FP::Up, expert);
    if (bias) add(p + "up_proj.bias", {width}, cls, PR::ColumnParallel, layer, FP::Up, expert);
    add(p + "down_proj.weight", {in, width}, cls, PR::RowParallel, layer, FP::None, expert);
    if (bias) add(p + "down_proj.bias", {in}, cls, PR::Replicated, layer, FP::None, expert);
  }

  // ReLU^2 FFN (nemotron_h): up column-parallel, down row-parallel.
  void relu2(const std::string& p, std::int64_t in, std::int64_t width, TC cls, std::int32_t layer,
             std::int32_t expert = -1) {
    add(p + "up_proj.weight", {width, in}, cls, PR::ColumnParallel, layer, FP::Up, expert);
    add(p + "down_proj.weight", {in, width}, cls, PR::RowParallel, layer, FP::None, expert);
  }

  // Router: gate [E, H] (+ fp32 score-correction bias [E]), replicated.
  void router(const std::string& p, std::int32_t layer, bool bias) {
    add(p + "gate.weight", {c_.n_routed_experts, c_.hidden_size}, TC::Router, PR::Replicated, layer);
    if (bias) {
      auto& b = add(p + "gate.e_score_correction_bias", {c_.n_routed_experts}, TC::Router, PR::Replicated, layer);
      b.dtype = DType::FP32;
    }
  }

  // Mamba2 mixer. d = heads*head_dim, gs = groups*state. in_proj rows are [z d; x d; B gs; C gs;
  // dt heads], conv1d channels [x d; B gs; C gs]; tensor parallelism splits each part, so both
  // carry column_parts. A_log, D, dt_bias split by heads, the gated norm by d; out_proj by d (dim 1).
  void mamba(const std::string& p, std::int32_t layer) {
    const auto H = c_.hidden_size, nh = c_.mamba_num_heads;
    const auto d = nh * c_.mamba_head_dim, gs = c_.n_groups * c_.ssm_state_size;
    auto& in = add(p + "in_proj.weight", {2 * d + 2 * gs + nh, H}, TC::Mamba, PR::ColumnParallel, layer);
    in.column_parts = {d, d, gs, gs, nh};
    auto& cw = add(p + "conv1d.weight", {d + 2 * gs, 1, c_.conv_kernel}, TC::Mamba, PR::ColumnParallel, layer);
    cw.column_parts = {d, gs, gs};
    if (c_.use_conv_bias) {
      auto& cb = add(p + "conv1d.bias", {d + 2 * gs}, TC::Mamba, PR::ColumnParallel, layer);
      cb.column_parts = {d, gs, gs};
    }
    add(p + "A_log", {nh}, TC::Mamba, PR::ColumnParallel, layer);
    add(p + "D", {nh}, TC::Mamba, PR::ColumnParallel, layer);
    add(p + "dt_bias", {nh}, TC::Mamba, PR::ColumnParallel, layer);
    add(p + "norm.weight", {d}, TC::Mamba, PR::ColumnParallel, layer);
    add(p + "out_proj.weight", {H, d}, TC::Mamba, PR::RowParallel, layer);
  }

  // Gated DeltaNet (qwen3_next, qwen3_5), transformers' Qwen3NextGatedDeltaNet / Qwen3_5GatedDeltaNet.
  // nk key heads of dk, nv value heads of dv (nv a multiple of nk); kd = nk*dk, vd = nv*dv.
  //   qwen3_next: in_proj_qkvz [2kd + 2vd, H] is per key-head group g: [q_g dk; k_g dk; v_g (nv/nk)*dv;
  //               z_g (nv/nk)*dv] (fix_query_key_value_ordering), in_proj_ba [2nv, H] per group
  //               [b_g nv/nk; a_g nv/nk]: a contiguous split by whole groups gives a rank whole heads;
  //   qwen3_5:    in_proj_qkv [2kd + vd, H] = [q; k; v] (each part split apart: column_parts),
  //               in_proj_z [vd, H], in_proj_b, in_proj_a [nv, H].
  // conv1d [2kd + vd, 1, kernel] (no bias) = [q; k; v] channels (column_parts), dt_bias and A_log [nv]
  // by heads, the gated norm [dv] shared by all heads (replicated), out_proj [H, vd] row-parallel.
  // Every split must give whole key heads (tp_groups = nk). Under tensor parallelism: vLLM builds
  // in_proj_qkvz / in_proj_ba column-parallel (Qwen3.5's separate parts merged, each part split
  // apart) and conv1d as a ColumnParallelLinear over [q; k; v] loaded by
  // mamba_v2_sharded_weight_loader, dt_bias and A_log split by value heads, the gated norm whole
  // (vllm/model_executor/models/qwen3_next.py, Qwen3NextGatedDeltaNet.__init__); SGLang the same
  // (python/sglang/srt/models/qwen3_next.py, Qwen3GatedDeltaNet.__init__); Megatron-Core's in_proj
  // splits each of its parts over TP (megatron/core/ssm/gated_delta_net.py, GatedDeltaNet.__init__).
  void deltanet(const std::string& p, std::int32_t layer, bool split_projections) {
    const auto H = c_.hidden_size, nk = c_.linear_num_key_heads, nv = c_.linear_num_value_heads;
    const auto kd = nk * c_.linear_key_head_dim, vd = nv * c_.linear_value_head_dim;
    const auto LA = TC::LinearAttention;
    auto grouped = [&](TensorInfo& t, std::vector<std::int64_t> parts = {}) {
      t.tp_groups = nk;
      t.column_parts = std::move(parts);
    };
    grouped(add(p + "conv1d.weight", {2 * kd + vd, 1, c_.linear_conv_kernel_dim}, LA, PR::ColumnParallel, layer),
            {kd, kd, vd});
    if (split_projections) {
      grouped(add(p + "in_proj_qkv.weight", {2 * kd + vd, H}, LA, PR::ColumnParallel, layer), {kd, kd, vd});
      grouped(add(p + "in_proj_z.weight", {vd, H}, LA, PR::ColumnParallel, layer));
      grouped(add(p + "in_proj_b.weight", {nv, H}, LA, PR::ColumnParallel, layer));
      grouped(add(p + "in_proj_a.weight", {nv, H}, LA, PR::ColumnParallel, layer));
    } else {
      grouped(add(p + "in_proj_qkvz.weight", {2 * kd + 2 * vd, H}, LA, PR::ColumnParallel, layer));
      grouped(add(p + "in_proj_ba.weight", {2 * nv, H}, LA, PR::ColumnParallel, layer));
    }
    grouped(add(p + "dt_bias", {nv}, LA, PR::ColumnParallel, layer));
    grouped(add(p + "A_log", {nv}, LA, PR::ColumnParallel, layer));
    add(p + "norm.weight", {c_.linear_value_head_dim}, LA, PR::Replicated, layer);
    grouped(add(p + "out_proj.weight", {H, vd}, LA, PR::RowParallel, layer));
  }

  // gpt-oss expert e of a layer. The checkpoint stacks the experts in one tensor per kind
  // (`mlp.experts.gate_up_proj` [E, ...], MXFP4 blocks in the released files); reshard lists expert
  // e's slice as `mlp.experts.e.<kind>` in the [out, in] orientation of the MXFP4 blocks and of vLLM's
  // w13 / w2: gate_up [2I, H] with gate and up rows interleaved (row 2j gate j, row 2j+1 up j),
  // gate_up_proj_bias [2I], down [H, I], down_proj_bias [H]. A tensor-parallel split of whole (gate,
  // up) pairs is a contiguous range of rows (Megatron-Bridge de-interleaves them into linear_fc1's
  // [gate; up], src/megatron/bridge/models/gpt_oss/gpt_oss_bridge.py,
  // GPTOSSMLPGateUpProjMapping._interleave; a Megatron-Core GLU rank holds [gate_j; up_j], the same
  // elements); the down bias is the bias of a row-parallel layer (whole).
  void gpt_oss_expert(const std::string& p, std::int32_t layer, std::int32_t e) {
    const auto H = c_.hidden_size, I = c_.intermediate_size;
    const std::string x = layer_prefix_of(p, e);
    add(x + "gate_up_proj", {2 * I, H}, TC::ExpertFFN, PR::ColumnParallel, layer, FP::None, e).tp_groups = I;
    add(x + "gate_up_proj_bias", {2 * I}, TC::ExpertFFN, PR::ColumnParallel, layer, FP::None, e).tp_groups = I;
    add(x + "down_proj", {H, I}, TC::ExpertFFN, PR::RowParallel, layer, FP::None, e);
    add(x + "down_proj_bias", {H}, TC::ExpertFFN, PR::Replicated, layer, FP::None, e);
  }

  // DeepSeek sparse attention's lightning indexer (deepseek_v32, DeepSeek's inference/model.py
  // Indexer): wq_b [n*d, q_lora], wk [d, H], k_norm (LayerNorm: weight and bias [d]), weights_proj
  // [n, H]. Every framework keeps it whole on every rank: vLLM's ReplicatedLinear wq_b, wk,
  // weights_proj and a whole LayerNorm k_norm (vllm/model_executor/models/deepseek_v2.py,
  // Indexer.__init__), SGLang likewise (python/sglang/srt/layers/attention/nsa/nsa_indexer.py,
  // Indexer.__init__), Megatron-Core's linear_wq_b / linear_wk / linear_weights_proj with
  // parallel_mode "duplicated" (megatron/core/transformer/experimental_attention_variant/dsa.py,
  // DSAIndexer.__init__).
  void indexer(const std::string& p, std::int32_t layer) {
    const auto n = c_.index_n_heads, d = c_.index_head_dim;
    add(p + "wq_b.weight", {n * d, c_.q_lora_rank}, TC::Attention, PR::Replicated, layer);
    add(p + "wk.weight", {d, c_.hidden_size}, TC::Attention, PR::Replicated, layer);
    norm(p + "k_norm.weight", d, layer);
    norm(p + "k_norm.bias", d, layer);
    add(p + "weights_proj.weight", {n, c_.hidden_size}, TC::Attention, PR::Replicated, layer);
  }

  // MTP input fusion (DeepSeek-V3 and nemotron_h): enorm, hnorm [H], eh_proj [H, 2H]. Megatron
  // builds eh_proj column-parallel (gather_output=False), vLLM's NemotronH MTP likewise.
  void mtp_fusion(const std::string& p, std::int32_t layer) {
    const auto H = c_.hidden_size;
    norm(p + "enorm.weight", H, layer);
    norm(p + "hnorm.weight", H, layer);
    add(p + "eh_proj.weight", {H, 2 * H}, TC::DenseFFN, PR::ColumnParallel, layer);
  }

 private:
  static std::string layer_prefix_of(const std::string& root, std::int64_t i) {
    return root + std::to_string(i) + ".";
  }
  const ModelConfig& c_;
  DType dtype_;
  std::vector<TensorInfo>& out_;
  bool mtp_ = false;
};

std::string layer_prefix(const char* root, std::int64_t i) {
  std::string s(root);
  s += std::to_string(i);
  s += '.';
  return s;
}

// ---- deepseek_v3 / deepseek_v32 (DeepSeek-V3, V3.2, Kimi K2, K2.5, Kimi-K3-class) and glm4_moe ----
// The same layer plan: the first first_k_dense_replace layers dense, the rest MoE (router with an
// fp32 score-correction bias, routed experts, shared experts of width n_shared * moe width), MTP
// layers stored as further decoder layers. Attention: MLA (deepseek_v3), MLA + the DSA indexer
// (deepseek_v32), GQA with q/k/v biases and optional QK norms (glm4_moe).
void moe_decoder_layer(Builder& b, const ModelConfig& c, std::int32_t i) {
  const std::string p = layer_prefix((c.model_prefix + "layers.").c_str(), i);
  if (c.architecture == "glm4_moe") {
    Builder::Attn a;
    a.qkv_bias = c.attention_bias;
    a.qk_norm = c.use_qk_norm;
    b.gqa(p + "self_attn.", i, a);
  } else {
    b.mla(p + "self_attn.", i);
    if (c.architecture == "deepseek_v32") b.indexer(p + "self_attn.indexer.", i);
  }
  b.norm(p + "input_layernorm.weight", c.hidden_size, i);
  b.norm(p + "post_attention_layernorm.weight", c.hidden_size, i);
  if (i < c.first_k_dense_replace) {
    b.swiglu(p + "mlp.", c.hidden_size, c.intermediate_size, TC::DenseFFN, i);
    return;
  }
  b.router(p + "mlp.", i, true);
  const std::string ep = p + "mlp.experts.";
  for (std::int32_t e = 0; e < c.n_routed_experts; ++e)
    b.swiglu(layer_prefix(ep.c_str(), e), c.hidden_size, c.moe_intermediate_size, TC::ExpertFFN, i, e);
  if (c.n_shared_experts > 0)
    b.swiglu(p + "mlp.shared_experts.", c.hidden_size, c.moe_intermediate_size * c.n_shared_experts,
             TC::SharedExpert, i);
}

void build_deepseek(Builder& b, const ModelConfig& c, std::int32_t mtp_layers) {
  const auto H = c.hidden_size, V = c.vocab_size;
  b.add(c.model_prefix + "embed_tokens.weight", {V, H}, TC::Embedding, PR::VocabParallel, -1).pre_layers = true;
  const auto L = static_cast<std::int32_t>(c.num_hidden_layers);
  for (std::int32_t i = 0; i < L; ++i) moe_decoder_layer(b, c, i);
  // MTP layer k is stored as model.layers.(L+k): its own copy of the embedding and head, the input
  // fusion, one full decoder layer (MoE, since L+k >= first_k_dense_replace) and the head norm.
  b.set_mtp(true);
  for (std::int32_t k = 0; k < mtp_layers; ++k) {
    const std::int32_t i = L + k;
    const std::string p = layer_prefix((c.model_prefix + "layers.").c_str(), i);
    b.add(p + "embed_tokens.weight", {V, H}, TC::Embedding, PR::VocabParallel, i);
    b.mtp_fusion(p, i);
    moe_decoder_layer(b, c, i);
    b.norm(p + "shared_head.norm.weight", H, i);
    b.add(p + "shared_head.head.weight", {V, H}, TC::Head, PR::VocabParallel, i);
  }
  b.set_mtp(false);
  b.norm(c.model_prefix + "norm.weight", H, -1);
  if (!c.tie_word_embeddings) b.add(c.head_name, {V, H}, TC::Head, PR::VocabParallel, -1);
}

// ---- qwen2 (Qwen2.5) and llama (Llama 3.x): dense GQA ----
// qwen2: q/k/v biases always (transformers Qwen2Attention builds them with bias=True); llama:
// attention_bias gives q/k/v/o biases, mlp_bias gate/up/down biases (LlamaAttention, LlamaMLP).
void build_dense_gqa(Builder& b, const ModelConfig& c) {
  const auto H = c.hidden_size, V = c.vocab_size;
  const bool llama = c.architecture == "llama";
  Builder::Attn a;
  a.qkv_bias = !llama || c.attention_bias;
  a.o_bias = llama && c.attention_bias;
  b.add(c.model_prefix + "embed_tokens.weight", {V, H}, TC::Embedding, PR::VocabParallel, -1).pre_layers = true;
  for (std::int32_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = layer_prefix((c.model_prefix + "layers.").c_str(), i);
    b.gqa(p + "self_attn.", i, a);
    b.norm(p + "input_layernorm.weight", H, i);
    b.norm(p + "post_attention_layernorm.weight", H, i);
    b.swiglu(p + "mlp.", H, c.intermediate_size, TC::DenseFFN, i, -1, llama && c.mlp_bias);
  }
  b.norm(c.model_prefix + "norm.weight", H, -1);
  if (!c.tie_word_embeddings) b.add(c.head_name, {V, H}, TC::Head, PR::VocabParallel, -1);
}

// ---- gpt_oss (gpt-oss-20b, gpt-oss-120b; transformers modeling_gpt_oss.py) ----
// Attention with q/k/v/o biases and one sink per head; MoE in every layer: router weight and bias
// (bf16), experts with biases (Builder::gpt_oss_expert); no shared expert.
void build_gpt_oss(Builder& b, const ModelConfig& c) {
  const auto H = c.hidden_size, V = c.vocab_size, E = c.n_routed_experts;
  Builder::Attn a;
  a.qkv_bias = a.o_bias = a.sinks = true;
  b.add(c.model_prefix + "embed_tokens.weight", {V, H}, TC::Embedding, PR::VocabParallel, -1).pre_layers = true;
  for (std::int32_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = layer_prefix((c.model_prefix + "layers.").c_str(), i);
    b.gqa(p + "self_attn.", i, a);
    b.norm(p + "input_layernorm.weight", H, i);
    b.norm(p + "post_attention_layernorm.weight", H, i);
    b.add(p + "mlp.router.weight", {E, H}, TC::Router, PR::Replicated, i);
    b.add(p + "mlp.router.bias", {E}, TC::Router, PR::Replicated, i);
    for (std::int32_t e = 0; e < E; ++e) b.gpt_oss_expert(p + "mlp.experts.", i, e);
  }
  b.norm(c.model_prefix + "norm.weight", H, -1);
  if (!c.tie_word_embeddings) b.add(c.head_name, {V, H}, TC::Head, PR::VocabParallel, -1);
}

// ---- qwen3_next, qwen3_5 (dense), qwen3_5_moe: gated DeltaNet + gated attention hybrids ----
// Layer kind from layer_types ('L' DeltaNet as `linear_attn`, 'F' gated attention with QK norms as
// `self_attn`); the MLP is MoE (router without bias, routed experts, one shared expert
// `mlp.shared_expert` with its sigmoid gate `mlp.shared_expert_gate` [1, H]) in qwen3_next and
// qwen3_5_moe, dense in qwen3_5. MTP (`mtp.`): fc [H, 2H], pre_fc_norm_embedding,
// pre_fc_norm_hidden, full-attention layers `mtp.layers.k`, norm; embedding and head shared.
void qwen_hybrid_layer(Builder& b, const ModelConfig& c, const std::string& p, char kind, std::int32_t layer) {
  const auto H = c.hidden_size;
  const bool split = c.architecture != "qwen3_next";
  if (kind == 'L') {
    b.deltanet(p + "linear_attn.", layer, split);
  } else {
    Builder::Attn a;
    a.qkv_bias = a.o_bias = c.attention_bias;
    a.qk_norm = a.gated = true;
    b.gqa(p + "self_attn.", layer, a);
  }
  b.norm(p + "input_layernorm.weight", H, layer);
  b.norm(p + "post_attention_layernorm.weight", H, layer);
  if (c.architecture == "qwen3_5") {
    b.swiglu(p + "mlp.", H, c.intermediate_size, TC::DenseFFN, layer);
    return;
  }
  b.router(p + "mlp.", layer, false);
  const std::string ep = p + "mlp.experts.";
  for (std::int32_t e = 0; e < c.n_routed_experts; ++e)
    b.swiglu(layer_prefix(ep.c_str(), e), H, c.moe_intermediate_size, TC::ExpertFFN, layer, e);
  b.swiglu(p + "mlp.shared_expert.", H, c.shared_expert_intermediate_size, TC::SharedExpert, layer);
  b.add(p + "mlp.shared_expert_gate.weight", {1, H}, TC::SharedExpert, PR::Replicated, layer);
}

void build_qwen_hybrid(Builder& b, const ModelConfig& c, std::int32_t mtp_layers) {
  const auto H = c.hidden_size, V = c.vocab_size;
  b.add(c.model_prefix + "embed_tokens.weight", {V, H}, TC::Embedding, PR::VocabParallel, -1).pre_layers = true;
  const auto L = static_cast<std::int32_t>(c.num_hidden_layers);
  for (std::int32_t i = 0; i < L; ++i)
    qwen_hybrid_layer(b, c, layer_prefix((c.model_prefix + "layers.").c_str(), i),
                      c.layer_types[static_cast<std::size_t>(i)], i);
  b.set_mtp(true);
  for (std::int32_t k = 0; k < mtp_layers; ++k) {
    if (k == 0) {
      b.add("mtp.fc.weight", {H, 2 * H}, TC::DenseFFN, PR::ColumnParallel, L);
      b.norm("mtp.pre_fc_norm_embedding.weight", H, L);
      b.norm("mtp.pre_fc_norm_hidden.weight", H, L);
    }
    qwen_hybrid_layer(b, c, layer_prefix("mtp.layers.", k), 'F', L + k);
    if (k == mtp_layers - 1) b.norm("mtp.norm.weight", H, L + k);
  }
  b.set_mtp(false);
  b.norm(c.model_prefix + "norm.weight", H, -1);
  if (!c.tie_word_embeddings) b.add(c.head_name, {V, H}, TC::Head, PR::VocabParallel, -1);
}

// ---- the Qwen3-VL vision tower Qwen3.5 ships (transformers Qwen3VLVisionModel, no deepstack) ----
// `model.visual.`: patch_embed.proj (Conv3d [D, C, tp, p, p] + bias), pos_embed [positions, D], per
// block norm1/norm2 (LayerNorm weight + bias), attn.qkv [3D, D] + bias (= [q; k; v]), attn.proj,
// mlp.linear_fc1 [I, D], mlp.linear_fc2 [D, I] (with biases), then the patch merger: norm [D],
// linear_fc1 [4D, 4D], linear_fc2 [out, 4D] (4 = spatial_merge_size^2, with biases). Listed before
// the embedding (layer -1), counted only with include_vision. Roles as vLLM's Qwen3_VisionTransformer
// splits them (qkv by heads, proj and fc2 by rows' input, norms and the patch embedding whole).
void build_vision(Builder& b, const ModelConfig& c) {
  const auto& v = c.vision;
  const auto D = v.hidden_size, I = v.intermediate_size, M = D * v.spatial_merge_size * v.spatial_merge_size;
  const std::string p = "model.visual.";
  auto add = [&](const std::string& name, std::vector<std::int64_t> shape, PR role) -> TensorInfo& {
    auto& t = b.add(name, std::move(shape), TC::Vision, role, -1);
    t.pre_layers = true;
    return t;
  };
  add(p + "patch_embed.proj.weight", {D, v.in_channels, v.temporal_patch_size, v.patch_size, v.patch_size},
      PR::Replicated);
  add(p + "patch_embed.proj.bias", {D}, PR::Replicated);
  add(p + "pos_embed.weight", {v.num_position_embeddings, D}, PR::Replicated);
  for (std::int64_t i = 0; i < v.depth; ++i) {
    const std::string q = layer_prefix((p + "blocks.").c_str(), i);
    for (const char* n : {"norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias"}) add(q + n, {D}, PR::Replicated);
    for (auto* t : {&add(q + "attn.qkv.weight", {3 * D, D}, PR::ColumnParallel),
                    &add(q + "attn.qkv.bias", {3 * D}, PR::ColumnParallel)}) {
      t->column_parts = {D, D, D};
      t->tp_groups = v.num_heads;
    }
    add(q + "attn.proj.weight", {D, D}, PR::RowParallel).tp_groups = v.num_heads;
    add(q + "attn.proj.bias", {D}, PR::Replicated);
    add(q + "mlp.linear_fc1.weight", {I, D}, PR::ColumnParallel);
    add(q + "mlp.linear_fc1.bias", {I}, PR::ColumnParallel);
    add(q + "mlp.linear_fc2.weight", {D, I}, PR::RowParallel);
    add(q + "mlp.linear_fc2.bias", {D}, PR::Replicated);
  }
  add(p + "merger.norm.weight", {D}, PR::Replicated);
  add(p + "merger.norm.bias", {D}, PR::Replicated);
  add(p + "merger.linear_fc1.weight", {M, M}, PR::ColumnParallel);
  add(p + "merger.linear_fc1.bias", {M}, PR::ColumnParallel);
  add(p + "merger.linear_fc2.weight", {v.out_hidden_size, M}, PR::RowParallel);
  add(p + "merger.linear_fc2.bias", {v.out_hidden_size}, PR::Replicated);
}

// ---- qwen3 (dense) and qwen3_moe ----
void build_qwen3(Builder& b, const ModelConfig& c, bool moe) {
  const auto H = c.hidden_size, V = c.vocab_size;
  b.add("model.embed_tokens.weight", {V, H}, TC::Embedding, PR::VocabParallel, -1).pre_layers = true;
  for (std::int32_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = layer_prefix("model.layers.", i);
    b.gqa(p + "self_attn.", i, true);
    b.norm(p + "input_layernorm.weight", H, i);
    b.norm(p + "post_attention_layernorm.weight", H, i);
    if (!moe) {
      b.swiglu(p + "mlp.", H, c.intermediate_size, TC::DenseFFN, i);
      continue;
    }
    b.router(p + "mlp.", i, false);
    const std::string ep = p + "mlp.experts.";
    for (std::int32_t e = 0; e < c.n_routed_experts; ++e)
      b.swiglu(layer_prefix(ep.c_str(), e), H, c.moe_intermediate_size, TC::ExpertFFN, i, e);
  }
  b.norm("model.norm.weight", H, -1);
  if (!c.tie_word_embeddings) b.add("lm_head.weight", {V, H}, TC::Head, PR::VocabParallel, -1);
}

// ---- nemotron_h (Nemotron 3: Mamba2 + attention + (latent) MoE) ----
void nemotron_layer(Builder& b, const ModelConfig& c, const std::string& p, char kind, std::int32_t layer) {
  const auto H = c.hidden_size;
  b.norm(p + "norm.weight", H, layer);
  const std::string m = p + "mixer.";
  switch (kind) {
    case 'M': b.mamba(m, layer); break;
    case '*': b.gqa(m, layer, false); break;
    case '-': b.relu2(m, H, c.intermediate_size, TC::DenseFFN, layer); break;
    case 'E': {
      b.router(m, layer, true);
      // Latent MoE: experts work at width `latent` between two projections that every token
      // passes through; vLLM builds them as ReplicatedLinear, so they are replicated dense FFN
      // weights here (not experts: expert parallelism does not distribute them).
      std::int64_t inner = H;
      if (c.moe_latent_size > 0) {
        inner = c.moe_latent_size;
        b.add(m + "fc1_latent_proj.weight", {inner, H}, TC::DenseFFN, PR::Replicated, layer);
        b.add(m + "fc2_latent_proj.weight", {H, inner}, TC::DenseFFN, PR::Replicated, layer);
      }
      const std::string ep = m + "experts.";
      for (std::int32_t e = 0; e < c.n_routed_experts; ++e)
        b.relu2(layer_prefix(ep.c_str(), e), inner, c.moe_intermediate_size, TC::ExpertFFN, layer, e);
      if (c.n_shared_experts > 0)
        b.relu2(m + "shared_experts.", H, c.shared_expert_intermediate_size * c.n_shared_experts,
                TC::SharedExpert, layer);
      break;
    }
    default: throw std::logic_error(std::string("nemotron_h: unexpected layer kind ") + kind);
  }
}

void build_nemotron(Builder& b, const ModelConfig& c, std::int32_t mtp_steps) {
  const auto H = c.hidden_size, V = c.vocab_size;
  b.add("backbone.embeddings.weight", {V, H}, TC::Embedding, PR::VocabParallel, -1).pre_layers = true;
  const auto L = static_cast<std::int32_t>(c.num_hidden_layers);
  for (std::int32_t i = 0; i < L; ++i)
    nemotron_layer(b, c, layer_prefix("backbone.layers.", i), c.hybrid_override_pattern[static_cast<std::size_t>(i)], i);
  // MTP: `mtp.layers.j`, one step = the layers of mtp_hybrid_override_pattern; the step's first
  // layer carries the input fusion, its last the final_layernorm. The embedding and the head are
  // shared with the main model (no copies in the checkpoint).
  b.set_mtp(true);
  const auto& mp = c.mtp_hybrid_override_pattern;
  const auto step = static_cast<std::int32_t>(mp.size());
  for (std::int32_t j = 0; j < mtp_steps * step; ++j) {
    const std::string p = layer_prefix("mtp.layers.", j);
    const std::int32_t layer = L + j;
    if (j % step == 0) b.mtp_fusion(p, layer);
    nemotron_layer(b, c, p, mp[static_cast<std::size_t>(j % step)], layer);
    if (j % step == step - 1) b.norm(p + "final_layernorm.weight", H, layer);
  }
  b.set_mtp(false);
  b.norm("backbone.norm_f.weight", H, -1);
  if (!c.tie_word_embeddings) b.add("lm_head.weight", {V, H}, TC::Head, PR::VocabParallel, -1);
}

std::string known_architectures() {
  return "deepseek_v3, deepseek_v32, qwen2, llama, qwen3, qwen3_moe, glm4_moe, gpt_oss, qwen3_next, qwen3_5, "
         "qwen3_5_moe, nemotron_h";
}

[[noreturn]] void bad(const ModelConfig& c, const std::string& key, const std::string& what) {
  throw ConfigError(c.name, 0, key, what);
}

// Checks a programmatic config (files are checked with lines in inventory_config.cpp first).
void check(const ModelConfig& c) {
  auto pos = [&](const char* key, std::int64_t v) {
    if (v < 1) bad(c, key, "must be a positive integer, got " + std::to_string(v));
  };
  for (const auto& [key, v] : std::initializer_list<std::pair<const char*, std::int64_t>>{
           {"hidden_size", c.hidden_size}, {"num_hidden_layers", c.num_hidden_layers}, {"vocab_size", c.vocab_size},
           {"num_attention_heads", c.num_attention_heads}, {"num_key_value_heads", c.num_key_value_heads},
           {"head_dim", c.head_dim}, {"intermediate_size", c.intermediate_size},
           {"moe_intermediate_size", c.moe_intermediate_size}, {"n_routed_experts", c.n_routed_experts},
           {"n_shared_experts", c.n_shared_experts}, {"num_experts_per_tok", c.num_experts_per_tok},
           {"first_k_dense_replace", c.first_k_dense_replace}, {"num_nextn_predict_layers", c.num_nextn_predict_layers},
           {"q_lora_rank", c.q_lora_rank}, {"kv_lora_rank", c.kv_lora_rank}, {"qk_nope_head_dim", c.qk_nope_head_dim},
           {"qk_rope_head_dim", c.qk_rope_head_dim}, {"v_head_dim", c.v_head_dim}, {"mamba_num_heads", c.mamba_num_heads},
           {"mamba_head_dim", c.mamba_head_dim}, {"n_groups", c.n_groups}, {"ssm_state_size", c.ssm_state_size},
           {"conv_kernel", c.conv_kernel}, {"moe_shared_expert_intermediate_size", c.shared_expert_intermediate_size},
           {"moe_latent_size", c.moe_latent_size}, {"linear_num_key_heads", c.linear_num_key_heads},
           {"linear_num_value_heads", c.linear_num_value_heads}, {"linear_key_head_dim", c.linear_key_head_dim},
           {"linear_value_head_dim", c.linear_value_head_dim}, {"linear_conv_kernel_dim", c.linear_conv_kernel_dim},
           {"index_n_heads", c.index_n_heads}, {"index_head_dim", c.index_head_dim},
           {"vision_config.depth", c.vision.depth}, {"vision_config.hidden_size", c.vision.hidden_size},
           {"vision_config.intermediate_size", c.vision.intermediate_size},
           {"vision_config.num_position_embeddings", c.vision.num_position_embeddings},
           {"vision_config.out_hidden_size", c.vision.out_hidden_size}})
    if (v > kMaxDimension) bad(c, key, std::to_string(v) + " is larger than " + std::to_string(kMaxDimension));
  pos("hidden_size", c.hidden_size);
  pos("num_hidden_layers", c.num_hidden_layers);
  pos("vocab_size", c.vocab_size);
  const std::string& a = c.architecture;
  const auto gqa = [&] {
    pos("num_attention_heads", c.num_attention_heads);
    pos("num_key_value_heads", c.num_key_value_heads);
    pos("head_dim", c.head_dim);
  };
  const auto routed = [&](const char* experts_key) {
    pos("moe_intermediate_size", c.moe_intermediate_size);
    pos(experts_key, c.n_routed_experts);
    pos("num_experts_per_tok", c.num_experts_per_tok);
  };
  if (a == "deepseek_v3" || a == "deepseek_v32") {
    pos("num_attention_heads", c.num_attention_heads);
    pos("kv_lora_rank", c.kv_lora_rank);
    pos("qk_nope_head_dim", c.qk_nope_head_dim);
    pos("qk_rope_head_dim", c.qk_rope_head_dim);
    pos("v_head_dim", c.v_head_dim);
    if (c.first_k_dense_replace > 0) pos("intermediate_size", c.intermediate_size);
    if (c.first_k_dense_replace < c.num_hidden_layers) routed("n_routed_experts");
    if (a == "deepseek_v32") {
      pos("q_lora_rank", c.q_lora_rank);  // the indexer's wq_b reads the q LoRA output
      pos("index_n_heads", c.index_n_heads);
      pos("index_head_dim", c.index_head_dim);
    }
  } else if (a == "glm4_moe") {
    gqa();
    if (c.first_k_dense_replace > 0) pos("intermediate_size", c.intermediate_size);
    if (c.first_k_dense_replace < c.num_hidden_layers) routed("n_routed_experts");
  } else if (a == "qwen2" || a == "llama") {
    gqa();
    pos("intermediate_size", c.intermediate_size);
  } else if (a == "gpt_oss") {
    gqa();
    pos("intermediate_size", c.intermediate_size);
    pos("num_local_experts", c.n_routed_experts);
    pos("num_experts_per_tok", c.num_experts_per_tok);
  } else if (a == "qwen3_next" || a == "qwen3_5" || a == "qwen3_5_moe") {
    if (static_cast<std::int64_t>(c.layer_types.size()) != c.num_hidden_layers)
      bad(c, "layer_types", "has " + std::to_string(c.layer_types.size()) + " entries, num_hidden_layers is " +
                                std::to_string(c.num_hidden_layers));
    for (const char k : c.layer_types)
      if (k != 'L' && k != 'F') bad(c, "layer_types", std::string("unknown layer kind '") + k + "' (expected L or F)");
    gqa();
    if (c.layer_types.find('L') != std::string::npos) {
      pos("linear_num_key_heads", c.linear_num_key_heads);
      pos("linear_num_value_heads", c.linear_num_value_heads);
      pos("linear_key_head_dim", c.linear_key_head_dim);
      pos("linear_value_head_dim", c.linear_value_head_dim);
      pos("linear_conv_kernel_dim", c.linear_conv_kernel_dim);
      if (c.linear_num_value_heads % c.linear_num_key_heads != 0)
        bad(c, "linear_num_value_heads",
            "must be a multiple of linear_num_key_heads (" + std::to_string(c.linear_num_key_heads) + ")");
    }
    if (a == "qwen3_5") {
      pos("intermediate_size", c.intermediate_size);
    } else {
      routed("num_experts");
      pos("shared_expert_intermediate_size", c.shared_expert_intermediate_size);
    }
  } else if (a == "qwen3" || a == "qwen3_moe") {
    pos("num_attention_heads", c.num_attention_heads);
    pos("num_key_value_heads", c.num_key_value_heads);
    pos("head_dim", c.head_dim);
    if (a == "qwen3") {
      pos("intermediate_size", c.intermediate_size);
    } else {
      pos("moe_intermediate_size", c.moe_intermediate_size);
      pos("num_experts", c.n_routed_experts);
      pos("num_experts_per_tok", c.num_experts_per_tok);
    }
  } else if (a == "nemotron_h") {
    if (static_cast<std::int64_t>(c.hybrid_override_pattern.size()) != c.num_hidden_layers)
      bad(c, "hybrid_override_pattern",
          "has " + std::to_string(c.hybrid_override_pattern.size()) + " characters, num_hidden_layers is " +
              std::to_string(c.num_hidden_layers));
    std::string kinds = c.hybrid_override_pattern;
    if (c.num_nextn_predict_layers > 0) {
      if (c.mtp_hybrid_override_pattern.empty())
        bad(c, "mtp_hybrid_override_pattern", "required when num_nextn_predict_layers > 0");
      kinds += c.mtp_hybrid_override_pattern;
    }
    for (const char k : kinds) {
      if (k == 'M') {
        pos("mamba_num_heads", c.mamba_num_heads);
        pos("mamba_head_dim", c.mamba_head_dim);
        pos("n_groups", c.n_groups);
        pos("ssm_state_size", c.ssm_state_size);
        pos("conv_kernel", c.conv_kernel);
      } else if (k == '*') {
        pos("num_attention_heads", c.num_attention_heads);
        pos("num_key_value_heads", c.num_key_value_heads);
        pos("head_dim", c.head_dim);
      } else if (k == 'E') {
        pos("n_routed_experts", c.n_routed_experts);
        pos("num_experts_per_tok", c.num_experts_per_tok);
        pos("moe_intermediate_size", c.moe_intermediate_size);
        if (c.n_shared_experts > 0) pos("moe_shared_expert_intermediate_size", c.shared_expert_intermediate_size);
      } else if (k == '-') {
        pos("intermediate_size", c.intermediate_size);
      } else {
        bad(c, "hybrid_override_pattern",
            std::string("unknown layer kind '") + k + "' (expected M Mamba, E MoE, * attention, - MLP)");
      }
    }
  } else {
    bad(c, "architecture", "unknown architecture '" + a + "'; known: " + known_architectures());
  }
  if (c.num_experts_per_tok > c.n_routed_experts && c.n_routed_experts > 0)
    bad(c, "num_experts_per_tok",
        std::to_string(c.num_experts_per_tok) + " exceeds the " + std::to_string(c.n_routed_experts) + " routed experts");
  if (c.num_attention_heads > 0 && c.num_key_value_heads > 0 && a != "deepseek_v3" && a != "deepseek_v32" &&
      c.num_attention_heads % c.num_key_value_heads != 0)
    bad(c, "num_key_value_heads", "must divide num_attention_heads (" + std::to_string(c.num_attention_heads) + ")");
}

}  // namespace

Inventory Inventory::build(const ModelConfig& config, const InventoryOptions& options) {
  check(config);
  Inventory inv;
  inv.config_ = config;
  inv.include_mtp_ = options.include_mtp;
  const ModelConfig& c = inv.config_;
  const DType dtype = options.dtype.value_or(c.dtype);
  const auto mtp_steps = options.include_mtp ? static_cast<std::int32_t>(c.num_nextn_predict_layers) : 0;

  // Reserve: the routed experts dominate the count. Bounded before anything is allocated (each
  // field is at most kMaxDimension = 2^20, so a product of three fits in 64 bits).
  const std::int64_t per_expert = c.architecture == "gpt_oss" ? 4 : 3;
  const std::int64_t estimate = 16 + (options.include_vision ? 16 * c.vision.depth + 16 : 0) +
                                (c.num_hidden_layers + 2 * mtp_steps) * (16 + per_expert * c.n_routed_experts);
  if (const std::int64_t most = checked::read_limits().tensors; estimate > most)
    bad(c, "num_hidden_layers", "the model would have about " + std::to_string(estimate) + " tensors (layers x experts), more than " +
                                    std::to_string(most) + ", the most reshard plans");
  inv.tensors_.reserve(static_cast<std::size_t>(estimate));
  if (options.include_vision && c.vision.kind.empty())
    bad(c, "vision_config", "the model has no vision tower to include (--vision, include_vision)");
  if (options.include_vision && c.vision.kind == "moonvit")
    bad(c, "vision_config",
        "Kimi K2.5's MoonViT vision tower is not modelled; leave --vision (include_vision) off: the language "
        "model alone");
  if (options.include_vision)
    for (const auto& [key, v] : std::initializer_list<std::pair<const char*, std::int64_t>>{
             {"vision_config.depth", c.vision.depth}, {"vision_config.hidden_size", c.vision.hidden_size},
             {"vision_config.intermediate_size", c.vision.intermediate_size},
             {"vision_config.num_heads", c.vision.num_heads}, {"vision_config.patch_size", c.vision.patch_size},
             {"vision_config.temporal_patch_size", c.vision.temporal_patch_size},
             {"vision_config.in_channels", c.vision.in_channels},
             {"vision_config.spatial_merge_size", c.vision.spatial_merge_size},
             {"vision_config.out_hidden_size", c.vision.out_hidden_size},
             {"vision_config.num_position_embeddings", c.vision.num_position_embeddings}})
      if (v < 1) bad(c, key, "required to count the vision tower (include_vision), got " + std::to_string(v));
  inv.include_vision_ = options.include_vision;
  Builder b(c, dtype, inv.tensors_);
  if (options.include_vision) build_vision(b, c);
  const std::string& a = c.architecture;
  if (a == "deepseek_v3" || a == "deepseek_v32" || a == "glm4_moe") {
    build_deepseek(b, c, mtp_steps);
    inv.mtp_layers_ = mtp_steps;
  } else if (a == "qwen3" || a == "qwen3_moe") {
    build_qwen3(b, c, a == "qwen3_moe");
  } else if (a == "qwen2" || a == "llama") {
    build_dense_gqa(b, c);
  } else if (a == "gpt_oss") {
    build_gpt_oss(b, c);
  } else if (a == "qwen3_next" || a == "qwen3_5" || a == "qwen3_5_moe") {
    build_qwen_hybrid(b, c, mtp_steps);
    inv.mtp_layers_ = mtp_steps;
  } else {
    build_nemotron(b, c, mtp_steps);
    inv.mtp_layers_ = mtp_steps * static_cast<std::int32_t>(c.mtp_hybrid_override_pattern.size());
  }

  inv.count();
  if (options.lora) return lora_adapters(inv, *options.lora);
  return inv;
}

void Inventory::count() {
  const ModelConfig& c = config_;
  parameters_ = 0;
  bytes_ = Bytes{0};
  std::fill(std::begin(class_parameters_), std::end(class_parameters_), 0);
  std::fill(std::begin(class_bytes_), std::end(class_bytes_), Bytes{0});
  by_name_.clear();
  // Totals and the active count. Per layer, one routed expert's parameters are the sum over its
  // tensors; each MoE layer activates num_experts_per_tok of its n_routed_experts experts.
  const std::size_t layers = static_cast<std::size_t>(layer_count());
  std::vector<std::int64_t> expert0_params(layers, 0);
  std::vector<std::int64_t> experts_in_layer(layers, 0);
  by_name_.reserve(tensors_.size());
  for (const auto& t : tensors_) {
    // Element and byte counts, and their totals, in 64 bits without overflow.
    std::int64_t n = 1;
    for (const auto d : t.shape)
      if (const auto m = checked::mul(n, d)) n = *m;
      else bad(c, t.name, "has more than 2^63 elements");
    const auto nbytes = checked::mul(n, dtype_size(t.dtype));
    const auto total = checked::add(parameters_, n);
    if (!nbytes || !total || !checked::add(bytes_.value, *nbytes))
      bad(c, t.name, "the model's parameter or byte count exceeds 2^63");
    const auto bytes = t.bytes();
    bytes_ += bytes;
    class_bytes_[static_cast<int>(t.cls)] += bytes;
    if (!by_name_.emplace(t.name, t.id).second)
      throw std::logic_error("inventory: duplicate tensor name " + t.name);
    // A precision change's scale tensors (model/precision.hpp) are bytes that travel, not parameters.
    if (t.quant.scale_of >= 0) continue;
    n *= t.quant.packed;  // an MXFP4 payload stores two parameters a byte
    parameters_ += n;
    class_parameters_[static_cast<int>(t.cls)] += n;
    if (t.expert >= 0) {
      const auto l = static_cast<std::size_t>(t.layer);
      if (t.expert == 0) expert0_params[l] += n;
      experts_in_layer[l] = std::max<std::int64_t>(experts_in_layer[l], t.expert + 1);
    }
  }
  active_parameters_ = parameters_;
  for (std::size_t l = 0; l < layers; ++l)
    if (experts_in_layer[l] > c.num_experts_per_tok)
      active_parameters_ -= (experts_in_layer[l] - c.num_experts_per_tok) * expert0_params[l];
}

Inventory Inventory::with_tensors(std::vector<TensorInfo> tensors) const {
  Inventory inv;
  inv.config_ = config_;
  inv.include_mtp_ = include_mtp_;
  inv.include_vision_ = include_vision_;
  inv.mtp_layers_ = mtp_layers_;
  inv.delta_ = delta_;
  inv.tensors_ = std::move(tensors);
  for (std::size_t i = 0; i < inv.tensors_.size(); ++i) inv.tensors_[i].id = static_cast<std::int32_t>(i);
  inv.count();
  return inv;
}

const TensorInfo* Inventory::find(const std::string& name) const {
  const auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &tensors_[static_cast<std::size_t>(it->second)];
}

std::int64_t Inventory::parameters() const { return parameters_; }
Bytes Inventory::bytes() const { return bytes_; }
std::int64_t Inventory::parameters(TensorClass c) const { return class_parameters_[static_cast<int>(c)]; }
Bytes Inventory::bytes(TensorClass c) const { return class_bytes_[static_cast<int>(c)]; }
std::int64_t Inventory::active_parameters() const { return active_parameters_; }
std::int32_t Inventory::decoder_layers() const { return static_cast<std::int32_t>(config_.num_hidden_layers); }
std::int32_t Inventory::mtp_layers() const { return mtp_layers_; }
std::int32_t Inventory::layer_count() const { return decoder_layers() + mtp_layers_; }

}  // namespace reshard::model
