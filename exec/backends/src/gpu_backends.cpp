// The GPU backends: `cuda` (every GPU of the scenario a virtual rank in this process, on one
// device: each stream chunk a device-to-device cudaMemcpyAsync on the stream of the hop's sender,
// arrivals and free slots as events, the streams joined between steps) and `nccl` (one process per
// GPU under mpirun; per step a grouped ncclSend/ncclRecv per wave of chunks). Both run the same
// streams as the host backend (exec/program.hpp): rings of Schedule::slots chunk slots, packed and
// unpacked chunk by chunk with kernels (kernels.cu), in one device arena per process laid out by
// steps (staging.hpp), so a GPU holds what model/memory.hpp predicts and at most its budget.
#include "backend_impl.hpp"

#ifdef RESHARD_HAVE_CUDA
#include <cuda_runtime_api.h>

#include <chrono>
#include <climits>
#include <csignal>
#include <map>
#include <thread>

#include "host_memory.hpp"
#include "kernels.hpp"
#include "reshard/exec/staging.hpp"
#endif
#if defined(RESHARD_HAVE_NCCL)
#include "nccl_api.hpp"
#include "outcome.hpp"
#endif
#if defined(RESHARD_HAVE_NCCL) && defined(RESHARD_HAVE_MPI)
#include <mpi.h>

#include "mpi_common.hpp"
#endif

