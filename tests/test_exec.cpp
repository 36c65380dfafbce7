// The executor core without MPI or a GPU: the pattern, the row walk, programs run in one process
// ("loopback": every GPU's program in host memory, operations in id order; chain ops chunk by
// chunk, and in the nccl backend's waves), hand-made chain ops (a ring with a short last chunk, a
// tree with fan-outs, a part smaller than a chunk, two ops on one chain), verification, faults,
// refusal of a schedule built for another scenario, and the Measurement round trip through check.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <csignal>
#include <sys/resource.h>
#include <nlohmann/json.hpp>

#include "chain_fixtures.hpp"
#include "host_memory.hpp"
#include "reshard/exec/executor.hpp"
#include "reshard/exec/measurement.hpp"
#include "reshard/exec/plan_file.hpp"
#include "reshard/model/planned.hpp"
#include "reshard/exec/backend.hpp"
#include "reshard/exec/staging.hpp"
#include "reshard/study/calibrate.hpp"
#include "reshard/model/digest.hpp"
#include "reshard/model/scenario.hpp"
#include "config_error.hpp"
#include "small_runs.hpp"

namespace {

using namespace reshard::model;
using namespace reshard::study;
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
// (Staging::Steps) in one arena shared by every GPU, laid out by steps as the GPU backends lay out
// their device arena (staging.hpp), with a budget so small that every region reuses memory as soon
// as the layout lets it: a region reused too early corrupts what is run.
struct Loopback {
  enum class Staging { Own, Steps };
  std::map<GpuId, GpuProgram> progs;
  std::map<GpuId, detail::HostMemory> mem;
  std::vector<unsigned char> arena;
  std::map<GpuId, std::vector<unsigned char*>> at;  // per region: where its bytes are
  detail::StagingPlan plan;
  std::map<GpuId, std::int64_t> staging;  // Staging::Steps: each GPU's most bytes in one step

