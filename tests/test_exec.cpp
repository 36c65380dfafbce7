// The executor core without MPI or a GPU: the pattern, the row walk, programs run in one process
// ("loopback": every GPU's program in host memory, operations in id order; chain ops chunk by
// chunk, and in the nccl backend's waves), hand-made chain ops (a ring with a short last chunk, a
// tree with fan-outs, a part smaller than a chunk, two ops on one chain), verification, faults,
// refusal of a schedule built for another scenario, and the Measurement round trip through check.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <nlohmann/json.hpp>

#include "chain_fixtures.hpp"
#include "host_memory.hpp"
#include "reshard/exec/executor.hpp"
#include "staging.hpp"
#include "reshard/model/calibrate.hpp"
#include "reshard/model/digest.hpp"
#include "reshard/model/scenario.hpp"
#include "small_runs.hpp"

namespace {

using namespace reshard::model;
using namespace reshard::exec;

using reshard::test::scenario_path;

TEST(Pattern, NeverZeroAndDeterministic) {
  // Every element of every dtype size has a non-zero byte 0 (bit 0 forced), for many tensors and
  // indices; the same (tensor, index) gives the same bytes, and neighbours differ.
  int equal_neighbours = 0;
  for (std::int32_t t = 0; t < 50; ++t)
    for (std::int64_t i = 0; i < 2000; ++i)
      for (int es : {1, 2, 4}) {
        unsigned char a[8] = {}, b[8] = {}, c[8] = {};
        pattern_bytes(t, i, es, a);
        pattern_bytes(t, i, es, b);
        pattern_bytes(t, i + 1, es, c);
        ASSERT_NE(a[0] & 1, 0);
        ASSERT_EQ(std::memcmp(a, b, 8), 0);
        if (es == 4 && std::memcmp(a, c, 4) == 0) ++equal_neighbours;
      }
  EXPECT_EQ(equal_neighbours, 0);
  EXPECT_NE(pattern_word(0, 5), pattern_word(1, 5));
}

TEST(RowWalk, HandWorkedBox) {
  // Box [1:3, 2:4] of a [4, 5] tensor: two rows of two elements. Row 0 is global (1, 2) = 1*5+2 = 7,
  // row 1 is (2, 2) = 2*5+2 = 12; local offsets 0 and 2.
  Box b{{{1, 3}, {2, 4}}};
  std::vector<std::array<std::int64_t, 3>> rows;
  detail::for_each_row(b, {4, 5}, [&](std::int64_t l, std::int64_t g, std::int64_t n) { rows.push_back({l, g, n}); });
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0], (std::array<std::int64_t, 3>{0, 7, 2}));
  EXPECT_EQ(rows[1], (std::array<std::int64_t, 3>{2, 12, 2}));
  // 3-D: box [1:2, 0:2, 3:4] of [2, 3, 4]: rows at (1,0,3) = 12+0+3 = 15 and (1,1,3) = 12+4+3 = 19.
  Box c{{{1, 2}, {0, 2}, {3, 4}}};
  rows.clear();
  detail::for_each_row(c, {2, 3, 4}, [&](std::int64_t l, std::int64_t g, std::int64_t n) { rows.push_back({l, g, n}); });
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0][1], 15);
  EXPECT_EQ(rows[1][1], 19);
}

// Every GPU's program in this process. Shards live in `mem`; staging regions in `mem` too, or
// (Staging::ByOp, Staging::InWaves) in one arena shared by every GPU, laid out as the cuda or the
// nccl backend lays out its device arena (staging.hpp) with a budget so small that every region
// reuses memory as soon as the plan lets it: a region reused too early corrupts what is run.
struct Loopback {
  enum class Staging { Own, ByOp, InWaves };
  std::map<GpuId, GpuProgram> progs;
  std::map<GpuId, detail::HostMemory> mem;
  std::vector<unsigned char> arena;
  std::map<GpuId, std::vector<unsigned char*>> at;  // per region: where its bytes are
  detail::StagingPlan plan;

  Loopback(const RunPlan& rp, Staging staging) {
    const auto& inv = rp.scenario->inventory;
    std::vector<GpuProgram> list;
    for (GpuId g : rp.gpus) list.push_back(build_program(rp, g));
    std::vector<std::vector<std::int64_t>> request_of;
    if (staging != Staging::Own) {
      const auto requests = staging == Staging::ByOp ? detail::staging_requests_by_op(list, request_of)
                                                     : detail::staging_requests_in_waves(rp, list, request_of);
      plan = detail::plan_staging(requests, 0, staging == Staging::InWaves);
      arena.assign(static_cast<std::size_t>(plan.bytes), 0);
    }
    for (std::size_t p = 0; p < list.size(); ++p) {
      const GpuId g = list[p].gpu;
      progs[g] = list[p];
      detail::allocate(progs[g], mem[g], staging == Staging::Own);
      auto& where = at[g];
      for (std::size_t i = 0; i < progs[g].regions.size(); ++i)
        where.push_back(staging != Staging::Own && request_of[p][i] >= 0
                            ? arena.data() + plan.offset[static_cast<std::size_t>(request_of[p][i])]
                            : mem[g].regions[i].data());
      detail::fill_sources(progs[g], inv, mem[g]);
      copy(g, progs[g].local);
    }
  }
  Loopback(const Loopback&) = delete;
  Loopback(Loopback&&) = default;
  void copy(GpuId g, const std::vector<CopyRun>& runs) {
    for (const CopyRun& c : runs)
      std::memcpy(at[g][static_cast<std::size_t>(c.dst)] + c.dst_offset, at[g][static_cast<std::size_t>(c.src)] + c.src_offset,
                  static_cast<std::size_t>(c.bytes));
  }
  unsigned char* region(GpuId g, const Transfer* t) { return at[g][static_cast<std::size_t>(t->region)]; }
  std::int64_t bytes(GpuId g, const Transfer* t) { return progs[g].regions[static_cast<std::size_t>(t->region)].bytes; }
};

const Transfer* find_transfer(const std::vector<Transfer>& list, std::int64_t op) {
  auto it = std::find_if(list.begin(), list.end(), [&](const Transfer& t) { return t.op == op; });
  return it == list.end() ? nullptr : &*it;
}

