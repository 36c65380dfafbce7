// Schedule files (docs/schedule-format.md): the binary format gives back exactly the schedule that
// was written, the same as JSON; a GPU's part read through the index is the whole schedule filtered
// to that GPU; on a large schedule a GPU reads a small fraction of the file; a truncated, corrupt or
// newer file is one ConfigError naming the file.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>

#include "reshard/model/digest.hpp"
#include "reshard/model/errors.hpp"
#include "reshard/model/scenario.hpp"
#include "reshard/model/schedule.hpp"
#include "reshard/model/strategies.hpp"
#include "reshard/model/schedule_file.hpp"
#include "config_error.hpp"

using namespace reshard::model;

namespace {

const std::string kRoot = RESHARD_SOURCE_DIR;

struct Built {
  LoadedScenario sc;
  TransferSet ts;
  Schedule s;
};
Built build(const std::string& scenario, const std::string& strategy) {
  Built b{load_scenario(std::filesystem::path(kRoot + "/scenarios/" + scenario)), {}, {}};
  b.ts = plan(b.sc.inventory, b.sc.source, b.sc.destination);
  b.s = build_schedule(b.ts, b.sc.inventory, b.sc.source, b.sc.destination, b.sc.topology, parse_strategy(strategy),
                       staging_budgets(b.sc));
  b.s.scenario = b.sc.scenario.name;
  return b;
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("reshard_schedule_file_" + name)).string();
}
void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

using reshard::test::config_error;

// The header's size in version 3 (versions 1 and 2: 128 bytes, without the staging fields).
constexpr std::size_t kHeader = 144;

// Little-endian fields of the header (docs/schedule-format.md, "Header").
void put_u32(std::string& b, std::size_t at, std::uint32_t v) {
  for (int k = 0; k < 4; ++k) b[at + static_cast<std::size_t>(k)] = static_cast<char>((v >> (8 * k)) & 0xff);
}
void put_u64(std::string& b, std::size_t at, std::uint64_t v) {
  for (int k = 0; k < 8; ++k) b[at + static_cast<std::size_t>(k)] = static_cast<char>((v >> (8 * k)) & 0xff);
}

struct Case {
  const char* scenario;
  const char* strategy;
};
const Case kCases[] = {
    {"small-moe-ep.yaml", "domain_chain"},
    {"small-moe-ep.yaml", "gather_broadcast"},
    {"small-moe-ep.yaml", "direct"},
    {"small-gqa-megatron-vllm.yaml", "hybrid relay_ingress"},
    {"small-dtensor-uneven.yaml", "nemo_rl_reshard"},
    {"qwen3-8b-colocated.yaml", "domain_grouped relay_egress"},
};

}  // namespace

TEST(ScheduleFile, BinaryAndJsonGiveBackTheSameSchedule) {
  for (const auto& c : kCases) {
    SCOPED_TRACE(std::string(c.scenario) + " " + c.strategy);
    const Built b = build(c.scenario, c.strategy);
    ASSERT_FALSE(b.s.ops.empty());
    const std::string bin = temp_path("roundtrip.rsched"), json = temp_path("roundtrip.json");
    write_schedule_file(bin, b.s);
    write_schedule_file(json, b.s);
    EXPECT_TRUE(is_binary_schedule_file(bin));
    EXPECT_FALSE(is_binary_schedule_file(json));
    const Schedule from_bin = read_schedule_file(bin), from_json = read_schedule_file(json);
    EXPECT_EQ(from_bin, b.s);
    EXPECT_EQ(from_json, b.s);
    // JSON -> binary -> JSON: the same document.
    EXPECT_EQ(to_json(schedule_from_binary(schedule_to_binary(from_json))), to_json(b.s));
    // The format is told by the magic, not the name.
    const std::string odd = temp_path("binary.json.txt");
    std::filesystem::copy_file(bin, odd, std::filesystem::copy_options::overwrite_existing);
    EXPECT_EQ(read_schedule_file(odd), b.s);
  }
}