namespace reshard::exec {

#ifndef RESHARD_HAVE_CUDA
int cuda_device_count() noexcept { return 0; }
namespace detail {
RunResult run_cuda(const RunPlan&, const ExecOptions&) {
  throw ExecError("the cuda backend is not built: the CUDA toolkit was not found at configure time", -1, -1);
}
RunResult run_nccl(const RunPlan&, const ExecOptions&) {
  throw ExecError("the nccl backend is not built: CUDA and NCCL were not found at configure time", -1, -1);
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

void cuda_check(cudaError_t e, const char* what, int rank) {
  if (e != cudaSuccess) throw ExecError(std::string("CUDA: ") + what + ": " + cudaGetErrorString(e), rank, -1, true);
}

template <class T>
T* to_device(const std::vector<T>& v, int rank) {
  T* p = nullptr;
  if (v.empty()) return nullptr;
  cuda_check(cudaMalloc(reinterpret_cast<void**>(&p), v.size() * sizeof(T)), "cudaMalloc", rank);
  cuda_check(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy", rank);
  // A pageable upload may return before its last bytes land, on the legacy stream, which the
  // non-blocking work streams never wait for: wait here.
  cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize after an upload", rank);
  return p;
}

// One process's programs laid out in one device arena.
struct DeviceRun {
  int rank = 0;
  std::vector<GpuProgram> progs;
  std::vector<std::vector<std::int64_t>> offset;  // per program, per region: byte offset in the arena
  std::int64_t bytes = 0;
  unsigned char* arena = nullptr;
  std::vector<DeviceShard> sources, destinations;
  std::vector<std::pair<std::size_t, std::int32_t>> destination_region;  // (program, region)
  std::vector<ShardWork> fill_work, check_work;
  std::vector<DeviceCopy> copies;  // local copies first, then each stream role's packs or unpacks, chunk by chunk
  std::int64_t local_copies = 0;
  std::int64_t copied = 0;  // bytes the run's copies moved so far (Measurement::device_copy_bytes)
  std::vector<std::int64_t> staging;  // per program: the staging bytes its regions take at most in one step
  // One stream role of a local GPU: its program, its transfer, per chunk its pack or unpack in `copies`.
  struct Local {
    std::size_t prog = 0;
    const OpStream* t = nullptr;
    std::vector<std::pair<std::int64_t, std::int64_t>> chunk_copies;  // per chunk: [first, count)
  };
  std::map<std::int64_t, Local> send_of;                  // op -> its sender here (plain sender or chain root)
  std::map<std::int64_t, std::vector<Local>> receive_of;  // op -> its receivers here (a chain op: every GPU of the tree)
  DeviceShard* d_sources = nullptr;
  DeviceShard* d_destinations = nullptr;
  ShardWork* d_fill = nullptr;
  ShardWork* d_check = nullptr;
  DeviceCopy* d_copies = nullptr;
  unsigned long long* d_first_bad = nullptr;

  ~DeviceRun() {
    for (void* p : {static_cast<void*>(arena), static_cast<void*>(d_sources), static_cast<void*>(d_destinations),
                    static_cast<void*>(d_fill), static_cast<void*>(d_check), static_cast<void*>(d_copies),
                    static_cast<void*>(d_first_bad)})
      if (p) cudaFree(p);
  }

  std::int64_t at(std::size_t prog, std::int32_t region) const { return offset[prog][static_cast<std::size_t>(region)]; }
  std::int64_t offset_of(const Local& l) const { return at(l.prog, l.t->region); }
  model::GpuId gpu_of(const Local& l) const { return progs[l.prog].gpu; }
  // Arena offset of chunk k's slot in a role's region.
  std::int64_t slot(const Local& l, std::int64_t k) const { return offset_of(l) + l.t->slot_offset(k * l.t->chunk); }
  // Each local GPU's role in op `op` (the sender's and the receivers').
  std::map<model::GpuId, const Local*> roles_of(std::int64_t op) const {
    std::map<model::GpuId, const Local*> out;
    if (auto it = send_of.find(op); it != send_of.end()) out[gpu_of(it->second)] = &it->second;
    if (auto it = receive_of.find(op); it != receive_of.end())
      for (const Local& l : it->second) out[gpu_of(l)] = &l;
    return out;
  }
};

// The hops of op's stream: its chain's, or a plain transfer's one hop.
std::vector<ChainHop> stream_hops(const Schedule& s, const Op& op) {
  if (op.chain >= 0) return s.chains[static_cast<std::size_t>(op.chain)].hops;
  return {ChainHop{op.src, op.dst, -1}};
}

constexpr std::int64_t kWorkElements = 1 << 16;  // elements per thread block in fill/check
constexpr std::int64_t kCopyChunk = 64 << 10;    // bytes per thread block in copies (a 512 KiB chunk spreads over 8 SMs)

void add_copies(DeviceRun& d, std::size_t prog, const std::vector<CopyRun>& runs) {
  for (const CopyRun& c : runs)
    for (std::int64_t done = 0; done < c.bytes; done += kCopyChunk)
      d.copies.push_back({d.at(prog, c.src) + c.src_offset + done, d.at(prog, c.dst) + c.dst_offset + done,
                          std::min(kCopyChunk, c.bytes - done)});
}

DeviceShard device_shard(const Region& r, const Inventory& inv, std::int64_t offset, int rank) {
  const TensorInfo& t = inv.tensor(r.tensor);
  if (r.box.dims.size() > static_cast<std::size_t>(kMaxDims))
    throw ExecError("tensor '" + t.name + "' has more than 8 dimensions", rank, -1, true);
  DeviceShard s;
  s.offset = offset;
  s.elements = r.box.elements();
  s.tensor = r.tensor;
  s.element_size = static_cast<std::int32_t>(dtype_size(t.dtype));
  s.dims = static_cast<std::int32_t>(r.box.dims.size());
  for (std::size_t i = 0; i < r.box.dims.size(); ++i) {
    s.lo[i] = r.box.dims[i].lo;
    s.extent[i] = r.box.dims[i].size();
    s.shape[i] = t.shape[i];
  }
  return s;
}

void add_work(std::vector<ShardWork>& work, std::int32_t shard, std::int64_t elements) {
  for (std::int64_t b = 0; b < elements; b += kWorkElements) work.push_back({shard, b, std::min(kWorkElements, elements - b)});
}

// Each chunk's copy runs of a stream role (for_each_chunk_copy), as device copies.
DeviceRun::Local chunked(DeviceRun& d, std::size_t prog, const OpStream& t, bool send) {
  DeviceRun::Local l{prog, &t, {}};
  for (std::int64_t k = 0; k < t.chunks(); ++k) {
    const auto first = static_cast<std::int64_t>(d.copies.size());
    for_each_chunk_copy(t, send, k, [&](const CopyRun& c) { add_copies(d, prog, {c}); });
    l.chunk_copies.emplace_back(first, static_cast<std::int64_t>(d.copies.size()) - first);
  }
  return l;
}

// Queues copies [first, first + count) of d.copies on `stream`, counting their bytes.
void run_range(DeviceRun& d, const std::pair<std::int64_t, std::int64_t>& range, cudaStream_t stream) {
  if (range.second <= 0) return;
  launch_copies(d.arena, d.d_copies + range.first, range.second, stream);
  for (std::int64_t i = range.first; i < range.first + range.second; ++i) d.copied += d.copies[static_cast<std::size_t>(i)].bytes;
}

// Lays out and uploads the programs of `gpus`; fills the sources (pattern verification) and makes
// the local copies. Shards first -- in the arena, or the caller's device buffers (ExecOptions::
// binding), addressed by their distance from the arena -- then the staging regions laid out by
// steps (staging.hpp).
void prepare(DeviceRun& d, const RunPlan& plan, const std::vector<GpuId>& gpus, cudaStream_t stream, const ExecOptions& options) {
  const Inventory& inv = plan.scenario->inventory;
  for (GpuId g : gpus) d.progs.push_back(build_program(plan, g));
  std::vector<std::vector<const ShardBinding*>> bound(d.progs.size());
  for (std::size_t p = 0; p < d.progs.size(); ++p) {
    d.offset.emplace_back(d.progs[p].regions.size(), 0);
    bound[p].assign(d.progs[p].regions.size(), nullptr);
    for (std::size_t i = 0; i < d.progs[p].regions.size(); ++i) {
      const Region& r = d.progs[p].regions[i];
      if (r.kind != Region::Kind::Source && r.kind != Region::Kind::Destination) continue;
      const ShardBinding* b = options.binding ? options.binding->find(d.progs[p].gpu, r.kind == Region::Kind::Source ? Side::Source : Side::Destination,
                                                                       r.tensor, r.box)
                                              : nullptr;
      if (b) {
        const std::string what = "the binding of GPU " + std::to_string(d.progs[p].gpu) + "'s " +
                                 (r.kind == Region::Kind::Source ? "source" : "destination") + " shard of '" +
                                 inv.tensor(r.tensor).name + "' " + to_string(r.box);
        if (b->memory != MemoryKind::Device) throw ExecError(what + " is host memory; the GPU backends take device memory", d.rank, -1, true);
        if (b->bytes < r.bytes || !b->data)
          throw ExecError(what + " holds " + std::to_string(b->bytes) + " bytes; the shard has " + std::to_string(r.bytes), d.rank, -1, true);
        bound[p][i] = b;
        continue;
      }
      d.offset[p][i] = d.bytes;
      d.bytes += (r.bytes + 255) / 256 * 256;
    }
  }
  std::vector<std::vector<std::int64_t>> request_of;
  const std::vector<StagingRequest> requests = staging_requests(plan, d.progs, request_of);
  d.staging = staging_per_program(requests, request_of);
  std::size_t free_bytes = 0, total_bytes = 0;
  cuda_check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo", d.rank);
  // Room for the copy and work lists, and NCCL's own buffers.
  const auto reserve = static_cast<std::int64_t>(free_bytes / 32) + (std::int64_t{1} << 30);
  const StagingPlan staging = plan_staging(requests, static_cast<std::int64_t>(free_bytes) - d.bytes - reserve, true);
  for (std::size_t p = 0; p < d.progs.size(); ++p)
    for (std::size_t i = 0; i < d.progs[p].regions.size(); ++i)
      if (const std::int64_t q = request_of[p][i]; q >= 0) d.offset[p][i] = d.bytes + staging.offset[static_cast<std::size_t>(q)];
  d.bytes += staging.bytes;
  if (static_cast<std::size_t>(d.bytes) > free_bytes)
    throw ExecError("the run needs " + format(Bytes{d.bytes}) + " of GPU memory, " + format(Bytes{static_cast<std::int64_t>(free_bytes)}) +
                        " are free",
                    d.rank, -1, true);
  cuda_check(cudaMalloc(reinterpret_cast<void**>(&d.arena), static_cast<std::size_t>(std::max<std::int64_t>(d.bytes, 256))),
             "cudaMalloc arena", d.rank);
  cuda_check(cudaMemsetAsync(d.arena, 0, static_cast<std::size_t>(std::max<std::int64_t>(d.bytes, 256)), stream), "cudaMemset", d.rank);
  // A bound shard is addressed from the arena's start like the others: by its distance from it
  // (the kernels take arena + offset, in one flat device address space).
  for (std::size_t p = 0; p < d.progs.size(); ++p)
    for (std::size_t i = 0; i < bound[p].size(); ++i)
      if (bound[p][i])
        d.offset[p][i] = static_cast<std::int64_t>(reinterpret_cast<std::intptr_t>(bound[p][i]->data) -
                                                   reinterpret_cast<std::intptr_t>(d.arena));
  for (std::size_t p = 0; p < d.progs.size(); ++p) {
    const GpuProgram& prog = d.progs[p];
    for (std::size_t i = 0; i < prog.regions.size(); ++i) {
      const Region& r = prog.regions[i];
      if (r.kind == Region::Kind::Source) {
        if (options.verification == Verification::Pattern)
          add_work(d.fill_work, static_cast<std::int32_t>(d.sources.size()), r.box.elements());
        d.sources.push_back(device_shard(r, inv, d.at(p, static_cast<std::int32_t>(i)), d.rank));
      } else if (r.kind == Region::Kind::Destination) {
        if (options.verification == Verification::Pattern)
          add_work(d.check_work, static_cast<std::int32_t>(d.destinations.size()), r.box.elements());
        d.destinations.push_back(device_shard(r, inv, d.at(p, static_cast<std::int32_t>(i)), d.rank));
        d.destination_region.emplace_back(p, static_cast<std::int32_t>(i));
      }
    }
    add_copies(d, p, prog.local);
  }
  d.local_copies = static_cast<std::int64_t>(d.copies.size());
  for (std::size_t p = 0; p < d.progs.size(); ++p) {
    for (const OpStream& t : d.progs[p].sends) d.send_of[t.op] = chunked(d, p, t, true);
    for (const OpStream& t : d.progs[p].receives) d.receive_of[t.op].push_back(chunked(d, p, t, false));
  }
  d.d_sources = to_device(d.sources, d.rank);
  d.d_destinations = to_device(d.destinations, d.rank);
  d.d_fill = to_device(d.fill_work, d.rank);
  d.d_check = to_device(d.check_work, d.rank);
  d.d_copies = to_device(d.copies, d.rank);
  if (!d.fill_work.empty())
    launch_fill(d.arena, d.d_sources, d.d_fill, static_cast<std::int64_t>(d.fill_work.size()), stream);
  run_range(d, {0, d.local_copies}, stream);
  cuda_check(cudaGetLastError(), "fill kernel", d.rank);
  cuda_check(cudaStreamSynchronize(stream), "fill", d.rank);
}

// Digest verification (exec/verify.hpp): every piece this process's GPUs hold or need, digested on
// the host from a copy of its shard.
void device_digests(const DeviceRun& d, const RunPlan& plan, std::vector<PieceDigest>& out) {
  const Inventory& inv = plan.scenario->inventory;
  for (std::size_t p = 0; p < d.progs.size(); ++p) {
    const GpuProgram& prog = d.progs[p];
    std::map<std::int32_t, std::vector<unsigned char>> host;  // region -> its bytes
    for (int side = 0; side < 2; ++side)
      for (const auto& [piece, region] : side == 0 ? prog.source_pieces : prog.destination_pieces) {
        const Region& r = prog.regions[static_cast<std::size_t>(region)];
        auto [it, fresh] = host.try_emplace(region);
        if (fresh) {
          it->second.resize(static_cast<std::size_t>(r.bytes));
          cuda_check(cudaMemcpy(it->second.data(), d.arena + d.at(p, region), it->second.size(), cudaMemcpyDeviceToHost),
                     "cudaMemcpy (digest)", d.rank);
        }
        const Piece& pc = plan.transfers->pieces[static_cast<std::size_t>(piece)];
        out.push_back({piece, prog.gpu, side,
                       piece_digest(pc.box, r.box, static_cast<int>(dtype_size(inv.tensor(pc.tensor).dtype)), it->second.data())});
      }
  }
}

// Checks every destination shard on the device; returns "" or the first wrong element.
std::string check(DeviceRun& d, const Inventory& inv, std::int64_t& bytes, cudaStream_t stream) {
  if (d.destinations.empty() || d.check_work.empty()) return {};
  std::vector<unsigned long long> first(d.destinations.size(), ULLONG_MAX);
  d.d_first_bad = to_device(first, d.rank);
  launch_check(d.arena, d.d_destinations, d.d_check, static_cast<std::int64_t>(d.check_work.size()), d.d_first_bad, stream);
  cuda_check(cudaGetLastError(), "check kernel", d.rank);
  cuda_check(cudaStreamSynchronize(stream), "check", d.rank);
  cuda_check(cudaMemcpy(first.data(), d.d_first_bad, first.size() * sizeof(unsigned long long), cudaMemcpyDeviceToHost),
             "cudaMemcpy", d.rank);
  for (std::size_t i = 0; i < first.size(); ++i) {
    const auto [p, region] = d.destination_region[i];
    if (first[i] == ULLONG_MAX) {
      bytes += d.progs[p].regions[static_cast<std::size_t>(region)].bytes;
      continue;
    }
    const auto offset = static_cast<std::int64_t>(first[i]);
    unsigned char got[8] = {};
    const auto es = static_cast<std::size_t>(d.destinations[i].element_size);
    cuda_check(cudaMemcpy(got, d.arena + d.destinations[i].offset + offset * static_cast<std::int64_t>(es), std::min<std::size_t>(es, 8),
                          cudaMemcpyDeviceToHost),
               "cudaMemcpy", d.rank);
    return wrong_element(d.progs[p], inv, d.rank, region, offset, got);
  }
  return {};
}

// Waits for `event` until the deadline (steady clock); false on timeout.
bool wait_event(cudaEvent_t event, std::chrono::steady_clock::time_point deadline, int rank) {
  while (true) {
    const cudaError_t e = cudaEventQuery(event);
    if (e == cudaSuccess) return true;
    if (e != cudaErrorNotReady) cuda_check(e, "cudaEventQuery", rank);
    (void)cudaGetLastError();  // NotReady is not an error; the runtime keeps it as the last one

    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

double seconds_between(cudaEvent_t a, cudaEvent_t b) {
  float ms = 0;
  if (cudaEventElapsedTime(&ms, a, b) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  return ms / 1000.0;
}

// Events made during a run, destroyed together when it ends.
class EventPool {
 public:
  explicit EventPool(int rank) : rank_(rank) {}
  EventPool(const EventPool&) = delete;
  EventPool& operator=(const EventPool&) = delete;
  ~EventPool() {
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
  }
  cudaEvent_t make() {
    cudaEvent_t e = nullptr;
    cuda_check(cudaEventCreate(&e), "cudaEventCreate", rank_);
    events_.push_back(e);
    return e;
  }

 private:
  int rank_;
  std::vector<cudaEvent_t> events_;
};

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

// The staging each GPU of the run held at most (DeviceRun::staging), as the Measurement lists it.
void add_staging(Measurement& m, const DeviceRun& d) {
  for (std::size_t p = 0; p < d.progs.size(); ++p) m.staging.push_back({d.progs[p].gpu, d.staging[p]});
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

#if !defined(RESHARD_HAVE_NCCL)
RunResult run_nccl(const RunPlan&, const ExecOptions&) {
  throw ExecError("the nccl backend is not built: NCCL's header was not found at configure time", -1, -1);
}
#else

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
#endif  // RESHARD_HAVE_NCCL

}  // namespace detail
#endif  // RESHARD_HAVE_CUDA

}  // namespace reshard::exec