// Runs every GPU's program in this process as the cuda backend orders it: operations in id order,
// a send's region copied into the receiver's region; a chain op chunk by chunk, each hop copying
// chunk k from its `from`'s region (the root's send region, or what `from` received) into its
// `to`'s. `corrupt` flips one unpacked byte of that operation at its dst (`where`: the first, the
// middle or the last, as --inject corrupt:OP@WHERE does), before dst forwards it.
Loopback run_loopback(const RunPlan& rp, std::int64_t corrupt = -1, Loopback::Staging staging = Loopback::Staging::Own,
                      Fault::Where where = Fault::Where::First) {
  const std::vector<Fault> faults{{Fault::Kind::Corrupt, corrupt, where}};
  Loopback lb(rp, staging);
  const Schedule& s = *rp.schedule;
  for (const Op& op : s.ops) {
    const Transfer* st = find_transfer(lb.progs[op.src].sends, op.id);
    EXPECT_NE(st, nullptr) << "op " << op.id;
    if (!st) continue;
    lb.copy(op.src, st->copies);
    auto flip = [&](GpuId g, const Transfer* t, std::int64_t lo, std::int64_t hi) {
      if (op.id != corrupt || g != op.dst || t->copies.empty()) return;
      const std::int64_t at = corrupt_offset(faults, *t);
      if (at >= lo && at < hi) lb.region(g, t)[at] ^= 0x5a;
    };
    if (op.chain < 0) {
      const Transfer* rt = find_transfer(lb.progs[op.dst].receives, op.id);
      EXPECT_NE(rt, nullptr) << "op " << op.id;
      if (!rt) continue;
      EXPECT_EQ(lb.bytes(op.src, st), lb.bytes(op.dst, rt));
      EXPECT_EQ(lb.bytes(op.dst, rt), op.bytes.value) << "op " << op.id;
      std::memmove(lb.region(op.dst, rt), lb.region(op.src, st), static_cast<std::size_t>(op.bytes.value));
      flip(op.dst, rt, 0, op.bytes.value);
      lb.copy(op.dst, rt->copies);
      continue;
    }
    const Chain& c = s.chains[static_cast<std::size_t>(op.chain)];
    EXPECT_EQ(st->chain, op.chain);
    EXPECT_EQ(st->peer, -1);
    std::map<GpuId, const Transfer*> held{{op.src, st}};
    for (const ChainHop& h : c.hops) {
      const Transfer* rt = find_transfer(lb.progs[h.to].receives, op.id);
      EXPECT_NE(rt, nullptr) << "op " << op.id << " GPU " << h.to;
      if (!rt) return lb;
      EXPECT_EQ(rt->peer, h.from);
      EXPECT_EQ(lb.bytes(h.to, rt), op.bytes.value) << "op " << op.id;
      const auto& kids = held.at(h.from)->children;
      EXPECT_NE(std::find(kids.begin(), kids.end(), h.to), kids.end()) << "op " << op.id;
      held[h.to] = rt;
    }
    // Chunk-major, hops in order: chunk k reaches a GPU before that GPU forwards it.
    const std::int64_t n = chain_chunks(op.bytes.value, c.chunk.value);
    for (std::int64_t k = 0; k < n; ++k) {
      const ChunkRange r = chain_chunk(op.bytes.value, c.chunk.value, k);
      EXPECT_GT(r.bytes, 0);
      EXPECT_LE(r.bytes, c.chunk.value);
      for (const ChainHop& h : c.hops) {
        std::memcpy(lb.region(h.to, held.at(h.to)) + r.begin, lb.region(h.from, held.at(h.from)) + r.begin,
                    static_cast<std::size_t>(r.bytes));
        flip(h.to, held.at(h.to), r.begin, r.begin + r.bytes);
      }
    }
    for (const ChainHop& h : c.hops) lb.copy(h.to, held.at(h.to)->copies);
  }
  return lb;
}

TEST(Loopback, EveryStrategyDeliversEveryByteOfEverySmallScenario) {
  reshard::test::for_each_small_run([](const std::string& name, const std::string& strategy, const LoadedScenario& sc,
                                       const TransferSet& ts, const Schedule&, const RunPlan& rp) {
    {  // staging memory reused as the cuda backend plans it (fences between ops), as tightly as it lets it
      Loopback tight = run_loopback(rp, -1, Loopback::Staging::ByOp);
      std::int64_t bytes = 0;
      for (auto& [g, prog] : tight.progs)
        EXPECT_EQ(detail::check_destinations(prog, sc.inventory, tight.mem[g], 0, bytes), "") << name << " " << strategy << " (reused)";
      EXPECT_EQ(bytes, ts.bytes_needed.value) << name << " " << strategy;
    }
    Loopback lb = run_loopback(rp);
    std::int64_t bytes = 0, destination = 0;
    for (auto& [g, prog] : lb.progs) {
      EXPECT_EQ(detail::check_destinations(prog, sc.inventory, lb.mem[g], 0, bytes), "") << name << " " << strategy;
      destination += prog.destination_bytes;
    }
    // One destination rank per GPU here, so the destination shards of all GPUs are the plan's
    // bytes_needed (sum over destination ranks of what each must hold).
    EXPECT_EQ(bytes, ts.bytes_needed.value) << name << " " << strategy;
    EXPECT_EQ(destination, ts.bytes_needed.value) << name << " " << strategy;
  });
}

