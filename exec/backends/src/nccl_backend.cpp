// The nccl backend: one process per GPU under mpirun (world size 1 without MPI); per step a grouped
// ncclSend/ncclRecv per wave of chunks (exec::step_waves), packed and unpacked with kernels in one
// device arena per process laid out by steps (device_run.hpp).
#include "backend_impl.hpp"

#if defined(RESHARD_HAVE_CUDA) && defined(RESHARD_HAVE_NCCL)
#include <chrono>
#include <csignal>
#include <map>

#include "device_run.hpp"
#include "nccl_api.hpp"
#include "outcome.hpp"
#endif
#if defined(RESHARD_HAVE_CUDA) && defined(RESHARD_HAVE_NCCL) && defined(RESHARD_HAVE_MPI)
#include <mpi.h>

#include "mpi_common.hpp"
#endif

namespace reshard::exec::detail {

#if !defined(RESHARD_HAVE_CUDA)
RunResult run_nccl(const RunPlan&, const ExecOptions&) {
  throw ExecError("the nccl backend is not built: CUDA and NCCL were not found at configure time", -1, -1);
}
#elif !defined(RESHARD_HAVE_NCCL)
RunResult run_nccl(const RunPlan&, const ExecOptions&) {
  throw ExecError("the nccl backend is not built: NCCL's header was not found at configure time", -1, -1);
}
#else

using namespace reshard::model;

namespace {

void nccl_check(ncclResult_t r, const char* what, int rank) {
  if (r != ncclSuccess) throw ExecError(std::string("NCCL: ") + what + ": " + nccl(rank).GetErrorString(r), rank, -1, true);
}

// The processes of an nccl run: an MPI launch (one process per GPU, the NCCL id broadcast over
// MPI), or, in a build without MPI, this process alone at world size 1 (the id made here).
#ifdef RESHARD_HAVE_MPI
using NcclWorld = MpiWorld;
NcclWorld start_world(const ExecOptions& options) { return mpi_start(options); }
void barrier(NcclWorld&) { MPI_Barrier(MPI_COMM_WORLD); }
void share_id(NcclWorld&, ncclUniqueId& id) { MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD); }
void end_world(NcclWorld& w) {
  if (w.initialized_here) MPI_Finalize();
}
RunResult finish(const RunPlan& plan, const ExecOptions& options, NcclWorld& w, LocalOutcome& out) {
  return mpi_finish(plan, options, w, out);
}
#else
struct NcclWorld {
  int rank = 0, world = 1;
};
NcclWorld start_world(const ExecOptions&) { return {}; }
void barrier(NcclWorld&) {}
void share_id(NcclWorld&, ncclUniqueId&) {}
void end_world(NcclWorld&) {}
void setup_done(NcclWorld&) {}
[[noreturn]] void go_silent(const NcclWorld& w, double) {
  throw ExecError("rank " + std::to_string(w.rank) + " went silent (injected fault), alone at world size 1", w.rank, -1, true);
}
RunResult finish(const RunPlan& plan, const ExecOptions& options, NcclWorld&, LocalOutcome& out) {
  return reporter_result(plan, options, 1, out, {out.error}, std::move(out.digests));
}
#endif

// Per step of an nccl run: the streams' hops and local roles, the events that time the ops.
struct StepMarks {
  struct StreamHere {
    std::vector<ChainHop> hops;
    std::map<GpuId, const DeviceRun::Local*> roles;  // local GPUs' roles
    std::int64_t flip_at = -1;                       // corrupt:OP: stream byte flipped at dst, dst local
  };
  std::vector<StreamHere> streams;                     // as StepWaves::streams
  std::map<std::int64_t, cudaEvent_t> before, after;  // waves whose start or end times an op
  std::vector<int> peers;  // the processes this one receives from in this step, for the timeout's message
};

// The run on this process: per step, its streams in waves (step_waves): one grouped send/receive
// each; chunk c of a stream crosses a hop of depth d in wave offset + c + d - 1. Every process of a
// stream computes the same waves and issues its sends and receives in (op, hop) order in each, so
// NCCL matches them pair by pair. The sender packs chunk c into its slot just before the wave it
// leaves in; a receiver unpacks it just after the wave it arrives in and forwards it in the next,
// so a ring of S >= 2 slots never overwrites a chunk still needed (program.hpp).
class NcclRun {
 public:
  NcclRun(const RunPlan& plan, const ExecOptions& options, NcclWorld& w, ncclComm_t comm, cudaStream_t stream)
      : plan_(plan), options_(options), w_(w), s_(*plan.schedule), comm_(comm), stream_(stream), events_(w.rank),
        timeout_(std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(options.timeout_s))) {}

