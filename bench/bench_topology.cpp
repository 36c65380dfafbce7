// Topology: load the frontier-scale cluster (gb200-nvl72-k3, 9216 GPUs, leaf/spine/core fabric) and
// compute routes for 100 000 random GPU pairs on it. Targets on the 2-core VM: load < 1 s,
// 100 000 routes < 0.5 s. Figures: docs/performance.md, section "Topology".
#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <vector>

#include "reshard/model/topology.hpp"

using reshard::model::GpuId;
using reshard::model::Topology;

namespace {

const std::string kFrontier = std::string(RESHARD_SOURCE_DIR) + "/topologies/gb200-nvl72-k3.yaml";

void BM_LoadFrontier(benchmark::State& state) {
  for (auto _ : state) {
    Topology t = Topology::load(kFrontier);
    benchmark::DoNotOptimize(t.gpu_count());
  }
  state.SetLabel("9216 GPUs");
}
BENCHMARK(BM_LoadFrontier)->Unit(benchmark::kMillisecond);

// 100 000 random pairs (fixed seed) on a freshly loaded topology each iteration, so the leaf-pair
// cache starts empty: the figure includes filling it.
void BM_Routes100k(benchmark::State& state) {
  constexpr int kPairs = 100'000;
  std::mt19937_64 rng(42);
  const Topology base = Topology::load(kFrontier);
  std::uniform_int_distribution<GpuId> pick(0, base.gpu_count() - 1);
  std::vector<std::pair<GpuId, GpuId>> pairs;
  pairs.reserve(kPairs);
  while (static_cast<int>(pairs.size()) < kPairs) {
    const GpuId a = pick(rng), b = pick(rng);
    if (a != b) pairs.emplace_back(a, b);
  }
  std::size_t paths = 0;
  for (auto _ : state) {
    state.PauseTiming();
    Topology t = Topology::load(kFrontier);
    state.ResumeTiming();
    paths = 0;
    for (const auto& [a, b] : pairs) paths += t.route(a, b).paths.size();
    benchmark::DoNotOptimize(paths);
  }
  state.counters["paths_per_route"] = static_cast<double>(paths) / kPairs;
  state.counters["routes_per_s"] = benchmark::Counter(static_cast<double>(kPairs), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Routes100k)->Unit(benchmark::kMillisecond);

void BM_BisectionFrontier(benchmark::State& state) {
  const Topology t = Topology::load(kFrontier);
  for (auto _ : state) benchmark::DoNotOptimize(t.bisection_bandwidth().value);
}
BENCHMARK(BM_BisectionFrontier)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