  Loopback(const RunPlan& rp, Staging staging_kind) {
    const auto& inv = rp.scenario->inventory;
    std::vector<GpuProgram> list;
    for (GpuId g : rp.gpus) list.push_back(build_program(rp, g));
    std::vector<std::vector<std::int64_t>> request_of;
    if (staging_kind == Staging::Steps) {
      const auto requests = detail::staging_requests(rp, list, request_of);
      plan = detail::plan_staging(requests, 0, true);
      arena.assign(static_cast<std::size_t>(plan.bytes), 0);
      const auto per = detail::staging_per_program(requests, request_of);
      for (std::size_t p = 0; p < list.size(); ++p) staging[list[p].gpu] = per[p];
    }
    for (std::size_t p = 0; p < list.size(); ++p) {
      const GpuId g = list[p].gpu;
      progs[g] = list[p];
      detail::allocate(progs[g], inv, mem[g], staging_kind == Staging::Own);
      auto& where = at[g];
      for (std::size_t i = 0; i < progs[g].regions.size(); ++i)
        where.push_back(staging_kind == Staging::Steps && request_of[p][i] >= 0
                            ? arena.data() + plan.offset[static_cast<std::size_t>(request_of[p][i])]
                            : mem[g].data[i]);
      detail::fill_sources(progs[g], inv, mem[g]);
      for (const CopyRun& c : progs[g].local) copy(g, c);
    }
  }
  Loopback(const Loopback&) = delete;
  Loopback(Loopback&&) = default;
  void copy(GpuId g, const CopyRun& c) {
    std::memcpy(at[g][static_cast<std::size_t>(c.dst)] + c.dst_offset, at[g][static_cast<std::size_t>(c.src)] + c.src_offset,
                static_cast<std::size_t>(c.bytes));
  }
  // Chunk k's bytes in t's region on GPU g (its slot of the ring, or its place in a kept receive).
  unsigned char* slot(GpuId g, const OpStream* t, std::int64_t k) {
    return at[g][static_cast<std::size_t>(t->region)] + t->slot_offset(k * t->chunk);
  }
  void pack(GpuId g, const OpStream* t, std::int64_t k) {
    for_each_chunk_copy(*t, true, k, [&](const CopyRun& c) { copy(g, c); });
  }
  void unpack(GpuId g, const OpStream* t, std::int64_t k) {
    for_each_chunk_copy(*t, false, k, [&](const CopyRun& c) { copy(g, c); });
  }
  std::int64_t bytes(GpuId g, const OpStream* t) { return progs[g].regions[static_cast<std::size_t>(t->region)].bytes; }
};

const OpStream* find_stream(const std::vector<OpStream>& list, std::int64_t op) {
  auto it = std::find_if(list.begin(), list.end(), [&](const OpStream& t) { return t.op == op; });
  return it == list.end() ? nullptr : &*it;
}

// The hops of op's stream: its chain's, or a plain transfer's one.
std::vector<ChainHop> hops_of(const Schedule& s, const Op& op) {
  if (op.chain >= 0) return s.chains[static_cast<std::size_t>(op.chain)].hops;
  return {ChainHop{op.src, op.dst, -1}};
}

// Each GPU's role in op (sender, receivers), checked against the stream's hops: a receiver's peer
// is its hop's `from`, which lists it among its children, and its region is its ring or, kept, the
// whole part.
std::map<GpuId, const OpStream*> roles(Loopback& lb, const Schedule& s, const Op& op) {
  std::map<GpuId, const OpStream*> held;
  const OpStream* st = find_stream(lb.progs[op.src].sends, op.id);
  EXPECT_NE(st, nullptr) << "op " << op.id;
  if (!st) return held;
  EXPECT_EQ(st->peer, -1);
  EXPECT_EQ(st->chain, op.chain);
  held[op.src] = st;
  for (const ChainHop& h : hops_of(s, op)) {
    const OpStream* rt = find_stream(lb.progs[h.to].receives, op.id);
    EXPECT_NE(rt, nullptr) << "op " << op.id << " GPU " << h.to;
    if (!rt) return {};
    EXPECT_EQ(rt->peer, h.from);
    EXPECT_EQ(lb.bytes(h.to, rt), rt->kept() ? op.bytes.value : ring_bytes(s, op).value) << "op " << op.id;
    const auto& kids = held.at(h.from)->children;
    EXPECT_NE(std::find(kids.begin(), kids.end(), h.to), kids.end()) << "op " << op.id;
    held[h.to] = rt;
  }
  return held;
}

// The ops of each step, in id order.
std::vector<std::vector<std::int64_t>> ops_by_step(const RunPlan& rp) {
  std::vector<std::vector<std::int64_t>> steps(static_cast<std::size_t>(rp.steps));
  for (const Op& op : rp.schedule->ops) steps[static_cast<std::size_t>(rp.step_of[static_cast<std::size_t>(op.id)])].push_back(op.id);
  return steps;
}

// Runs every GPU's program in this process as the cuda backend orders it: step by step, each
// step's ops in id order, each stream chunk by chunk: the sender packs chunk k into its slot, each
// hop in order copies it from its `from`'s slot into its `to`'s, each receiver unpacks it.
// `corrupt` flips one unpacked byte of that operation at its dst (`where`: the first, the middle or
// the last, as --inject corrupt:OP@WHERE does), in the chunk that holds it, before dst forwards it.
Loopback run_loopback(const RunPlan& rp, std::int64_t corrupt = -1, Loopback::Staging staging = Loopback::Staging::Own,
                      Fault::Where where = Fault::Where::First) {
  const std::vector<Fault> faults{{Fault::Kind::Corrupt, corrupt, where}};
  Loopback lb(rp, staging);
  const Schedule& s = *rp.schedule;
  for (const auto& ops : ops_by_step(rp))
    for (auto id : ops) {
      const Op& op = s.ops[static_cast<std::size_t>(id)];
      const auto held = roles(lb, s, op);
      if (held.empty()) return lb;
      const OpStream* st = held.at(op.src);
      const std::int64_t flip_at = op.id == corrupt && !held.at(op.dst)->copies.empty() ? corrupt_offset(faults, *held.at(op.dst)) : -1;
      for (std::int64_t k = 0; k < st->chunks(); ++k) {
        const ChunkRange r = chain_chunk(op.bytes.value, st->chunk, k);
        EXPECT_GT(r.bytes, 0);
        EXPECT_LE(r.bytes, st->chunk);
        lb.pack(op.src, st, k);
        for (const ChainHop& h : hops_of(s, op)) {
          std::memcpy(lb.slot(h.to, held.at(h.to), k), lb.slot(h.from, held.at(h.from), k), static_cast<std::size_t>(r.bytes));
          if (h.to == op.dst && flip_at >= r.begin && flip_at < r.begin + r.bytes)
            lb.at[h.to][static_cast<std::size_t>(held.at(h.to)->region)][held.at(h.to)->slot_offset(flip_at)] ^= 0x5a;
        }
        for (const ChainHop& h : hops_of(s, op)) lb.unpack(h.to, held.at(h.to), k);
      }
    }
  return lb;
}

// Every destination byte of every GPU checks out, and they add up to the plan's bytes_needed.
void expect_every_byte(Loopback& lb, const LoadedScenario& sc, const TransferSet& ts, const std::string& what) {
  std::int64_t bytes = 0;
  for (auto& [g, prog] : lb.progs) {
    detail::HostMemory view = lb.mem[g];
    for (std::size_t i = 0; i < view.data.size(); ++i) view.data[i] = lb.at[g][i];
    EXPECT_EQ(detail::check_destinations(prog, sc.inventory, view, 0, bytes), "") << what;
  }
  EXPECT_EQ(bytes, ts.bytes_needed.value) << what;
}

TEST(Loopback, EveryStrategyDeliversEveryByteOfEverySmallScenario) {
  reshard::test::for_each_small_run([](const std::string& name, const std::string& strategy, const LoadedScenario& sc,
                                       const TransferSet& ts, const Schedule& s, const RunPlan& rp) {
    {  // staging memory laid out by steps as the GPU backends lay it out, reused as tightly as it lets it
      Loopback tight = run_loopback(rp, -1, Loopback::Staging::Steps);
      expect_every_byte(tight, sc, ts, name + " " + strategy + " (reused)");
      // Each GPU's arena is what the model predicts, each region 256-byte rounded (at most 255
      // bytes more per staging region), and the prediction within its budget.
      const StagingMemory m = staging_memory(s);
      for (const auto& [g, bytes] : tight.staging) {
        const std::int64_t predicted = m.per_gpu[static_cast<std::size_t>(g)].value, budget = staging_budget(s, g).value;
        const GpuProgram& prog = tight.progs.at(g);
        const auto regions = static_cast<std::int64_t>(prog.sends.size() + prog.receives.size());
        EXPECT_GE(bytes, predicted) << name << " " << strategy << " GPU " << g;
        EXPECT_LE(bytes, predicted + 255 * regions) << name << " " << strategy << " GPU " << g;
        if (budget > 0) {
          EXPECT_LE(predicted, budget) << name << " " << strategy << " GPU " << g;
        }
      }
    }
    Loopback lb = run_loopback(rp);
    std::int64_t destination = 0;
    for (auto& [g, prog] : lb.progs) destination += prog.destination_bytes;
    expect_every_byte(lb, sc, ts, name + " " + strategy);
    // One destination rank per GPU here, so the destination shards of all GPUs are the plan's
    // bytes_needed (sum over destination ranks of what each must hold).
    EXPECT_EQ(destination, ts.bytes_needed.value) << name << " " << strategy;
  });
}

// Runs every GPU's program as the nccl backend orders it: step by step, each step in the waves of
// step_waves, a chunk packed into the sender's slot just before the wave it leaves in and unpacked
// just after the wave it arrives in, every transfer of a wave reading what its sender held before
// the wave (a group runs its sends and receives together). Checks that a GPU only forwards chunks
// it already has and still holds, gets each chunk once, never overwrites a slot whose chunk is
// still to be forwarded, and that every GPU of a stream ends up with all of them.
Loopback run_waves(const RunPlan& rp, Loopback::Staging staging = Loopback::Staging::Own) {
  Loopback lb(rp, staging);
  const Schedule& s = *rp.schedule;
  for (const auto& ops : ops_by_step(rp)) {
    const StepWaves sw = step_waves(s, ops);
    EXPECT_EQ(sw.streams.size(), ops.size());
    std::map<std::int64_t, std::map<GpuId, const OpStream*>> held;  // per op: its roles
    using Key = std::pair<std::int64_t, GpuId>;
    std::map<Key, std::vector<char>> holds;                    // per (op, GPU): chunks here
    std::map<Key, std::map<std::int64_t, std::int64_t>> owner;  // per (op, GPU): slot -> (chunk, forwards left) packed
    std::map<Key, std::map<std::int64_t, std::int64_t>> left;
    for (auto id : ops) {
      const Op& op = s.ops[static_cast<std::size_t>(id)];
      held[id] = roles(lb, s, op);
      if (held[id].empty()) return lb;
      for (const auto& [g, t] : held[id]) holds[{id, g}].assign(static_cast<std::size_t>(t->chunks()), 0);
    }
    // Chunk k enters GPU g's slot: the chunk there before must have left for every child.
    auto occupy = [&](std::int64_t id, GpuId g, std::int64_t k) {
      const OpStream* t = held[id].at(g);
      if (t->kept()) return;
      const std::int64_t slot = k % t->slots;
      if (auto it = owner[{id, g}].find(slot); it != owner[{id, g}].end()) {
        const std::int64_t waiting = left[{id, g}][it->second];
        EXPECT_EQ(waiting, 0) << "op " << id << " GPU " << g << ": chunk " << k << " overwrites chunk " << it->second
                              << " before it was forwarded";
      }
      owner[{id, g}][slot] = k;
      left[{id, g}][k] = static_cast<std::int64_t>(t->children.size());
    };
    auto still_here = [&](std::int64_t id, GpuId g, std::int64_t k) {
      const OpStream* t = held[id].at(g);
      return t->kept() || owner[{id, g}][k % t->slots] == k;
    };
    for (std::int64_t wave = 0; wave < sw.waves; ++wave) {
      for (const StreamWaves& w : sw.streams) {  // packs of the chunks that leave in this wave
        const Op& op = s.ops[static_cast<std::size_t>(w.op)];
        const std::int64_t k = wave - w.offset;
        if (k < 0 || k >= w.chunks) continue;
        occupy(w.op, op.src, k);
        lb.pack(op.src, held[w.op].at(op.src), k);
        holds[{w.op, op.src}][static_cast<std::size_t>(k)] = 1;
      }
      struct Move {
        GpuId from, to;
        std::int64_t op, chunk, bytes;
      };
      std::vector<Move> moves;
      for (const StreamWaves& w : sw.streams) {
        const Op& op = s.ops[static_cast<std::size_t>(w.op)];
        const auto hops = hops_of(s, op);
        for (std::size_t h = 0; h < hops.size(); ++h) {
          const std::int64_t k = w.chunk_in(h, wave);
          if (k < 0) continue;
          const ChainHop& hop = hops[h];
          const auto has = [&](GpuId g) { return holds[std::make_pair(w.op, g)][static_cast<std::size_t>(k)] != 0; };
          EXPECT_TRUE(has(hop.from) && still_here(w.op, hop.from, k))
              << "op " << w.op << " wave " << wave << ": GPU " << hop.from << " forwards chunk " << k << " it does not hold";
          EXPECT_FALSE(has(hop.to)) << "op " << w.op << ": chunk " << k << " twice";
          moves.push_back({hop.from, hop.to, w.op, k, chain_chunk(op.bytes.value, held[w.op].at(op.src)->chunk, k).bytes});
        }
      }
      // A group's transfers run together: read everything first, then write.
      std::vector<std::vector<unsigned char>> read;
      for (const Move& m : moves) {
        const unsigned char* from = lb.slot(m.from, held[m.op].at(m.from), m.chunk);
        read.emplace_back(from, from + m.bytes);
      }
      for (const Move& m : moves) --left[{m.op, m.from}][m.chunk];
      for (std::size_t i = 0; i < moves.size(); ++i) {
        const Move& m = moves[i];
        occupy(m.op, m.to, m.chunk);
        std::copy(read[i].begin(), read[i].end(), lb.slot(m.to, held[m.op].at(m.to), m.chunk));
        holds[{m.op, m.to}][static_cast<std::size_t>(m.chunk)] = 1;
      }
      for (const Move& m : moves) lb.unpack(m.to, held[m.op].at(m.to), m.chunk);
    }
    for (const auto& [key, h] : holds)
      EXPECT_EQ(std::count(h.begin(), h.end(), 0), 0) << "op " << key.first << " GPU " << key.second << " misses chunks";
  }
  return lb;
}

TEST(Loopback, EveryStrategyDeliversEveryByteInTheNcclBackendsWaves) {
  reshard::test::for_each_small_run([](const std::string& name, const std::string& strategy, const LoadedScenario& sc,
                                       const TransferSet& ts, const Schedule& s, const RunPlan& rp) {
    Loopback lb = run_waves(rp);
    expect_every_byte(lb, sc, ts, name + " " + strategy);
    // Staging memory laid out by steps as the nccl backend lays it out, as tightly as it lets it.
    Loopback tight = run_waves(rp, Loopback::Staging::Steps);
    expect_every_byte(tight, sc, ts, name + " " + strategy + " (staging reused by steps)");
    // A process computes the waves of the ops it takes part in: the same as the whole step's.
    for (int world : {2, 3, 5})
      for (const auto& ops : ops_by_step(rp)) {
        const StepWaves all = step_waves(s, ops);
        std::map<std::int64_t, const StreamWaves*> by_op;
        for (const auto& w : all.streams) by_op[w.op] = &w;
        for (int rank = 0; rank < world; ++rank) {
          std::vector<std::int64_t> mine;
          for (auto id : ops) {
            const Op& op = s.ops[static_cast<std::size_t>(id)];
            std::vector<GpuId> gpus{op.src, op.dst};
            for (const ChainHop& h : hops_of(s, op)) gpus.push_back(h.to);
            if (std::any_of(gpus.begin(), gpus.end(), [&](GpuId g) { return rp.gpu_index(g) % world == rank; })) mine.push_back(id);
          }
          for (const auto& w : step_waves(s, mine).streams) {
            EXPECT_EQ(w.offset, by_op.at(w.op)->offset) << name << " " << strategy << " op " << w.op;
            EXPECT_EQ(w.chunks, by_op.at(w.op)->chunks);
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
  HandMade(int dp, std::vector<ChainHop> hops, std::int64_t chunk, std::int32_t parts = 1, std::int32_t slots = kChainSlots)
      : sc(reshard::test::chain_scenario(dp)), ts(plan(sc.inventory, sc.source, sc.destination)) {
    s = reshard::test::chain_schedule(sc, ts, std::move(hops), chunk, parts);
    s.slots = slots;
    rp = make_run_plan(sc, ts, s);
  }
  HandMade(const HandMade&) = delete;
};

void expect_delivered(HandMade& h, const std::string& what) {
  for (auto staging : {Loopback::Staging::Own, Loopback::Staging::Steps}) {
    Loopback lb = run_loopback(h.rp, -1, staging);
    expect_every_byte(lb, h.sc, h.ts, what + " (chunk by chunk)");
    Loopback waves = run_waves(h.rp, staging);
    expect_every_byte(waves, h.sc, h.ts, what + " (waves)");
  }
}

TEST(ExecChain, RingOfFourGpusWithAShortLastChunk) {
  HandMade h(2, reshard::test::ring4(), 10007);
  const std::int64_t bytes = h.s.ops[0].bytes.value;
  ASSERT_NE(bytes % 10007, 0);                            // the last chunk is short
  ASSERT_GT(chain_chunks(bytes, 10007), 2 * kChainSlots);  // more chunks than a ring holds
  EXPECT_EQ(chain_chunk(bytes, 10007, chain_chunks(bytes, 10007) - 1).bytes, bytes % 10007);
  EXPECT_EQ(h.rp.gpus, (std::vector<GpuId>{0, 1, 2, 3}));
  // Roles: GPU 0 the root (a send to GPU 1), 1 and 2 inner (receive, forward), 3 a leaf; every GPU
  // holds a ring of 8 slots of 10007 bytes, not the whole part.
  const GpuProgram root = build_program(h.rp, 0);
  ASSERT_EQ(root.sends.size(), 1u);
  EXPECT_TRUE(root.receives.empty());
  EXPECT_EQ(root.sends[0].peer, -1);
  EXPECT_EQ(root.sends[0].children, std::vector<GpuId>{1});
  EXPECT_EQ(root.sends[0].chunk, 10007);
  EXPECT_EQ(root.regions[static_cast<std::size_t>(root.sends[0].region)].bytes, 8 * 10007);
  for (GpuId g : {1, 2, 3}) {
    const GpuProgram p = build_program(h.rp, g);
    ASSERT_EQ(p.receives.size(), 1u) << g;
    EXPECT_TRUE(p.sends.empty());
    EXPECT_EQ(p.receives[0].peer, g - 1);
    EXPECT_EQ(p.receives[0].children, g < 3 ? std::vector<GpuId>{g + 1} : std::vector<GpuId>{});
    EXPECT_EQ(p.regions[static_cast<std::size_t>(p.receives[0].region)].bytes, 8 * 10007);
    EXPECT_FALSE(p.receives[0].copies.empty());  // each keeps its TP half
  }
  expect_delivered(h, "ring");
}

// Two slots per ring (the fewest, kMinSlots): a GPU forwards chunk k from one slot while chunk
// k + 1 arrives in the other, and chunk k + 2 takes chunk k's slot only after it has left.
TEST(ExecChain, RingOfTwoSlotsWrapsManyTimes) {
  HandMade h(2, reshard::test::ring4(), 4099, 1, kMinSlots);
  ASSERT_GT(chain_chunks(h.s.ops[0].bytes.value, 4099), 20);
  const GpuProgram inner = build_program(h.rp, 1);
  EXPECT_EQ(inner.regions[static_cast<std::size_t>(inner.receives[0].region)].bytes, 2 * 4099);
  // Stream byte 3 * 4099 + 5 (chunk 3) lies in slot 1: 4099 + 5.
  EXPECT_EQ(inner.receives[0].slot_offset(3 * 4099 + 5), 4099 + 5);
  expect_delivered(h, "two-slot ring");
  HandMade tree(3, reshard::test::fan_out_tree6(), 4099, 1, kMinSlots);
  expect_delivered(tree, "two-slot tree");
}

TEST(ExecChain, TreeWithFanOuts) {
  HandMade h(3, reshard::test::fan_out_tree6(), 64 << 10);
  EXPECT_EQ(build_program(h.rp, 0).sends[0].children, (std::vector<GpuId>{1, 4}));
  EXPECT_EQ(build_program(h.rp, 1).receives[0].children, (std::vector<GpuId>{2, 3}));
  EXPECT_EQ(build_program(h.rp, 4).receives[0].children, std::vector<GpuId>{5});
  EXPECT_EQ(build_program(h.rp, 5).receives[0].peer, 4);
  // Depth 2: the last chunk reaches the leaves one wave after it left the root.
  const StepWaves sw = step_waves(h.s, {0});
  ASSERT_EQ(sw.streams.size(), 1u);
  EXPECT_EQ(sw.streams[0].depth, (std::vector<std::int32_t>{1, 1, 2, 2, 2}));
  EXPECT_EQ(sw.waves, sw.streams[0].chunks + 1);
  expect_delivered(h, "tree");
}

TEST(ExecChain, PartSmallerThanOneChunk) {
  HandMade h(2, reshard::test::ring4(), 64 << 20);
  ASSERT_LT(h.s.ops[0].bytes.value, 64 << 20);
  EXPECT_EQ(chain_chunks(h.s.ops[0].bytes.value, 64 << 20), 1);
  EXPECT_EQ(chain_chunk(h.s.ops[0].bytes.value, 64 << 20, 0).bytes, h.s.ops[0].bytes.value);
  EXPECT_EQ(step_waves(h.s, {0}).waves, 3);  // one chunk over three hops
  // A ring is never larger than the part.
  const GpuProgram p = build_program(h.rp, 2);
  EXPECT_EQ(p.regions[static_cast<std::size_t>(p.receives[0].region)].bytes, h.s.ops[0].bytes.value);
  expect_delivered(h, "one chunk");
}

TEST(ExecChain, TwoOpsOnOneChainRunInOrder) {
  HandMade h(2, reshard::test::ring4(), 100003, 2);
  // No `after` between them: the chain orders them. They share a step, op 1 after op 0.
  EXPECT_TRUE(h.s.after_of(h.s.ops[1]).empty());
  EXPECT_EQ(h.rp.step_of, (std::vector<std::int32_t>{0, 0}));
  EXPECT_EQ(h.rp.chain_prev, (std::vector<std::int64_t>{-1, 0}));
  const StepWaves sw = step_waves(h.s, {0, 1});
  ASSERT_EQ(sw.streams.size(), 2u);
  EXPECT_EQ(sw.streams[1].offset, sw.streams[0].chunks);  // op 1 leaves the root after op 0's last chunk
  EXPECT_EQ(sw.waves, sw.streams[0].chunks + sw.streams[1].chunks + 2);
  // The GPU backends' staging spans, by steps: every region lives in step 0, the ring of each op.
  {
    std::vector<GpuProgram> progs;
    for (GpuId g : h.rp.gpus) progs.push_back(build_program(h.rp, g));
    std::vector<std::vector<std::int64_t>> request_of;
    const auto r = detail::staging_requests(h.rp, progs, request_of);
    ASSERT_EQ(r.size(), 8u);  // two ops x four GPUs
    for (const auto& q : r) {
      EXPECT_EQ(q.first, 0);
      EXPECT_EQ(q.last, 0);
      EXPECT_EQ(q.bytes, 8 * 100003);
    }
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

// A plain op from a GPU to itself: pieces a GPU holds on both sides are copied locally, never
// sent; a hand-made schedule that sends one is refused before any backend runs it.
TEST(RunPlan, PlainOpFromAGpuToItselfIsRefused) {
  const LoadedScenario sc = load_scenario(std::filesystem::path(scenario_path("small-gqa-megatron-vllm.yaml")));
  const TransferSet ts = plan(sc.inventory, sc.source, sc.destination);
  StrategyParams p;
  p.strategy = Strategy::Direct;
  Schedule s = build_schedule(ts, sc.inventory, sc.source, sc.destination, sc.topology, p);
  s.ops[3].dst = s.ops[3].src;
  try {
    make_run_plan(sc, ts, s);
    FAIL() << "accepted an op from GPU " << s.ops[3].src << " to itself";
  } catch (const ScheduleError& e) {
    EXPECT_NE(std::string(e.what()).find("operation 3 sends from GPU " + std::to_string(s.ops[3].src) + " to itself"), std::string::npos)
        << e.what();
  }
}

// The nccl backend's library, loaded as a run loads it, answers through its entry points: the
// version read through ncclGetVersion (a binding left null or bound to the wrong symbol fails here,
// not first on a GPU machine).
TEST(Backends, NcclLibraryAnswersThroughItsEntryPoints) {
  const Backend& t = backend_named("nccl");
  const std::string got = nccl_library();
  if (!t.available) GTEST_SKIP() << "the nccl backend is not built: " << got;
  if (got.find("not found") != std::string::npos) GTEST_SKIP() << "no NCCL library on this machine: " << got;
  EXPECT_EQ(got.rfind("NCCL 2.", 0), 0u) << got;
  EXPECT_NE(got.find("(libnccl.so"), std::string::npos) << got;
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

// Freed staging is reused, hand-worked: 1 KiB live in step 0, then 256 B and 768 B in step 1, then
// 1 KiB again in step 2. Each step's regions are freed before the next step's are placed, so
//   step 0: [0, 1024) for the first request                                        arena 1024
//   step 1: its 1024 B free: 256 B at 0, the rest [256, 1024) holds the 768 B       arena 1024
//   step 2: [0, 256) and [256, 1024) free again, joined into [0, 1024): 1 KiB at 0  arena 1024
// so the arena is exactly 1 KiB. Wrong layouts this catches (each tried, scripts/mutation_test.py):
// a free region taken whole (its remainder lost: the 768 B go on top, 1792 B) and a freed region not
// joined to the free one before it (step 2's 1 KiB on top, 2048 B).
// Without `ordered` the same reuse needs a fence before step 1 once the budget (1 KiB) is reached;
// with room to spare (1 MiB) nothing is reused and no fence is placed.
TEST(ExecStaging, FreedMemoryIsReusedHandWorked) {
  const std::vector<detail::StagingRequest> r{{1024, 0, 0}, {256, 1, 1}, {768, 1, 1}, {1024, 2, 2}};
  const auto ordered = detail::plan_staging(r, 0, true);
  EXPECT_EQ(ordered.bytes, 1024);
  EXPECT_EQ(ordered.offset, (std::vector<std::int64_t>{0, 0, 256, 0}));
  EXPECT_TRUE(ordered.fences.empty());
  const auto fenced = detail::plan_staging(r, 1024, false);
  EXPECT_EQ(fenced.bytes, 1024);
  EXPECT_EQ(fenced.offset, (std::vector<std::int64_t>{0, 0, 256, 0}));
  EXPECT_EQ(fenced.fences, (std::vector<std::int64_t>{1, 2}));
  expect_sound(r, fenced, false);
  const auto roomy = detail::plan_staging(r, 1 << 20, false);
  EXPECT_EQ(roomy.bytes, 3072);
  EXPECT_TRUE(roomy.fences.empty());
}

// Property: with `ordered` (as the GPU backends lay out their arena) a step's regions are all freed
// before the next step's are placed, so when the first step holds one region of M bytes (256-byte
// rounded) and no later step asks for more than M in all, every later step fits in the first
// step's memory: the arena is exactly M, whatever the sizes and their order. (Without `ordered` the
// layout first takes what is free without a fence and may then fragment; not asserted here.)
TEST(ExecStaging, StepsWithinTheFirstStepsSizeNeedNoMore) {
  std::mt19937 rng(51);
  for (int round = 0; round < 300; ++round) {
    const std::int64_t first = 1 + static_cast<std::int64_t>(rng() % 20000);
    const std::int64_t M = (first + 255) / 256 * 256;
    std::vector<detail::StagingRequest> r{{first, 0, 0}};
    const int steps = 1 + static_cast<int>(rng() % 6);
    for (int k = 1; k <= steps; ++k) {
      std::int64_t left = M;
      const int n = 1 + static_cast<int>(rng() % 6);
      for (int i = 0; i < n && left > 0; ++i) {
        // At most what is left: rounded up to 256 B, it still fits in M.
        std::int64_t bytes = 1 + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(left));
        if (rng() % 3 == 0) bytes = left;
        left -= (bytes + 255) / 256 * 256;
        r.push_back({bytes, k, k});
      }
    }
    std::shuffle(r.begin() + 1, r.end(), rng);  // plan_staging orders by first position itself
    SCOPED_TRACE("round " + std::to_string(round));
    const auto ordered = detail::plan_staging(r, 0, true);
    EXPECT_EQ(ordered.bytes, M);
    expect_sound(r, ordered, true);
  }
}

TEST(ExecStaging, EveryStrategyOnTheGpuCheckScenarioFitsOneGpu) {
  // All 16 GPUs of gpu-check-qwen3-8b as virtual ranks on one 139 GiB GPU (the cuda backend; the
  // nccl backend at world size 1): the arena laid out by steps holds, in each step, every GPU's
  // streams of that step, each GPU within its staging budget, and all of it fits the GPU.
  const LoadedScenario sc = load_scenario(std::filesystem::path(scenario_path("gpu-check-qwen3-8b.yaml")));
  const TransferSet ts = plan(sc.inventory, sc.source, sc.destination);
  for (const auto& strategy : strategy_names()) {
    const Schedule s = build_schedule(ts, sc.inventory, sc.source, sc.destination, sc.topology, parse_strategy(strategy),
                                      staging_budgets(sc));
    const RunPlan rp = make_run_plan(sc, ts, s);
    std::vector<GpuProgram> progs;
    std::int64_t shards = 0;
    for (GpuId g : rp.gpus) {
      progs.push_back(build_program(rp, g));
      for (const Region& r : progs.back().regions)
        if (r.kind == Region::Kind::Source || r.kind == Region::Kind::Destination) shards += (r.bytes + 255) / 256 * 256;
    }
    const std::int64_t free = 139LL << 30, budget = free - shards - (free / 32 + (1LL << 30));
    std::vector<std::vector<std::int64_t>> request_of;
    const auto requests = detail::staging_requests(rp, progs, request_of);
    const auto plan = detail::plan_staging(requests, budget, true);
    EXPECT_LE(plan.bytes, budget) << strategy;
    EXPECT_TRUE(plan.fences.empty());
    expect_sound(requests, plan, true);
    const StagingMemory m = staging_memory(s);
    const auto per = detail::staging_per_program(requests, request_of);
    for (std::size_t p = 0; p < progs.size(); ++p) {
      const GpuId g = progs[p].gpu;
      EXPECT_GE(per[p], m.per_gpu[static_cast<std::size_t>(g)].value) << strategy << " GPU " << g;
      if (staging_budget(s, g).value > 0) {
        EXPECT_LE(m.per_gpu[static_cast<std::size_t>(g)], staging_budget(s, g)) << strategy << " GPU " << g;
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
colocated: true
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
      const OpStream* t = find_stream(victim.receives, c.op);
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
  m.ops.assign(s.ops.size(), MeasuredOpTiming{0.0, 1e-3});
  m.elapsed_s = 1e-3;
  m.bytes_verified = ts.bytes_needed.value;
  m.verified = true;
  return to_json(m, rp);
}

// The GPU check's cuda runs of 2026-12-04 (docs/gpu-check/h200-2026-12-04), read here with the
// shipped scenario in place of the path the device recorded (its digest still checked), predicted by
// the cuda backend's model with the shipped device profile (params/gpu-check-h200.yaml). They ran
// the per-chunk engine the list engine replaced: where its issuing set the time (512 KiB chunks,
// cuda-direct 650 ms) the list engine's model predicts the copying alone; at 64 MiB chunks the old
// engine was copy-bound too, so cuda-chain-64MiB is still a prediction of the copies: 49 153 042 432 B
// copied / 2148 GB/s = 22.88 ms against 26.64 ms measured (+16 %). A host profile or a nccl run is
// refused naming its key.
TEST(MeasurementFile, GpuCheckRunsArePredictedByTheCudaBackendsModel) {
  const std::filesystem::path root = RESHARD_SOURCE_DIR, runs = root / "docs/gpu-check/h200-2026-12-04";
  const auto scenario = root / "scenarios/gpu-check-qwen3-8b.yaml";
  const DeviceProfile device = DeviceProfile::load(root / "params/gpu-check-h200.yaml");
  DevicePrediction terms;
  const Measurement direct = load_measurement(runs / "cuda-direct.json", false, scenario);
  const auto d = compare_with_device_model(direct, device, "d", &terms);
  EXPECT_EQ(terms.copied.value, direct.device_copy_bytes);
  EXPECT_NEAR(d.back().predicted_s, static_cast<double>(direct.device_copy_bytes) / 2148e9, 1e-4);
  const Measurement chain = load_measurement(runs / "cuda-chain-64MiB.json", false, scenario);
  const auto big = compare_with_device_model(chain, device, "c", &terms);
  EXPECT_EQ(terms.copied.value, chain.device_copy_bytes);  // the model's copies are the backend's, to the byte
  EXPECT_NEAR(big.back().predicted_s, 49'153'042'432 / 2148e9, 1e-6);
  EXPECT_NEAR(big.back().error(), 0.164, 0.005);
  const std::string nccl = reshard::test::config_error(
      [&] { compare_with_device_model(load_measurement(runs / "nccl-domain_chain.json", false, scenario), device, "n.json"); });
  EXPECT_NE(nccl.find("n.json: backend: 'nccl': the device profile predicts runs of the cuda backend"), std::string::npos) << nccl;
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

// A Measurement of a run with `--set` overrides: calibrate reads it as check does, through
// load_measurement, so its observation is estimated on the scenario as the run had it. With the
// override topology.cluster.nic_speed=10Gbps the network is 40x slower than the file's 400 Gb/s,
// so the hardware time must be the estimate on the overridden scenario and differ from the one on
// the file as written (the wrong fit this bug gave: the same observation either way).
TEST(MeasurementFile, CalibrateReadsTheRunsOverridesAsCheckDoes) {
  const std::string path = scenario_path("small-moe-ep.yaml");
  const std::vector<std::string> sets{"topology.cluster.nic_speed=10Gbps"};
  const PlannedScenario slow(load_scenario(std::filesystem::path(path), parse_overrides(sets)));
  const PlannedScenario fast(load_scenario(std::filesystem::path(path)));
  StrategyParams p;
  p.strategy = Strategy::Direct;
  const Schedule s = slow.schedule_for(p, slow.budgets());
  const RunPlan rp = make_run_plan(slow.scenario(), slow.transfers(), s);
  Measurement m;
  m.scenario_path = path;
  m.scenario_sets = sets;
  m.backend = "host";
  m.ranks = 16;
  m.schedule = s;
  m.ops.assign(s.ops.size(), MeasuredOpTiming{0.0, 1e-3});
  m.elapsed_s = 1e-3;
  m.bytes_verified = slow.transfers().bytes_needed.value;
  m.verified = true;
  const auto file = std::filesystem::temp_directory_path() / "reshard_test_calibrate_overrides.json";
  std::ofstream(file) << to_json(m, rp).dump();
  // The hardware time calibrate uses: the estimate with every fitted constant 0 and one copy pass.
  CostParams hw = CostParams::profile_named("reshard");
  hw.per_tensor = hw.per_broadcast_tensor = hw.per_bucket = hw.per_stage = Seconds{0};
  hw.copy_passes = 1;
  auto hardware = [&](const PlannedScenario& on) {
    const Prediction pr = estimate(s, on.transfers(), on.scenario().inventory, on.scenario().topology, hw);
    return (pr.time - pr.copies).value;
  };
  const auto obs = observations_from_csv(file, CostParams::profile_named("reshard"));
  ASSERT_EQ(obs.size(), 1u);
  EXPECT_NEAR(obs[0].hardware.value, hardware(slow), 1e-12 * hardware(slow));
  EXPECT_GT(hardware(slow), 5 * hardware(fast)) << "the override does not slow this schedule: the test would not see the bug";
  // check reads the same scenario: its whole-run prediction is the estimate on the slow network.
  const auto rows = compare_with_prediction(load_measurement(file));
  EXPECT_NEAR(rows.back().predicted_s, estimate(s, slow.transfers(), slow.scenario().inventory, slow.scenario().topology,
                                                CostParams::profile_named("reshard")).time.value, 1e-12);
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

namespace {
RunPlan small_run_plan(const LoadedScenario& sc, const TransferSet& ts, Schedule& s) {
  StrategyParams p;
  p.strategy = Strategy::DomainChain;
  s = build_schedule(ts, sc.inventory, sc.source, sc.destination, sc.topology, p);
  return make_run_plan(sc, ts, s);
}
std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::size_t at = 0;
  for (std::size_t nl; (nl = text.find('\n', at)) != std::string::npos; at = nl + 1) out.push_back(text.substr(at, nl - at));
  return out;
}
}  // namespace

// The plan file's layout (exec/plan_file.hpp): the header, one line per rank, the index of the rank
// lines ([offset, bytes] each, pointing at exactly those lines), and the index's offset, 20 digits.
// A runner that asks for one rank gets the same line for it and empty lines for the others.
TEST(RefitPlanFile, RankLinesFoundThroughTheIndex) {
  const LoadedScenario sc = load_scenario(std::filesystem::path(scenario_path("small-moe-ep.yaml")));
  const TransferSet ts = plan(sc.inventory, sc.source, sc.destination);
  Schedule s;
  const RunPlan rp = small_run_plan(sc, ts, s);
  const std::string text = refit_plan_text(rp);
  const auto lines = lines_of(text);
  const std::size_t n = rp.gpus.size();
  ASSERT_EQ(lines.size(), n + 3);  // header, n ranks, index, tail
  const auto header = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(header["format"], kRefitPlanFormat);
  EXPECT_FALSE(header.contains("ranks"));
  EXPECT_EQ(lines.back().size(), 20u);
  const std::size_t index_at = std::stoull(lines.back());
  const auto index = nlohmann::json::parse(text.substr(index_at, text.find('\n', index_at) - index_at))["ranks"];
  ASSERT_EQ(index.size(), n);
  for (std::size_t r = 0; r < n; ++r) {
    const std::string line = text.substr(index[r][0].get<std::size_t>(), index[r][1].get<std::size_t>());
    EXPECT_EQ(line, lines[1 + r]);
    EXPECT_EQ(nlohmann::json::parse(line)["gpu"], rp.gpus[r]);
  }
  const auto one = lines_of(refit_plan_text(rp, {3}));
  ASSERT_EQ(one.size(), n + 3);
  EXPECT_EQ(one[0], lines[0]);
  for (std::size_t r = 0; r < n; ++r) EXPECT_EQ(one[1 + r], r == 3 ? lines[1 + r] : std::string()) << r;
  EXPECT_THROW(refit_plan_text(rp, {static_cast<std::int32_t>(n)}), ConfigError);
}

// A strided copy entry [src, dst, so, do, bytes, count, ss, ds] stands for `count` runs k = 0..count-1
// at (so + k ss, do + k ds): expanded, a program's runs are exactly build_program's, in order.
TEST(RefitPlanFile, StridedRunsExpandToTheProgramsRuns) {
  const LoadedScenario sc = load_scenario(std::filesystem::path(scenario_path("small-gqa-megatron-vllm.yaml")));
  const TransferSet ts = plan(sc.inventory, sc.source, sc.destination);
  Schedule s;
  const RunPlan rp = small_run_plan(sc, ts, s);
  const auto lines = lines_of(refit_plan_text(rp));
  std::int64_t strided = 0;
  for (std::size_t r = 0; r < rp.gpus.size(); ++r) {
    const GpuProgram prog = build_program(rp, rp.gpus[r]);
    const auto j = nlohmann::json::parse(lines[1 + r]);
    for (const char* list : {"sends", "receives"}) {
      const auto& streams = std::string(list) == "sends" ? prog.sends : prog.receives;
      ASSERT_EQ(j[list].size(), streams.size());
      for (std::size_t t = 0; t < streams.size(); ++t) {
        std::vector<CopyRun> runs;
        for (const auto& e : j[list][t]["copies"]) {
          const std::int64_t count = e.size() == 8 ? e[5].get<std::int64_t>() : 1;
          strided += e.size() == 8;
          for (std::int64_t k = 0; k < count; ++k)
            runs.push_back({e[0].get<std::int32_t>(), e[1].get<std::int32_t>(),
                            e[2].get<std::int64_t>() + k * (count > 1 ? e[6].get<std::int64_t>() : 0),
                            e[3].get<std::int64_t>() + k * (count > 1 ? e[7].get<std::int64_t>() : 0), e[4].get<std::int64_t>()});
        }
        ASSERT_EQ(runs.size(), streams[t].copies.size()) << r << " " << list << " " << t;
        for (std::size_t i = 0; i < runs.size(); ++i) {
          EXPECT_EQ(runs[i].src, streams[t].copies[i].src);
          EXPECT_EQ(runs[i].dst, streams[t].copies[i].dst);
          EXPECT_EQ(runs[i].src_offset, streams[t].copies[i].src_offset);
          EXPECT_EQ(runs[i].dst_offset, streams[t].copies[i].dst_offset);
          EXPECT_EQ(runs[i].bytes, streams[t].copies[i].bytes);
        }
      }
    }
  }
  EXPECT_GT(strided, 0);  // TP slices of 2-D weights: rows at a constant stride
}

// piece_row_groups is piece_runs grouped: on random boxes inside random shards (1-4 dimensions,
// some extents 1, the piece's last dimension sometimes the shard's whole row) and random element
// ranges [b, e) (partial first and last rows), its groups expanded row by row are piece_runs' rows,
// in order.
TEST(RowWalk, RowGroupsExpandToTheRowsOnRandomBoxes) {
  std::mt19937_64 rng(48);
  auto pick = [&](std::int64_t lo, std::int64_t hi) { return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng); };
  std::int64_t grouped = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const auto nd = static_cast<std::size_t>(pick(1, 4));
    Box shard, piece;
    for (std::size_t d = 0; d < nd; ++d) {
      const std::int64_t lo = pick(0, 3), size = pick(1, 6);
      shard.dims.push_back({lo, lo + size});
      const std::int64_t a = pick(lo, lo + size - 1), b = pick(0, 2) == 0 ? lo + size : pick(a + 1, lo + size);
      piece.dims.push_back(pick(0, 3) == 0 ? Interval{lo, lo + size} : Interval{a, b});
    }
    const std::int64_t n = piece.elements(), b = pick(0, n - 1), e = pick(b + 1, n);
    std::vector<std::array<std::int64_t, 3>> rows, expanded;
    piece_runs(piece, shard, b, e, [&](std::int64_t off, std::int64_t k, std::int64_t c) { rows.push_back({off, k, c}); });
    piece_row_groups(piece, shard, b, e, [&](std::int64_t off, std::int64_t k, std::int64_t c, std::int64_t count, std::int64_t stride) {
      ASSERT_GE(count, 1);
      grouped += count > 1;
      for (std::int64_t i = 0; i < count; ++i) expanded.push_back({off + i * stride, k + i * c, c});
    });
    ASSERT_EQ(expanded, rows) << "trial " << trial << ": piece " << to_string(piece) << " in shard " << to_string(shard)
                              << " elements [" << b << ", " << e << ")";
  }
  EXPECT_GT(grouped, 500);  // many walks have whole rows at a stride
}

// StridedRuns adds a group in constant time and keeps the one canonical form: on random sequences of
// groups (few regions, lengths and strides, so that runs continue each other, join groups and break
// them), what it holds is what it holds when given the same runs one at a time, and expanded it is
// add_runs' merged runs, in order.
TEST(RowWalk, StridedRunsAreTheRunsMergedAndGroupedOnRandomSequences) {
  std::mt19937_64 rng(4848);
  auto pick = [&](std::int64_t lo, std::int64_t hi) { return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng); };
  std::int64_t merged = 0, long_groups = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    StridedRuns bulk, one_by_one;
    std::vector<CopyRun> runs;
    std::int64_t at_src = 0, at_dst = 0;
    for (int g = pick(1, 8); g > 0; --g) {
      const std::int64_t bytes = pick(1, 3) * 2, count = pick(1, 5);
      const std::int64_t ss = pick(0, 2) == 0 ? bytes : bytes * pick(2, 4), ds = pick(0, 2) == 0 ? bytes : pick(0, 3) * 4;
      if (pick(0, 2) != 0) {  // often where the last run ended: the group may continue it
        at_src = runs.empty() ? 0 : runs.back().src_offset + runs.back().bytes;
        at_dst = runs.empty() ? 0 : runs.back().dst_offset + runs.back().bytes;
      } else {
        at_src = pick(0, 40);
        at_dst = pick(0, 40);
      }
      const CopyRun first{static_cast<std::int32_t>(pick(0, 3) == 0), 2, at_src, at_dst, bytes};
      bulk.add(first, count, ss, ds);
      add_runs(runs, first, count, ss, ds);
      at_src += count * ss;
      at_dst += count * ds;
    }
    for (const CopyRun& r : runs) one_by_one.add(r);
    const auto& groups = bulk.groups();
    ASSERT_EQ(groups, one_by_one.groups()) << "trial " << trial;
    std::vector<CopyRun> expanded;
    for (const StridedRun& g : groups) {
      long_groups += g.count > 2;
      for (std::int64_t k = 0; k < g.count; ++k)
        expanded.push_back({g.src, g.dst, g.src_offset + k * g.src_stride, g.dst_offset + k * g.dst_stride, g.bytes});
    }
    ASSERT_EQ(expanded.size(), runs.size()) << "trial " << trial;
    for (std::size_t i = 0; i < runs.size(); ++i) {
      ASSERT_EQ(expanded[i].src, runs[i].src) << trial;
      ASSERT_EQ(expanded[i].dst, runs[i].dst) << trial;
      ASSERT_EQ(expanded[i].src_offset, runs[i].src_offset) << trial << " run " << i;
      ASSERT_EQ(expanded[i].dst_offset, runs[i].dst_offset) << trial << " run " << i;
      ASSERT_EQ(expanded[i].bytes, runs[i].bytes) << trial << " run " << i;
      merged += runs[i].bytes > 6;  // longer than any one added run: merged
    }
  }
  EXPECT_GT(merged, 100);
  EXPECT_GT(long_groups, 100);
}

// The strided program is build_program's: for every small scenario and strategy (and the 1 MiB
// budgets), each GPU's local runs and each stream's copies, as strided groups, expand to exactly
// build_program's runs and are the groups of those runs given one at a time; the rest of the
// program is the same.
TEST(RefitPlanFile, StridedProgramsAreTheProgramsGroupedForEverySmallRun) {
  std::int64_t groups = 0, runs = 0;
  reshard::test::for_each_small_run([&](const std::string& name, const std::string& strategy, const LoadedScenario&,
                                        const TransferSet&, const Schedule&, const RunPlan& rp) {
    auto grouped = [](const std::vector<CopyRun>& list) {
      StridedRuns out;
      for (const CopyRun& r : list) out.add(r);
      return out.groups();
    };
    auto expanded = [](StridedRuns& runs) {  // as (src, dst, src offset, dst offset, bytes) rows
      std::vector<std::array<std::int64_t, 5>> out;
      for (const StridedRun& g : runs.groups())
        for (std::int64_t k = 0; k < g.count; ++k)
          out.push_back({g.src, g.dst, g.src_offset + k * g.src_stride, g.dst_offset + k * g.dst_stride, g.bytes});
      return out;
    };
    auto rows = [](const std::vector<CopyRun>& list) {
      std::vector<std::array<std::int64_t, 5>> out;
      for (const CopyRun& r : list) out.push_back({r.src, r.dst, r.src_offset, r.dst_offset, r.bytes});
      return out;
    };
    for (GpuId g : rp.gpus) {
      const GpuProgram prog = build_program(rp, g);
      StridedProgram strided = build_strided_program(rp, g);
      const std::string where = name + " " + strategy + " GPU " + std::to_string(g);
      ASSERT_EQ(strided.regions.size(), prog.regions.size()) << where;
      EXPECT_EQ(strided.source_pieces, prog.source_pieces) << where;
      EXPECT_EQ(strided.destination_pieces, prog.destination_pieces) << where;
      EXPECT_EQ(strided.local.groups(), grouped(prog.local)) << where << " local";
      EXPECT_EQ(expanded(strided.local), rows(prog.local)) << where << " local";
      for (int side = 0; side < 2; ++side) {
        auto& mine = side == 0 ? strided.sends : strided.receives;
        const auto& theirs = side == 0 ? prog.sends : prog.receives;
        ASSERT_EQ(mine.size(), theirs.size()) << where;
        for (std::size_t t = 0; t < mine.size(); ++t) {
          EXPECT_EQ(mine[t].op, theirs[t].op) << where;
          EXPECT_EQ(mine[t].region, theirs[t].region) << where;
          EXPECT_EQ(mine[t].copies.groups(), grouped(theirs[t].copies)) << where << " op " << theirs[t].op;
          EXPECT_EQ(expanded(mine[t].copies), rows(theirs[t].copies)) << where << " op " << theirs[t].op;
          groups += static_cast<std::int64_t>(mine[t].copies.groups().size());
          runs += static_cast<std::int64_t>(theirs[t].copies.size());
        }
      }
    }
  });
  EXPECT_LT(groups, runs);  // rows at a stride are one group
}

// A write that fails part way (here: the file-size limit, as a full disk) is one ConfigError naming
// the file, and leaves neither the file nor its .partial; an earlier file at the path is kept.
TEST(RefitPlanFile, AFailedWriteLeavesNothing) {
  const LoadedScenario sc = load_scenario(std::filesystem::path(scenario_path("small-moe-ep.yaml")));
  const TransferSet ts = plan(sc.inventory, sc.source, sc.destination);
  Schedule s;
  const RunPlan rp = small_run_plan(sc, ts, s);
  const auto path = std::filesystem::temp_directory_path() / "reshard_test_refit_plan.jsonl";
  std::filesystem::remove(path);
  write_refit_plan(rp, path);
  const auto whole = std::filesystem::file_size(path);
  EXPECT_EQ(whole, refit_plan_text(rp).size());
  std::signal(SIGXFSZ, SIG_IGN);
  rlimit old{};
  getrlimit(RLIMIT_FSIZE, &old);
  rlimit small = old;
  small.rlim_cur = 4096;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  try {
    write_refit_plan(rp, path);
    ADD_FAILURE() << "a write past the file-size limit succeeded";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << e.what();
  }
  setrlimit(RLIMIT_FSIZE, &old);
  EXPECT_EQ(std::filesystem::file_size(path), whole);  // the earlier file, untouched
  EXPECT_FALSE(std::filesystem::exists(path.string() + ".partial"));
  EXPECT_THROW(write_refit_plan(rp, "/nonexistent-dir/plan.jsonl"), ConfigError);
  EXPECT_FALSE(std::filesystem::exists("/nonexistent-dir/plan.jsonl.partial"));
  std::filesystem::remove(path);
}
