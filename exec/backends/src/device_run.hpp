// The device part the GPU backends share (cuda_backend.cpp, nccl_backend.cpp): one process's
// programs laid out in one device arena (shards first -- in the arena, or the caller's device
// buffers -- then the staging regions laid out by steps, staging.hpp), uploaded copy and work lists,
// the fill and check of pattern verification, the digests, and CUDA events. Only compiled with CUDA.
#pragma once

#include <cuda_runtime_api.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "backend_impl.hpp"
#include "host_memory.hpp"
#include "kernels.hpp"

namespace reshard::exec::detail {

void cuda_check(cudaError_t e, const char* what, int rank);

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
std::vector<model::ChainHop> stream_hops(const model::Schedule& s, const model::Op& op);
// Queues copies [first, first + count) of d.copies on `stream`, counting their bytes.
void run_range(DeviceRun& d, const std::pair<std::int64_t, std::int64_t>& range, cudaStream_t stream);
// Lays out and uploads the programs of `gpus`; fills the sources (pattern verification) and makes
// the local copies.
void prepare(DeviceRun& d, const RunPlan& plan, const std::vector<model::GpuId>& gpus, cudaStream_t stream, const ExecOptions& options);
// Digest verification (exec/verify.hpp): every piece this process's GPUs hold or need.
void device_digests(const DeviceRun& d, const RunPlan& plan, std::vector<PieceDigest>& out);
// Checks every destination shard on the device; returns "" or the first wrong element.
std::string check(DeviceRun& d, const model::Inventory& inv, std::int64_t& bytes, cudaStream_t stream);
// Waits for `event` until the deadline (steady clock); false on timeout.
bool wait_event(cudaEvent_t event, std::chrono::steady_clock::time_point deadline, int rank);
double seconds_between(cudaEvent_t a, cudaEvent_t b);

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

// The staging each GPU of the run held at most (DeviceRun::staging), as the Measurement lists it.
void add_staging(Measurement& m, const DeviceRun& d);

}  // namespace reshard::exec::detail