  LocalOutcome run() {
    d_.rank = w_.rank;
    prepare(d_, plan_, gpus_of_process(plan_, w_.rank, w_.world), stream_, options_);
    // My streams per step, in op id order.
    std::vector<std::vector<std::int64_t>> step_ops(static_cast<std::size_t>(plan_.steps));
    for (const Op& op : s_.ops)
      if (d_.send_of.count(op.id) || d_.receive_of.count(op.id))
        step_ops[static_cast<std::size_t>(plan_.step_of[static_cast<std::size_t>(op.id)])].push_back(op.id);
    cudaEvent_t t0 = events_.make(), all_done = events_.make();
    barrier(w_);
    setup_done(w_);
    if (has_fault(options_.faults, Fault::Kind::Kill, w_.rank)) std::raise(SIGKILL);  // test-only: a rank killed before its sends
    if (has_fault(options_.faults, Fault::Kind::Die, w_.rank)) go_silent(w_, options_.timeout_s);  // test-only: a silent peer
    deadline_ = std::chrono::steady_clock::now() + timeout_;
    cuda_check(cudaEventRecord(t0, stream_), "cudaEventRecord", w_.rank);
    op_start_.assign(s_.ops.size(), nullptr);
    op_end_.assign(s_.ops.size(), {});
    for (std::size_t k = 0; k < step_ops.size(); ++k) run_step(k, step_ops[k]);
    cuda_check(cudaEventRecord(all_done, stream_), "cudaEventRecord", w_.rank);
    cuda_check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize", w_.rank);
    LocalOutcome out;
    out.start.assign(s_.ops.size(), -1);
    out.end.assign(s_.ops.size(), -1);
    for (std::size_t i = 0; i < s_.ops.size(); ++i) {
      if (op_start_[i]) out.start[i] = seconds_between(t0, op_start_[i]);
      for (cudaEvent_t e : op_end_[i]) out.end[i] = std::max(out.end[i], seconds_between(t0, e));
    }
    out.elapsed = seconds_between(t0, all_done);
    out.staging.assign(plan_.gpus.size(), -1);
    for (std::size_t p = 0; p < d_.progs.size(); ++p)
      out.staging[static_cast<std::size_t>(plan_.gpu_index(d_.progs[p].gpu))] = d_.staging[p];
    if (options_.verification == Verification::Pattern) out.error = check(d_, plan_.scenario->inventory, out.bytes_verified, stream_);
    else if (options_.verification == Verification::Digest) device_digests(d_, plan_, out.digests);
    return out;
  }

 private:
  bool is_local(GpuId g) const { return process_of(plan_, g, w_.world) == w_.rank; }
  int proc_of(GpuId g) const { return process_of(plan_, g, w_.world); }
  cudaEvent_t mark(std::map<std::int64_t, cudaEvent_t>& at, std::int64_t wave) {
    auto& e = at[wave];
    if (!e) e = events_.make();
    return e;
  }

  void run_step(std::size_t k, const std::vector<std::int64_t>& ops) {
    const StepWaves sw = step_waves(s_, ops);
    const StepMarks m = mark_step(sw);
    // At most a few hundred waves queued: a peer that never answers is found before the launch
    // queue fills (a full queue blocks the next launch, and the timeout with it).
    constexpr std::int64_t kCheckpoint = 128;
    std::vector<std::pair<cudaEvent_t, std::int64_t>> checkpoints;  // (event, waves before it)
    for (std::int64_t wave = 0; wave < sw.waves; ++wave) {
      enqueue_wave(sw, m, wave);
      if ((wave + 1) % kCheckpoint == 0 && wave + 1 < sw.waves) {
        checkpoints.emplace_back(events_.make(), wave + 1);
        cuda_check(cudaEventRecord(checkpoints.back().first, stream_), "cudaEventRecord", w_.rank);
        if (checkpoints.size() >= 3) {
          const auto& [e, done] = checkpoints[checkpoints.size() - 3];
          wait_or_abort(e, k, m.peers, " (before wave " + std::to_string(done) + " of " + std::to_string(sw.waves) + ")");
        }
      }
    }
    // Wait per step so a peer that never answers is named by the step it left unfinished.
    cudaEvent_t step_end = events_.make();
    cuda_check(cudaEventRecord(step_end, stream_), "cudaEventRecord", w_.rank);
    wait_or_abort(step_end, k, m.peers, "");
  }