// Runs every GPU's program as the nccl backend orders it: step by step, each step in the waves of
// step_waves, a send packed just before its first wave, a receive unpacked just after its last
// chunk's, every transfer of a wave reading what its sender held before the wave (a group runs its
// sends and receives together). Checks that a GPU only forwards chunks it already has, gets each
// chunk once, and that every GPU of a chain ends up with all of them.
Loopback run_waves(const RunPlan& rp, Loopback::Staging staging = Loopback::Staging::Own) {
  Loopback lb(rp, staging);
  const Schedule& s = *rp.schedule;
  std::vector<std::vector<std::int64_t>> steps(static_cast<std::size_t>(rp.steps));
  for (const Op& op : s.ops) steps[static_cast<std::size_t>(rp.step_of[static_cast<std::size_t>(op.id)])].push_back(op.id);
  for (const auto& ops : steps) {
    const StepWaves sw = step_waves(s, ops);
    // The transfer of each (op, GPU), the chunks it holds, the waves it packs before and unpacks after.
    std::map<std::pair<std::int64_t, GpuId>, const Transfer*> at;
    std::map<std::pair<std::int64_t, GpuId>, std::vector<char>> holds;
    std::map<std::int64_t, std::vector<std::pair<GpuId, const Transfer*>>> pack_in, unpack_after;
    std::size_t q = 0;
    for (auto id : ops) {
      const Op& op = s.ops[static_cast<std::size_t>(id)];
      const Transfer* st = find_transfer(lb.progs[op.src].sends, id);
      EXPECT_NE(st, nullptr);
      if (!st) return lb;
      at[{id, op.src}] = st;
      if (op.chain < 0) {
        at[{id, op.dst}] = find_transfer(lb.progs[op.dst].receives, id);
        pack_in[0].emplace_back(op.src, st);
        unpack_after[0].emplace_back(op.dst, at[{id, op.dst}]);
        continue;
      }
      const ChainWaves& cw = sw.chains[q++];
      EXPECT_EQ(cw.op, id);
      pack_in[cw.wave_of(0, 0)].emplace_back(op.src, st);
      const Chain& c = s.chains[static_cast<std::size_t>(op.chain)];
      const auto n = static_cast<std::size_t>(chain_chunks(op.bytes.value, c.chunk.value));
      holds[{id, op.src}].assign(n, 1);
      for (std::size_t h = 0; h < c.hops.size(); ++h) {
        const GpuId to = c.hops[h].to;
        at[{id, to}] = find_transfer(lb.progs[to].receives, id);
        holds[{id, to}].assign(n, 0);
        unpack_after[cw.wave_of(h, std::max<std::int64_t>(cw.chunks - 1, 0))].emplace_back(to, at[{id, to}]);
      }
    }
    for (std::int64_t wave = 0; wave < sw.waves; ++wave) {
      for (const auto& [g, t] : pack_in[wave]) lb.copy(g, t->copies);
      struct Move {
        GpuId from, to;
        std::int64_t op, chunk, begin, bytes;
      };
      std::vector<Move> moves;
      q = 0;
      for (auto id : ops) {
        const Op& op = s.ops[static_cast<std::size_t>(id)];
        if (op.chain < 0) {
          if (wave == 0) moves.push_back({op.src, op.dst, id, -1, 0, op.bytes.value});
          continue;
        }
        const ChainWaves& cw = sw.chains[q++];
        const Chain& c = s.chains[static_cast<std::size_t>(op.chain)];
        for (std::size_t h = 0; h < c.hops.size(); ++h) {
          const std::int64_t k = cw.chunk_in(h, wave);
          if (k < 0) continue;
          const ChainHop& hop = c.hops[h];
          const auto has = [&](GpuId g) { return holds[std::make_pair(id, g)][static_cast<std::size_t>(k)] != 0; };
          EXPECT_TRUE(has(hop.from)) << "op " << id << " wave " << wave << ": GPU " << hop.from << " forwards chunk " << k
                                     << " before it has it";
          EXPECT_FALSE(has(hop.to)) << "op " << id << ": chunk " << k << " twice";
          const ChunkRange r = chain_chunk(op.bytes.value, c.chunk.value, k);
          moves.push_back({hop.from, hop.to, id, k, r.begin, r.bytes});
        }
      }
      // A group's transfers run together: read everything first, then write.
      std::vector<std::vector<unsigned char>> read;
      for (const Move& m : moves) {
        const unsigned char* from = lb.region(m.from, at.at({m.op, m.from})) + m.begin;
        read.emplace_back(from, from + m.bytes);
      }
      for (std::size_t i = 0; i < moves.size(); ++i) {
        const Move& m = moves[i];
        std::copy(read[i].begin(), read[i].end(), lb.region(m.to, at.at({m.op, m.to})) + m.begin);
        if (m.chunk >= 0) holds[{m.op, m.to}][static_cast<std::size_t>(m.chunk)] = 1;
      }
      for (const auto& [g, t] : unpack_after[wave]) lb.copy(g, t->copies);
    }
    for (const auto& [key, h] : holds)
      EXPECT_EQ(std::count(h.begin(), h.end(), 0), 0) << "op " << key.first << " GPU " << key.second << " misses chunks";
  }
  return lb;
}

// Every destination byte of every GPU checks out, and they add up to the plan's bytes_needed.
void expect_every_byte(Loopback& lb, const LoadedScenario& sc, const TransferSet& ts, const std::string& what) {
  std::int64_t bytes = 0;
  for (auto& [g, prog] : lb.progs) EXPECT_EQ(detail::check_destinations(prog, sc.inventory, lb.mem[g], 0, bytes), "") << what;
  EXPECT_EQ(bytes, ts.bytes_needed.value) << what;
}

TEST(Loopback, EveryStrategyDeliversEveryByteInTheNcclBackendsWaves) {
  reshard::test::for_each_small_run([](const std::string& name, const std::string& strategy, const LoadedScenario& sc,
                                       const TransferSet& ts, const Schedule& s, const RunPlan& rp) {
    Loopback lb = run_waves(rp);
    expect_every_byte(lb, sc, ts, name + " " + strategy);
    // Staging memory reused as the nccl backend plans it, as tightly as the plan lets it.
    Loopback tight = run_waves(rp, Loopback::Staging::InWaves);
    expect_every_byte(tight, sc, ts, name + " " + strategy + " (staging reused in waves)");
    // A process computes the waves of the ops it takes part in: the same as the whole step's.
    for (int world : {2, 3, 5}) {
      std::vector<std::vector<std::int64_t>> steps(static_cast<std::size_t>(rp.steps));
      for (const Op& op : s.ops) steps[static_cast<std::size_t>(rp.step_of[static_cast<std::size_t>(op.id)])].push_back(op.id);
      for (const auto& ops : steps) {
        const StepWaves all = step_waves(s, ops);
        std::map<std::int64_t, const ChainWaves*> by_op;
        for (const auto& cw : all.chains) by_op[cw.op] = &cw;
        for (int rank = 0; rank < world; ++rank) {
          std::vector<std::int64_t> mine;
          for (auto id : ops) {
            const Op& op = s.ops[static_cast<std::size_t>(id)];
            std::vector<GpuId> gpus{op.src, op.dst};
            if (op.chain >= 0)
              for (const ChainHop& h : s.chains[static_cast<std::size_t>(op.chain)].hops) gpus.push_back(h.to);
            if (std::any_of(gpus.begin(), gpus.end(), [&](GpuId g) { return rp.gpu_index(g) % world == rank; })) mine.push_back(id);
          }
          for (const auto& cw : step_waves(s, mine).chains) {
            EXPECT_EQ(cw.offset, by_op.at(cw.op)->offset) << name << " " << strategy << " op " << cw.op;
            EXPECT_EQ(cw.chunks, by_op.at(cw.op)->chunks);
          }
        }
      }
    }
  });
}

