// Schedules (docs/design.md, "Schedules"); the strategies that build them: model/strategies.hpp.
//
// A Schedule is a DAG of operations. An operation moves one part of a packed buffer:
//   transfer     from GPU `src` to GPU `dst` (src != dst), over the route the topology gives for
//                the pair;
//   local copy   src == dst, over the GPU's memory;
//   chain        (`chain` >= 0) along a pipelined chain: a tree of hops rooted at `src` (a ring, a
//                domain chain, a domain chain with NVLink fan-outs), moved in chunks, every GPU
//                forwarding a chunk to its children as soon as it has it (Chain, below).
// A buffer carries slices of pieces: a slice is a run of elements of the piece's box in row-major
// order. The ids of the operations an operation waits for (its `after` ids) lie in one pool the
// schedule owns, Schedule::after, op by op (Schedule::after_of); ids are dense and every `after` id
// is smaller than the operation's own id, so the DAG is acyclic by construction and an executor
// can post operations in id order. Operations are not merged by GPU pair: a send is one per piece
// class (pieces with the same holders and needers) and needer, a gather one per holder and bucket,
// a chain op one per stripe and chain or per bucket and channel, so several operations may move
// bytes between the same pair in the same step (op_steps), each with its own buffer.
//
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "reshard/model/defaults.hpp"
#include "reshard/model/planner.hpp"
#include "reshard/model/strategy_params.hpp"

namespace reshard::model {

struct PieceSlice {
  std::int32_t piece = -1;
  std::int64_t offset = 0;  // first element, row-major within the piece's box
  std::int64_t count = 0;   // elements
  bool operator==(const PieceSlice&) const = default;
};

// A packed buffer: slices of pieces, concatenated. Operations move whole buffers or parts of them,
// and a buffer forwarded along a chain keeps its content, so part c of one hop is part c of the next.
struct Buffer {
  std::vector<PieceSlice> slices;
  Bytes bytes;
  bool operator==(const Buffer&) const = default;
};

// The part of its strategy an operation plays: Direct, direct's send from a holder to a needer;
// Gather, a holder's send to a broadcast head; Broadcast, a broadcast ring; Ingress, a chain op
// entering remote NVLink domains at ingress GPUs, which forward it (to their domain's other needers
// and to the next domain's ingress); FanOut, a send from a holder inside the needer's own domain.
enum class OpPhase : std::uint8_t { Direct, Gather, Broadcast, Ingress, FanOut };

// The one table of the phases (schedule.cpp): each phase's name (JSON schedules, reports) and its
// stable id, the byte a binary schedule file stores (docs/schedule-format.md). Ids are never
// reused: a new phase takes a new id, whatever its place in the enum; id 5 was `forward`, a phase
// no strategy produced, and stays reserved. Pinned by ScheduleFileFormat.PhaseIdsArePinned.
struct OpPhaseInfo {
  OpPhase phase;
  const char* name;
  std::uint8_t id;
};
std::span<const OpPhaseInfo> op_phases();
// The phase stored as `id` / called `name`; nullopt for an id or a name no phase has.
std::optional<OpPhase> op_phase_with_id(std::uint8_t id);
std::optional<OpPhase> op_phase_named(std::string_view name);
std::uint8_t stable_id(OpPhase p);

// One hop of a chain: `from` sends every chunk it has to `to`, over path `path` of the pair's
// equal-cost paths (Topology::route), or a path picked by the pair (model/chain.hpp) when -1.
struct ChainHop {
  GpuId from = -1;
  GpuId to = -1;
  std::int32_t path = -1;
  bool operator==(const ChainHop&) const = default;
};

// A pipelined chain: the tree of hops a buffer part travels from its root (the op's `src`), and the
// chunk it is moved in.
//   Shape: hops[0].from is the root; every other hop's `from` is the root or the `to` of an earlier
//   hop; every `to` appears once and is not the root. Depth H: the hops on the longest
//   root-to-leaf path (a ring over n GPUs: n - 1; holder -> ingress -> fan-out: 2).
//   Chunks: the root packs the part (the buffer's elements of for_each_in_part, in order, each at
//   its dtype's size) into B bytes; chunk k is bytes [k c, min((k + 1) c, B)) of that stream, c =
//   `chunk`. A GPU forwards chunk k to its children once it has received it, with at most
//   Schedule::slots chunks in flight on a hop (its ring, model/memory.hpp); every `to` ends up
//   with all B bytes.
//   Route, rate, time and order: model/chain.hpp.
struct Chain {
  std::vector<ChainHop> hops;
  Bytes chunk = kDefaultChunk;
  bool operator==(const Chain&) const = default;
};
// kChainSlots, kMinSlots, kMaxSlots: model/defaults.hpp.
const char* to_string(OpPhase p);

// Moves part `part` of `parts` equal parts (by element, in slice order) of buffer `buffer` from GPU
// `src` to GPU `dst`, or along chain `chain` from its root `src`, once every operation it waits for
// has finished. A chain op's `dst` is its last hop's `to`.
// Its dependencies are not in the op: they are the `after_count` ids from entry `after_begin` of
// its schedule's pool, Schedule::after (read them with Schedule::after_of, add an op with them by
// Schedule::add_op), so an op is a plain value of fixed size.
struct Op {
  std::int64_t id = -1;
  GpuId src = -1;
  GpuId dst = -1;
  std::int32_t chain = -1;  // index into Schedule::chains; -1: a transfer or a local copy
  std::int32_t buffer = -1;
  std::int32_t part = 0;
  std::int32_t parts = 1;
  Bytes bytes;
  std::int64_t after_begin = 0;  // first entry of its `after` ids in Schedule::after
  std::int32_t after_count = 0;  // how many
  OpPhase phase = OpPhase::Direct;
  bool operator==(const Op&) const = default;
};

struct Schedule {
  std::string scenario;
  // The scenario file the schedule was built from, relative to the schedule file's folder, as
  // `plan -o` records it (a Measurement records its scenario the same way); "" when unknown.
  std::string scenario_file;
  StrategyParams params;
  std::int32_t piece_count = 0;
  std::vector<Buffer> buffers;
  std::vector<Chain> chains;
  std::vector<Op> ops;
  // Every op's `after` ids, op by op in op order: op i's entries follow op i - 1's (add_op lays them
  // out so; every reader builds the schedule with it), so equal schedules have equal pools.
  std::vector<std::int64_t> after;
  // Staging (model/memory.hpp): every operation streams through a ring of `slots` chunks at each of
  // its GPUs; `budget` is the staging memory each GPU may hold (index GpuId; empty, or 0 for a GPU:
  // unbounded), which sets the steps the executors run the operations in (op_steps).
  std::int32_t slots = kChainSlots;
  std::vector<Bytes> budget;
  bool operator==(const Schedule&) const = default;

