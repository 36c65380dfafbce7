#include "reshard/study/plan_summary.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include "reshard/study/compare.hpp"

namespace reshard::study {

using namespace reshard::model;

namespace {

ByteSpread spread(const std::vector<Bytes>& v) {
  ByteSpread s;
  if (v.empty()) return s;
  for (auto b : v) {
    s.max = std::max(s.max, b.as_double());
    s.mean += b.as_double();
  }
  s.mean /= static_cast<double>(v.size());
  return s;
}

// `side`: 1 for the source's GPUs, 2 for the destination's (GpuMemoryUse::budget_side's bits).
SideMemory side_memory(const LoadedScenario& sc, const std::vector<GpuId>& gpus, std::uint8_t side) {
  SideMemory m;
  bool limited = false;
  double worst = -1;
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    const GpuId g = gpus[i];
    const GpuMemoryUse& u = sc.memory[static_cast<std::size_t>(g)];
    m.weights_max = std::max(m.weights_max, u.weights());
    m.budget_min = i == 0 ? u.budget : std::min(m.budget_min, u.budget);
    m.budget_max = std::max(m.budget_max, u.budget);
    m.other_side = m.other_side || (u.budget_side != 0 && (u.budget_side & side) == 0);
    const bool has_limit = u.limit.value > 0;
    const double need = (u.weights() + u.budget).as_double();
    const double score = has_limit ? need / u.limit.as_double() : need;
    if (has_limit < limited) continue;
    if (has_limit > limited || score > worst || (score == worst && g < m.gpu)) {
      limited = has_limit;
      worst = score;
      m.gpu = g;
      m.use = u;
    }
  }
  return m;
}

ClassBytes class_bytes(const LoadedScenario& sc, const TransferSet& ts) {
  ClassBytes cls;
  for (const auto& t : sc.inventory.tensors()) cls.logical[static_cast<std::size_t>(t.cls)] += t.bytes().as_double();
  for (const auto& p : ts.pieces) {
    const auto c = static_cast<std::size_t>(sc.inventory.tensor(p.tensor).cls);
    cls.needed[c] += p.bytes.as_double() * static_cast<double>(sc.destination.rank_set(p.needers).size());
    ++cls.pieces[c];
  }
  return cls;
}

nlohmann::json memory_json(const SideMemory& m) {
  return {{"gpu", m.gpu},
          {"weights_bytes", m.use.weights().value},
          {"budget_bytes", m.use.budget.value},
          {"limit_bytes", m.use.limit.value},
          {"weights_bytes_max", m.weights_max.value}};
}

}  // namespace

PlanSummary summarize_plan(const LoadedScenario& sc, const TransferSet& ts) {
  PlanSummary s;
  s.by_class = class_bytes(sc, ts);
  const GpuTraffic traffic = gpu_traffic(ts, sc.source, sc.destination);
  s.destination_received = spread(traffic.dest_received);
  s.source_sent = spread(traffic.source_sent);
  s.source_memory = side_memory(sc, sc.source.gpus(), 1);
  s.destination_memory = side_memory(sc, sc.destination.gpus(), 2);
  std::set<GpuId> all(sc.source.gpus().begin(), sc.source.gpus().end());
  all.insert(sc.destination.gpus().begin(), sc.destination.gpus().end());
  s.world_size = all.size();
  return s;
}

nlohmann::json plan_report_json(const LoadedScenario& sc, const TransferSet& ts, const LowerBound& lb,
                                const PlanSummary& summary, const std::optional<Schedule>& schedule,
                                const std::string& schedule_file) {
  auto bytes = [](double b) { return static_cast<std::int64_t>(std::llround(b)); };
  auto spread_json = [&](const ByteSpread& st) {
    return nlohmann::json{{"max", bytes(st.max)}, {"mean", bytes(st.mean)}, {"imbalance", st.imbalance()}};
  };
  const ClassBytes& cls = summary.by_class;
  nlohmann::json j;
  j["schema"] = "reshard-plan-1";
  j["scenario"] = sc.scenario.name;
  j["model"] = sc.inventory.config().name;
  j["parameters"] = sc.inventory.parameters();
  j.update(plan_json(ts, lb));
  j["source_gpus"] = sc.source.world_size();
  j["destination_gpus"] = sc.destination.world_size();
  j["colocated"] = sc.scenario.colocated;
  j["shared_gpus"] = shared_gpus(sc.scenario);
  j["conventions"] = {{"source", sc.source.conventions()}, {"destination", sc.destination.conventions()}};
  j["world_size"] = summary.world_size;
  if (sc.inventory.delta().active())  // the bytes below are then the encoded ones (model/delta.hpp)
    j["delta"] = {{"description", sc.inventory.delta().describe()},
                  {"source_pass_bytes", ts.delta.source_bytes.value},
                  {"destination_pass_bytes", ts.delta.destination_bytes.value},
                  {"snapshot_bytes", ts.delta.snapshot_bytes.value}};
  j["memory"] = {{"source", memory_json(summary.source_memory)}, {"destination", memory_json(summary.destination_memory)}};
  nlohmann::json by_class = nlohmann::json::object();
  for (int c = 0; c < kTensorClassCount; ++c)
    if (cls.logical[static_cast<std::size_t>(c)] > 0)
      by_class[to_string(static_cast<TensorClass>(c))] = {{"logical_bytes", bytes(cls.logical[static_cast<std::size_t>(c)])},
                                                           {"bytes_needed", bytes(cls.needed[static_cast<std::size_t>(c)])},
                                                           {"pieces", cls.pieces[static_cast<std::size_t>(c)]}};
  j["by_class"] = by_class;
  if (schedule) {
    j["strategy"] = to_string(schedule->params.strategy);
    j["params"] = describe(schedule->params);
    j["operations"] = schedule->ops.size();
    j["buffers"] = schedule->buffers.size();
    const StagingMemory memory = staging_memory(*schedule);
    j["peak_staging_bytes"] = memory.peak.value;
    j["peak_staging_gpu"] = memory.gpu;
    if (!schedule_file.empty()) j["schedule_file"] = schedule_file;
  }
  j["destination_received_bytes"] = spread_json(summary.destination_received);
  j["source_sent_bytes"] = spread_json(summary.source_sent);
  return j;
}

nlohmann::json membership_json(const model::MembershipChange& c) {
  return {{"lost", c.lost},
          {"lost_source", c.lost_source},
          {"lost_destination", c.lost_destination},
          {"source_bytes_lost", c.source_bytes_lost.value},
          {"unit_ranks", c.unit_ranks},
          {"units_served", c.served},
          {"units_dropped", c.dropped}};
}

}  // namespace reshard::study