// The hand-made chains: programs, loopback (chunk by chunk) and waves all deliver every byte.
struct HandMade {
  LoadedScenario sc;
  TransferSet ts;
  Schedule s;
  RunPlan rp;
  HandMade(int dp, std::vector<ChainHop> hops, std::int64_t chunk, std::int32_t parts = 1)
      : sc(reshard::test::chain_scenario(dp)), ts(plan(sc.inventory, sc.source, sc.destination)) {
    s = reshard::test::chain_schedule(sc, ts, std::move(hops), chunk, parts);
    rp = make_run_plan(sc, ts, s);
  }
  HandMade(const HandMade&) = delete;
};

void expect_delivered(HandMade& h, const std::string& what) {
  for (auto staging : {Loopback::Staging::Own, Loopback::Staging::ByOp}) {
    Loopback lb = run_loopback(h.rp, -1, staging);
    expect_every_byte(lb, h.sc, h.ts, what + " (chunk by chunk)");
  }
  for (auto staging : {Loopback::Staging::Own, Loopback::Staging::InWaves}) {
    Loopback waves = run_waves(h.rp, staging);
    expect_every_byte(waves, h.sc, h.ts, what + " (waves)");
  }
}

TEST(ExecChain, RingOfFourGpusWithAShortLastChunk) {
  HandMade h(2, reshard::test::ring4(), 10007);
  const std::int64_t bytes = h.s.ops[0].bytes.value;
  ASSERT_NE(bytes % 10007, 0);                            // the last chunk is short
  ASSERT_GT(chain_chunks(bytes, 10007), 2 * kChainSlots);  // more chunks than a hop keeps in flight
  EXPECT_EQ(chain_chunk(bytes, 10007, chain_chunks(bytes, 10007) - 1).bytes, bytes % 10007);
  EXPECT_EQ(h.rp.gpus, (std::vector<GpuId>{0, 1, 2, 3}));
  // Roles: GPU 0 the root (a send to GPU 1), 1 and 2 inner (receive, forward), 3 a leaf; every GPU
  // holds the whole part in one region.
  const GpuProgram root = build_program(h.rp, 0);
  ASSERT_EQ(root.sends.size(), 1u);
  EXPECT_TRUE(root.receives.empty());
  EXPECT_EQ(root.sends[0].peer, -1);
  EXPECT_EQ(root.sends[0].children, std::vector<GpuId>{1});
  EXPECT_EQ(root.sends[0].chunk, 10007);
  for (GpuId g : {1, 2, 3}) {
    const GpuProgram p = build_program(h.rp, g);
    ASSERT_EQ(p.receives.size(), 1u) << g;
    EXPECT_TRUE(p.sends.empty());
    EXPECT_EQ(p.receives[0].peer, g - 1);
    EXPECT_EQ(p.receives[0].children, g < 3 ? std::vector<GpuId>{g + 1} : std::vector<GpuId>{});
    EXPECT_EQ(p.regions[static_cast<std::size_t>(p.receives[0].region)].bytes, bytes);
    EXPECT_FALSE(p.receives[0].copies.empty());  // each keeps its TP half
  }
  expect_delivered(h, "ring");
}

TEST(ExecChain, TreeWithFanOuts) {
  HandMade h(3, reshard::test::fan_out_tree6(), 64 << 10);
  EXPECT_EQ(build_program(h.rp, 0).sends[0].children, (std::vector<GpuId>{1, 4}));
  EXPECT_EQ(build_program(h.rp, 1).receives[0].children, (std::vector<GpuId>{2, 3}));
  EXPECT_EQ(build_program(h.rp, 4).receives[0].children, std::vector<GpuId>{5});
  EXPECT_EQ(build_program(h.rp, 5).receives[0].peer, 4);
  // Depth 2: the last chunk reaches the leaves one wave after it left the root.
  const StepWaves sw = step_waves(h.s, {0});
  ASSERT_EQ(sw.chains.size(), 1u);
  EXPECT_EQ(sw.chains[0].depth, (std::vector<std::int32_t>{1, 1, 2, 2, 2}));
  EXPECT_EQ(sw.waves, sw.chains[0].chunks + 1);
  expect_delivered(h, "tree");
}

TEST(ExecChain, PartSmallerThanOneChunk) {
  HandMade h(2, reshard::test::ring4(), 64 << 20);
  ASSERT_LT(h.s.ops[0].bytes.value, 64 << 20);
  EXPECT_EQ(chain_chunks(h.s.ops[0].bytes.value, 64 << 20), 1);
  EXPECT_EQ(chain_chunk(h.s.ops[0].bytes.value, 64 << 20, 0).bytes, h.s.ops[0].bytes.value);
  EXPECT_EQ(step_waves(h.s, {0}).waves, 3);  // one chunk over three hops
  expect_delivered(h, "one chunk");
}