// Slices are stored in the narrowest form that holds a buffer's slices (8, 12 or 20 bytes each):
// offsets and counts past 32 bits, and offsets other than 0, come back as written.
TEST(ScheduleFile, EverySliceFormRoundTrips) {
  Built b = build("small-moe-ep.yaml", "domain_chain");
  // Two buffers stored in the 8-byte form (every offset 0).
  std::vector<std::size_t> narrow;
  for (std::size_t i = 0; i < b.s.buffers.size() && narrow.size() < 2; ++i) {
    bool zero = true;
    for (const auto& x : b.s.buffers[i].slices) zero = zero && x.offset == 0;
    if (zero) narrow.push_back(i);
  }
  ASSERT_EQ(narrow.size(), 2u);
  auto& b1 = b.s.buffers[narrow[0]];
  auto& b2 = b.s.buffers[narrow[1]];
  const auto size_before = schedule_to_binary(b.s).size();
  b1.slices[0].offset = 7;                               // form 1: 4 bytes more per slice
  b2.slices[0].count = std::int64_t{1} << 40;            // form 2: 12 bytes more per slice
  b2.slices[0].offset = (std::int64_t{1} << 33) + 3;
  const std::string bytes = schedule_to_binary(b.s);
  EXPECT_EQ(bytes.size(), size_before + 4 * b1.slices.size() + 12 * b2.slices.size());
  EXPECT_EQ(schedule_from_binary(bytes, "forms.rsched"), b.s);
}

// The writer lays the `after` section out op by op, as Schedule::after is. A file whose op records
// share entries (within the format, though the writer never makes one) reads back into the pool
// laid out op by op: the schedule the canonical file gives, whole or by GPU. An op's entries
// outside the section are refused naming the record.
TEST(ScheduleFile, AfterEntriesAreReadIntoThePoolOpByOp) {
  const Built b = build("small-moe-ep.yaml", "gather_broadcast");
  const std::string good = schedule_to_binary(b.s);
  const std::size_t ops_at = kHeader + (b.s.scenario.size() + 7) / 8 * 8;  // op record i at ops_at + 48 i
  const std::size_t first_entry = 32;                                  // u64 in the record
  // Two consecutive ops waiting for the same ops (a bucket's gathers, or its broadcasts on each channel).
  std::size_t i = 0, j = 0;
  auto ids = [&](std::size_t k) {
    const auto a = b.s.after_of(b.s.ops[k]);
    return std::vector<std::int64_t>(a.begin(), a.end());
  };
  for (std::size_t k = 1; k < b.s.ops.size() && j == 0; ++k)
    if (b.s.ops[k].after_count > 0 && ids(k) == ids(k - 1)) i = k - 1, j = k;
  ASSERT_GT(j, 0u);
  std::string shared = good;
  put_u64(shared, ops_at + 48 * j + first_entry, static_cast<std::uint64_t>(b.s.ops[i].after_begin));
  stamp_binary_digest(shared);
  ASSERT_NE(shared, good);
  EXPECT_EQ(schedule_from_binary(shared, "shared.rsched"), b.s);
  const std::string path = temp_path("shared.rsched");
  write_bytes(path, shared);
  for (GpuId g : {b.s.ops[j].src, b.s.ops[j].dst}) EXPECT_EQ(read_rank_schedule(path, g), rank_schedule(b.s, g));
  std::string outside = good;
  put_u64(outside, ops_at + 48 * j + first_entry, b.s.after.size());
  stamp_binary_digest(outside);
  EXPECT_HAS(config_error([&] { schedule_from_binary(outside, "outside.rsched"); }),
             "outside.rsched: ops[" + std::to_string(j) + "].after: entries " + std::to_string(b.s.after.size()) + "+" +
                 std::to_string(b.s.ops[j].after_count) + " outside the " + std::to_string(b.s.after.size()) +
                 " of the after section");
}

TEST(ScheduleFile, RankReadEqualsTheScheduleFilteredByGpu) {
  for (const auto& c : kCases) {
    SCOPED_TRACE(std::string(c.scenario) + " " + c.strategy);
    const Built b = build(c.scenario, c.strategy);
    const std::string bin = temp_path("rank.rsched"), json = temp_path("rank.json");
    write_schedule_file(bin, b.s);
    write_schedule_file(json, b.s);
    // Every op is read by each GPU taking part in it and by no other: the per-GPU op counts add up
    // to the ops' participant counts.
    std::int64_t participations = 0, read = 0;
    for (const Op& op : b.s.ops)
      for (GpuId g = 0; g < b.sc.topology.gpu_count(); ++g) participations += takes_part(b.s, op, g) ? 1 : 0;
    for (GpuId g = -1; g <= b.sc.topology.gpu_count(); ++g) {
      SCOPED_TRACE("GPU " + std::to_string(g));
      const RankSchedule want = rank_schedule(b.s, g);
      const RankSchedule got = read_rank_schedule(bin, g);
      EXPECT_EQ(got, want);
      EXPECT_EQ(read_rank_schedule(json, g), want);
      EXPECT_GT(got.bytes_read, 0);
      EXPECT_LT(got.bytes_read, got.file_bytes);
      EXPECT_EQ(got.file_bytes, static_cast<std::int64_t>(std::filesystem::file_size(bin)));
      for (const Op& op : got.ops) {
        EXPECT_TRUE(takes_part(b.s, op, g));
        EXPECT_EQ(got.buffer(op.buffer), b.s.buffers[static_cast<std::size_t>(op.buffer)]);
        if (op.chain >= 0) {
          EXPECT_EQ(got.chain(op.chain), b.s.chains[static_cast<std::size_t>(op.chain)]);
        }
      }
      read += static_cast<std::int64_t>(got.ops.size());
    }
    EXPECT_EQ(read, participations);
  }
}

