// execute(): backend dispatch and the parts every backend shares.
#include "backend_impl.hpp"

#ifdef RESHARD_HAVE_MPI
#include <mpi.h>
#endif

namespace reshard::exec {

namespace detail {

Measurement new_measurement(const RunPlan& plan, const ExecOptions& options, int world) {
  Measurement m;
  m.scenario_path = options.scenario_path;
  m.scenario_sets = options.scenario_sets;
  m.backend = options.backend;
  m.profile = options.profile;
  m.params_file = options.params_file;
  m.ranks = world;
  m.schedule = *plan.schedule;
  m.ops.assign(plan.schedule->ops.size(), OpTiming{});
  return m;
}

std::vector<model::GpuId> gpus_of_process(const RunPlan& plan, int rank, int world) {
  std::vector<model::GpuId> out;
  for (std::size_t i = 0; i < plan.gpus.size(); ++i)
    if (static_cast<int>(i % static_cast<std::size_t>(world)) == rank) out.push_back(plan.gpus[i]);
  return out;
}

}  // namespace detail

RunResult execute(const RunPlan& plan, const ExecOptions& options) {
  if (options.timeout_s <= 0) throw ExecError("--timeout must be positive", -1, -1);
  if (options.backend == "host") return detail::run_host(plan, options);
  if (options.backend == "cuda" || options.backend == "nccl")
    for (const auto& t : plan.scenario->inventory.tensors())
      if (t.quant.format != model::QuantFormat::None)
        throw ExecError("the " + options.backend + " backend does not convert precision (tensor '" + t.name +
                            "' is quantised, destination.precision); run this scenario on the host backend",
                        -1, -1);
  if (options.backend == "cuda") return detail::run_cuda(plan, options);
  if (options.backend == "nccl") return detail::run_nccl(plan, options);
  throw ExecError("unknown backend '" + options.backend + "' (host, cuda, nccl)", -1, -1);
}

void abandon_run(int code) noexcept {
#ifdef RESHARD_HAVE_MPI
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, code);
#else
  (void)code;
#endif
}

}  // namespace reshard::exec
