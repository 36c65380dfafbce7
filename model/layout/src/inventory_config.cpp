// Architecture files. Two spellings of the same fields:
//   - models/*.yaml: the fields of a Hugging Face config.json, named as there, plus `architecture`
//     and `dtype`; anything the architecture does not take is an unknown key (a typo is an error).
//   - a Hugging Face config.json (or a folder holding one): `model_type` (else `architectures[0]`)
//     selects the architecture, `torch_dtype` (or `dtype`) the weights' dtype; keys reshard does not
//     use (rope, routing, token ids...) are kept in ModelConfig::ignored_keys, not refused. Settings
//     that change the weights in ways reshard does not model (attention biases, dense layers between
//     MoE layers other than DeepSeek's first_k_dense_replace) are refused by name.
// Which fields an architecture takes, and which it requires, is the table below. Every problem is
// one ConfigError naming the file, the line and the key.
#include <algorithm>
#include <optional>
#include <utility>
#include <stdexcept>
#include <string>
#include <vector>

#include "reshard/model/checked.hpp"
#include "reshard/model/errors.hpp"
#include "reshard/model/inventory.hpp"
#include "reshard/model/yaml_reader.hpp"

namespace reshard::model {

namespace {

enum class Kind { Positive, NonNegative, Boolean, Text, Custom /* read apart */ };

struct Field {
  const char* key;  // HF config.json name
  Kind kind;
  std::int64_t ModelConfig::* integer = nullptr;
  bool ModelConfig::* flag = nullptr;
  std::string ModelConfig::* text = nullptr;
};

constexpr Field pos(const char* k, std::int64_t ModelConfig::* m) { return {k, Kind::Positive, m, nullptr, nullptr}; }
constexpr Field cnt(const char* k, std::int64_t ModelConfig::* m) { return {k, Kind::NonNegative, m, nullptr, nullptr}; }
constexpr Field flag(const char* k, bool ModelConfig::* m) { return {k, Kind::Boolean, nullptr, m, nullptr}; }
constexpr Field text(const char* k, std::string ModelConfig::* m) { return {k, Kind::Text, nullptr, nullptr, m}; }

using C = ModelConfig;

// Keys every architecture takes (name, architecture, dtype, synthetic are handled apart).
const std::vector<Field> kCommon = {
    pos("hidden_size", &C::hidden_size),
    pos("num_hidden_layers", &C::num_hidden_layers),
    pos("vocab_size", &C::vocab_size),
    flag("tie_word_embeddings", &C::tie_word_embeddings),
};

struct Architecture {
  const char* name;
  std::vector<Field> fields;
  std::vector<const char*> required;  // beyond hidden_size, num_hidden_layers, vocab_size
};

// DeepSeek-V3 (and Kimi K2) and DeepSeek-V3.2, which adds the sparse attention's indexer sizes
// (its wq_b reads the q LoRA output, so q_lora_rank is required there).
std::vector<Field> deepseek_fields(bool indexer) {
  std::vector<Field> f = {
      pos("num_attention_heads", &C::num_attention_heads), pos("num_key_value_heads", &C::num_key_value_heads),
      cnt("q_lora_rank", &C::q_lora_rank), pos("kv_lora_rank", &C::kv_lora_rank),
      pos("qk_nope_head_dim", &C::qk_nope_head_dim), pos("qk_rope_head_dim", &C::qk_rope_head_dim),
      pos("v_head_dim", &C::v_head_dim), pos("intermediate_size", &C::intermediate_size),
      pos("moe_intermediate_size", &C::moe_intermediate_size), pos("n_routed_experts", &C::n_routed_experts),
      cnt("n_shared_experts", &C::n_shared_experts), pos("num_experts_per_tok", &C::num_experts_per_tok),
      cnt("first_k_dense_replace", &C::first_k_dense_replace),
      cnt("num_nextn_predict_layers", &C::num_nextn_predict_layers), cnt("n_group", &C::n_group)};
  if (indexer)
    for (const Field& x : {pos("index_n_heads", &C::index_n_heads), pos("index_head_dim", &C::index_head_dim)})
      f.push_back(x);
  return f;
}
std::vector<const char*> deepseek_required(bool indexer) {
  std::vector<const char*> r = {"num_attention_heads", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim",
                                "v_head_dim", "moe_intermediate_size", "n_routed_experts", "num_experts_per_tok"};
  if (indexer)
    for (const char* k : {"q_lora_rank", "index_n_heads", "index_head_dim"}) r.push_back(k);
  return r;
}

// The gated DeltaNet hybrids (qwen3_next, qwen3_5, qwen3_5_moe): layer_types (a list of
// "linear_attention" / "full_attention") or full_attention_interval say which layer is which.
std::vector<Field> hybrid_fields(bool moe) {
  std::vector<Field> f = {
      pos("num_attention_heads", &C::num_attention_heads), pos("num_key_value_heads", &C::num_key_value_heads),
      pos("head_dim", &C::head_dim), pos("intermediate_size", &C::intermediate_size),
      pos("linear_num_key_heads", &C::linear_num_key_heads), pos("linear_num_value_heads", &C::linear_num_value_heads),
      pos("linear_key_head_dim", &C::linear_key_head_dim), pos("linear_value_head_dim", &C::linear_value_head_dim),
      pos("linear_conv_kernel_dim", &C::linear_conv_kernel_dim), flag("attention_bias", &C::attention_bias),
      cnt("mtp_num_hidden_layers", &C::num_nextn_predict_layers), {"layer_types", Kind::Custom},
      {"full_attention_interval", Kind::Custom}};
  if (moe)
    for (const Field& x : {pos("moe_intermediate_size", &C::moe_intermediate_size), pos("num_experts", &C::n_routed_experts),
                           pos("num_experts_per_tok", &C::num_experts_per_tok),
                           pos("shared_expert_intermediate_size", &C::shared_expert_intermediate_size)})
      f.push_back(x);
  return f;
}
std::vector<const char*> hybrid_required(bool moe) {
  std::vector<const char*> r = {"num_attention_heads", "num_key_value_heads", "head_dim", "linear_num_key_heads",
                                "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim",
                                "linear_conv_kernel_dim"};
  if (moe)
    for (const char* k : {"moe_intermediate_size", "num_experts", "num_experts_per_tok", "shared_expert_intermediate_size"})
      r.push_back(k);
  else
    r.push_back("intermediate_size");
  return r;
}

const std::vector<Architecture>& architectures() {
  static const std::vector<Architecture> table = {
      {"deepseek_v3", deepseek_fields(false), deepseek_required(false)},
      {"qwen3",
       {pos("num_attention_heads", &C::num_attention_heads), pos("num_key_value_heads", &C::num_key_value_heads),
        pos("head_dim", &C::head_dim), pos("intermediate_size", &C::intermediate_size)},
       {"num_attention_heads", "num_key_value_heads", "head_dim", "intermediate_size"}},
      {"qwen3_moe",
       {pos("num_attention_heads", &C::num_attention_heads), pos("num_key_value_heads", &C::num_key_value_heads),
        pos("head_dim", &C::head_dim), pos("intermediate_size", &C::intermediate_size),
        pos("moe_intermediate_size", &C::moe_intermediate_size), pos("num_experts", &C::n_routed_experts),
        pos("num_experts_per_tok", &C::num_experts_per_tok)},
       {"num_attention_heads", "num_key_value_heads", "head_dim", "moe_intermediate_size", "num_experts",
        "num_experts_per_tok"}},
      {"deepseek_v32", deepseek_fields(true), deepseek_required(true)},
      {"qwen2",
       {pos("num_attention_heads", &C::num_attention_heads), pos("num_key_value_heads", &C::num_key_value_heads),
        pos("head_dim", &C::head_dim), pos("intermediate_size", &C::intermediate_size)},
       {"num_attention_heads", "num_key_value_heads", "intermediate_size"}},
      {"llama",
       {pos("num_attention_heads", &C::num_attention_heads), pos("num_key_value_heads", &C::num_key_value_heads),
        pos("head_dim", &C::head_dim), pos("intermediate_size", &C::intermediate_size),
        flag("attention_bias", &C::attention_bias), flag("mlp_bias", &C::mlp_bias)},
       {"num_attention_heads", "num_key_value_heads", "intermediate_size"}},
      {"glm4_moe",
       {pos("num_attention_heads", &C::num_attention_heads), pos("num_key_value_heads", &C::num_key_value_heads),
        pos("head_dim", &C::head_dim), pos("intermediate_size", &C::intermediate_size),
        pos("moe_intermediate_size", &C::moe_intermediate_size), pos("n_routed_experts", &C::n_routed_experts),
        cnt("n_shared_experts", &C::n_shared_experts), pos("num_experts_per_tok", &C::num_experts_per_tok),
        cnt("first_k_dense_replace", &C::first_k_dense_replace),
        cnt("num_nextn_predict_layers", &C::num_nextn_predict_layers), cnt("n_group", &C::n_group),
        flag("attention_bias", &C::attention_bias), flag("use_qk_norm", &C::use_qk_norm)},
       {"num_attention_heads", "num_key_value_heads", "head_dim", "moe_intermediate_size", "n_routed_experts",
        "num_experts_per_tok"}},
      {"gpt_oss",
       {pos("num_attention_heads", &C::num_attention_heads), pos("num_key_value_heads", &C::num_key_value_heads),
        pos("head_dim", &C::head_dim), pos("intermediate_size", &C::intermediate_size),
        pos("num_local_experts", &C::n_routed_experts), pos("num_experts_per_tok", &C::num_experts_per_tok),
        flag("attention_bias", &C::attention_bias)},
       {"num_attention_heads", "num_key_value_heads", "head_dim", "intermediate_size", "num_local_experts",
        "num_experts_per_tok"}},
      {"qwen3_next", hybrid_fields(true), hybrid_required(true)},
      {"qwen3_5", hybrid_fields(false), hybrid_required(false)},
      {"qwen3_5_moe", hybrid_fields(true), hybrid_required(true)},
      {"nemotron_h",
       {text("hybrid_override_pattern", &C::hybrid_override_pattern),
        pos("num_attention_heads", &C::num_attention_heads), pos("num_key_value_heads", &C::num_key_value_heads),
        pos("head_dim", &C::head_dim), pos("intermediate_size", &C::intermediate_size),
        pos("mamba_num_heads", &C::mamba_num_heads), pos("mamba_head_dim", &C::mamba_head_dim),
        pos("n_groups", &C::n_groups), pos("ssm_state_size", &C::ssm_state_size),
        pos("conv_kernel", &C::conv_kernel), flag("use_conv_bias", &C::use_conv_bias),
        pos("n_routed_experts", &C::n_routed_experts), cnt("n_shared_experts", &C::n_shared_experts),
        pos("num_experts_per_tok", &C::num_experts_per_tok), pos("moe_intermediate_size", &C::moe_intermediate_size),
        pos("moe_shared_expert_intermediate_size", &C::shared_expert_intermediate_size),
        pos("moe_latent_size", &C::moe_latent_size),
        cnt("num_nextn_predict_layers", &C::num_nextn_predict_layers),
        text("mtp_hybrid_override_pattern", &C::mtp_hybrid_override_pattern), cnt("n_group", &C::n_group)},
       {"hybrid_override_pattern"}},
  };
  return table;
}

void read_field(const yaml::Node& n, const Field& f, ModelConfig& c) {
  switch (f.kind) {
    case Kind::Positive: c.*f.integer = n.integer_in(1, kMaxDimension); break;
    case Kind::NonNegative: c.*f.integer = n.integer_in(0, kMaxDimension); break;
    case Kind::Boolean: c.*f.flag = n.boolean(); break;
    case Kind::Text: c.*f.text = n.str(); break;
    case Kind::Custom: break;
  }
}

// Keys a nemotron_h layer kind needs, in the order they are reported when missing.
std::vector<const char*> nemotron_needs(char kind, const ModelConfig& c) {
  switch (kind) {
    case 'M': return {"mamba_num_heads", "mamba_head_dim", "n_groups", "ssm_state_size", "conv_kernel"};
    case '*': return {"num_attention_heads", "num_key_value_heads", "head_dim"};
    case 'E': {
      std::vector<const char*> v = {"n_routed_experts", "num_experts_per_tok", "moe_intermediate_size"};
      if (c.n_shared_experts > 0) v.push_back("moe_shared_expert_intermediate_size");
      return v;
    }
    case '-': return {"intermediate_size"};
    default: return {};
  }
}

void check_pattern(const yaml::Node& n, const std::string& pattern, std::int64_t expected_length,
                   const char* length_of) {
  for (const char k : pattern)
    if (k != 'M' && k != 'E' && k != '*' && k != '-')
      n.fail(std::string("unknown layer kind '") + k + "' (expected M Mamba, E MoE, * attention, - MLP)");
  if (expected_length >= 0 && static_cast<std::int64_t>(pattern.size()) != expected_length)
    n.fail("has " + std::to_string(pattern.size()) + " layers, " + length_of + " is " +
           std::to_string(expected_length));
  if (pattern.empty()) n.fail("must not be empty");
}

// Hugging Face names: model_type, then architectures[0], to reshard's architecture.
const std::vector<std::pair<std::string, std::string>> kHfModelTypes = {
    {"deepseek_v3", "deepseek_v3"},   {"kimi_k2", "deepseek_v3"},    {"deepseek_v32", "deepseek_v32"},
    {"qwen2", "qwen2"},               {"llama", "llama"},            {"qwen3", "qwen3"},
    {"qwen3_moe", "qwen3_moe"},       {"glm4_moe", "glm4_moe"},      {"gpt_oss", "gpt_oss"},
    {"qwen3_next", "qwen3_next"},     {"qwen3_5_text", "qwen3_5"},   {"qwen3_5_moe_text", "qwen3_5_moe"},
    {"nemotron_h", "nemotron_h"}};
const std::vector<std::pair<std::string, std::string>> kHfClasses = {
    {"DeepseekV3ForCausalLM", "deepseek_v3"}, {"DeepseekV32ForCausalLM", "deepseek_v32"},
    {"Qwen2ForCausalLM", "qwen2"},            {"LlamaForCausalLM", "llama"},
    {"Qwen3ForCausalLM", "qwen3"},            {"Qwen3MoeForCausalLM", "qwen3_moe"},
    {"Glm4MoeForCausalLM", "glm4_moe"},       {"GptOssForCausalLM", "gpt_oss"},
    {"Qwen3NextForCausalLM", "qwen3_next"},   {"Qwen3_5ForCausalLM", "qwen3_5"},
    {"Qwen3_5MoeForCausalLM", "qwen3_5_moe"}, {"NemotronHForCausalLM", "nemotron_h"}};

// A multimodal config that nests its language model under `text_config` beside a `vision_config`:
// the architecture (empty: the text_config's own model_type says it), where its tensors live in the
// checkpoint, and which vision tower it has. Qwen3.5 (transformers Qwen3_5ForConditionalGeneration:
// model.language_model.*, model.visual.*, lm_head), Kimi K2.5 (KimiK25ForConditionalGeneration:
// language_model.model.*, language_model.lm_head, vision_tower.*, mm_projector.*; vLLM kimi_k25.py
// load_weights).
struct Wrapper {
  const char* model_type;
  const char* hf_class;
  const char* architecture;
  const char* model_prefix;
  const char* head_name;
  const char* vision_kind;
};
constexpr Wrapper kWrappers[] = {
    {"qwen3_5", "Qwen3_5ForConditionalGeneration", "qwen3_5", "model.language_model.", "lm_head.weight", "qwen3_vl"},
    {"qwen3_5_moe", "Qwen3_5MoeForConditionalGeneration", "qwen3_5_moe", "model.language_model.", "lm_head.weight",
     "qwen3_vl"},
    {"kimi_k25", "KimiK25ForConditionalGeneration", "", "language_model.model.", "language_model.lm_head.weight",
     "moonvit"},
};

std::string lookup(const std::vector<std::pair<std::string, std::string>>& table, const std::string& key) {
  for (const auto& [k, v] : table)
    if (k == key) return v;
  return "";
}

std::string known_names(const std::vector<std::pair<std::string, std::string>>& table, bool classes) {
  std::string s;
  for (const auto& [k, v] : table) s += (s.empty() ? "" : ", ") + k;
  for (const auto& w : kWrappers) s += std::string(", ") + (classes ? w.hf_class : w.model_type);
  return s;
}

// The architecture a config.json describes, the node that said so (for messages), and the wrapper
// when the language model is nested under text_config.
struct HfArchitecture {
  std::string architecture;
  yaml::Node node;
  const Wrapper* wrapper = nullptr;
};
HfArchitecture hf_architecture(const yaml::Node& root) {
  const auto type = root.get("model_type");
  if (type) {
    for (const auto& w : kWrappers)
      if (type->str() == w.model_type) return {w.architecture, *type, &w};
    const std::string arch = lookup(kHfModelTypes, type->str());
    if (!arch.empty()) return {arch, *type, nullptr};
  }
  if (const auto classes = root.get("architectures")) {
    for (const auto& item : classes->items()) {
      for (const auto& w : kWrappers)
        if (item.str() == w.hf_class) return {w.architecture, item, &w};
      const std::string arch = lookup(kHfClasses, item.str());
      if (!arch.empty()) return {arch, item, nullptr};
    }
    if (!type)
      classes->fail("no known architecture class; known: " + known_names(kHfClasses, true));
  }
  if (type)
    type->fail("unknown model_type '" + type->str() + "'; known: " + known_names(kHfModelTypes, false) +
               " (or an architectures entry " + known_names(kHfClasses, true) + ")");
  throw ConfigError(root.file(), root.line(), "model_type",
                    "required key is missing (a Hugging Face config.json names model_type or architectures)");
}

// torch_dtype / dtype of a config.json ("bfloat16", "float16", "float32").
DType hf_dtype(const yaml::Node& n) {
  const std::string s = n.str();
  if (s == "bfloat16") return DType::BF16;
  if (s == "float16") return DType::FP16;
  if (s == "float32") return DType::FP32;
  n.fail("unknown dtype '" + s + "'; expected bfloat16, float16 or float32");
}

// config.json settings whose weights reshard does not model: refused with the reason.
void refuse_unmodelled(const yaml::Node& root, const std::string& architecture) {
  // Bias keys an architecture reads (ModelConfig::attention_bias, mlp_bias) are not refused; qwen2
  // has its q/k/v biases whatever attention_bias says (transformers Qwen2Attention, bias=True).
  const bool reads_attention_bias = architecture == "llama" || architecture == "glm4_moe" ||
                                    architecture == "gpt_oss" || architecture == "qwen3_next" ||
                                    architecture == "qwen3_5" || architecture == "qwen3_5_moe";
  for (const char* key : {"attention_bias", "mlp_bias", "mamba_proj_bias", "use_bias"}) {
    if (std::string(key) == "attention_bias" && (reads_attention_bias || architecture == "qwen2")) continue;
    if (std::string(key) == "mlp_bias" && architecture == "llama") continue;
    if (auto n = root.get(key); n && n->boolean())
      n->fail("biases of linear layers are not modelled for " + architecture +
              " (the inventory lists its weights without these bias tensors)");
  }
  if (architecture == "qwen3_moe" || architecture == "qwen3_next" || architecture == "qwen3_5_moe") {
    if (auto n = root.get("mlp_only_layers"); n && n->is_seq() && n->size() > 0)
      n->fail("dense layers among the MoE layers are not modelled; every layer must be MoE (an empty list)");
    if (auto n = root.get("decoder_sparse_step"); n && n->integer() != 1)
      n->fail("must be 1 (every layer MoE); a sparser MoE layout is not modelled");
  }
  if (architecture == "qwen3_next" || architecture == "qwen3_5" || architecture == "qwen3_5_moe")
    if (auto n = root.get("attn_output_gate"); n && !n->boolean())
      n->fail("an attention without its output gate is not modelled (q_proj carries [q; gate] per head)");
  if (architecture == "deepseek_v3" || architecture == "deepseek_v32")
    if (auto n = root.get("moe_layer_freq"); n && n->integer() != 1)
      n->fail("must be 1 (every layer after first_k_dense_replace is MoE); other layouts are not modelled");
}

// config.json keys of the released models that no weight depends on (rope, routing, token ids,
// training settings): ignored without a word. Any other key reshard does not read draws a warning,
// naming the read key it most likely meant: a typo in an optional key (`first_k_dense_replac`)
// would otherwise leave that key at its default and change the model silently.
const std::vector<std::string>& known_unused_hf_keys() {
  static const std::vector<std::string> keys = {
      "_name_or_path", "transformers_version", "use_cache", "bos_token_id", "eos_token_id", "pad_token_id",
      "rope_theta", "rope_scaling", "max_position_embeddings", "initializer_range", "rms_norm_eps", "norm_eps",
      "layer_norm_epsilon", "hidden_act", "mlp_hidden_act", "mamba_hidden_act", "attention_dropout", "hidden_dropout",
      "attention_bias", "mlp_bias", "mamba_proj_bias", "use_bias", "auto_map", "quantization_config", "sliding_window",
      "use_sliding_window", "max_window_layers", "norm_topk_prob", "routed_scaling_factor", "topk_group", "n_group",
      "topk_method", "scoring_func", "seq_aux", "aux_loss_alpha", "router_aux_loss_coef", "output_router_logits",
      "moe_layer_freq", "ep_size", "pretraining_tp", "num_logits_to_keep", "mlp_only_layers", "decoder_sparse_step",
      "use_mamba_kernels", "time_step_min", "time_step_max", "time_step_floor", "time_step_limit", "residual_in_fp32",
      "rescale_prenorm_residual", "partial_rotary_factor", "mamba_ssm_cache_dtype", "expand", "chunk_size",
      "torch_dtype", "dtype", "model_type", "architectures", "tie_word_embeddings", "head_dim", "rope_interleave",
      "tokenizer_class", "vocab_file", "sliding_window_pattern", "qk_layernorm", "num_experts_per_tok",
      "moe_intermediate_size", "attention_probs_dropout_prob", "hidden_dropout_prob", "is_decoder", "use_return_dict",
      "n_routed_experts", "n_shared_experts", "first_k_dense_replace", "num_nextn_predict_layers", "interleaved_sliding_window",
      "rope_parameters", "layer_types", "experts_per_token", "swiglu_limit", "initial_context_length", "index_topk",
      "attn_output_gate", "mamba_ssm_dtype", "mtp_use_dedicated_embeddings", "full_attention_interval",
      "image_token_id", "video_token_id", "vision_start_token_id", "vision_end_token_id", "media_placeholder_token_id",
      "use_unified_vision_chunk", "video_placeholder", "use_qk_norm", "attention_chunk_size"};
  return keys;
}

std::string ignored_key_warning(const yaml::Node& node, const std::string& key, const std::vector<std::string>& read,
                                const yaml::Node& root, const std::string& architecture) {
  const std::string near = checked::closest_name(key, read);
  const std::string at = node.file() + ":" + std::to_string(node.line()) + ": " + key + ": ";
  if (!near.empty() && !root.get(near))
    return at + "not a key reshard reads for " + architecture + "; did you mean " + near + "? (" + near +
           " is absent, so it takes its default)";
  const auto& unused = known_unused_hf_keys();
  if (std::find(unused.begin(), unused.end(), key) != unused.end()) return {};
  return at + "not a key reshard knows for " + architecture + "; ignored (no weight is taken to depend on it)";
}

// The layer kinds of a gated DeltaNet hybrid, one char per layer ('L' linear attention, 'F' full
// attention): config.json layer_types when given, else full_attention_interval n (transformers
// Qwen3NextConfig: layer i is full attention when (i + 1) % n == 0).
std::string hybrid_layer_types(const yaml::Node& src, std::int64_t layers) {
  std::string kinds;
  if (auto n = src.get("layer_types")) {
    for (const auto& item : n->items()) {
      const std::string k = item.str();
      if (k == "linear_attention") kinds += 'L';
      else if (k == "full_attention") kinds += 'F';
      else item.fail("unknown layer type '" + k + "'; expected linear_attention or full_attention");
    }
    if (static_cast<std::int64_t>(kinds.size()) != layers)
      n->fail("lists " + std::to_string(kinds.size()) + " layers, num_hidden_layers is " + std::to_string(layers));
    return kinds;
  }
  const auto n = src.get("full_attention_interval");
  if (!n)
    throw ConfigError(src.file(), src.line(), "layer_types",
                      "required key is missing (give layer_types or full_attention_interval)");
  const std::int64_t every = n->integer_in(1, kMaxDimension);
  for (std::int64_t i = 0; i < layers; ++i) kinds += (i + 1) % every == 0 ? 'F' : 'L';
  return kinds;
}

// The vision tower of a wrapper config (vision_config): Qwen3.5's Qwen3-VL ViT is read field by
// field (a missing one is reported when include_vision asks for the tower); MoonViT is only named.
void read_vision(const yaml::Node& v, const std::string& kind, ModelConfig& c) {
  c.vision.kind = kind;
  if (kind != "qwen3_vl") return;
  auto& x = c.vision;
  for (const auto& [key, member] : std::initializer_list<std::pair<const char*, std::int64_t ModelConfig::Vision::*>>{
           {"depth", &ModelConfig::Vision::depth}, {"hidden_size", &ModelConfig::Vision::hidden_size},
           {"intermediate_size", &ModelConfig::Vision::intermediate_size}, {"num_heads", &ModelConfig::Vision::num_heads},
           {"patch_size", &ModelConfig::Vision::patch_size},
           {"temporal_patch_size", &ModelConfig::Vision::temporal_patch_size},
           {"in_channels", &ModelConfig::Vision::in_channels},
           {"spatial_merge_size", &ModelConfig::Vision::spatial_merge_size},
           {"out_hidden_size", &ModelConfig::Vision::out_hidden_size},
           {"num_position_embeddings", &ModelConfig::Vision::num_position_embeddings}})
    if (auto n = v.get(key)) x.*member = n->integer_in(1, kMaxDimension);
  if (auto n = v.get("deepstack_visual_indexes"); n && n->is_seq() && n->size() > 0)
    n->fail("deepstack mergers are not modelled (Qwen3.5's tower has none)");
}

// `hf`: a Hugging Face config.json (see the top of this file).
ModelConfig read_config(const yaml::Node& root, const std::string& default_name, bool hf) {
  ModelConfig c;
  c.name = default_name;
  const auto& table = architectures();
  std::optional<yaml::Node> hf_node;
  // The node holding the model's fields: the root, or a wrapper's text_config.
  std::optional<yaml::Node> text;
  const Wrapper* wrapper = nullptr;
  if (hf) {
    auto found = hf_architecture(root);
    c.architecture = found.architecture;
    hf_node = found.node;
    wrapper = found.wrapper;
    if (wrapper) {
      text = root.get("text_config");
      if (!text || !text->is_map())
        found.node.fail(std::string(wrapper->model_type) + " nests its language model under text_config, which is " +
                        (text ? "not a mapping" : "missing"));
      c.model_prefix = wrapper->model_prefix;
      c.head_name = wrapper->head_name;
      if (c.architecture.empty()) {  // Kimi K2.5: the text_config's model_type
        const auto t = text->get("model_type");
        if (!t) throw ConfigError(root.file(), text->line(), "text_config.model_type", "required key is missing");
        c.architecture = lookup(kHfModelTypes, t->str());
        if (c.architecture != "deepseek_v3")
          t->fail("a " + std::string(wrapper->model_type) + " text_config must be kimi_k2 or deepseek_v3, got " +
                  checked::quote(t->str()));
        hf_node = *t;
      }
      if (auto v = root.get("vision_config")) read_vision(*v, wrapper->vision_kind, c);
    }
  }
  const yaml::Node src = text ? *text : root;
  const yaml::Node arch_node = hf ? *hf_node : root.at("architecture");
  if (!hf) c.architecture = arch_node.str();
  const auto arch = std::find_if(table.begin(), table.end(),
                                 [&](const Architecture& a) { return c.architecture == a.name; });
  if (arch == table.end()) {
    std::string known;
    for (const auto& a : table) known += (known.empty() ? "" : ", ") + std::string(a.name);
    arch_node.fail("unknown architecture '" + c.architecture + "'; known: " + known);
  }

  std::vector<std::string> allowed = hf ? std::vector<std::string>{"model_type", "architectures", "torch_dtype", "dtype"}
                                        : std::vector<std::string>{"name", "architecture", "dtype", "synthetic"};
  for (const auto& f : kCommon) allowed.emplace_back(f.key);
  for (const auto& f : arch->fields) allowed.emplace_back(f.key);
  // gpt-oss: attention_bias defaults to true (transformers GptOssConfig); the released config says so.
  if (c.architecture == "gpt_oss") c.attention_bias = true;
  if (hf) {
    refuse_unmodelled(src, c.architecture);
    for (const auto& [key, node] : src.entries())
      if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
        c.ignored_keys.push_back(key);
        if (std::string w = ignored_key_warning(node, key, allowed, src, c.architecture); !w.empty())
          c.warnings.push_back(std::move(w));
      }
    if (text) {  // the wrapper's own keys: token ids and the vision tower's settings
      for (const auto& [key, node] : root.entries())
        if (key != "text_config" && key != "vision_config" &&
            std::find(allowed.begin(), allowed.end(), key) == allowed.end())
          c.ignored_keys.push_back(key);
    }
    // torch_dtype (transformers 4) or dtype (transformers 5); a wrapper's text_config may say it too.
    for (const yaml::Node& n : text ? std::vector<yaml::Node>{root, *text} : std::vector<yaml::Node>{root})
      for (const char* key : {"torch_dtype", "dtype"})
        if (auto d = n.get(key)) c.dtype = hf_dtype(*d);
  } else {
    root.allow_only(allowed);
    if (auto n = root.get("name")) c.name = n->str();
    if (auto n = root.get("synthetic")) c.synthetic = n->boolean();
    if (auto n = root.get("dtype")) {
      try {
        c.dtype = parse_dtype(n->str());
      } catch (const std::invalid_argument& e) {
        n->fail(e.what());
      }
    }
  }
  const auto missing = [&](const std::string& key, const std::string& why) {
    throw ConfigError(root.file(), arch_node.line(), key,
                      "required key is missing (architecture " + c.architecture + why + ")");
  };
  for (const char* key : {"hidden_size", "num_hidden_layers", "vocab_size"})
    if (!src.get(key)) missing(key, "");
  for (const char* key : arch->required)
    if (!src.get(key)) missing(key, "");
  for (const auto& f : kCommon)
    if (auto n = src.get(f.key)) read_field(*n, f, c);
  for (const auto& f : arch->fields)
    if (auto n = src.get(f.key)) read_field(*n, f, c);
  // A wrapper's own tie_word_embeddings decides (transformers ties the wrapper's lm_head).
  if (text)
    if (auto n = root.get("tie_word_embeddings")) c.tie_word_embeddings = n->boolean();
  // head_dim defaults to hidden_size / num_attention_heads where transformers derives it so (Llama,
  // Qwen2); gpt_oss, glm4_moe and the hybrids require it.
  if ((c.architecture == "qwen2" || c.architecture == "llama") && !src.get("head_dim")) {
    if (c.hidden_size % c.num_attention_heads != 0)
      src.at("num_attention_heads")
          .fail("does not divide hidden_size (" + std::to_string(c.hidden_size) + "); give head_dim");
    c.head_dim = c.hidden_size / c.num_attention_heads;
  }
  if (c.architecture == "qwen3_next" || c.architecture == "qwen3_5" || c.architecture == "qwen3_5_moe")
    c.layer_types = hybrid_layer_types(src, c.num_hidden_layers);
  // Qwen3-Next's config names no MTP layer count, its checkpoint holds one (mtp.*), and vLLM's
  // Qwen3NextMTP defaults num_nextn_predict_layers to 1.
  if (c.architecture == "qwen3_next" && !src.get("mtp_num_hidden_layers")) c.num_nextn_predict_layers = 1;

