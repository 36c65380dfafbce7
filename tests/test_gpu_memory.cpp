// GPU memory: each GPU's HBM capacity in the topology (templates, `gpu_memory`, an explicit GPU's
// `memory`), each side's refit staging budget (`refit_memory`, the NeMo RL default), the
// destination's memory fraction, and load_scenario's check that resident weights + budget fit
// (docs/design.md §5.2). Numbers are worked by hand in the comments.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config_error.hpp"
#include "reshard/model/errors.hpp"
#include "reshard/model/overrides.hpp"
#include "reshard/model/scenario.hpp"
#include "reshard/model/topology.hpp"
#include "run_command.hpp"

using namespace reshard::model;
using namespace reshard::model::literals;
using reshard::test::config_error;

namespace {

const std::filesystem::path kRoot = RESHARD_SOURCE_DIR;

std::filesystem::path temp_file(const std::string& name, const std::string& text) {
  const auto dir = std::filesystem::temp_directory_path() / "reshard_test_gpu_memory";
  std::filesystem::create_directories(dir);
  const auto p = dir / name;
  std::ofstream(p) << text;
  return p;
}

Topology one_node(const std::string& tmpl, const std::string& extra = "") {
  const bool racks = tmpl.find("nvl72") != std::string::npos;
  return Topology::parse("cluster:\n  template: " + tmpl + "\n  " + (racks ? "racks: 1" : "nodes: 1") + "\n" + extra +
                             "fabric: {rail_optimized: false}\n",  // one leaf, no spines
                         tmpl + ".yaml");
}

// The ConfigError a topology text throws (a test failure when none).
ConfigError topology_error(const std::string& text) {
  try {
    (void)Topology::parse(text, "bad.yaml");
  } catch (const ConfigError& e) {
    return e;
  }
  ADD_FAILURE() << "no error for:\n" << text;
  return ConfigError("", 0, "", "");
}

// The ConfigError a scenario text throws when parsed and loaded.
ConfigError scenario_error(const std::string& name, const std::string& text, const std::vector<Override>& sets = {}) {
  const auto path = temp_file(name, text);
  try {
    (void)load_scenario(path, sets);
  } catch (const ConfigError& e) {
    return e;
  }
  ADD_FAILURE() << "no error for:\n" << text;
  return ConfigError("", 0, "", "");
}

std::string model(const char* file) { return "model: " + (kRoot / "models" / file).string() + "\n"; }
std::string topology(const std::string& file) { return "topology: " + (kRoot / "topologies" / file).string() + "\n"; }

// tiny-gqa, Megatron TP2 on GPUs 0-1 and vLLM TP2 on GPUs 2-3 of the 6-GPU explicit example (no
// GPU gives its memory); `src` and `dst` add keys to each side.
std::string tiny_on_irregular(const std::string& src = "", const std::string& dst = "") {
  return model("tiny-gqa.yaml") + topology("irregular-example.yaml") +  // lines 1-2
         "source:\n"                                                     // 3
         "  framework: megatron\n  tp: 2\n  gpus: 0-1\n" + src +        // 4-6
         "destination:\n"                                                // 7 (without src keys)
         "  framework: vllm\n  tp: 2\n  gpus: 2-3\n" + dst;
}

}  // namespace

// ---- The topology -----------------------------------------------------------------------------

TEST(GpuMemory, TemplatesCarryTheDatasheetFigures) {
  // GB of 10^9 bytes, as the datasheets give them (model/topology/src/topology_templates.cpp).
  EXPECT_EQ(one_node("dgx-h100").gpu_memory(7), 80_GB);
  EXPECT_EQ(one_node("dgx-h200").gpu_memory(0), 141_GB);
  EXPECT_EQ(one_node("dgx-b200").gpu_memory(0), 180_GB);
  EXPECT_EQ(one_node("gb200-nvl72").gpu_memory(71), 186_GB);
  EXPECT_EQ(one_node("gb300-nvl72").gpu_memory(0), 288_GB);
  // The GPU's device carries it; switches and NICs do not.
  const Topology t = one_node("dgx-h100");
  EXPECT_EQ(t.device(t.gpu_device(3)).memory, 80_GB);
  for (const auto& d : t.devices())
    if (d.kind != DeviceKind::GPU) {
      EXPECT_EQ(d.memory.value, 0) << d.name;
    }
  EXPECT_THROW((void)t.gpu_memory(8), IndexError);
}

