// A scenario: a model, a cluster and two layouts; its file format, key by key: docs/scenario.md.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "reshard/model/inventory.hpp"
#include "reshard/model/layout.hpp"
#include "reshard/model/overrides.hpp"
#include "reshard/model/precision.hpp"
#include "reshard/model/topology.hpp"

namespace reshard::model {

struct Scenario {
  std::string name;
  std::string description;
  std::string file;  // where it was read from (for messages)
  int source_line = 0, destination_line = 0;            // the `source:` and `destination:` keys
  int source_gpus_line = 0, destination_gpus_line = 0;  // their `gpus:` keys
  int model_line = 0, topology_line = 0;                // the `model:` and `topology:` keys
  std::filesystem::path model_path;
  std::filesystem::path topology_path;
  InventoryOptions model_options;
  LayoutSpec source;
  LayoutSpec destination;
  PrecisionSpec precision;  // destination.precision; format None when absent
  int precision_line = 0;
  int lora_line = 0;  // the `lora:` key (model_options.lora holds what it says)
  // `delta:` (or `--delta`): a delta refit's densities, encoding and snapshot (model/delta.hpp);
  // none when absent. load_scenario hands it to the inventory (Inventory::set_delta).
  DeltaSpec delta;
  int delta_line = 0;
  // `colocated: true`: training and generation share GPUs (each GPU both sides list holds a source
  // and a destination shard). Without it, GPU lists that overlap are refused.
  bool colocated = false;
  // Each side's `refit_memory`; nullopt: default_refit_memory of each GPU's memory.
  std::optional<Bytes> source_refit_memory, destination_refit_memory;
  // `source.weights_in: host`: the source's weights live in host memory (a checkpoint-engine's
  // ParameterServer, a trainer's CPU replica), so they take no GPU memory; a profile's host_passes
  // prices their copy in (cost.hpp). Default: GPU memory.
  bool source_weights_in_host = false;
  // The share of a destination GPU's memory its engine may use: `gpu_memory_utilization` (vllm) or
  // `mem_fraction_static` (sglang), 0.9 when absent; 1 for a megatron or dtensor destination.
  double memory_fraction = 1.0;
  std::string memory_fraction_key;  // "gpu_memory_utilization", "mem_fraction_static"; "" for megatron, dtensor
  // `--set` overrides: all of them as given, and those for the model and topology files (keys
  // from the file's root), which load_scenario applies when it reads those files.
  std::vector<Override> overrides;
  std::vector<Override> model_overrides;
  std::vector<Override> topology_overrides;

