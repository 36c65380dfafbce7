// The executor (docs/design.md §10): runs a Schedule's operations for real, verifies every destination
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
// A chain op (model::Op::chain >= 0) is a tree of hops rooted at the op's src, moved in chunks. Its
// GPUs take three roles, all with one staging region of the part's B bytes (never one per chunk):
//   root   a send: packs the part, sends every chunk to each child;
//   inner  a receive with children: receives every chunk from its parent into its region and
//          forwards each chunk to its children as soon as it has it, then unpacks;
//   leaf   a receive without children: receives every chunk, unpacks.
// Chunk k is bytes [k c, min((k + 1) c, B)) of the region (chain_chunk below); a hop keeps at most
// model::kChainSlots chunks in flight. Chain ops on one chain run in op-id order on every GPU of it.
//
// Source shards are filled with pattern(tensor, global element index): a hash of both, never zero
// (byte 0 has its low bit set), written in the tensor's dtype size as raw bytes. After the run every
// destination shard element must equal the pattern of its global index. With a precision change
// (model/precision.hpp; host backend only) the weights it quantises hold BF16 values derived from
// the pattern, the source quantises its shards, the destination those that came in BF16, and every
// FP8 byte and scale must equal a reference quantiser's (exec/src/quantize.hpp).
//
// Backends: `host` (MPI processes, host memory, MPI_Isend/MPI_Irecv), `cuda` (every GPU a virtual
// rank in one process on one device, device-to-device copies on streams, fill/check kernels) and
// `nccl` (one process per GPU, grouped ncclSend/ncclRecv per step, a chain op in waves of chunks).
// GPUs of the scenario (the union of the source and destination GPU lists and every GPU an
// operation or a chain passes through, sorted) are dealt to processes round-robin: GPU number i
// runs in process i mod world size; one process per GPU is the normal case.
//
// A step is a dependency depth: depth(op) = 0 without `after`, else 1 + the largest depth of the
// operations in `after`; a chain op is also no shallower than the previous op on its chain (they
// share a step and run in order within it). The nccl backend runs one grouped send/receive per step
// (per chunk wave within a step that has chain ops).
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "reshard/model/errors.hpp"
#include "reshard/model/memory.hpp"
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

// One operation as one GPU runs it. A plain transfer: a send (peer = the receiver) or a receive
// (peer = the sender). A chain op: the root's send (peer = -1), or the receive of an inner GPU or a
// leaf (peer = its parent in the tree); `children` are the GPUs it sends every chunk to (the root's
// and an inner GPU's children, in hop order; none for a leaf or a plain transfer).
struct Transfer {
  std::int64_t op = -1;
  model::GpuId peer = -1;           // the other GPU; a chain op: the parent (-1 at the root)
  std::int32_t region = -1;         // send or receive staging region
  std::vector<CopyRun> copies;      // pack (send) or unpack (receive)
  std::int32_t chain = -1;          // model::Op::chain
  std::int64_t chunk = 0;           // a chain op's chunk (bytes)
  std::vector<model::GpuId> children;
  bool is_chain() const { return chain >= 0; }
};

// Chunks of a chain op: chunk k covers bytes [begin, begin + bytes) of the packed part of B bytes,
// [k c, min((k + 1) c, B)); there are ceil(B / c) of them (none when B is 0).
struct ChunkRange {
  std::int64_t begin = 0, bytes = 0;
};
inline std::int64_t chain_chunks(std::int64_t part_bytes, std::int64_t chunk) {
  return part_bytes <= 0 ? 0 : (part_bytes + chunk - 1) / chunk;
}
inline ChunkRange chain_chunk(std::int64_t part_bytes, std::int64_t chunk, std::int64_t k) {
  const std::int64_t b = k * chunk;
  return {b, std::min(chunk, part_bytes - b)};
}

struct GpuProgram {
  model::GpuId gpu = -1;
  std::vector<Region> regions;
  std::vector<CopyRun> local;       // pieces held as source and needed as destination here
  std::vector<Transfer> sends;      // in op id order: plain sends and the chain ops it is the root of
  std::vector<Transfer> receives;   // in op id order: plain receives and the chain ops it is inside
  std::int64_t destination_bytes = 0;
};

