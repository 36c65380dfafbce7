// execute(): the backend table and the parts every backend shares.
#include "reshard/exec/backend.hpp"
#if defined(RESHARD_HAVE_NCCL) && defined(RESHARD_HAVE_CUDA)
#include "nccl_api.hpp"
#endif

#include "backend_impl.hpp"

#include <string>

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
  m.ops.assign(plan.schedule->ops.size(), MeasuredOpTiming{});
  return m;
}

std::vector<model::GpuId> gpus_of_process(const RunPlan& plan, int rank, int world) {
  std::vector<model::GpuId> out;
  for (std::size_t i = 0; i < plan.gpus.size(); ++i)
    if (static_cast<int>(i % static_cast<std::size_t>(world)) == rank) out.push_back(plan.gpus[i]);
  return out;
}

ExecError too_many_processes(const RunPlan& plan, int world, int rank) {
  const std::string gpus = std::to_string(plan.gpus.size());
  return ExecError("the schedule runs on " + gpus + " GPUs; start at most that many processes (mpirun -np " + gpus +
                       "), not " + std::to_string(world),
                   rank, -1);
}

}  // namespace detail

const std::vector<Backend>& backends() {
#ifdef RESHARD_HAVE_MPI
  constexpr bool kMpi = true;
#else
  constexpr bool kMpi = false;
#endif
#ifdef RESHARD_HAVE_CUDA
  constexpr bool kCuda = true;
#else
  constexpr bool kCuda = false;
#endif
#if defined(RESHARD_HAVE_NCCL) && defined(RESHARD_HAVE_CUDA)
  constexpr bool kNcclBackend = true;
#else
  constexpr bool kNcclBackend = false;
#endif
  //                               processes device precision staging digest binding
  static const std::vector<Backend> table = {
      {"host", kMpi, kMpi ? "MPI point-to-point between processes, host memory" : "needs MPI (Debian libopenmpi-dev) at configure time",
       {true, false, true, true, true, true}, detail::run_host, detail::open_host_session},
      {"cuda", kCuda, kCuda ? "virtual ranks on one GPU, device-to-device copies" : "needs the CUDA toolkit at configure time",
       {false, true, false, true, true, true}, detail::run_cuda, detail::open_cuda_session},
      {"nccl", kNcclBackend,
       kNcclBackend ? (kMpi ? "one process per GPU under mpirun, ncclSend/ncclRecv (libnccl.so.2 loaded at run time)"
                     : "one process at world size 1 (no MPI in this build), ncclSend/ncclRecv (libnccl.so.2 loaded at run time)")
             : "needs CUDA and NCCL's header at configure time",
       {kMpi, true, false, true, true, true}, detail::run_nccl, detail::open_nccl_session},
  };
  return table;
}

std::string nccl_library() {
#if defined(RESHARD_HAVE_NCCL) && defined(RESHARD_HAVE_CUDA)
  try {
    const detail::NcclApi& api = detail::nccl();
    int v = 0;
    if (api.GetVersion(&v) != ncclSuccess) return "ncclGetVersion failed (" + api.library + ")";
    // NCCL >= 2.9 encodes MAJOR * 10000 + MINOR * 100 + PATCH.
    return "NCCL " + std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100) + " (" +
           api.library + ")";
  } catch (const ExecError& e) {
    return e.what();
  }
#else
  return "not built: NCCL's header was not found at configure time";
#endif
}

const Backend& backend_named(const std::string& name) {
  std::string names;
  for (const Backend& t : backends()) {
    if (name == t.name) return t;
    names += std::string(names.empty() ? "" : ", ") + t.name;
  }
  throw ExecError("unknown backend '" + name + "' (" + names + ")", -1, -1);
}

RunResult execute(const RunPlan& plan, const ExecOptions& options) {
  if (options.timeout_s <= 0) throw ExecError("--timeout must be positive", -1, -1);
  const Backend& t = backend_named(options.backend);
  const std::string who = std::string("the ") + t.name + " backend";
  if (!t.available) throw ExecError(who + " is not built: it " + t.detail, -1, -1);
  if (!t.caps.precision_change)
    for (const auto& tensor : plan.scenario->inventory.tensors())
      if (tensor.quant.format != model::QuantFormat::None)
        throw ExecError(who + " does not convert precision (tensor '" + tensor.name +
                            "' is quantised, destination.precision); run this scenario on the host backend",
                        -1, -1);
  // MXFP4 payloads (two E2M1 values a byte) are not produced by the runners' quantiser, which
  // writes FP8: a weight quantised to MXFP4 at the source cannot run (at the destination it can).
  for (const auto& tensor : plan.scenario->inventory.tensors())
    if (tensor.quant.format == model::QuantFormat::Mxfp4 && tensor.quant.site == model::QuantSite::Source &&
        tensor.quant.scale_of < 0)
      throw ExecError(who + " does not quantise to MXFP4 (tensor '" + tensor.name +
                          "'); set destination.precision.quantize_at: destination to send BF16 and convert there",
                      -1, -1);
  if (options.verification == Verification::Digest && !t.caps.digest)
    throw ExecError(who + " verifies by the pattern only", -1, -1);
  if (options.binding && !options.binding->empty()) {
    if (!t.caps.binding) throw ExecError(who + " allocates its own memory; it takes no caller buffers (MemoryBinding)", -1, -1);
    const MemoryKind want = t.caps.device_memory ? MemoryKind::Device : MemoryKind::Host;
    for (const ShardBinding& b : options.binding->all())
      if (b.memory != want)
        throw ExecError(who + " moves " + (want == MemoryKind::Device ? "device" : "host") + " memory; the binding of GPU " +
                            std::to_string(b.gpu) + "'s shard of tensor " + std::to_string(b.tensor) + " is " +
                            (b.memory == MemoryKind::Device ? "device" : "host") + " memory",
                        -1, -1);
  }
  return t.run(plan, options);
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