  // Parses the file; checks keys, units, GPU lists and world sizes (ConfigError with file, line, key).
  // Overrides whose key starts with "model." or "topology." are kept for those files; the others
  // are applied to the scenario's own tree first (errors about them are OverrideErrors).
  static Scenario load(const std::filesystem::path& path, const std::vector<Override>& overrides = {});
  // `base_dir` resolves relative model/topology paths.
  static Scenario parse(const std::string& yaml_text, const std::string& name, const std::filesystem::path& base_dir,
                        const std::vector<Override>& overrides = {});
};

// The refit staging budget a GPU gets without `refit_memory`: what NeMo RL's packed broadcast
// allocates, NRL_REFIT_NUM_BUFFERS = 2 buffers of min(2 % of the GPU's memory, 5 GiB)
// (NRL_REFIT_BUFFER_MEMORY_RATIO = 0.02):
//   default_refit_memory(m) = 2 * min(floor(m / 50), 5 GiB)
// 3.2 GB for an 80 GB H100, 5.64 GB for a 141 GB H200, 7.44 GB for a 186 GB GB200, 10 GiB from
// 268.4 GB up (a 288 GB GB300); 0 for m = 0 (memory not given: unbounded).
Bytes default_refit_memory(Bytes gpu_memory);
// That rule as the reports print it.
inline constexpr char kDefaultBudgetRule[] = "2 x min(2 % of GPU memory, 5 GiB)";

// What one GPU must hold during the refit, and what it must fit in.
struct GpuMemoryUse {
  Bytes capacity;             // Topology::gpu_memory (0: not given)
  Bytes source_weights;       // bytes of the source shards its ranks hold (a shard once per GPU)
  Bytes destination_weights;  // bytes of the destination shards its ranks hold (as they travel)
  // The refit staging budget: the side's refit_memory or default_refit_memory(capacity); a GPU on
  // both sides (colocated) takes the smaller of the two (an unbounded one gives way to the other);
  // a GPU on neither side default_refit_memory(capacity); 0 = unbounded (no refit_memory and the
  // topology gives no memory for it).
  Bytes budget;
  // Whose rule set `budget` (bits as a GPU's sides: 1 the source's, 2 the destination's, 3 both
  // sides' equally, 0 a GPU on neither side): a colocated GPU takes the smaller side's.
  std::uint8_t budget_side = 0;
  // What weights + budget must fit in: memory_fraction x capacity (rounded to the byte) for a
  // destination or colocated GPU, the capacity for any other; 0 = unknown (capacity not given).
  Bytes limit;
  // A delta refit's snapshot of the previous step's values of its source shards (model/delta.hpp),
  // when it is kept in GPU memory; 0 otherwise.
  Bytes delta_snapshot;
  Bytes weights() const { return source_weights + destination_weights + delta_snapshot; }  // each side's counted once
};

// A scenario with everything it refers to loaded and both layouts built. With a precision change the
// inventory and layouts are what travels (apply_precision).
struct LoadedScenario {
  Scenario scenario;
  Inventory inventory;
  Topology topology;
  ShardMap source;
  ShardMap destination;
  std::vector<GpuMemoryUse> memory;  // index GpuId, 0 .. topology.gpu_count() - 1 (gpu_memory_use)
};

// Loads the model and the topology, checks that every GPU exists, builds both ShardMaps, computes
// the GPUs' memory use and checks it (check_memory). Any problem is a ConfigError naming the
// scenario file, the line and the key.
LoadedScenario load_scenario(const Scenario& s);
LoadedScenario load_scenario(const std::filesystem::path& path, const std::vector<Override>& overrides = {});

// The steps of load_scenario, for callers that share what several scenarios have in common:
// the model and topology files with their overrides (an error in a file that a `model` or
// `topology` override named is an OverrideError), the check that every GPU of both layouts exists
// in the topology, and the source and destination ShardMaps (ConfigError naming the scenario key).
Inventory load_inventory(const Scenario& s);
Topology load_topology(const Scenario& s);
void check_layout_gpus(const Scenario& s, const Topology& topo);
std::pair<ShardMap, ShardMap> build_layouts(const Scenario& s, const Inventory& inv);
// apply_precision (model/precision.hpp) with s.precision: the inventory and the layouts become what
// travels (a ConfigError naming destination.precision for a misaligned destination).
void apply_precision(const Scenario& s, Inventory& inv, ShardMap& src, ShardMap& dst);
// Every GPU's memory use (GpuMemoryUse) for the ShardMaps as load_scenario leaves them; one pass
// over tensors x shards and one over each rank set's ranks.
std::vector<GpuMemoryUse> gpu_memory_use(const Scenario& s, const Inventory& inv, const Topology& topo,
                                         const ShardMap& src, const ShardMap& dst);
// Every GPU of either side with a known limit holds weights() + budget <= limit; otherwise a
// ConfigError about the GPU that exceeds its limit by the most (the lowest index among equals),
// at the `source:` or `destination:` key (destination for a colocated GPU), naming the GPU, its
// weights and budget, and how the limit was computed.
void check_memory(const Scenario& s, const std::vector<GpuMemoryUse>& memory);

// The staging budget of every GPU of the scenario's topology (index GpuId; 0: unbounded), the
// Schedule::budget its schedules are built for.
std::vector<Bytes> staging_budgets(const Scenario& s, const Topology& topo);
inline std::vector<Bytes> staging_budgets(const LoadedScenario& sc) { return staging_budgets(sc.scenario, sc.topology); }
// The same, every GPU held to at most `cap` when one is given (`--max-staging`).
std::vector<Bytes> staging_budgets(const LoadedScenario& sc, const std::optional<Bytes>& cap);
// `budget` (per GPU, 0: unbounded) with every one of the `gpu_count` GPUs held to at most `cap`.
std::vector<Bytes> cap_budgets(std::vector<Bytes> budget, Bytes cap, std::int32_t gpu_count);

// The GPUs both sides of a scenario list (sorted): those of a colocated refit.
std::vector<GpuId> shared_gpus(const Scenario& s);

}  // namespace reshard::model
