// --set overrides (model/overrides.hpp), sweep specs, and sweeps (study/sweep.hpp): the value each
// override sets, the errors that name it, points in order, failed points as rows, results equal
// to comparing each point alone, the host link taking over as the NIC speed grows, a golden CSV.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <variant>

#include "reshard/model/errors.hpp"
#include "reshard/model/scenario.hpp"
#include "reshard/model/schedule.hpp"
#include "reshard/model/strategies.hpp"
#include "reshard/study/compare.hpp"
#include "reshard/study/sweep.hpp"
#include "reshard/model/yaml_reader.hpp"

namespace {

using namespace reshard::model;
using namespace reshard::study;

const std::string kSource = RESHARD_SOURCE_DIR;
const std::string kSmall = kSource + "/scenarios/small-moe-ep.yaml";
const std::string kDeepSeek = kSource + "/scenarios/deepseek-v3-h100.yaml";

std::vector<Override> sets(const std::vector<std::string>& texts) {
  std::vector<Override> out;
  for (const auto& t : texts) out.push_back(parse_override(t, kSource));
  return out;
}

// The 1-based line of the first line of `file` that starts with `prefix`.
int line_of(const std::string& file, const std::string& prefix) {
  std::ifstream in(file);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n)
    if (line.rfind(prefix, 0) == 0) return n;
  return -1;
}

// The error `f` throws, as an OverrideError (fails the test when it throws nothing or another type).
template <class F>
OverrideError override_error(F&& f) {
  try {
    f();
  } catch (const OverrideError& e) {
    return e;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not an OverrideError: " << e.what();
  }
  ADD_FAILURE() << "no error";
  return OverrideError("", ConfigError("", 0, "", ""));
}

// ---- overrides ---------------------------------------------------------------------------------

TEST(Overrides, ScenarioKeysSetTheLayouts) {
  const Scenario s = Scenario::load(kDeepSeek, sets({"destination.tp=16", "destination.dp=16", "source.gpus=256-511",
                                                     "destination.gpus=0-255"}));
  const auto& v = std::get<VllmSpec>(s.destination.spec);
  EXPECT_EQ(v.tp, 16);
  EXPECT_EQ(v.dp, 16);
  ASSERT_EQ(s.source.gpus.size(), 256u);
  EXPECT_EQ(s.source.gpus.front(), 256);
  EXPECT_EQ(s.destination.gpus.back(), 255);
}

TEST(Overrides, ModelPathReplacesTheFile) {
  const Scenario s = Scenario::load(kDeepSeek, sets({"model=models/kimi-k2.yaml"}));
  EXPECT_EQ(s.model_path, std::filesystem::path(kSource + "/models/kimi-k2.yaml"));
  EXPECT_EQ(load_inventory(s).config().name, "kimi-k2");
  // A key of the model file.
  const LoadedScenario two = load_scenario(kSmall, sets({"model.num_hidden_layers=2"}));
  EXPECT_EQ(two.inventory.config().num_hidden_layers, 2);
  EXPECT_LT(two.inventory.bytes().value, load_scenario(kSmall).inventory.bytes().value);
}

TEST(Overrides, TopologyKeySetsTheNicLinks) {
  // dgx-h100 NICs are 400 Gb/s = 50 GB/s; 800 Gb/s = 100 GB/s per direction.
  const LoadedScenario base = load_scenario(kSmall);
  const LoadedScenario fast = load_scenario(kSmall, sets({"topology.cluster.nic_speed=800Gbps"}));
  EXPECT_DOUBLE_EQ(base.topology.gpu_nic_bandwidth(0).value, 50e9);
  EXPECT_DOUBLE_EQ(fast.topology.gpu_nic_bandwidth(0).value, 100e9);
  EXPECT_EQ(fast.topology.link_count(), base.topology.link_count());
}

