// The GPU engine without a GPU (docs/execution.md, "The GPU engine"): the cuda and nccl backends'
// drivers run on the host twin of the device (exec/backends/src/device_run.hpp), which walks the
// same device copy lists with exec/device_list.hpp's run_task in interleavings of its own, and the
// nccl backend's calls go to a stand-in for NCCL's library (tests/nccl_standin.cpp) loaded as NCCL
// is loaded. Checked here: every strategy on every small scenario byte for byte through the lists
// (every block count, tight memory reuse), that the lists' flow control is what keeps the bytes
// right (without their waits a walk corrupts them), that a step is one launch whatever the chunk
// (host calls counted by the drivers' own code), the piece digest against its definition and the
// digest work, and the nccl backend's waves, its calls and its persistent communicator.
#include <gtest/gtest.h>

#include <dlfcn.h>

#include <cstring>
#include <map>

#include "chain_fixtures.hpp"
#include "device_run.hpp"
#include "reshard/exec/digest_terms.hpp"
#include "reshard/model/strategies.hpp"
#include "small_runs.hpp"
#ifdef RESHARD_HAVE_NCCL
#include "nccl_run.hpp"
#endif

namespace {

using namespace reshard::model;
using namespace reshard::exec;
using namespace reshard::exec::detail;

constexpr std::int64_t kTight = std::int64_t{1} << 30;  // a twin this small reuses staging memory as soon as the layout lets it

ExecOptions options_for(const std::string& backend, Verification v = Verification::Pattern) {
  ExecOptions o;
  o.backend = backend;
  o.verification = v;
  o.timeout_s = 30;
  return o;
}

// The chunk-hops a schedule moves (each chunk of a stream over each of its hops).
std::int64_t chunk_hops(const Schedule& s) {
  std::int64_t n = 0;
  for (const Op& op : s.ops)
    n += chain_chunks(op.bytes.value, std::max<std::int64_t>(stream_chunk(s, op).value, 1)) *
         (op.chain >= 0 ? static_cast<std::int64_t>(s.chains[static_cast<std::size_t>(op.chain)].hops.size()) : 1);
  return n;
}

TEST(DeviceLists, EveryStrategyOnEverySmallScenarioIsByteExactOnTheHostTwin) {
  reshard::test::for_each_small_run([](const std::string& name, const std::string& strategy, const LoadedScenario&,
                                       const TransferSet& ts, const Schedule& s, const RunPlan& rp) {
    // Three blocks interleave the lanes at random, and the tight twin reuses staging memory as soon
    // as the layout lets it: every run. On one scenario also one block (every lane in the global
    // order) and 64 blocks with room to spare (no reuse); each twin copies the whole arena, so the
    // three on every run would be minutes of the suite.
    struct Twin {
      std::int32_t blocks;
      std::uint64_t seed;
      std::int64_t memory;
    };
    std::vector<Twin> twins{{3, 7, kTight}};
    if (name.rfind("small-moe-ep.yaml", 0) == 0) twins.insert(twins.end(), {{1, 1, kTight}, {64, 11, std::int64_t{64} << 30}});
    for (const Twin& t : twins) {
      const std::string what = name + " " + strategy + " blocks " + std::to_string(t.blocks);
      HostDevice dev(t.blocks, t.seed, t.memory);
      CudaRun c;
      const RunResult r = run_cuda_on(dev, c, rp, options_for("cuda"));
      EXPECT_TRUE(r.measurement.verified) << what;
      EXPECT_EQ(r.measurement.bytes_verified, ts.bytes_needed.value) << what;
      // What the walks copied is what the lists say (every run once), and the Measurement's.
      EXPECT_EQ(dev.copied(), c.copy_bytes + c.run.local_bytes) << what;
      EXPECT_EQ(r.measurement.device_copy_bytes, c.copy_bytes) << what;
      // Each op's stamps: started, and ended no earlier.
      for (std::size_t i = 0; i < s.ops.size(); ++i) {
        EXPECT_GE(r.measurement.ops[i].start_s, 0) << what << " op " << i;
        EXPECT_GE(r.measurement.ops[i].end_s, r.measurement.ops[i].start_s) << what << " op " << i;
      }
      // A step is one launch; the run adds a reset, two events, a wait, their time, the stamps' copy
      // and its wait: steps + 7 host calls, whatever the chunks.
      ASSERT_TRUE(r.measurement.host_calls.has_value());
      const HostCalls& calls = *r.measurement.host_calls;
      EXPECT_EQ(calls.per_step, std::vector<std::int64_t>(static_cast<std::size_t>(rp.steps), 1)) << what;
      EXPECT_EQ(calls.launches, rp.steps) << what;
      EXPECT_EQ(calls.total(), rp.steps + 7) << what;
      EXPECT_EQ(calls.nccl, 0);
      // Every wait names a counter an earlier task has already set that far; each lane's counter
      // counts up by one (what makes the walk free of deadlock: device_list.hpp).
      for (const std::int32_t id : c.steps) {
        const list::List& l = dev.list_of(id);
        std::map<std::int32_t, std::int32_t> set;  // counter -> the value set so far
        for (const list::Task& task : l.tasks) {
          for (std::int32_t w = 0; w < task.wait_count; ++w) {
            const list::Wait& x = l.waits[static_cast<std::size_t>(task.wait_first + w)];
            ASSERT_TRUE(set.count(x.counter) && set[x.counter] >= x.value)
                << what << ": a wait for counter " << x.counter << " >= " << x.value << " before any task sets it";
          }
          if (task.signal >= 0) {
            EXPECT_EQ(task.signal_value, set[task.signal] + 1) << what;
            set[task.signal] = task.signal_value;
          }
        }
      }
    }
  });
}

TEST(DeviceLists, HandMadeChainsAreByteExactOnTheHostTwin) {
  struct Case {
    const char* what;
    int dp;
    std::vector<ChainHop> hops;
    std::int64_t chunk;
    std::int32_t parts, slots;
  };
  for (const Case& c : {Case{"ring, short last chunk", 2, reshard::test::ring4(), 10007, 1, kChainSlots},
                        Case{"two-slot ring", 2, reshard::test::ring4(), 4099, 1, kMinSlots},
                        Case{"tree with fan-outs", 3, reshard::test::fan_out_tree6(), 64 << 10, 1, kChainSlots},
                        Case{"two-slot tree", 3, reshard::test::fan_out_tree6(), 4099, 1, kMinSlots},
                        Case{"part smaller than a chunk", 2, reshard::test::ring4(), 64 << 20, 1, kChainSlots},
                        Case{"two ops on one chain", 2, reshard::test::ring4(), 100003, 2, kChainSlots}}) {
    const LoadedScenario sc = reshard::test::chain_scenario(c.dp);
    const TransferSet ts = plan(sc.inventory, sc.source, sc.destination);
    Schedule s = reshard::test::chain_schedule(sc, ts, c.hops, c.chunk, c.parts);
    s.slots = c.slots;
    const RunPlan rp = make_run_plan(sc, ts, s);
    for (std::uint64_t seed : {1, 2, 3, 4}) {
      HostDevice dev(static_cast<std::int32_t>(seed), seed, kTight);
      CudaRun run;
      const RunResult r = run_cuda_on(dev, run, rp, options_for("cuda"));
      EXPECT_EQ(r.measurement.bytes_verified, ts.bytes_needed.value) << c.what << " seed " << seed;
    }
  }
}

// The lists' waits are what keeps a ring's bytes right: without the waits for a slot to be free a
// walk on a two-slot ring overwrites chunks its children have not taken yet, and the pattern check
// sees it (in some interleaving of 40); with them, no interleaving goes wrong.
TEST(DeviceLists, WithoutTheSlotWaitsAWalkCorruptsTheRing) {
  const LoadedScenario sc = reshard::test::chain_scenario(2);
  const TransferSet ts = plan(sc.inventory, sc.source, sc.destination);
  Schedule s = reshard::test::chain_schedule(sc, ts, reshard::test::ring4(), 4099, 1);
  s.slots = kMinSlots;
  const RunPlan rp = make_run_plan(sc, ts, s);
  const ExecOptions o = options_for("cuda");
  int corrupted = 0;
  for (std::uint64_t seed = 1; seed <= 40; ++seed)
    for (bool keep_waits : {true, false}) {
      HostDevice dev(4, seed, kTight);
      DeviceRun d;
      lay_out(d, dev, rp, rp.gpus, o);
      StepLists lists = virtual_gpu_lists(rp, d.progs, d.at, {});
      std::vector<std::int32_t> ids;
      for (list::List& l : lists.steps) {
        if (!keep_waits) {  // a receiver's wait for its parent's chunk stays (value k + 1); the slot waits go
          std::vector<list::Wait> kept;
          for (list::Task& t : l.tasks) {
            const auto first = static_cast<std::int64_t>(kept.size());
            for (std::int32_t w = 0; w < t.wait_count; ++w)
              if (l.waits[static_cast<std::size_t>(t.wait_first + w)].value == t.signal_value)
                kept.push_back(l.waits[static_cast<std::size_t>(t.wait_first + w)]);
            t.wait_first = first;
            t.wait_count = static_cast<std::int32_t>(static_cast<std::int64_t>(kept.size()) - first);
          }
          l.waits = kept;
        }
        ids.push_back(dev.add_list(l));
      }
      dev.add_counters(lists.counters, static_cast<std::int32_t>(s.ops.size()));
      start_run(d, dev, o);
      dev.reset();
      for (std::int32_t id : ids) dev.launch(id);
      std::int64_t bytes = 0;
      const std::string err = check_pattern(d, dev, sc.inventory, bytes);
      if (keep_waits) {
        EXPECT_EQ(err, "") << "seed " << seed;
        EXPECT_EQ(bytes, ts.bytes_needed.value);
      } else {
        corrupted += !err.empty();
      }
    }
  EXPECT_GT(corrupted, 0) << "no interleaving without the slot waits went wrong: the test cannot see a missing wait";
}

// Host calls per step do not grow with the chunks: every strategy of the small scenarios at 64 KiB
// and at 1 MiB chunks (16 times the chunks, or more) makes the same calls on the cuda backend.
TEST(DeviceLists, HostCallsPerStepDoNotGrowWithTheChunks) {
  for (const char* name : {"small-gqa-megatron-vllm.yaml", "small-moe-ep.yaml", "small-dtensor-uneven.yaml"}) {
    const LoadedScenario sc = load_scenario(std::filesystem::path(reshard::test::scenario_path(name)));
    const TransferSet ts = plan(sc.inventory, sc.source, sc.destination);
    for (const Strategy st : all_strategies()) {
      if (!traits(st).chunk) continue;  // no chunk to vary (direct: one op per piece pair)
      const std::string strategy = to_string(st);
      std::vector<HostCalls> calls;
      std::vector<std::int64_t> hops;
      for (const char* chunk : {"64KiB", "1MiB"}) {
        const Schedule s = build_schedule(ts, sc.inventory, sc.source, sc.destination, sc.topology,
                                          parse_strategy(strategy + " chunk=" + chunk), staging_budgets(sc));
        const RunPlan rp = make_run_plan(sc, ts, s);
        HostDevice dev;
        CudaRun c;
        const RunResult r = run_cuda_on(dev, c, rp, options_for("cuda"));
        EXPECT_EQ(r.measurement.bytes_verified, ts.bytes_needed.value);
        calls.push_back(*r.measurement.host_calls);
        hops.push_back(chunk_hops(s));
      }
      EXPECT_GT(hops[0], hops[1]) << name << " " << strategy;
      EXPECT_EQ(calls[0], calls[1]) << name << " " << strategy << ": " << hops[0] << " chunk-hops at 64 KiB, " << hops[1] << " at 1 MiB";
    }
  }
}

// The piece digest (exec/verify.hpp) against its definition, written out here: the piece's bytes
// in row-major order, n + sum_i w_i (2 i + 1) over its little-endian words, the last zero-padded.
std::uint64_t digest_by_definition(const std::vector<unsigned char>& bytes) {
  std::uint64_t h = bytes.size();
  for (std::size_t i = 0; i * 8 < bytes.size(); ++i) {
    std::uint64_t w = 0;
    for (std::size_t b = 0; b < 8 && i * 8 + b < bytes.size(); ++b) w |= static_cast<std::uint64_t>(bytes[i * 8 + b]) << (8 * b);
    h += w * (2 * i + 1);
  }
  return h;
}

TEST(PieceDigest, HandWorked) {
  // Nine bytes: w_0 = 1, w_1 = 2 (zero-padded): 9 + 1 * 1 + 2 * 3 = 16.
  const std::vector<unsigned char> b{1, 0, 0, 0, 0, 0, 0, 0, 2};
  EXPECT_EQ(digest_by_definition(b), 16u);
  EXPECT_EQ(9 + digest_bytes(0, b.data(), 9), 16u);
  // Split anywhere, in any order: the same sum.
  EXPECT_EQ(9 + digest_bytes(5, b.data() + 5, 4) + digest_bytes(0, b.data(), 5), 16u);
  // A 1-D piece [2:11) of a shard [0:16) of 1-byte elements: the piece's bytes are data[2..10].
  std::vector<unsigned char> data(16);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<unsigned char>(i * 37 + 1);
  EXPECT_EQ(piece_digest(Box{{{2, 11}}}, Box{{{0, 16}}}, 1, data.data()),
            digest_by_definition(std::vector<unsigned char>(data.begin() + 2, data.begin() + 11)));
}

// The digests of a run, as the GPU backends take them (the digest work: each piece's rows in its
// shard, cut into 64 KiB runs, summed per piece), equal the host's piece_digest and the definition
// on every piece every GPU holds or needs; a run of random bytes verifies by them, and a byte
// flipped afterwards in a destination shard is named by its piece.
TEST(PieceDigest, TheDigestWorkEqualsTheHostAndTheDefinition) {
  for (const char* name : {"small-gqa-megatron-vllm.yaml", "small-moe-ep.yaml", "small-dtensor-uneven.yaml"}) {
    const LoadedScenario sc = load_scenario(std::filesystem::path(reshard::test::scenario_path(name)));
    const TransferSet ts = plan(sc.inventory, sc.source, sc.destination);
    const Schedule s = build_schedule(ts, sc.inventory, sc.source, sc.destination, sc.topology, parse_strategy("hybrid"),
                                      staging_budgets(sc));
    const RunPlan rp = make_run_plan(sc, ts, s);
    const ExecOptions o = options_for("cuda", Verification::Digest);
    HostDevice dev;
    CudaRun c;
    compile_cuda(c, dev, rp, o);
    // Bytes other than the fill pattern's (another tensor's pattern), the same on every holder of
    // an element (the digests of replicas must agree).
    for (std::size_t p = 0; p < c.run.progs.size(); ++p)
      for (std::size_t i = 0; i < c.run.progs[p].regions.size(); ++i)
        if (const Region& r = c.run.progs[p].regions[i]; r.kind == Region::Kind::Source) {
          const TensorInfo& t = sc.inventory.tensor(r.tensor);
          const int es = static_cast<int>(dtype_size(t.dtype));
          unsigned char* at = c.run.arena + c.run.at[p][i];
          for_each_row(r.box, t.shape, [&](std::int64_t local, std::int64_t global, std::int64_t n) {
            pattern_row(t.id + 7919, global, n, es, at + local * es);
          });
        }
    const RunResult r = run_cuda_on(dev, c, rp, o);  // compiled already: moves the random bytes
    EXPECT_TRUE(r.measurement.verified) << name;
    EXPECT_EQ(r.measurement.bytes_verified, ts.bytes_needed.value) << name;
    std::vector<detail::PieceDigest> got;
    piece_digests(c.run, dev, got);
    ASSERT_EQ(got.size(), c.run.digest_slots.size());
    for (const detail::PieceDigest& g : got) {
      const std::size_t p = static_cast<std::size_t>(std::find_if(c.run.progs.begin(), c.run.progs.end(),
                                                                  [&](const GpuProgram& q) { return q.gpu == g.gpu; }) -
                                                     c.run.progs.begin());
      const auto& pieces = g.side == 0 ? c.run.progs[p].source_pieces : c.run.progs[p].destination_pieces;
      const auto it = std::find_if(pieces.begin(), pieces.end(), [&](const auto& q) { return q.first == g.piece; });
      ASSERT_NE(it, pieces.end());
      const Piece& pc = ts.pieces[static_cast<std::size_t>(g.piece)];
      const Region& shard = c.run.progs[p].regions[static_cast<std::size_t>(it->second)];
      const int es = static_cast<int>(dtype_size(sc.inventory.tensor(pc.tensor).dtype));
      const unsigned char* data = c.run.arena + c.run.at[p][static_cast<std::size_t>(it->second)];
      std::vector<unsigned char> bytes;
      piece_runs(pc.box, shard.box, 0, pc.box.elements(), [&](std::int64_t off, std::int64_t, std::int64_t n) {
        bytes.insert(bytes.end(), data + off * es, data + (off + n) * es);
      });
      EXPECT_EQ(g.digest, piece_digest(pc.box, shard.box, es, data)) << name << " piece " << g.piece;
      EXPECT_EQ(g.digest, digest_by_definition(bytes)) << name << " piece " << g.piece;
    }
    // One byte of a destination shard flipped: its piece's digests disagree, and the error says which.
    const auto [p, region] = c.run.destination_region.front();
    c.run.arena[c.run.at[p][static_cast<std::size_t>(region)]] ^= 1;
    got.clear();
    piece_digests(c.run, dev, got);
    std::int64_t compared = 0;
    const std::string err = compare_digests(got, ts, sc.inventory, compared);
    EXPECT_NE(err.find("tensor '" + sc.inventory.tensor(c.run.progs[p].regions[static_cast<std::size_t>(region)].tensor).name), std::string::npos)
        << name << ": " << err;
  }
}

TEST(DeviceLists, CorruptedByteInAForwardedChunkIsNamed) {
  const LoadedScenario sc = reshard::test::chain_scenario(2);
  const TransferSet ts = plan(sc.inventory, sc.source, sc.destination);
  const Schedule s = reshard::test::chain_schedule(sc, ts, reshard::test::ring4(), 10007, 1);
  const RunPlan rp = make_run_plan(sc, ts, s);
  const GpuProgram victim = build_program(rp, 3);
  const CopyRun& first = victim.receives.at(0).copies.at(0);
  const Region& shard = victim.regions.at(static_cast<std::size_t>(first.dst));
  ExecOptions o = options_for("cuda");
  o.faults.push_back(parse_fault("corrupt:0"));
  HostDevice dev;
  CudaRun c;
  try {
    run_cuda_on(dev, c, rp, o);
    FAIL() << "a corrupted byte went unnoticed";
  } catch (const ExecError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("(GPU 3): tensor '" + sc.inventory.tensor(shard.tensor).name + "' box " + to_string(shard.box)), std::string::npos) << m;
  }
}