// Everything a run needs, built once (the same on every process).
struct RunPlan {
  const model::LoadedScenario* scenario = nullptr;
  const model::TransferSet* transfers = nullptr;
  const model::Schedule* schedule = nullptr;
  std::vector<model::GpuId> gpus;      // sorted: the source and destination GPUs, and relay GPUs ops use
  std::vector<std::int32_t> step_of;   // per op: its step (op_steps)
  std::int32_t steps = 0;
  std::vector<std::int64_t> chain_prev;  // per op: the previous op on its chain (-1: none, or not a chain op)
  std::vector<std::int32_t> piece_source_shard;       // per piece: index in source.shards(tensor)
  std::vector<std::int32_t> piece_destination_shard;  // per piece: index in destination.shards(tensor)
  std::int32_t gpu_index(model::GpuId g) const;       // position in gpus (process = index mod world)
};

// The step of every operation (model/memory.hpp).
using model::op_steps;

// Checks that the schedule belongs to the scenario (piece count, every op GPU and every chain hop
// GPU in the scenario's topology, chains, buffers and parts in range) and validates it:
// ScheduleError before anything runs.
RunPlan make_run_plan(const model::LoadedScenario& sc, const model::TransferSet& ts, const model::Schedule& s);
GpuProgram build_program(const RunPlan& plan, model::GpuId gpu);

// The waves of one step of the nccl backend: each wave is one grouped send/receive. Plain
// operations move in wave 0. A chain op moves chunk c over hop h in wave offset + c + depth[h] - 1
// (depth: hops from the root to the hop's `to`), so a GPU receives a chunk in one wave and forwards
// it in the next, and no wave both receives and sends the same bytes of a GPU. The ops of one chain
// follow each other: the next one's offset is the wave after the previous one's last chunk left the
// root. `ops` are the step's operations (or the ones a process takes part in), ascending; the
// waves of a chain op depend only on the ops of its chain, so every process computes the same.
struct ChainWaves {
  std::int64_t op = -1;
  std::int64_t offset = 0;          // the wave chunk 0 leaves the root in
  std::int64_t chunks = 0;
  std::vector<std::int32_t> depth;  // per hop
  // The chunk hop h moves in `wave`, or -1.
  std::int64_t chunk_in(std::size_t hop, std::int64_t wave) const {
    const std::int64_t c = wave - offset - (depth[hop] - 1);
    return c >= 0 && c < chunks ? c : -1;
  }
  // The wave hop h's chunk c arrives in (chunk 0's wave when the op has no chunk).
  std::int64_t wave_of(std::size_t hop, std::int64_t chunk) const {
    return chunks == 0 ? 0 : offset + chunk + depth[hop] - 1;
  }
};
struct StepWaves {
  std::int64_t waves = 1;
  std::vector<ChainWaves> chains;  // the chain ops among `ops`, in id order
};
StepWaves step_waves(const model::Schedule& s, const std::vector<std::int64_t>& ops);

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
std::int64_t corrupt_offset(const std::vector<Fault>& faults, const Transfer& receive);

// ---- Measurements -------------------------------------------------------------------------------

// A plain transfer: start = the sender posted it, end = the receiver has it. A chain op: start = the
// root posted its first chunk, end = the last GPU of the tree has every chunk (merged over ranks:
// the latest).
struct OpTiming {
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
  std::string profile = "reshard";
  std::string params_file;     // absolute; a cost parameters file (`--params`) that replaces the profile
  std::int32_t ranks = 0;      // processes
  model::Schedule schedule;    // embedded, so check/calibrate rebuild nothing by guesswork
  std::vector<OpTiming> ops;   // per op id
  double elapsed_s = 0;
  std::int64_t bytes_verified = 0;
  bool verified = false;
  // The staging memory each GPU held at most (the host backend counts the bytes it allocates for
  // send and receive regions; empty: the backend does not measure it), by GPU.
  std::vector<GpuStaging> staging;
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

struct ExecOptions {
  std::string backend = "host";  // host, cuda, nccl
  double timeout_s = 30;
  std::vector<Fault> faults;
  std::string profile = "reshard";
  std::string params_file;  // `--params`, absolute ("" for none)
  std::string scenario_path;
  std::vector<std::string> scenario_sets;
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