TEST(Overrides, UnknownKeyIsTheReadersErrorNamingTheOverride) {
  const auto e = override_error([] { Scenario::load(kSmall, sets({"destination.tpp=16"})); });
  EXPECT_EQ(std::string(e.what()).rfind("--set destination.tpp=16: " + kSmall + ":", 0), 0u) << e.what();
  EXPECT_EQ(e.key(), "destination.tpp");
  EXPECT_EQ(e.file(), kSmall);
  EXPECT_EQ(e.line(), line_of(kSmall, "destination:"));  // a new key: the line of the mapping it joins
  EXPECT_NE(e.reason().find("unknown key"), std::string::npos);
  EXPECT_EQ(e.override_text(), "--set destination.tpp=16");

  const auto t = override_error([] { load_scenario(kSmall, sets({"topology.cluster.nic_sped=800Gbps"})); });
  EXPECT_EQ(t.key(), "cluster.nic_sped");
  EXPECT_EQ(t.file(), kSource + "/topologies/dgx-h100-2n.yaml");
  EXPECT_NE(std::string(t.what()).find("--set topology.cluster.nic_sped=800Gbps: "), std::string::npos);
}

TEST(Overrides, BadValueIsTheReadersErrorAtTheKeysLine) {
  const auto e = override_error([] { Scenario::load(kSmall, sets({"destination.tp=abc"})); });
  EXPECT_EQ(e.key(), "destination.tp");
  EXPECT_NE(e.reason().find("expected an integer, got 'abc'"), std::string::npos);
  // The replaced value's line is the file's line of destination.tp (the second "  tp:").
  const int destination = line_of(kSmall, "destination:");
  std::ifstream in(kSmall);
  std::string line;
  int tp_line = -1;
  for (int n = 1; std::getline(in, line); ++n)
    if (n > destination && line.rfind("  tp:", 0) == 0 && tp_line < 0) tp_line = n;
  EXPECT_EQ(e.line(), tp_line);

  const auto t = override_error([] { load_scenario(kSmall, sets({"topology.cluster.nic_speed=fast"})); });
  EXPECT_NE(t.reason().find("expected a bandwidth"), std::string::npos);
  // A layout that no longer fits its GPUs: the error is about the mapping the override is in.
  const auto w = override_error([] { Scenario::load(kSmall, sets({"destination.dp=3"})); });
  EXPECT_EQ(w.key(), "destination");
  EXPECT_NE(w.reason().find("needs 6 GPUs, but gpus lists 8"), std::string::npos);
  // A model file that does not exist.
  const auto m = override_error([] { load_scenario(kSmall, sets({"model=models/none.yaml"})); });
  EXPECT_NE(std::string(m.what()).find("model: no such file: tried"), std::string::npos);
}

TEST(Overrides, MalformedOverrides) {
  EXPECT_THROW(parse_override("destination.tp"), ConfigError);
  EXPECT_THROW(parse_override("a..b=1"), ConfigError);
  EXPECT_THROW(parse_override("=1"), ConfigError);
  const auto e = override_error([] { Scenario::load(kSmall, sets({"source.gpus.x=1"})); });
  EXPECT_EQ(e.key(), "source.gpus");
  EXPECT_NE(e.reason().find("not a mapping"), std::string::npos);
}

TEST(Overrides, ListIndexAndNewMappings) {
  const auto root = yaml::load_string("links:\n  - {a: 1}\n  - {a: 2}\n", "t.yaml",
                                      sets({"links.1.a=5", "extra.deep.key=[1, 2]"}));
  EXPECT_EQ(root.at("links")[0].at("a").integer(), 1);
  EXPECT_EQ(root.at("links")[1].at("a").integer(), 5);
  EXPECT_EQ(root.at("extra").at("deep").at("key").integers(), (std::vector<std::int64_t>{1, 2}));
  EXPECT_THROW(yaml::load_string("links:\n  - {a: 1}\n", "t.yaml", sets({"links.4.a=5"})), OverrideError);
}

// ---- sweep specs -------------------------------------------------------------------------------

SweepSpec spec_of(const std::string& body) {
  return SweepSpec::parse("scenario: " + kSmall + "\n" + body, "spec.yaml", kSource);
}

