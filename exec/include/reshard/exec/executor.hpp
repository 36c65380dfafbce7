// The executor (docs/design.md §10): runs a Schedule's operations for real, verifies what arrived,
// and times every operation. Four parts, each with an interface of its own:
//   the per-GPU program   exec/program.hpp: regions, copy runs, streams, computed once in C++ and the
//                         one definition of what moves;
//   memory binding        exec/binding.hpp: a shard bound to a caller's buffer, or allocated;
//   transport             exec/transport.hpp: the table of backends (host/MPI, cuda, nccl), each
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
#include "reshard/model/host_cost.hpp"
#include "reshard/model/memory.hpp"
#include "reshard/model/scenario.hpp"
#include "reshard/model/schedule.hpp"
#include "reshard/exec/binding.hpp"
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

// ---- Faults (test-only injection) --------------------------------------------------------------

struct Fault {
  enum class Kind : std::uint8_t { Corrupt, Die, Kill, Drop, Stop, StopBeforeInit } kind = Kind::Corrupt;
  std::int64_t target = 0;  // Corrupt, Drop: an op id; Die, Kill, Stop, StopBeforeInit: a process rank
  // Corrupt: which byte of those the receiver unpacks into its destination shards is flipped.
  enum class Where : std::uint8_t { First, Middle, Last } where = Where::First;
};
// "corrupt:OP" flips a byte the receiver of OP got; "die:RANK" makes that process go silent before
// its sends (it answers nobody, as a dead peer the launcher has not noticed); "kill:RANK" kills it
// with SIGKILL before its sends (the launcher notices and ends the job); "drop:OP" never sends OP.
// For a chain op, the receiver is the op's dst (its last hop's `to`): the byte is flipped in the
// chunk that holds it when that chunk arrives at dst, before dst forwards it (so dst's subtree, if
// any, gets it flipped too); and "never sends" is the root: no chunk leaves it, every GPU of the
// tree waits for its parent. "corrupt:OP@middle" and "corrupt:OP@last" flip the middle or the last
// of the bytes the receiver unpacks (in unpack order) instead of the first. "stop:RANK" stops that process (SIGSTOP) right after MPI_Init, before
// the run's setup, "stop:RANK@init" before it calls MPI_Init: the others must end within the
// timeout, naming it. Throws ConfigError on other text.
Fault parse_fault(const std::string& text);
// Whether `faults` holds a fault of kind k on target (a rank or an operation id).
bool has_fault(const std::vector<Fault>& faults, Fault::Kind k, std::int64_t target);
// The offset in a receive's staging region of the byte a corrupt fault on its op flips (-1: none
// for this op; 0 when the receive unpacks nothing).
std::int64_t corrupt_offset(const std::vector<Fault>& faults, const OpStream& receive);

// ---- Measurements -------------------------------------------------------------------------------

// A plain transfer: start = the sender posted it, end = the receiver has it. A chain op: start = the
// root posted its first chunk, end = the last GPU of the tree has every chunk (merged over ranks:
// the latest).
struct MeasuredOpTiming {
  double start_s = -1, end_s = -1;  // from the common start; -1: not run here
};

struct GpuStaging {
  model::GpuId gpu = -1;
  std::int64_t bytes = 0;
};

struct Measurement {
  std::string scenario_path;   // absolute
  std::vector<std::string> scenario_sets;  // `--set KEY=VALUE` overrides of the scenario (paths absolute)
  std::string backend;
  std::string profile = model::kDefaultProfile;
  std::string params_file;     // absolute; a cost parameters file (`--params`) that replaces the profile
  std::int32_t ranks = 0;      // processes
  model::Schedule schedule;    // embedded, so check/calibrate rebuild nothing by guesswork
  std::vector<MeasuredOpTiming> ops;   // per op id
  double elapsed_s = 0;
  std::int64_t bytes_verified = 0;
  bool verified = false;
  Verification verification = Verification::Pattern;  // how it was verified (exec/verify.hpp)
  // The staging memory each GPU held at most (the host backend counts the bytes it allocates for
  // send and receive regions; empty: the backend does not measure it), by GPU.
  std::vector<GpuStaging> staging;
  // The cuda backend: the bytes its copies moved in device memory during the run (packs, unpacks,
  // local copies and the copies between GPUs' slots); 0 where not counted. Over elapsed_s it is the
  // backend's copy rate, which the GPU check compares with a plain device-to-device copy.
  std::int64_t device_copy_bytes = 0;
};

nlohmann::json to_json(const Measurement& m, const RunPlan& plan);
// Reads a Measurement file (throws ConfigError naming the file and the JSON path of a bad value).
// Unless `accept_unverified`, a file whose digest does not match its content or its scenario's
// files, or whose run was not verified, is refused (model/digest.hpp).
Measurement load_measurement(const std::filesystem::path& path, bool accept_unverified = false);

struct StepComparison {
  std::int32_t step = 0;  // -1: the whole run
  std::int64_t ops = 0;
  std::int64_t bytes = 0;
  double predicted_s = 0, measured_s = 0;
  double error() const { return predicted_s > 0 ? (measured_s - predicted_s) / predicted_s : 0; }
};
// The Prediction (model::estimate with the measurement's cost parameters file, else its profile) of
// each step's operations
// alone, and of the whole schedule, against the measured span of the step (last end - first start).
std::vector<StepComparison> compare_with_prediction(const Measurement& m);
// The same with the host backend's own model (model/host_cost.hpp, a profile `reshard bench-host`
// measured) for a Measurement of the host backend: its schedule, GPUs and processes (ranks). A
// Measurement of another backend is a ConfigError naming `file` (the measurement) and its key
// `backend`. `terms`, when given, gets the prediction with each step's terms.
std::vector<StepComparison> compare_with_host_model(const Measurement& m, const model::HostProfile& profile,
                                                    const std::string& file, model::HostPrediction* terms = nullptr);

// The staging memory each GPU held at most (Measurement::staging) against model::staging_memory's
// peak for it; empty when the run did not measure it.
struct StagingComparison {
  model::GpuId gpu = -1;
  std::int64_t predicted_bytes = 0, measured_bytes = 0;
  double error() const {
    return predicted_bytes > 0 ? static_cast<double>(measured_bytes - predicted_bytes) / static_cast<double>(predicted_bytes) : 0;
  }
};
std::vector<StagingComparison> compare_staging(const Measurement& m);

// ---- Running ------------------------------------------------------------------------------------

// State a transport keeps between the runs of one Refit (exec/refit.hpp): the host transport's
// communicator, set up by its first run and used by every later one. Opaque to callers.
struct TransportSession {
  virtual ~TransportSession() = default;
};

struct ExecOptions {
  std::string backend = "host";  // a transport's name (exec/transport.hpp): host, cuda, nccl
  Verification verification = Verification::Pattern;
  // Caller memory for shards (exec/binding.hpp); null or empty: the executor allocates them.
  const MemoryBinding* binding = nullptr;
  double timeout_s = 30;
  std::vector<Fault> faults;
  std::string profile = model::kDefaultProfile;
  std::string params_file;  // `--params`, absolute ("" for none)
  std::string scenario_path;
  std::vector<std::string> scenario_sets;
  // The transport's state across runs (Transport::open_session); null: each run sets up its own.
  std::shared_ptr<TransportSession> session;
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