// A GPU of a large schedule reads its part and little else: on kimi-k3-gb200 (9216 GPUs, 86 528
// chain operations) every GPU reads under 1 % of the file. What a GPU reads is the header, its
// index entry, its ops' records and the chains and buffers they name, so the share is about the
// share of the buffers' slices it sends or receives (kimi-k3: at most 83.5 KB of 19.2 MB).
#ifndef RESHARD_SMALL_ONLY
TEST(ScheduleFile, EachGpuReadsUnderOnePercentOfALargeFile) {
  const Built b = build("kimi-k3-gb200.yaml", "hybrid max_chain=2 relay_ingress rail_blind");
  for (const Op& op : b.s.ops) ASSERT_GE(op.chain, 0);  // every op of this strategy is a chain op
  const std::string bin = temp_path("kimi.rsched");
  write_schedule_file(bin, b.s);
  const auto size = static_cast<std::int64_t>(std::filesystem::file_size(bin));
  // The GPU whose buffers hold the most slices (what dominates a part), found in memory; then it
  // and every 61st GPU are read through the file.
  std::vector<std::vector<std::int32_t>> buffers_of(static_cast<std::size_t>(b.sc.topology.gpu_count()));
  for (const Op& op : b.s.ops) {
    buffers_of[static_cast<std::size_t>(op.src)].push_back(op.buffer);
    for (const ChainHop& h : b.s.chains[static_cast<std::size_t>(op.chain)].hops)
      buffers_of[static_cast<std::size_t>(h.to)].push_back(op.buffer);
  }
  GpuId heaviest = 0;
  std::size_t most_slices = 0;
  for (std::size_t g = 0; g < buffers_of.size(); ++g) {
    auto& v = buffers_of[g];
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
    std::size_t n = 0;
    for (auto x : v) n += b.s.buffers[static_cast<std::size_t>(x)].slices.size();
    if (n > most_slices) most_slices = n, heaviest = static_cast<GpuId>(g);
  }
  std::int64_t most = 0;
  GpuId worst = -1;
  for (GpuId g = 0; g < b.sc.topology.gpu_count(); ++g) {
    if (g != heaviest && g % 61 != 0) continue;
    const RankSchedule r = read_rank_schedule(bin, g);
    if (r.bytes_read > most) most = r.bytes_read, worst = g;
  }
  EXPECT_LT(static_cast<double>(most), 0.01 * static_cast<double>(size)) << "GPU " << worst << " reads " << most << " of " << size;
  // Its part is the filtered schedule.
  EXPECT_EQ(read_rank_schedule(bin, heaviest), rank_schedule(b.s, heaviest));
  std::filesystem::remove(bin);
}
#endif

TEST(ScheduleFileHostile, EveryTruncationIsOneErrorNamingTheFile) {
  const Built b = build("small-moe-ep.yaml", "domain_chain");
  const std::string bytes = schedule_to_binary(b.s);
  const std::string path = temp_path("truncated.rsched");
  for (std::size_t n = 8; n < bytes.size(); n += std::max<std::size_t>(1, bytes.size() / 600)) {
    SCOPED_TRACE(n);
    write_bytes(path, bytes.substr(0, n));
    const std::string e = config_error([&] { read_schedule_file(path); });
    EXPECT_HAS(e, path);
    EXPECT_HAS(e, n < 16 ? "shorter than the header" : n < kHeader ? "shorter than the 144-byte header" : "the header gives");
    const std::string r = config_error([&] { read_rank_schedule(path, 0); });
    EXPECT_HAS(r, path);
  }
  // Bytes appended are as wrong as bytes missing.
  write_bytes(path, bytes + "x");
  EXPECT_HAS(config_error([&] { read_schedule_file(path); }), "(truncated or appended to)");
}

