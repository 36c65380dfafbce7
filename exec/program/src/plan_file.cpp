#include "reshard/exec/plan_file.hpp"

#include <nlohmann/json.hpp>
#include <algorithm>
#include <cstdio>
#include <fstream>

#include "reshard/model/digest.hpp"
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

// Copy runs as the plan file writes them: [src, dst, src offset, dst offset, bytes], or with
// [..., count, src stride, dst stride] for a group of more than one (StridedRuns).
nlohmann::json runs_json(StridedRuns& runs) {
  nlohmann::json j = nlohmann::json::array();
  for (const StridedRun& c : runs.groups()) {
    if (c.count == 1) j.push_back({c.src, c.dst, c.src_offset, c.dst_offset, c.bytes});
    else j.push_back({c.src, c.dst, c.src_offset, c.dst_offset, c.bytes, c.count, c.src_stride, c.dst_stride});
  }
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

namespace {

void refuse_precision_change(const LoadedScenario& sc) {
  for (const auto& t : sc.inventory.tensors())
    if (t.quant.format != QuantFormat::None)
      throw ConfigError(sc.scenario.name, 0, "destination.precision",
                        "a refit plan moves raw bytes and does not quantise (tensor '" + t.name +
                            "' changes precision); run this scenario on the host backend");
}

// Everything but the ranks' programs, with its fingerprint (a digest of it).
nlohmann::json plan_header(const RunPlan& plan) {
  const LoadedScenario& sc = *plan.scenario;
  const Schedule& s = *plan.schedule;
  refuse_precision_change(sc);
  auto rank_of = [&](GpuId g) { return plan.gpu_index(g); };
  nlohmann::json j;
  j["format"] = kRefitPlanFormat;
  j["scenario"] = sc.scenario.name;
  j["strategy"] = describe(s.params);
  j["slots"] = s.slots;
  j["steps"] = plan.steps;
  j["world_size"] = plan.gpus.size();
  j["gpus"] = plan.gpus;
  auto& budgets = j["budgets"] = nlohmann::json::array();  // per rank: its staging budget (0: unbounded)
  for (GpuId g : plan.gpus) budgets.push_back(staging_budget(s, g).value);
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
                                             {"chain", op.chain},
                                             {"bytes", op.bytes.value},
                                             {"chunk", stream_chunk(s, op).value},
                                             {"chunks", w.chunks},
                                             {"offset", w.offset},
                                             {"hops", std::move(hops)},
                                             {"depth", w.depth},
                                             {"kept", std::move(kept)}};
    }
  }

  j["fingerprint"] = digest(j.dump());
  return j;
}

