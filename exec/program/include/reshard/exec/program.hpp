// The per-GPU program (docs/execution.md): what one GPU of a run holds and copies, computed once
// from (scenario, transfer set, schedule) and the one definition of what moves, shared by every
// backend (exec/backend.hpp), memory binding (exec/binding.hpp) and verification
// (exec/verify.hpp).
//
// A GPU holds regions: its source shards, its destination shards, and one staging region per
// operation it sends or receives. Copy runs move bytes between them:
//   pack    source shards / kept receive regions -> the chunk slots of an operation's stream
//   unpack  the chunk slots of an operation's stream -> destination shards that need its elements
//   local   source shards -> destination shards, for pieces the GPU already holds (colocated)
// An operation moves part `part` of `parts` of its buffer (model::for_each_in_part); a slice is a
// run of elements of a piece's box in row-major order, and a piece is the intersection of one
// source shard and one destination shard, so every run maps to contiguous rows of both shards.
//
// Every operation is a stream (model/memory.hpp): its part, B bytes, moves in chunks of c bytes
// (model::stream_chunk) along a tree of hops: a chain op's tree, a plain transfer's one hop from src
// to dst. A GPU's role in it:
//   sender     (root, a transfer's src) packs chunk k into slot k mod S of its ring and sends it
//              to each child; the slot is free again once chunk k has left for every child;
//   receiver   (a transfer's dst, a chain hop's `to`) receives chunk k into slot k mod S, forwards
//              it to its children, unpacks what it needs of it; the slot is free again once chunk k
//              is forwarded and unpacked.
// A ring holds S = Schedule::slots chunks (min(B, S c) bytes); a kept receive (one a later
// operation of this GPU packs from, model::kept_receives) holds the whole part, chunk k at k c.
// Copy runs are written in stream coordinates: a send's dst_offset and a receive's src_offset
// are byte offsets in the B-byte stream, in stream order; OpStream::slot_offset maps stream bytes
// to the region, for_each_chunk_copy slices the runs of one chunk.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "reshard/model/memory.hpp"
#include "reshard/model/scenario.hpp"
#include "reshard/model/schedule.hpp"

namespace reshard::exec {

struct Region {
  enum class Kind : std::uint8_t { Source, Destination, Send, Receive } kind = Kind::Source;
  std::int32_t tensor = -1;  // Source/Destination: the shard
  model::Box box;
  std::int64_t op = -1;      // Send/Receive: the operation
  std::int64_t bytes = 0;    // a shard's bytes; a staging region's: its ring, or the whole part when kept
};

// bytes [src_offset, +bytes) of region src -> [dst_offset, +bytes) of region dst (same GPU).
struct CopyRun {
  std::int32_t src = -1, dst = -1;
  std::int64_t src_offset = 0, dst_offset = 0, bytes = 0;
};

// `count` copy runs of `bytes` between two regions, the k-th at src_offset + k src_stride and
// dst_offset + k dst_stride (a box's rows in its shard); count 1: one run (strides 0).
struct StridedRun {
  std::int32_t src = -1, dst = -1;
  std::int64_t src_offset = 0, dst_offset = 0, bytes = 0, count = 1, src_stride = 0, dst_stride = 0;
  bool operator==(const StridedRun&) const = default;
};

// Appends the `count` runs of `first` at the given strides to `runs`, one by one, merging each with
// the previous one when both sides continue it (what the backends execute).
void add_runs(std::vector<CopyRun>& runs, const CopyRun& first, std::int64_t count, std::int64_t src_stride,
              std::int64_t dst_stride);

// The same runs kept as strided groups, in the one canonical form the plan file writes: the runs
// add_runs(std::vector<CopyRun>&, ...) would hold (merged where both sides continue), grouped
// greedily: a run joins the group before it when it has the group's regions and length and lies at
// the group's strides after its last run (the group's first two runs set the strides). Adding a
// group of any count costs the same: a program's size and build time grow with its boxes, not
// with their rows.
class StridedRuns {
 public:
  void add(const CopyRun& first, std::int64_t count = 1, std::int64_t src_stride = 0, std::int64_t dst_stride = 0);
  // The groups, once every run has been added.
  const std::vector<StridedRun>& groups();

