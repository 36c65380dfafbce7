// Every subcommand's --json (and every sweep row) against its documented schema in docs/schema/
// (docs/json-schema.md), on small shipped scenarios. The validator below implements the subset of
// JSON Schema those files use: type (one or a list), const, properties, required,
// additionalProperties (false or a schema) and items. additionalProperties is false on every
// object with named keys, so a key the documentation does not list fails as surely as a missing one.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "run_command.hpp"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kRoot = RESHARD_SOURCE_DIR;

bool has_type(const json& v, const std::string& t) {
  if (t == "object") return v.is_object();
  if (t == "array") return v.is_array();
  if (t == "string") return v.is_string();
  if (t == "integer") return v.is_number_integer();
  if (t == "number") return v.is_number();
  if (t == "boolean") return v.is_boolean();
  if (t == "null") return v.is_null();
  ADD_FAILURE() << "schema uses an unknown type '" << t << "'";
  return false;
}

// Appends one line per violation ("at $.strategies[2].estimate_s: expected number, got string").
void validate(const json& v, const json& s, const std::string& at, std::vector<std::string>& errors) {
  for (const auto& [key, _] : s.items())
    if (!std::set<std::string>{"$schema", "$id", "description", "type", "const", "enum", "properties", "required",
                               "additionalProperties", "items"}
             .count(key))
      errors.push_back("schema at " + at + " uses '" + key + "', which this validator does not implement");
  if (s.contains("type")) {
    const json types = s["type"].is_array() ? s["type"] : json::array({s["type"]});
    bool ok = false;
    for (const auto& t : types) ok = ok || has_type(v, t.get<std::string>());
    if (!ok) {
      errors.push_back("at " + at + ": expected " + s["type"].dump() + ", got " + v.type_name());
      return;
    }
  }
  if (s.contains("const") && v != s["const"])
    errors.push_back("at " + at + ": expected " + s["const"].dump() + ", got " + v.dump());
  if (s.contains("enum") && std::find(s["enum"].begin(), s["enum"].end(), v) == s["enum"].end())
    errors.push_back("at " + at + ": expected one of " + s["enum"].dump() + ", got " + v.dump());
  if (v.is_object()) {
    for (const auto& k : s.value("required", json::array()))
      if (!v.contains(k.get<std::string>())) errors.push_back("at " + at + ": missing key '" + k.get<std::string>() + "'");
    const json props = s.value("properties", json::object());
    for (const auto& [k, x] : v.items()) {
      if (props.contains(k)) {
        validate(x, props[k], at + "." + k, errors);
      } else if (s.contains("additionalProperties")) {
        const json& extra = s["additionalProperties"];
        if (extra.is_boolean()) {
          if (!extra.get<bool>()) errors.push_back("at " + at + ": key '" + k + "' is not documented");
        } else {
          validate(x, extra, at + "." + k, errors);
        }
      }
    }
  }
  if (v.is_array() && s.contains("items"))
    for (std::size_t i = 0; i < v.size(); ++i) validate(v[i], s["items"], at + "[" + std::to_string(i) + "]", errors);
}

json load_schema(const std::string& name) {
  std::ifstream in(kRoot + "/docs/schema/" + name + ".json");
  EXPECT_TRUE(in) << "docs/schema/" << name << ".json";
  return json::parse(in);
}

// The document's "schema" names its schema file; the document must satisfy it.
void expect_valid(const json& doc, const std::string& expected_schema, const std::string& what) {
  ASSERT_TRUE(doc.is_object()) << what;
  ASSERT_EQ(doc.value("schema", ""), expected_schema) << what;
  std::vector<std::string> errors;
  validate(doc, load_schema(expected_schema), "$", errors);
  for (const auto& e : errors) ADD_FAILURE() << what << ": " << e;
}

using reshard::test::run_command;

json reshard_json(const std::string& args) {
  int status = 0;
  const auto out = run_command(std::string(RESHARD_BINARY) + " " + args + " 2>/dev/null", &status);
  EXPECT_EQ(status, 0) << args << "\n" << out;
  EXPECT_TRUE(json::accept(out)) << args << "\n" << out;
  return json::accept(out) ? json::parse(out) : json();
}

