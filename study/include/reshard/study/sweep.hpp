// A sweep: one base scenario, axes of `--set` overrides (model/overrides.hpp), strategies and
// profiles; every point compared (compare.hpp), one row per point x profile x strategy. Format of
// the spec: docs/sweep.md.
//
//   name: deepseek-nic-tp
//   scenario: ../scenarios/deepseek-v3-h100.yaml   # relative to the spec
//   set: {dtype: bf16}                 # optional: overrides every point shares
//   combine: product                   # product (default) or zip of the axes
//   axes:
//     - key: topology.cluster.nic_speed
//       values: [200Gbps, 400Gbps]
//     - key: destination.tp
//       range: {from: 8, to: 64, times: 2}   # or step: N; with unit: Gbps
//     - zip:                           # members paired element by element
//         - {key: destination.tp, values: [8, 16]}
//         - {key: destination.dp, values: [32, 16]}
//   strategies: [direct, domain_chain, auto]   # default: every named strategy
//   profiles: [reshard, nemo_rl, ../params/nemo_rl.yaml]   # names, or cost parameters files
//                                      # (reshard calibrate's output; relative to the spec); default: reshard
//   simulate: false
//
// Points are numbered in order, the last axis varying fastest (product). Everything a point
// loads is shared with the points that have the same inputs: a topology by its file and topology
// overrides, an inventory by its file, dtype and model overrides, the layouts and transfer set by
// those and the scenario's own overrides. Evaluation is deterministic, so rows do not depend on
// the threads or processes that computed them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "reshard/model/overrides.hpp"

namespace reshard::study {

struct SweepSpec {
  std::string name;
  std::string file;                         // where it was read from (for messages)
  std::filesystem::path scenario;
  std::filesystem::path base_dir;           // the spec's folder: relative `model`/`topology` values
  std::vector<model::Override> base;        // `set`
  std::vector<std::string> keys;            // every axis key, in axis order: the input columns
  std::vector<std::vector<std::string>> points;  // per point, one value per key
  std::vector<std::string> strategies;      // named and configured strategies ("auto": the tuner)
  std::vector<std::string> profiles;       // as written: a profile name or a parameters file
  bool simulate = false;

  // Throws ConfigError naming the file, line and key (an unknown key, an empty axis, a range
  // that never reaches its end, zipped axes of different lengths, a key on two axes).
  static SweepSpec load(const std::filesystem::path& path);
  static SweepSpec parse(const std::string& yaml_text, const std::string& name, const std::filesystem::path& base_dir);

  // The cost parameters file profiles[k] names (an entry ending in .yaml, .yml or .json, relative
  // to base_dir), or "" for a profile name.
  std::filesystem::path params_file(std::size_t k) const;
  // Replaces the profiles with one cost parameters file (`reshard sweep --params FILE`); ConfigError
  // when it does not load.
  void use_params_file(const std::string& file);

  // One more axis, the fastest: every point once per value (`sweep --delta D`: key delta, values
  // dense and D). ConfigError when the key is on an axis already.
  void add_axis(const std::string& key, const std::vector<std::string>& values);

  // The overrides of point i: `set`, then the point's values.
  std::vector<model::Override> overrides(std::size_t point) const;
};

// One strategy at one point under one profile; or, with `error`, a point that failed (no strategy).
struct SweepRow {
  std::int64_t point = 0;
  std::vector<std::string> inputs;  // the point's values, one per SweepSpec::keys
  std::string profile;
  std::string strategy;             // the row's name: a strategy, a configured strategy's description, "auto"
  std::string params;               // describe(): the strategy with its parameters
  std::optional<double> estimate_s, simulated_s, lower_bound_s;
  std::string bound_cut, bound_where, bound_limit;  // the lower bound's binding cut and what forms it
  std::string limited_by, limit, bottleneck;        // the estimate's (CompareRow)
  std::optional<std::int64_t> network_bytes, nvlink_bytes, operations;
  // The staging memory the GPU that needs the most holds at once, and that GPU's budget (0:
  // unbounded; model/memory.hpp).
  std::optional<std::int64_t> peak_staging_bytes, staging_budget_bytes;
  std::string best;                 // the point's best strategy under this profile (CompareResult::best)
  std::string error;                // a failed point: its error; the fields above are empty
};

struct SweepOptions {
  int threads = 0;                  // 0: std::thread::hardware_concurrency()
  int rank = 0, ranks = 1;          // this process evaluates the points i with i % ranks == rank
  // After each point: points done, points of this process, points failed.
  std::function<void(std::size_t done, std::size_t total, std::size_t failed)> progress;
};

// Every point's inputs read before any point runs: its scenario with the point's overrides, and
// the topology and model files that names (each distinct file once), without planning. One message
// per distinct problem ("" when every point reads), naming the axis values and points it hits and
// the reader's file, line and key: a typo in an axis value (`400Gb`) is found before the sweep
// spends its time. Scenario keys are checked as the scenario reader checks them (a layout whose
// sizes do not match its GPU list included); what needs planning (a layout pair that cannot be
// planned, weights above a GPU's memory) is the point's own error row, not this.
std::vector<std::string> check_points(const SweepSpec& spec);

// The rows of this process's points, in point order (within a point: profiles, then strategies).
// A point that fails is one row per profile with its error; the sweep goes on.
std::vector<SweepRow> run_sweep(const SweepSpec& spec, const SweepOptions& options = {});

// One JSON object per row (the JSON lines format) and back, exactly.
nlohmann::json to_json(const SweepRow& row, const SweepSpec& spec);
SweepRow sweep_row_from_json(const nlohmann::json& j, const SweepSpec& spec);

// The tidy CSV: a header (point, the axis keys, then the row's fields) and one line per row.
// Numbers are written in their shortest exact form.
std::string csv_header(const SweepSpec& spec);
std::string to_csv(const SweepRow& row);

}  // namespace reshard::study