TEST(GpuMemory, ClusterKeyOverridesTheTemplate) {
  EXPECT_EQ(one_node("dgx-h100", "  gpu_memory: 96GB\n").gpu_memory(5), 96_GB);
  EXPECT_EQ(one_node("dgx-h100", "  gpu_memory: 80GiB\n").gpu_memory(0), 80_GiB);
  // Mixed templates: each entry of `clusters:` its own, GPUs numbered cluster by cluster.
  const Topology t = Topology::parse(
      "clusters:\n"
      "  - {name: train, template: dgx-h100, nodes: 2, gpu_memory: 94GB}\n"   // GPUs 0-15
      "  - {name: infer, template: gb200-nvl72, racks: 1}\n"                  // GPUs 16-87
      "fabric:\n  spines: 2\n",
      "mixed.yaml");
  EXPECT_EQ(t.gpu_memory(0), 94_GB);
  EXPECT_EQ(t.gpu_memory(15), 94_GB);
  EXPECT_EQ(t.gpu_memory(16), 186_GB);
  EXPECT_EQ(t.gpu_memory(87), 186_GB);
}

TEST(GpuMemory, ExplicitGpuGivesItsOwnOrNone) {
  const Topology t = Topology::parse(
      "devices:\n"
      "  - {name: a/gpu0, kind: gpu, node: a, memory: 80GB, memory_bandwidth: 3.35TBps}\n"
      "  - {name: a/gpu1, kind: gpu, node: a}\n"
      "  - {name: a/nvswitch, kind: nvswitch}\n"
      "links:\n"
      "  - {from: a/gpu0, to: a/nvswitch, kind: nvlink, bandwidth: 450GBps}\n"
      "  - {from: a/gpu1, to: a/nvswitch, kind: nvlink, bandwidth: 450GBps}\n",
      "explicit.yaml");
  EXPECT_EQ(t.gpu_memory(0), 80_GB);
  EXPECT_EQ(t.gpu_memory(1).value, 0);  // not given
  EXPECT_EQ(Topology::load(kRoot / "topologies/irregular-example.yaml").gpu_memory(0).value, 0);
}

TEST(GpuMemory, BadCapacityIsOneErrorAtItsKey) {
  const std::string head = "cluster:\n  template: dgx-h100\n  nodes: 1\n";  // gpu_memory on line 4
  struct Case {
    std::string value, says;
  };
  for (const Case& c : {Case{"-80GB", "negative size"}, Case{"0GB", "must be positive"}, Case{"80", "has no unit"},
                        Case{"200TB", "more than 100 TB"}, Case{"80Gbps", "unknown size unit"}}) {
    SCOPED_TRACE(c.value);
    const ConfigError e = topology_error(head + "  gpu_memory: " + c.value + "\n");
    EXPECT_EQ(e.file(), "bad.yaml");
    EXPECT_EQ(e.line(), 4);
    EXPECT_EQ(e.key(), "cluster.gpu_memory");
    EXPECT_HAS(std::string(e.what()), c.says);
  }
  // An entry of `clusters:` (line 3), an explicit GPU (line 2), memory on a NIC (line 3).
  const ConfigError listed = topology_error(
      "clusters:\n  - {name: a, template: dgx-h100, nodes: 1}\n  - {name: b, template: dgx-h100, nodes: 1, gpu_memory: 0B}\n"
      "fabric:\n  spines: 1\n");
  EXPECT_EQ(listed.line(), 3);
  EXPECT_EQ(listed.key(), "clusters[1].gpu_memory");
  EXPECT_HAS(std::string(listed.what()), "must be positive");
  const ConfigError device = topology_error("devices:\n  - {name: g, kind: gpu, node: a, memory: -1GB}\nlinks: []\n");
  EXPECT_EQ(device.line(), 2);
  EXPECT_EQ(device.key(), "devices[0].memory");
  const ConfigError nic = topology_error(
      "devices:\n  - {name: g, kind: gpu, node: a}\n  - {name: n, kind: nic, node: a, memory: 8GB}\nlinks: []\n");
  EXPECT_EQ(nic.line(), 3);
  EXPECT_HAS(std::string(nic.what()), "memory is a GPU's; 'n' is not a GPU");
}