TEST(ExecChain, TwoOpsOnOneChainRunInOrder) {
  HandMade h(2, reshard::test::ring4(), 100003, 2);
  // No `after` between them: the chain orders them. They share a step, op 1 after op 0.
  EXPECT_TRUE(h.s.after_of(h.s.ops[1]).empty());
  EXPECT_EQ(h.rp.step_of, (std::vector<std::int32_t>{0, 0}));
  EXPECT_EQ(h.rp.chain_prev, (std::vector<std::int64_t>{-1, 0}));
  const StepWaves sw = step_waves(h.s, {0, 1});
  ASSERT_EQ(sw.chains.size(), 2u);
  EXPECT_EQ(sw.chains[1].offset, sw.chains[0].chunks);  // op 1 leaves the root after op 0's last chunk
  EXPECT_EQ(sw.waves, sw.chains[0].chunks + sw.chains[1].chunks + 2);
  // The nccl backend's staging spans (in waves): a root from its first chunk's wave to its last's,
  // a receiver from its first chunk's arrival to its last's, one wave more where it forwards.
  {
    const std::int64_t n0 = sw.chains[0].chunks, n1 = sw.chains[1].chunks;
    std::vector<GpuProgram> progs;
    for (GpuId g : h.rp.gpus) progs.push_back(build_program(h.rp, g));
    std::vector<std::vector<std::int64_t>> request_of;
    const auto r = detail::staging_requests_in_waves(h.rp, progs, request_of);
    std::vector<std::pair<std::int64_t, std::int64_t>> spans;
    for (const auto& q : r) spans.emplace_back(q.first, q.last);
    using P = std::pair<std::int64_t, std::int64_t>;
    EXPECT_EQ(spans, (std::vector<P>{{0, n0 - 1}, {n0, n0 + n1 - 1},          // GPU 0, the root
                                     {0, n0}, {n0, n0 + n1},                  // GPU 1
                                     {1, n0 + 1}, {n0 + 1, n0 + n1 + 1},      // GPU 2
                                     {2, n0 + 1}, {n0 + 2, n0 + n1 + 1}}));   // GPU 3, a leaf
  }
  // An op whose own dependencies are shallower than the previous op on its chain still runs in
  // that op's step: op 2 waits for nothing, but follows op 1 (after op 0) on chain 0.
  Schedule deps;
  deps.chains.resize(1);
  Op on_chain;
  on_chain.chain = 0;
  deps.add_op(Op{}, {});
  deps.add_op(on_chain, std::vector<std::int64_t>{0});
  deps.add_op(on_chain, {});
  std::int32_t count = 0;
  EXPECT_EQ(op_steps(deps, count), (std::vector<std::int32_t>{0, 1, 1}));
  EXPECT_EQ(count, 2);
  expect_delivered(h, "two ops");
}

TEST(ExecChain, CorruptedByteInAForwardedChunkIsNamedAtTheRightRankTensorAndOffset) {
  HandMade h(2, reshard::test::ring4(), 10007);
  Loopback lb = run_loopback(h.rp, 0);  // op 0 reaches GPU 3 (its dst) through GPUs 1 and 2
  const GpuProgram& victim = lb.progs[3];
  const CopyRun& first = victim.receives[0].copies.front();  // the byte flipped: the first one GPU 3 keeps
  const Region& shard = victim.regions[static_cast<std::size_t>(first.dst)];
  const auto es = dtype_size(h.sc.inventory.tensor(shard.tensor).dtype);
  std::int64_t bytes = 0;
  const std::string msg = detail::check_destinations(victim, h.sc.inventory, lb.mem[3], 3, bytes);
  EXPECT_NE(msg.find("rank 3 (GPU 3): tensor '" + h.sc.inventory.tensor(shard.tensor).name + "' box " + to_string(shard.box)),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("wrong value at element offset " + std::to_string(first.dst_offset / es) + " "), std::string::npos) << msg;
  for (GpuId g : {0, 1, 2}) EXPECT_EQ(detail::check_destinations(lb.progs[g], h.sc.inventory, lb.mem[g], g, bytes), "") << g;
}

TEST(RunPlan, ChainThroughAGpuOutsideTheTopologyIsRefused) {
  const LoadedScenario sc = reshard::test::chain_scenario(2);
  const TransferSet ts = plan(sc.inventory, sc.source, sc.destination);
  Schedule s = reshard::test::chain_schedule(sc, ts, {{0, 1}, {1, 2}, {2, 3}, {3, 16}}, 1 << 20);
  s.ops[0].dst = 16;
  try {
    make_run_plan(sc, ts, s);
    FAIL() << "accepted a chain through GPU 16 of a 16-GPU topology";
  } catch (const ScheduleError& e) {
    EXPECT_NE(std::string(e.what()).find("chain 0 hop 3: GPU 16 is not in the scenario's topology (16 GPUs)"), std::string::npos)
        << e.what();
  }
}

// Regions that share memory are never live together; without `ordered`, a fence lies between them.
void expect_sound(const std::vector<detail::StagingRequest>& r, const detail::StagingPlan& plan, bool ordered) {
  for (std::size_t a = 0; a < r.size(); ++a)
    for (std::size_t b = 0; b < r.size(); ++b) {
      if (a == b || r[a].bytes == 0 || r[b].bytes == 0) continue;
      const std::int64_t a_end = plan.offset[a] + (r[a].bytes + 255) / 256 * 256;
      if (plan.offset[a] >= plan.offset[b] + r[b].bytes || plan.offset[b] >= a_end) continue;  // apart in memory
      ASSERT_TRUE(r[a].last < r[b].first || r[b].last < r[a].first) << "regions " << a << " and " << b << " live together";
      if (ordered || r[b].last < r[a].first) continue;
      const bool fenced = std::any_of(plan.fences.begin(), plan.fences.end(),
                                      [&](std::int64_t f) { return r[a].last < f && f <= r[b].first; });
      ASSERT_TRUE(fenced) << "region " << b << " reuses region " << a << "'s memory without a fence";
    }
  ASSERT_LE(plan.offset.size(), r.size());
}

TEST(ExecStaging, BumpLayoutAndNoFenceWhenTheRunFits) {
  const std::vector<detail::StagingRequest> r{{1000, 0, 0}, {256, 0, 3}, {10, 1, 1}, {0, 2, 2}, {512, 2, 2}};
  const auto plan = detail::plan_staging(r, 1 << 20, false);
  EXPECT_EQ(plan.offset, (std::vector<std::int64_t>{0, 1024, 1280, 0, 1536}));
  EXPECT_EQ(plan.bytes, 2048);
  EXPECT_TRUE(plan.fences.empty());
}

TEST(ExecStaging, RegionsSharingMemoryAreNeverLiveTogether) {
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    std::vector<detail::StagingRequest> r;
    const int n = 1 + static_cast<int>(rng() % 40);
    for (int i = 0; i < n; ++i) {
      const std::int64_t first = rng() % 20, last = first + rng() % 6;
      r.push_back({static_cast<std::int64_t>(rng() % 5000), first, last});
    }
    std::int64_t total = 0;
    for (const auto& q : r) total += (q.bytes + 255) / 256 * 256;
    for (bool ordered : {false, true}) {
      const auto plan = detail::plan_staging(r, total / 3, ordered);
      expect_sound(r, plan, ordered);
      if (ordered) {
        EXPECT_TRUE(plan.fences.empty());
      }
      EXPECT_LE(plan.bytes, total);
    }
  }
}

