// Hostile input: every reader refuses a value that does not fit its type, a count that would
// allocate without bound, an index that points nowhere, with one ConfigError naming the file, the
// line or JSON path, and the key. Each case here once was a wrong answer, a crash or a hang.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "reshard/study/calibrate.hpp"
#include "reshard/model/checked.hpp"
#include "reshard/model/errors.hpp"
#include "reshard/model/inventory.hpp"
#include "reshard/model/scenario.hpp"
#include "reshard/model/schedule.hpp"
#include "reshard/model/strategies.hpp"
#include "reshard/model/topology.hpp"
#include "reshard/sim/flow_io.hpp"
#include "reshard/sim/traffic.hpp"
#include "config_error.hpp"

using namespace reshard;
using namespace reshard::model;
using namespace reshard::study;

namespace {

const std::string kRoot = RESHARD_SOURCE_DIR;

using reshard::test::config_error;

std::filesystem::path temp_file(const std::string& name, const std::string& text) {
  const auto p = std::filesystem::temp_directory_path() / ("reshard_hostile_" + name);
  std::ofstream(p) << text;
  return p;
}

// small-moe-ep with one layout line replaced.
std::string scenario_with(const std::string& from, const std::string& to) {
  std::ifstream in(kRoot + "/scenarios/small-moe-ep.yaml");
  std::string text((std::istreambuf_iterator<char>(in)), {});
  const auto at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return text.replace(at, from.size(), to);
}
Scenario parse_scenario(const std::string& text) { return Scenario::parse(text, "s.yaml", kRoot + "/scenarios"); }

// tiny-moe with one line replaced.
std::string model_with(const std::string& from, const std::string& to) {
  std::ifstream in(kRoot + "/models/tiny-moe.yaml");
  std::string text((std::istreambuf_iterator<char>(in)), {});
  const auto at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return text.replace(at, from.size(), to);
}

TEST(Checked, ParsesExactlyOrNotAtAll) {
  EXPECT_EQ(checked::parse_integer("4294967296"), 4294967296);
  EXPECT_EQ(checked::parse_integer("-3"), -3);
  for (const char* bad : {"", "+3", "3 ", "11.7", "true", "3+2^32", "0x10", "9223372036854775808"})
    EXPECT_FALSE(checked::parse_integer(bad)) << bad;
  EXPECT_EQ(checked::parse_finite("2.5e-3"), 2.5e-3);
  for (const char* bad : {"nan", "inf", "-inf", "1e999", "0.001abc", ""}) EXPECT_FALSE(checked::parse_finite(bad)) << bad;
  EXPECT_FALSE(checked::mul(3037000500, 3037000500));  // > 2^63
  EXPECT_EQ(checked::mul(3037000499, 3037000499), 9223372030926249001);
  EXPECT_FALSE(checked::add(std::numeric_limits<std::int64_t>::max(), 1));
  const std::string cut = checked::quote(std::string(100000, 'x'));
  EXPECT_LT(cut.size(), 120u);
  EXPECT_HAS(cut, "(100000 characters)");
}

TEST(HostileYaml, GpuIndicesThatWouldWrapAreRefused) {
  // 4294967296 = 2^32 once became GPU 0.
  const auto e = config_error([] { parse_scenario(scenario_with("gpus: 8-15", "gpus: [4294967296-4294967303]")); });
  EXPECT_HAS(e, "s.yaml:");
  EXPECT_HAS(e, "destination.gpus");
  EXPECT_HAS(e, "beyond");
}

TEST(HostileYaml, HugeGpuRangeIsRefusedBeforeExpansion) {
  // 0-100000000 once expanded 10^8 GPUs (30 s, 1.7 GB) before the topology check.
  for (const char* range : {"gpus: 0-100000000", "gpus: 0-2147483647"}) {
    const auto e = config_error([&] { parse_scenario(scenario_with("gpus: 8-15", range)); });
    EXPECT_HAS(e, "destination.gpus");
    EXPECT_HAS(e, "largest GPU index");
  }
  // A range within the bound but beyond the topology: refused against its 16 GPUs.
  const auto e = config_error([] {
    load_scenario(Scenario::parse(scenario_with("gpus: 8-15", "gpus: 100-107"), kRoot + "/scenarios/x.yaml",
                                  kRoot + "/scenarios"));
  });
  EXPECT_HAS(e, "destination.gpus: GPU 100 is outside the topology");
}

TEST(HostileYaml, ServingLayoutKeysThatContradict) {
  // vLLM: each bad combination is refused at its key.
  auto vllm_error = [](const std::string& from, const std::string& to) {
    return config_error([&] { parse_scenario(scenario_with(from, to)); });
  };
  EXPECT_HAS(vllm_error("ep: 8", "enable_expert_parallel: false\n  ep: 8"),
             "destination.ep: ep 8 turns expert parallelism on, but enable_expert_parallel is false");
  EXPECT_HAS(vllm_error("ep: 8", "dp_mode: data_parallel\n  ep: 4"),
             "destination.ep: with dp_mode data_parallel vLLM's EP size is TP*DP = 8");
  EXPECT_HAS(vllm_error("ep: 8", "dp_mode: replicas\n  ep: 8"),
             "destination.dp_mode: expected engines or data_parallel, got 'replicas'");
  EXPECT_HAS(vllm_error("ep: 8", "ep: 8\n  all2all_backend: deepep"),
             "destination.all2all_backend: unknown all-to-all backend 'deepep'; vLLM's --all2all-backend takes: "
             "allgather_reducescatter, naive");
  EXPECT_HAS(vllm_error("ep: 8\n  redundant_experts: 8", "expert_placement: striped"),
             "destination.expert_placement: expected linear or round_robin, got 'striped'");
  EXPECT_HAS(vllm_error("ep: 8", "ep: 0"), "destination.ep");
  // data_parallel with enable_expert_parallel parses, EP = TP*DP.
  const auto ok = parse_scenario(scenario_with("ep: 8", "dp_mode: data_parallel\n  enable_expert_parallel: true"));
  EXPECT_EQ(ok.destination.describe(), "vllm TP2 DP4 (data parallel, EP8) +8 redundant experts on 8 GPUs");
  // SGLang.
  const std::string vllm_block = "framework: vllm\n  tp: 2\n  dp: 4\n  ep: 8\n  redundant_experts: 8";
  auto sglang_error = [&](const std::string& keys) {
    return config_error([&] { parse_scenario(scenario_with(vllm_block, "framework: sglang\n  " + keys)); });
  };
  EXPECT_HAS(sglang_error("tp_size: 8\n  dp_size: 3\n  enable_dp_attention: true"),
             "destination.enable_dp_attention: DP attention splits the tp_size 8 GPUs into dp_size 3 attention "
             "groups; dp_size must divide tp_size");
  EXPECT_HAS(sglang_error("tp_size: 4\n  dp_size: 2\n  enable_dp_lm_head: true"),
             "destination.enable_dp_lm_head: enable_dp_lm_head needs enable_dp_attention: true");
  EXPECT_HAS(sglang_error("tp_size: 8\n  moe_dense_tp_size: 2"),
             "destination.moe_dense_tp_size: SGLang accepts moe_dense_tp_size 1 or tp_size (8), got 2");
  EXPECT_HAS(sglang_error("tp_size: 8\n  ep_size: 3"), "destination.ep_size: ep_size 3 must divide tp_size 8");
  EXPECT_HAS(sglang_error("tp_size: 8\n  moe_a2a_backend: deepep\n  ep_size: 4"),
             "destination.ep_size: an all-to-all MoE backend runs ep_size = tp_size = 8");
  EXPECT_HAS(sglang_error("tp_size: 8\n  moe_a2a_backend: pplx"),
             "destination.moe_a2a_backend: expected none, deepep or mooncake, got 'pplx'");
  EXPECT_HAS(sglang_error("tp: 8"), "destination.tp: unknown key");
  EXPECT_HAS(sglang_error("tp_size: 4"), "sglang TP*DP needs 4 GPUs, but gpus lists 8");
  const auto sg = parse_scenario(scenario_with(
      vllm_block, "framework: sglang\n  tp_size: 8\n  dp_size: 4\n  enable_dp_attention: true\n  ep_size: 8"));
  EXPECT_EQ(sg.destination.describe(), "sglang TP8 DP-attention 4 EP8 on 8 GPUs");
}

TEST(HostileYaml, RedundantExpertsOutOfRange) {
  // 4294967304 = 2^32 + 8 was read as 8.
  const auto e = config_error([] {
    parse_scenario(scenario_with("redundant_experts: 8", "redundant_experts: 4294967304"));
  });
  EXPECT_HAS(e, "destination.redundant_experts: expected an integer in 0..1000000, got '4294967304'");
}

TEST(HostileYaml, BoolAndFloatAreNotIntegers) {
  for (const char* v : {"true", "11.7", "3+2^32", "4294967298"}) {
    const auto e = config_error([&] { parse_scenario(scenario_with("tp: 2\n  dp: 4", std::string("tp: ") + v + "\n  dp: 4")); });
    EXPECT_HAS(e, "destination.tp");
  }
}

TEST(HostileYaml, ModelCountsAreBoundedBeforeAllocation) {
  // num_experts 2^31 - 1 ended in std::bad_alloc; hidden = vocab = 3037000500 gave a negative
  // parameter count.
  const auto e1 = config_error([] { Inventory::parse(model_with("num_experts: 16", "num_experts: 2147483647"), "m.yaml"); });
  EXPECT_HAS(e1, "m.yaml:");
  EXPECT_HAS(e1, "num_experts: expected an integer in 1..1048576, got '2147483647'");
  const auto e2 = config_error([] { Inventory::parse(model_with("vocab_size: ", "vocab_size: 3037000500 #"), "m.yaml"); });
  EXPECT_HAS(e2, "vocab_size: expected an integer in 1..1048576");
  // Within every per-field bound, layers x experts is still bounded before the tensors are reserved.
  ModelConfig c = Inventory::load(kRoot + "/models/tiny-moe.yaml").config();
  c.num_hidden_layers = kMaxDimension;
  c.n_routed_experts = kMaxDimension;
  c.num_experts_per_tok = 1;
  const auto e3 = config_error([&] { Inventory::build(c); });
  EXPECT_HAS(e3, "tensors");
}

// The read limits (checked::ReadLimits) refuse a model or a cluster bigger than they allow, with
// the key and the limit, and a lowered limit (as the fuzz harnesses set) applies at once.
TEST(HostileYaml, ReadLimitsBoundModelsAndClusters) {
  const checked::ReadLimits defaults = checked::read_limits();
  // A generated cluster of 100 000 racks x 72 GPUs = 7.2 M GPUs is over the default 4 M.
  const auto e1 = config_error([] {
    Topology::parse("name: big\ncluster:\n  template: gb200-nvl72\n  racks: 100000\n  nic_speed: 400Gbps\n", "t.yaml");
  });
  EXPECT_HAS(e1, "t.yaml:2: cluster: cluster too large: 7200000 GPUs, more than 4000000");
  // tiny-moe: 16 + 4 layers x (16 + 3 x 16 experts) = 272 tensors estimated; 100 is too few.
  checked::set_read_limits({defaults.gpus, 100});
  const auto e2 = config_error([] { Inventory::parse(model_with("num_experts: 16", "num_experts: 16"), "m.yaml"); });
  // 2 racks x 72 = 144 GPUs over a limit of 100.
  checked::set_read_limits({100, defaults.tensors});
  const auto e3 = config_error([] {
    Topology::parse("name: two\ncluster:\n  template: gb200-nvl72\n  racks: 2\n  nic_speed: 400Gbps\n", "t.yaml");
  });
  checked::set_read_limits(defaults);
  EXPECT_HAS(e2, "m.yaml: num_hidden_layers: the model would have about 272 tensors (layers x experts), more than 100");
  EXPECT_HAS(e3, "cluster too large: 144 GPUs, more than 100");
  EXPECT_NO_THROW(Inventory::parse(model_with("num_experts: 16", "num_experts: 16"), "m.yaml"));
}

// Found by fuzz_topology: a complex key ("? key") ended in an escaped YAML::TypedBadConversion.
TEST(HostileYaml, ComplexKeyIsAConfigError) {
  const auto e = config_error([] { Topology::parse("name: x\n? [a, b]\n: 3\n", "t.yaml"); });
  EXPECT_HAS(e, "t.yaml:");
  EXPECT_HAS(e, "a key must be a plain name");
  const auto e2 = config_error([] { Scenario::parse("name: x\n? {a: 1}\n: 3\n", "s.yaml", "."); });
  EXPECT_HAS(e2, "a key must be a plain name");
}

TEST(HostileYaml, DeepNestingIsNamed) {
  // Was "YAML syntax error: bad file".
  const auto e = config_error([] { Topology::parse("name: " + std::string(5000, '[') + std::string(5000, ']'), "t.yaml"); });
  EXPECT_HAS(e, "t.yaml:1: YAML syntax error: lists or mappings nested more than");
}

TEST(HostileYaml, LongValuesAreCutInMessages) {
  const std::string huge(100000, '7');
  const auto e = config_error([&] { parse_scenario(scenario_with("tp: 2\n  dp: 4", "tp: " + huge + "\n  dp: 4")); });
  EXPECT_LT(e.size(), 400u);
  EXPECT_HAS(e, "characters)");
  const auto e2 = config_error([&] { Scenario::load(std::string(5000, 'p') + ".yaml"); });
  EXPECT_LT(e2.size(), 400u);
}

// A valid schedule of small-moe-ep as JSON, to mutate.
struct Fixture {
  LoadedScenario sc = load_scenario(std::filesystem::path(kRoot + "/scenarios/small-moe-ep.yaml"));
  TransferSet ts = plan(sc.inventory, sc.source, sc.destination);
  nlohmann::json schedule() const {
    StrategyParams p;
    p.strategy = Strategy::DomainChain;
    return to_json(build_schedule(ts, sc.inventory, sc.source, sc.destination, sc.topology, p));
  }
};

TEST(HostileJson, ScheduleValuesAreCheckedWithTheirPath) {
  const Fixture f;
  const nlohmann::json good = f.schedule();
  ASSERT_NO_THROW(schedule_from_json(good, "s.json"));
  struct Case {
    std::function<void(nlohmann::json&)> edit;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {[](nlohmann::json& j) { j["ops"][0]["buffer"] = true; }, "s.json: ops[0].buffer: expected an integer"},
      {[](nlohmann::json& j) { j["ops"][0]["part"] = 11.7; }, "s.json: ops[0].part: expected an integer"},
      {[](nlohmann::json& j) { j["ops"][0]["src"] = 4294967299ull; }, "ops[0].src: expected an integer in 0..2147483647"},
      {[](nlohmann::json& j) { j["ops"][0]["buffer"] = 1000000; }, "ops[0].buffer: expected an integer in 0.."},
      {[](nlohmann::json& j) { j["ops"][1]["after"] = {5}; }, "ops[1].after[0]: expected an integer in 0..0"},
      {[](nlohmann::json& j) { j["buffers"][0]["slices"][0][0] = 99999; }, "buffers[0].slices[0][0]"},
      {[](nlohmann::json& j) { j["piece_count"] = -1; }, "piece_count"},
      {[](nlohmann::json& j) { j["params"]["relay_ingress"] = 1; }, "params.relay_ingress: expected true or false"},
      {[](nlohmann::json& j) { j["ops"][0].erase("bytes"); }, "ops[0].bytes: missing"},
      {[](nlohmann::json& j) { j["ops"][0]["phase"] = std::string(500, 'z'); }, "characters)"},
  };
  for (const auto& c : cases) {
    nlohmann::json j = good;
    c.edit(j);
    const auto e = config_error([&] { schedule_from_json(j, "s.json"); });
    EXPECT_HAS(e, c.expect);
  }
}

TEST(HostileJson, GpuOutsideTheTopologyIsAScheduleError) {
  // GPU 1006 on a 16-GPU topology: "internal error: GPU index 1006 out of range" in estimate.
  const Fixture f;
  nlohmann::json j = f.schedule();
  j["ops"][0]["dst"] = 1006;
  const Schedule s = schedule_from_json(j, "s.json");
  try {
    check_schedule_gpus(s, f.sc.topology.gpu_count());
    FAIL() << "accepted";
  } catch (const ScheduleError& e) {
    EXPECT_HAS(std::string(e.what()), "operation 0 dst: GPU 1006 is not in the topology (0..15)");
  }
}

TEST(HostileCsv, FlowsGpuThatWouldWrap) {
  const auto p = temp_file("flows.csv", "id,src,dst,bytes\n0,4294967296,1,1MB\n");
  const auto e = config_error([&] { sim::read_transfers_csv(p); });
  EXPECT_HAS(e, ":2: src: GPU 4294967296 is not an index");
  const auto p2 = temp_file("flows2.csv", "id,src,dst,bytes\n0,0,1,1e999PB\n");
  EXPECT_HAS(config_error([&] { sim::read_transfers_csv(p2); }), ":2: bytes:");
}

TEST(HostileJson, FlowDumpLinkOutOfRange) {
  const nlohmann::json j = {{"links", {{{"id", 0}, {"capacity_Bps", 1e9}}}},
                            {"flows", {{{"id", 0}, {"bytes", 10}, {"links", {7}}}}}};
  EXPECT_HAS(config_error([&] { sim::flow_dump_from_json(j, "d.json"); }), "d.json: flows[0].links[0]: expected an integer in 0..0");
  nlohmann::json k = j;
  k["flows"][0]["links"] = {true};
  EXPECT_HAS(config_error([&] { sim::flow_dump_from_json(k, "d.json"); }), "flows[0].links[0]");
}

TEST(HostileCsv, CalibrationTimesMustBeFinitePositiveNumbers) {
  // nan and inf fitted zero overheads; stod errors were "internal error: stod".
  for (const char* t : {"nan", "inf", "-4", "0", "0.001abc", "1e999"}) {
    const auto p = temp_file("cal.csv", std::string("scenario,strategy,measured_s\n") + kRoot +
                                            "/scenarios/small-moe-ep.yaml,domain_chain," + t + "\n");
    const auto e = config_error([&] { observations_from_csv(p, CostParams::profile_named("reshard")); });
    EXPECT_HAS(e, ":2: measured_s:");
  }
}

}  // namespace
