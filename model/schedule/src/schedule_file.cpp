// The binary schedule format, `reshard-schedule-bin` version 4 (docs/schedule-format.md has the
// layout; the constants below are the one place it is written down in code).
#include "reshard/model/schedule_file.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <tuple>
#include <utility>
#include <nlohmann/json.hpp>

#include "reshard/model/checked.hpp"
#include "reshard/model/digest.hpp"
#include "reshard/model/errors.hpp"
#include "reshard/model/json_file.hpp"

namespace reshard::model {

namespace {

// Record sizes in bytes (docs/schedule-format.md, "Sections").
constexpr std::uint64_t kHeaderBytes = 144;    // version 3
constexpr std::uint64_t kHeaderBytesV2 = 128;  // versions 1 and 2 (no staging fields)
constexpr std::uint64_t kBudgetRunBytes = 16;
constexpr std::uint64_t kOpBytes = 48;
constexpr std::uint64_t kAfterBytes = 8;
constexpr std::uint64_t kChainBytes = 24;
constexpr std::uint64_t kHopBytes = 12;
constexpr std::uint64_t kBufferBytes = 24;
// A buffer's slices are stored in the narrowest of three forms that holds all of them: (i32 piece,
// u32 count) when every offset is 0, (i32 piece, u32 offset, u32 count), or (i32 piece, i64
// offset, i64 count).
constexpr std::uint64_t kSliceBytes[3] = {8, 12, 20};
constexpr std::uint64_t kIndexBytes = 16;
constexpr std::uint64_t kEntryBytes = 8;
constexpr std::uint8_t kFlagRailAligned = 1, kFlagRelayIngress = 2, kFlagRelayEgress = 4;
constexpr std::int32_t kI32 = std::numeric_limits<std::int32_t>::max();
constexpr std::size_t kDigestAt = 120;  // the header's content digest (version 2; 0 in version 1)

// ---- Little-endian encoding ---------------------------------------------------------------------

struct Writer {
  std::string out;
  void u8(std::uint8_t v) { out.push_back(static_cast<char>(v)); }
  void u16(std::uint16_t v) { put(v, 2); }
  void u32(std::uint32_t v) { put(v, 4); }
  void u64(std::uint64_t v) { put(v, 8); }
  void i32(std::int32_t v) { put(static_cast<std::uint32_t>(v), 4); }
  void i64(std::int64_t v) { put(static_cast<std::uint64_t>(v), 8); }
  void pad_to(std::size_t multiple) {
    while (out.size() % multiple) out.push_back('\0');
  }