TEST(ExecStaging, GatherBroadcastOnTheGpuCheckScenarioFitsOneGpu) {
  // All 16 GPUs of gpu-check-qwen3-8b as virtual ranks on one 139 GiB GPU (the cuda backend; the
  // nccl backend at world size 1): gather_broadcast's chain ops hold 172 GB of staging in all,
  // never more than a few GB at a time. The cuda backend reuses it after fences, nccl in wave order.
  const LoadedScenario sc = load_scenario(std::filesystem::path(scenario_path("gpu-check-qwen3-8b.yaml")));
  const TransferSet ts = plan(sc.inventory, sc.source, sc.destination);
  for (const char* strategy : {"gather_broadcast", "nemo_rl_reshard"}) {
    const Schedule s = build_schedule(ts, sc.inventory, sc.source, sc.destination, sc.topology, parse_strategy(strategy));
    const RunPlan rp = make_run_plan(sc, ts, s);
    std::vector<GpuProgram> progs;
    std::int64_t shards = 0;
    for (GpuId g : rp.gpus) {
      progs.push_back(build_program(rp, g));
      for (const Region& r : progs.back().regions)
        if (r.kind == Region::Kind::Source || r.kind == Region::Kind::Destination) shards += (r.bytes + 255) / 256 * 256;
    }
    const std::int64_t free = 139LL << 30, budget = free - shards - (free / 32 + (1LL << 30));
    for (bool ordered : {false, true}) {
      std::vector<std::vector<std::int64_t>> request_of;
      const auto requests =
          ordered ? detail::staging_requests_in_waves(rp, progs, request_of) : detail::staging_requests_by_op(progs, request_of);
      std::int64_t total = 0;
      for (const auto& q : requests) total += q.bytes;
      const auto plan = detail::plan_staging(requests, budget, ordered);
      EXPECT_LE(plan.bytes, budget) << strategy << (ordered ? " (nccl)" : " (cuda)") << " fences " << plan.fences.size() << " total " << total;
      expect_sound(requests, plan, ordered);
      if (std::string(strategy) == "gather_broadcast") {
        EXPECT_GT(total, budget);  // it would not fit without reuse
        if (!ordered) {
          EXPECT_FALSE(plan.fences.empty());
        }
      } else if (!ordered) {
        EXPECT_TRUE(plan.fences.empty());  // it fits as laid out before: no fence
      }
    }
  }
}

TEST(Loopback, ColocatedPiecesAreCopiedInPlace) {
  // Megatron TP2 x PP2 x DP2 -> vLLM TP4 x DP2 on the same 8 GPUs: part of every destination shard
  // is already on its GPU (bytes_to_move < bytes_needed); those parts are local copies, the rest
  // arrives by operations, and every destination byte checks out.
  const Scenario s = Scenario::parse(R"(name: tiny-colocated
model: ../models/tiny-gqa.yaml
topology: ../topologies/dgx-h100-2n.yaml
source: {framework: megatron, tp: 2, pp: 2, gpus: 0-7}
destination: {framework: vllm, tp: 4, dp: 2, gpus: 0-7}
)",
                                     "tiny-colocated", std::filesystem::path(RESHARD_SOURCE_DIR) / "scenarios");
  const LoadedScenario sc = load_scenario(s);
  const TransferSet ts = plan(sc.inventory, sc.source, sc.destination);
  ASSERT_LT(ts.bytes_to_move.value, ts.bytes_needed.value);
  for (const char* strategy : {"direct", "domain_chain"}) {
    StrategyParams p;
    p.strategy = strategy_named(strategy);
    const Schedule sched = build_schedule(ts, sc.inventory, sc.source, sc.destination, sc.topology, p);
    const RunPlan rp = make_run_plan(sc, ts, sched);
    Loopback lb = run_loopback(rp);
    std::int64_t bytes = 0, local = 0, received = 0;
    for (auto& [g, prog] : lb.progs) {
      EXPECT_EQ(detail::check_destinations(prog, sc.inventory, lb.mem[g], 0, bytes), "") << strategy;
      for (const auto& c : prog.local) local += c.bytes;
      for (const auto& t : prog.receives)
        for (const auto& c : t.copies) received += c.bytes;
    }
    EXPECT_EQ(bytes, ts.bytes_needed.value);
    // In place plus delivered is exactly what the destination ranks hold.
    EXPECT_EQ(local, ts.bytes_needed.value - ts.bytes_to_move.value) << strategy;
    EXPECT_EQ(received, ts.bytes_to_move.value) << strategy;
  }
}

TEST(Loopback, WrongByteIsNamedWithRankTensorBoxAndOffset) {
  const LoadedScenario sc = load_scenario(std::filesystem::path(scenario_path("small-gqa-megatron-vllm.yaml")));
  const TransferSet ts = plan(sc.inventory, sc.source, sc.destination);
  StrategyParams p;
  p.strategy = Strategy::Direct;
  const Schedule s = build_schedule(ts, sc.inventory, sc.source, sc.destination, sc.topology, p);
  const RunPlan rp = make_run_plan(sc, ts, s);
  Loopback lb = run_loopback(rp, 5);
  const GpuId victim = s.ops[5].dst;
  std::int64_t bytes = 0;
  const std::string msg = detail::check_destinations(lb.progs[victim], sc.inventory, lb.mem[victim], 7, bytes);
  EXPECT_NE(msg.find("rank 7 (GPU " + std::to_string(victim) + ")"), std::string::npos) << msg;
  EXPECT_NE(msg.find("tensor 'model."), std::string::npos) << msg;
  EXPECT_NE(msg.find("box ["), std::string::npos) << msg;
  EXPECT_NE(msg.find("wrong value at element offset"), std::string::npos) << msg;
  // Every other GPU is intact.
  for (auto& [g, prog] : lb.progs)
    if (g != victim) {
      EXPECT_EQ(detail::check_destinations(prog, sc.inventory, lb.mem[g], 0, bytes), "");
    }
}

