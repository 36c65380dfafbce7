// reshard sweep of studies/deepseek-nic-tp-100.yaml: 100 points (25 NIC speeds x 4 vLLM layouts of
// DeepSeek-V3 on 2 x 256 DGX H100), the six named strategies estimated at each, on 2 threads.
// Topologies, inventories, transfer sets and schedules are shared between points (study/sweep.hpp).
#include <benchmark/benchmark.h>

#include "reshard/study/sweep.hpp"

namespace {

void BM_SweepDeepSeekNicTp100(benchmark::State& state) {
  const auto spec = reshard::study::SweepSpec::load(RESHARD_SOURCE_DIR "/studies/deepseek-nic-tp-100.yaml");
  reshard::study::SweepOptions options;
  options.threads = static_cast<int>(state.range(0));
  std::size_t rows = 0, failed = 0;
  for (auto _ : state) {
    const auto result = reshard::study::run_sweep(spec, options);
    rows = result.size();
    failed = 0;
    for (const auto& r : result) failed += !r.error.empty();
  }
  state.counters["points"] = static_cast<double>(spec.points.size());
  state.counters["rows"] = static_cast<double>(rows);
  state.counters["failed"] = static_cast<double>(failed);
}
BENCHMARK(BM_SweepDeepSeekNicTp100)->Arg(2)->Arg(1)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
