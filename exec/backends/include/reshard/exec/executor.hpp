// The executor (docs/design.md §10): runs a Schedule's operations for real, verifies what arrived,
// and times every operation. Four parts, each with an interface of its own:
//   the per-GPU program   exec/program.hpp: regions, copy runs, streams, computed once in C++ and the
//                         one definition of what moves;
//   memory binding        exec/binding.hpp: a shard bound to a caller's buffer, or allocated;
//   backend               exec/backend.hpp: the table of backends (host/MPI, cuda, nccl), each
//                         running the same programs;
//   verification          exec/verify.hpp: the pattern, per-piece digests, or none.
//
// Every operation streams in chunks through rings of Schedule::slots slots (model/memory.hpp,
// exec/program.hpp), so a GPU holds at most its staging budget. The ops run step by step
// (model::op_steps): a GPU starts the operations of step k once its own of the earlier steps are
// finished; ops of one chain run in op-id order on every GPU of it.
//
// GPUs of the scenario (the union of the source and destination GPU lists and every GPU an
// operation or a chain passes through, sorted) are dealt to processes round-robin: GPU number i
// runs in process i mod world size; one process per GPU is the normal case.
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "reshard/model/defaults.hpp"
#include "reshard/model/errors.hpp"
#include "reshard/model/measurement.hpp"
#include "reshard/model/memory.hpp"
#include "reshard/model/scenario.hpp"
#include "reshard/model/schedule.hpp"
#include "reshard/exec/binding.hpp"
#include "reshard/exec/fault.hpp"
#include "reshard/exec/program.hpp"
#include "reshard/exec/verify.hpp"

namespace reshard::exec {

// A failure while executing: a timeout (rank and the peer it waited for), a wrong byte (rank,
// tensor, box, offset), a world of the wrong size, a backend error. rank/peer are process ranks
// (-1 when not applicable).
class ExecError : public model::Error {
 public:
  ExecError(const std::string& what, int rank, int peer, bool fatal = false)
      : model::Error(what), rank_(rank), peer_(peer), fatal_(fatal) {}
  int rank() const { return rank_; }
  int peer() const { return peer_; }
  // True when other processes may still be blocked: the caller must end the whole run
  // (abandon_run) after reporting it.
  bool fatal() const { return fatal_; }

 private:
  int rank_, peer_;
  bool fatal_;
};

using model::GpuStaging;
using model::MeasuredOpTiming;
using model::Measurement;

// ---- Running ------------------------------------------------------------------------------------

// State a backend keeps between the runs of one Refit (exec/refit.hpp): the host backend's
// communicator, set up by its first run and used by every later one. Opaque to callers.
struct BackendSession {
  virtual ~BackendSession() = default;
};

struct ExecOptions {
  std::string backend = "host";  // a backend's name (exec/backend.hpp): host, cuda, nccl
  Verification verification = Verification::Pattern;
  // Caller memory for shards (exec/binding.hpp); null or empty: the executor allocates them.
  const MemoryBinding* binding = nullptr;
  double timeout_s = 30;
  std::vector<Fault> faults;
  std::string profile = model::kDefaultProfile;
  std::string params_file;  // `--params`, absolute ("" for none)
  std::string scenario_path;
  std::vector<std::string> scenario_sets;
  // The backend's state across runs (Backend::open_session); null: each run sets up its own.
  std::shared_ptr<BackendSession> session;
};

struct RunResult {
  bool reporter = false;  // process rank 0: prints and writes the measurement
  std::int32_t rank = 0, world = 1;
  Measurement measurement;  // complete on the reporter
};

// Runs the schedule on the chosen backend. host and nccl initialise MPI when needed (and finalise it
// on success or after a verification failure). Throws ExecError.
RunResult execute(const RunPlan& plan, const ExecOptions& options);

// After a fatal ExecError: ends every process of the run (MPI_Abort) when MPI is active; else nothing.
void abandon_run(int code) noexcept;

// Number of GPUs the CUDA runtime sees (0 without CUDA or without a device).
int cuda_device_count() noexcept;

}  // namespace reshard::exec