TEST(ScheduleFileHostile, NewerVersionIsRefusedWithItsNumber) {
  const Built b = build("small-moe-ep.yaml", "domain_chain");
  std::string bytes = schedule_to_binary(b.s);
  put_u32(bytes, 8, kScheduleBinaryVersion + 1);
  const std::string path = temp_path("newer.rsched");
  write_bytes(path, bytes);
  const std::string e = config_error([&] { read_schedule_file(path); });
  EXPECT_HAS(e, path + ": header.version: format version 5 was written by a newer reshard; this one reads version 4");
  EXPECT_HAS(config_error([&] { read_rank_schedule(path, 3); }), "format version 5");
}

// A version 4 file as version 2 wrote it: the 128-byte header (no slots, no budget-run count) and
// no budget section; its schedule has the default slots and no budget.
std::string as_version_2(const std::string& v3, const Schedule& s) {
  const std::size_t runs = budget_runs(s.budget).size();
  std::string v2 = v3.substr(0, 128) + v3.substr(kHeader, v3.size() - kHeader - 16 * runs);
  put_u32(v2, 8, 2);
  put_u32(v2, 12, 128);
  // Versions 1-3: the scenario section is the name alone (version 4 adds "\n" and the file).
  put_u32(v2, 116, static_cast<std::uint32_t>(s.scenario.size()));
  for (std::size_t k = 128 + s.scenario.size(); k < 128 + (s.scenario.size() + 1 + s.scenario_file.size() + 7) / 8 * 8; ++k)
    v2[k] = '\0';
  put_u64(v2, 16, v2.size());
  v2[114] = v2[115] = '\0';  // version 3's slots
  stamp_binary_digest(v2);
  return v2;
}

// Version 2's content digest: FNV-1a over the file with its own 8 bytes (offset 120) as zero. A
// version 1 file (no digest, those bytes zero) and a version 2 file (no staging fields) still read;
// a file with a changed byte, anywhere, is refused naming the digest.
TEST(ScheduleFileDigest, ChangedBytesAreRefusedAndVersionOneStillReads) {
  const Built b = build("small-moe-ep.yaml", "domain_chain");
  const std::string good = schedule_to_binary(b.s);
  std::uint64_t stored = 0;
  for (int k = 7; k >= 0; --k) stored = (stored << 8) | static_cast<unsigned char>(good[120 + static_cast<std::size_t>(k)]);
  std::string zeroed = good;
  for (std::size_t k = 120; k < 128; ++k) zeroed[k] = '\0';
  Fnv1a h;
  h.add(zeroed);
  EXPECT_EQ(stored, h.value());
  EXPECT_EQ(binary_digest(b.s), stored);
  const std::string path = temp_path("digest.rsched");
  write_bytes(path, good);
  EXPECT_EQ(read_schedule_header(path).digest, stored);
  // It reads the header, the scenario name and the budget runs (one: every GPU has 3.2 GB).
  EXPECT_EQ(budget_runs(b.s.budget).size(), 1u);
  EXPECT_EQ(read_schedule_header(path).bytes_read,
            static_cast<std::int64_t>(kHeader + b.s.scenario.size() + 1 + b.s.scenario_file.size() + 16));
  EXPECT_EQ(read_schedule_header(path).budget, b.s.budget);
  EXPECT_EQ(read_schedule_header(path).slots, b.s.slots);

  ASSERT_FALSE(b.s.budget.empty());
  Schedule unstaged = b.s;  // what versions 1 and 2 carry
  unstaged.budget.clear();
  unstaged.slots = kChainSlots;
  const std::string v2 = as_version_2(good, b.s);
  EXPECT_EQ(schedule_from_binary(v2, "v2.rsched"), unstaged);
  std::string v1 = v2;
  for (std::size_t k = 120; k < 128; ++k) v1[k] = '\0';
  put_u32(v1, 8, 1);
  EXPECT_EQ(schedule_from_binary(v1, "v1.rsched"), unstaged);
  write_bytes(path, v1);
  EXPECT_EQ(read_schedule_header(path).digest, 0u);

  for (std::size_t at : {kHeader + 2, good.size() / 2, good.size() - 1}) {
    std::string bytes = good;
    bytes[at] = static_cast<char>(bytes[at] ^ 1);
    EXPECT_HAS(config_error([&] { schedule_from_binary(bytes, "changed.rsched"); }),
               "changed.rsched: header.digest: the file's content does not match its digest");
  }
  std::string zero_digest = zeroed;  // version 2 without its digest
  EXPECT_HAS(config_error([&] { schedule_from_binary(zero_digest, "nodigest.rsched"); }), "header.digest: is 0");
  // A different schedule has a different digest.
  EXPECT_NE(binary_digest(build("small-moe-ep.yaml", "direct").s), stored);
}