 private:
  void put(std::uint64_t v, int n) {
    for (int k = 0; k < n; ++k) out.push_back(static_cast<char>((v >> (8 * k)) & 0xff));
  }
};

std::uint64_t get(const unsigned char* p, int n) {
  std::uint64_t v = 0;
  for (int k = 0; k < n; ++k) v |= static_cast<std::uint64_t>(p[k]) << (8 * k);
  return v;
}
std::uint32_t get_u32(const unsigned char* p) { return static_cast<std::uint32_t>(get(p, 4)); }
std::uint64_t get_u64(const unsigned char* p) { return get(p, 8); }
std::int32_t get_i32(const unsigned char* p) { return static_cast<std::int32_t>(get_u32(p)); }
std::int64_t get_i64(const unsigned char* p) { return static_cast<std::int64_t>(get_u64(p)); }

// ---- Layout ------------------------------------------------------------------------------------

// The header's counts and the sections' offsets they give.
struct Layout {
  std::uint32_t version = 0;
  std::uint64_t file_bytes = 0;
  std::int32_t piece_count = 0, gpu_count = 0;
  std::uint64_t ops = 0, after = 0, chains = 0, hops = 0, buffers = 0, slice_bytes = 0, entries = 0;
  StrategyParams params;
  std::uint32_t scenario_bytes = 0;
  std::uint64_t digest = 0;  // 0: none (version 1)
  std::uint64_t header_bytes = kHeaderBytes;
  std::int32_t slots = kChainSlots;   // version 3; versions 1 and 2: the default
  std::uint64_t budget_runs = 0;      // version 3
  // Section offsets.
  std::uint64_t scenario_at = kHeaderBytes, ops_at = 0, after_at = 0, chains_at = 0, hops_at = 0, buffers_at = 0,
                slices_at = 0, index_at = 0, entries_at = 0, budget_at = 0, end = 0;
};

// Errors name the file and the record: "FILE: ops[17].chain: no chain 99 (12 chains)".
struct Where {
  const std::string& file;
  [[noreturn]] void fail(const std::string& key, const std::string& what) const { throw ConfigError(file, 0, key, what); }
};

// The scenario section: the scenario's name, then (version 4) a newline and the scenario file
// relative to the schedule file ("" when unknown). A name holds no newline (a file stem or a
// `name:` line), so the first newline splits them.
std::string scenario_section(const std::string& name, const std::string& file) { return name + "\n" + file; }
std::pair<std::string, std::string> split_scenario_section(const std::string& text, const Layout& l) {
  if (l.version < 4) return {text, ""};
  const auto nl = text.find('\n');
  if (nl == std::string::npos) return {text, ""};
  return {text.substr(0, nl), text.substr(nl + 1)};
}

// Fills the offsets from the counts (sections in file order, the scenario name padded to 8 bytes).
// Returns false when they overflow 64 bits.
bool place(Layout& l) {
  std::uint64_t at = l.header_bytes;
  auto section = [&](std::uint64_t& offset, std::uint64_t count, std::uint64_t size) {
    offset = at;
    if (count > std::numeric_limits<std::uint64_t>::max() / size) return false;
    if (at > std::numeric_limits<std::uint64_t>::max() - count * size) return false;
    at += count * size;
    return true;
  };
  l.scenario_at = at;
  at += (static_cast<std::uint64_t>(l.scenario_bytes) + 7) / 8 * 8;
  const bool ok = section(l.ops_at, l.ops, kOpBytes) && section(l.after_at, l.after, kAfterBytes) &&
                  section(l.chains_at, l.chains, kChainBytes) && section(l.hops_at, l.hops, kHopBytes) &&
                  section(l.buffers_at, l.buffers, kBufferBytes) && section(l.slices_at, l.slice_bytes, 1) &&
                  section(l.index_at, static_cast<std::uint64_t>(l.gpu_count), kIndexBytes) &&
                  section(l.entries_at, l.entries, kEntryBytes) && section(l.budget_at, l.budget_runs, kBudgetRunBytes);
  l.end = at;
  return ok;
}

bool has_magic(const unsigned char* p, std::size_t n) { return n >= 8 && std::memcmp(p, kScheduleMagic, 8) == 0; }

// FNV-1a over the whole file with the digest's own 8 bytes read as zero.
std::uint64_t content_digest(std::string_view bytes) {
  Fnv1a h;
  h.add(bytes.substr(0, kDigestAt));
  h.add(std::string_view("\0\0\0\0\0\0\0\0", 8));
  h.add(bytes.substr(std::min(bytes.size(), kDigestAt + 8)));
  return h.value();
}

// The header of a file of `size` bytes, checked: magic, version, counts, and that the sections
// the counts give end exactly at the end of the file (so every later read is in bounds).
Layout read_header(const unsigned char* h, std::uint64_t size, const Where& w) {
  if (!has_magic(h, size)) w.fail("header", "not a binary schedule file (no 'RSHDSCHD' magic)");
  if (size < 16) w.fail("header", "truncated: " + std::to_string(size) + " bytes, shorter than the header");
  Layout l;
  l.version = get_u32(h + 8);
  if (l.version > kScheduleBinaryVersion)
    w.fail("header.version", "format version " + std::to_string(l.version) + " was written by a newer reshard; this one reads version " +
                                 std::to_string(kScheduleBinaryVersion) + " (write the schedule as JSON, or upgrade)");
  if (l.version == 0) w.fail("header.version", "format version 0 does not exist");
  l.header_bytes = l.version >= 3 ? kHeaderBytes : kHeaderBytesV2;
  if (size < l.header_bytes)
    w.fail("header", "truncated: " + std::to_string(size) + " bytes, shorter than the " + std::to_string(l.header_bytes) +
                         "-byte header");
  if (get_u32(h + 12) != l.header_bytes)
    w.fail("header.header_bytes", "is " + std::to_string(get_u32(h + 12)) + ", the header of version " +
                                      std::to_string(l.version) + " has " + std::to_string(l.header_bytes));
  l.file_bytes = get_u64(h + 16);
  if (l.file_bytes != size)
    w.fail("header.file_bytes", "the header gives " + std::to_string(l.file_bytes) + " bytes, the file has " +
                                    std::to_string(size) + " (truncated or appended to)");
  l.piece_count = get_i32(h + 24);
  l.gpu_count = get_i32(h + 28);
  if (l.piece_count < 0) w.fail("header.piece_count", "negative (" + std::to_string(l.piece_count) + ")");
  if (l.gpu_count < 0) w.fail("header.gpu_count", "negative (" + std::to_string(l.gpu_count) + ")");
  l.ops = get_u64(h + 32);
  l.after = get_u64(h + 40);
  l.chains = get_u64(h + 48);
  l.hops = get_u64(h + 56);
  l.buffers = get_u64(h + 64);
  l.slice_bytes = get_u64(h + 72);
  l.entries = get_u64(h + 80);
  if (l.chains > static_cast<std::uint64_t>(kI32)) w.fail("header.chain_count", "more chains than a 32-bit id names");
  if (l.buffers > static_cast<std::uint64_t>(kI32)) w.fail("header.buffer_count", "more buffers than a 32-bit id names");
  l.params.chunk = Bytes{get_i64(h + 88)};
  l.params.bucket = Bytes{get_i64(h + 96)};
  l.params.channels = get_i32(h + 104);
  l.params.max_chain = get_i32(h + 108);
  if (l.params.chunk.value < 0) w.fail("header.chunk_bytes", "negative");
  if (l.params.bucket.value < 0) w.fail("header.bucket_bytes", "negative");
  if (l.params.channels < 0) w.fail("header.channels", "negative");
  if (l.params.max_chain < 0) w.fail("header.max_chain", "negative");
  const std::uint8_t strategy = h[112], flags = h[113];
  const auto named = strategy_with_id(strategy);
  if (!named) {
    std::string ids;
    for (Strategy s : all_strategies())
      ids += std::string(ids.empty() ? "" : ", ") + std::to_string(traits(s).id) + " " + to_string(s);
    w.fail("header.strategy", "no strategy " + std::to_string(strategy) + " (the strategy ids: " + ids + ")");
  }
  l.params.strategy = *named;
  if (flags & ~(kFlagRailAligned | kFlagRelayIngress | kFlagRelayEgress)) w.fail("header.flags", "unknown flag bits");
  l.params.rail_aligned_ingress = flags & kFlagRailAligned;
  l.params.relay_ingress = flags & kFlagRelayIngress;
  l.params.relay_egress = flags & kFlagRelayEgress;
  l.scenario_bytes = get_u32(h + 116);
  if (l.version >= 3) {
    l.slots = static_cast<std::int32_t>(get(h + 114, 2));
    if (l.slots < kMinSlots || l.slots > kMaxSlots)
      w.fail("header.slots", std::to_string(l.slots) + " is outside " + std::to_string(kMinSlots) + ".." + std::to_string(kMaxSlots));
    l.budget_runs = get_u64(h + 128);
    if (get_u64(h + 136) != 0) w.fail("header.reserved", "is not 0");
  } else if (get(h + 114, 2) != 0) {
    w.fail("header.reserved", "is not 0");
  }
  l.digest = l.version >= 2 ? get_u64(h + kDigestAt) : 0;
  if (l.version >= 2 && l.digest == 0) w.fail("header.digest", "is 0; a version 2 file carries its content digest");
  if (!place(l)) w.fail("header", "the counts give a file of more than 2^64 bytes");
  if (l.end != size)
    w.fail("header", "the counts give a file of " + std::to_string(l.end) + " bytes, the file has " + std::to_string(size));
  return l;
}

// ---- Records -----------------------------------------------------------------------------------

// The staging budget runs (version 3): GPUs ascending and disjoint, each run at least one GPU.
std::vector<Bytes> decode_budget(const unsigned char* p, const Layout& l, const Where& w) {
  std::vector<Bytes> budget;
  for (std::uint64_t i = 0; i < l.budget_runs; ++i) {
    const unsigned char* r = p + kBudgetRunBytes * i;
    const std::int32_t first = get_i32(r), count = get_i32(r + 4);
    const std::int64_t bytes = get_i64(r + 8);
    const std::string key = "budget[" + std::to_string(i) + "]";
    if (first < static_cast<std::int32_t>(budget.size()) || first >= kMaxGpus)
      w.fail(key, "first GPU " + std::to_string(first) + " is not after the previous run's last");
    if (count < 1 || count > kMaxGpus - first) w.fail(key, "count " + std::to_string(count) + " is out of range");
    if (bytes < 0) w.fail(key, "negative budget");
    budget.resize(static_cast<std::size_t>(first), Bytes{0});
    budget.resize(static_cast<std::size_t>(first + count), Bytes{bytes});
  }
  return budget;
}

// Each decoder checks what the record names against the header's counts; the caller has checked
// that the record lies in the file.
struct OpRecord {
  Op op;
  std::uint64_t after_begin = 0;
  std::uint32_t after_n = 0;
};

std::string record(const char* section, std::uint64_t i) { return std::string(section) + "[" + std::to_string(i) + "]"; }

OpRecord decode_op(const unsigned char* p, std::int64_t id, const Layout& l, const Where& w) {
  OpRecord r;
  Op& op = r.op;
  op.id = id;
  op.src = get_i32(p);
  op.dst = get_i32(p + 4);
  op.chain = get_i32(p + 8);
  op.buffer = get_i32(p + 12);
  op.part = get_i32(p + 16);
  op.parts = get_i32(p + 20);
  op.bytes = Bytes{get_i64(p + 24)};
  r.after_begin = get_u64(p + 32);
  r.after_n = get_u32(p + 40);
  const std::uint8_t phase = p[44];
  const std::string key = record("ops", static_cast<std::uint64_t>(id));
  for (GpuId g : {op.src, op.dst})
    if (g < 0 || g >= l.gpu_count)
      w.fail(key, "GPU " + std::to_string(g) + " outside the file's GPUs 0.." + std::to_string(l.gpu_count - 1));
  if (op.chain < -1 || op.chain >= static_cast<std::int64_t>(l.chains))
    w.fail(key + ".chain", "no chain " + std::to_string(op.chain) + " (" + std::to_string(l.chains) + " chains)");
  if (op.buffer < 0 || op.buffer >= static_cast<std::int64_t>(l.buffers))
    w.fail(key + ".buffer", "no buffer " + std::to_string(op.buffer) + " (" + std::to_string(l.buffers) + " buffers)");
  if (op.parts < 1 || op.parts > kMaxParts || op.part < 0 || op.part >= op.parts)
    w.fail(key + ".part", "part " + std::to_string(op.part) + " of " + std::to_string(op.parts) + " is not a part (0 <= part < parts <= " +
                              std::to_string(kMaxParts) + ")");
  if (op.bytes.value < 0) w.fail(key + ".bytes", "negative");
  const auto named = op_phase_with_id(phase);
  if (!named) w.fail(key + ".phase", "no phase " + std::to_string(phase) + " (docs/schedule-format.md lists the phase ids)");
  op.phase = *named;
  if (r.after_begin > l.after || r.after_n > l.after - r.after_begin)
    w.fail(key + ".after", "entries " + std::to_string(r.after_begin) + "+" + std::to_string(r.after_n) + " outside the " +
                               std::to_string(l.after) + " of the after section");
  if (id == 0 && r.after_n > 0) w.fail(key + ".after", "the first operation cannot wait for another");
  if (r.after_n > static_cast<std::uint32_t>(kI32))
    w.fail(key + ".after", std::to_string(r.after_n) + " entries, more than an operation's count holds");
  return r;
}

// The `after` entries of op record r (at p), checked, into `ids`. The caller appends the op with
// them (Schedule::add_op), so the pool is laid out op by op whatever ranges the file's records give.
void decode_after(const unsigned char* p, const OpRecord& r, std::vector<std::int64_t>& ids, const Where& w) {
  ids.resize(r.after_n);
  for (std::uint32_t k = 0; k < r.after_n; ++k) {
    const std::int64_t a = get_i64(p + kAfterBytes * k);
    if (a < 0 || a >= r.op.id)
      w.fail(record("ops", static_cast<std::uint64_t>(r.op.id)) + ".after[" + std::to_string(k) + "]",
             "waits for operation " + std::to_string(a) + ", which does not precede it");
    ids[k] = a;
  }
}

// A chain record: its chunk and where its hops are.
struct Span {
  std::int64_t value = 0;  // chunk
  std::uint64_t begin = 0;
  std::uint32_t n = 0;
};

Span decode_chain_span(const unsigned char* p, std::uint64_t i, const Layout& l, const Where& w) {
  Span s{get_i64(p), get_u64(p + 8), get_u32(p + 16)};
  const std::string key = record("chains", i);
  if (s.value < 0) w.fail(key, "negative chunk bytes");
  if (s.begin > l.hops || s.n > l.hops - s.begin)
    w.fail(key, "hops " + std::to_string(s.begin) + "+" + std::to_string(s.n) + " outside the " + std::to_string(l.hops) +
                    " of their section");
  return s;
}

Chain decode_chain(const Span& span, const unsigned char* hops, std::uint64_t i, const Layout& l, const Where& w) {
  if (span.n == 0) w.fail(record("chains", i), "a chain needs at least one hop");
  Chain c;
  c.chunk = Bytes{span.value};
  c.hops.resize(span.n);
  for (std::uint32_t k = 0; k < span.n; ++k) {
    const unsigned char* p = hops + kHopBytes * k;
    ChainHop& h = c.hops[k];
    h.from = get_i32(p);
    h.to = get_i32(p + 4);
    h.path = get_i32(p + 8);
    const std::string key = record("hops", span.begin + k);
    for (GpuId g : {h.from, h.to})
      if (g < 0 || g >= l.gpu_count)
        w.fail(key, "GPU " + std::to_string(g) + " outside the file's GPUs 0.." + std::to_string(l.gpu_count - 1));
    if (h.path < -1) w.fail(key + ".path", "path " + std::to_string(h.path) + " (-1 or a path index)");
  }
  return c;
}

// A buffer record: its bytes, where its slices start in the slice section (bytes), how many, in
// which form.
struct BufferSpan {
  std::int64_t bytes = 0;
  std::uint64_t begin = 0;
  std::uint32_t n = 0;
  std::uint8_t form = 0;
  std::uint64_t size() const { return kSliceBytes[form] * n; }
};

BufferSpan decode_buffer_span(const unsigned char* p, std::uint64_t i, const Layout& l, const Where& w) {
  BufferSpan s{get_i64(p), get_u64(p + 8), get_u32(p + 16), p[20]};
  const std::string key = record("buffers", i);
  if (s.bytes < 0) w.fail(key, "negative bytes");
  if (s.form > 2) w.fail(key, "no slice form " + std::to_string(s.form) + " (0, 1 or 2)");
  if (s.begin > l.slice_bytes || s.size() > l.slice_bytes - s.begin)
    w.fail(key, "slices at byte " + std::to_string(s.begin) + ", " + std::to_string(s.size()) + " bytes, outside the " +
                    std::to_string(l.slice_bytes) + "-byte slice section");
  return s;
}

Buffer decode_buffer(const BufferSpan& span, const unsigned char* slices, std::uint64_t i, const Layout& l, const Where& w) {
  Buffer b;
  b.bytes = Bytes{span.bytes};
  b.slices.resize(span.n);
  for (std::uint32_t k = 0; k < span.n; ++k) {
    const unsigned char* p = slices + kSliceBytes[span.form] * k;
    PieceSlice& s = b.slices[k];
    s.piece = get_i32(p);
    if (span.form == 0) {
      s.count = get_u32(p + 4);
    } else if (span.form == 1) {
      s.offset = get_u32(p + 4);
      s.count = get_u32(p + 8);
    } else {
      s.offset = get_i64(p + 4);
      s.count = get_i64(p + 12);
    }
    const std::string key = record("buffers", i) + ".slices[" + std::to_string(k) + "]";
    if (s.piece < 0 || s.piece >= l.piece_count)
      w.fail(key + ".piece", "no piece " + std::to_string(s.piece) + " (" + std::to_string(l.piece_count) + " pieces)");
    if (s.offset < 0 || s.count < 0) w.fail(key, "negative offset or count");
  }
  return b;
}

// The GPUs of op, sorted, without repeats: its src and dst, and for a chain op every hop's GPUs.
void participants(const Schedule& s, const Op& op, std::vector<GpuId>& out) {
  out.clear();
  out.push_back(op.src);
  out.push_back(op.dst);
  if (op.chain >= 0)
    for (const ChainHop& h : s.chains[static_cast<std::size_t>(op.chain)].hops) {
      out.push_back(h.from);
      out.push_back(h.to);
    }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
}

// The index: per GPU 0..gpu_count-1, the ids of the ops it takes part in, ascending.
std::vector<std::vector<std::int64_t>> rank_index(const Schedule& s, std::int32_t gpu_count) {
  std::vector<std::vector<std::int64_t>> index(static_cast<std::size_t>(gpu_count));
  std::vector<GpuId> gpus;
  for (const Op& op : s.ops) {
    participants(s, op, gpus);
    for (GpuId g : gpus) index[static_cast<std::size_t>(g)].push_back(op.id);
  }
  return index;
}

// A file read through an unbuffered stdio handle, counting the bytes it asks for.
class RandomReader {
 public:
  RandomReader(const std::string& path) : path_(path), f_(std::fopen(path.c_str(), "rb")) {
    if (!f_) throw ConfigError(path, 0, "", "cannot open the schedule file");
    std::setvbuf(f_.get(), nullptr, _IONBF, 0);
  }
  std::string read(std::uint64_t offset, std::uint64_t n) {
    std::string out(n, '\0');
    if (n == 0) return out;
    if (offset > static_cast<std::uint64_t>(std::numeric_limits<long>::max()) ||
        std::fseek(f_.get(), static_cast<long>(offset), SEEK_SET) != 0 || std::fread(out.data(), 1, n, f_.get()) != n)
      throw ConfigError(path_, 0, "", "cannot read bytes " + std::to_string(offset) + "+" + std::to_string(n) + " of the schedule file");
    bytes_read_ += static_cast<std::int64_t>(n);
    return out;
  }
  std::int64_t bytes_read() const { return bytes_read_; }