  // The step's streams here: hops, local roles, flips, and the waves that time each op.
  StepMarks mark_step(const StepWaves& sw) {
    StepMarks m;
    for (const StreamWaves& w : sw.streams) {
      const Op& o = s_.ops[static_cast<std::size_t>(w.op)];
      StepMarks::StreamHere here{stream_hops(s_, o), d_.roles_of(w.op), -1};
      const std::int64_t last_chunk = std::max<std::int64_t>(w.chunks - 1, 0);
      if (auto it = d_.send_of.find(w.op); it != d_.send_of.end()) op_start_[static_cast<std::size_t>(w.op)] = mark(m.before, w.wave_of(0, 0));
      for (std::size_t h = 0; h < here.hops.size(); ++h) {
        if (!is_local(here.hops[h].to)) continue;
        op_end_[static_cast<std::size_t>(w.op)].push_back(mark(m.after, w.wave_of(h, last_chunk)));
        m.peers.push_back(proc_of(here.hops[h].from));
      }
      if (has_fault(options_.faults, Fault::Kind::Corrupt, w.op) && o.bytes.value > 0 && is_local(o.dst))
        here.flip_at = corrupt_offset(options_.faults, *here.roles.at(o.dst)->t);
      m.streams.push_back(std::move(here));
    }
    std::sort(m.peers.begin(), m.peers.end());
    m.peers.erase(std::unique(m.peers.begin(), m.peers.end()), m.peers.end());
    return m;
  }

  // One wave: the packs of the chunks that leave in it, one grouped send/receive, then the flips
  // and unpacks of the chunks that arrived in it.
  void enqueue_wave(const StepWaves& sw, const StepMarks& m, std::int64_t wave) {
    for (std::size_t q = 0; q < sw.streams.size(); ++q) {
      const StreamWaves& w = sw.streams[q];
      const Op& o = s_.ops[static_cast<std::size_t>(w.op)];
      const std::int64_t c = wave - w.offset;  // the chunk that leaves the sender in this wave
      if (c < 0 || c >= w.chunks || !is_local(o.src)) continue;
      run_range(d_, m.streams[q].roles.at(o.src)->chunk_copies[static_cast<std::size_t>(c)], stream_);
    }
    if (auto it = m.before.find(wave); it != m.before.end())
      cuda_check(cudaEventRecord(it->second, stream_), "cudaEventRecord", w_.rank);
    bool grouped = false;
    auto group = [&] {
      if (!grouped) nccl_check(nccl(w_.rank).GroupStart(), "ncclGroupStart", w_.rank);
      grouped = true;
    };
    for (std::size_t q = 0; q < sw.streams.size(); ++q) {
      const StreamWaves& w = sw.streams[q];
      const Op& o = s_.ops[static_cast<std::size_t>(w.op)];
      const bool drop = has_fault(options_.faults, Fault::Kind::Drop, w.op);
      const auto& here = m.streams[q];
      for (std::size_t h = 0; h < here.hops.size(); ++h) {
        const std::int64_t c = w.chunk_in(h, wave);
        if (c < 0) continue;
        const ChainHop& hop = here.hops[h];
        if (!is_local(hop.from) && !is_local(hop.to)) continue;
        const std::int64_t bytes = chain_chunk(o.bytes.value, here.roles.count(hop.from) ? here.roles.at(hop.from)->t->chunk
                                                                                         : here.roles.at(hop.to)->t->chunk, c).bytes;
        if (is_local(hop.from) && !(drop && hop.from == o.src)) {  // drop: nothing leaves the root
          group();
          nccl_check(nccl(w_.rank).Send(d_.arena + d_.slot(*here.roles.at(hop.from), c), static_cast<std::size_t>(bytes), ncclUint8,
                              proc_of(hop.to), comm_, stream_),
                     "ncclSend", w_.rank);
        }
        if (is_local(hop.to)) {
          group();
          nccl_check(nccl(w_.rank).Recv(d_.arena + d_.slot(*here.roles.at(hop.to), c), static_cast<std::size_t>(bytes), ncclUint8,
                              proc_of(hop.from), comm_, stream_),
                     "ncclRecv", w_.rank);
        }
      }
    }
    if (grouped) nccl_check(nccl(w_.rank).GroupEnd(), "ncclGroupEnd", w_.rank);
    if (auto it = m.after.find(wave); it != m.after.end())
      cuda_check(cudaEventRecord(it->second, stream_), "cudaEventRecord", w_.rank);
    for (std::size_t q = 0; q < sw.streams.size(); ++q) {
      const StreamWaves& w = sw.streams[q];
      const Op& o = s_.ops[static_cast<std::size_t>(w.op)];
      const auto& here = m.streams[q];
      for (std::size_t h = 0; h < here.hops.size(); ++h) {
        const std::int64_t c = w.chunk_in(h, wave);
        if (c < 0 || !is_local(here.hops[h].to)) continue;
        const DeviceRun::Local& to = *here.roles.at(here.hops[h].to);
        // corrupt:OP: flipped at dst in the wave its chunk arrives, before dst forwards or unpacks it.
        if (here.hops[h].to == o.dst && here.flip_at >= 0 && here.flip_at / to.t->chunk == c)
          launch_flip(d_.arena, d_.offset_of(to) + to.t->slot_offset(here.flip_at), stream_);
        run_range(d_, to.chunk_copies[static_cast<std::size_t>(c)], stream_);
      }
    }
  }

