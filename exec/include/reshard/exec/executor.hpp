// The executor (DESIGN.md §10): runs a Schedule's operations for real, verifies every destination
// byte, and times every operation.
//
// One core, three backends. The core turns (scenario, transfer set, schedule) into one Program per
// GPU: the memory regions the GPU holds (its source shards, its destination shards, one staging
// region per operation it sends or receives) and byte-exact copy runs between them:
//   pack    source shards / earlier receive regions -> the send region of an operation
//   unpack  the receive region of an operation      -> destination shards that need its elements
//   local   source shards -> destination shards, for pieces the GPU already holds (colocated)
// An operation moves part `part` of `parts` of its buffer (model::for_each_in_part); a slice is a
// run of elements of a piece's box in row-major order, and a piece is the intersection of one
// source shard and one destination shard, so every run maps to contiguous rows of both shards.
//
// Source shards are filled with pattern(tensor, global element index): a hash of both, never zero
// (byte 0 has its low bit set), written in the tensor's dtype size as raw bytes. After the run every
// destination shard element must equal the pattern of its global index.
//
// Backends: `host` (MPI processes, host memory, MPI_Isend/MPI_Irecv), `cuda` (every GPU a virtual
// rank in one process on one device, device-to-device copies on streams, fill/check kernels) and
// `nccl` (one process per GPU, grouped ncclSend/ncclRecv per step). GPUs of the scenario (the union
// of the source and destination GPU lists, sorted) are dealt to processes round-robin: GPU number i
// runs in process i mod world size; one process per GPU is the normal case.
//
// A step is a dependency depth: depth(op) = 0 without `after`, else 1 + the largest depth of the
// operations in `after`. The nccl backend runs one grouped send/receive per step.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "reshard/model/errors.hpp"
#include "reshard/model/scenario.hpp"
#include "reshard/model/schedule.hpp"

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

// ---- The pattern --------------------------------------------------------------------------------

// 64 hash bits of (tensor, global row-major element index); splitmix64 finaliser.
std::uint64_t pattern_word(std::int32_t tensor, std::int64_t index);
// The element's bytes (element_size <= 8): the low bytes of pattern_word with bit 0 of byte 0 set,
// so no element is ever all zero.
void pattern_bytes(std::int32_t tensor, std::int64_t index, int element_size, unsigned char* out);

// ---- Programs -----------------------------------------------------------------------------------

struct Region {
  enum class Kind : std::uint8_t { Source, Destination, Send, Receive } kind = Kind::Source;
  std::int32_t tensor = -1;  // Source/Destination: the shard
  model::Box box;
  std::int64_t op = -1;      // Send/Receive: the operation
  std::int64_t bytes = 0;
};

// bytes [src_offset, +bytes) of region src -> [dst_offset, +bytes) of region dst (same GPU).
struct CopyRun {
  std::int32_t src = -1, dst = -1;
  std::int64_t src_offset = 0, dst_offset = 0, bytes = 0;
};

struct Transfer {
  std::int64_t op = -1;
  model::GpuId peer = -1;           // the other GPU
  std::int32_t region = -1;         // send or receive staging region
  std::vector<CopyRun> copies;      // pack (send) or unpack (receive)
};

struct GpuProgram {
  model::GpuId gpu = -1;
  std::vector<Region> regions;
  std::vector<CopyRun> local;       // pieces held as source and needed as destination here
  std::vector<Transfer> sends;      // in op id order
  std::vector<Transfer> receives;   // in op id order
  std::int64_t destination_bytes = 0;
};

// Everything a run needs, built once (the same on every process).
struct RunPlan {
  const model::LoadedScenario* scenario = nullptr;
  const model::TransferSet* transfers = nullptr;
  const model::Schedule* schedule = nullptr;
  std::vector<model::GpuId> gpus;      // sorted: the source and destination GPUs, and relay GPUs ops use
  std::vector<std::int32_t> step_of;   // per op: dependency depth
  std::int32_t steps = 0;
  std::vector<std::int32_t> piece_source_shard;       // per piece: index in source.shards(tensor)
  std::vector<std::int32_t> piece_destination_shard;  // per piece: index in destination.shards(tensor)
  std::int32_t gpu_index(model::GpuId g) const;       // position in gpus (process = index mod world)
};

// Checks that the schedule belongs to the scenario (piece count, every op GPU in the scenario,
// buffers and parts in range) and validates it: ScheduleError before anything runs.
RunPlan make_run_plan(const model::LoadedScenario& sc, const model::TransferSet& ts, const model::Schedule& s);
GpuProgram build_program(const RunPlan& plan, model::GpuId gpu);

// ---- Faults (test-only injection) --------------------------------------------------------------

struct Fault {
  enum class Kind : std::uint8_t { Corrupt, Die, Kill, Drop } kind = Kind::Corrupt;
  std::int64_t target = 0;  // Corrupt, Drop: an op id; Die, Kill: a process rank
};
// "corrupt:OP" flips a byte the receiver of OP got; "die:RANK" makes that process go silent before
// its sends (it answers nobody, as a dead peer the launcher has not noticed); "kill:RANK" kills it
// with SIGKILL before its sends (the launcher notices and ends the job); "drop:OP" never sends OP.
// Throws ConfigError on other text.
Fault parse_fault(const std::string& text);

// ---- Measurements -------------------------------------------------------------------------------

struct OpTiming {
  double start_s = -1, end_s = -1;  // from the common start; -1: not run here
};

struct Measurement {
  std::string scenario_path;   // absolute
  std::string backend;
  std::string profile = "reshard";
  std::int32_t ranks = 0;      // processes
  model::Schedule schedule;    // embedded, so check/calibrate rebuild nothing by guesswork
  std::vector<OpTiming> ops;   // per op id
  double elapsed_s = 0;
  std::int64_t bytes_verified = 0;
  bool verified = false;
};

nlohmann::json to_json(const Measurement& m, const RunPlan& plan);
// Reads a Measurement file (throws ConfigError naming the file and key).
Measurement load_measurement(const std::filesystem::path& path);

struct StepComparison {
  std::int32_t step = 0;  // -1: the whole run
  std::int64_t ops = 0;
  std::int64_t bytes = 0;
  double predicted_s = 0, measured_s = 0;
  double error() const { return predicted_s > 0 ? (measured_s - predicted_s) / predicted_s : 0; }
};
// The Prediction (model::estimate with CostParams::profile_named(profile)) of each step's operations
// alone, and of the whole schedule, against the measured span of the step (last end - first start).
std::vector<StepComparison> compare_with_prediction(const Measurement& m);

// ---- Running ------------------------------------------------------------------------------------

struct ExecOptions {
  std::string backend = "host";  // host, cuda, nccl
  double timeout_s = 30;
  std::vector<Fault> faults;
  std::string profile = "reshard";
  std::string scenario_path;
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
