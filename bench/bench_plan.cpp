// Planner benchmarks: the exact transfer set and lower bound of the shipped large scenarios.
//   build/bench/bench_plan --benchmark_filter=...
#include <benchmark/benchmark.h>

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

}  // namespace

BENCHMARK_CAPTURE(plan_scenario, deepseek_v3_h100, "deepseek-v3-h100.yaml")->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK_CAPTURE(plan_scenario, qwen3_235b_h100, "qwen3-235b-h100.yaml")->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK_CAPTURE(plan_scenario, kimi_k3_gb200, "kimi-k3-gb200.yaml")->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK_CAPTURE(plan_only, deepseek_v3_h100, "deepseek-v3-h100.yaml")->Unit(benchmark::kMillisecond)->Iterations(3);

BENCHMARK_MAIN();