#ifdef RESHARD_HAVE_NCCL

// The stand-in for NCCL (tests/nccl_standin.cpp), loaded as the backend loads NCCL, and what it saw.
struct StandIn {
  NcclApi api;
  void* lib = nullptr;
  StandIn() : api(load_nccl_library(RESHARD_NCCL_STANDIN)), lib(dlopen(RESHARD_NCCL_STANDIN, RTLD_NOW | RTLD_LOCAL)) {
    reset();
  }
  ~StandIn() {
    if (lib) dlclose(lib);
  }
  void reset() { reinterpret_cast<void (*)()>(dlsym(lib, "reshard_standin_reset"))(); }
  struct Counts {
    long long inits, destroys, aborts, groups, sends, receives, bytes, alive;
  };
  Counts counts() const {
    Counts c{};
    reinterpret_cast<void (*)(long long*)>(dlsym(lib, "reshard_standin_counts"))(&c.inits);
    return c;
  }
  std::string error() const { return reinterpret_cast<const char* (*)()>(dlsym(lib, "reshard_standin_error"))(); }
};

StandIn& standin() {
  static StandIn s;
  return s;
}

std::unique_ptr<NcclSession> session_on_twin(std::int32_t blocks = 4, std::uint64_t seed = 1) {
  auto s = std::make_unique<NcclSession>();
  s->api = &standin().api;
  s->device = std::make_unique<HostDevice>(blocks, seed, kTight);
  return s;
}

