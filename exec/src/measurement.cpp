// Measurements: JSON in and out, and the step-by-step comparison with the cost model.
#include <nlohmann/json.hpp>

#include "reshard/model/json_file.hpp"
#include "reshard/exec/executor.hpp"
#include "reshard/model/cost.hpp"

namespace reshard::exec {

using namespace reshard::model;

namespace {

struct StepSpan {
  double start = -1, end = -1;
  std::int64_t ops = 0, bytes = 0;
};

std::vector<StepSpan> spans(const Measurement& m, const std::vector<std::int32_t>& step, std::int32_t count) {
  std::vector<StepSpan> out(static_cast<std::size_t>(count));
  for (std::size_t i = 0; i < m.schedule.ops.size(); ++i) {
    auto& sp = out[static_cast<std::size_t>(step[i])];
    const OpTiming& t = m.ops[i];
    sp.ops += 1;
    sp.bytes += m.schedule.ops[i].bytes.value;
    if (t.start_s >= 0) sp.start = sp.start < 0 ? t.start_s : std::min(sp.start, t.start_s);
    if (t.end_s >= 0) sp.end = std::max(sp.end, t.end_s);
  }
  return out;
}

}  // namespace

nlohmann::json to_json(const Measurement& m, const RunPlan& plan) {
  const Topology& topo = plan.scenario->topology;
  nlohmann::json j;
  j["format"] = "reshard-measurement-1";
  j["scenario"] = m.scenario_path;
  if (!m.scenario_sets.empty()) j["set"] = m.scenario_sets;
  j["backend"] = m.backend;
  j["profile"] = m.profile;
  j["ranks"] = m.ranks;
  j["gpus"] = plan.gpus.size();
  j["params"] = to_json(m.schedule)["params"];
  j["verified"] = m.verified;
  j["bytes_verified"] = m.bytes_verified;
  j["elapsed_s"] = m.elapsed_s;
  auto& ops = j["ops"] = nlohmann::json::array();
  for (std::size_t i = 0; i < m.schedule.ops.size(); ++i) {
    const Op& o = m.schedule.ops[i];
    const OpTiming& t = m.ops[i];
    // A chain op's route is the worst link kind over its hops.
    LinkKind kind = LinkKind::NVLink;
    if (o.chain >= 0) {
      for (const ChainHop& h : m.schedule.chains[static_cast<std::size_t>(o.chain)].hops)
        kind = std::max(kind, topo.route(h.from, h.to).kind);
    } else {
      kind = topo.route(o.src, o.dst).kind;
    }
    nlohmann::json op = {{"id", o.id}, {"src", o.src}, {"dst", o.dst}, {"bytes", o.bytes.value},
                         {"route", to_string(kind)}, {"phase", to_string(o.phase)},
                         {"step", plan.step_of[i]}, {"start_s", t.start_s}, {"end_s", t.end_s},
                         {"seconds", t.end_s >= 0 && t.start_s >= 0 ? t.end_s - t.start_s : -1.0}};
    if (o.chain >= 0) {
      const Chain& c = m.schedule.chains[static_cast<std::size_t>(o.chain)];
      op["chain"] = o.chain;
      op["hops"] = c.hops.size();
      op["chunk_bytes"] = c.chunk.value;
    }
    ops.push_back(std::move(op));
  }
  auto& steps = j["steps"] = nlohmann::json::array();
  const auto sp = spans(m, plan.step_of, plan.steps);
  for (std::size_t k = 0; k < sp.size(); ++k)
    steps.push_back({{"step", k}, {"ops", sp[k].ops}, {"bytes", sp[k].bytes}, {"start_s", sp[k].start},
                     {"end_s", sp[k].end}, {"seconds", sp[k].end >= sp[k].start ? sp[k].end - sp[k].start : 0.0}});
  j["schedule"] = to_json(m.schedule);
  return j;
}

Measurement load_measurement(const std::filesystem::path& path) {
  const nlohmann::json j = model::read_json_file(path, "measurement file");
  const char* key = "format";
  try {
    if (j.at(key) != "reshard-measurement-1") throw ConfigError(path.string(), 0, key, "not a reshard measurement");
    Measurement m;
    key = "scenario";
    m.scenario_path = j.at(key).get<std::string>();
    key = "set";
    if (j.contains(key)) m.scenario_sets = j.at(key).get<std::vector<std::string>>();
    key = "backend";
    m.backend = j.at(key).get<std::string>();
    key = "profile";
    m.profile = j.at(key).get<std::string>();
    key = "ranks";
    m.ranks = j.at(key).get<std::int32_t>();
    key = "verified";
    m.verified = j.at(key).get<bool>();
    key = "bytes_verified";
    m.bytes_verified = j.at(key).get<std::int64_t>();
    key = "elapsed_s";
    m.elapsed_s = j.at(key).get<double>();
    key = "schedule";
    m.schedule = schedule_from_json(j.at(key));
    key = "ops";
    m.ops.assign(m.schedule.ops.size(), OpTiming{});
    for (const auto& o : j.at(key)) {
      const auto id = o.at("id").get<std::int64_t>();
      if (id < 0 || id >= static_cast<std::int64_t>(m.ops.size()))
        throw ConfigError(path.string(), 0, "ops", "operation " + std::to_string(id) + " is not in the schedule");
      m.ops[static_cast<std::size_t>(id)] = {o.at("start_s").get<double>(), o.at("end_s").get<double>()};
    }
    return m;
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(path.string(), 0, key, std::string("missing or malformed: ") + e.what());
  } catch (const ScheduleError& e) {
    throw ConfigError(path.string(), 0, "schedule", e.what());
  }
}

std::vector<StepComparison> compare_with_prediction(const Measurement& m) {
  std::vector<Override> overrides;
  for (const auto& text : m.scenario_sets) overrides.push_back(parse_override(text));
  const LoadedScenario sc = load_scenario(std::filesystem::path(m.scenario_path), overrides);
  const TransferSet ts = plan(sc.inventory, sc.source, sc.destination);
  if (m.schedule.piece_count != static_cast<std::int32_t>(ts.pieces.size()))
    throw ScheduleError("the measured schedule has " + std::to_string(m.schedule.piece_count) + " pieces, scenario '" +
                        m.scenario_path + "' plans " + std::to_string(ts.pieces.size()));
  const CostParams cost = CostParams::profile_named(m.profile);
  std::int32_t count = 0;
  const auto step = op_steps(m.schedule, count);
  const auto sp = spans(m, step, count);
  std::vector<StepComparison> out;
  // Each step alone: its operations without dependencies (they all wait only for earlier steps),
  // with every chain (indices kept): ops of one chain in the step still run in order.
  for (std::int32_t k = 0; k < count; ++k) {
    Schedule sub;
    sub.scenario = m.schedule.scenario;
    sub.params = m.schedule.params;
    sub.piece_count = m.schedule.piece_count;
    sub.buffers = m.schedule.buffers;
    sub.chains = m.schedule.chains;
    for (std::size_t i = 0; i < m.schedule.ops.size(); ++i) {
      if (step[i] != k) continue;
      Op o = m.schedule.ops[i];
      o.id = static_cast<std::int64_t>(sub.ops.size());
      o.after.clear();
      sub.ops.push_back(std::move(o));
    }
    const auto& s = sp[static_cast<std::size_t>(k)];
    out.push_back({k, s.ops, s.bytes, estimate(sub, ts, sc.inventory, sc.topology, cost).time.value,
                   s.end >= s.start ? s.end - s.start : 0.0});
  }
  std::int64_t bytes = 0;
  for (const auto& o : m.schedule.ops) bytes += o.bytes.value;
  out.push_back({-1, static_cast<std::int64_t>(m.schedule.ops.size()), bytes,
                 estimate(m.schedule, ts, sc.inventory, sc.topology, cost).time.value, m.elapsed_s});
  return out;
}

}  // namespace reshard::exec
