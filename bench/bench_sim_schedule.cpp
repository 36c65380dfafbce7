// Simulating whole schedules (sim::simulate_schedule: ops -> flows, then the event loop):
//   BM_SimulateSchedule/0   DeepSeek-V3 on 64 DGX H100 (scenarios/deepseek-v3-h100.yaml), domain_chain,
//                           default StrategyParams
//   BM_SimulateSchedule/1   the Kimi-K3-class scenario on 2 x 64 GB200 NVL72 racks
//                           (scenarios/kimi-k3-gb200.yaml), domain_chain
//   BM_SimulateSchedule/2   DeepSeek-V3, the best schedule (hybrid max_chain=2: what `auto` picks,
//                           with and without --simulate): target < 2 s
//   BM_SimulateSchedule/3   Kimi-K3, gather_broadcast (264 678 ops, rings of 4 608 GPUs in 72
//                           channels): target < 30 s
//   BM_SimulateSchedule/4   Kimi-K3, the best schedule (hybrid max_chain=2 relay_ingress rail_blind)
// The second argument picks the rate engine (sim::RateSolver): 0 auto, 1 classes, 2 groups.
// Loading the scenario, planning and building the schedule happen once, outside the timed loop.
// The heap keeps freed memory for reuse, as the `reshard` command sets it (cli/main.cpp): with
// glibc's defaults each run maps its arrays afresh and pays a page fault per 4 KiB.
#include <benchmark/benchmark.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <array>
#include <map>
#include <memory>

#include "reshard/model/cost.hpp"
#include "reshard/model/scenario.hpp"
#include "reshard/model/schedule.hpp"
#include "reshard/model/strategies.hpp"
#include "reshard/sim/schedule_sim.hpp"

namespace {

using namespace reshard;

struct Case {
  model::LoadedScenario scenario;
  model::Schedule schedule;
};

const Case& get_case(int which) {
  static std::map<int, std::unique_ptr<Case>> cache;
  auto it = cache.find(which);
  if (it != cache.end()) return *it->second;
  const char* file = which == 1 || which >= 3 ? "kimi-k3-gb200.yaml" : "deepseek-v3-h100.yaml";
  auto c = std::make_unique<Case>(Case{model::load_scenario(std::string(RESHARD_SOURCE_DIR) + "/scenarios/" + file), {}});
  const auto ts = model::plan(c->scenario.inventory, c->scenario.source, c->scenario.destination);
  model::StrategyParams p;
  p.strategy = model::Strategy::DomainChain;
  if (which == 2) p = model::parse_strategy("hybrid max_chain=2");
  if (which == 3) p = model::parse_strategy("gather_broadcast");
  if (which == 4) p = model::parse_strategy("hybrid max_chain=2 relay_ingress rail_blind");
  c->schedule = model::build_schedule(ts, c->scenario.inventory, c->scenario.source, c->scenario.destination,
                                      c->scenario.topology, p);
  return *cache.emplace(which, std::move(c)).first->second;
}

void BM_SimulateSchedule(benchmark::State& state) {
  const Case& c = get_case(static_cast<int>(state.range(0)));
  const auto cost = model::CostParams::profile_named("reshard");
  sim::ScheduleSimOptions options;
  options.rate_solver = std::array{sim::RateSolver::Auto, sim::RateSolver::Classes,
                                   sim::RateSolver::Groups}[state.range(1)];
  double makespan = 0, engine = 0, total = 0;
  std::size_t flows = 0;
  std::int64_t simulated = 0;
  std::int64_t events = 0;
  for (auto _ : state) {
    const auto r = sim::simulate_schedule(c.schedule, c.scenario.topology, cost, options);
    makespan = r.makespan.value;
    engine += r.result.wall.value;
    total += r.wall.value;
    flows = r.flow_count();
    simulated = r.result.simulated_flows;
    events = r.events;
  }
  state.counters["ops"] = static_cast<double>(c.schedule.ops.size());
  state.counters["flows"] = static_cast<double>(flows);
  state.counters["simulated_flows"] = static_cast<double>(simulated);
  state.counters["events"] = static_cast<double>(events);
  state.counters["makespan_ms"] = makespan * 1e3;
  // Wall time per run: simulating the flow problem (the quotient and the event loop), and all of
  // simulate_schedule (with building the ops or flows).
  state.counters["engine_wall_s"] = engine / static_cast<double>(state.iterations());
  state.counters["total_wall_s"] = total / static_cast<double>(state.iterations());
}

BENCHMARK(BM_SimulateSchedule)->Args({0, 0})->Args({0, 1})->Args({0, 2})->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_SimulateSchedule)->Args({1, 0})->Args({1, 1})->Args({1, 2})->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_SimulateSchedule)->Args({2, 0})->Args({2, 1})->Args({2, 2})->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_SimulateSchedule)->Args({3, 0})->Args({3, 1})->Args({3, 2})->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_SimulateSchedule)->Args({4, 0})->Args({4, 1})->Args({4, 2})->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace

int main(int argc, char** argv) {
#ifdef __GLIBC__
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, -1);
#endif
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
