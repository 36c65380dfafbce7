#include "reshard/exec/plan_file.hpp"

#include <nlohmann/json.hpp>

#include "reshard/model/errors.hpp"
#include "reshard/model/memory.hpp"

namespace reshard::exec {

using namespace reshard::model;

namespace {

nlohmann::json box_json(const Box& b) {
  nlohmann::json j = nlohmann::json::array();
  for (const Interval& d : b.dims) j.push_back({d.lo, d.hi});
  return j;
}

nlohmann::json runs_json(const std::vector<CopyRun>& runs) {
  nlohmann::json j = nlohmann::json::array();
  for (const CopyRun& c : runs) j.push_back({c.src, c.dst, c.src_offset, c.dst_offset, c.bytes});
  return j;
}

const char* kind_name(Region::Kind k) {
  switch (k) {
    case Region::Kind::Source: return "source";
    case Region::Kind::Destination: return "destination";
    case Region::Kind::Send: return "send";
    case Region::Kind::Receive: return "receive";
  }
  return "?";
}

}  // namespace

std::string refit_plan_json(const RunPlan& plan) {
  const LoadedScenario& sc = *plan.scenario;
  const Schedule& s = *plan.schedule;
  const TransferSet& ts = *plan.transfers;
  for (const auto& t : sc.inventory.tensors())
    if (t.quant.format != QuantFormat::None)
      throw ConfigError(sc.scenario.name, 0, "destination.precision",
                        "a refit plan moves raw bytes and does not quantise (tensor '" + t.name +
                            "' changes precision); run this scenario on the host backend");
  auto rank_of = [&](GpuId g) { return plan.gpu_index(g); };

  nlohmann::json j;
  j["format"] = kRefitPlanFormat;
  j["scenario"] = sc.scenario.name;
  j["strategy"] = describe(s.params);
  j["slots"] = s.slots;
  j["steps"] = plan.steps;
  j["world_size"] = plan.gpus.size();
  j["gpus"] = plan.gpus;
  const ModelConfig& cfg = sc.inventory.config();
  j["model"] = {{"name", cfg.name},
                {"architecture", cfg.architecture},
                {"hidden_size", cfg.hidden_size},
                {"num_attention_heads", cfg.num_attention_heads},
                {"num_key_value_heads", cfg.num_key_value_heads},
                {"head_dim", cfg.head_dim},
                {"num_experts", cfg.n_routed_experts}};
  auto& tensors = j["tensors"] = nlohmann::json::array();
  for (const auto& t : sc.inventory.tensors())
    tensors.push_back({{"name", t.name}, {"dtype", to_string(t.dtype)}, {"element_size", dtype_size(t.dtype)}, {"shape", t.shape}});

  // The ops' waves, step by step (every process computes the same: exec::step_waves).
  std::vector<std::vector<std::int64_t>> step_ops(static_cast<std::size_t>(plan.steps));
  for (const Op& op : s.ops) step_ops[static_cast<std::size_t>(plan.step_of[static_cast<std::size_t>(op.id)])].push_back(op.id);
  auto& ops = j["ops"] = nlohmann::json::array();
  for (std::size_t i = 0; i < s.ops.size(); ++i) ops.push_back(nullptr);
  auto& waves = j["step_waves"] = nlohmann::json::array();
  for (const auto& ids : step_ops) {
    const StepWaves sw = step_waves(s, ids);
    waves.push_back(ids.empty() ? 0 : sw.waves);
    for (const StreamWaves& w : sw.streams) {
      const Op& op = s.ops[static_cast<std::size_t>(w.op)];
      nlohmann::json hops = nlohmann::json::array(), kept = nlohmann::json::array();
      for (GpuId g : plan.kept[static_cast<std::size_t>(w.op)]) kept.push_back(rank_of(g));
      if (op.chain < 0) hops.push_back({rank_of(op.src), rank_of(op.dst)});
      else
        for (const ChainHop& h : s.chains[static_cast<std::size_t>(op.chain)].hops) hops.push_back({rank_of(h.from), rank_of(h.to)});
      ops[static_cast<std::size_t>(w.op)] = {{"id", w.op},
                                             {"step", plan.step_of[static_cast<std::size_t>(w.op)]},
                                             {"bytes", op.bytes.value},
                                             {"chunk", stream_chunk(s, op).value},
                                             {"chunks", w.chunks},
                                             {"offset", w.offset},
                                             {"hops", std::move(hops)},
                                             {"depth", w.depth},
                                             {"kept", std::move(kept)}};
    }
  }

  auto& ranks = j["ranks"] = nlohmann::json::array();
  for (GpuId g : plan.gpus) {
    const GpuProgram prog = build_program(plan, g);
    nlohmann::json r;
    r["gpu"] = g;
    auto& regions = r["regions"] = nlohmann::json::array();
    for (const Region& reg : prog.regions)
      regions.push_back({{"kind", kind_name(reg.kind)}, {"tensor", reg.tensor}, {"box", box_json(reg.box)}, {"op", reg.op}, {"bytes", reg.bytes}});
    r["local"] = runs_json(prog.local);
    for (const char* list : {"sends", "receives"}) {
      auto& out = r[list] = nlohmann::json::array();
      for (const OpStream& t : std::string(list) == "sends" ? prog.sends : prog.receives) {
        nlohmann::json children = nlohmann::json::array();
        for (GpuId c : t.children) children.push_back(rank_of(c));
        out.push_back({{"op", t.op},
                       {"peer", t.peer < 0 ? -1 : rank_of(t.peer)},
                       {"region", t.region},
                       {"chain", t.chain},
                       {"chunk", t.chunk},
                       {"bytes", t.bytes},
                       {"slots", t.slots},
                       {"children", std::move(children)},
                       {"hop", t.hop},
                       {"child_hops", t.child_hops},
                       {"copies", runs_json(t.copies)}});
      }
    }
    auto& pieces = r["pieces"] = nlohmann::json::array();
    for (int side = 0; side < 2; ++side)
      for (const auto& [p, region] : side == 0 ? prog.source_pieces : prog.destination_pieces) {
        const Piece& pc = ts.pieces[static_cast<std::size_t>(p)];
        const std::int64_t es = dtype_size(sc.inventory.tensor(pc.tensor).dtype);
        nlohmann::json runs = nlohmann::json::array();
        piece_runs(pc.box, prog.regions[static_cast<std::size_t>(region)].box, 0, pc.box.elements(),
                   [&](std::int64_t off, std::int64_t, std::int64_t n) {
                     if (!runs.empty() && runs.back()[0].get<std::int64_t>() + runs.back()[1].get<std::int64_t>() == off * es)
                       runs.back()[1] = runs.back()[1].get<std::int64_t>() + n * es;
                     else
                       runs.push_back({off * es, n * es});
                   });
        pieces.push_back({p, side == 0 ? "source" : "destination", region, std::move(runs)});
      }
    ranks.push_back(std::move(r));
  }
  return j.dump();
}

}  // namespace reshard::exec
