// Describing a real deployment without being misled: what used to be accepted with a silent guess
// that changes the answer is now one clear error (or a warning where the value is legal but
// implausible), naming the file, line and key -- each case here once passed without a word.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "config_error.hpp"
#include "reshard/model/errors.hpp"
#include "reshard/model/json_file.hpp"
#include "reshard/study/calibrate.hpp"
#include "reshard/model/checked.hpp"
#include "reshard/model/inventory.hpp"
#include "reshard/model/layout.hpp"
#include "reshard/model/scenario.hpp"
#include "reshard/model/topology.hpp"
#include "reshard/study/sweep.hpp"

using namespace reshard;
using namespace reshard::model;
using namespace reshard::study;
using reshard::test::config_error;

namespace {

const std::string kRoot = RESHARD_SOURCE_DIR;

std::string read(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), {}};
}

std::filesystem::path temp_file(const std::string& name, const std::string& text) {
  const auto p = std::filesystem::temp_directory_path() / ("reshard_silent_" + name);
  std::ofstream(p) << text;
  return p;
}

// small-moe-ep with one piece of text replaced.
std::string scenario_with(const std::string& from, const std::string& to) {
  std::string text = read(kRoot + "/scenarios/small-moe-ep.yaml");
  const auto at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return text.replace(at, from.size(), to);
}
Scenario parse_scenario(const std::string& text) { return Scenario::parse(text, "s.yaml", kRoot + "/scenarios"); }

}  // namespace

// `tp: 2` then `tp: 4` in one mapping: yaml-cpp kept the first, PyYAML keeps the last.
TEST(NoSilentGuess, DuplicateYamlKeyIsRefusedAtTheSecondNamingTheFirst) {
  const std::string text = scenario_with("  tp: 2\n  dp: 4", "  tp: 2\n  tp: 4\n  dp: 4");
  const std::string msg = config_error([&] { parse_scenario(text); });
  EXPECT_HAS(msg, "s.yaml:17: destination.tp: appears twice in one mapping (first at line 16)");
}

// The same in JSON (schedules, measurements): nlohmann keeps the last silently.
TEST(NoSilentGuess, DuplicateJsonKeyIsRefusedNamingItsPath) {
  const auto p = temp_file("dup.json", R"({"format": "x", "params": {"chunk_bytes": 1, "chunk_bytes": 2}})");
  const std::string msg = config_error([&] { read_json_file(p, "schedule file"); });
  EXPECT_HAS(msg, "params.chunk_bytes: appears twice in one object");
  const auto ok = temp_file("nodup.json", R"({"a": {"k": 1}, "b": {"k": 2}, "c": [{"k": 1}, {"k": 2}]})");
  EXPECT_NO_THROW(read_json_file(ok, "schedule file"));
}

// Source 0-7 and destination 4-11 share 4 GPUs: a range typo would turn a disaggregated refit into
// a colocated one. Refused at destination.gpus naming the shared GPUs, unless the scenario says
// `colocated: true` (and then it must share some).
TEST(NoSilentGuess, OverlappingGpuListsNeedColocated) {
  const std::string overlapping = scenario_with("  gpus: 8-15", "  gpus: 4-11");
  const std::string msg = config_error([&] { parse_scenario(overlapping); });
  EXPECT_HAS(msg, "s.yaml:20: destination.gpus: shares 4 GPUs with source.gpus (4-7)");
  EXPECT_HAS(msg, "colocated: true");
  const Scenario ok = parse_scenario("colocated: true\n" + overlapping);
  EXPECT_TRUE(ok.colocated);
  EXPECT_EQ(shared_gpus(ok), (std::vector<GpuId>{4, 5, 6, 7}));
  EXPECT_EQ(gpu_ranges({7, 4, 5, 6, 12, 14, 15}), "4-7, 12, 14-15");
  const std::string apart = config_error([&] { parse_scenario("colocated: true\n" + read(kRoot + "/scenarios/small-moe-ep.yaml")); });
  EXPECT_HAS(apart, "s.yaml:1: colocated: the two sides share no GPU");
}

