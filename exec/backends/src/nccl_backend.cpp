// The nccl backend: one process per GPU under mpirun (world size 1 without MPI), its GPUs in one
// arena (device_run.hpp). Its steps are compiled once into waves (exec/step_lists.hpp): a stream
// moves in windows of W chunks (W = S for a plain transfer, floor(S / 2) for a chain op), and each
// wave is a pack list, one ncclGroupStart ... ncclGroupEnd with one ncclSend or ncclRecv per window
// and hop end here, and an unpack list. The communicator is made once per session (a Refit's, or
// the run's own) and kept for its next runs; a peer that does not answer within the timeout aborts
// it (ncclCommAbort) and the error names this rank and the step's peers.
#include "backend_impl.hpp"
#include "device_run.hpp"

#if defined(RESHARD_HAVE_NCCL)
#include <csignal>

#include "nccl_run.hpp"
#endif
#if defined(RESHARD_HAVE_NCCL) && defined(RESHARD_HAVE_MPI)
#include <mpi.h>

#include "mpi_common.hpp"
#endif

namespace reshard::exec::detail {

#if !defined(RESHARD_HAVE_NCCL)
RunResult run_nccl(const RunPlan&, const ExecOptions&) {
  throw ExecError("the nccl backend is not built: CUDA and NCCL's header were not found at configure time", -1, -1);
}
std::shared_ptr<BackendSession> open_nccl_session() { return nullptr; }
#else

using namespace reshard::model;

NcclSession::~NcclSession() {
  if (comm && api) api->CommDestroy(comm);
}

RunResult NcclWorld::finish(const RunPlan& plan, const ExecOptions& options, LocalOutcome& out) {
  return reporter_result(plan, options, 1, out, {out.error}, std::move(out.digests));
}

void NcclWorld::go_silent(double) {
  throw ExecError("rank " + std::to_string(rank) + " went silent (injected fault), alone at world size 1", rank, -1, true);
}

namespace {

// The run on this process (one of its sessions' runs): each step's waves as compiled, the NCCL
// calls counted with the device's.
class NcclRunner {
 public:
  NcclRunner(Device& dev, NcclSession& session, NcclWorld& w, const RunPlan& plan, const ExecOptions& options)
      : dev_(dev), api_(*session.api), session_(session), w_(w), plan_(plan), options_(options), s_(*plan.schedule),
        timeout_(std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(options.timeout_s))) {}

  LocalOutcome run() {
    NcclRun& c = session_.run;
    start_run(c.run, dev_, options_);
    w_.barrier();
    w_.setup_done();
    if (has_fault(options_.faults, Fault::Kind::Kill, w_.rank)) std::raise(SIGKILL);  // test-only: a rank killed before its sends
    if (has_fault(options_.faults, Fault::Kind::Die, w_.rank)) w_.go_silent(options_.timeout_s);  // test-only: a silent peer
    deadline_ = std::chrono::steady_clock::now() + timeout_;
    dev_.calls = {};
    const int t0 = dev_.record();
    starts_.assign(s_.ops.size(), -1);
    ends_.assign(s_.ops.size(), {});
    for (std::size_t k = 0; k < c.steps.size(); ++k) {
      const std::int64_t before = dev_.calls.total();
      run_step(k);
      dev_.calls.per_step.push_back(dev_.calls.total() - before);
    }
    const int all_done = dev_.record();
    if (!dev_.wait(all_done, deadline_)) abort_comm(c.steps.size() - 1, {}, " (at its end)");
    LocalOutcome out;
    out.start.assign(s_.ops.size(), -1);
    out.end.assign(s_.ops.size(), -1);
    for (std::size_t i = 0; i < s_.ops.size(); ++i) {
      if (starts_[i] >= 0) out.start[i] = dev_.seconds(t0, starts_[i]);
      for (int e : ends_[i]) out.end[i] = std::max(out.end[i], dev_.seconds(t0, e));
    }
    out.elapsed = dev_.seconds(t0, all_done);
    out.host_calls = dev_.calls;
    out.staging.assign(plan_.gpus.size(), -1);
    for (std::size_t p = 0; p < c.run.progs.size(); ++p)
      out.staging[static_cast<std::size_t>(plan_.gpu_index(c.run.progs[p].gpu))] = c.run.staging[p];
    if (options_.verification == Verification::Pattern) out.error = check_pattern(c.run, dev_, plan_.scenario->inventory, out.bytes_verified);
    else if (options_.verification == Verification::Digest) piece_digests(c.run, dev_, out.digests);
    return out;
  }