// Rank `index`'s program (the GPU plan.gpus[index]).
nlohmann::json rank_json(const RunPlan& plan, std::size_t index) {
  const LoadedScenario& sc = *plan.scenario;
  const TransferSet& ts = *plan.transfers;
  auto rank_of = [&](GpuId g) { return plan.gpu_index(g); };
  const GpuId g = plan.gpus[index];
  Rank destination_rank = -1;
  for (Rank r = 0; r < sc.destination.world_size() && destination_rank < 0; ++r)
    if (sc.destination.gpu_of(r) == g) destination_rank = r;
  StridedProgram prog = build_strided_program(plan, g);
  nlohmann::json r;
  r["gpu"] = g;
  if (destination_rank >= 0 && !sc.destination.expert_slots(destination_rank).empty())
    r["expert_slots"] = sc.destination.expert_slots(destination_rank);
  auto& regions = r["regions"] = nlohmann::json::array();
  for (const Region& reg : prog.regions)
    regions.push_back({{"kind", kind_name(reg.kind)}, {"tensor", reg.tensor}, {"box", box_json(reg.box)}, {"op", reg.op}, {"bytes", reg.bytes}});
  r["local"] = runs_json(prog.local);
  for (const char* list : {"sends", "receives"}) {
    auto& out = r[list] = nlohmann::json::array();
    for (auto& t : std::string(list) == "sends" ? prog.sends : prog.receives) {
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
  // Each piece's weight in the run's digest checksum: its first holder (the lowest rank) -(H + N - 1),
  // every other holder and every needer +1, so that a piece's weights add up to 0 (H holders, N
  // needers, counted as GPUs: one entry per GPU and side).
  auto gpus_of = [&](const ShardMap& m, std::int32_t tensor, std::int32_t shard) {
    std::vector<GpuId> out;
    m.rank_set(m.shards(tensor)[static_cast<std::size_t>(shard)].ranks).for_each([&](Rank k) { out.push_back(m.gpu_of(k)); });
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  };
  auto weight = [&](std::int32_t p, bool source) -> std::int64_t {
    const Piece& pc = ts.pieces[static_cast<std::size_t>(p)];
    const auto holders = gpus_of(sc.source, pc.tensor, plan.piece_source_shard[static_cast<std::size_t>(p)]);
    if (!source || holders.front() != g) return 1;
    const auto needers = gpus_of(sc.destination, pc.tensor, plan.piece_destination_shard[static_cast<std::size_t>(p)]);
    return -static_cast<std::int64_t>(holders.size() + needers.size() - 1);
  };
  auto& pieces = r["pieces"] = nlohmann::json::array();
  for (int side = 0; side < 2; ++side)
    for (const auto& [p, region] : side == 0 ? prog.source_pieces : prog.destination_pieces)
      pieces.push_back({p, side == 0 ? "source" : "destination", region,
                        box_json(ts.pieces[static_cast<std::size_t>(p)].box), weight(p, side == 0)});
  return r;
}

// The lines of a plan: the header, each rank's program (an empty line for a rank not asked for),
// the index of the rank lines, and the index's offset, each line written by `put` as it is made.
template <class Put>
void plan_lines(const RunPlan& plan, const std::vector<bool>& wanted, Put&& put) {
  std::int64_t at = 0;
  auto line = [&](const std::string& text) {
    put(text);
    put("\n");
    const std::int64_t start = at;
    at += static_cast<std::int64_t>(text.size()) + 1;
    return std::pair<std::int64_t, std::int64_t>{start, static_cast<std::int64_t>(text.size())};
  };
  line(plan_header(plan).dump());
  nlohmann::json index = nlohmann::json::array();
  for (std::size_t i = 0; i < plan.gpus.size(); ++i) {
    const auto [start, bytes] = line(wanted.empty() || wanted[i] ? rank_json(plan, i).dump() : std::string());
    index.push_back({start, bytes});
  }
  const std::int64_t index_at = at;
  line(nlohmann::json{{"ranks", std::move(index)}}.dump());
  char tail[32];
  std::snprintf(tail, sizeof tail, "%020lld", static_cast<long long>(index_at));
  put(tail);
  put("\n");
}

}  // namespace

std::string refit_plan_text(const RunPlan& plan, const std::vector<std::int32_t>& ranks) {
  std::vector<bool> wanted;
  if (!ranks.empty()) {
    wanted.assign(plan.gpus.size(), false);
    for (std::int32_t r : ranks) {
      if (r < 0 || static_cast<std::size_t>(r) >= plan.gpus.size())
        throw ConfigError("", 0, "ranks", "rank " + std::to_string(r) + " is outside the plan's " + std::to_string(plan.gpus.size()));
      wanted[static_cast<std::size_t>(r)] = true;
    }
  }
  std::string out;
  plan_lines(plan, wanted, [&](const std::string& text) { out += text; });
  return out;
}

void write_refit_plan(const RunPlan& plan, const std::filesystem::path& path) {
  refuse_precision_change(*plan.scenario);
  const std::filesystem::path partial = path.string() + ".partial";
  try {
    {
      std::ofstream out(partial, std::ios::binary | std::ios::trunc);
      if (!out) throw ConfigError(path.string(), 0, "-o", "cannot write the refit plan file");
      plan_lines(plan, {}, [&](const std::string& text) {
        out.write(text.data(), static_cast<std::streamsize>(text.size()));
        if (!out) throw ConfigError(path.string(), 0, "-o", "cannot write the refit plan file (disk full?)");
      });
      out.close();
      if (!out) throw ConfigError(path.string(), 0, "-o", "cannot write the refit plan file (disk full?)");
    }
    std::filesystem::rename(partial, path);
  } catch (const std::bad_alloc&) {
    std::error_code ec;
    std::filesystem::remove(partial, ec);
    throw ConfigError(path.string(), 0, "-o", "out of memory while writing the refit plan; nothing was written");
  } catch (...) {
    std::error_code ec;
    std::filesystem::remove(partial, ec);
    throw;
  }
}

}  // namespace reshard::exec
