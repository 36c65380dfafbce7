// The device part the GPU backends share (cuda_backend.cpp, nccl_backend.cpp): the Device they run on
// -- CUDA (cuda_device.cpp) or the host twin (HostDevice, the tests' stand-in: host memory, the
// lists walked by exec/device_list.hpp's run_task in an interleaving of its own) -- and one process's
// programs laid out in one arena (DeviceRun): shards first, in the arena or the caller's device
// buffers (addressed by their distance from the arena), then the staging regions laid out by steps
// (staging.hpp), with the pattern's fill and check and the piece digests. Every host API call the
// backends make goes through a Device, which counts it (Measurement::host_calls).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend_impl.hpp"
#include "host_memory.hpp"
#include "kernels.hpp"
#include "reshard/exec/step_lists.hpp"

namespace reshard::exec::detail {

using model::HostCalls;

// What a GPU backend's run asks of its device. Every call of the run is counted into `calls`, as
// the host API calls the CUDA device makes for it (cuda_device.cpp):
//   reset     1 copy   (cudaMemsetAsync of the counters and stamps)
//   launch    1 launch (a walk: cudaLaunchCooperativeKernel, or <<<>>> for a list without waits)
//   fill      1 launch
//   check     2 copies + 1 launch + 1 sync (a memset, the kernel, the result copied back and waited for)
//   digests   2 copies + 1 launch + 1 sync
//   op_times  1 copy + 1 sync (the stamps copied back and waited for)
//   record    1 event  (cudaEventRecord)
//   wait      1 sync   (cudaEventQuery until done: one wait, however often it polls)
//   seconds   1 event  (cudaEventElapsedTime)
//   read      1 copy + 1 sync
// The backends reset `calls` where the timed run begins; setup (allocation, uploads) is not counted.
class Device {
 public:
  virtual ~Device() = default;
  HostCalls calls;

  virtual std::int64_t free_bytes() = 0;
  // The arena: at least `bytes` zeroed bytes (kept, and reused while large enough).
  virtual unsigned char* arena(std::int64_t bytes) = 0;
  // Takes a list for later launches (its arrays copied to the device at the next commit); returns its id.
  virtual std::int32_t add_list(list::List l) = 0;
  // Makes room for `counters` counters and the stamps of `ops` operations, all zeroed by reset().
  virtual void add_counters(std::int32_t counters, std::int32_t ops) = 0;
  // Fill, check and digest work (pattern verification, digests).
  virtual void set_shards(std::vector<DeviceShard> sources, std::vector<ShardWork> fill, std::vector<DeviceShard> destinations,
                          std::vector<ShardWork> check) = 0;
  virtual void set_digest_runs(std::vector<DigestRun> runs, std::int32_t slots) = 0;
  // Copies the lists and work given since the last commit to the device.
  virtual void commit() = 0;
  // Drops every list, counter and work list (a new layout follows).
  virtual void clear() = 0;
  virtual void* stream() = 0;  // the run's stream (NCCL's calls are queued on it)

  // ---- the run's calls, counted ----
  void reset() { ++calls.copies, do_reset(); }
  void launch(std::int32_t list) { ++calls.launches, do_launch(list); }
  void fill() { ++calls.launches, do_fill(); }
  // Per destination shard: the first wrong element offset (-1: all right).
  std::vector<std::int64_t> check() { calls.copies += 2, ++calls.launches, ++calls.syncs; return do_check(); }
  // Per digest slot: the sum of its digest terms.
  std::vector<std::uint64_t> digests() { calls.copies += 2, ++calls.launches, ++calls.syncs; return do_digests(); }
  // Per op: (start, end) in seconds from the first walk's start; -1 where not stamped.
  std::vector<std::pair<double, double>> op_times(std::int32_t ops) { ++calls.copies, ++calls.syncs; return do_op_times(ops); }
  int record() { ++calls.events; return do_record(); }  // an event on the run's stream
  // Waits for event `e` until `deadline`: false if it is still pending then.
  bool wait(int e, std::chrono::steady_clock::time_point deadline) { ++calls.syncs; return do_wait(e, deadline); }
  double seconds(int from, int to) { ++calls.events; return do_seconds(from, to); }
  void read(void* host, const unsigned char* at, std::int64_t bytes) { ++calls.copies, ++calls.syncs, do_read(host, at, bytes); }