const std::string kSmall = kRoot + "/scenarios/small-moe-ep.yaml";
const std::string kGqa = kRoot + "/scenarios/small-gqa-megatron-vllm.yaml";
// A function, not a constant: TMPDIR is set before main() (scratch_folder.cpp), in no set order
// with this file's constants.
fs::path tmp() { return fs::temp_directory_path() / "reshard_test_json_schema"; }

TEST(JsonSchemaValidator, CatchesMissingWrongAndUndocumentedKeys) {
  const json schema = json::parse(R"({"type": "object", "required": ["a_s", "rows"], "additionalProperties": false,
    "properties": {"a_s": {"type": "number"}, "n_bytes": {"type": ["integer", "null"]},
                   "rows": {"type": "array", "items": {"type": "object", "required": ["x"],
                            "properties": {"x": {"type": "string"}}, "additionalProperties": false}}}})");
  auto errors = [&](const char* text) {
    std::vector<std::string> e;
    validate(json::parse(text), schema, "$", e);
    return e;
  };
  EXPECT_TRUE(errors(R"({"a_s": 1.5, "n_bytes": null, "rows": [{"x": "y"}]})").empty());
  EXPECT_TRUE(errors(R"({"a_s": 2, "n_bytes": 7, "rows": []})").empty());  // an integer is a number
  const auto missing = errors(R"({"rows": []})");
  ASSERT_EQ(missing.size(), 1u);
  EXPECT_EQ(missing[0], "at $: missing key 'a_s'");
  const auto wrong = errors(R"({"a_s": 1, "n_bytes": 1.5, "rows": [{"x": 3}]})");  // bytes are integers
  ASSERT_EQ(wrong.size(), 2u);
  EXPECT_EQ(wrong[0], "at $.n_bytes: expected [\"integer\",\"null\"], got number");
  EXPECT_EQ(wrong[1], "at $.rows[0].x: expected \"string\", got number");
  const auto extra = errors(R"({"a_s": 1, "rows": [{"x": "y", "makespan_s": 1}]})");
  ASSERT_EQ(extra.size(), 1u);
  EXPECT_EQ(extra[0], "at $.rows[0]: key 'makespan_s' is not documented");
}

