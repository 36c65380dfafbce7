// The refit engine for C++ callers (docs/execution.md, "Refit from your own code"): a refit planned
// once -- scenario, strategy (or `auto`), staging budget -- and run every training step on the
// caller's own buffers, in every process of an MPI launch. The C API (reshard/exec/refit_c.h) wraps
// it for other languages; reshard.torch runs the same programs over torch.distributed.
//
//   reshard::exec::Refit refit("scenarios/small-gqa-megatron-vllm.yaml", {.strategy = "auto"});
//   MemoryBinding b;
//   for (const ShardRef& s : refit.shards(refit.rank())) b.bind(refit.binding(s, my_buffer_for(s)));
//   RefitStats st = refit.run(b);        // every step; collective over the launch's processes
//
// Process rank r runs GPU plan().gpus[r]; the launch has exactly world_size() processes. The
// backend keeps its communicator between runs (the host backend: an MPI communicator of its
// own; MPI stays initialised for the Refit's lifetime). A peer that does not answer within the
// timeout ends run() with an ExecError naming this rank and the peer; call abort() after a fatal
// one (ExecError::fatal) to end every process of the launch.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "reshard/exec/executor.hpp"
#include "reshard/model/tuner.hpp"

namespace reshard::exec {

// One shard a process holds as a source or fills as a destination.
struct ShardRef {
  model::GpuId gpu = -1;
  Side side = Side::Source;
  std::int32_t tensor = -1;
  std::string name;            // the HF tensor name
  model::Box box;              // its part of the tensor
  std::int64_t bytes = 0;      // box elements x element size: what its buffer holds, row-major
  std::int32_t element_size = 0;
};

struct RefitStats {
  double seconds = 0;              // the run, from the common start to the last completion
  std::int64_t bytes_verified = 0; // destination bytes checked (digests: pieces compared)
  bool verified = false;
  // This launch's largest staging high-water mark of one GPU (host backend; 0 elsewhere).
  std::int64_t staging_peak_bytes = 0;
};

class Refit {
 public:
  struct Options {
    std::string strategy = model::kDefaultStrategy;  // as `reshard plan --strategy` takes it
    std::optional<model::Bytes> max_staging;   // every GPU's staging budget at most this
    std::vector<std::string> sets;             // `--set KEY=VALUE` overrides of the scenario
    std::string profile = model::kDefaultProfile;  // what auto is tuned for
    std::string backend = "host";             // host (MPI; host buffers), cuda (one process, every GPU's device
                                               // buffers), nccl (one process per GPU; device buffers)
    double timeout_s = 30;
    Verification verification = Verification::Digest;
  };

  // Loads and plans the scenario, builds and validates the schedule (tuning it for `auto`): the
  // same in every process. Throws model::Error (ConfigError naming the file and key, ...).
  Refit(const std::filesystem::path& scenario, const Options& options);
  ~Refit();
  Refit(const Refit&) = delete;
  Refit& operator=(const Refit&) = delete;

  int world_size() const;                     // processes: the GPUs of the run
  const RunPlan& plan() const;
  const model::Schedule& schedule() const;
  // This process's rank in the launch (0 without a launcher).
  int rank() const;
  // The shards process `rank` holds (Side::Source) or fills (Side::Destination), in plan order.
  std::vector<ShardRef> shards(int rank) const;
  // The binding of shard `s` to `bytes` bytes at `data` (at least s.bytes): host memory for the
  // host backend, device memory for cuda and nccl.
  ShardBinding binding(const ShardRef& s, void* data, std::int64_t bytes, MemoryKind memory = MemoryKind::Host) const;
  // One refit over the caller's buffers (every shard of this process bound): collective. Throws
  // ExecError (a timeout naming rank and peer; a wrong digest naming the piece).
  RefitStats run(const MemoryBinding& binding);
  // After a fatal ExecError: ends every process of the launch (MPI_Abort). Does not return.
  [[noreturn]] void abort(int code = 3) noexcept;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace reshard::exec