// A 2-node cluster without `fabric:` (docs call it optional) has 8 rail leaves: one spine per rail
// by default; the leaf uplink total, and so the bisection, is the same whatever the spine count.
TEST(NoSilentGuess, FabricIsOptionalSpinesDefaultToOnePerRail) {
  const std::string cluster = "cluster:\n  template: dgx-h100\n  nodes: 2\n";
  const Topology bare = Topology::parse(cluster, "t.yaml");
  const auto spines = [](const Topology& t) {
    return std::count_if(t.devices().begin(), t.devices().end(), [](const Device& d) { return d.kind == DeviceKind::Spine; });
  };
  EXPECT_EQ(spines(bare), 8);
  const Topology four = Topology::parse(cluster + "fabric:\n  spines: 4\n", "t.yaml");
  EXPECT_EQ(spines(four), 4);
  EXPECT_DOUBLE_EQ(bare.bisection_bandwidth().value, four.bisection_bandwidth().value);
  // nodes_per_leaf under cluster: as in each item of clusters:, or under fabric:, not both.
  const Topology per_leaf = Topology::parse(cluster + "  nodes_per_leaf: 1\n", "t.yaml");
  const Topology fabric_per_leaf = Topology::parse(cluster + "fabric:\n  nodes_per_leaf: 1\n", "t.yaml");
  EXPECT_EQ(per_leaf.devices().size(), fabric_per_leaf.devices().size());
  EXPECT_EQ(per_leaf.devices().size(), bare.devices().size() + 8);  // 16 leaves instead of 8
  const std::string both = config_error(
      [&] { (void)Topology::parse(cluster + "  nodes_per_leaf: 1\nfabric:\n  nodes_per_leaf: 1\n", "t.yaml"); });
  EXPECT_HAS(both, "t.yaml:4: cluster.nodes_per_leaf: given twice");
}

// A NIC of 400 Mb/s (meant: 400 Gb/s) is read as written, with a warning naming file, line and key;
// so are a link above 10 TB/s and a GPU memory bandwidth outside 100 GB/s - 50 TB/s.
TEST(NoSilentGuess, ImplausibleBandwidthsWarn) {
  const std::string cluster = "cluster:\n  template: dgx-h100\n  nodes: 2\n";
  const Topology slow = Topology::parse(cluster + "  nic_speed: 400Mbps\n", "t.yaml");
  ASSERT_FALSE(slow.warnings().empty());
  EXPECT_HAS(slow.warnings()[0], "t.yaml:4: cluster.nic_speed: '400Mbps' (50.0 MB/s) is below 10 Gb/s");
  EXPECT_TRUE(Topology::parse(cluster + "  nic_speed: 400Gbps\n", "t.yaml").warnings().empty());
  EXPECT_TRUE(Topology::parse(cluster + "  nic_speed: 10Gbps\n", "t.yaml").warnings().empty());  // the edge
  const Topology fast = Topology::parse(cluster + "  host_link: 20TB/s\n", "t.yaml");
  ASSERT_FALSE(fast.warnings().empty());
  EXPECT_HAS(fast.warnings()[0], "t.yaml:4: cluster.host_link: '20TB/s' (20.0 TB/s) is above 10 TB/s");
  const std::string explicit_topology =
      "devices:\n  - {name: a, kind: gpu, node: 0, memory_bandwidth: 3.35GBps}\n  - {name: b, kind: gpu, node: 1}\n"
      "links:\n  - {from: a, to: b, kind: network, bandwidth: 1Gbps}\n";
  const Topology ex = Topology::parse(explicit_topology, "e.yaml");
  ASSERT_EQ(ex.warnings().size(), 2u);
  EXPECT_HAS(ex.warnings()[0], "e.yaml:2: devices[0].memory_bandwidth: '3.35GBps' (3.35 GB/s) is below 100 GB/s");
  EXPECT_HAS(ex.warnings()[1], "e.yaml:5: links[0].bandwidth: '1Gbps' (125 MB/s) is below 10 Gb/s");
}

// One knob for every cluster's NIC (and host link) of a several-cluster topology; a cluster that
// also sets its own is refused, so neither silently wins.
TEST(NoSilentGuess, FabricNicSpeedSetsEveryCluster) {
  const std::string two = "clusters:\n  - {name: a, template: dgx-h100, nodes: 2}\n  - {name: b, template: dgx-b200, nodes: 2}\n";
  const Topology t = Topology::parse(two + "fabric:\n  nic_speed: 200Gbps\n", "two.yaml");
  for (GpuId g : {0, 15, 16, 31}) EXPECT_DOUBLE_EQ(t.gpu_nic_bandwidth(g).value, 25e9) << g;
  const std::string clash = config_error([&] {
    (void)Topology::parse("clusters:\n  - {name: a, template: dgx-h100, nodes: 2, nic_speed: 400Gbps}\n"
                          "  - {name: b, template: dgx-b200, nodes: 2}\nfabric:\n  nic_speed: 200Gbps\n",
                          "two.yaml");
  });
  EXPECT_HAS(clash, "two.yaml:2: clusters[0].nic_speed: given here and as fabric.nic_speed");
}

// A model path that names nothing: the scenario's file, line and key, and the path tried.
TEST(NoSilentGuess, MissingModelFileNamesTheScenarioKeyAndThePathTried) {
  const std::string text = scenario_with("model: ../models/tiny-moe.yaml", "model: tiny-moe");
  const Scenario s = parse_scenario(text);
  const std::string msg = config_error([&] { load_scenario(s); });
  EXPECT_HAS(msg, "s.yaml:5: model: no such file: tried " + (std::filesystem::path(kRoot) / "scenarios/tiny-moe").string());
  EXPECT_HAS(msg, "relative paths are read from the scenario's folder");
}

