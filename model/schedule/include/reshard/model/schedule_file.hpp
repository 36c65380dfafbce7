// Schedule files (docs/schedule-format.md): JSON (`reshard-schedule-4`, schedule.hpp's to_json)
// and the compact binary format `reshard-schedule-bin`, fixed-width little-endian records with an
// index by GPU, so a process of a run reads the operations its GPU takes part in and nothing else.
// Readers tell the formats apart by the binary format's magic, never by the file's name.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "reshard/model/schedule.hpp"

namespace reshard::model {

// The binary format's first 8 bytes and the version this reshard writes and reads; a file of a
// newer version is refused with a message saying so.
inline constexpr char kScheduleMagic[8] = {'R', 'S', 'H', 'D', 'S', 'C', 'H', 'D'};
// Version 2 adds the content digest to version 1's header; version 3 the staging fields (slots,
// the budget runs) and a 144-byte header. All three are read.
inline constexpr std::uint32_t kScheduleBinaryVersion = 4;

// The binary file's bytes for `s` (docs/schedule-format.md). A schedule whose op list is malformed
// (op_problem, without content) or that names a negative GPU is a ScheduleError.
std::string schedule_to_binary(const Schedule& s);
// Reads the bytes of a binary schedule file; `file` names it in messages. The content digest is
// checked first (version 2), then every count, offset and index against the header and the
// sections before it is used: a truncated, changed or corrupt file is one ConfigError naming the
// file, the record (ops[17].chain, header.digest) and what is wrong.
Schedule schedule_from_binary(const std::string& bytes, const std::string& file = "");

// The content digest the binary file of `s` carries (FNV-1a over 64 bits of the file's bytes, its
// own 8 header bytes read as zero): equal digests mean, short of a deliberate collision, the same
// schedule.
std::uint64_t binary_digest(const Schedule& s);
// Writes the content digest of `bytes` (a binary schedule file of version 2, at least the 128-byte
// header) into its header: for tools and tests that change a file on purpose.
void stamp_binary_digest(std::string& bytes);

// What a binary file's header says, read without the rest of the file: enough to rebuild the
// schedule from its scenario and strategy and to tell whether the rebuilt one is the file's
// (binary_digest(rebuilt) == digest). Errors as schedule_from_binary's for the header.
struct ScheduleFileHeader {
  std::string scenario;
  std::string scenario_file;  // Schedule::scenario_file (version 4; "" before)
  StrategyParams params;
  std::int32_t piece_count = 0;
  std::int64_t op_count = 0;
  std::uint64_t digest = 0;  // 0: a version 1 file, which carries none
  std::int32_t slots = kChainSlots;  // Schedule::slots
  std::vector<Bytes> budget;         // Schedule::budget
  std::int64_t bytes_read = 0, file_bytes = 0;
};
ScheduleFileHeader read_schedule_header(const std::string& path);

// Whether `path` starts with the binary format's magic (false for a file that cannot be read).
bool is_binary_schedule_file(const std::string& path);

// Writes `s` to `path`: JSON when the name ends in ".json", the binary format otherwise.
// ConfigError when the file cannot be written.
void write_schedule_file(const std::string& path, const Schedule& s);

// The operations one GPU takes part in (it sends, receives, or is a hop of the op's chain), with
// what they name: ids as in the whole schedule (ascending), the buffers and chains they use (ids
// ascending, `buffer_ids[k]` is `buffers[k]`'s id in the whole schedule). The ops' `after` ids
// (ids in the whole schedule) lie in `after`, op by op, as in Schedule.
struct RankSchedule {
  GpuId gpu = -1;
  std::string scenario;
  StrategyParams params;
  std::int32_t piece_count = 0;
  std::int32_t slots = kChainSlots;  // Schedule::slots
  std::vector<Bytes> budget;         // Schedule::budget (every GPU's)
  std::int64_t op_count = 0;  // operations in the whole schedule
  std::vector<Op> ops;
  std::vector<std::int64_t> after;
  std::vector<std::int32_t> buffer_ids;
  std::vector<Buffer> buffers;
  std::vector<std::int32_t> chain_ids;
  std::vector<Chain> chains;
  // Read from the file: the bytes read, and the file's size (0 for rank_schedule()).
  std::int64_t bytes_read = 0;
  std::int64_t file_bytes = 0;

  // Appends `op` (its id as in the whole schedule) waiting for the operations `ids` (append_op).
  void add_op(Op op, std::span<const std::int64_t> ids);
  std::span<const std::int64_t> after_of(const Op& op) const {  // as Schedule::after_of
    return {after.data() + op.after_begin, static_cast<std::size_t>(op.after_count)};
  }
  const Buffer& buffer(std::int32_t id) const;  // by id in the whole schedule (out_of_range if absent)
  const Chain& chain(std::int32_t id) const;
  bool operator==(const RankSchedule& o) const {  // the content, not how it was read
    return gpu == o.gpu && scenario == o.scenario && params == o.params && piece_count == o.piece_count && slots == o.slots &&
           budget == o.budget &&
           op_count == o.op_count && ops == o.ops && after == o.after && buffer_ids == o.buffer_ids &&
           buffers == o.buffers && chain_ids == o.chain_ids && chains == o.chains;
  }
};

// Whether `gpu` takes part in `op`: its src or dst, or any GPU of its chain.
bool takes_part(const Schedule& s, const Op& op, GpuId gpu);
// `s` filtered to one GPU's operations (the rule the file's index is written by).
RankSchedule rank_schedule(const Schedule& s, GpuId gpu);
// One GPU's operations read from a schedule file: from a binary file, the header, the GPU's index
// entry and the records it names (a few KB of a file of MB); from a JSON file, the whole document,
// filtered. Errors as read_schedule_file.
RankSchedule read_rank_schedule(const std::string& path, GpuId gpu);

}  // namespace reshard::model
