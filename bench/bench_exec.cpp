// The executor core on the host: building the per-GPU programs (copy runs between shards and
// staging regions) of a 16 GB scenario, and the pattern fill and check rate of the host backend.
#include <benchmark/benchmark.h>

#include <filesystem>

#include "host_memory.hpp"
#include "reshard/exec/executor.hpp"
#include "reshard/model/scenario.hpp"
#include "reshard/model/strategies.hpp"

namespace {

using namespace reshard::model;
using namespace reshard::exec;

struct Fixture {
  LoadedScenario sc;
  TransferSet ts;
  Schedule s;
  RunPlan rp;
  explicit Fixture(const std::string& name, const std::string& strategy)
      : sc(load_scenario(std::filesystem::path(std::string(RESHARD_SOURCE_DIR) + "/scenarios/" + name))),
        ts(plan(sc.inventory, sc.source, sc.destination)) {
    StrategyParams p;
    p.strategy = strategy_named(strategy);
    s = build_schedule(ts, sc.inventory, sc.source, sc.destination, sc.topology, p);
    rp = make_run_plan(sc, ts, s);
  }
};

// Programs of all 16 GPUs of the GPU-check scenario (Qwen3-8B, 16.4 GB moved): what the cuda
// backend builds before it launches anything.
void BM_BuildProgramsQwen3_8B(benchmark::State& state) {
  static Fixture f("gpu-check-qwen3-8b.yaml", "domain_chain");
  std::int64_t runs = 0;
  for (auto _ : state) {
    runs = 0;
    for (GpuId g : f.rp.gpus) {
      GpuProgram prog = build_program(f.rp, g);
      runs += static_cast<std::int64_t>(prog.local.size());
      for (const auto& t : prog.sends) runs += static_cast<std::int64_t>(t.copies.size());
      for (const auto& t : prog.receives) runs += static_cast<std::int64_t>(t.copies.size());
    }
    benchmark::DoNotOptimize(runs);
  }
  state.counters["copy_runs"] = static_cast<double>(runs);
}
BENCHMARK(BM_BuildProgramsQwen3_8B)->Unit(benchmark::kMillisecond);

// Fill the source shards of one source GPU of small-moe-ep with the pattern: the host backend's
// per-byte work before any message (checking a destination costs the same hash per element).
void BM_FillHost(benchmark::State& state) {
  static Fixture f("small-moe-ep.yaml", "direct");
  const GpuProgram prog = build_program(f.rp, f.rp.gpus.front());
  detail::HostMemory mem;
  detail::allocate(prog, f.sc.inventory, mem);
  std::int64_t bytes = 0;
  for (auto _ : state) {
    detail::fill_sources(prog, f.sc.inventory, mem);
    for (std::size_t i = 0; i < prog.regions.size(); ++i)
      if (prog.regions[i].kind == Region::Kind::Source) bytes += prog.regions[i].bytes;
  }
  state.SetBytesProcessed(bytes);
}
BENCHMARK(BM_FillHost)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
