// A delta refit (model/delta.hpp): encoded sizes and the passes' cost by hand, the schedule's bytes
// against the validator, the dense limits (density 1 costs at least the dense refit, density -> 0
// leaves the fixed costs), and the refusals of bad input.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "config_error.hpp"
#include "reshard/model/cost.hpp"
#include "reshard/model/scenario.hpp"
#include "reshard/model/schedule.hpp"
#include "reshard/model/strategies.hpp"
#include "run_command.hpp"

using namespace reshard::model;
using reshard::test::config_error;

namespace {

const std::filesystem::path kScenarios = std::filesystem::path(RESHARD_SOURCE_DIR) / "scenarios";
Override set(const std::string& key, const std::string& value) { return Override{key, value, key + "=" + value}; }

// small-gqa-fp8 without its precision change: tiny-gqa (models/tiny-gqa.yaml) in BF16, Megatron
// TP2 x PP2 x DP2 on GPUs 0-7 -> vLLM TP1 x DP2 on GPUs 8-9.
LoadedScenario tiny(const std::string& delta) {
  std::vector<Override> sets{set("destination.precision.format", "bf16")};
  if (!delta.empty()) sets.push_back(set("delta", delta));
  return load_scenario(kScenarios / "small-gqa-fp8.yaml", sets);
}

DeltaSpec uniform(double d, DeltaEncoding e = DeltaEncoding::Indices) {
  DeltaSpec s;
  s.density.fill(d);
  s.encoding = e;
  return s;
}

}  // namespace

