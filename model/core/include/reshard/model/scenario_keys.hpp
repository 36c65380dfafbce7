// The keys the scenario and topology readers accept, mapping by mapping: each table is the one list
// its reader hands to allow_only (model/scenario/src/scenario.cpp, model/topology/src/topology_yaml.cpp), so a key
// outside it is refused naming the file, line and key. tests/test_scenario_doc.cpp checks that
// docs/scenario.md and docs/topology.md document exactly these keys: a table marked
// `<!-- keys: NAME ... -->` documents keys of the tables it names (several when keys are shared).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace reshard::model {

struct KeyTable {
  std::string name;               // as the docs' markers name it: "root", "megatron", "fabric.core", ...
  std::string where;              // the mapping, in words
  std::vector<std::string> keys;  // in the order an unknown-key error lists them
};

// Scenario files (docs/scenario.md): root, megatron, vllm, sglang, dtensor (each of these four:
// `source:` / `destination:` with that framework, the common keys included), dtensor.mesh,
// precision (`destination.precision`).
const std::vector<KeyTable>& scenario_key_tables();
// Topology files (docs/topology.md): root.cluster, root.clusters, root.explicit (the top level of
// each form), cluster, clusters[], fabric, fabric.core (one cluster), clusters.fabric,
// clusters.fabric.core (several clusters), latency, devices[], links[].
const std::vector<KeyTable>& topology_key_tables();

// The keys of one table; std::out_of_range naming it when there is none.
const std::vector<std::string>& scenario_keys(std::string_view table);
const std::vector<std::string>& topology_keys(std::string_view table);

}  // namespace reshard::model