 private:
  virtual void do_reset() = 0;
  virtual void do_launch(std::int32_t list) = 0;
  virtual void do_fill() = 0;
  virtual std::vector<std::int64_t> do_check() = 0;
  virtual std::vector<std::uint64_t> do_digests() = 0;
  virtual std::vector<std::pair<double, double>> do_op_times(std::int32_t ops) = 0;
  virtual int do_record() = 0;
  virtual bool do_wait(int e, std::chrono::steady_clock::time_point deadline) = 0;
  virtual double do_seconds(int from, int to) = 0;
  virtual void do_read(void* host, const unsigned char* at, std::int64_t bytes) = 0;
};

// The CUDA device `index` (cuda_device.cpp; ExecError without CUDA or a GPU).
std::unique_ptr<Device> make_cuda_device(int index, int rank);

// The host twin: host memory, each launch walked on the host. A list with waits is walked by
// `blocks` blocks (walk_order), the next task taken from a block chosen by a seeded generator among
// those whose task is ready: an interleaving a GPU could run. A walk in which no block can go on
// throws ExecError ("the walk is stuck"), as a GPU would hang.
class HostDevice : public Device {
 public:
  explicit HostDevice(std::int32_t blocks = 4, std::uint64_t seed = 1, std::int64_t memory = std::int64_t{64} << 30);
  ~HostDevice() override;
  std::int64_t free_bytes() override { return memory_; }
  unsigned char* arena(std::int64_t bytes) override;
  std::int32_t add_list(list::List l) override;
  void add_counters(std::int32_t counters, std::int32_t ops) override;
  void set_shards(std::vector<DeviceShard> sources, std::vector<ShardWork> fill, std::vector<DeviceShard> destinations,
                  std::vector<ShardWork> check) override;
  void set_digest_runs(std::vector<DigestRun> runs, std::int32_t slots) override;
  void commit() override {}
  void clear() override;
  void* stream() override { return nullptr; }
  std::int64_t copied() const { return copied_; }  // bytes its walks copied
  // A list it holds (the tests read what was compiled).
  const list::List& list_of(std::int32_t id) const;

 private:
  void do_reset() override;
  void do_launch(std::int32_t list) override;
  void do_fill() override;
  std::vector<std::int64_t> do_check() override;
  std::vector<std::uint64_t> do_digests() override;
  std::vector<std::pair<double, double>> do_op_times(std::int32_t ops) override;
  int do_record() override;
  bool do_wait(int e, std::chrono::steady_clock::time_point deadline) override;
  double do_seconds(int from, int to) override;
  void do_read(void* host, const unsigned char* at, std::int64_t bytes) override;

  struct State;
  std::unique_ptr<State> st_;
  std::int32_t blocks_;
  std::uint64_t rng_;
  std::int64_t memory_;
  std::int64_t copied_ = 0;
};

// One process's programs in one arena, the lists compiled from them, and what verification needs.
struct DeviceRun {
  int rank = 0;
  std::vector<GpuProgram> progs;
  ArenaOffsets at;                     // per program, per region: byte offset from the arena
  std::int64_t bytes = 0;              // the arena's bytes (the bound shards not counted)
  unsigned char* arena = nullptr;
  std::vector<std::int64_t> staging;   // per program: the staging bytes its regions take at most in one step
  std::vector<std::pair<std::size_t, std::int32_t>> destination_region;  // per destination shard: (program, region)
  std::int32_t local_list = -1;        // the local copies (colocated pieces), a list without waits
  std::int64_t local_bytes = 0;
  // Digests: per slot (piece, GPU, side), in the order digests() returns them, and each piece's bytes.
  std::vector<PieceDigest> digest_slots;
  std::vector<std::int64_t> digest_bytes;
  // The caller's buffers the layout was made for (a later run with the same reuses it).
  std::vector<const void*> bound;
};

// Lays out the programs of `gpus` in `dev`'s arena (ExecError when it does not fit its free memory
// or a binding is wrong), uploads the fill, check and digest work and the local copies' list. The
// caller then compiles and adds its lists and commits.
void lay_out(DeviceRun& d, Device& dev, const RunPlan& plan, const std::vector<model::GpuId>& gpus, const ExecOptions& options);
// Whether `d` was laid out for the buffers `options` binds now.
bool same_buffers(const DeviceRun& d, const ExecOptions& options);
// Before a run: fills the sources (pattern verification) and makes the local copies.
void start_run(DeviceRun& d, Device& dev, const ExecOptions& options);
// After a run: pattern verification ("" or the first wrong element, bytes checked added to
// `bytes`), or the digests of every piece the process's GPUs hold or need.
std::string check_pattern(DeviceRun& d, Device& dev, const model::Inventory& inv, std::int64_t& bytes);
void piece_digests(DeviceRun& d, Device& dev, std::vector<PieceDigest>& out);

// The staging each GPU of the run held at most (DeviceRun::staging), as the Measurement lists it.
void add_staging(Measurement& m, const DeviceRun& d);

// The cuda backend's run compiled once (cuda_backend.cpp): the layout and each step's list.
struct CudaRun {
  DeviceRun run;
  std::vector<std::int32_t> steps;  // per step: its list's id
  std::int64_t copy_bytes = 0;      // what the steps' lists copy (Measurement::device_copy_bytes)
  Verification verification = Verification::Pattern;
  bool faults = false;
  bool compiled = false;
};
// Lays out every GPU of the run and compiles its steps (virtual_gpu_lists) on `dev`.
void compile_cuda(CudaRun& c, Device& dev, const RunPlan& plan, const ExecOptions& options);
// One run of the cuda backend on `dev` (the CUDA device, or the host twin in the tests), compiling
// first when the buffers, the verification or the faults changed: a step is one launch.
RunResult run_cuda_on(Device& dev, CudaRun& c, const RunPlan& plan, const ExecOptions& options);

}  // namespace reshard::exec::detail
