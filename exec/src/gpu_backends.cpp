// The GPU backends: `cuda` (every GPU of the scenario a virtual rank in this process, on one
// device; each operation a device-to-device cudaMemcpyAsync on the sender's stream, `after` as
// events) and `nccl` (one process per GPU under mpirun; a grouped ncclSend/ncclRecv per step).
// Both pack, unpack, fill and check with kernels (kernels.cu) in one device arena per process.
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
#endif
#if defined(RESHARD_HAVE_NCCL) && defined(RESHARD_HAVE_MPI)
#include <mpi.h>
#include <nccl.h>

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

bool has_fault(const ExecOptions& o, Fault::Kind k, std::int64_t target) {
  for (const auto& f : o.faults)
    if (f.kind == k && f.target == target) return true;
  return false;
}

template <class T>
T* to_device(const std::vector<T>& v, int rank) {
  T* p = nullptr;
  if (v.empty()) return nullptr;
  cuda_check(cudaMalloc(reinterpret_cast<void**>(&p), v.size() * sizeof(T)), "cudaMalloc", rank);
  cuda_check(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy", rank);
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
  std::vector<DeviceCopy> copies;  // local copies first, then each transfer's pack or unpack
  std::int64_t local_copies = 0;
  std::map<std::int64_t, std::pair<std::int64_t, std::int64_t>> pack, unpack;  // op -> [first, count) in copies
  std::map<std::int64_t, std::pair<std::size_t, const Transfer*>> send_of, receive_of;  // op -> (program, transfer)
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
  std::int64_t transfer_offset(std::size_t prog, const Transfer& t) const { return at(prog, t.region); }
  std::int64_t transfer_bytes(std::size_t prog, const Transfer& t) const {
    return progs[prog].regions[static_cast<std::size_t>(t.region)].bytes;
  }
};

constexpr std::int64_t kWorkElements = 1 << 16;  // elements per thread block in fill/check
constexpr std::int64_t kCopyChunk = 1 << 20;     // bytes per thread block in copies

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

// Lays out and uploads the programs of `gpus`; fills the sources and makes the local copies.
void prepare(DeviceRun& d, const RunPlan& plan, const std::vector<GpuId>& gpus, cudaStream_t stream) {
  const Inventory& inv = plan.scenario->inventory;
  for (GpuId g : gpus) d.progs.push_back(build_program(plan, g));
  for (std::size_t p = 0; p < d.progs.size(); ++p) {
    d.offset.emplace_back();
    for (const Region& r : d.progs[p].regions) {
      d.offset.back().push_back(d.bytes);
      d.bytes += (r.bytes + 255) / 256 * 256;
    }
  }
  std::size_t free_bytes = 0, total_bytes = 0;
  cuda_check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo", d.rank);
  if (static_cast<std::size_t>(d.bytes) > free_bytes)
    throw ExecError("the run needs " + format(Bytes{d.bytes}) + " of GPU memory, " + format(Bytes{static_cast<std::int64_t>(free_bytes)}) +
                        " are free",
                    d.rank, -1, true);
  cuda_check(cudaMalloc(reinterpret_cast<void**>(&d.arena), static_cast<std::size_t>(std::max<std::int64_t>(d.bytes, 256))),
             "cudaMalloc arena", d.rank);
  cuda_check(cudaMemsetAsync(d.arena, 0, static_cast<std::size_t>(std::max<std::int64_t>(d.bytes, 256)), stream), "cudaMemset", d.rank);
  for (std::size_t p = 0; p < d.progs.size(); ++p) {
    const GpuProgram& prog = d.progs[p];
    for (std::size_t i = 0; i < prog.regions.size(); ++i) {
      const Region& r = prog.regions[i];
      if (r.kind == Region::Kind::Source) {
        add_work(d.fill_work, static_cast<std::int32_t>(d.sources.size()), r.box.elements());
        d.sources.push_back(device_shard(r, inv, d.at(p, static_cast<std::int32_t>(i)), d.rank));
      } else if (r.kind == Region::Kind::Destination) {
        add_work(d.check_work, static_cast<std::int32_t>(d.destinations.size()), r.box.elements());
        d.destinations.push_back(device_shard(r, inv, d.at(p, static_cast<std::int32_t>(i)), d.rank));
        d.destination_region.emplace_back(p, static_cast<std::int32_t>(i));
      }
    }
    add_copies(d, p, prog.local);
  }
  d.local_copies = static_cast<std::int64_t>(d.copies.size());
  for (std::size_t p = 0; p < d.progs.size(); ++p) {
    for (const Transfer& t : d.progs[p].sends) {
      const auto first = static_cast<std::int64_t>(d.copies.size());
      add_copies(d, p, t.copies);
      d.pack[t.op] = {first, static_cast<std::int64_t>(d.copies.size()) - first};
      d.send_of[t.op] = {p, &t};
    }
    for (const Transfer& t : d.progs[p].receives) {
      const auto first = static_cast<std::int64_t>(d.copies.size());
      add_copies(d, p, t.copies);
      d.unpack[t.op] = {first, static_cast<std::int64_t>(d.copies.size()) - first};
      d.receive_of[t.op] = {p, &t};
    }
  }
  d.d_sources = to_device(d.sources, d.rank);
  d.d_destinations = to_device(d.destinations, d.rank);
  d.d_fill = to_device(d.fill_work, d.rank);
  d.d_check = to_device(d.check_work, d.rank);
  d.d_copies = to_device(d.copies, d.rank);
  if (!d.fill_work.empty())
    launch_fill(d.arena, d.d_sources, d.d_fill, static_cast<std::int64_t>(d.fill_work.size()), stream);
  if (d.local_copies > 0) launch_copies(d.arena, d.d_copies, d.local_copies, stream);
  cuda_check(cudaGetLastError(), "fill kernel", d.rank);
  cuda_check(cudaStreamSynchronize(stream), "fill", d.rank);
}

void run_range(DeviceRun& d, const std::pair<std::int64_t, std::int64_t>& range, cudaStream_t stream) {
  if (range.second > 0) launch_copies(d.arena, d.d_copies + range.first, range.second, stream);
}

// Checks every destination shard on the device; returns "" or the first wrong element.
std::string check(DeviceRun& d, const Inventory& inv, std::int64_t& bytes, cudaStream_t stream) {
  if (d.destinations.empty()) return {};
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
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

double seconds_between(cudaEvent_t a, cudaEvent_t b) {
  float ms = 0;
  if (cudaEventElapsedTime(&ms, a, b) != cudaSuccess) return -1;
  return ms / 1000.0;
}

}  // namespace

RunResult run_cuda(const RunPlan& plan, const ExecOptions& options) {
  if (cuda_device_count() == 0) throw ExecError("the cuda backend needs a GPU; the CUDA runtime sees none", 0, -1);
  for (const auto& f : options.faults)
    if (f.kind == Fault::Kind::Die || f.kind == Fault::Kind::Kill)
      throw ExecError("die:RANK and kill:RANK apply to the multi-process backends (host, nccl)", 0, -1);
  const Schedule& s = *plan.schedule;
  cuda_check(cudaSetDevice(0), "cudaSetDevice", 0);
  // One stream per sending GPU, at most 16: a GPU's sends run in order, different GPUs' overlap.
  const std::size_t n_streams = std::min<std::size_t>(16, std::max<std::size_t>(plan.gpus.size(), 1));
  std::vector<cudaStream_t> streams(n_streams);
  for (auto& st : streams) cuda_check(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "cudaStreamCreate", 0);
  DeviceRun d;
  prepare(d, plan, plan.gpus, streams[0]);
  // The timeout covers the operations (not the allocation and the fill before them).
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(options.timeout_s));
  std::vector<cudaEvent_t> start(s.ops.size()), end(s.ops.size()), done(s.ops.size());
  for (std::size_t i = 0; i < s.ops.size(); ++i)
    for (cudaEvent_t* e : {&start[i], &end[i], &done[i]}) cuda_check(cudaEventCreate(e), "cudaEventCreate", 0);
  cudaEvent_t t0 = nullptr, all_done = nullptr;
  cuda_check(cudaEventCreate(&t0), "cudaEventCreate", 0);
  cuda_check(cudaEventCreate(&all_done), "cudaEventCreate", 0);
  cuda_check(cudaEventRecord(t0, streams[0]), "cudaEventRecord", 0);
  for (auto& st : streams) cuda_check(cudaStreamWaitEvent(st, t0, 0), "cudaStreamWaitEvent", 0);
  for (const Op& op : s.ops) {
    const auto i = static_cast<std::size_t>(op.id);
    cudaStream_t st = streams[static_cast<std::size_t>(plan.gpu_index(op.src)) % n_streams];
    for (auto a : op.after) cuda_check(cudaStreamWaitEvent(st, done[static_cast<std::size_t>(a)], 0), "cudaStreamWaitEvent", 0);
    run_range(d, d.pack.at(op.id), st);
    cuda_check(cudaEventRecord(start[i], st), "cudaEventRecord", 0);
    const auto& [sp, sender] = d.send_of.at(op.id);
    const auto& [rp, receiver] = d.receive_of.at(op.id);
    const std::int64_t bytes = d.transfer_bytes(sp, *sender);
    if (!has_fault(options, Fault::Kind::Drop, op.id) && bytes > 0)
      cuda_check(cudaMemcpyAsync(d.arena + d.transfer_offset(rp, *receiver), d.arena + d.transfer_offset(sp, *sender),
                                 static_cast<std::size_t>(bytes), cudaMemcpyDeviceToDevice, st),
                 "cudaMemcpyAsync", 0);
    cuda_check(cudaEventRecord(end[i], st), "cudaEventRecord", 0);
    if (has_fault(options, Fault::Kind::Corrupt, op.id) && bytes > 0) {
      const auto& un = receiver->copies;
      launch_flip(d.arena, d.transfer_offset(rp, *receiver) + (un.empty() ? 0 : un.front().src_offset), st);
    }
    run_range(d, d.unpack.at(op.id), st);
    cuda_check(cudaEventRecord(done[i], st), "cudaEventRecord", 0);
  }
  std::vector<cudaEvent_t> stream_done(n_streams);
  for (std::size_t k = 0; k < n_streams; ++k) {
    cuda_check(cudaEventCreate(&stream_done[k]), "cudaEventCreate", 0);
    cuda_check(cudaEventRecord(stream_done[k], streams[k]), "cudaEventRecord", 0);
    cuda_check(cudaStreamWaitEvent(streams[0], stream_done[k], 0), "cudaStreamWaitEvent", 0);
  }
  cuda_check(cudaEventRecord(all_done, streams[0]), "cudaEventRecord", 0);
  cuda_check(cudaGetLastError(), "kernel launch", 0);
  if (!wait_event(all_done, deadline, 0))
    throw ExecError("the cuda backend did not finish within " + format(Seconds{options.timeout_s}), 0, -1);
  RunResult res;
  res.reporter = true;
  res.measurement = new_measurement(plan, options, 1);
  auto& m = res.measurement;
  for (std::size_t i = 0; i < s.ops.size(); ++i) m.ops[i] = {seconds_between(t0, start[i]), seconds_between(t0, end[i])};
  m.elapsed_s = seconds_between(t0, all_done);
  const std::string err = check(d, plan.scenario->inventory, m.bytes_verified, streams[0]);
  if (!err.empty()) throw ExecError("verification failed: " + err, 0, -1);
  m.verified = true;
  for (std::size_t i = 0; i < s.ops.size(); ++i)
    for (cudaEvent_t e : {start[i], end[i], done[i]}) cudaEventDestroy(e);
  for (cudaEvent_t e : stream_done) cudaEventDestroy(e);
  for (cudaEvent_t e : {t0, all_done}) cudaEventDestroy(e);
  for (auto& st : streams) cudaStreamDestroy(st);
  return res;
}