// Any single corrupted byte, its digest stamped again (so the checks behind the digest are what is
// tested), gives back either a schedule (a value changed within its range, which validate() then
// judges) or one ConfigError naming the file; never a crash or an out-of-range read (the sanitizer
// build runs this too). A changed id in the index is always caught.
TEST(ScheduleFileHostile, EveryCorruptedByteIsCaughtOrInRange) {
  const Built b = build("small-moe-ep.yaml", "domain_chain");
  const std::string good = schedule_to_binary(b.s);
  const std::string path = temp_path("corrupt.rsched");
  std::int64_t refused = 0, read = 0;
  for (std::size_t at = 0; at < good.size(); ++at) {
    std::string bytes = good;
    bytes[at] = static_cast<char>(bytes[at] ^ 0x5a);
    stamp_binary_digest(bytes);
    try {
      const Schedule s = schedule_from_binary(bytes, "corrupt.rsched");
      ++read;
      if (at % 61 == 0) {  // through the file, for a sample (each read is a few dozen system calls)
        write_bytes(path, bytes);
        for (GpuId g = 0; g < 16; ++g) EXPECT_EQ(read_rank_schedule(path, g), rank_schedule(s, g)) << "byte " << at;
      }
    } catch (const ConfigError& e) {
      ++refused;
      EXPECT_HAS(std::string(e.what()), "corrupt.rsched: ");
    }
  }
  EXPECT_GT(refused, 0);
  EXPECT_GT(read, 0);  // payload bytes (bytes, offsets within range) read back as other values
}

TEST(ScheduleFileHostile, FieldsOutOfRangeAreNamed) {
  const Built b = build("small-moe-ep.yaml", "domain_chain");
  const std::string good = schedule_to_binary(b.s);
  const std::size_t ops_at = kHeader + (b.s.scenario.size() + 7) / 8 * 8;  // the first op record
  struct Edit {
    std::size_t at;
    std::uint32_t value;
    const char* expect;
  };
  const Edit edits[] = {
      {ops_at + 8, 1000000, "ops[0].chain: no chain 1000000"},
      {ops_at + 12, 0xffffffffu, "ops[0].buffer: no buffer -1"},
      {ops_at + 20, 0, "ops[0].part: part 0 of 0 is not a part"},
      {ops_at + 4, 0x7fffffffu, "ops[0]: GPU 2147483647 outside the file's GPUs"},
      {112, 200, "header.strategy: no strategy 200"},
      {116, 0xffffffffu, "header: the counts give a file of"},
  };
  const std::string path = temp_path("fields.rsched");
  for (const auto& e : edits) {
    std::string bytes = good;
    put_u32(bytes, e.at, e.value);
    stamp_binary_digest(bytes);
    write_bytes(path, bytes);
    EXPECT_HAS(config_error([&] { read_schedule_file(path); }), e.expect);
  }
}

// A binary schedule stores a strategy's and a phase's stable id (StrategyTraits::id, OpPhaseInfo::id),
// not its position in the enum: the ids are part of the file format, and the ones there are pinned
// here, so that a changed id fails this test and a reordered enum (the ids stay with their names)
// does not.
TEST(ScheduleFileFormat, StrategyIdsArePinned) {
  const std::vector<std::pair<Strategy, std::uint8_t>> ids{
      {Strategy::GatherBroadcast, 0}, {Strategy::Direct, 1}, {Strategy::DomainGrouped, 2},
      {Strategy::DomainChain, 3},     {Strategy::Hybrid, 4}, {Strategy::NemoRlReshard, 5}};
  ASSERT_EQ(all_strategies().size(), ids.size()) << "a new strategy: give it an unused id in kStrategies, and pin it here";
  for (const auto& [strategy, id] : ids) {
    EXPECT_EQ(traits(strategy).id, id) << to_string(strategy);
    EXPECT_EQ(strategy_with_id(id), strategy) << to_string(strategy);
    const Built b = build("small-moe-ep.yaml", to_string(strategy));
    const std::string bytes = schedule_to_binary(b.s);
    EXPECT_EQ(static_cast<std::uint8_t>(bytes[112]), id) << to_string(strategy);
    EXPECT_EQ(schedule_from_binary(bytes, "ids.rsched").params.strategy, strategy) << to_string(strategy);
  }
}