// An error a --set causes names the --set, even when the reader reports another key: a one-cluster
// key set on a several-cluster topology clashes with `clusters`.
TEST(NoSilentGuess, ErrorsASetCausesNameTheSet) {
  const Scenario s = Scenario::load(kRoot + "/scenarios/deepseek-v3-h100-to-gb200.yaml",
                                    {parse_override("topology.cluster.nic_speed=800Gbps")});
  const std::string msg = config_error([&] { load_topology(s); });
  EXPECT_HAS(msg, "--set topology.cluster.nic_speed=800Gbps");
  EXPECT_HAS(msg, "clusters: a generated topology has either one 'cluster' or a list of 'clusters'");
  EXPECT_HAS(msg, "fabric.nic_speed");
}

// A measurements CSV with a column reshard does not read (an old `chunks` column) is refused at
// the header; an empty one names the file.
TEST(NoSilentGuess, CalibrationCsvRefusesUnknownColumnsAndEmptyFiles) {
  const auto extra = temp_file("extra.csv", "scenario,strategy,chunks,measured_s\nx.yaml,direct,abc,1.0\n");
  EXPECT_HAS(config_error([&] { read_measured_runs(extra); }), extra.string() + ":1: chunks: unknown column");
  const auto empty = temp_file("empty.csv", "# nothing measured yet\nscenario,strategy,measured_s\n");
  EXPECT_HAS(config_error([&] { read_measured_runs(empty); }), empty.string() + ":2: no measurements");
  const auto noted = temp_file("noted.csv", "scenario,strategy,measured_s,note\nx.yaml,direct,1.5,from a run\n");
  EXPECT_EQ(read_measured_runs(noted).size(), 1u);
}

// A sweep's axis value no reader takes (`400Gb`) is found before any point runs, naming the point.
TEST(NoSilentGuess, SweepChecksEveryAxisValueFirst) {
  const auto spec = study::SweepSpec::parse("scenario: " + kRoot + "/scenarios/small-moe-ep.yaml\naxes:\n"
                                            "  - key: topology.cluster.nic_speed\n    values: [400Gbps, 400Gb, 800Gbps]\n",
                                            "sw.yaml", kRoot);
  const auto problems = study::check_points(spec);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_HAS(problems[0], "sw.yaml: point 1: --set topology.cluster.nic_speed=400Gb: ");
  EXPECT_HAS(problems[0], "cluster.nic_speed: unknown bandwidth unit 'Gb'");
  EXPECT_TRUE(study::check_points(study::SweepSpec::load(kRoot + "/studies/cluster-join.yaml")).empty());
  // A spec naming a scenario that is not there: the spec's line and key, and the path tried.
  EXPECT_HAS(config_error([&] {
               study::SweepSpec::parse("scenario: none.yaml\naxes:\n  - key: destination.tp\n    values: [2]\n", "sw.yaml",
                                       kRoot + "/studies");
             }),
             "sw.yaml:1: scenario: no such file: tried " + kRoot + "/studies/none.yaml");
}

// A typo in an optional config.json key (first_k_dense_replace) leaves that key at its default and
// changes the model: warned, naming the key meant. A key reshard knows nothing of is warned too;
// the keys of the released configs no weight depends on are not.
TEST(NoSilentGuess, ConfigJsonTypoIsWarnedWithTheKeyMeant) {
  std::string text = read(kRoot + "/models/hf/deepseek-v3/config.json");
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"\"first_k_dense_replace\"", "\"first_k_dense_replac\""}, {"\"hidden_act\"", "\"hiden_activation_fn\""}}) {
    const auto at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
  }
  const auto dir = std::filesystem::temp_directory_path() / "reshard_silent_typo";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << text;
  const Inventory typo = Inventory::load(dir);
  const auto& w = typo.config().warnings;
  ASSERT_EQ(w.size(), 2u);
  EXPECT_HAS(w[0], "config.json:");
  EXPECT_HAS(w[0], "first_k_dense_replac: not a key reshard reads for deepseek_v3; did you mean first_k_dense_replace?");
  EXPECT_HAS(w[1], "hiden_activation_fn: not a key reshard knows for deepseek_v3; ignored");
  // The typo changed the model (no dense layers), which the warning is there to say.
  EXPECT_NE(typo.parameters(), Inventory::load(kRoot + "/models/hf/deepseek-v3").parameters());
  for (const char* m : {"deepseek-v3", "kimi-k2", "qwen3-235b-a22b", "qwen3-8b", "nemotron3-nano"})
    EXPECT_TRUE(Inventory::load(kRoot + "/models/hf/" + m).config().warnings.empty()) << m;
  EXPECT_EQ(checked::closest_name("n_routed_expert", {"n_routed_experts", "n_shared_experts"}), "n_routed_experts");
  EXPECT_EQ(checked::closest_name("tp", {"pp", "dp"}), "");  // 1 edit is more than a third of 2 letters
  EXPECT_EQ(checked::closest_name("num_hidden_layres", {"num_hidden_layers"}), "num_hidden_layers");  // a swap
}