// ---- The default staging budget ---------------------------------------------------------------

TEST(GpuMemory, DefaultRefitMemoryIsNemoRlsTwoBuffers) {
  // 2 x min(floor(m / 50), 5 GiB), 5 GiB = 5 368 709 120 B.
  EXPECT_EQ(default_refit_memory(80_GB).value, 3'200'000'000);    // H100: 2 x 1.6 GB
  EXPECT_EQ(default_refit_memory(141_GB).value, 5'640'000'000);   // H200: 2 x 2.82 GB
  EXPECT_EQ(default_refit_memory(180_GB).value, 7'200'000'000);   // B200: 2 x 3.6 GB
  EXPECT_EQ(default_refit_memory(186_GB).value, 7'440'000'000);   // GB200: 2 x 3.72 GB
  EXPECT_EQ(default_refit_memory(288_GB), 10_GiB);                // GB300: 5.76 GB per buffer, capped
  // The cap binds from m = 50 x 5 GiB = 268 435 456 000 B; one byte less floors to 5 368 709 119.
  EXPECT_EQ(default_refit_memory(Bytes{268'435'456'000}), 10_GiB);
  EXPECT_EQ(default_refit_memory(Bytes{268'435'455'999}).value, 2 * 5'368'709'119);
  EXPECT_EQ(default_refit_memory(Bytes{0}).value, 0);  // memory not given: unbounded
}

// ---- The check in load_scenario ---------------------------------------------------------------

TEST(GpuMemory, DeepSeekV3UnderVllmTp8OnH200IsRefused) {
  // DeepSeek-V3 in BF16 (L = 1.342 TB) under vLLM TP8 on one DGX H200 node (GPUs 16-23 of four):
  // every tensor is split 8 ways except those vLLM keeps whole on each TP rank (R: the MLA
  // down-projections, norms, routers), so a GPU holds (L - R) / 8 + R = 169.6 GB, more than
  // 0.9 x 141 GB = 126.9 GB before any staging; with 2 x min(141 GB / 50, 5 GiB) = 5.64 GB of
  // staging, 175.2 GB.
  const std::string topo = temp_file("h200-4n.yaml", "cluster: {template: dgx-h200, nodes: 4}\nfabric: {spines: 2}\n").string();
  const std::string text = model("deepseek-v3.yaml") +
                           "topology: " + topo + "\n"                                             // 2
                           "source:\n"                                                           // 3
                           "  framework: megatron\n  tp: 8\n  pp: 2\n  ep: 8\n  etp: 1\n"      // 4-8
                           "  layers_per_stage: [31, 30]\n  gpus: 0-15\n"                        // 9-10
                           "destination:\n"                                                      // 11
                           "  framework: vllm\n  tp: 8\n  gpus: 16-23\n";                        // 12-14
  const ConfigError e = scenario_error("deepseek-h200.yaml", text);
  EXPECT_EQ(e.line(), 11);
  EXPECT_EQ(e.key(), "destination");
  EXPECT_HAS(std::string(e.what()), "deepseek-h200.yaml:11: destination: GPU 16 holds 169.6 GB of weights + 5.6 GB of refit "
                                    "staging (refit_memory default: 2 x min(2 % of 141.0 GB, 5 GiB)) = 175.2 GB, more than "
                                    "0.9 (gpu_memory_utilization) x 141.0 GB = 126.9 GB; use more GPUs per replica (tp)");
  // The same weights from the steps of load_scenario: (L - R) / 8 + R on every destination GPU.
  const Scenario s = Scenario::load(temp_file("deepseek-h200.yaml", text));
  const Inventory inv = load_inventory(s);
  const Topology t = load_topology(s);
  auto [src, dst] = build_layouts(s, inv);
  const auto memory = gpu_memory_use(s, inv, t, src, dst);
  std::int64_t logical = 0, replicated = 0;
  for (const auto& x : inv.tensors()) {
    logical += x.bytes().value;
    if (x.role == ParallelRole::Replicated && x.expert < 0) replicated += x.bytes().value;
  }
  ASSERT_EQ((logical - replicated) % 8, 0);
  for (GpuId g = 16; g < 24; ++g) {
    EXPECT_EQ(memory[static_cast<std::size_t>(g)].destination_weights.value, (logical - replicated) / 8 + replicated);
    EXPECT_EQ(memory[static_cast<std::size_t>(g)].budget.value, 5'640'000'000);
    EXPECT_EQ(memory[static_cast<std::size_t>(g)].limit.value, 126'900'000'000);  // 0.9 x 141 GB
  }
  EXPECT_EQ(memory[0].limit, 141_GB);  // a source GPU: its whole memory
  EXPECT_EQ(memory[24].source_weights.value + memory[24].destination_weights.value, 0);  // on neither side
  EXPECT_EQ(memory[24].budget.value, 5'640'000'000);
  // The source fits: Megatron EP8 x PP2 puts 1/16 of the experts and TP8 1/8 of a stage's other
  // weights on a GPU, some 85 GB.
  EXPECT_LT(memory[0].source_weights + memory[0].budget, memory[0].limit);
}

TEST(GpuMemory, ColocatedGpuHoldsBothSidesOnce) {
  // qwen3-8b-colocated: Megatron TP2 x PP2 x DP4 and vLLM TP4 x DP4 on the same 16 H100.
  const LoadedScenario sc = load_scenario(kRoot / "scenarios/qwen3-8b-colocated.yaml");
  ASSERT_EQ(sc.memory.size(), 16u);
  const auto src_rank = sc.source.bytes_per_rank(sc.inventory), dst_rank = sc.destination.bytes_per_rank(sc.inventory);
  for (GpuId g = 0; g < 16; ++g) {  // rank r on GPU r on both sides
    const GpuMemoryUse& u = sc.memory[static_cast<std::size_t>(g)];
    EXPECT_EQ(u.source_weights, src_rank[static_cast<std::size_t>(g)]);
    EXPECT_EQ(u.destination_weights, dst_rank[static_cast<std::size_t>(g)]);
    EXPECT_EQ(u.weights(), u.source_weights + u.destination_weights);
    EXPECT_EQ(u.budget.value, 3'200'000'000);     // both sides default: 2 x 1.6 GB
    EXPECT_EQ(u.limit.value, 72'000'000'000);     // the destination's 0.9 x 80 GB
  }
  // A colocated GPU takes the smaller of the two sides' budgets (default 3.2 GB).
  auto budget_of = [](const std::vector<std::string>& sets) {
    std::vector<Override> o;
    for (const auto& t : sets) o.push_back(parse_override(t));
    return load_scenario(kRoot / "scenarios/qwen3-8b-colocated.yaml", o).memory[5].budget;
  };
  EXPECT_EQ(budget_of({"source.refit_memory=1GiB"}), 1_GiB);
  EXPECT_EQ(budget_of({"destination.refit_memory=8GiB"}).value, 3'200'000'000);
  EXPECT_EQ(budget_of({"source.refit_memory=2GiB", "destination.refit_memory=512MiB"}), 512_MiB);
  // Too big a budget: the error counts both sides' weights at the destination key, naming the
  // override of that side.
  const auto e = config_error([] {
    load_scenario(kRoot / "scenarios/qwen3-8b-colocated.yaml",
                  {parse_override("source.refit_memory=70GB"), parse_override("destination.refit_memory=70GB")});
  });
  EXPECT_HAS(e, "--set destination.refit_memory=70GB: ");
  EXPECT_HAS(e, "qwen3-8b-colocated.yaml:");
  EXPECT_HAS(e, ": destination: GPU ");
  EXPECT_HAS(e, "(on both sides) holds ");
  EXPECT_HAS(e, " source + ");
  EXPECT_HAS(e, "+ 70.0 GB of refit staging (refit_memory 70.0 GB on both sides)");
  EXPECT_HAS(e, "more than 0.9 (gpu_memory_utilization) x 80.0 GB = 72.0 GB");
  const auto smaller = config_error([] {
    load_scenario(kRoot / "scenarios/qwen3-8b-colocated.yaml",
                  {parse_override("source.refit_memory=70GB"), parse_override("destination.refit_memory=75GB")});
  });
  EXPECT_HAS(smaller, "+ 70.0 GB of refit staging (source refit_memory 70.0 GB, the smaller of the two sides')");
}

TEST(GpuMemory, ReplicatedShardOnOneGpuIsOneCopy) {
  // Two ranks on GPU 0 holding one shard of 1000 BF16 elements between them: 2000 B, not 4000.
  const Inventory inv = Inventory::load(kRoot / "models/tiny-gqa.yaml");
  const auto tensors = static_cast<std::int32_t>(inv.tensors().size());
  ShardMap map(tensors, {0, 0, 1}, "two ranks on GPU 0");
  const RankSetId both = map.intern(RankSet({RankGrid{0, {{2, 1}}}}));  // ranks 0 and 1
  map.add_shard(0, Box{{{0, 1}, {0, 1000}}}, both);
  map.add_shard(1, Box{{{0, 1}, {0, 10}}}, map.intern(RankSet::single(2)));
  ASSERT_EQ(dtype_size(inv.tensor(0).dtype), 2);
  ASSERT_EQ(dtype_size(inv.tensor(1).dtype), 2);
  Scenario s;
  s.source.gpus = {0, 0, 1};
  const ShardMap none(tensors, {}, "empty");
  const auto memory = gpu_memory_use(s, inv, Topology::load(kRoot / "topologies/dgx-h100-2n.yaml"), map, none);
  EXPECT_EQ(memory[0].source_weights.value, 2000);
  EXPECT_EQ(memory[1].source_weights.value, 20);  // 10 elements
  EXPECT_EQ(memory[2].source_weights.value, 0);
}

TEST(GpuMemory, WithoutMemoryInTheTopologyNothingIsBoundedOrChecked) {
  const LoadedScenario sc = load_scenario(temp_file("tiny-irregular.yaml", tiny_on_irregular()));
  for (const GpuMemoryUse& u : sc.memory) {
    EXPECT_EQ(u.capacity.value, 0);
    EXPECT_EQ(u.budget.value, 0);  // unbounded
    EXPECT_EQ(u.limit.value, 0);   // unknown
  }
  EXPECT_GT(sc.memory[0].source_weights.value, 0);
  EXPECT_GT(sc.memory[2].destination_weights.value, 0);
  // An explicit budget is kept, and with no capacity nothing refuses even 50 TB.
  const LoadedScenario big =
      load_scenario(temp_file("tiny-irregular-big.yaml", tiny_on_irregular("  refit_memory: 50TB\n")));
  EXPECT_EQ(big.memory[0].budget.value, 50'000'000'000'000);
  EXPECT_EQ(big.memory[2].budget.value, 0);
  // Given a capacity through --set (an explicit device by index), GPU 0 is checked: tiny-gqa under
  // Megatron TP2 is some 3.5 MB per GPU, more than 1 MB; the default budget is 2 x 1 MB / 50 = 40 KB.
  const ConfigError e = scenario_error("tiny-irregular.yaml", tiny_on_irregular(),
                                       {parse_override("topology.devices.0.memory=1MB")});
  EXPECT_EQ(e.key(), "source");
  EXPECT_EQ(e.line(), 3);
  EXPECT_HAS(std::string(e.what()), "source: GPU 0 holds ");
  EXPECT_HAS(std::string(e.what()), " + 40.0 KB of refit staging (refit_memory default: 2 x min(2 % of 1.00 MB, 5 GiB))");
  EXPECT_HAS(std::string(e.what()), "more than its 1.00 MB of memory; shard the weights over more GPUs");
}

TEST(GpuMemory, KeysSetByOverrides) {
  // small-moe-ep on dgx-h100-2n: Megatron on GPUs 0-7, vLLM on 8-15.
  const auto sc = load_scenario(kRoot / "scenarios/small-moe-ep.yaml",
                                {parse_override("destination.refit_memory=2GiB"), parse_override("source.refit_memory=256MiB"),
                                 parse_override("destination.gpu_memory_utilization=0.5"),
                                 parse_override("topology.cluster.gpu_memory=96GB")});
  EXPECT_EQ(sc.scenario.destination_refit_memory, 2_GiB);
  EXPECT_EQ(sc.scenario.source_refit_memory, 256_MiB);
  EXPECT_EQ(sc.scenario.memory_fraction, 0.5);
  EXPECT_EQ(sc.memory[0].capacity, 96_GB);
  EXPECT_EQ(sc.memory[0].budget, 256_MiB);
  EXPECT_EQ(sc.memory[0].limit, 96_GB);
  EXPECT_EQ(sc.memory[8].budget, 2_GiB);
  EXPECT_EQ(sc.memory[8].limit, 48_GB);  // 0.5 x 96 GB
  // The defaults: no refit_memory, vLLM's 0.9.
  const Scenario plain = Scenario::load(kRoot / "scenarios/small-moe-ep.yaml");
  EXPECT_FALSE(plain.source_refit_memory);
  EXPECT_FALSE(plain.destination_refit_memory);
  EXPECT_EQ(plain.memory_fraction, 0.9);
  EXPECT_EQ(plain.memory_fraction_key, "gpu_memory_utilization");
  // A bad value through --set is the reader's error, naming the override.
  const auto e = config_error([] {
    Scenario::load(kRoot / "scenarios/small-moe-ep.yaml", {parse_override("destination.refit_memory=4")});
  });
  EXPECT_HAS(e, "--set destination.refit_memory=4: ");
  EXPECT_HAS(e, "destination.refit_memory: '4' has no unit");
}

TEST(GpuMemory, BadScenarioValuesAreOneErrorAtTheirKey) {
  // tiny_on_irregular: a source key on line 7; a destination key on line 11 (without a source key).
  struct Case {
    const char* name;
    std::string src, dst;
    int line;
    const char* key;
    const char* says;
  };
  const std::vector<Case> cases = {
      {"negative", "  refit_memory: -4GiB\n", "", 7, "source.refit_memory", "negative size '-4GiB'"},
      {"no unit", "", "  refit_memory: 4\n", 11, "destination.refit_memory", "'4' has no unit"},
      {"zero", "", "  refit_memory: 0MiB\n", 11, "destination.refit_memory", "must be positive"},
      {"absurd", "", "  refit_memory: 1PB\n", 11, "destination.refit_memory", "more than 100 TB"},
      {"fraction 1.5", "", "  gpu_memory_utilization: 1.5\n", 11, "destination.gpu_memory_utilization",
       "must be in (0, 1], the share of each GPU's memory the engine may use; got '1.5'"},
      {"fraction 0", "", "  gpu_memory_utilization: 0\n", 11, "destination.gpu_memory_utilization", "must be in (0, 1]"},
      {"fraction text", "", "  gpu_memory_utilization: most\n", 11, "destination.gpu_memory_utilization", "most"},
      {"fraction on a source", "  gpu_memory_utilization: 0.8\n", "", 7, "source.gpu_memory_utilization",
       "a destination key"},
      {"sglang's fraction on vllm", "", "  mem_fraction_static: 0.8\n", 11, "destination.mem_fraction_static",
       "unknown key"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const ConfigError e = scenario_error("bad.yaml", tiny_on_irregular(c.src, c.dst));
    EXPECT_EQ(e.line(), c.line) << e.what();
    EXPECT_EQ(e.key(), c.key) << e.what();
    EXPECT_HAS(std::string(e.what()), c.says);
  }
  // The serving fractions belong to their frameworks' destinations.
  const std::string sglang = model("tiny-gqa.yaml") + topology("dgx-h100-2n.yaml") +
                             "source:\n  framework: vllm\n  tp: 2\n  gpus: 0-1\n  gpu_memory_utilization: 0.8\n"  // 3-7
                             "destination:\n  framework: sglang\n  tp_size: 2\n  gpus: 8-9\n";
  const ConfigError on_source = scenario_error("bad-source.yaml", sglang);
  EXPECT_EQ(on_source.line(), 7);
  EXPECT_EQ(on_source.key(), "source.gpu_memory_utilization");
  EXPECT_HAS(std::string(on_source.what()), "a destination key");
  std::string fraction = sglang;
  fraction.replace(fraction.find("  gpu_memory_utilization: 0.8\n"), 30, "");
  const ConfigError wrong_key = scenario_error("bad-key.yaml", fraction + "  gpu_memory_utilization: 0.8\n");
  EXPECT_EQ(wrong_key.key(), "destination.gpu_memory_utilization");
  EXPECT_HAS(std::string(wrong_key.what()), "unknown key");
  const ConfigError big = scenario_error("bad-fraction.yaml", fraction + "  mem_fraction_static: 1.5\n");
  EXPECT_EQ(big.key(), "destination.mem_fraction_static");
  EXPECT_EQ(big.line(), 11);
  const auto ok = Scenario::parse(fraction + "  mem_fraction_static: 0.85\n", "ok.yaml", kRoot);
  EXPECT_EQ(ok.memory_fraction, 0.85);
  EXPECT_EQ(ok.memory_fraction_key, "mem_fraction_static");
  // A dtensor or megatron destination has no fraction: its limit is the whole memory.
  const auto whole = Scenario::load(kRoot / "scenarios/small-dtensor-uneven.yaml");
  EXPECT_EQ(whole.memory_fraction, 1.0);
  EXPECT_EQ(whole.memory_fraction_key, "");
}

TEST(GpuMemory, EveryShippedScenarioFits) {
  for (const auto& e : std::filesystem::directory_iterator(kRoot / "scenarios")) {
    if (e.path().extension() != ".yaml") continue;
    SCOPED_TRACE(e.path().string());
    const LoadedScenario sc = load_scenario(e.path());  // check_memory passed
    ASSERT_EQ(sc.memory.size(), static_cast<std::size_t>(sc.topology.gpu_count()));
    // Every weight counted: one rank per GPU on each side, so the GPUs' weights add up to the
    // bytes the ranks hold.
    Bytes src{0}, dst{0};
    for (const auto& u : sc.memory) {
      src += u.source_weights;
      dst += u.destination_weights;
      if (u.limit.value > 0) {
        EXPECT_LE(u.weights() + u.budget, u.limit);
      }
    }
    // An adapter-only refit counts the resident model's weights besides the adapters it moves.
    if (sc.inventory.lora()) {
      EXPECT_GT(src, sc.source.total_bytes_held(sc.inventory));
      EXPECT_GT(dst, sc.destination.total_bytes_held(sc.inventory));
      continue;
    }
    EXPECT_EQ(src, sc.source.total_bytes_held(sc.inventory));
    EXPECT_EQ(dst, sc.destination.total_bytes_held(sc.inventory));
  }
}

// ---- The commands -----------------------------------------------------------------------------

TEST(GpuMemory, PlanShowsEachSidesBudgetAndTightestGpu) {
  int status = 0;
  const std::string plan = std::string(RESHARD_BINARY) + " plan " + (kRoot / "scenarios/qwen3-8b-colocated.yaml").string();
  const std::string text = reshard::test::run_command(plan + " 2>&1", &status);
  ASSERT_EQ(status, 0) << text;
  // Qwen3-8B, 16.4 GB in BF16, a quarter on each GPU per side (TP2 x PP2 and TP4), colocated:
  // 8.2 GB of weights + 3.2 GB of staging against 0.9 x 80 GB.
  EXPECT_HAS(text, "destination memory: staging 3.20 GB per GPU (default: 2 x min(2 % of GPU memory, 5 GiB)); "
                   "weights + staging 11.4 GB of 72.0 GB (gpu_memory_utilization 0.9 x 80.0 GB) on GPU ");
  const std::string set = reshard::test::run_command(plan + " --set destination.refit_memory=2GiB 2>&1", &status);
  ASSERT_EQ(status, 0) << set;
  EXPECT_HAS(set, "destination memory: staging 2.15 GB per GPU (refit_memory)");
  EXPECT_HAS(set, "source memory:      staging 2.15 GB per GPU (default");  // colocated: the smaller budget
  const std::string json = reshard::test::run_command(plan + " --json 2>/dev/null", &status);
  ASSERT_EQ(status, 0);
  const auto j = nlohmann::json::parse(json);
  EXPECT_EQ(j["memory"]["destination"]["budget_bytes"], 3'200'000'000);
  EXPECT_EQ(j["memory"]["destination"]["limit_bytes"], 72'000'000'000);
  EXPECT_EQ(j["memory"]["source"]["limit_bytes"], 72'000'000'000);  // colocated: the destination's limit
  EXPECT_GT(j["memory"]["source"]["weights_bytes_max"].get<std::int64_t>(), 8'000'000'000);
}

TEST(GpuMemory, TopoShowsEachKindsMemory) {
  int status = 0;
  const std::string cmd = std::string(RESHARD_BINARY) + " topo " + (kRoot / "topologies/h100-train-gb200-infer.yaml").string();
  const std::string text = reshard::test::run_command(cmd + " 2>&1", &status);
  ASSERT_EQ(status, 0) << text;
  EXPECT_HAS(text, "GPU memory:");
  EXPECT_HAS(text, "80.0 GB (256 GPUs), 186 GB (288 GPUs)");
  const auto j = nlohmann::json::parse(reshard::test::run_command(cmd + " --json", &status));
  EXPECT_EQ(j["gpu_memory_bytes"], 80'000'000'000);
  EXPECT_EQ(j["gpu_memory_max_bytes"], 186'000'000'000);
  const auto one = reshard::test::run_command(
      std::string(RESHARD_BINARY) + " topo " + (kRoot / "topologies/dgx-h100-2n.yaml").string(), &status);
  EXPECT_HAS(one, "80.0 GB per GPU");
  const auto none = reshard::test::run_command(
      std::string(RESHARD_BINARY) + " topo " + (kRoot / "topologies/irregular-example.yaml").string(), &status);
  EXPECT_HAS(none, "GPU memory:");
  EXPECT_HAS(none, "not given\n");
}
