// The keys each mapping of a scenario or topology file may hold (reshard/model/scenario_keys.hpp).
// Adding a key here lets its reader accept it; tests/test_scenario_doc.cpp then fails until
// docs/scenario.md or docs/topology.md documents it.
#include "reshard/model/scenario_keys.hpp"

#include <stdexcept>

namespace reshard::model {

namespace {

const std::vector<std::string>& find(const std::vector<KeyTable>& tables, std::string_view name, const char* what) {
  for (const auto& t : tables)
    if (t.name == name) return t.keys;
  throw std::out_of_range(std::string("no ") + what + " key table '" + std::string(name) + "'");
}

}  // namespace

const std::vector<KeyTable>& scenario_key_tables() {
  static const std::vector<KeyTable> tables{
      {"root", "the scenario's top level",
       {"name", "description", "model", "topology", "dtype", "include_mtp", "lora", "colocated", "source",
        "destination", "delta"}},
      {"megatron", "source: / destination: with framework: megatron",
       {"framework", "gpus", "tp", "pp", "cp", "dp", "ep", "etp", "vpp", "layers_per_stage", "first_stage_layers",
        "last_stage_layers", "precision", "refit_memory", "weights_in"}},
      {"vllm", "source: / destination: with framework: vllm",
       {"framework", "gpus", "tp", "pp", "dp", "dp_mode", "ep", "enable_expert_parallel", "expert_placement",
        "all2all_backend", "redundant_experts", "precision", "refit_memory", "gpu_memory_utilization"}},
      {"sglang", "source: / destination: with framework: sglang",
       {"framework", "gpus", "tp_size", "dp_size", "enable_dp_attention", "ep_size", "moe_dense_tp_size",
        "enable_dp_lm_head", "moe_a2a_backend", "ep_num_redundant_experts", "servers", "precision", "refit_memory",
        "mem_fraction_static"}},
      {"dtensor", "source: / destination: with framework: dtensor",
       {"framework", "gpus", "mesh", "placements", "precision", "refit_memory", "weights_in"}},
      {"dtensor.mesh", "mesh: of a dtensor layout", {"shape", "names"}},
      {"precision", "destination.precision", {"format", "weight_block_size", "classes", "quantize_at"}},
      {"lora", "lora: (an adapter-only refit)", {"rank", "alpha", "target_modules"}},
      {"delta", "delta: (a delta refit) as a mapping", {"density", "encoding", "snapshot"}},
  };
  return tables;
}

const std::vector<KeyTable>& topology_key_tables() {
  static const std::vector<KeyTable> tables{
      {"root.cluster", "the top level of a generated topology with one cluster:",
       {"name", "description", "cluster", "fabric", "latency"}},
      {"root.clusters", "the top level of a generated topology with several clusters:",
       {"name", "description", "clusters", "fabric", "latency"}},
      {"root.explicit", "the top level of an explicit topology", {"name", "description", "devices", "links"}},
      {"cluster", "cluster:",
       {"template", "nodes", "racks", "nic_speed", "host_link", "host_link_kind", "gpu_memory", "nodes_per_leaf"}},
      {"clusters[]", "an item of clusters:",
       {"name", "template", "nodes", "racks", "nic_speed", "host_link", "host_link_kind", "gpu_memory",
        "nodes_per_leaf"}},
      {"fabric", "fabric: of a topology with one cluster:",
       {"rail_optimized", "nodes_per_leaf", "spines", "oversubscription", "core", "nic_speed", "host_link"}},
      {"fabric.core", "fabric.core: of a topology with one cluster:",
       {"leaf_groups_per_pod", "switches", "oversubscription"}},
      {"clusters.fabric", "fabric: of a topology with several clusters:",
       {"rail_optimized", "spines", "oversubscription", "core", "nic_speed", "host_link"}},
      {"clusters.fabric.core", "fabric.core: of a topology with several clusters:", {"switches", "oversubscription"}},
      {"latency", "latency: of a generated topology", {"nvlink", "c2c", "pcie", "nic_leaf", "leaf_spine", "spine_core"}},
      {"devices[]", "an item of devices: (explicit form)", {"name", "kind", "node", "rail", "memory_bandwidth", "memory"}},
      {"links[]", "an item of links: (explicit form)", {"from", "to", "kind", "bandwidth", "latency", "duplex"}},
  };
  return tables;
}

const std::vector<std::string>& scenario_keys(std::string_view table) {
  return find(scenario_key_tables(), table, "scenario");
}

const std::vector<std::string>& topology_keys(std::string_view table) {
  return find(topology_key_tables(), table, "topology");
}

}  // namespace reshard::model