TEST(NcclEngine, EveryStrategyOnEverySmallScenarioIsByteExactThroughTheStandIn) {
  reshard::test::for_each_small_run([](const std::string& name, const std::string& strategy, const LoadedScenario&,
                                       const TransferSet& ts, const Schedule& s, const RunPlan& rp) {
    // Within the scenario's budgets on every scenario; within 1 MiB (rings that wrap) on three
    // (dense, MoE, uneven): each run copies its whole arena on the host.
    const bool tight = name.find("(1 MiB)") != std::string::npos;
    if (tight && name.rfind("small-moe-ep.yaml", 0) != 0 && name.rfind("small-gqa-megatron-vllm.yaml", 0) != 0 &&
        name.rfind("small-dtensor-uneven.yaml", 0) != 0)
      return;
    const std::string what = name + " " + strategy;
    standin().reset();
    auto session = session_on_twin();
    NcclWorld w;
    const RunResult r = run_nccl_on(*session->device, *session, w, rp, options_for("nccl"));
    EXPECT_EQ(standin().error(), "") << what;
    EXPECT_TRUE(r.measurement.verified) << what;
    EXPECT_EQ(r.measurement.bytes_verified, ts.bytes_needed.value) << what;
    // Calls: per wave its group (start, end and one send and one receive per window and hop) and
    // its pack and unpack lists; counted by the driver as the stand-in saw them.
    const auto seen = standin().counts();
    const HostCalls& calls = *r.measurement.host_calls;
    EXPECT_EQ(calls.nccl, 2 * seen.groups + seen.sends + seen.receives) << what;
    std::int64_t windows = 0, chunks = 0, launches = 0;
    for (const Op& op : s.ops) {
      const std::int64_t k = chain_chunks(op.bytes.value, std::max<std::int64_t>(stream_chunk(s, op).value, 1));
      const std::int64_t hops = op.chain >= 0 ? static_cast<std::int64_t>(s.chains[static_cast<std::size_t>(op.chain)].hops.size()) : 1;
      windows += (k + window_chunks(s, op) - 1) / window_chunks(s, op) * hops;
      chunks += k * hops;
    }
    for (const auto& step : session->run.lists)
      for (const auto& [pack, unpack] : step) launches += (pack >= 0) + (unpack >= 0);
    EXPECT_EQ(seen.sends, windows) << what;      // one send per window and hop (no window wraps at 8 slots)
    EXPECT_EQ(seen.receives, windows) << what;
    EXPECT_LE(seen.sends, chunks) << what;
    EXPECT_EQ(calls.launches, launches) << what;
    EXPECT_EQ(seen.inits, 1) << what;
  });
}