 private:
  void call(ncclResult_t r, const char* what) {
    ++dev_.calls.nccl;
    if (r != ncclSuccess) throw ExecError(std::string("NCCL: ") + what + ": " + api_.GetErrorString(r), w_.rank, -1, true);
  }

  // The step's waves; every 128 waves an event, and a wait for the one two before it, so a peer that
  // never answers is found before the launch queue fills (a full queue blocks the next launch, and
  // the timeout with it); a wait for the step's end, so it is named by the step it left unfinished.
  void run_step(std::size_t k) {
    const NcclRun& c = session_.run;
    const NcclStep& step = c.steps[k];
    constexpr std::size_t kCheckpoint = 128;
    std::vector<std::pair<int, std::size_t>> checkpoints;  // (event, waves before it)
    for (std::size_t x = 0; x < step.waves.size(); ++x) {
      const NcclWave& wave = step.waves[x];
      const auto [pack, unpack] = c.lists[k][x];
      if (pack >= 0) dev_.launch(pack);
      if (!wave.starts.empty()) {
        const int e = dev_.record();
        for (auto op : wave.starts) starts_[static_cast<std::size_t>(op)] = e;
      }
      if (!wave.calls.empty()) {
        call(api_.GroupStart(), "ncclGroupStart");
        for (const P2p& p : wave.calls) {
          void* at = c.run.arena + p.offset;
          const auto stream = static_cast<cudaStream_t>(dev_.stream());
          if (p.send) call(api_.Send(at, static_cast<std::size_t>(p.bytes), ncclUint8, p.peer, session_.comm, stream), "ncclSend");
          else call(api_.Recv(at, static_cast<std::size_t>(p.bytes), ncclUint8, p.peer, session_.comm, stream), "ncclRecv");
        }
        call(api_.GroupEnd(), "ncclGroupEnd");
      }
      if (!wave.ends.empty()) {
        const int e = dev_.record();
        for (auto op : wave.ends) ends_[static_cast<std::size_t>(op)].push_back(e);
      }
      if (unpack >= 0) dev_.launch(unpack);
      if ((x + 1) % kCheckpoint == 0 && x + 1 < step.waves.size()) {
        checkpoints.emplace_back(dev_.record(), x + 1);
        if (checkpoints.size() >= 3) {
          const auto& [e, done] = checkpoints[checkpoints.size() - 3];
          if (!wait(e)) abort_comm(k, step.peers, " (before wave " + std::to_string(done) + " of " + std::to_string(step.waves.size()) + ")");
        }
      }
    }
    if (!wait(dev_.record())) abort_comm(k, step.peers, "");
  }

  bool wait(int e) {
    if (!dev_.wait(e, deadline_)) return false;
    deadline_ = std::chrono::steady_clock::now() + timeout_;  // the limit is on silence
    return true;
  }

  [[noreturn]] void abort_comm(std::size_t step, const std::vector<std::int32_t>& peers, const std::string& where) {
    std::string list;
    for (int p : peers) list += (list.empty() ? "" : ", ") + std::to_string(p);
    ++dev_.calls.nccl;
    api_.CommAbort(session_.comm);
    session_.comm = nullptr;  // aborted: the next run makes a new one
    throw ExecError("rank " + std::to_string(w_.rank) + " waited in step " + std::to_string(step) + where + " for rank(s) " +
                        (list.empty() ? "?" : list) + ": no answer within " + format(Seconds{options_.timeout_s}),
                    w_.rank, peers.empty() ? -1 : peers.front(), true);
  }

  Device& dev_;
  const NcclApi& api_;
  NcclSession& session_;
  NcclWorld& w_;
  const RunPlan& plan_;
  const ExecOptions& options_;
  const Schedule& s_;
  std::chrono::steady_clock::duration timeout_;
  std::chrono::steady_clock::time_point deadline_;
  std::vector<int> starts_;             // per op: the event its start is read from (-1: not here)
  std::vector<std::vector<int>> ends_;  // per op: the events whose latest is its end
};

}  // namespace