  // Waits for e; a wait past the deadline aborts the communicator and names the step's peers.
  void wait_or_abort(cudaEvent_t e, std::size_t step, const std::vector<int>& peers, const std::string& where) {
    if (wait_event(e, deadline_, w_.rank)) {
      deadline_ = std::chrono::steady_clock::now() + timeout_;  // the limit is on silence
      return;
    }
    std::string list;
    for (int p : peers) list += (list.empty() ? "" : ", ") + std::to_string(p);
    nccl(w_.rank).CommAbort(comm_);
    throw ExecError("rank " + std::to_string(w_.rank) + " waited in step " + std::to_string(step) + where +
                        " for rank(s) " + list + ": no answer within " + format(Seconds{options_.timeout_s}),
                    w_.rank, peers.empty() ? -1 : peers.front(), true);
  }

  const RunPlan& plan_;
  const ExecOptions& options_;
  NcclWorld& w_;
  const Schedule& s_;
  ncclComm_t comm_;
  cudaStream_t stream_;
  DeviceRun d_;
  EventPool events_;
  std::chrono::steady_clock::duration timeout_;
  std::chrono::steady_clock::time_point deadline_;
  // Per op: the events its start and end are read from (-1 time where none is local).
  std::vector<cudaEvent_t> op_start_;
  std::vector<std::vector<cudaEvent_t>> op_end_;
};

}  // namespace

RunResult run_nccl(const RunPlan& plan, const ExecOptions& options) {
  NcclWorld w = start_world(options);
  nccl(w.rank);  // the library, before anything else
  const int devices = cuda_device_count();
  if (devices == 0) throw ExecError("the nccl backend needs a GPU; the CUDA runtime sees none on rank " + std::to_string(w.rank), w.rank, -1, true);
  if (w.world > static_cast<int>(plan.gpus.size())) {
    end_world(w);
    if (w.rank != 0) return RunResult{false, w.rank, w.world, {}};
    throw too_many_processes(plan, w.world, w.rank);
  }
  cuda_check(cudaSetDevice(w.rank % devices), "cudaSetDevice", w.rank);
  cudaStream_t stream = nullptr;
  cuda_check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate", w.rank);
  ncclUniqueId id;
  if (w.rank == 0) nccl_check(nccl(w.rank).GetUniqueId(&id), "ncclGetUniqueId", w.rank);
  share_id(w, id);
  ncclComm_t comm = nullptr;
  nccl_check(nccl(w.rank).CommInitRank(&comm, w.world, id, w.rank), "ncclCommInitRank", w.rank);
  LocalOutcome out = NcclRun(plan, options, w, comm, stream).run();
  nccl(w.rank).CommDestroy(comm);
  cudaStreamDestroy(stream);
  return finish(plan, options, w, out);
}
#endif

}  // namespace reshard::exec::detail
