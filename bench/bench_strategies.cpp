// Strategy, estimate and tuner benchmarks on the large shipped scenarios.
//   build/bench/bench_strategies
#include <benchmark/benchmark.h>

#include <map>
#include <memory>

#include "reshard/model/cost.hpp"
#include "reshard/model/scenario.hpp"
#include "reshard/model/strategies.hpp"
#include "reshard/model/tuner.hpp"

using namespace reshard::model;

namespace {

struct Loaded {
  LoadedScenario sc;
  TransferSet ts;
  std::unique_ptr<ScheduleBasis> basis;  // what every schedule on the plan shares
};
const Loaded& scenario(const std::string& file) {
  static std::map<std::string, std::unique_ptr<Loaded>> cache;
  auto& slot = cache[file];
  if (!slot) {
    auto sc = load_scenario(std::string(RESHARD_SOURCE_DIR) + "/scenarios/" + file);
    auto ts = plan(sc.inventory, sc.source, sc.destination);
    slot = std::make_unique<Loaded>(Loaded{std::move(sc), std::move(ts), nullptr});
    slot->basis = std::make_unique<ScheduleBasis>(slot->ts, slot->sc.inventory, slot->sc.source, slot->sc.destination,
                                                  slot->sc.topology);
  }
  return *slot;
}

// The schedule basis alone (built once per plan, shared by every schedule on it).
void basis(benchmark::State& state, const char* file) {
  const auto& l = scenario(file);
  for (auto _ : state) ScheduleBasis b(l.ts, l.sc.inventory, l.sc.source, l.sc.destination, l.sc.topology);
}

// `strategy` as compare prints it: a name with parameters (parse_strategy). On the shared basis,
// as compare and the tuner build it.
void build(benchmark::State& state, const char* file, const char* strategy) {
  const auto& l = scenario(file);
  const StrategyParams p = parse_strategy(strategy);
  std::size_t ops = 0;
  for (auto _ : state) ops = build_schedule(*l.basis, p).ops.size();
  state.counters["ops"] = static_cast<double>(ops);
}

void estimate_only(benchmark::State& state, const char* file, const char* strategy) {
  const auto& l = scenario(file);
  const StrategyParams p = parse_strategy(strategy);
  const auto s = build_schedule(*l.basis, p);
  const auto cost = CostParams::profile_named("reshard");
  for (auto _ : state) benchmark::DoNotOptimize(estimate(s, l.ts, l.sc.inventory, l.sc.topology, cost).time);
  state.counters["ops"] = static_cast<double>(s.ops.size());
}

// The validator (every needer gets every element exactly once; run by exec, check and calibrate on
// every schedule they read).
void validate_only(benchmark::State& state, const char* file, const char* strategy) {
  const auto& l = scenario(file);
  const auto s = build_schedule(*l.basis, parse_strategy(strategy));
  for (auto _ : state) validate(s, l.ts, l.sc.inventory, l.sc.source, l.sc.destination);
  state.counters["ops"] = static_cast<double>(s.ops.size());
}

// The tuner on the shared basis, on state.range(0) threads (wall time).
void tune_scenario(benchmark::State& state, const char* file) {
  const auto& l = scenario(file);
  const auto cost = CostParams::profile_named("reshard");
  TuneOptions options;
  options.threads = static_cast<int>(state.range(0));
  std::size_t built = 0;
  for (auto _ : state) built = static_cast<std::size_t>(tune(*l.basis, cost, options).built);
  state.counters["built"] = static_cast<double>(built);
}

}  // namespace

BENCHMARK_CAPTURE(basis, deepseek_v3_h100, "deepseek-v3-h100.yaml")->Unit(benchmark::kMillisecond)->Iterations(2);
BENCHMARK_CAPTURE(basis, kimi_k3_gb200, "kimi-k3-gb200.yaml")->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK_CAPTURE(build, deepseek_domain_chain, "deepseek-v3-h100.yaml", "domain_chain")->Unit(benchmark::kMillisecond)->Iterations(2);
BENCHMARK_CAPTURE(estimate_only, deepseek_domain_chain, "deepseek-v3-h100.yaml", "domain_chain")->Unit(benchmark::kMillisecond)->Iterations(3);
// Tuned schedules (what `auto` picks in reshard compare; docs/performance.md).
BENCHMARK_CAPTURE(estimate_only, deepseek_best, "deepseek-v3-h100.yaml", "hybrid max_chain=2")->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK_CAPTURE(build, deepseek_gather_broadcast, "deepseek-v3-h100.yaml", "gather_broadcast")->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK_CAPTURE(estimate_only, deepseek_gather_broadcast, "deepseek-v3-h100.yaml", "gather_broadcast")->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK_CAPTURE(build, kimi_k3_domain_chain, "kimi-k3-gb200.yaml", "domain_chain")->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK_CAPTURE(estimate_only, kimi_k3_domain_chain, "kimi-k3-gb200.yaml", "domain_chain")->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK_CAPTURE(build, kimi_k3_best, "kimi-k3-gb200.yaml", "hybrid max_chain=2 relay_ingress rail_blind")->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK_CAPTURE(estimate_only, kimi_k3_best, "kimi-k3-gb200.yaml", "hybrid max_chain=2 relay_ingress rail_blind")->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK_CAPTURE(build, kimi_k3_direct, "kimi-k3-gb200.yaml", "direct")->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK_CAPTURE(validate_only, deepseek_gather_broadcast, "deepseek-v3-h100.yaml", "gather_broadcast")->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK_CAPTURE(validate_only, kimi_k3_best, "kimi-k3-gb200.yaml", "hybrid max_chain=2 relay_ingress rail_blind")->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK_CAPTURE(validate_only, kimi_k3_gather_broadcast, "kimi-k3-gb200.yaml", "gather_broadcast")->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK_CAPTURE(tune_scenario, deepseek_v3_h100, "deepseek-v3-h100.yaml")->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK_CAPTURE(tune_scenario, kimi_k3_gb200, "kimi-k3-gb200.yaml")->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond)->Iterations(1);

BENCHMARK_MAIN();
