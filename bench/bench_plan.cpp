// Planner benchmarks: the exact transfer set and lower bound of the shipped large scenarios.
//   build/bench/bench_plan --benchmark_filter=...
#include <benchmark/benchmark.h>

#include "reshard/model/planned.hpp"
#include "reshard/model/planner.hpp"
#include "reshard/model/scenario.hpp"

using namespace reshard::model;

namespace {

// Everything `reshard plan` does: load model and topology, build both layouts, plan, lower bound.
void plan_scenario(benchmark::State& state, const char* file) {
  const std::string path = std::string(RESHARD_SOURCE_DIR) + "/scenarios/" + file;
  std::size_t pieces = 0;
  for (auto _ : state) {
    const auto sc = load_scenario(path);
    const auto ts = plan(sc.inventory, sc.source, sc.destination);
    const auto lb = lower_bound(ts, sc.source, sc.destination, sc.topology);
    benchmark::DoNotOptimize(lb.time);
    pieces = ts.pieces.size();
  }
  state.counters["pieces"] = static_cast<double>(pieces);
}

// The plan alone (layouts already built).
void plan_only(benchmark::State& state, const char* file) {
  const auto sc = load_scenario(std::string(RESHARD_SOURCE_DIR) + "/scenarios/" + file);
  for (auto _ : state) {
    const auto ts = plan(sc.inventory, sc.source, sc.destination);
    benchmark::DoNotOptimize(ts.bytes_needed);
  }
}

// The replan after losing GPUs (`lost`): the plan mapped onto the survivors (PlannedScenario::without:
// the survivors' layouts, their rank sets, the pieces remapped, the totals recounted), against
// plan_only, which intersects every tensor again.
void replan_without(benchmark::State& state, const char* file, const char* lost) {
  const PlannedScenario planned(load_scenario(std::string(RESHARD_SOURCE_DIR) + "/scenarios/" + file));
  const std::vector<GpuId> gpus = parse_gpu_list(std::string(lost));
  std::size_t pieces = 0;
  for (auto _ : state) {
    const PlannedScenario survivors = planned.without(gpus);
    pieces = survivors.transfers().pieces.size();
    benchmark::DoNotOptimize(survivors.transfers().bytes_needed);
  }
  state.counters["pieces"] = static_cast<double>(pieces);
}

// The replan's own work: the survivors' layouts (survivors) and the plan mapped onto them
// (restrict_transfers), without the copy of the model and topology that a PlannedScenario of its
// own takes.
void replan_transfers(benchmark::State& state, const char* file, const char* lost) {
  const auto sc = load_scenario(std::string(RESHARD_SOURCE_DIR) + "/scenarios/" + file);
  const TransferSet full = plan(sc.inventory, sc.source, sc.destination);
  const std::vector<GpuId> gpus = parse_gpu_list(std::string(lost));
  for (auto _ : state) {
    const Survivors s = survivors(sc, gpus);
    const TransferSet ts = restrict_transfers(full, s.source_sets, s.destination_sets, sc.inventory, s.source, s.destination);
    benchmark::DoNotOptimize(ts.bytes_needed);
  }
}

}  // namespace

BENCHMARK_CAPTURE(plan_scenario, deepseek_v3_h100, "deepseek-v3-h100.yaml")->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK_CAPTURE(plan_scenario, qwen3_235b_h100, "qwen3-235b-h100.yaml")->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK_CAPTURE(plan_scenario, kimi_k3_gb200, "kimi-k3-gb200.yaml")->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK_CAPTURE(plan_only, deepseek_v3_h100, "deepseek-v3-h100.yaml")->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK_CAPTURE(plan_only, kimi_k3_gb200, "kimi-k3-gb200.yaml")->Unit(benchmark::kMillisecond)->Iterations(3);
// One compute tray (4 GPUs) of each side lost: a training node and an inference node.
BENCHMARK_CAPTURE(replan_without, kimi_k3_gb200_one_node_each_side, "kimi-k3-gb200.yaml", "0-3,4608-4611")
    ->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK_CAPTURE(replan_transfers, kimi_k3_gb200_one_node_each_side, "kimi-k3-gb200.yaml", "0-3,4608-4611")
    ->Unit(benchmark::kMillisecond)->Iterations(3);
// One DGX node of the destination lost (its TP32 replica out; every source GPU is the only holder
// of its experts, so no source GPU can be lost).
BENCHMARK_CAPTURE(replan_without, deepseek_v3_h100_one_destination_node, "deepseek-v3-h100.yaml", "256-263")
    ->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK_CAPTURE(replan_transfers, deepseek_v3_h100_one_destination_node, "deepseek-v3-h100.yaml", "256-263")
    ->Unit(benchmark::kMillisecond)->Iterations(3);

BENCHMARK_MAIN();
