// The cuda backend: every GPU of the scenario a virtual rank in this process, on one device: each
// stream chunk a device-to-device cudaMemcpyAsync on the stream of the hop's sender, arrivals and
// free slots as events, the streams joined between steps. It runs the same streams as the host
// backend (exec/program.hpp): rings of Schedule::slots chunk slots, packed and unpacked chunk by
// chunk with kernels (kernels.cu), in one device arena laid out by steps (device_run.hpp).
#include "backend_impl.hpp"

#ifdef RESHARD_HAVE_CUDA
#include <map>

#include "device_run.hpp"
#endif

namespace reshard::exec {

#ifndef RESHARD_HAVE_CUDA
int cuda_device_count() noexcept { return 0; }
namespace detail {
RunResult run_cuda(const RunPlan&, const ExecOptions&) {
  throw ExecError("the cuda backend is not built: the CUDA toolkit was not found at configure time", -1, -1);
}
}  // namespace detail
#else

int cuda_device_count() noexcept {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
}

namespace detail {

using namespace reshard::model;

namespace {

// Per op of a cuda run: `start` (after the first chunk's pack), the events whose latest records end
// it (one per hop, recorded after each chunk it moves) and those that say it is done (after the
// last unpack at every receiver).
struct OpEvents {
  cudaEvent_t start = nullptr;
  std::vector<cudaEvent_t> end, done;
};

// One stream on the cuda backend, chunk by chunk: the sender packs chunk k into its slot (once its
// chunk k - S has left for every child), then every hop in order (a hop's `from` has chunk k
// before it sends it) copies it on the stream of the hop's sender, once the `to`'s slot of chunk
// k - S is free, and each receiver unpacks it on its own stream; a GPU's slot of chunk k is free
// once its stream has done those. Events: per hop its arrival, per GPU of the op S slot events.
// A GPU's work of one op runs on its own stream, in order, so ops on one chain run in order.
template <class StreamOf>
void enqueue_stream(DeviceRun& d, const Schedule& s, const Op& op, bool drop, std::int64_t flip_at, StreamOf stream_of,
                    EventPool& events, OpEvents& ev) {
  const auto roles = d.roles_of(op.id);
  const DeviceRun::Local& root = *roles.at(op.src);
  const std::vector<ChainHop> hops = stream_hops(s, op);
  std::map<GpuId, std::size_t> hop_into;
  for (std::size_t h = 0; h < hops.size(); ++h) {
    hop_into[hops[h].to] = h;
    ev.end.push_back(events.make());
  }
  const std::int64_t chunks = root.t->chunks();
  const std::int32_t slots = std::max(root.t->slots, 1);
  std::map<GpuId, std::vector<cudaEvent_t>> free_slot;  // per GPU with a ring: per slot, its latest release
  for (const auto& [g, l] : roles)
    if (!l->t->kept()) {
      auto& v = free_slot[g];
      for (std::int32_t k = 0; k < slots; ++k) v.push_back(events.make());
    }
  cudaStream_t rs = stream_of(op.src);
  for (std::int64_t k = 0; k < chunks; ++k) {
    const std::size_t slot = static_cast<std::size_t>(k % slots);
    if (k >= slots) cuda_check(cudaStreamWaitEvent(rs, free_slot.at(op.src)[slot], 0), "cudaStreamWaitEvent", 0);
    run_range(d, root.chunk_copies[static_cast<std::size_t>(k)], rs);
    if (k == 0) {
      ev.start = events.make();
      cuda_check(cudaEventRecord(ev.start, rs), "cudaEventRecord", 0);
    }
    const ChunkRange r = chain_chunk(op.bytes.value, root.t->chunk, k);
    for (std::size_t h = 0; h < hops.size(); ++h) {
      const ChainHop& hop = hops[h];
      cudaStream_t hs = stream_of(hop.from);
      const DeviceRun::Local& to = *roles.at(hop.to);
      if (hop.from != op.src) cuda_check(cudaStreamWaitEvent(hs, ev.end[hop_into.at(hop.from)], 0), "cudaStreamWaitEvent", 0);
      if (k >= slots && !to.t->kept()) cuda_check(cudaStreamWaitEvent(hs, free_slot.at(hop.to)[slot], 0), "cudaStreamWaitEvent", 0);
      if (r.bytes > 0 && !(drop && hop.from == op.src)) {  // drop: nothing leaves the root
        cuda_check(cudaMemcpyAsync(d.arena + d.slot(to, k), d.arena + d.slot(*roles.at(hop.from), k), static_cast<std::size_t>(r.bytes),
                                   cudaMemcpyDeviceToDevice, hs),
                   "cudaMemcpyAsync", 0);
        d.copied += r.bytes;
      }
      if (hop.to == op.dst && flip_at >= r.begin && flip_at < r.begin + r.bytes)  // before dst forwards it
        launch_flip(d.arena, d.offset_of(to) + to.t->slot_offset(flip_at), hs);
      cuda_check(cudaEventRecord(ev.end[h], hs), "cudaEventRecord", 0);
    }
    for (const ChainHop& hop : hops) {
      const DeviceRun::Local& to = *roles.at(hop.to);
      cudaStream_t ts = stream_of(hop.to);
      cuda_check(cudaStreamWaitEvent(ts, ev.end[hop_into.at(hop.to)], 0), "cudaStreamWaitEvent", 0);
      run_range(d, to.chunk_copies[static_cast<std::size_t>(k)], ts);
      if (!to.t->kept()) cuda_check(cudaEventRecord(free_slot.at(hop.to)[slot], ts), "cudaEventRecord", 0);
    }
    cuda_check(cudaEventRecord(free_slot.at(op.src)[slot], rs), "cudaEventRecord", 0);
  }
  if (chunks == 0) {
    ev.start = events.make();
    cuda_check(cudaEventRecord(ev.start, rs), "cudaEventRecord", 0);
    for (cudaEvent_t e : ev.end) cuda_check(cudaEventRecord(e, rs), "cudaEventRecord", 0);
  }
  for (const ChainHop& hop : hops) {
    ev.done.push_back(events.make());
    cuda_check(cudaEventRecord(ev.done.back(), stream_of(hop.to)), "cudaEventRecord", 0);
  }
}

// Every stream waits for all work enqueued so far on every stream.
void join_streams(const std::vector<cudaStream_t>& streams, EventPool& events) {
  std::vector<cudaEvent_t> now(streams.size());
  for (std::size_t k = 0; k < streams.size(); ++k) {
    now[k] = events.make();
    cuda_check(cudaEventRecord(now[k], streams[k]), "cudaEventRecord", 0);
  }
  for (auto& st : streams)
    for (cudaEvent_t e : now) cuda_check(cudaStreamWaitEvent(st, e, 0), "cudaStreamWaitEvent", 0);
}

}  // namespace

RunResult run_cuda(const RunPlan& plan, const ExecOptions& options) {
  if (cuda_device_count() == 0) throw ExecError("the cuda backend needs a GPU; the CUDA runtime sees none", 0, -1);
  for (const auto& f : options.faults)
    if (f.kind == Fault::Kind::Die || f.kind == Fault::Kind::Kill)
      throw ExecError("die:RANK and kill:RANK apply to the multi-process backends (host, nccl)", 0, -1);
  const Schedule& s = *plan.schedule;
  cuda_check(cudaSetDevice(0), "cudaSetDevice", 0);
  // One stream per GPU, at most 16: a GPU's work runs in order, different GPUs' overlap.
  const std::size_t n_streams = std::min<std::size_t>(16, std::max<std::size_t>(plan.gpus.size(), 1));
  std::vector<cudaStream_t> streams(n_streams);
  for (auto& st : streams) cuda_check(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "cudaStreamCreate", 0);
  DeviceRun d;
  prepare(d, plan, plan.gpus, streams[0], options);
  d.copied = 0;  // the local copies ran before the timed window
  // The timeout covers the operations (not the allocation and the fill before them).
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(options.timeout_s));
  EventPool events(0);
  auto stream_of = [&](GpuId g) { return streams[static_cast<std::size_t>(plan.gpu_index(g)) % n_streams]; };
  std::vector<OpEvents> ev(s.ops.size());
  cudaEvent_t t0 = events.make(), all_done = events.make();
  cuda_check(cudaEventRecord(t0, streams[0]), "cudaEventRecord", 0);
  for (auto& st : streams) cuda_check(cudaStreamWaitEvent(st, t0, 0), "cudaStreamWaitEvent", 0);
  // Step by step: a step's regions reuse the memory of the steps before, so the streams join between steps.
  std::vector<std::vector<std::int64_t>> step_ops(static_cast<std::size_t>(plan.steps));
  for (const Op& op : s.ops) step_ops[static_cast<std::size_t>(plan.step_of[static_cast<std::size_t>(op.id)])].push_back(op.id);
  for (const auto& ops : step_ops) {
    for (auto id : ops) {
      const Op& op = s.ops[static_cast<std::size_t>(id)];
      cudaStream_t st = stream_of(op.src);
      for (auto a : s.after_of(op))
        for (cudaEvent_t x : ev[static_cast<std::size_t>(a)].done) cuda_check(cudaStreamWaitEvent(st, x, 0), "cudaStreamWaitEvent", 0);
      std::int64_t flip_at = -1;
      if (has_fault(options.faults, Fault::Kind::Corrupt, op.id) && op.bytes.value > 0)
        for (const auto& l : d.receive_of.at(op.id))
          if (d.gpu_of(l) == op.dst) flip_at = corrupt_offset(options.faults, *l.t);
      enqueue_stream(d, s, op, has_fault(options.faults, Fault::Kind::Drop, op.id), flip_at, stream_of, events,
                     ev[static_cast<std::size_t>(id)]);
    }
    join_streams(streams, events);
  }
  cuda_check(cudaEventRecord(all_done, streams[0]), "cudaEventRecord", 0);
  cuda_check(cudaGetLastError(), "kernel launch", 0);
  if (!wait_event(all_done, deadline, 0))
    throw ExecError("the cuda backend did not finish within " + format(Seconds{options.timeout_s}), 0, -1);
  RunResult res;
  res.reporter = true;
  res.measurement = new_measurement(plan, options, 1);
  auto& m = res.measurement;
  for (std::size_t i = 0; i < s.ops.size(); ++i) {
    double last = -1;
    for (cudaEvent_t e : ev[i].end) last = std::max(last, seconds_between(t0, e));
    m.ops[i] = {ev[i].start ? seconds_between(t0, ev[i].start) : -1, last};
  }
  m.elapsed_s = seconds_between(t0, all_done);
  m.device_copy_bytes = d.copied;
  add_staging(m, d);
  if (options.verification == Verification::Pattern) {
    const std::string err = check(d, plan.scenario->inventory, m.bytes_verified, streams[0]);
    if (!err.empty()) throw ExecError("verification failed: " + err, 0, -1);
  } else if (options.verification == Verification::Digest) {
    std::vector<PieceDigest> digests;
    device_digests(d, plan, digests);
    const std::string err = compare_digests(std::move(digests), *plan.transfers, plan.scenario->inventory, m.bytes_verified);
    if (!err.empty()) throw ExecError("verification failed: " + err, 0, -1);
  }
  m.verified = options.verification != Verification::None;
  m.verification = options.verification;
  for (auto& st : streams) cudaStreamDestroy(st);
  return res;
}

}  // namespace detail
#endif  // RESHARD_HAVE_CUDA

}  // namespace reshard::exec