TEST(JsonSchema, EverySubcommand) {
  fs::create_directories(tmp());
  const std::string sched = (tmp() / "small-moe-ep.json").string();
  expect_valid(reshard_json("topo " + kRoot + "/topologies/dgx-h100-2n.yaml --json"), "reshard-topo-1", "topo");
  expect_valid(reshard_json("topo " + kRoot + "/topologies/irregular-example.yaml --json"), "reshard-topo-1", "topo explicit");
  expect_valid(reshard_json("model " + kRoot + "/models/tiny-moe.yaml --json"), "reshard-model-1", "model");
  expect_valid(reshard_json("model " + kRoot + "/models/deepseek-v3.yaml --mtp --json"), "reshard-model-1", "model mtp");
  expect_valid(reshard_json("plan " + kSmall + " --json"), "reshard-plan-1", "plan");
  const json plan = reshard_json("plan " + kSmall + " --strategy auto -o " + sched + " --json");
  expect_valid(plan, "reshard-plan-1", "plan --strategy auto -o");
  EXPECT_EQ(plan.value("schedule_file", ""), sched);
  expect_valid(reshard_json("compare " + kSmall + " --json"), "reshard-compare-1", "compare");
  const json timed = reshard_json("compare " + kSmall + " --timings --json");
  expect_valid(timed, "reshard-compare-1", "compare --timings");
  EXPECT_TRUE(timed.contains("timings"));
  EXPECT_FALSE(reshard_json("compare " + kSmall + " --json").contains("timings"));  // not part of the answer
  expect_valid(reshard_json("plan " + kSmall + " --delta 0.03 --json"), "reshard-plan-1", "plan --delta");
  expect_valid(reshard_json("simulate " + kSmall + " --delta 0.03 --json"), "reshard-simulate-1", "simulate --delta");
  const json delta = reshard_json("compare " + kSmall + " --delta 0.03 --json");
  expect_valid(delta, "reshard-compare-1", "compare --delta");
  EXPECT_TRUE(delta["strategies"][0].contains("dense_estimate_s"));
  const json with_systems = reshard_json("compare " + kSmall + " --systems all --json");
  expect_valid(with_systems, "reshard-compare-1", "compare --systems all");
  EXPECT_EQ(with_systems["systems"].size(), reshard_json("systems --json")["systems"].size());
  expect_valid(reshard_json("systems --json"), "reshard-systems-1", "systems");
  const json compared = reshard_json("compare " + kSmall + " --simulate --json");
  expect_valid(compared, "reshard-compare-1", "compare --simulate");
  const json simulated = reshard_json("simulate " + kSmall + " --strategy auto --json");
  expect_valid(simulated, "reshard-simulate-1", "simulate --strategy auto");
  // One name per quantity: the tuner's row of compare and simulate --strategy auto are one schedule.
  EXPECT_EQ(simulated["params"], compared["best_params"]);
  EXPECT_EQ(simulated["simulated_s"], compared["strategies"].back()["simulated_s"]);
  // A schedule file without --scenario: the scenario it names, found among the shipped ones.
  const json replayed = reshard_json("simulate " + sched + " --json");
  expect_valid(replayed, "reshard-simulate-1", "simulate SCHEDULE.json");
  EXPECT_EQ(replayed["simulated_s"], simulated["simulated_s"]);
  EXPECT_EQ(replayed["schedule_file"], sched);
  // A changed membership and a failure: GPU 0's source shards have data-parallel replicas (TP2 on 8 GPUs).
  const std::string gqa = kRoot + "/scenarios/small-gqa-megatron-vllm.yaml";
  expect_valid(reshard_json("plan " + gqa + " --without 0 --json"), "reshard-plan-1", "plan --without");
  expect_valid(reshard_json("compare " + gqa + " --without 0 --json"), "reshard-compare-1", "compare --without");
  const json failed = reshard_json("simulate " + gqa + " --strategy direct --fail 0@0s --json");
  expect_valid(failed, "reshard-simulate-1", "simulate --fail");
  EXPECT_TRUE(failed.contains("failure"));
  const fs::path flows = tmp() / "flows.csv";
  std::ofstream(flows) << "id,src,dst,bytes\n0,0,1,1000000\n1,0,9,1000000,0\n";
  expect_valid(reshard_json("simulate --topology " + kRoot + "/topologies/dgx-h100-2n.yaml --flows " + flows.string() +
                            " --json"),
               "reshard-simulate-flows-1", "simulate --flows");
  expect_valid(reshard_json("simulate --topology " + kRoot +
                            "/topologies/dgx-h100-2n.yaml --collective all_gather --ranks 0-15 --size 64MiB --json"),
               "reshard-simulate-collective-1", "simulate --collective");
  expect_valid(reshard_json("exec " + kSmall + " --strategy auto --dry-run --json"), "reshard-exec-dry-run-1", "exec --dry-run");
  expect_valid(reshard_json("exec " + sched + " --dry-run --json"), "reshard-exec-dry-run-1", "exec SCHEDULE.json --dry-run");
  expect_valid(reshard_json("backends --json"), "reshard-backends-1", "backends");

  int status = 0;
  const std::string prefix = (tmp() / "sweep").string();
  run_command(std::string(RESHARD_BINARY) + " sweep " + kRoot + "/tests/sweep/small-moe-nic.yaml -o " + prefix + " >/dev/null 2>&1",
      &status);
  ASSERT_EQ(status, 0);
  std::ifstream rows(prefix + ".jsonl");
  int n = 0;
  for (std::string line; std::getline(rows, line); ++n)
    expect_valid(json::parse(line), "reshard-sweep-row-1", "sweep row " + std::to_string(n));
  EXPECT_EQ(n, 16);  // 4 points x 4 strategies
}

