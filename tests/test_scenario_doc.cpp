// The file-format references cannot drift from the readers: docs/scenario.md and docs/topology.md
// document exactly the keys the scenario and topology readers accept (the key tables of
// reshard/model/scenario_keys.hpp), and the readers refuse any other key with those tables.
//
// Doc convention: a line `<!-- keys: NAME ... -->` followed by a Markdown table; every row of that
// table that starts with a key in backquotes (| `key` | ...) documents that key for each NAME.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "paths.hpp"
#include "reshard/model/errors.hpp"
#include "reshard/model/scenario.hpp"
#include "reshard/model/scenario_keys.hpp"
#include "reshard/model/topology.hpp"

namespace {

using reshard::model::KeyTable;

// What a doc file documents: per key table named in a marker, its keys in row order (a key twice
// when two rows give it), and the problems of form met on the way.
struct DocKeys {
  std::map<std::string, std::vector<std::string>> keys;
  std::vector<std::string> problems;
};

DocKeys read_doc(const std::string& file) {
  DocKeys out;
  std::ifstream in(file);
  if (!in) {
    out.problems.push_back("cannot read " + file);
    return out;
  }
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  const std::regex marker(R"(^\s*<!--\s*keys:\s*(.*?)\s*-->\s*$)");
  const std::regex row(R"(^\|\s*`([^`]+)`\s*\|)");
  for (std::size_t i = 0; i < lines.size(); ++i) {
    std::smatch m;
    if (!std::regex_match(lines[i], m, marker)) continue;
    const std::string where = file + ":" + std::to_string(i + 1);
    std::vector<std::string> names;
    std::istringstream words(m[1].str());
    for (std::string w; words >> w;) names.push_back(w);
    if (names.empty()) out.problems.push_back(where + ": a keys marker names no key table");
    std::size_t j = i + 1;
    while (j < lines.size() && lines[j].find_first_not_of(" \t") == std::string::npos) ++j;
    if (j == lines.size() || lines[j].rfind('|', 0) != 0) {
      out.problems.push_back(where + ": a keys marker without a table after it");
      continue;
    }
    int rows = 0;
    for (; j < lines.size() && lines[j].rfind('|', 0) == 0; ++j) {
      std::smatch k;
      if (!std::regex_search(lines[j], k, row)) continue;  // the header and separator rows
      ++rows;
      for (const auto& n : names) out.keys[n].push_back(k[1].str());
    }
    if (rows == 0) out.problems.push_back(where + ": the table under the keys marker documents no key");
  }
  return out;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// Every table of the reader documented exactly once per key, and no table the reader lacks.
void expect_documented(const std::string& doc, const std::vector<KeyTable>& tables) {
  const DocKeys d = read_doc(reshard::test::source_dir() + "/" + doc);
  for (const auto& p : d.problems) ADD_FAILURE() << p;
  std::set<std::string> known;
  for (const auto& t : tables) {
    known.insert(t.name);
    const auto it = d.keys.find(t.name);
    if (it == d.keys.end()) {
      ADD_FAILURE() << doc << " documents no key of '" << t.name << "' (" << t.where << "; a table under <!-- keys: "
                    << t.name << " -->): " << joined(t.keys);
      continue;
    }
    const std::set<std::string> code(t.keys.begin(), t.keys.end());
    std::set<std::string> seen;
    std::vector<std::string> missing, extra, twice;
    for (const auto& k : it->second) {
      if (!seen.insert(k).second) twice.push_back(k);
      if (!code.count(k)) extra.push_back(k);
    }
    for (const auto& k : t.keys)
      if (!seen.count(k)) missing.push_back(k);
    EXPECT_TRUE(missing.empty()) << doc << ": '" << t.name << "' (" << t.where
                                 << "): the reader accepts, the doc does not document: " << joined(missing);
    EXPECT_TRUE(extra.empty()) << doc << ": '" << t.name << "' (" << t.where
                               << "): documented, but the reader refuses: " << joined(extra);
    EXPECT_TRUE(twice.empty()) << doc << ": '" << t.name << "': documented twice: " << joined(twice);
  }
  for (const auto& [name, keys] : d.keys)
    EXPECT_TRUE(known.count(name)) << doc << " has a table marked '" << name
                                   << "', which is no key table of the reader (model/core/src/scenario_keys.cpp)";
}

TEST(ScenarioDoc, DocumentsEveryScenarioKeyTheReaderAccepts) {
  expect_documented("docs/scenario.md", reshard::model::scenario_key_tables());
}

TEST(ScenarioDoc, DocumentsEveryTopologyKeyTheReaderAccepts) {
  expect_documented("docs/topology.md", reshard::model::topology_key_tables());
}

// The doc parser itself: a marker over two tables' keys, rows without a key skipped, a marker
// without a table reported.
TEST(ScenarioDoc, ReadsMarkedTables) {
  const std::string file = ::testing::TempDir() + "reshard_scenario_doc_test.md";
  std::ofstream(file) << "# x\n\n<!-- keys: a b -->\n| key | what |\n|---|---|\n| `k1` | one |\n| `k2` | two |\n"
                         "\n| `not` | an unmarked table |\n\n<!-- keys: a -->\n\n| key |\n|---|\n| `k3` |\n"
                         "<!-- keys: c -->\ntext\n";
  const DocKeys d = read_doc(file);
  EXPECT_EQ(d.keys.at("a"), (std::vector<std::string>{"k1", "k2", "k3"}));
  EXPECT_EQ(d.keys.at("b"), (std::vector<std::string>{"k1", "k2"}));
  EXPECT_EQ(d.keys.count("c"), 0u);
  ASSERT_EQ(d.problems.size(), 1u);
  EXPECT_NE(d.problems[0].find("without a table"), std::string::npos) << d.problems[0];
}

// The readers take their tables: an unknown key in each mapping is refused listing that table.
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const reshard::model::ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

void expect_refused_with(const std::string& what, const std::vector<std::string>& keys, const std::string& table) {
  const std::string tail = "unknown key; allowed here: " + joined(keys);
  EXPECT_TRUE(what.size() >= tail.size() && what.compare(what.size() - tail.size(), tail.size(), tail) == 0)
      << table << ": " << what;
}

TEST(ScenarioDoc, ScenarioReaderRefusesKeysOutsideItsTables) {
  using reshard::model::Scenario;
  using reshard::model::scenario_keys;
  const std::string top = "model: m.yaml\ntopology: t.yaml\n";
  const std::string src = "source: {framework: megatron, gpus: 0-1}\n";
  const std::string dst = "destination: {framework: vllm, dp: 2, gpus: 2-3}\n";
  auto refused = [&](const std::string& yaml, const std::string& table) {
    expect_refused_with(error_of([&] { Scenario::parse(yaml, "s.yaml", "."); }), scenario_keys(table), table);
  };
  refused(top + "bogus: 1\n" + src + dst, "root");
  refused(top + "source: {framework: megatron, gpus: 0-1, bogus: 1}\n" + dst, "megatron");
  refused(top + src + "destination: {framework: vllm, gpus: 2-3, bogus: 1}\n", "vllm");
  refused(top + src + "destination: {framework: sglang, gpus: 2-3, bogus: 1}\n", "sglang");
  refused(top + "source: {framework: dtensor, mesh: {shape: [2]}, gpus: 0-1, bogus: 1}\n" + dst, "dtensor");
  refused(top + "source: {framework: dtensor, mesh: {shape: [2], bogus: 1}, gpus: 0-1}\n" + dst, "dtensor.mesh");
  refused(top + src + "destination: {framework: vllm, dp: 2, gpus: 2-3, precision: {format: bf16, bogus: 1}}\n",
          "precision");
}

TEST(ScenarioDoc, TopologyReaderRefusesKeysOutsideItsTables) {
  using reshard::model::Topology;
  using reshard::model::topology_keys;
  auto refused = [&](const std::string& yaml, const std::string& table) {
    expect_refused_with(error_of([&] { Topology::parse(yaml, "t.yaml"); }), topology_keys(table), table);
  };
  const std::string cluster = "cluster: {template: dgx-h100, nodes: 2}\n";
  refused(cluster + "bogus: 1\n", "root.cluster");
  refused("cluster: {template: dgx-h100, nodes: 2, bogus: 1}\n", "cluster");
  refused(cluster + "fabric: {bogus: 1}\n", "fabric");
  refused(cluster + "fabric: {spines: 2, core: {leaf_groups_per_pod: 1, switches: 2, bogus: 1}}\n", "fabric.core");
  refused(cluster + "latency: {bogus: 1}\n", "latency");
  const std::string clusters = "clusters: [{name: a, template: dgx-h100, nodes: 1}, {name: b, template: dgx-h100, nodes: 1}]\n";
  refused(clusters + "bogus: 1\n", "root.clusters");
  refused("clusters: [{name: a, template: dgx-h100, nodes: 1, bogus: 1}]\n", "clusters[]");
  refused(clusters + "fabric: {bogus: 1}\n", "clusters.fabric");
  refused(clusters + "fabric: {spines: 2, core: {switches: 2, bogus: 1}}\n", "clusters.fabric.core");
  const std::string devices = "devices: [{name: g0, kind: gpu, node: n}, {name: g1, kind: gpu, node: n}]\n";
  refused(devices + "links: []\nbogus: 1\n", "root.explicit");
  refused("devices: [{name: g0, kind: gpu, node: n, bogus: 1}]\nlinks: []\n", "devices[]");
  refused(devices + "links: [{from: g0, to: g1, kind: nvlink, bandwidth: 450GBps, bogus: 1}]\n", "links[]");
}

}  // namespace