// A vLLM round_robin the model cannot have (Qwen3-MoE: no expert groups) is placed as vLLM places
// it (linear), and `plan` says so.
TEST(NoSilentGuess, VllmPlacementFallbackIsNamedByPlan) {
  const LoadedScenario sc = load_scenario(Scenario::load(
      kRoot + "/scenarios/small-moe-ep.yaml",
      {parse_override("destination.redundant_experts=0"), parse_override("destination.expert_placement=round_robin")}));
  ASSERT_EQ(sc.destination.conventions().size(), 1u);
  EXPECT_HAS(sc.destination.conventions()[0], "experts placed linearly, not round-robin: vLLM falls back because the model has no expert groups");
  EXPECT_TRUE(sc.source.conventions().empty());
}

// Several SGLang servers with DP attention (world = tp_size each): `servers: 2` is two copies of one
// server's layout, the second on the next tp_size GPUs. Every shard of every tensor of the
// two-server map is the one-server shard held on g and g + 4.
TEST(NoSilentGuess, SglangServersAreCopiesOnConsecutiveBlocks) {
  const Inventory inv = Inventory::load(kRoot + "/models/tiny-moe.yaml");
  SglangSpec one{.tp = 4, .dp = 2, .enable_dp_attention = true, .ep = 4};
  SglangSpec two = one;
  two.servers = 2;
  EXPECT_EQ(two.world(), 8);
  const LayoutSpec a{one, {0, 1, 2, 3}}, b{two, {0, 1, 2, 3, 4, 5, 6, 7}};
  EXPECT_EQ(b.describe(), "sglang TP4 DP-attention 2 EP4 x 2 servers on 8 GPUs");
  const ShardMap m1 = build_shard_map(inv, a), m2 = build_shard_map(inv, b);
  for (const auto& t : inv.tensors()) {
    const auto& s1 = m1.shards(t.id);
    const auto& s2 = m2.shards(t.id);
    ASSERT_EQ(s1.size(), s2.size()) << t.name;
    for (std::size_t k = 0; k < s1.size(); ++k) {
      EXPECT_EQ(to_string(s1[k].box), to_string(s2[k].box)) << t.name;
      std::vector<GpuId> want = m1.gpus_of(s1[k].ranks);
      for (GpuId g : m1.gpus_of(s1[k].ranks)) want.push_back(g + 4);
      std::sort(want.begin(), want.end());
      EXPECT_EQ(m2.gpus_of(s2[k].ranks), want) << t.name;
    }
  }
  // A scenario says it with `servers:`; the GPU count must match.
  const std::string text = scenario_with("  framework: vllm\n  tp: 2\n  dp: 4\n  ep: 8\n  redundant_experts: 8\n",
                                         "  framework: sglang\n  tp_size: 4\n  dp_size: 2\n  enable_dp_attention: true\n"
                                         "  ep_size: 4\n  servers: 2\n");
  EXPECT_NO_THROW(load_scenario(parse_scenario(text)));
  std::string three = text;
  three.replace(three.find("servers: 2"), 10, "servers: 3");
  EXPECT_HAS(config_error([&] { parse_scenario(three); }), "sglang with DP attention (world = tp_size x servers) needs 12 GPUs");
}

// `topo` says which GPU numbers are which cluster's (what a scenario's gpus: lists).
TEST(NoSilentGuess, TopologyListsEachClustersGpuRange) {
  const Topology t = Topology::load(kRoot + "/topologies/h100-train-gb200-infer.yaml");
  ASSERT_EQ(t.clusters().size(), 2u);
  EXPECT_EQ(t.clusters()[0].name, "train");
  EXPECT_EQ(t.clusters()[0].node_template, "dgx-h100");
  EXPECT_EQ(t.clusters()[0].first_gpu, 0);
  EXPECT_EQ(t.clusters()[0].gpus, 256);  // 32 nodes x 8
  EXPECT_EQ(t.clusters()[1].name, "infer");
  EXPECT_EQ(t.clusters()[1].first_gpu, 256);
  EXPECT_EQ(t.clusters()[1].gpus, 288);  // 4 racks x 72
  const Topology one = Topology::load(kRoot + "/topologies/dgx-h100-2n.yaml");
  ASSERT_EQ(one.clusters().size(), 1u);
  EXPECT_EQ(one.clusters()[0].gpus, 16);
}