// Verification reads every byte: a flip in the middle or at the very end of what an operation
// delivers is found and named at its element, on a plain op and inside a forwarded chain chunk.
TEST(Loopback, FlipAtTheFirstMiddleOrLastByteIsNamedAtItsElement) {
  const LoadedScenario sc = load_scenario(std::filesystem::path(scenario_path("small-gqa-megatron-vllm.yaml")));
  const TransferSet ts = plan(sc.inventory, sc.source, sc.destination);
  StrategyParams p;
  p.strategy = Strategy::Direct;
  const Schedule s = build_schedule(ts, sc.inventory, sc.source, sc.destination, sc.topology, p);
  const RunPlan rp = make_run_plan(sc, ts, s);
  HandMade h(2, reshard::test::ring4(), 10007);
  struct Case {
    const RunPlan& rp;
    const Inventory& inv;
    std::int64_t op;
  };
  for (const Case& c : {Case{rp, sc.inventory, 5}, Case{h.rp, h.sc.inventory, 0}}) {
    const Op& op = c.rp.schedule->ops[static_cast<std::size_t>(c.op)];
    for (const auto where : {Fault::Where::First, Fault::Where::Middle, Fault::Where::Last}) {
      Loopback lb = run_loopback(c.rp, c.op, Loopback::Staging::Own, where);
      const GpuProgram& victim = lb.progs[op.dst];
      const Transfer* t = find_transfer(victim.receives, c.op);
      ASSERT_NE(t, nullptr);
      // The flipped byte's place in its destination shard: the copy run that unpacks it.
      const std::int64_t at = corrupt_offset({{Fault::Kind::Corrupt, c.op, where}}, *t);
      const CopyRun* run = nullptr;
      for (const CopyRun& r : t->copies)
        if (at >= r.src_offset && at < r.src_offset + r.bytes) run = &r;
      ASSERT_NE(run, nullptr);
      if (where == Fault::Where::Last) {
        EXPECT_EQ(at, t->copies.back().src_offset + t->copies.back().bytes - 1);
      }
      const Region& shard = victim.regions[static_cast<std::size_t>(run->dst)];
      const auto es = dtype_size(c.inv.tensor(shard.tensor).dtype);
      const std::int64_t element = (run->dst_offset + at - run->src_offset) / es;
      std::int64_t bytes = 0;
      const std::string msg = detail::check_destinations(victim, c.inv, lb.mem[op.dst], 1, bytes);
      EXPECT_NE(msg.find("wrong value at element offset " + std::to_string(element) + " "), std::string::npos)
          << static_cast<int>(where) << ": " << msg;
      if (where != Fault::Where::First) {
        EXPECT_NE(at, t->copies.front().src_offset);  // past the first byte
      }
    }
  }
}

TEST(RunPlan, ScheduleOfAnotherScenarioIsRefused) {
  const LoadedScenario moe = load_scenario(std::filesystem::path(scenario_path("small-moe-ep.yaml")));
  const LoadedScenario gqa = load_scenario(std::filesystem::path(scenario_path("small-gqa-megatron-vllm.yaml")));
  const TransferSet ts_moe = plan(moe.inventory, moe.source, moe.destination);
  const TransferSet ts_gqa = plan(gqa.inventory, gqa.source, gqa.destination);
  const Schedule s = build_schedule(ts_moe, moe.inventory, moe.source, moe.destination, moe.topology, StrategyParams{});
  try {
    make_run_plan(gqa, ts_gqa, s);
    FAIL() << "accepted a schedule of another scenario";
  } catch (const ScheduleError& e) {
    EXPECT_NE(std::string(e.what()).find("refused"), std::string::npos) << e.what();
  }
}

TEST(Faults, Parse) {
  EXPECT_EQ(parse_fault("corrupt:12").kind, Fault::Kind::Corrupt);
  EXPECT_EQ(parse_fault("corrupt:12").target, 12);
  EXPECT_EQ(parse_fault("die:3").kind, Fault::Kind::Die);
  EXPECT_EQ(parse_fault("kill:3").kind, Fault::Kind::Kill);
  EXPECT_EQ(parse_fault("drop:0").kind, Fault::Kind::Drop);
  EXPECT_EQ(parse_fault("stop:2").kind, Fault::Kind::Stop);
  EXPECT_EQ(parse_fault("stop:2@init").kind, Fault::Kind::StopBeforeInit);
  EXPECT_EQ(parse_fault("stop:2@init").target, 2);
  EXPECT_THROW(parse_fault("stop:2@setup"), ConfigError);
  EXPECT_EQ(parse_fault("corrupt:4@middle").where, Fault::Where::Middle);
  EXPECT_EQ(parse_fault("corrupt:4@last").target, 4);
  EXPECT_EQ(parse_fault("corrupt:4@last").where, Fault::Where::Last);
  EXPECT_THROW(parse_fault("corrupt:4@end"), ConfigError);
  EXPECT_THROW(parse_fault("drop:4294967296x"), ConfigError);
  EXPECT_THROW(parse_fault("explode:1"), ConfigError);
  EXPECT_THROW(parse_fault("drop:x"), ConfigError);
  EXPECT_THROW(parse_fault("drop:-1"), ConfigError);
  EXPECT_THROW(parse_fault("drop"), ConfigError);
}

TEST(MeasurementFile, RoundTripsAndComparesStepByStep) {
  const std::string path = scenario_path("small-moe-ep.yaml");
  const LoadedScenario sc = load_scenario(std::filesystem::path(path));
  const TransferSet ts = plan(sc.inventory, sc.source, sc.destination);
  StrategyParams p;
  p.strategy = Strategy::GatherBroadcast;
  const Schedule s = build_schedule(ts, sc.inventory, sc.source, sc.destination, sc.topology, p);
  const RunPlan rp = make_run_plan(sc, ts, s);
  ASSERT_GE(rp.steps, 2);  // gather_broadcast: gathers, then chain ops (broadcast rings) after them
  ASSERT_FALSE(s.chains.empty());
  Measurement m;
  m.scenario_path = path;
  m.backend = "host";
  m.ranks = 16;
  m.schedule = s;
  m.ops.resize(s.ops.size());
  // Synthetic times: op i of step k runs in [k, k + 0.5] ms, so each step measures 0.5 ms.
  for (std::size_t i = 0; i < s.ops.size(); ++i) m.ops[i] = {rp.step_of[i] * 1e-3, rp.step_of[i] * 1e-3 + 0.5e-3};
  m.elapsed_s = (rp.steps - 1) * 1e-3 + 0.5e-3;
  m.bytes_verified = ts.bytes_needed.value;
  m.verified = true;
  const auto file = std::filesystem::temp_directory_path() / "reshard_test_exec_measurement.json";
  const nlohmann::json written = to_json(m, rp);
  std::ofstream(file) << written.dump();
  for (const auto& o : written["ops"])  // chain ops say which chain, how many hops, in which chunk
    if (s.ops[o["id"].get<std::size_t>()].chain >= 0) {
      EXPECT_EQ(o["chain"].get<int>(), s.ops[o["id"].get<std::size_t>()].chain);
      EXPECT_GT(o["hops"].get<int>(), 0);
      EXPECT_GT(o["chunk_bytes"].get<std::int64_t>(), 0);
    }
  const Measurement back = load_measurement(file);
  EXPECT_EQ(back.schedule.ops.size(), s.ops.size());
  EXPECT_EQ(back.bytes_verified, ts.bytes_needed.value);
  const auto rows = compare_with_prediction(back);
  ASSERT_EQ(rows.size(), static_cast<std::size_t>(rp.steps) + 1);
  for (std::int32_t k = 0; k < rp.steps; ++k) {
    EXPECT_EQ(rows[static_cast<std::size_t>(k)].step, k);
    EXPECT_NEAR(rows[static_cast<std::size_t>(k)].measured_s, 0.5e-3, 1e-12);
    EXPECT_GT(rows[static_cast<std::size_t>(k)].predicted_s, 0);
  }
  EXPECT_EQ(rows.back().step, -1);
  EXPECT_NEAR(rows.back().measured_s, m.elapsed_s, 1e-12);
  // error = (measured - predicted) / predicted.
  const auto& r = rows.front();
  EXPECT_NEAR(r.error(), (r.measured_s - r.predicted_s) / r.predicted_s, 1e-12);
}

