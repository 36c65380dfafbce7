// Inventory::load (parse the architecture file, build every tensor, index names, sum totals) for
// DeepSeek-V3 (45 395 tensors) and the 2.8 T Kimi-K3-class synthetic model (166 935 tensors).
#include <benchmark/benchmark.h>

#include <filesystem>
#include <string>

#include "reshard/model/inventory.hpp"

namespace {

void load_model(benchmark::State& state, const std::string& name, bool mtp) {
  const auto path = std::filesystem::path(RESHARD_SOURCE_DIR) / "models" / (name + ".yaml");
  reshard::model::InventoryOptions options;
  options.include_mtp = mtp;
  std::size_t tensors = 0;
  for (auto _ : state) {
    const auto inv = reshard::model::Inventory::load(path, options);
    tensors = inv.tensors().size();
    benchmark::DoNotOptimize(inv.parameters());
  }
  state.counters["tensors"] = static_cast<double>(tensors);
  state.counters["tensors_per_s"] =
      benchmark::Counter(static_cast<double>(tensors) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
}

}  // namespace

BENCHMARK_CAPTURE(load_model, deepseek_v3, std::string("deepseek-v3"), false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(load_model, deepseek_v3_mtp, std::string("deepseek-v3"), true)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(load_model, kimi_k3_synthetic, std::string("kimi-k3-synthetic"), false)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(load_model, qwen3_8_synthetic, std::string("qwen3.8-synthetic"), false)
    ->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
