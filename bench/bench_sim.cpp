// The flow simulator against SimGrid 3.32 on the same random bursts (docs/design.md §9).
//
//   BM_FlowSim/<case>     reshard::sim::simulate (validation, route classes, the whole event loop)
//   BM_FlowSimNoSymmetry/<case>  the same without the symmetry quotient (--no-symmetry): since
//                         ECMP shares are equal, the sub-flows of one transfer are alike and the
//                         quotient merges them; this is every flow simulated
//   BM_SimGrid/<case>     SimGrid's engine.run() on the same flows (CM02, TCP-gamma 0, crosstraffic 0,
//                         weight-S 0; platform building not counted; one forked process per run)
// Each SimGrid run also checks that every finish time equals ours to 1e-6 relative and fails the
// benchmark otherwise. Cases: 0 = dgx-h100-64n with >= 10 000 flows (ECMP sub-flows included),
// 1 = synthetic 512-GPU fabric with >= 10 000 flows.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>

#include "reshard/sim/flow_sim.hpp"
#include "simgrid_bursts.hpp"
#include "simgrid_runner.hpp"

namespace {

using namespace reshard;

const simgrid_check::Burst& burst(int which) {
  static std::map<int, simgrid_check::Burst> cache;
  auto it = cache.find(which);
  if (it != cache.end()) return it->second;
  simgrid_check::Burst b = which == 0
      ? simgrid_check::topology_burst(RESHARD_SOURCE_DIR "/topologies/dgx-h100-64n.yaml", 0, 42, 10000)
      : simgrid_check::synthetic_burst(512, 2600, 42);
  return cache.emplace(which, std::move(b)).first->second;
}

void run_flow_sim(benchmark::State& state, bool symmetry_quotient) {
  const auto& b = burst(static_cast<int>(state.range(0)));
  sim::SimOptions options;
  options.symmetry_quotient = symmetry_quotient;
  options.solver = std::array{sim::RateSolver::Auto, sim::RateSolver::Classes, sim::RateSolver::Groups}[state.range(1)];
  sim::FlowSimResult r;
  for (auto _ : state) {
    r = sim::simulate(b.network, b.flows, options);
    benchmark::DoNotOptimize(r.makespan);
  }
  state.counters["flows"] = static_cast<double>(b.flows.size());
  state.counters["simulated_flows"] = static_cast<double>(r.simulated_flows);
  state.counters["events"] = static_cast<double>(r.events);
  state.counters["makespan_s"] = r.makespan.value;
  state.counters["groups"] = r.solver == sim::RateSolver::Groups;  // the engine that ran
}

void BM_FlowSim(benchmark::State& state) { run_flow_sim(state, true); }
void BM_FlowSimNoSymmetry(benchmark::State& state) { run_flow_sim(state, false); }

void BM_SimGrid(benchmark::State& state) {
  const auto& b = burst(static_cast<int>(state.range(0)));
  const auto ours = sim::simulate(b.network, b.flows);
  double worst = 0, setup = 0;
  for (auto _ : state) {
    const auto run = simgrid_check::run_simgrid(b.network, b.flows);
    state.SetIterationTime(run.wall_s);
    setup = run.setup_s;
    for (std::size_t i = 0; i < b.flows.size(); ++i)
      worst = std::max(worst, std::abs(ours.timing[i].finish.value - run.finish[i]) / run.finish[i]);
  }
  if (!(worst <= 1e-6)) state.SkipWithError("SimGrid and reshard::sim disagree beyond 1e-6 relative");
  state.counters["flows"] = static_cast<double>(b.flows.size());
  state.counters["max_rel_diff"] = worst;
  state.counters["setup_s"] = setup;
}

// The second argument picks the rate engine: 0 auto, 1 classes, 2 groups.
BENCHMARK(BM_FlowSim)->ArgsProduct({{0, 1}, {0, 1, 2}})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_FlowSimNoSymmetry)->ArgsProduct({{0, 1}, {0, 1, 2}})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SimGrid)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(2);

}  // namespace

BENCHMARK_MAIN();
