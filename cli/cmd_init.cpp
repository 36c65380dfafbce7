// `reshard init [--template T] [--nodes N] [--model M] [-o DIR]`: a commented starter topology and
// scenario (docs/scenario.md, "A starter"), every key listed with its meaning and default, the
// parallel sizes chosen so that the files load (the checks load_scenario runs).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <numeric>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "commands.hpp"
#include "reshard/model/errors.hpp"
#include "reshard/model/inventory.hpp"
#include "reshard/model/scenario.hpp"
#include "reshard/model/topology.hpp"

namespace reshard::cli {

namespace {

namespace fs = std::filesystem;
using model::Bytes;
using model::BytesPerSecond;
using model::ConfigError;
using model::Topology;

const char* const kDefaultModel = RESHARD_SOURCE_DIR "/models/qwen3-8b.yaml";

std::string known_templates() {
  std::string s;
  for (const auto& t : Topology::template_names()) s += (s.empty() ? "" : ", ") + t;
  return s;
}

// What init writes about a node template: read from one node (or one rack) of it, as a topology
// file would be.
struct TemplateFacts {
  std::string name;
  bool racks = false;                 // counted in racks (NVL72), not nodes
  std::int32_t gpus_per_unit = 0;     // per node, or per rack
  std::int32_t gpus_per_node = 0;     // per server or compute tray: its rails
  std::int32_t gpus_per_domain = 0;   // NVLink domain
  BytesPerSecond nic, host;
  std::string host_kind;
  Bytes memory;
};

TemplateFacts template_facts(const std::string& name) {
  TemplateFacts f;
  f.name = name;
  auto read = [&](const char* unit) { return Topology::parse("cluster: {template: " + name + ", " + unit + ": 1}\n", name); };
  std::optional<Topology> t;
  try {
    t.emplace(read("nodes"));
  } catch (const ConfigError&) {  // counted in racks
    t.emplace(read("racks"));
    f.racks = true;
  }
  f.gpus_per_unit = t->gpu_count();
  f.gpus_per_node = t->gpu_count() / t->node_count();
  f.gpus_per_domain = static_cast<std::int32_t>(t->gpus_in_domain(0).size());
  f.nic = t->gpu_nic_bandwidth(0);
  const auto h = t->host_link(0);
  f.host = h ? h->bandwidth : BytesPerSecond{0};
  f.host_kind = h && h->kind == model::LinkKind::C2C ? "c2c" : "pcie";
  f.memory = t->gpu_memory(0);
  return f;
}

// "2 dgx-h100 nodes", "1 gb200-nvl72 rack".
std::string count_of(std::int32_t n, const TemplateFacts& f) {
  return std::to_string(n) + " " + f.name + " " + (f.racks ? "rack" : "node") + (n == 1 ? "" : "s");
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// One YAML line with its comment in a column.
struct Yaml {
  std::ostringstream out;
  void line(const std::string& text, const std::string& comment = "") {
    out << text;
    if (!comment.empty()) out << std::string(text.size() < 34 ? 34 - text.size() : 1, ' ') << "# " << comment;
    out << '\n';
  }
  void comment(const std::string& text) { out << "# " << text << '\n'; }
};

std::string topology_yaml(const TemplateFacts& f, std::int32_t n, const std::string& name) {
  Yaml y;
  y.comment("A starter topology written by `reshard init` (docs/topology.md): " + count_of(n, f) + ", " +
            std::to_string(n * f.gpus_per_unit) + " GPUs.");
  y.comment("Lines commented out are optional keys at their defaults: uncomment one to change it.");
  y.line("name: " + name, "the topology's name; default: the file name");
  y.line("# description: free text");
  y.line("cluster:");
  y.line("  template: " + f.name, "the node template: " + known_templates());
  if (f.racks) {
    y.line("  racks: " + std::to_string(n), "racks of 18 compute trays of " + std::to_string(f.gpus_per_node) + " GPUs");
    y.line("  # nodes: 2", "instead of racks, for a dgx-* template");
  } else {
    y.line("  nodes: " + std::to_string(n), "nodes of " + std::to_string(f.gpus_per_node) + " GPUs");
    y.line("  # racks: 1", "instead of nodes, for a *-nvl72 template");
  }
  y.line("  # nic_speed: " + number(f.nic.value * 8 / 1e9) + "Gbps", "each GPU's NIC, per direction; default the template's");
  y.line("  # host_link: " + number(f.host.value / 1e9) + "GBps", "GPU <-> NIC host link, per direction; default the template's");
  y.line("  # host_link_kind: " + f.host_kind, "pcie or c2c; default the template's");
  y.line("  # gpu_memory: " + number(f.memory.as_double() / 1e9) + "GB", "each GPU's memory (HBM); default the template's");
  y.line("  # nodes_per_leaf: " + std::to_string(f.racks ? n * 18 : n), "nodes (trays) per leaf group; default all of them");
  y.line("# fabric:", "the leaf/spine network; optional");
  y.line("#   rail_optimized: true", "a leaf per rail (NIC r of each node) per group; default true");
  y.line("#   spines: " + std::to_string(f.gpus_per_node), "spine switches; default one per rail");
  y.line("#   oversubscription: 1", "leaf downlink total / uplink total; default 1");
  y.line("#   nic_speed: " + number(f.nic.value * 8 / 1e9) + "Gbps", "instead of cluster.nic_speed (not both)");
  y.line("#   host_link: " + number(f.host.value / 1e9) + "GBps", "instead of cluster.host_link (not both)");
  y.line("#   nodes_per_leaf: " + std::to_string(f.racks ? n * 18 : n), "instead of cluster.nodes_per_leaf (not both)");
  y.line("#   core:", "a third switch layer; default none");
  y.line("#     leaf_groups_per_pod: 1", "leaf groups per pod; required with core");
  y.line("#     switches: " + std::to_string(2 * f.gpus_per_node), "core switches, a multiple of spines; required with core");
  y.line("#     oversubscription: 1", "spine downlink total / uplink total; default 1");
  y.line("# latency:", "one-way per link; defaults shown");
  y.line("#   nvlink: 0.3us");
  y.line("#   c2c: 0.3us", "the host link when host_link_kind: c2c");
  y.line("#   pcie: 0.25us", "the host link when PCIe");
  y.line("#   nic_leaf: 1us");
  y.line("#   leaf_spine: 0.15us");
  y.line("#   spine_core: 0.15us");
  return y.out.str();
}

struct MegatronChoice {
  std::int32_t tp = 1, pp = 1, ep = 1;
};
struct VllmChoice {
  std::int32_t tp = 1, pp = 1, dp = 1;
};

std::string scenario_yaml(const std::string& name, const std::string& model_text, const std::string& model_name,
                          const std::string& topology_name, std::int32_t half, const MegatronChoice& m,
                          const VllmChoice& v) {
  Yaml y;
  const std::string src_gpus = "0-" + std::to_string(half - 1);
  const std::string dst_gpus = std::to_string(half) + "-" + std::to_string(2 * half - 1);
  y.comment("A starter scenario written by `reshard init` (every key: docs/scenario.md): " + model_name +
            " refitted from Megatron");
  y.comment("(GPUs " + src_gpus + ") to vLLM (GPUs " + dst_gpus + ") on " + topology_name +
            ". Lines commented out are optional keys at");
  y.comment("their defaults. The parallel sizes are a start that fits the GPUs' memory: set them to your deployment's.");
  y.line("name: " + name, "the scenario's name; default: the file name");
  y.line("# description: free text");
  y.line("model: " + model_text, "models/*.yaml, a HF config.json or its folder; relative to this file");
  y.line("topology: topology.yaml", "the cluster; relative to this file");
  y.line("# dtype: bf16", "every weight's dtype: bf16, fp16, fp32, fp8; default the model's");
  y.line("# include_mtp: false", "move the multi-token-prediction layers too; default false");
  y.line("# lora:", "move LoRA adapters only, not the weights; default: the weights");
  y.line("#   rank: 16", "the adapters' rank; required with lora");
  y.line("#   alpha: 32", "their scaling alpha / rank; default rank");
  y.line("#   target_modules: [q_proj, k_proj, v_proj, o_proj]", "the layers adapted; required with lora");
  y.line("# colocated: false", "true: both sides share GPUs (overlapping gpus); default false");
  y.line("# delta:", "refit only what changed; default: dense (every byte moves)");
  y.line("#   density: 0.03", "the share of elements a step changes; required with delta");
  y.line("#   encoding: indices", "indices or bitmask; default indices");
  y.line("#   snapshot: gpu", "where the previous values live: gpu or host; default gpu");
  y.line("source:", "the training side");
  y.line("  framework: megatron", "megatron, vllm, sglang or dtensor");
  y.line("  gpus: " + src_gpus, "each rank's GPU, in order: ranges and indices");
  y.line("  # weights_in: gpu", "where the weights live: gpu, or host (a CPU replica); default gpu");
  y.line("  tp: " + std::to_string(m.tp), "tensor parallel; default 1");
  y.line(std::string(m.pp == 1 ? "  # " : "  ") + "pp: " + std::to_string(m.pp), "pipeline stages; default 1");
  y.line("  # cp: 1", "context parallel; default 1");
  y.line("  # dp: " + std::to_string(half / (m.tp * m.pp)), "data parallel; default GPUs / (tp x cp x pp)");
  y.line(std::string(m.ep == 1 ? "  # " : "  ") + "ep: " + std::to_string(m.ep), "expert parallel; default 1");
  y.line("  # etp: " + std::to_string(m.tp), "expert tensor parallel; default tp");
  y.line("  # vpp: 1", "virtual pipeline stages per rank; default 1");
  y.line("  # layers_per_stage: [...]", "each virtual stage's layers; default an even split");
  y.line("  # first_stage_layers: 1", "the first stage's layers, the rest even; default even");
  y.line("  # last_stage_layers: 1", "the last stage's layers, the rest even; default even");
  y.line("  # refit_memory: 4GiB", std::string("staging per GPU; default ") + model::kDefaultBudgetRule);
  y.line("destination:", "the generation side");
  y.line("  framework: vllm");
  y.line("  gpus: " + dst_gpus);
  y.line("  tp: " + std::to_string(v.tp), "--tensor-parallel-size; default 1");
  y.line(std::string(v.pp == 1 ? "  # " : "  ") + "pp: " + std::to_string(v.pp), "--pipeline-parallel-size; default 1");
  y.line(std::string(v.dp == 1 ? "  # " : "  ") + "dp: " + std::to_string(v.dp), "data parallel; default 1");
  y.line("  # dp_mode: engines", "engines: dp engines; data_parallel: one deployment");
  y.line("  # enable_expert_parallel: false", "--enable-expert-parallel; default false");
  y.line("  # ep: " + std::to_string(v.tp), "engines: expert-group size (multiple of tp); default off");
  y.line("  # expert_placement: linear", "linear or round_robin; default linear");
  y.line("  # all2all_backend: allgather_reducescatter", "--all2all-backend; default allgather_reducescatter");
  y.line("  # redundant_experts: 0", "extra expert replicas (EPLB); default 0");
  y.line("  # gpu_memory_utilization: 0.9", "the engine's share of GPU memory; default 0.9");
  y.line("  # refit_memory: 4GiB", std::string("staging per GPU; default ") + model::kDefaultBudgetRule);
  y.line("  # precision:", "serve in another precision; default: no change");
  y.line("  #   format: fp8_block", "bf16, fp8_block, mxfp8 or mxfp4");
  y.line("  #   weight_block_size: [128, 128]", "fp8_block's block; default [128, 128]");
  y.line("  #   quantize_at: source", "source or destination; default source");
  y.line("  #   classes: [attention, dense_ffn, expert_ffn]", "required unless bf16");
  return y.out.str();
}

// Megatron layouts of `half` GPUs to try: the fewest pipeline stages first, each with TP as large as
// an NVLink domain allows (at most 8) first, and for an MoE model EP over the data-parallel ranks.
std::vector<MegatronChoice> megatron_choices(const model::Inventory& inv, std::int32_t half, std::int32_t most_tp) {
  std::vector<MegatronChoice> out;
  const std::int64_t experts = inv.config().n_routed_experts;
  for (std::int32_t pp = 1; pp <= half && pp <= inv.decoder_layers(); ++pp) {
    if (half % pp != 0) continue;
    for (std::int32_t tp = std::min(most_tp, 8); tp >= 1; tp /= 2) {
      if (half % (tp * pp) != 0) continue;
      const std::int32_t dp = half / (tp * pp);
      const auto ep = experts > 0 ? static_cast<std::int32_t>(std::gcd<std::int64_t>(experts, dp)) : 1;
      out.push_back({tp, pp, ep});
    }
  }
  return out;
}

// vLLM layouts of `half` GPUs to try: the fewest GPUs per engine first (the most engines), TP (a
// power of two) before pipeline stages.
std::vector<VllmChoice> vllm_choices(const model::Inventory& inv, std::int32_t half) {
  std::vector<VllmChoice> out;
  for (std::int32_t per_engine = 1; per_engine <= half; ++per_engine) {
    if (half % per_engine != 0) continue;
    for (std::int32_t tp = per_engine & -per_engine; tp >= 1; tp /= 2) {  // the largest power of two dividing it first
      const std::int32_t pp = per_engine / tp;
      if (pp <= inv.decoder_layers()) out.push_back({tp, pp, half / per_engine});
    }
  }
  return out;
}

struct InitArgs {
  std::string template_name = "dgx-h100";
  std::int32_t nodes = 2;
  std::string model;
  std::string dir = ".";
};

void run_init(const InitArgs& a) {
  const fs::path dir(a.dir);
  const fs::path topo_path = dir / "topology.yaml", scen_path = dir / "scenario.yaml";
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec)) throw ConfigError(a.dir, 0, "", "-o names a file, not a folder");
  for (const auto& p : {topo_path, scen_path})
    if (fs::exists(p, ec))
      throw ConfigError(p.string(), 0, "",
                        "already exists; reshard init does not overwrite files (remove it, or write elsewhere with -o DIR)");