  // Appends `op` as operation ops.size() (its id, returned) waiting for the operations `ids`
  // (append_op). Nothing else is checked (op_problem is the readers' check).
  std::int64_t add_op(Op op, std::span<const std::int64_t> ids);
  // The ids `op` (an op of this schedule whose range op_problem accepted) waits for.
  std::span<const std::int64_t> after_of(const Op& op) const {
    return {after.data() + op.after_begin, static_cast<std::size_t>(op.after_count)};
  }
};

// Appends `op` to `ops` with its `after` ids `ids` at the end of the pool `after` (the layout of
// Schedule and RankSchedule). ScheduleError for more ids than an op's 32-bit count holds.
void append_op(std::vector<Op>& ops, std::vector<std::int64_t>& after, Op op, std::span<const std::int64_t> ids);

// Calls f(piece, begin, end) for the element ranges [begin, end) of each slice that part `part` of
// `parts` of buffer `b` covers, in slice order. Part c covers the buffer's elements
// [total * c / parts, total * (c + 1) / parts) (total = the sum of the slice counts), so parts
// differ by at most one element and tile the buffer. Executors and the validator share this rule.
template <class F>
void for_each_in_part(const Buffer& b, std::int32_t part, std::int32_t parts, F&& f) {
  std::int64_t total = 0;
  for (const auto& s : b.slices) total += s.count;
  const std::int64_t lo = total * part / parts, hi = total * (part + 1) / parts;
  std::int64_t pos = 0;
  for (const auto& s : b.slices) {
    const std::int64_t a = lo > pos ? lo : pos, e = hi < pos + s.count ? hi : pos + s.count;
    if (a < e) f(s.piece, s.offset + (a - pos), s.offset + (e - pos));
    pos += s.count;
    if (pos >= hi) break;
  }
}

// Checks a schedule against its transfer set: every needer GPU receives every element of every
// piece it needs exactly once (unless it already holds it as a source), a GPU sends only what it
// holds as a source or received in an operation it waits for (a chain's inner GPUs forward what
// the chain brought them), chains are trees rooted at their op's src, `after` ids precede, bytes
// match the slices. Throws ScheduleError naming the operation, the piece and the GPU.
void validate(const Schedule& s, const TransferSet& ts, const Inventory& inv, const ShardMap& src, const ShardMap& dst);

// A delta refit (model/delta.hpp): every buffer's and every operation's bytes become what their
// element ranges travel as, the sum over the ranges (for_each_in_part) of Inventory::wire_bytes --
// the bytes validate checks. Each distinct part is summed once. Nothing changes without a delta.
void encode_delta(Schedule& s, const TransferSet& ts, const Inventory& inv);

// The op list's shape, checked the same way by everything that reads a schedule (validate, the
// simulator, the executors' run plan) before it trusts op i: its id is i (ids dense and
// ascending); its `after` range lies in Schedule::after and every id in it names an earlier op;
// `chain` is -1 or one of the schedule's chains; bytes >= 0; src and dst are GPUs 0..gpu_count-1
// (gpu_count < 0: not checked); with `content`, `buffer` is one of the schedule's buffers and
// 0 <= part < parts <= kMaxParts (the simulator reads only bytes and skips this). Returns what is
// wrong, or an empty string.
std::string op_problem(const Schedule& s, std::size_t i, std::int32_t gpu_count, bool content);

// Schedule::budget as runs of equal budgets on consecutive GPUs (how the files store it).
struct BudgetRun {
  GpuId first = 0;
  GpuId count = 0;
  Bytes bytes;
};
std::vector<BudgetRun> budget_runs(const std::vector<Bytes>& budget);

nlohmann::json to_json(const Schedule& s);
// Every GPU an operation or chain hop names is one of the topology's 0..gpu_count-1 (ScheduleError).
void check_schedule_gpus(const Schedule& s, std::int32_t gpu_count);

// Reads a schedule written by to_json. A malformed document or a value out of range (an index that
// points nowhere, a bool or float for an integer) is a ConfigError naming `file` and the JSON path
// (`path` prefixes it, for a schedule embedded in another document).
Schedule schedule_from_json(const nlohmann::json& j, const std::string& file = "", const std::string& path = "");
// Reads a schedule file, JSON or binary (schedule_file.hpp: told apart by the binary format's
// magic); an unreadable file, bad JSON, a truncated or corrupt binary file or a malformed schedule
// is a ConfigError naming the file. Whether it matches a scenario is for the caller to check.
Schedule read_schedule_file(const std::string& path);

}  // namespace reshard::model