 private:
  struct Close {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  std::string path_;
  std::unique_ptr<std::FILE, Close> f_;
  std::int64_t bytes_read_ = 0;
};

const unsigned char* bytes_of(const std::string& s) { return reinterpret_cast<const unsigned char*>(s.data()); }

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// What the writer lays out: the sections' sizes and places, each buffer's slice form (0: count,
// 1: offset and count in 32 bits, 2: both in 64 bits) and the index by GPU.
struct FilePlan {
  Layout layout;
  std::vector<std::uint8_t> forms;
  std::vector<std::vector<std::int64_t>> index;
};

FilePlan plan_file(const Schedule& s) {
  // The index is built from the ops and chains, so their shape is checked first.
  std::int32_t gpu_count = 0;
  std::uint64_t after = 0, hops = 0, slices = 0;
  auto gpu = [&](GpuId g, const std::string& where) {
    if (g < 0) throw ScheduleError(where + ": GPU " + std::to_string(g));
    gpu_count = std::max(gpu_count, g + 1);
  };
  for (std::size_t i = 0; i < s.ops.size(); ++i) {
    const Op& op = s.ops[i];
    if (const std::string problem = op_problem(s, i, -1, false); !problem.empty())
      throw ScheduleError("operation " + std::to_string(i) + ": " + problem);
    gpu(op.src, "operation " + std::to_string(i));
    gpu(op.dst, "operation " + std::to_string(i));
    after += static_cast<std::uint64_t>(op.after_count);
  }
  for (std::size_t c = 0; c < s.chains.size(); ++c) {
    hops += s.chains[c].hops.size();
    for (const ChainHop& h : s.chains[c].hops) {
      gpu(h.from, "chain " + std::to_string(c));
      gpu(h.to, "chain " + std::to_string(c));
    }
  }
  std::vector<std::uint8_t> forms;
  forms.reserve(s.buffers.size());
  for (const Buffer& b : s.buffers) {
    std::uint8_t form = 0;
    for (const PieceSlice& x : b.slices) {
      constexpr std::int64_t kU32 = std::numeric_limits<std::uint32_t>::max();
      if (x.offset < 0 || x.count < 0 || x.offset > kU32 || x.count > kU32) form = 2;
      else if (x.offset != 0) form = std::max<std::uint8_t>(form, 1);
    }
    forms.push_back(form);
    slices += kSliceBytes[form] * b.slices.size();
  }
  FilePlan f;
  f.index = rank_index(s, gpu_count);
  std::uint64_t entries = 0;
  for (const auto& e : f.index) entries += e.size();

  Layout& l = f.layout;
  const std::string scenario_text = scenario_section(s.scenario, s.scenario_file);
  l.scenario_bytes = static_cast<std::uint32_t>(scenario_text.size());
  l.ops = s.ops.size();
  l.after = after;
  l.chains = s.chains.size();
  l.hops = hops;
  l.buffers = s.buffers.size();
  l.slice_bytes = slices;
  l.gpu_count = gpu_count;
  l.entries = entries;
  l.slots = s.slots;
  if (s.slots < kMinSlots || s.slots > kMaxSlots)
    throw ScheduleError("the schedule's slots (" + std::to_string(s.slots) + ") are outside " + std::to_string(kMinSlots) + ".." +
                        std::to_string(kMaxSlots));
  l.budget_runs = budget_runs(s.budget).size();
  l.version = kScheduleBinaryVersion;
  place(l);
  f.forms = std::move(forms);
  return f;

}

}  // namespace

std::string schedule_to_binary(const Schedule& s) {
  const FilePlan f = plan_file(s);
  const Layout& l = f.layout;
  const auto& forms = f.forms;
  const auto& index = f.index;
  const std::int32_t gpu_count = l.gpu_count;
  Writer w;
  w.out.reserve(l.end);
  w.out.append(kScheduleMagic, 8);
  w.u32(kScheduleBinaryVersion);
  w.u32(static_cast<std::uint32_t>(kHeaderBytes));
  w.u64(l.end);
  w.i32(s.piece_count);
  w.i32(gpu_count);
  for (std::uint64_t n : {l.ops, l.after, l.chains, l.hops, l.buffers, l.slice_bytes, l.entries}) w.u64(n);
  w.i64(s.params.chunk.value);
  w.i64(s.params.bucket.value);
  w.i32(s.params.channels);
  w.i32(s.params.max_chain);
  w.u8(traits(s.params.strategy).id);
  w.u8(static_cast<std::uint8_t>((s.params.rail_aligned_ingress ? kFlagRailAligned : 0) |
                                 (s.params.relay_ingress ? kFlagRelayIngress : 0) | (s.params.relay_egress ? kFlagRelayEgress : 0)));
  w.u16(static_cast<std::uint16_t>(s.slots));
  w.u32(l.scenario_bytes);
  w.u64(0);  // the content digest, written last
  w.u64(l.budget_runs);
  w.u64(0);
  w.out += scenario_section(s.scenario, s.scenario_file);
  w.pad_to(8);
  std::uint64_t at = 0;
  for (const Op& op : s.ops) {
    for (std::int32_t v : {op.src, op.dst, op.chain, op.buffer, op.part, op.parts}) w.i32(v);
    w.i64(op.bytes.value);
    w.u64(at);
    w.u32(static_cast<std::uint32_t>(op.after_count));
    w.u8(stable_id(op.phase));
    for (int k = 0; k < 3; ++k) w.u8(0);
    at += static_cast<std::uint64_t>(op.after_count);
  }
  for (const Op& op : s.ops)
    for (auto a : s.after_of(op)) w.i64(a);
  at = 0;
  for (const Chain& c : s.chains) {
    w.i64(c.chunk.value);
    w.u64(at);
    w.u32(static_cast<std::uint32_t>(c.hops.size()));
    w.u32(0);
    at += c.hops.size();
  }
  for (const Chain& c : s.chains)
    for (const ChainHop& h : c.hops) {
      w.i32(h.from);
      w.i32(h.to);
      w.i32(h.path);
    }
  at = 0;
  for (std::size_t i = 0; i < s.buffers.size(); ++i) {
    const Buffer& b = s.buffers[i];
    w.i64(b.bytes.value);
    w.u64(at);
    w.u32(static_cast<std::uint32_t>(b.slices.size()));
    w.u8(forms[i]);
    for (int k = 0; k < 3; ++k) w.u8(0);
    at += kSliceBytes[forms[i]] * b.slices.size();
  }
  for (std::size_t i = 0; i < s.buffers.size(); ++i)
    for (const PieceSlice& x : s.buffers[i].slices) {
      w.i32(x.piece);
      if (forms[i] == 0) {
        w.u32(static_cast<std::uint32_t>(x.count));
      } else if (forms[i] == 1) {
        w.u32(static_cast<std::uint32_t>(x.offset));
        w.u32(static_cast<std::uint32_t>(x.count));
      } else {
        w.i64(x.offset);
        w.i64(x.count);
      }
    }
  at = 0;
  for (const auto& e : index) {
    w.u64(at);
    w.u64(e.size());
    at += e.size();
  }
  for (const auto& e : index)
    for (auto id : e) w.i64(id);
  for (const BudgetRun& r : budget_runs(s.budget)) {
    w.i32(r.first);
    w.i32(r.count);
    w.i64(r.bytes.value);
  }
  stamp_binary_digest(w.out);
  return std::move(w.out);
}

Schedule schedule_from_binary(const std::string& bytes, const std::string& file) {
  const Where w{file};
  const unsigned char* d = bytes_of(bytes);
  const Layout l = read_header(d, bytes.size(), w);
  if (l.digest != 0 && l.digest != content_digest(bytes))
    w.fail("header.digest", "the file's content does not match its digest: it was changed or damaged after it was written");
  Schedule s;
  std::tie(s.scenario, s.scenario_file) = split_scenario_section(bytes.substr(l.scenario_at, l.scenario_bytes), l);
  s.params = l.params;
  s.piece_count = l.piece_count;
  s.slots = l.slots;
  s.budget = decode_budget(d + l.budget_at, l, w);
  s.buffers.reserve(l.buffers);
  for (std::uint64_t i = 0; i < l.buffers; ++i) {
    const BufferSpan span = decode_buffer_span(d + l.buffers_at + kBufferBytes * i, i, l, w);
    s.buffers.push_back(decode_buffer(span, d + l.slices_at + span.begin, i, l, w));
  }
  s.chains.reserve(l.chains);
  for (std::uint64_t i = 0; i < l.chains; ++i) {
    const Span span = decode_chain_span(d + l.chains_at + kChainBytes * i, i, l, w);
    s.chains.push_back(decode_chain(span, d + l.hops_at + kHopBytes * span.begin, i, l, w));
  }
  s.ops.reserve(l.ops);
  s.after.reserve(l.after);
  std::vector<std::int64_t> ids;
  for (std::uint64_t i = 0; i < l.ops; ++i) {
    const OpRecord r = decode_op(d + l.ops_at + kOpBytes * i, static_cast<std::int64_t>(i), l, w);
    decode_after(d + l.after_at + kAfterBytes * r.after_begin, r, ids, w);
    s.add_op(r.op, ids);
  }
  // The index must be the one the operations give, or a process reading its part would miss some.
  const auto index = rank_index(s, l.gpu_count);
  std::uint64_t at = 0;
  for (std::int32_t g = 0; g < l.gpu_count; ++g) {
    const unsigned char* e = d + l.index_at + kIndexBytes * static_cast<std::uint64_t>(g);
    const auto& ids = index[static_cast<std::size_t>(g)];
    bool same = get_u64(e) == at && get_u64(e + 8) == ids.size();
    for (std::size_t k = 0; same && k < ids.size(); ++k) same = get_i64(d + l.entries_at + kEntryBytes * (at + k)) == ids[k];
    if (!same) w.fail(record("index", static_cast<std::uint64_t>(g)), "does not list the operations GPU " + std::to_string(g) + " takes part in");
    at += ids.size();
  }
  if (at != l.entries) w.fail("index", "lists " + std::to_string(l.entries) + " entries, the operations give " + std::to_string(at));
  return s;
}

void write_schedule_file(const std::string& path, const Schedule& s) {
  std::ofstream out(path, std::ios::binary);
  if (!out) throw ConfigError(path, 0, "", "cannot write the schedule");
  if (ends_with(path, ".json")) out << to_json(s).dump() << '\n';
  else {
    const std::string bytes = schedule_to_binary(s);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  out.close();
  if (!out) throw ConfigError(path, 0, "", "cannot write the schedule");
}

bool is_binary_schedule_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[8] = {};
  in.read(magic, 8);
  return in.gcount() == 8 && has_magic(reinterpret_cast<const unsigned char*>(magic), 8);
}

Schedule read_schedule_file(const std::string& path) {
  check_input_file(path, "schedule file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(path, 0, "", "cannot open the schedule file");
  char magic[8] = {};
  in.read(magic, 8);
  if (in.gcount() == 8 && has_magic(reinterpret_cast<const unsigned char*>(magic), 8)) {
    in.seekg(0);
    const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    return schedule_from_binary(bytes, path);
  }
  in.close();
  return schedule_from_json(read_json_file(path, "schedule file"), path);
}

bool takes_part(const Schedule& s, const Op& op, GpuId gpu) {
  if (op.src == gpu || op.dst == gpu) return true;
  if (op.chain < 0) return false;
  for (const ChainHop& h : s.chains[static_cast<std::size_t>(op.chain)].hops)
    if (h.from == gpu || h.to == gpu) return true;
  return false;
}

RankSchedule rank_schedule(const Schedule& s, GpuId gpu) {
  RankSchedule r;
  r.gpu = gpu;
  r.scenario = s.scenario;
  r.params = s.params;
  r.slots = s.slots;
  r.budget = s.budget;
  r.piece_count = s.piece_count;
  r.op_count = static_cast<std::int64_t>(s.ops.size());
  for (const Op& op : s.ops)
    if (takes_part(s, op, gpu)) {
      r.add_op(op, s.after_of(op));
      r.buffer_ids.push_back(op.buffer);
      if (op.chain >= 0) r.chain_ids.push_back(op.chain);
    }
  for (auto* ids : {&r.buffer_ids, &r.chain_ids}) {
    std::sort(ids->begin(), ids->end());
    ids->erase(std::unique(ids->begin(), ids->end()), ids->end());
  }
  for (auto b : r.buffer_ids) r.buffers.push_back(s.buffers[static_cast<std::size_t>(b)]);
  for (auto c : r.chain_ids) r.chains.push_back(s.chains[static_cast<std::size_t>(c)]);
  return r;
}

void RankSchedule::add_op(Op op, std::span<const std::int64_t> ids) { append_op(ops, after, op, ids); }

const Buffer& RankSchedule::buffer(std::int32_t id) const {
  const auto it = std::lower_bound(buffer_ids.begin(), buffer_ids.end(), id);
  if (it == buffer_ids.end() || *it != id) throw std::out_of_range("no buffer " + std::to_string(id) + " in GPU's operations");
  return buffers[static_cast<std::size_t>(it - buffer_ids.begin())];
}

const Chain& RankSchedule::chain(std::int32_t id) const {
  const auto it = std::lower_bound(chain_ids.begin(), chain_ids.end(), id);
  if (it == chain_ids.end() || *it != id) throw std::out_of_range("no chain " + std::to_string(id) + " in GPU's operations");
  return chains[static_cast<std::size_t>(it - chain_ids.begin())];
}

void stamp_binary_digest(std::string& bytes) {
  if (bytes.size() < kHeaderBytesV2) return;
  const std::uint64_t digest = content_digest(bytes);
  for (std::size_t k = 0; k < 8; ++k) bytes[kDigestAt + k] = static_cast<char>((digest >> (8 * k)) & 0xff);
}

std::uint64_t binary_digest(const Schedule& s) {
  const std::string bytes = schedule_to_binary(s);
  return get_u64(bytes_of(bytes) + kDigestAt);
}

ScheduleFileHeader read_schedule_header(const std::string& path) {
  check_input_file(path, "schedule file");
  const std::uint64_t size = std::filesystem::file_size(path);
  RandomReader in(path);
  const std::string head = in.read(0, std::min<std::uint64_t>(size, kHeaderBytes));
  const Where w{path};
  const Layout l = read_header(bytes_of(head), size, w);
  ScheduleFileHeader h;
  h.slots = l.slots;
  h.budget = decode_budget(bytes_of(in.read(l.budget_at, kBudgetRunBytes * l.budget_runs)), l, w);
  std::tie(h.scenario, h.scenario_file) = split_scenario_section(in.read(l.scenario_at, l.scenario_bytes), l);
  h.params = l.params;
  h.piece_count = l.piece_count;
  h.op_count = static_cast<std::int64_t>(l.ops);
  h.digest = l.digest;
  h.bytes_read = in.bytes_read();
  h.file_bytes = static_cast<std::int64_t>(size);
  return h;
}

// Reads, in order: the header, the scenario name, the GPU's index entry and op ids, the op records
// (consecutive ids in one read) and their `after` lists, then each chain and buffer they name with
// its hops or slices. Every record is checked as schedule_from_binary checks it, and every op the
// index names must involve the GPU.
RankSchedule read_rank_schedule(const std::string& path, GpuId gpu) {
  check_input_file(path, "schedule file");
  const std::uint64_t size = std::filesystem::file_size(path);
  RandomReader in(path);
  const std::string head = in.read(0, std::min<std::uint64_t>(size, kHeaderBytes));
  if (!has_magic(bytes_of(head), head.size())) {
    RankSchedule r = rank_schedule(read_schedule_file(path), gpu);
    r.bytes_read = r.file_bytes = static_cast<std::int64_t>(size);
    return r;
  }
  const Where w{path};
  const Layout l = read_header(bytes_of(head), size, w);
  RankSchedule r;
  r.gpu = gpu;
  r.scenario = split_scenario_section(in.read(l.scenario_at, l.scenario_bytes), l).first;
  r.params = l.params;
  r.slots = l.slots;
  r.budget = decode_budget(bytes_of(in.read(l.budget_at, kBudgetRunBytes * l.budget_runs)), l, w);
  r.piece_count = l.piece_count;
  r.op_count = static_cast<std::int64_t>(l.ops);
  r.file_bytes = static_cast<std::int64_t>(size);
  if (gpu < 0 || gpu >= l.gpu_count) {  // a GPU no operation names
    r.bytes_read = in.bytes_read();
    return r;
  }
  const std::string entry = in.read(l.index_at + kIndexBytes * static_cast<std::uint64_t>(gpu), kIndexBytes);
  const std::uint64_t begin = get_u64(bytes_of(entry)), n = get_u64(bytes_of(entry) + 8);
  const std::string key = record("index", static_cast<std::uint64_t>(gpu));
  if (begin > l.entries || n > l.entries - begin)
    w.fail(key, "entries " + std::to_string(begin) + "+" + std::to_string(n) + " outside the " + std::to_string(l.entries) + " of the index");
  const std::string id_bytes = in.read(l.entries_at + kEntryBytes * begin, kEntryBytes * n);
  std::vector<std::int64_t> ids(n);
  for (std::uint64_t k = 0; k < n; ++k) {
    ids[k] = get_i64(bytes_of(id_bytes) + kEntryBytes * k);
    if (ids[k] < 0 || static_cast<std::uint64_t>(ids[k]) >= l.ops || (k > 0 && ids[k] <= ids[k - 1]))
      w.fail(key, "operation id " + std::to_string(ids[k]) + " is not an operation after the previous one");
  }
  std::vector<OpRecord> ops;
  ops.reserve(n);
  for (std::uint64_t k = 0; k < n;) {
    std::uint64_t e = k + 1;
    while (e < n && ids[e] == ids[e - 1] + 1) ++e;
    const std::string run = in.read(l.ops_at + kOpBytes * static_cast<std::uint64_t>(ids[k]), kOpBytes * (e - k));
    for (std::uint64_t q = k; q < e; ++q) ops.push_back(decode_op(bytes_of(run) + kOpBytes * (q - k), ids[q], l, w));
    k = e;
  }
  r.ops.reserve(n);
  std::vector<std::int64_t> after;
  for (const OpRecord& o : ops) {
    decode_after(bytes_of(in.read(l.after_at + kAfterBytes * o.after_begin, kAfterBytes * o.after_n)), o, after, w);
    r.add_op(o.op, after);
    r.buffer_ids.push_back(o.op.buffer);
    if (o.op.chain >= 0) r.chain_ids.push_back(o.op.chain);
  }
  for (auto* v : {&r.buffer_ids, &r.chain_ids}) {
    std::sort(v->begin(), v->end());
    v->erase(std::unique(v->begin(), v->end()), v->end());
  }
  for (auto c : r.chain_ids) {
    const auto i = static_cast<std::uint64_t>(c);
    const std::string rec = in.read(l.chains_at + kChainBytes * i, kChainBytes);
    const Span span = decode_chain_span(bytes_of(rec), i, l, w);
    r.chains.push_back(decode_chain(span, bytes_of(in.read(l.hops_at + kHopBytes * span.begin, kHopBytes * span.n)), i, l, w));
  }
  for (auto b : r.buffer_ids) {
    const auto i = static_cast<std::uint64_t>(b);
    const std::string rec = in.read(l.buffers_at + kBufferBytes * i, kBufferBytes);
    const BufferSpan span = decode_buffer_span(bytes_of(rec), i, l, w);
    r.buffers.push_back(decode_buffer(span, bytes_of(in.read(l.slices_at + span.begin, span.size())), i, l, w));
  }
  for (const Op& op : r.ops) {
    bool part = op.src == gpu || op.dst == gpu;
    if (!part && op.chain >= 0)
      for (const ChainHop& h : r.chain(op.chain).hops) part = part || h.from == gpu || h.to == gpu;
    if (!part) w.fail(key, "names operation " + std::to_string(op.id) + ", which GPU " + std::to_string(gpu) + " takes no part in");
  }
  r.bytes_read = in.bytes_read();
  return r;
}

}  // namespace reshard::model