// A Measurement of small-moe-ep (gather_broadcast, synthetic times) as written by `reshard exec -o`.
nlohmann::json written_measurement() {
  const std::string path = scenario_path("small-moe-ep.yaml");
  const LoadedScenario sc = load_scenario(std::filesystem::path(path));
  const TransferSet ts = plan(sc.inventory, sc.source, sc.destination);
  StrategyParams p;
  p.strategy = Strategy::GatherBroadcast;
  const Schedule s = build_schedule(ts, sc.inventory, sc.source, sc.destination, sc.topology, p);
  const RunPlan rp = make_run_plan(sc, ts, s);
  Measurement m;
  m.scenario_path = path;
  m.backend = "host";
  m.ranks = 16;
  m.schedule = s;
  m.ops.assign(s.ops.size(), OpTiming{0.0, 1e-3});
  m.elapsed_s = 1e-3;
  m.bytes_verified = ts.bytes_needed.value;
  m.verified = true;
  return to_json(m, rp);
}

std::string measurement_error(const nlohmann::json& j, bool accept) {
  const auto file = std::filesystem::temp_directory_path() / "reshard_test_exec_edited.json";
  std::ofstream(file) << j.dump();
  try {
    compare_with_prediction(load_measurement(file, accept));
  } catch (const ConfigError& e) {
    return std::string("config: ") + e.what();
  } catch (const ScheduleError& e) {
    return std::string("schedule: ") + e.what();
  }
  return "";
}

// Edited Measurements were accepted by check (20 of 23 edits) and calibrate: each is refused now,
// naming why; --accept-unverified lets an unverified or edited one through only when what is left
// is still a consistent schedule of the scenario.
TEST(MeasurementFile, EditedOrUnverifiedIsRefused) {
  const nlohmann::json good = written_measurement();
  EXPECT_EQ(measurement_error(good, false), "");
  auto redigest = [](nlohmann::json j) {  // an edit that also recomputes the document digest
    j["digest"]["document"] = document_digest(j);
    return j;
  };
  nlohmann::json bytes = good;  // one op's bytes x 1000
  bytes["schedule"]["ops"][0]["bytes"] = bytes["schedule"]["ops"][0]["bytes"].get<std::int64_t>() * 1000;
  EXPECT_NE(measurement_error(bytes, false).find("refused: it was edited after it was written"), std::string::npos);
  EXPECT_NE(measurement_error(bytes, true).find("schedule: operation 0"), std::string::npos) << measurement_error(bytes, true);
  nlohmann::json unverified = good;
  unverified["verified"] = false;
  EXPECT_NE(measurement_error(unverified, false).find("refused: it was edited"), std::string::npos);
  EXPECT_NE(measurement_error(redigest(unverified), false).find("refused: the run's data was not verified"),
            std::string::npos);
  EXPECT_EQ(measurement_error(redigest(unverified), true), "");
  nlohmann::json undigested = good;
  undigested.erase("digest");
  EXPECT_NE(measurement_error(undigested, false).find("refused: it carries no digest"), std::string::npos);
  {  // calibrate reads Measurements with the same refusal
    const auto file = std::filesystem::temp_directory_path() / "reshard_test_calibrate_edited.json";
    std::ofstream(file) << bytes.dump();
    try {
      observations_from_csv(file, CostParams::profile_named("reshard"));
      ADD_FAILURE() << "calibrate accepted an edited Measurement";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("refused: it was edited"), std::string::npos) << e.what();
    }
    EXPECT_THROW(observations_from_csv(file, CostParams::profile_named("reshard"), true), ConfigError);  // bytes x 1000
  }
  nlohmann::json dropped = good;  // one op's timing dropped
  dropped["ops"].erase(dropped["ops"].begin());
  EXPECT_NE(measurement_error(redigest(dropped), true).find("ops: lists"), std::string::npos);
  nlohmann::json negative = good;
  negative["elapsed_s"] = -1.0;
  EXPECT_NE(measurement_error(redigest(negative), true).find("elapsed_s: a negative elapsed time"), std::string::npos);
  // Out-of-range indices once segfaulted in estimate: piece, buffer, after, GPU.
  nlohmann::json piece = good;
  piece["schedule"]["buffers"][0]["slices"][0][0] = 100000;
  EXPECT_NE(measurement_error(redigest(piece), true).find("schedule.buffers[0].slices[0][0]"), std::string::npos);
  nlohmann::json buffer = good;
  buffer["schedule"]["ops"][0]["buffer"] = 100000;
  EXPECT_NE(measurement_error(redigest(buffer), true).find("schedule.ops[0].buffer"), std::string::npos);
  nlohmann::json after = good;
  after["schedule"]["ops"][2]["after"] = {7};
  EXPECT_NE(measurement_error(redigest(after), true).find("schedule.ops[2].after[0]"), std::string::npos);
  nlohmann::json gpu = good;
  gpu["schedule"]["ops"][0]["dst"] = 1006;
  EXPECT_NE(measurement_error(redigest(gpu), true).find("GPU 1006 is not in the topology"), std::string::npos);
}

}  // namespace