  // Conditional requirements and consistency, reported at the key concerned.
  if (c.architecture == "deepseek_v3" || c.architecture == "deepseek_v32" || c.architecture == "glm4_moe") {
    if (c.first_k_dense_replace > 0 && !src.get("intermediate_size"))
      missing("intermediate_size", ", first_k_dense_replace > 0");
    if (c.first_k_dense_replace > c.num_hidden_layers)
      src.at("first_k_dense_replace").fail("exceeds num_hidden_layers (" + std::to_string(c.num_hidden_layers) + ")");
  }
  if (c.architecture == "nemotron_h") {
    check_pattern(root.at("hybrid_override_pattern"), c.hybrid_override_pattern, c.num_hidden_layers,
                  "num_hidden_layers");
    std::string kinds = c.hybrid_override_pattern;
    if (c.num_nextn_predict_layers > 0) {
      if (!root.get("mtp_hybrid_override_pattern"))
        missing("mtp_hybrid_override_pattern", ", num_nextn_predict_layers > 0");
      check_pattern(root.at("mtp_hybrid_override_pattern"), c.mtp_hybrid_override_pattern, -1, "");
      kinds += c.mtp_hybrid_override_pattern;
    }
    for (const char kind : {'M', '*', 'E', '-'}) {
      if (kinds.find(kind) == std::string::npos) continue;
      for (const char* key : nemotron_needs(kind, c))
        if (!root.get(key))
          missing(key, std::string(", layer kind '") + kind + "' in hybrid_override_pattern");
    }
  }
  const char* experts_key = c.architecture == "gpt_oss" ? "num_local_experts"
                            : (c.architecture == "qwen3_moe" || c.architecture == "qwen3_next" ||
                               c.architecture == "qwen3_5_moe")
                                ? "num_experts"
                                : "n_routed_experts";
  if (c.n_routed_experts > 0 && c.num_experts_per_tok > c.n_routed_experts)
    src.at("num_experts_per_tok")
        .fail(std::to_string(c.num_experts_per_tok) + " exceeds the " + std::to_string(c.n_routed_experts) + " " +
              experts_key);
  if (c.architecture != "deepseek_v3" && c.architecture != "deepseek_v32" && c.num_attention_heads > 0 &&
      c.num_key_value_heads > 0 && c.num_attention_heads % c.num_key_value_heads != 0)
    src.at("num_key_value_heads")
        .fail("must divide num_attention_heads (" + std::to_string(c.num_attention_heads) + ")");
  if (c.linear_num_key_heads > 0 && c.linear_num_value_heads % c.linear_num_key_heads != 0)
    src.at("linear_num_value_heads")
        .fail("must be a multiple of linear_num_key_heads (" + std::to_string(c.linear_num_key_heads) + ")");
  return c;
}

Inventory from_root(const yaml::Node& root, const std::string& default_name, const InventoryOptions& options,
                    bool hf) {
  ModelConfig c = read_config(root, default_name, hf);
  // Semantic checks without a line (build) then report against the file.
  try {
    return Inventory::build(c, options);
  } catch (const ConfigError& e) {
    throw ConfigError(root.file(), 0, e.key(), e.reason());
  }
}

}  // namespace

