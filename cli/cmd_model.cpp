// `reshard model FILE [--dtype D] [--mtp] [--vision] [--json] [--verbose]`: the weight inventory of an architecture file.
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "commands.hpp"
#include "reshard/model/errors.hpp"
#include "reshard/model/inventory.hpp"
#include "table.hpp"
#include "warnings.hpp"

namespace reshard::cli {

namespace {

std::string percent(double share) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f %%", 100.0 * share);
  return buf;
}

std::string count(std::int64_t n) {
  // 46183 -> "46 183"
  std::string s = std::to_string(n), out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i && (s.size() - i) % 3 == 0) out += ' ';
    out += s[i];
  }
  return out;
}

struct ModelArgs {
  std::string file;
  std::string dtype;
  bool mtp = false;
  bool vision = false;
  bool json = false;
  bool verbose = false;
};

void run(const ModelArgs& a) {
  model::InventoryOptions options;
  if (!a.dtype.empty()) {
    try {
      options.dtype = model::parse_dtype(a.dtype);
    } catch (const std::invalid_argument& e) {
      throw model::ConfigError("--dtype", 0, "", e.what());
    }
  }
  options.include_mtp = a.mtp;
  options.include_vision = a.vision;
  const auto inv = model::Inventory::load(a.file, options);
  const auto total = inv.parameters();

  if (a.json) {
    nlohmann::json tensors = nlohmann::json::array();
    for (const auto& t : inv.tensors()) {
      nlohmann::json j = {{"name", t.name},
                          {"shape", t.shape},
                          {"dtype", model::to_string(t.dtype)},
                          {"class", model::to_string(t.cls)},
                          {"role", model::to_string(t.role)},
                          {"layer", t.layer},
                          {"bytes", t.bytes().value}};
      if (t.fused != model::FusedPart::None) j["fused"] = model::to_string(t.fused);
      if (t.expert >= 0) j["expert"] = t.expert;
      if (!t.column_parts.empty()) j["column_parts"] = t.column_parts;
      if (t.mtp) j["mtp"] = true;
      tensors.push_back(std::move(j));
    }
    nlohmann::json by_class = nlohmann::json::object();
    for (int i = 0; i < model::kTensorClassCount; ++i) {
      const auto c = static_cast<model::TensorClass>(i);
      if (inv.parameters(c) == 0) continue;
      by_class[model::to_string(c)] = {{"parameters", inv.parameters(c)},
                                       {"bytes", inv.bytes(c).value},
                                       {"share", static_cast<double>(inv.parameters(c)) / static_cast<double>(total)}};
    }
    const auto& cfg = inv.config();
    nlohmann::json out = {{"schema", "reshard-model-1"},
                          {"model", cfg.name},
                          {"architecture", cfg.architecture},
                          {"synthetic", cfg.synthetic},
                          {"include_mtp", inv.includes_mtp()},
                          {"include_vision", inv.includes_vision()},
                          {"layers", inv.layer_count()},
                          {"parameters", total},
                          {"bytes", inv.bytes().value},
                          {"active_parameters", inv.active_parameters()},
                          {"tensor_count", inv.tensors().size()},
                          {"by_class", by_class},
                          {"tensors", tensors}};
    if (!cfg.ignored_keys.empty()) out["ignored_keys"] = cfg.ignored_keys;
    print_warnings(inv);
    std::cout << out.dump() << '\n';
    return;
  }

  print_warnings(inv);
  const auto& cfg = inv.config();
  std::string layers = std::to_string(inv.decoder_layers());
  if (inv.mtp_layers() > 0) layers += " + " + std::to_string(inv.mtp_layers()) + " MTP";
  std::vector<std::pair<std::string, std::string>> fields = {
      {"model", cfg.name + (cfg.synthetic ? " (synthetic)" : "")},
      {"architecture", cfg.architecture},
      {"layers", layers},
  };
  if (!cfg.vision.kind.empty())
    fields.emplace_back("vision tower", inv.includes_vision()          ? "included (" + cfg.vision.kind + ")"
                                        : cfg.vision.kind == "moonvit" ? "left out (MoonViT: not modelled)"
                                                                       : "left out (" + cfg.vision.kind + "; --vision counts it)");
  for (auto& f : std::vector<std::pair<std::string, std::string>>{
           {"parameters", format_count(total)},
           {"active parameters", format_count(inv.active_parameters())},
           {"bytes", model::format(inv.bytes())},
           {"tensors", count(static_cast<std::int64_t>(inv.tensors().size()))}})
    fields.push_back(std::move(f));
  print_fields(std::cout, fields);
  std::cout << '\n';
  Table t({"class", "parameters>", "share>", "bytes>"});
  for (int i = 0; i < model::kTensorClassCount; ++i) {
    const auto c = static_cast<model::TensorClass>(i);
    const auto n = inv.parameters(c);
    if (n == 0) continue;
    t.add({model::to_string(c), format_count(n), percent(static_cast<double>(n) / static_cast<double>(total)),
           model::format(inv.bytes(c))});
  }
  t.add({"total", format_count(total), percent(1.0), model::format(inv.bytes())});
  t.print(std::cout);
  if (a.verbose && !cfg.ignored_keys.empty()) {
    std::string keys;
    for (const auto& k : cfg.ignored_keys) keys += (keys.empty() ? "" : ", ") + k;
    std::cout << "\nconfig.json keys not used (" << cfg.ignored_keys.size() << "): " << keys << '\n';
  }
}

}  // namespace

void add_model_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("model", "Show the weight inventory of a model architecture file");
  auto args = std::make_shared<ModelArgs>();
  cmd->add_option("file", args->file,
                  "Architecture file (models/*.yaml), Hugging Face config.json, or a folder holding one")
      ->required();
  cmd->add_option("--dtype", args->dtype, "Override the weights' dtype: bf16, fp16, fp32, fp8");
  cmd->add_flag("--mtp", args->mtp, "Include the multi-token-prediction layers");
  cmd->add_flag("--vision", args->vision, "Include the vision tower of a multimodal config (Qwen3.5)");
  cmd->add_flag("--json", args->json, "Print one JSON object");
  cmd->add_flag("--verbose", args->verbose, "List the config.json keys reshard does not use");
  cmd->callback([args] { run(*args); });
}

}  // namespace reshard::cli