TEST(Delta, EncodedSizesByHand) {
  // A run of n = 32 768 BF16 elements (s = 2) at d = 3 %: k = round(0.03 * 32 768) = round(983.04) = 983.
  //   indices  E = k (4 + s) = 983 * 6 = 5 898
  //   bitmask  E = ceil(n / 8) + k s = 4 096 + 1 966 = 6 062
  //   V = k s = 1 966 either way
  EXPECT_EQ(uniform(0.03).encoded(32'768, 2, TensorClass::Attention).value, 5'898);
  EXPECT_EQ(uniform(0.03, DeltaEncoding::Bitmask).encoded(32'768, 2, TensorClass::Attention).value, 6'062);
  EXPECT_EQ(uniform(0.03).values(32'768, 2, TensorClass::Attention).value, 1'966);
  // d = 1, n = 10, s = 2: indices 10 * 6 = 60, bitmask ceil(10 / 8) + 20 = 22; both above the dense 20.
  EXPECT_EQ(uniform(1).encoded(10, 2, TensorClass::Norm).value, 60);
  EXPECT_EQ(uniform(1, DeltaEncoding::Bitmask).encoded(10, 2, TensorClass::Norm).value, 22);
  // A run over 2^32 elements takes 8-byte indices: n = 5e9 FP8 (s = 1) at d = 0.1 %: k = 5e6,
  // E = 5e6 * (8 + 1) = 4.5e7.
  EXPECT_EQ(uniform(0.001).encoded(5'000'000'000, 1, TensorClass::ExpertFFN).value, 45'000'000);
  // A class without a density travels dense: n s.
  DeltaSpec experts;
  experts.density[static_cast<std::size_t>(TensorClass::ExpertFFN)] = 0.02;
  EXPECT_EQ(experts.encoded(1'000, 2, TensorClass::Attention).value, 2'000);
  EXPECT_EQ(experts.values(1'000, 2, TensorClass::Attention).value, 0);
  EXPECT_EQ(experts.encoded(1'000, 2, TensorClass::ExpertFFN).value, 20 * 6);
  // The crossover d = 1 / (8 * 4) = 3.125 %: at n = 2^20, s = 2 both give 32 768 * 6 = 196 608 =
  // 131 072 + 65 536.
  EXPECT_EQ(uniform(0.03125).encoded(1 << 20, 2, TensorClass::Attention),
            uniform(0.03125, DeltaEncoding::Bitmask).encoded(1 << 20, 2, TensorClass::Attention));
}

TEST(Delta, PassesAndSnapshotByHand) {
  // d = 1/2 on even runs: k = n / 2 exactly, so per shard of W = 2n bytes (BF16)
  //   E = k (4 + 2) = 3n = 1.5 W,  V = k 2 = n = 0.5 W.
  // Source GPU, snapshot on the GPU: 2W + E + V = 4W; destination decode: E + V = 2W.
  // The most loaded source GPU is a last-stage one (layers 2, 3, the final norm and half of
  // lm_head): per layer the TP halves of q, k, v, o, gate, up, down (753 664 / 2 = 376 832 elements)
  // and the replicated norms (576): 377 408 elements; with the final norm (256) and half of lm_head,
  // whose 1 000 rows Megatron pads to a multiple of 128 x TP = 256, 1 024 (512 rows x 256 = 131 072
  // elements): W = 2 * (2 * 377 408 + 256 + 131 072) = 1 772 288 bytes.
  // A destination GPU (TP1) holds the whole model: 4 layers of 754 240 elements and 512 256 global
  // ones, W = 2 * 3 529 216 = 7 058 432 bytes.
  const LoadedScenario sc = tiny("0.5");
  const TransferSet ts = plan(sc.inventory, sc.source, sc.destination);
  Bytes source_most{0}, destination_most{0}, snapshot_most{0};
  for (const auto& [g, b] : ts.delta.source) source_most = std::max(source_most, b);
  for (const auto& [g, b] : ts.delta.destination) destination_most = std::max(destination_most, b);
  for (const auto& [g, b] : ts.delta.snapshot) snapshot_most = std::max(snapshot_most, b);
  EXPECT_EQ(snapshot_most.value, 1'772'288);
  EXPECT_EQ(source_most.value, 4 * 1'772'288);
  EXPECT_EQ(destination_most.value, 2 * 7'058'432);
  EXPECT_EQ(ts.delta.source.size(), 8u);
  EXPECT_EQ(ts.delta.destination.size(), 2u);
  // The snapshot sits in GPU memory beside the source shards (the memory check counts it).
  EXPECT_EQ(sc.memory[7].delta_snapshot.value, sc.memory[7].source_weights.value);
  // T_delta = bytes / memory bandwidth (every GPU of dgx-h100-2n alike).
  const BytesPerSecond bw = sc.topology.gpu_memory_bandwidth(0);
  ASSERT_GT(bw.value, 0);
  const Schedule s = build_schedule(ts, sc.inventory, sc.source, sc.destination, sc.topology, parse_strategy("direct"));
  const Prediction p = estimate(s, ts, sc.inventory, sc.topology, CostParams::profile_named("reshard"));
  EXPECT_DOUBLE_EQ(p.delta_source.value, 4 * 1'772'288 / bw.value);
  EXPECT_DOUBLE_EQ(p.delta_destination.value, 2 * 7'058'432 / bw.value);

  // Snapshot in pinned host memory: memory W + E = 2.5 W, host link W + V = 1.5 W; no GPU memory.
  const LoadedScenario host = load_scenario(kScenarios / "small-gqa-fp8.yaml",
                                            {set("destination.precision.format", "bf16"), set("delta.density", "0.5"),
                                             set("delta.snapshot", "host")});
  const TransferSet hts = plan(host.inventory, host.source, host.destination);
  Bytes memory_most{0}, host_most{0};
  for (const auto& [g, b] : hts.delta.source) memory_most = std::max(memory_most, b);
  for (const auto& [g, b] : hts.delta.source_host) host_most = std::max(host_most, b);
  EXPECT_EQ(memory_most.value, 1'772'288 * 5 / 2);
  EXPECT_EQ(host_most.value, 1'772'288 * 3 / 2);
  EXPECT_EQ(host.memory[7].delta_snapshot.value, 0);
  const auto link = host.topology.host_link(7);
  ASSERT_TRUE(link);
  EXPECT_DOUBLE_EQ(delta_source_time(hts.delta, host.topology).value,
                   std::max(1'772'288 * 2.5 / bw.value, 1'772'288 * 1.5 / link->bandwidth.value));
}

TEST(Delta, EveryTransferCarriesItsEncodedBytesAndValidates) {
  // Per operation: the sum over its element ranges of the encoded bytes; the schedule validates
  // (the validator checks the same rule) on every strategy; without a delta nothing changes.
  for (const char* file : {"small-gqa-fp8.yaml", "small-moe-ep.yaml"}) {
    const LoadedScenario sc = load_scenario(kScenarios / file, {set("delta", "0.03")});
    const TransferSet ts = plan(sc.inventory, sc.source, sc.destination);
    Inventory dense_inv = sc.inventory;
    dense_inv.set_delta({});
    const TransferSet dense_ts = plan(dense_inv, sc.source, sc.destination);
    ASSERT_EQ(ts.pieces.size(), dense_ts.pieces.size());
    for (const auto& name : strategy_names()) {
      SCOPED_TRACE(std::string(file) + " " + name);
      const Schedule s = build_schedule(ts, sc.inventory, sc.source, sc.destination, sc.topology, parse_strategy(name));
      EXPECT_NO_THROW(validate(s, ts, sc.inventory, sc.source, sc.destination));
      for (const Op& op : s.ops) {
        std::int64_t want = 0;
        for_each_in_part(s.buffers[static_cast<std::size_t>(op.buffer)], op.part, op.parts,
                         [&](std::int32_t piece, std::int64_t b, std::int64_t e) {
                           const TensorInfo& t = sc.inventory.tensor(ts.pieces[static_cast<std::size_t>(piece)].tensor);
                           want += sc.inventory.delta().encoded(e - b, dtype_size(t.dtype), t.cls).value;
                         });
        ASSERT_EQ(op.bytes.value, want) << "operation " << op.id;
      }
      // The dense schedule of the same strategy does not validate against the delta's transfers.
      const Schedule dense = build_schedule(dense_ts, dense_inv, sc.source, sc.destination, sc.topology, parse_strategy(name));
      EXPECT_NO_THROW(validate(dense, dense_ts, dense_inv, sc.source, sc.destination));
      EXPECT_THROW(validate(dense, ts, sc.inventory, sc.source, sc.destination), ScheduleError);
    }
  }
}

TEST(Delta, DensityOneCostsAtLeastDenseAndDensityToZeroLeavesTheFixedCosts) {
  const CostParams params = CostParams::profile_named("reshard");
  for (const char* file : {"small-gqa-fp8.yaml", "small-moe-ep.yaml", "small-gqa-megatron-vllm.yaml"}) {
    const LoadedScenario dense = load_scenario(kScenarios / file);
    const TransferSet dense_ts = plan(dense.inventory, dense.source, dense.destination);
    const LoadedScenario one = load_scenario(kScenarios / file, {set("delta", "1")});
    const TransferSet one_ts = plan(one.inventory, one.source, one.destination);
    const LoadedScenario tiny_d = load_scenario(kScenarios / file, {set("delta", "1e-12")});
    const TransferSet tiny_ts = plan(tiny_d.inventory, tiny_d.source, tiny_d.destination);
    for (const char* encoding : {"indices", "bitmask"}) {
      const LoadedScenario one_e = load_scenario(kScenarios / file, {set("delta.density", "1"), set("delta.encoding", encoding)});
      const TransferSet one_e_ts = plan(one_e.inventory, one_e.source, one_e.destination);
      for (const auto& name : strategy_names()) {
        SCOPED_TRACE(std::string(file) + " " + encoding + " " + name);
        const StrategyParams sp = parse_strategy(name);
        const Prediction d = estimate(build_schedule(dense_ts, dense.inventory, dense.source, dense.destination, dense.topology, sp),
                                      dense_ts, dense.inventory, dense.topology, params);
        const Prediction p1 = estimate(build_schedule(one_e_ts, one_e.inventory, one_e.source, one_e.destination, one_e.topology, sp),
                                       one_e_ts, one_e.inventory, one_e.topology, params);
        // Every element changed: more bytes than dense on every link, plus the passes.
        EXPECT_GE(p1.time.value, d.time.value);
        EXPECT_GE(p1.network_bytes.value, d.network_bytes.value);
        EXPECT_GT(p1.delta_source.value + p1.delta_destination.value, 0);
      }
    }
    (void)one_ts;
    for (const auto& name : strategy_names()) {
      SCOPED_TRACE(std::string(file) + " " + name);
      const StrategyParams sp = parse_strategy(name);
      const Schedule s = build_schedule(tiny_ts, tiny_d.inventory, tiny_d.source, tiny_d.destination, tiny_d.topology, sp);
      const Prediction p = estimate(s, tiny_ts, tiny_d.inventory, tiny_d.topology, params);
      // Density -> 0: no byte moves; what remains is the fixed costs: the same schedule's
      // latencies, per-operation and per-tensor costs (its estimate without the delta's passes)
      // and the passes, which only read the weights and the snapshot (2 W / bandwidth at the source).
      EXPECT_EQ(p.network_bytes.value, 0);
      EXPECT_EQ(p.nvlink_bytes.value, 0);
      EXPECT_EQ(p.bandwidth_bound.value, 0);
      Inventory no_delta = tiny_d.inventory;
      no_delta.set_delta({});
      TransferSet no_passes = tiny_ts;
      no_passes.delta = {};
      const Prediction fixed = estimate(s, no_passes, no_delta, tiny_d.topology, params);
      EXPECT_DOUBLE_EQ(p.time.value, (fixed.time + p.delta_source + p.delta_destination).value);
      Bytes w_most{0};
      for (const auto& [g, b] : tiny_ts.delta.snapshot) w_most = std::max(w_most, b);
      EXPECT_DOUBLE_EQ(p.delta_source.value, (w_most * 2 / tiny_d.topology.gpu_memory_bandwidth(0)).value);
      EXPECT_EQ(p.delta_destination.value, 0);
      EXPECT_LT(fixed.time.value, estimate(build_schedule(dense_ts, dense.inventory, dense.source, dense.destination,
                                                          dense.topology, sp),
                                           dense_ts, dense.inventory, dense.topology, params)
                                      .time.value);
    }
  }
}

TEST(Delta, BadInputNamesTheKey) {
  auto load = [](const std::vector<Override>& sets) { return load_scenario(kScenarios / "small-moe-ep.yaml", sets); };
  for (const char* bad : {"0", "1.5", "-0.1"}) {
    const std::string e = config_error([&] { load({set("delta", bad)}); });
    EXPECT_HAS(e, "delta: a density");
    EXPECT_HAS(e, "(0, 1]");
  }
  EXPECT_HAS(config_error([&] { load({set("delta", "lots")}); }), "delta: expected a finite number");
  EXPECT_HAS(config_error([&] { load({set("delta.density.expert_ffn", "2")}); }), "delta.density.expert_ffn");
  EXPECT_HAS(config_error([&] { load({set("delta.density.experts", "0.1")}); }), "unknown tensor class 'experts'");
  EXPECT_HAS(config_error([&] { load({set("delta.density", "0.1"), set("delta.encoding", "zstd")}); }), "delta.encoding");
  EXPECT_HAS(config_error([&] { load({set("delta.density", "0.1"), set("delta.snapshot", "disk")}); }), "delta.snapshot");
  EXPECT_HAS(config_error([&] { load({set("delta.densty", "0.1")}); }), "densty");
  // One class given: the others travel dense.
  const LoadedScenario sc = load({set("delta.density.expert_ffn", "0.02")});
  EXPECT_DOUBLE_EQ(sc.inventory.delta().density_of(TensorClass::ExpertFFN), 0.02);
  EXPECT_DOUBLE_EQ(sc.inventory.delta().density_of(TensorClass::Attention), 0);
  // `dense` says no delta.
  EXPECT_FALSE(load({set("delta", "dense")}).inventory.delta().active());
}

TEST(Delta, CommandLineRefusesABadDensityNamingTheOption) {
  int status = 0;
  const std::string out = reshard::test::run_command(
      std::string(RESHARD_BINARY) + " compare " + (kScenarios / "small-moe-ep.yaml").string() + " --delta 0 2>&1", &status);
  EXPECT_NE(status, 0);
  EXPECT_HAS(out, "--delta");
  EXPECT_HAS(out, "(0, 1]");
}

TEST(Delta, SweepComparesEveryPointDenseAndDelta) {
  // `sweep --delta D`: one more axis, the fastest, delta = [dense, D]; at 3 % every point's best
  // estimate falls (its transfers carry 3 % x 6 / 2 = 9 % of the bytes).
  const auto folder = std::filesystem::temp_directory_path() / "reshard_test_delta_sweep";
  std::filesystem::create_directories(folder);
  int status = 0;
  const std::string out = reshard::test::run_command(
      std::string(RESHARD_BINARY) + " sweep " + RESHARD_SOURCE_DIR + "/tests/sweep/small-moe-nic.yaml --delta 0.03 -j 1 -o " +
          (folder / "s").string() + " 2>&1",
      &status);
  ASSERT_EQ(status, 0) << out;
  EXPECT_HAS(out, "8 points");
  std::ifstream csv(folder / "s.csv");
  std::string header, line;
  std::getline(csv, header);
  EXPECT_HAS(header, "destination.dp,delta,profile");
  std::map<std::string, double> best;  // "point" -> the auto row's estimate
  std::vector<std::string> deltas;
  while (std::getline(csv, line)) {
    std::vector<std::string> f;
    std::stringstream ss(line);
    for (std::string x; std::getline(ss, x, ',');) f.push_back(x);
    ASSERT_GT(f.size(), 8u) << line;
    if (f[6] != "auto") continue;
    deltas.push_back(f[4]);
    best[f[0]] = std::stod(f[8]);
  }
  ASSERT_EQ(deltas, (std::vector<std::string>{"dense", "0.03", "dense", "0.03", "dense", "0.03", "dense", "0.03"}));
  for (int p = 0; p < 8; p += 2) EXPECT_LT(best[std::to_string(p + 1)], best[std::to_string(p)]) << "point " << p;
  std::filesystem::remove_all(folder);
}