  const TemplateFacts f = template_facts(a.template_name);
  const std::string topo_name = a.template_name + "-" + std::to_string(a.nodes) + (f.racks ? "r" : "n");
  const std::string topo_text = topology_yaml(f, a.nodes, topo_name);
  const Topology topo = Topology::parse(topo_text, topo_path.string());
  const std::int32_t half = topo.gpu_count() / 2;

  // The model as the scenario names it: relative to DIR when both --model and -o are relative
  // paths (files kept together in one tree), else absolute.
  const fs::path model_path = a.model.empty() ? fs::path(kDefaultModel) : fs::path(a.model);
  const std::string model_text = model_path.is_relative() && dir.is_relative()
                                     ? fs::relative(fs::absolute(model_path), fs::absolute(dir)).string()
                                     : fs::absolute(model_path).lexically_normal().string();
  const model::Inventory inv = model::Inventory::load(model_path);
  const std::string model_name = inv.config().name.empty() ? model_path.stem().string() : inv.config().name;
  const std::string scen_name = model_name + "-" + topo_name;

  // Try layouts until both sides load: an error at one side's key moves that side to its next choice.
  const auto src = megatron_choices(inv, half, f.gpus_per_domain);
  const auto dst = vllm_choices(inv, half);
  std::size_t i = 0, j = 0;
  std::string scen_text, last_error;
  for (;;) {
    if (i == src.size() || j == dst.size())
      throw model::PlanError("no starter layout of " + model_name + " fits " + std::to_string(half) +
                             " GPUs per side of " + count_of(a.nodes, f) + " (the last tried: " + last_error +
                             "); give more --nodes");
    scen_text = scenario_yaml(scen_name, model_text, model_name, topo_name, half, src[i], dst[j]);
    try {
      const model::Scenario s = model::Scenario::parse(scen_text, scen_path.string(), dir);
      model::check_layout_gpus(s, topo);
      auto [smap, dmap] = model::build_layouts(s, inv);
      model::check_memory(s, model::gpu_memory_use(s, inv, topo, smap, dmap));
      break;
    } catch (const ConfigError& e) {
      last_error = e.reason();
      if (e.key().rfind("source", 0) == 0) ++i;
      else if (e.key().rfind("destination", 0) == 0) ++j;
      else throw;
    }
  }