#if !(defined(RESHARD_HAVE_NCCL) && defined(RESHARD_HAVE_MPI))
RunResult run_nccl(const RunPlan&, const ExecOptions&) {
  throw ExecError("the nccl backend is not built: NCCL was not found at configure time", -1, -1);
}
#else

namespace {
void nccl_check(ncclResult_t r, const char* what, int rank) {
  if (r != ncclSuccess) throw ExecError(std::string("NCCL: ") + what + ": " + ncclGetErrorString(r), rank, -1, true);
}
}  // namespace

RunResult run_nccl(const RunPlan& plan, const ExecOptions& options) {
  MpiWorld w = mpi_start();
  const Schedule& s = *plan.schedule;
  const int devices = cuda_device_count();
  if (devices == 0) throw ExecError("the nccl backend needs a GPU; the CUDA runtime sees none on rank " + std::to_string(w.rank), w.rank, -1, true);
  if (w.world > static_cast<int>(plan.gpus.size())) {
    if (w.initialized_here) MPI_Finalize();
    if (w.rank != 0) return RunResult{false, w.rank, w.world, {}};
    throw ExecError("the schedule runs on " + std::to_string(plan.gpus.size()) +
                        " GPUs; start at most that many processes, not " + std::to_string(w.world),
                    w.rank, -1);
  }
  cuda_check(cudaSetDevice(w.rank % devices), "cudaSetDevice", w.rank);
  cudaStream_t stream = nullptr;
  cuda_check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate", w.rank);
  ncclUniqueId id;
  if (w.rank == 0) nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId", w.rank);
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclComm_t comm = nullptr;
  nccl_check(ncclCommInitRank(&comm, w.world, id, w.rank), "ncclCommInitRank", w.rank);

  DeviceRun d;
  d.rank = w.rank;
  prepare(d, plan, gpus_of_process(plan, w.rank, w.world), stream);
  // My sends and receives per step.
  std::vector<std::vector<std::int64_t>> step_ops(static_cast<std::size_t>(plan.steps));
  for (const Op& op : s.ops)
    if (d.send_of.count(op.id) || d.receive_of.count(op.id))
      step_ops[static_cast<std::size_t>(plan.step_of[static_cast<std::size_t>(op.id)])].push_back(op.id);
  std::vector<cudaEvent_t> step_start(step_ops.size()), step_end(step_ops.size());
  for (std::size_t k = 0; k < step_ops.size(); ++k) {
    cuda_check(cudaEventCreate(&step_start[k]), "cudaEventCreate", w.rank);
    cuda_check(cudaEventCreate(&step_end[k]), "cudaEventCreate", w.rank);
  }
  cudaEvent_t t0 = nullptr, all_done = nullptr;
  cuda_check(cudaEventCreate(&t0), "cudaEventCreate", w.rank);
  cuda_check(cudaEventCreate(&all_done), "cudaEventCreate", w.rank);
  MPI_Barrier(MPI_COMM_WORLD);
  if (has_fault(options, Fault::Kind::Kill, w.rank)) std::raise(SIGKILL);  // test-only: a rank killed before its sends
  if (has_fault(options, Fault::Kind::Die, w.rank)) go_silent(w, options.timeout_s);  // test-only: a silent peer
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(options.timeout_s));
  cuda_check(cudaEventRecord(t0, stream), "cudaEventRecord", w.rank);
  for (std::size_t k = 0; k < step_ops.size(); ++k) {
    for (auto op : step_ops[k])
      if (d.send_of.count(op)) run_range(d, d.pack.at(op), stream);
    cuda_check(cudaEventRecord(step_start[k], stream), "cudaEventRecord", w.rank);
    nccl_check(ncclGroupStart(), "ncclGroupStart", w.rank);
    for (auto op : step_ops[k]) {
      const Op& o = s.ops[static_cast<std::size_t>(op)];
      // Both sides know an operation's size; empty ones are skipped on both.
      if (auto it = d.send_of.find(op);
          it != d.send_of.end() && !has_fault(options, Fault::Kind::Drop, op) && d.transfer_bytes(it->second.first, *it->second.second) > 0) {
        const auto& [p, t] = it->second;
        nccl_check(ncclSend(d.arena + d.transfer_offset(p, *t), static_cast<std::size_t>(d.transfer_bytes(p, *t)), ncclUint8,
                            process_of(plan, o.dst, w.world), comm, stream),
                   "ncclSend", w.rank);
      }
      if (auto it = d.receive_of.find(op); it != d.receive_of.end() && d.transfer_bytes(it->second.first, *it->second.second) > 0) {
        const auto& [p, t] = it->second;
        nccl_check(ncclRecv(d.arena + d.transfer_offset(p, *t), static_cast<std::size_t>(d.transfer_bytes(p, *t)), ncclUint8,
                            process_of(plan, o.src, w.world), comm, stream),
                   "ncclRecv", w.rank);
      }
    }
    nccl_check(ncclGroupEnd(), "ncclGroupEnd", w.rank);
    cuda_check(cudaEventRecord(step_end[k], stream), "cudaEventRecord", w.rank);
    for (auto op : step_ops[k])
      if (auto it = d.receive_of.find(op); it != d.receive_of.end()) {
        const auto& [p, t] = it->second;
        if (has_fault(options, Fault::Kind::Corrupt, op) && d.transfer_bytes(p, *t) > 0)
          launch_flip(d.arena, d.transfer_offset(p, *t) + (t->copies.empty() ? 0 : t->copies.front().src_offset), stream);
        run_range(d, d.unpack.at(op), stream);
      }
    // Wait per step so a peer that never answers is named by the step it left unfinished.
    if (!wait_event(step_end[k], deadline, w.rank)) {
      std::string peers;
      for (auto op : step_ops[k])
        if (d.receive_of.count(op))
          peers += (peers.empty() ? "" : ", ") + std::to_string(process_of(plan, s.ops[static_cast<std::size_t>(op)].src, w.world));
      const int first_peer = peers.empty() ? -1 : std::stoi(peers.substr(0, peers.find(',')));
      ncclCommAbort(comm);
      throw ExecError("rank " + std::to_string(w.rank) + " waited in step " + std::to_string(k) + " for rank(s) " + peers +
                          ": no answer within " + format(Seconds{options.timeout_s}),
                      w.rank, first_peer, true);
    }
  }
  cuda_check(cudaEventRecord(all_done, stream), "cudaEventRecord", w.rank);
  cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize", w.rank);
  LocalOutcome out;
  out.start.assign(s.ops.size(), -1);
  out.end.assign(s.ops.size(), -1);
  for (std::size_t k = 0; k < step_ops.size(); ++k)
    for (auto op : step_ops[k]) {
      if (d.send_of.count(op)) out.start[static_cast<std::size_t>(op)] = seconds_between(t0, step_start[k]);
      if (d.receive_of.count(op)) out.end[static_cast<std::size_t>(op)] = seconds_between(t0, step_end[k]);
    }
  out.elapsed = seconds_between(t0, all_done);
  out.error = check(d, plan.scenario->inventory, out.bytes_verified, stream);
  ncclCommDestroy(comm);
  cudaStreamDestroy(stream);
  return mpi_finish(plan, options, w, out);
}
#endif  // RESHARD_HAVE_NCCL

}  // namespace detail
#endif  // RESHARD_HAVE_CUDA

}  // namespace reshard::exec
