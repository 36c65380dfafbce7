// Model architectures and their weight inventory (docs/design.md §5).
//
// An architecture file holds the fields of a Hugging Face config.json; the inventory lists every
// weight tensor with its HF name, shape [out, in] (HF nn.Linear convention), dtype and tensor class, plus
// the structural facts layouts need: the layer, the expert, and the tensor's parallel role (how
// Megatron and vLLM split it) and fusion group (which fused buffer it is a part of).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "reshard/model/delta.hpp"
#include "reshard/model/overrides.hpp"
#include "reshard/model/units.hpp"

namespace reshard::model {

// FP8 is OCP E4M3 (the "FN" variant: no infinities, largest finite 448). E8M0 is the OCP MX scale
// format (an 8-bit biased exponent, value 2^(e - 127)); it appears only as a scale tensor's dtype
// (model/precision.hpp), never as a model's. FP4x2 is a byte holding two OCP E2M1 values (an
// MXFP4 payload: the weight's last dimension halved, Quantization::packed 2), likewise only on the
// way, never a model's dtype.
enum class DType : std::uint8_t { BF16, FP16, FP32, FP8, E8M0, FP4x2 };
std::int64_t dtype_size(DType d);  // bytes per (stored) element

// The largest value any ModelConfig count or dimension may take (hidden size, vocabulary, experts,
// layers...): shipped models stay below 2^18, and with every field at most 2^20 a product of three
// (a tensor's shape) fits in 64 bits. Element and byte totals are summed with overflow checks.
inline constexpr std::int64_t kMaxDimension = 1 << 20;
const char* to_string(DType d);   // "bf16", "fp16", "fp32", "fp8", "e8m0", "fp4x2"
DType parse_dtype(const std::string& s);  // "bf16", "fp16", "fp32", "fp8"; throws std::invalid_argument

enum class TensorClass : std::uint8_t {
  Embedding,
  Attention,
  DenseFFN,
  ExpertFFN,
  SharedExpert,
  Router,
  Norm,
  Mamba,
  Head,
  LinearAttention,  // gated DeltaNet (qwen3_next, qwen3_5): in_proj*, conv1d, A_log, dt_bias, norm, out_proj
  Vision,           // a vision tower and its projector (counted only with InventoryOptions::include_vision)
};
const char* to_string(TensorClass c);  // "embedding", "attention", "dense_ffn", "expert_ffn", ...
std::optional<TensorClass> parse_tensor_class(const std::string& s);
inline constexpr int kTensorClassCount = 11;
static_assert(kDeltaClasses == kTensorClassCount, "DeltaSpec holds a density per tensor class");

// How tensor parallelism splits a tensor in Megatron and vLLM (the two agree on these).
enum class ParallelRole : std::uint8_t {
  Replicated,      // norms, routers, MLA down-projections (q_a, kv_a), Mamba small params
  ColumnParallel,  // split dim 0 (q/k/v, q_b, kv_b, gate/up, in_proj, fc1_latent)
  RowParallel,     // split dim 1 (o, down, out_proj, fc2_latent)
  VocabParallel,   // embedding and lm_head: split dim 0 (vocabulary)
};
const char* to_string(ParallelRole r);

// Which fused buffer a tensor is a segment of, and which part.
enum class FusedPart : std::uint8_t { None, Q, K, V, Gate, Up };
const char* to_string(FusedPart f);  // "", "q", "k", "v", "gate", "up"

// A precision change on the way (model/precision.hpp): how a weight ends up quantised on the
// destination, and where it is converted. A weight quantised at the source travels as FP8 with a
// scale tensor of its own (`scale`); one quantised at the destination travels in its model dtype
// and the destination converts it. A scale tensor names the weight it scales (`scale_of`).
enum class QuantFormat : std::uint8_t { None, Fp8Block, Mxfp8, Mxfp4 };
enum class QuantSite : std::uint8_t { Source, Destination };
struct Quantization {
  QuantFormat format = QuantFormat::None;
  QuantSite site = QuantSite::Source;
  std::int64_t block_rows = 0, block_cols = 0;  // elements one scale covers: 128 x 128, or 1 x 32
  DType model_dtype = DType::BF16;              // a weight's dtype before conversion
  std::int32_t scale = -1;     // a weight quantised at the source: its scale tensor
  std::int32_t scale_of = -1;  // a scale tensor: the weight it scales
  // Model elements per stored element: 2 for an MXFP4 payload quantised at the source (two E2M1
  // values a byte; its shape's last dimension and its boxes are in bytes, its blocks 1 x 16 bytes).
  std::int32_t packed = 1;
  bool converted() const { return format != QuantFormat::None && scale_of < 0; }
};

// An adapter-only (LoRA) refit moves, for each targeted linear weight W [out, in], its two low-rank
// factors: A = `<module>.lora_A.weight` [rank, in] and B = `<module>.lora_B.weight` [out, rank]
// (PEFT's names, under `base_model.model.`). The base weights stay where they are.
enum class LoraPart : std::uint8_t { None, A, B };
const char* to_string(LoraPart p);  // "", "lora_A", "lora_B"

struct TensorInfo {
  std::int32_t id = -1;                // index in Inventory::tensors()
  std::string name;                    // HF name, e.g. "model.layers.3.mlp.experts.17.up_proj.weight"
  std::vector<std::int64_t> shape;     // [out, in] for linear weights; [n] for vectors
  DType dtype = DType::BF16;
  TensorClass cls = TensorClass::Attention;
  ParallelRole role = ParallelRole::Replicated;
  FusedPart fused = FusedPart::None;
  std::int32_t layer = -1;             // decoder layer (0-based; MTP layers follow the last decoder layer); -1 for globals
  std::int32_t expert = -1;            // routed expert index, -1 otherwise
  bool pre_layers = false;             // global placed before layer 0 (embedding)
  // When non-empty, dim 0 is the concatenation of these parts (they sum to shape[0]) and tensor
  // parallelism splits each part separately: rank r of T holds rows [off_p + r*n_p/T,
  // off_p + (r+1)*n_p/T) of every part p (offset off_p, length n_p). Mamba2 `mixer.in_proj` =
  // [z d_inner, x d_inner, B groups*state, C groups*state, dt heads]; `mixer.conv1d.weight`/`bias`
  // = [x d_inner, B groups*state, C groups*state]. Empty for ordinary tensors.
  std::vector<std::int64_t> column_parts;
  // When > 0, dim 0 (each column part when there are several) is that many equal groups that a
  // tensor-parallel split may not cut: heads of a head-interleaved projection (qwen3_next
  // in_proj_qkvz is per key-head group [q; k; v; z]), per-head vectors (sinks, A_log). Layouts
  // require TP to divide it. 0: the layout's own rule (attention heads by class).
  std::int64_t tp_groups = 0;
  bool mtp = false;                    // part of a multi-token-prediction layer
  Quantization quant;                  // None unless the scenario changes its precision
  // A LoRA factor (model/lora.hpp): which one, and the parallel role of the weight it adapts (the
  // framework's split of A and B follows from it). `role` above is vLLM's and SGLang's split.
  LoraPart lora = LoraPart::None;
  ParallelRole base_role = ParallelRole::Replicated;
  std::int64_t elements() const;
  Bytes bytes() const;
};

// The subset of a HF config.json this project reads. Absent fields are 0 / false.
//
// Parameter count per decoder layer (H hidden, V vocabulary; weights [out, in]):
//   GQA attention (qwen3, nemotron_h '*'):  2*heads*hd*H + 2*kv*hd*H  (+ q_norm, k_norm [hd] in qwen3)
//   MLA attention (deepseek_v3):  q_lora*H + heads*(nope+rope)*q_lora + (kv_lora+rope)*H
//                                 + heads*(nope+v)*kv_lora + H*heads*v + q_lora + kv_lora
//   SwiGLU FFN of width I:        3*I*H   (gate, up, down);  ReLU^2 FFN (nemotron_h): 2*I*H
//   MoE layer:  E routed experts + shared experts + router E*H (+ E fp32 bias in deepseek_v3 and
//               nemotron_h); nemotron_h latent MoE runs its experts at width `moe_latent_size`
//               between fc1_latent_proj [latent, H] and fc2_latent_proj [H, latent]
//   Mamba2 (nemotron_h 'M'), d = mamba_num_heads*mamba_head_dim, gs = n_groups*ssm_state_size:
//               in_proj (2d + 2gs + heads)*H + conv1d (d + 2gs)*(conv_kernel + 1)
//               + A_log, D, dt_bias 3*heads + norm d + out_proj H*d
//   Biases (qwen2, llama, glm4_moe, gpt_oss): + q/k/v rows (+ H for o_proj); llama mlp_bias + 2I + H
//   gpt_oss: + sinks [heads]; router E*H + E; expert e: gate_up 2I*H + 2I, down H*I + H
//   gated attention (qwen3_next, qwen3_5): q_proj 2*heads*hd*H (per head [q; gate])
//   gated DeltaNet, kd = nk*dk, vd = nv*dv: (2kd + 2vd)*H + 2nv*H projections, conv1d (2kd + vd)*kernel,
//               dt_bias, A_log 2nv, norm dv, out_proj H*vd; MoE + shared expert + its gate [1, H]
//   DSA indexer (deepseek_v32): n*d*q_lora + d*H + 2d + n*H
//   plus one RMSNorm [H] per norm, and globally V*H embedding, H final norm, V*H lm_head (untied).
struct ModelConfig {
  std::string name;
  // "deepseek_v3", "deepseek_v32", "qwen2", "llama", "qwen3", "qwen3_moe", "glm4_moe", "gpt_oss",
  // "qwen3_next", "qwen3_5", "qwen3_5_moe", "nemotron_h"
  std::string architecture;
  bool synthetic = false;    // a frontier-scale model sized to published totals, not a released config
  std::int64_t hidden_size = 0;
  std::int64_t num_hidden_layers = 0;
  std::int64_t num_attention_heads = 0;
  std::int64_t num_key_value_heads = 0;
  std::int64_t head_dim = 0;
  std::int64_t intermediate_size = 0;      // dense FFN
  std::int64_t moe_intermediate_size = 0;  // routed expert FFN
  std::int64_t shared_expert_intermediate_size = 0;
  std::int64_t n_routed_experts = 0;
  std::int64_t n_shared_experts = 0;
  std::int64_t num_experts_per_tok = 0;
  std::int64_t first_k_dense_replace = 0;
  // The router's expert groups (config.json n_group: DeepSeek-V3 8, Kimi-K2 1); 0 when not given.
  // No weight depends on it; vLLM places experts round-robin only when it is above 1.
  std::int64_t n_group = 0;
  std::int64_t vocab_size = 0;
  bool tie_word_embeddings = false;
  std::int64_t num_nextn_predict_layers = 0;  // MTP
  // MLA
  std::int64_t q_lora_rank = 0;
  std::int64_t kv_lora_rank = 0;
  std::int64_t qk_nope_head_dim = 0;
  std::int64_t qk_rope_head_dim = 0;
  std::int64_t v_head_dim = 0;
  // Mamba (nemotron_h)
  std::string hybrid_override_pattern;  // one char per layer: M Mamba, E MoE, * attention, - dense MLP
  std::int64_t mamba_num_heads = 0;
  std::int64_t mamba_head_dim = 0;
  std::int64_t n_groups = 0;
  std::int64_t ssm_state_size = 0;
  std::int64_t conv_kernel = 0;
  std::int64_t moe_latent_size = 0;
  std::string mtp_hybrid_override_pattern;  // nemotron_h: layer kinds of one MTP step (e.g. "*E")
  bool use_conv_bias = true;                // nemotron_h: Mamba conv1d has a bias
  // Biases and norms of GQA attention and the MLP. qwen2 has q/k/v biases and gpt_oss q/k/v/o
  // biases whatever these say; llama reads attention_bias (q/k/v/o) and mlp_bias (gate/up/down);
  // glm4_moe reads attention_bias (q/k/v only) and use_qk_norm (q_norm, k_norm [head_dim]).
  bool attention_bias = false;
  bool mlp_bias = false;
  bool use_qk_norm = false;
  // Gated DeltaNet (qwen3_next, qwen3_5): kd = key heads * key head dim, vd = value heads * value
  // head dim. `layer_types`: one char per decoder layer, 'L' linear attention (DeltaNet) or 'F'
  // full (gated) attention, from config.json layer_types or full_attention_interval.
  std::int64_t linear_num_key_heads = 0;
  std::int64_t linear_num_value_heads = 0;
  std::int64_t linear_key_head_dim = 0;
  std::int64_t linear_value_head_dim = 0;
  std::int64_t linear_conv_kernel_dim = 0;
  std::string layer_types;
  // DeepSeek sparse attention's indexer (deepseek_v32): heads and head dim.
  std::int64_t index_n_heads = 0;
  std::int64_t index_head_dim = 0;
  // Where the text model's tensors live in the checkpoint: `model_prefix` before embed_tokens,
  // layers and norm ("model." for a causal LM, "model.language_model." for Qwen3.5,
  // "language_model.model." for Kimi K2.5), `head_name` the output head.
  std::string model_prefix = "model.";
  std::string head_name = "lm_head.weight";
  // A vision tower beside the text model (config.json vision_config): counted only with
  // InventoryOptions::include_vision. `vision_kind` "qwen3_vl" is the Qwen3-VL ViT Qwen3.5 ships
  // (modelled, tensor by tensor); "moonvit" is Kimi K2.5's MoonViT (not modelled: refused when asked).
  struct Vision {
    std::string kind;  // "" none
    std::int64_t depth = 0, hidden_size = 0, intermediate_size = 0, num_heads = 0, patch_size = 0,
                 temporal_patch_size = 0, in_channels = 0, spatial_merge_size = 0, out_hidden_size = 0,
                 num_position_embeddings = 0;
  } vision;
  DType dtype = DType::BF16;
  // Attention with an output gate (qwen3_next, qwen3_5, qwen3_5_moe): q_proj holds [q; gate] per
  // head, so a head is 2 * head_dim rows of q_proj.
  bool gated_attention() const {
    return architecture == "qwen3_next" || architecture == "qwen3_5" || architecture == "qwen3_5_moe";
  }
  std::int64_t q_head_rows() const { return head_dim * (gated_attention() ? 2 : 1); }
  // Read from a Hugging Face config.json: its keys reshard does not use, in file order (rope,
  // routing, token ids...). Empty for a models/*.yaml file, where such a key is an error.
  std::vector<std::string> ignored_keys;
  // Read from a config.json: "FILE:LINE: KEY: ..." for a key reshard does not know (a typo of a key
  // it reads names that key). The library returns them; the command line prints them.
  std::vector<std::string> warnings;
};

// An adapter-only refit (a scenario's `lora:`): the rank r of every adapter, its scaling alpha
// (alpha / r multiplies B's output; no shape depends on it) and the modules adapted, by the name of
// the linear layer (`q_proj`, `o_proj`, `gate_proj`, ...; PEFT's target_modules).
struct LoraSpec {
  std::int64_t rank = 0;
  double alpha = 0;
  std::vector<std::string> target_modules;
};

struct InventoryOptions {
  // Overrides the file's dtype for every weight that is not fp32 by nature (e.g. the DeepSeek-V3
  // router bias stays fp32).
  std::optional<DType> dtype;
  // MTP (multi-token prediction) layers are not part of the published totals (DeepSeek-V3 671.03 B
  // excludes its 11.6 B MTP layer); include them only when asked. They follow the decoder layers
  // (layer num_hidden_layers, ...). DeepSeek-V3's checkpoint also stores a copy of the embedding
  // and the output head in its MTP layer (`model.layers.61.embed_tokens`, `shared_head.head`,
  // 2 x 0.93 B), listed here too, so with MTP the total is 671.03 + 11.61 + 1.85 = 684.49 B.
  bool include_mtp = false;
  // The vision tower of a model that has one (Qwen3.5's `model.visual`): left out unless asked, as
  // an RL refit of the language model leaves a frozen tower in place. Asking for it on a model
  // whose tower reshard does not model (Kimi K2.5's MoonViT) is a ConfigError.
  bool include_vision = false;
  // The inventory of the LoRA adapters of the model instead of its weights (model/lora.hpp).
  std::optional<LoraSpec> lora;
};

class Inventory {
 public:
  // Reads an architecture file and builds the inventory: a models/*.yaml file, a Hugging Face
  // config.json (any *.json file), or a folder holding a config.json. Throws ConfigError (file,
  // line, key) on a missing or bad field.
  static Inventory load(const std::filesystem::path& path, const InventoryOptions& options = {});
  // The file with `overrides` (keys from its root: num_hidden_layers) applied first.
  static Inventory load(const std::filesystem::path& path, const InventoryOptions& options,
                        const std::vector<Override>& overrides);
  static Inventory parse(const std::string& yaml_text, const std::string& name,
                         const InventoryOptions& options = {});
  static Inventory build(const ModelConfig& config, const InventoryOptions& options = {});
  // The same model with its tensor list replaced (ids = positions; totals recounted): the wire
  // inventory of a precision change (model/precision.hpp).
  Inventory with_tensors(std::vector<TensorInfo> tensors) const;