TEST(ScheduleFileFormat, PhaseIdsArePinned) {
  // Id 5 was `forward`, never produced and removed: reserved, so it reads as no phase.
  const std::vector<std::pair<OpPhase, std::uint8_t>> ids{
      {OpPhase::Direct, 0}, {OpPhase::Gather, 1}, {OpPhase::Broadcast, 2}, {OpPhase::Ingress, 3}, {OpPhase::FanOut, 4}};
  ASSERT_EQ(op_phases().size(), ids.size()) << "a new phase: give it an unused id in kOpPhases, and pin it here";
  for (const auto& [phase, id] : ids) {
    EXPECT_EQ(stable_id(phase), id) << to_string(phase);
    EXPECT_EQ(op_phase_with_id(id), phase) << to_string(phase);
    EXPECT_EQ(op_phase_named(to_string(phase)), phase) << to_string(phase);
  }
  EXPECT_EQ(op_phase_with_id(5), std::nullopt);
  EXPECT_EQ(op_phase_named("forward"), std::nullopt);
  // Every op record's phase byte (offset 44) is its phase's id.
  for (const char* strategy : {"direct", "gather_broadcast", "domain_chain"}) {
    const Built b = build("small-moe-ep.yaml", strategy);
    const std::string bytes = schedule_to_binary(b.s);
    const std::size_t ops_at = kHeader + (b.s.scenario.size() + 1 + 7) / 8 * 8;
    for (std::size_t i = 0; i < b.s.ops.size(); ++i)
      ASSERT_EQ(static_cast<std::uint8_t>(bytes[ops_at + 48 * i + 44]), stable_id(b.s.ops[i].phase)) << strategy << " op " << i;
  }
}

// An unknown id is one ConfigError naming the record, in the header and in an op record.
TEST(ScheduleFileFormat, UnknownIdsAreNamed) {
  const Built b = build("small-moe-ep.yaml", "domain_chain");
  const std::string good = schedule_to_binary(b.s);
  const std::size_t ops_at = kHeader + (b.s.scenario.size() + 1 + 7) / 8 * 8;
  for (const auto& [at, id, expect] : std::vector<std::tuple<std::size_t, char, std::string>>{
           {112, 6, "header.strategy: no strategy 6 (the strategy ids: 0 gather_broadcast, 1 direct"},
           {ops_at + 44, 5, "ops[0].phase: no phase 5"},
           {ops_at + 44, 9, "ops[0].phase: no phase 9"}}) {
    std::string bytes = good;
    bytes[at] = id;
    stamp_binary_digest(bytes);
    EXPECT_HAS(config_error([&] { schedule_from_binary(bytes, "ids.rsched"); }), "ids.rsched: " + expect);
  }
}

// Files written before the ids were explicit (fuzz/corpus/schedule_bin: version 1, strategies and
// phases stored by their enum positions of the time) read back as the schedules they were.
TEST(ScheduleFileFormat, FilesWrittenBeforeStableIdsStillRead) {
  struct Old {
    const char* file;
    const char* scenario;
    Strategy strategy;
    std::vector<OpPhase> phases;  // the phases its ops have, in enum order
  };
  for (const Old& old : std::vector<Old>{
           {"small-gqa-gather_broadcast.rsched", "small-gqa-megatron-vllm.yaml", Strategy::GatherBroadcast,
            {OpPhase::Gather, OpPhase::Broadcast}},
           {"small-moe-ep-domain_chain.rsched", "small-moe-ep.yaml", Strategy::DomainChain, {OpPhase::Ingress}}}) {
    const Schedule s = read_schedule_file(kRoot + "/fuzz/corpus/schedule_bin/" + old.file);
    EXPECT_EQ(s.params.strategy, old.strategy) << old.file;
    std::vector<OpPhase> phases;
    for (const Op& op : s.ops)
      if (std::find(phases.begin(), phases.end(), op.phase) == phases.end()) phases.push_back(op.phase);
    std::sort(phases.begin(), phases.end());
    EXPECT_EQ(phases, old.phases) << old.file;
    const Built b = build(old.scenario, to_string(old.strategy));
    EXPECT_NO_THROW(validate(s, b.ts, b.sc.inventory, b.sc.source, b.sc.destination)) << old.file;
  }
}