std::string spec_error(const std::string& body) {
  try {
    spec_of(body);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

TEST(SweepSpec, ProductLastAxisFastest) {
  const auto s = spec_of("axes:\n  - {key: a, values: [1, 2]}\n  - {key: b, values: [x, y, z]}\n");
  EXPECT_EQ(s.keys, (std::vector<std::string>{"a", "b"}));
  ASSERT_EQ(s.points.size(), 6u);
  EXPECT_EQ(s.points[1], (std::vector<std::string>{"1", "y"}));
  EXPECT_EQ(s.points[3], (std::vector<std::string>{"2", "x"}));
  EXPECT_EQ(s.strategies, strategy_names());
  EXPECT_EQ(s.profiles, std::vector<std::string>{"reshard"});
  const auto o = s.overrides(5);
  ASSERT_EQ(o.size(), 2u);
  EXPECT_EQ(o[1].key, "b");
  EXPECT_EQ(o[1].value, "z");
}

TEST(SweepSpec, ZipAndRanges) {
  const auto s = spec_of(
      "set: {topology.cluster.nodes: 2}\n"
      "axes:\n"
      "  - key: topology.cluster.nic_speed\n    range: {from: 200, to: 800, step: 200, unit: Gbps}\n"
      "  - zip:\n      - {key: destination.tp, range: {from: 1, to: 8, times: 2}}\n"
      "      - {key: destination.dp, values: [8, 4, 2, 1]}\n");
  ASSERT_EQ(s.points.size(), 16u);  // 4 speeds x 4 zipped pairs
  EXPECT_EQ(s.points[0], (std::vector<std::string>{"200Gbps", "1", "8"}));
  EXPECT_EQ(s.points[15], (std::vector<std::string>{"800Gbps", "8", "1"}));
  ASSERT_EQ(s.base.size(), 1u);
  EXPECT_EQ(s.base[0].key, "topology.cluster.nodes");
  const auto z = spec_of("combine: zip\naxes:\n  - {key: a, values: [1, 2]}\n  - {key: b, values: [3, 4]}\n");
  ASSERT_EQ(z.points.size(), 2u);
  EXPECT_EQ(z.points[1], (std::vector<std::string>{"2", "4"}));
  // A step that does not land on `to` stops before it; a decimal step keeps its decimals.
  const auto d = spec_of("axes:\n  - {key: a, range: {from: 0.5, to: 2, step: 0.75}}\n");
  EXPECT_EQ(d.points, (std::vector<std::vector<std::string>>{{"0.5"}, {"1.25"}, {"2"}}));
}

TEST(SweepSpec, BadAxesAreErrorsNamingTheKey) {
  EXPECT_NE(spec_error("axes:\n  - {key: a, values: [1], range: {from: 1, to: 2, step: 1}}\n").find("exactly one of"),
            std::string::npos);
  EXPECT_NE(spec_error("axes:\n  - {key: a, range: {from: 5, to: 1, step: 1}}\n").find("axes[0].range.to: the range runs backwards"),
            std::string::npos);
  EXPECT_NE(spec_error("axes:\n  - {key: a, range: {from: 1, to: 5, step: 0}}\n").find("must be positive"), std::string::npos);
  EXPECT_NE(spec_error("axes:\n  - {key: a, range: {from: 1, to: 5, times: 1}}\n").find("more than 1"), std::string::npos);
  EXPECT_NE(spec_error("axes:\n  - zip:\n      - {key: a, values: [1, 2]}\n      - {key: b, values: [1]}\n")
                .find("same length"),
            std::string::npos);
  EXPECT_NE(spec_error("combine: zip\naxes:\n  - {key: a, values: [1, 2]}\n  - {key: b, values: [1]}\n").find("same length"),
            std::string::npos);
  EXPECT_NE(spec_error("axes:\n  - {key: a, values: [1]}\n  - {key: a, values: [2]}\n").find("on two axes"), std::string::npos);
  EXPECT_NE(spec_error("axes:\n  - {key: a, values: []}\n").find("at least one value"), std::string::npos);
  EXPECT_NE(spec_error("axes: []\n").find("at least one axis"), std::string::npos);
  EXPECT_NE(spec_error("axes:\n  - {key: a, vals: [1]}\n").find("axes[0].vals: unknown key"), std::string::npos);
  EXPECT_NE(spec_error("axes:\n  - {key: a, values: [1]}\nstrategies: [teleport]\n").find("unknown strategy 'teleport'"),
            std::string::npos);
  EXPECT_NE(spec_error("axes:\n  - {key: a, values: [1]}\nprofiles: [fastest]\n").find("profiles[0]"), std::string::npos);
  EXPECT_NE(spec_error("axes:\n  - {key: a, values: [1]}\ncombine: cross\n").find("expected product or zip"),
            std::string::npos);
  EXPECT_NE(spec_error("axes:\n  - {key: a, values: [1]}\nrepeat: 2\n").find("spec.yaml:4: repeat: unknown key"),
            std::string::npos);
}

// ---- sweeps ------------------------------------------------------------------------------------

SweepSpec golden_spec() { return SweepSpec::load(kSource + "/tests/sweep/small-moe-nic.yaml"); }

SweepOptions threads(int n, int rank = 0, int ranks = 1) {
  SweepOptions o;
  o.threads = n;
  o.rank = rank;
  o.ranks = ranks;
  return o;
}

std::string csv_of(const SweepSpec& spec, const std::vector<SweepRow>& rows) {
  std::string s = csv_header(spec) + "\n";
  for (const auto& r : rows) s += to_csv(r) + "\n";
  return s;
}

TEST(Sweep, FailedPointIsAnErrorRowAndTheSweepGoesOn) {
  const auto spec = spec_of("axes:\n  - {key: destination.dp, values: [4, 3, 2]}\n  - {key: destination.tp, values: [2]}\n"
                            "strategies: [direct, hybrid]\nprofiles: [reshard, nemo_rl]\n");
  const auto rows = run_sweep(spec);
  // Point 0 (TP2 DP4 on 8 GPUs): 2 profiles x 2 strategies; point 1 (DP3: 6 GPUs) fails, one row
  // per profile; point 2 (TP2 DP2: 4 GPUs) fails too.
  ASSERT_EQ(rows.size(), 4u + 2u + 2u);
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(rows[static_cast<std::size_t>(i)].error.empty()) << rows[i].error;
  EXPECT_EQ(rows[4].point, 1);
  EXPECT_EQ(rows[4].profile, "reshard");
  EXPECT_EQ(rows[5].profile, "nemo_rl");
  EXPECT_NE(rows[4].error.find("--set destination.dp=3: "), std::string::npos) << rows[4].error;
  EXPECT_NE(rows[4].error.find("needs 6 GPUs"), std::string::npos) << rows[4].error;
  EXPECT_FALSE(rows[4].estimate_s.has_value());
  EXPECT_EQ(rows[6].point, 2);
  EXPECT_NE(rows[6].error.find("needs 4 GPUs"), std::string::npos) << rows[6].error;
  // The CSV row of a failed point: its inputs, its profile, empty fields, the error quoted.
  const std::string line = to_csv(rows[4]);
  EXPECT_EQ(line.rfind("1,3,2,reshard,,,,", 0), 0u) << line;
  EXPECT_NE(line.find(",\"--set destination.dp=3: "), std::string::npos) << line;
}

// A point whose GPUs cannot hold their weights and staging budget is refused as load_scenario
// refuses it (docs/design.md §5.2), naming the override; the budget's peak staging and the
// budget itself are in the rows of the points that fit.
TEST(Sweep, PointWhoseGpusCannotHoldTheirBudgetIsAnErrorRow) {
  const auto spec = spec_of("axes:\n  - zip:\n      - {key: source.refit_memory, values: [1MiB, 1MiB]}\n"
                            "      - {key: destination.refit_memory, values: [1MiB, 200GB]}\nstrategies: [direct]\n");
  const auto rows = run_sweep(spec);
  ASSERT_EQ(rows.size(), 2u);
  ASSERT_TRUE(rows[0].error.empty()) << rows[0].error;
  EXPECT_EQ(rows[0].staging_budget_bytes, 1 << 20);
  EXPECT_LE(*rows[0].peak_staging_bytes, std::int64_t{1} << 20);
  EXPECT_GT(*rows[0].peak_staging_bytes, 0);
  EXPECT_NE(rows[1].error.find("--set destination.refit_memory=200GB: "), std::string::npos) << rows[1].error;
  EXPECT_NE(rows[1].error.find("refit staging"), std::string::npos) << rows[1].error;
  EXPECT_FALSE(rows[1].estimate_s.has_value());
}

TEST(Sweep, RowsEqualComparingEachPointAlone) {
  // Shared topologies, inventories, plans and schedules change nothing: every row is what
  // compare() gives on the point's scenario loaded from scratch.
  const auto spec = golden_spec();
  const auto rows = run_sweep(spec, threads(2));
  std::size_t k = 0;
  for (std::size_t p = 0; p < spec.points.size(); ++p) {
    CompareOptions options;
    options.strategies = {"direct", "domain_chain", "hybrid"};
    options.profile = spec.profiles.front();
    const auto alone = compare(load_scenario(spec.scenario, spec.overrides(p)), options);
    for (const auto& r : alone.rows) {
      ASSERT_LT(k, rows.size());
      const auto& row = rows[k++];
      EXPECT_EQ(row.point, static_cast<std::int64_t>(p));
      EXPECT_EQ(row.strategy, r.name);
      EXPECT_EQ(row.params, describe(r.params));
      EXPECT_EQ(*row.estimate_s, r.prediction.time.value) << row.strategy << " at point " << p;
      EXPECT_EQ(*row.lower_bound_s, alone.lower_bound.time.value);
      EXPECT_EQ(*row.network_bytes, r.prediction.network_bytes.value);
      EXPECT_EQ(row.best, alone.rows[alone.best].name);
    }
  }
  EXPECT_EQ(k, rows.size());
}

// A profiles entry ending in .yaml is a cost parameters file, relative to the spec: its rows are
// what compare() gives with that file (CompareOptions::params_file), and differ from the built-in
// profile's (params/nemo_rl.yaml fits per-bucket and per-stage overheads that reshard's is without).
// `--params FILE` (use_params_file) replaces the profiles with the one file.
TEST(Sweep, ParametersFileIsAProfile) {
  auto spec = spec_of("axes:\n  - {key: dtype, values: [bf16]}\nstrategies: [gather_broadcast]\n"
                      "profiles: [reshard, params/nemo_rl.yaml]\n");
  ASSERT_EQ(spec.profiles.size(), 2u);
  EXPECT_TRUE(spec.params_file(0).empty());
  EXPECT_EQ(spec.params_file(1), std::filesystem::path(kSource) / "params/nemo_rl.yaml");
  const auto rows = run_sweep(spec);
  ASSERT_EQ(rows.size(), 2u);
  CompareOptions options;
  options.strategies = {"gather_broadcast"};
  options.params_file = (std::filesystem::path(kSource) / "params/nemo_rl.yaml").string();
  const auto with_file = compare(load_scenario(spec.scenario, spec.overrides(0)), options);
  EXPECT_EQ(rows[1].profile, "params/nemo_rl.yaml");
  EXPECT_EQ(*rows[1].estimate_s, with_file.rows[0].prediction.time.value);
  EXPECT_GT(*rows[1].estimate_s, *rows[0].estimate_s);
  spec.use_params_file((std::filesystem::path(kSource) / "params/nemo_rl.yaml").string());
  const auto replaced = run_sweep(spec);
  ASSERT_EQ(replaced.size(), 1u);
  EXPECT_EQ(*replaced[0].estimate_s, *rows[1].estimate_s);
  const std::string missing = spec_error("axes:\n  - {key: dtype, values: [bf16]}\nprofiles: [reshard, params/missing.yaml]\n");
  EXPECT_NE(missing.find("spec.yaml:4: profiles[1]:"), std::string::npos) << missing;
  EXPECT_NE(missing.find("missing.yaml: cannot open the file"), std::string::npos) << missing;
}

TEST(Sweep, SchedulesDependOnTheTopologysStructureOnly) {
  // What lets a sweep share schedules between NIC speeds: every strategy builds the same schedule
  // on topologies that differ only in link capacities.
  const LoadedScenario slow = load_scenario(kSmall, sets({"topology.cluster.nic_speed=200Gbps"}));
  const LoadedScenario fast = load_scenario(kSmall, sets({"topology.cluster.nic_speed=1600Gbps",
                                                          "topology.cluster.host_link=100GBps"}));
  const TransferSet ts = plan(slow.inventory, slow.source, slow.destination);
  for (const auto& name : strategy_names()) {
    StrategyParams p;
    p.strategy = strategy_named(name);
    const auto a = build_schedule(ts, slow.inventory, slow.source, slow.destination, slow.topology, p);
    const auto b = build_schedule(ts, fast.inventory, fast.source, fast.destination, fast.topology, p);
    EXPECT_EQ(to_json(a), to_json(b)) << name;
  }
}

TEST(Sweep, HostLinkTakesOverAboveItsSpeed) {
  // small-moe-ep sends everything from node 0 to node 1. The lower bound's binding cut is the
  // destination domain's ingress, 8 GPUs each behind min(NIC, PCIe 64 GB/s):
  //   200 Gb/s: 8 x 25 GB/s  = 200 GB/s (the NIC links bind)
  //  1600 Gb/s: 8 x 64 GB/s  = 512 GB/s (the host links bind: 200 GB/s NICs behind 64 GB/s PCIe)
  // so the bound shrinks by 512 / 200 = 2.56 and the limit moves to the host link.
  const auto spec = golden_spec();
  const auto rows = run_sweep(spec);
  auto first_of = [&](const std::string& nic) {
    for (const auto& r : rows)
      if (r.inputs[0] == nic && r.inputs[1] == "2") return r;
    return SweepRow{};
  };
  const SweepRow slow = first_of("200Gbps"), fast = first_of("1600Gbps");
  EXPECT_EQ(slow.bound_limit, "NIC link");
  EXPECT_EQ(fast.bound_limit, "host link");
  EXPECT_EQ(fast.bound_where, "domain 1: host links PCIe 64.0 GB/s per GPU");
  EXPECT_NEAR(*slow.lower_bound_s / *fast.lower_bound_s, 2.56, 1e-9);
  for (const auto& r : rows) {  // every strategy's estimate is bound by the same kind of link
    if (r.strategy == "auto") continue;
    EXPECT_EQ(r.limit, r.inputs[0] == "200Gbps" ? "NIC link" : "host link") << r.strategy << " " << r.bottleneck;
  }
}

TEST(Sweep, GoldenCsvAndDeterministicOverThreads) {
  const auto spec = golden_spec();
  const auto one = run_sweep(spec, threads(1));
  const auto two = run_sweep(spec, threads(2));
  const std::string csv = csv_of(spec, one);
  EXPECT_EQ(csv, csv_of(spec, two));
  const std::string golden_path = kSource + "/tests/sweep/small-moe-nic.csv";
  if (std::getenv("RESHARD_UPDATE_GOLDEN")) std::ofstream(golden_path) << csv;
  std::stringstream golden;
  golden << std::ifstream(golden_path).rdbuf();
  EXPECT_EQ(csv, golden.str()) << "RESHARD_UPDATE_GOLDEN=1 rewrites " << golden_path;
  // JSON lines read back to the same rows.
  std::vector<SweepRow> back;
  for (const auto& r : one) back.push_back(sweep_row_from_json(nlohmann::json::parse(to_json(r, spec).dump()), spec));
  EXPECT_EQ(csv_of(spec, back), csv);
}

TEST(Sweep, ProcessesSplitThePointsByIndex) {
  const auto spec = golden_spec();
  const auto a = run_sweep(spec, threads(1, 0, 2)), b = run_sweep(spec, threads(1, 1, 2));
  for (const auto& r : a) EXPECT_EQ(r.point % 2, 0);
  for (const auto& r : b) EXPECT_EQ(r.point % 2, 1);
  EXPECT_EQ(a.size() + b.size(), run_sweep(spec).size());
}

}  // namespace
