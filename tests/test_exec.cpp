// The executor core without MPI or a GPU: the pattern, the row walk, programs run in one process
// ("loopback": every GPU's program in host memory, operations in id order), verification, faults,
// refusal of a schedule built for another scenario, and the Measurement round trip through check.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "host_memory.hpp"
#include "reshard/exec/executor.hpp"
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

struct Loopback {
  std::map<GpuId, GpuProgram> progs;
  std::map<GpuId, detail::HostMemory> mem;
};

const Transfer* find_transfer(const std::vector<Transfer>& list, std::int64_t op) {
  auto it = std::find_if(list.begin(), list.end(), [&](const Transfer& t) { return t.op == op; });
  return it == list.end() ? nullptr : &*it;
}

// Runs every GPU's program in this process: operations in id order, a send's region copied into
// the receiver's region; a chain op chunk by chunk, each hop copying chunk k from its `from`'s
// region (the root's send region, or what `from` received) into its `to`'s. `corrupt` flips the
// first unpacked byte of that operation at its dst, before dst forwards it.
Loopback run_loopback(const RunPlan& rp, std::int64_t corrupt = -1) {
  Loopback lb;
  const auto& inv = rp.scenario->inventory;
  const Schedule& s = *rp.schedule;
  for (GpuId g : rp.gpus) {
    lb.progs[g] = build_program(rp, g);
    detail::allocate(lb.progs[g], lb.mem[g]);
    detail::fill_sources(lb.progs[g], inv, lb.mem[g]);
    detail::run_copies(lb.progs[g].local, lb.mem[g]);
  }
  for (const Op& op : s.ops) {
    auto& sp = lb.progs[op.src];
    const Transfer* st = find_transfer(sp.sends, op.id);
    EXPECT_NE(st, nullptr) << "op " << op.id;
    if (!st) continue;
    detail::run_copies(st->copies, lb.mem[op.src]);
    auto region = [&](GpuId g, const Transfer* t) -> std::vector<unsigned char>& {
      return lb.mem[g].regions[static_cast<std::size_t>(t->region)];
    };
    auto flip = [&](GpuId g, const Transfer* t, std::int64_t lo, std::int64_t hi) {
      if (op.id != corrupt || g != op.dst || t->copies.empty()) return;
      const std::int64_t at = t->copies.front().src_offset;
      if (at >= lo && at < hi) region(g, t)[static_cast<std::size_t>(at)] ^= 0x5a;
    };
    if (op.chain < 0) {
      const Transfer* rt = find_transfer(lb.progs[op.dst].receives, op.id);
      EXPECT_NE(rt, nullptr) << "op " << op.id;
      if (!rt) continue;
      auto& from = region(op.src, st);
      auto& to = region(op.dst, rt);
      EXPECT_EQ(from.size(), to.size());
      EXPECT_EQ(static_cast<std::int64_t>(to.size()), op.bytes.value) << "op " << op.id;
      to = from;
      flip(op.dst, rt, 0, op.bytes.value);
      detail::run_copies(rt->copies, lb.mem[op.dst]);
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
      EXPECT_EQ(static_cast<std::int64_t>(region(h.to, rt).size()), op.bytes.value) << "op " << op.id;
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
        const auto& from = region(h.from, held.at(h.from));
        auto& to = region(h.to, held.at(h.to));
        std::copy(from.begin() + r.begin, from.begin() + r.begin + r.bytes, to.begin() + r.begin);
        flip(h.to, held.at(h.to), r.begin, r.begin + r.bytes);
      }
    }
    for (const ChainHop& h : c.hops) detail::run_copies(held.at(h.to)->copies, lb.mem[h.to]);
  }
  return lb;
}

TEST(Loopback, EveryStrategyDeliversEveryByteOfEverySmallScenario) {
  reshard::test::for_each_small_run([](const std::string& name, const std::string& strategy, const LoadedScenario& sc,
                                       const TransferSet& ts, const Schedule&, const RunPlan& rp) {
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
    p.strategy = strategy;
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
  p.strategy = "direct";
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
  p.strategy = "gather_broadcast";
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

}  // namespace