#ifdef RESHARD_MPIEXEC
// exec (a real run, host backend), check and calibrate on its Measurement.
TEST(JsonSchema, ExecCheckCalibrate) {
  fs::create_directories(tmp());
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  const std::string m = (tmp() / "measurement.json").string();
  int status = 0;
  const auto out = run_command(std::string(RESHARD_MPIEXEC) + " --oversubscribe -np 16 " + RESHARD_BINARY + " exec " + kGqa +
                           " --strategy domain_chain --json --timeout 60s -o " + m + " 2>/dev/null",
                       &status);
  ASSERT_EQ(status, 0) << out;
  const json exec = json::parse(out);
  expect_valid(exec, "reshard-exec-1", "exec");
  const json check = reshard_json("check " + m + " --json");
  expect_valid(check, "reshard-check-1", "check");
  EXPECT_EQ(check["scenario"], exec["scenario"]);  // a name in both, the path apart
  EXPECT_EQ(check["scenario_file"], kGqa);
  const fs::path csv = tmp() / "measured.csv";
  std::ofstream(csv) << "scenario,strategy,measured_s\n" << kGqa << ",domain_chain," << exec["measured_s"].get<double>() << "\n";
  expect_valid(reshard_json("calibrate " + csv.string() + " --json"), "reshard-calibrate-1", "calibrate");
  // The host profile, and check with it (the host model's terms per step).
  const std::string host = (tmp() / "host.yaml").string();
  const auto bench = run_command(std::string(RESHARD_MPIEXEC) + " --oversubscribe -np 4 " + RESHARD_BINARY +
                                     " bench-host --seconds 0.05 --json -o " + host + " 2>/dev/null",
                                 &status);
  ASSERT_EQ(status, 0) << bench;
  expect_valid(json::parse(bench), "reshard-bench-host-1", "bench-host");
  const json hosted = reshard_json("check " + m + " --params " + host + " --json");
  expect_valid(hosted, "reshard-check-1", "check --params host.yaml");
  EXPECT_EQ(hosted["profile"], "host");
}
#endif

// The schemas the tests above validate against are exactly the documented ones.
// One default strategy (model::kDefaultStrategy): without --strategy, simulate and exec build the
// tuner's choice, as with --strategy auto.
TEST(DefaultStrategy, SimulateAndExecTakeAuto) {
  const json simulated = reshard_json("simulate " + kSmall + " --json");
  EXPECT_EQ(simulated["params"], reshard_json("simulate " + kSmall + " --strategy auto --json")["params"]);
  const json dry = reshard_json("exec " + kSmall + " --dry-run --json");
  EXPECT_EQ(dry["params"], reshard_json("exec " + kSmall + " --strategy auto --dry-run --json")["params"]);
  EXPECT_EQ(dry["params"], simulated["params"]);
}

TEST(JsonSchema, EveryDocumentedSchemaIsExercised) {
  const std::set<std::string> exercised{"reshard-topo-1", "reshard-model-1", "reshard-plan-1", "reshard-compare-1",
                                        "reshard-simulate-1", "reshard-simulate-flows-1", "reshard-simulate-collective-1",
                                        "reshard-exec-dry-run-1", "reshard-backends-1", "reshard-sweep-row-1",
                                        "reshard-exec-1", "reshard-check-1", "reshard-calibrate-1",
                                        "reshard-systems-1", "reshard-bench-host-1"};
  std::set<std::string> documented;
  for (const auto& e : fs::directory_iterator(kRoot + "/docs/schema")) {
    const json s = json::parse(std::ifstream(e.path()));
    EXPECT_EQ(s.value("$id", ""), e.path().stem().string()) << e.path();
    EXPECT_EQ(s["properties"]["schema"]["const"], e.path().stem().string()) << e.path();
    documented.insert(e.path().stem().string());
  }
  EXPECT_EQ(documented, exercised);
}

}  // namespace