void compile_nccl(NcclRun& c, Device& dev, const RunPlan& plan, const ExecOptions& options, int rank, int world) {
  c.run.rank = rank;
  lay_out(c.run, dev, plan, gpus_of_process(plan, rank, world), options);
  c.steps = nccl_steps(plan, c.run.progs, c.run.at, options.faults, rank, world);
  c.lists.clear();
  for (NcclStep& step : c.steps) {
    auto& ids = c.lists.emplace_back();
    for (NcclWave& wave : step.waves) {
      const std::int32_t pack = wave.pack.tasks.empty() ? -1 : dev.add_list(std::move(wave.pack));
      const std::int32_t unpack = wave.unpack.tasks.empty() ? -1 : dev.add_list(std::move(wave.unpack));
      wave.pack = {};
      wave.unpack = {};
      ids.emplace_back(pack, unpack);
    }
  }
  dev.commit();
  c.verification = options.verification;
  c.faults = !options.faults.empty();
  c.world = world;
  c.compiled = true;
}

RunResult run_nccl_on(Device& dev, NcclSession& session, NcclWorld& w, const RunPlan& plan, const ExecOptions& options) {
  if (w.world > static_cast<int>(plan.gpus.size())) throw too_many_processes(plan, w.world, w.rank);
  if (!session.comm) {
    ncclUniqueId id{};
    if (w.rank == 0 && session.api->GetUniqueId(&id) != ncclSuccess)
      throw ExecError("NCCL: ncclGetUniqueId failed", w.rank, -1, true);
    w.share_id(id);
    if (const ncclResult_t r = session.api->CommInitRank(&session.comm, w.world, id, w.rank); r != ncclSuccess) {
      session.comm = nullptr;
      throw ExecError(std::string("NCCL: ncclCommInitRank: ") + session.api->GetErrorString(r), w.rank, -1, true);
    }
    ++session.communicators;
  }
  NcclRun& c = session.run;
  if (!c.compiled || c.faults || !options.faults.empty() || c.verification != options.verification || c.world != w.world ||
      !same_buffers(c.run, options))
    compile_nccl(c, dev, plan, options, w.rank, w.world);
  LocalOutcome out = NcclRunner(dev, session, w, plan, options).run();
  return w.finish(plan, options, out);
}

namespace {

#ifdef RESHARD_HAVE_MPI
// An MPI launch: one process per GPU, the NCCL id broadcast over MPI.
struct MpiNcclWorld : NcclWorld {
  MpiWorld mpi;
  explicit MpiNcclWorld(const ExecOptions& options) : mpi(mpi_start(options)) {
    rank = mpi.rank;
    world = mpi.world;
  }
  void barrier() override { MPI_Barrier(MPI_COMM_WORLD); }
  void share_id(ncclUniqueId& id) override { MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD); }
  void setup_done() override { detail::setup_done(mpi); }
  [[noreturn]] void go_silent(double timeout_s) override { detail::go_silent(mpi, timeout_s); }
  RunResult finish(const RunPlan& plan, const ExecOptions& options, LocalOutcome& out) override {
    return mpi_finish(plan, options, mpi, out);
  }
};

#endif

}  // namespace

std::shared_ptr<BackendSession> open_nccl_session() {
  auto s = std::make_shared<NcclSession>();
#ifdef RESHARD_HAVE_MPI
  s->hold = std::make_shared<MpiHold>();
#endif
  return s;
}

RunResult run_nccl(const RunPlan& plan, const ExecOptions& options) {
#ifdef RESHARD_HAVE_MPI
  MpiNcclWorld w(options);
#else
  NcclWorld w;
#endif
  auto* given = dynamic_cast<NcclSession*>(options.session.get());
  NcclSession local;
  NcclSession& session = given ? *given : local;
  if (!session.api) session.api = &nccl(w.rank);  // the library, before anything else
  if (cuda_device_count() == 0)
    throw ExecError("the nccl backend needs a GPU; the CUDA runtime sees none on rank " + std::to_string(w.rank), w.rank, -1, true);
  if (w.world > static_cast<int>(plan.gpus.size())) {
#ifdef RESHARD_HAVE_MPI
    if (w.mpi.initialized_here) MPI_Finalize();
#endif
    if (w.rank != 0) return RunResult{false, w.rank, w.world, {}};
    throw too_many_processes(plan, w.world, w.rank);
  }
  if (!session.device) session.device = make_cuda_device(w.rank % cuda_device_count(), w.rank);
  return run_nccl_on(*session.device, session, w, plan, options);
}
#endif  // RESHARD_HAVE_NCCL

}  // namespace reshard::exec::detail
