// Hand-made chain ops for the executor tests: tiny-gqa held whole on GPU 0 (Megatron TP1) and
// needed by vLLM TP2 x DP`dp` on GPUs 0 .. 2 dp - 1 of dgx-h100-2n. GPU 0 copies its own shard in
// place; every other GPU gets the whole model along one chain (a ring, or a tree with fan-outs)
// and keeps its TP half, as a broadcast ring does.
#pragma once

#include "paths.hpp"

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "reshard/model/scenario.hpp"
#include "reshard/model/schedule.hpp"

namespace reshard::test {

inline std::string chain_scenario_yaml(int dp) {
  const std::string root = source_dir();
  return "name: chain-fixture-dp" + std::to_string(dp) + "\nmodel: " + root + "/models/tiny-gqa.yaml\ntopology: " + root +
         "/topologies/dgx-h100-2n.yaml\ncolocated: true\nsource: {framework: megatron, tp: 1, gpus: 0}\n"
         "destination: {framework: vllm, tp: 2, dp: " +
         std::to_string(dp) + ", gpus: 0-" + std::to_string(2 * dp - 1) + "}\n";
}

// The scenario as a file (for `reshard exec SCHEDULE --scenario FILE`).
inline std::string chain_scenario_file(int dp) {
  const auto path = std::filesystem::temp_directory_path() / ("reshard_test_chain_fixture_dp" + std::to_string(dp) + ".yaml");
  std::ofstream(path) << chain_scenario_yaml(dp);
  return path.string();
}

inline model::LoadedScenario chain_scenario(int dp) {
  return model::load_scenario(model::Scenario::parse(chain_scenario_yaml(dp), "chain-fixture",
                                                     std::filesystem::path(source_dir()) / "scenarios"));
}

// One buffer with every piece in piece order; `parts` chain ops (part 0 .. parts - 1, in id order,
// no `after`) on one chain of `hops` rooted at GPU 0, in chunks of `chunk` bytes.
inline model::Schedule chain_schedule(const model::LoadedScenario& sc, const model::TransferSet& ts,
                                      std::vector<model::ChainHop> hops, std::int64_t chunk, std::int32_t parts = 1) {
  using namespace reshard::model;
  Schedule s;
  s.scenario = sc.scenario.name;
  s.piece_count = static_cast<std::int32_t>(ts.pieces.size());
  Buffer b;
  for (std::size_t p = 0; p < ts.pieces.size(); ++p) {
    const Piece& pc = ts.pieces[p];
    b.slices.push_back({static_cast<std::int32_t>(p), 0, pc.box.elements()});
    b.bytes += Bytes{pc.box.elements() * dtype_size(sc.inventory.tensor(pc.tensor).dtype)};
  }
  s.buffers.push_back(b);
  Chain c;
  c.hops = std::move(hops);
  c.chunk = Bytes{chunk};
  s.chains.push_back(c);
  for (std::int32_t part = 0; part < parts; ++part) {
    Op op;
    op.src = s.chains[0].hops.front().from;
    op.dst = s.chains[0].hops.back().to;
    op.chain = 0;
    op.buffer = 0;
    op.part = part;
    op.parts = parts;
    op.phase = OpPhase::Broadcast;
    for_each_in_part(b, part, parts, [&](std::int32_t p, std::int64_t lo, std::int64_t hi) {
      op.bytes += Bytes{(hi - lo) * dtype_size(sc.inventory.tensor(ts.pieces[static_cast<std::size_t>(p)].tensor).dtype)};
    });
    s.add_op(op, {});
  }
  return s;
}

// The chains the tests use: a ring over the 4 GPUs of DP2, and a tree over the 6 GPUs of DP3 where
// the root and GPU 1 fan out (0 -> 1, 0 -> 4, 1 -> 2, 1 -> 3, 4 -> 5).
inline std::vector<model::ChainHop> ring4() { return {{0, 1}, {1, 2}, {2, 3}}; }
inline std::vector<model::ChainHop> fan_out_tree6() { return {{0, 1}, {0, 4}, {1, 2}, {1, 3}, {4, 5}}; }

}  // namespace reshard::test