// A Refit's runs share its session: three runs make one communicator, which the session destroys
// when it goes; every run delivers every byte.
TEST(NcclEngine, ThreeRunsOfOneSessionMakeOneCommunicator) {
  const LoadedScenario sc = load_scenario(std::filesystem::path(reshard::test::scenario_path("small-moe-ep.yaml")));
  const TransferSet ts = plan(sc.inventory, sc.source, sc.destination);
  const Schedule s = build_schedule(ts, sc.inventory, sc.source, sc.destination, sc.topology, parse_strategy("gather_broadcast"),
                                    staging_budgets(sc));
  const RunPlan rp = make_run_plan(sc, ts, s);
  standin().reset();
  {
    auto session = session_on_twin();
    NcclWorld w;
    for (int run = 0; run < 3; ++run) {
      const RunResult r = run_nccl_on(*session->device, *session, w, rp, options_for("nccl", run == 1 ? Verification::Digest : Verification::Pattern));
      EXPECT_EQ(r.measurement.bytes_verified, ts.bytes_needed.value) << "run " << run;
      EXPECT_EQ(standin().counts().inits, 1) << "run " << run;
      EXPECT_EQ(standin().counts().destroys, 0) << "run " << run;
    }
    EXPECT_EQ(session->communicators, 1);
  }
  EXPECT_EQ(standin().counts().destroys, 1);
  EXPECT_EQ(standin().counts().alive, 0);
}

TEST(NcclEngine, CorruptedForwardedChunkIsNamed) {
  const LoadedScenario sc = reshard::test::chain_scenario(2);
  const TransferSet ts = plan(sc.inventory, sc.source, sc.destination);
  const Schedule s = reshard::test::chain_schedule(sc, ts, reshard::test::ring4(), 10007, 1);
  const RunPlan rp = make_run_plan(sc, ts, s);
  ExecOptions o = options_for("nccl");
  o.faults.push_back(parse_fault("corrupt:0@middle"));
  auto session = session_on_twin();
  NcclWorld w;
  try {
    run_nccl_on(*session->device, *session, w, rp, o);
    FAIL() << "a corrupted byte went unnoticed";
  } catch (const ExecError& e) {
    EXPECT_NE(std::string(e.what()).find("(GPU 3): tensor '"), std::string::npos) << e.what();
  }
}

#endif  // RESHARD_HAVE_NCCL

}  // namespace