  fs::create_directories(dir);
  for (const auto& [path, text] : {std::pair{topo_path, topo_text}, std::pair{scen_path, scen_text}}) {
    std::ofstream out(path);
    out << text;
    if (!out) throw ConfigError(path.string(), 0, "", "cannot write the file");
  }
  const auto spec = [&](const char* fw, std::int32_t tp, std::int32_t pp, std::int32_t dp, std::int32_t ep) {
    std::string s = std::string(fw) + " TP" + std::to_string(tp);
    if (pp > 1) s += " PP" + std::to_string(pp);
    if (ep > 1) s += " EP" + std::to_string(ep);
    return s + " DP" + std::to_string(dp);
  };
  const auto& m = src[i];
  const auto& v = dst[j];
  std::cout << "wrote " << topo_path.string() << ": " << count_of(a.nodes, f) << ", " << topo.gpu_count() << " GPUs\n"
            << "wrote " << scen_path.string() << ": " << model_name << ", "
            << spec("megatron", m.tp, m.pp, half / (m.tp * m.pp), m.ep) << " on GPUs 0-" << half - 1 << " -> "
            << spec("vllm", v.tp, v.pp, v.dp, 1) << " on GPUs " << half << "-" << 2 * half - 1 << "\n"
            << "next: reshard compare " << scen_path.string() << "\n";
}

}  // namespace

void add_init_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "init", "Write a commented starter topology.yaml and scenario.yaml (every key with its default; docs/scenario.md)");
  auto a = std::make_shared<InitArgs>();
  cmd->add_option("--template", a->template_name, "Node template (default dgx-h100): " + known_templates())
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            for (const auto& t : Topology::template_names())
              if (t == v) return "";
            return "unknown template '" + v + "'; known templates: " + known_templates();
          },
          "TEMPLATE"));
  cmd->add_option("--nodes", a->nodes, "Nodes of the template, racks for *-nvl72 (default 2); half the GPUs train, half generate")
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--model", a->model, "Model file (default the shipped models/qwen3-8b.yaml)")->check(CLI::ExistingPath);
  cmd->add_option("-o,--output", a->dir, "Folder to write into (default: the current folder; created if missing)");
  cmd->callback([a] { run_init(*a); });
}

}  // namespace reshard::cli
