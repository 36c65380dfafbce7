// The LoRA adapters of a model (see lora.hpp for the shapes, names and roles).
#include "reshard/model/lora.hpp"

#include <algorithm>
#include <string>
#include <string_view>

#include "reshard/model/errors.hpp"

namespace reshard::model {

const char* to_string(LoraPart p) {
  switch (p) {
    case LoraPart::None: return "";
    case LoraPart::A: return "lora_A";
    case LoraPart::B: return "lora_B";
  }
  return "";
}

namespace {

// "model.layers.3.self_attn.q_proj.weight" -> "q_proj"; "" for a name not ending in ".weight".
std::string module_of(const std::string& name) {
  constexpr std::string_view kWeight = ".weight";
  if (name.size() <= kWeight.size() || name.compare(name.size() - kWeight.size(), kWeight.size(), kWeight) != 0) return "";
  const std::string stem = name.substr(0, name.size() - kWeight.size());
  const auto dot = stem.rfind('.');
  return dot == std::string::npos ? stem : stem.substr(dot + 1);
}

// Why a weight of this kind takes no adapter here ("" when it does).
const char* not_adapted(const TensorInfo& t) {
  switch (t.cls) {
    case TensorClass::ExpertFFN: return "routed experts (vLLM's FusedMoEWithLoRA stacks them per expert; not modelled)";
    case TensorClass::Embedding:
    case TensorClass::Head: return "the embedding and the output head";
    case TensorClass::Mamba:
    case TensorClass::LinearAttention: return "Mamba and gated DeltaNet mixers";
    case TensorClass::Vision: return "the vision tower";
    case TensorClass::Norm:
    case TensorClass::Router: return "norms and routers";
    default: break;
  }
  if (t.shape.size() != 2 || !t.column_parts.empty()) return "weights that are not plain matrices";
  return "";
}

}  // namespace

Inventory lora_adapters(const Inventory& base, const LoraSpec& spec) {
  const std::string model = base.config().name;
  if (spec.rank < 1 || spec.rank > kMaxDimension)
    throw ConfigError(model, 0, "lora.rank", "must be a positive integer, got " + std::to_string(spec.rank));
  if (spec.target_modules.empty()) throw ConfigError(model, 0, "lora.target_modules", "list at least one module");
  std::vector<TensorInfo> out;
  for (const std::string& target : spec.target_modules) {
    const std::size_t before = out.size();
    bool named = false;
    std::string refused;
    for (const TensorInfo& w : base.tensors()) {
      if (module_of(w.name) != target) continue;
      named = true;
      if (const char* why = not_adapted(w); *why) {
        refused = why;
        continue;
      }
      const std::string stem = "base_model.model." + w.name.substr(0, w.name.size() - 7);  // less ".weight"
      TensorInfo a = w, b = w;
      a.name = stem + ".lora_A.weight";
      a.shape = {spec.rank, w.shape[1]};
      a.lora = LoraPart::A;
      a.base_role = w.role;
      a.fused = FusedPart::None;
      a.tp_groups = 0;
      a.role = w.role == ParallelRole::RowParallel ? ParallelRole::RowParallel : ParallelRole::Replicated;
      b.name = stem + ".lora_B.weight";
      b.shape = {w.shape[0], spec.rank};
      b.lora = LoraPart::B;
      b.base_role = w.role;
      b.role = w.role == ParallelRole::ColumnParallel ? ParallelRole::ColumnParallel : ParallelRole::Replicated;
      if (b.role != ParallelRole::ColumnParallel) b.fused = FusedPart::None;
      out.push_back(std::move(a));
      out.push_back(std::move(b));
    }
    if (!named)
      throw ConfigError(model, 0, "lora.target_modules",
                        "'" + target + "' names no linear layer of " + model + " (module names such as q_proj, o_proj, gate_proj)");
    if (out.size() == before)
      throw ConfigError(model, 0, "lora.target_modules", "'" + target + "' adapts only " + refused + ", which take no adapter here");
  }
  // Model order: by the adapted weight's id, A before B.
  std::stable_sort(out.begin(), out.end(), [](const TensorInfo& x, const TensorInfo& y) { return x.id < y.id; });
  Inventory inv = base.with_tensors(std::move(out));
  inv.lora_ = spec;
  return inv;
}

}  // namespace reshard::model