Inventory Inventory::load(const std::filesystem::path& path, const InventoryOptions& options) {
  return load(path, options, {});
}

Inventory Inventory::load(const std::filesystem::path& given, const InventoryOptions& options,
                          const std::vector<Override>& overrides) {
  std::filesystem::path path = given;
  std::error_code ec;
  if (std::filesystem::is_directory(given, ec)) {
    path = given / "config.json";
    if (!std::filesystem::exists(path, ec))
      throw ConfigError(given.string(), 0, "", "a folder given as a model must hold a Hugging Face config.json");
  }
  const bool hf = path.extension() == ".json";
  // A config.json is named after its folder (models/hf/kimi-k2/config.json -> kimi-k2).
  std::string name = path.stem().string();
  if (hf && path.filename() == "config.json" && !path.parent_path().filename().empty())
    name = std::filesystem::absolute(path, ec).parent_path().filename().string();
  const auto root = yaml::load_file(path, overrides);
  return yaml::naming_overrides(overrides, [&] { return from_root(root, name, options, hf); });
}

Inventory Inventory::parse(const std::string& yaml_text, const std::string& name, const InventoryOptions& options) {
  const auto root = yaml::load_string(yaml_text, name);
  const std::filesystem::path p(name);
  std::string stem = p.stem().string();
  return from_root(root, stem.empty() ? name : stem, options, p.extension() == ".json");
}

}  // namespace reshard::model