 private:
  void group_row(const CopyRun& r);
  void group_rows(const CopyRun& first, std::int64_t count, std::int64_t src_stride, std::int64_t dst_stride);
  void close_group();
  std::vector<StridedRun> done_;
  StridedRun open_{.count = 0};    // the group runs join (count 0: none)
  CopyRun last_{};                 // the last run, still growing while the next continues it
  bool has_last_ = false;
};
inline void add_runs(StridedRuns& runs, const CopyRun& first, std::int64_t count, std::int64_t src_stride,
                     std::int64_t dst_stride) {
  runs.add(first, count, src_stride, dst_stride);
}

// Chunks of a stream: chunk k covers bytes [begin, begin + bytes) of the B-byte part,
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

// One operation's stream as one GPU runs it, for any operation: a transfer (model/schedule.hpp: an
// op without a chain) or a chain op. The sender's (peer = -1) or a receiver's (peer = its
// parent: a transfer's src, the chain hop's `from`); `children` are the GPUs it sends every chunk
// to (the sender's and an inner GPU's, in hop order; none for a leaf). A plain transfer is a
// stream of one hop: its sender's one child is its dst.
// `Runs`: the copy runs one by one (std::vector<CopyRun>: what the backends execute) or as
// strided groups (StridedRuns: what the plan file writes).
template <class Runs>
struct OpStreamOf {
  std::int64_t op = -1;
  model::GpuId peer = -1;
  std::int32_t region = -1;         // its staging region
  Runs copies;                      // pack (send) or unpack (receive), in stream coordinates
  std::int32_t chain = -1;          // model::Op::chain (-1: a plain transfer)
  std::int64_t chunk = 0;           // c
  std::int64_t bytes = 0;           // B, the part
  std::int32_t slots = 0;           // S; 0: kept (the region holds the whole part)
  std::vector<model::GpuId> children;
  std::int32_t hop = 0;             // a receiver: the index of the hop into this GPU (0 for a transfer)
  std::vector<std::int32_t> child_hops;  // per child: its hop's index (a transfer: 0)
  bool is_chain() const { return chain >= 0; }
  bool kept() const { return slots == 0; }
  std::int64_t chunks() const { return chain_chunks(bytes, chunk); }
  // Where stream byte `at` (in chunk at / c) lies in the region.
  std::int64_t slot_offset(std::int64_t at) const {
    if (kept()) return at;
    const std::int64_t k = at / chunk;
    return (k % slots) * chunk + (at - k * chunk);
  }
};
using OpStream = OpStreamOf<std::vector<CopyRun>>;

// Calls f(run) for the copy runs of chunk k of `t` (sliced to it), with the stream side mapped to
// the region (OpStream::slot_offset): a send's runs write chunk k's slot, a receive's read it.
template <class F>
void for_each_chunk_copy(const OpStream& t, bool send, std::int64_t k, F&& f) {
  const ChunkRange r = chain_chunk(t.bytes, t.chunk, k);
  auto at = [&](const CopyRun& c) { return send ? c.dst_offset : c.src_offset; };
  auto it = std::upper_bound(t.copies.begin(), t.copies.end(), r.begin,
                             [&](std::int64_t x, const CopyRun& c) { return x < at(c) + c.bytes; });
  for (; it != t.copies.end() && at(*it) < r.begin + r.bytes; ++it) {
    const std::int64_t lo = std::max(at(*it), r.begin), hi = std::min(at(*it) + it->bytes, r.begin + r.bytes);
    CopyRun c = *it;
    c.src_offset += lo - at(*it);
    c.dst_offset += lo - at(*it);
    c.bytes = hi - lo;
    (send ? c.dst_offset : c.src_offset) = t.slot_offset(lo);
    f(c);
  }
}

// Calls emit(shard_element_offset, piece_element, count) for the contiguous runs that elements
// [b, e) of `piece` (row-major in the piece's box) occupy in `shard` (row-major in the shard's
// box, which contains the piece's). A row of the piece (its last dimension) is contiguous in the
// shard; rows follow each other.
template <class F>
void piece_runs(const model::Box& piece, const model::Box& shard, std::int64_t b, std::int64_t e, F&& emit) {
  const std::size_t nd = piece.dims.size();
  if (nd == 0) {
    if (b < e) emit(std::int64_t{0}, b, e - b);
    return;
  }
  std::vector<std::int64_t> stride(nd, 1);
  for (std::size_t i = nd - 1; i > 0; --i) stride[i - 1] = stride[i] * shard.dims[i].size();
  const std::int64_t row_len = piece.dims[nd - 1].size();
  if (row_len <= 0) return;
  std::int64_t k = b;
  while (k < e) {
    const std::int64_t row = k / row_len, col = k % row_len, n = std::min(row_len - col, e - k);
    std::int64_t off = piece.dims[nd - 1].lo - shard.dims[nd - 1].lo + col, rest = row;
    for (std::size_t i = nd - 1; i > 0; --i) {
      const std::int64_t extent = piece.dims[i - 1].size();
      off += (piece.dims[i - 1].lo - shard.dims[i - 1].lo + rest % extent) * stride[i - 1];
      rest /= extent;
    }
    emit(off, k, n);
    k += n;
  }
}

// The same runs as piece_runs, grouped: calls emit(shard_element_offset, piece_element, count,
// rows, shard_stride) for `rows` runs of `count` elements, the i-th at shard_element_offset + i
// shard_stride in the shard and piece_element + i count in the piece: the whole rows of the piece
// along its second-to-last dimension (at the shard's stride of that dimension) are one group, a
// partial first or last row a group of its own. The groups depend on the piece's box and [b, e)
// alone, so the same elements walked in two shards give groups that match one for one.
template <class F>
void piece_row_groups(const model::Box& piece, const model::Box& shard, std::int64_t b, std::int64_t e, F&& emit) {
  const std::size_t nd = piece.dims.size();
  if (nd == 0) {
    if (b < e) emit(std::int64_t{0}, b, e - b, std::int64_t{1}, std::int64_t{0});
    return;
  }
  std::vector<std::int64_t> stride(nd, 1);
  for (std::size_t i = nd - 1; i > 0; --i) stride[i - 1] = stride[i] * shard.dims[i].size();
  const std::int64_t row_len = piece.dims[nd - 1].size();
  if (row_len <= 0) return;
  const std::int64_t block = nd >= 2 ? piece.dims[nd - 2].size() : 1;  // rows at one stride
  const std::int64_t row_stride = nd >= 2 ? stride[nd - 2] : 0;
  auto offset = [&](std::int64_t row, std::int64_t col) {
    std::int64_t off = piece.dims[nd - 1].lo - shard.dims[nd - 1].lo + col, rest = row;
    for (std::size_t i = nd - 1; i > 0; --i) {
      const std::int64_t extent = piece.dims[i - 1].size();
      off += (piece.dims[i - 1].lo - shard.dims[i - 1].lo + rest % extent) * stride[i - 1];
      rest /= extent;
    }
    return off;
  };
  std::int64_t k = b;
  while (k < e) {
    const std::int64_t row = k / row_len, col = k % row_len;
    if (col != 0 || e - k < row_len) {  // a partial row
      const std::int64_t n = std::min(row_len - col, e - k);
      emit(offset(row, col), k, n, std::int64_t{1}, std::int64_t{0});
      k += n;
      continue;
    }
    const std::int64_t rows = std::min((e - k) / row_len, block - row % block);
    emit(offset(row, 0), k, row_len, rows, row_stride);
    k += rows * row_len;
  }
}

template <class Runs>
struct ProgramOf {
  model::GpuId gpu = -1;
  std::vector<Region> regions;
  Runs local;                                  // pieces held as source and needed as destination here
  std::vector<OpStreamOf<Runs>> sends;         // in op id order: the streams it is the sender of
  std::vector<OpStreamOf<Runs>> receives;      // in op id order: the streams it receives
  std::int64_t destination_bytes = 0;
  // (piece, region): the pieces it holds as a source and those it needs as a destination, each
  // with its shard's region (what digest verification reads, exec/verify.hpp).
  std::vector<std::pair<std::int32_t, std::int32_t>> source_pieces, destination_pieces;
};
using GpuProgram = ProgramOf<std::vector<CopyRun>>;  // what the backends run
using StridedProgram = ProgramOf<StridedRuns>;       // the same program, its runs grouped (the plan file)

// Everything a run needs, built once (the same on every process).
struct RunPlan {
  const model::LoadedScenario* scenario = nullptr;
  const model::TransferSet* transfers = nullptr;
  const model::Schedule* schedule = nullptr;
  std::vector<model::GpuId> gpus;      // sorted: the source and destination GPUs, and relay GPUs ops use
  std::vector<std::int32_t> step_of;   // per op: its step (model::op_steps)
  std::int32_t steps = 0;
  std::vector<std::int64_t> chain_prev;  // per op: the previous op on its chain (-1: none, or not a chain op)
  std::vector<std::vector<model::GpuId>> kept;  // per op: the GPUs its receive is kept at (model::kept_receives)
  std::vector<std::int32_t> piece_source_shard;       // per piece: index in source.shards(tensor)
  std::vector<std::int32_t> piece_destination_shard;  // per piece: index in destination.shards(tensor)
  std::int32_t gpu_index(model::GpuId g) const;       // position in gpus (process = index mod world)
};

// Checks that the schedule belongs to the scenario (piece count, every op GPU and every chain hop
// GPU in the scenario's topology, chains, buffers and parts in range) and validates it:
// ScheduleError before anything runs.
RunPlan make_run_plan(const model::LoadedScenario& sc, const model::TransferSet& ts, const model::Schedule& s);
GpuProgram build_program(const RunPlan& plan, model::GpuId gpu);
// The same program with its runs as strided groups: expanded, each list is build_program's.
StridedProgram build_strided_program(const RunPlan& plan, model::GpuId gpu);

// The waves of one step of the nccl backend: each wave is one grouped send/receive. Stream c of an
// op moves chunk c over hop h in wave offset + c + depth[h] - 1 (depth: hops from the sender to the
// hop's `to`; a plain transfer's one hop has depth 1), so a GPU receives a chunk in one wave and
// forwards it in the next, and no wave both receives and sends the same bytes of a GPU (a ring of
// S >= 2 slots: chunk c + S lands in chunk c's slot S waves later, after chunk c was forwarded and
// unpacked). The ops of one chain follow each other: the next one's offset is the wave after the
// previous one's last chunk left the root. `ops` are the step's operations (or the ones a process
// takes part in), ascending; the waves of an op depend only on the ops of its chain, so every
// process computes the same.
struct StreamWaves {
  std::int64_t op = -1;
  std::int64_t offset = 0;          // the wave chunk 0 leaves the sender in
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
  std::vector<StreamWaves> streams;  // every op among `ops`, in id order
};
StepWaves step_waves(const model::Schedule& s, const std::vector<std::int64_t>& ops);
// The same over windows of `window(s, op)` (>= 1) chunks each (the nccl backend's, exec/step_lists.hpp):
// unit c of a stream is its chunks [c W, (c + 1) W), and StreamWaves::chunks counts windows.
StepWaves step_waves(const model::Schedule& s, const std::vector<std::int64_t>& ops,
                     std::int64_t (*window)(const model::Schedule&, const model::Op&));

}  // namespace reshard::exec