  const ModelConfig& config() const { return config_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo& tensor(std::int32_t id) const { return tensors_.at(static_cast<std::size_t>(id)); }
  const TensorInfo* find(const std::string& name) const;

  std::int64_t parameters() const;
  Bytes bytes() const;
  std::int64_t parameters(TensorClass c) const;
  Bytes bytes(TensorClass c) const;
  // Parameters one token passes through: every non-expert weight plus, in each MoE layer, the
  // num_experts_per_tok routed experts (all experts of a layer have the same size):
  //   active = parameters - sum over MoE layers of (n_routed - top_k) * (parameters of one expert).
  std::int64_t active_parameters() const;
  std::int32_t layer_count() const;  // decoder layers plus MTP layers (the units PP splits)
  std::int32_t decoder_layers() const;  // num_hidden_layers
  std::int32_t mtp_layers() const;      // layers after the decoder layers (0 without include_mtp)
  bool includes_mtp() const { return include_mtp_; }
  bool includes_vision() const { return include_vision_; }
  // The LoRA adapters this inventory lists in place of the weights (null for the weights).
  const LoraSpec* lora() const { return lora_ ? &*lora_ : nullptr; }
  // A delta refit (model/delta.hpp): the densities and encoding of what travels; none by default.
  const DeltaSpec& delta() const { return delta_; }
  void set_delta(const DeltaSpec& d) { delta_ = d; }
  // The bytes `elements` elements of tensor t travel as: their encoded bytes in a delta refit
  // (DeltaSpec::encoded), else elements x the dtype's size. The one place a transfer's dense bytes
  // become what it carries.
  Bytes wire_bytes(const TensorInfo& t, std::int64_t elements) const;

 private:
  void count();  // the totals and the name index, from tensors_
  ModelConfig config_;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string, std::int32_t> by_name_;
  bool include_mtp_ = false;
  bool include_vision_ = false;
  std::optional<LoraSpec> lora_;
  DeltaSpec delta_;
  std::int32_t mtp_layers_ = 0;
  friend Inventory lora_adapters(const Inventory& base, const LoraSpec& spec);
  // Totals, summed once when the inventory is built.
  std::int64_t parameters_ = 0;
  std::int64_t active_parameters_ = 0;
  Bytes bytes_{};
  std::int64_t class_parameters_[kTensorClassCount] = {};
  Bytes class_bytes_[kTensorClassCount] = {};
};

}  // namespace reshard::model
