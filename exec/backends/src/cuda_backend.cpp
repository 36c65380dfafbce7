// The cuda backend: every GPU of the scenario a virtual GPU in this process, on one device, in one
// arena (device_run.hpp). Its steps are compiled once into device copy lists (exec/step_lists.hpp:
// per stream role a lane of chunk tasks, the bounded rings' flow control in counters on the
// device) and a step is one launch of the walk kernel: a run makes a fixed number of host calls
// per step, whatever its chunks (Measurement::host_calls). A Refit's session keeps the device, the
// layout and the lists for its next runs while the caller's buffers stay the same.
#include "backend_impl.hpp"
#include "device_run.hpp"

namespace reshard::exec {

#ifndef RESHARD_HAVE_CUDA
int cuda_device_count() noexcept { return 0; }
#endif

namespace detail {

using namespace reshard::model;

namespace {

// The cuda backend's state across the runs of one Refit.
struct CudaSession : BackendSession {
  std::unique_ptr<Device> device;
  CudaRun run;
};

}  // namespace

std::shared_ptr<BackendSession> open_cuda_session() { return std::make_shared<CudaSession>(); }

void compile_cuda(CudaRun& c, Device& dev, const RunPlan& plan, const ExecOptions& options) {
  c.run.rank = 0;
  lay_out(c.run, dev, plan, plan.gpus, options);
  const StepLists lists = virtual_gpu_lists(plan, c.run.progs, c.run.at, options.faults);
  c.steps.clear();
  c.copy_bytes = 0;
  for (const list::List& l : lists.steps) {
    c.copy_bytes += l.bytes;
    c.steps.push_back(dev.add_list(l));
  }
  dev.add_counters(lists.counters, static_cast<std::int32_t>(plan.schedule->ops.size()));
  dev.commit();
  c.verification = options.verification;
  c.faults = !options.faults.empty();
  c.compiled = true;
}

RunResult run_cuda_on(Device& dev, CudaRun& c, const RunPlan& plan, const ExecOptions& options) {
  const Schedule& s = *plan.schedule;
  for (const auto& f : options.faults)
    if (f.kind == Fault::Kind::Die || f.kind == Fault::Kind::Kill)
      throw ExecError("die:RANK and kill:RANK apply to the multi-process backends (host, nccl)", 0, -1);
  if (!c.compiled || c.faults || !options.faults.empty() || c.verification != options.verification || !same_buffers(c.run, options))
    compile_cuda(c, dev, plan, options);
  start_run(c.run, dev, options);
  // The timeout covers the operations (not the layout and the fill before them).
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(options.timeout_s));
  dev.calls = {};
  dev.reset();
  const int t0 = dev.record();
  for (std::int32_t list : c.steps) {
    const std::int64_t before = dev.calls.total();
    dev.launch(list);
    dev.calls.per_step.push_back(dev.calls.total() - before);
  }
  const int done = dev.record();
  if (!dev.wait(done, deadline)) throw ExecError("the cuda backend did not finish within " + format(Seconds{options.timeout_s}), 0, -1);
  RunResult res;
  res.reporter = true;
  res.measurement = new_measurement(plan, options, 1);
  Measurement& m = res.measurement;
  m.elapsed_s = dev.seconds(t0, done);
  const auto times = dev.op_times(static_cast<std::int32_t>(s.ops.size()));
  for (std::size_t i = 0; i < s.ops.size(); ++i) m.ops[i] = {times[i].first, times[i].second};
  m.device_copy_bytes = c.copy_bytes;
  m.host_calls = dev.calls;
  add_staging(m, c.run);
  if (options.verification == Verification::Pattern) {
    const std::string err = check_pattern(c.run, dev, plan.scenario->inventory, m.bytes_verified);
    if (!err.empty()) throw ExecError("verification failed: " + err, 0, -1);
  } else if (options.verification == Verification::Digest) {
    std::vector<PieceDigest> digests;
    piece_digests(c.run, dev, digests);
    const std::string err = compare_digests(std::move(digests), *plan.transfers, plan.scenario->inventory, m.bytes_verified);
    if (!err.empty()) throw ExecError("verification failed: " + err, 0, -1);
  }
  m.verified = options.verification != Verification::None;
  m.verification = options.verification;
  return res;
}

#ifndef RESHARD_HAVE_CUDA
RunResult run_cuda(const RunPlan&, const ExecOptions&) {
  throw ExecError("the cuda backend is not built: the CUDA toolkit was not found at configure time", -1, -1);
}
#else
RunResult run_cuda(const RunPlan& plan, const ExecOptions& options) {
  if (cuda_device_count() == 0) throw ExecError("the cuda backend needs a GPU; the CUDA runtime sees none", 0, -1);
  auto* session = dynamic_cast<CudaSession*>(options.session.get());
  CudaSession local;
  CudaSession& st = session ? *session : local;
  if (!st.device) st.device = make_cuda_device(0, 0);
  return run_cuda_on(*st.device, st.run, plan, options);
}
#endif

}  // namespace detail
}  // namespace reshard::exec
